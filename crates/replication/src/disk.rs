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
//! Limit: checkpoints are off in a cluster, so the file grows with the log until the next
//! step of this work (compaction through engine checkpoints).

use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, Sender};
use std::time::{Duration, Instant};

use verso_vsr::{DiskWrite, Durable};

use crate::op::{Batch, EngineSnapshot};

pub type Disk = Durable<Batch, (), EngineSnapshot>;
pub type Write_ = DiskWrite<Batch, (), EngineSnapshot>;

const MAGIC: &[u8; 8] = b"VSRDISK1";
/// Largest frame accepted at recovery (checked before allocating).
const FRAME_MAX: u32 = 1 << 30;

/// What recovery found.
#[derive(Debug, Default)]
pub struct Recovered {
    pub disk: Disk,
    pub frames: u64,
    /// Bytes cut from a torn tail.
    pub cut_bytes: u64,
    /// The log did not exist (or ended inside its magic): this replica never ran, since
    /// the magic is synced before the replica sends anything, so it acknowledged nothing.
    pub fresh: bool,
}

fn crc(len: &[u8; 4], payload: &[u8]) -> u32 {
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
            Ok(w) => out.push(w),
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
    let (writes, valid) = decode_all(&bytes[MAGIC.len()..]);
    for w in &writes {
        rec.disk.apply(w, None);
    }
    rec.frames = writes.len() as u64;
    let end = (MAGIC.len() + valid) as u64;
    rec.cut_bytes = bytes.len() as u64 - end;
    if rec.cut_bytes > 0 {
        tracing::warn!(path = %path.display(), bytes = rec.cut_bytes, "cut a torn tail off the replica log");
        file.set_len(end)?;
        file.sync_data()?;
    }
    file.seek(SeekFrom::End(0))?;
    Ok((rec, file, path))
}

/// A request to the disk thread.
pub(crate) enum DiskJob {
    Write(Vec<u8>),
    Sync(u64),
    Stop,
}

/// Runs the disk thread: appends writes in order, and on `Sync(id)` makes them durable and
/// reports `id` through `done`, starting a sync no sooner than `gap` after the last one
/// ended (`ClusterConfig::lazy_sync_gap`; writes queued meanwhile join it). An I/O error
/// is fatal for the replica (it must not acknowledge what it cannot keep): the thread
/// reports it and stops.
pub(crate) fn run(
    file: File,
    jobs: Receiver<DiskJob>,
    gap: Duration,
    done: impl Fn(Result<u64, String>),
) {
    let mut out = BufWriter::with_capacity(1 << 20, file);
    let fail = |e: std::io::Error| format!("replica log: {e}");
    let mut synced_at: Option<Instant> = None;
    while let Ok(first) = jobs.recv() {
        let mut sync = None;
        let mut stop = false;
        let mut result = Ok(());
        // Takes one job; false once it is time to stop taking more.
        let mut take = |job: DiskJob, sync: &mut Option<u64>, stop: &mut bool| {
            match job {
                DiskJob::Write(bytes) => result = out.write_all(&bytes).map_err(fail),
                DiskJob::Sync(id) => *sync = Some(id),
                DiskJob::Stop => *stop = true,
            }
            result.is_ok() && !*stop
        };
        // Take everything already queued: one fdatasync covers it all.
        let mut more = take(first, &mut sync, &mut stop);
        while more {
            match jobs.try_recv() {
                Ok(job) => more = take(job, &mut sync, &mut stop),
                Err(_) => break,
            }
        }
        if more && sync.is_some() {
            if let Some(wait) = synced_at.and_then(|at| gap.checked_sub(at.elapsed())) {
                std::thread::sleep(wait);
                // What arrived meanwhile goes in this sync too.
                while more {
                    match jobs.try_recv() {
                        Ok(job) => more = take(job, &mut sync, &mut stop),
                        Err(_) => break,
                    }
                }
            }
        }
        if let (Ok(()), Some(id)) = (&result, sync) {
            result = out
                .flush()
                .and_then(|()| out.get_ref().sync_data())
                .map_err(fail);
            synced_at = Some(Instant::now());
            if result.is_ok() {
                done(Ok(id));
            }
        }
        if let Err(e) = result {
            done(Err(e));
            return;
        }
        if stop {
            let _ = out.flush();
            return;
        }
    }
}

/// Sends disk writes to the disk thread.
pub(crate) struct DiskHandle {
    pub(crate) jobs: Sender<DiskJob>,
}

impl DiskHandle {
    pub(crate) fn write(&self, w: &Write_) {
        let mut buf = Vec::new();
        encode(w, &mut buf);
        let _ = self.jobs.send(DiskJob::Write(buf));
    }

    pub(crate) fn sync(&self, id: u64) {
        let _ = self.jobs.send(DiskJob::Sync(id));
    }
}
