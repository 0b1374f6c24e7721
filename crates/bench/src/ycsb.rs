//! The YCSB-style workload: configuration, validation, the load phase and the per-thread
//! transaction loops against the engine (the raw-index loops are in `raw.rs`).
//!
//! Keys are the integers `0..keys` encoded as 8 big-endian bytes, so key order is numeric
//! order and a range read of L keys from key s is the byte range [s, s + L).

use std::ops::Bound;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use verso_engine::{Db, IndexKind, Options, Table, TimestampSource, Txn, VALUE_SIZE_MAX_DEFAULT};

use crate::core_workloads::{CoreWorkload, Mix, SCAN_LENGTH_MAX};
use crate::dist::{check_theta, Dist, KeyChooser, Zipfian};
use crate::raw::{RawDb, RawLongReader, RawWorker};
use crate::report::{EngineCounters, Report};
use crate::rng::Rng;
use crate::rss;
use crate::runner::{self, Control, LongReader, Progress, Workload};
use crate::BenchError;

/// Keys per load transaction: large enough that begin/commit overhead vanishes, small enough
/// that a write set stays in cache.
pub const LOAD_BATCH: u64 = 1000;

/// Value bytes per load transaction at most: with huge values a batch is cut short, so that
/// a load transaction's write set (and its versions) cannot exhaust memory by itself.
pub const LOAD_BATCH_BYTES: u64 = 64 << 20;

/// Latency is recorded for one transaction in this many, so that the hot loop does not read
/// the clock twice per transaction (about 40 ns, a tenth of a 2-3 M txn/s budget).
pub const LATENCY_SAMPLE_EVERY: u64 = 16;

/// The table the workload uses, as in YCSB.
pub const TABLE: &str = "usertable";

/// Most worker plus long-reader threads: each holds one engine transaction slot at a time.
pub const THREADS_MAX: usize = 512;

/// Longest accepted run or warmup: a week, far past any sensible benchmark, but it keeps
/// `Duration::from_secs_f64` away from overflow.
pub const SECONDS_MAX: f64 = 7.0 * 86_400.0;

/// Rough resident bytes per key in the engine beyond the value itself (index entry, boxed
/// key, record, version header, allocator overhead), measured at 1 M keys and rounded up.
/// Only used to refuse runs that cannot fit in memory before they start.
const ENGINE_BYTES_PER_KEY: u64 = 320;
/// The same for `--raw-index` (index entry, boxed key, sequence word).
const RAW_BYTES_PER_KEY: u64 = 160;

/// Everything `verso bench ycsb` takes.
#[derive(Clone, Debug)]
pub struct YcsbConfig {
    /// Number of keys, loaded before measuring.
    pub keys: u64,
    /// Bytes per value.
    pub value_size: usize,
    /// Point operations per transaction.
    pub ops_per_txn: u32,
    /// Percentage (0-100) of point operations that are reads; the rest are blind writes.
    pub read_ratio: u32,
    /// When > 0, each transaction is one range read of this many keys instead of point ops.
    pub scan_length: u64,
    /// One of YCSB's core workloads A-F instead of `read_ratio`/`scan_length`.
    pub workload: Option<CoreWorkload>,
    /// Key distribution.
    pub dist: Dist,
    /// Zipfian parameter (used with `Dist::Zipf`).
    pub theta: f64,
    /// Worker threads (also the load threads).
    pub threads: usize,
    /// Measured seconds.
    pub duration_s: f64,
    /// Seconds run before measuring.
    pub warmup_s: f64,
    /// Extra threads running long read-only transactions over 1% of the keys.
    pub long_readers: usize,
    /// Timestamp source for the engine.
    pub timestamps: TimestampSource,
    /// Which ordered index the engine (or the raw-index ceiling) uses.
    pub index: IndexKind,
    /// Concurrency control and isolation (`--cc`).
    pub cc: crate::Protocol,
    /// Redo logging (`--durability`, `--data-dir`, `--fsync-interval`).
    pub persist: crate::Persist,
    /// Plain index lookups instead of transactions.
    pub raw_index: bool,
    /// Seed for every thread's generator.
    pub seed: u64,
    /// How to show progress on stderr.
    pub progress: Progress,
}

impl Default for YcsbConfig {
    fn default() -> Self {
        YcsbConfig {
            keys: 1_000_000,
            value_size: 100,
            ops_per_txn: 1,
            read_ratio: 100,
            scan_length: 0,
            workload: None,
            dist: Dist::Uniform,
            theta: 0.99,
            threads: 1,
            duration_s: 10.0,
            warmup_s: 1.0,
            long_readers: 0,
            timestamps: TimestampSource::Auto,
            index: IndexKind::Masstree,
            cc: crate::Protocol::Mvto,
            persist: crate::Persist::default(),
            raw_index: false,
            seed: 0x5eed_1234_abcd_0001,
            progress: Progress::Auto,
        }
    }
}

impl YcsbConfig {
    /// Rejects configurations that cannot run, with a message naming the flag.
    pub fn validate(&self) -> Result<(), BenchError> {
        let bad = |m: String| Err(BenchError::Config(m));
        if self.keys == 0 {
            return bad("--keys must be at least 1".into());
        }
        if self.value_size > VALUE_SIZE_MAX_DEFAULT {
            return bad(format!(
                "--value-size {} exceeds the engine's value limit of {VALUE_SIZE_MAX_DEFAULT} bytes",
                self.value_size
            ));
        }
        if self.ops_per_txn == 0 || self.ops_per_txn > 1_000_000 {
            return bad(format!(
                "--ops-per-txn must be in 1..=1000000, got {}",
                self.ops_per_txn
            ));
        }
        if self.read_ratio > 100 {
            return bad(format!(
                "--read-ratio is a percentage (0-100), got {}",
                self.read_ratio
            ));
        }
        if self.workload.is_some() {
            if self.raw_index {
                return bad("--workload runs on the engine only (the raw index cannot insert or scan here); drop --raw-index".into());
            }
            if self.scan_length > 0 {
                return bad(
                    "--scan-length and --workload both choose the operations: pick one".into(),
                );
            }
        }
        if self.dist == Dist::Zipf || self.workload.is_some_and(CoreWorkload::reads_latest) {
            check_theta(self.theta).map_err(|e| BenchError::Config(format!("--theta: {e}")))?;
        }
        if self.threads == 0 {
            return bad("--threads must be at least 1".into());
        }
        if self.threads + self.long_readers > THREADS_MAX {
            return bad(format!(
                "--threads plus --long-readers must be at most {THREADS_MAX}"
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
        let need = self.estimated_bytes();
        if let Some(avail) = rss::mem_available_bytes() {
            if need > avail {
                return bad(format!(
                    "--keys {} with --value-size {} needs about {:.1} GiB, but only {:.1} GiB is available",
                    self.keys,
                    self.value_size,
                    need as f64 / GIB,
                    avail as f64 / GIB
                ));
            }
        }
        Ok(())
    }

    /// A rough upper estimate of the memory the loaded data takes.
    pub fn estimated_bytes(&self) -> u64 {
        let per_key = if self.raw_index {
            RAW_BYTES_PER_KEY + (self.value_size as u64).div_ceil(8) * 8
        } else {
            ENGINE_BYTES_PER_KEY + self.value_size as u64
        };
        // Plus what the write sets of in-flight transactions hold (buffered value and the
        // version made from it), which matters only with huge values or transactions.
        let writes_per_txn = if self.read_ratio < 100 {
            u64::from(self.ops_per_txn)
        } else {
            0
        };
        let in_flight = (self.threads as u64)
            .saturating_mul(writes_per_txn.max(self.load_batch()))
            .saturating_mul(2 * (self.value_size as u64 + 64));
        self.keys.saturating_mul(per_key).saturating_add(in_flight)
    }

    /// Keys per load transaction: [`LOAD_BATCH`], fewer for values so large that the batch
    /// would exceed [`LOAD_BATCH_BYTES`].
    pub fn load_batch(&self) -> u64 {
        (LOAD_BATCH_BYTES / (self.value_size as u64 + 8)).clamp(1, LOAD_BATCH)
    }

    /// Reads per long-reader transaction: 1% of the keys, at least one.
    pub fn long_reader_reads(&self) -> u64 {
        (self.keys / 100).max(1)
    }
}

const GIB: f64 = (1u64 << 30) as f64;

/// Runs the benchmark: validate, load, warm up, measure, report.
pub fn run(cfg: &YcsbConfig) -> Result<Report, BenchError> {
    cfg.validate()?;
    // zeta(n) is computed here, once, before any thread starts.
    let chooser = KeyChooser::new(cfg.dist, cfg.keys, cfg.theta).map_err(BenchError::Config)?;
    if cfg.raw_index {
        run_raw(cfg, chooser)
    } else {
        run_engine(cfg, chooser)
    }
}

fn run_engine(cfg: &YcsbConfig, chooser: KeyChooser) -> Result<Report, BenchError> {
    let (options, _dir) = cfg.persist.apply(
        cfg.cc.apply(
            Options::default()
                .timestamps(cfg.timestamps)
                .index(cfg.index),
        ),
    )?;
    let db = Db::open(options)?;
    let table = db.table(TABLE)?;
    let load = runner::load(
        cfg.keys,
        cfg.threads,
        cfg.load_batch(),
        cfg.progress,
        &|lo, hi| load_engine(&db, &table, cfg, lo, hi),
    )?;
    // A durable run measures the workload's logging, not the load's backlog.
    db.flush()?;

    let mut before = None;
    let mut after = None;
    let next_key = Arc::new(AtomicU64::new(cfg.keys));
    let latest = match cfg.workload {
        Some(w) if w.reads_latest() => {
            Some(Zipfian::new(cfg.keys, cfg.theta).map_err(BenchError::Config)?)
        }
        _ => None,
    };
    let measured = runner::measure(
        cfg,
        crate::persist::acks(&db),
        &|i| {
            let ops = PointOps::with_key_counter(cfg, chooser, i as u64, next_key.clone(), latest);
            EngineWorker::new(&db, table, ops, cfg.scan_length)
        },
        &|i| EngineLongReader {
            db: &db,
            table,
            rng: Rng::for_stream(cfg.seed, (cfg.threads + i) as u64),
            keys: cfg.keys,
            reads: cfg.long_reader_reads(),
            sink: 0,
        },
        &mut |measuring| {
            let stats = db.stats();
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
    Ok(Report::new(
        cfg,
        db.timestamp_algorithm(),
        load,
        measured,
        engine,
    ))
}

fn run_raw(cfg: &YcsbConfig, chooser: KeyChooser) -> Result<Report, BenchError> {
    let start = Instant::now();
    let raw = RawDb::new(cfg.keys, cfg.value_size, cfg.index)?;
    let alloc = start.elapsed();
    let load = runner::load(
        cfg.keys,
        cfg.threads,
        cfg.load_batch(),
        cfg.progress,
        &|lo, hi| {
            let mut value = vec![0u8; cfg.value_size];
            raw.load(lo, hi, &mut value);
            Ok(())
        },
    )?;
    let measured = runner::measure(
        cfg,
        None,
        &|i| RawWorker::new(&raw, PointOps::new(cfg, chooser, i as u64), cfg.scan_length),
        &|i| RawLongReader {
            db: &raw,
            rng: Rng::for_stream(cfg.seed, (cfg.threads + i) as u64),
            keys: cfg.keys,
            reads: cfg.long_reader_reads(),
            sink: 0,
        },
        &mut |_| {},
    )?;
    // The value store's allocation is part of loading it.
    Ok(Report::new(cfg, "none", load + alloc, measured, None))
}

/// Loads keys `lo..hi` in transactions of [`LOAD_BATCH`] puts.
fn load_engine(
    db: &Db,
    table: &Table,
    cfg: &YcsbConfig,
    lo: u64,
    hi: u64,
) -> Result<(), BenchError> {
    let mut value = vec![0u8; cfg.value_size];
    let mut spin = Spin::default();
    loop {
        let mut txn = db.begin()?;
        for k in lo..hi {
            stamp_value(&mut value, k);
            txn.put(table, k.to_be_bytes(), &value)?;
        }
        match crate::persist::commit(txn) {
            Ok(_) => return Ok(()),
            // Loads write disjoint keys, so this should not happen; retrying is still right.
            Err(e) if e.is_conflict() => spin.spin(),
            Err(e) => return Err(e.into()),
        }
    }
}

/// Writes `n`'s little-endian bytes over the start of `value`, so values differ per key
/// (or per write) without touching the whole buffer.
#[inline]
pub(crate) fn stamp_value(value: &mut [u8], n: u64) {
    let len = value.len().min(8);
    value[..len].copy_from_slice(&n.to_le_bytes()[..len]);
}

/// The first 8 bytes of a value as a word (zero-padded): what "touching" a value reads.
#[inline]
pub(crate) fn first_word(v: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    let n = v.len().min(8);
    b[..n].copy_from_slice(&v[..n]);
    u64::from_le_bytes(b)
}

/// Bounded exponential backoff: spin 1, 2, 4 ... 64 times, then yield. With more threads
/// than cores, spinning on a preempted lock holder or a conflicting writer only burns its
/// time slice, hence the yield.
#[derive(Default)]
pub(crate) struct Spin(u32);

impl Spin {
    #[inline]
    pub(crate) fn spin(&mut self) {
        if self.0 < 7 {
            for _ in 0..1u32 << self.0 {
                std::hint::spin_loop();
            }
        } else {
            std::thread::yield_now();
        }
        self.0 += 1;
    }
}

/// What one operation does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum OpKind {
    /// Point read.
    Read,
    /// Blind write of a fresh value.
    Write,
    /// Write of a key no one has written yet.
    Insert,
    /// Forward range read of `len` keys from the key.
    Scan,
    /// Read, then write the same key.
    ReadModifyWrite,
}

/// One drawn operation.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Op {
    pub(crate) kind: OpKind,
    pub(crate) key: u64,
    /// Keys to scan (`Scan` only).
    pub(crate) len: u64,
}

/// How a thread draws operations: the simple read/write profile, or a core workload.
enum OpSource {
    /// `read_ratio`% reads, the rest blind writes, keys from the chooser.
    Profile { read_ratio: u32 },
    /// A YCSB core workload's mix.
    Core {
        mix: Mix,
        /// D's "latest": zipfian ranks counted back from the newest key.
        latest: Option<Zipfian>,
    },
}

/// One thread's operation generator: its RNG, key chooser, and the reusable buffers a
/// transaction's ops and written values live in (allocated once, so the loop never does).
pub(crate) struct PointOps {
    pub(crate) chooser: KeyChooser,
    pub(crate) rng: Rng,
    ops_per_txn: u32,
    source: OpSource,
    /// The next key an insert takes, shared by all threads (starts at `keys`).
    next_key: Arc<AtomicU64>,
    /// The current transaction's ops.
    ops: Vec<Op>,
    value: Vec<u8>,
    writes: u64,
}

impl PointOps {
    pub(crate) fn new(cfg: &YcsbConfig, chooser: KeyChooser, stream: u64) -> Self {
        Self::with_key_counter(
            cfg,
            chooser,
            stream,
            Arc::new(AtomicU64::new(cfg.keys)),
            None,
        )
    }

    /// As `new`, with the shared insert-key counter and (for D) the latest-key generator.
    pub(crate) fn with_key_counter(
        cfg: &YcsbConfig,
        chooser: KeyChooser,
        stream: u64,
        next_key: Arc<AtomicU64>,
        latest: Option<Zipfian>,
    ) -> Self {
        let source = match cfg.workload {
            None => OpSource::Profile {
                read_ratio: cfg.read_ratio,
            },
            Some(w) => OpSource::Core {
                mix: w.mix(),
                latest,
            },
        };
        PointOps {
            chooser,
            rng: Rng::for_stream(cfg.seed, stream),
            ops_per_txn: cfg.ops_per_txn,
            source,
            next_key,
            ops: Vec::with_capacity(cfg.ops_per_txn as usize),
            value: vec![0xa5; cfg.value_size],
            writes: stream << 48,
        }
    }

    /// Draws the next transaction's ops (kept until the next call, so retries redo them).
    #[inline]
    pub(crate) fn fill(&mut self) {
        self.ops.clear();
        for _ in 0..self.ops_per_txn {
            let op = self.draw();
            self.ops.push(op);
        }
    }

    #[inline]
    fn draw(&mut self) -> Op {
        let roll = self.rng.below(100) as u32;
        let kind = match &self.source {
            OpSource::Profile { read_ratio } => {
                if roll < *read_ratio {
                    OpKind::Read
                } else {
                    OpKind::Write
                }
            }
            OpSource::Core { mix, .. } => {
                let mut edge = mix.read;
                if roll < edge {
                    OpKind::Read
                } else if roll < {
                    edge += mix.update;
                    edge
                } {
                    OpKind::Write
                } else if roll < {
                    edge += mix.insert;
                    edge
                } {
                    OpKind::Insert
                } else if roll < {
                    edge += mix.scan;
                    edge
                } {
                    OpKind::Scan
                } else {
                    OpKind::ReadModifyWrite
                }
            }
        };
        let key = match kind {
            // A new key for every insert, even when the transaction later retries: the
            // retry re-runs the same ops, so the key stays this transaction's.
            OpKind::Insert => self.next_key.fetch_add(1, Ordering::Relaxed),
            _ => match &self.source {
                OpSource::Core {
                    latest: Some(z), ..
                } => {
                    // Newest first: rank r is the r-th most recently taken key (YCSB's
                    // SkewedLatestGenerator). Keys taken but not yet committed read as
                    // absent, as in YCSB.
                    let newest = self.next_key.load(Ordering::Relaxed) - 1;
                    newest - z.next(&mut self.rng).min(newest)
                }
                _ => self.chooser.next(&mut self.rng),
            },
        };
        let len = if kind == OpKind::Scan {
            1 + self.rng.below(SCAN_LENGTH_MAX)
        } else {
            0
        };
        Op { kind, key, len }
    }

    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.ops.len()
    }

    /// The kind and encoded key of op `i`.
    #[inline]
    pub(crate) fn get(&self, i: usize) -> (OpKind, [u8; 8]) {
        let op = self.ops[i];
        (op.kind, op.key.to_be_bytes())
    }

    /// Op `i` in full.
    #[inline]
    pub(crate) fn op(&self, i: usize) -> Op {
        self.ops[i]
    }

    /// A value no earlier write of this thread used (a per-thread counter in its first
    /// bytes): blind writes write something new, as YCSB's updates do.
    #[inline]
    pub(crate) fn fresh_value(&mut self) -> &[u8] {
        self.writes += 1;
        stamp_value(&mut self.value, self.writes);
        &self.value
    }
}

/// One worker thread's engine loop state.
pub(crate) struct EngineWorker<'db> {
    db: &'db Db,
    table: Table,
    ops: PointOps,
    scan_length: u64,
    sink: u64,
}

impl<'db> EngineWorker<'db> {
    fn new(db: &'db Db, table: Table, ops: PointOps, scan_length: u64) -> Self {
        EngineWorker {
            db,
            table,
            ops,
            scan_length,
            sink: 0,
        }
    }

    /// One attempt at the current point ops.
    #[inline]
    fn point_attempt(&mut self) -> Result<(), verso_engine::Error> {
        let mut txn = self.db.begin()?;
        for i in 0..self.ops.len() {
            let op = self.ops.op(i);
            let key = op.key.to_be_bytes();
            match op.kind {
                OpKind::Read => {
                    let v = txn.get(&self.table, key)?;
                    self.sink ^= std::hint::black_box(v.map_or(0, first_word));
                }
                OpKind::Write | OpKind::Insert => {
                    txn.put(&self.table, key, self.ops.fresh_value())?
                }
                OpKind::ReadModifyWrite => {
                    let old = txn.get(&self.table, key)?.map_or(0, first_word);
                    self.sink ^= std::hint::black_box(old);
                    txn.put(&self.table, key, self.ops.fresh_value())?;
                }
                OpKind::Scan => {
                    let hi = op.key.saturating_add(op.len).to_be_bytes();
                    let mut acc = 0u64;
                    for (_, v) in txn.range(
                        &self.table,
                        (Bound::Included(&key[..]), Bound::Excluded(&hi[..])),
                    )? {
                        acc ^= first_word(v);
                    }
                    self.sink ^= std::hint::black_box(acc);
                }
            }
        }
        crate::persist::commit(txn).map(drop)
    }

    /// One attempt at a range read of `scan_length` keys from `start`.
    fn scan_attempt(&mut self, start: u64) -> Result<(), verso_engine::Error> {
        let lo = start.to_be_bytes();
        // Keys past the last one do not exist, so [start, start + L) near the end of the
        // key space just returns fewer keys, as YCSB's scans do.
        let hi = start.saturating_add(self.scan_length).to_be_bytes();
        let txn = self.db.begin()?;
        let mut acc = 0u64;
        for (_, v) in txn.range(
            &self.table,
            (Bound::Included(&lo[..]), Bound::Excluded(&hi[..])),
        )? {
            acc ^= first_word(v);
        }
        self.sink ^= std::hint::black_box(acc);
        crate::persist::commit(txn).map(drop)
    }
}

impl Workload for EngineWorker<'_> {
    #[inline]
    fn txn(&mut self, ctl: &Control) -> Result<Option<u64>, BenchError> {
        let scan_start = if self.scan_length > 0 {
            Some(self.ops.chooser.next(&mut self.ops.rng))
        } else {
            self.ops.fill();
            None
        };
        let mut aborts = 0u64;
        let mut spin = Spin::default();
        loop {
            let result = match scan_start {
                Some(start) => self.scan_attempt(start),
                None => self.point_attempt(),
            };
            match result {
                Ok(()) => return Ok(Some(aborts)),
                Err(e) if e.is_conflict() => {
                    aborts += 1;
                    // After the run ends, stop retrying: nothing counts any more.
                    if aborts.is_multiple_of(64) && ctl.stopped() {
                        return Ok(None);
                    }
                    spin.spin();
                }
                Err(e) => return Err(e.into()),
            }
        }
    }
}

/// A thread that keeps running one read-only transaction over 1% of the keys, at uniformly
/// random positions: it holds back garbage collection for as long as it runs, which is what
/// `--long-readers` measures the effect of.
pub(crate) struct EngineLongReader<'db> {
    db: &'db Db,
    table: Table,
    rng: Rng,
    keys: u64,
    reads: u64,
    sink: u64,
}

impl EngineLongReader<'_> {
    fn read_all(&mut self, txn: &Txn<'_>, ctl: &Control) -> Result<bool, verso_engine::Error> {
        for i in 0..self.reads {
            // A long transaction must notice the end of the run without finishing.
            if i % 1024 == 1023 && ctl.stopped() {
                return Ok(false);
            }
            let key = self.rng.below(self.keys).to_be_bytes();
            self.sink ^= std::hint::black_box(txn.get(&self.table, key)?.map_or(0, first_word));
        }
        Ok(true)
    }
}

impl LongReader for EngineLongReader<'_> {
    fn read(&mut self, ctl: &Control) -> Result<bool, BenchError> {
        let txn = self.db.begin_read_only()?;
        let finished = self.read_all(&txn, ctl)?;
        if finished {
            crate::persist::commit(txn)?;
        }
        Ok(finished)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn draws(w: CoreWorkload, n: usize) -> (Vec<Op>, Arc<AtomicU64>) {
        let cfg = YcsbConfig {
            keys: 10_000,
            workload: Some(w),
            dist: Dist::Zipf,
            ..YcsbConfig::default()
        };
        let chooser = KeyChooser::new(cfg.dist, cfg.keys, cfg.theta).unwrap();
        let next = Arc::new(AtomicU64::new(cfg.keys));
        let latest = w
            .reads_latest()
            .then(|| Zipfian::new(cfg.keys, cfg.theta).unwrap());
        let mut ops = PointOps::with_key_counter(&cfg, chooser, 1, next.clone(), latest);
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            ops.fill();
            out.push(ops.op(0));
        }
        (out, next)
    }

    #[test]
    fn core_mixes_are_drawn_in_proportion() {
        const N: usize = 200_000;
        for w in CoreWorkload::ALL {
            let (ops, _) = draws(w, N);
            let share =
                |k: OpKind| 100.0 * ops.iter().filter(|o| o.kind == k).count() as f64 / N as f64;
            let m = w.mix();
            for (kind, want) in [
                (OpKind::Read, m.read),
                (OpKind::Write, m.update),
                (OpKind::Insert, m.insert),
                (OpKind::Scan, m.scan),
                (OpKind::ReadModifyWrite, m.read_modify_write),
            ] {
                let got = share(kind);
                assert!(
                    (got - f64::from(want)).abs() < 0.5,
                    "{w}: {kind:?} {got:.2}% for {want}%"
                );
            }
        }
    }

    #[test]
    fn inserts_take_fresh_keys_and_latest_reads_favour_them() {
        let (ops, next) = draws(CoreWorkload::D, 100_000);
        let inserted: Vec<u64> = ops
            .iter()
            .filter(|o| o.kind == OpKind::Insert)
            .map(|o| o.key)
            .collect();
        assert!(
            inserted.windows(2).all(|p| p[0] < p[1]),
            "insert keys repeat"
        );
        assert_eq!(inserted.first(), Some(&10_000));
        assert_eq!(next.load(Ordering::Relaxed), 10_000 + inserted.len() as u64);
        // Reads chase the newest keys: rank = how far below the newest key at the time.
        // Zipfian(0.99) over 10 000 ranks puts ~76% within rank 1000; uniform would be 10%.
        let mut newest = 9_999u64;
        let (mut reads, mut near) = (0, 0);
        for o in &ops {
            match o.kind {
                OpKind::Insert => newest = o.key,
                _ => {
                    reads += 1;
                    near += usize::from(newest - o.key < 1000);
                }
            }
        }
        assert!(near * 10 > reads * 7, "{near} of {reads} reads were recent");
        let (scans, _) = draws(CoreWorkload::E, 50_000);
        assert!(scans
            .iter()
            .filter(|o| o.kind == OpKind::Scan)
            .all(|o| (1..=SCAN_LENGTH_MAX).contains(&o.len)));
    }
}
