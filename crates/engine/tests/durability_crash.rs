//! Crash images taken while transactions run: the data directory is copied file by file at
//! random moments (each file a prefix of what the process wrote, torn writes included), and
//! the copy is recovered. Transfers between accounts keep the total constant, so a recovered
//! state with half a transaction, or one transaction without another it read from, shows
//! up as a wrong total; per-thread counters show that every commit acknowledged (sync mode)
//! before the copy began survived, and that the survivors of each thread are a prefix. A
//! reader thread shows the same of what reads answered: a counter value a read-only
//! transaction saw and returned (sync mode) before the copy began survived too, though the
//! write it saw may have been visible before it was on disk.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use verso_engine::{Concurrency, Db, Durability, Options};

const ACCOUNTS: u64 = 64;
const THREADS: usize = 2;
const START: u64 = 1_000;

fn options(dir: &Path, durability: Durability, cc: Concurrency) -> Options {
    Options::default()
        .durability(durability)
        .data_dir(dir)
        .logs(2)
        .concurrency(cc)
        .fsync_interval(Duration::from_millis(2))
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let p = e.path();
        let target = to.join(e.file_name());
        if p.is_dir() {
            copy_dir(&p, &target);
        } else if let Ok(bytes) = std::fs::read(&p) {
            // A file removed between listing and reading (a checkpoint cleaning up) is
            // simply absent from this image.
            std::fs::write(target, bytes).unwrap();
        }
    }
}

fn check_image(image: &Path, durability: Durability, cc: Concurrency, acked: &[u64]) {
    let db = Db::open(options(image, durability, cc)).unwrap();
    let t = db.table("bank").unwrap();
    let txn = db.begin_read_only().unwrap();
    let mut total = 0;
    let mut seen_accounts = 0;
    for a in 0..ACCOUNTS {
        if let Some(v) = txn.get(&t, format!("acct{a:03}")).unwrap() {
            total += std::str::from_utf8(v).unwrap().parse::<u64>().unwrap();
            seen_accounts += 1;
        }
    }
    assert!(
        seen_accounts == 0 || seen_accounts == ACCOUNTS,
        "the setup is all or nothing"
    );
    if seen_accounts > 0 {
        assert_eq!(
            total,
            ACCOUNTS * START,
            "{durability} {cc}: money created or lost"
        );
    }
    for (thread, &acked) in acked.iter().enumerate() {
        let n = txn
            .get(&t, format!("count{thread}"))
            .unwrap()
            .map_or(0, |v| {
                std::str::from_utf8(v).unwrap().parse::<u64>().unwrap()
            });
        if durability == Durability::Sync {
            assert!(
                n >= acked,
                "{cc}: thread {thread} had {acked} acknowledged or read, {n} survived"
            );
        }
    }
}

fn run(durability: Durability, cc: Concurrency) {
    let dir = tempfile::tempdir().unwrap();
    let images = tempfile::tempdir().unwrap();
    let db = Db::open(options(dir.path(), durability, cc)).unwrap();
    let t = db.table("bank").unwrap();
    db.run(|txn| {
        for a in 0..ACCOUNTS {
            txn.put(&t, format!("acct{a:03}"), START.to_string())?;
        }
        Ok(())
    })
    .unwrap();
    let stop = AtomicBool::new(false);
    let acked: Vec<AtomicU64> = (0..THREADS).map(|_| AtomicU64::new(0)).collect();
    // The largest value of each counter a committed read-only transaction returned.
    let read: Vec<AtomicU64> = (0..THREADS).map(|_| AtomicU64::new(0)).collect();
    /// Stops the workers however the checking thread leaves the scope (a failed check
    /// panics; without this the scope would wait for them forever).
    struct StopOnDrop<'a>(&'a AtomicBool);
    impl Drop for StopOnDrop<'_> {
        fn drop(&mut self) {
            self.0.store(true, Ordering::Relaxed);
        }
    }
    std::thread::scope(|s| {
        for thread in 0..THREADS {
            let (db, stop, acked) = (&db, &stop, &acked);
            s.spawn(move || {
                let mut x = thread as u64 * 7919 + 1;
                let mut done = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    x = x
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    let (from, to) = ((x >> 20) % ACCOUNTS, (x >> 40) % ACCOUNTS);
                    let amount = (x >> 8) % 50;
                    let r = db.run(|txn| {
                        let get = |txn: &verso_engine::Txn<'_>, k: &str| -> Result<u64, _> {
                            Ok(txn.get(&t, k)?.map_or(0, |v| {
                                std::str::from_utf8(v).unwrap().parse::<u64>().unwrap()
                            }))
                        };
                        let (fk, tk) = (format!("acct{from:03}"), format!("acct{to:03}"));
                        let fv = get(txn, &fk)?;
                        let moved = amount.min(fv);
                        let tv = get(txn, &tk)?;
                        if from != to {
                            txn.put(&t, &fk, (fv - moved).to_string())?;
                            txn.put(&t, &tk, (tv + moved).to_string())?;
                        }
                        let ck = format!("count{thread}");
                        let c = get(txn, &ck)?;
                        txn.put(&t, &ck, (c + 1).to_string())?;
                        Ok(())
                    });
                    if r.is_ok() {
                        done += 1;
                        acked[thread].store(done, Ordering::SeqCst);
                    }
                }
            });
        }
        let (db_r, stop_r, read_r) = (&db, &stop, &read);
        s.spawn(move || {
            while !stop_r.load(Ordering::Relaxed) {
                let txn = db_r.begin_read_only().unwrap();
                let seen: Vec<u64> = (0..THREADS)
                    .map(|thread| {
                        txn.get(&t, format!("count{thread}"))
                            .unwrap()
                            .map_or(0, |v| {
                                std::str::from_utf8(v).unwrap().parse::<u64>().unwrap()
                            })
                    })
                    .collect();
                // Returns once what it read is as durable as the mode promises.
                if txn.commit().is_ok() {
                    for (r, v) in read_r.iter().zip(seen) {
                        r.fetch_max(v, Ordering::SeqCst);
                    }
                }
            }
        });
        let _stop = StopOnDrop(&stop);
        let mut n = 0;
        for round in 0..6 {
            std::thread::sleep(Duration::from_millis(40 + round * 17));
            if round == 2 {
                db.checkpoint().unwrap();
                continue;
            }
            let before: Vec<u64> = acked
                .iter()
                .zip(&read)
                .map(|(a, r)| a.load(Ordering::SeqCst).max(r.load(Ordering::SeqCst)))
                .collect();
            let image = images.path().join(format!("image{n}"));
            copy_dir(dir.path(), &image);
            std::fs::remove_file(image.join("LOCK")).ok();
            n += 1;
            check_image(&image, durability, cc, &before);
        }
    });
}

#[test]
fn crash_images_are_consistent_prefixes_lazy() {
    run(Durability::Lazy, Concurrency::Mvto);
    run(Durability::Lazy, Concurrency::PrecisionLocking);
}

#[test]
fn crash_images_keep_every_acknowledged_commit_sync() {
    run(Durability::Sync, Concurrency::Mvto);
    run(Durability::Sync, Concurrency::PrecisionLocking);
}
