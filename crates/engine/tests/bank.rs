//! Bank transfers: writers move money between random accounts while read-only transactions
//! sum every balance, by range and by point reads. Every sum must equal the initial total.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use verso_engine::{Db, Options, Table, TimestampSource};

const ACCOUNTS: u64 = 64;
const INITIAL: u64 = 1_000;

fn balance(v: &[u8]) -> u64 {
    u64::from_le_bytes(v.try_into().expect("8-byte balance"))
}

fn run_bank(source: TimestampSource) {
    let db = Db::open(Options::default().timestamps(source)).unwrap();
    let t: Table = db.table("accounts").unwrap();
    db.run(|txn| {
        for a in 0..ACCOUNTS {
            txn.put(&t, a.to_be_bytes(), INITIAL.to_le_bytes())?;
        }
        Ok(())
    })
    .unwrap();
    let stop = AtomicBool::new(false);
    let writers_left = AtomicU64::new(3);
    let sums_checked = AtomicU64::new(0);
    let transfers = AtomicU64::new(0);
    std::thread::scope(|s| {
        for w in 0..3u64 {
            let (db, stop, transfers, writers_left) = (&db, &stop, &transfers, &writers_left);
            s.spawn(move || {
                let mut x = 0x9e37_79b9_7f4a_7c15u64 ^ w;
                let mut next = move || {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x
                };
                for _ in 0..3_000 {
                    let (from, to, amount) = (next() % ACCOUNTS, next() % ACCOUNTS, next() % 50);
                    let r = db.run(|txn| {
                        let a = balance(txn.get(&t, from.to_be_bytes())?.unwrap());
                        if from == to || a < amount {
                            return Ok(false);
                        }
                        let b = balance(txn.get(&t, to.to_be_bytes())?.unwrap());
                        txn.put(&t, from.to_be_bytes(), (a - amount).to_le_bytes())?;
                        txn.put(&t, to.to_be_bytes(), (b + amount).to_le_bytes())?;
                        Ok(true)
                    });
                    // Retries are bounded; a transfer that keeps losing is simply skipped.
                    if let Ok(true) = r {
                        transfers.fetch_add(1, Ordering::Relaxed);
                    }
                }
                if writers_left.fetch_sub(1, Ordering::AcqRel) == 1 {
                    stop.store(true, Ordering::Release);
                }
            });
        }
        for by_range in [true, false] {
            let (db, stop, sums_checked) = (&db, &stop, &sums_checked);
            s.spawn(move || {
                let mut mine = 0;
                while mine < 100 || !stop.load(Ordering::Acquire) {
                    mine += 1;
                    let txn = db.begin_read_only().unwrap();
                    let sum: u64 = if by_range {
                        txn.range(&t, ..).unwrap().map(|(_, v)| balance(v)).sum()
                    } else {
                        (0..ACCOUNTS)
                            .map(|a| balance(txn.get(&t, a.to_be_bytes()).unwrap().unwrap()))
                            .sum()
                    };
                    assert_eq!(sum, ACCOUNTS * INITIAL, "read-only txn saw a torn transfer");
                    txn.commit().expect("read-only transactions never abort");
                    sums_checked.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
    });
    let txn = db.begin_read_only().unwrap();
    let sum: u64 = txn.range(&t, ..).unwrap().map(|(_, v)| balance(v)).sum();
    assert_eq!(sum, ACCOUNTS * INITIAL);
    assert!(
        transfers.load(Ordering::Relaxed) > 1_000,
        "too few transfers committed"
    );
    assert!(sums_checked.load(Ordering::Relaxed) > 0);
}

#[test]
fn sums_are_invariant_with_rdtsc_or_atomic_timestamps() {
    run_bank(TimestampSource::Auto);
    run_bank(TimestampSource::Atomic);
}

#[test]
fn sums_are_invariant_with_mutex_timestamps() {
    run_bank(TimestampSource::Mutex);
}
