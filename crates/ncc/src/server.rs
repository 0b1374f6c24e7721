//! An NCC server: the data of one shard, executed without locks in arrival order, with
//! every response held back by response timing control (Alg 5.2, 5.3, 5.4 and §5.5).
//!
//! State per key: the versions in creation order (which is also `t_w` order), and the queue
//! of responses to read-write requests in execution order. A response may leave once every
//! request ahead of it in its key's queue is decided, except that a run of reads leaves
//! together; that one rule gives D1 (a read of an undecided version waits for its writer),
//! D2 (a write waits for the reads of the version before it) and D3 (a write waits for the
//! write before it). Read-only requests are not queued (they never hold up a write) but a
//! read-only read of an undecided version waits for its writer too.
//!
//! **Invariants** (checked by `debug_assert`s and by [`Server::check_invariants`]):
//! - each key's versions are in strictly increasing `t_w` order, and each version's `t_r`
//!   is at least its `t_w` and below the next version's `t_w`;
//! - a version's writer is undecided here exactly while it is in the list uncommitted;
//! - a response leaves at most once per execution of its request.
//!
//! **What is forgotten.** A key keeps its versions from the oldest one something may still
//! need (the one below an undecided version, a version an undecided request read) to the
//! newest; older committed ones are dropped when a transaction on the key is decided
//! ([`Server::prune_versions`]), and kept as bare values only while the history is kept for
//! a checker. A client names on each request the sequence number below which all its
//! transactions are finished; their records are dropped and their late duplicates ignored
//! ([`Server::forget_finished`]). What stays is bounded by the transactions in flight, plus
//! one record per crashed client's last transaction and one mark per client.

mod recovery;

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use crate::types::{
    ClientId, ExecResult, Finished, Key, Msg, Op, OpReply, ServerId, Ts, TxnId, Value,
};

/// Deliberate bugs, for showing that the simulator and the checker catch them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Mistakes {
    /// Send every response as soon as it is executed: timestamp order without response
    /// timing control, the timestamp-inversion pitfall of §4 (not strictly serializable).
    pub no_timing_control: bool,
    /// Never abort a request early: queues may then wait on each other for ever (Lemma 3).
    pub no_early_abort: bool,
    /// Read-only reads skip the freshness check against `t_ro` (§5.5).
    pub no_read_only_check: bool,
    /// Smart retry moves a written version whether or not it was read (Alg 5.4's "has been
    /// read" test broken). In full NCC no checked run has shown a violation from it alone
    /// (180,000 simulator seeds over nine configurations, 2026-11-26): a read-write read of
    /// an undecided version is answered only after the writer decides (D1), so a cycle
    /// through the moved version needs a write that waits for the reader (D2) while the
    /// writer waits for that write, a deadlock that early abort breaks; and a read-only read
    /// never sees an undecided version here (our `t_ro` check is stricter than the paper's).
    /// With the read-only check weakened (`no_read_only_check`, where a read-only read can
    /// see one, as the paper's per-server `t_ro` allows), this test is the last defence, and
    /// breaking it gives a fractured read:
    /// `paper_scenarios::smart_retry_without_the_read_test_is_caught`.
    pub no_read_test_in_smart_retry: bool,
    /// The recovery timer aborts a transaction whatever its record says (App. D lets it
    /// abort only an uncleared one: a cleared one's client may have committed).
    pub backup_aborts_cleared: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Status {
    Undecided,
    Committed,
    Aborted,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Version {
    /// Names the version for as long as it lives (its `t_w` may move: smart retry).
    id: u64,
    value: Value,
    tw: Ts,
    tr: Ts,
    /// `None` for the initial version.
    writer: Option<TxnId>,
    committed: bool,
    /// Some other transaction read it. Smart retry never moves such a version: the paper's
    /// test (`t_w != t_r`) misses a read whose timestamp was below `t_w`, which leaves
    /// `t_r` unchanged (digest pitfall 5; the simulator found it).
    read: bool,
}

/// A read-write request's response, waiting for its turn.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Item {
    txn: TxnId,
    index: u32,
    op: Op,
    ts: Ts,
    status: Status,
    sent: bool,
    reply: OpReply,
    /// The version it read or wrote.
    version: u64,
}

/// A read-only read of an undecided version, waiting for the version's writer.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct RoWait {
    txn: TxnId,
    index: u32,
    writer: TxnId,
    reply: OpReply,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
struct KeyState {
    versions: Vec<Version>,
    queue: VecDeque<Item>,
    ro_waiting: Vec<RoWait>,
    /// Committed values pruned from `versions`, oldest first, while the history is kept.
    archived: Vec<Value>,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct TxnState {
    ts: Ts,
    ops: Vec<Op>,
    /// Per request: the version it read or wrote (`None`: not executed).
    versions: Vec<Option<u64>>,
    status: Status,
    read_only: bool,
    /// A read-only transaction's `t_ro`: its reads run again (after the writer of what
    /// they read aborted) are checked against it again.
    t_ro: u64,
    /// What each request answered so far: a duplicate execute message gets them again.
    answered: Vec<Option<ExecResult>>,
    /// The shots that reached this server.
    shots: Vec<u32>,
    /// The smart retry's target and outcome, once run: a duplicate gets the same answer.
    retried: Option<(Ts, bool)>,
    ts_server: u64,
    /// The backup coordinator the client named (App. D).
    coord: ServerId,
    /// Every cohort, once the last shot arrived.
    cohorts: Option<Vec<ServerId>>,
    /// When (this server's clock) the recovery timer fires next.
    timer: u64,
}

/// One shard's server (module docs). `Clone` and `Hash` for the model checker.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Server {
    mistakes: Mistakes,
    keys: BTreeMap<Key, KeyState>,
    txns: BTreeMap<TxnId, TxnState>,
    next_version: u64,
    /// The number of the newest version created here.
    latest: u64,
    /// The versions whose writer is undecided here: every version numbered below the first
    /// is decided (read-only clients' `t_ro`, [`Server::execute_read_only`]).
    undecided_versions: BTreeSet<u64>,
    /// Read-write transactions undecided here (counted, so that whether a recovery timer
    /// runs is known without a scan of every transaction: a real server asks after each
    /// burst of messages). `check_invariants` recounts it.
    awaiting_decision: usize,
    out: Vec<(ClientId, Msg)>,
    /// This server's id, and how long a read-write transaction may stay undecided before
    /// the backup coordinator steps in (`None`: no recovery, as in tests that drive every
    /// message by hand). See `recovery.rs`.
    id: ServerId,
    recovery_after: Option<u64>,
    /// Recoveries this server runs as backup coordinator.
    recovering: BTreeMap<TxnId, recovery::Recovery>,
    /// Messages to other servers (recovery), as (server, message).
    peers_out: Vec<(ServerId, Msg)>,
    /// A decision that contradicts an earlier one here: reported by `check_invariants`.
    violation: Option<String>,
    /// Per client, the transactions it has finished (`Msg::Execute::done`): no record of
    /// them is kept, and messages about them are late duplicates.
    finished: crate::finished::FinishedMarks,
    /// Keep every committed value (for [`Server::committed_versions`], which a history
    /// checker needs); off, a key holds only the versions that may still be needed.
    keep_history: bool,
}

impl Server {
    pub fn new(mistakes: Mistakes) -> Server {
        Server {
            mistakes,
            keys: BTreeMap::new(),
            txns: BTreeMap::new(),
            next_version: 1,
            latest: 0,
            undecided_versions: BTreeSet::new(),
            awaiting_decision: 0,
            out: Vec::new(),
            id: 0,
            recovery_after: None,
            recovering: BTreeMap::new(),
            peers_out: Vec::new(),
            violation: None,
            finished: Default::default(),
            keep_history: true,
        }
    }

    /// Drops pruned versions for good instead of keeping their values for
    /// [`Server::committed_versions`]: a long-running server's memory is then bounded by
    /// what is in flight. [`Server::committed_versions`] then lists only the versions kept.
    pub fn without_history(mut self) -> Server {
        self.keep_history = false;
        self
    }

    /// Turns on client-failure handling (App. D): this server is `id`, and a read-write
    /// transaction still undecided `after` (this server's clock) since it arrived is
    /// recovered by its backup coordinator.
    pub fn with_recovery(mut self, id: ServerId, after: u64) -> Server {
        self.id = id;
        self.recovery_after = Some(after);
        self
    }

    /// Messages to send, as (client, message). The answers to one transaction released by
    /// one event leave in one message (a read-only transaction's reads at a server, a run
    /// of reads a decision releases): as many messages as the paper's per-server rounds.
    pub fn drain(&mut self) -> Vec<(ClientId, Msg)> {
        let mut out: Vec<(ClientId, Msg)> = Vec::with_capacity(self.out.len());
        let mut first_reply: Vec<(TxnId, usize)> = Vec::new();
        for (c, msg) in std::mem::take(&mut self.out) {
            if let Msg::ExecReply {
                txn,
                results,
                latest,
                ..
            } = &msg
            {
                if let Some(&(_, at)) = first_reply.iter().find(|(t, _)| t == txn) {
                    if let Msg::ExecReply {
                        results: into,
                        latest: into_latest,
                        ..
                    } = &mut out[at].1
                    {
                        into.extend(results.iter().copied());
                        *into_latest = (*into_latest).max(*latest);
                    }
                    continue;
                }
                first_reply.push((*txn, out.len()));
            }
            out.push((c, msg));
        }
        out
    }

    /// Handles a client's message; `now` is this server's clock.
    pub fn on_message(&mut self, now: u64, msg: Msg) {
        if let Msg::Execute { txn, done, .. } = &msg {
            self.forget_finished(txn.client, *done);
        }
        if self.is_forgotten(msg.txn()) {
            // A late duplicate (an execute, decision or smart retry the client sent again,
            // or a peer's recovery message) of a transaction whose client has finished it:
            // every server it reached has decided it and said so. Running it again would
            // make a new undecided transaction that nobody decides.
            return;
        }
        match msg {
            Msg::Execute {
                txn,
                ts,
                shot,
                ops,
                t_ro,
                coord,
                cohorts,
                done: _,
            } => self.execute(now, txn, ts, shot, ops, t_ro, coord, cohorts),
            Msg::SmartRetry { txn, to } => {
                let ok = self.smart_retry(txn, to);
                self.out
                    .push((txn.client, Msg::SmartRetryReply { txn, ok }));
            }
            Msg::Decide { txn, commit } => {
                self.decide(txn, commit);
                // Acknowledged every time: the client sends it until it hears this.
                self.out.push((txn.client, Msg::DecideAck { txn }));
            }
            Msg::Resolve { txn, from } => self.on_resolve(txn, from),
            Msg::GetRecord { txn, from } => self.on_get_record(txn, from),
            Msg::Record { txn, from, record } => self.on_record(txn, from, record),
            Msg::RecoverRetry { txn, to, from } => {
                let ok = self.smart_retry(txn, to);
                let reply = Msg::RecoverRetryReply {
                    txn,
                    from: self.id,
                    ok,
                };
                self.peers_out.push((from, reply));
            }
            Msg::RecoverRetryReply { txn, from, ok } => self.on_recover_retry_reply(txn, from, ok),
            Msg::ExecReply { .. }
            | Msg::SmartRetryReply { .. }
            | Msg::DecideAck { .. }
            | Msg::LastShotAck { .. } => {}
        }
    }

    /// Forgets `client`'s transactions in `done` (it has finished them).
    /// A record still undecided here is kept (it cannot be, unless this server lost what
    /// it answered; then the recovery timer decides it); a read-only one is dropped
    /// whatever it waits for, since its client has moved on.
    fn forget_finished(&mut self, client: ClientId, done: Finished) {
        let forgettable = |t: &TxnState| t.read_only || t.status != Status::Undecided;
        let gone = self
            .finished
            .forget(&mut self.txns, client, done, forgettable);
        for txn in gone {
            self.recovering.remove(&txn);
        }
    }

    /// Whether `txn` is one its client finished and this server forgot.
    fn is_forgotten(&self, txn: TxnId) -> bool {
        !self.txns.contains_key(&txn) && self.finished.finished(txn)
    }

    /// Drops `key`'s versions below the oldest one that may still be needed: the newest;
    /// the one below the oldest undecided version (an abort makes it the newest again, and
    /// smart retry compares with its `t_r`); and the oldest one an undecided request read
    /// (smart retry moves its `t_r`, bounded by the next version's `t_w`). Everything below
    /// is committed and superseded by a committed version, and no request will refer to it
    /// again: a new read or write goes to the newest version.
    fn prune_versions(&mut self, key: Key) {
        let Some(ks) = self.keys.get_mut(&key) else {
            return;
        };
        if ks.versions.len() <= 2 {
            return;
        }
        let mut keep_from = ks.versions.len() - 1;
        if let Some(i) = ks.versions.iter().position(|v| !v.committed) {
            keep_from = keep_from.min(i.saturating_sub(1));
        }
        for item in ks.queue.iter().filter(|i| i.status == Status::Undecided) {
            if let Some(i) = ks.versions.iter().position(|v| v.id == item.version) {
                keep_from = keep_from.min(i);
            }
        }
        if keep_from == 0 {
            return;
        }
        let pruned = ks.versions.drain(..keep_from);
        if self.keep_history {
            ks.archived.extend(pruned.map(|v| {
                debug_assert!(v.committed, "only committed versions are pruned");
                v.value
            }));
        } else {
            drop(pruned);
        }
    }

    /// What this server holds (for tests that it stays bounded).
    pub fn footprint(&self) -> crate::protocol::Footprint {
        crate::protocol::Footprint {
            records: self.txns.len(),
            versions: self.keys.values().map(|ks| ks.versions.len()).sum(),
            keys: self.keys.len(),
        }
    }

    /// Every version numbered up to this one is decided (committed or gone).
    pub fn decided_through(&self) -> u64 {
        self.undecided_versions
            .first()
            .map_or(self.latest, |&first| first - 1)
    }

    /// Every key's committed versions, oldest first, as (key, values): the version order a
    /// checker needs. The initial version (value 0) is included.
    pub fn committed_versions(&self) -> Vec<(Key, Vec<Value>)> {
        self.keys
            .iter()
            .map(|(&k, ks)| {
                let live = ks.versions.iter().filter(|v| v.committed);
                let values = ks.archived.iter().copied().chain(live.map(|v| v.value));
                (k, values.collect())
            })
            .collect()
    }

    /// Transactions with a version or a response still undecided here.
    pub fn undecided(&self) -> Vec<TxnId> {
        let mut out: Vec<TxnId> = self
            .txns
            .iter()
            .filter(|(_, t)| t.status == Status::Undecided && !t.read_only)
            .map(|(&id, _)| id)
            .collect();
        out.sort();
        out
    }

    /// The non-empty response queues and waiting read-only reads, for a report of a run
    /// that made no progress.
    pub fn describe_waits(&self) -> String {
        let mut out = String::new();
        for (k, ks) in &self.keys {
            if ks.queue.is_empty() && ks.ro_waiting.is_empty() {
                continue;
            }
            let items: Vec<String> = ks
                .queue
                .iter()
                .map(|i| {
                    format!(
                        "{}{}@{}.{}:{:?}{}",
                        if i.op.is_write() { "W" } else { "R" },
                        i.txn.seq,
                        i.ts.clk,
                        i.ts.cid,
                        i.status,
                        if i.sent { "+sent" } else { "" }
                    )
                })
                .collect();
            let ro: Vec<String> = ks
                .ro_waiting
                .iter()
                .map(|w| {
                    format!(
                        "ro {}.{} waits {}.{}",
                        w.txn.client, w.txn.seq, w.writer.client, w.writer.seq
                    )
                })
                .collect();
            out += &format!("key {k}: [{}] {ro:?}; ", items.join(" "));
        }
        out
    }

    /// Checks the module's invariants; the error says which broke.
    pub fn check_invariants(&self) -> Result<(), String> {
        if let Some(v) = &self.violation {
            return Err(v.clone());
        }
        let awaiting = self
            .txns
            .values()
            .filter(|t| recovery::awaits_decision(t))
            .count();
        if awaiting != self.awaiting_decision {
            return Err(format!(
                "{awaiting} read-write transactions undecided, {} counted",
                self.awaiting_decision
            ));
        }
        for range in self.finished.ranges() {
            let mut kept = self.txns.range(range);
            if let Some((id, _)) = kept.find(|(_, t)| !recovery::awaits_decision(t)) {
                return Err(format!("{id:?} is finished but kept"));
            }
        }
        for (k, ks) in &self.keys {
            if ks.versions.is_empty() {
                return Err(format!("key {k} has no version"));
            }
            for w in ks.versions.windows(2) {
                if w[0].tw >= w[1].tw || w[0].tr >= w[1].tw {
                    return Err(format!("key {k}: versions out of order: {w:?}"));
                }
            }
            for v in &ks.versions {
                if v.tr < v.tw {
                    return Err(format!("key {k}: t_r below t_w: {v:?}"));
                }
                let undecided = v.writer.is_some_and(|w| {
                    self.txns
                        .get(&w)
                        .is_some_and(|t| t.status == Status::Undecided)
                });
                if v.committed == undecided {
                    return Err(format!("key {k}: version {v:?} committed={}", v.committed));
                }
            }
        }
        Ok(())
    }

    /// Runs shot `shot` of `txn` (its requests on this server). A server may take part in
    /// some shots only; it numbers the transaction's requests in arrival order, which is
    /// the client's order (a shot goes out only once the one before it is answered).
    #[allow(clippy::too_many_arguments)] // the fields of one message
    fn execute(
        &mut self,
        now: u64,
        txn: TxnId,
        ts: Ts,
        shot: u32,
        ops: Vec<Op>,
        t_ro: Option<u64>,
        coord: ServerId,
        cohorts: Option<Vec<ServerId>>,
    ) {
        match self.txns.get(&txn) {
            Some(t) if t.shots.contains(&shot) => {
                if ops.is_empty() && cohorts.is_some() {
                    let ok = t.status != Status::Aborted;
                    self.out.push((txn.client, Msg::LastShotAck { txn, ok }));
                }
                // A duplicate or a retransmission: what was answered goes again (an early
                // abort too, though the transaction is decided here since).
                let again: Vec<(u32, ExecResult)> = t
                    .answered
                    .iter()
                    .enumerate()
                    .filter_map(|(i, a)| a.map(|a| (i as u32, a)))
                    .collect();
                let ts_server = t.ts_server;
                for (i, r) in again {
                    self.send_result(txn, i, r, ts_server);
                }
                return;
            }
            // A later shot of a decided transaction (or one aborted before this arrived). A
            // client that has moved on ignores any answer; one that was paused while the
            // backup coordinator aborted it must hear so, or it waits for ever.
            Some(t) if t.status != Status::Undecided => {
                if t.status == Status::Aborted {
                    let (base, ts_server) = (t.ops.len() as u32, t.ts_server);
                    for i in 0..ops.len() as u32 {
                        self.send_result(txn, base + i, ExecResult::EarlyAbort, ts_server);
                    }
                    if ops.is_empty() && cohorts.is_some() {
                        let ok = false;
                        self.out.push((txn.client, Msg::LastShotAck { txn, ok }));
                    }
                }
                return;
            }
            Some(_) => {}
            None => {
                if t_ro.is_none() {
                    self.awaiting_decision += 1;
                }
                self.txns.insert(
                    txn,
                    TxnState {
                        ts,
                        ops: Vec::new(),
                        versions: Vec::new(),
                        status: Status::Undecided,
                        read_only: t_ro.is_some(),
                        t_ro: t_ro.unwrap_or(0),
                        answered: Vec::new(),
                        shots: Vec::new(),
                        retried: None,
                        ts_server: now,
                        coord,
                        cohorts: None,
                        timer: now.saturating_add(self.recovery_after.unwrap_or(u64::MAX)),
                    },
                );
            }
        }
        let t = self.txns.get_mut(&txn).expect("present");
        let base = t.ops.len();
        t.shots.push(shot);
        if cohorts.is_some() {
            t.cohorts = cohorts;
            if ops.is_empty() {
                let ok = true;
                self.out.push((txn.client, Msg::LastShotAck { txn, ok }));
                return;
            }
        }
        t.ops.extend(&ops);
        t.versions.resize(base + ops.len(), None);
        t.answered.resize(base + ops.len(), None);
        t.ts_server = now;
        let indices = (base..base + ops.len()).map(|i| i as u32);
        if let Some(t_ro) = t_ro {
            for (i, op) in indices.zip(&ops) {
                self.execute_read_only(txn, i, op.key(), ts, t_ro);
            }
            return;
        }
        // All or nothing here: if one request must abort early, none runs, and neither does
        // anything an earlier shot ran here. A read-modify-write's write also aborts if
        // another write came after its read (early abort looks at other transactions only).
        let early = ops.iter().any(|op| {
            self.rmw_intervened(txn, op)
                || (!self.mistakes.no_early_abort && self.aborts_early(txn, op, ts))
        });
        if early {
            self.decide(txn, false);
            for i in indices {
                self.answer(txn, i, ExecResult::EarlyAbort);
            }
            return;
        }
        for (i, op) in indices.zip(ops) {
            let key = op.key();
            let (version, reply) = self.run_op(txn, op, ts);
            self.txns.get_mut(&txn).expect("present").versions[i as usize] = Some(version);
            let item = Item {
                txn,
                index: i,
                op,
                ts,
                status: Status::Undecided,
                sent: false,
                reply,
                version,
            };
            let queue = &mut self.keys.entry(key).or_default().queue;
            // Read-modify-write (§5.1, Appendix C): the paper puts the write's answer right
            // after its read's in the queue and sends it at once. Here it queues at the tail
            // and waits like any write for the other transactions' requests ahead (D2): the
            // paper's way let it overtake later reads of the version it overwrites, and a
            // reader of that version was then serialized before it while a transaction that
            // began after it returned was serialized after (the simulator found two such
            // cycles). After its read only reads of the same version can be queued (another
            // write aborts it, below), so the tail is right after them.
            queue.push_back(item);
            self.timing_control(key);
        }
    }

    /// Whether `op` writes a key that `txn` read here (a read-modify-write) and another
    /// write has come since: then it must abort, the value it would write was computed from
    /// a version no longer the newest (§5.1).
    fn rmw_intervened(&self, txn: TxnId, op: &Op) -> bool {
        if !op.is_write() {
            return false;
        }
        let Some(ks) = self.keys.get(&op.key()) else {
            return false;
        };
        let read = ks
            .queue
            .iter()
            .find(|i| i.txn == txn && !i.op.is_write() && i.status == Status::Undecided);
        read.is_some_and(|r| ks.versions.last().map(|v| v.id) != Some(r.version))
    }

    /// Early abort: `op` would not be answered at once (an undecided request of another
    /// transaction is ahead of it: any for a write, a write for a read) and one of those
    /// has a higher timestamp. Lemma 3 needs only the requests on the same key.
    fn aborts_early(&self, txn: TxnId, op: &Op, ts: Ts) -> bool {
        let Some(ks) = self.keys.get(&op.key()) else {
            return false;
        };
        let ahead = |i: &&Item| {
            i.txn != txn && i.status == Status::Undecided && (op.is_write() || i.op.is_write())
        };
        ks.queue.iter().filter(ahead).any(|i| i.ts > ts)
    }

    /// Executes `op` at `ts` on its key's newest version, refining the timestamp (Alg 5.2):
    /// a write goes after the newest read (`t_w.clk = max(ts.clk, t_r.clk + 1)`, keeping
    /// the writer's cid); a read raises the version's `t_r` to `ts`.
    fn run_op(&mut self, txn: TxnId, op: Op, ts: Ts) -> (u64, OpReply) {
        let id = self.next_version;
        let ks = self.keys.entry(op.key()).or_default();
        if ks.versions.is_empty() {
            ks.versions.push(initial_version(0));
        }
        let curr = ks.versions.last_mut().expect("a key has a version");
        match op {
            Op::Write(_, value) | Op::ReadWrite(_, value) => {
                // A read-write reads the version its write goes right above: its `t_r`
                // need not rise (the write's `t_w` is above it anyway), and only the
                // write's pair goes to the safeguard.
                let replaced = op.reads().then_some(curr.value);
                curr.read |= op.reads() && curr.writer != Some(txn);
                let tw = Ts {
                    clk: ts.clk.max(curr.tr.clk + 1),
                    cid: ts.cid,
                };
                debug_assert!(tw > curr.tr && tw >= ts);
                ks.versions.push(Version {
                    id,
                    value,
                    tw,
                    tr: tw,
                    writer: Some(txn),
                    committed: false,
                    read: false,
                });
                self.next_version += 1;
                self.latest = id;
                self.undecided_versions.insert(id);
                (
                    id,
                    OpReply {
                        value: replaced,
                        tw,
                        tr: tw,
                    },
                )
            }
            Op::Read(_) => {
                curr.tr = curr.tr.max(ts);
                curr.read |= curr.writer != Some(txn);
                (
                    curr.id,
                    OpReply {
                        value: Some(curr.value),
                        tw: curr.tw,
                        tr: curr.tr,
                    },
                )
            }
        }
    }

    /// A read-only transaction's read (§5.5): refused unless the key's newest version was
    /// already decided when the client last heard from this server (`t_ro`: the server's
    /// [`Server::decided_through`] then); otherwise a read like any other, except that it is
    /// not queued.
    ///
    /// The paper compares `t_w` with the newest `t_w` the client heard of, and lets a
    /// read-only read of an undecided version wait for its writer. The simulator found both
    /// unsound. A write that arrives later may get a lower `t_w` (it was pre-assigned a lower
    /// timestamp) and slip under the check. And a read that waits for a writer, while the
    /// transaction's other reads are already done, can see a write that commits after
    /// transactions which those reads missed, and which finished before others began (a
    /// real-time cycle through a second read-only transaction, with a late, retransmitted
    /// request). With this check every version a successful read-only transaction reads was
    /// committed before it began and was still the newest when read: it reads the committed
    /// state as of its start, and never waits.
    fn execute_read_only(&mut self, txn: TxnId, index: u32, key: Key, ts: Ts, t_ro: u64) {
        let newest = self
            .keys
            .get(&key)
            .and_then(|ks| ks.versions.last())
            .map_or(0, |v| v.id);
        if newest > t_ro && !self.mistakes.no_read_only_check {
            self.answer(txn, index, ExecResult::RoAbort);
            return;
        }
        self.read_only_read(txn, index, key, ts);
    }

    fn read_only_read(&mut self, txn: TxnId, index: u32, key: Key, ts: Ts) {
        let (version, reply) = self.run_op(txn, Op::Read(key), ts);
        if let Some(t) = self.txns.get_mut(&txn) {
            t.versions[index as usize] = Some(version);
        }
        let ks = self.keys.get_mut(&key).expect("run_op made it");
        let v = ks.versions.last().expect("read it");
        match v.writer.filter(|_| !v.committed) {
            Some(writer) if !self.mistakes.no_timing_control => ks.ro_waiting.push(RoWait {
                txn,
                index,
                writer,
                reply,
            }),
            _ => self.answer(txn, index, ExecResult::Done(reply)),
        }
    }

    /// Response timing control on `key`'s queue (Alg 5.3): drop the decided requests at its
    /// head, then answer the first undecided one, and the reads right after it if it is a
    /// read (stepping over decided requests: an aborted write between two reads must not
    /// hold the second back, or two transactions can wait on each other for ever; the
    /// simulator found that one with two-shot transactions). (The reads of an aborted write were run again when it aborted:
    /// [`Server::rerun_reads_of`].)
    fn timing_control(&mut self, key: Key) {
        let Some(ks) = self.keys.get_mut(&key) else {
            return;
        };
        while ks
            .queue
            .front()
            .is_some_and(|head| head.status != Status::Undecided)
        {
            ks.queue.pop_front();
        }
        let mut release = Vec::new();
        let everything = self.mistakes.no_timing_control;
        // The undecided requests seen so far (ahead of the one looked at), as (transaction,
        // is a write). A request waits only for *other* transactions' requests: a write for
        // any of them (D2, D3), a read for their writes (D1). A transaction's own read ahead
        // of its write (a read-modify-write) holds nothing back.
        let mut ahead: Vec<(TxnId, bool)> = Vec::new();
        for item in ks.queue.iter_mut() {
            if item.status != Status::Undecided {
                // Decided requests behind the head hold nothing back: only an aborted one
                // can be there (a write's answer leaves only once all ahead are decided,
                // so it cannot have committed), and its readers have run again already.
                continue;
            }
            let write = item.op.is_write();
            let blocked = ahead.iter().any(|&(t, w)| t != item.txn && (write || w));
            if (everything || !blocked) && !item.sent {
                item.sent = true;
                release.push((item.txn, item.index, item.reply));
            }
            if ahead.iter().any(|&(t, w)| t != item.txn && w) && !everything {
                break; // behind another's undecided write nothing more leaves
            }
            ahead.push((item.txn, write));
        }
        for (txn, index, reply) in release {
            self.answer(txn, index, ExecResult::Done(reply));
        }
    }

    /// The version `gone` of `key` was aborted: the read-write reads that saw it run again
    /// at their own timestamps and queue at the tail (their answers were held: D1), the
    /// paper's re-execution in Alg 5.3. Wherever they are in the queue: an aborted write
    /// need not be directly ahead of its readers (another aborted write may sit between).
    /// A read that would then wait behind an undecided write with a higher timestamp
    /// aborts early, as on arrival (else two transactions can each wait for the other).
    fn rerun_reads_of(&mut self, key: Key, gone: u64) {
        let Some(ks) = self.keys.get_mut(&key) else {
            return;
        };
        let (again, kept): (VecDeque<Item>, VecDeque<Item>) = std::mem::take(&mut ks.queue)
            .into_iter()
            .partition(|i| !i.op.is_write() && i.version == gone && i.status == Status::Undecided);
        ks.queue = kept;
        let mut early = Vec::new();
        for mut read in again {
            let behind_higher = ks.queue.iter().any(|i| {
                i.txn != read.txn
                    && i.status == Status::Undecided
                    && i.op.is_write()
                    && i.ts > read.ts
            });
            if behind_higher && !self.mistakes.no_early_abort {
                early.push((read.txn, read.index));
                continue;
            }
            let curr = ks.versions.last_mut().expect("a key has a version");
            curr.tr = curr.tr.max(read.ts);
            curr.read = true;
            read.reply = OpReply {
                value: Some(curr.value),
                tw: curr.tw,
                tr: curr.tr,
            };
            read.version = curr.id;
            read.sent = false;
            if let Some(t) = self.txns.get_mut(&read.txn) {
                t.versions[read.index as usize] = Some(read.version);
                t.answered[read.index as usize] = None;
            }
            ks.queue.push_back(read);
        }
        for (txn, index) in early {
            self.answer(txn, index, ExecResult::EarlyAbort);
        }
    }

    /// The version below `above` on `key` was aborted: if `above` was written by a
    /// read-write, what it read is gone, and it reads the version now below it instead
    /// (its answer is still held: a write waits for the undecided write before it, D3).
    fn reread_below(&mut self, key: Key, above: u64) {
        let Some(ks) = self.keys.get_mut(&key) else {
            return;
        };
        let Some(i) = ks.versions.iter().position(|x| x.id == above) else {
            return;
        };
        let below = &ks.versions[i - 1];
        let (value, below_writer) = (below.value, below.writer);
        let everything = self.mistakes.no_timing_control;
        for item in ks.queue.iter_mut() {
            let fresh = item.version == above && item.status == Status::Undecided;
            if fresh && matches!(item.op, Op::ReadWrite(..)) {
                debug_assert!(
                    !item.sent || everything,
                    "a read-write's answer waits for the write below"
                );
                item.reply.value = Some(value);
                if below_writer != Some(item.txn) {
                    ks.versions[i - 1].read = true;
                }
            }
        }
    }

    /// Smart retry (Alg 5.4): moves every version `txn` touched here to `to`, or none. A
    /// version it wrote moves only if no one read it (`t_w == t_r`); any version only if
    /// the next one's `t_w` is above `to`. The outcome is recorded: a duplicate, or a
    /// backup coordinator's replay, gets the same answer (digest pitfall 12).
    fn smart_retry(&mut self, txn: TxnId, to: Ts) -> bool {
        match self.txns.get(&txn) {
            None => false,
            Some(t) if t.status == Status::Aborted => false,
            Some(t) if t.retried.is_some_and(|(r, _)| r == to) => t.retried.expect("some").1,
            Some(t) => {
                // A read-modify-write's read is superseded by its write: only the write's
                // version moves (§5.1: only the write's pair goes through the safeguard).
                let written: Vec<Key> = t
                    .ops
                    .iter()
                    .filter(|op| op.is_write())
                    .map(Op::key)
                    .collect();
                let targets: Vec<(Key, u64)> = t
                    .ops
                    .iter()
                    .zip(&t.versions)
                    .filter(|(op, _)| op.is_write() || !written.contains(&op.key()))
                    .filter_map(|(op, v)| v.map(|v| (op.key(), v)))
                    .collect();
                let movable = targets.iter().all(|&(k, v)| self.can_move(txn, k, v, to));
                if movable {
                    for &(k, v) in &targets {
                        let ks = self.keys.get_mut(&k).expect("checked");
                        let ver = ks.versions.iter_mut().find(|x| x.id == v).expect("checked");
                        if ver.writer == Some(txn) {
                            ver.tw = to;
                            ver.tr = to;
                        } else {
                            ver.tr = ver.tr.max(to);
                        }
                    }
                }
                self.txns.get_mut(&txn).expect("found").retried = Some((to, movable));
                movable
            }
        }
    }

    fn can_move(&self, txn: TxnId, key: Key, version: u64, to: Ts) -> bool {
        let Some(ks) = self.keys.get(&key) else {
            return false;
        };
        let Some(i) = ks.versions.iter().position(|v| v.id == version) else {
            return false;
        };
        let v = &ks.versions[i];
        if ks.versions.get(i + 1).is_some_and(|next| next.tw <= to) {
            return false;
        }
        // The paper's test is `t_w != t_r`; it misses a read whose timestamp was below
        // `t_w` (it leaves `t_r` alone), so any read counts here (`Version::read`). With
        // read-only reads never seeing undecided versions, such a read is one of a
        // read-write transaction between the writer's timestamp and its refined `t_w`.
        let read = (v.tw != v.tr || v.read) && !self.mistakes.no_read_test_in_smart_retry;
        if v.writer == Some(txn) && (read || ks.versions[i - 1].tr >= to) {
            return false;
        }
        // A version may only move later: its `t_w` is the transaction's, at most `to`.
        v.writer != Some(txn) || v.tw <= to
    }

    /// The client's decision (sent asynchronously): its versions commit or go; its queued
    /// responses are decided and each queue it was in may release the next.
    fn decide(&mut self, txn: TxnId, commit: bool) {
        let status = if commit {
            Status::Committed
        } else {
            Status::Aborted
        };
        let Some(t) = self.txns.get_mut(&txn) else {
            // Aborted before its requests arrived (reordered): they will find it decided.
            // A commit cannot come first: the client commits only after this server
            // answered, unless the server lost what it answered (a replication group's
            // total crash, in the simulator).
            if commit && self.violation.is_none() {
                self.violation = Some(format!(
                    "{txn:?} committed here without its requests: their state was lost"
                ));
            }
            self.txns.insert(
                txn,
                TxnState {
                    ts: Ts::default(),
                    ops: Vec::new(),
                    versions: Vec::new(),
                    status: Status::Aborted,
                    read_only: false,
                    t_ro: 0,
                    answered: Vec::new(),
                    shots: Vec::new(),
                    retried: None,
                    ts_server: 0,
                    coord: 0,
                    cohorts: None,
                    timer: u64::MAX,
                },
            );
            return;
        };
        if t.read_only {
            return;
        }
        if t.status != Status::Undecided {
            if t.status != status {
                self.violation = Some(format!(
                    "{txn:?} decided {status:?} after it was {:?} here",
                    t.status
                ));
            }
            return;
        }
        t.status = status;
        // A recovery of it here is moot: the decision is made (and its client's, if it
        // came from the client, goes to every cohort).
        self.recovering.remove(&txn);
        let touched: Vec<(Op, Option<u64>)> =
            t.ops.iter().copied().zip(t.versions.clone()).collect();
        self.awaiting_decision -= 1;
        // Every version first, every queue after: a key can appear twice (a read-modify-write
        // reads then writes it), and its queue must not release a read of the write's
        // version before that version is gone (the simulator found that).
        for &(op, version) in &touched {
            let (true, Some(v)) = (op.is_write(), version) else {
                continue;
            };
            let key = op.key();
            self.undecided_versions.remove(&v);
            let Some(ks) = self.keys.get_mut(&key) else {
                continue;
            };
            if commit {
                if let Some(ver) = ks.versions.iter_mut().find(|x| x.id == v) {
                    ver.committed = true;
                }
            } else {
                let at = ks.versions.iter().position(|x| x.id == v);
                let above = at.and_then(|i| ks.versions.get(i + 1)).map(|x| x.id);
                ks.versions.retain(|x| x.id != v);
                if let Some(above) = above {
                    self.reread_below(key, above);
                }
                self.rerun_reads_of(key, v);
            }
        }
        let mut keys: Vec<Key> = touched.iter().map(|(op, _)| op.key()).collect();
        keys.sort_unstable();
        keys.dedup();
        for key in keys {
            let Some(ks) = self.keys.get_mut(&key) else {
                continue;
            };
            for item in ks.queue.iter_mut().filter(|i| i.txn == txn) {
                item.status = status;
            }
            // Read-only reads of its version: answered, or run again on what is left.
            let (woken, still): (Vec<RoWait>, Vec<RoWait>) = std::mem::take(&mut ks.ro_waiting)
                .into_iter()
                .partition(|w| w.writer == txn);
            ks.ro_waiting = still;
            for w in woken {
                let Some((ts, t_ro)) = self.txns.get(&w.txn).map(|t| (t.ts, t.t_ro)) else {
                    continue;
                };
                if commit {
                    self.answer(w.txn, w.index, ExecResult::Done(w.reply));
                } else {
                    // Run again on what is left, under the same freshness check: the newest
                    // version may now be one the client never heard of.
                    self.execute_read_only(w.txn, w.index, key, ts, t_ro);
                }
            }
            self.timing_control(key);
            self.prune_versions(key);
        }
    }

    /// Sends `result` for request `index` of `txn` and remembers it for duplicates.
    fn answer(&mut self, txn: TxnId, index: u32, result: ExecResult) {
        let Some(t) = self.txns.get_mut(&txn) else {
            return;
        };
        t.answered[index as usize] = Some(result);
        let ts_server = t.ts_server;
        // A read-only transaction is done here once every read is answered: nothing decides
        // it, nobody asks for its record, and its record was most of what a server kept
        // (Google-F1 and TAO are nearly all reads). A late duplicate of its request runs the
        // reads again (until the client's mark passes it) and its client, which has moved
        // on, ignores the answer.
        if t.read_only && t.answered.iter().all(Option::is_some) {
            self.txns.remove(&txn);
        }
        self.send_result(txn, index, result, ts_server);
    }

    fn send_result(&mut self, txn: TxnId, index: u32, result: ExecResult, ts_server: u64) {
        self.out.push((
            txn.client,
            Msg::ExecReply {
                txn,
                results: vec![(index, result)],
                ts_server,
                latest: self.decided_through(),
            },
        ));
    }
}

fn initial_version(id: u64) -> Version {
    Version {
        id,
        value: 0,
        tw: Ts::default(),
        tr: Ts::default(),
        writer: None,
        committed: true,
        read: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: Key = 1;
    const B: Key = 2;

    fn ts(clk: u64, cid: ClientId) -> Ts {
        Ts { clk, cid }
    }

    fn txn(client: ClientId, seq: u64) -> TxnId {
        TxnId { client, seq }
    }

    fn exec(s: &mut Server, t: TxnId, at: Ts, ops: &[Op]) -> Vec<(u32, ExecResult)> {
        s.on_message(
            0,
            Msg::Execute {
                txn: t,
                ts: at,
                shot: 1,
                ops: ops.to_vec(),
                t_ro: None,
                coord: 0,
                cohorts: None,
                done: Finished::default(),
            },
        );
        replies(s)
    }

    fn replies(s: &mut Server) -> Vec<(u32, ExecResult)> {
        s.drain()
            .into_iter()
            .flat_map(|(_, m)| match m {
                Msg::ExecReply { results, .. } => results,
                _ => Vec::new(),
            })
            .collect()
    }

    fn done(r: &[(u32, ExecResult)]) -> OpReply {
        match r {
            [(_, ExecResult::Done(reply))] => *reply,
            other => panic!("expected one answer, got {other:?}"),
        }
    }

    /// A write after a read at a higher timestamp is refined past it, keeping the writer's
    /// client id (digest pitfall 2); a read raises `t_r` only upward (Fig 1b).
    #[test]
    fn refinement_orders_a_write_after_the_newest_read() {
        let mut s = Server::new(Mistakes::default());
        let r = done(&exec(&mut s, txn(1, 1), ts(10, 1), &[Op::Read(A)]));
        assert_eq!((r.value, r.tr), (Some(0), ts(10, 1)));
        s.on_message(
            0,
            Msg::Decide {
                txn: txn(1, 1),
                commit: true,
            },
        );
        let w = done(&exec(&mut s, txn(2, 1), ts(5, 2), &[Op::Write(A, 7)]));
        assert_eq!((w.tw, w.tr), (ts(11, 2), ts(11, 2)));
        s.check_invariants().unwrap();
    }

    /// Response timing control (D1): a read of an undecided write is answered only once
    /// the write commits, and with its value; if the write aborts, the read runs again.
    #[test]
    fn a_read_of_an_undecided_write_waits_for_its_decision() {
        let mut s = Server::new(Mistakes::default());
        done(&exec(&mut s, txn(1, 1), ts(10, 1), &[Op::Write(A, 7)]));
        assert!(exec(&mut s, txn(2, 1), ts(20, 2), &[Op::Read(A)]).is_empty());
        s.on_message(
            0,
            Msg::Decide {
                txn: txn(1, 1),
                commit: true,
            },
        );
        assert_eq!(done(&replies(&mut s)).value, Some(7));
        // Aborted instead: the held read runs again and sees what is left.
        done(&exec(&mut s, txn(3, 1), ts(30, 3), &[Op::Write(B, 8)]));
        assert!(exec(&mut s, txn(4, 1), ts(40, 4), &[Op::Read(B)]).is_empty());
        s.on_message(
            0,
            Msg::Decide {
                txn: txn(3, 1),
                commit: false,
            },
        );
        assert_eq!(done(&replies(&mut s)).value, Some(0));
        s.check_invariants().unwrap();
    }

    /// Early abort (Lemma 3): a request that would wait behind an undecided one with a
    /// higher timestamp is refused, not executed; one with a higher timestamp waits.
    #[test]
    fn a_lower_timestamp_behind_an_undecided_higher_one_aborts_early() {
        let mut s = Server::new(Mistakes::default());
        done(&exec(&mut s, txn(1, 1), ts(20, 1), &[Op::Write(A, 7)]));
        let r = exec(
            &mut s,
            txn(2, 1),
            ts(10, 2),
            &[Op::Read(A), Op::Write(B, 3)],
        );
        assert_eq!(
            r,
            vec![(0, ExecResult::EarlyAbort), (1, ExecResult::EarlyAbort)]
        );
        // Nothing of it ran: B has no version of it.
        assert!(s.committed_versions().iter().all(|(k, _)| *k != B));
        assert!(exec(&mut s, txn(3, 1), ts(30, 3), &[Op::Write(A, 9)]).is_empty());
    }

    /// Smart retry moves an unread write and raises a read's `t_r`, all or nothing; it
    /// never moves a version that a read at a lower timestamp saw (`Version::read`), which
    /// the paper's test alone (`t_w != t_r`) would.
    #[test]
    fn smart_retry_moves_only_unread_versions() {
        smart_retry_case(Mistakes::default());
    }

    fn smart_retry_case(mistakes: Mistakes) {
        let mut s = Server::new(mistakes);
        let t = txn(1, 1);
        exec(&mut s, t, ts(10, 1), &[Op::Write(A, 7), Op::Read(B)]);
        s.on_message(
            0,
            Msg::SmartRetry {
                txn: t,
                to: ts(15, 9),
            },
        );
        assert!(matches!(
            s.drain()[..],
            [(1, Msg::SmartRetryReply { ok: true, .. })]
        ));
        // A write refined past an earlier read (`t_w` 30 for timestamp 20)...
        done(&exec(&mut s, txn(4, 1), ts(29, 4), &[Op::Read(B)]));
        s.on_message(
            0,
            Msg::Decide {
                txn: txn(4, 1),
                commit: true,
            },
        );
        s.on_message(
            0,
            Msg::Decide {
                txn: t,
                commit: true,
            },
        );
        s.drain();
        let u = txn(2, 1);
        assert_eq!(
            done(&exec(&mut s, u, ts(20, 2), &[Op::Write(B, 8)])).tw,
            ts(30, 2)
        );
        // ...then read at 25, above the writer's timestamp (so not aborted early) and below
        // `t_w` (so `t_r` stays 30):
        assert!(exec(&mut s, txn(3, 1), ts(25, 3), &[Op::Read(B)]).is_empty());
        // ...but the write was read: it may not move (`t_w == t_r` here: the paper's test
        // alone would move it).
        s.on_message(
            0,
            Msg::SmartRetry {
                txn: u,
                to: ts(35, 9),
            },
        );
        let moved = matches!(s.drain()[..], [(2, Msg::SmartRetryReply { ok: true, .. })]);
        assert!(!moved, "moved a version that was read");
        s.check_invariants().unwrap();
    }

    /// Read-modify-write (§5.1): the write waits for another's read of the version it
    /// overwrites (D2), and aborts if another write came after its read.
    #[test]
    fn a_read_modify_write_waits_for_readers_and_aborts_after_another_write() {
        let mut s = Server::new(Mistakes::default());
        let (t, u) = (txn(1, 1), txn(2, 1));
        done(&exec(&mut s, t, ts(10, 1), &[Op::Read(A)]));
        done(&exec(&mut s, u, ts(8, 2), &[Op::Read(A)]));
        // t's second shot writes A back: held behind u's undecided read (a lower
        // timestamp: no early abort).
        let shot_2 = |ops: Vec<Op>, txn: TxnId, clk: u64, cid: ClientId| Msg::Execute {
            txn,
            ts: ts(clk, cid),
            shot: 2,
            ops,
            t_ro: None,
            coord: 0,
            cohorts: None,
            done: Finished::default(),
        };
        s.on_message(0, shot_2(vec![Op::Write(A, 5)], t, 10, 1));
        assert!(replies(&mut s).is_empty());
        s.on_message(
            0,
            Msg::Decide {
                txn: u,
                commit: true,
            },
        );
        assert_eq!(done(&replies(&mut s)).tw, ts(11, 1));
        s.on_message(
            0,
            Msg::Decide {
                txn: t,
                commit: true,
            },
        );
        // Another write between the read and the write back: the write back aborts.
        let (x, y) = (txn(3, 1), txn(4, 1));
        done(&exec(&mut s, x, ts(30, 3), &[Op::Read(B)]));
        assert!(exec(&mut s, y, ts(40, 4), &[Op::Write(B, 8)]).is_empty());
        s.on_message(0, shot_2(vec![Op::Write(B, 9)], x, 30, 3));
        let r = replies(&mut s);
        // x's write back (its second request here) is refused, and x gone, y's write leaves.
        assert!(r.contains(&(1, ExecResult::EarlyAbort)), "{r:?}");
        assert!(
            r.iter()
                .any(|(i, e)| *i == 0 && matches!(e, ExecResult::Done(_))),
            "{r:?}"
        );
        s.check_invariants().unwrap();
    }

    /// An abort that overtakes the requests it aborts: they arrive to find it decided, are
    /// refused (a client paused while its backup coordinator aborted it learns so), and
    /// leave nothing undecided behind.
    #[test]
    fn requests_after_their_abort_are_refused() {
        let mut s = Server::new(Mistakes::default());
        s.on_message(
            0,
            Msg::Decide {
                txn: txn(1, 1),
                commit: false,
            },
        );
        assert_eq!(
            exec(&mut s, txn(1, 1), ts(10, 1), &[Op::Write(A, 7)]),
            vec![(0, ExecResult::EarlyAbort)]
        );
        assert!(s.undecided().is_empty());
        assert_eq!(
            done(&exec(&mut s, txn(2, 1), ts(5, 2), &[Op::Read(A)])).value,
            Some(0)
        );
    }

    /// A read-write returns the value it replaced; if that value's writer aborts, its
    /// held answer reads the version below instead, and a commit then installs it on top.
    #[test]
    fn a_read_write_rereads_when_the_version_it_read_aborts() {
        let mut s = Server::new(Mistakes::default());
        done(&exec(&mut s, txn(1, 1), ts(10, 1), &[Op::Write(A, 7)]));
        // Above the undecided write: its answer waits for it (D3).
        assert!(exec(&mut s, txn(2, 1), ts(20, 2), &[Op::ReadWrite(A, 8)]).is_empty());
        s.on_message(
            0,
            Msg::Decide {
                txn: txn(1, 1),
                commit: false,
            },
        );
        let r = done(&replies(&mut s));
        assert_eq!(
            (r.value, r.tw),
            (Some(0), ts(20, 2)),
            "reads the initial value now"
        );
        s.on_message(
            0,
            Msg::Decide {
                txn: txn(2, 1),
                commit: true,
            },
        );
        assert_eq!(s.committed_versions(), vec![(A, vec![0, 8])]);
        s.check_invariants().expect("invariants");
    }

    /// A one-shot execute from a client whose one incarnation numbers from 1.
    fn execute_msg(txn: TxnId, at: Ts, ops: Vec<Op>, done_below: u64) -> Msg {
        let done = Finished {
            from: 1,
            below: done_below,
        };
        execute_from(txn, at, ops, done)
    }

    fn execute_from(txn: TxnId, at: Ts, ops: Vec<Op>, done: Finished) -> Msg {
        Msg::Execute {
            txn,
            ts: at,
            shot: 1,
            ops,
            t_ro: None,
            coord: 0,
            cohorts: Some(vec![0]),
            done,
        }
    }

    /// A process that takes over the id of one that died inside a transaction speaks
    /// only for its own numbers: the dead one's transaction stays a question this server
    /// answers for its backup coordinator (before, the new process's first request said
    /// "everything below is finished", and the question was ignored for good).
    #[test]
    fn a_new_incarnation_leaves_the_dead_ones_transaction_to_its_backup() {
        let mut s = Server::new(Mistakes::default()).with_recovery(0, 1_000);
        let (dead, fresh) = (txn(1, 5), txn(1, 9_000));
        let first = Finished { from: 1, below: 5 };
        s.on_message(
            0,
            execute_from(dead, ts(10, 1), vec![Op::Write(A, 5)], first),
        );
        done(&replies(&mut s));
        let second = Finished {
            from: 9_000,
            below: 9_000,
        };
        s.on_message(0, execute_from(fresh, ts(20, 1), vec![Op::Read(B)], second));
        done(&replies(&mut s));
        assert_eq!(s.undecided(), vec![dead, fresh]);
        // The new incarnation finishes its first transaction and says so.
        s.on_message(
            0,
            Msg::Decide {
                txn: fresh,
                commit: true,
            },
        );
        s.drain();
        let third = Finished {
            from: 9_000,
            below: 9_001,
        };
        s.on_message(
            0,
            execute_from(txn(1, 9_001), ts(30, 1), vec![Op::Read(B)], third),
        );
        done(&replies(&mut s));
        assert_eq!(s.undecided(), vec![dead, txn(1, 9_001)]);
        // Another cohort's backup coordinator asks about the dead one's transaction, and
        // about one of its numbers this server never saw: both are answered.
        for asked in [dead, txn(1, 6)] {
            s.on_message(
                0,
                Msg::GetRecord {
                    txn: asked,
                    from: 1,
                },
            );
            let answers = s.drain_peers();
            assert!(
                matches!(answers.as_slice(), [(1, Msg::Record { txn, .. })] if *txn == asked),
                "{asked:?}: {answers:?}"
            );
        }
        s.on_message(
            0,
            Msg::GetRecord {
                txn: fresh,
                from: 1,
            },
        );
        assert!(
            s.drain_peers().is_empty(),
            "a finished one is a late duplicate"
        );
        s.check_invariants().unwrap();
    }

    /// Once the client says a transaction is finished, its record goes and a late
    /// duplicate of its request is ignored; before, the same duplicate is answered again
    /// from the record (and never runs twice either way).
    #[test]
    fn a_finished_transaction_is_forgotten_and_its_late_duplicate_ignored() {
        let mut s = Server::new(Mistakes::default());
        let (t1, t2) = (txn(1, 1), txn(1, 2));
        let first = execute_msg(t1, ts(10, 1), vec![Op::Write(A, 5)], 1);
        s.on_message(0, first.clone());
        done(&replies(&mut s));
        s.on_message(
            0,
            Msg::Decide {
                txn: t1,
                commit: true,
            },
        );
        s.drain();
        s.on_message(0, first.clone());
        assert_eq!(
            replies(&mut s).len(),
            1,
            "a duplicate gets its answer again"
        );
        assert_eq!(s.footprint().records, 1);
        s.on_message(0, execute_msg(t2, ts(20, 1), vec![Op::Read(B)], 2));
        done(&replies(&mut s));
        assert_eq!(s.footprint().records, 1, "t1 is forgotten, t2 is kept");
        for late in [
            first,
            Msg::Decide {
                txn: t1,
                commit: false,
            },
        ] {
            s.on_message(0, late);
            assert!(s.drain().is_empty());
        }
        assert_eq!(s.footprint().records, 1);
        assert_eq!(s.undecided(), vec![t2]);
        assert_eq!(s.committed_versions(), vec![(A, vec![0, 5]), (B, vec![0])]);
        s.check_invariants().unwrap();
    }

    /// Superseded committed versions are pruned as transactions decide; with the history
    /// kept their values stay for the checker, without it they are gone.
    #[test]
    fn superseded_versions_are_pruned_and_kept_only_as_history() {
        for keep in [true, false] {
            let mut s = Server::new(Mistakes::default());
            if !keep {
                s = s.without_history();
            }
            for seq in 1..=10 {
                let t = txn(1, seq);
                s.on_message(
                    0,
                    execute_msg(t, ts(seq * 10, 1), vec![Op::Write(A, seq)], seq),
                );
                done(&replies(&mut s));
                s.on_message(
                    0,
                    Msg::Decide {
                        txn: t,
                        commit: true,
                    },
                );
                s.drain();
                s.check_invariants().unwrap();
            }
            assert!(s.footprint().versions <= 2, "{:?}", s.footprint());
            let values = &s.committed_versions()[0].1;
            if keep {
                assert_eq!(values, &(0..=10).collect::<Vec<u64>>());
            } else {
                assert_eq!(values.last(), Some(&10));
                assert!(values.len() <= 2);
            }
        }
    }

    /// A version an undecided read refers to stays (smart retry may move its `t_r`), and so
    /// does the one below an undecided write (an abort makes it the newest again).
    #[test]
    fn versions_in_use_are_not_pruned() {
        let mut s = Server::new(Mistakes::default()).without_history();
        let reader = txn(2, 1);
        let write = |s: &mut Server, seq: u64, v: u64| {
            let t = txn(1, seq);
            s.on_message(
                0,
                execute_msg(t, ts(seq * 10, 1), vec![Op::Write(A, v)], seq),
            );
            t
        };
        let t1 = write(&mut s, 1, 1);
        s.on_message(
            0,
            Msg::Decide {
                txn: t1,
                commit: true,
            },
        );
        s.drain();
        s.on_message(0, execute_msg(reader, ts(15, 2), vec![Op::Read(A)], 1));
        assert_eq!(done(&replies(&mut s)).value, Some(1));
        for seq in 2..6 {
            let t = write(&mut s, seq, seq);
            s.on_message(
                0,
                Msg::Decide {
                    txn: t,
                    commit: true,
                },
            );
            s.drain();
        }
        // The reader's version (value 1) is still there for a smart retry to move.
        s.on_message(
            0,
            Msg::SmartRetry {
                txn: reader,
                to: ts(18, 2),
            },
        );
        assert!(s
            .drain()
            .iter()
            .any(|(_, m)| matches!(m, Msg::SmartRetryReply { ok: true, .. })));
        s.on_message(
            0,
            Msg::Decide {
                txn: reader,
                commit: true,
            },
        );
        let t6 = write(&mut s, 6, 6);
        s.on_message(
            0,
            Msg::Decide {
                txn: t6,
                commit: false,
            },
        );
        s.drain();
        let v = &s.committed_versions()[0].1;
        assert_eq!(
            v.last(),
            Some(&5),
            "the abort left the version below it newest"
        );
        s.check_invariants().unwrap();
        assert!(s.footprint().versions <= 2, "{:?}", s.footprint());
    }
}
