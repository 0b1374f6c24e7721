//! The recorded-history data model and the value encoding shared by every test.
//!
//! A [`History`] is a list of [`TxnRecord`]s. Each record carries the real-time interval
//! the client saw, the engine's serialization timestamp (if it exposes one), the outcome
//! and the operations with what they *observed*. Observations name versions by
//! [`VersionId`] (writer txn + per-key write index), which tests recover from the stored
//! values via [`encode_version`] / [`decode_version`].

use std::fmt;
use std::ops::Bound;

use serde::{Deserialize, Serialize};

/// Identifies a transaction. `0` is reserved for the initial state ([`INITIAL_TXN`]).
pub type TxnId = u64;

/// Keys are raw byte strings, as in the engine.
pub type Key = Vec<u8>;

/// The pseudo-transaction that "wrote" the initial absent version of every key.
pub const INITIAL_TXN: TxnId = 0;

/// Identifies one written version: the txn that wrote it and the index of that write
/// among the txn's writes (and deletes) to that key (`0, 1, 2, ..`).
///
/// Keeping the per-key write index (rather than only the txn) is what lets the checker
/// tell a read of a txn's *final* write apart from a read of an intermediate one (G1b).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct VersionId {
    /// The writing transaction.
    pub txn: TxnId,
    /// Index of this write among the txn's writes/deletes of the same key.
    pub seq: u32,
}

impl VersionId {
    /// Shorthand constructor.
    pub const fn new(txn: TxnId, seq: u32) -> Self {
        VersionId { txn, seq }
    }
}

impl fmt::Display for VersionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "T{}.{}", self.txn, self.seq)
    }
}

/// What a point read returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Observed {
    /// The key was absent (never written, or deleted).
    Absent,
    /// The key was present with this version.
    Version(VersionId),
}

impl Observed {
    /// Turns what an engine `get` returned into an observation: `None` is
    /// [`Observed::Absent`], a value is decoded with [`decode_version`].
    /// Returns `None` if the value is not a valid encoding (a torn or foreign value).
    pub fn from_value(value: Option<&[u8]>) -> Option<Observed> {
        match value {
            None => Some(Observed::Absent),
            Some(bytes) => decode_version(bytes).map(Observed::Version),
        }
    }
}

/// One operation of a transaction, in program order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Op {
    /// A point read and what it returned.
    Read {
        /// The key read.
        key: Key,
        /// What the read returned.
        observed: Observed,
    },
    /// A put. The nth write/delete of a key in a txn has `seq` n.
    Write {
        /// The key written.
        key: Key,
    },
    /// A delete: installs a tombstone version, which also takes a `seq`.
    Delete {
        /// The key deleted.
        key: Key,
    },
    /// A range read and the entries it returned, in returned order.
    Range {
        /// Lower bound of the scanned range.
        start: Bound<Key>,
        /// Upper bound of the scanned range.
        end: Bound<Key>,
        /// Whether the scan ran from `end` down to `start`.
        reverse: bool,
        /// The returned keys and the versions they carried, in returned order.
        observed: Vec<(Key, VersionId)>,
    },
}

impl Op {
    /// A point read.
    pub fn read(key: impl Into<Key>, observed: Observed) -> Op {
        Op::Read {
            key: key.into(),
            observed,
        }
    }

    /// A put.
    pub fn write(key: impl Into<Key>) -> Op {
        Op::Write { key: key.into() }
    }

    /// A delete.
    pub fn delete(key: impl Into<Key>) -> Op {
        Op::Delete { key: key.into() }
    }

    /// A range read.
    pub fn range(
        start: Bound<Key>,
        end: Bound<Key>,
        reverse: bool,
        observed: Vec<(Key, VersionId)>,
    ) -> Op {
        Op::Range {
            start,
            end,
            reverse,
            observed,
        }
    }
}

/// How a transaction ended, as far as the client knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Outcome {
    /// Commit returned success.
    Committed,
    /// The txn aborted (explicitly or by a failed commit).
    Aborted,
    /// The client does not know (e.g. it crashed or the commit call was lost).
    ///
    /// The checker treats such a txn as committed if and only if some transaction it
    /// treats as committed observed (read the value of) one of its writes, and ignores it
    /// otherwise. A crashed txn whose only visible effect is a *deletion* is therefore
    /// ignored, and a reader that saw that deletion may be reported.
    Unknown,
}

/// One transaction as seen by its client.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TxnRecord {
    /// Unique, nonzero.
    pub id: TxnId,
    /// Real time (ns since the recorder's origin) taken just before the txn began.
    pub begin: u64,
    /// Real time taken just after commit/abort returned.
    pub end: u64,
    /// The engine's serialization (commit) timestamp, if it exposes one. Committed
    /// writers with a `ts` get their versions ordered by it; readers with a `ts` get
    /// their "absent" observations resolved against it.
    pub ts: Option<u64>,
    /// For snapshot isolation: the timestamp of the snapshot its reads saw, when that is
    /// not `ts` (a snapshot transaction reads at its start and commits later). Only
    /// [`crate::check_snapshot_isolation`] uses it; it defaults to `ts`.
    #[serde(default)]
    pub snapshot_ts: Option<u64>,
    /// How the txn ended.
    pub outcome: Outcome,
    /// The operations, in program order.
    pub ops: Vec<Op>,
}

impl TxnRecord {
    /// Builds a record; convenient for hand-written histories.
    pub fn new(
        id: TxnId,
        begin: u64,
        end: u64,
        ts: Option<u64>,
        outcome: Outcome,
        ops: Vec<Op>,
    ) -> Self {
        TxnRecord {
            id,
            begin,
            end,
            ts,
            snapshot_ts: None,
            outcome,
            ops,
        }
    }
}

/// A recorded history: every transaction the test ran, in any order.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct History {
    /// The transactions.
    pub txns: Vec<TxnRecord>,
}

impl History {
    /// An empty history.
    pub fn new() -> Self {
        History::default()
    }

    /// A history of the given transactions.
    pub fn from_txns(txns: Vec<TxnRecord>) -> Self {
        History { txns }
    }

    /// Appends a transaction.
    pub fn push(&mut self, txn: TxnRecord) {
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

/// Length of the fixed header written by [`encode_version`]: 8 bytes of txn id and 4
/// bytes of seq, both big-endian.
pub const VERSION_HEADER_LEN: usize = 12;

/// Encodes a version as a value, so a later read can report which version it saw.
///
/// Layout (fixed; every test must use it so histories are comparable):
/// * bytes `0..8`: `txn`, big-endian;
/// * bytes `8..12`: `seq`, big-endian;
/// * bytes `12..pad_to`: padding, byte `i` = `(txn as u8) ^ (seq as u8) ^ (i as u8) ^ 0x5A`.
///
/// The padding is a checkable pattern rather than zeros so [`decode_version`] can reject
/// torn or mixed-up values instead of silently misattributing them. The result is
/// `max(pad_to, 12)` bytes long.
pub fn encode_version(v: VersionId, pad_to: usize) -> Vec<u8> {
    let len = pad_to.max(VERSION_HEADER_LEN);
    let mut out = Vec::with_capacity(len);
    out.extend_from_slice(&v.txn.to_be_bytes());
    out.extend_from_slice(&v.seq.to_be_bytes());
    out.extend((VERSION_HEADER_LEN..len).map(|i| pad_byte(v, i)));
    out
}

/// Decodes a value produced by [`encode_version`]; `None` if it is shorter than the
/// header or its padding does not match the pattern.
pub fn decode_version(bytes: &[u8]) -> Option<VersionId> {
    if bytes.len() < VERSION_HEADER_LEN {
        return None;
    }
    let txn = TxnId::from_be_bytes(bytes[0..8].try_into().ok()?);
    let seq = u32::from_be_bytes(bytes[8..12].try_into().ok()?);
    let v = VersionId { txn, seq };
    let padding_ok = bytes[VERSION_HEADER_LEN..]
        .iter()
        .enumerate()
        .all(|(i, &b)| b == pad_byte(v, i + VERSION_HEADER_LEN));
    padding_ok.then_some(v)
}

fn pad_byte(v: VersionId, i: usize) -> u8 {
    (v.txn as u8) ^ (v.seq as u8) ^ (i as u8) ^ 0x5A
}

/// Renders a key for humans: a quoted, escaped string if it is UTF-8, else `0x`-hex.
pub fn display_key(key: &[u8]) -> String {
    match std::str::from_utf8(key) {
        Ok(s) => format!("{s:?}"),
        Err(_) => {
            let mut out = String::with_capacity(2 + key.len() * 2);
            out.push_str("0x");
            for b in key {
                out.push_str(&format!("{b:02x}"));
            }
            out
        }
    }
}

/// Whether `key` lies within `(start, end)`.
pub(crate) fn in_bounds(key: &[u8], start: &Bound<Key>, end: &Bound<Key>) -> bool {
    let above = match start {
        Bound::Included(s) => key >= s.as_slice(),
        Bound::Excluded(s) => key > s.as_slice(),
        Bound::Unbounded => true,
    };
    let below = match end {
        Bound::Included(e) => key <= e.as_slice(),
        Bound::Excluded(e) => key < e.as_slice(),
        Bound::Unbounded => true,
    };
    above && below
}

/// Whether the bounds describe a range that can contain no key at all. `BTreeMap::range`
/// panics on such bounds, so callers check first.
pub(crate) fn bounds_empty(start: &Bound<Key>, end: &Bound<Key>) -> bool {
    match (start, end) {
        (Bound::Included(s), Bound::Included(e)) => s > e,
        (Bound::Included(s), Bound::Excluded(e))
        | (Bound::Excluded(s), Bound::Included(e))
        | (Bound::Excluded(s), Bound::Excluded(e)) => s >= e,
        _ => false,
    }
}

/// Renders range bounds like `["a", "c")`.
pub(crate) fn display_bounds(start: &Bound<Key>, end: &Bound<Key>) -> String {
    let lo = match start {
        Bound::Included(k) => format!("[{}", display_key(k)),
        Bound::Excluded(k) => format!("({}", display_key(k)),
        Bound::Unbounded => "(-inf".to_string(),
    };
    let hi = match end {
        Bound::Included(k) => format!("{}]", display_key(k)),
        Bound::Excluded(k) => format!("{})", display_key(k)),
        Bound::Unbounded => "+inf)".to_string(),
    };
    format!("{lo}, {hi}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_roundtrip_and_padding() {
        let v = VersionId::new(0x0102_0304_0506_0708, 9);
        let bytes = encode_version(v, 32);
        assert_eq!(bytes.len(), 32);
        assert_eq!(&bytes[..8], &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(&bytes[8..12], &[0, 0, 0, 9]);
        assert_eq!(decode_version(&bytes), Some(v));
        // Shorter pad_to still yields the full header.
        assert_eq!(encode_version(v, 0).len(), VERSION_HEADER_LEN);
        assert_eq!(decode_version(&encode_version(v, 0)), Some(v));
        // A corrupted padding byte or a truncated header is rejected.
        let mut bad = bytes.clone();
        bad[20] ^= 1;
        assert_eq!(decode_version(&bad), None);
        assert_eq!(decode_version(&bytes[..11]), None);
    }

    #[test]
    fn key_display() {
        assert_eq!(display_key(b"x"), "\"x\"");
        assert_eq!(display_key(b"a\"b\n"), "\"a\\\"b\\n\"");
        assert_eq!(display_key(&[0xff, 0x00]), "0xff00");
    }

    #[test]
    fn bounds() {
        let k = |s: &str| s.as_bytes().to_vec();
        assert!(in_bounds(
            b"b",
            &Bound::Included(k("a")),
            &Bound::Excluded(k("c"))
        ));
        assert!(!in_bounds(
            b"c",
            &Bound::Included(k("a")),
            &Bound::Excluded(k("c"))
        ));
        assert!(!in_bounds(
            b"a",
            &Bound::Excluded(k("a")),
            &Bound::Unbounded
        ));
        assert!(bounds_empty(
            &Bound::Excluded(k("a")),
            &Bound::Excluded(k("a"))
        ));
        assert!(!bounds_empty(
            &Bound::Included(k("a")),
            &Bound::Included(k("a"))
        ));
        assert!(bounds_empty(
            &Bound::Included(k("b")),
            &Bound::Included(k("a"))
        ));
    }
}
