//! Elle's list-append workload on the engine, checked by `verso-check`'s append checker,
//! which infers each key's version order from the lists read and never from the engine's
//! timestamps (so a version installed with a wrong timestamp cannot hide behind them).
//!
//! A key's value is a list of unique elements; an append reads the list, adds an element
//! and writes it back in the same transaction (the engine has no append operation); reads
//! return whole lists. Each thread interleaves a few open transactions so they overlap
//! whatever the scheduler does. Keys are retired after a few dozen appends (the window of
//! live keys moves on), so lists stay short and checking stays linear.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Barrier;

use verso_check::{
    check_append_snapshot_isolation, check_append_strict_serializable, AppendHistory,
    AppendRecorder, AppendTxnBuilder, CheckStats, Outcome, Violation,
};
use verso_engine::{Concurrency, Db, Fault, IndexKind, Isolation, Options, Table, Txn};

mod common;
use common::Rng;

/// One run of the workload.
#[derive(Clone, Copy, Debug)]
struct Workload {
    cc: Concurrency,
    isolation: Isolation,
    index: IndexKind,
    threads: u64,
    txns: usize,
    /// Live keys at a time (the window).
    keys: u64,
    /// Transactions (over all threads) after which the window moves on by one key.
    rotate_every: u64,
    fault: Fault,
    seed: u64,
}

impl Workload {
    fn new(cc: Concurrency, seed: u64) -> Self {
        Workload {
            cc,
            isolation: Isolation::Serializable,
            index: IndexKind::Masstree,
            threads: 4,
            txns: 1_500,
            keys: 12,
            rotate_every: 16,
            fault: Fault::None,
            seed,
        }
    }

    /// Runs the workload; returns the history, checked at the workload's level, and the
    /// engine's statistics.
    fn run(
        self,
    ) -> (
        AppendHistory,
        Result<CheckStats, Violation>,
        verso_engine::Stats,
    ) {
        let db = Db::open(
            Options::default()
                .index(self.index)
                .concurrency(self.cc)
                .isolation(self.isolation)
                .inject_fault(self.fault),
        )
        .unwrap();
        let t = db.table("lists").unwrap();
        let rec = AppendRecorder::new();
        let started = AtomicU64::new(0);
        let barrier = Barrier::new(self.threads as usize);
        std::thread::scope(|s| {
            for i in 0..self.threads {
                let (db, rec, started, barrier) = (&db, &rec, &started, &barrier);
                s.spawn(move || {
                    barrier.wait();
                    let seed = self.seed.wrapping_mul(1_000_003).wrapping_add(i);
                    run_thread(self, db, t, rec, started, seed);
                });
            }
        });
        let history = rec.into_history();
        let checked = if self.isolation == Isolation::Snapshot {
            check_append_snapshot_isolation(&history)
        } else {
            check_append_strict_serializable(&history)
        };
        (history, checked, db.stats())
    }

    /// Runs and requires the history to pass, and the run to have exercised conflicts.
    fn check(self) {
        let (history, checked, stats) = self.run();
        match checked {
            Ok(check) => {
                let conflicts = stats.conflicts_read_by_younger
                    + stats.conflicts_written_by_younger
                    + stats.conflicts_write_write
                    + stats.conflicts_read_changed
                    + stats.conflicts_lock_busy;
                assert!(conflicts >= 20, "{self:?}: too few conflicts: {stats:?}");
                assert!(
                    stats.commits > (self.threads * self.txns as u64) / 3,
                    "{self:?}: too few commits: {stats:?}"
                );
                eprintln!("{self:?}: {} txns, {check:?}", history.len());
            }
            Err(v) => panic!("{self:?}: history violates the level:\n{v}"),
        }
    }
}

/// A transaction in flight with its recording.
struct Open<'d, 'r> {
    txn: Txn<'d>,
    rec: AppendTxnBuilder<'r>,
    read_only: bool,
    ops_left: u64,
    failed: bool,
}

fn run_thread(
    w: Workload,
    db: &Db,
    t: Table,
    rec: &AppendRecorder,
    started: &AtomicU64,
    seed: u64,
) {
    // Two-phase locking: a read-only transaction waits for writers, so a thread must not
    // hold a write lock in another of its own open transactions meanwhile.
    let open_max = if w.cc == Concurrency::TwoPhaseLocking {
        1
    } else {
        3
    };
    let mut rng = Rng(seed);
    let mut open: Vec<Open<'_, '_>> = Vec::new();
    let mut begun = 0;
    while begun < w.txns || !open.is_empty() {
        if begun < w.txns && (open.is_empty() || (open.len() < open_max && rng.below(3) == 0)) {
            let read_only = rng.below(5) == 0;
            let b = rec.begin_txn();
            let txn = if read_only {
                db.begin_read_only()
            } else {
                db.begin()
            }
            .unwrap();
            open.push(Open {
                txn,
                rec: b,
                read_only,
                ops_left: 1 + rng.below(4),
                failed: false,
            });
            begun += 1;
            started.fetch_add(1, Ordering::Relaxed);
            continue;
        }
        let i = rng.below(open.len() as u64) as usize;
        if open[i].ops_left == 0 {
            finish(open.swap_remove(i), &mut rng);
            continue;
        }
        open[i].ops_left -= 1;
        if rng.below(8) == 0 {
            std::thread::yield_now();
        }
        // The window of live keys: `base..base + keys`, moving on as transactions start.
        let base = started.load(Ordering::Relaxed) / w.rotate_every;
        let key = format!("list{:08}", base + rng.skewed(w.keys)).into_bytes();
        let o = &mut open[i];
        let result = if o.read_only || rng.below(2) == 0 {
            o.txn.get(&t, &key).map(|v| {
                o.rec
                    .read_value(key.clone(), v)
                    .expect("a value that is not a list");
            })
        } else {
            o.txn
                .get(&t, &key)
                .map(|v| v.map(<[u8]>::to_vec))
                .and_then(|v| {
                    let v = v.as_deref();
                    let list = o.rec.rmw_append(key.clone(), v).expect("not a list");
                    o.txn.put(&t, &key, list)
                })
        };
        if let Err(e) = result {
            assert!(e.is_conflict(), "unexpected error {e}");
            assert!(!o.read_only, "a read-only transaction failed: {e}");
            o.failed = true;
            o.ops_left = 0;
        }
    }
}

fn finish(o: Open<'_, '_>, rng: &mut Rng) {
    let ts = o.txn.timestamp();
    if o.failed || rng.below(20) == 0 {
        o.txn.abort();
        o.rec.finish(Outcome::Aborted, Some(ts));
        return;
    }
    match o.txn.commit() {
        Ok(c) => {
            o.rec.finish(Outcome::Committed, Some(c.get()));
        }
        Err(e) => {
            assert!(e.is_conflict(), "unexpected commit error {e}");
            assert!(!o.read_only, "a read-only transaction aborted");
            o.rec.finish(Outcome::Aborted, Some(ts));
        }
    }
}

#[test]
fn append_workloads_are_strictly_serializable_under_every_protocol() {
    for (cc, seed) in [
        (Concurrency::Mvto, 1),
        (Concurrency::Mvto, 2),
        (Concurrency::PrecisionLocking, 3),
        (Concurrency::PrecisionLocking, 4),
        (Concurrency::TwoPhaseLocking, 5),
    ] {
        Workload::new(cc, seed).check();
    }
}

#[test]
fn append_workloads_with_more_threads_and_the_btree_index_are_strictly_serializable() {
    for (cc, seed) in [(Concurrency::Mvto, 11), (Concurrency::PrecisionLocking, 12)] {
        Workload {
            index: IndexKind::LockedBTree,
            threads: 8,
            txns: 1_000,
            keys: 32,
            ..Workload::new(cc, seed)
        }
        .check();
    }
}

#[test]
fn append_workloads_under_snapshot_isolation_are_snapshot_isolated() {
    Workload {
        isolation: Isolation::Snapshot,
        ..Workload::new(Concurrency::PrecisionLocking, 21)
    }
    .check();
}

/// The point of inferring version order from data: an engine bug that installs versions
/// with stale timestamps (here, MVTO commits that ignore younger readers and slot their
/// versions below newer ones, `Fault::StaleInstall`) is caught, whatever the engine says
/// its timestamps were.
#[test]
fn a_version_installed_with_a_stale_timestamp_is_caught() {
    for seed in 31..=40 {
        let w = Workload {
            fault: Fault::StaleInstall,
            ..Workload::new(Concurrency::Mvto, seed)
        };
        let (history, checked, _) = w.run();
        if let Err(v) = checked {
            eprintln!("seed {seed}: caught in {} txns:\n{v}", history.len());
            return;
        }
    }
    panic!("ten runs with versions installed at stale timestamps all passed the checker");
}

/// `scripts/soak.sh`: every protocol, rounds of fresh seeds, `VERSO_SOAK_SECS` each.
#[test]
#[ignore = "a soak run of minutes: scripts/soak.sh"]
fn soak_append_workloads() {
    common::soak(|cc, round, seed| {
        Workload {
            threads: 4 + round % 5,
            txns: 4_000,
            keys: [8, 24, 64][(round % 3) as usize],
            ..Workload::new(cc, seed)
        }
        .check()
    });
}
