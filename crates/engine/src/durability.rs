//! The engine's side of durability: opening a data directory (recovery), logging commits,
//! checkpoints, and durability tickets. The log itself is `verso_log`.
//!
//! Recovery order: the catalog (table ids), the newest checkpoint (every entry at its
//! snapshot timestamp minus one), then the logs from the checkpoint's position, each write
//! installed only if newer than what its key holds. Timestamps then restart above every
//! timestamp recovered, and a new log generation begins.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use verso_log::{
    CheckpointBuilder, CheckpointMeta, DataDir, Logger, LoggerConfig, ReplaySummary, SyncMode,
    Ticket,
};

use std::ops::Bound;

use verso_index::Direction;

use crate::db::Db;
use crate::gc::GcEntry;
use crate::index::{OrderedIndex, RecordPtr};
use crate::record::Version;
use crate::{Durability, Error};

/// A commit's place in the redo log: wait for it with [`Db::wait_durable`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DurabilityTicket(pub(crate) u64);

impl DurabilityTicket {
    /// A ticket that is durable already (a commit that wrote nothing, or memory-only mode).
    pub const DURABLE: DurabilityTicket = DurabilityTicket(0);
}

/// What [`Db::open`] recovered.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RecoveryReport {
    /// The checkpoint loaded: its snapshot timestamp and entry count.
    pub checkpoint_ts: Option<u64>,
    pub checkpoint_entries: u64,
    /// The newest version timestamp in the checkpoint (0 without one).
    pub checkpoint_max_ts: u64,
    /// What log replay found and did.
    pub logs: ReplaySummary,
    pub duration: Duration,
}

/// What [`Db::checkpoint`] wrote.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct CheckpointReport {
    /// The snapshot timestamp: the checkpoint holds every transaction below it.
    pub ts: u64,
    pub entries: u64,
    pub bytes: u64,
    pub duration: Duration,
}

/// A durable database's log and directory.
pub(crate) struct Durable {
    pub(crate) logger: Logger,
    pub(crate) sync: bool,
    dir: Mutex<DataDir>,
    generation: u64,
    /// One checkpoint at a time.
    checkpointing: Mutex<()>,
    pub(crate) recovery: RecoveryReport,
    /// Log bytes written when the last checkpoint started (see `log_bytes_since_checkpoint`).
    checkpoint_log_bytes: AtomicU64,
}

/// Records taken from the index per step of a checkpoint scan.
const SCAN_CHUNK: usize = 64;

/// Parts a checkpoint is written in, in parallel.
pub const CHECKPOINT_PARTS: usize = 2;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Db {
    /// Opens the data directory, recovers into this (empty) `Db`, and starts logging.
    pub(crate) fn open_durable(&mut self) -> Result<(), Error> {
        let started = Instant::now();
        let options = self.options.clone();
        let (dir, catalog) =
            DataDir::open(&options.data_dir, options.storage.clone()).map_err(Error::durability)?;
        for name in &catalog {
            self.create_table_in_memory(name)?;
        }
        let mut report = RecoveryReport::default();
        let checkpoint = self.load_checkpoint(&dir, catalog.len(), &mut report)?;
        let from = checkpoint
            .as_ref()
            .map(CheckpointMeta::replay_from)
            .unwrap_or_default();
        let mut bad_table = None;
        let tables = catalog.len() as u32;
        let mut progress = progress_reporter();
        report.logs = verso_log::replay_logs(
            &dir,
            from,
            options.recovery_truncate,
            &mut progress,
            &mut |ts, w| {
                if w.table >= tables {
                    bad_table = Some(w.table);
                    return;
                }
                self.recover_write(w.table, w.key, w.value, ts);
            },
        )
        .map_err(Error::durability)?;
        if let Some(t) = bad_table {
            return Err(Error::Durability {
                reason: format!(
                    "a log names table {t}, but the catalog of {} has {tables} tables",
                    options.data_dir.display()
                ),
            });
        }
        self.collect_garbage();
        let (ckpt_ts, ckpt_gen, ckpt_epoch) = checkpoint
            .as_ref()
            .map_or((0, 0, 0), |m| (m.ts, m.generation, m.epoch));
        let newest = report
            .logs
            .max_ts
            .max(ckpt_ts)
            .max(report.checkpoint_max_ts);
        self.timestamps.raise_floor(newest + 1);
        let generation = report.logs.max_generation.max(ckpt_gen) + 1;
        let logger = Logger::start(LoggerConfig {
            dir: options.data_dir.clone(),
            storage: options.storage.clone(),
            mode: match options.durability {
                Durability::Sync => SyncMode::Sync,
                _ => SyncMode::Lazy {
                    interval: options.fsync_interval,
                },
            },
            logs: options.logs,
            generation,
            first_epoch: report.logs.max_epoch.max(ckpt_epoch) + 1,
        })
        .map_err(Error::durability)?;
        report.duration = started.elapsed();
        if report.logs.txns_replayed > 0 || report.checkpoint_ts.is_some() {
            tracing::info!(
                checkpoint_entries = report.checkpoint_entries,
                txns_replayed = report.logs.txns_replayed,
                txns_dropped = report.logs.txns_dropped,
                ms = report.duration.as_millis() as u64,
                "recovered {}",
                options.data_dir.display()
            );
        }
        self.durable = Some(Durable {
            logger,
            sync: options.durability == Durability::Sync,
            dir: Mutex::new(dir),
            generation,
            checkpointing: Mutex::new(()),
            recovery: report,
            checkpoint_log_bytes: AtomicU64::new(0),
        });
        Ok(())
    }

    fn load_checkpoint(
        &self,
        dir: &DataDir,
        tables: usize,
        report: &mut RecoveryReport,
    ) -> Result<Option<CheckpointMeta>, Error> {
        let entries = AtomicU64::new(0);
        let max_ts = AtomicU64::new(0);
        let bad_table = AtomicU64::new(u64::MAX);
        let meta = verso_log::load_newest_checkpoint(dir, &|_, part| {
            let (mut n, mut top) = (0, 0);
            for (table, ts, key, value) in part {
                if table as usize >= tables {
                    bad_table.store(u64::from(table), Ordering::Relaxed);
                    return;
                }
                self.recover_write(table, key, Some(value), ts);
                n += 1;
                top = top.max(ts);
            }
            entries.fetch_add(n, Ordering::Relaxed);
            max_ts.fetch_max(top, Ordering::Relaxed);
        })
        .map_err(Error::durability)?;
        if bad_table.load(Ordering::Relaxed) != u64::MAX {
            return Err(Error::Durability {
                reason: "a checkpoint names a table the catalog does not have".into(),
            });
        }
        report.checkpoint_ts = meta.as_ref().map(|m| m.ts);
        report.checkpoint_max_ts = max_ts.load(Ordering::Relaxed);
        report.checkpoint_entries = entries.load(Ordering::Relaxed);
        Ok(meta)
    }

    /// Installs a recovered write at `ts` unless the key already holds something as new.
    /// Only during `open`: no transaction runs yet (loads of checkpoint parts run in
    /// parallel, each on its own keys).
    fn recover_write(&self, table: u32, key: &[u8], value: Option<&[u8]>, ts: u64) {
        let state = self.table_state_by_id(table);
        let record = state
            .index
            .get_or_insert_with(key, |gap| RecordPtr::alloc(table, key, gap, value));
        let r = record.get();
        if r.newest().is_some_and(|v| v.ts() >= ts) {
            return;
        }
        r.lock_for_install(ts);
        if let Some(superseded) = r.install(Version::new_in(record, ts, value)) {
            let site = (ts as usize) % self.gc.len();
            lock(&self.gc[site]).extend(std::iter::once(GcEntry::new(record, superseded)));
        }
        r.unlock(ts);
    }

    /// Records a new table in the catalog (durably) before it is used.
    pub(crate) fn log_new_table(&self, id: u32, name: &str) -> Result<(), Error> {
        match &self.durable {
            Some(d) => Ok(lock(&d.dir)
                .add_table(id, name)
                .map_err(Error::durability)?),
            None => Ok(()),
        }
    }

    /// Waits until the commit that returned `ticket` is on disk.
    pub fn wait_durable(&self, ticket: DurabilityTicket) -> Result<(), Error> {
        match &self.durable {
            Some(d) if ticket.0 > 0 => Ok(d
                .logger
                .wait(Ticket { epoch: ticket.0 })
                .map_err(Error::durability)?),
            _ => Ok(()),
        }
    }

    /// A ticket durable once every write visible now is: what an answer built from reads
    /// waits for when its transaction did not commit (an error reply, an aborted EXEC).
    /// Take it after the reads. [`DurabilityTicket::DURABLE`] when nothing is in flight.
    pub fn read_ticket(&self) -> DurabilityTicket {
        match &self.durable {
            Some(d) => {
                let t = d.logger.read_ticket();
                if d.logger.is_durable(t) {
                    DurabilityTicket::DURABLE
                } else {
                    DurabilityTicket(t.epoch)
                }
            }
            None => DurabilityTicket::DURABLE,
        }
    }

    /// Whether the commit that returned `ticket` is on disk (always, when memory-only).
    pub fn is_durable(&self, ticket: DurabilityTicket) -> bool {
        match &self.durable {
            Some(d) => d.logger.is_durable(Ticket { epoch: ticket.0 }),
            None => true,
        }
    }

    /// Makes every commit so far durable (a no-op when memory-only).
    pub fn flush(&self) -> Result<(), Error> {
        match &self.durable {
            Some(d) => Ok(d.logger.flush().map_err(Error::durability)?),
            None => Ok(()),
        }
    }

    /// Calls `f` from the log's flusher after each round that made commits durable (to
    /// wake an event loop holding replies); does nothing when memory-only.
    pub fn on_durable(&self, f: impl Fn() + Send + Sync + 'static) {
        if let Some(d) = &self.durable {
            d.logger.on_durable(move |_| f());
        }
    }

    /// Why the redo log stopped accepting writes (an I/O or `fsync` error), if it did:
    /// every write is refused from then on, and tickets not yet durable never will be.
    pub fn durability_failure(&self) -> Option<String> {
        let d = self.durable.as_ref()?;
        d.logger.check_writable().err().map(|e| e.to_string())
    }

    /// The durability mode in force.
    pub fn durability(&self) -> Durability {
        self.options.durability
    }

    /// What `open` recovered (`None` when memory-only).
    pub fn recovery_report(&self) -> Option<&RecoveryReport> {
        self.durable.as_ref().map(|d| &d.recovery)
    }

    /// Bytes written to the redo logs since the last checkpoint began.
    pub fn log_bytes_since_checkpoint(&self) -> u64 {
        self.durable.as_ref().map_or(0, |d| {
            d.logger
                .bytes_written()
                .saturating_sub(d.checkpoint_log_bytes.load(Ordering::Relaxed))
        })
    }

    /// Writes a checkpoint while others keep committing: every live key's newest committed
    /// version with its timestamp, read in chunks (each under a short read-only
    /// transaction, so garbage collection is not held back), written in parallel parts,
    /// published atomically once the log is durable past everything it read; then deletes
    /// the logs and older checkpoints it covers. Recovery = this + every logged transaction
    /// after its rotation point (newest timestamp per key wins), up to the log's cut.
    pub fn checkpoint(&self) -> Result<CheckpointReport, Error> {
        self.checkpoint_paced(None)
    }

    /// As [`checkpoint`](Self::checkpoint), reading at most `bytes_per_sec` of keys and
    /// values per second on average: a background checkpoint that leaves the cores to the
    /// workload (on a 2-core machine a full-speed checkpoint takes about half of them).
    pub fn checkpoint_throttled(&self, bytes_per_sec: u64) -> Result<CheckpointReport, Error> {
        self.checkpoint_paced(Some(bytes_per_sec.max(1)))
    }

    fn checkpoint_paced(&self, rate: Option<u64>) -> Result<CheckpointReport, Error> {
        let d = self.durable.as_ref().ok_or(Error::Unsupported {
            what: "checkpoints of a memory-only database (open it with a durability mode)",
        })?;
        let _one = lock(&d.checkpointing);
        let started = Instant::now();
        d.checkpoint_log_bytes
            .store(d.logger.bytes_written(), Ordering::Relaxed);
        // Rotate first: the old files then hold only transactions below the snapshot.
        let seq = d.logger.rotate().map_err(Error::durability)?;
        // Names the checkpoint; every version it holds is at most as new as the last chunk's.
        let ts = self.timestamps.fresh(0);
        let tables = self.table_names();
        let builder = CheckpointBuilder::create(&lock(&d.dir), ts).map_err(Error::durability)?;
        let mut parts = Vec::with_capacity(CHECKPOINT_PARTS);
        for i in 0..CHECKPOINT_PARTS {
            parts.push(builder.part(i as u32).map_err(Error::durability)?);
        }
        let (per_part, bytes) = std::thread::scope(|s| -> Result<(Vec<u64>, u64), Error> {
            let mut senders = Vec::new();
            let mut writers = Vec::new();
            for mut part in parts {
                let (tx, rx) = std::sync::mpsc::sync_channel::<(u32, Vec<u8>)>(4);
                senders.push(tx);
                writers.push(s.spawn(move || -> Result<u64, verso_log::LogError> {
                    for (n, batch) in rx {
                        part.add_encoded(n, &batch)?;
                    }
                    part.finish()
                }));
            }
            let mut bytes = 0u64;
            let mut batch = Vec::with_capacity(verso_log::CHECKPOINT_BATCH_BYTES + 4096);
            let mut n = 0u32;
            let mut next = 0usize;
            let scan_started = Instant::now();
            let mut send = |batch: &mut Vec<u8>, n: &mut u32| -> bool {
                bytes += batch.len() as u64;
                if let Some(rate) = rate {
                    let due = Duration::from_secs_f64(bytes as f64 / rate as f64);
                    if let Some(wait) = due.checked_sub(scan_started.elapsed()) {
                        std::thread::sleep(wait);
                    }
                }
                let full = std::mem::replace(
                    batch,
                    Vec::with_capacity(verso_log::CHECKPOINT_BATCH_BYTES + 4096),
                );
                let ok = senders[next % senders.len()].send((*n, full)).is_ok();
                next += 1;
                *n = 0;
                ok
            };
            'scan: for id in 0..tables.len() as u32 {
                let state = self.table_state_by_id(id);
                let mut lo: Option<Vec<u8>> = None;
                let mut chunk: Vec<RecordPtr> = Vec::with_capacity(SCAN_CHUNK);
                loop {
                    chunk.clear();
                    let start = lo.as_deref().map_or(Bound::Unbounded, Bound::Excluded);
                    // A fuzzy checkpoint: each chunk reads the newest committed versions under
                    // its own short read-only transaction, so GC is held back by one chunk,
                    // not by the whole scan (module docs: why recovery stays consistent).
                    // It begins before the scan: the records found stay allocated while it
                    // is active even if they leave the index meanwhile (`gc.rs`).
                    let txn = self.begin_read_only()?;
                    // Stamp 0: the checkpoint leaves no gap stamps (it reads invisibly).
                    let done =
                        state
                            .index
                            .scan(start, Bound::Unbounded, Direction::Forward, 0, |r| {
                                chunk.push(r);
                                chunk.len() < SCAN_CHUNK
                            });
                    let (chunk_ts, walk) = (txn.timestamp(), txn.walk_word());
                    for r in &chunk {
                        let record = r.get();
                        // Waits out an in-flight commit below `chunk_ts`.
                        let Some(v) = record.read_snapshot(chunk_ts, walk) else {
                            continue;
                        };
                        let Some(value) = v.value() else { continue };
                        verso_log::PartWriter::encode(&mut batch, id, v.ts(), r.key(), value);
                        n += 1;
                    }
                    drop(txn);
                    if let Some(last) = chunk.last() {
                        lo = Some(last.key().to_vec());
                    }
                    if batch.len() >= verso_log::CHECKPOINT_BATCH_BYTES && !send(&mut batch, &mut n)
                    {
                        break 'scan;
                    }
                    if done || chunk.is_empty() {
                        break;
                    }
                }
            }
            if n > 0 {
                send(&mut batch, &mut n);
            }
            drop(senders);
            let mut per_part = Vec::new();
            for w in writers {
                per_part.push(
                    w.join()
                        .expect("checkpoint writer panicked")
                        .map_err(Error::durability)?,
                );
            }
            Ok((per_part, bytes))
        })?;
        // Every transaction the scan saw read an epoch <= this before installing.
        let epoch = d.logger.current_epoch();
        d.logger.wait(Ticket { epoch }).map_err(Error::durability)?;
        let meta = CheckpointMeta {
            ts,
            generation: d.generation,
            seq,
            epoch,
            tables,
            parts: per_part,
        };
        builder
            .finish(&lock(&d.dir), &meta)
            .map_err(Error::durability)?;
        Ok(CheckpointReport {
            ts,
            entries: meta.parts.iter().sum(),
            bytes,
            duration: started.elapsed(),
        })
    }
}

/// A progress bar on stderr for large recoveries, only when stderr is a terminal.
fn progress_reporter() -> impl FnMut(u64, u64) {
    use std::io::IsTerminal;
    let tty = std::io::stderr().is_terminal();
    let mut last = Instant::now();
    move |done: u64, total: u64| {
        if !tty || total < (64 << 20) || last.elapsed() < Duration::from_millis(200) {
            return;
        }
        last = Instant::now();
        let pct = done as f64 * 100.0 / total.max(1) as f64;
        let bar = "#".repeat((pct / 5.0) as usize);
        eprint!(
            "\rrecovering: [{bar:<20}] {pct:5.1}% of {} MiB",
            total >> 20
        );
        if done >= total {
            eprintln!();
        }
    }
}
