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
//! - a response leaves at most once per execution of its request;
//! - a key is in memory only while something on it is in flight, and its versions up to
//!   the first undecided one are exactly the ones installed in the store (`store.rs`).
//!
//! **What is forgotten.** A key keeps its versions from the oldest one something may still
//! need (the one below an undecided version, a version an undecided request read) to the
//! newest; older committed ones are dropped when a transaction on the key is decided
//! (`Server::prune_versions`), and kept as bare values only while the history is kept for
//! a checker. A client names on each request the sequence number below which all its
//! transactions are finished; their records are dropped and their late duplicates ignored
//! (`Server::forget_finished`). A key with nothing in flight leaves memory altogether:
//! its newest version and `t_r` are in the [`Store`], and come back when a request needs
//! them. What stays is bounded by the transactions in flight, plus one record per crashed
//! client's last transaction and one mark per client.

mod decision;
mod forget;
mod inspect;
mod recovery;
mod timing;
mod unlogged;

pub use unlogged::FLOOR_AHEAD;

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use crate::store::{MemStore, Store, Stored};
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

/// A key's state while something on it is in flight; otherwise the key lives only in the
/// store (`store.rs`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct KeyState {
    /// Oldest first; the first is the newest decided version when the state was made (from
    /// the store), or an older one still needed.
    versions: Vec<Version>,
    queue: VecDeque<Item>,
    ro_waiting: Vec<RoWait>,
    /// The id of the newest version in the store: every committed version up to it is
    /// installed, and the next one goes once it and all below it are decided.
    installed: u64,
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

/// One shard's server (module docs), keeping what is decided in `S` (`store.rs`). `Clone`
/// and `Hash` for the model checker.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Server<S = MemStore> {
    mistakes: Mistakes,
    /// Keys with something in flight (module docs of `store.rs`); every other key is only
    /// in `store`.
    keys: BTreeMap<Key, KeyState>,
    store: S,
    /// Per key, every committed value the store was given, oldest first, while the
    /// history is kept for a checker.
    archive: BTreeMap<Key, Vec<Value>>,
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
    /// What a transport's message limit allows ([`Server::with_message_limits`]).
    limits: MessageLimits,
    /// The highest clock a replication group's host promised its unlogged reads stay
    /// within, and the one every write goes above since a new host applied the promises
    /// (`unlogged.rs`; both 0 outside a group).
    floor_promised: u64,
    floor: u64,
    /// A group host's record of its unlogged reads (`unlogged.rs`).
    unlogged: unlogged::UnloggedReads,
}

/// The bytes of keys and values a server takes in one request and puts in one message, so
/// that every message it sends fits a transport's frame ([`Server::with_message_limits`];
/// unlimited by default, as in the simulator).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MessageLimits {
    /// A request's key and value together, at most ([`Server::admits`] refuses more). So a
    /// read answers at most this many bytes of value.
    pub request_bytes_max: usize,
    /// The results merged into one answer ([`Server::drain`]), at most, counted as their
    /// values' bytes plus [`crate::wire::RESULT_OVERHEAD_MAX`] each, unless a single result
    /// is more.
    pub reply_bytes_max: usize,
}

impl Default for MessageLimits {
    fn default() -> MessageLimits {
        MessageLimits {
            request_bytes_max: usize::MAX,
            reply_bytes_max: usize::MAX,
        }
    }
}

impl Server<MemStore> {
    pub fn new(mistakes: Mistakes) -> Server {
        Server::with_store(mistakes, MemStore::new())
    }
}

impl<S: Store> Server<S> {
    /// A server keeping its decided versions in `store`.
    pub fn with_store(mistakes: Mistakes, store: S) -> Server<S> {
        Server {
            mistakes,
            keys: BTreeMap::new(),
            store,
            archive: BTreeMap::new(),
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
            limits: MessageLimits::default(),
            floor_promised: 0,
            floor: 0,
            unlogged: Default::default(),
        }
    }

    /// Drops pruned versions for good instead of keeping their values for
    /// [`Server::committed_versions`]: a long-running server's memory is then bounded by
    /// what is in flight. [`Server::committed_versions`] then lists only the versions kept.
    pub fn without_history(mut self) -> Server<S> {
        self.keep_history = false;
        self
    }

    /// Keeps every message within `limits` (a transport with a frame limit sets them).
    pub fn with_message_limits(mut self, limits: MessageLimits) -> Server<S> {
        self.limits = limits;
        self
    }

    /// Turns on client-failure handling (App. D): this server is `id`, and a read-write
    /// transaction still undecided `after` (this server's clock) since it arrived is
    /// recovered by its backup coordinator.
    pub fn with_recovery(mut self, id: ServerId, after: u64) -> Server<S> {
        self.id = id;
        self.recovery_after = Some(after);
        self
    }

    /// Messages to send, as (client, message). The answers to one transaction released by
    /// one event leave in one message (a read-only transaction's reads at a server, a run
    /// of reads a decision releases): as many messages as the paper's per-server rounds,
    /// unless they pass `MessageLimits::reply_bytes_max`; then they leave in several (a
    /// client takes a transaction's answers in any number of messages).
    pub fn drain(&mut self) -> Vec<(ClientId, Msg)> {
        let budget = self.limits.reply_bytes_max;
        let mut out: Vec<(ClientId, Msg)> = Vec::with_capacity(self.out.len());
        // Per transaction: the message its answers are merged into, and its bytes.
        let mut open_reply: Vec<(TxnId, usize, usize)> = Vec::new();
        for (c, msg) in std::mem::take(&mut self.out) {
            if let Msg::ExecReply {
                txn,
                results,
                latest,
                ..
            } = &msg
            {
                let bytes = reply_bytes(results);
                match open_reply.iter_mut().find(|(t, ..)| t == txn) {
                    Some((_, at, merged)) if merged.saturating_add(bytes) <= budget => {
                        if let Msg::ExecReply {
                            results: into,
                            latest: into_latest,
                            ..
                        } = &mut out[*at].1
                        {
                            into.extend(results.iter().cloned());
                            *into_latest = (*into_latest).max(*latest);
                        }
                        *merged += bytes;
                        continue;
                    }
                    Some(open) => *open = (*txn, out.len(), bytes),
                    None => open_reply.push((*txn, out.len(), bytes)),
                }
            }
            out.push((c, msg));
        }
        out
    }

    /// Handles a client's message; `now` is this server's clock.
    pub fn on_message(&mut self, now: u64, msg: Msg) {
        let txn = match msg {
            Msg::Group(note) => return self.on_group_note(note),
            _ => msg
                .txn()
                .expect("every other message names its transaction"),
        };
        if let Msg::Execute { done, .. } = &msg {
            self.forget_finished(txn.client, *done);
        }
        if self.is_forgotten(txn) {
            // A late duplicate (an execute, decision or smart retry the client sent again,
            // or a peer's recovery message) of a transaction whose client has finished it:
            // every server it reached has decided it and said so. Running it again would
            // make a new undecided transaction that nobody decides.
            return;
        }
        self.dispatch(now, msg);
    }

    /// Runs a message that is neither a late duplicate nor a group note.
    fn dispatch(&mut self, now: u64, msg: Msg) {
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
            | Msg::LastShotAck { .. }
            | Msg::Group(_) => {}
        }
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
                    .filter_map(|(i, a)| a.clone().map(|a| (i as u32, a)))
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
        t.ops.extend(ops.iter().cloned());
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
            let key = op.key().clone();
            let (version, reply) = self.run_op(txn, &op, ts);
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
            let queue = &mut self.keys.get_mut(&key).expect("run_op loaded it").queue;
            // Read-modify-write (§5.1, Appendix C): the paper puts the write's answer right
            // after its read's in the queue and sends it at once. Here it queues at the tail
            // and waits like any write for the other transactions' requests ahead (D2): the
            // paper's way let it overtake later reads of the version it overwrites, and a
            // reader of that version was then serialized before it while a transaction that
            // began after it returned was serialized after (the simulator found two such
            // cycles). After its read only reads of the same version can be queued (another
            // write aborts it, below), so the tail is right after them.
            queue.push_back(item);
            self.timing_control(&key);
        }
    }

    /// Whether `op` writes a key that `txn` read here (a read-modify-write) and another
    /// write has come since: then it must abort, the value it would write was computed from
    /// a version no longer the newest (§5.1).
    fn rmw_intervened(&self, txn: TxnId, op: &Op) -> bool {
        if !op.is_write() {
            return false;
        }
        let Some(ks) = self.keys.get(op.key()) else {
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
        let Some(ks) = self.keys.get(op.key()) else {
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
    fn run_op(&mut self, txn: TxnId, op: &Op, ts: Ts) -> (u64, OpReply) {
        self.load_key(op.key());
        let id = self.next_version;
        let ks = self.keys.get_mut(op.key()).expect("loaded");
        let curr = ks.versions.last_mut().expect("a key has a version");
        match op {
            Op::Write(_, value) | Op::ReadWrite(_, value) => {
                // A read-write reads the version its write goes right above: its `t_r`
                // need not rise (the write's `t_w` is above it anyway), and only the
                // write's pair goes to the safeguard.
                let replaced = op.reads().then(|| curr.value.clone());
                curr.read |= op.reads() && curr.writer != Some(txn);
                // Above the floor too: after a failover, the reads the last host answered
                // without logging them (`unlogged.rs`).
                let tw = Ts {
                    clk: ts.clk.max(curr.tr.clk.max(self.floor) + 1),
                    cid: ts.cid,
                };
                debug_assert!(tw > curr.tr && tw >= ts);
                ks.versions.push(Version {
                    id,
                    value: value.clone(),
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
                        value: Some(curr.value.clone()),
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
    fn execute_read_only(&mut self, txn: TxnId, index: u32, key: &Key, ts: Ts, t_ro: u64) {
        self.load_key(key);
        let ks = &self.keys[key];
        let newest = ks.versions.last().expect("a key has a version").id;
        if newest > t_ro && !self.mistakes.no_read_only_check {
            self.answer(txn, index, ExecResult::RoAbort);
            self.settle(key);
            return;
        }
        self.read_only_read(txn, index, key, ts);
    }

    fn read_only_read(&mut self, txn: TxnId, index: u32, key: &Key, ts: Ts) {
        let (version, reply) = self.run_op(txn, &Op::Read(key.clone()), ts);
        self.note_unlogged_raise(key);
        if let Some(t) = self.txns.get_mut(&txn) {
            t.versions[index as usize] = Some(version);
        }
        let ks = self.keys.get_mut(key).expect("run_op made it");
        let v = ks.versions.last().expect("read it");
        match v.writer.filter(|_| !v.committed) {
            Some(writer) if !self.mistakes.no_timing_control => ks.ro_waiting.push(RoWait {
                txn,
                index,
                writer,
                reply,
            }),
            _ => {
                self.answer(txn, index, ExecResult::Done(reply));
                self.settle(key);
            }
        }
    }

    /// Sends `result` for request `index` of `txn` and remembers it for duplicates.
    fn answer(&mut self, txn: TxnId, index: u32, result: ExecResult) {
        let Some(t) = self.txns.get_mut(&txn) else {
            return;
        };
        t.answered[index as usize] = Some(result.clone());
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

/// A decided version as the store gave it back: committed, by nobody now in flight.
fn stored_version(v: Stored) -> Version {
    Version {
        id: v.id,
        value: v.value,
        tw: v.tw,
        tr: v.tr,
        writer: None,
        committed: true,
        read: false,
    }
}

/// What `results` count against `MessageLimits::reply_bytes_max`.
fn reply_bytes(results: &[(u32, ExecResult)]) -> usize {
    results
        .iter()
        .map(|(_, r)| {
            let value = match r {
                ExecResult::Done(reply) => reply.value.as_ref().map_or(0, Value::len),
                _ => 0,
            };
            crate::wire::RESULT_OVERHEAD_MAX + value
        })
        .sum()
}

#[cfg(test)]
mod tests;
