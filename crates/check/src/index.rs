//! An indexed view of a [`History`]: dense txn indices, interned keys, who wrote what,
//! and which transactions count as committed.
//!
//! Everything downstream works on small integer ids (`TxnIdx`, `KeyId`) rather than on
//! `TxnId`s and byte strings, so that a 200k-transaction history stays cheap to check.

use std::collections::{BTreeMap, HashMap, VecDeque};

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
        let by_id = index_ids(txns.iter().map(|t| (t.id, t.begin, t.end)))?;
        let (included, unknown_included) =
            include_observed(txns.iter().map(|t| t.outcome), |t, observed| {
                observed_writers(&txns[t as usize], &by_id, observed);
                Ok(())
            })?;

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
        let (k, new) = intern(&mut self.keys, &mut self.key_ids, key);
        if new {
            self.writers.push(Vec::new());
        }
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

/// Interns `key` into `names` / `ids`: its dense id, and whether it is new (so the caller
/// grows its per-key state).
pub(crate) fn intern<'h>(
    names: &mut Vec<&'h [u8]>,
    ids: &mut HashMap<&'h [u8], KeyId>,
    key: &'h [u8],
) -> (KeyId, bool) {
    if let Some(&k) = ids.get(key) {
        return (k, false);
    }
    let k = names.len() as KeyId;
    names.push(key);
    ids.insert(key, k);
    (k, true)
}

/// Maps ids to positions, rejecting the reserved id 0, duplicates and `begin > end`.
/// Takes `(id, begin, end)` per txn so every history type shares the same rules.
pub(crate) fn index_ids(
    txns: impl Iterator<Item = (TxnId, u64, u64)>,
) -> Result<HashMap<TxnId, TxnIdx>, Violation> {
    let mut by_id = HashMap::new();
    for (i, (id, begin, end)) in txns.enumerate() {
        // Txn positions are u32 graph nodes, and u32::MAX is a sentinel.
        if i >= u32::MAX as usize - 1 {
            return Err(Violation::new(
                AnomalyKind::MalformedHistory,
                vec![],
                "too many transactions (limit is u32::MAX - 1)",
            ));
        }
        if id == 0 {
            return Err(Violation::new(
                AnomalyKind::MalformedHistory,
                vec![0],
                "txn id 0 is reserved for the initial state",
            ));
        }
        if begin > end {
            return Err(Violation::new(
                AnomalyKind::MalformedHistory,
                vec![id],
                format!("T{id} has begin {begin} > end {end}"),
            ));
        }
        if by_id.insert(id, i as TxnIdx).is_some() {
            return Err(Violation::new(
                AnomalyKind::MalformedHistory,
                vec![id],
                format!("txn id T{id} occurs more than once"),
            ));
        }
    }
    Ok(by_id)
}

/// Decides which txns count as committed: the committed ones, plus `Unknown` ones that an
/// included txn observed a write of (transitively: an observed unknown's own observations
/// count too).
///
/// `observe(t, out)` is called exactly once per included txn, committed ones first in
/// history order, and pushes the txns whose writes `t` observed (any outcome, `t` itself
/// allowed). It may also fail, for checkers that validate reads on this same pass.
pub(crate) fn include_observed(
    outcomes: impl Iterator<Item = Outcome>,
    mut observe: impl FnMut(TxnIdx, &mut Vec<TxnIdx>) -> Result<(), Violation>,
) -> Result<(Vec<bool>, usize), Violation> {
    let outcomes: Vec<Outcome> = outcomes.collect();
    let mut included: Vec<bool> = outcomes.iter().map(|&o| o == Outcome::Committed).collect();
    let mut queue: VecDeque<TxnIdx> = (0..outcomes.len() as TxnIdx)
        .filter(|&t| included[t as usize])
        .collect();
    let mut unknown_included = 0;
    let mut observed: Vec<TxnIdx> = Vec::new();
    while let Some(t) = queue.pop_front() {
        observed.clear();
        observe(t, &mut observed)?;
        for &w in &observed {
            let w = w as usize;
            if !included[w] && outcomes[w] == Outcome::Unknown {
                included[w] = true;
                unknown_included += 1;
                queue.push_back(w as TxnIdx);
            }
        }
    }
    Ok((included, unknown_included))
}

/// The txns whose versions `txn` read (ids not in the history are left to the garbage
/// check).
fn observed_writers(txn: &TxnRecord, by_id: &HashMap<TxnId, TxnIdx>, out: &mut Vec<TxnIdx>) {
    let mut push = |writer: TxnId| {
        if let Some(&w) = by_id.get(&writer) {
            out.push(w);
        }
    };
    for op in &txn.ops {
        match op {
            Op::Read {
                observed: Observed::Version(v),
                ..
            } => push(v.txn),
            Op::Range { observed, .. } => observed.iter().for_each(|(_, v)| push(v.txn)),
            _ => {}
        }
    }
}
