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
use crate::history::{display_key, History, Outcome, TxnId};
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
    /// because some writer had no `ts` (checked less thoroughly). For list-append
    /// checks: keys with committed appends no read saw, whose order among themselves is
    /// unknown (they are still placed after everything read).
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

impl CheckStats {
    /// Outcome and edge counts; the checker fills in the rest. Only edges leaving a txn
    /// count, so a dependency routed through an auxiliary node counts once.
    pub(crate) fn tally(
        outcomes: impl Iterator<Item = Outcome>,
        n_txn: usize,
        edges: &[Edge],
    ) -> Self {
        let mut stats = CheckStats::default();
        for outcome in outcomes {
            stats.txns += 1;
            match outcome {
                Outcome::Committed => stats.committed += 1,
                Outcome::Aborted => stats.aborted += 1,
                Outcome::Unknown => stats.unknown += 1,
            }
        }
        for e in edges.iter().filter(|e| (e.from as usize) < n_txn) {
            match e.kind {
                EdgeKind::Ww => stats.ww_edges += 1,
                EdgeKind::Wr => stats.wr_edges += 1,
                EdgeKind::Rw => stats.rw_edges += 1,
                EdgeKind::Rt => stats.rt_edges += 1,
            }
        }
        stats
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Level {
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

    let mut stats = CheckStats::tally(h.txns.iter().map(|t| t.outcome), n_txn, &edges);
    stats.unknown_included = ix.unknown_included;
    stats.keys = ix.keys.len();
    stats.keys_partial_order = order.partial_keys;
    stats.observations = observations.obs.len();

    let intervals = rt.as_ref().map(|rt| rt.intervals.as_slice());
    stats.rt_edges = search_cycles(&ix, level, n_txn, 0, &mut edges, intervals)?;

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

/// What the cycle search needs to know about a history to print a cycle.
pub(crate) trait TxnView {
    /// The txn at graph node `t`.
    fn meta(&self, t: TxnIdx) -> TxnMeta;
    /// The bytes of key `k`.
    fn key(&self, k: KeyId) -> &[u8];
    /// Why edge `edge` (an index into the searched edge list) exists, beyond its kind and
    /// key; `None` when the step says it all.
    fn explain(&self, _edge: u32) -> Option<String> {
        None
    }
}

/// A txn's header, for the lines under a reported cycle.
pub(crate) struct TxnMeta {
    pub id: TxnId,
    pub outcome: Outcome,
    pub begin: u64,
    pub end: u64,
    pub ts: Option<u64>,
    pub ops: usize,
}

impl TxnMeta {
    pub fn new(
        id: TxnId,
        outcome: Outcome,
        (begin, end): (u64, u64),
        ts: Option<u64>,
        ops: usize,
    ) -> Self {
        TxnMeta {
            id,
            outcome,
            begin,
            end,
            ts,
            ops,
        }
    }
}

impl TxnView for Index<'_> {
    fn meta(&self, t: TxnIdx) -> TxnMeta {
        let txn = self.txn(t);
        TxnMeta::new(
            txn.id,
            txn.outcome,
            (txn.begin, txn.end),
            txn.ts,
            txn.ops.len(),
        )
    }

    fn key(&self, k: KeyId) -> &[u8] {
        self.keys[k as usize]
    }
}

/// Looks for a dependency cycle among `edges` (over txn nodes `0..n_txn` and `n_aux`
/// auxiliary nodes right above them) in stages: ww only (G0), + wr (G1c), + rw (G-single / G2),
/// and for strict checking + real time, built here from `intervals`. The first stage with
/// a cycle names the anomaly, so the report is the most specific one; snapshot isolation
/// then looks for a cycle without two adjacent anti-dependencies instead of rw cycles.
///
/// Auxiliary nodes may carry only edges whose kind and key hold for the whole path
/// through them, which is how a cycle through them prints as single steps. Returns the number of real-time edges added.
pub(crate) fn search_cycles(
    view: &impl TxnView,
    level: Level,
    n_txn: usize,
    n_aux: usize,
    edges: &mut Vec<Edge>,
    intervals: Option<&[(u32, u64, u64)]>,
) -> Result<usize, Violation> {
    let mut n_nodes = n_txn + n_aux;
    let mut rt_edges = 0;
    if let Some(intervals) = intervals {
        let (rt, n_aux) = graph::realtime_edges(n_nodes as u32, intervals);
        rt_edges = rt.len();
        edges.extend(rt);
        n_nodes += n_aux;
    }

    use EdgeKind::{Rt, Rw, Wr, Ww};
    let stages: &[&[EdgeKind]] = match level {
        Level::StrictSerializable => &[&[Ww], &[Ww, Wr], &[Ww, Wr, Rw], &[Ww, Wr, Rw, Rt]],
        Level::Serializable => &[&[Ww], &[Ww, Wr], &[Ww, Wr, Rw]],
        Level::Snapshot => &[&[Ww], &[Ww, Wr]],
    };
    let report = |path: &[u32], kind: Option<AnomalyKind>| {
        let (cycle, parts) = to_cycle(view, n_txn, edges, path);
        let detail = describe_cycle(view, &cycle, &parts);
        let mut v = Violation::from_cycle(cycle, detail);
        if let Some(kind) = kind {
            v.kind = kind;
        }
        v
    };
    for kinds in stages {
        if let Some(path) = graph::find_cycle(n_nodes, n_txn, edges, kinds) {
            return Err(report(&path, None));
        }
    }
    if level == Level::Snapshot {
        if let Some(path) = graph::find_cycle_without_adjacent_rw(n_txn, n_nodes, edges) {
            return Err(report(&path, Some(AnomalyKind::GSnapshot)));
        }
    }
    Ok(rt_edges)
}

/// One step of a cycle: the txn it leaves and the edges (through auxiliary nodes) it
/// stands for.
struct StepParts {
    from: TxnIdx,
    edges: Vec<u32>,
}

/// Turns a path of edge indices into a [`Cycle`], folding paths through auxiliary nodes
/// into single steps (`rt` if any edge on them is).
fn to_cycle(
    view: &impl TxnView,
    n_txn: usize,
    edges: &[Edge],
    path: &[u32],
) -> (Cycle, Vec<StepParts>) {
    let n_txn = n_txn as u32;
    let mut steps = Vec::new();
    let mut parts = Vec::new();
    let mut from = edges[path[0] as usize].from;
    let mut via_rt = false;
    let mut part = Vec::new();
    for &i in path {
        let e = edges[i as usize];
        if e.from < n_txn {
            from = e.from;
            via_rt = false;
            part.clear();
        }
        via_rt |= e.kind == EdgeKind::Rt;
        part.push(i);
        if e.to < n_txn {
            let (kind, key) = if via_rt || e.key == NO_KEY {
                (EdgeKind::Rt, None)
            } else {
                (e.kind, Some(view.key(e.key).to_vec()))
            };
            steps.push(CycleStep {
                from: view.meta(from).id,
                to: view.meta(e.to).id,
                kind,
                key,
            });
            parts.push(StepParts {
                from,
                edges: std::mem::take(&mut part),
            });
        }
    }
    // Start at the smallest txn id so the same cycle always prints the same way.
    if let Some(first) = (0..steps.len()).min_by_key(|&i| steps[i].from) {
        steps.rotate_left(first);
        parts.rotate_left(first);
    }
    (Cycle { steps }, parts)
}

/// One line per txn on the cycle, so real-time and timestamp claims can be verified, then
/// one line per step the view can explain (e.g. which list elements made the edge).
fn describe_cycle(view: &impl TxnView, cycle: &Cycle, parts: &[StepParts]) -> String {
    let mut out = String::new();
    for (i, p) in parts.iter().enumerate() {
        let t = view.meta(p.from);
        if i > 0 {
            out.push('\n');
        }
        let ts = t.ts.map_or("none".to_string(), |ts| ts.to_string());
        let _ = write!(
            out,
            "  T{}: {:?}, begin {} end {}, ts {ts}, {} ops",
            t.id, t.outcome, t.begin, t.end, t.ops
        );
    }
    for (step, p) in cycle.steps.iter().zip(parts) {
        let why: Vec<String> = p.edges.iter().filter_map(|&e| view.explain(e)).collect();
        if !why.is_empty() {
            let _ = write!(
                out,
                "\n  T{} --{}--> T{}: {}",
                step.from,
                step.kind,
                step.to,
                why.join("; ")
            );
        }
    }
    out
}
