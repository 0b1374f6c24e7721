//! Per-key version order, and resolving which absent version an "absent" read saw.
//!
//! A key's order is **total** when every included writer of it has a timestamp: versions
//! are ordered by `ts`, after the initial absent version of txn 0, and only each txn's
//! final write is installed. If some writer lacks a timestamp (e.g. an `Unknown` txn
//! treated as committed), the order is **partial**, inferred Elle-style from
//! read-modify-write chains only: a writer that read version `v` of the key before
//! writing it installed its version after `v`. Partial keys yield fewer edges (so fewer
//! anomalies are found on them, never spurious ones); `CheckStats::keys_partial_order`
//! counts them so a test can insist on full checking.

use std::collections::HashMap;

use crate::anomalies::{ObsKind, Observations};
use crate::history::{display_key, VersionId};
use crate::index::{Index, KeyId, TxnIdx};
use crate::violation::{AnomalyKind, Violation};

/// A version as the graph sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Seen {
    /// The initial absent version (txn 0).
    Init,
    /// The installed (final) write of this included txn.
    Writer(TxnIdx),
}

#[derive(Clone, Copy, Debug)]
pub(crate) struct Installed {
    pub writer: TxnIdx,
    pub ts: u64,
    pub tombstone: bool,
}

pub(crate) enum KeyOrder {
    /// Sorted by `ts`. Position 0 is the initial version; `versions[i]` is position `i+1`.
    Total {
        versions: Vec<Installed>,
        /// Positions of absent versions (0 and every tombstone), ascending.
        absent_positions: Vec<u32>,
    },
    /// Only read-modify-write successors are known.
    Partial {
        has_tombstone: bool,
        successors: HashMap<Seen, Vec<TxnIdx>>,
    },
}

/// How an absent observation was resolved.
pub(crate) struct AbsentResolution {
    /// The absent version to draw edges from (`None`: unknown, draw none).
    pub seen: Option<Seen>,
    /// Set when the reader's own `ts` says a *present* version was visible.
    pub visible: Option<TxnIdx>,
}

pub(crate) struct VersionOrder {
    pub keys: Vec<KeyOrder>,
    /// `(key, writer) ->` position in a total order.
    pos: HashMap<(KeyId, TxnIdx), u32>,
    pub partial_keys: usize,
}

impl VersionOrder {
    pub fn build(ix: &Index<'_>, obs: &Observations) -> Result<Self, Violation> {
        let mut keys = Vec::with_capacity(ix.keys.len());
        let mut pos = HashMap::new();
        let mut partial_keys = 0;
        for (k, writers) in ix.writers.iter().enumerate() {
            let k = k as KeyId;
            let all_ts = writers.iter().all(|&w| ix.txn(w).ts.is_some());
            if all_ts {
                keys.push(total_order(ix, k, writers, &mut pos)?);
            } else {
                partial_keys += 1;
                keys.push(partial_order(ix, k, writers, obs));
            }
        }
        Ok(VersionOrder {
            keys,
            pos,
            partial_keys,
        })
    }

    /// Calls `f(from, to, key)` for every write-write edge.
    pub fn ww_edges(&self, mut f: impl FnMut(TxnIdx, TxnIdx, KeyId)) {
        for (k, order) in self.keys.iter().enumerate() {
            let k = k as KeyId;
            match order {
                KeyOrder::Total { versions, .. } => {
                    for pair in versions.windows(2) {
                        f(pair[0].writer, pair[1].writer, k);
                    }
                }
                KeyOrder::Partial { successors, .. } => {
                    for (pred, succs) in successors {
                        if let Seen::Writer(p) = *pred {
                            for &s in succs {
                                f(p, s, k);
                            }
                        }
                    }
                }
            }
        }
    }

    /// Writers known to have overwritten `seen` of key `k` (the targets of rw edges from
    /// a reader of `seen`). For a total order that is just the next version.
    pub fn overwriters(&self, k: KeyId, seen: Seen) -> &[TxnIdx] {
        match &self.keys[k as usize] {
            KeyOrder::Total { versions, .. } => {
                let p = match seen {
                    Seen::Init => 0,
                    Seen::Writer(w) => self.pos[&(k, w)] as usize,
                };
                // Position p is versions[p - 1]; the next one is versions[p].
                versions
                    .get(p)
                    .map_or(&[], |v| std::slice::from_ref(&v.writer))
            }
            KeyOrder::Partial { successors, .. } => {
                successors.get(&seen).map_or(&[], Vec::as_slice)
            }
        }
    }

    /// Which absent version a reader saw of key `k`.
    ///
    /// * Reader with a `ts`, total order: the last version with `ts < reader.ts`. If that
    ///   is present, `visible` reports it (an anomaly by itself) and `seen` falls back to
    ///   the heuristic below, so a more telling cycle can still be found.
    /// * Otherwise (heuristic): `lb` is a timestamp the reader must be serialized after
    ///   (the largest `ts` among writers it read from and, for strict checking, among
    ///   txns that ended before it began). Let `p` be the last version with `ts <= lb`.
    ///   The reader saw the first absent version at or after `p`, or if none, the last
    ///   absent version before `p`. This is exact when the key has no tombstones; with
    ///   several tombstones it is a guess, which is why engine tests supply `ts`.
    /// * Partial order: the initial version if no included txn ever deleted the key,
    ///   else unknown (no edges).
    pub fn resolve_absent(
        &self,
        ix: &Index<'_>,
        reader: TxnIdx,
        k: KeyId,
        read_ts: Option<u64>,
        lb: impl FnOnce() -> Option<u64>,
    ) -> AbsentResolution {
        let _ = (ix, reader);
        let (versions, absent_positions) = match &self.keys[k as usize] {
            KeyOrder::Total {
                versions,
                absent_positions,
            } => (versions, absent_positions),
            KeyOrder::Partial { has_tombstone, .. } => {
                return AbsentResolution {
                    seen: (!has_tombstone).then_some(Seen::Init),
                    visible: None,
                }
            }
        };
        let seen_at = |p: usize| {
            if p == 0 {
                Seen::Init
            } else {
                Seen::Writer(versions[p - 1].writer)
            }
        };
        let mut visible = None;
        if let Some(ts) = read_ts {
            let p = versions.partition_point(|v| v.ts < ts);
            if p == 0 || versions[p - 1].tombstone {
                return AbsentResolution {
                    seen: Some(seen_at(p)),
                    visible: None,
                };
            }
            visible = Some(versions[p - 1].writer);
        }
        let p = lb().map_or(0, |lb| versions.partition_point(|v| v.ts <= lb)) as u32;
        let i = absent_positions.partition_point(|&a| a < p);
        // Position 0 is always absent, so `i - 1` exists whenever `i == len`.
        let chosen = absent_positions
            .get(i)
            .copied()
            .unwrap_or_else(|| absent_positions[i - 1]);
        AbsentResolution {
            seen: Some(seen_at(chosen as usize)),
            visible,
        }
    }

    /// The version id a `Seen` stands for, for messages.
    pub fn version_id(ix: &Index<'_>, k: KeyId, seen: Seen) -> VersionId {
        match seen {
            Seen::Init => VersionId::new(0, 0),
            Seen::Writer(w) => {
                let n = ix.writes.get(&(w, k)).map_or(1, Vec::len);
                VersionId::new(ix.id(w), n as u32 - 1)
            }
        }
    }
}

fn total_order(
    ix: &Index<'_>,
    k: KeyId,
    writers: &[TxnIdx],
    pos: &mut HashMap<(KeyId, TxnIdx), u32>,
) -> Result<KeyOrder, Violation> {
    let mut versions: Vec<Installed> = writers
        .iter()
        .map(|&w| Installed {
            writer: w,
            ts: ix.txn(w).ts.unwrap_or_default(),
            tombstone: ix.final_is_delete(w, k),
        })
        .collect();
    versions.sort_by_key(|v| v.ts);
    if let Some(pair) = versions.windows(2).find(|p| p[0].ts == p[1].ts) {
        let (a, b) = (ix.id(pair[0].writer), ix.id(pair[1].writer));
        return Err(Violation::new(
            AnomalyKind::AmbiguousVersionOrder,
            vec![a, b],
            format!(
                "T{a} and T{b} both wrote key {} and both have ts {}",
                display_key(ix.keys[k as usize]),
                pair[0].ts
            ),
        ));
    }
    let mut absent_positions = vec![0];
    for (i, v) in versions.iter().enumerate() {
        pos.insert((k, v.writer), i as u32 + 1);
        if v.tombstone {
            absent_positions.push(i as u32 + 1);
        }
    }
    Ok(KeyOrder::Total {
        versions,
        absent_positions,
    })
}

fn partial_order(ix: &Index<'_>, k: KeyId, writers: &[TxnIdx], obs: &Observations) -> KeyOrder {
    let has_tombstone = writers.iter().any(|&w| ix.final_is_delete(w, k));
    let mut successors: HashMap<Seen, Vec<TxnIdx>> = HashMap::new();
    for &w in writers {
        let pred = match obs.rmw_pred.get(&(w, k)) {
            Some(ObsKind::Present(p)) => Seen::Writer(*p),
            // Which absent version it read is only certain if nobody deletes the key.
            Some(ObsKind::Absent) if !has_tombstone => Seen::Init,
            _ => continue,
        };
        successors.entry(pred).or_default().push(w);
    }
    KeyOrder::Partial {
        has_tombstone,
        successors,
    }
}
