//! Model-based test: random single-threaded transaction sequences against a `BTreeMap`.
//!
//! Each step opens a transaction, runs random gets, puts, deletes and ranges (both
//! directions, random bounds), checking every result against the model overlaid with the
//! transaction's own writes, then commits or aborts. Old read-only snapshots stay open across
//! later commits and GC and must keep seeing the model as it was when they began.

use std::collections::BTreeMap;
use std::ops::Bound;

use proptest::prelude::*;
use verso_engine::{Db, Options};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

#[derive(Debug, Clone)]
enum Op {
    Get(Vec<u8>),
    Put(Vec<u8>, Vec<u8>),
    Delete(Vec<u8>),
    Range(Bound<Vec<u8>>, Bound<Vec<u8>>, bool),
}

#[derive(Debug, Clone)]
struct TxnPlan {
    ops: Vec<Op>,
    commit: bool,
    /// Keep a read-only snapshot taken before this transaction open for a while.
    snapshot: bool,
}

fn key() -> impl Strategy<Value = Vec<u8>> {
    // Few distinct keys so operations collide; include the empty key and prefixes.
    prop_oneof![
        Just(vec![]),
        (0u8..6).prop_map(|b| vec![b]),
        (0u8..6, 0u8..3).prop_map(|(a, b)| vec![a, b]),
    ]
}

fn bound() -> impl Strategy<Value = Bound<Vec<u8>>> {
    prop_oneof![
        Just(Bound::Unbounded),
        key().prop_map(Bound::Included),
        key().prop_map(Bound::Excluded),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => key().prop_map(Op::Get),
        3 => (key(), proptest::collection::vec(any::<u8>(), 0..12)).prop_map(|(k, v)| Op::Put(k, v)),
        1 => key().prop_map(Op::Delete),
        2 => (bound(), bound(), any::<bool>()).prop_map(|(a, b, r)| Op::Range(a, b, r)),
    ]
}

fn plan() -> impl Strategy<Value = TxnPlan> {
    (
        proptest::collection::vec(op(), 0..10),
        prop::bool::weighted(0.8),
        prop::bool::weighted(0.2),
    )
        .prop_map(|(ops, commit, snapshot)| TxnPlan {
            ops,
            commit,
            snapshot,
        })
}

fn model_range(
    m: &Model,
    lo: &Bound<Vec<u8>>,
    hi: &Bound<Vec<u8>>,
    rev: bool,
) -> Vec<(Vec<u8>, Vec<u8>)> {
    let valid = match (lo, hi) {
        (Bound::Included(a), Bound::Included(b)) => a <= b,
        (Bound::Included(a) | Bound::Excluded(a), Bound::Included(b) | Bound::Excluded(b)) => a < b,
        _ => true,
    };
    if !valid {
        return Vec::new();
    }
    let mut v: Vec<_> = m
        .range::<Vec<u8>, _>((lo.clone(), hi.clone()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if rev {
        v.reverse();
    }
    v
}

fn as_slices(b: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    b.as_ref().map(Vec::as_slice)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn transactions_match_a_btreemap(plans in proptest::collection::vec(plan(), 1..40)) {
        let db = Db::open(Options::default()).unwrap();
        let t = db.table("t").unwrap();
        let mut committed = Model::new();
        // Open read-only snapshots with the model they must see, closed after a few steps.
        let mut snapshots: Vec<(verso_engine::Txn<'_>, Model, usize)> = Vec::new();
        for (step, plan) in plans.into_iter().enumerate() {
            if plan.snapshot {
                snapshots.push((db.begin_read_only().unwrap(), committed.clone(), step + 5));
            }
            let mut txn = db.begin().unwrap();
            let mut view = committed.clone();
            for op in &plan.ops {
                match op {
                    Op::Get(k) => prop_assert_eq!(txn.get(&t, k).unwrap(), view.get(k).map(Vec::as_slice)),
                    Op::Put(k, v) => {
                        txn.put(&t, k, v).unwrap();
                        view.insert(k.clone(), v.clone());
                    }
                    Op::Delete(k) => {
                        txn.delete(&t, k).unwrap();
                        view.remove(k);
                    }
                    Op::Range(lo, hi, rev) => {
                        let bounds = (as_slices(lo), as_slices(hi));
                        let it = if *rev { txn.range_rev(&t, bounds) } else { txn.range(&t, bounds) }.unwrap();
                        let got: Vec<_> = it.map(|(k, v)| (k.to_vec(), v.to_vec())).collect();
                        prop_assert_eq!(got, model_range(&view, lo, hi, *rev));
                    }
                }
            }
            if plan.commit {
                // Single-threaded and every other transaction is older or read-only: MVTO
                // only aborts a writer when a *younger* transaction touched its keys, and the
                // snapshots are older, so this commit must succeed.
                txn.commit().unwrap();
                committed = view;
            } else {
                txn.abort();
            }
            db.collect_garbage();
            for (snap, seen, _) in &snapshots {
                let got: Vec<_> = snap.range(&t, ..).unwrap().map(|(k, v)| (k.to_vec(), v.to_vec())).collect();
                let want: Vec<_> = seen.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
                prop_assert_eq!(got, want, "snapshot changed under it");
            }
            snapshots.retain(|(_, _, until)| *until > step);
        }
        drop(snapshots);
        db.collect_garbage();
        // No transaction is left: every deleted key has left the index.
        prop_assert_eq!(db.table_index_len(&t).unwrap(), committed.len(), "{:?}", db.stats());
        let check = db.begin_read_only().unwrap();
        let got: Vec<_> = check.range(&t, ..).unwrap().map(|(k, v)| (k.to_vec(), v.to_vec())).collect();
        let want: Vec<_> = committed.into_iter().collect();
        prop_assert_eq!(got, want);
    }
}
