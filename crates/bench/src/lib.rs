//! Verso's benchmark harness: workloads, key distributions, the runner and reports.
//!
//! Today it has one benchmark, [`ycsb`]: a YCSB-style key-value workload (point reads and
//! blind writes, or range reads) over N preloaded keys, driven by worker threads in a tight
//! loop so that the engine, not the harness, is what gets measured at millions of
//! transactions per second. `--raw-index` runs the same key stream as plain index lookups,
//! the ceiling to compare against. [`index_bench`] is the index micro-benchmark: Verso's
//! Masstree against other concurrent ordered maps (`verso bench index`). [`churn`] checks
//! that memory stays bounded while keys are inserted and deleted at a constant live set.
//!
//! ```no_run
//! use verso_bench::ycsb::{self, YcsbConfig};
//!
//! let cfg = YcsbConfig { keys: 10_000, duration_s: 0.5, ..YcsbConfig::default() };
//! let report = ycsb::run(&cfg)?;
//! print!("{}", report.summary());
//! println!("{}", report.to_json());
//! # Ok::<(), verso_bench::BenchError>(())
//! ```
//!
//! Layout: [`rng`] (xoshiro256**), [`dist`] (uniform and YCSB's scrambled zipfian),
//! [`ycsb`] (configuration, load, engine worker loops), [`raw`] (the raw-index mode and its
//! value store), [`runner`] (threads, phases, progress), [`report`] (summary and JSON),
//! [`rss`] (memory and machine facts).

pub mod churn;
pub mod core_workloads;
pub mod dist;
pub mod durability_bench;
pub mod index_bench;
pub mod persist;
pub mod protocol;
pub mod raw;
pub mod report;
pub mod results;
pub mod rng;
pub mod rss;
pub mod runner;
pub mod tatp;
pub mod tpcc;
pub mod ycsb;

pub use dist::Dist;
pub use persist::Persist;
pub use protocol::Protocol;
pub use report::Report;
pub use runner::Progress;
pub use ycsb::YcsbConfig;

/// Why a benchmark could not run.
#[derive(Debug)]
pub enum BenchError {
    /// A configuration that cannot work (a bad flag value): the user's to fix.
    Config(String),
    /// The engine refused something mid-run.
    Engine(verso_engine::Error),
    /// Anything else (a thread that could not start, a harness invariant).
    Other(String),
}

impl std::fmt::Display for BenchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BenchError::Config(m) => f.write_str(m),
            BenchError::Engine(e) => write!(f, "engine error: {e}"),
            BenchError::Other(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for BenchError {}

impl From<verso_engine::Error> for BenchError {
    fn from(e: verso_engine::Error) -> Self {
        BenchError::Engine(e)
    }
}
