//! Turning a measured run into numbers: the readable summary and the one-line JSON.
//!
//! The JSON is the contract for scripts (and for the numbers in BENCHMARKS.md): field names
//! only ever get added. Latencies are in microseconds as `f64` because single-key
//! transactions take well under one.

use std::fmt::Write as _;
use std::time::Duration;

use verso_engine::Stats;

use crate::dist::Dist;
use crate::rss::{self, Machine};
use crate::runner::{format_rate, Measured};
use crate::ycsb::{YcsbConfig, LATENCY_SAMPLE_EVERY};

/// Engine counters over the measured window (from `Db::stats` at its two ends).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct EngineCounters {
    /// Commits, read-only ones included.
    pub commits: u64,
    /// Read-only commits.
    pub read_only_commits: u64,
    /// Commits refused because a younger transaction had read a written key.
    pub conflicts_read_by_younger: u64,
    /// Commits refused because a younger transaction had written a written key.
    pub conflicts_written_by_younger: u64,
    /// Versions installed.
    pub versions_installed: u64,
    /// Garbage collections run.
    pub gc_runs: u64,
    /// Bytes of versions freed.
    pub gc_bytes_freed: u64,
    /// Record chains pruned (a record pruned twice counts twice).
    pub gc_records_pruned: u64,
    /// Newest versions moved from the heap into their record's inline slot.
    pub gc_moved_inline: u64,
    /// Superseded versions still queued for collection at the end (a level, not a delta).
    pub gc_pending_at_end: u64,
}

impl EngineCounters {
    /// The counters accumulated from `before` to `after`.
    pub fn between(before: &Stats, after: &Stats) -> Self {
        EngineCounters {
            commits: after.commits.saturating_sub(before.commits),
            read_only_commits: after
                .read_only_commits
                .saturating_sub(before.read_only_commits),
            conflicts_read_by_younger: after
                .conflicts_read_by_younger
                .saturating_sub(before.conflicts_read_by_younger),
            conflicts_written_by_younger: after
                .conflicts_written_by_younger
                .saturating_sub(before.conflicts_written_by_younger),
            versions_installed: after
                .versions_installed
                .saturating_sub(before.versions_installed),
            gc_runs: after.gc_runs.saturating_sub(before.gc_runs),
            gc_bytes_freed: after.gc_bytes_freed.saturating_sub(before.gc_bytes_freed),
            gc_records_pruned: after
                .gc_records_pruned
                .saturating_sub(before.gc_records_pruned),
            gc_moved_inline: after.gc_moved_inline.saturating_sub(before.gc_moved_inline),
            gc_pending_at_end: after.gc_pending,
        }
    }
}

/// Everything a `verso bench ycsb` run reports.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Report {
    /// Always "ycsb".
    pub benchmark: &'static str,
    /// Committed transactions per second of the measured window.
    pub txn_per_sec: f64,
    /// Aborted attempts / all attempts, in [0, 1].
    pub abort_rate: f64,
    /// Median latency of sampled transactions (first begin to commit, retries included).
    pub p50_us: f64,
    /// 99th percentile.
    pub p99_us: f64,
    /// 99.9th percentile.
    pub p999_us: f64,
    /// Largest sampled latency.
    pub max_us: f64,
    /// Mean sampled latency.
    pub mean_us: f64,
    /// One transaction in this many has its latency recorded.
    pub latency_sample_every: u64,
    /// Latencies recorded.
    pub latency_samples: u64,
    /// Peak resident set size of the process (`VmHWM`), load phase included.
    pub peak_rss_bytes: u64,
    /// Transactions committed in the window.
    pub commits: u64,
    /// Attempts aborted by conflicts in the window (each was retried).
    pub aborts: u64,
    /// Worker threads.
    pub threads: usize,
    /// Keys loaded.
    pub keys: u64,
    /// Bytes per value.
    pub value_size: usize,
    /// Point operations per transaction (unused when `scan_length` > 0).
    pub ops_per_txn: u32,
    /// Percentage of point operations that read.
    pub read_ratio: u32,
    /// Keys per range read; 0 means point operations.
    pub scan_length: u64,
    /// The YCSB core workload ("a".."f"), or "custom" (`read_ratio`/`scan_length` apply).
    pub workload: String,
    /// Key distribution.
    pub dist: Dist,
    /// Zipfian theta (meaningful with `dist` = "zipf").
    pub theta: f64,
    /// Real length of the measured window, in seconds.
    pub duration_s: f64,
    /// Real length of the warmup, in seconds.
    pub warmup_s: f64,
    /// Timestamp algorithm in force ("rdtsc", "atomic", "mutex"; "none" with `raw_index`).
    pub timestamps: String,
    /// Plain index lookups instead of transactions.
    pub raw_index: bool,
    /// The ordered index ("masstree" or "btree").
    pub index: &'static str,
    /// Concurrency control ("mvto", "precision-locking", "snapshot").
    pub cc: crate::Protocol,
    /// Redo logging: "none", "lazy" or "sync" (under sync, a commit counts when durable).
    pub durability: String,
    /// Long-reader threads.
    pub long_readers: usize,
    /// Long-reader transactions that ran wholly inside the window.
    pub long_reader_txns: u64,
    /// Their mean duration in milliseconds (null when none finished).
    pub long_reader_avg_ms: Option<f64>,
    /// Reads per long-reader transaction.
    pub long_reader_reads: u64,
    /// Seconds the load phase took.
    pub load_seconds: f64,
    /// The run's seed.
    pub seed: u64,
    /// Engine counters over the window (null with `raw_index`).
    pub engine: Option<EngineCounters>,
    /// Where it ran.
    pub machine: Machine,
    /// verso-bench version.
    pub version: &'static str,
}

fn us(ns: u64) -> f64 {
    ns as f64 / 1000.0
}

impl Report {
    /// Assembles the report of a finished run.
    pub fn new(
        cfg: &YcsbConfig,
        timestamps: &str,
        load: Duration,
        m: Measured,
        engine: Option<EngineCounters>,
    ) -> Self {
        let window = m.window.as_secs_f64();
        let attempts = m.commits + m.aborts;
        let h = &m.latency;
        let q = |q: f64| {
            if h.is_empty() {
                0.0
            } else {
                us(h.value_at_quantile(q))
            }
        };
        Report {
            benchmark: "ycsb",
            txn_per_sec: if window > 0.0 {
                m.commits as f64 / window
            } else {
                0.0
            },
            abort_rate: if attempts == 0 {
                0.0
            } else {
                m.aborts as f64 / attempts as f64
            },
            p50_us: q(0.5),
            p99_us: q(0.99),
            p999_us: q(0.999),
            max_us: if h.is_empty() { 0.0 } else { us(h.max()) },
            mean_us: if h.is_empty() { 0.0 } else { h.mean() / 1000.0 },
            latency_sample_every: LATENCY_SAMPLE_EVERY,
            latency_samples: h.len(),
            peak_rss_bytes: rss::peak_rss_bytes().unwrap_or(0),
            commits: m.commits,
            aborts: m.aborts,
            threads: cfg.threads,
            keys: cfg.keys,
            value_size: cfg.value_size,
            ops_per_txn: cfg.ops_per_txn,
            read_ratio: cfg.read_ratio,
            scan_length: cfg.scan_length,
            workload: cfg.workload.map_or("custom".into(), |w| w.to_string()),
            dist: cfg.dist,
            theta: cfg.theta,
            duration_s: window,
            warmup_s: m.warmup.as_secs_f64(),
            timestamps: timestamps.to_string(),
            raw_index: cfg.raw_index,
            cc: cfg.cc,
            durability: cfg.persist.durability.to_string(),
            index: match cfg.index {
                verso_engine::IndexKind::LockedBTree => "btree",
                _ => "masstree",
            },
            long_readers: cfg.long_readers,
            long_reader_txns: m.long_reader_txns,
            long_reader_avg_ms: (m.long_reader_txns > 0)
                .then(|| m.long_reader_time.as_secs_f64() * 1000.0 / m.long_reader_txns as f64),
            long_reader_reads: if cfg.long_readers > 0 {
                cfg.long_reader_reads()
            } else {
                0
            },
            load_seconds: load.as_secs_f64(),
            seed: cfg.seed,
            engine,
            machine: Machine::detect(),
            version: env!("CARGO_PKG_VERSION"),
        }
    }

    /// The report as one line of JSON.
    pub fn to_json(&self) -> String {
        // Serializing plain numbers, strings and options cannot fail; NaN cannot occur
        // (every division above is guarded), and serde_json writes it as null anyway.
        serde_json::to_string(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }

    /// A human-readable summary table (several lines, newline-terminated).
    pub fn summary(&self) -> String {
        let mut s = String::new();
        let core = self
            .workload
            .parse::<crate::core_workloads::CoreWorkload>()
            .ok();
        let workload = if let Some(w) = core {
            format!(
                "{}, {} op{}/txn",
                w.describe(),
                self.ops_per_txn,
                if self.ops_per_txn == 1 { "" } else { "s" }
            )
        } else if self.scan_length > 0 {
            format!("range reads of {} keys", self.scan_length)
        } else {
            format!(
                "{} op{}/txn, {}% reads",
                self.ops_per_txn,
                if self.ops_per_txn == 1 { "" } else { "s" },
                self.read_ratio
            )
        };
        let dist = match self.dist {
            Dist::Uniform => "uniform".to_string(),
            Dist::Zipf => format!("zipf theta={}", self.theta),
        };
        let mode = if self.raw_index {
            "raw index (no transactions)"
        } else {
            "engine transactions"
        };
        let _ = writeln!(
            s,
            "verso bench ycsb: {} thread{}, {} keys x {} B, {workload}, {dist}",
            self.threads,
            if self.threads == 1 { "" } else { "s" },
            self.keys,
            self.value_size
        );
        let mut row = |k: &str, v: String| {
            let _ = writeln!(s, "  {k:<18} {v}");
        };
        row("mode", mode.into());
        row("timestamps", self.timestamps.clone());
        row("index", self.index.to_string());
        row("concurrency", self.cc.to_string());
        row(
            "load",
            format!(
                "{} records in {:.2} s ({:.2} M records/s)",
                self.keys,
                self.load_seconds,
                self.keys as f64 / self.load_seconds.max(1e-9) / 1e6
            ),
        );
        row(
            "measured",
            format!(
                "{:.2} s after {:.2} s warmup",
                self.duration_s, self.warmup_s
            ),
        );
        row("throughput", format_rate(self.txn_per_sec));
        row(
            "commits / aborts",
            format!(
                "{} / {} (abort rate {:.3}%)",
                self.commits,
                self.aborts,
                self.abort_rate * 100.0
            ),
        );
        row(
            "latency (us)",
            format!(
                "p50 {:.2}  p99 {:.2}  p99.9 {:.2}  max {:.1}  mean {:.2}  (1 txn in {} sampled)",
                self.p50_us,
                self.p99_us,
                self.p999_us,
                self.max_us,
                self.mean_us,
                self.latency_sample_every
            ),
        );
        if self.long_readers > 0 {
            let avg = self
                .long_reader_avg_ms
                .map_or("none finished".into(), |ms| format!("{ms:.1} ms avg"));
            row(
                "long readers",
                format!(
                    "{} threads, {} txns of {} reads, {avg}",
                    self.long_readers, self.long_reader_txns, self.long_reader_reads
                ),
            );
        }
        if let Some(e) = &self.engine {
            row(
                "engine",
                format!(
                    "conflicts read/written by younger {}/{}, gc freed {:.1} MiB, gc pending {}",
                    e.conflicts_read_by_younger,
                    e.conflicts_written_by_younger,
                    e.gc_bytes_freed as f64 / (1 << 20) as f64,
                    e.gc_pending_at_end
                ),
            );
        }
        row(
            "peak RSS",
            format!("{:.1} MiB", self.peak_rss_bytes as f64 / (1 << 20) as f64),
        );
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
