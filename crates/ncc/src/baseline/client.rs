//! A baseline client: the coordinator of its own transactions (the paper co-locates every
//! baseline's coordinator with its client), driven by the application exactly as NCC's
//! [`crate::Client`] is: `begin`, `ShotDone` → `next_shot`, `Committed` or `Restarted`.
//!
//! An abort starts the transaction again from its first shot after a short back-off that
//! grows with the attempts (without it, dOCC and no-wait locking can abort each other in
//! lock-step for a long time). d2PL-wound-wait keeps the first attempt's timestamp as the
//! transaction's priority across attempts, so an old transaction eventually wins every
//! conflict (its freedom from starvation).

use std::collections::{BTreeMap, BTreeSet};

use crate::decisions::Decisions;

use super::{BMsg, Flavor, Version};
use crate::client::{own_write, ClientEvent, ClientStats, Outcome, Placement};
use crate::protocol::TxnClient;
use crate::types::{ClientId, Finished, Key, Op, ServerId, Ts, TxnId, Value};

#[derive(Clone, Debug, PartialEq, Eq)]
enum Phase {
    /// The current shot is out; the servers that have not answered.
    Executing {
        waiting: BTreeSet<ServerId>,
    },
    AwaitingShot,
    /// Prepare is out; the servers that have not voted.
    Preparing {
        waiting: BTreeSet<ServerId>,
    },
}

#[derive(Clone, Debug)]
struct Attempt {
    txn: TxnId,
    ts: Ts,
    first_shot: Vec<Op>,
    first_is_last: bool,
    /// Every request so far, shots in order, and each read's value and version once in.
    ops: Vec<Op>,
    reads: Vec<Option<(Value, Version)>>,
    shot_start: usize,
    shots: u32,
    last_shot: bool,
    /// Servers that hold anything of this attempt (they get the decision).
    contacted: BTreeSet<ServerId>,
    phase: Phase,
    /// The messages of the current round, sent again to the servers in `phase`'s waiting
    /// set after `resend_after`.
    round: BTreeMap<ServerId, BMsg>,
    last_sent: u64,
    attempts: u32,
}

/// The version a read-after-write records: its own write, which no server validates.
const OWN_WRITE: Version = Version::MAX;

/// One server's part of a prepare: reads to validate (with the versions they returned),
/// writes, and reads to run now (TAPIR-CC's merged last shot).
type PrepareParts = (Vec<(Key, Version)>, Vec<(Key, Value)>, Vec<Key>);

/// A transaction waiting out its back-off before its next attempt.
#[derive(Clone, Debug)]
struct Restart {
    at: u64,
    first_shot: Vec<Op>,
    first_is_last: bool,
    attempts: u32,
}

/// One baseline client (module docs).
#[derive(Clone, Debug)]
pub struct BaselineClient {
    id: ClientId,
    servers: u32,
    placement: Placement,
    flavor: Flavor,
    last_clk: u64,
    /// This incarnation's first sequence number ([`Finished::from`]).
    first_seq: u64,
    next_seq: u64,
    /// d2PL-wound-wait: the running transaction's priority, its first attempt's timestamp.
    priority: Option<Ts>,
    /// TAPIR-CC: a timestamp the last refusal said to go above.
    retry_above: Option<Ts>,
    current: Option<Attempt>,
    restart: Option<Restart>,
    decides: Decisions,
    pub resend_after: u64,
    /// The first back-off, doubled per attempt up to 64 times this.
    pub backoff: u64,
    out: Vec<(ServerId, BMsg)>,
    events: Vec<ClientEvent>,
    pub stats: ClientStats,
}

impl BaselineClient {
    /// Places keys by `placement` (by [`Placement::Hash`] otherwise).
    pub fn with_placement(mut self, placement: Placement) -> Self {
        self.placement = placement;
        self
    }

    /// Numbers its transactions from `seq` on (1 by default): a process that takes over a
    /// client id once used by another starts above every number that one used, since the
    /// servers ignore what they have already finished for the id. Its requests then say
    /// it finished numbers from `seq` on only ([`Finished`]), so a transaction the
    /// previous holder left undecided is still decided by its backup coordinator.
    pub fn with_first_seq(mut self, seq: u64) -> Self {
        self.first_seq = seq.max(1);
        self.next_seq = self.first_seq;
        self
    }

    pub fn new(id: ClientId, servers: u32, flavor: Flavor) -> BaselineClient {
        BaselineClient {
            id,
            servers,
            placement: Placement::Hash,
            flavor,
            last_clk: 0,
            first_seq: 1,
            next_seq: 1,
            priority: None,
            retry_above: None,
            current: None,
            restart: None,
            decides: Decisions::default(),
            resend_after: 10_000,
            backoff: 100,
            out: Vec::new(),
            events: Vec::new(),
            stats: ClientStats::default(),
        }
    }

    fn begin_attempt(&mut self, now: u64, ops: Vec<Op>, last: bool, attempts: u32) {
        let mut clk = now.max(self.last_clk + 1);
        if let Some(above) = self.retry_above.take() {
            clk = clk.max(above.clk + 1);
        }
        self.last_clk = clk;
        let ts = Ts { clk, cid: self.id };
        if attempts == 1 {
            self.priority = Some(ts);
        }
        let txn = TxnId {
            client: self.id,
            seq: self.next_seq,
        };
        self.next_seq += 1;
        self.current = Some(Attempt {
            txn,
            ts: match self.flavor {
                Flavor::D2plWoundWait => self.priority.expect("set at the first attempt"),
                _ => ts,
            },
            first_shot: ops.clone(),
            first_is_last: last,
            ops: Vec::new(),
            reads: Vec::new(),
            shot_start: 0,
            shots: 1,
            last_shot: last,
            contacted: BTreeSet::new(),
            phase: Phase::AwaitingShot,
            round: BTreeMap::new(),
            last_sent: now,
            attempts,
        });
        self.send_shot(now, ops, last);
    }

    /// This incarnation's finished transactions: decided and acknowledged everywhere (as
    /// NCC's client's).
    fn done(&self) -> Finished {
        let current = self.current.as_ref().map_or(self.next_seq, |a| a.txn.seq);
        let below = self
            .decides
            .oldest()
            .map_or(current, |t| t.seq.min(current));
        debug_assert!(below >= self.first_seq);
        Finished {
            from: self.first_seq,
            below,
        }
    }

    fn send_shot(&mut self, now: u64, ops: Vec<Op>, last: bool) {
        let done = self.done();
        let flavor = self.flavor;
        let (servers, placement) = (self.servers, self.placement);
        let a = self.current.as_mut().expect("an attempt");
        a.shot_start = a.ops.len();
        a.last_shot = last;
        let mut shot: BTreeMap<ServerId, Vec<Op>> = BTreeMap::new();
        for op in ops {
            // Read-after-write: its own write, answered here (never validated or locked).
            if let Some(v) = own_write(&a.ops, &op) {
                self.stats.read_after_write += 1;
                a.ops.push(op);
                a.reads.push(Some((v, OWN_WRITE)));
                continue;
            }
            a.reads.push(None);
            // dOCC and TAPIR-CC keep writes here until prepare (a read-write's read goes
            // now, its write then).
            let sent = match &op {
                _ if flavor.locks_at_execute() => Some(op.clone()),
                Op::Read(_) | Op::ReadWrite(..) => Some(Op::Read(op.key().clone())),
                Op::Write(..) => None,
            };
            if let Some(sent) = sent {
                shot.entry(placement.server_of(op.key(), servers))
                    .or_default()
                    .push(sent);
            }
            a.ops.push(op);
        }
        if flavor == Flavor::TapirCc && last {
            // The last shot's reads run with the validation (execute and prepare merged).
            return self.prepare(now);
        }
        a.round.clear();
        for (s, ops) in shot {
            a.contacted.insert(s);
            let msg = BMsg::Execute {
                txn: a.txn,
                ts: a.ts,
                shot: a.shots,
                ops,
                done,
            };
            a.round.insert(s, msg.clone());
            self.out.push((s, msg));
        }
        let waiting: BTreeSet<ServerId> = a.round.keys().copied().collect();
        a.last_sent = now;
        if waiting.is_empty() {
            a.phase = Phase::Executing { waiting };
            return self.shot_answered(now);
        }
        a.phase = Phase::Executing { waiting };
    }

    fn shot_answered(&mut self, now: u64) {
        let a = self.current.as_mut().expect("an attempt");
        if !a.last_shot {
            a.phase = Phase::AwaitingShot;
            let reads = a.ops[a.shot_start..]
                .iter()
                .zip(&a.reads[a.shot_start..])
                .filter(|(op, _)| op.reads())
                .map(|(op, r)| (op.key().clone(), r.clone().expect("answered").0))
                .collect();
            self.events.push(ClientEvent::ShotDone { reads });
            return;
        }
        match self.flavor {
            // Every lock is held and every read done: the outcome is certain.
            Flavor::D2plNoWait => self.commit(now),
            Flavor::Docc | Flavor::D2plWoundWait | Flavor::TapirCc => self.prepare(now),
        }
    }

    /// Sends prepare to every server with a read or a write of the attempt.
    fn prepare(&mut self, now: u64) {
        let done = self.done();
        let flavor = self.flavor;
        let (servers, placement) = (self.servers, self.placement);
        let a = self.current.as_mut().expect("an attempt");
        let mut per: BTreeMap<ServerId, PrepareParts> = BTreeMap::new();
        for (i, op) in a.ops.iter().enumerate() {
            let s = placement.server_of(op.key(), servers);
            let k = op.key().clone();
            if let Some(v) = op.written() {
                per.entry(s).or_default().1.push((k.clone(), v.clone()));
            }
            if !op.reads() || a.reads[i].as_ref().is_some_and(|r| r.1 == OWN_WRITE) {
                continue;
            }
            match &a.reads[i] {
                Some((_, ver)) => per.entry(s).or_default().0.push((k, *ver)),
                // TAPIR-CC's merged last shot.
                None => per.entry(s).or_default().2.push(k),
            }
        }
        // d2PL-wound-wait asks only the servers that hold its locks.
        if flavor == Flavor::D2plWoundWait {
            per.retain(|s, _| a.contacted.contains(s));
        }
        a.round.clear();
        for (s, (reads, writes, execute)) in per {
            a.contacted.insert(s);
            let msg = BMsg::Prepare {
                txn: a.txn,
                ts: a.ts,
                reads,
                writes,
                execute,
                done,
            };
            a.round.insert(s, msg.clone());
            self.out.push((s, msg));
        }
        let waiting: BTreeSet<ServerId> = a.round.keys().copied().collect();
        a.last_sent = now;
        let done = waiting.is_empty();
        a.phase = Phase::Preparing { waiting };
        if done {
            self.commit(now);
        }
    }

    fn commit(&mut self, now: u64) {
        let a = self.current.take().expect("an attempt");
        self.send_decision(now, a.txn, true, a.contacted.clone());
        self.stats.committed += 1;
        if a.attempts == 1 {
            self.stats.committed_first_try += 1;
        }
        if a.shots > 1 {
            self.stats.multi_shot += 1;
        }
        let reads = a
            .ops
            .iter()
            .zip(&a.reads)
            .filter(|(op, _)| op.reads())
            .map(|(op, r)| (op.key().clone(), r.clone().expect("every read answered").0))
            .collect();
        self.events.push(ClientEvent::Committed(Outcome {
            ops: a.ops,
            reads,
            commit_ts: a.ts,
            attempts: a.attempts,
            txn: a.txn,
            shots: a.shots,
        }));
    }

    fn abort_and_retry(&mut self, now: u64) {
        let a = self.current.take().expect("an attempt");
        self.stats.aborts += 1;
        self.send_decision(now, a.txn, false, a.contacted);
        self.events.push(ClientEvent::Restarted);
        // A back-off that doubles per attempt, spread by client and attempt so that two
        // clients that collided do not collide again in step.
        let spread = 1 + (u64::from(self.id) * 7_919 + u64::from(a.attempts) * 104_729) % 100;
        let base = self.backoff << a.attempts.min(6);
        self.restart = Some(Restart {
            at: now + base * spread / 50,
            first_shot: a.first_shot,
            first_is_last: a.first_is_last,
            attempts: a.attempts + 1,
        });
    }

    fn send_decision(&mut self, now: u64, txn: TxnId, commit: bool, to: BTreeSet<ServerId>) {
        for (s, txn, commit) in self.decides.send(now, txn, commit, to) {
            self.out.push((s, BMsg::Decide { txn, commit }));
        }
    }
}

impl TxnClient for BaselineClient {
    type Msg = BMsg;

    fn begin(&mut self, now: u64, ops: Vec<Op>, last: bool) {
        assert!(
            self.current.is_none() && self.restart.is_none(),
            "one transaction at a time"
        );
        self.begin_attempt(now, ops, last, 1);
    }

    fn next_shot(&mut self, now: u64, ops: Vec<Op>, last: bool) {
        let a = self.current.as_mut().expect("a transaction is under way");
        assert_eq!(a.phase, Phase::AwaitingShot, "the current shot is not done");
        a.shots += 1;
        self.send_shot(now, ops, last);
    }

    fn on_message(&mut self, now: u64, from: ServerId, msg: BMsg) {
        match msg {
            BMsg::ExecReply {
                txn,
                shot,
                ok,
                reads,
            } => {
                let servers = (self.servers, self.placement);
                let Some(a) = self.current.as_mut().filter(|a| a.txn == txn) else {
                    return;
                };
                let Phase::Executing { waiting } = &mut a.phase else {
                    return;
                };
                if shot != a.shots || !waiting.contains(&from) {
                    return; // a duplicate, or an earlier shot's
                }
                if !ok {
                    return self.abort_and_retry(now);
                }
                let shot = a.shot_start..a.ops.len();
                if !take_answers(&a.ops, &mut a.reads, shot, from, servers, reads) {
                    return;
                }
                waiting.remove(&from);
                if waiting.is_empty() {
                    self.shot_answered(now);
                }
            }
            BMsg::PrepareReply {
                txn,
                ok,
                reads,
                retry_above,
            } => {
                let servers = (self.servers, self.placement);
                let Some(a) = self.current.as_mut().filter(|a| a.txn == txn) else {
                    return;
                };
                let Phase::Preparing { waiting } = &mut a.phase else {
                    return;
                };
                if !waiting.contains(&from) {
                    return;
                }
                if !ok {
                    self.retry_above = retry_above;
                    return self.abort_and_retry(now);
                }
                let all = 0..a.ops.len();
                if !take_answers(&a.ops, &mut a.reads, all, from, servers, reads) {
                    return;
                }
                waiting.remove(&from);
                if waiting.is_empty() {
                    self.commit(now);
                }
            }
            BMsg::DecideAck { txn } => self.decides.acked(txn, from),
            BMsg::Execute { .. } | BMsg::Prepare { .. } | BMsg::Decide { .. } => {}
        }
    }

    fn tick(&mut self, now: u64) {
        if self.restart.as_ref().is_some_and(|r| now >= r.at) {
            let r = self.restart.take().expect("checked");
            self.begin_attempt(now, r.first_shot, r.first_is_last, r.attempts);
        }
        let due = |last: u64| now >= last + self.resend_after;
        let mut resend = Vec::new();
        if let Some(a) = self.current.as_mut().filter(|a| due(a.last_sent)) {
            if let Phase::Executing { waiting } | Phase::Preparing { waiting } = &a.phase {
                for s in waiting {
                    resend.push((*s, a.round[s].clone()));
                }
            }
            a.last_sent = now;
        }
        for (s, txn, commit) in self.decides.due(now, self.resend_after) {
            resend.push((s, BMsg::Decide { txn, commit }));
        }
        self.stats.resent += resend.len() as u64;
        self.out.extend(resend);
    }

    fn drain(&mut self) -> Vec<(ServerId, BMsg)> {
        std::mem::take(&mut self.out)
    }

    fn events(&mut self) -> Vec<ClientEvent> {
        std::mem::take(&mut self.events)
    }

    fn idle(&self) -> bool {
        self.current.is_none() && self.restart.is_none() && self.decides.is_empty()
    }

    fn busy(&self) -> bool {
        self.current.is_some() || self.restart.is_some()
    }

    fn tick_every(&self) -> u64 {
        if self.restart.is_some() {
            self.backoff.min(self.resend_after / 2)
        } else {
            self.resend_after / 2
        }
    }

    fn stats(&self) -> ClientStats {
        self.stats
    }

    fn restarted(&self, gap: u64) -> Self {
        let first = self.next_seq + gap;
        let mut c = BaselineClient::new(self.id, self.servers, self.flavor)
            .with_first_seq(first)
            .with_placement(self.placement);
        c.resend_after = self.resend_after;
        c.backoff = self.backoff;
        c
    }
}

/// Stores server `from`'s answers to the unanswered reads of `ops[range]` that it holds,
/// which it sends in the requests' order. A reply that does not answer exactly those (a
/// server confused about who sent the request) comes from the network: nothing is stored,
/// it is never trusted, and the caller drops it (false).
fn take_answers(
    ops: &[Op],
    slots: &mut [Option<(Value, Version)>],
    range: std::ops::Range<usize>,
    from: ServerId,
    (servers, placement): (u32, Placement),
    answers: Vec<(Key, Value, Version)>,
) -> bool {
    let expected: Vec<usize> = range
        .filter(|&i| {
            ops[i].reads()
                && slots[i].is_none()
                && placement.server_of(ops[i].key(), servers) == from
        })
        .collect();
    if answers.len() != expected.len()
        || expected
            .iter()
            .zip(&answers)
            .any(|(&i, (k, _, _))| k != ops[i].key())
    {
        return false;
    }
    for (&i, (_, v, version)) in expected.iter().zip(answers) {
        slots[i] = Some((v, version));
    }
    true
}
