//! A replica's disk (thesis Fig 4-2c): one append-only file of the replica's disk writes
//! (`verso_vsr::DiskWrite`), each a checksummed frame, replayed through
//! `Durable::apply` at start. Writes go to a background thread that appends them in order
//! and `fdatasync`s when the replica asks for a sync (Lazy VSR asks in the background; only
//! a view's first entry and, under VSR-Sync, every entry wait for it).
//!
//! File format: `"VSRDISK1"`, then frames `len: u32 LE | crc32c(len ++ payload): u32 LE |
//! payload (postcard)`. A torn or corrupt frame ends the log: recovery keeps the frames
//! before it and cuts the file there (a crash may lose an unsynced suffix, which the
//! protocol allows; damage before the last sync is reported as an error instead).
//!
//! Compaction (thesis §4.2.2): a `Checkpoint` write first has its engine data written to a
//! file beside the log (`checkpoint.rs`), then its frame appended. The data is written by a
//! thread of its own, which may take seconds for a large database: meanwhile `Append`s,
//! `View`s, syncs and a view change's `Truncate` (one that keeps what the checkpoint covers)
//! go ahead of the checkpoint (`verso_vsr::DiskWrite::may_pass_checkpoint`), so `WAIT`,
//! VSR-Sync's writes, the slot moves' synchronous records and a backup rejoining a new view
//! do not wait for it; any other write waits, with everything after it. Once the data is in, the frame is
//! appended, the file synced, and the replica told (`DiskDone::Checkpoint`). Once the replica trims
//! its log (`TrimLog`, after the checkpoint is synced), the file is rewritten: the view, the
//! checkpoint, a `LogBase`, and the live entries only, into `vsr.log.tmp`, synced and
//! renamed over the log. The thread knows which frame holds each live entry (`Layout`), so
//! the rewrite reads back only those frames. Superseded checkpoint data files are removed
//! once the checkpoint replacing them is synced.

use std::collections::VecDeque;
use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};

use verso_engine::Db;
use verso_vsr::{DiskWrite, Durable, ViewNum, Viewstamp};

use crate::checkpoint::GcPin;

use crate::op::{Batch, EngineSnapshot};

pub type Disk = Durable<Batch, (), EngineSnapshot>;
pub type Write_ = DiskWrite<Batch, (), EngineSnapshot>;

const MAGIC: &[u8; 8] = b"VSRDISK1";
/// Largest frame accepted at recovery (checked before allocating).
const FRAME_MAX: u32 = 1 << 30;

impl Recovered {
    /// Where the disk lies in the file, for the disk thread (taken once).
    pub(crate) fn take_layout(&mut self) -> Layout {
        std::mem::take(&mut self.layout)
    }
}

/// What recovery found.
#[derive(Debug, Default)]
pub struct Recovered {
    /// Where each part of `disk` lies in the file, for the disk thread.
    layout: Layout,
    pub disk: Disk,
    pub frames: u64,
    /// Bytes cut from a torn tail.
    pub cut_bytes: u64,
    /// The log did not exist (or ended inside its magic): this replica never ran, since
    /// the magic is synced before the replica sends anything, so it acknowledged nothing.
    pub fresh: bool,
}

/// A frame's checksum (this log's and a checkpoint data file's): over the length, then
/// the payload.
pub(crate) fn crc(len: &[u8; 4], payload: &[u8]) -> u32 {
    crc32c::crc32c_append(crc32c::crc32c(len), payload)
}

/// Encodes one disk write as a frame.
pub fn encode(write: &Write_, out: &mut Vec<u8>) {
    let payload = postcard::to_allocvec(write).expect("serializing to memory cannot fail");
    let len = (payload.len() as u32).to_le_bytes();
    out.extend_from_slice(&len);
    out.extend_from_slice(&crc(&len, &payload).to_le_bytes());
    out.extend_from_slice(&payload);
}

/// Decodes the frames of a file's contents after the magic: the writes, and the length of
/// the valid prefix.
pub fn decode_all(bytes: &[u8]) -> (Vec<Write_>, usize) {
    let (writes, end) = decode_frames(bytes);
    (writes.into_iter().map(|(w, _)| w).collect(), end)
}

/// As [`decode_all`], with each write's frame as a range of `bytes`.
fn decode_frames(bytes: &[u8]) -> (Vec<(Write_, std::ops::Range<usize>)>, usize) {
    let mut at = 0;
    let mut out = Vec::new();
    while bytes.len() - at >= 8 {
        let len: [u8; 4] = bytes[at..at + 4].try_into().expect("4 bytes");
        let sum = u32::from_le_bytes(bytes[at + 4..at + 8].try_into().expect("4 bytes"));
        let n = u32::from_le_bytes(len);
        if n > FRAME_MAX || (bytes.len() - at - 8) < n as usize {
            break;
        }
        let payload = &bytes[at + 8..at + 8 + n as usize];
        if crc(&len, payload) != sum {
            break;
        }
        match postcard::from_bytes::<Write_>(payload) {
            Ok(w) => out.push((w, at..at + 8 + n as usize)),
            Err(_) => break,
        }
        at += 8 + n as usize;
    }
    (out, at)
}

/// Opens (creating) the replica's disk file in `dir` and replays it.
pub fn recover(dir: &Path) -> std::io::Result<(Recovered, File, PathBuf)> {
    std::fs::create_dir_all(dir)?;
    let path = dir.join("vsr.log");
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)?;
    let mut rec = Recovered::default();
    if bytes.len() < MAGIC.len() {
        rec.fresh = true;
        file.set_len(0)?;
        file.seek(SeekFrom::Start(0))?;
        file.write_all(MAGIC)?;
        file.sync_all()?;
        if let Some(parent) = path.parent() {
            File::open(parent)?.sync_all()?;
        }
        return Ok((rec, file, path));
    }
    if &bytes[..MAGIC.len()] != MAGIC {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("{} is not a Verso replica log (bad magic)", path.display()),
        ));
    }
    let (writes, valid) = decode_frames(&bytes[MAGIC.len()..]);
    for (w, range) in &writes {
        rec.disk.apply(w, None);
        let at = MAGIC.len() + range.start;
        let frame = &bytes[at..MAGIC.len() + range.end];
        rec.layout.apply(w, frame, at as u64);
    }
    rec.frames = writes.len() as u64;
    let end = (MAGIC.len() + valid) as u64;
    rec.cut_bytes = bytes.len() as u64 - end;
    if rec.cut_bytes > 0 {
        tracing::warn!(path = %path.display(), bytes = rec.cut_bytes, "cut a torn tail off the replica log");
        file.set_len(end)?;
    }
    // What was just read may sit only in the page cache (the process died, the machine did
    // not): make it durable before acting on it. Without this sync, a checkpoint frame read
    // here could name a data file whose predecessor is deleted below, and then be lost in a
    // power failure, leaving a log that names a file that is gone.
    file.sync_data()?;
    // Names of replaced checkpoints are not kept across a restart: every data file the
    // disk does not name goes (replaced ones, and debris of a crash mid-checkpoint).
    rec.layout.superseded.clear();
    crate::checkpoint::remove_others(dir, checkpoint_file(&rec.disk));
    file.seek(SeekFrom::End(0))?;
    Ok((rec, file, path))
}

/// The checkpoint data file a disk state names, if any.
pub fn checkpoint_file(disk: &Disk) -> Option<&str> {
    match disk.checkpoint.as_ref().map(|c| &c.app) {
        Some(EngineSnapshot::Taken { file, .. }) => Some(file),
        _ => None,
    }
}

/// A request to the disk thread.
pub(crate) enum DiskJob {
    Write(Write_),
    Sync(u64),
    Stop,
}

/// What the disk thread reports.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum DiskDone {
    /// Every write handed over before `Sync(id)` is durable (but a checkpoint still being
    /// written aside).
    Synced(u64),
    /// The checkpoint taken at this viewstamp is durable.
    Checkpoint(Viewstamp),
}

/// How often the disk thread looks whether a checkpoint's data is written, when nothing
/// else wakes it.
const CHECKPOINT_POLL: Duration = Duration::from_millis(5);

/// Gives the calling thread (a checkpoint's scan) the CPU and disk after everything else:
/// on a small machine it otherwise takes its share from the replication thread, whose slow
/// rounds make backups start view changes. Best effort: a refusal changes nothing else.
fn lower_priority() {
    // SAFETY: gettid has no preconditions and returns the calling thread's id.
    let tid = unsafe { libc::syscall(libc::SYS_gettid) } as libc::id_t;
    // SAFETY: setpriority on the calling thread's own id (Linux keeps nice per thread);
    // no memory is passed.
    let _ = unsafe { libc::setpriority(libc::PRIO_PROCESS, tid, 10) };
    // IOPRIO_WHO_PROCESS = 1; best-effort class (2) at its lowest level (7).
    const IOPRIO_WHO_PROCESS: libc::c_long = 1;
    const IOPRIO_BEST_EFFORT_LOWEST: libc::c_long = (2 << 13) | 7;
    // SAFETY: ioprio_set takes three integers and touches no memory of ours.
    let _ = unsafe {
        libc::syscall(
            libc::SYS_ioprio_set,
            IOPRIO_WHO_PROCESS,
            libc::c_long::from(tid),
            IOPRIO_BEST_EFFORT_LOWEST,
        )
    };
}

/// A checkpoint whose data a thread of its own is writing.
struct PendingCheckpoint {
    write: Write_,
    ap: Viewstamp,
    started: Instant,
    data: Receiver<std::io::Result<Option<crate::checkpoint::DataStats>>>,
}

/// What the disk thread tells the node's checkpoint trigger
/// (`ClusterConfig::checkpoint_log_bytes`): it encodes every write, so it counts them.
#[derive(Debug, Default)]
pub(crate) struct LogSizes {
    /// Bytes of entries appended since the last checkpoint was written.
    pub(crate) since_checkpoint: AtomicU64,
    /// The last checkpoint's data, in bytes.
    pub(crate) checkpoint: AtomicU64,
}

/// What the disk thread needs besides its jobs.
pub(crate) struct DiskThread {
    pub(crate) file: File,
    pub(crate) path: PathBuf,
    pub(crate) dir: PathBuf,
    /// Where the recovered disk lies in `file`.
    pub(crate) layout: Layout,
    pub(crate) db: Arc<Db>,
    pub(crate) pin: GcPin,
    /// What the node's size trigger reads.
    pub(crate) sizes: Arc<LogSizes>,
    /// `ClusterConfig::lazy_sync_gap`.
    pub(crate) gap: Duration,
}

/// Where the disk's state lies in the file: what a rewrite needs without keeping the
/// entries in memory (the replica has them; the thread keeps a viewstamp and an offset).
#[derive(Debug, Default)]
pub(crate) struct Layout {
    view: ViewNum,
    /// The current checkpoint's frame, as written.
    checkpoint: Option<Vec<u8>>,
    checkpoint_file: Option<String>,
    log_base: Viewstamp,
    /// Each live entry's viewstamp and the offset of the frame holding it.
    live: VecDeque<(Viewstamp, u64)>,
    /// Data files of replaced checkpoints, removed after the next sync.
    superseded: Vec<String>,
}

impl Layout {
    fn apply(&mut self, write: &Write_, frame: &[u8], offset: u64) {
        match write {
            DiskWrite::View(v) => self.view = *v,
            DiskWrite::Append(entries) => {
                self.live.extend(entries.iter().map(|e| (e.vs, offset)));
            }
            DiskWrite::Truncate { keep_through } => {
                if keep_through.op >= self.log_base.op {
                    while self
                        .live
                        .back()
                        .is_some_and(|(vs, _)| vs.op > keep_through.op)
                    {
                        self.live.pop_back();
                    }
                } else {
                    self.live.clear();
                    self.log_base = *keep_through;
                }
            }
            DiskWrite::Checkpoint(s) | DiskWrite::Install(s) => {
                if let Some(old) = self.checkpoint_file.take() {
                    self.superseded.push(old);
                }
                self.checkpoint = Some(frame.to_vec());
                if let EngineSnapshot::Taken { file, .. } = &s.app {
                    self.checkpoint_file = Some(file.clone());
                }
                if let DiskWrite::Install(s) = write {
                    self.live.clear();
                    self.log_base = s.ap;
                }
            }
            DiskWrite::TrimLog { through } => {
                while let Some(&(vs, _)) = self.live.front() {
                    if vs.op > *through {
                        break;
                    }
                    self.log_base = vs;
                    self.live.pop_front();
                }
            }
            DiskWrite::LogBase(base) => self.log_base = *base,
        }
    }
}

struct Writer {
    out: BufWriter<File>,
    /// Bytes in the file, counting what `out` still buffers.
    len: u64,
    path: PathBuf,
    dir: PathBuf,
    layout: Layout,
    db: Arc<Db>,
    pin: GcPin,
    sizes: Arc<LogSizes>,
    pending: Option<PendingCheckpoint>,
    /// What waits for `pending`: the first write that may not pass it, and everything
    /// handed over after that.
    behind: VecDeque<DiskJob>,
}

impl Writer {
    fn new(t: DiskThread) -> std::io::Result<Writer> {
        let mut file = t.file;
        let len = file.seek(SeekFrom::End(0))?;
        Ok(Writer {
            out: BufWriter::with_capacity(1 << 20, file),
            len,
            path: t.path,
            dir: t.dir,
            layout: t.layout,
            db: t.db,
            pin: t.pin,
            sizes: t.sizes,
            pending: None,
            behind: VecDeque::new(),
        })
    }

    /// Stops with a checkpoint still being written, or waiting: they are dropped, as by a
    /// crash (recovery removes a data file no checkpoint names). The GC pins of those
    /// waiting are released here; the one being written releases its own when done.
    fn abandon(&mut self) {
        for job in self.behind.drain(..) {
            if let DiskJob::Write(DiskWrite::Checkpoint(s)) = job {
                if let EngineSnapshot::Taken { file, .. } = &s.app {
                    self.pin.release(file);
                }
            }
        }
    }

    /// Whether `job` must wait for the checkpoint being written (module docs).
    fn holds_back(&self, job: &DiskJob) -> bool {
        let Some(pending) = &self.pending else {
            return false;
        };
        let passes = match job {
            DiskJob::Sync(_) => true,
            DiskJob::Write(w) => w.may_pass_checkpoint(pending.ap),
            // Stopping finishes the checkpoint first.
            DiskJob::Stop => false,
        };
        !passes || !self.behind.is_empty()
    }

    /// Takes a write that need not wait: appends it, or starts writing a checkpoint's data
    /// aside. The caller has checked [`Writer::holds_back`].
    fn take_write(&mut self, write: Write_) -> std::io::Result<()> {
        match write {
            DiskWrite::Checkpoint(_) => {
                self.start_checkpoint(write);
                Ok(())
            }
            _ => self.append(&write),
        }
    }

    /// Starts writing a checkpoint's data on a thread of its own; the frame waits for it.
    fn start_checkpoint(&mut self, write: Write_) {
        let DiskWrite::Checkpoint(s) = &write else {
            unreachable!("a checkpoint")
        };
        let ap = s.ap;
        let (tx, mut data) = std::sync::mpsc::channel();
        // The entries logged from now on count towards the next checkpoint.
        self.sizes.since_checkpoint.store(0, Ordering::Relaxed);
        if let EngineSnapshot::Taken {
            file, durable_cts, ..
        } = &s.app
        {
            let (dir, db, file, cts) = (
                self.dir.clone(),
                self.db.clone(),
                file.clone(),
                *durable_cts,
            );
            // Released once the data is written, or if the thread unwinds or never runs.
            let pinned = self.pin.release_on_drop(&file);
            let job = move || {
                lower_priority();
                let written = crate::checkpoint::write(&dir, &file, &db, cts);
                drop(pinned);
                let _ = tx.send(written.map(Some));
            };
            if let Err(e) = std::thread::Builder::new()
                .name("vsr-checkpoint".into())
                .spawn(job)
            {
                // The closure, its sender and the pin are gone: report the failure instead.
                let (tx, rx) = std::sync::mpsc::channel();
                let _ = tx.send(Err(e));
                data = rx;
            }
        } else {
            let _ = tx.send(Ok(None)); // an empty state has no data
        }
        self.pending = Some(PendingCheckpoint {
            write,
            ap,
            started: Instant::now(),
            data,
        });
    }

    /// If the checkpoint being written has its data, appends its frame and syncs: returns
    /// its `ap`, or `None` while it is still being written (or none is).
    fn finish_checkpoint(&mut self) -> std::io::Result<Option<Viewstamp>> {
        let Some(p) = &self.pending else {
            return Ok(None);
        };
        let stats = match p.data.try_recv() {
            Ok(r) => r?,
            Err(std::sync::mpsc::TryRecvError::Empty) => return Ok(None),
            Err(std::sync::mpsc::TryRecvError::Disconnected) => {
                return Err(std::io::Error::other("the checkpoint writer stopped"))
            }
        };
        let p = self.pending.take().expect("checked");
        if let (Some(stats), DiskWrite::Checkpoint(s)) = (stats, &p.write) {
            self.sizes.checkpoint.store(stats.bytes, Ordering::Relaxed);
            if let EngineSnapshot::Taken { file, .. } = &s.app {
                tracing::info!(
                    file = %file,
                    keys = stats.entries,
                    bytes = stats.bytes,
                    ms = p.started.elapsed().as_millis() as u64,
                    "wrote a replica checkpoint"
                );
            }
        }
        self.append(&p.write)?;
        self.sync()?;
        Ok(Some(p.ap))
    }

    /// Appends one write's frame (a checkpoint's data is written already).
    fn append(&mut self, write: &Write_) -> std::io::Result<()> {
        let mut frame = Vec::new();
        encode(write, &mut frame);
        self.out.write_all(&frame)?;
        if let DiskWrite::Append(_) = write {
            let n = frame.len() as u64;
            self.sizes.since_checkpoint.fetch_add(n, Ordering::Relaxed);
        }
        let offset = self.len;
        self.len += frame.len() as u64;
        self.layout.apply(write, &frame, offset);
        if matches!(write, DiskWrite::TrimLog { .. }) {
            self.rewrite()?;
        }
        Ok(())
    }

    fn sync(&mut self) -> std::io::Result<()> {
        self.out.flush()?;
        self.out.get_ref().sync_data()?;
        for name in std::mem::take(&mut self.layout.superseded) {
            if let Err(e) = std::fs::remove_file(self.dir.join(&name)) {
                tracing::warn!(file = %name, error = %e, "could not remove an old checkpoint");
            }
        }
        Ok(())
    }

    /// Rewrites the file to hold only the disk's state (module docs), reading each live
    /// entry's frame back.
    fn rewrite(&mut self) -> std::io::Result<()> {
        self.out.flush()?;
        let tmp = self.path.with_extension("log.tmp");
        let mut out = BufWriter::with_capacity(1 << 20, File::create(&tmp)?);
        out.write_all(MAGIC)?;
        let mut len = MAGIC.len() as u64;
        let mut layout = Layout::default();
        let mut put = |w: &Write_, layout: &mut Layout, out: &mut BufWriter<File>| {
            let mut frame = Vec::new();
            encode(w, &mut frame);
            layout.apply(w, &frame, len);
            len += frame.len() as u64;
            out.write_all(&frame)
        };
        put(&DiskWrite::View(self.layout.view), &mut layout, &mut out)?;
        if let Some(frame) = &self.layout.checkpoint {
            let (writes, _) = decode_all(frame);
            let cp = match writes.into_iter().next() {
                // A state transfer's checkpoint is kept as a plain one: the log after it
                // is what the layout says, not empty.
                Some(DiskWrite::Checkpoint(s) | DiskWrite::Install(s)) => DiskWrite::Checkpoint(s),
                _ => {
                    return Err(std::io::Error::other(
                        "the checkpoint frame kept is damaged",
                    ))
                }
            };
            put(&cp, &mut layout, &mut out)?;
            put(
                &DiskWrite::LogBase(self.layout.log_base),
                &mut layout,
                &mut out,
            )?;
        }
        // Replaced checkpoints' files go after the next sync, as before the rewrite.
        layout.superseded = std::mem::take(&mut self.layout.superseded);
        let reader = File::open(&self.path)?;
        let mut i = 0;
        while i < self.layout.live.len() {
            let offset = self.layout.live[i].1;
            let mut n = 0;
            while i + n < self.layout.live.len() && self.layout.live[i + n].1 == offset {
                n += 1;
            }
            let wanted = self.layout.live.range(i..i + n).map(|(vs, _)| *vs);
            let entries = read_entries(&reader, offset, wanted)?;
            put(&DiskWrite::Append(entries), &mut layout, &mut out)?;
            i += n;
        }
        let file = out.into_inner().map_err(|e| e.into_error())?;
        file.sync_data()?;
        drop(file);
        std::fs::rename(&tmp, &self.path)?;
        File::open(&self.dir)?.sync_all()?;
        let mut file = OpenOptions::new().read(true).write(true).open(&self.path)?;
        file.seek(SeekFrom::End(0))?;
        self.out = BufWriter::with_capacity(1 << 20, file);
        self.len = len;
        self.layout = layout;
        Ok(())
    }
}

/// The entries `wanted` (in order) from the `Append` frame at `offset` of `file`.
fn read_entries(
    file: &File,
    offset: u64,
    wanted: impl Iterator<Item = Viewstamp>,
) -> std::io::Result<Vec<verso_vsr::Entry<Batch>>> {
    let mut head = [0u8; 8];
    file.read_exact_at(&mut head, offset)?;
    let n = u32::from_le_bytes(head[..4].try_into().expect("4 bytes"));
    if n > FRAME_MAX {
        return Err(std::io::Error::other(
            "a replica log frame too large to read back",
        ));
    }
    let mut frame = vec![0u8; 8 + n as usize];
    file.read_exact_at(&mut frame, offset)?;
    let (writes, _) = decode_all(&frame);
    let Some(DiskWrite::Append(entries)) = writes.into_iter().next() else {
        return Err(std::io::Error::other(format!(
            "the replica log's frame at {offset} is not the entries it held"
        )));
    };
    let mut out = Vec::new();
    let mut entries = entries.into_iter().peekable();
    for vs in wanted {
        while entries.peek().is_some_and(|e| e.vs != vs) {
            entries.next();
        }
        match entries.next() {
            Some(e) => out.push(e),
            None => {
                return Err(std::io::Error::other(format!(
                    "entry {vs} is missing from the replica log's frame at {offset}"
                )))
            }
        }
    }
    Ok(out)
}

/// Runs the disk thread: appends writes in order, and on `Sync(id)` makes them durable and
/// reports `id` through `done`, starting a sync no sooner than `gap` after the last one
/// ended (`ClusterConfig::lazy_sync_gap`; writes queued meanwhile join it). A checkpoint's
/// data is written aside (module docs) and reported when durable. An I/O error is fatal
/// for the replica (it must not acknowledge what it cannot keep): the thread reports it and
/// stops.
pub(crate) fn run(t: DiskThread, jobs: Receiver<DiskJob>, done: impl Fn(Result<DiskDone, String>)) {
    let fail = |e: std::io::Error| format!("replica log: {e}");
    let gap = t.gap;
    let mut w = match Writer::new(t) {
        Ok(w) => w,
        Err(e) => return done(Err(fail(e))),
    };
    let mut synced_at: Option<Instant> = None;
    // Jobs that waited behind a checkpoint now written, taken before the channel's.
    let mut released: VecDeque<DiskJob> = VecDeque::new();
    loop {
        match w.finish_checkpoint() {
            Ok(Some(ap)) => {
                synced_at = Some(Instant::now());
                done(Ok(DiskDone::Checkpoint(ap)));
                released.extend(w.behind.drain(..));
            }
            Ok(None) => {}
            Err(e) => return done(Err(fail(e))),
        }
        let next = |released: &mut VecDeque<DiskJob>| -> Option<DiskJob> {
            released.pop_front().or_else(|| jobs.try_recv().ok())
        };
        let first = if let Some(job) = released.pop_front() {
            job
        } else if w.pending.is_none() {
            match jobs.recv() {
                Ok(job) => job,
                Err(_) => return w.abandon(),
            }
        } else {
            match jobs.recv_timeout(CHECKPOINT_POLL) {
                Ok(job) => job,
                // Time to look at the checkpoint again.
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => continue,
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => return w.abandon(),
            }
        };
        let mut sync = None;
        let mut stop = false;
        let mut result = Ok(());
        // Takes one job; false once it is time to stop taking more.
        let mut take = |job: DiskJob, sync: &mut Option<u64>, stop: &mut bool| {
            if matches!(job, DiskJob::Stop) {
                *stop = true;
                return false;
            }
            if w.holds_back(&job) {
                w.behind.push_back(job);
                return true;
            }
            match job {
                DiskJob::Write(write) => result = w.take_write(write).map_err(fail),
                DiskJob::Sync(id) => *sync = Some(id),
                DiskJob::Stop => *stop = true,
            }
            result.is_ok() && !*stop
        };
        // Take everything already queued: one fdatasync covers it all.
        let mut more = take(first, &mut sync, &mut stop);
        while more {
            match next(&mut released) {
                Some(job) => more = take(job, &mut sync, &mut stop),
                None => break,
            }
        }
        if more && sync.is_some() {
            if let Some(wait) = synced_at.and_then(|at| gap.checked_sub(at.elapsed())) {
                std::thread::sleep(wait);
                // What arrived meanwhile goes in this sync too.
                while more {
                    match next(&mut released) {
                        Some(job) => more = take(job, &mut sync, &mut stop),
                        None => break,
                    }
                }
            }
        }
        if let (Ok(()), Some(id)) = (&result, sync) {
            result = w.sync().map_err(fail);
            synced_at = Some(Instant::now());
            if result.is_ok() {
                done(Ok(DiskDone::Synced(id)));
            }
        }
        if let Err(e) = result {
            done(Err(e));
            return;
        }
        if stop {
            let _ = w.out.flush();
            return w.abandon();
        }
    }
}

/// Sends disk writes to the disk thread.
pub(crate) struct DiskHandle {
    pub(crate) jobs: Sender<DiskJob>,
}

impl DiskHandle {
    pub(crate) fn write(&self, w: Write_) {
        let _ = self.jobs.send(DiskJob::Write(w));
    }

    pub(crate) fn sync(&self, id: u64) {
        let _ = self.jobs.send(DiskJob::Sync(id));
    }
}

#[cfg(test)]
mod tests {
    //! The disk thread against `Durable::apply`, the reference meaning of each write: after
    //! any sequence of writes, syncs, checkpoints and trims (each trim rewriting the file),
    //! what recovery reads back is exactly the reference disk, and the only checkpoint data
    //! file left is the one it names.

    use super::*;
    use crate::op::{TxnWrites, Write as KeyWrite};
    use proptest::prelude::*;
    use verso_engine::{Options, ReplicatedWrite};
    use verso_vsr::client_table::ClientTable;
    use verso_vsr::{Body, Entry, Request, Snapshot};

    fn entry(vs: Viewstamp, prev: Viewstamp, n: u64) -> Entry<Batch> {
        let value = vec![n as u8; (n % 300) as usize];
        let op = Batch {
            origin: 7,
            first_slot: n,
            txns: std::sync::Arc::new(vec![TxnWrites {
                cts: n,
                writes: vec![KeyWrite {
                    table: "t".into(),
                    key: n.to_be_bytes().to_vec(),
                    value: Some(value),
                }],
            }]),
        };
        Entry {
            vs,
            prev,
            body: if n.is_multiple_of(17) {
                Body::ViewStart
            } else {
                Body::Requests(vec![Request {
                    client: n % 3,
                    seq: n,
                    op,
                    sync: false,
                }])
            },
        }
    }

    /// One step a replica might take, drawn from a seed.
    #[derive(Clone, Debug)]
    enum Step {
        Append(u8),
        NewView,
        Truncate(u8),
        Checkpoint(u8),
        Trim(u8),
        Install,
        Sync,
        /// The thread stops and a new one starts from what recovery reads (the offsets of
        /// the live entries then come from the recovery's scan).
        Restart,
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            6 => (1u8..40).prop_map(Step::Append),
            1 => Just(Step::NewView),
            1 => any::<u8>().prop_map(Step::Truncate),
            2 => any::<u8>().prop_map(Step::Checkpoint),
            2 => any::<u8>().prop_map(Step::Trim),
            1 => Just(Step::Install),
            2 => Just(Step::Sync),
            1 => Just(Step::Restart),
        ]
    }

    type Started = (
        Disk,
        Sender<DiskJob>,
        Receiver<Result<DiskDone, String>>,
        std::thread::JoinHandle<()>,
    );

    /// Takes the thread's reports until `until` (counting the checkpoints reported on the
    /// way in `checkpoints`), or until every checkpoint handed over is reported.
    fn await_done(
        done_rx: &Receiver<Result<DiskDone, String>>,
        until: Option<u64>,
        checkpoints: &mut VecDeque<Viewstamp>,
    ) -> Result<(), TestCaseError> {
        loop {
            if until.is_none() && checkpoints.is_empty() {
                return Ok(());
            }
            match done_rx.recv_timeout(Duration::from_secs(30)) {
                Ok(Ok(DiskDone::Synced(id))) => {
                    if Some(id) == until {
                        return Ok(());
                    }
                }
                Ok(Ok(DiskDone::Checkpoint(ap))) => {
                    prop_assert_eq!(checkpoints.pop_front(), Some(ap), "checkpoints in order");
                }
                other => return Err(TestCaseError::fail(format!("disk thread: {other:?}"))),
            }
        }
    }

    /// Recovers `dir` and starts a disk thread on it.
    fn start(dir: &Path, db: &Arc<Db>) -> Started {
        let (mut rec, file, path) = recover(dir).unwrap();
        let (jobs, rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        let thread = DiskThread {
            file,
            path,
            dir: dir.to_path_buf(),
            layout: rec.take_layout(),
            db: db.clone(),
            pin: GcPin::default(),
            sizes: Arc::default(),
            gap: Duration::ZERO,
        };
        let runner = std::thread::spawn(move || {
            run(thread, rx, |r| {
                let _ = done_tx.send(r);
            })
        });
        (rec.disk, jobs, done_rx, runner)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn recovery_reads_back_what_the_writes_mean(steps in prop::collection::vec(step(), 1..60)) {
            let dir = tempfile::tempdir().unwrap();
            let db = Arc::new(Db::open(Options::default()).unwrap());
            for k in 0..50u64 {
                let w = ReplicatedWrite { table: "t", key: &k.to_be_bytes(), value: Some(b"v") };
                db.apply_replicated(k + 1, std::iter::once(w)).unwrap();
            }
            let path = dir.path().join("vsr.log");
            let (disk, mut jobs, mut done_rx, mut runner) = start(dir.path(), &db);
            prop_assert_eq!(&disk, &Disk::default());
            let mut model = Disk::default();
            let mut view = ViewNum { counter: 1, replica: 0 };
            let (mut next_op, mut files, mut syncs) = (1u64, 0u64, 0u64);
            let mut trimmed_last = false;
            // Checkpoints handed over and not yet reported durable.
            let mut checkpoints: VecDeque<Viewstamp> = VecDeque::new();
            let do_write = |w: Write_, model: &mut Disk, jobs: &Sender<DiskJob>, trimmed: &mut bool| {
                *trimmed = matches!(w, DiskWrite::TrimLog { .. });
                model.apply(&w, None);
                jobs.send(DiskJob::Write(w)).unwrap();
            };
            for s in steps {
                let in_log = |model: &Disk, pick: u8| -> Option<Viewstamp> {
                    (!model.log.is_empty())
                        .then(|| model.log[usize::from(pick) % model.log.len()].vs)
                };
                match s {
                    Step::Append(n) => {
                        let mut entries = Vec::new();
                        let mut prev = model.tail();
                        for _ in 0..n {
                            let vs = Viewstamp { view, op: prev.op + 1 };
                            entries.push(entry(vs, prev, next_op));
                            next_op += 1;
                            prev = vs;
                        }
                        do_write(DiskWrite::Append(entries), &mut model, &jobs, &mut trimmed_last);
                    }
                    Step::NewView => {
                        view.counter += 1;
                        do_write(DiskWrite::View(view), &mut model, &jobs, &mut trimmed_last);
                    }
                    Step::Truncate(pick) => {
                        // Never below the checkpoint's durable point (the replica's rule).
                        let floor = model.checkpoint.as_ref().map_or(0, |c| c.undo_base.op);
                        if let Some(vs) = in_log(&model, pick).filter(|vs| vs.op >= floor) {
                            do_write(DiskWrite::Truncate { keep_through: vs }, &mut model, &jobs, &mut trimmed_last);
                        }
                    }
                    Step::Checkpoint(pick) | Step::Trim(pick) if model.log.is_empty() => {
                        let _ = pick;
                    }
                    Step::Checkpoint(pick) => {
                        let ap = in_log(&model, pick).expect("not empty");
                        files += 1;
                        let snapshot = Snapshot {
                            ap,
                            tail: Vec::new(),
                            undo_base: ap,
                            app: EngineSnapshot::Taken {
                                file: format!("checkpoint-{files:x}-1.data"),
                                durable_cts: u64::from(pick),
                                tail: Vec::new(),
                            },
                            clients: ClientTable::new(8),
                        };
                        checkpoints.push_back(ap);
                        do_write(DiskWrite::Checkpoint(snapshot), &mut model, &jobs, &mut trimmed_last);
                    }
                    Step::Trim(pick) => {
                        let ap = model.checkpoint.as_ref().map_or(0, |c| c.ap.op);
                        let through = in_log(&model, pick).map_or(0, |vs| vs.op).min(ap);
                        if through > model.log_base.op {
                            do_write(DiskWrite::TrimLog { through }, &mut model, &jobs, &mut trimmed_last);
                        }
                    }
                    Step::Install => {
                        // A state transfer: the data file arrived before (as `incoming`).
                        files += 1;
                        let file = format!("checkpoint-{files:x}-1.data");
                        crate::checkpoint::write(dir.path(), &file, &db, 30).unwrap();
                        let ap = Viewstamp { view, op: model.tail().op + 5 };
                        let snapshot = Snapshot {
                            ap,
                            tail: Vec::new(),
                            undo_base: ap,
                            app: EngineSnapshot::Taken { file, durable_cts: 30, tail: Vec::new() },
                            clients: ClientTable::new(8),
                        };
                        do_write(DiskWrite::Install(snapshot), &mut model, &jobs, &mut trimmed_last);
                        next_op += 5;
                    }
                    Step::Restart => {
                        // A checkpoint still being written would be lost, as by a crash.
                        await_done(&done_rx, None, &mut checkpoints)?;
                        jobs.send(DiskJob::Stop).unwrap();
                        runner.join().unwrap();
                        let disk;
                        (disk, jobs, done_rx, runner) = start(dir.path(), &db);
                        prop_assert_eq!(&disk, &model);
                    }
                    Step::Sync => {
                        syncs += 1;
                        jobs.send(DiskJob::Sync(syncs)).unwrap();
                        await_done(&done_rx, Some(syncs), &mut checkpoints)?;
                    }
                }
            }
            await_done(&done_rx, None, &mut checkpoints)?;
            jobs.send(DiskJob::Stop).unwrap();
            runner.join().unwrap();
            let (rec, _, _) = recover(dir.path()).unwrap();
            prop_assert_eq!(&rec.disk, &model);
            // Only the named checkpoint's data is left (recovery removes the rest), and it
            // is whole.
            let mut left: Vec<String> = std::fs::read_dir(dir.path())
                .unwrap()
                .map(|e| e.unwrap().file_name().into_string().unwrap())
                .filter(|n| n.starts_with("checkpoint-"))
                .collect();
            left.sort();
            let named: Vec<String> = checkpoint_file(&model).map(str::to_string).into_iter().collect();
            prop_assert_eq!(&left, &named);
            if let Some(name) = named.first() {
                let copy = Db::open(Options::default()).unwrap();
                crate::checkpoint::load(dir.path(), name, &copy).unwrap();
            }
            // Right after a trim the file is the compacted disk and nothing else: the
            // view, the checkpoint, the log base and exactly the live entries.
            if trimmed_last {
                let bytes = std::fs::read(&path).unwrap();
                let (writes, _) = decode_all(&bytes[MAGIC.len()..]);
                prop_assert!(matches!(writes[0], DiskWrite::View(_)), "{:?}", writes[0]);
                prop_assert!(matches!(writes[1], DiskWrite::Checkpoint(_)));
                prop_assert!(matches!(writes[2], DiskWrite::LogBase(_)));
                let mut entries = 0;
                for w in &writes[3..] {
                    let DiskWrite::Append(es) = w else {
                        return Err(TestCaseError::fail(format!("{w:?} after a rewrite")));
                    };
                    entries += es.len();
                }
                prop_assert_eq!(entries, model.log.len());
            }
        }
    }
}
