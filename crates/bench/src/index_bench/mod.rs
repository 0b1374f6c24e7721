//! `verso bench index`: the index micro-benchmark (issue 3, item 6). Verso's [`Masstree`]
//! against `crossbeam-skiplist`, `scc::TreeIndex`, a `BTreeMap` behind a `RwLock` and the
//! published `masstree` crate, as plain concurrent ordered maps from byte keys to `u64`s.
//!
//! * [`indexes`]: the [`BenchIndex`] trait (get, put, scan `n` from a key) and one impl per
//!   index.
//! * [`workloads`]: key formats, the load, the timed worker and rw1.
//! * [`report`]: the summary and the JSON line.
//!
//! Workloads ([`IndexWorkload`]):
//! * `rw1`, as masstree-beta's mttest: each thread puts random keys (the decimal string of a
//!   random signed 32-bit `x`, value `x + 1`) for the first half of the duration, then gets
//!   all its keys back in a shuffled order, checking each value (a wrong or missing value
//!   ends the run with an error; unlike mttest the get phase has no time limit, so every
//!   key is checked); puts/s and gets/s per thread and in total. Values are `x + 1` as a `u64` (masstree-beta stores the decimal string of
//!   `x + 1`; here every index stores the same word-sized value). No preload;
//!   `--keys` and `--key-format` do not apply.
//! * `get`, `put`, `scan`, `ycsb-a`, `ycsb-c`: first `--keys` keys are loaded in a
//!   pseudo-random order (value = key number), then every thread runs one operation after
//!   another for the duration: uniform gets; uniform puts (overwrites: every key exists);
//!   scans of `scan_length` entries from a uniform start key; 50% gets and 50% puts over
//!   YCSB's scrambled zipfian (theta 0.99); zipfian gets. There is no warmup (the load has
//!   just touched every node). As in `bench ycsb`, one operation in 16 has its latency
//!   sampled, so every index pays the same two clock reads per 16 operations.
//!
//! `bytes_per_key` is the growth of the resident set during the load (rw1: during the put
//! phase) divided by the keys loaded (rw1: by the puts, repeats included), with the
//! baseline taken just before the index is created: the index's memory overhead per key
//! including its keys and values, as the allocator in use lays them out.
//!
//! [`Masstree`]: verso_index::Masstree
//! [`BenchIndex`]: indexes::BenchIndex

pub mod indexes;
pub mod report;
pub mod workloads;

use std::fmt;
use std::str::FromStr;

use crossbeam_utils::CachePadded;

use self::indexes::{BenchIndex, CrateMasstree, RwBTree, SccTree, SkipList, VersoMasstree};
use self::report::{IndexReport, Memory};
use self::workloads::{NoLongReader, OpCounts, Permutation, TimedWorker, LOAD_BATCH};
use crate::dist::{check_theta, Dist, KeyChooser};
use crate::runner::{self, Progress, RunShape};
use crate::ycsb::{SECONDS_MAX, THREADS_MAX};
use crate::{rss, BenchError};

pub use self::report::Rw1Report;

/// Most keys `--keys` accepts (the load permutation's domain and far past any memory).
pub const KEYS_MAX: u64 = 1 << 40;

/// Rough resident bytes per key of the hungriest index (the skiplist with 48-byte keys),
/// rounded up: only used to refuse loads that cannot fit in memory before they start.
const BYTES_PER_KEY_ESTIMATE: u64 = 256;

/// Bytes per rw1 key assumed when capping puts by the available memory.
const RW1_BYTES_PER_KEY: u64 = 128;

macro_rules! named_enum {
    ($(#[$m:meta])* $name:ident { $($(#[$vm:meta])* $v:ident = $s:literal),+ $(,)? }) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
        pub enum $name { $($(#[$vm])* #[serde(rename = $s)] $v),+ }

        impl $name {
            /// Every choice, in the order `--help` lists them.
            pub const ALL: &'static [$name] = &[$($name::$v),+];

            /// The flag spelling.
            pub fn name(self) -> &'static str {
                match self { $($name::$v => $s),+ }
            }
        }

        impl FromStr for $name {
            type Err = String;
            fn from_str(s: &str) -> Result<Self, String> {
                Self::ALL.iter().copied().find(|x| x.name() == s).ok_or_else(|| {
                    let names: Vec<_> = Self::ALL.iter().map(|x| x.name()).collect();
                    format!("unknown {} {s:?} ({})", stringify!($name), names.join("|"))
                })
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.name())
            }
        }
    };
}

named_enum! {
    /// Which index to measure (`--index`).
    IndexName {
        /// Verso's Masstree (`verso_index::Masstree<u64>`).
        Masstree = "masstree",
        /// `crossbeam_skiplist::SkipMap`.
        Skiplist = "skiplist",
        /// `scc::TreeIndex`.
        Scc = "scc",
        /// `std::collections::BTreeMap` behind a `std::sync::RwLock`.
        BtreeRwlock = "btree-rwlock",
        /// The published `masstree` crate.
        MasstreeCrate = "masstree-crate",
    }
}

named_enum! {
    /// What the threads do (`--workload`); see the module docs.
    IndexWorkload {
        /// masstree-beta's rw1: timed random puts, then every key read back and checked.
        Rw1 = "rw1",
        /// Uniform gets over the loaded keys.
        Get = "get",
        /// Uniform puts (overwrites) over the loaded keys.
        Put = "put",
        /// Scans of `scan_length` entries from uniform start keys.
        Scan = "scan",
        /// 50% gets, 50% puts, zipfian.
        YcsbA = "ycsb-a",
        /// 100% gets, zipfian.
        YcsbC = "ycsb-c",
    }
}

named_enum! {
    /// How key number `k` becomes bytes (`--key-format`).
    KeyFormat {
        /// 8 bytes, big-endian (key order is numeric order).
        Int64 = "int64",
        /// Decimal ASCII, no padding.
        Decimal = "decimal",
        /// A 40-byte shared prefix then the 8-byte big-endian number (five Masstree layers).
        LongPrefix = "long-prefix",
        /// The 8-byte big-endian number then a 40-byte tail (a 40-byte suffix per key).
        LongSuffix = "long-suffix",
    }
}

/// The operations a timed workload draws (rw1 is not timed per operation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpMix {
    /// Only gets.
    Gets,
    /// Only puts.
    Puts,
    /// Only scans.
    Scans,
    /// Gets and puts, half each.
    HalfGets,
}

impl IndexWorkload {
    /// The operations it draws.
    pub fn mix(self) -> OpMix {
        match self {
            IndexWorkload::Get | IndexWorkload::YcsbC | IndexWorkload::Rw1 => OpMix::Gets,
            IndexWorkload::Put => OpMix::Puts,
            IndexWorkload::Scan => OpMix::Scans,
            IndexWorkload::YcsbA => OpMix::HalfGets,
        }
    }

    /// The key distribution it draws from.
    pub fn dist(self) -> Dist {
        match self {
            IndexWorkload::YcsbA | IndexWorkload::YcsbC => Dist::Zipf,
            _ => Dist::Uniform,
        }
    }
}

/// Everything `verso bench index` takes.
#[derive(Clone, Debug)]
pub struct IndexBenchConfig {
    /// The index measured.
    pub index: IndexName,
    /// What the threads do.
    pub workload: IndexWorkload,
    /// Keys loaded before a timed workload (not used by rw1).
    pub keys: u64,
    /// Key format of the loaded keys (rw1 always uses signed decimals).
    pub key_format: KeyFormat,
    /// Worker threads (they also load).
    pub threads: usize,
    /// Seconds: the measured window, or twice rw1's put phase (its get phase then reads
    /// every key back, which takes about as long as the puts).
    pub duration_s: f64,
    /// Entries per scan.
    pub scan_length: usize,
    /// Zipfian parameter of ycsb-a and ycsb-c.
    pub theta: f64,
    /// Seed of the load order and of every thread's generator.
    pub seed: u64,
    /// How to show progress on stderr.
    pub progress: Progress,
}

impl Default for IndexBenchConfig {
    fn default() -> Self {
        IndexBenchConfig {
            index: IndexName::Masstree,
            workload: IndexWorkload::Get,
            keys: 1_000_000,
            key_format: KeyFormat::Int64,
            threads: 1,
            duration_s: 5.0,
            scan_length: 100,
            theta: 0.99,
            seed: 0x5eed_1234_abcd_0001,
            progress: Progress::Auto,
        }
    }
}

impl IndexBenchConfig {
    /// Rejects configurations that cannot run, with a message naming the flag.
    pub fn validate(&self) -> Result<(), BenchError> {
        let bad = |m: String| Err(BenchError::Config(m));
        if self.keys == 0 || self.keys > KEYS_MAX {
            return bad(format!(
                "--keys must be in 1..={KEYS_MAX}, got {}",
                self.keys
            ));
        }
        if self.threads == 0 || self.threads > THREADS_MAX {
            return bad(format!(
                "--threads must be in 1..={THREADS_MAX}, got {}",
                self.threads
            ));
        }
        if !(self.duration_s.is_finite() && self.duration_s > 0.0 && self.duration_s <= SECONDS_MAX)
        {
            return bad(format!(
                "--duration must be a positive number of seconds, got {}",
                self.duration_s
            ));
        }
        if self.workload == IndexWorkload::Scan && self.scan_length == 0 {
            return bad("--scan-length must be at least 1".into());
        }
        if self.workload.dist() == Dist::Zipf {
            check_theta(self.theta).map_err(|e| BenchError::Config(format!("theta: {e}")))?;
        }
        if self.workload != IndexWorkload::Rw1 {
            let need = self.keys.saturating_mul(BYTES_PER_KEY_ESTIMATE);
            if let Some(avail) = rss::mem_available_bytes() {
                if need > avail {
                    return bad(format!(
                        "--keys {} needs about {:.1} GiB, but only {:.1} GiB is available",
                        self.keys,
                        need as f64 / GIB,
                        avail as f64 / GIB
                    ));
                }
            }
        }
        Ok(())
    }

    /// rw1's puts per thread at most (masstree-beta's `client.limit()`): a run far longer
    /// than the machine's memory allows stops putting at about half the available memory.
    pub fn rw1_put_cap(&self) -> u64 {
        let avail = rss::mem_available_bytes().unwrap_or(u64::MAX);
        (avail / 2 / RW1_BYTES_PER_KEY / self.threads.max(1) as u64).max(1)
    }

    pub(crate) fn quiet(&self) -> bool {
        self.progress == Progress::Quiet
    }

    /// The key format the workload really uses.
    pub fn effective_key_format(&self) -> KeyFormat {
        if self.workload == IndexWorkload::Rw1 {
            KeyFormat::Decimal
        } else {
            self.key_format
        }
    }
}

const GIB: f64 = (1u64 << 30) as f64;

/// Runs the benchmark: validate, (load,) measure, report.
pub fn run(cfg: &IndexBenchConfig) -> Result<IndexReport, BenchError> {
    cfg.validate()?;
    match cfg.index {
        IndexName::Masstree => run_on::<VersoMasstree>(cfg),
        IndexName::Skiplist => run_on::<SkipList>(cfg),
        IndexName::Scc => run_on::<SccTree>(cfg),
        IndexName::BtreeRwlock => run_on::<RwBTree>(cfg),
        IndexName::MasstreeCrate => run_on::<CrateMasstree>(cfg),
    }
}

fn run_on<I: BenchIndex>(cfg: &IndexBenchConfig) -> Result<IndexReport, BenchError> {
    let baseline = rss::current_rss_bytes();
    let index = I::create();
    let report = if cfg.workload == IndexWorkload::Rw1 {
        let out = workloads::rw1(&index, cfg)?;
        let puts = out.threads.iter().map(|t| t.puts).sum();
        let memory = Memory::new(baseline, out.rss_after_puts, puts);
        IndexReport::from_rw1(cfg, &out.threads, memory)
    } else {
        run_timed(&index, cfg, baseline)?
    };
    // Dropping a large index takes a while; the report is already complete.
    drop(index);
    Ok(report)
}

fn run_timed<I: BenchIndex>(
    index: &I,
    cfg: &IndexBenchConfig,
    baseline: Option<u64>,
) -> Result<IndexReport, BenchError> {
    // zeta(n) is computed here, once, before any thread starts (and before the load, so
    // that its time and memory are not the index's).
    let chooser =
        KeyChooser::new(cfg.workload.dist(), cfg.keys, cfg.theta).map_err(BenchError::Config)?;
    let perm = Permutation::new(cfg.keys, cfg.seed ^ 0x10ad);
    let load = runner::load(
        cfg.keys,
        cfg.threads,
        LOAD_BATCH,
        cfg.progress,
        &|lo, hi| {
            workloads::load_range(index, cfg.key_format, &perm, lo, hi);
            Ok(())
        },
    )?;
    let memory = Memory::new(baseline, rss::current_rss_bytes(), cfg.keys);

    // The runner's phases and threads, with no warmup: every operation is counted.
    let shape = RunShape {
        threads: cfg.threads,
        long_readers: 0,
        warmup_s: 0.0,
        duration_s: cfg.duration_s,
        progress: cfg.progress,
    };
    let counts: Vec<CachePadded<OpCounts>> =
        (0..cfg.threads).map(|_| CachePadded::default()).collect();
    let measured = runner::measure_shape(
        &shape,
        None,
        &|i| TimedWorker::new(index, cfg, chooser, i, &counts[i]),
        &|_| NoLongReader,
        &mut |_| {},
    )?;
    let report = IndexReport::from_timed(cfg, &counts, &measured, load, memory);
    let ops = report.puts + report.gets + report.scans;
    if ops != measured.commits {
        return Err(BenchError::Other(format!(
            "harness invariant: workers counted {ops} operations, the runner {}",
            measured.commits
        )));
    }
    Ok(report)
}
