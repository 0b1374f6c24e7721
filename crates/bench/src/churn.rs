//! `verso bench churn`: whether memory stays bounded when keys come and go at a constant
//! live set.
//!
//! Before record reclamation every key ever written kept its record (and its index entry)
//! forever, so a workload that inserts and deletes grew without bound even though its live
//! data did not. This benchmark loads `keys` keys, then runs transactions that each insert
//! one fresh key and delete one live key, for `duration_s`, and samples the process RSS and
//! the engine's reclamation counters every `sample_interval_s`: a flat RSS curve is the
//! claim, the ratio of the end to the first minute its number.
//!
//! Keys are 8-byte big-endian integers, as in YCSB. Each thread owns a stripe of the key
//! space, `thread << 48 | j`, and a sliding window `j in lo..hi` of it: a churn transaction
//! inserts `hi` and deletes `lo`. Threads therefore never write the same key (no conflicts
//! that only measure the key choice) and insert and delete at opposite ends of their own
//! range (no shared Masstree leaf between threads), and since every commit adds one key and
//! removes one, the live set is exactly `keys` after every commit, which the end of the run
//! checks with a full range read.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;
use verso_engine::{Db, Options, Table};

use crate::rng::Rng;
use crate::rss::{self, Machine};
use crate::runner::{self, format_rate, Display, Progress};
use crate::ycsb::{stamp_value, Spin, YcsbConfig, TABLE};
use crate::BenchError;

/// Bits of a key below the thread's stripe number: 2^48 keys per thread is centuries of
/// churn at any rate this engine reaches.
const STRIPE_BITS: u32 = 48;

/// The RSS ratio (end / first minute) a bounded run stays under.
pub const RSS_RATIO_TARGET: f64 = 1.10;

/// The reference point of the RSS ratio: a minute in, or 10 % of a shorter run (the first
/// seconds still replace the loaded keys and grow the allocator's pools; steady state is
/// what the ratio compares against).
const REFERENCE_S: f64 = 60.0;
const REFERENCE_SHARE: f64 = 0.1;

/// Shortest sample interval: /proc reads and `Db::stats` (which locks every GC queue)
/// must stay a negligible share of the run.
const SAMPLE_INTERVAL_MIN_S: f64 = 0.01;

/// Settings of a churn run.
#[derive(Clone, Debug)]
pub struct ChurnConfig {
    /// The live set: keys loaded, and keys alive after every commit.
    pub keys: u64,
    pub value_size: usize,
    pub threads: usize,
    pub duration_s: f64,
    pub sample_interval_s: f64,
    /// Percentage (0-100) of transactions that are a point read of a live key instead.
    pub read_ratio: u32,
    pub cc: crate::Protocol,
    pub seed: u64,
    pub progress: Progress,
}

impl Default for ChurnConfig {
    fn default() -> Self {
        ChurnConfig {
            keys: 1_000_000,
            value_size: 100,
            threads: thread::available_parallelism().map_or(1, |n| n.get()),
            duration_s: 600.0,
            sample_interval_s: 1.0,
            read_ratio: 0,
            cc: crate::Protocol::Mvto,
            seed: 0x5eed_c4c4_0000_0001,
            progress: Progress::Auto,
        }
    }
}

impl ChurnConfig {
    /// Rejects configurations that cannot run, naming the flag.
    pub fn validate(&self) -> Result<(), BenchError> {
        // The checks YCSB makes of the same flags (and its memory estimate of the live set).
        YcsbConfig {
            keys: self.keys,
            value_size: self.value_size,
            threads: self.threads,
            duration_s: self.duration_s,
            read_ratio: self.read_ratio,
            ..YcsbConfig::default()
        }
        .validate()?;
        if self.keys < self.threads as u64 {
            return Err(BenchError::Config(format!(
                "--keys must be at least --threads ({}): every thread deletes from its own share",
                self.threads
            )));
        }
        let i = self.sample_interval_s;
        if !(i.is_finite() && i >= SAMPLE_INTERVAL_MIN_S) {
            return Err(BenchError::Config(format!(
                "--sample-interval must be at least {SAMPLE_INTERVAL_MIN_S} s, got {i}"
            )));
        }
        Ok(())
    }

    /// The first global load index of thread `i`'s share (as `runner::load` splits keys).
    fn share(&self, i: usize) -> u64 {
        (u128::from(self.keys) * i as u128 / self.threads as u128) as u64
    }
}

fn key(thread: usize, j: u64) -> [u8; 8] {
    ((thread as u64) << STRIPE_BITS | j).to_be_bytes()
}

/// One interval's measurements. Counts are cumulative since the churn began.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Sample {
    /// Seconds since the churn began (the end of this interval).
    pub t_s: f64,
    /// Process resident set size.
    pub rss_bytes: u64,
    /// Transactions (churn and reads) per second in this interval.
    pub txn_per_sec: f64,
    /// Churn transactions committed: keys inserted, and as many deleted.
    pub inserted: u64,
    pub reads: u64,
    /// Attempts aborted by conflicts (and retried).
    pub aborts: u64,
    /// Records allocated, estimated as loaded + inserted - freed: the live set plus deleted
    /// keys whose records are not freed yet.
    pub records_alive: u64,
    /// Keys in the index, estimated as loaded + inserted - removed (counting the whole index
    /// every interval would take longer than the interval).
    pub index_keys: u64,
    /// The engine's counters (`Db::stats`).
    pub records_removed: u64,
    pub records_freed: u64,
    pub gc_pending: u64,
    pub gc_runs: u64,
    pub gc_bytes_freed: u64,
}

/// The engine's state after the run once every GC queue was collected: what reclamation
/// still held at the end, and what it held only for want of a collection.
#[derive(Clone, Debug, serde::Serialize)]
pub struct AfterCollect {
    pub rss_bytes: u64,
    pub records_freed: u64,
    pub records_alive: u64,
    pub gc_pending: u64,
}

/// What a churn run measured.
#[derive(Clone, Debug, serde::Serialize)]
pub struct ChurnReport {
    /// Always "churn".
    pub benchmark: &'static str,
    /// Transactions per second over the whole run.
    pub txn_per_sec: f64,
    /// The median of the per-interval rates.
    pub txn_per_sec_median: f64,
    pub inserted: u64,
    pub reads: u64,
    pub aborts: u64,
    pub abort_rate: f64,
    /// RSS once the keys were loaded, before any churn.
    pub rss_after_load_bytes: u64,
    /// When the reference sample was taken: a minute in, or 10 % of a shorter run.
    pub rss_reference_s: f64,
    /// RSS at that moment.
    pub rss_first_minute_bytes: u64,
    /// RSS at the last sample.
    pub rss_end_bytes: u64,
    /// Largest sampled RSS during the churn.
    pub rss_max_bytes: u64,
    /// `rss_end_bytes / rss_first_minute_bytes`.
    pub rss_ratio: f64,
    /// Whether the ratio is within [`RSS_RATIO_TARGET`].
    pub rss_bounded: bool,
    /// Medians of the samples in the first and in the last reference-length window (a
    /// minute each in a long run): one sample can land on a spike of GC backlog (a
    /// preempted transaction holds the watermark back), a window's median does not.
    pub rss_median_first_bytes: u64,
    pub rss_median_last_bytes: u64,
    pub rss_median_ratio: f64,
    /// Peak RSS of the process (`VmHWM`), load included.
    pub peak_rss_bytes: u64,
    /// Keys a range read over the table found after the run.
    pub live_keys_at_end: u64,
    /// Whether exactly `keys` were found, each inside its thread's final window.
    pub live_set_constant: bool,
    /// Engine counters at the last sample.
    pub records_removed: u64,
    pub records_freed: u64,
    pub gc_pending_at_end: u64,
    pub after_collect: AfterCollect,
    pub threads: usize,
    pub keys: u64,
    pub value_size: usize,
    pub read_ratio: u32,
    pub cc: crate::Protocol,
    pub timestamps: String,
    /// Real length of the churn, seconds.
    pub duration_s: f64,
    pub sample_interval_s: f64,
    pub load_seconds: f64,
    pub seed: u64,
    /// Every interval, in order: the RSS curve.
    pub samples: Vec<Sample>,
    pub machine: Machine,
    pub version: &'static str,
}

/// Opens a memory-only database for `cfg` and runs the benchmark on it.
pub fn run(cfg: &ChurnConfig) -> Result<ChurnReport, BenchError> {
    let db = Db::open(cfg.cc.apply(Options::default()))?;
    run_on(&db, cfg)
}

/// Runs the benchmark on `db` (fresh, opened with `cfg.cc`), leaving the keys in its
/// [`TABLE`] for the caller to inspect.
pub fn run_on(db: &Db, cfg: &ChurnConfig) -> Result<ChurnReport, BenchError> {
    cfg.validate()?;
    let table = db.table(TABLE)?;
    let shares: Vec<u64> = (0..=cfg.threads).map(|i| cfg.share(i)).collect();
    let load = runner::load(cfg.keys, cfg.threads, 1000, cfg.progress, &|lo, hi| {
        // `runner::load` hands out batches within one thread's share, so `lo` names it.
        let owner = shares.partition_point(|&s| s <= lo) - 1;
        load_batch(
            db,
            &table,
            cfg,
            owner,
            lo - shares[owner],
            hi - shares[owner],
        )
    })?;
    let rss_after_load = rss::current_rss_bytes().unwrap_or(0);
    let Churned {
        samples,
        inserted,
        windows,
        elapsed,
    } = churn(db, table, cfg, &shares)?;
    let (live_keys_at_end, inside) = count_live(db, &table, &windows)?;
    if samples.is_empty() {
        return Err(BenchError::Other("the run took no sample".into()));
    }
    // Twice: the first collection retires the records it removes, the second frees them.
    db.collect_garbage();
    db.collect_garbage();
    let stats = db.stats();
    let after_collect = AfterCollect {
        rss_bytes: rss::current_rss_bytes().unwrap_or(0),
        records_freed: stats.records_freed,
        records_alive: (cfg.keys + inserted).saturating_sub(stats.records_freed),
        gc_pending: stats.gc_pending,
    };
    Ok(report(
        cfg,
        db,
        load,
        rss_after_load,
        samples,
        elapsed,
        live_keys_at_end,
        inside,
        after_collect,
    ))
}

/// Inserts keys `j in lo..hi` of `thread`'s stripe in one transaction.
fn load_batch(
    db: &Db,
    table: &Table,
    cfg: &ChurnConfig,
    thread: usize,
    lo: u64,
    hi: u64,
) -> Result<(), BenchError> {
    let mut value = vec![0u8; cfg.value_size];
    let mut spin = Spin::default();
    loop {
        let mut txn = db.begin()?;
        for j in lo..hi {
            stamp_value(&mut value, j);
            txn.put(table, key(thread, j), &value)?;
        }
        match txn.commit() {
            Ok(_) => return Ok(()),
            // Loaders write disjoint keys; a conflict would still be right to retry.
            Err(e) if e.is_conflict() => spin.spin(),
            Err(e) => return Err(e.into()),
        }
    }
}

/// A worker's counters, published after every transaction for the sampler.
#[derive(Default)]
struct Counters {
    inserted: AtomicU64,
    reads: AtomicU64,
    aborts: AtomicU64,
}

struct Churned {
    samples: Vec<Sample>,
    /// Keys inserted when every worker had stopped (a few more than the last sample saw).
    inserted: u64,
    /// Each thread's final window `lo..hi`.
    windows: Vec<(u64, u64)>,
    elapsed: Duration,
}

/// Stops the run if the thread it lives on panics, so the sampler does not wait out the
/// whole duration for a worker that is gone.
struct StopOnPanic<'a>(&'a AtomicBool);

impl Drop for StopOnPanic<'_> {
    fn drop(&mut self) {
        if thread::panicking() {
            self.0.store(true, Ordering::Relaxed);
        }
    }
}

fn churn(db: &Db, table: Table, cfg: &ChurnConfig, shares: &[u64]) -> Result<Churned, BenchError> {
    let counters: Vec<CachePadded<Counters>> =
        (0..cfg.threads).map(|_| CachePadded::default()).collect();
    let stop = AtomicBool::new(false);
    let failed = AtomicBool::new(false);
    let duration = Duration::from_secs_f64(cfg.duration_s);
    let interval = Duration::from_secs_f64(cfg.sample_interval_s);
    let mut display = Display::new(cfg.progress, duration.as_millis() as u64, "txn");
    let began = Instant::now();
    let (samples, windows) = thread::scope(|s| -> Result<_, BenchError> {
        let mut handles = Vec::with_capacity(cfg.threads);
        for (i, c) in counters.iter().enumerate() {
            let (stop, failed) = (&stop, &failed);
            let window = (0, shares[i + 1] - shares[i]);
            let spawned = thread::Builder::new()
                .name(format!("churn-{i}"))
                .spawn_scoped(s, move || {
                    let _guard = StopOnPanic(stop);
                    let out = worker(db, table, cfg, i, window, c, stop);
                    if out.is_err() {
                        failed.store(true, Ordering::Relaxed);
                        stop.store(true, Ordering::Relaxed);
                    }
                    out
                });
            match spawned {
                Ok(h) => handles.push(h),
                Err(e) => {
                    stop.store(true, Ordering::Relaxed);
                    return Err(BenchError::Other(format!("cannot start a thread: {e}")));
                }
            }
        }
        let samples = sample_until(
            db,
            cfg,
            &counters,
            &stop,
            began,
            duration,
            interval,
            &mut display,
        );
        stop.store(true, Ordering::Relaxed);
        display.finish();
        let mut windows = Vec::with_capacity(cfg.threads);
        let mut first_error = None;
        for h in handles {
            match h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)) {
                Ok(w) => windows.push(w),
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        match first_error {
            Some(e) => Err(e),
            None => Ok((samples, windows)),
        }
    })?;
    if failed.load(Ordering::Relaxed) {
        return Err(BenchError::Other("a churn thread failed".into()));
    }
    Ok(Churned {
        samples,
        inserted: counters
            .iter()
            .map(|c| c.inserted.load(Ordering::Relaxed))
            .sum(),
        windows,
        elapsed: began.elapsed(),
    })
}

/// A worker: churn (or read) until `stop`; returns its final window.
fn worker(
    db: &Db,
    table: Table,
    cfg: &ChurnConfig,
    thread: usize,
    (mut lo, mut hi): (u64, u64),
    c: &Counters,
    stop: &AtomicBool,
) -> Result<(u64, u64), BenchError> {
    let mut rng = Rng::for_stream(cfg.seed, thread as u64);
    let mut value = vec![0xa5u8; cfg.value_size];
    let (mut inserted, mut reads, mut aborts) = (0u64, 0u64, 0u64);
    while !stop.load(Ordering::Relaxed) {
        if cfg.read_ratio > 0 && rng.below(100) < u64::from(cfg.read_ratio) {
            let j = lo + rng.below(hi - lo);
            let txn = db.begin_read_only()?;
            if txn.get(&table, key(thread, j))?.is_none() {
                return Err(BenchError::Other(format!(
                    "live key {j} of thread {thread} (window {lo}..{hi}) is missing"
                )));
            }
            txn.commit()?;
            reads += 1;
            c.reads.store(reads, Ordering::Relaxed);
            continue;
        }
        stamp_value(&mut value, hi);
        let mut spin = Spin::default();
        loop {
            let mut txn = db.begin()?;
            txn.put(&table, key(thread, hi), &value)?;
            txn.delete(&table, key(thread, lo))?;
            match txn.commit() {
                Ok(_) => break,
                Err(e) if e.is_conflict() => {
                    aborts += 1;
                    c.aborts.store(aborts, Ordering::Relaxed);
                    if stop.load(Ordering::Relaxed) {
                        return Ok((lo, hi));
                    }
                    spin.spin();
                }
                Err(e) => return Err(e.into()),
            }
        }
        lo += 1;
        hi += 1;
        inserted += 1;
        c.inserted.store(inserted, Ordering::Relaxed);
    }
    Ok((lo, hi))
}

/// The main thread's part: a sample at every interval boundary and one at the end.
#[allow(clippy::too_many_arguments)]
fn sample_until(
    db: &Db,
    cfg: &ChurnConfig,
    counters: &[CachePadded<Counters>],
    stop: &AtomicBool,
    began: Instant,
    duration: Duration,
    interval: Duration,
    display: &mut Display,
) -> Vec<Sample> {
    let mut samples: Vec<Sample> = Vec::new();
    let (mut last_t, mut last_txns) = (0.0f64, 0u64);
    for k in 1u32.. {
        // Boundaries from the start, not from the last wakeup, so samples do not drift.
        let due = interval.saturating_mul(k).min(duration);
        while !stop.load(Ordering::Relaxed) {
            let now = began.elapsed();
            if now >= due {
                break;
            }
            thread::sleep((due - now).min(Duration::from_millis(100)));
        }
        let sum = |f: fn(&Counters) -> &AtomicU64| -> u64 {
            counters.iter().map(|c| f(c).load(Ordering::Relaxed)).sum()
        };
        let (inserted, reads, aborts) =
            (sum(|c| &c.inserted), sum(|c| &c.reads), sum(|c| &c.aborts));
        let stats = db.stats();
        let t = began.elapsed().as_secs_f64();
        let txns = inserted + reads;
        let sample = Sample {
            t_s: t,
            rss_bytes: rss::current_rss_bytes().unwrap_or(0),
            txn_per_sec: (txns - last_txns) as f64 / (t - last_t).max(1e-9),
            inserted,
            reads,
            aborts,
            records_alive: (cfg.keys + inserted).saturating_sub(stats.records_freed),
            index_keys: (cfg.keys + inserted).saturating_sub(stats.records_removed),
            records_removed: stats.records_removed,
            records_freed: stats.records_freed,
            gc_pending: stats.gc_pending,
            gc_runs: stats.gc_runs,
            gc_bytes_freed: stats.gc_bytes_freed,
        };
        display.status(
            began.elapsed(),
            &format!(
                "{}  rss {:.0} MiB  gc pending {}",
                format_rate(sample.txn_per_sec),
                mib(sample.rss_bytes),
                sample.gc_pending
            ),
        );
        (last_t, last_txns) = (t, txns);
        samples.push(sample);
        if due >= duration || stop.load(Ordering::Relaxed) {
            break;
        }
    }
    samples
}

/// Counts the table's keys with one range read, and whether each lies in its thread's
/// final window.
fn count_live(db: &Db, table: &Table, windows: &[(u64, u64)]) -> Result<(u64, bool), BenchError> {
    let txn = db.begin_read_only()?;
    let (mut n, mut inside) = (0u64, true);
    for (k, _) in txn.range(table, ..)? {
        n += 1;
        let k = <[u8; 8]>::try_from(k).map_or(u64::MAX, u64::from_be_bytes);
        let (thread, j) = ((k >> STRIPE_BITS) as usize, k & ((1 << STRIPE_BITS) - 1));
        inside &= windows.get(thread).is_some_and(|w| (w.0..w.1).contains(&j));
    }
    txn.commit()?;
    Ok((n, inside))
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / f64::from(1u32 << 20)
}

fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    let m = v.len() / 2;
    if v.len() % 2 == 1 {
        v[m]
    } else {
        (v[m - 1] + v[m]) / 2.0
    }
}

#[allow(clippy::too_many_arguments)]
fn report(
    cfg: &ChurnConfig,
    db: &Db,
    load: Duration,
    rss_after_load: u64,
    samples: Vec<Sample>,
    elapsed: Duration,
    live_keys_at_end: u64,
    inside: bool,
    after_collect: AfterCollect,
) -> ChurnReport {
    let last = samples.last().cloned().expect("checked by the caller");
    let reference_s = (cfg.duration_s * REFERENCE_SHARE).min(REFERENCE_S);
    // The first sample at or past the reference point (the last one if the run stopped
    // early); a hair of slack so a sample due at exactly 60 s but read at 59.9999 counts.
    let reference = samples
        .iter()
        .find(|s| s.t_s >= reference_s - 1e-3)
        .unwrap_or(&last);
    let ratio = last.rss_bytes as f64 / (reference.rss_bytes.max(1)) as f64;
    let rss_median = |keep: &dyn Fn(f64) -> bool| {
        let v = samples.iter().filter(|s| keep(s.t_s));
        median(v.map(|s| s.rss_bytes as f64).collect()) as u64
    };
    let first = rss_median(&|t| t <= reference.t_s);
    let end_window = last.t_s - reference.t_s;
    let final_ = rss_median(&|t| t >= end_window);
    let attempts = last.inserted + last.reads + last.aborts;
    ChurnReport {
        benchmark: "churn",
        txn_per_sec: (last.inserted + last.reads) as f64 / last.t_s.max(1e-9),
        txn_per_sec_median: median(samples.iter().map(|s| s.txn_per_sec).collect()),
        inserted: last.inserted,
        reads: last.reads,
        aborts: last.aborts,
        abort_rate: last.aborts as f64 / attempts.max(1) as f64,
        rss_after_load_bytes: rss_after_load,
        rss_reference_s: reference.t_s,
        rss_first_minute_bytes: reference.rss_bytes,
        rss_end_bytes: last.rss_bytes,
        rss_max_bytes: samples.iter().map(|s| s.rss_bytes).max().unwrap_or(0),
        rss_ratio: ratio,
        rss_bounded: ratio <= RSS_RATIO_TARGET,
        rss_median_first_bytes: first,
        rss_median_last_bytes: final_,
        rss_median_ratio: final_ as f64 / first.max(1) as f64,
        peak_rss_bytes: rss::peak_rss_bytes().unwrap_or(0),
        live_keys_at_end,
        live_set_constant: inside && live_keys_at_end == cfg.keys,
        records_removed: last.records_removed,
        records_freed: last.records_freed,
        gc_pending_at_end: last.gc_pending,
        after_collect,
        threads: cfg.threads,
        keys: cfg.keys,
        value_size: cfg.value_size,
        read_ratio: cfg.read_ratio,
        cc: cfg.cc,
        timestamps: db.timestamp_algorithm().to_string(),
        duration_s: elapsed.as_secs_f64(),
        sample_interval_s: cfg.sample_interval_s,
        load_seconds: load.as_secs_f64(),
        seed: cfg.seed,
        samples,
        machine: Machine::detect(),
        version: env!("CARGO_PKG_VERSION"),
    }
}

impl ChurnReport {
    /// The report as one line of JSON, every sample included.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }

    /// The report as the two CSV lines of `--csv`, without the samples: one row cannot
    /// hold a curve (`--json` has it).
    pub fn to_csv(&self) -> Result<String, serde_json::Error> {
        let mut v = serde_json::to_value(self)?;
        if let Some(m) = v.as_object_mut() {
            m.remove("samples");
        }
        Ok(crate::results::csv::from_value(&v))
    }

    /// A human-readable summary (newline-terminated lines).
    pub fn summary(&self) -> String {
        let yes = |b: bool| if b { "yes" } else { "NO" };
        let mut s = format!(
            "verso bench churn: {} thread{}, {} live keys x {} B, {}% reads, cc {}, {:.0} s\n",
            self.threads,
            if self.threads == 1 { "" } else { "s" },
            self.keys,
            self.value_size,
            self.read_ratio,
            self.cc,
            self.duration_s,
        );
        let mut row = |k: &str, v: String| s.push_str(&format!("  {k:<18} {v}\n"));
        row(
            "load",
            format!("{} records in {:.2} s", self.keys, self.load_seconds),
        );
        row(
            "throughput",
            format!(
                "{} overall, {} median of {} samples",
                format_rate(self.txn_per_sec),
                format_rate(self.txn_per_sec_median),
                self.samples.len()
            ),
        );
        row(
            "churned",
            format!(
                "{} keys inserted and as many deleted, {} reads, {} aborts",
                self.inserted, self.reads, self.aborts
            ),
        );
        row(
            "live set",
            format!(
                "{} keys at the end (constant: {})",
                self.live_keys_at_end,
                yes(self.live_set_constant)
            ),
        );
        row(
            "records",
            format!(
                "removed {}, freed {}, gc pending {} at the end",
                self.records_removed, self.records_freed, self.gc_pending_at_end
            ),
        );
        row(
            "after a collect",
            format!(
                "{} records alive (live set {}), gc pending {}, RSS {:.1} MiB",
                self.after_collect.records_alive,
                self.keys,
                self.after_collect.gc_pending,
                mib(self.after_collect.rss_bytes)
            ),
        );
        row(
            "RSS",
            format!(
                "after load {:.1} MiB, at {:.0} s {:.1} MiB, end {:.1} MiB, max {:.1} MiB",
                mib(self.rss_after_load_bytes),
                self.rss_reference_s,
                mib(self.rss_first_minute_bytes),
                mib(self.rss_end_bytes),
                mib(self.rss_max_bytes)
            ),
        );
        row(
            "RSS end/reference",
            format!(
                "{:.3} (target <= {RSS_RATIO_TARGET:.2}: {})",
                self.rss_ratio,
                if self.rss_bounded { "met" } else { "NOT met" }
            ),
        );
        row(
            "RSS medians",
            format!(
                "first {:.0} s {:.1} MiB, last {:.0} s {:.1} MiB, ratio {:.3}",
                self.rss_reference_s,
                mib(self.rss_median_first_bytes),
                self.rss_reference_s,
                mib(self.rss_median_last_bytes),
                self.rss_median_ratio
            ),
        );
        row("peak RSS", format!("{:.1} MiB", mib(self.peak_rss_bytes)));
        row(
            "machine",
            format!(
                "{} ({} cores), {}",
                self.machine.cpu_model, self.machine.cores, self.machine.date_utc
            ),
        );
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stripes_keep_threads_apart_and_in_order() {
        assert!(key(0, (1 << STRIPE_BITS) - 1) < key(1, 0));
        assert!(key(1, 5) < key(1, 6));
        assert_eq!(u64::from_be_bytes(key(3, 7)) >> STRIPE_BITS, 3);
    }

    #[test]
    fn shares_cover_every_key_once() {
        let cfg = ChurnConfig {
            keys: 10,
            threads: 3,
            ..ChurnConfig::default()
        };
        let shares: Vec<u64> = (0..=3).map(|i| cfg.share(i)).collect();
        assert_eq!(shares, [0, 3, 6, 10]);
    }

    #[test]
    fn medians() {
        assert_eq!(median(vec![]), 0.0);
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, 2.0, 3.0]), 2.5);
    }
}
