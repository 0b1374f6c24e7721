//! A group replica's disk: one append-only file of the replica's disk writes
//! (`verso_vsr::DiskWrite`), written and synced by a thread of its own so that the
//! protocol thread never waits for the disk (Lazy VSR's point: a replica acknowledges from
//! memory, and the log reaches disk in the background).
//!
//! File format: `"VNCCLOG1"`, then frames `len: u32 LE | crc32c(len ++ payload): u32 LE |
//! payload (postcard)`. A torn or corrupt frame ends the log: recovery keeps the frames
//! before it and cuts the file there (a crash may lose an unsynced suffix, which the
//! protocol allows). `verso_vsr::Durable::apply` gives each write its meaning, and
//! `Replica::recover` rebuilds the replica from the result.
//!
//! Limits: the log is never compacted (the group runs without checkpoints), so the file,
//! and each replica's copy of the inputs in memory, grow with every input; a restart
//! replays the whole file.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Receiver, Sender};
use std::thread;

use super::log::{LogDurable, LogWrite};

const MAGIC: &[u8; 8] = b"VNCCLOG1";
/// A frame above this is corruption (a replica writes nothing near it: inputs are bounded
/// by the transport's 4 MiB frames and entries are appended a batch at a time).
const FRAME_MAX: usize = 256 << 20;

fn crc(len: &[u8; 4], payload: &[u8]) -> u32 {
    crc32c::crc32c_append(crc32c::crc32c(len), payload)
}

/// Appends one write as a frame.
pub fn encode(write: &LogWrite, out: &mut Vec<u8>) {
    let payload = postcard::to_allocvec(write).expect("serializing to memory cannot fail");
    let len = (payload.len() as u32).to_le_bytes();
    out.extend_from_slice(&len);
    out.extend_from_slice(&crc(&len, &payload).to_le_bytes());
    out.extend_from_slice(&payload);
}

/// The writes in `bytes` (a file's contents after the magic), and the length of the valid
/// prefix. Total: any bytes give an answer, never a panic (fuzzed as `group_log`).
pub fn decode_all(bytes: &[u8]) -> (Vec<LogWrite>, usize) {
    let mut at = 0;
    let mut out = Vec::new();
    while bytes.len() - at >= 8 {
        let len: [u8; 4] = bytes[at..at + 4].try_into().expect("4 bytes");
        let sum = u32::from_le_bytes(bytes[at + 4..at + 8].try_into().expect("4 bytes"));
        let n = u32::from_le_bytes(len) as usize;
        if n > FRAME_MAX || bytes.len() - at - 8 < n {
            break;
        }
        let payload = &bytes[at + 8..at + 8 + n];
        if crc(&len, payload) != sum {
            break;
        }
        let Ok(w) = postcard::from_bytes::<LogWrite>(payload) else {
            break;
        };
        out.push(w);
        at += 8 + n;
    }
    (out, at)
}

/// What the disk thread reports.
#[derive(Debug)]
pub enum DiskDone {
    /// Every write handed over before the sync `id` is durable.
    Synced(u64),
    /// The disk failed: the replica must stop (what it acknowledged from memory may be
    /// lost, as in a crash).
    Failed(String),
}

enum Job {
    Write(Vec<u8>),
    Sync(u64),
}

/// The protocol thread's side of the disk thread.
pub struct Disk {
    jobs: Sender<Job>,
    scratch: Vec<u8>,
}

impl Disk {
    /// Opens (or creates) the log in `dir`: what it holds, and a disk that appends to it,
    /// reporting through `done` with `wrap`.
    pub fn open<T: Send + 'static>(
        dir: &Path,
        done: Sender<T>,
        wrap: fn(DiskDone) -> T,
    ) -> io::Result<(LogDurable, Disk)> {
        std::fs::create_dir_all(dir)?;
        if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
            // The directory's own entry must survive a crash too.
            File::open(parent)?.sync_all()?;
        }
        let path = dir.join("group.log");
        let (durable, file) = recover(&path)?;
        let (jobs, rx) = mpsc::channel();
        thread::Builder::new()
            .name("txn-group-disk".into())
            .spawn(move || disk_loop(file, path, rx, done, wrap))?;
        Ok((
            durable,
            Disk {
                jobs,
                scratch: Vec::new(),
            },
        ))
    }

    pub fn write(&mut self, w: &LogWrite) {
        self.scratch.clear();
        encode(w, &mut self.scratch);
        // A send fails only once the disk thread stopped, after it reported `Failed`.
        let _ = self
            .jobs
            .send(Job::Write(std::mem::take(&mut self.scratch)));
    }

    pub fn sync(&mut self, id: u64) {
        let _ = self.jobs.send(Job::Sync(id));
    }
}

/// Reads the log at `path` (creating it if absent), cuts a torn tail, and returns what it
/// holds with the file positioned for appends.
fn recover(path: &Path) -> io::Result<(LogDurable, File)> {
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)?;
    let mut durable = LogDurable::default();
    if bytes.len() < MAGIC.len() {
        // New, or torn before its magic was synced: start empty.
        file.set_len(0)?;
        file.seek(SeekFrom::Start(0))?;
        file.write_all(MAGIC)?;
        file.sync_all()?;
        if let Some(dir) = path.parent() {
            // The file's name must survive a crash too.
            File::open(dir)?.sync_all()?;
        }
        return Ok((durable, file));
    }
    if &bytes[..MAGIC.len()] != MAGIC {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{} is not a group log (bad magic)", path.display()),
        ));
    }
    let (writes, valid) = decode_all(&bytes[MAGIC.len()..]);
    for w in &writes {
        durable.apply(w, None);
    }
    let end = (MAGIC.len() + valid) as u64;
    if end < bytes.len() as u64 {
        file.set_len(end)?;
    }
    // What a killed process wrote may still be only in the page cache: the replica will
    // report all of it as on disk (its durable point counts it), so make it so.
    file.sync_all()?;
    file.seek(SeekFrom::Start(end))?;
    Ok((durable, file))
}

fn disk_loop<T>(
    file: File,
    path: PathBuf,
    rx: Receiver<Job>,
    done: Sender<T>,
    wrap: fn(DiskDone) -> T,
) {
    let mut out = io::BufWriter::with_capacity(1 << 20, file);
    let fail = |e: io::Error| {
        let _ = done.send(wrap(DiskDone::Failed(format!("{}: {e}", path.display()))));
    };
    while let Ok(job) = rx.recv() {
        // Take every job waiting: one sync covers them all.
        let mut synced = Vec::new();
        for job in std::iter::once(job).chain(rx.try_iter()) {
            match job {
                Job::Write(bytes) => {
                    if let Err(e) = out.write_all(&bytes) {
                        return fail(e);
                    }
                }
                Job::Sync(id) => synced.push(id),
            }
        }
        if synced.is_empty() {
            continue;
        }
        if let Err(e) = out.flush().and_then(|()| out.get_ref().sync_data()) {
            return fail(e);
        }
        for id in synced {
            if done.send(wrap(DiskDone::Synced(id))).is_err() {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::group::log::GroupBatch;
    use verso_vsr::{Entry, ViewNum, Viewstamp};

    fn entry(op: u64) -> Entry<GroupBatch> {
        Entry {
            vs: Viewstamp {
                view: ViewNum::ZERO,
                op,
            },
            prev: Viewstamp {
                view: ViewNum::ZERO,
                op: op - 1,
            },
            body: verso_vsr::Body::ViewStart,
        }
    }

    #[test]
    fn a_torn_tail_is_cut_and_the_rest_recovers() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("group.log");
        let (d, _) = recover(&path).unwrap();
        assert_eq!(d, LogDurable::default());
        let mut bytes = MAGIC.to_vec();
        let writes: Vec<LogWrite> = (1..=3)
            .map(|op| LogWrite::Append(vec![entry(op)]))
            .collect();
        for w in &writes {
            encode(w, &mut bytes);
        }
        let full = bytes.len();
        for cut in MAGIC.len()..=full {
            std::fs::write(&path, &bytes[..cut]).unwrap();
            let (d, _) = recover(&path).unwrap();
            let mut want = LogDurable::default();
            let (kept, valid) = decode_all(&bytes[MAGIC.len()..cut]);
            kept.iter().for_each(|w| want.apply(w, None));
            assert_eq!(d, want, "cut at {cut}");
            assert_eq!(
                std::fs::metadata(&path).unwrap().len() as usize,
                MAGIC.len() + valid
            );
            assert!(kept.len() <= writes.len() && kept[..] == writes[..kept.len()]);
        }
        assert_eq!(decode_all(&bytes[MAGIC.len()..]).0, writes);
    }

    proptest::proptest! {
        /// The decoder of a log after a crash (and the fuzz target `group_log`'s claims):
        /// any bytes give a prefix, never a panic, and the writes before a cut survive it.
        #[test]
        fn any_bytes_decode_to_a_prefix(
            ops in proptest::collection::vec(1u64..1000, 0..6),
            garbage in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..64),
            cut in 0usize..2000,
        ) {
            let writes: Vec<LogWrite> =
                ops.iter().map(|&op| LogWrite::Append(vec![entry(op)])).collect();
            let mut bytes = Vec::new();
            for w in &writes {
                encode(w, &mut bytes);
            }
            let whole = bytes.len();
            bytes.extend_from_slice(&garbage);
            let (got, valid) = decode_all(&bytes);
            proptest::prop_assert!(valid >= whole && got.len() >= writes.len());
            proptest::prop_assert_eq!(&got[..writes.len()], &writes[..]);
            let cut = cut.min(bytes.len());
            let (kept, valid) = decode_all(&bytes[..cut]);
            proptest::prop_assert!(valid <= cut);
            proptest::prop_assert_eq!(&kept[..], &got[..kept.len()]);
            let _ = crate::group::log::decode_msg(&garbage);
        }
    }

    #[test]
    fn a_foreign_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("group.log");
        std::fs::write(&path, b"NOTALOG!and more").unwrap();
        assert!(recover(&path).is_err());
    }
}
