//! A TPC-C run's numbers: the summary table and the one-line JSON (field names only ever
//! get added).

use std::fmt::Write as _;

use hdrhistogram::Histogram;

use super::random::Constants;
use super::worker::{Totals, TxnType, TypeStats};
use super::TpccConfig;
use crate::report::EngineCounters;
use crate::rss::{self, Machine};
use crate::runner::{format_rate, Measured};

/// One transaction type's figures over the measured window.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct TypeReport {
    /// Completed transactions (rolled-back New-Orders included).
    pub count: u64,
    /// Completed per second.
    pub per_sec: f64,
    /// Share of all completed transactions, in [0, 1].
    pub share: f64,
    /// Attempts aborted by conflicts (each retried).
    pub aborts: u64,
    /// Aborted attempts / all attempts of this type.
    pub abort_rate: f64,
    /// Median latency (first begin to commit or rollback, retries included).
    pub p50_us: f64,
    /// 99th percentile.
    pub p99_us: f64,
    /// 99.9th percentile.
    pub p999_us: f64,
    /// Largest.
    pub max_us: f64,
    /// Mean.
    pub mean_us: f64,
}

/// The five types' reports, under their names.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct PerType {
    pub new_order: TypeReport,
    pub payment: TypeReport,
    pub order_status: TypeReport,
    pub delivery: TypeReport,
    pub stock_level: TypeReport,
}

impl PerType {
    /// The report of `ty`.
    pub fn get(&self, ty: TxnType) -> &TypeReport {
        match ty {
            TxnType::NewOrder => &self.new_order,
            TxnType::Payment => &self.payment,
            TxnType::OrderStatus => &self.order_status,
            TxnType::Delivery => &self.delivery,
            TxnType::StockLevel => &self.stock_level,
        }
    }

    fn get_mut(&mut self, ty: TxnType) -> &mut TypeReport {
        match ty {
            TxnType::NewOrder => &mut self.new_order,
            TxnType::Payment => &mut self.payment,
            TxnType::OrderStatus => &mut self.order_status,
            TxnType::Delivery => &mut self.delivery,
            TxnType::StockLevel => &mut self.stock_level,
        }
    }
}

/// Everything a `verso bench tpcc` run reports.
#[derive(Clone, Debug, serde::Serialize)]
pub struct TpccReport {
    /// Always "tpcc".
    pub benchmark: &'static str,
    /// Completed transactions of all types per second of the measured window.
    pub txn_per_sec: f64,
    /// Completed New-Orders per second (rolled-back ones included, as the specification
    /// counts them).
    pub new_order_per_sec: f64,
    /// The same per minute: tpmC, with no keying or think times.
    pub tpmc: f64,
    /// Attempts aborted by conflicts / all attempts (rollbacks are not aborts).
    pub abort_rate: f64,
    /// Median latency over all types (one transaction in 16 sampled).
    pub p50_us: f64,
    /// 99th percentile over all types.
    pub p99_us: f64,
    /// Per transaction type.
    pub per_type: PerType,
    /// Completed transactions in the window.
    pub commits: u64,
    /// Aborted attempts in the window.
    pub aborts: u64,
    /// New-Orders rolled back for their unused item.
    pub rollbacks: u64,
    /// Districts a Delivery found without an undelivered order.
    pub delivery_skipped: u64,
    /// "passed" (see [`super::consistency::CHECKED`] for what), or the first violated
    /// condition of clause 3.3.2 with its warehouse and district.
    pub consistency: String,
    /// Seconds the consistency check took (one read-only transaction over every row).
    pub consistency_check_s: f64,
    /// Warehouses.
    pub warehouses: u16,
    /// Worker threads.
    pub threads: usize,
    /// Real length of the measured window, in seconds.
    pub duration_s: f64,
    /// Real length of the warmup, in seconds.
    pub warmup_s: f64,
    /// Seconds the population took.
    pub load_seconds: f64,
    /// Rows the population wrote (index entries included).
    pub rows_loaded: u64,
    /// Peak resident set size of the process (`VmHWM`), load included.
    pub peak_rss_bytes: u64,
    /// StockScan period, if a StockScan thread ran.
    pub stock_scan_ms: Option<u64>,
    /// StockScans that ran wholly inside the window.
    pub stock_scans: u64,
    /// Their mean duration in milliseconds (null when none finished).
    pub stock_scan_avg_ms: Option<f64>,
    /// Timestamp algorithm in force.
    pub timestamps: String,
    /// Concurrency control ("mvto", "precision-locking", "snapshot").
    pub cc: String,
    /// Redo logging: "none", "lazy" or "sync" (under sync, a commit counts when durable).
    pub durability: String,
    /// The run's seed.
    pub seed: u64,
    /// NURand's C constants of the run.
    pub nurand: Constants,
    /// Engine counters over the window.
    pub engine: Option<EngineCounters>,
    /// Where it ran.
    pub machine: Machine,
    /// verso-bench version.
    pub version: &'static str,
}

/// What [`TpccReport::new`] is made from.
pub(crate) struct Inputs<'a> {
    pub(crate) cfg: &'a TpccConfig,
    pub(crate) warehouses: u16,
    pub(crate) constants: Constants,
    pub(crate) timestamps: &'a str,
    pub(crate) cc: crate::Protocol,
    pub(crate) load_seconds: f64,
    pub(crate) rows_loaded: u64,
    pub(crate) measured: Measured,
    pub(crate) totals: Totals,
    pub(crate) engine: Option<EngineCounters>,
    pub(crate) consistency: String,
    pub(crate) consistency_check_s: f64,
}

fn us(ns: u64) -> f64 {
    ns as f64 / 1000.0
}

fn quantile(h: &Histogram<u64>, q: f64) -> f64 {
    if h.is_empty() {
        0.0
    } else {
        us(h.value_at_quantile(q))
    }
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

fn type_report(s: &TypeStats, all: u64, window: f64) -> TypeReport {
    let h = &s.latency;
    TypeReport {
        count: s.count,
        per_sec: if window > 0.0 {
            s.count as f64 / window
        } else {
            0.0
        },
        share: ratio(s.count, all),
        aborts: s.aborts,
        abort_rate: ratio(s.aborts, s.count + s.aborts),
        p50_us: quantile(h, 0.5),
        p99_us: quantile(h, 0.99),
        p999_us: quantile(h, 0.999),
        max_us: if h.is_empty() { 0.0 } else { us(h.max()) },
        mean_us: if h.is_empty() { 0.0 } else { h.mean() / 1000.0 },
    }
}

impl TpccReport {
    pub(crate) fn new(i: Inputs<'_>) -> Self {
        let m = &i.measured;
        let window = m.window.as_secs_f64();
        let all: u64 = i.totals.types.iter().map(|s| s.count).sum();
        let mut per_type = PerType::default();
        for ty in TxnType::ALL {
            *per_type.get_mut(ty) = type_report(&i.totals.types[ty as usize], all, window);
        }
        let new_order_per_sec = per_type.new_order.per_sec;
        TpccReport {
            benchmark: "tpcc",
            txn_per_sec: if window > 0.0 {
                m.commits as f64 / window
            } else {
                0.0
            },
            new_order_per_sec,
            tpmc: new_order_per_sec * 60.0,
            abort_rate: ratio(m.aborts, m.commits + m.aborts),
            p50_us: quantile(&m.latency, 0.5),
            p99_us: quantile(&m.latency, 0.99),
            per_type,
            commits: m.commits,
            aborts: m.aborts,
            rollbacks: i.totals.types[TxnType::NewOrder as usize].rollbacks,
            delivery_skipped: i.totals.delivery_skipped,
            consistency: i.consistency,
            consistency_check_s: i.consistency_check_s,
            warehouses: i.warehouses,
            threads: i.cfg.threads,
            duration_s: window,
            warmup_s: m.warmup.as_secs_f64(),
            load_seconds: i.load_seconds,
            rows_loaded: i.rows_loaded,
            peak_rss_bytes: rss::peak_rss_bytes().unwrap_or(0),
            stock_scan_ms: i.cfg.stock_scan_ms,
            stock_scans: m.long_reader_txns,
            stock_scan_avg_ms: (m.long_reader_txns > 0)
                .then(|| m.long_reader_time.as_secs_f64() * 1000.0 / m.long_reader_txns as f64),
            timestamps: i.timestamps.to_string(),
            cc: i.cc.to_string(),
            durability: i.cfg.persist.durability.to_string(),
            seed: i.cfg.seed,
            nurand: i.constants,
            engine: i.engine,
            machine: Machine::detect(),
            version: env!("CARGO_PKG_VERSION"),
        }
    }

    /// Whether the consistency conditions held after the run.
    pub fn consistency_passed(&self) -> bool {
        self.consistency == "passed"
    }

    /// The report as one line of JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }

    /// A human-readable summary table (several lines, newline-terminated).
    pub fn summary(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "verso bench tpcc: {} warehouse{}, {} thread{}",
            self.warehouses,
            if self.warehouses == 1 { "" } else { "s" },
            self.threads,
            if self.threads == 1 { "" } else { "s" },
        );
        let mut row = |k: &str, v: String| {
            let _ = writeln!(s, "  {k:<18} {v}");
        };
        row("timestamps", self.timestamps.clone());
        row("concurrency", self.cc.clone());
        row(
            "load",
            format!(
                "{} rows in {:.2} s ({:.2} M rows/s)",
                self.rows_loaded,
                self.load_seconds,
                self.rows_loaded as f64 / self.load_seconds.max(1e-9) / 1e6
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
            "new-order",
            format!(
                "{}  ({:.0} tpmC)",
                format_rate(self.new_order_per_sec),
                self.tpmc
            ),
        );
        row(
            "aborts",
            format!(
                "{} (abort rate {:.3}%), rollbacks {}, delivery skips {}",
                self.aborts,
                self.abort_rate * 100.0,
                self.rollbacks,
                self.delivery_skipped
            ),
        );
        let consistency = if self.consistency_passed() {
            format!(
                "passed in {:.2} s: {}",
                self.consistency_check_s,
                super::consistency::CHECKED
            )
        } else {
            self.consistency.clone()
        };
        row("consistency", consistency);
        if let Some(ms) = self.stock_scan_ms {
            let avg = self
                .stock_scan_avg_ms
                .map_or("none finished".into(), |a| format!("{a:.1} ms avg"));
            row(
                "stock scans",
                format!("every {ms} ms: {} ran, {avg}", self.stock_scans),
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
        let _ = writeln!(
            s,
            "  {:<13} {:>9} {:>6} {:>11} {:>8} {:>9} {:>9} {:>9}",
            "type", "count", "share", "per sec", "aborts", "p50 us", "p99 us", "max us"
        );
        for ty in TxnType::ALL {
            let r = self.per_type.get(ty);
            let _ = writeln!(
                s,
                "  {:<13} {:>9} {:>5.1}% {:>11.0} {:>8} {:>9.1} {:>9.1} {:>9.0}",
                ty.name(),
                r.count,
                r.share * 100.0,
                r.per_sec,
                r.aborts,
                r.p50_us,
                r.p99_us,
                r.max_us
            );
        }
        s
    }
}
