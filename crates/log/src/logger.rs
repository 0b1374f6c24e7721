//! The redo log at run time: one buffer and one file per worker log, epochs, and a flusher
//! thread that makes each epoch durable with one write and one `fdatasync` per log.
//!
//! # Epochs (Silo's group commit, with the thesis §3.2 cut)
//! `epoch` is a global counter. A committing transaction, holding its write locks and before
//! installing anything, locks its log's buffer, reads `epoch` and appends its write set tagged
//! with it. The flusher, each round, (1) increments `epoch` from `e` to `e + 1`, (2) takes
//! every buffer's bytes under its lock, (3) appends a mark "epoch `e` is complete" to each,
//! (4) writes and `fdatasync`s every log, and (5) publishes `durable = e`.
//!
//! Invariant: after step 2, every transaction tagged `<= e` is in the bytes taken, because
//! it read `epoch` under the buffer lock before the flusher took that lock, and one that
//! takes the lock afterwards reads `e + 1`.
//!
//! Invariant: if `T2` read or overwrote a write of `T1`, then `epoch(T1) <= epoch(T2)`:
//! `T1` read the epoch before installing, `T2` read it after seeing the install.
//!
//! So "every transaction with epoch `<= D`", where `D` is the smallest mark every log has on
//! disk, is a prefix of the commit order closed under dependencies: recovery replays exactly
//! that (`recovery.rs`), and a commit is acknowledged in `sync` mode once `durable >= epoch`.
//!
//! A transaction that only read has no epoch of its own, yet what it read may still be lost
//! to a crash: its answer waits for [`Logger::read_ticket`] taken after its reads, the
//! largest epoch any append was tagged with (by the second invariant, at least the epoch of
//! every write it saw). Usually that is durable already and nothing waits.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::dir::LogFileId;
use crate::record::{
    append_header, append_mark, append_pad_to, append_txn, txn_record_len, LogHeader,
};
use crate::storage::{AppendFile, Storage};
use crate::{LogError, LOG_FORMAT_VERSION};

/// When a commit is acknowledged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SyncMode {
    /// At once; the flusher makes the log durable at least every `interval`.
    Lazy { interval: Duration },
    /// Only once the commit is on disk (group commit: one `fdatasync` per log per round).
    Sync,
}

/// A buffer that grows past this makes its committer wait for the flusher (back-pressure when
/// the disk is slower than the commits).
pub const LOG_BUFFER_BYTES_MAX: usize = 64 << 20;
/// A log file rolls over to the next one after this many bytes.
pub const LOG_FILE_BYTES_MAX: u64 = 256 << 20;
/// Every log write is whole blocks of this size from memory aligned to it (direct I/O).
pub const LOG_BLOCK_BYTES: usize = 4096;
/// Largest transaction record (the frame limit).
pub const TXN_RECORD_BYTES_MAX: u64 = crate::frame::FRAME_PAYLOAD_MAX as u64;

/// What a new generation of logs needs to start.
pub struct LoggerConfig {
    pub dir: PathBuf,
    pub storage: Arc<dyn Storage>,
    pub mode: SyncMode,
    /// Number of worker logs (one file each at a time).
    pub logs: usize,
    /// This run's generation: larger than every generation on disk.
    pub generation: u64,
    /// First epoch this run hands out: larger than every epoch on disk.
    pub first_epoch: u64,
}

/// A callback run after each flush round with the durable epoch.
type Listener = Box<dyn Fn(u64) + Send + Sync>;

struct LogBuffer {
    bytes: Vec<u8>,
}

/// State shared by committers, waiters and the flusher.
struct Shared {
    /// The epoch new commits join.
    epoch: AtomicU64,
    /// The largest epoch an append was tagged with (0: none yet). Raised before the append
    /// returns, so before the writer installs anything a reader could see.
    appended: AtomicU64,
    /// Invariant: every transaction tagged with an epoch `<= durable` is on disk in its log,
    /// followed by a mark `>= durable`.
    durable: AtomicU64,
    buffers: Box<[crossbeam_pad::Padded<Mutex<LogBuffer>>]>,
    /// Set when a buffer gains bytes; cleared by the flusher when it takes them.
    pending: AtomicBool,
    /// Threads blocked in `wait` (or `flush`, `rotate`): in lazy mode they make the flusher
    /// run a round now instead of at the next interval.
    waiters: AtomicU64,
    /// Set once, on the first write or sync error: no commit is accepted afterwards.
    failed: OnceLock<String>,
    /// `durable` changes are broadcast here (the mutex guards nothing but the wait).
    progress: Mutex<()>,
    progressed: Condvar,
    /// Called after every round with the new durable epoch (the server wakes its workers).
    listeners: Mutex<Vec<Listener>>,
    /// Requests for a round that also starts new files, with the seq they asked for.
    rotate_to: Mutex<Option<u64>>,
    /// The seq of the files being written now.
    seq: AtomicU64,
    /// Bytes written to log files so far (by the flusher).
    written: AtomicU64,
    shutdown: AtomicBool,
    flusher: OnceLock<std::thread::Thread>,
    mode: SyncMode,
}

/// Tiny stand-in for `crossbeam_utils::CachePadded` (avoids a dependency for one type).
mod crossbeam_pad {
    #[repr(align(128))]
    pub struct Padded<T>(pub T);
}

/// The running redo log of one database. Dropping it flushes what is buffered and stops the
/// flusher.
pub struct Logger {
    shared: Arc<Shared>,
    flusher: Option<JoinHandle<()>>,
}

/// A commit's place in the log: it is durable once [`Logger::durable_epoch`] reaches `epoch`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Ticket {
    pub epoch: u64,
}

impl Logger {
    /// Creates this generation's files (header and a starting mark, synced) and starts the
    /// flusher.
    pub fn start(config: LoggerConfig) -> Result<Logger, LogError> {
        assert!(config.logs >= 1 && config.logs <= 1024);
        assert!(config.first_epoch >= 1);
        let mut files = Vec::with_capacity(config.logs);
        for log in 0..config.logs {
            let id = LogFileId {
                generation: config.generation,
                log: log as u32,
                seq: 0,
            };
            files.push(open_log_file(&config, id, config.first_epoch - 1)?);
        }
        config
            .storage
            .sync_dir(&config.dir)
            .map_err(LogError::io(&config.dir))?;
        let shared = Arc::new(Shared {
            epoch: AtomicU64::new(config.first_epoch),
            appended: AtomicU64::new(0),
            durable: AtomicU64::new(config.first_epoch - 1),
            buffers: (0..config.logs)
                .map(|_| {
                    crossbeam_pad::Padded(Mutex::new(LogBuffer {
                        bytes: Vec::with_capacity(1 << 20),
                    }))
                })
                .collect(),
            pending: AtomicBool::new(false),
            waiters: AtomicU64::new(0),
            failed: OnceLock::new(),
            progress: Mutex::new(()),
            progressed: Condvar::new(),
            listeners: Mutex::new(Vec::new()),
            rotate_to: Mutex::new(None),
            seq: AtomicU64::new(0),
            written: AtomicU64::new(0),
            shutdown: AtomicBool::new(false),
            flusher: OnceLock::new(),
            mode: config.mode,
        });
        let flusher = {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name("verso-log-flusher".into())
                .spawn(move || {
                    Flusher {
                        shared,
                        config,
                        files,
                        staging: Vec::new(),
                    }
                    .run()
                })
                .map_err(|e| LogError::Io {
                    path: "flusher thread".into(),
                    source: e,
                })?
        };
        shared
            .flusher
            .set(flusher.thread().clone())
            .expect("set once");
        Ok(Logger {
            shared,
            flusher: Some(flusher),
        })
    }

    /// Number of worker logs.
    pub fn logs(&self) -> usize {
        self.shared.buffers.len()
    }

    pub fn mode(&self) -> SyncMode {
        self.shared.mode
    }

    /// Fails if the log can no longer be written: check before committing, so a transaction
    /// is refused rather than acknowledged and lost.
    pub fn check_writable(&self) -> Result<(), LogError> {
        match self.shared.failed.get() {
            Some(reason) => Err(LogError::Failed {
                reason: reason.clone(),
            }),
            None => Ok(()),
        }
    }

    /// Checks a write set fits in one record (before the transaction locks anything).
    pub fn check_size<'a>(
        &self,
        writes: impl Iterator<Item = (u32, &'a [u8], Option<&'a [u8]>)>,
    ) -> Result<(), LogError> {
        let bytes = txn_record_len(writes);
        if bytes > TXN_RECORD_BYTES_MAX {
            return Err(LogError::TooLarge {
                bytes,
                max: TXN_RECORD_BYTES_MAX,
            });
        }
        Ok(())
    }

    /// Appends a committed write set to worker log `log` (any number; it is reduced modulo
    /// the log count). Call it holding the write locks, before installing (module docs).
    /// Never blocks on the disk unless the buffer is over [`LOG_BUFFER_BYTES_MAX`].
    pub fn append<'a>(
        &self,
        log: usize,
        ts: u64,
        writes: impl ExactSizeIterator<Item = (u32, &'a [u8], Option<&'a [u8]>)>,
    ) -> Ticket {
        let shared = &*self.shared;
        let mut buf = lock(&shared.buffers[log % shared.buffers.len()].0);
        // Read under the buffer lock: see the module docs' first invariant.
        let epoch = shared.epoch.load(Ordering::SeqCst);
        append_txn(&mut buf.bytes, epoch, ts, writes);
        let over = buf.bytes.len() > LOG_BUFFER_BYTES_MAX;
        drop(buf);
        // The epoch changes once a round: mostly a read of a line every committer shares.
        if shared.appended.load(Ordering::SeqCst) < epoch {
            shared.appended.fetch_max(epoch, Ordering::SeqCst);
        }
        if !shared.pending.load(Ordering::Relaxed) {
            shared.pending.store(true, Ordering::SeqCst);
            if shared.mode == SyncMode::Sync {
                self.wake_flusher();
            }
        }
        let ticket = Ticket { epoch };
        if over {
            self.wake_flusher();
            // Back-pressure; an error here reaches the caller on its next commit.
            let _ = self.wait(ticket);
        }
        ticket
    }

    fn wake_flusher(&self) {
        if let Some(t) = self.shared.flusher.get() {
            t.unpark();
        }
    }

    /// The largest epoch every log has on disk.
    pub fn durable_epoch(&self) -> u64 {
        self.shared.durable.load(Ordering::Acquire)
    }

    /// Whether the commit holding `ticket` is on disk.
    pub fn is_durable(&self, ticket: Ticket) -> bool {
        self.durable_epoch() >= ticket.epoch
    }

    /// The epoch commits join now. Once `durable_epoch()` reaches it, everything that
    /// committed before this call is durable.
    pub fn current_epoch(&self) -> u64 {
        self.shared.epoch.load(Ordering::SeqCst)
    }

    /// The ticket of a transaction that only read, taken after its reads: durable once
    /// every write it could have seen is (module docs). Already durable, usually.
    pub fn read_ticket(&self) -> Ticket {
        Ticket {
            epoch: self.shared.appended.load(Ordering::SeqCst),
        }
    }

    /// Blocks until `ticket` is durable, or the log fails.
    pub fn wait(&self, ticket: Ticket) -> Result<(), LogError> {
        if self.is_durable(ticket) {
            return Ok(());
        }
        self.wait_until(|| self.is_durable(ticket))
    }

    /// Blocks until `done()` holds after a round, or the log fails.
    fn wait_until(&self, done: impl Fn() -> bool) -> Result<(), LogError> {
        let shared = &*self.shared;
        shared.waiters.fetch_add(1, Ordering::SeqCst);
        self.wake_flusher();
        let mut guard = lock(&shared.progress);
        let result = loop {
            if done() {
                break Ok(());
            }
            if let Err(e) = self.check_writable() {
                break Err(e);
            }
            guard = shared
                .progressed
                .wait_timeout(guard, Duration::from_millis(100))
                .unwrap_or_else(|e| e.into_inner())
                .0;
        };
        drop(guard);
        shared.waiters.fetch_sub(1, Ordering::SeqCst);
        result
    }

    /// Makes everything committed so far durable and returns once it is.
    pub fn flush(&self) -> Result<(), LogError> {
        self.shared.pending.store(true, Ordering::SeqCst);
        let ticket = Ticket {
            epoch: self.current_epoch(),
        };
        self.wait(ticket)
    }

    /// Calls `f(durable_epoch)` after every flush round (from the flusher thread: keep it
    /// short, e.g. wake an event loop).
    pub fn on_durable(&self, f: impl Fn(u64) + Send + Sync + 'static) {
        lock(&self.shared.listeners).push(Box::new(f));
    }

    /// Closes the current files and continues in new ones; returns once every record
    /// appended before the call is in the old files and the new ones exist. Returns the new
    /// files' seq. (Checkpoints rotate first, so the old files can be deleted once the
    /// checkpoint is complete.)
    pub fn rotate(&self) -> Result<u64, LogError> {
        self.check_writable()?;
        let target = self.shared.seq.load(Ordering::SeqCst) + 1;
        {
            let mut r = lock(&self.shared.rotate_to);
            *r = Some(r.map_or(target, |t| t.max(target)));
        }
        self.shared.pending.store(true, Ordering::SeqCst);
        self.wait_until(|| self.shared.seq.load(Ordering::SeqCst) >= target)?;
        Ok(target)
    }

    /// Bytes written to the log files by this run.
    pub fn bytes_written(&self) -> u64 {
        self.shared.written.load(Ordering::Relaxed)
    }

    /// The generation's files being written now have this seq.
    pub fn seq(&self) -> u64 {
        self.shared.seq.load(Ordering::SeqCst)
    }
}

impl Drop for Logger {
    fn drop(&mut self) {
        self.shared.shutdown.store(true, Ordering::SeqCst);
        self.wake_flusher();
        if let Some(h) = self.flusher.take() {
            let _ = h.join();
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn open_log_file(
    config: &LoggerConfig,
    id: LogFileId,
    mark: u64,
) -> Result<(LogFileId, Box<dyn AppendFile>, u64), LogError> {
    let path = config.dir.join(id.file_name());
    let mut f = config
        .storage
        .create_direct(&path)
        .map_err(LogError::io(&path))?;
    let mut bytes = Vec::new();
    append_header(
        &mut bytes,
        &LogHeader {
            format_version: LOG_FORMAT_VERSION,
            generation: id.generation,
            log: id.log,
            seq: id.seq,
        },
    );
    append_mark(&mut bytes, mark);
    append_pad_to(&mut bytes, LOG_BLOCK_BYTES);
    let mut staging = Vec::new();
    f.write_all(aligned_copy(&mut staging, &bytes))
        .and_then(|()| f.sync_data())
        .map_err(LogError::io(&path))?;
    Ok((id, f, bytes.len() as u64))
}

/// `bytes` copied into `staging` at a [`LOG_BLOCK_BYTES`]-aligned address (direct I/O needs
/// aligned memory; a `Vec<u8>` is only byte-aligned, so the copy starts inside it).
fn aligned_copy<'s>(staging: &'s mut Vec<u8>, bytes: &[u8]) -> &'s [u8] {
    assert_eq!(bytes.len() % LOG_BLOCK_BYTES, 0);
    staging.clear();
    staging.resize(bytes.len() + LOG_BLOCK_BYTES, 0);
    let offset = staging.as_ptr().align_offset(LOG_BLOCK_BYTES);
    assert!(offset < LOG_BLOCK_BYTES);
    staging[offset..offset + bytes.len()].copy_from_slice(bytes);
    &staging[offset..offset + bytes.len()]
}

struct Flusher {
    shared: Arc<Shared>,
    config: LoggerConfig,
    /// Per log: the file being written, and its length.
    /// Invariant: every length is a multiple of [`LOG_BLOCK_BYTES`].
    files: Vec<(LogFileId, Box<dyn AppendFile>, u64)>,
    /// Where a round's bytes are copied to be written from aligned memory.
    staging: Vec<u8>,
}

impl Flusher {
    fn run(mut self) {
        let mut spare: Vec<Vec<u8>> = (0..self.files.len()).map(|_| Vec::new()).collect();
        let mut last_round = Instant::now();
        loop {
            let shutdown = self.shared.shutdown.load(Ordering::SeqCst);
            let due = match self.shared.mode {
                // Anyone waiting (a checkpoint waiting out the current epoch, say) needs a
                // round even when no buffer has bytes.
                SyncMode::Sync => {
                    self.shared.pending.load(Ordering::SeqCst)
                        || self.shared.waiters.load(Ordering::SeqCst) > 0
                }
                SyncMode::Lazy { interval } => {
                    last_round.elapsed() >= interval
                        || self.shared.waiters.load(Ordering::SeqCst) > 0
                }
            };
            if due || shutdown {
                last_round = Instant::now();
                if let Err(reason) = self.round(&mut spare) {
                    tracing::error!(%reason, "redo log write failed; refusing further writes");
                    let _ = self.shared.failed.set(reason);
                    self.broadcast();
                    return;
                }
                self.broadcast();
                if shutdown {
                    return;
                }
                continue;
            }
            match self.shared.mode {
                SyncMode::Sync => std::thread::park_timeout(Duration::from_millis(5)),
                SyncMode::Lazy { interval } => {
                    std::thread::park_timeout(interval.saturating_sub(last_round.elapsed()))
                }
            }
        }
    }

    /// One round: close the epoch, take every buffer, write, sync, publish.
    fn round(&mut self, spare: &mut [Vec<u8>]) -> Result<(), String> {
        let shared = &*self.shared;
        shared.pending.store(false, Ordering::SeqCst);
        // Taken before the buffers: whatever was appended before `rotate` asked is in them.
        let rotate = lock(&shared.rotate_to).take();
        let closed = shared.epoch.fetch_add(1, Ordering::SeqCst);
        for (i, buf) in shared.buffers.iter().enumerate() {
            let mut b = lock(&buf.0);
            std::mem::swap(&mut b.bytes, &mut spare[i]);
        }
        for (i, bytes) in spare.iter_mut().enumerate() {
            append_mark(bytes, closed);
            append_pad_to(bytes, LOG_BLOCK_BYTES);
            let (id, file, len) = &mut self.files[i];
            let path = self.config.dir.join(id.file_name());
            file.write_all(aligned_copy(&mut self.staging, bytes))
                .map_err(|e| format!("{}: write: {e}", path.display()))?;
            *len += bytes.len() as u64;
            shared
                .written
                .fetch_add(bytes.len() as u64, Ordering::Relaxed);
            bytes.clear();
        }
        for (id, file, _) in &mut self.files {
            let path = self.config.dir.join(id.file_name());
            file.sync_data()
                .map_err(|e| format!("{}: fdatasync: {e}", path.display()))?;
        }
        shared.durable.store(closed, Ordering::Release);
        let full = self
            .files
            .iter()
            .any(|(_, _, len)| *len > LOG_FILE_BYTES_MAX);
        if rotate.is_some() || full {
            let seq = rotate.unwrap_or(0).max(self.files[0].0.seq + 1);
            for log in 0..self.files.len() {
                let id = LogFileId {
                    generation: self.config.generation,
                    log: log as u32,
                    seq,
                };
                // The new file starts with the mark just made durable, so a reader of the
                // new files alone knows how far this log got.
                self.files[log] =
                    open_log_file(&self.config, id, closed).map_err(|e| e.to_string())?;
            }
            self.config
                .storage
                .sync_dir(&self.config.dir)
                .map_err(|e| format!("{}: fsync: {e}", self.config.dir.display()))?;
            shared.seq.store(seq, Ordering::SeqCst);
        }
        Ok(())
    }

    fn broadcast(&self) {
        let durable = self.shared.durable.load(Ordering::Acquire);
        {
            let _g = lock(&self.shared.progress);
            self.shared.progressed.notify_all();
        }
        for f in lock(&self.shared.listeners).iter() {
            f(durable);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn start(dir: &std::path::Path, mode: SyncMode) -> Logger {
        Logger::start(LoggerConfig {
            dir: dir.into(),
            storage: Arc::new(crate::OsStorage),
            mode,
            logs: 2,
            generation: 1,
            first_epoch: 1,
        })
        .unwrap()
    }

    /// A regression: in sync mode, waiting for an epoch with nothing logged in it (what a
    /// checkpoint does) never ran a round, so the wait never ended.
    #[test]
    fn waiting_for_an_empty_epoch_ends_in_every_mode() {
        for mode in [
            SyncMode::Sync,
            SyncMode::Lazy {
                interval: Duration::from_secs(5),
            },
        ] {
            let dir = tempfile::tempdir().unwrap();
            let log = start(dir.path(), mode);
            let epoch = log.current_epoch();
            let started = Instant::now();
            log.wait(Ticket { epoch }).unwrap();
            assert!(log.durable_epoch() >= epoch);
            // Lazy waits do not sit out the interval either.
            assert!(started.elapsed() < Duration::from_secs(4), "{mode:?}");
            let seq = log.rotate().unwrap();
            assert_eq!(log.seq(), seq);
        }
    }

    #[test]
    fn tickets_become_durable_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let log = start(dir.path(), SyncMode::Sync);
        let mut last = Ticket { epoch: 0 };
        for i in 0..50u32 {
            let key = i.to_be_bytes();
            let t = log.append(
                i as usize,
                u64::from(i) + 1,
                [(0, &key[..], None)].into_iter(),
            );
            assert!(t >= last);
            last = t;
        }
        log.wait(last).unwrap();
        assert!(log.is_durable(last));
        assert!(log.bytes_written() > 0);
    }
}
