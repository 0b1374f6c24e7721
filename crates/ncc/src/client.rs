//! An NCC client, the coordinator of its own transactions (Alg 5.1; the paper co-locates
//! the coordinator with the client, §2.1): one transaction at a time, in one or more
//! *shots* (a shot's requests may depend on what earlier shots read), retried with a new
//! timestamp until it commits.
//!
//! The application drives it: [`Client::begin`] with the first shot; on
//! [`ClientEvent::ShotDone`] it computes the next shot from the values read and calls
//! [`Client::next_shot`]; the last shot leads to the decision. An abort restarts the
//! transaction from its first shot (kept by the client, since it depends on nothing read)
//! and says so with [`ClientEvent::Restarted`], so the application forgets what the
//! aborted attempt read.

use std::collections::{BTreeMap, BTreeSet};

use crate::decisions::Decisions;

use crate::types::{
    ClientId, ExecResult, Finished, Key, Msg, Op, OpReply, ServerId, Ts, TxnId, Value,
};

/// What the client tells the application.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ClientEvent {
    /// Every request of the current (not last) shot is answered: the values read, in the
    /// shot's order. Send the next shot.
    ShotDone {
        reads: Vec<(Key, Value)>,
    },
    /// The attempt aborted and the transaction began again from its first shot.
    Restarted,
    Committed(Outcome),
}

/// A committed transaction, as its application sees it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Outcome {
    /// Every request of the committed attempt, shots in order.
    pub ops: Vec<Op>,
    /// The value each read returned, in order.
    pub reads: Vec<(Key, Value)>,
    /// Where NCC serialized it: the largest `t_w` of its pairs (Lemma 1).
    pub commit_ts: Ts,
    /// Attempts it took (1: committed at the first).
    pub attempts: u32,
    /// The attempt that committed.
    pub txn: TxnId,
    pub shots: u32,
}

impl Outcome {
    /// The values it wrote, as (key, value), in order.
    pub fn writes(&self) -> Vec<(Key, Value)> {
        self.ops
            .iter()
            .filter_map(|op| match op {
                Op::Write(k, v) | Op::ReadWrite(k, v) => Some((k.clone(), v.clone())),
                Op::Read(_) => None,
            })
            .collect()
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Phase {
    /// The current shot's requests are out.
    Executing,
    /// The current shot is answered; the application owes the next one.
    AwaitingShot,
    /// Smart retry to `to`: the servers that have not answered yet.
    Retrying { to: Ts, waiting: BTreeSet<ServerId> },
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Attempt {
    txn: TxnId,
    ts: Ts,
    first_shot: Vec<Op>,
    first_is_last: bool,
    /// Every request sent so far, shots in order, and each one's reply once in.
    ops: Vec<Op>,
    replies: Vec<Option<OpReply>>,
    /// Where the current shot's requests begin in `ops`.
    shot_start: usize,
    shots: u32,
    last_shot: bool,
    read_only: bool,
    /// Per server: indices into `ops` of its requests, in the order sent (the server
    /// numbers its answers the same way).
    by_server: BTreeMap<ServerId, Vec<usize>>,
    /// Per server: this client's clock when the current shot went to it (for `t_Δ`).
    sent_at: BTreeMap<ServerId, u64>,
    phase: Phase,
    attempts: u32,
    /// The current shot's messages, and when they (or the smart retry) last went out: sent
    /// again to the servers that have not answered after [`Client::resend_after`].
    shot_msgs: Vec<(ServerId, Msg)>,
    /// The backup coordinator (App. D): the server of the first request (chosen when the
    /// first request goes out, so it is always a cohort).
    coord: Option<ServerId>,
    /// Cohorts that got a last shot without requests and have not acknowledged it.
    acks_waiting: BTreeSet<ServerId>,
    last_sent: u64,
}

/// Counts for the simulator's report.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct ClientStats {
    pub committed: u64,
    pub committed_first_try: u64,
    pub multi_shot: u64,
    pub smart_retries: u64,
    pub smart_retries_ok: u64,
    pub early_aborts: u64,
    pub ro_aborts: u64,
    pub safeguard_aborts: u64,
    /// Baselines: attempts aborted by a refused lock, a failed validation or a wound.
    pub aborts: u64,
    /// Reads of the transaction's own earlier write, answered by the client.
    pub read_after_write: u64,
    pub resent: u64,
}

impl ClientStats {
    /// Adds `o`'s counts to these.
    pub fn add(&mut self, o: &ClientStats) {
        self.committed += o.committed;
        self.committed_first_try += o.committed_first_try;
        self.multi_shot += o.multi_shot;
        self.smart_retries += o.smart_retries;
        self.smart_retries_ok += o.smart_retries_ok;
        self.early_aborts += o.early_aborts;
        self.ro_aborts += o.ro_aborts;
        self.safeguard_aborts += o.safeguard_aborts;
        self.aborts += o.aborts;
        self.read_after_write += o.read_after_write;
        self.resent += o.resent;
    }
}

/// One client (module docs). `Clone` and `Hash` for the model checker.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Client {
    id: ClientId,
    servers: u32,
    placement: Placement,
    /// The last timestamp's clock: each attempt's is higher, so `(clk, cid)` is unique.
    last_clk: u64,
    /// Per server, `t_s - t_c` as last measured: how far ahead the server's clock and queue
    /// are of this client's clock (§5.3).
    delta: Vec<i64>,
    /// Per server, the version number through which every version was decided there, as
    /// last heard (`t_ro`, §5.5; `Server::execute_read_only` says why not a `t_w`).
    t_ro: Vec<u64>,
    /// This incarnation's first sequence number ([`Finished::from`]).
    first_seq: u64,
    next_seq: u64,
    current: Option<Attempt>,
    decides: Decisions,
    /// How long (client clock) an unanswered message waits before it is sent again.
    pub resend_after: u64,
    /// Run transactions without writes by §5.5's read-only protocol (one round, no commit
    /// message). Off: NCC-RW, where they run as read-write transactions.
    pub read_only_protocol: bool,
    out: Vec<(ServerId, Msg)>,
    events: Vec<ClientEvent>,
    pub stats: ClientStats,
}

/// Attempts of a transaction without writes by the read-only protocol before it runs as a
/// read-write one.
const READ_ONLY_ATTEMPTS_MAX: u32 = 3;

/// The server that holds `key` among `servers`. A key made from a number below 2^56 (8
/// bytes, the first 0) goes to that number modulo `servers`: the simulator's, the
/// benchmarks' and the tests' keys, so that TPC-C is partitioned by warehouse and a test's
/// layout is plain. Any other key goes by its FNV-1a hash, which every process computes
/// alike: an application's keys, text ones of 8 bytes included, spread evenly.
pub fn shard_of(key: &Key, servers: u32) -> ServerId {
    let n = match key.as_bytes() {
        [0, ..] if key.len() == 8 => key.to_u64().expect("8 bytes"),
        bytes => {
            let fnv = |h: u64, &b: &u8| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
            bytes.iter().fold(0xcbf2_9ce4_8422_2325, fnv)
        }
    };
    (n % u64::from(servers)) as ServerId
}

/// Which server holds a key, as every client of a cluster must agree.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Placement {
    /// [`shard_of`]: keys made from numbers by modulo, others by hash.
    #[default]
    Hash,
    /// Redis Cluster's hash slots (CRC16 of the key, or of its `{tag}`, mod 16,384:
    /// `verso_cluster::key_slot`), split into equal ranges over the servers in order, as
    /// `verso cluster local` splits them: keys that share a tag share a server.
    Slots,
}

impl Placement {
    /// The server among `servers` that holds `key`.
    pub fn server_of(self, key: &Key, servers: u32) -> ServerId {
        match self {
            Placement::Hash => shard_of(key, servers),
            Placement::Slots => {
                let slot = u32::from(verso_cluster::key_slot(key.as_bytes()));
                let server = slot * servers / verso_cluster::SLOTS as u32;
                debug_assert!(server < servers);
                server as ServerId
            }
        }
    }
}

impl Client {
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

    pub fn new(id: ClientId, servers: u32) -> Client {
        Client {
            id,
            servers,
            placement: Placement::Hash,
            last_clk: 0,
            delta: vec![0; servers as usize],
            t_ro: vec![0; servers as usize],
            first_seq: 1,
            next_seq: 1,
            current: None,
            decides: Decisions::default(),
            resend_after: 10_000,
            read_only_protocol: true,
            out: Vec::new(),
            events: Vec::new(),
            stats: ClientStats::default(),
        }
    }

    pub fn id(&self) -> ClientId {
        self.id
    }

    /// A new incarnation of this client ([`TxnClient::restarted`](crate::TxnClient)):
    /// its settings, numbering from `gap` above this one's next number. Its timestamps'
    /// clocks start again from the caller's clock, as a new process's would.
    pub fn restarted(&self, gap: u64) -> Client {
        let mut c = Client::new(self.id, self.servers)
            .with_first_seq(self.next_seq + gap)
            .with_placement(self.placement);
        c.resend_after = self.resend_after;
        c.read_only_protocol = self.read_only_protocol;
        c
    }

    /// Whether a transaction is under way.
    pub fn busy(&self) -> bool {
        self.current.is_some()
    }

    /// Whether it has nothing left to do: no transaction, no unacknowledged decision.
    pub fn idle(&self) -> bool {
        self.current.is_none() && self.decides.is_empty()
    }

    /// Sends again what has waited too long for an answer: the current shot's requests to
    /// the servers that have not answered all of them, the smart retry to those that have
    /// not answered it, and every unacknowledged decision. Every message is idempotent at
    /// the server (a duplicate gets the first answer again).
    pub fn tick(&mut self, now: u64) {
        let due = |last: u64| now >= last + self.resend_after;
        let mut resend = Vec::new();
        if let Some(a) = self.current.as_mut().filter(|a| due(a.last_sent)) {
            match &a.phase {
                Phase::Executing => {
                    for (s, m) in &a.shot_msgs {
                        let missing = a.acks_waiting.contains(s)
                            || a.by_server[s]
                                .iter()
                                .any(|&i| i >= a.shot_start && a.replies[i].is_none());
                        if missing {
                            resend.push((*s, m.clone()));
                        }
                    }
                }
                Phase::Retrying { to, waiting } => {
                    for &s in waiting {
                        resend.push((
                            s,
                            Msg::SmartRetry {
                                txn: a.txn,
                                to: *to,
                            },
                        ));
                    }
                }
                Phase::AwaitingShot => {}
            }
            a.last_sent = now;
        }
        for (s, txn, commit) in self.decides.due(now, self.resend_after) {
            resend.push((s, Msg::Decide { txn, commit }));
        }
        self.stats.resent += resend.len() as u64;
        self.out.extend(resend);
    }

    /// Begins a transaction with its first shot (`last`: it is also the last). A one-shot
    /// transaction without writes runs as read-only (one round, no commit message, §5.5).
    /// A key appears at most once in a transaction, over all its shots, except that a later
    /// shot may write a key an earlier one read (a read-modify-write, §5.1).
    pub fn begin(&mut self, now: u64, ops: Vec<Op>, last: bool) {
        assert!(self.current.is_none(), "one transaction at a time");
        self.begin_attempt(now, ops, last, 1);
    }

    /// Sends the next shot, after [`ClientEvent::ShotDone`].
    pub fn next_shot(&mut self, now: u64, ops: Vec<Op>, last: bool) {
        let a = self.current.as_mut().expect("a transaction is under way");
        assert_eq!(a.phase, Phase::AwaitingShot, "the current shot is not done");
        a.shots += 1;
        self.send_shot(now, ops, last);
    }

    /// Messages to send, as (server, message).
    pub fn drain(&mut self) -> Vec<(ServerId, Msg)> {
        std::mem::take(&mut self.out)
    }

    /// What happened since the last call.
    pub fn events(&mut self) -> Vec<ClientEvent> {
        std::mem::take(&mut self.events)
    }

    fn begin_attempt(&mut self, now: u64, ops: Vec<Op>, last: bool, attempts: u32) {
        // Asynchrony-aware: the clock the slowest participant of the first shot will have
        // when the requests arrive, so that they rarely arrive "late" (§5.3; later shots'
        // servers are unknown yet). Strictly increasing per client.
        let lead = ops
            .iter()
            .map(|op| self.delta[self.placement.server_of(op.key(), self.servers) as usize])
            .max()
            .unwrap_or(0);
        let clk = (now as i64 + lead).max(self.last_clk as i64 + 1) as u64;
        self.last_clk = clk;
        let txn = TxnId {
            client: self.id,
            seq: self.next_seq,
        };
        self.next_seq += 1;
        self.current = Some(Attempt {
            txn,
            ts: Ts { clk, cid: self.id },
            first_shot: ops.clone(),
            first_is_last: last,
            ops: Vec::new(),
            replies: Vec::new(),
            shot_start: 0,
            shots: 1,
            last_shot: last,
            // After a few refusals it runs as read-write (a hot key's newest version may stay
            // undecided at every try; queued reads wait instead, and always finish).
            read_only: self.read_only_protocol
                && attempts <= READ_ONLY_ATTEMPTS_MAX
                && last
                && !ops.iter().any(Op::is_write),
            by_server: BTreeMap::new(),
            sent_at: BTreeMap::new(),
            phase: Phase::Executing,
            attempts,
            shot_msgs: Vec::new(),
            coord: None,
            acks_waiting: BTreeSet::new(),
            last_sent: now,
        });
        self.send_shot(now, ops, last);
    }

    /// This incarnation's finished transactions (`Msg::Execute::done`): all it numbered
    /// but the current one and those with a decision still unacknowledged, and what follows.
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
        let a = self.current.as_mut().expect("called with an attempt");
        let mut shot: BTreeMap<ServerId, Vec<Op>> = BTreeMap::new();
        a.shot_start = a.ops.len();
        for op in ops {
            // Read-after-write (§5.1, digest pitfall 9): a read of a key this transaction
            // wrote in an earlier shot is its own write, answered here and never sent. Its
            // pair is left out of the safeguard like a read-modify-write's read.
            if let Some(v) = own_write(&a.ops, &op) {
                self.stats.read_after_write += 1;
                a.ops.push(op);
                a.replies.push(Some(OpReply {
                    value: Some(v),
                    tw: Ts::default(),
                    tr: Ts::default(),
                }));
                continue;
            }
            // Otherwise a key appears once per transaction, except that a later shot may
            // write a key an earlier one read (read-modify-write).
            debug_assert!(
                a.ops
                    .iter()
                    .all(|o| o.key() != op.key() || (!o.is_write() && op.is_write())),
                "each key at most once per transaction, read then written, or written then read"
            );
            let s = self.placement.server_of(op.key(), self.servers);
            a.coord.get_or_insert(s);
            a.by_server.entry(s).or_default().push(a.ops.len());
            a.ops.push(op.clone());
            a.replies.push(None);
            shot.entry(s).or_default().push(op);
        }
        a.last_shot = last;
        a.phase = Phase::Executing;
        // The last shot of a read-write transaction names every cohort, and reaches each
        // (empty where it has no requests there): see `Msg::Execute::cohorts`.
        let cohorts: Option<Vec<ServerId>> =
            (last && !a.read_only).then(|| a.by_server.keys().copied().collect());
        a.acks_waiting.clear();
        if let Some(cohorts) = &cohorts {
            for &s in cohorts {
                if let std::collections::btree_map::Entry::Vacant(e) = shot.entry(s) {
                    e.insert(Vec::new());
                    a.acks_waiting.insert(s);
                }
            }
        }
        if shot.is_empty() {
            // An empty shot has nothing to wait for.
            return self.shot_answered(now);
        }
        a.shot_msgs.clear();
        a.last_sent = now;
        for (s, ops) in shot {
            a.sent_at.insert(s, now);
            let msg = Msg::Execute {
                txn: a.txn,
                ts: a.ts,
                shot: a.shots,
                ops,
                t_ro: a.read_only.then_some(self.t_ro[s as usize]),
                coord: a
                    .coord
                    .expect("a shot with messages has a request, or follows one"),
                cohorts: cohorts.clone(),
                done,
            };
            a.shot_msgs.push((s, msg.clone()));
            self.out.push((s, msg));
        }
    }

    /// Handles a server's message; `now` is this client's clock.
    pub fn on_message(&mut self, now: u64, from: ServerId, msg: Msg) {
        match msg {
            Msg::ExecReply {
                txn,
                results,
                ts_server,
                latest,
            } => {
                let t_ro = &mut self.t_ro[from as usize];
                *t_ro = (*t_ro).max(latest);
                let Some(a) = self.current.as_mut().filter(|a| a.txn == txn) else {
                    return; // an earlier attempt's, or a duplicate
                };
                if a.phase != Phase::Executing {
                    return;
                }
                // Each result's request, among the attempt's, if it still awaits an answer
                // (not a duplicate, not an earlier shot's). A read answered without a value
                // answers some other request (a server confused about who sent it): it
                // comes from the network, so it is dropped, never trusted.
                let fresh: Vec<(usize, ExecResult)> = results
                    .into_iter()
                    .filter_map(|(index, result)| {
                        let &i = a.by_server.get(&from)?.get(index as usize)?;
                        let valueless_read = a.ops[i].reads()
                            && matches!(&result, ExecResult::Done(r) if r.value.is_none());
                        (i >= a.shot_start && a.replies[i].is_none() && !valueless_read)
                            .then_some((i, result))
                    })
                    .collect();
                if fresh.is_empty() {
                    return;
                }
                if let Some(&sent) = a.sent_at.get(&from) {
                    self.delta[from as usize] = ts_server as i64 - sent as i64;
                }
                for (i, result) in fresh {
                    match result {
                        ExecResult::Done(reply) => a.replies[i] = Some(reply),
                        ExecResult::EarlyAbort => {
                            self.stats.early_aborts += 1;
                            return self.abort_and_retry(now);
                        }
                        ExecResult::RoAbort => {
                            self.stats.ro_aborts += 1;
                            return self.abort_and_retry(now);
                        }
                    }
                }
                if a.replies[a.shot_start..].iter().all(Option::is_some)
                    && a.acks_waiting.is_empty()
                {
                    self.shot_answered(now);
                }
            }
            Msg::LastShotAck { txn, ok } => {
                let Some(a) = self.current.as_mut().filter(|a| a.txn == txn) else {
                    return;
                };
                if a.phase != Phase::Executing || !a.acks_waiting.remove(&from) {
                    return;
                }
                if !ok {
                    self.stats.early_aborts += 1;
                    return self.abort_and_retry(now);
                }
                if a.replies[a.shot_start..].iter().all(Option::is_some)
                    && a.acks_waiting.is_empty()
                {
                    self.shot_answered(now);
                }
            }
            Msg::SmartRetryReply { txn, ok } => {
                let Some(a) = self.current.as_mut().filter(|a| a.txn == txn) else {
                    return;
                };
                let Phase::Retrying { to, waiting } = &mut a.phase else {
                    return;
                };
                let to = *to;
                if !ok {
                    self.stats.safeguard_aborts += 1;
                    return self.abort_and_retry(now);
                }
                waiting.remove(&from);
                if waiting.is_empty() {
                    self.stats.smart_retries_ok += 1;
                    self.commit(now, to);
                }
            }
            Msg::DecideAck { txn } => self.decides.acked(txn, from),
            Msg::Execute { .. }
            | Msg::SmartRetry { .. }
            | Msg::Decide { .. }
            | Msg::Resolve { .. }
            | Msg::GetRecord { .. }
            | Msg::Record { .. }
            | Msg::RecoverRetry { .. }
            | Msg::RecoverRetryReply { .. }
            | Msg::Group(_) => {}
        }
    }

    /// Sends `txn`'s decision to `servers`, and again until each acknowledges it.
    fn send_decision(&mut self, now: u64, txn: TxnId, commit: bool, to: BTreeSet<ServerId>) {
        for (s, txn, commit) in self.decides.send(now, txn, commit, to) {
            self.out.push((s, Msg::Decide { txn, commit }));
        }
    }

    /// The current shot is answered: hand its reads to the application, or after the last
    /// shot, decide.
    fn shot_answered(&mut self, now: u64) {
        let a = self.current.as_mut().expect("called with an attempt");
        if !a.last_shot {
            a.phase = Phase::AwaitingShot;
            let reads = reads_of(&a.ops[a.shot_start..], &a.replies[a.shot_start..]);
            self.events.push(ClientEvent::ShotDone { reads });
            return;
        }
        self.safeguard(now);
    }

    /// Every reply of the last shot is in (never earlier: digest pitfall 13): commit if the
    /// pairs overlap, else try to move them to the largest `t_w` (smart retry).
    fn safeguard(&mut self, now: u64) {
        let a = self.current.as_mut().expect("called with an attempt");
        // A read-modify-write's read is left out: only its write's pair counts (§5.1).
        let written: Vec<&Key> = a.ops.iter().filter(|o| o.is_write()).map(Op::key).collect();
        let pairs = a
            .ops
            .iter()
            .zip(&a.replies)
            .filter(|(op, _)| op.is_write() || !written.contains(&op.key()))
            .map(|(_, r)| r.as_ref().expect("all in"));
        let Some(tw_max) = pairs.clone().map(|p| p.tw).max() else {
            // No request at all: nothing to serialize against.
            return self.commit(now, Ts::default());
        };
        let tr_min = pairs.map(|p| p.tr).min().expect("non-empty");
        if tw_max <= tr_min {
            return self.commit(now, tw_max);
        }
        self.stats.smart_retries += 1;
        let waiting: BTreeSet<ServerId> = a.by_server.keys().copied().collect();
        for &s in &waiting {
            self.out.push((
                s,
                Msg::SmartRetry {
                    txn: a.txn,
                    to: tw_max,
                },
            ));
        }
        a.phase = Phase::Retrying {
            to: tw_max,
            waiting,
        };
        a.last_sent = now;
    }

    fn commit(&mut self, now: u64, commit_ts: Ts) {
        let a = self.current.take().expect("called with an attempt");
        if !a.read_only {
            self.send_decision(now, a.txn, true, a.by_server.keys().copied().collect());
        }
        self.stats.committed += 1;
        if a.attempts == 1 {
            self.stats.committed_first_try += 1;
        }
        if a.shots > 1 {
            self.stats.multi_shot += 1;
        }
        self.events.push(ClientEvent::Committed(Outcome {
            reads: reads_of(&a.ops, &a.replies),
            ops: a.ops,
            commit_ts,
            attempts: a.attempts,
            txn: a.txn,
            shots: a.shots,
        }));
    }

    /// Aborts the attempt everywhere (a read-only one has nothing to undo) and starts the
    /// transaction again from its first shot with a new timestamp (Alg 5.1, "go to 2").
    fn abort_and_retry(&mut self, now: u64) {
        let a = self.current.take().expect("called with an attempt");
        if !a.read_only {
            self.send_decision(now, a.txn, false, a.by_server.keys().copied().collect());
        }
        self.events.push(ClientEvent::Restarted);
        self.begin_attempt(now, a.first_shot, a.first_is_last, a.attempts + 1);
    }
}

/// If `op` reads a key that `earlier` wrote, the value written.
pub(crate) fn own_write(earlier: &[Op], op: &Op) -> Option<Value> {
    let Op::Read(k) = op else {
        return None;
    };
    earlier
        .iter()
        .rev()
        .find_map(|o| o.written().filter(|_| o.key() == k).cloned())
}

/// The values `ops`' reads returned, in order.
fn reads_of(ops: &[Op], replies: &[Option<OpReply>]) -> Vec<(Key, Value)> {
    ops.iter()
        .zip(replies)
        .filter_map(|(op, r)| match (op, r) {
            (op, Some(r)) if op.reads() => {
                let value = r.value.clone().expect("a read returns a value");
                Some((op.key().clone(), value))
            }
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod placement_tests {
    use super::*;

    #[test]
    fn slots_place_keys_by_hash_slot_ranges_and_tags() {
        // Slots of Redis's own (CLUSTER KEYSLOT): foo 12182, bar 5061.
        assert_eq!(Placement::Slots.server_of(&Key::from("foo"), 2), 1);
        assert_eq!(Placement::Slots.server_of(&Key::from("bar"), 2), 0);
        assert_eq!(Placement::Slots.server_of(&Key::from("foo"), 4), 2); // 12182 in 12288..
        for n in 1..=8u32 {
            let a = Placement::Slots.server_of(&Key::from("{user:7}:name"), n);
            assert_eq!(
                a,
                Placement::Slots.server_of(&Key::from("{user:7}:mail"), n)
            );
            assert!(a < n);
        }
        // Every server gets a range: the first and last slots land on the ends.
        let first = (0..)
            .map(|i| format!("k{i}"))
            .find(|k| verso_cluster::key_slot(k.as_bytes()) < 100);
        let last = (0..)
            .map(|i| format!("k{i}"))
            .find(|k| verso_cluster::key_slot(k.as_bytes()) > 16_300);
        assert_eq!(
            Placement::Slots.server_of(&Key::from(first.unwrap().as_str()), 5),
            0
        );
        assert_eq!(
            Placement::Slots.server_of(&Key::from(last.unwrap().as_str()), 5),
            4
        );
        assert_eq!(
            Placement::Hash.server_of(&Key::from(9u64), 4),
            shard_of(&Key::from(9u64), 4)
        );
    }
}
