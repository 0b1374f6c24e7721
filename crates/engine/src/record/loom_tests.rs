//! Loom models of the record protocol: a reader against an older committer, snapshot reads,
//! removal, committers on one chain, an undo from the middle of a chain, and a reused inline
//! slot. Under loom `free` only marks a version, so a walk that steps on a freed one fails.

use super::*;
use loom::sync::Arc;

/// A record for the models (with a one-byte inline slot), freed with its versions when
/// the last `Arc` drops.
pub(crate) struct TestRecord(pub(crate) RecordPtr);

impl TestRecord {
    pub(crate) fn new(gap_stamp: u64) -> Arc<TestRecord> {
        Arc::new(TestRecord(RecordPtr::alloc(0, b"k", gap_stamp, Some(b"v"))))
    }
}

impl std::ops::Deref for TestRecord {
    type Target = Record;
    fn deref(&self) -> &Record {
        self.0.get()
    }
}

impl Drop for TestRecord {
    fn drop(&mut self) {
        // SAFETY: the last reference is gone; the models leave no version in a limbo.
        unsafe { self.0.destroy() }
    }
}

/// A reader at T=2 and a committer at W=1 race on one record: either the committer
/// aborts or the reader sees its version. Never both "committed" and "missed".
#[test]
fn older_commit_is_either_seen_or_aborted() {
    loom::model(|| {
        let rec = TestRecord::new(0);
        let r2 = rec.clone();
        let writer = loom::thread::spawn(move || {
            if r2.lock_for_commit(1).is_err() {
                return false;
            }
            r2.install(Version::new(1, Some(b"v")));
            r2.unlock(1);
            true
        });
        let walk = AtomicU64::new(0);
        let saw = rec.read(2, &walk).unwrap().map(|v| v.ts());
        let committed = writer.join().unwrap();
        if committed {
            assert_eq!(saw, Some(1), "reader at 2 missed a committed write at 1");
        } else {
            assert_eq!(saw, None);
        }
        // SAFETY: both threads are done.
        unsafe { rec.free_versions() };
    });
}

/// Precision locking: a committer that draws its commit timestamp after locking, and a
/// snapshot reader, share one clock. The reader sees the version exactly when the
/// commit timestamp is below its snapshot, whatever the interleaving (it waits out an
/// unstamped or older owner).
#[test]
fn snapshot_reader_sees_exactly_the_commits_below_it() {
    loom::model(|| {
        let clock = Arc::new(AtomicU64::new(10));
        let rec = TestRecord::new(0);
        let (r2, c2) = (rec.clone(), clock.clone());
        let writer = loom::thread::spawn(move || {
            let start = 1;
            r2.lock_no_wait(start).expect("no other writer");
            let cts = c2.fetch_add(1, Ordering::SeqCst);
            r2.stamp(cts);
            let v = Version::new(0, Some(b"v"));
            // SAFETY: unpublished.
            unsafe { Version::set_ts(v, cts) };
            r2.install(v);
            r2.unlock(cts);
            cts
        });
        let ts = clock.fetch_add(1, Ordering::SeqCst);
        let walk = AtomicU64::new(0);
        let saw = rec.read_snapshot(ts, &walk).map(|v| v.ts());
        let cts = writer.join().unwrap();
        if cts < ts {
            assert_eq!(
                saw,
                Some(cts),
                "a snapshot at {ts} missed a commit at {cts}"
            );
        } else {
            assert_eq!(saw, None, "a snapshot at {ts} saw a commit at {cts}");
        }
        // SAFETY: both threads are done.
        unsafe { rec.free_versions() };
    });
}

/// A stand-in for the index: one key's slot and its gap stamp, under a mutex (the real
/// index's gap-stamp contract is Masstree's own, tested there).
struct OneKeyIndex(loom::sync::Mutex<(Option<Arc<TestRecord>>, u64)>);

impl OneKeyIndex {
    fn get_or_stamp(&self, ts: u64) -> Option<Arc<TestRecord>> {
        let mut g = self.0.lock().unwrap();
        if g.0.is_none() {
            g.1 = g.1.max(ts);
        }
        g.0.clone()
    }
    fn get_or_insert(&self, made: &loom::sync::Mutex<Vec<Arc<TestRecord>>>) -> Arc<TestRecord> {
        let mut g = self.0.lock().unwrap();
        if g.0.is_none() {
            let r = TestRecord::new(g.1);
            made.lock().unwrap().push(r.clone());
            g.0 = Some(r);
        }
        g.0.clone().unwrap()
    }
    fn remove(&self, r: &Arc<TestRecord>, stamp: u64) {
        let mut g = self.0.lock().unwrap();
        assert!(g.0.as_ref().is_some_and(|x| Arc::ptr_eq(x, r)));
        g.0 = None;
        g.1 = g.1.max(stamp);
    }
}

/// Removal of a deleted key's record against a reader at 4 and an older writer at 3 that
/// inserts the key: either the writer aborts or the reader sees its write, whichever
/// record each of them ends up on (the dead one, or one inserted after the removal).
#[test]
fn removal_keeps_reads_and_older_inserts_ordered() {
    // Three threads with retry loops: every schedule with up to two preemptions (three
    // take tens of minutes, unbounded hours), with room for the loops' yields. Bound 2
    // catches a reader that ignores a dead record and a removal that folds nothing.
    let mut model = loom::model::Builder::new();
    model.preemption_bound = Some(2);
    model.max_branches = 100_000;
    model.check(|| {
        let made = Arc::new(loom::sync::Mutex::new(Vec::new()));
        let dead = TestRecord::new(0);
        dead.lock_for_commit(1).unwrap();
        assert!(
            dead.install(Version::new(1, None)).is_some(),
            "a tombstone wants the GC"
        );
        dead.unlock(1);
        made.lock().unwrap().push(dead.clone());
        let index = Arc::new(OneKeyIndex(loom::sync::Mutex::new((Some(dead.clone()), 0))));
        let (index2, made2) = (index.clone(), made.clone());
        let writer = loom::thread::spawn(move || {
            let mut r = index2.get_or_insert(&made2);
            loop {
                match r.lock_for_commit(3) {
                    Ok(()) => break,
                    Err(Refused::Removed) => {
                        loom::thread::yield_now();
                        r = index2.get_or_insert(&made2);
                    }
                    Err(Refused::Conflict(_)) => return false,
                }
            }
            r.install(Version::new(3, Some(b"v")));
            r.unlock(3);
            true
        });
        let (index3, dead3) = (index.clone(), dead.clone());
        let remover = loom::thread::spawn(move || {
            let snap = GcSnapshot {
                low: 3,
                future: 5,
                active: vec![3, 4],
            };
            let (mut unlinked, mut moved) = (Vec::new(), Vec::new());
            if let Prune::Pruned(p) = dead3.prune(dead3.0, &snap, &mut unlinked, &mut moved) {
                if let Some(stamp) = p.removed {
                    index3.remove(&dead3, stamp);
                }
            }
            assert!(unlinked.is_empty());
            // The writer's version may have moved into the free slot: its original is
            // freed once every thread is done, as the GC would.
            moved
        });
        let walk = AtomicU64::new(0);
        let saw = loop {
            let Some(r) = index.get_or_stamp(4) else {
                break None;
            };
            match r.read(4, &walk) {
                Ok(v) => break v.map(|v| (v.ts(), v.value().is_some())),
                Err(Removed) => loom::thread::yield_now(),
            }
        };
        let committed = writer.join().unwrap();
        for original in remover.join().unwrap() {
            // SAFETY: off the chain, and every thread is done.
            unsafe { Version::free(original.version) };
        }
        if committed {
            assert_eq!(saw, Some((3, true)), "a reader at 4 missed a commit at 3");
        } else {
            assert_ne!(saw, Some((3, true)));
        }
        for r in made.lock().unwrap().iter() {
            // SAFETY: every thread is done.
            unsafe { r.free_versions() };
        }
    });
}

/// Two committers on one record: the younger one never installs below the older one.
#[test]
fn committers_keep_the_chain_ordered() {
    loom::model(|| {
        let rec = TestRecord::new(0);
        let r2 = rec.clone();
        let t = loom::thread::spawn(move || {
            if r2.lock_for_commit(1).is_ok() {
                r2.install(Version::new(1, Some(b"a")));
                r2.unlock(1);
            }
        });
        // The younger committer waits out the older one and never conflicts with it.
        rec.lock_for_commit(2).expect("younger committer aborted");
        rec.install(Version::new(2, Some(b"b")));
        rec.unlock(2);
        t.join().unwrap();
        // `install` asserts the order; the newest is the younger write.
        assert_eq!(
            rec.read(3, &AtomicU64::new(0)).unwrap().map(|v| v.ts()),
            Some(2)
        );
        // SAFETY: both threads are done.
        unsafe { rec.free_versions() };
    });
}

/// An undo unlinks a version from the middle of the chain (versions 1, 2, 3; it drops
/// 2) while a snapshot reader at 3 walks past the head: the reader gets the version at
/// 2 (still linked when it looked, and not freed under it) or the one at 1, never
/// anything else, and afterwards the chain is 3, 1.
#[test]
fn an_undo_from_the_middle_keeps_walks_whole() {
    loom::model(|| {
        let rec = TestRecord::new(0);
        for ts in 1..=3 {
            rec.lock_for_commit(ts).unwrap();
            rec.install(Version::new(ts, Some(b"v")));
            rec.unlock(ts);
        }
        let r2 = rec.clone();
        let undo = loom::thread::spawn(move || {
            let mut unlinked = Vec::new();
            let emptied = r2.rollback_version(2, &mut unlinked).unwrap();
            assert!(!emptied);
            unlinked
        });
        let walk = AtomicU64::new(0);
        let saw = rec.read_snapshot(3, &walk).map(|v| v.ts());
        let unlinked = undo.join().unwrap();
        assert!(matches!(saw, Some(1 | 2)), "the walk found {saw:?}");
        assert_eq!(unlinked.len(), 1);
        assert_eq!(rec.read_snapshot(3, &walk).map(|v| v.ts()), Some(1));
        assert_eq!(rec.read_snapshot(4, &walk).map(|v| v.ts()), Some(3));
        // SAFETY: off the chain, and the reader is done (the GC's limbo waits for that).
        unsafe { Version::free(unlinked[0]) };
        // SAFETY: both threads are done.
        unsafe { rec.free_versions() };
    });
}

/// The inline slot's reuse. The slot holds the version at 1; a reader at 5 races a
/// writer that commits at 3 (to the heap), then collects as the GC would with the
/// reader active: the version at 1 is below the newest one under 5, so it is freed at
/// once, and the version at 3 moves into the slot (its heap original is handed back,
/// to free once the reader is gone). Then the writer commits at 7 (to the heap: the
/// slot holds the copy). Whatever the reader got is never overwritten under it, and it
/// is the version at 3 whenever that committed.
#[test]
fn a_reused_inline_slot_never_changes_under_a_reader() {
    loom::model(|| {
        let rec = TestRecord::new(0);
        rec.lock_for_commit(1).unwrap();
        let first = Version::new_in(rec.0, 1, Some(b"a"));
        // SAFETY: unpublished, ours.
        let first_inline = unsafe { first.as_ref() }.is_inline();
        assert!(first_inline, "a new record's slot is free");
        rec.install(first);
        rec.unlock(1);
        let r2 = rec.clone();
        let writer = loom::thread::spawn(move || {
            if r2.lock_for_commit(3).is_err() {
                return None; // the reader at 5 came first
            }
            let v3 = Version::new_in(r2.0, 3, Some(b"b"));
            // SAFETY: unpublished, ours.
            assert!(!unsafe { v3.as_ref() }.is_inline(), "the slot is taken");
            r2.install(v3);
            r2.unlock(3);
            let snap = GcSnapshot {
                low: 5,
                future: 6,
                active: vec![5],
            };
            let (mut unlinked, mut moved) = (Vec::new(), Vec::new());
            let pruned = r2.prune(r2.0, &snap, &mut unlinked, &mut moved);
            assert!(matches!(pruned, Prune::Pruned(_)));
            assert!(unlinked.is_empty(), "below the cut: freed at once");
            assert_eq!(
                moved.iter().map(|m| (m.version, m.ts)).collect::<Vec<_>>(),
                [(v3, 3)],
                "the newest moves into the freed slot"
            );
            r2.lock_for_commit(7).expect("the reader is older");
            let v7 = Version::new_in(r2.0, 7, Some(b"c"));
            // SAFETY: unpublished, ours.
            let v7_inline = unsafe { v7.as_ref() }.is_inline();
            assert!(!v7_inline, "the copy holds the slot");
            r2.install(v7);
            r2.unlock(7);
            Some(v3)
        });
        let walk = AtomicU64::new(0);
        let got = rec
            .read(5, &walk)
            .unwrap()
            .map(|v| (v, v.ts(), v.value().map(<[u8]>::to_vec)));
        let moved = writer.join().unwrap();
        let (version, ts, value) = got.expect("the version at 1 at least");
        assert_eq!(
            (version.ts(), version.value().map(<[u8]>::to_vec)),
            (ts, value.clone()),
            "the version read changed under the reader"
        );
        let expected: &[u8] = if moved.is_some() { b"b" } else { b"a" };
        assert_eq!(value.as_deref(), Some(expected));
        let newest = rec.read(8, &walk).unwrap().map(|v| (v.ts(), v.is_inline()));
        if let Some(original) = moved {
            assert_eq!(newest, Some((7, false)));
            let below = rec.read(6, &walk).unwrap().map(|v| (v.ts(), v.is_inline()));
            assert_eq!(below, Some((3, true)), "the copy at 3 is on the chain");
            // SAFETY: off the chain, and the reader is done (the GC waits for that).
            unsafe { Version::free(original) };
        }
    });
}
