//! A baseline server: one shard's committed versions, a lock table (dOCC, d2PL) or
//! TAPIR-CC's prepared reads and writes, and per transaction what it holds here.
//!
//! Every message is idempotent: a shot or a prepare answered once is answered again from
//! the cached reply, a decision applies once, and a decided transaction is remembered
//! (aborted ones too), so a late or duplicated request of an aborted attempt cannot take
//! a lock that nobody would release. Decided transactions are forgotten once their client
//! says it finished them (`done` on its requests, as NCC's server does), and a key
//! holds only its newest version (validation compares version numbers, and only the newest
//! one's timestamp is read); older values are kept aside only while the history is kept.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use super::{BMsg, Flavor, Version};
use crate::protocol::TxnServer;
use crate::types::{ClientId, Finished, Key, Op, Ts, TxnId, Value};

#[derive(Clone, Debug)]
struct KeyState {
    /// Committed versions, oldest first, each with the timestamp of its writer; the first
    /// is the initial value 0. TAPIR-CC orders versions by timestamp (its checks make
    /// commit order agree, asserted in `check_invariants`); the others by commit.
    versions: Vec<(Ts, Value)>,
    /// Versions dropped from the front of `versions` (numbers count them), and their
    /// values while the history is kept.
    pruned: Version,
    archived: Vec<Value>,
    /// The exclusive lock (dOCC from prepare, d2PL from execute).
    writer: Option<TxnId>,
    /// The shared locks.
    readers: BTreeSet<TxnId>,
    /// d2PL-wound-wait: transactions whose shot is parked on this key, in arrival order.
    waiting: Vec<TxnId>,
    /// TAPIR-CC: prepared reads and writes with their proposed timestamps, and the highest
    /// timestamp of a committed read (TAPIR's `lastRead`, which its write check compares
    /// with as Figure 10's line 9 does with the newest version: without it a write could
    /// commit below a read already committed above it).
    prepared_reads: BTreeMap<TxnId, Ts>,
    prepared_writes: BTreeMap<TxnId, Ts>,
    read_ts_max: Ts,
}

impl KeyState {
    fn new() -> KeyState {
        KeyState {
            versions: vec![(Ts::default(), Value::default())],
            pruned: 0,
            archived: Vec::new(),
            writer: None,
            readers: BTreeSet::new(),
            waiting: Vec::new(),
            prepared_reads: BTreeMap::new(),
            prepared_writes: BTreeMap::new(),
            read_ts_max: Ts::default(),
        }
    }

    fn latest(&self) -> (Value, Version, Ts) {
        let (ts, v) = self.versions.last().cloned().expect("the initial version");
        (v, self.pruned + self.versions.len() as Version - 1, ts)
    }

    /// Installs a committed version; older ones go (to `archived` if `keep`).
    fn install(&mut self, ts: Ts, v: Value, keep: bool) {
        self.versions.push((ts, v));
        let old = self.versions.len() - 1;
        self.pruned += old as Version;
        let gone = self.versions.drain(..old).map(|(_, v)| v);
        if keep {
            self.archived.extend(gone);
        }
    }

    /// The other transactions whose locks keep `txn` from locking (`write`: exclusively).
    fn conflicts(&self, txn: TxnId, write: bool) -> Vec<TxnId> {
        let mut holders: BTreeSet<TxnId> = self.writer.into_iter().filter(|&w| w != txn).collect();
        if write {
            // A writer that read the key first is in both: once is enough.
            holders.extend(self.readers.iter().copied().filter(|&r| r != txn));
        }
        holders.into_iter().collect()
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Status {
    Active,
    /// Voted yes: its locks (or prepared entries) stay until the decision, and it can no
    /// longer be wounded.
    Prepared,
    Committed,
    Aborted,
}

/// A shot parked on a lock (d2PL-wound-wait): the requests still to run and the reads so
/// far.
#[derive(Clone, Debug)]
struct Parked {
    shot: u32,
    ops: Vec<Op>,
    next: usize,
    reads: Vec<(Key, Value, Version)>,
}

#[derive(Clone, Debug)]
struct TxnState {
    ts: Ts,
    status: Status,
    /// Writes to install at commit.
    writes: BTreeMap<Key, Value>,
    /// Keys where it holds a lock or a TAPIR-CC prepared entry.
    holds: BTreeSet<Key>,
    parked: Option<Parked>,
    /// Answers already given, per shot, and the vote: sent again for a duplicate.
    shot_replies: BTreeMap<u32, BMsg>,
    vote: Option<BMsg>,
}

/// One baseline server (module docs).
#[derive(Clone, Debug)]
pub struct BaselineServer {
    flavor: Flavor,
    keys: BTreeMap<Key, KeyState>,
    txns: BTreeMap<TxnId, TxnState>,
    /// Wound-wait: parked transactions to try again (a lock they wait on was released).
    runnable: VecDeque<TxnId>,
    /// A decision that contradicts this server's own (a commit of a transaction it
    /// aborted): reported by `check_invariants`.
    violation: Option<String>,
    out: Vec<(ClientId, BMsg)>,
    /// Per client, the sequence number below which it has finished every transaction.
    finished: crate::finished::FinishedMarks,
    /// Keep superseded values for `committed_versions` (a history checker's).
    keep_history: bool,
}

impl BaselineServer {
    pub fn new(flavor: Flavor) -> BaselineServer {
        BaselineServer {
            flavor,
            keys: BTreeMap::new(),
            txns: BTreeMap::new(),
            runnable: VecDeque::new(),
            violation: None,
            out: Vec::new(),
            finished: Default::default(),
            keep_history: true,
        }
    }

    /// Drops superseded values for good (see [`crate::Server::without_history`]).
    pub fn without_history(mut self) -> BaselineServer {
        self.keep_history = false;
        self
    }

    /// Forgets `client`'s decided transactions in `done` (it finished them).
    fn forget_finished(&mut self, client: ClientId, done: Finished) {
        let decided = |t: &TxnState| matches!(t.status, Status::Committed | Status::Aborted);
        self.finished.forget(&mut self.txns, client, done, decided);
    }

    /// Whether `txn` is one its client finished and this server forgot: a message about
    /// it is a late duplicate.
    fn is_forgotten(&self, txn: TxnId) -> bool {
        !self.txns.contains_key(&txn) && self.finished.finished(txn)
    }

    fn key(&mut self, k: &Key) -> &mut KeyState {
        if !self.keys.contains_key(k) {
            self.keys.insert(k.clone(), KeyState::new());
        }
        self.keys.get_mut(k).expect("inserted")
    }

    fn txn(&mut self, txn: TxnId, ts: Ts) -> &mut TxnState {
        self.txns.entry(txn).or_insert_with(|| TxnState {
            ts,
            status: Status::Active,
            writes: BTreeMap::new(),
            holds: BTreeSet::new(),
            parked: None,
            shot_replies: BTreeMap::new(),
            vote: None,
        })
    }

    fn reply(&mut self, txn: TxnId, msg: BMsg) {
        self.out.push((txn.client, msg));
    }

    fn on_execute(&mut self, txn: TxnId, ts: Ts, shot: u32, ops: Vec<Op>) {
        let flavor = self.flavor;
        let st = self.txn(txn, ts);
        if let Some(r) = st.shot_replies.get(&shot).cloned() {
            return self.reply(txn, r);
        }
        if st.status == Status::Aborted {
            let r = BMsg::ExecReply {
                txn,
                shot,
                ok: false,
                reads: Vec::new(),
            };
            return self.reply(txn, r);
        }
        if st.status != Status::Active || st.parked.is_some() {
            return; // a duplicate of a shot still waiting, or of one long answered
        }
        match flavor {
            Flavor::Docc | Flavor::TapirCc => {
                // Reads only (writes wait at the client), without locks or checks: the
                // newest committed version, validated at prepare.
                let reads = ops
                    .iter()
                    .map(|op| {
                        debug_assert!(!op.is_write(), "writes are buffered at the client");
                        let (v, ver, _) = self.key(op.key()).latest();
                        (op.key().clone(), v, ver)
                    })
                    .collect();
                self.answer_shot(txn, shot, true, reads);
            }
            Flavor::D2plNoWait | Flavor::D2plWoundWait => {
                self.txn(txn, ts).parked = Some(Parked {
                    shot,
                    ops,
                    next: 0,
                    reads: Vec::new(),
                });
                self.advance(txn);
            }
        }
    }

    fn answer_shot(&mut self, txn: TxnId, shot: u32, ok: bool, reads: Vec<(Key, Value, Version)>) {
        let r = BMsg::ExecReply {
            txn,
            shot,
            ok,
            reads,
        };
        self.txns
            .get_mut(&txn)
            .expect("answering a known transaction")
            .shot_replies
            .insert(shot, r.clone());
        self.reply(txn, r);
    }

    /// d2PL: runs the parked shot's requests, each after taking its lock. No-wait aborts
    /// at the first refusal; wound-wait aborts the younger unprepared holders in its way
    /// and parks behind the rest.
    fn advance(&mut self, txn: TxnId) {
        loop {
            let st = &self.txns[&txn];
            let Some(p) = st.parked.as_ref() else {
                return; // aborted (wounded) meanwhile, or already answered
            };
            let ts = st.ts;
            let Some(op) = p.ops.get(p.next).cloned() else {
                let p = self
                    .txns
                    .get_mut(&txn)
                    .expect("known")
                    .parked
                    .take()
                    .expect("parked");
                return self.answer_shot(txn, p.shot, true, p.reads);
            };
            let k = op.key().clone();
            let holders = self.key(&k).conflicts(txn, op.is_write());
            if holders.is_empty() {
                let key = self.key(&k);
                key.waiting.retain(|&t| t != txn);
                if op.is_write() {
                    key.writer = Some(txn);
                } else if key.writer != Some(txn) {
                    key.readers.insert(txn);
                }
                let (v, ver, _) = key.latest();
                let st = self.txns.get_mut(&txn).expect("known");
                st.holds.insert(k.clone());
                let p = st.parked.as_mut().expect("parked");
                if op.reads() {
                    p.reads.push((k.clone(), v, ver));
                }
                if let Some(value) = op.written() {
                    st.writes.insert(k, value.clone());
                }
                p.next += 1;
                continue;
            }
            if self.flavor == Flavor::D2plNoWait {
                return self.abort_here(txn);
            }
            // Wound-wait: wound every younger holder that has not voted; wait for the rest.
            let mut blocked = false;
            for h in holders {
                let hs = &self.txns[&h];
                if ts < hs.ts && hs.status == Status::Active {
                    self.abort_here(h);
                } else {
                    blocked = true;
                }
            }
            if blocked {
                let key = self.key(&k);
                if !key.waiting.contains(&txn) {
                    key.waiting.push(txn);
                }
                return;
            }
        }
    }

    /// Aborts `txn` here: releases what it holds, answers a parked shot with the refusal
    /// (so its client learns at once), and lets the waiters on its keys try again.
    fn abort_here(&mut self, txn: TxnId) {
        let st = self.txns.get_mut(&txn).expect("known");
        debug_assert!(matches!(st.status, Status::Active | Status::Prepared));
        st.status = Status::Aborted;
        st.writes.clear();
        let parked = st.parked.take();
        self.release(txn);
        for key in self.keys.values_mut() {
            key.waiting.retain(|&t| t != txn);
        }
        if let Some(p) = parked {
            self.answer_shot(txn, p.shot, false, Vec::new());
        }
    }

    /// Drops `txn`'s locks and prepared entries and queues the waiters on those keys.
    fn release(&mut self, txn: TxnId) {
        let holds = std::mem::take(&mut self.txns.get_mut(&txn).expect("known").holds);
        for k in holds {
            let key = self.key(&k);
            if key.writer == Some(txn) {
                key.writer = None;
            }
            key.readers.remove(&txn);
            key.prepared_reads.remove(&txn);
            key.prepared_writes.remove(&txn);
            let waiting = key.waiting.clone();
            self.runnable.extend(waiting);
        }
    }

    fn on_prepare(
        &mut self,
        txn: TxnId,
        ts: Ts,
        reads: Vec<(Key, Version)>,
        writes: Vec<(Key, Value)>,
        execute: Vec<Key>,
    ) {
        let st = self.txn(txn, ts);
        if let Some(v) = st.vote.clone() {
            return self.reply(txn, v);
        }
        let vote = match st.status {
            Status::Aborted => Err(None),
            Status::Committed | Status::Prepared => return,
            Status::Active => match self.flavor {
                Flavor::Docc => self.prepare_docc(txn, &reads, &writes),
                Flavor::D2plNoWait | Flavor::D2plWoundWait => {
                    if self.txns[&txn].parked.is_some() {
                        return; // its shot has not run: the client cannot be preparing
                    }
                    self.txns.get_mut(&txn).expect("known").status = Status::Prepared;
                    Ok(Vec::new())
                }
                Flavor::TapirCc => self.prepare_tapir(txn, ts, reads, &writes, &execute),
            },
        };
        let msg = match vote {
            Ok(values) => BMsg::PrepareReply {
                txn,
                ok: true,
                reads: values,
                retry_above: None,
            },
            Err(retry_above) => {
                if matches!(self.txns[&txn].status, Status::Active) {
                    self.abort_here(txn);
                }
                BMsg::PrepareReply {
                    txn,
                    ok: false,
                    reads: Vec::new(),
                    retry_above,
                }
            }
        };
        self.txns.get_mut(&txn).expect("known").vote = Some(msg.clone());
        self.reply(txn, msg);
    }

    /// dOCC's validation: each read still the newest version and not write-locked by
    /// another; each write lockable. Then everything is locked (reads shared) until the
    /// decision, so no two conflicting transactions are ever both prepared: validating
    /// reads without locking them lets two transactions validate at different servers at
    /// interleaved moments and both commit a write skew. Read-only transactions too, as
    /// the paper runs dOCC (three rounds for all); they could validate without locks and
    /// skip the decision (their reads were all current at one moment, after the last
    /// execute and before the first validation), which the paper's baseline does not do.
    fn prepare_docc(
        &mut self,
        txn: TxnId,
        reads: &[(Key, Version)],
        writes: &[(Key, Value)],
    ) -> Result<Vec<(Key, Value, Version)>, Option<Ts>> {
        for (k, ver) in reads {
            let key = self.key(k);
            if key.latest().1 != *ver || !key.conflicts(txn, false).is_empty() {
                return Err(None);
            }
        }
        for (k, _) in writes {
            if !self.key(k).conflicts(txn, true).is_empty() {
                return Err(None);
            }
        }
        for (k, _) in reads {
            self.key(k).readers.insert(txn);
        }
        for (k, _) in writes {
            self.key(k).writer = Some(txn);
        }
        let st = self.txns.get_mut(&txn).expect("known");
        st.holds.extend(reads.iter().map(|r| r.0.clone()));
        st.holds.extend(writes.iter().map(|w| w.0.clone()));
        st.writes = writes.iter().cloned().collect();
        st.status = Status::Prepared;
        Ok(Vec::new())
    }

    /// TAPIR-CC: runs the merged reads, then Figure 10's checks at the proposed timestamp
    /// `ts`, plus the third check. A refusal says which timestamp could pass (RETRY), or
    /// none (ABORT, ABSTAIN): the client starts again either way.
    fn prepare_tapir(
        &mut self,
        txn: TxnId,
        ts: Ts,
        mut reads: Vec<(Key, Version)>,
        writes: &[(Key, Value)],
        execute: &[Key],
    ) -> Result<Vec<(Key, Value, Version)>, Option<Ts>> {
        let mut values = Vec::new();
        for k in execute {
            let (v, ver, _) = self.key(k).latest();
            values.push((k.clone(), v, ver));
            reads.push((k.clone(), ver));
        }
        for (k, ver) in &reads {
            let key = self.key(k);
            let (_, latest, _) = key.latest();
            // Line 2: a newer version exists.
            if *ver < latest {
                return Err(None);
            }
            // Line 4: a prepared write below our timestamp would slip under the read.
            let min_write = key
                .prepared_writes
                .iter()
                .filter(|(t, _)| **t != txn)
                .map(|(_, &w)| w)
                .min();
            if min_write.is_some_and(|w| ts > w) {
                return Err(None);
            }
            // Not in Figure 10, implied by reading "at" ts: the version read must be older
            // than the reader (with skewed clocks a read can see a version from its
            // future, and timestamp order would then put it before its own source).
            let written_at = key.latest().2; // `ver` is the newest: checked above
            if ts < written_at {
                return Err(Some(written_at));
            }
        }
        for (k, _) in writes {
            let key = self.key(k);
            // Lines 7-8: below a prepared read.
            let max_read = key
                .prepared_reads
                .iter()
                .filter(|(t, _)| **t != txn)
                .map(|(_, &r)| r)
                .max();
            if let Some(r) = max_read.filter(|&r| ts < r) {
                return Err(Some(r));
            }
            // Lines 9-10: below the newest version (or a committed read of it).
            let floor = key.latest().2.max(key.read_ts_max);
            if ts < floor {
                return Err(Some(floor));
            }
            // The third check: another write to the key is prepared.
            if key.prepared_writes.keys().any(|&t| t != txn) {
                return Err(None);
            }
        }
        for (k, _) in &reads {
            self.key(k).prepared_reads.insert(txn, ts);
        }
        for (k, _) in writes {
            self.key(k).prepared_writes.insert(txn, ts);
        }
        let st = self.txns.get_mut(&txn).expect("known");
        st.holds.extend(reads.iter().map(|r| r.0.clone()));
        st.holds.extend(writes.iter().map(|w| w.0.clone()));
        st.writes = writes.iter().cloned().collect();
        st.status = Status::Prepared;
        Ok(values)
    }

    fn on_decide(&mut self, txn: TxnId, commit: bool) {
        // A decision for a transaction never seen here (its requests lost) leaves a
        // tombstone, so they are refused if they arrive after all.
        let st = self.txn(txn, Ts::default());
        match (st.status, commit) {
            (Status::Active | Status::Prepared, true) => {
                let parked = st.parked.is_some();
                let ts = st.ts;
                let writes = std::mem::take(&mut st.writes);
                st.status = Status::Committed;
                let reads: Vec<Key> = st.holds.iter().cloned().collect();
                let (keep, tapir) = (self.keep_history, self.flavor == Flavor::TapirCc);
                for (k, v) in writes {
                    let key = self.key(&k);
                    // TAPIR-CC's checks make commit order timestamp order (the newest
                    // version is all that is kept to compare with).
                    let newest = key.latest().2;
                    key.install(ts, v, keep);
                    if tapir && newest >= ts && self.violation.is_none() {
                        self.violation = Some(format!(
                            "key {k}: {txn:?} installed at {ts:?}, not above the newest {newest:?}"
                        ));
                    }
                }
                if self.flavor == Flavor::TapirCc {
                    for k in reads {
                        let key = self.key(&k);
                        if key.prepared_reads.contains_key(&txn) {
                            key.read_ts_max = key.read_ts_max.max(ts);
                        }
                    }
                }
                self.release(txn);
                if parked {
                    self.violation = Some(format!("{txn:?} committed with a shot still parked"));
                }
            }
            (Status::Active | Status::Prepared, false) => self.abort_here(txn),
            (Status::Aborted, true) => {
                self.violation = Some(format!("{txn:?} committed after this server aborted it"));
            }
            (Status::Committed, false) => {
                self.violation = Some(format!("{txn:?} aborted after it committed here"));
            }
            (Status::Aborted, false) | (Status::Committed, true) => {}
        }
        self.reply(txn, BMsg::DecideAck { txn });
    }
}

impl TxnServer for BaselineServer {
    type Msg = BMsg;

    /// An execution or a prepare for a transaction it holds no record of and has not
    /// finished (TAPIR-CC's one-shot transactions and dOCC's write-only participants begin
    /// with a prepare); anything else acts on a transaction begun.
    fn starts_work(&self, msg: &BMsg) -> bool {
        match msg {
            BMsg::Execute { txn, .. } | BMsg::Prepare { txn, .. } => {
                !self.txns.contains_key(txn) && !self.is_forgotten(*txn)
            }
            _ => false,
        }
    }

    fn on_message(&mut self, _now: u64, msg: BMsg) {
        if let BMsg::Execute { txn, done, .. } | BMsg::Prepare { txn, done, .. } = &msg {
            self.forget_finished(txn.client, *done);
        }
        if self.is_forgotten(msg.txn()) {
            return;
        }
        match msg {
            BMsg::Execute {
                txn, ts, shot, ops, ..
            } => self.on_execute(txn, ts, shot, ops),
            BMsg::Prepare {
                txn,
                ts,
                reads,
                writes,
                execute,
                ..
            } => self.on_prepare(txn, ts, reads, writes, execute),
            BMsg::Decide { txn, commit } => self.on_decide(txn, commit),
            BMsg::ExecReply { .. } | BMsg::PrepareReply { .. } | BMsg::DecideAck { .. } => {}
        }
        while let Some(t) = self.runnable.pop_front() {
            self.advance(t);
        }
    }

    fn drain(&mut self) -> Vec<(ClientId, BMsg)> {
        std::mem::take(&mut self.out)
    }

    fn footprint(&self) -> crate::protocol::Footprint {
        crate::protocol::Footprint {
            records: self.txns.len(),
            versions: self.keys.values().map(|k| k.versions.len()).sum(),
            keys: self.keys.len(),
        }
    }

    fn check_invariants(&self) -> Result<(), String> {
        if let Some(v) = &self.violation {
            return Err(v.clone());
        }
        let live = |t: &TxnId, k: &Key| {
            self.txns.get(t).is_some_and(|s| {
                matches!(s.status, Status::Active | Status::Prepared) && s.holds.contains(k)
            })
        };
        for (k, key) in &self.keys {
            if let Some(w) = key.writer {
                if !live(&w, k) {
                    return Err(format!(
                        "key {k}: locked by {w:?}, which is decided or does not know it"
                    ));
                }
                if key.readers.iter().any(|&r| r != w) {
                    return Err(format!(
                        "key {k}: write-locked by {w:?} and read-locked by {:?}",
                        key.readers
                    ));
                }
            }
            if let Some(r) = key.readers.iter().find(|r| !live(r, k)) {
                return Err(format!("key {k}: read-locked by {r:?}, which is decided"));
            }
            if key.prepared_writes.len() > 1 {
                return Err(format!(
                    "key {k}: two prepared writes {:?} (the third check)",
                    key.prepared_writes
                ));
            }
            if self.flavor == Flavor::TapirCc && key.versions.windows(2).any(|w| w[0].0 >= w[1].0) {
                return Err(format!(
                    "key {k}: versions out of timestamp order {:?}",
                    key.versions
                ));
            }
            for t in &key.waiting {
                let parked_here = self
                    .txns
                    .get(t)
                    .and_then(|s| s.parked.as_ref())
                    .is_some_and(|p| p.ops[p.next].key() == k);
                if !parked_here {
                    return Err(format!(
                        "key {k}: {t:?} listed as waiting but not parked on it"
                    ));
                }
            }
        }
        Ok(())
    }

    fn committed_versions(&self) -> Vec<(Key, Vec<Value>)> {
        self.keys
            .iter()
            .map(|(k, s)| {
                let live = s.versions.iter().map(|(_, v)| v.clone());
                (k.clone(), s.archived.iter().cloned().chain(live).collect())
            })
            .collect()
    }

    fn undecided(&self) -> Vec<TxnId> {
        self.txns
            .iter()
            .filter(|(_, s)| {
                s.status == Status::Prepared
                    || (s.status == Status::Active && (!s.holds.is_empty() || s.parked.is_some()))
            })
            .map(|(&t, _)| t)
            .collect()
    }

    fn describe_waits(&self) -> String {
        let mut parts = Vec::new();
        for (k, key) in &self.keys {
            if !key.waiting.is_empty() {
                parts.push(format!(
                    "key {k}: {:?} wait for writer {:?} readers {:?}",
                    key.waiting, key.writer, key.readers
                ));
            }
        }
        parts.join("; ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::Finished;

    /// A prepare can begin a transaction (TAPIR-CC's one-shot ones send no execute), so a
    /// server that sheds load refuses it; once the transaction is held, its prepare, its
    /// resends and its decision begin nothing.
    #[test]
    fn a_prepare_of_an_unknown_transaction_starts_work_and_a_decision_never_does() {
        let mut s = BaselineServer::new(Flavor::TapirCc);
        let txn = TxnId { client: 3, seq: 1 };
        let prepare = BMsg::Prepare {
            txn,
            ts: Ts { clk: 10, cid: 3 },
            reads: Vec::new(),
            writes: vec![(Key::from(1), Value::from(7))],
            execute: Vec::new(),
            done: Finished::default(),
        };
        assert!(s.starts_work(&prepare));
        s.on_message(0, prepare.clone());
        assert!(!s.starts_work(&prepare), "a resend of a prepare it holds");
        assert!(!s.starts_work(&BMsg::Decide { txn, commit: true }));
        let other = TxnId { client: 4, seq: 1 };
        let execute = BMsg::Execute {
            txn: other,
            ts: Ts { clk: 11, cid: 4 },
            shot: 1,
            ops: vec![crate::Op::Read(Key::from(2))],
            done: Finished::default(),
        };
        assert!(s.starts_work(&execute));
    }
}
