//! TATP (Telecom Application Transaction Processing benchmark, v1.0), the workload HyPer's
//! MVCC paper measures beside TPC-C: a home-location register of subscribers, 80% short
//! read-only transactions and 20% small updates, inserts and deletes.
//!
//! * [`schema`]: the tables and their key and row layouts.
//! * [`txns`]: the seven transactions and the standard mix.
//! * This file: the population (§2), the inputs (§3: non-uniform subscriber ids, the rest
//!   uniform), worker threads on the shared runner, and the report.
//!
//! Throughput counts every completed transaction, successful or not (TATP's "MQTh" counts
//! only successful ones; the report gives each type's success rate, so both can be read).

pub mod schema;
pub mod txns;

use std::fmt::Write as _;
use std::sync::Mutex;
use std::time::Instant;

use hdrhistogram::Histogram;
use verso_engine::{Db, IndexKind, Options, TimestampSource};

use self::schema::{
    forwarding_key, sub_nbr, subscriber_key, typed_key, Tables, FACILITY_ROW, FORWARDING_ROW,
    SUBSCRIBER_ROW,
};
use self::txns::{Input, TxnError, TxnType};
use crate::report::EngineCounters;
use crate::rng::Rng;
use crate::rss::{self, Machine};
use crate::runner::{self, format_rate, Control, LongReader, Progress, RunShape, Workload};
use crate::ycsb::Spin;
use crate::BenchError;

/// Subscribers per load transaction.
const LOAD_BATCH: u64 = 500;
/// One transaction in this many has its latency recorded (keeps clock reads off the path).
const LATENCY_SAMPLE_EVERY: u64 = 16;
/// Largest latency the histograms hold: a minute, in nanoseconds.
const LATENCY_MAX_NS: u64 = 60_000_000_000;
/// Most subscribers: ids are `u32`, and the spec's largest population is 1 billion.
pub const SUBSCRIBERS_MAX: u64 = 1_000_000_000;

/// Everything `verso bench tatp` takes.
#[derive(Clone, Debug)]
pub struct TatpConfig {
    /// Population P (the specification's scale: 100 000 per unit).
    pub subscribers: u64,
    /// Worker threads (also the load threads).
    pub threads: usize,
    /// Measured seconds.
    pub duration_s: f64,
    /// Seconds run before measuring.
    pub warmup_s: f64,
    /// Timestamp source.
    pub timestamps: TimestampSource,
    /// The engine's index.
    pub index: IndexKind,
    /// Concurrency control and isolation (`--cc`).
    pub cc: crate::Protocol,
    /// Redo logging (`--durability`, `--data-dir`, `--fsync-interval`).
    pub persist: crate::Persist,
    /// Seed of every generator.
    pub seed: u64,
    /// Progress display.
    pub progress: Progress,
}

impl Default for TatpConfig {
    fn default() -> Self {
        TatpConfig {
            subscribers: 1_000_000,
            threads: 1,
            duration_s: 10.0,
            warmup_s: 1.0,
            timestamps: TimestampSource::Auto,
            index: IndexKind::Masstree,
            cc: crate::Protocol::Mvto,
            persist: crate::Persist::default(),
            seed: 0x7a7b_0001,
            progress: Progress::Auto,
        }
    }
}

impl TatpConfig {
    /// Rejects configurations that cannot run, naming the flag.
    pub fn validate(&self) -> Result<(), BenchError> {
        let bad = |m: String| Err(BenchError::Config(m));
        if !(1..=SUBSCRIBERS_MAX).contains(&self.subscribers) {
            return bad(format!(
                "--subscribers must be in 1..={SUBSCRIBERS_MAX}, got {}",
                self.subscribers
            ));
        }
        if self.threads == 0 || self.threads > crate::ycsb::THREADS_MAX {
            return bad(format!(
                "--threads must be in 1..={}",
                crate::ycsb::THREADS_MAX
            ));
        }
        if !(self.duration_s.is_finite() && self.duration_s > 0.0) {
            return bad(format!(
                "--duration must be positive, got {}",
                self.duration_s
            ));
        }
        if !(self.warmup_s.is_finite() && self.warmup_s >= 0.0) {
            return bad(format!("--warmup must be >= 0, got {}", self.warmup_s));
        }
        // About 330 bytes a subscriber once loaded (rows, keys, records, index).
        let need = self.subscribers.saturating_mul(330);
        if let Some(avail) = rss::mem_available_bytes() {
            if need > avail {
                return bad(format!(
                    "--subscribers {} needs about {} MiB; {} MiB are available",
                    self.subscribers,
                    need >> 20,
                    avail >> 20
                ));
            }
        }
        Ok(())
    }

    /// The constant A of the non-uniform subscriber id (§3: by population size).
    fn nurand_a(&self) -> u64 {
        if self.subscribers <= 1_000_000 {
            65_535
        } else if self.subscribers <= 10_000_000 {
            1_048_575
        } else {
            2_097_151
        }
    }
}

/// `s_id = (rand(0, A) | rand(1, P)) % P + 1` (§3).
#[inline]
fn subscriber_id(rng: &mut Rng, a: u64, p: u64) -> u32 {
    let x = rng.below(a + 1) | (1 + rng.below(p));
    (x % p + 1) as u32
}

/// Uniform in `lo..=hi`.
#[inline]
fn uniform(rng: &mut Rng, lo: u64, hi: u64) -> u64 {
    lo + rng.below(hi - lo + 1)
}

/// `1..=4` in random order: its first `n` are `n` distinct types.
fn shuffled_types(rng: &mut Rng) -> [u8; 4] {
    let mut t = [1u8, 2, 3, 4];
    for i in (1..4).rev() {
        t.swap(i, rng.below(i as u64 + 1) as usize);
    }
    t
}

fn random_digits<const N: usize>(rng: &mut Rng) -> [u8; N] {
    std::array::from_fn(|_| b'0' + rng.below(10) as u8)
}

/// Loads subscribers `lo..hi` (0-based; ids are `lo + 1 ..= hi`) and their rows (§2.2).
fn load_range(db: &Db, t: &Tables, seed: u64, lo: u64, hi: u64) -> Result<(), BenchError> {
    let mut rng = Rng::for_stream(seed ^ 0x10ad, lo);
    let mut txn = db.begin()?;
    for s in lo + 1..=hi {
        let s_id = s as u32;
        let mut row = [0u8; SUBSCRIBER_ROW];
        row[..15].copy_from_slice(&sub_nbr(s_id));
        for b in &mut row[15..SUBSCRIBER_ROW] {
            *b = rng.next_u64() as u8;
        }
        row[15 + 1] &= 0x03; // ten bits
        txn.put(&t.subscriber, subscriber_key(s_id), row)?;
        txn.put(&t.sub_nbr_index, sub_nbr(s_id), s_id.to_le_bytes())?;
        let n_ai = uniform(&mut rng, 1, 4) as usize;
        for &ai in &shuffled_types(&mut rng)[..n_ai] {
            let mut ai_row = [0u8; schema::ACCESS_ROW];
            ai_row[0] = rng.next_u64() as u8;
            ai_row[1] = rng.next_u64() as u8;
            for b in &mut ai_row[2..] {
                *b = b'A' + rng.below(26) as u8;
            }
            txn.put(&t.access_info, typed_key(s_id, ai), ai_row)?;
        }
        let n_sf = uniform(&mut rng, 1, 4) as usize;
        for &sf in &shuffled_types(&mut rng)[..n_sf] {
            let mut sf_row = [0u8; FACILITY_ROW];
            sf_row[0] = u8::from(rng.below(100) < 85); // is_active: 85% 1
            sf_row[1] = rng.next_u64() as u8; // error_cntrl
            sf_row[2] = rng.next_u64() as u8; // data_a
            for b in &mut sf_row[3..] {
                *b = b'A' + rng.below(26) as u8; // data_b
            }
            txn.put(&t.special_facility, typed_key(s_id, sf), sf_row)?;
            // 0-3 call forwardings with distinct start times of {0, 8, 16}.
            let n_cf = rng.below(4) as usize;
            let mut starts = [0u8, 8, 16];
            for i in (1..3).rev() {
                starts.swap(i, rng.below(i as u64 + 1) as usize);
            }
            for &st in &starts[..n_cf] {
                let mut cf = [0u8; FORWARDING_ROW];
                cf[0] = st + uniform(&mut rng, 1, 8) as u8; // end_time
                cf[1..].copy_from_slice(&random_digits::<15>(&mut rng));
                txn.put(&t.call_forwarding, forwarding_key(s_id, sf, st), cf)?;
            }
        }
    }
    crate::persist::commit(txn)?;
    Ok(())
}

/// Draws one transaction's type and inputs (§3).
fn draw(rng: &mut Rng, a: u64, p: u64) -> (TxnType, Input) {
    let ty = TxnType::from_roll(rng.below(100) as u32);
    let s_id = subscriber_id(rng, a, p);
    let sf_type = uniform(rng, 1, 4) as u8;
    let start_time = [0u8, 8, 16][rng.below(3) as usize];
    let input = match ty {
        TxnType::GetSubscriberData => Input::GetSubscriberData { s_id },
        TxnType::GetNewDestination => Input::GetNewDestination {
            s_id,
            sf_type,
            start_time,
            end_time: uniform(rng, 1, 24) as u8,
        },
        TxnType::GetAccessData => Input::GetAccessData {
            s_id,
            ai_type: uniform(rng, 1, 4) as u8,
        },
        TxnType::UpdateSubscriberData => Input::UpdateSubscriberData {
            s_id,
            sf_type,
            bit_1: rng.below(2) == 1,
            data_a: rng.next_u64() as u8,
        },
        TxnType::UpdateLocation => Input::UpdateLocation {
            sub_nbr: sub_nbr(s_id),
            vlr_location: rng.next_u64() as u32,
        },
        TxnType::InsertCallForwarding => Input::InsertCallForwarding {
            sub_nbr: sub_nbr(s_id),
            sf_type,
            start_time,
            end_time: start_time + uniform(rng, 1, 8) as u8,
            numberx: random_digits::<15>(rng),
        },
        TxnType::DeleteCallForwarding => Input::DeleteCallForwarding {
            sub_nbr: sub_nbr(s_id),
            sf_type,
            start_time,
        },
    };
    (ty, input)
}

/// One type's counters over the window.
#[derive(Clone, Debug)]
struct TypeStats {
    count: u64,
    succeeded: u64,
    aborts: u64,
    latency: Histogram<u64>,
}

impl Default for TypeStats {
    fn default() -> Self {
        TypeStats {
            count: 0,
            succeeded: 0,
            aborts: 0,
            latency: Histogram::new_with_bounds(1, LATENCY_MAX_NS, 3)
                .expect("static histogram bounds are valid"),
        }
    }
}

type Totals = [TypeStats; 7];

struct Worker<'a> {
    db: &'a Db,
    t: Tables,
    rng: Rng,
    a: u64,
    p: u64,
    n: u64,
    sink: u64,
    stats: Totals,
    out: &'a Mutex<Totals>,
}

impl Workload for Worker<'_> {
    fn txn(&mut self, ctl: &Control) -> Result<Option<u64>, BenchError> {
        let (ty, input) = draw(&mut self.rng, self.a, self.p);
        self.n += 1;
        let start = self
            .n
            .is_multiple_of(LATENCY_SAMPLE_EVERY)
            .then(Instant::now);
        let mut aborts = 0u64;
        let mut spin = Spin::default();
        let ok = loop {
            match txns::run(self.db, &self.t, &input, &mut self.sink) {
                Ok(ok) => break ok,
                Err(TxnError::Engine(e)) if e.is_conflict() => {
                    aborts += 1;
                    if aborts.is_multiple_of(64) && ctl.stopped() {
                        return Ok(None);
                    }
                    spin.spin();
                }
                Err(TxnError::Engine(e)) => return Err(e.into()),
                Err(TxnError::Corrupt(what)) => {
                    return Err(BenchError::Other(format!("TATP {}: {what}", ty.name())))
                }
            }
        };
        let s = &mut self.stats[ty as usize];
        s.count += 1;
        s.succeeded += u64::from(ok);
        s.aborts += aborts;
        if let Some(t0) = start {
            let ns = t0.elapsed().as_nanos().min(u128::from(LATENCY_MAX_NS)) as u64;
            s.latency.saturating_record(ns.max(1));
        }
        Ok(Some(aborts))
    }

    fn window_opened(&mut self) {
        self.stats = Totals::default();
    }

    fn finished(&mut self) {
        std::hint::black_box(self.sink);
        let mut out = self.out.lock().unwrap_or_else(|e| e.into_inner());
        for (o, s) in out.iter_mut().zip(&self.stats) {
            o.count += s.count;
            o.succeeded += s.succeeded;
            o.aborts += s.aborts;
            o.latency.add(&s.latency).expect("histograms share bounds");
        }
    }
}

/// TATP has no long readers.
struct NoReader;

impl LongReader for NoReader {
    fn read(&mut self, _: &Control) -> Result<bool, BenchError> {
        Ok(false)
    }
}

/// One type's figures.
#[derive(Clone, Debug, serde::Serialize)]
pub struct TypeReport {
    /// Transaction type.
    pub name: &'static str,
    /// Completed (successful or not) in the window.
    pub count: u64,
    /// Completed per second.
    pub per_sec: f64,
    /// Share of completed transactions that succeeded (TATP expects e.g. 100% for
    /// get_subscriber_data, about 62.5% for get_access_data, 23.9% for get_new_destination).
    pub success_rate: f64,
    /// Conflict aborts (retried).
    pub aborts: u64,
    /// Median latency of sampled transactions, retries included.
    pub p50_us: f64,
    /// 99th percentile.
    pub p99_us: f64,
}

/// A TATP run's result.
#[derive(Clone, Debug, serde::Serialize)]
pub struct TatpReport {
    pub benchmark: &'static str,
    /// Completed transactions per second.
    pub txn_per_sec: f64,
    /// Successful transactions per second (TATP's MQTh, per second).
    pub successful_per_sec: f64,
    /// Conflict aborts / attempts.
    pub abort_rate: f64,
    /// Sampled latency over all types.
    pub p50_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub per_type: Vec<TypeReport>,
    pub subscribers: u64,
    pub threads: usize,
    pub duration_s: f64,
    pub warmup_s: f64,
    pub load_seconds: f64,
    pub peak_rss_bytes: u64,
    pub timestamps: String,
    pub cc: crate::Protocol,
    /// Redo logging: "none", "lazy" or "sync" (under sync, a commit counts when durable).
    pub durability: String,
    pub engine: Option<EngineCounters>,
    pub seed: u64,
    pub machine: Machine,
    pub version: &'static str,
}

impl TatpReport {
    /// One line of JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }

    /// The human summary.
    pub fn summary(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "verso bench tatp: {} subscribers, {} thread{}",
            self.subscribers,
            self.threads,
            if self.threads == 1 { "" } else { "s" }
        );
        let _ = writeln!(
            s,
            "  load {:.2} s; measured {:.2} s after {:.2} s warmup; timestamps {}; cc {}",
            self.load_seconds, self.duration_s, self.warmup_s, self.timestamps, self.cc
        );
        let _ = writeln!(
            s,
            "  throughput {} ({} successful), abort rate {:.3}%, p50 {:.2} us, p99 {:.2} us, p99.9 {:.2} us",
            format_rate(self.txn_per_sec),
            format_rate(self.successful_per_sec),
            self.abort_rate * 100.0,
            self.p50_us,
            self.p99_us,
            self.p999_us
        );
        let _ = writeln!(
            s,
            "  {:<24} {:>10} {:>8} {:>9} {:>8} {:>8}",
            "transaction", "count", "share", "success", "p50 us", "p99 us"
        );
        let total: u64 = self.per_type.iter().map(|t| t.count).sum();
        for t in &self.per_type {
            let _ = writeln!(
                s,
                "  {:<24} {:>10} {:>7.2}% {:>8.1}% {:>8.2} {:>8.2}",
                t.name,
                t.count,
                100.0 * t.count as f64 / total.max(1) as f64,
                100.0 * t.success_rate,
                t.p50_us,
                t.p99_us
            );
        }
        s
    }
}

fn us(ns: u64) -> f64 {
    ns as f64 / 1000.0
}

/// Runs the benchmark: validate, load, warm up, measure, report.
pub fn run(cfg: &TatpConfig) -> Result<TatpReport, BenchError> {
    cfg.validate()?;
    let (options, _dir) = cfg.persist.apply(
        cfg.cc.apply(
            Options::default()
                .timestamps(cfg.timestamps)
                .index(cfg.index),
        ),
    )?;
    let db = Db::open(options)?;
    let t = Tables::open(&db)?;
    let load = runner::load_units(
        cfg.subscribers,
        cfg.threads,
        LOAD_BATCH,
        cfg.progress,
        "subscribers",
        &|lo, hi| load_range(&db, &t, cfg.seed, lo, hi),
    )?;
    db.flush()?;
    let shape = RunShape {
        threads: cfg.threads,
        long_readers: 0,
        warmup_s: cfg.warmup_s,
        duration_s: cfg.duration_s,
        progress: cfg.progress,
    };
    let totals: Mutex<Totals> = Mutex::new(Totals::default());
    let (a, p) = (cfg.nurand_a(), cfg.subscribers);
    let (mut before, mut after) = (None, None);
    let measured = runner::measure_shape(
        &shape,
        crate::persist::acks(&db),
        &|i| Worker {
            db: &db,
            t,
            rng: Rng::for_stream(cfg.seed, i as u64),
            a,
            p,
            n: 0,
            sink: 0,
            stats: Totals::default(),
            out: &totals,
        },
        &|_| NoReader,
        &mut |measuring| {
            let stats = db.stats();
            if measuring {
                before = Some(stats);
            } else {
                after = Some(stats);
            }
        },
    )?;
    let totals = totals.into_inner().unwrap_or_else(|e| e.into_inner());
    let window = measured.window.as_secs_f64().max(1e-9);
    let mut all = Histogram::<u64>::new_with_bounds(1, LATENCY_MAX_NS, 3)
        .expect("static histogram bounds are valid");
    let per_type: Vec<TypeReport> = TxnType::ALL
        .iter()
        .zip(&totals)
        .map(|(ty, s)| {
            all.add(&s.latency).expect("histograms share bounds");
            TypeReport {
                name: ty.name(),
                count: s.count,
                per_sec: s.count as f64 / window,
                success_rate: s.succeeded as f64 / s.count.max(1) as f64,
                aborts: s.aborts,
                p50_us: us(s.latency.value_at_quantile(0.5)),
                p99_us: us(s.latency.value_at_quantile(0.99)),
            }
        })
        .collect();
    let count: u64 = totals.iter().map(|s| s.count).sum();
    let succeeded: u64 = totals.iter().map(|s| s.succeeded).sum();
    let aborts: u64 = totals.iter().map(|s| s.aborts).sum();
    Ok(TatpReport {
        benchmark: "tatp",
        txn_per_sec: count as f64 / window,
        successful_per_sec: succeeded as f64 / window,
        abort_rate: aborts as f64 / (count + aborts).max(1) as f64,
        p50_us: us(all.value_at_quantile(0.5)),
        p99_us: us(all.value_at_quantile(0.99)),
        p999_us: us(all.value_at_quantile(0.999)),
        per_type,
        subscribers: cfg.subscribers,
        threads: cfg.threads,
        duration_s: window,
        warmup_s: measured.warmup.as_secs_f64(),
        load_seconds: load.as_secs_f64(),
        peak_rss_bytes: rss::peak_rss_bytes().unwrap_or(0),
        timestamps: db.timestamp_algorithm().to_string(),
        cc: cfg.cc,
        durability: cfg.persist.durability.to_string(),
        engine: match (before, after) {
            (Some(b), Some(a)) => Some(EngineCounters::between(&b, &a)),
            _ => None,
        },
        seed: cfg.seed,
        machine: Machine::detect(),
        version: env!("CARGO_PKG_VERSION"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subscriber_ids_stay_in_range_and_skew() {
        let mut rng = Rng::new(7);
        let p = 1000;
        let mut hits = vec![0u32; p as usize + 1];
        for _ in 0..200_000 {
            let s = subscriber_id(&mut rng, 65_535, p);
            assert!((1..=p as u32).contains(&s));
            hits[s as usize] += 1;
        }
        let max = *hits.iter().max().unwrap();
        let min = *hits[1..].iter().min().unwrap();
        assert!(max > 2 * min, "NURand should be non-uniform ({min}..{max})");
    }

    #[test]
    fn the_mix_is_tatps() {
        let mut rng = Rng::new(3);
        let mut n = [0u32; 7];
        for _ in 0..100_000 {
            n[draw(&mut rng, 65_535, 1000).0 as usize] += 1;
        }
        for ty in TxnType::ALL {
            let got = f64::from(n[ty as usize]) / 1000.0;
            assert!((got - f64::from(ty.percent())).abs() < 0.5, "{ty:?} {got}%");
        }
    }
}
