//! Memory behaviour, measured with a counting global allocator:
//! - a read-only point transaction performs no heap allocation;
//! - a blind write to an existing key allocates at most its version (amortized);
//! - a long write-only run keeps memory bounded (GC keeps up);
//! - a long reader holds back only the versions it can see (one per record it could read),
//!   not every version written while it runs, and releases them when it ends.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicI64, Ordering};

use verso_engine::{Db, Options, Table};

struct Counting;

static LIVE_BYTES: AtomicI64 = AtomicI64::new(0);
thread_local! {
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: forwards to `System`, only adding counters (which never allocate: a const
// thread-local `Cell` and a static atomic).
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCS.with(|c| c.set(c.get() + 1));
        LIVE_BYTES.fetch_add(layout.size() as i64, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE_BYTES.fetch_sub(layout.size() as i64, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Tests in this file run one at a time: the live-byte counter is process-wide.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn allocs_on_this_thread() -> u64 {
    ALLOCS.with(Cell::get)
}

fn load(db: &Db, t: &Table, keys: u64) {
    for chunk in (0..keys).collect::<Vec<_>>().chunks(1000) {
        db.run(|txn| {
            for &k in chunk {
                txn.put(t, k.to_be_bytes(), [7u8; 100])?;
            }
            Ok(())
        })
        .unwrap();
    }
}

#[test]
fn read_only_point_transactions_do_not_allocate() {
    let _serial = serial();
    let db = Db::open(Options::default()).unwrap();
    let t = db.table("t").unwrap();
    load(&db, &t, 10_000);
    // Warm up this thread's site and pools.
    let txn = db.begin_read_only().unwrap();
    let _ = txn.get(&t, 1u64.to_be_bytes()).unwrap();
    txn.commit().unwrap();

    let before = allocs_on_this_thread();
    let mut found = 0;
    for k in (0..20_000u64).map(|i| i * 7919 % 10_000) {
        let txn = db.begin_read_only().unwrap();
        found += usize::from(txn.get(&t, k.to_be_bytes()).unwrap().is_some());
        // An absent key stamps a gap; still no allocation.
        assert_eq!(txn.get(&t, (k + 1_000_000).to_be_bytes()).unwrap(), None);
        txn.commit().unwrap();
    }
    assert_eq!(found, 20_000);
    assert_eq!(
        allocs_on_this_thread() - before,
        0,
        "read-only point transactions allocated"
    );
}

#[test]
fn blind_writes_allocate_only_their_version() {
    let _serial = serial();
    let db = Db::open(Options::default()).unwrap();
    let t = db.table("t").unwrap();
    load(&db, &t, 1_000);
    for k in 0..2_000u64 {
        db.run(|txn| txn.put(&t, (k % 1000).to_be_bytes(), [1u8; 100]))
            .unwrap();
    }
    let n = 10_000u64;
    let before = allocs_on_this_thread();
    for k in 0..n {
        let mut txn = db.begin().unwrap();
        txn.put(&t, (k % 1000).to_be_bytes(), [2u8; 100]).unwrap();
        txn.commit().unwrap();
    }
    let per_txn = (allocs_on_this_thread() - before) as f64 / n as f64;
    // One version each; GC-queue growth is amortized to nearly nothing.
    assert!(per_txn <= 1.01, "{per_txn} allocations per blind write");
}

/// One test (not two) because both read the global live-byte counter.
#[test]
fn memory_is_bounded_and_long_readers_release_what_they_hold() {
    let _serial = serial();
    let db = Db::open(Options::default()).unwrap();
    let t = db.table("t").unwrap();
    load(&db, &t, 1_000);
    let write_round = |db: &Db, n: u64, byte: u8| {
        for k in 0..n {
            db.run(|txn| txn.put(&t, (k % 1000).to_be_bytes(), [byte; 100]))
                .unwrap();
        }
    };
    write_round(&db, 5_000, 3);
    db.collect_garbage();
    let baseline = LIVE_BYTES.load(Ordering::Relaxed);

    // 200 overwrites of every key: without GC that is ~25 MB of versions.
    let mut peak = 0;
    for _ in 0..20 {
        write_round(&db, 10_000, 3);
        peak = peak.max(LIVE_BYTES.load(Ordering::Relaxed));
    }
    let growth = peak - baseline;
    assert!(
        growth < 2_000_000,
        "live memory grew by {growth} bytes during a write-only run"
    );

    // A long reader keeps its snapshot: one version per record stays for it. The 50 000
    // versions written meanwhile (~6 MB) must not: no active reader can see them.
    let reader = db.begin_read_only().unwrap();
    assert_eq!(
        reader.get(&t, 5u64.to_be_bytes()).unwrap(),
        Some(&[3u8; 100][..])
    );
    write_round(&db, 50_000, 4);
    db.collect_garbage();
    let held = LIVE_BYTES.load(Ordering::Relaxed) - baseline;
    // 1000 records x (one 124-byte version for the reader + queue entry) is ~150 kB.
    assert!(
        held < 600_000,
        "a long reader held {held} bytes, more than it can see"
    );
    // Its versions are intact: every record still reads as it was before the 4s.
    let mut records = 0;
    for (_, v) in reader.range(&t, ..).unwrap() {
        assert_eq!(v, [3u8; 100], "the reader lost its snapshot");
        records += 1;
    }
    assert_eq!(records, 1000);
    reader.commit().unwrap();
    // ... and releases them once it ends.
    write_round(&db, 1_000, 5);
    db.collect_garbage();
    let after = LIVE_BYTES.load(Ordering::Relaxed) - baseline;
    assert!(
        after < 1_000_000,
        "{after} bytes still held after the reader ended"
    );
}

/// Key churn (insert a unique key, delete it) must not leave a record per key ever written:
/// deleted keys leave the index once the watermark passes their tombstones, and their
/// records are freed. Under every protocol and both indexes.
#[test]
fn churned_keys_leave_the_index_and_memory() {
    use verso_engine::{Concurrency, IndexKind};
    let _serial = serial();
    for cc in [
        Concurrency::Mvto,
        Concurrency::PrecisionLocking,
        Concurrency::TwoPhaseLocking,
    ] {
        // A long key's tail (past the first slice) is read by Masstree from the record, whose
        // free then waits for the index's epoch too (`IndexValue::HOLDS_KEY`).
        for (index, tail) in [
            (IndexKind::Masstree, 0),
            (IndexKind::Masstree, 32),
            (IndexKind::LockedBTree, 0),
        ] {
            let db = Db::open(Options::default().concurrency(cc).index(index)).unwrap();
            let t = db.table("t").unwrap();
            let key = |k: u64| {
                let mut key = k.to_be_bytes().to_vec();
                key.resize(8 + tail, b'-');
                key
            };
            let churn = |from: u64, n: u64| {
                for k in from..from + n {
                    db.run(|txn| txn.put(&t, key(k), [9u8; 100])).unwrap();
                    db.run(|txn| txn.delete(&t, key(k))).unwrap();
                }
                db.collect_garbage();
                db.collect_garbage();
            };
            churn(0, 5_000);
            let baseline = LIVE_BYTES.load(Ordering::Relaxed);
            churn(5_000, 20_000);
            let growth = LIVE_BYTES.load(Ordering::Relaxed) - baseline;
            let stats = db.stats();
            assert_eq!(
                db.table_index_len(&t).unwrap(),
                0,
                "{cc:?} {index:?} {tail}: deleted keys stayed in the index: {stats:?}"
            );
            assert_eq!(
                stats.records_removed, 25_000,
                "{cc:?} {index:?} {tail}: {stats:?}"
            );
            assert_eq!(
                stats.records_freed, 25_000,
                "{cc:?} {index:?} {tail}: {stats:?}"
            );
            // 20 000 keys of ~100 bytes each were written: about 4.5 MB if records stayed.
            assert!(
                growth < 200_000,
                "{cc:?} {index:?} {tail}: live memory grew by {growth} bytes over 20 000 churned keys"
            );
        }
    }
}

/// Records of long keys (which Masstree reads from the record, so their frees also wait for
/// the index's epoch) deleted in one burst are freed by the collections that follow, with
/// no other traffic to drive the epoch: a FLUSHALL followed by silence gives its memory back.
#[test]
fn a_burst_of_deleted_long_keys_is_freed_without_later_traffic() {
    let _serial = serial();
    let db = Db::open(Options::default()).unwrap();
    let t = db.table("t").unwrap();
    let key = |k: u64| {
        let mut key = k.to_be_bytes().to_vec();
        key.extend_from_slice(&[b'-'; 40]);
        key
    };
    let baseline = LIVE_BYTES.load(Ordering::Relaxed);
    for chunk in 0..20u64 {
        db.run(|txn| {
            for k in chunk * 1_000..(chunk + 1) * 1_000 {
                txn.put(&t, key(k), [7u8; 100])?;
            }
            Ok(())
        })
        .unwrap();
    }
    let loaded = LIVE_BYTES.load(Ordering::Relaxed) - baseline;
    for chunk in 0..20u64 {
        db.run(|txn| {
            for k in chunk * 1_000..(chunk + 1) * 1_000 {
                txn.delete(&t, key(k))?;
            }
            Ok(())
        })
        .unwrap();
    }
    db.collect_garbage();
    db.collect_garbage();
    let left = LIVE_BYTES.load(Ordering::Relaxed) - baseline;
    let stats = db.stats();
    assert_eq!(stats.records_freed, 20_000, "{stats:?}");
    assert!(
        left < loaded / 10,
        "{left} of the {loaded} bytes 20 000 long keys took are still allocated: {stats:?}"
    );
}

/// The empty record an aborted insert leaves in the index is removed by the aborting
/// commit (or, under two-phase locking, by the aborting transaction's end).
#[test]
fn aborted_inserts_leave_no_record_behind() {
    use verso_engine::{Concurrency, Error};
    let _serial = serial();
    for cc in [
        Concurrency::Mvto,
        Concurrency::PrecisionLocking,
        Concurrency::TwoPhaseLocking,
    ] {
        let db = Db::open(Options::default().concurrency(cc)).unwrap();
        let t = db.table("t").unwrap();
        db.run(|txn| txn.put(&t, b"hot", b"0")).unwrap();
        let mut aborted = 0;
        for k in 0..2_000u64 {
            // The loser inserts a fresh key and writes the hot key; the younger winner reads
            // (two-phase locking: share-locks) the hot key first, then writes it and commits.
            let mut loser = db.begin().unwrap();
            loser.put(&t, k.to_be_bytes(), b"new").unwrap();
            let mut winner = db.begin().unwrap();
            winner.get(&t, b"hot").unwrap();
            let lost = loser.put(&t, b"hot", b"2"); // 2PL: refused (the winner's lock)
            winner.put(&t, b"hot", b"1").unwrap();
            winner.commit().unwrap();
            match lost.and_then(|()| loser.commit().map(|_| ())) {
                Err(Error::Conflict { .. }) => aborted += 1,
                Err(e) => panic!("{cc:?}: {e}"),
                Ok(()) => panic!("{cc:?}: the loser committed"),
            }
        }
        db.collect_garbage();
        db.collect_garbage();
        assert_eq!(aborted, 2_000, "{cc:?}");
        assert_eq!(
            db.table_index_len(&t).unwrap(),
            1,
            "{cc:?}: aborted inserts left records: {:?}",
            db.stats()
        );
    }
}

/// A newest version on the heap moves into its record's inline slot once the version that
/// held the slot is freed (a collection); a transaction that read the original keeps a
/// valid slice of it until it ends, however much the allocator is churned meanwhile, and
/// the original is freed once that transaction is gone.
#[test]
fn a_moved_newest_version_stays_valid_for_its_readers() {
    let _serial = serial();
    let db = Db::open(Options::default()).unwrap();
    let t = db.table("t").unwrap();
    db.run(|txn| txn.put(&t, b"k", [1u8; 100])).unwrap(); // takes the inline slot
    db.run(|txn| txn.put(&t, b"k", [2u8; 100])).unwrap(); // the heap: the slot is taken
    let reader = db.begin_read_only().unwrap();
    let held = reader.get(&t, b"k").unwrap().unwrap();
    assert_eq!(held, [2u8; 100]);
    let moved_before = db.stats().gc_moved_inline;
    // The 1s are below what the reader sees: freed, and the 2s move into the slot.
    db.collect_garbage();
    assert_eq!(
        db.stats().gc_moved_inline,
        moved_before + 1,
        "the newest version moves inline"
    );
    // Heap versions of the same size come and go; the original must not be among the
    // freed memory they reuse.
    for i in 0..20_000u64 {
        db.run(|txn| txn.put(&t, (i % 500).to_be_bytes(), [3u8; 100]))
            .unwrap();
    }
    db.collect_garbage();
    assert_eq!(
        held, [2u8; 100],
        "a moved version was freed under its reader"
    );
    assert_eq!(reader.get(&t, b"k").unwrap(), Some(&[2u8; 100][..]));
    drop(reader);
    let live = LIVE_BYTES.load(Ordering::Relaxed);
    db.collect_garbage();
    assert!(
        LIVE_BYTES.load(Ordering::Relaxed) < live,
        "the original is freed once its reader ended"
    );
    assert_eq!(
        db.begin_read_only().unwrap().get(&t, b"k").unwrap(),
        Some(&[2u8; 100][..])
    );
}

/// What a long reader holds back (its versions, moved into inline slots or not) must not
/// make the GC run at every commit: collections stay amortized over the commits.
#[test]
fn a_long_reader_does_not_make_every_commit_collect() {
    let _serial = serial();
    let db = Db::open(Options::default()).unwrap();
    let t = db.table("t").unwrap();
    let write_round = |db: &Db, byte: u8| {
        for k in 0..1_000u64 {
            db.run(|txn| txn.put(&t, k.to_be_bytes(), [byte; 100]))
                .unwrap();
        }
    };
    write_round(&db, 0); // every record's first version takes its inline slot
                         // A pin keeps the 0s, so the 1s stay on the heap beside them.
    let pin = db.begin_read_only().unwrap();
    write_round(&db, 1);
    let reader = db.begin_read_only().unwrap(); // sees the 1s
    drop(pin);
    let moved_before = db.stats().gc_moved_inline;
    // The 0s go, and the 1s move into the freed slots: the heap originals wait for the
    // reader, which may hold them.
    db.collect_garbage();
    assert!(
        db.stats().gc_moved_inline >= moved_before + 1_000,
        "the reader's versions move into the freed slots"
    );
    let before = db.stats();
    for round in 2..12u8 {
        write_round(&db, round);
    }
    let after = db.stats();
    let commits = after.commits - before.commits;
    let runs = after.gc_runs - before.gc_runs;
    assert!(
        runs * 50 < commits,
        "{runs} collections in {commits} commits next to a long reader"
    );
    assert_eq!(
        reader.get(&t, 5u64.to_be_bytes()).unwrap(),
        Some(&[1u8; 100][..])
    );
    // Once the reader ends, what it held back goes: the originals the collections skipped
    // while it stayed (the oldest transaction unchanged) and the records it kept stuck.
    drop(reader);
    db.collect_garbage();
    db.collect_garbage();
    let pending = db.stats().gc_pending;
    assert!(
        pending < 100,
        "{pending} entries still wait for the GC after the reader ended"
    );
}

/// Next to a long reader, a write that supersedes a version the reader could read leaves
/// nothing a prune could take: the collections park its record without visiting it (each
/// visit is a cache miss on a record written a while ago), and prune it once the reader
/// has ended, freeing what the reader held.
#[test]
fn records_pinned_by_a_long_reader_are_pruned_once_it_ends() {
    let _serial = serial();
    let db = Db::open(Options::default()).unwrap();
    let t = db.table("t").unwrap();
    const KEYS: u64 = 2_000;
    let write_round = |db: &Db, byte: u8| {
        for k in 0..KEYS {
            db.run(|txn| txn.put(&t, k.to_be_bytes(), [byte; 100]))
                .unwrap();
        }
    };
    write_round(&db, 0);
    db.collect_garbage();
    let reader = db.begin_read_only().unwrap();
    let before = db.stats();
    write_round(&db, 1); // every key once: the reader may still read each 0
    db.collect_garbage();
    let during = db.stats();
    assert!(
        during.gc_runs > before.gc_runs,
        "the queue filled and was collected"
    );
    assert_eq!(
        during.gc_records_pruned - before.gc_records_pruned,
        0,
        "a record whose superseded version the reader may read was pruned anyway"
    );
    for k in (0..KEYS).step_by(97) {
        assert_eq!(
            reader.get(&t, k.to_be_bytes()).unwrap(),
            Some(&[0u8; 100][..])
        );
    }
    drop(reader);
    db.collect_garbage();
    db.collect_garbage();
    let after = db.stats();
    let pruned = after.gc_records_pruned - during.gc_records_pruned;
    assert!(
        (KEYS..=KEYS + KEYS / 10).contains(&pruned),
        "{pruned} prunes for {KEYS} records parked once each"
    );
    assert!(
        after.gc_bytes_freed - during.gc_bytes_freed >= KEYS * 100,
        "the versions the reader held were not freed"
    );
    assert!(
        after.gc_pending < 100,
        "{} entries still wait for the GC after the reader ended",
        after.gc_pending
    );
    let check = db.begin_read_only().unwrap();
    for k in 0..KEYS {
        assert_eq!(
            check.get(&t, k.to_be_bytes()).unwrap(),
            Some(&[1u8; 100][..])
        );
    }
}
