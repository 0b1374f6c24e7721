//! Single-threaded model tests against `BTreeMap`, and the gap-stamp contract.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;

use proptest::prelude::*;

use super::Masstree;
use crate::fuzzing::{FuzzValue, KeyedValue};
use crate::Direction;

fn collect(
    t: &Masstree<u64>,
    lo: Bound<&[u8]>,
    hi: Bound<&[u8]>,
    d: Direction,
) -> Vec<(Vec<u8>, u64)> {
    let mut out = Vec::new();
    assert!(t.scan(lo, hi, d, 0, |k, v| {
        out.push((k.to_vec(), v));
        true
    }));
    out
}

fn model_range(
    m: &BTreeMap<Vec<u8>, u64>,
    lo: Bound<&[u8]>,
    hi: Bound<&[u8]>,
    d: Direction,
) -> Vec<(Vec<u8>, u64)> {
    let mut v: Vec<_> = m
        .iter()
        .filter(|(k, _)| {
            let k = k.as_slice();
            let above = match lo {
                Bound::Unbounded => true,
                Bound::Included(l) => k >= l,
                Bound::Excluded(l) => k > l,
            };
            let below = match hi {
                Bound::Unbounded => true,
                Bound::Included(h) => k <= h,
                Bound::Excluded(h) => k < h,
            };
            above && below
        })
        .map(|(k, v)| (k.clone(), *v))
        .collect();
    if d == Direction::Reverse {
        v.reverse();
    }
    v
}

#[test]
fn layers_prefixes_and_empty_key() {
    let t = Masstree::<u64>::new();
    let keys: Vec<Vec<u8>> = vec![
        b"".to_vec(),
        b"\0".to_vec(),
        b"01234567".to_vec(),
        b"01234567AB".to_vec(),
        b"01234567XY".to_vec(),
        b"0123456789abcdefXYZ".to_vec(),
        b"0123456789abcdefXY".to_vec(),
        b"0123456789abcdef".to_vec(),
        b"0123456789abcde".to_vec(),
        vec![0; 40],
        vec![0; 41],
    ];
    for (i, k) in keys.iter().enumerate() {
        assert_eq!(t.insert(k, i as u64), None, "{k:?}");
    }
    for (i, k) in keys.iter().enumerate() {
        assert_eq!(t.get(k), Some(i as u64), "{k:?}");
    }
    let mut sorted = keys.clone();
    sorted.sort();
    let got: Vec<Vec<u8>> = collect(&t, Bound::Unbounded, Bound::Unbounded, Direction::Forward)
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    assert_eq!(got, sorted);
    assert_eq!(t.len(), keys.len());
    for (i, k) in keys.iter().enumerate() {
        assert_eq!(t.remove(k), Some(i as u64));
        assert_eq!(t.get(k), None);
    }
    assert!(t.is_empty());
}

#[test]
fn many_keys_split_in_all_orders() {
    for order in 0..3 {
        let t = Masstree::<u64>::new();
        let n = 5000u64;
        let ids: Vec<u64> = match order {
            0 => (0..n).collect(),
            1 => (0..n).rev().collect(),
            _ => (0..n).map(|i| (i * 7919) % n).collect(),
        };
        for &i in &ids {
            assert_eq!(t.insert(&i.to_be_bytes(), i), None);
        }
        for i in 0..n {
            assert_eq!(t.get(&i.to_be_bytes()), Some(i));
        }
        let all = collect(&t, Bound::Unbounded, Bound::Unbounded, Direction::Reverse);
        assert_eq!(all.len(), n as usize);
        assert!(all
            .iter()
            .rev()
            .enumerate()
            .all(|(i, (_, v))| *v == i as u64));
    }
}

#[derive(Debug, Clone)]
enum Op {
    Get(Vec<u8>),
    Insert(Vec<u8>, u64),
    GetOrInsert(Vec<u8>, u64),
    Remove(Vec<u8>),
    Scan(Bound<Vec<u8>>, Bound<Vec<u8>>, bool, usize),
}

/// Keys that stress layers: shared 8/16/24-byte prefixes, prefixes of each other, zeros.
fn key() -> impl Strategy<Value = Vec<u8>> {
    let prefixes: Vec<Vec<u8>> = vec![
        vec![],
        b"abcdefgh".to_vec(),
        b"abcdefghijklmnop".to_vec(),
        b"abcdefghijklmnopqrstuvwx".to_vec(),
        vec![0; 8],
        vec![0; 16],
    ];
    prop_oneof![
        4 => (proptest::sample::select(prefixes), proptest::collection::vec(prop_oneof![Just(0u8), Just(b'a'), Just(b'b'), any::<u8>()], 0..12))
            .prop_map(|(mut p, s)| { p.extend(s); p }),
        1 => proptest::collection::vec(prop_oneof![Just(0u8), Just(b'a')], 0..300),
        1 => proptest::collection::vec(any::<u8>(), 0..20),
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
        2 => key().prop_map(Op::Get),
        4 => (key(), any::<u64>()).prop_map(|(k, v)| Op::Insert(k, v)),
        3 => (key(), any::<u64>()).prop_map(|(k, v)| Op::GetOrInsert(k, v)),
        2 => key().prop_map(Op::Remove),
        1 => (bound(), bound(), any::<bool>(), 0usize..50).prop_map(|(a, b, r, n)| Op::Scan(a, b, r, n)),
    ]
}

fn as_ref(b: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    match b {
        Bound::Unbounded => Bound::Unbounded,
        Bound::Included(k) => Bound::Included(k),
        Bound::Excluded(k) => Bound::Excluded(k),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]
    #[test]
    fn matches_btreemap(ops in proptest::collection::vec(op(), 1..400)) {
        let t = Masstree::<u64>::new();
        let mut m = BTreeMap::new();
        for op in ops {
            match op {
                Op::Get(k) => prop_assert_eq!(t.get(&k), m.get(&k).copied()),
                Op::Insert(k, v) => prop_assert_eq!(t.insert(&k, v), m.insert(k, v)),
                Op::GetOrInsert(k, v) => {
                    let want = match m.get(&k) { Some(&old) => (old, false), None => { m.insert(k.clone(), v); (v, true) } };
                    prop_assert_eq!(t.get_or_insert_with(&k, |_| v), want);
                }
                Op::Remove(k) => prop_assert_eq!(t.remove(&k), m.remove(&k)),
                Op::Scan(lo, hi, rev, limit) => {
                    let d = if rev { Direction::Reverse } else { Direction::Forward };
                    let (lo, hi) = (as_ref(&lo), as_ref(&hi));
                    let mut got = Vec::new();
                    let reached = t.scan(lo, hi, d, 0, |k, v| { got.push((k.to_vec(), v)); got.len() < limit.max(1) });
                    let want = model_range(&m, lo, hi, d);
                    let cut = want.len().min(limit.max(1));
                    prop_assert_eq!(&got[..], &want[..cut]);
                    prop_assert_eq!(reached, want.len() < limit.max(1));
                }
            }
        }
        prop_assert_eq!(t.len(), m.len());
        let all = collect(&t, Bound::Unbounded, Bound::Unbounded, Direction::Forward);
        prop_assert_eq!(all, m.into_iter().collect::<Vec<_>>());
    }
}

/// A stamped interval: `(lo, hi, stamp, keys the reader observed)`.
type Covered = (Vec<u8>, Vec<u8>, u64, BTreeSet<Vec<u8>>);

#[derive(Debug, Clone)]
enum StampOp {
    Remove(Vec<u8>),
    Insert(Vec<u8>),
    Lookup(Vec<u8>),
    Scan(Vec<u8>, Vec<u8>, bool),
}

fn small_key() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        (0u8..32).prop_map(|b| vec![b]),
        (0u8..4, 0u8..4).prop_map(|(a, b)| {
            let mut k = b"prefix--".to_vec();
            k.push(a);
            k.extend(std::iter::repeat_n(b, 9));
            k
        }),
        (0u8..4).prop_map(|a| {
            let mut k = b"prefix--".to_vec();
            k.extend(std::iter::repeat_n(a, usize::from(a)));
            k
        }),
    ]
}

fn stamp_op() -> impl Strategy<Value = StampOp> {
    prop_oneof![
        3 => small_key().prop_map(StampOp::Insert),
        2 => small_key().prop_map(StampOp::Remove),
        1 => small_key().prop_map(StampOp::Lookup),
        1 => (small_key(), small_key(), any::<bool>()).prop_map(|(a, b, r)| StampOp::Scan(a, b, r)),
    ]
}

proptest! {
    /// The crate's gap-stamp contract against a model of stamped intervals.
    #[test]
    fn stamps_reach_every_insert_they_cover(ops in proptest::collection::vec(stamp_op(), 1..300)) {
        let t = Masstree::<u64>::new();
        let mut model = BTreeSet::new();
        // (lo, hi, stamp, keys observed): a covered key not observed must see the stamp.
        let mut covered: Vec<Covered> = Vec::new();
        for (i, op) in ops.into_iter().enumerate() {
            let stamp = i as u64 + 1;
            match op {
                StampOp::Insert(k) => {
                    let (gap, inserted) = t.get_or_insert_with(&k, |s| s);
                    prop_assert_eq!(inserted, model.insert(k.clone()));
                    if inserted {
                        for (lo, hi, s, seen) in &covered {
                            if *lo <= k && k <= *hi && !seen.contains(&k) {
                                prop_assert!(gap >= *s, "insert of {:?} missed stamp {}", k, s);
                            }
                        }
                    }
                }
                StampOp::Remove(k) => {
                    // Every other removal leaves its stamp (the engine's fold of a removed
                    // record's `tslast`); the rest leave none, as a plain `remove`.
                    let fold = if i % 2 == 0 { stamp } else { 0 };
                    let removed = t.remove_if(&k, fold, |_| true).is_some();
                    prop_assert_eq!(removed, model.remove(&k));
                    if removed && fold > 0 {
                        covered.push((k.clone(), k, fold, BTreeSet::new()));
                    }
                }
                StampOp::Lookup(k) => {
                    let got = t.get_or_stamp(&k, stamp).is_some();
                    prop_assert_eq!(got, model.contains(&k));
                    if !got { covered.push((k.clone(), k, stamp, BTreeSet::new())); }
                }
                StampOp::Scan(a, b, rev) => {
                    let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
                    let d = if rev { Direction::Reverse } else { Direction::Forward };
                    let mut seen = Vec::new();
                    t.scan(Bound::Included(&lo), Bound::Included(&hi), d, stamp, |k, _| { seen.push(k.to_vec()); true });
                    let mut want: Vec<Vec<u8>> = model.range(lo.clone()..=hi.clone()).cloned().collect();
                    if rev { want.reverse(); }
                    prop_assert_eq!(&seen, &want);
                    covered.push((lo, hi, stamp, seen.into_iter().collect()));
                }
            }
        }
    }
}

/// Border nodes reachable along layer 0's border list.
fn border_count(t: &Masstree<u64>) -> usize {
    let g = crossbeam_epoch::pin();
    let root = t.root.load(super::sync::Ordering::Acquire);
    let (mut n, _) = Masstree::<u64>::find_border(root, 0, &g);
    let mut count = 1;
    loop {
        let next = n.next.load(super::sync::Ordering::Acquire);
        if next.is_null() {
            return count;
        }
        // SAFETY: single-threaded test; sibling pointers name live nodes.
        n = unsafe { &*next };
        count += 1;
    }
}

#[test]
fn emptied_border_nodes_are_unlinked() {
    let t = Masstree::<u64>::new();
    let n = 20_000u64;
    for i in 0..n {
        t.insert(&(i * 7919 % n).to_be_bytes(), i);
    }
    let full = border_count(&t);
    assert!(full > n as usize / 15, "{full} border nodes");
    // Remove all but every 1000th key, in an order that empties nodes in the middle.
    for i in (0..n).rev().filter(|i| i % 1000 != 0) {
        assert!(t.remove(&i.to_be_bytes()).is_some());
    }
    let after = border_count(&t);
    // Only children of interior nodes stay (module docs), so not all go.
    assert!(after < full / 8, "{after} of {full} border nodes left");
    let left: Vec<u64> = collect(&t, Bound::Unbounded, Bound::Unbounded, Direction::Forward)
        .into_iter()
        .map(|(_, v)| v)
        .collect();
    assert_eq!(left.len(), 20);
    let rev = collect(&t, Bound::Unbounded, Bound::Unbounded, Direction::Reverse);
    assert_eq!(rev.len(), 20);
    // The emptied ranges take inserts again, in order.
    for i in 0..n {
        t.insert(&i.to_be_bytes(), i);
    }
    let all = collect(&t, Bound::Unbounded, Bound::Unbounded, Direction::Forward);
    assert!(all
        .iter()
        .enumerate()
        .all(|(i, (k, _))| *k == (i as u64).to_be_bytes()));
    assert_eq!(all.len(), n as usize);
}

/// An unlinked node hands its gap stamp to its previous sibling, which takes over its range.
#[test]
fn unlinked_node_hands_its_stamp_over() {
    let t = Masstree::<u64>::new();
    // Sequential inserts split 15 | 15 | 15: the middle node is a non-leftmost child.
    for i in 0..45u8 {
        t.insert(&[i], 0);
    }
    let before = border_count(&t);
    assert_eq!(t.remove(&[20]), Some(0));
    assert_eq!(t.get_or_stamp(&[20], 99), None);
    assert!(t.scan(
        Bound::Included(&[21][..]),
        Bound::Excluded(&[23][..]),
        Direction::Reverse,
        77,
        |_, _| true
    ));
    for i in 15..30u8 {
        t.remove(&[i]);
    }
    assert_eq!(
        border_count(&t),
        before - 1,
        "the emptied middle node is unlinked"
    );
    assert!(t.get_or_insert_with(&[20], |g| g) >= (99, true));
    assert!(t.get_or_insert_with(&[22], |g| g) >= (77, true));
    assert_eq!(t.get_or_insert_with(&[30], |g| g), (0, false));
}

/// Live entries in layer 0's root border node (for tests whose layer 0 is one node).
fn root_count(t: &Masstree<u64>) -> usize {
    let g = crossbeam_epoch::pin();
    let root = t.root.load(super::sync::Ordering::Acquire);
    Masstree::<u64>::find_border(root, 0, &g).0.perm().count()
}

#[test]
fn remove_if_respects_the_predicate_and_leaves_its_stamp() {
    let t = Masstree::<u64>::new();
    t.insert(b"k", 1);
    t.insert(b"a long key past one slice", 2);
    assert_eq!(
        t.remove_if(b"k", 50, |v| v == 2),
        None,
        "refused: value differs"
    );
    assert_eq!(t.get(b"k"), Some(1));
    assert_eq!(t.remove_if(b"absent", 50, |_| true), None);
    assert_eq!(t.remove_if(b"k", 50, |v| v == 1), Some(1));
    assert_eq!(t.get(b"k"), None);
    assert!(
        t.get_or_insert_with(b"k", |g| g).0 >= 50,
        "the removal's stamp was lost"
    );
    assert_eq!(
        t.remove_if(b"a long key past one slice", 70, |_| true),
        Some(2)
    );
    assert!(t.get_or_insert_with(b"a long key past one slice", |g| g).0 >= 70);
}

#[test]
fn emptied_layers_are_removed() {
    let t = Masstree::<u64>::new();
    let keys: [&[u8]; 5] = [
        b"01234567AB",
        b"01234567XY",
        b"0123456789abcdefXYZ",
        b"0123456789abcdefXYZW",
        b"0123456789abcdef0123456789",
    ];
    for (i, k) in keys.iter().enumerate() {
        t.insert(k, i as u64);
    }
    assert_eq!(root_count(&t), 1, "one layer slot at layer 0");
    for k in &keys[..4] {
        assert!(t.remove(k).is_some());
    }
    assert_eq!(root_count(&t), 1);
    assert_eq!(t.get(keys[4]), Some(4));
    assert!(t.remove(keys[4]).is_some());
    assert_eq!(root_count(&t), 0, "the emptied layers are gone");
    // Stamps left on the removed layers reach the upper node.
    t.insert(keys[0], 0);
    t.insert(keys[1], 1);
    assert_eq!(t.get_or_stamp(b"01234567Q", 55), None);
    t.remove(keys[0]);
    t.remove(keys[1]);
    assert_eq!(root_count(&t), 0);
    assert!(t.get_or_insert_with(b"01234567Q", |g| g).0 >= 55);
    assert!(t.get_or_insert_with(b"01234567QQ", |g| g).0 >= 55);
    assert_eq!(t.len(), 2);
}

/// Ten ascending streams interleaved (TPC-C's districts appending orders to one tree):
/// every stream appends in the middle of the layer, and its nodes still fill up
/// (`Border::appended`) instead of being split in half at every split.
#[test]
fn interleaved_ascending_streams_fill_their_nodes() {
    let t = Masstree::<u64>::new();
    let per_stream = 3_000u32;
    for i in 0..per_stream {
        for stream in 0..10u8 {
            let mut k = [0u8; 8];
            k[0] = stream;
            k[4..].copy_from_slice(&i.to_be_bytes());
            t.insert(&k, u64::from(i));
        }
    }
    let keys = 10 * per_stream as usize;
    let nodes = border_count(&t);
    // Full nodes need keys / 15 (2,000); halves would need twice that.
    assert!(
        nodes <= keys / 15 + keys / 150 + 20,
        "{nodes} border nodes for {keys} keys"
    );
    let all = collect(&t, Bound::Unbounded, Bound::Unbounded, Direction::Forward);
    assert_eq!(all.len(), keys);
    assert!(all.windows(2).all(|w| w[0].0 < w[1].0));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]
    /// The model test again with values that hold their keys: long suffixes live only in the
    /// values, so every comparison, new layer, split and scan reads them from there.
    #[test]
    fn values_holding_their_keys_match_btreemap(ops in proptest::collection::vec(op(), 1..400)) {
        let t = Masstree::<KeyedValue>::new();
        let mut m: BTreeMap<Vec<u8>, u64> = BTreeMap::new();
        let id = |v: Option<KeyedValue>| v.map(KeyedValue::id);
        for op in ops {
            match op {
                Op::Get(k) => {
                    let got = t.get(&k);
                    if let Some(v) = got {
                        prop_assert_eq!(&v.get().0, &k);
                    }
                    prop_assert_eq!(id(got), m.get(&k).copied());
                }
                Op::Insert(k, v) => {
                    let old = t.insert(&k, KeyedValue::make(&k, v));
                    prop_assert_eq!(id(old), m.insert(k, v));
                    if let Some(old) = old {
                        old.release();
                    }
                }
                Op::GetOrInsert(k, v) => {
                    let want = match m.get(&k) { Some(&old) => (old, false), None => { m.insert(k.clone(), v); (v, true) } };
                    let (got, inserted) = t.get_or_insert_with(&k, |_| KeyedValue::make(&k, v));
                    prop_assert_eq!((got.get().1, inserted), want);
                }
                Op::Remove(k) => {
                    let old = t.remove(&k);
                    prop_assert_eq!(id(old), m.remove(&k));
                    if let Some(old) = old {
                        old.release();
                    }
                }
                Op::Scan(lo, hi, rev, limit) => {
                    let d = if rev { Direction::Reverse } else { Direction::Forward };
                    let (lo, hi) = (as_ref(&lo), as_ref(&hi));
                    let mut got = Vec::new();
                    let reached = t.scan(lo, hi, d, 0, |k, v: KeyedValue| {
                        assert_eq!(k, v.get().0.as_slice(), "a scan built a key its value does not hold");
                        got.push((k.to_vec(), v.get().1));
                        got.len() < limit.max(1)
                    });
                    let want = model_range(&m, lo, hi, d);
                    let cut = want.len().min(limit.max(1));
                    prop_assert_eq!(&got[..], &want[..cut]);
                    prop_assert_eq!(reached, want.len() < limit.max(1));
                }
            }
        }
        prop_assert_eq!(t.len(), m.len());
        let mut all = Vec::new();
        t.for_each(|k, v| all.push((k.to_vec(), v)));
        drop(t);
        let seen: Vec<(Vec<u8>, u64)> = all.iter().map(|(k, v)| (k.clone(), v.get().1)).collect();
        for (_, v) in all {
            v.release();
        }
        prop_assert_eq!(seen, m.into_iter().collect::<Vec<_>>());
    }
}
