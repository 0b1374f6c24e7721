//! TPC-C as the specification (v5.11) defines it: the nine tables of clause 1 populated as
//! clause 4 says, the five transactions of clause 2 in the standard mix, and all twelve
//! consistency conditions of clause 3.3.2 checked after every run (condition 11, which only
//! holds until the first Delivery, only until then: see [`consistency`]).
//!
//! What follows Silo and vMVCC rather than a full audited setup: there are no terminals,
//! keying or think times; each worker thread is bound to a home warehouse (thread `i` to
//! warehouse `i % W + 1`) and runs transactions back to back, retrying a conflicted one
//! with the same inputs until it commits. Delivery runs inline, as one transaction over the
//! ten districts.
//!
//! ```no_run
//! use verso_bench::tpcc::{self, TpccConfig};
//!
//! let cfg = TpccConfig { warehouses: Some(1), threads: 1, duration_s: 1.0, ..Default::default() };
//! let report = tpcc::run(&cfg)?;
//! print!("{}", report.summary());
//! assert!(report.consistency_passed());
//! # Ok::<(), verso_bench::BenchError>(())
//! ```
//!
//! Layout: [`schema`] (keys and row layouts), [`random`] (NURand, names, text), [`load`]
//! (population), `txns` (the five transactions), `worker` (the mix, retries and per-type
//! counters), [`consistency`] (clause 3.3.2), [`report`].

pub mod consistency;
pub mod load;
pub mod random;
pub mod report;
pub mod schema;
mod txns;
mod worker;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use verso_engine::{Db, Options, Table, TimestampSource};

use crate::report::EngineCounters;
use crate::rss;
use crate::runner::{self, Progress, RunShape};
use crate::BenchError;

pub use consistency::{DeliveryMark, Violation};
pub use random::Constants;
pub use report::TpccReport;
pub use worker::TxnType;

/// Longest accepted run or warmup (as for YCSB): a week.
pub const SECONDS_MAX: f64 = 7.0 * 86_400.0;

/// Most worker threads (each holds one engine transaction slot at a time).
pub const THREADS_MAX: usize = 512;

/// Rough resident bytes one warehouse takes once loaded (about 660 K records with their
/// index entries and versions), measured and rounded up; the shared ITEM table is extra.
/// Used only to refuse runs that cannot fit in memory before they start.
pub const BYTES_PER_WAREHOUSE: u64 = 400 << 20;

/// Everything `verso bench tpcc` takes.
#[derive(Clone, Debug)]
pub struct TpccConfig {
    /// Warehouses; `None` means one per worker thread.
    pub warehouses: Option<u32>,
    /// Worker threads (also the load threads, at most one per warehouse).
    pub threads: usize,
    /// Measured seconds.
    pub duration_s: f64,
    /// Seconds run before measuring.
    pub warmup_s: f64,
    /// If set, an extra thread runs a read-only StockScan (the sum of S_QUANTITY over every
    /// stock row) every this many milliseconds.
    pub stock_scan_ms: Option<u64>,
    /// Timestamp source for the engine.
    pub timestamps: TimestampSource,
    /// Concurrency control and isolation (`--cc`).
    pub cc: crate::Protocol,
    /// Redo logging (`--durability`, `--data-dir`, `--fsync-interval`).
    pub persist: crate::Persist,
    /// Seed for population, inputs and the NURand constants.
    pub seed: u64,
    /// How to show progress on stderr.
    pub progress: Progress,
}

impl Default for TpccConfig {
    fn default() -> Self {
        TpccConfig {
            warehouses: None,
            threads: 1,
            duration_s: 10.0,
            warmup_s: 1.0,
            stock_scan_ms: None,
            timestamps: TimestampSource::Auto,
            cc: crate::Protocol::Mvto,
            persist: crate::Persist::default(),
            seed: 0x7bcc_5eed_0000_0001,
            progress: Progress::Auto,
        }
    }
}

impl TpccConfig {
    /// The number of warehouses: as configured, else one per thread.
    pub fn warehouse_count(&self) -> u32 {
        self.warehouses.unwrap_or(self.threads as u32)
    }

    /// Rejects configurations that cannot run, with a message naming the flag.
    pub fn validate(&self) -> Result<(), BenchError> {
        let bad = |m: String| Err(BenchError::Config(m));
        if self.threads == 0 || self.threads > THREADS_MAX {
            return bad(format!(
                "--threads must be in 1..={THREADS_MAX}, got {}",
                self.threads
            ));
        }
        let w = self.warehouse_count();
        if w == 0 || w > schema::WAREHOUSES_MAX {
            return bad(format!(
                "--warehouses must be in 1..={}, got {w}",
                schema::WAREHOUSES_MAX
            ));
        }
        if !(self.duration_s.is_finite() && self.duration_s > 0.0 && self.duration_s <= SECONDS_MAX)
        {
            return bad(format!(
                "--duration must be a positive number of seconds, got {}",
                self.duration_s
            ));
        }
        if !(self.warmup_s.is_finite() && self.warmup_s >= 0.0 && self.warmup_s <= SECONDS_MAX) {
            return bad(format!(
                "--warmup must be zero or a positive number of seconds, got {}",
                self.warmup_s
            ));
        }
        if self.stock_scan_ms == Some(0) {
            return bad("--stock-scan-ms must be at least 1".into());
        }
        let need = u64::from(w).saturating_mul(BYTES_PER_WAREHOUSE);
        if let Some(avail) = rss::mem_available_bytes() {
            if need > avail {
                return bad(format!(
                    "--warehouses {w} needs about {:.1} GiB to load, but only {:.1} GiB is available",
                    need as f64 / GIB,
                    avail as f64 / GIB
                ));
            }
        }
        Ok(())
    }
}

const GIB: f64 = (1u64 << 30) as f64;

/// Handles to the engine tables of [`schema::TABLE_NAMES`].
#[derive(Clone, Copy, Debug)]
pub struct Tables {
    pub warehouse: Table,
    pub district: Table,
    pub customer: Table,
    /// (w, d, C_LAST, C_FIRST, c) -> empty.
    pub customer_by_name: Table,
    pub history: Table,
    pub new_order: Table,
    pub orders: Table,
    /// (w, d, c, o) -> empty.
    pub orders_by_customer: Table,
    pub order_line: Table,
    pub item: Table,
    pub stock: Table,
}

impl Tables {
    /// Creates (or finds) the tables in `db`.
    pub fn create(db: &Db) -> Result<Self, verso_engine::Error> {
        let [warehouse, district, customer, customer_by_name, history, new_order, orders, orders_by_customer, order_line, item, stock] =
            schema::TABLE_NAMES.map(|name| db.table(name));
        Ok(Tables {
            warehouse: warehouse?,
            district: district?,
            customer: customer?,
            customer_by_name: customer_by_name?,
            history: history?,
            new_order: new_order?,
            orders: orders?,
            orders_by_customer: orders_by_customer?,
            order_line: order_line?,
            item: item?,
            stock: stock?,
        })
    }
}

/// A populated TPC-C database, ready to run (again and again: each run continues from
/// where the last left the data).
pub struct Tpcc {
    db: Db,
    tables: Tables,
    warehouses: u16,
    constants: Constants,
    load_seconds: f64,
    rows_loaded: u64,
    /// Set once a Delivery delivers an order: condition 11 stops holding then.
    delivered: DeliveryMark,
    /// Runs started, which numbers each run's HISTORY keys apart from the last run's.
    runs: AtomicU64,
    /// The data directory of a durable run; declared after `db`, so it outlives it.
    _dir: crate::persist::RunDir,
}

impl Tpcc {
    /// Opens a database and populates it for `cfg` (clause 4.3), in parallel.
    pub fn load(cfg: &TpccConfig) -> Result<Self, BenchError> {
        cfg.validate()?;
        let (options, dir) = cfg
            .persist
            .apply(cfg.cc.apply(Options::default().timestamps(cfg.timestamps)))?;
        let db = Db::open(options)?;
        let tables = Tables::create(&db)?;
        let warehouses = cfg.warehouse_count() as u16;
        let constants = Constants::from_seed(cfg.seed);
        let loader = load::Loader::new(&db, tables, warehouses, constants, cfg.seed);
        let threads = cfg.threads.min(usize::from(warehouses));
        let took = runner::load_units(
            loader.units(),
            threads,
            load::UNITS_PER_BATCH,
            cfg.progress,
            "load units",
            &|lo, hi| loader.load(lo, hi),
        )?;
        let rows_loaded = loader.rows();
        db.flush()?;
        Ok(Tpcc {
            db,
            tables,
            warehouses,
            constants,
            load_seconds: took.as_secs_f64(),
            rows_loaded,
            delivered: DeliveryMark::new(),
            runs: AtomicU64::new(0),
            _dir: dir,
        })
    }

    /// The database.
    pub fn db(&self) -> &Db {
        &self.db
    }

    /// Its tables.
    pub fn tables(&self) -> &Tables {
        &self.tables
    }

    /// Number of warehouses.
    pub fn warehouses(&self) -> u16 {
        self.warehouses
    }

    /// The run's NURand constants.
    pub fn constants(&self) -> Constants {
        self.constants
    }

    /// Runs the mix for `cfg`'s warmup and duration with `cfg.threads` workers, then checks
    /// consistency. A violation does not make this fail: the report's `consistency` names
    /// it, and the caller decides (the `verso` command exits non-zero).
    pub fn run(&self, cfg: &TpccConfig) -> Result<TpccReport, BenchError> {
        cfg.validate()?;
        if cfg.warehouse_count() != u32::from(self.warehouses) {
            return Err(BenchError::Config(format!(
                "loaded {} warehouses, asked to run {}",
                self.warehouses,
                cfg.warehouse_count()
            )));
        }
        let shape = RunShape {
            threads: cfg.threads,
            long_readers: usize::from(cfg.stock_scan_ms.is_some()),
            warmup_s: cfg.warmup_s,
            duration_s: cfg.duration_s,
            progress: cfg.progress,
        };
        let run = self.runs.fetch_add(1, Ordering::Relaxed);
        if run >= worker::RUNS_MAX {
            return Err(BenchError::Config(format!(
                "a database takes at most {} runs",
                worker::RUNS_MAX
            )));
        }
        let totals = Mutex::new(worker::Totals::default());
        let params = worker::Params {
            warehouses: self.warehouses,
            constants: self.constants,
            seed: cfg.seed,
            run,
        };
        let scan_every = Duration::from_millis(cfg.stock_scan_ms.unwrap_or(1000));
        let (mut before, mut after) = (None, None);
        let measured = runner::measure_shape(
            &shape,
            crate::persist::acks(&self.db),
            &|i| worker::Worker::new(&self.db, self.tables, params, i, &totals, &self.delivered),
            &|_| worker::StockScanner::new(&self.db, self.tables, scan_every),
            &mut |measuring| {
                let stats = self.db.stats();
                if measuring {
                    before = Some(stats);
                } else {
                    after = Some(stats);
                }
            },
        )?;
        let engine = match (before, after) {
            (Some(b), Some(a)) => Some(EngineCounters::between(&b, &a)),
            _ => None,
        };
        let checking = std::time::Instant::now();
        let consistency = match self.check_consistency() {
            Ok(()) => "passed".to_string(),
            Err(v) => v.to_string(),
        };
        let consistency_check_s = checking.elapsed().as_secs_f64();
        let totals = totals.into_inner().unwrap_or_else(|e| e.into_inner());
        Ok(TpccReport::new(report::Inputs {
            cfg,
            warehouses: self.warehouses,
            constants: self.constants,
            timestamps: self.db.timestamp_algorithm(),
            cc: cfg.cc,
            load_seconds: self.load_seconds,
            rows_loaded: self.rows_loaded,
            measured,
            totals,
            engine,
            consistency,
            consistency_check_s,
        }))
    }

    /// Checks the consistency conditions of clause 3.3.2 (all twelve, 11 only while no
    /// Delivery has delivered an order) in one read-only transaction: the first violation.
    pub fn check_consistency(&self) -> Result<(), Violation> {
        consistency::check(&self.db, &self.tables, self.warehouses, &self.delivered)
    }

    /// Every violation [`Tpcc::check_consistency`] would find, sorted by condition.
    pub fn consistency_violations(&self) -> Vec<Violation> {
        consistency::violations(&self.db, &self.tables, self.warehouses, &self.delivered)
    }
}

/// Loads, runs and checks: the whole benchmark.
pub fn run(cfg: &TpccConfig) -> Result<TpccReport, BenchError> {
    let tpcc = Tpcc::load(cfg)?;
    tpcc.run(cfg)
}
