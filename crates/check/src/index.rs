//! An indexed view of a [`History`]: dense txn indices, interned keys, who wrote what,
//! and which transactions count as committed.
//!
//! Everything downstream works on small integer ids (`TxnIdx`, `KeyId`) rather than on
//! `TxnId`s and byte strings, so that a 200k-transaction history stays cheap to check.

use std::collections::{BTreeMap, HashMap};

use crate::history::{History, Observed, Op, Outcome, TxnId, TxnRecord};
use crate::violation::{AnomalyKind, Violation};

/// Position of a transaction in `History::txns`; also its node id in the graph.
pub(crate) type TxnIdx = u32;
/// Dense id of an interned key.
pub(crate) type KeyId = u32;

pub(crate) struct Index<'h> {
    pub txns: &'h [TxnRecord],
    pub by_id: HashMap<TxnId, TxnIdx>,
    /// Whether the txn is treated as committed (committed, or an observed `Unknown`).
    pub included: Vec<bool>,
    pub unknown_included: usize,
    /// `KeyId -> key bytes`.
    pub keys: Vec<&'h [u8]>,
    pub key_ids: HashMap<&'h [u8], KeyId>,
    /// For every txn (included or not) and key it wrote: the kind of each of its writes,
    /// indexed by `seq` (`true` = delete). The last entry is the installed version.
    pub writes: HashMap<(TxnIdx, KeyId), Vec<bool>>,
    /// Per key: the included txns that wrote it, in history order.
    pub writers: Vec<Vec<TxnIdx>>,
    /// Keys written (or deleted) by some included txn, ordered, for range reads: a key in
    /// here that a range did not return counts as read absent.
    pub written_keys: BTreeMap<&'h [u8], KeyId>,
}

impl<'h> Index<'h> {
    pub fn build(h: &'h History) -> Result<Self, Violation> {
        let txns = h.txns.as_slice();
        if txns.len() >= u32::MAX as usize {
            return Err(Violation::new(
                AnomalyKind::MalformedHistory,
                vec![],
                "too many transactions (limit is u32::MAX - 1)",
            ));
        }
        let by_id = index_ids(txns)?;
        let (included, unknown_included) = compute_included(txns, &by_id);

        let mut ix = Index {
            txns,
            by_id,
            included,
            unknown_included,
            keys: Vec::new(),
            key_ids: HashMap::new(),
            writes: HashMap::new(),
            writers: Vec::new(),
            written_keys: BTreeMap::new(),
        };
        for (t, txn) in txns.iter().enumerate() {
            let t = t as TxnIdx;
            for op in &txn.ops {
                match op {
                    Op::Read { key, .. } => {
                        ix.intern(key);
                    }
                    Op::Write { key } | Op::Delete { key } => {
                        let k = ix.intern(key);
                        let kinds = ix.writes.entry((t, k)).or_default();
                        if kinds.is_empty() && ix.included[t as usize] {
                            ix.writers[k as usize].push(t);
                            ix.written_keys.insert(key.as_slice(), k);
                        }
                        kinds.push(matches!(op, Op::Delete { .. }));
                    }
                    Op::Range { observed, .. } => {
                        for (key, _) in observed {
                            ix.intern(key);
                        }
                    }
                }
            }
        }
        Ok(ix)
    }

    fn intern(&mut self, key: &'h [u8]) -> KeyId {
        if let Some(&k) = self.key_ids.get(key) {
            return k;
        }
        let k = self.keys.len() as KeyId;
        self.keys.push(key);
        self.key_ids.insert(key, k);
        self.writers.push(Vec::new());
        k
    }

    pub fn txn(&self, t: TxnIdx) -> &'h TxnRecord {
        &self.txns[t as usize]
    }

    pub fn id(&self, t: TxnIdx) -> TxnId {
        self.txns[t as usize].id
    }

    /// The id of a key that occurs in the history (all op keys are interned).
    pub fn key_id(&self, key: &[u8]) -> KeyId {
        self.key_ids[key]
    }

    /// Whether `t`'s installed (final) write of `k` is a delete.
    pub fn final_is_delete(&self, t: TxnIdx, k: KeyId) -> bool {
        self.writes
            .get(&(t, k))
            .and_then(|kinds| kinds.last().copied())
            .unwrap_or(false)
    }
}

/// Maps ids to positions, rejecting the reserved id 0, duplicates and `begin > end`.
fn index_ids(txns: &[TxnRecord]) -> Result<HashMap<TxnId, TxnIdx>, Violation> {
    let mut by_id = HashMap::with_capacity(txns.len());
    for (i, txn) in txns.iter().enumerate() {
        if txn.id == 0 {
            return Err(Violation::new(
                AnomalyKind::MalformedHistory,
                vec![0],
                "txn id 0 is reserved for the initial state",
            ));
        }
        if txn.begin > txn.end {
            return Err(Violation::new(
                AnomalyKind::MalformedHistory,
                vec![txn.id],
                format!("T{} has begin {} > end {}", txn.id, txn.begin, txn.end),
            ));
        }
        if by_id.insert(txn.id, i as TxnIdx).is_some() {
            return Err(Violation::new(
                AnomalyKind::MalformedHistory,
                vec![txn.id],
                format!("txn id T{} occurs more than once", txn.id),
            ));
        }
    }
    Ok(by_id)
}

/// Committed txns, plus `Unknown` ones that an included txn observed a write of
/// (transitively: an observed unknown's own observations count too).
fn compute_included(txns: &[TxnRecord], by_id: &HashMap<TxnId, TxnIdx>) -> (Vec<bool>, usize) {
    let mut included: Vec<bool> = txns
        .iter()
        .map(|t| t.outcome == Outcome::Committed)
        .collect();
    let mut stack: Vec<usize> = (0..txns.len()).filter(|&i| included[i]).collect();
    let mut unknown_included = 0;
    let mut observed: Vec<TxnId> = Vec::new();
    while let Some(t) = stack.pop() {
        let me = txns[t].id;
        observed.clear();
        for op in &txns[t].ops {
            match op {
                Op::Read {
                    observed: Observed::Version(v),
                    ..
                } => observed.push(v.txn),
                Op::Range { observed: seen, .. } => {
                    observed.extend(seen.iter().map(|(_, v)| v.txn))
                }
                _ => {}
            }
        }
        for &writer in &observed {
            if writer == me {
                continue;
            }
            if let Some(&w) = by_id.get(&writer) {
                let w = w as usize;
                if !included[w] && txns[w].outcome == Outcome::Unknown {
                    included[w] = true;
                    unknown_included += 1;
                    stack.push(w);
                }
            }
        }
    }
    (included, unknown_included)
}
