//! Randomized-schedule tests (shuttle) of whole-tree operations: border and interior splits,
//! removes that unlink emptied nodes (both the plain and the leftmost-child "redirect" path),
//! and layer creation and removal. Run with
//! `RUSTFLAGS="--cfg shuttle" CARGO_TARGET_DIR=target/shuttle cargo test -p verso-index --lib --release shuttle`.
//!
//! Each test builds, single-threaded, a tree one key short of the structural change it is
//! about (asserting that shape), then runs two or three shuttle threads of writes against a
//! reader, and finally checks the tree against the exact expected contents. Shuttle runs
//! sequentially consistent interleavings, switching threads at every atomic access; a
//! failure prints the schedule to hand to `shuttle::replay`.
//!
//! crossbeam-epoch keeps its participant handle in a `std` thread-local, and shuttle runs all
//! its threads on one OS thread, so every shuttle thread pins the same `Local`: pins nest
//! (the participant stays pinned, at the epoch of the outermost pin, while any guard lives),
//! which only delays reclamation, and no epoch code yields in the middle, so this is sound.

use std::collections::BTreeSet;
use std::ops::Bound;
use std::sync::Arc;

use shuttle::thread;

use super::node::Border;
use super::sync::Ordering;
use super::version::{is_leaf, is_root};
use super::{as_interior, node, Masstree};
use crate::Direction;

type Key = Vec<u8>;

/// Executions per scheduler and test: `check_random` and `check_pct` each run this many
/// (about 15 s for all five tests in release on 2 cores). `SHUTTLE_ITERATIONS` overrides it
/// for longer runs.
const ITERATIONS_DEFAULT: usize = 1500;
/// PCT's bug depth: the number of priority change points per execution.
const PCT_DEPTH: usize = 3;

/// Runs `f` under the random scheduler and under PCT, `SHUTTLE_ITERATIONS` (or
/// [`ITERATIONS_DEFAULT`]) executions each.
fn check(f: impl Fn() + Send + Sync + Clone + 'static) {
    let iterations = std::env::var("SHUTTLE_ITERATIONS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(ITERATIONS_DEFAULT);
    assert!(iterations > 0);
    shuttle::check_random(f.clone(), iterations);
    drain_deferred_outside_shuttle();
    shuttle::check_pct(f, iterations, PCT_DEPTH);
    drain_deferred_outside_shuttle();
}

/// Runs deferred frees outside any shuttle execution, as crossbeam-epoch may at any later
/// pin on any thread or at thread exit: a deferred closure must only free memory, never
/// touch an atomic (a shuttle atomic panics outside an execution, which is how CI once
/// aborted here). Pinning and flushing repeatedly advances the global epoch and runs the
/// bags that became safe, this thread's and (when other tests are unpinned) theirs.
fn drain_deferred_outside_shuttle() {
    for _ in 0..256 {
        crossbeam_epoch::pin().flush();
    }
}

/// The value stored under `k`: a hash of the key, so a reader can check any pair it sees.
fn val(k: &[u8]) -> u64 {
    k.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// An 8-byte key: one slice, no suffix, so these keys all live in layer 0.
fn k8(i: u64) -> Key {
    i.to_be_bytes().to_vec()
}

fn insert(t: &Masstree<u64>, k: &[u8]) {
    assert_eq!(t.insert(k, val(k)), None, "{k:?} inserted twice");
}

fn scan(t: &Masstree<u64>, lo: Bound<&[u8]>, hi: Bound<&[u8]>, d: Direction) -> Vec<(Key, u64)> {
    let mut out = Vec::new();
    assert!(t.scan(lo, hi, d, 0, |k, v| {
        out.push((k.to_vec(), v));
        true
    }));
    out
}

fn in_range(k: &[u8], lo: Bound<&[u8]>, hi: Bound<&[u8]>) -> bool {
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
}

/// A scan concurrent with writers: strictly ordered in its direction, within its bounds,
/// every pair one that was written (`universe`, with its value), and every key of `always`
/// (present for the whole scan) in range seen.
fn check_scan(
    t: &Masstree<u64>,
    (lo, hi): (Bound<&[u8]>, Bound<&[u8]>),
    d: Direction,
    always: &BTreeSet<Key>,
    universe: &BTreeSet<Key>,
) {
    let got = scan(t, lo, hi, d);
    for w in got.windows(2) {
        let ordered = match d {
            Direction::Forward => w[0].0 < w[1].0,
            Direction::Reverse => w[0].0 > w[1].0,
        };
        assert!(ordered, "{d:?} scan out of order or repeated: {:?}", w);
    }
    for (k, v) in &got {
        assert!(
            in_range(k, lo, hi),
            "scan returned {k:?} outside its bounds"
        );
        assert!(universe.contains(k), "scan returned {k:?}, never inserted");
        assert_eq!(*v, val(k), "scan returned a wrong value for {k:?}");
    }
    let seen: BTreeSet<&Key> = got.iter().map(|(k, _)| k).collect();
    for k in always.iter().filter(|k| in_range(k, lo, hi)) {
        assert!(
            seen.contains(k),
            "{d:?} scan missed {k:?}, present throughout"
        );
    }
}

/// Quiescent: the tree holds exactly `expect`, by gets and by full scans both ways.
fn check_exact(t: &Masstree<u64>, expect: &BTreeSet<Key>, universe: &BTreeSet<Key>) {
    for k in universe {
        let want = expect.contains(k).then(|| val(k));
        assert_eq!(t.get(k), want, "get({k:?}) after the threads joined");
    }
    let fwd: Vec<Key> = scan(t, Bound::Unbounded, Bound::Unbounded, Direction::Forward)
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    assert_eq!(fwd, expect.iter().cloned().collect::<Vec<_>>());
    let mut rev: Vec<Key> = scan(t, Bound::Unbounded, Bound::Unbounded, Direction::Reverse)
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    rev.reverse();
    assert_eq!(rev, fwd);
}

/// Layer 0's shape (quiescent): interior levels above the border nodes, and the live entry
/// count of each border node, left to right.
fn shape(t: &Masstree<u64>) -> (usize, Vec<usize>) {
    let g = crossbeam_epoch::pin();
    let mut n = t.root.load(Ordering::Acquire);
    // SAFETY: quiescent and pinned; the layer-0 root is kept current and is live.
    assert!(is_root(unsafe { node(n) }.version.load()));
    let mut levels = 0;
    // SAFETY: `n` is the root or a child read from a live interior node: live.
    while !is_leaf(unsafe { node(n) }.version.load()) {
        levels += 1;
        // SAFETY: not `LEAF`, so an interior node (live, as above).
        n = unsafe { as_interior(n) }.children[0].load(Ordering::Acquire);
    }
    let mut b: &Border = Masstree::<u64>::find_border(n, 0, &g).0;
    let mut counts = vec![b.perm().count()];
    loop {
        let next = b.next.load(Ordering::Acquire);
        if next.is_null() {
            return (levels, counts);
        }
        // SAFETY: quiescent; sibling pointers name live border nodes.
        b = unsafe { &*next };
        counts.push(b.perm().count());
    }
}

/// Border and interior splits: 240 ascending keys fill 16 border nodes of 15 (sequential
/// inserts keep the left node full) under a full root interior node, so any insert into a
/// gap splits a border node, whose ascent splits the root, which makes a new root. Two
/// writers do that in different nodes (and one appends past the end: a sequential split)
/// while a reader gets and scans the keys of the splitting nodes.
#[test]
fn shuttle_splits() {
    const N: u64 = 240;
    let evens: BTreeSet<Key> = (0..N).map(|i| k8(2 * i)).collect();
    // Border node b holds evens 30b ..= 30b + 28; odd keys fall into its gaps.
    let w1: Vec<Key> = vec![k8(30 * 3 + 7), k8(30 * 3 + 9), k8(2 * N)];
    let w2: Vec<Key> = vec![k8(30 * 12 + 13), k8(30 * 12 + 1)];
    let mut universe = evens.clone();
    universe.extend(w1.iter().chain(&w2).cloned());
    let ctx = Arc::new((evens, w1, w2, universe));
    check(move || {
        let (evens, w1, w2, universe) = &*ctx;
        let t = Arc::new(Masstree::<u64>::new());
        for k in evens {
            insert(&t, k);
        }
        assert_eq!(
            shape(&t),
            (1, vec![15; 16]),
            "one full root over full borders"
        );
        let writers: Vec<_> = [w1.clone(), w2.clone()]
            .into_iter()
            .map(|ks| {
                let t = t.clone();
                thread::spawn(move || {
                    for k in &ks {
                        insert(&t, k);
                        assert_eq!(t.get(k), Some(val(k)), "own insert not visible");
                    }
                })
            })
            .collect();
        // The reader: the splitting nodes' keys stay visible to gets and scans.
        let mut seen = BTreeSet::new();
        for b in [3u64, 12] {
            for i in 15 * b..15 * b + 15 {
                let k = k8(2 * i);
                assert_eq!(t.get(&k), Some(val(&k)), "lost {k:?} during a split");
            }
            for k in w1.iter().chain(w2) {
                if t.get(k).is_some() {
                    seen.insert(k.clone());
                } else {
                    assert!(!seen.contains(k), "{k:?} vanished after it was seen");
                }
            }
        }
        let (lo, hi) = (k8(30 * 3 - 4), k8(30 * 4 + 4));
        let r1 = (Bound::Included(&lo[..]), Bound::Excluded(&hi[..]));
        check_scan(&t, r1, Direction::Forward, evens, universe);
        let (lo, hi) = (k8(30 * 11 + 2), k8(30 * 13));
        let r2 = (Bound::Excluded(&lo[..]), Bound::Included(&hi[..]));
        check_scan(&t, r2, Direction::Reverse, evens, universe);
        for h in writers {
            h.join().unwrap();
        }
        check_exact(&t, universe, universe);
        let (levels, counts) = shape(&t);
        assert_eq!(levels, 2, "the root split");
        assert_eq!(counts.len(), 19);
    });
}

/// Removes that empty border nodes (unlinked: range and stamp to the previous sibling)
/// against inserts into those very ranges and a reader. Five border nodes of 15 keys; the
/// middle three are cut to two keys each beforehand. Two removers empty nodes 1 and 2 (so an
/// unlink can meet its previous sibling being unlinked); a writer inserts into both ranges
/// and must find its keys afterwards; the reader gets node 3's keys and scans.
#[test]
fn shuttle_removes_unlink() {
    let all: Vec<Key> = (0..75u64).map(|i| k8(2 * i)).collect();
    let node_keys = |b: usize| all[15 * b..15 * b + 15].to_vec();
    let cut: Vec<Key> = (1..4).flat_map(|b| node_keys(b)[2..].to_vec()).collect();
    let r1 = node_keys(1)[..2].to_vec();
    let r2 = node_keys(2)[..2].to_vec();
    let ins = vec![k8(2 * 16 + 1), k8(2 * 31 + 1)];
    let start: BTreeSet<Key> = all.iter().filter(|k| !cut.contains(k)).cloned().collect();
    let always: BTreeSet<Key> = start
        .iter()
        .filter(|k| !r1.contains(k) && !r2.contains(k))
        .cloned()
        .collect();
    let mut end = always.clone();
    end.extend(ins.iter().cloned());
    let universe: BTreeSet<Key> = all.iter().chain(&ins).cloned().collect();
    let ctx = Arc::new((all, cut, r1, r2, ins, always, end, universe));
    check(move || {
        let (all, cut, r1, r2, ins, always, end, universe) = &*ctx;
        let t = Arc::new(Masstree::<u64>::new());
        for k in all {
            insert(&t, k);
        }
        for k in cut {
            assert_eq!(t.remove(k), Some(val(k)));
        }
        assert_eq!(shape(&t), (1, vec![15, 2, 2, 2, 15]));
        let mut hs = Vec::new();
        for ks in [r1.clone(), r2.clone()] {
            let t = t.clone();
            hs.push(thread::spawn(move || {
                for k in &ks {
                    assert_eq!(t.remove(k), Some(val(k)), "remove lost {k:?}");
                    assert_eq!(t.get(k), None, "{k:?} back after its remove");
                }
            }));
        }
        {
            let (t, ins) = (t.clone(), ins.clone());
            hs.push(thread::spawn(move || {
                for k in &ins {
                    insert(&t, k);
                }
                for k in &ins {
                    assert_eq!(t.get(k), Some(val(k)), "insert into an unlinked range lost");
                }
            }));
        }
        for k in always.range(k8(2 * 44)..k8(2 * 46)) {
            assert_eq!(t.get(k), Some(val(k)), "lost {k:?} during an unlink");
        }
        for d in [Direction::Forward, Direction::Reverse] {
            let bounds = (Bound::Unbounded, Bound::Unbounded);
            check_scan(&t, bounds, d, always, universe);
        }
        for h in hs {
            h.join().unwrap();
        }
        check_exact(&t, end, universe);
        // Nodes 1 and 2 each end unlinked or holding the insert (which, after node 1's
        // unlink, splits node 0 instead): no emptied node stays behind.
        let (_, counts) = shape(&t);
        assert_eq!(counts.iter().sum::<usize>(), end.len());
        assert!(
            !counts.contains(&0),
            "an emptied node stayed linked: {counts:?}"
        );
    });
}

/// The leftmost-child unlink ("redirect"): 241 ascending keys make a root over two interior
/// nodes; the second's child 0 (border node 9) has its lower bound as a separator in the
/// root. Cut to two keys (and node 10 to one), one remover empties node 9, so the root's
/// separator is rewritten, and another empties node 10, which then becomes child 0 in turn,
/// while a writer inserts into node 9's range and the reader gets and scans around it.
#[test]
fn shuttle_removes_redirect() {
    let all: Vec<Key> = (0..241u64).map(|i| k8(2 * i)).collect();
    let node_keys = |b: usize| all[15 * b..15 * b + 15].to_vec();
    let mut cut: Vec<Key> = node_keys(9)[2..].to_vec();
    cut.extend(node_keys(10)[1..].to_vec());
    let r1 = node_keys(9)[..2].to_vec();
    let r2 = node_keys(10)[..1].to_vec();
    let ins = vec![k8(2 * 140 + 1)];
    let start: BTreeSet<Key> = all.iter().filter(|k| !cut.contains(k)).cloned().collect();
    let always: BTreeSet<Key> = start
        .iter()
        .filter(|k| !r1.contains(k) && !r2.contains(k))
        .cloned()
        .collect();
    let mut end = always.clone();
    end.extend(ins.iter().cloned());
    let universe: BTreeSet<Key> = all.iter().chain(&ins).cloned().collect();
    let ctx = Arc::new((all, cut, r1, r2, ins, always, end, universe));
    check(move || {
        let (all, cut, r1, r2, ins, always, end, universe) = &*ctx;
        let t = Arc::new(Masstree::<u64>::new());
        for k in all {
            insert(&t, k);
        }
        for k in cut {
            assert_eq!(t.remove(k), Some(val(k)));
        }
        let (levels, counts) = shape(&t);
        assert_eq!(levels, 2);
        assert_eq!(&counts[8..12], &[15, 2, 1, 15]);
        let mut hs = Vec::new();
        for ks in [r1.clone(), r2.clone(), ins.clone()] {
            let t = t.clone();
            let remove = ks != *ins;
            hs.push(thread::spawn(move || {
                for k in &ks {
                    if remove {
                        assert_eq!(t.remove(k), Some(val(k)), "remove lost {k:?}");
                    } else {
                        insert(&t, k);
                        assert_eq!(t.get(k), Some(val(k)), "insert lost {k:?}");
                    }
                }
            }));
        }
        let (lo, hi) = (k8(2 * 130), k8(2 * 170));
        for k in always.range(lo.clone()..hi.clone()).step_by(3) {
            assert_eq!(t.get(k), Some(val(k)), "lost {k:?} during a redirect");
        }
        let bounds = (Bound::Included(&lo[..]), Bound::Included(&hi[..]));
        check_scan(&t, bounds, Direction::Reverse, always, universe);
        check_scan(&t, bounds, Direction::Forward, always, universe);
        for h in hs {
            h.join().unwrap();
        }
        check_exact(&t, end, universe);
        // Node 10 is unlinked; node 9 is too unless the insert landed in it first (if
        // it came after, it split full node 8).
        let (_, counts) = shape(&t);
        assert_eq!(counts.iter().sum::<usize>(), end.len());
        assert!(
            !counts.contains(&0),
            "an emptied node stayed linked: {counts:?}"
        );
        assert!(counts.len() == 16 || counts.len() == 17, "{counts:?}");
    });
}

/// Layer creation: keys sharing 8- and 16-byte prefixes with a stored key `a` are inserted
/// concurrently, turning `a`'s slot into a layer (and a slot of that layer into a deeper
/// one), while a reader gets `a`, the 8-byte prefix key and the new keys. One writer also
/// fills the new layer past 15 keys, so the layer's root splits.
#[test]
fn shuttle_layers() {
    let p: Key = b"prefix01".to_vec();
    let a: Key = b"prefix01suffixAAtail-a".to_vec();
    let b: Key = b"prefix01suffixBB".to_vec();
    let c: Key = b"prefix01suffixAAtail-c".to_vec(); // shares 16 bytes with `a`
    let d: Key = b"prefix01suffixAA".to_vec(); // a prefix of `a` and `c`
    let mut fill: Vec<Key> = (0..16u8)
        .map(|i| [&b"prefix01"[..], &[b'f', i, 0, 0, 0, 0, 0, i][..]].concat())
        .collect();
    fill.push(b"prefix01".iter().chain(&[0u8; 20]).copied().collect());
    let start: BTreeSet<Key> = [p.clone(), a.clone()].into_iter().collect();
    let mut universe = start.clone();
    universe.extend([b.clone(), c.clone(), d.clone()]);
    universe.extend(fill.iter().cloned());
    let w1 = vec![b.clone(), d.clone()];
    let mut w2 = vec![c.clone()];
    w2.extend(fill);
    let ctx = Arc::new((start, universe, w1, w2));
    check(move || {
        let (start, universe, w1, w2) = &*ctx;
        let t = Arc::new(Masstree::<u64>::new());
        for k in start {
            insert(&t, k);
        }
        let hs: Vec<_> = [w1.clone(), w2.clone()]
            .into_iter()
            .map(|ks| {
                let t = t.clone();
                thread::spawn(move || {
                    for k in &ks {
                        insert(&t, k);
                        assert_eq!(t.get(k), Some(val(k)), "own insert not visible");
                    }
                })
            })
            .collect();
        let mut seen = BTreeSet::new();
        for _ in 0..3 {
            for k in start {
                assert_eq!(
                    t.get(k),
                    Some(val(k)),
                    "lost {k:?} while its slot became a layer"
                );
            }
            for k in universe {
                if start.contains(k) {
                    continue;
                }
                if t.get(k).is_some() {
                    seen.insert(k.clone());
                } else {
                    assert!(!seen.contains(k), "{k:?} vanished after it was seen");
                }
            }
        }
        let hi = b"prefix01suffixZZ".to_vec();
        let bounds = (Bound::Included(&p[..]), Bound::Excluded(&hi[..]));
        check_scan(&t, bounds, Direction::Forward, start, universe);
        check_scan(&t, bounds, Direction::Reverse, start, universe);
        for h in hs {
            h.join().unwrap();
        }
        check_exact(&t, universe, universe);
    });
}

/// Layer removal: a layer holding two keys is emptied (and removed from its upper slot)
/// while another thread inserts a key into that layer and a third key lands beside it; the
/// inserted keys must survive and the prefix key stays visible throughout.
#[test]
fn shuttle_layer_removed_while_inserting() {
    let p: Key = b"prefix01".to_vec();
    let gone: Vec<Key> = vec![b"prefix01suffixAA".to_vec(), b"prefix01suffixBB".to_vec()];
    let ins: Vec<Key> = vec![
        b"prefix01suffixCC".to_vec(),
        b"prefix01suffixCCdeep".to_vec(),
    ];
    let always: BTreeSet<Key> = [p.clone()].into_iter().collect();
    let universe: BTreeSet<Key> = always.iter().chain(&gone).chain(&ins).cloned().collect();
    let end: BTreeSet<Key> = always.iter().chain(&ins).cloned().collect();
    let ctx = Arc::new((p, gone, ins, always, universe, end));
    check(move || {
        let (p, gone, ins, always, universe, end) = &*ctx;
        let t = Arc::new(Masstree::<u64>::new());
        insert(&t, p);
        for k in gone {
            insert(&t, k);
        }
        let remover = {
            let (t, gone) = (t.clone(), gone.clone());
            thread::spawn(move || {
                for k in &gone {
                    assert_eq!(t.remove(k), Some(val(k)), "remove lost {k:?}");
                }
            })
        };
        let writer = {
            let (t, ins) = (t.clone(), ins.clone());
            thread::spawn(move || {
                for k in &ins {
                    let (v, new) = t.get_or_insert_with(k, |_| val(k));
                    assert_eq!((v, new), (val(k), true));
                }
                for k in &ins {
                    assert_eq!(t.get(k), Some(val(k)), "insert into a removed layer lost");
                }
            })
        };
        assert_eq!(t.get(p), Some(val(p)));
        check_scan(
            &t,
            (Bound::Unbounded, Bound::Unbounded),
            Direction::Forward,
            always,
            universe,
        );
        assert_eq!(t.get(p), Some(val(p)));
        remover.join().unwrap();
        writer.join().unwrap();
        check_exact(&t, end, universe);
    });
}

/// A removal's stamp (the engine folds a removed record's read timestamp into the index this
/// way) against the structural changes it may trigger. Node 1 is cut to two keys; one remover
/// takes its first key with stamp 100 while another empties the node (so it is unlinked and
/// its stamp handed to node 0), an inserter re-inserts the first key, and a reader stamps the
/// second key's gap with 200 after the removal it waits for. Any insert of a key after its
/// stamped removal (or after a stamping lookup that found it absent) must learn the stamp.
#[test]
fn shuttle_removal_stamps_survive_unlinks() {
    let all: Vec<Key> = (0..45u64).map(|i| k8(2 * i)).collect();
    let cut: Vec<Key> = all[17..30].to_vec();
    let (a, b) = (all[15].clone(), all[16].clone());
    let ctx = Arc::new((all, cut, a, b));
    check(move || {
        let (all, cut, a, b) = &*ctx;
        let t = Arc::new(Masstree::<u64>::new());
        for k in all {
            insert(&t, k);
        }
        for k in cut {
            assert_eq!(t.remove(k), Some(val(k)));
        }
        assert_eq!(shape(&t), (1, vec![15, 2, 15]));
        let removed = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let mut hs = Vec::new();
        {
            let (t, a, removed) = (t.clone(), a.clone(), removed.clone());
            hs.push(thread::spawn(move || {
                assert_eq!(t.remove_if(&a, 100, |v| v == val(&a)), Some(val(&a)));
                removed.store(true, Ordering::SeqCst);
            }));
        }
        {
            let (t, b) = (t.clone(), b.clone());
            hs.push(thread::spawn(move || {
                // Refused by the predicate first: nothing changes.
                assert_eq!(t.remove_if(&b, 7, |v| v != val(&b)), None);
                assert_eq!(t.remove_if(&b, 0, |_| true), Some(val(&b)));
                // Absent now: a stamping lookup leaves 200 on its gap.
                assert_eq!(t.get_or_stamp(&b, 200), None);
            }));
        }
        {
            let (t, a, removed) = (t.clone(), a.clone(), removed.clone());
            hs.push(thread::spawn(move || {
                // Linearized after the removal it observed: the insert must learn its stamp.
                let after_removal = removed.load(Ordering::SeqCst);
                let (gap, inserted) = t.get_or_insert_with(&a, |s| s);
                if after_removal {
                    assert!(inserted, "{a:?} still present after its removal returned");
                }
                if inserted {
                    assert!(
                        gap >= 100,
                        "re-insert of a removed key missed its stamp: {gap}"
                    );
                }
            }));
        }
        for h in hs {
            h.join().unwrap();
        }
        let (gap, inserted) = t.get_or_insert_with(b, |s| s);
        assert!(inserted);
        assert!(
            gap >= 200,
            "insert after a stamped absent lookup missed it: {gap}"
        );
    });
}
