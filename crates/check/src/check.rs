//! The (strict) serializability checker: ties the passes together.
//!
//! 1. Index the history and decide which txns count as committed ([`crate::index`]).
//! 2. Detect direct anomalies and collect external observations ([`crate::anomalies`]).
//! 3. Order versions per key ([`crate::versions`]) and resolve absent observations.
//! 4. Build ww / wr / rw (and for strict checking, real-time) edges and look for cycles
//!    in stages: ww only (G0), + wr (G1c), + rw (G-single / G2), + rt (real time). The
//!    first stage with a cycle names the anomaly, so the report is the most specific one.
//! 5. If the graph is acyclic, report any reader whose `ts` contradicts what it read.

use std::fmt::Write as _;

use crate::anomalies::{self, ObsKind};
use crate::graph::{self, Edge, NO_KEY};
use crate::history::{display_key, History, Outcome};
use crate::index::{Index, KeyId, TxnIdx};
use crate::versions::{Seen, VersionOrder};
use crate::violation::{AnomalyKind, Cycle, CycleStep, EdgeKind, Violation};

/// What a successful check looked at.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CheckStats {
    /// Transactions in the history.
    pub txns: usize,
    /// Transactions with [`Outcome::Committed`].
    pub committed: usize,
    /// Transactions with [`Outcome::Aborted`].
    pub aborted: usize,
    /// Transactions with [`Outcome::Unknown`].
    pub unknown: usize,
    /// `Unknown` transactions treated as committed because their writes were observed.
    pub unknown_included: usize,
    /// Distinct keys in the history.
    pub keys: usize,
    /// Keys whose version order had to be inferred from read-modify-write chains
    /// because some writer had no `ts` (checked less thoroughly).
    pub keys_partial_order: usize,
    /// External observations (point reads, range entries, implicit range absences).
    pub observations: usize,
    /// Write-write edges.
    pub ww_edges: usize,
    /// Write-read edges.
    pub wr_edges: usize,
    /// Read-write (anti-dependency) edges.
    pub rw_edges: usize,
    /// Real-time edges of the sparse encoding (about 3 per txn; 0 when not strict).
    pub rt_edges: usize,
}

/// Checks that the committed transactions of `h` are strictly serializable: there is a
/// serial order consistent with every read, the version order, and real time (a txn that
/// ended before another began comes first).
///
/// Returns statistics on success, or the most specific violation found.
pub fn check_strict_serializable(h: &History) -> Result<CheckStats, Violation> {
    check(h, Level::StrictSerializable)
}

/// Like [`check_strict_serializable`] but without real-time edges: checks plain
/// serializability.
pub fn check_serializable(h: &History) -> Result<CheckStats, Violation> {
    check(h, Level::Serializable)
}

/// Checks that the committed transactions of `h` satisfy snapshot isolation: no G0, G1a,
/// G1b or G1c, and no dependency cycle without two *adjacent* anti-dependency edges
/// (Cerone and Gotsman, "Analysing Snapshot Isolation", 2016: a history is SI exactly when
/// every cycle of its dependency graph has two consecutive rw edges). So write skew (a
/// cycle `T1 -rw-> T2 -rw-> T1`) passes, and a lost update (`T1 -rw-> T2 -ww-> T1`) does not.
/// Absent reads are resolved at each reader's `snapshot_ts` (or `ts`).
pub fn check_snapshot_isolation(h: &History) -> Result<CheckStats, Violation> {
    check(h, Level::Snapshot)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Level {
    Serializable,
    StrictSerializable,
    Snapshot,
}

fn check(h: &History, level: Level) -> Result<CheckStats, Violation> {
    let strict = level == Level::StrictSerializable;
    let ix = Index::build(h)?;
    let observations = anomalies::collect(&ix)?;
    let order = VersionOrder::build(&ix, &observations)?;
    let n_txn = ix.txns.len();
    let rt = strict.then(|| RealTime::new(&ix));

    let mut edges: Vec<Edge> = Vec::new();
    let push = |edges: &mut Vec<Edge>, from: TxnIdx, to: TxnIdx, kind: EdgeKind, key: KeyId| {
        if from != to {
            edges.push(Edge {
                from,
                to,
                kind,
                key,
            });
        }
    };
    order.ww_edges(|from, to, key| push(&mut edges, from, to, EdgeKind::Ww, key));

    // A reader is serialized after every writer it read from: the heuristic lower bound
    // for resolving absent reads of readers without a `ts`.
    let mut read_lb: Vec<Option<u64>> = vec![None; n_txn];
    for o in &observations.obs {
        if let ObsKind::Present(w) = o.kind {
            let r = &mut read_lb[o.reader as usize];
            *r = (*r).max(ix.txn(w).ts);
        }
    }

    let mut absent_but_visible: Option<(TxnIdx, KeyId, TxnIdx)> = None;
    for o in &observations.obs {
        let seen = match o.kind {
            ObsKind::Present(w) => Some(Seen::Writer(w)),
            ObsKind::Absent => {
                let lb = || {
                    let floor = rt
                        .as_ref()
                        .and_then(|rt| rt.max_ts_ended_before(&ix, o.reader));
                    read_lb[o.reader as usize].max(floor)
                };
                let r = ix.txn(o.reader);
                let read_ts = match level {
                    Level::Snapshot => r.snapshot_ts.or(r.ts),
                    _ => r.ts,
                };
                let res = order.resolve_absent(&ix, o.reader, o.key, read_ts, lb);
                if let (Some(w), None) = (res.visible, absent_but_visible) {
                    absent_but_visible = Some((o.reader, o.key, w));
                }
                res.seen
            }
        };
        let Some(seen) = seen else { continue };
        if let Seen::Writer(w) = seen {
            push(&mut edges, w, o.reader, EdgeKind::Wr, o.key);
        }
        for &next in order.overwriters(o.key, seen) {
            push(&mut edges, o.reader, next, EdgeKind::Rw, o.key);
        }
    }

    let count = |kind| edges.iter().filter(|e| e.kind == kind).count();
    let mut stats = CheckStats {
        txns: n_txn,
        committed: count_outcome(h, Outcome::Committed),
        aborted: count_outcome(h, Outcome::Aborted),
        unknown: count_outcome(h, Outcome::Unknown),
        unknown_included: ix.unknown_included,
        keys: ix.keys.len(),
        keys_partial_order: order.partial_keys,
        observations: observations.obs.len(),
        ww_edges: count(EdgeKind::Ww),
        wr_edges: count(EdgeKind::Wr),
        rw_edges: count(EdgeKind::Rw),
        rt_edges: 0,
    };

    let mut n_nodes = n_txn;
    if let Some(rt) = &rt {
        let (rt_edges, n_aux) = graph::realtime_edges(n_txn as u32, &rt.intervals);
        stats.rt_edges = rt_edges.len();
        edges.extend(rt_edges);
        n_nodes += n_aux;
    }

    use EdgeKind::{Rt, Rw, Wr, Ww};
    let stages: &[&[EdgeKind]] = if strict {
        &[&[Ww], &[Ww, Wr], &[Ww, Wr, Rw], &[Ww, Wr, Rw, Rt]]
    } else {
        &[&[Ww], &[Ww, Wr], &[Ww, Wr, Rw]]
    };
    let stages = if level == Level::Snapshot {
        &stages[..2]
    } else {
        stages
    };
    for kinds in stages {
        if let Some(path) = graph::find_cycle(n_nodes, n_txn, &edges, kinds) {
            let cycle = to_cycle(&ix, &edges, &path);
            let detail = describe_txns(&ix, &cycle);
            return Err(Violation::from_cycle(cycle, detail));
        }
    }
    if level == Level::Snapshot {
        if let Some(path) = graph::find_cycle_without_adjacent_rw(n_txn, &edges) {
            let cycle = to_cycle(&ix, &edges, &path);
            let detail = describe_txns(&ix, &cycle);
            let mut v = Violation::from_cycle(cycle, detail);
            v.kind = AnomalyKind::GSnapshot;
            return Err(v);
        }
    }

    if let Some((reader, k, w)) = absent_but_visible {
        let (r, key) = (ix.txn(reader), display_key(ix.keys[k as usize]));
        let v = VersionOrder::version_id(&ix, k, Seen::Writer(w));
        return Err(Violation::new(
            AnomalyKind::AbsentButVisible,
            vec![r.id, v.txn],
            format!(
                "T{} (ts {}) read key {key} as absent, but version {v} (ts {}) is visible at that ts",
                r.id,
                r.ts.unwrap_or_default(),
                ix.txn(w).ts.unwrap_or_default()
            ),
        ));
    }
    Ok(stats)
}

fn count_outcome(h: &History, outcome: Outcome) -> usize {
    h.txns.iter().filter(|t| t.outcome == outcome).count()
}

/// Real-time data for strict checking.
struct RealTime {
    /// `(node, begin, end)` of included txns.
    intervals: Vec<(u32, u64, u64)>,
    /// End times of included txns, ascending.
    ends: Vec<u64>,
    /// `prefix_max_ts[i]`: largest `ts` among the txns with the `i + 1` earliest ends.
    prefix_max_ts: Vec<Option<u64>>,
}

impl RealTime {
    fn new(ix: &Index<'_>) -> Self {
        let intervals: Vec<(u32, u64, u64)> = (0..ix.txns.len() as u32)
            .filter(|&t| ix.included[t as usize])
            .map(|t| (t, ix.txn(t).begin, ix.txn(t).end))
            .collect();
        let mut by_end: Vec<(u64, Option<u64>)> = intervals
            .iter()
            .map(|&(t, _, end)| (end, ix.txn(t).ts))
            .collect();
        by_end.sort_unstable();
        let mut max = None;
        let prefix_max_ts = by_end
            .iter()
            .map(|&(_, ts)| {
                max = max.max(ts);
                max
            })
            .collect();
        RealTime {
            intervals,
            ends: by_end.iter().map(|&(end, _)| end).collect(),
            prefix_max_ts,
        }
    }

    /// Largest `ts` of a txn that ended before `t` began (`t` must follow it).
    fn max_ts_ended_before(&self, ix: &Index<'_>, t: TxnIdx) -> Option<u64> {
        let begin = ix.txn(t).begin;
        let j = self.ends.partition_point(|&end| end < begin);
        j.checked_sub(1).and_then(|i| self.prefix_max_ts[i])
    }
}

/// Turns a path of edge indices into a [`Cycle`], folding the auxiliary real-time nodes
/// into single `rt` steps.
fn to_cycle(ix: &Index<'_>, edges: &[Edge], path: &[u32]) -> Cycle {
    let n_txn = ix.txns.len() as u32;
    let mut steps = Vec::new();
    let mut from = edges[path[0] as usize].from;
    let mut via_rt = false;
    for &i in path {
        let e = edges[i as usize];
        if e.from < n_txn {
            from = e.from;
            via_rt = false;
        }
        via_rt |= e.kind == EdgeKind::Rt;
        if e.to < n_txn {
            let (kind, key) = if via_rt || e.key == NO_KEY {
                (EdgeKind::Rt, None)
            } else {
                (e.kind, Some(ix.keys[e.key as usize].to_vec()))
            };
            steps.push(CycleStep {
                from: ix.id(from),
                to: ix.id(e.to),
                kind,
                key,
            });
        }
    }
    // Start at the smallest txn id so the same cycle always prints the same way.
    if let Some(first) = (0..steps.len()).min_by_key(|&i| steps[i].from) {
        steps.rotate_left(first);
    }
    Cycle { steps }
}

/// One line per txn on the cycle, so real-time and timestamp claims can be verified.
fn describe_txns(ix: &Index<'_>, cycle: &Cycle) -> String {
    let mut out = String::new();
    for (i, id) in cycle.txns().into_iter().enumerate() {
        let t = ix.txn(ix.by_id[&id]);
        if i > 0 {
            out.push('\n');
        }
        let ts = t.ts.map_or("none".to_string(), |ts| ts.to_string());
        let _ = write!(
            out,
            "  T{id}: {:?}, begin {} end {}, ts {ts}, {} ops",
            t.outcome,
            t.begin,
            t.end,
            t.ops.len()
        );
    }
    out
}
