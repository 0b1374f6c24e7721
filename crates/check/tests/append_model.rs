//! Property tests of the list-append checker against a model: random *serial* executions
//! over a map of lists are accepted, and single mutations that are guaranteed anomalies
//! are rejected (with the exact kind where only one kind is possible).

use std::collections::HashMap;
use std::time::Instant;

use common::{interval, run_mutations, Fate, Rng};
use proptest::prelude::*;
use proptest::test_runner::Config;
use verso_check::{
    check_append_serializable, check_append_snapshot_isolation, check_append_strict_serializable,
    AnomalyKind, AppendHistory, AppendOp, AppendTxnRecord, Key, Outcome,
};

mod common;

type PlanTxn = common::PlanTxn<PlanOp>;

// ---------------------------------------------------------------- the model executor

#[derive(Clone, Copy, Debug)]
enum PlanOp {
    Read(usize),
    /// A blind append (an engine with an append operation).
    Append(usize),
    /// Read then append, as engines without an append operation do it.
    Rmw(usize),
}

/// A read in the generated history.
#[derive(Clone, Debug)]
struct ReadSite {
    txn: usize,
    op: usize,
    key: Key,
    /// How many of the txn's own appends end the list (the rest is external).
    own: usize,
}

struct Generated {
    history: AppendHistory,
    /// Per key, the appends that took effect, in order: (element, txn index).
    lists: HashMap<Key, Vec<(u64, usize)>>,
    reads: Vec<ReadSite>,
}

/// Runs the plan serially against a map of lists and records what a perfect engine
/// would. Slot `s` names key `k{s}.{generation}`; with `max_appends` a slot moves to a
/// fresh key once its key has that many appends, which keeps lists short (as Jepsen
/// does).
fn execute(plan: &[PlanTxn], overlap: bool, max_appends: Option<usize>) -> Generated {
    let mut model: HashMap<Key, Vec<u64>> = HashMap::new();
    let mut lists: HashMap<Key, Vec<(u64, usize)>> = HashMap::new();
    let mut generation: HashMap<usize, usize> = HashMap::new();
    let mut reads = Vec::new();
    let mut txns = Vec::with_capacity(plan.len());
    let mut next_element = 1;
    for (i, p) in plan.iter().enumerate() {
        let id = i as u64 + 1;
        if let Some(max) = max_appends {
            for op in &p.ops {
                let (PlanOp::Read(slot) | PlanOp::Append(slot) | PlanOp::Rmw(slot)) = *op;
                let g = generation.entry(slot).or_insert(0);
                let name = format!("k{slot}.{g}").into_bytes();
                if lists.get(&name).map_or(0, Vec::len) >= max {
                    *g += 1;
                }
            }
        }
        let key = |slot: usize| {
            let g = generation.get(&slot).copied().unwrap_or(0);
            format!("k{slot}.{g}").into_bytes()
        };
        let mut own: HashMap<Key, usize> = HashMap::new();
        // Appends apply to the model directly; undo truncates them if the txn fails.
        let mut undo: Vec<(Key, usize)> = Vec::new();
        let mut appended: Vec<(Key, u64)> = Vec::new();
        let mut ops = Vec::new();
        for &op in &p.ops {
            let (slot, read, append) = match op {
                PlanOp::Read(s) => (s, true, false),
                PlanOp::Append(s) => (s, false, true),
                PlanOp::Rmw(s) => (s, true, true),
            };
            let k = key(slot);
            let list = model.entry(k.clone()).or_default();
            if read {
                reads.push(ReadSite {
                    txn: i,
                    op: ops.len(),
                    key: k.clone(),
                    own: own.get(&k).copied().unwrap_or(0),
                });
                ops.push(AppendOp::read(k.clone(), list.clone()));
            }
            if append {
                let e = next_element;
                next_element += 1;
                let n = own.entry(k.clone()).or_insert(0);
                if *n == 0 {
                    undo.push((k.clone(), list.len()));
                }
                *n += 1;
                list.push(e);
                appended.push((k.clone(), e));
                ops.push(AppendOp::append(k, e));
            }
        }
        let commits = p.fate.commits();
        if commits {
            for (k, e) in appended {
                lists.entry(k).or_default().push((e, i));
            }
        } else {
            for (k, len) in undo {
                model.get_mut(&k).expect("appended").truncate(len);
            }
        }
        let (begin, end) = interval(id, p.dur, overlap);
        // A commit timestamp in serial order: it must not matter either way.
        let ts = commits.then_some(id);
        txns.push(AppendTxnRecord::new(
            id,
            begin,
            end,
            ts,
            p.fate.outcome(),
            ops,
        ));
    }
    Generated {
        history: AppendHistory::from_txns(txns),
        lists,
        reads,
    }
}

// ---------------------------------------------------------------- strategies

const KEYS: usize = 4;

fn plan_op() -> impl Strategy<Value = PlanOp> {
    prop_oneof![
        3 => (0..KEYS).prop_map(PlanOp::Read),
        2 => (0..KEYS).prop_map(PlanOp::Append),
        2 => (0..KEYS).prop_map(PlanOp::Rmw),
    ]
}

fn plan() -> impl Strategy<Value = Vec<PlanTxn>> {
    common::plan(plan_op())
}

// ---------------------------------------------------------------- valid histories

proptest! {
    #![proptest_config(Config { cases: 512, ..Config::default() })]

    #[test]
    fn serial_executions_are_accepted(plan in plan(), overlap: bool) {
        let g = execute(&plan, overlap, None);
        let strict = check_append_strict_serializable(&g.history);
        prop_assert!(strict.is_ok(), "strict: {}", strict.unwrap_err());
        let ser = check_append_serializable(&g.history);
        prop_assert!(ser.is_ok(), "serializable: {}", ser.unwrap_err());
        let si = check_append_snapshot_isolation(&g.history);
        prop_assert!(si.is_ok(), "snapshot isolation: {}", si.unwrap_err());
    }
}

// ---------------------------------------------------------------- mutations

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Mutation {
    /// Two adjacent elements of a read are swapped, and a longer read shows them.
    Swap,
    /// A middle element of a read is dropped, and a longer read shows it.
    DropMiddle,
    /// A read misses an append whose txn ended before the reader began.
    StaleRead,
    /// A read sees the next append, by a txn that began after the reader ended.
    FutureRead,
    /// The appender of an element some read saw is made aborted.
    AbortWriter,
    /// A read is cut to end at a txn's first of two adjacent appends.
    IntermediateRead,
    /// The appender of a read's last element is moved to after the reader in real time.
    ReorderRealTime,
}

const MUTATIONS: [Mutation; 7] = [
    Mutation::Swap,
    Mutation::DropMiddle,
    Mutation::StaleRead,
    Mutation::FutureRead,
    Mutation::AbortWriter,
    Mutation::IntermediateRead,
    Mutation::ReorderRealTime,
];

/// A concrete change to a generated history.
#[derive(Debug)]
enum Change {
    /// Replace what a read site returned.
    SetRead(usize, Vec<u64>),
    Abort(usize),
    /// Move a txn's real-time interval.
    Interval(usize, u64, u64),
}

fn txn(g: &Generated, t: usize) -> &AppendTxnRecord {
    &g.history.txns[t]
}

fn committed(g: &Generated, t: usize) -> bool {
    txn(g, t).outcome == Outcome::Committed
}

fn list_of<'g>(g: &'g Generated, site: &ReadSite) -> &'g [u64] {
    match &txn(g, site.txn).ops[site.op] {
        AppendOp::Read { list, .. } => list,
        other => panic!("read site is not a read: {other:?}"),
    }
}

/// The txn that appended `e` to `key`.
fn appender(g: &Generated, key: &[u8], e: u64) -> usize {
    g.lists[key]
        .iter()
        .find(|&&(x, _)| x == e)
        .expect("read elements took effect")
        .1
}

/// Every applicable change of the given mutation kind.
fn candidates(g: &Generated, m: Mutation) -> Vec<Change> {
    let mut out = Vec::new();
    for (si, site) in g.reads.iter().enumerate() {
        if !committed(g, site.txn) {
            continue;
        }
        let list = list_of(g, site);
        let ext = list.len() - site.own;
        // The longest read of the key by another committed txn.
        let other_len = g
            .reads
            .iter()
            .filter(|r| r.txn != site.txn && r.key == site.key && committed(g, r.txn))
            .map(|r| list_of(g, r).len())
            .max()
            .unwrap_or(0);
        let (begin, end) = (txn(g, site.txn).begin, txn(g, site.txn).end);
        let with = |f: &dyn Fn(&mut Vec<u64>)| {
            let mut l = list.to_vec();
            f(&mut l);
            Change::SetRead(si, l)
        };
        match m {
            Mutation::Swap => {
                for j in (1..ext).filter(|&j| j < other_len) {
                    out.push(with(&|l| l.swap(j - 1, j)));
                }
            }
            Mutation::DropMiddle => {
                for d in (1..ext.saturating_sub(1)).filter(|&d| d < other_len) {
                    out.push(with(&|l| {
                        l.remove(d);
                    }));
                }
            }
            Mutation::StaleRead if site.own == 0 => {
                // Cut to q, missing an append at x >= q whose txn ended before we began.
                let ended_before = |x: usize| {
                    let w = appender(g, &site.key, list[x]);
                    committed(g, w) && txn(g, w).end < begin
                };
                if let Some(x) = (0..ext).rev().find(|&x| ended_before(x)) {
                    for q in 0..=x {
                        out.push(with(&|l| l.truncate(q)));
                    }
                }
            }
            Mutation::FutureRead if site.own == 0 => {
                if let Some(&(e, w)) = g.lists.get(&site.key).and_then(|l| l.get(ext)) {
                    if committed(g, w) && txn(g, w).begin > end {
                        out.push(with(&|l| l.push(e)));
                    }
                }
            }
            Mutation::AbortWriter => {
                for &e in &list[..ext] {
                    let w = appender(g, &site.key, e);
                    if w != site.txn && committed(g, w) {
                        out.push(Change::Abort(w));
                    }
                }
            }
            Mutation::IntermediateRead if site.own == 0 => {
                for x in 0..ext.saturating_sub(1) {
                    let w = appender(g, &site.key, list[x]);
                    if w != site.txn && appender(g, &site.key, list[x + 1]) == w {
                        out.push(with(&|l| l.truncate(x + 1)));
                    }
                }
            }
            Mutation::ReorderRealTime if ext > 0 => {
                let w = appender(g, &site.key, list[ext - 1]);
                if w != site.txn && committed(g, w) {
                    out.push(Change::Interval(w, end + 1, end + 2));
                }
            }
            _ => {}
        }
    }
    out
}

fn apply(g: &Generated, change: &Change) -> AppendHistory {
    let mut h = g.history.clone();
    match change {
        Change::SetRead(si, new) => {
            let site = &g.reads[*si];
            match &mut h.txns[site.txn].ops[site.op] {
                AppendOp::Read { list, .. } => list.clone_from(new),
                other => panic!("read site is not a read: {other:?}"),
            }
        }
        Change::Abort(t) => {
            h.txns[*t].outcome = Outcome::Aborted;
            h.txns[*t].ts = None;
        }
        &Change::Interval(t, begin, end) => {
            h.txns[t].begin = begin;
            h.txns[t].end = end;
        }
    }
    h
}

#[test]
fn injected_anomalies_are_rejected() {
    let generate = |(plan, overlap): (Vec<PlanTxn>, bool)| {
        let g = execute(&plan, overlap, None);
        prop_assert!(
            check_append_strict_serializable(&g.history).is_ok(),
            "unmutated history must be valid"
        );
        Ok(g)
    };
    let verify = |g: &Generated, m: Mutation, change: &Change| {
        let h = apply(g, change);
        let strict = check_append_strict_serializable(&h);
        prop_assert!(strict.is_err(), "{:?} via {:?} was accepted", m, change);
        let err = strict.unwrap_err();
        let expected = match m {
            Mutation::Swap | Mutation::DropMiddle => Some(AnomalyKind::IncompatibleOrder),
            Mutation::AbortWriter => Some(AnomalyKind::G1a),
            Mutation::IntermediateRead => Some(AnomalyKind::G1b),
            Mutation::ReorderRealTime => Some(AnomalyKind::RealTime),
            Mutation::StaleRead | Mutation::FutureRead => None,
        };
        if let Some(kind) = expected {
            prop_assert_eq!(err.kind, kind, "{:?} via {:?}: {}", m, change, err);
        } else {
            prop_assert!(
                err.kind.is_cycle() || err.kind == AnomalyKind::G1b,
                "{:?} via {:?}: {}",
                m,
                change,
                err
            );
        }
        // Only the real-time mutations depend on real time.
        let ser = check_append_serializable(&h);
        match m {
            Mutation::ReorderRealTime => prop_assert!(ser.is_ok(), "{:?}", ser),
            Mutation::StaleRead | Mutation::FutureRead => {}
            _ => prop_assert!(
                ser.as_ref().is_err_and(|e| e.kind == err.kind),
                "{:?}: {:?}",
                m,
                ser
            ),
        }
        Ok(())
    };
    let input = (plan(), any::<bool>());
    run_mutations(1024, input, &MUTATIONS, generate, candidates, verify);
}

// ---------------------------------------------------------------- scale

/// A deterministic pseudo-random plan without proptest, for large histories.
fn big_plan(n: usize, keys: usize, seed: u64) -> Vec<PlanTxn> {
    let mut rng = Rng(seed);
    let mut rand = move |m: usize| rng.below(m);
    (0..n)
        .map(|_| {
            let ops = (0..1 + rand(9))
                .map(|_| match rand(10) {
                    0..=4 => PlanOp::Read(rand(keys)),
                    5..=7 => PlanOp::Rmw(rand(keys)),
                    _ => PlanOp::Append(rand(keys)),
                })
                .collect();
            let fate = match rand(40) {
                0 => Fate::Abort,
                1 => Fate::UnknownCommitted,
                _ => Fate::Commit,
            };
            PlanTxn {
                ops,
                fate,
                dur: 1 + rand(39) as u64,
            }
        })
        .collect()
}

fn check_big(g: &Generated, what: &str) {
    let t0 = Instant::now();
    let stats = check_append_strict_serializable(&g.history).unwrap_or_else(|e| panic!("{e}"));
    let elapsed = t0.elapsed();
    let elements: usize = g
        .history
        .txns
        .iter()
        .flat_map(|t| &t.ops)
        .map(|op| match op {
            AppendOp::Read { list, .. } => list.len(),
            AppendOp::Append { .. } => 0,
        })
        .sum();
    eprintln!("{what}: {elements} elements read, checked in {elapsed:?}: {stats:?}");
    assert_eq!(stats.txns, g.history.len());
    // Generous bound for a loaded 2-core machine: this is about complexity, not speed.
    assert!(elapsed.as_secs() < 20, "{what} took {elapsed:?}");
}

#[test]
fn fifty_thousand_txns_check_quickly() {
    // 50k txns of ~5 ops over 300 keys, overlapping in real time. Lists grow to ~400.
    let plan = big_plan(50_000, 300, 0x9e37_79b9_7f4a_7c15);
    let g = execute(&plan, true, None);
    check_big(&g, "50k txns, unbounded lists");

    // One injected stale read among them is still found.
    let stale = g
        .reads
        .iter()
        .enumerate()
        .find_map(|(si, site)| {
            let c = candidates_for_site(&g, si, site);
            (!c.is_empty()).then_some(c)
        })
        .expect("some read can be made stale");
    let err = check_append_strict_serializable(&apply(&g, &stale[0])).unwrap_err();
    assert!(err.kind.is_cycle() || err.kind == AnomalyKind::G1b, "{err}");

    // The same with keys retired after 32 appends, as Jepsen does to keep reads short.
    let g = execute(&plan, true, Some(32));
    check_big(&g, "50k txns, keys retired after 32 appends");
}

/// A stale-read change for one site, or none (the per-site part of `candidates`, without
/// its quadratic scan over all reads).
fn candidates_for_site(g: &Generated, si: usize, site: &ReadSite) -> Vec<Change> {
    if !committed(g, site.txn) || site.own != 0 {
        return Vec::new();
    }
    let list = list_of(g, site);
    let begin = txn(g, site.txn).begin;
    let Some(&last) = list.last() else {
        return Vec::new();
    };
    let w = appender(g, &site.key, last);
    if !committed(g, w) || txn(g, w).end >= begin {
        return Vec::new();
    }
    vec![Change::SetRead(si, list[..list.len() - 1].to_vec())]
}
