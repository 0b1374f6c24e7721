//! A thread-safe recorder that concurrent test threads feed transactions into.
//!
//! Cost model: allocating an id and reading the clock are one atomic add and one
//! `Instant::elapsed`; finishing a txn takes one mutex out of [`SHARDS`], chosen by txn
//! id, so threads rarely contend. Everything else (the op list) is thread-local in the
//! [`TxnBuilder`] until the txn finishes.

use std::collections::HashMap;
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Instant;

use crate::history::{History, Key, Observed, Op, Outcome, TxnId, TxnRecord, VersionId};

/// Number of independently locked buffers finished txns are pushed into.
const SHARDS: usize = 16;

/// Collects [`TxnRecord`]s from many threads. Share it by reference (it is `Sync`), e.g.
/// with `std::thread::scope`, or in an `Arc`.
#[derive(Debug, Default)]
pub struct Recorder {
    sink: Sink<TxnRecord>,
}

impl Recorder {
    /// A recorder whose clock starts now.
    pub fn new() -> Self {
        Recorder::default()
    }

    /// Nanoseconds since the recorder was created. Monotonic and shared by all threads,
    /// so `a.end < b.begin` really means `a` finished before `b` started.
    pub fn clock(&self) -> u64 {
        self.sink.clock()
    }

    /// A fresh, unique, nonzero transaction id.
    pub fn next_txn_id(&self) -> TxnId {
        self.sink.next_txn_id()
    }

    /// Starts recording a transaction: allocates an id and records the begin time. Call
    /// this *before* beginning the engine transaction so the interval covers it.
    pub fn begin_txn(&self) -> TxnBuilder<'_> {
        let (id, begin) = self.sink.begin();
        TxnBuilder {
            rec: self,
            id,
            begin,
            ops: Vec::new(),
            write_counts: HashMap::new(),
            finished: false,
        }
    }

    /// Adds an already-built record (for callers that assemble records themselves).
    pub fn record(&self, txn: TxnRecord) {
        self.sink.record(txn);
    }

    /// Number of transactions recorded so far.
    pub fn len(&self) -> usize {
        self.sink.len()
    }

    /// Whether nothing has been recorded yet.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A copy of everything recorded so far, sorted by txn id.
    pub fn history(&self) -> History {
        History {
            txns: self.sink.snapshot(),
        }
    }

    /// Consumes the recorder and returns the history, sorted by txn id.
    pub fn into_history(self) -> History {
        History {
            txns: self.sink.into_sorted(),
        }
    }
}

/// A finished transaction as a recorder stores it.
pub(crate) trait Record: Clone {
    fn id(&self) -> TxnId;
}

impl Record for TxnRecord {
    fn id(&self) -> TxnId {
        self.id
    }
}

/// What every recorder shares whatever its records hold: the clock, txn ids, and the
/// sharded buffers finished records go to.
#[derive(Debug)]
pub(crate) struct Sink<R> {
    origin: Instant,
    next_id: AtomicU64,
    shards: Vec<Mutex<Vec<R>>>,
}

impl<R> Default for Sink<R> {
    fn default() -> Self {
        Sink {
            origin: Instant::now(),
            next_id: AtomicU64::new(1),
            shards: (0..SHARDS).map(|_| Mutex::new(Vec::new())).collect(),
        }
    }
}

impl<R: Record> Sink<R> {
    pub fn clock(&self) -> u64 {
        // u64 nanoseconds last ~584 years; saturate rather than wrap just in case.
        u64::try_from(self.origin.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    pub fn next_txn_id(&self) -> TxnId {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// A new txn's id and begin time.
    pub fn begin(&self) -> (TxnId, u64) {
        let id = self.next_txn_id();
        // Clock read last, as close to the engine's begin as possible.
        (id, self.clock())
    }

    pub fn record(&self, txn: R) {
        let shard = (txn.id() as usize) % SHARDS;
        self.shards[shard]
            .lock()
            // A panicking test thread must not hide everyone else's records.
            .unwrap_or_else(PoisonError::into_inner)
            .push(txn);
    }

    pub fn len(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.lock().unwrap_or_else(PoisonError::into_inner).len())
            .sum()
    }

    pub fn snapshot(&self) -> Vec<R> {
        let mut txns: Vec<R> = self
            .shards
            .iter()
            .flat_map(|s| s.lock().unwrap_or_else(PoisonError::into_inner).clone())
            .collect();
        txns.sort_by_key(R::id);
        txns
    }

    pub fn into_sorted(self) -> Vec<R> {
        let mut txns: Vec<R> = self
            .shards
            .into_iter()
            .flat_map(|s| s.into_inner().unwrap_or_else(PoisonError::into_inner))
            .collect();
        txns.sort_by_key(R::id);
        txns
    }
}

/// Records one transaction's operations on the thread running it.
///
/// Dropping a builder without [`finish`](TxnBuilder::finish) (e.g. because the test
/// thread panicked mid-transaction) records it with [`Outcome::Unknown`], which is what
/// such a transaction is.
#[derive(Debug)]
pub struct TxnBuilder<'r> {
    rec: &'r Recorder,
    id: TxnId,
    begin: u64,
    ops: Vec<Op>,
    /// Writes + deletes so far per key: the next write's `seq`.
    write_counts: HashMap<Key, u32>,
    finished: bool,
}

impl TxnBuilder<'_> {
    /// This transaction's id.
    pub fn id(&self) -> TxnId {
        self.id
    }

    /// The recorded begin time.
    pub fn begin_time(&self) -> u64 {
        self.begin
    }

    /// Records a point read and what it returned.
    pub fn read(&mut self, key: impl Into<Key>, observed: Observed) -> &mut Self {
        self.ops.push(Op::Read {
            key: key.into(),
            observed,
        });
        self
    }

    /// The version the next [`write`](Self::write) or [`delete`](Self::delete) of `key`
    /// will get, without recording anything.
    pub fn next_version(&self, key: &[u8]) -> VersionId {
        VersionId {
            txn: self.id,
            seq: self.write_counts.get(key).copied().unwrap_or(0),
        }
    }

    /// Records a put and returns the version it installs; store
    /// [`encode_version`](crate::encode_version)`(v, ..)` as the value.
    pub fn write(&mut self, key: impl Into<Key>) -> VersionId {
        let key = key.into();
        let v = self.bump(&key);
        self.ops.push(Op::Write { key });
        v
    }

    /// Records a delete and returns the (tombstone) version it installs.
    pub fn delete(&mut self, key: impl Into<Key>) -> VersionId {
        let key = key.into();
        let v = self.bump(&key);
        self.ops.push(Op::Delete { key });
        v
    }

    /// Records a range read and the entries it returned, in returned order.
    pub fn range(
        &mut self,
        start: Bound<Key>,
        end: Bound<Key>,
        reverse: bool,
        observed: Vec<(Key, VersionId)>,
    ) -> &mut Self {
        self.ops.push(Op::Range {
            start,
            end,
            reverse,
            observed,
        });
        self
    }

    /// Records the end time (call right after commit/abort returned) and hands the txn
    /// to the recorder. Returns the txn id.
    pub fn finish(mut self, outcome: Outcome, ts: Option<u64>) -> TxnId {
        self.push(outcome, ts, None);
        self.id
    }

    /// [`TxnBuilder::finish`] for a snapshot-isolation transaction that read the snapshot
    /// at `snapshot_ts` and committed (if it did) at `ts`.
    pub fn finish_snapshot(mut self, outcome: Outcome, ts: Option<u64>, snapshot_ts: u64) -> TxnId {
        self.push(outcome, ts, Some(snapshot_ts));
        self.id
    }

    fn bump(&mut self, key: &[u8]) -> VersionId {
        let v = self.next_version(key);
        *self.write_counts.entry(key.to_vec()).or_insert(0) += 1;
        v
    }

    fn push(&mut self, outcome: Outcome, ts: Option<u64>, snapshot_ts: Option<u64>) {
        let end = self.rec.clock();
        self.finished = true;
        self.rec.record(TxnRecord {
            id: self.id,
            begin: self.begin,
            end,
            ts,
            snapshot_ts,
            outcome,
            ops: std::mem::take(&mut self.ops),
        });
    }
}

impl Drop for TxnBuilder<'_> {
    fn drop(&mut self) {
        if !self.finished {
            self.push(Outcome::Unknown, None, None);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builder_assigns_seqs_per_key() {
        let rec = Recorder::new();
        let mut t = rec.begin_txn();
        let id = t.id();
        assert_eq!(t.write("a"), VersionId::new(id, 0));
        assert_eq!(t.delete("a"), VersionId::new(id, 1));
        assert_eq!(t.write("b"), VersionId::new(id, 0));
        assert_eq!(t.next_version(b"a"), VersionId::new(id, 2));
        t.finish(Outcome::Committed, Some(7));
        let h = rec.into_history();
        assert_eq!(h.txns.len(), 1);
        let txn = &h.txns[0];
        assert_eq!(txn.ts, Some(7));
        assert!(txn.begin <= txn.end);
        assert_eq!(txn.ops.len(), 3);
    }

    #[test]
    fn dropped_builder_is_unknown() {
        let rec = Recorder::new();
        {
            let mut t = rec.begin_txn();
            t.read("k", Observed::Absent);
        }
        let h = rec.history();
        assert_eq!(h.txns[0].outcome, Outcome::Unknown);
        assert_eq!(h.txns[0].ops.len(), 1);
    }

    #[test]
    fn concurrent_threads_get_unique_ids() {
        let rec = Recorder::new();
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for _ in 0..250 {
                        let mut t = rec.begin_txn();
                        t.write("k");
                        t.finish(Outcome::Committed, None);
                    }
                });
            }
        });
        let h = rec.into_history();
        assert_eq!(h.txns.len(), 1000);
        let mut ids: Vec<_> = h.txns.iter().map(|t| t.id).collect();
        ids.dedup();
        assert_eq!(ids.len(), 1000);
        assert!(ids.iter().all(|&id| id != 0));
    }
}
