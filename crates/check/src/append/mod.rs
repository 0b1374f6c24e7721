//! Elle's list-append workload and checker (Kingsbury & Alvaro, "Elle: Inferring
//! Isolation Anomalies from Experimental Observations", VLDB 2020).
//!
//! Values are lists of `u64` elements; a write appends an element that is unique per key
//! and a read returns the whole list. Since every read shows the order of all the appends
//! before it, the version order of a key is *inferred from the data*: the longest list
//! read is the order of the appends, every other read must be a prefix of it, and appends
//! no read saw come after all of it. The engine's timestamps are only printed, never
//! trusted, so an engine that installs a version with a wrong timestamp cannot hide it.
//!
//! Pipeline (each step stops at the first anomaly, most direct first):
//! 1. [`infer`]: index the appends, decide which txns count, build each key's longest
//!    list and report garbage, duplicate and aborted (G1a) elements on the way; then walk
//!    each txn's ops for internal consistency, incompatible orders and G1b.
//! 2. [`deps`]: ww / wr / rw edges from the inferred orders, then the shared staged cycle
//!    search of [`crate::check`] (G0, G1c, G-single, G2, real time, or SI's G-SI).

use serde::{Deserialize, Serialize};

use crate::check::{CheckStats, Level};
use crate::history::{Key, Outcome, TxnId};
use crate::violation::Violation;

mod deps;
mod infer;
mod recorder;

pub use recorder::{AppendRecorder, AppendTxnBuilder};

/// One operation of a list-append transaction, in program order. There is no delete:
/// the workload never removes a key (a list that restarts would be an incompatible order).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum AppendOp {
    /// Appended `element` to the list at `key`. Elements must be unique per key across
    /// the whole history, retries of aborted txns included
    /// ([`AppendRecorder::next_element`] hands out such elements).
    Append {
        /// The key appended to.
        key: Key,
        /// The element appended.
        element: u64,
    },
    /// Read the whole list at `key` (an absent key is the empty list).
    Read {
        /// The key read.
        key: Key,
        /// The list returned, first appended element first.
        list: Vec<u64>,
    },
}

impl AppendOp {
    /// An append.
    pub fn append(key: impl Into<Key>, element: u64) -> AppendOp {
        AppendOp::Append {
            key: key.into(),
            element,
        }
    }

    /// A list read.
    pub fn read(key: impl Into<Key>, list: Vec<u64>) -> AppendOp {
        AppendOp::Read {
            key: key.into(),
            list,
        }
    }
}

/// One list-append transaction as seen by its client.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppendTxnRecord {
    /// Unique, nonzero.
    pub id: TxnId,
    /// Real time (ns since the recorder's origin) taken just before the txn began.
    pub begin: u64,
    /// Real time taken just after commit/abort returned.
    pub end: u64,
    /// The engine's commit timestamp, if it exposes one. Only printed in reports: the
    /// append checkers infer version order from the lists read, never from this.
    pub ts: Option<u64>,
    /// How the txn ended.
    pub outcome: Outcome,
    /// The operations, in program order.
    pub ops: Vec<AppendOp>,
}

impl AppendTxnRecord {
    /// Builds a record; convenient for hand-written histories.
    pub fn new(
        id: TxnId,
        begin: u64,
        end: u64,
        ts: Option<u64>,
        outcome: Outcome,
        ops: Vec<AppendOp>,
    ) -> Self {
        AppendTxnRecord {
            id,
            begin,
            end,
            ts,
            outcome,
            ops,
        }
    }
}

/// A recorded list-append history: every transaction the test ran, in any order.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppendHistory {
    /// The transactions.
    pub txns: Vec<AppendTxnRecord>,
}

impl AppendHistory {
    /// An empty history.
    pub fn new() -> Self {
        AppendHistory::default()
    }

    /// A history of the given transactions.
    pub fn from_txns(txns: Vec<AppendTxnRecord>) -> Self {
        AppendHistory { txns }
    }

    /// Appends a transaction.
    pub fn push(&mut self, txn: AppendTxnRecord) {
        self.txns.push(txn);
    }

    /// Number of transactions.
    pub fn len(&self) -> usize {
        self.txns.len()
    }

    /// Whether there are no transactions.
    pub fn is_empty(&self) -> bool {
        self.txns.is_empty()
    }
}

/// Encodes a list as a value: the elements as little-endian `u64`s, concatenated (the
/// empty list is the empty value). Every test must use this layout so values written by
/// one client are read by another.
pub fn encode_list(list: &[u64]) -> Vec<u8> {
    list.iter().flat_map(|e| e.to_le_bytes()).collect()
}

/// Decodes a value written by [`encode_list`]; an absent key (`None`) is the empty list.
/// Returns `None` if the length is not a multiple of 8 (a torn or foreign value).
pub fn decode_list(value: Option<&[u8]>) -> Option<Vec<u64>> {
    let Some(bytes) = value else {
        return Some(Vec::new());
    };
    if bytes.len() % 8 != 0 {
        return None;
    }
    let element = |c: &[u8]| u64::from_le_bytes(c.try_into().expect("chunks of 8 bytes"));
    Some(bytes.chunks_exact(8).map(element).collect())
}

/// Checks that the committed transactions of a list-append history are strictly
/// serializable: some serial order, consistent with real time (a txn that ended before
/// another began comes first), explains every list read, where each key's order of
/// appends is inferred from the reads.
///
/// Returns statistics on success ([`CheckStats::keys_partial_order`] counts keys with
/// appends no read observed, whose order among themselves is unknown), or the most
/// specific violation found.
pub fn check_append_strict_serializable(h: &AppendHistory) -> Result<CheckStats, Violation> {
    deps::check(h, Level::StrictSerializable)
}

/// Like [`check_append_strict_serializable`] without real-time edges: plain
/// serializability.
pub fn check_append_serializable(h: &AppendHistory) -> Result<CheckStats, Violation> {
    deps::check(h, Level::Serializable)
}

/// Checks snapshot isolation of a list-append history: no direct anomaly, no G0 or G1c,
/// and no dependency cycle without two adjacent anti-dependencies (as
/// [`crate::check_snapshot_isolation`]). Two txns that append to one key after reading
/// the same list, i.e. a lost update, are reported whenever a later read shows the order
/// of their appends.
pub fn check_append_snapshot_isolation(h: &AppendHistory) -> Result<CheckStats, Violation> {
    deps::check(h, Level::Snapshot)
}

/// Renders a list for messages, eliding the middle of long ones.
pub(crate) fn show_list(list: &[u64]) -> String {
    const EDGE: usize = 4;
    let join = |xs: &[u64]| xs.iter().map(u64::to_string).collect::<Vec<_>>().join(", ");
    if list.len() <= 2 * EDGE + 1 {
        return format!("[{}]", join(list));
    }
    format!(
        "[{}, .., {}] ({} elements)",
        join(&list[..EDGE]),
        join(&list[list.len() - EDGE..]),
        list.len()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_roundtrip() {
        let list = vec![1, u64::MAX, 0x0102_0304_0506_0708];
        let bytes = encode_list(&list);
        assert_eq!(bytes.len(), 24);
        assert_eq!(&bytes[16..], &[8, 7, 6, 5, 4, 3, 2, 1]);
        assert_eq!(decode_list(Some(&bytes)), Some(list));
        assert_eq!(decode_list(None), Some(vec![]));
        assert_eq!(decode_list(Some(&[])), Some(vec![]));
        assert_eq!(decode_list(Some(&bytes[..23])), None);
    }

    #[test]
    fn long_lists_are_elided() {
        assert_eq!(show_list(&[]), "[]");
        assert_eq!(show_list(&[1, 2, 3]), "[1, 2, 3]");
        let long: Vec<u64> = (1..=20).collect();
        assert_eq!(
            show_list(&long),
            "[1, 2, 3, 4, .., 17, 18, 19, 20] (20 elements)"
        );
    }
}
