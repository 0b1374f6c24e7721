//! End to end: threads run transactions against toy stores, record them with a
//! `Recorder`, and the checker judges the result.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::{Barrier, Mutex};

use verso_check::{
    check_strict_serializable, decode_version, encode_version, AnomalyKind, Key, Observed, Outcome,
    Recorder,
};

/// A store that runs each transaction under one global lock: trivially strictly
/// serializable. The commit timestamp is a counter bumped by every writer.
#[derive(Default)]
struct LockedStore {
    inner: Mutex<(u64, BTreeMap<Key, Vec<u8>>)>,
}

#[test]
fn globally_locked_store_is_strictly_serializable() {
    let store = LockedStore::default();
    let rec = Recorder::new();
    std::thread::scope(|s| {
        for thread in 0..4u64 {
            let (store, rec) = (&store, &rec);
            s.spawn(move || {
                for i in 0..300u64 {
                    let mut t = rec.begin_txn();
                    let mut guard = store.inner.lock().unwrap();
                    let (ts, map) = &mut *guard;
                    let a = format!("k{}", (i + thread) % 7).into_bytes();
                    let b = format!("k{}", (i * 3 + thread) % 7).into_bytes();
                    // Read-modify-write a, delete or write b, scan everything.
                    let seen = Observed::from_value(map.get(&a).map(Vec::as_slice)).unwrap();
                    t.read(a.clone(), seen);
                    let v = t.write(a.clone());
                    map.insert(a, encode_version(v, 24));
                    if i % 5 == 0 {
                        t.delete(b.clone());
                        map.remove(&b);
                    }
                    let entries = map
                        .iter()
                        .map(|(k, val)| (k.clone(), decode_version(val).unwrap()))
                        .collect();
                    t.range(Bound::Unbounded, Bound::Unbounded, false, entries);
                    *ts += 1;
                    let commit_ts = *ts;
                    drop(guard);
                    t.finish(Outcome::Committed, Some(commit_ts));
                }
            });
        }
    });
    let h = rec.into_history();
    assert_eq!(h.len(), 1200);
    let stats = check_strict_serializable(&h).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(stats.committed, 1200);
    assert!(stats.rw_edges > 0 && stats.wr_edges > 0 && stats.ww_edges > 0);
}

#[test]
fn unvalidated_concurrent_increments_lose_updates() {
    // Two clients read the counter, then (after both have read) write it back: the
    // classic lost update of a store without write-write conflict detection.
    let store = LockedStore::default();
    let rec = Recorder::new();
    let barrier = Barrier::new(2);
    std::thread::scope(|s| {
        for _ in 0..2 {
            let (store, rec, barrier) = (&store, &rec, &barrier);
            s.spawn(move || {
                let mut t = rec.begin_txn();
                let seen = {
                    let guard = store.inner.lock().unwrap();
                    Observed::from_value(guard.1.get(b"counter".as_slice()).map(Vec::as_slice))
                        .unwrap()
                };
                t.read("counter", seen);
                barrier.wait();
                let v = t.write("counter");
                let commit_ts = {
                    let mut guard = store.inner.lock().unwrap();
                    guard.1.insert(b"counter".to_vec(), encode_version(v, 0));
                    guard.0 += 1;
                    guard.0
                };
                t.finish(Outcome::Committed, Some(commit_ts));
            });
        }
    });
    let err = check_strict_serializable(&rec.into_history()).unwrap_err();
    assert_eq!(err.kind, AnomalyKind::GSingle, "{err}");
    assert!(
        err.to_string().contains("--rw(key \"counter\")-->"),
        "{err}"
    );
}
