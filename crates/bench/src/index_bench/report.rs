//! What `verso bench index` reports: a readable summary and one line of JSON whose field
//! names only ever get added (scripts and BENCHMARKS.md read them).

use std::fmt::Write as _;
use std::sync::atomic::Ordering;
use std::time::Duration;

use crossbeam_utils::CachePadded;

use super::workloads::{OpCounts, Rw1Thread};
use super::{IndexBenchConfig, IndexName, IndexWorkload, KeyFormat};
use crate::rss::{self, Machine};
use crate::runner::Measured;
use crate::ycsb::LATENCY_SAMPLE_EVERY;

/// Resident-set growth while the index was filled.
#[derive(Clone, Copy, Debug)]
pub struct Memory {
    baseline: Option<u64>,
    filled: Option<u64>,
    keys: u64,
}

impl Memory {
    /// Growth from `baseline` to `filled` over `keys` keys.
    pub fn new(baseline: Option<u64>, filled: Option<u64>, keys: u64) -> Self {
        Memory {
            baseline,
            filled,
            keys,
        }
    }

    fn bytes_per_key(&self) -> Option<f64> {
        match (self.baseline, self.filled) {
            (Some(b), Some(f)) if self.keys > 0 => {
                Some(f.saturating_sub(b) as f64 / self.keys as f64)
            }
            _ => None,
        }
    }
}

/// rw1's per-thread view.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Rw1Report {
    /// Mean over threads of each thread's puts/s (compare with masstree-beta's per-thread
    /// figures).
    pub puts_per_sec_per_thread: f64,
    /// Mean over threads of each thread's gets/s.
    pub gets_per_sec_per_thread: f64,
    /// Mean over threads of each thread's puts per second on a CPU (null without `/proc`):
    /// what a thread does when it has its core to itself, on a shared machine.
    pub puts_per_cpu_sec_per_thread: Option<f64>,
    /// Mean over threads of each thread's gets per second on a CPU.
    pub gets_per_cpu_sec_per_thread: Option<f64>,
    /// Whether some thread stopped putting at the memory cap rather than the clock.
    pub hit_put_cap: bool,
    /// Each thread's counts and phase lengths.
    pub per_thread: Vec<Rw1Thread>,
}

/// Everything a `verso bench index` run reports.
#[derive(Clone, Debug, serde::Serialize)]
pub struct IndexReport {
    /// Always "index".
    pub benchmark: &'static str,
    /// The index measured.
    pub index: IndexName,
    /// The workload.
    pub workload: IndexWorkload,
    /// Key format used (rw1: always "decimal", of signed 32-bit numbers).
    pub key_format: KeyFormat,
    /// Keys loaded (rw1: the configured value, unused).
    pub keys: u64,
    /// Worker threads.
    pub threads: usize,
    /// Entries per scan (meaningful with the scan workload).
    pub scan_length: usize,
    /// Zipfian theta (meaningful with ycsb-a and ycsb-c).
    pub theta: f64,
    /// The run's seed.
    pub seed: u64,
    /// Puts per second: over the window, or rw1's sum of per-thread put rates.
    pub puts_per_sec: f64,
    /// Gets per second: over the window, or rw1's sum of per-thread get rates.
    pub gets_per_sec: f64,
    /// Scans per second.
    pub scans_per_sec: f64,
    /// All operations per second.
    pub ops_per_sec: f64,
    /// Puts done (rw1: in the put phase).
    pub puts: u64,
    /// Gets done (rw1: keys read back and checked).
    pub gets: u64,
    /// Gets that found nothing although every key was loaded: 0 unless the index's
    /// overwrite is not atomic (the skiplist's is not), so only with puts running.
    pub get_misses: u64,
    /// Scans done.
    pub scans: u64,
    /// Entries the scans visited.
    pub scan_entries: u64,
    /// Median sampled operation latency, microseconds (null for rw1).
    pub p50_us: Option<f64>,
    /// 99th percentile (null for rw1).
    pub p99_us: Option<f64>,
    /// One operation in this many has its latency sampled.
    pub latency_sample_every: u64,
    /// Real seconds measured: the window, or rw1's slowest put phase plus slowest get phase.
    pub duration_s: f64,
    /// The workers' summed time on a CPU while measuring (null without `/proc`).
    pub cpu_seconds: Option<f64>,
    /// `cpu_seconds / (threads * duration_s)`: near 1 when the workers had their cores to
    /// themselves, lower when other processes took turns on them.
    pub cpu_share: Option<f64>,
    /// Operations per second on a CPU (`ops / cpu_seconds`): per-thread throughput with
    /// the time other processes ran taken out. For rw1, puts and gets together.
    pub ops_per_cpu_sec: Option<f64>,
    /// Seconds the load took (0 for rw1).
    pub load_seconds: f64,
    /// Resident set size just before the index was created.
    pub baseline_rss_bytes: Option<u64>,
    /// Resident set size once it was filled (after the load, or after rw1's puts).
    pub filled_rss_bytes: Option<u64>,
    /// (filled - baseline) / keys: index memory per key, keys and values included (rw1:
    /// per put).
    pub bytes_per_key: Option<f64>,
    /// Peak resident set size of the process (`VmHWM`).
    pub peak_rss_bytes: u64,
    /// rw1's details (null for the other workloads).
    pub rw1: Option<Rw1Report>,
    /// Where it ran.
    pub machine: Machine,
    /// verso-bench version.
    pub version: &'static str,
}

fn per_sec(n: u64, secs: f64) -> f64 {
    if secs > 0.0 {
        n as f64 / secs
    } else {
        0.0
    }
}

impl IndexReport {
    /// The fields every report fills the same way; counts and rates start at zero.
    fn base(cfg: &IndexBenchConfig, memory: Memory) -> Self {
        IndexReport {
            benchmark: "index",
            index: cfg.index,
            workload: cfg.workload,
            key_format: cfg.effective_key_format(),
            keys: cfg.keys,
            threads: cfg.threads,
            scan_length: cfg.scan_length,
            theta: cfg.theta,
            seed: cfg.seed,
            puts_per_sec: 0.0,
            gets_per_sec: 0.0,
            scans_per_sec: 0.0,
            ops_per_sec: 0.0,
            puts: 0,
            gets: 0,
            get_misses: 0,
            scans: 0,
            scan_entries: 0,
            p50_us: None,
            p99_us: None,
            latency_sample_every: LATENCY_SAMPLE_EVERY,
            duration_s: 0.0,
            cpu_seconds: None,
            cpu_share: None,
            ops_per_cpu_sec: None,
            load_seconds: 0.0,
            baseline_rss_bytes: memory.baseline,
            filled_rss_bytes: memory.filled,
            bytes_per_key: memory.bytes_per_key(),
            peak_rss_bytes: rss::peak_rss_bytes().unwrap_or(0),
            rw1: None,
            machine: Machine::detect(),
            version: env!("CARGO_PKG_VERSION"),
        }
    }

    /// The report of a timed workload.
    pub fn from_timed(
        cfg: &IndexBenchConfig,
        counts: &[CachePadded<OpCounts>],
        m: &Measured,
        load: Duration,
        memory: Memory,
    ) -> Self {
        let sum = |f: fn(&OpCounts) -> u64| counts.iter().map(|c| f(c)).sum::<u64>();
        let mut r = Self::base(cfg, memory);
        r.puts = sum(|c| c.puts.load(Ordering::Relaxed));
        r.gets = sum(|c| c.gets.load(Ordering::Relaxed));
        r.get_misses = sum(|c| c.get_misses.load(Ordering::Relaxed));
        r.scans = sum(|c| c.scans.load(Ordering::Relaxed));
        r.scan_entries = sum(|c| c.scan_entries.load(Ordering::Relaxed));
        let window = m.window.as_secs_f64();
        r.duration_s = window;
        r.load_seconds = load.as_secs_f64();
        r.puts_per_sec = per_sec(r.puts, window);
        r.gets_per_sec = per_sec(r.gets, window);
        r.scans_per_sec = per_sec(r.scans, window);
        r.ops_per_sec = per_sec(r.puts + r.gets + r.scans, window);
        if counts.iter().all(|c| c.cpu_known.load(Ordering::Relaxed)) {
            let cpu = sum(|c| c.cpu_ns.load(Ordering::Relaxed)) as f64 / 1e9;
            r.set_cpu(cpu, r.puts + r.gets + r.scans);
        }
        let h = &m.latency;
        if !h.is_empty() {
            r.p50_us = Some(h.value_at_quantile(0.5) as f64 / 1000.0);
            r.p99_us = Some(h.value_at_quantile(0.99) as f64 / 1000.0);
        }
        r
    }

    fn set_cpu(&mut self, cpu_seconds: f64, ops: u64) {
        self.cpu_seconds = Some(cpu_seconds);
        let wall = self.threads as f64 * self.duration_s;
        self.cpu_share = (wall > 0.0).then(|| cpu_seconds / wall);
        self.ops_per_cpu_sec = Some(per_sec(ops, cpu_seconds));
    }

    /// The report of an rw1 run.
    pub fn from_rw1(cfg: &IndexBenchConfig, threads: &[Rw1Thread], memory: Memory) -> Self {
        let mut r = Self::base(cfg, memory);
        let n = threads.len().max(1) as f64;
        let put_rate: f64 = threads.iter().map(|t| t.puts_per_sec).sum();
        let get_rate: f64 = threads.iter().map(|t| t.gets_per_sec).sum();
        let slowest = |f: fn(&Rw1Thread) -> f64| threads.iter().map(f).fold(0.0, f64::max);
        r.puts = threads.iter().map(|t| t.puts).sum();
        r.gets = threads.iter().map(|t| t.gets).sum();
        r.puts_per_sec = put_rate;
        r.gets_per_sec = get_rate;
        r.ops_per_sec = put_rate + get_rate;
        r.duration_s = slowest(|t| t.put_seconds) + slowest(|t| t.get_seconds);
        // Per thread and phase: (operations, CPU seconds), when every one is known.
        let cpu = |f: fn(&Rw1Thread) -> (u64, Option<f64>)| -> Option<Vec<(u64, f64)>> {
            threads
                .iter()
                .map(|t| {
                    let (ops, cpu) = f(t);
                    Some((ops, cpu?))
                })
                .collect()
        };
        let puts_cpu = cpu(|t| (t.puts, t.put_cpu_seconds));
        let gets_cpu = cpu(|t| (t.gets, t.get_cpu_seconds));
        let mean_rate = |v: &[(u64, f64)]| v.iter().map(|&(o, c)| per_sec(o, c)).sum::<f64>() / n;
        if let (Some(p), Some(g)) = (&puts_cpu, &gets_cpu) {
            let seconds: f64 = p.iter().chain(g).map(|&(_, c)| c).sum();
            // Each thread is busy for its own two phases; the share is over those.
            let busy: f64 = threads.iter().map(|t| t.put_seconds + t.get_seconds).sum();
            r.cpu_seconds = Some(seconds);
            r.cpu_share = (busy > 0.0).then(|| seconds / busy);
            r.ops_per_cpu_sec = Some(per_sec(r.puts + r.gets, seconds));
        }
        r.rw1 = Some(Rw1Report {
            puts_per_sec_per_thread: put_rate / n,
            gets_per_sec_per_thread: get_rate / n,
            puts_per_cpu_sec_per_thread: puts_cpu.as_deref().map(mean_rate),
            gets_per_cpu_sec_per_thread: gets_cpu.as_deref().map(mean_rate),
            hit_put_cap: threads.iter().any(|t| t.hit_put_cap),
            per_thread: threads.to_vec(),
        });
        r
    }

    /// The report as one line of JSON.
    pub fn to_json(&self) -> String {
        // Plain numbers, strings and options: serializing cannot fail (NaN cannot occur,
        // every division is guarded, and serde_json would write it as null anyway).
        serde_json::to_string(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }

    /// A human-readable summary (several lines, newline-terminated).
    pub fn summary(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "verso bench index: {} {}, {} thread{}",
            self.index,
            self.workload,
            self.threads,
            if self.threads == 1 { "" } else { "s" }
        );
        let mut row = |k: &str, v: String| {
            let _ = writeln!(s, "  {k:<18} {v}");
        };
        let mops = |r: f64| format!("{:.3} M/s", r / 1e6);
        if let Some(rw1) = &self.rw1 {
            row(
                "keys",
                format!("{} puts of random i32 decimal keys", self.puts),
            );
            row(
                "puts",
                format!(
                    "{} total, {} per thread",
                    mops(self.puts_per_sec),
                    mops(rw1.puts_per_sec_per_thread)
                ),
            );
            row(
                "gets (checked)",
                format!(
                    "{} total, {} per thread, every value right",
                    mops(self.gets_per_sec),
                    mops(rw1.gets_per_sec_per_thread),
                ),
            );
            if let (Some(p), Some(g)) = (
                rw1.puts_per_cpu_sec_per_thread,
                rw1.gets_per_cpu_sec_per_thread,
            ) {
                row(
                    "per CPU second",
                    format!("puts {} per thread, gets {} per thread", mops(p), mops(g)),
                );
            }
            if rw1.hit_put_cap {
                row("note", "a thread stopped putting at the memory cap".into());
            }
        } else {
            row(
                "keys",
                format!(
                    "{} {} keys loaded in {:.2} s",
                    self.keys, self.key_format, self.load_seconds
                ),
            );
            row("measured", format!("{:.2} s", self.duration_s));
            row(
                "throughput",
                format!(
                    "{} ops: gets {}, puts {}, scans {}",
                    mops(self.ops_per_sec),
                    mops(self.gets_per_sec),
                    mops(self.puts_per_sec),
                    mops(self.scans_per_sec)
                ),
            );
            if self.get_misses > 0 {
                row(
                    "get misses",
                    format!(
                        "{} gets found nothing (the index's overwrite is not atomic)",
                        self.get_misses
                    ),
                );
            }
            if self.scans > 0 {
                row(
                    "scan length",
                    format!(
                        "{:.1} entries per scan (asked {})",
                        self.scan_entries as f64 / self.scans as f64,
                        self.scan_length
                    ),
                );
            }
            if let (Some(p50), Some(p99)) = (self.p50_us, self.p99_us) {
                row(
                    "latency (us)",
                    format!(
                        "p50 {p50:.3}  p99 {p99:.3}  (1 op in {} sampled)",
                        self.latency_sample_every
                    ),
                );
            }
        }
        if let (Some(c), Some(share), Some(rate)) =
            (self.cpu_seconds, self.cpu_share, self.ops_per_cpu_sec)
        {
            row(
                "cpu",
                format!(
                    "{c:.2} s on a CPU ({:.0}% of the threads' wall time), {} ops per CPU second",
                    share * 100.0,
                    mops(rate)
                ),
            );
        }
        row(
            "memory",
            match self.bytes_per_key {
                Some(b) => format!("{b:.1} bytes per key (RSS growth while filling)"),
                None => "unknown (no /proc)".into(),
            },
        );
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
