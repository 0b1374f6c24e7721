//! History recording and consistency checking for Verso's tests.
//!
//! Tests of the transaction engine run concurrent transactions, record what each one
//! did and observed with a [`Recorder`], and hand the resulting [`History`] to
//! [`check_strict_serializable`], which either returns [`CheckStats`] or a [`Violation`]
//! that names the anomaly and prints the offending dependency cycle, e.g.
//! `G2 anti-dependency cycle (write skew / phantom): T1 --rw(key "a")--> T2 --rw(key "b")--> T1`.
//! The crate knows nothing about the engine.
//!
//! How it works, in brief (Adya's dependency graphs, as in Elle):
//! * Values written by tests encode the writing `(txn, seq)` ([`encode_version`]), so
//!   every read reports which [`VersionId`] it saw.
//! * Versions of a key are ordered by the writers' commit timestamps (`ts`); reads give
//!   write-read and anti-dependency edges, real time gives sparse `rt` edges.
//! * Aborted / intermediate / garbage reads are caught directly; otherwise a cycle in the
//!   graph (iterative Tarjan + BFS) is classified as G0, G1c, G-single, G2 or a
//!   real-time violation.
//!
//! [`check_linearizable_registers`] checks single-key get/put/remove histories (for the
//! index crate). [`check_append_strict_serializable`] and its siblings check Elle's
//! list-append workload (see [List append](#list-append) below).
//!
//! # Semantics worth knowing
//!
//! * Only committed transactions are checked. Reads of aborted transactions are ignored
//!   (an optimistic engine may show them anything); reading an aborted write is G1a.
//! * An [`Outcome::Unknown`] transaction counts as committed iff a counted transaction
//!   read one of its writes; otherwise it is ignored.
//! * A range read that did not return a key some counted transaction wrote inside its
//!   bounds is treated as reading that key absent (this is how phantoms are caught).
//! * Which absent version an absent read saw comes from the reader's `ts` (the last
//!   version with a smaller ts). Readers without a `ts` get a documented heuristic that
//!   is exact unless the key was deleted several times; engine tests should supply `ts`.
//! * Version order comes from the writers' `ts`. For keys where a counted writer has no
//!   `ts`, it is inferred from read-modify-write chains only (fewer edges, never
//!   spurious ones); [`CheckStats::keys_partial_order`] counts such keys.
//!
//! # Example
//!
//! ```
//! use verso_check::{
//!     check_serializable, check_strict_serializable, encode_version, AnomalyKind, Observed,
//!     Outcome, Recorder,
//! };
//!
//! let rec = Recorder::new();
//!
//! // T1 writes "x" and commits at ts 10.
//! let mut t1 = rec.begin_txn();
//! let v1 = t1.write("x");
//! let _stored_value = encode_version(v1, 16); // what the test would put in the engine
//! t1.finish(Outcome::Committed, Some(10));
//!
//! // T2 starts after T1 finished and reads "x"; suppose the engine returned nothing:
//! // a stale read. (Its ts 5 claims a snapshot from before T1.)
//! let mut t2 = rec.begin_txn();
//! t2.read("x", Observed::Absent);
//! t2.finish(Outcome::Committed, Some(5));
//!
//! let history = rec.into_history();
//! // Serializable (T2 can go first) ...
//! assert!(check_serializable(&history).is_ok());
//! // ... but not strictly serializable: T2 began after T1 ended.
//! let err = check_strict_serializable(&history).unwrap_err();
//! assert_eq!(err.kind, AnomalyKind::RealTime);
//! assert!(err.to_string().starts_with(
//!     "real-time violation (stale read): T1 --rt--> T2 --rw(key \"x\")--> T1"
//! ));
//! ```
//!
//! # List append
//!
//! The checkers above order each key's versions by the writers' commit timestamps, as
//! the engine reports them. An engine that installs a version with a wrong timestamp
//! (so readers at some snapshots see versions in an order the timestamps deny) passes
//! whenever the reads it causes are consistent with the reported timestamps, and with
//! single-version values they usually are: a read only names the last writer.
//!
//! Elle's list-append workload (Kingsbury & Alvaro, VLDB 2020) removes that trust. Each
//! value is a list of `u64` elements; a write appends an element unique to the key, a
//! read returns the whole list ([`AppendRecorder`], [`AppendTxnRecord`]). Every read then
//! shows the order of all appends before it, so the version order is **inferred from the
//! data**: the longest list read for a key is its order of appends, every other read must
//! be a prefix of it, and appends no read saw come after all of it. The engine's `ts` is
//! only printed. [`check_append_strict_serializable`], [`check_append_serializable`] and
//! [`check_append_snapshot_isolation`] report:
//! * directly: reads that are not prefixes of one list
//!   ([`AnomalyKind::IncompatibleOrder`]), elements nobody appended (garbage), appended by
//!   an aborted txn (G1a), read twice ([`AnomalyKind::DuplicateElements`]), a read ending
//!   at an append its txn followed with another append to the key (G1b), and a txn's read
//!   that is not ended by its own earlier appends (internal inconsistency);
//! * as cycles, exactly like the checkers above, with ww edges between consecutive
//!   appends, wr from the appender of a read's last element, rw from a reader to the
//!   appender of the element after its last, and real time. The message names the
//!   elements behind each edge, e.g. `T2 saw [1], and T3 appended the next element, 2`.
//!
//! What it catches that the timestamp checkers cannot: a version order that contradicts
//! the reported timestamps while each single read agrees with them (two lists disagree,
//! or one puts appends in an order that real time or other reads forbid), and all of it
//! without the engine exposing timestamps (without them the timestamp checkers fall back
//! to read-modify-write chains and find less). The test
//! `stale_timestamp_is_caught_by_inferred_order` shows a history the timestamp checkers
//! accept and this one rejects.
//!
//! Engines without an append operation append by read-modify-write in one transaction:
//! get the value, [`decode_list`], push the element, put [`encode_list`] back
//! ([`AppendTxnBuilder::rmw_append`] does the middle part). That read is recorded and
//! counts as a list read like any other. `Unknown` txns count iff a counted read contains
//! one of their elements.
//!
//! Checking costs one slice compare per read plus one lookup per element of each key's
//! longest list, so long lists are fine for the checker; the history itself grows with
//! the square of the appends per key, so long-running tests should move on to a fresh
//! key after some appends (Jepsen retires keys after a few dozen).
//!
//! ```
//! use verso_check::{
//!     check_append_serializable, check_append_strict_serializable, AnomalyKind,
//!     AppendRecorder, Outcome,
//! };
//!
//! let rec = AppendRecorder::new();
//! let mut store: Option<Vec<u8>> = None; // the engine's value of key "x"
//!
//! // T1 appends to "x" by read-modify-write and commits.
//! let mut t1 = rec.begin_txn();
//! store = Some(t1.rmw_append("x", store.as_deref()).expect("a list"));
//! t1.finish(Outcome::Committed, None);
//!
//! // T2 starts after T1 finished, but the engine hands it a stale, empty "x".
//! let mut t2 = rec.begin_txn();
//! t2.read_value("x", None).expect("a list");
//! t2.finish(Outcome::Committed, None);
//!
//! // T3 reads the list T1 wrote.
//! let mut t3 = rec.begin_txn();
//! assert_eq!(t3.read_value("x", store.as_deref()), Some(vec![1]));
//! t3.finish(Outcome::Committed, None);
//!
//! let history = rec.into_history();
//! assert!(check_append_serializable(&history).is_ok()); // T2 could have gone first
//! let err = check_append_strict_serializable(&history).unwrap_err();
//! assert_eq!(err.kind, AnomalyKind::RealTime);
//! let msg = err.to_string();
//! assert!(msg.contains("T1 --rt--> T2 --rw(key \"x\")--> T1"), "{msg}");
//! assert!(msg.contains("T2 saw [], and T1 appended the next element, 1"), "{msg}");
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod anomalies;
mod append;
mod check;
mod graph;
mod history;
mod index;
mod linearizable;
mod recorder;
mod versions;
mod violation;

pub use append::{
    check_append_serializable, check_append_snapshot_isolation, check_append_strict_serializable,
    decode_list, encode_list, AppendHistory, AppendOp, AppendRecorder, AppendTxnBuilder,
    AppendTxnRecord,
};
pub use check::{
    check_serializable, check_snapshot_isolation, check_strict_serializable, CheckStats,
};
pub use history::{
    decode_version, display_key, encode_version, History, Key, Observed, Op, Outcome, TxnId,
    TxnRecord, VersionId, INITIAL_TXN, VERSION_HEADER_LEN,
};
pub use linearizable::{check_linearizable_registers, RegisterOp, RegisterOpKind};
pub use recorder::{Recorder, TxnBuilder};
pub use violation::{AnomalyKind, Cycle, CycleStep, EdgeKind, Violation};
