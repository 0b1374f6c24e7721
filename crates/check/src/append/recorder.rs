//! Recording list-append transactions from concurrent test threads: the same clock, ids
//! and sharded buffers as [`crate::Recorder`], plus unique elements to append.

use std::sync::atomic::{AtomicU64, Ordering};

use super::{decode_list, encode_list, AppendHistory, AppendOp, AppendTxnRecord};
use crate::history::{Key, Outcome, TxnId};
use crate::recorder::{Record, Sink};

impl Record for AppendTxnRecord {
    fn id(&self) -> TxnId {
        self.id
    }
}

/// Collects [`AppendTxnRecord`]s from many threads. Share it by reference (it is `Sync`),
/// e.g. with `std::thread::scope`, or in an `Arc`.
#[derive(Debug)]
pub struct AppendRecorder {
    sink: Sink<AppendTxnRecord>,
    next_element: AtomicU64,
}

impl Default for AppendRecorder {
    fn default() -> Self {
        AppendRecorder::new()
    }
}

impl AppendRecorder {
    /// A recorder whose clock starts now.
    pub fn new() -> Self {
        AppendRecorder {
            sink: Sink::default(),
            next_element: AtomicU64::new(1),
        }
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

    /// A fresh element, unique across the whole recorder (so unique per key, as the
    /// checker requires, even when an aborted txn is retried).
    pub fn next_element(&self) -> u64 {
        self.next_element.fetch_add(1, Ordering::Relaxed)
    }

    /// Starts recording a transaction: allocates an id and records the begin time. Call
    /// this *before* beginning the engine transaction so the interval covers it.
    pub fn begin_txn(&self) -> AppendTxnBuilder<'_> {
        let (id, begin) = self.sink.begin();
        AppendTxnBuilder {
            rec: self,
            id,
            begin,
            ops: Vec::new(),
            finished: false,
        }
    }

    /// Adds an already-built record (for callers that assemble records themselves).
    pub fn record(&self, txn: AppendTxnRecord) {
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
    pub fn history(&self) -> AppendHistory {
        AppendHistory {
            txns: self.sink.snapshot(),
        }
    }

    /// Consumes the recorder and returns the history, sorted by txn id.
    pub fn into_history(self) -> AppendHistory {
        AppendHistory {
            txns: self.sink.into_sorted(),
        }
    }
}

/// Records one list-append transaction's operations on the thread running it.
///
/// Engines without an append operation append by read-modify-write inside the txn: get
/// the value, decode it, push the element, put it back ([`rmw_append`](Self::rmw_append)
/// does all of that but the get and the put). The read is then recorded too and counts
/// as a list read like any other, which is what it is.
///
/// Dropping a builder without [`finish`](Self::finish) (e.g. because the test thread
/// panicked mid-transaction) records it with [`Outcome::Unknown`].
#[derive(Debug)]
pub struct AppendTxnBuilder<'r> {
    rec: &'r AppendRecorder,
    id: TxnId,
    begin: u64,
    ops: Vec<AppendOp>,
    finished: bool,
}

impl AppendTxnBuilder<'_> {
    /// This transaction's id.
    pub fn id(&self) -> TxnId {
        self.id
    }

    /// The recorded begin time.
    pub fn begin_time(&self) -> u64 {
        self.begin
    }

    /// Records a read of `key` that returned `list`.
    pub fn read(&mut self, key: impl Into<Key>, list: Vec<u64>) -> &mut Self {
        self.ops.push(AppendOp::read(key, list));
        self
    }

    /// Records an append of `element` to `key`.
    pub fn append(&mut self, key: impl Into<Key>, element: u64) -> &mut Self {
        self.ops.push(AppendOp::append(key, element));
        self
    }

    /// Decodes what the engine's `get` of `key` returned ([`decode_list`]), records it as
    /// a read and returns the list; `None`, recording nothing, if the value is not a list
    /// (the engine returned bytes no client wrote: fail the test).
    pub fn read_value(&mut self, key: impl Into<Key>, value: Option<&[u8]>) -> Option<Vec<u64>> {
        let list = decode_list(value)?;
        self.read(key, list.clone());
        Some(list)
    }

    /// The read-modify-write append: given what the engine's `get` of `key` returned in
    /// this txn, records that read, appends a fresh element, and returns the value to
    /// `put` back. `None`, recording nothing, if `current` is not a list.
    pub fn rmw_append(&mut self, key: impl Into<Key>, current: Option<&[u8]>) -> Option<Vec<u8>> {
        let key = key.into();
        let mut list = self.read_value(key.clone(), current)?;
        let element = self.rec.next_element();
        list.push(element);
        self.append(key, element);
        Some(encode_list(&list))
    }

    /// Records the end time (call right after commit/abort returned) and hands the txn
    /// to the recorder. `ts` is the engine's commit timestamp, if any; it is printed in
    /// reports but never used to order versions. Returns the txn id.
    pub fn finish(mut self, outcome: Outcome, ts: Option<u64>) -> TxnId {
        self.push(outcome, ts);
        self.id
    }

    fn push(&mut self, outcome: Outcome, ts: Option<u64>) {
        let end = self.rec.clock();
        self.finished = true;
        self.rec.record(AppendTxnRecord {
            id: self.id,
            begin: self.begin,
            end,
            ts,
            outcome,
            ops: std::mem::take(&mut self.ops),
        });
    }
}

impl Drop for AppendTxnBuilder<'_> {
    fn drop(&mut self) {
        if !self.finished {
            self.push(Outcome::Unknown, None);
        }
    }
}
