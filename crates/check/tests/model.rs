//! Property tests against a model: random *serial* executions over a `BTreeMap` are
//! accepted, and single mutations that are guaranteed anomalies are rejected.

use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;
use std::time::Instant;

use common::{interval, run_mutations, Fate, Rng};
use proptest::prelude::*;
use proptest::test_runner::Config;
use verso_check::{
    check_serializable, check_strict_serializable, AnomalyKind, History, Key, Observed, Op,
    Outcome, TxnRecord, VersionId,
};

mod common;

type PlanTxn = common::PlanTxn<PlanOp>;

// ---------------------------------------------------------------- the model executor

#[derive(Clone, Debug)]
enum PlanOp {
    Read(usize),
    Write(usize),
    Delete(usize),
    Range {
        lo: usize,
        hi: usize,
        lo_incl: bool,
        hi_incl: bool,
        unbounded: bool,
        reverse: bool,
    },
}

#[derive(Clone, Copy, Debug, Default)]
struct Opts {
    /// Intervals overlap (while staying consistent with the serial order).
    overlap: bool,
    /// Read-only txns get no ts (deletes are turned into writes so "absent" is exact).
    no_ts_readers: bool,
    /// No txn gets a ts: version order must be inferred from read-modify-write chains.
    no_ts: bool,
}

/// One installed version of a key, in commit order.
#[derive(Clone, Debug)]
struct Installed {
    version: VersionId,
    tombstone: bool,
    writer: usize,
}

/// An external read (point read, or one returned range entry) in the generated history.
#[derive(Clone, Debug)]
struct ReadSite {
    txn: usize,
    op: usize,
    /// `Some(i)`: the i-th entry of a range read.
    entry: Option<usize>,
    key: Key,
    /// Number of versions of `key` installed before this txn ran.
    prefix: usize,
    observed: Option<VersionId>,
}

struct Generated {
    history: History,
    versions: BTreeMap<Key, Vec<Installed>>,
    reads: Vec<ReadSite>,
}

fn key(i: usize) -> Key {
    format!("k{i:05}").into_bytes()
}

/// Runs the plan serially against a `BTreeMap` and records what a perfect engine would.
fn execute(plan: &[PlanTxn], opts: Opts) -> Generated {
    let mut model: BTreeMap<Key, VersionId> = BTreeMap::new();
    let mut versions: BTreeMap<Key, Vec<Installed>> = BTreeMap::new();
    let mut reads = Vec::new();
    let mut txns = Vec::new();
    let mut next_ts = 100;
    for (i, p) in plan.iter().enumerate() {
        let id = i as u64 + 1;
        // Ops apply to the model directly; an undo log rolls back txns that do not commit.
        let mut undo: Vec<(Key, Option<VersionId>)> = Vec::new();
        let working = &mut model;
        let mut seqs: HashMap<Key, u32> = HashMap::new();
        let mut ops = Vec::new();
        let mut has_delete = false;
        for (oi, op) in p.ops.iter().enumerate() {
            let op = match op {
                PlanOp::Delete(k) if opts.no_ts_readers => PlanOp::Write(*k),
                other => other.clone(),
            };
            let prefix = |k: &Key| versions.get(k).map_or(0, Vec::len);
            match op {
                PlanOp::Read(k) => {
                    let k = key(k);
                    let seen = working.get(&k).copied();
                    if !seqs.contains_key(&k) {
                        let prefix = prefix(&k);
                        reads.push(ReadSite {
                            txn: i,
                            op: oi,
                            entry: None,
                            key: k.clone(),
                            prefix,
                            observed: seen,
                        });
                    }
                    ops.push(Op::read(
                        k,
                        seen.map_or(Observed::Absent, Observed::Version),
                    ));
                }
                PlanOp::Write(k) | PlanOp::Delete(k) => {
                    let k = key(k);
                    let seq = seqs.entry(k.clone()).or_insert(0);
                    let v = VersionId::new(id, *seq);
                    *seq += 1;
                    undo.push((k.clone(), working.get(&k).copied()));
                    if matches!(op, PlanOp::Write(_)) {
                        working.insert(k.clone(), v);
                        ops.push(Op::write(k));
                    } else {
                        has_delete = true;
                        working.remove(&k);
                        ops.push(Op::delete(k));
                    }
                }
                PlanOp::Range {
                    lo,
                    hi,
                    lo_incl,
                    hi_incl,
                    unbounded,
                    reverse,
                } => {
                    let (lo, hi) = (lo.min(hi), lo.max(hi));
                    let start = match (unbounded, lo_incl) {
                        (true, _) => Bound::Unbounded,
                        (false, true) => Bound::Included(key(lo)),
                        (false, false) => Bound::Excluded(key(lo)),
                    };
                    let end = if hi_incl {
                        Bound::Included(key(hi))
                    } else {
                        Bound::Excluded(key(hi))
                    };
                    let empty = lo == hi && !(lo_incl && hi_incl) && !unbounded;
                    let mut entries: Vec<(Key, VersionId)> = if empty {
                        Vec::new()
                    } else {
                        working
                            .range((start.clone(), end.clone()))
                            .map(|(k, v)| (k.clone(), *v))
                            .collect()
                    };
                    if reverse {
                        entries.reverse();
                    }
                    for (ei, (k, v)) in entries.iter().enumerate() {
                        if !seqs.contains_key(k) {
                            let prefix = prefix(k);
                            reads.push(ReadSite {
                                txn: i,
                                op: oi,
                                entry: Some(ei),
                                key: k.clone(),
                                prefix,
                                observed: Some(*v),
                            });
                        }
                    }
                    ops.push(Op::range(start, end, reverse, entries));
                }
            }
        }
        // A crashed txn whose delete nobody can observe is not counted (see
        // `Outcome::Unknown`), so only committed ones delete.
        let fate = match p.fate {
            Fate::UnknownCommitted if has_delete => Fate::Commit,
            f => f,
        };
        let commits = fate.commits();
        let mut ts = None;
        if commits {
            for (k, &n) in &seqs {
                let v = VersionId::new(id, n - 1);
                let tombstone = working.get(k) != Some(&v);
                versions.entry(k.clone()).or_default().push(Installed {
                    version: v,
                    tombstone,
                    writer: i,
                });
            }
            next_ts += 1;
            let read_only = seqs.is_empty();
            ts = (!(opts.no_ts || opts.no_ts_readers && read_only)).then_some(next_ts);
        }
        if !commits {
            for (k, old) in undo.into_iter().rev() {
                match old {
                    Some(v) => model.insert(k, v),
                    None => model.remove(&k),
                };
            }
        }
        let (begin, end) = interval(id, p.dur, opts.overlap);
        txns.push(TxnRecord::new(id, begin, end, ts, fate.outcome(), ops));
    }
    Generated {
        history: History::from_txns(txns),
        versions,
        reads,
    }
}

// ---------------------------------------------------------------- strategies

const KEYS: usize = 5;

fn plan_op() -> impl Strategy<Value = PlanOp> {
    prop_oneof![
        3 => (0..KEYS).prop_map(PlanOp::Read),
        3 => (0..KEYS).prop_map(PlanOp::Write),
        1 => (0..KEYS).prop_map(PlanOp::Delete),
        2 => (0..KEYS, 0..=KEYS, any::<bool>(), any::<bool>(), prop::bool::weighted(0.2), any::<bool>()).prop_map(
            |(lo, hi, lo_incl, hi_incl, unbounded, reverse)| PlanOp::Range { lo, hi, lo_incl, hi_incl, unbounded, reverse }
        ),
    ]
}

fn plan() -> impl Strategy<Value = Vec<PlanTxn>> {
    common::plan(plan_op())
}

// ---------------------------------------------------------------- valid histories

proptest! {
    #![proptest_config(Config { cases: 512, ..Config::default() })]

    #[test]
    fn serial_executions_are_accepted(plan in plan(), overlap: bool, no_ts_readers: bool) {
        let g = execute(&plan, Opts { overlap, no_ts_readers, no_ts: false });
        let strict = check_strict_serializable(&g.history);
        prop_assert!(strict.is_ok(), "strict: {}", strict.unwrap_err());
        let stats = strict.unwrap();
        prop_assert_eq!(stats.keys_partial_order, 0);
        let ser = check_serializable(&g.history);
        prop_assert!(ser.is_ok(), "serializable: {}", ser.unwrap_err());
    }
}

proptest! {
    #![proptest_config(Config { cases: 256, ..Config::default() })]

    /// Without any timestamps the checker infers less, but must still never reject a
    /// valid history.
    #[test]
    fn serial_executions_without_timestamps_are_accepted(plan in plan(), overlap: bool) {
        let g = execute(&plan, Opts { overlap, no_ts_readers: false, no_ts: true });
        let strict = check_strict_serializable(&g.history);
        prop_assert!(strict.is_ok(), "strict: {}", strict.unwrap_err());
        let ser = check_serializable(&g.history);
        prop_assert!(ser.is_ok(), "serializable: {}", ser.unwrap_err());
    }
}

// ---------------------------------------------------------------- mutations

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Mutation {
    /// A read observes a version older than the visible one, though a committed txn
    /// overwrote it before the reader began.
    StaleRead,
    /// A read observes a version installed by a txn that began after the reader ended.
    FutureRead,
    /// The writer of an observed version is made aborted.
    AbortWriter,
    /// A read of a txn's final write of a key observes its first write instead.
    IntermediateRead,
    /// A range read omits an entry written by a committed txn.
    DropRangeEntry,
    /// A range read returns two entries in the wrong order.
    SwapRangeEntries,
}

const MUTATIONS: [Mutation; 6] = [
    Mutation::StaleRead,
    Mutation::FutureRead,
    Mutation::AbortWriter,
    Mutation::IntermediateRead,
    Mutation::DropRangeEntry,
    Mutation::SwapRangeEntries,
];

/// A concrete change to a generated history.
#[derive(Debug)]
enum Change {
    /// Set what a read site observed (`None` = absent, which drops a range entry).
    Observe(usize, Option<VersionId>),
    Abort(usize),
    Swap {
        txn: usize,
        op: usize,
    },
}

fn committed(g: &Generated, txn: usize) -> bool {
    g.history.txns[txn].outcome == Outcome::Committed
}

fn writer_committed(g: &Generated, v: VersionId) -> bool {
    committed(g, v.txn as usize - 1)
}

/// Every applicable change of the given mutation kind.
fn candidates(g: &Generated, m: Mutation) -> Vec<Change> {
    let mut out = Vec::new();
    for (si, site) in g.reads.iter().enumerate() {
        if !committed(g, site.txn) {
            continue;
        }
        let vs = g.versions.get(&site.key).map_or(&[][..], Vec::as_slice);
        let visible_present_committed = site.observed.is_some_and(|v| writer_committed(g, v));
        match m {
            Mutation::StaleRead => {
                // Older version u = vs[j] (j == None: the initial version); some
                // committed txn installed a version after u and before the reader.
                for j in (0..site.prefix).map(Some).chain([None]) {
                    let after = j.map_or(0, |j| j + 1);
                    if after >= site.prefix
                        || !vs[after..site.prefix]
                            .iter()
                            .any(|i| committed(g, i.writer))
                    {
                        continue;
                    }
                    match j.map(|j| &vs[j]) {
                        Some(u) if !u.tombstone => out.push(Change::Observe(si, Some(u.version))),
                        _ if visible_present_committed => out.push(Change::Observe(si, None)),
                        _ => {}
                    }
                }
            }
            Mutation::FutureRead => {
                for u in &vs[site.prefix..] {
                    if u.writer == site.txn {
                        continue;
                    }
                    if !u.tombstone {
                        out.push(Change::Observe(si, Some(u.version)));
                    } else if visible_present_committed {
                        out.push(Change::Observe(si, None));
                    }
                }
            }
            Mutation::AbortWriter => {
                if let Some(v) = site.observed.filter(|&v| writer_committed(g, v)) {
                    out.push(Change::Abort(v.txn as usize - 1));
                }
            }
            Mutation::IntermediateRead => {
                if let Some(v) = site.observed.filter(|v| v.seq > 0) {
                    out.push(Change::Observe(si, Some(VersionId::new(v.txn, 0))));
                }
            }
            Mutation::DropRangeEntry => {
                if site.entry.is_some() && visible_present_committed {
                    out.push(Change::Observe(si, None));
                }
            }
            Mutation::SwapRangeEntries => {
                if site.entry == Some(1) {
                    out.push(Change::Swap {
                        txn: site.txn,
                        op: site.op,
                    });
                }
            }
        }
    }
    out
}

fn apply(g: &Generated, change: &Change) -> History {
    let mut h = g.history.clone();
    match *change {
        Change::Observe(si, seen) => {
            let site = &g.reads[si];
            match (&mut h.txns[site.txn].ops[site.op], site.entry) {
                (Op::Read { observed, .. }, None) => {
                    *observed = seen.map_or(Observed::Absent, Observed::Version);
                }
                (Op::Range { observed, .. }, Some(e)) => match seen {
                    Some(v) => observed[e].1 = v,
                    None => {
                        observed.remove(e);
                    }
                },
                other => panic!("read site does not match its op: {other:?}"),
            }
        }
        Change::Abort(t) => {
            h.txns[t].outcome = Outcome::Aborted;
            h.txns[t].ts = None;
        }
        Change::Swap { txn, op } => match &mut h.txns[txn].ops[op] {
            Op::Range { observed, .. } => observed.swap(0, 1),
            other => panic!("not a range: {other:?}"),
        },
    }
    h
}

#[test]
fn injected_anomalies_are_rejected() {
    let generate = |plan: Vec<PlanTxn>| {
        let g = execute(&plan, Opts::default());
        prop_assert!(
            check_strict_serializable(&g.history).is_ok(),
            "unmutated history must be valid"
        );
        Ok(g)
    };
    let verify = |g: &Generated, m: Mutation, change: &Change| {
        let h = apply(g, change);
        let strict = check_strict_serializable(&h);
        prop_assert!(strict.is_err(), "{m:?} via {change:?} was accepted");
        let err = strict.unwrap_err();
        let expected = match m {
            Mutation::AbortWriter => Some(AnomalyKind::G1a),
            Mutation::IntermediateRead => Some(AnomalyKind::G1b),
            Mutation::SwapRangeEntries => Some(AnomalyKind::InvalidRangeResult),
            _ => None,
        };
        if let Some(kind) = expected {
            prop_assert_eq!(err.kind, kind, "{:?}: {}", m, err);
            // Direct anomalies do not depend on real time.
            let ser = check_serializable(&h);
            prop_assert!(
                ser.as_ref().is_err_and(|e| e.kind == kind),
                "{:?}: {:?}",
                m,
                ser
            );
        }
        Ok(())
    };
    run_mutations(512, plan(), &MUTATIONS, generate, candidates, verify);
}

// ---------------------------------------------------------------- scale

/// A deterministic pseudo-random plan without proptest, for large histories.
fn big_plan(n: usize, keys: usize, seed: u64) -> Vec<PlanTxn> {
    let mut rng = Rng(seed);
    let mut rand = move |m: usize| rng.below(m);
    (0..n)
        .map(|_| {
            let ops = (0..1 + rand(4))
                .map(|_| match rand(10) {
                    0..=3 => PlanOp::Read(rand(keys)),
                    4..=7 => PlanOp::Write(rand(keys)),
                    8 => PlanOp::Delete(rand(keys)),
                    _ => {
                        let lo = rand(keys);
                        PlanOp::Range {
                            lo,
                            hi: lo + 3,
                            lo_incl: true,
                            hi_incl: false,
                            unbounded: false,
                            reverse: rand(2) == 0,
                        }
                    }
                })
                .collect();
            let fate = if rand(20) == 0 {
                Fate::Abort
            } else {
                Fate::Commit
            };
            PlanTxn {
                ops,
                fate,
                dur: 1 + rand(39) as u64,
            }
        })
        .collect()
}

#[test]
fn large_history_checks_quickly() {
    // 200k txns with overlapping intervals, as the engine's stress tests produce.
    let g = execute(
        &big_plan(200_000, 2_000, 0x9e37_79b9_7f4a_7c15),
        Opts {
            overlap: true,
            ..Opts::default()
        },
    );
    let t0 = Instant::now();
    let stats = check_strict_serializable(&g.history).expect("valid");
    let elapsed = t0.elapsed();
    eprintln!("checked {} txns in {elapsed:?}: {stats:?}", stats.txns);
    assert_eq!(stats.txns, 200_000);
    assert!(stats.rt_edges <= 3 * stats.txns);
    // Generous bound: this is about complexity (no O(n²)), not micro-performance.
    assert!(elapsed.as_secs() < 60, "took {elapsed:?}: {stats:?}");

    // And one injected stale read among them is still found.
    let stale_candidate = |r: &ReadSite| {
        if r.entry.is_some() || r.prefix < 2 || !committed(&g, r.txn) {
            return false;
        }
        let vs = &g.versions[&r.key];
        let (older, newer) = (&vs[r.prefix - 2], &vs[r.prefix - 1]);
        let txns = &g.history.txns;
        // The overwrite must have finished before the reader began to be a violation.
        !older.tombstone
            && committed(&g, newer.writer)
            && txns[newer.writer].end < txns[r.txn].begin
    };
    let site = g
        .reads
        .iter()
        .position(stale_candidate)
        .expect("some read has an older version");
    let old = g.versions[&g.reads[site].key][g.reads[site].prefix - 2].version;
    let h = apply(&g, &Change::Observe(site, Some(old)));
    let err = check_strict_serializable(&h).expect_err("stale read must be found");
    assert!(err.kind.is_cycle(), "{err}");
}
