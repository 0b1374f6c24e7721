//! Concurrent stress tests of `Masstree`: single-key operations checked for linearizability
//! with `verso_check`, scans checked for order and completeness, and the gap-stamp contract
//! under concurrency. Seeds are fixed per thread so failures reproduce as far as threads do.

use std::collections::BTreeSet;
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Barrier, Mutex};

use verso_check::{check_linearizable_registers, RegisterOp, RegisterOpKind};
use verso_index::fuzzing::{FuzzValue, KeyedValue};
use verso_index::{Direction, Masstree};

/// A small xorshift generator (no dependency, seeded per thread).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Keys that share 8- and 16-byte prefixes, are prefixes of each other, or hold zeros, so
/// concurrent operations create layers and split nodes at several depths.
fn key(i: u64) -> Vec<u8> {
    match i % 5 {
        0 => i.to_be_bytes().to_vec(),
        1 => {
            let mut k = b"sharedp-".to_vec();
            k.extend_from_slice(&i.to_be_bytes());
            k
        }
        2 => {
            let mut k = b"sharedp-sharedp-".to_vec();
            k.extend_from_slice(&(i % 97).to_be_bytes()[7..]);
            k.extend(std::iter::repeat_n(0u8, (i % 13) as usize));
            k
        }
        3 => b"sharedp-"[..(i % 9) as usize].to_vec(),
        _ => {
            let mut k = vec![0u8; (i % 23) as usize];
            k.extend_from_slice(&i.to_le_bytes());
            k
        }
    }
}

/// Keys distinct from every `key(j)` register (they end in a marker and the index).
fn filler_key(i: u64) -> Vec<u8> {
    let mut k = key(i);
    k.push(0xfe);
    k.extend_from_slice(&i.to_be_bytes());
    k
}

#[test]
fn single_key_ops_are_linearizable() {
    const THREADS: u64 = 4;
    const OPS: u64 = 20_000;
    const REGISTERS: u64 = 48;
    let t = Masstree::<u64>::new();
    let clock = AtomicU64::new(0);
    let history = Mutex::new(Vec::new());
    let barrier = Barrier::new(THREADS as usize);
    std::thread::scope(|s| {
        for tid in 0..THREADS {
            let (t, clock, history, barrier) = (&t, &clock, &history, &barrier);
            s.spawn(move || {
                let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ ((tid + 1) * 0x1234_5678));
                let mut ops = Vec::new();
                barrier.wait();
                for seq in 0..OPS {
                    // Filler keys (distinct per thread) keep splitting nodes and adding layers
                    // around the registers.
                    let filler = filler_key(1000 + tid * OPS + seq);
                    t.insert(&filler, u64::MAX);
                    let k = key(rng.below(REGISTERS));
                    let start = clock.fetch_add(1, Ordering::SeqCst);
                    let kind = match rng.below(4) {
                        0 | 1 => RegisterOpKind::Get {
                            observed: t.get(&k),
                        },
                        2 => {
                            let value = (tid << 32) | seq;
                            t.insert(&k, value);
                            RegisterOpKind::Put { value }
                        }
                        _ => {
                            t.remove(&k);
                            RegisterOpKind::Remove
                        }
                    };
                    let end = clock.fetch_add(1, Ordering::SeqCst);
                    ops.push(RegisterOp {
                        key: k,
                        start,
                        end,
                        kind,
                    });
                    if seq % 3 == 0 {
                        t.remove(&filler);
                    }
                }
                history.lock().unwrap().extend(ops);
            });
        }
    });
    let ops = history.into_inner().unwrap();
    if let Err(v) = check_linearizable_registers(&ops) {
        panic!("not linearizable: {v}");
    }
}

#[test]
fn scans_are_ordered_and_complete() {
    const WRITERS: u64 = 2;
    const STABLE: u64 = 3000;
    let t = Masstree::<u64>::new();
    // Stable keys: present for the whole test. Churn keys interleave with them.
    // `key` is not injective: keep only stable keys no churn index produces.
    let churn: BTreeSet<Vec<u8>> = (0..STABLE * 2).map(|i| key(i | 1)).collect();
    let stable: BTreeSet<Vec<u8>> = (0..STABLE)
        .map(|i| key(i * 2))
        .filter(|k| !churn.contains(k))
        .collect();
    for k in &stable {
        t.insert(k, 7);
    }
    let done = AtomicU64::new(0);
    std::thread::scope(|s| {
        for w in 0..WRITERS {
            let (t, done) = (&t, &done);
            s.spawn(move || {
                let mut rng = Rng(0xdead_beef ^ (w + 1));
                for _ in 0..100_000 {
                    let k = key(rng.below(STABLE * 2) | 1);
                    if rng.below(2) == 0 {
                        t.insert(&k, 1);
                    } else {
                        t.remove(&k);
                    }
                }
                done.fetch_add(1, Ordering::SeqCst);
            });
        }
        for r in 0..2u64 {
            let (t, done, stable) = (&t, &done, &stable);
            s.spawn(move || {
                let mut rng = Rng(0xfeed ^ (r + 7));
                let mut rounds = 0;
                while done.load(Ordering::SeqCst) < WRITERS || rounds < 5 {
                    rounds += 1;
                    let (a, b) = (key(rng.below(STABLE * 2)), key(rng.below(STABLE * 2)));
                    let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
                    let d = if rng.below(2) == 0 {
                        Direction::Forward
                    } else {
                        Direction::Reverse
                    };
                    let mut seen: Vec<Vec<u8>> = Vec::new();
                    assert!(
                        t.scan(Bound::Included(&lo), Bound::Excluded(&hi), d, 0, |k, _| {
                            seen.push(k.to_vec());
                            true
                        })
                    );
                    for w in seen.windows(2) {
                        match d {
                            Direction::Forward => assert!(w[0] < w[1], "out of order {w:?}"),
                            Direction::Reverse => assert!(w[0] > w[1], "out of order {w:?}"),
                        }
                    }
                    let seen: BTreeSet<Vec<u8>> = seen.into_iter().collect();
                    for k in stable.range(lo.clone()..hi.clone()) {
                        assert!(seen.contains(k), "scan {lo:?}..{hi:?} {d:?} missed {k:?}");
                    }
                }
            });
        }
    });
    for k in &stable {
        assert_eq!(t.get(k), Some(7));
    }
}

/// Under concurrency, with each key inserted at most once and never removed: an absent
/// lookup or a scan with stamp `s` that did not observe `k` implies the insert of `k`
/// reported a gap stamp `>= s`.
#[test]
fn gap_stamps_under_concurrency() {
    const THREADS: u64 = 4;
    const KEYS: u64 = 4000;
    let t = Masstree::<u64>::new();
    let next_stamp = AtomicU64::new(1);
    // (key index, stamp) of misses, per key range for scans.
    let misses = Mutex::new(Vec::<(u64, u64)>::new());
    let scans = Mutex::new(Vec::<(u64, u64, u64, BTreeSet<u64>)>::new());
    let inserts = Mutex::new(Vec::<(u64, u64)>::new());
    std::thread::scope(|s| {
        for tid in 0..THREADS {
            let (t, next_stamp, misses, scans, inserts) =
                (&t, &next_stamp, &misses, &scans, &inserts);
            s.spawn(move || {
                let mut rng = Rng(0xabcdef ^ ((tid + 3) * 0x9999));
                let (mut my_miss, mut my_scan, mut my_ins) = (Vec::new(), Vec::new(), Vec::new());
                for _ in 0..20_000 {
                    let i = rng.below(KEYS);
                    // Neighbours come and go, so nodes split and emptied ones are unlinked
                    // (their stamps handed to the previous sibling) while stamps are left.
                    let mut f = key_u(rng.below(KEYS));
                    f.push(FILLER);
                    if rng.below(2) == 0 {
                        t.insert(&f, 0);
                    } else {
                        t.remove(&f);
                    }
                    match rng.below(8) {
                        0..=3 => {
                            let (g, inserted) = t.get_or_insert_with(&key_u(i), |g| g);
                            if inserted {
                                my_ins.push((i, g));
                            }
                        }
                        4..=6 => {
                            let st = next_stamp.fetch_add(1, Ordering::SeqCst);
                            if t.get_or_stamp(&key_u(i), st).is_none() {
                                my_miss.push((i, st));
                            }
                        }
                        _ => {
                            let st = next_stamp.fetch_add(1, Ordering::SeqCst);
                            let hi = (i + rng.below(200)).min(KEYS - 1);
                            let mut seen = BTreeSet::new();
                            let d = if rng.below(2) == 0 {
                                Direction::Forward
                            } else {
                                Direction::Reverse
                            };
                            t.scan(
                                Bound::Included(&key_u(i)),
                                Bound::Included(&key_u(hi)),
                                d,
                                st,
                                |k, _| {
                                    seen.insert(unkey(k));
                                    true
                                },
                            );
                            my_scan.push((i, hi, st, seen));
                        }
                    }
                }
                misses.lock().unwrap().extend(my_miss);
                scans.lock().unwrap().extend(my_scan);
                inserts.lock().unwrap().extend(my_ins);
            });
        }
    });
    let mut gap = vec![None; KEYS as usize];
    for (i, g) in inserts.into_inner().unwrap() {
        assert!(
            gap[i as usize].replace(g).is_none(),
            "key {i} inserted twice"
        );
    }
    for (i, s) in misses.into_inner().unwrap() {
        if let Some(g) = gap[i as usize] {
            assert!(
                g >= s,
                "insert of {i} has gap stamp {g} < stamp {s} of a lookup that missed it"
            );
        }
    }
    for (lo, hi, s, seen) in scans.into_inner().unwrap() {
        for i in lo..=hi {
            if let Some(g) = gap[i as usize] {
                assert!(
                    seen.contains(&i) || g >= s,
                    "insert of {i}: gap {g} < scan stamp {s}, not seen"
                );
            }
        }
    }
}

/// Order-preserving keys for the stamp test: every fifth key grows a long shared prefix so
/// that layers form, while byte order still follows `i`.
fn key_u(i: u64) -> Vec<u8> {
    let mut k = (i / 5).to_be_bytes().to_vec();
    k.push((i % 5) as u8);
    if i % 5 >= 3 {
        k.extend_from_slice(b"-a-long-shared-tail-");
    }
    k
}

/// The last byte of neighbour keys in the stamp test (no `key_u` key ends with it).
const FILLER: u8 = 0xee;

fn unkey(k: &[u8]) -> u64 {
    u64::from_be_bytes(k[..8].try_into().unwrap()) * 5 + u64::from(k[8])
}

/// Keys present for the whole test stay visible to gets and scans while other threads split
/// the nodes around them, add layers next to them, and remove and re-insert neighbours.
#[test]
fn present_keys_stay_visible_through_splits() {
    const STABLE: u64 = 2000;
    let t = Masstree::<u64>::new();
    let stable_key = |i: u64| {
        let mut k = key(i * 7);
        k.push(0xaa);
        k.extend_from_slice(&i.to_be_bytes());
        k
    };
    for i in 0..STABLE {
        t.insert(&stable_key(i), i);
    }
    let done = AtomicU64::new(0);
    std::thread::scope(|s| {
        {
            let (t, done) = (&t, &done);
            s.spawn(move || {
                let mut rng = Rng(0x5eed);
                for j in 0..400_000u64 {
                    // Neighbours of stable keys: same shapes, different tails.
                    let mut k = key(rng.below(STABLE) * 7);
                    k.push(0xaa);
                    k.extend_from_slice(&(rng.below(STABLE)).to_be_bytes());
                    k.push((j % 3) as u8);
                    if j % 4 == 3 {
                        t.remove(&k);
                    } else {
                        t.insert(&k, u64::MAX);
                    }
                }
                done.store(1, Ordering::SeqCst);
            });
        }
        let (t, done) = (&t, &done);
        s.spawn(move || {
            let mut rng = Rng(0xc0ffee);
            let mut rounds = 0u64;
            while done.load(Ordering::SeqCst) == 0 || rounds < 10_000 {
                rounds += 1;
                let i = rng.below(STABLE);
                assert_eq!(
                    t.get(&stable_key(i)),
                    Some(i),
                    "lost key {i} after {rounds} gets"
                );
            }
        });
    });
}

/// Few keys with long shared prefixes, so layers are created and removed again and again
/// while other threads read and write through them; checked for linearizability.
#[test]
fn layer_churn_is_linearizable() {
    let tails: [&[u8]; 6] = [
        b"",
        b"a",
        b"ab",
        b"abcdefghij",
        b"abcdefghijk",
        b"abcdefgh-12345678-x",
    ];
    churn::<u64>(&tails, 0x1357_9bdf, |_, _| {});
}

/// Layer churn with values that hold their keys (as the engine's records do): long suffixes
/// live only in the values, removed values are freed through `retire_after_readers` while
/// other threads may still be comparing against their keys, and every value a lookup returns
/// must hold the key looked up.
#[test]
fn values_holding_their_keys_survive_churn() {
    let tails: [&[u8]; 6] = [
        b"abcdefghij",
        b"abcdefghijk",
        b"abcdefgh-12345678-x",
        b"abcdefgh-12345678-y",
        b"abcdefgh-12345678-xyzxyzxyzxyz",
        b"a",
    ];
    churn::<KeyedValue>(&tails, 0x2468_ace0, |k, v| {
        assert_eq!(v.get().0, k, "a lookup or scan met another key's value");
    });
}

/// Four threads get, put and remove keys made of three 8-byte group prefixes and `tails`,
/// then the history is checked linearizable by the values' ids; `check` sees every value a
/// lookup or the final walk returns, with its key.
fn churn<V: FuzzValue>(tails: &[&[u8]], seed: u64, check: impl Fn(&[u8], V) + Sync) {
    const THREADS: u64 = 4;
    const OPS: u64 = 30_000;
    let mut keys: Vec<Vec<u8>> = Vec::new();
    for g in 0..3u8 {
        for tail in tails {
            let mut k = vec![b'g' + g; 8];
            k.extend_from_slice(tail);
            keys.push(k);
        }
    }
    let t = Masstree::<V>::new();
    let clock = AtomicU64::new(0);
    let history = Mutex::new(Vec::new());
    let barrier = Barrier::new(THREADS as usize);
    std::thread::scope(|s| {
        for tid in 0..THREADS {
            let (t, clock, history, barrier, keys, check) =
                (&t, &clock, &history, &barrier, &keys, &check);
            s.spawn(move || {
                let mut rng = Rng(seed ^ ((tid + 1) * 0x2468));
                let mut ops = Vec::new();
                barrier.wait();
                for seq in 0..OPS {
                    let k = keys[rng.below(keys.len() as u64) as usize].clone();
                    let start = clock.fetch_add(1, Ordering::SeqCst);
                    let kind = match rng.below(5) {
                        0 | 1 => {
                            let got = t.get(&k);
                            if let Some(v) = got {
                                check(&k, v);
                            }
                            RegisterOpKind::Get {
                                observed: got.map(V::id),
                            }
                        }
                        2 => {
                            let value = (tid << 32) | seq;
                            if let Some(old) = t.insert(&k, V::make(&k, value)) {
                                old.release();
                            }
                            RegisterOpKind::Put { value }
                        }
                        _ => {
                            if let Some(old) = t.remove(&k) {
                                old.release();
                            }
                            RegisterOpKind::Remove
                        }
                    };
                    let end = clock.fetch_add(1, Ordering::SeqCst);
                    ops.push(RegisterOp {
                        key: k,
                        start,
                        end,
                        kind,
                    });
                }
                history.lock().unwrap().extend(ops);
            });
        }
    });
    let ops = history.into_inner().unwrap();
    if let Err(v) = check_linearizable_registers(&ops) {
        panic!("not linearizable: {v}");
    }
    let mut left = Vec::new();
    t.for_each(|k, v| {
        check(k, v);
        left.push(v);
    });
    assert_eq!(left.len(), t.len());
    drop(t);
    left.into_iter().for_each(V::release);
}

/// Writers fill key ranges and empty them again, so whole subtrees of border nodes are
/// unlinked (leftmost children included, which rewrites ancestor separators) while readers
/// get and scan sparse keys that stay present throughout.
#[test]
fn present_keys_survive_bulk_unlinks() {
    const SPAN: u64 = 100_000;
    const STABLE_EVERY: u64 = 997;
    let t = Masstree::<u64>::new();
    let k = |i: u64| i.to_be_bytes();
    for i in (0..SPAN).step_by(STABLE_EVERY as usize) {
        t.insert(&k(i), i);
    }
    let done = AtomicU64::new(0);
    std::thread::scope(|s| {
        for w in 0..2u64 {
            let (t, done) = (&t, &done);
            s.spawn(move || {
                let mut rng = Rng(0xb01d ^ (w + 1));
                for _ in 0..80 {
                    // A random window of this writer's half, filled then emptied.
                    let base = w * SPAN / 2 + rng.below(SPAN / 2 - 6000);
                    let mut ids: Vec<u64> = (base..base + 6000)
                        .filter(|i| i % STABLE_EVERY != 0)
                        .collect();
                    for j in (1..ids.len()).rev() {
                        ids.swap(j, rng.below(j as u64 + 1) as usize);
                    }
                    for &i in &ids {
                        t.insert(&k(i), i);
                    }
                    for &i in ids.iter().rev() {
                        assert_eq!(t.remove(&k(i)), Some(i));
                    }
                }
                done.fetch_add(1, Ordering::SeqCst);
            });
        }
        let (t, done) = (&t, &done);
        s.spawn(move || {
            let mut rng = Rng(0x5ca1ab1e);
            let mut rounds = 0u64;
            while done.load(Ordering::SeqCst) < 2 || rounds < 200 {
                rounds += 1;
                let i = rng.below(SPAN / STABLE_EVERY) * STABLE_EVERY;
                assert_eq!(t.get(&k(i)), Some(i), "lost key {i}");
                let lo = rng.below(SPAN);
                let hi = lo + rng.below(20_000);
                let d = if rounds.is_multiple_of(2) {
                    Direction::Forward
                } else {
                    Direction::Reverse
                };
                let mut stable_seen = Vec::new();
                let mut last: Option<u64> = None;
                t.scan(
                    Bound::Included(&k(lo)[..]),
                    Bound::Excluded(&k(hi)[..]),
                    d,
                    rounds,
                    |key, v| {
                        let x = u64::from_be_bytes(key.try_into().unwrap());
                        assert_eq!(x, v);
                        if let Some(l) = last {
                            assert!(
                                if d == Direction::Forward {
                                    l < x
                                } else {
                                    l > x
                                },
                                "order {l} {x}"
                            );
                        }
                        last = Some(x);
                        if x % STABLE_EVERY == 0 {
                            stable_seen.push(x);
                        }
                        true
                    },
                );
                if d == Direction::Reverse {
                    stable_seen.reverse();
                }
                let want: Vec<u64> = (lo..hi.min(SPAN))
                    .filter(|i| i % STABLE_EVERY == 0)
                    .collect();
                assert_eq!(stable_seen, want, "scan {lo}..{hi} {d:?}");
            }
        });
    });
    assert_eq!(t.len() as u64, SPAN.div_ceil(STABLE_EVERY));
}

/// Layers big enough to have interior nodes are filled and emptied again and again while
/// readers get and scan through them: emptied border nodes leave with the interior nodes
/// above them, and a whole emptied layer (interior root included) is removed while readers
/// and writers may still be starting from its stale root. A stable key in one group checks
/// nothing present is lost; scans must stay sorted and duplicate-free; values must match.
#[test]
fn layers_with_interior_nodes_fill_and_empty() {
    const PER_WRITER: u64 = 300;
    const ROUNDS: u64 = 400;
    let group_key = |g: u8, i: u64| {
        let mut k = vec![b'L', g, 0, 0, 0, 0, 0, 0];
        k.extend_from_slice(&i.to_be_bytes());
        k
    };
    let stable = group_key(0, u64::MAX);
    let t = Masstree::<u64>::new();
    t.insert(&stable, u64::MAX);
    let done = AtomicU64::new(0);
    std::thread::scope(|s| {
        for w in 0..2u64 {
            let (t, done) = (&t, &done);
            s.spawn(move || {
                for round in 0..ROUNDS {
                    // Group 0 keeps the stable key (its layer never empties); group 1's
                    // layer empties completely at the end of every round.
                    let g = (round % 2) as u8;
                    let mine = |i: u64| group_key(g, i * 2 + w);
                    for i in 0..PER_WRITER {
                        t.insert(&mine(i), i * 2 + w);
                    }
                    for i in 0..PER_WRITER {
                        let j = (i * 7) % PER_WRITER;
                        assert_eq!(t.remove(&mine(j)), Some(j * 2 + w));
                    }
                }
                done.fetch_add(1, Ordering::SeqCst);
            });
        }
        for r in 0..2u64 {
            let (t, done, stable) = (&t, &done, &stable);
            s.spawn(move || {
                let mut rng = Rng(0x1234 + r);
                while done.load(Ordering::SeqCst) < 2 {
                    assert_eq!(t.get(stable), Some(u64::MAX), "lost the stable key");
                    let g = rng.below(2) as u8;
                    let i = rng.below(2 * PER_WRITER);
                    if let Some(v) = t.get(&group_key(g, i)) {
                        assert_eq!(v, i, "wrong value");
                    }
                    let dir = if rng.below(2) == 0 {
                        Direction::Forward
                    } else {
                        Direction::Reverse
                    };
                    let lo = group_key(g, 0);
                    let hi = group_key(g, u64::MAX);
                    let mut prev: Option<Vec<u8>> = None;
                    let mut saw_stable = false;
                    t.scan(
                        Bound::Included(&lo),
                        Bound::Included(&hi),
                        dir,
                        0,
                        |k, v| {
                            if let Some(p) = &prev {
                                let ordered = match dir {
                                    Direction::Forward => p.as_slice() < k,
                                    Direction::Reverse => p.as_slice() > k,
                                };
                                assert!(ordered, "scan out of order or duplicated");
                            }
                            saw_stable |= k == stable.as_slice();
                            assert_eq!(v, u64::from_be_bytes(k[8..16].try_into().unwrap()));
                            prev = Some(k.to_vec());
                            true
                        },
                    );
                    assert!(g == 1 || saw_stable, "a scan missed the stable key");
                }
            });
        }
    });
    assert_eq!(t.len(), 1);
    assert_eq!(t.remove(&stable), Some(u64::MAX));
    assert!(t.is_empty());
}
