//! Checkpoints: every table's contents at one snapshot timestamp, written while transactions
//! keep running, in parts written in parallel, and published atomically.
//!
//! ```text
//! DIR/checkpoint-<ts>/part-<i>.vckp   header frame, batch frames of entries, end frame
//! DIR/checkpoint-<ts>/MANIFEST        one frame: ts, log position, tables, parts
//! ```
//! Publication: parts and manifest are written into `checkpoint-<ts>.tmp/` and synced, the
//! directory is synced and renamed, and the data directory synced. A directory without
//! `.tmp` is complete; a `.tmp` one is debris of a crash and is removed.
//!
//! A checkpoint is fuzzy: it holds, for every live key, a committed version the scan saw,
//! with that version's timestamp, read while transactions keep committing. Consistency
//! comes from the log: the logs rotate before the scan, recovery replays every transaction
//! in the files after that point (each write kept only if newer than what its key holds),
//! and the checkpoint is published only once the log is durable past every transaction the
//! scan saw, so it never holds one the logs lose. The recovered state is then exactly the
//! transactions inside the log's cut. `ts` names the checkpoint (taken when it began).
//!
//! The newest checkpoint and the one before it are kept, with the logs from the older one's
//! rotation point: if the newest turns out damaged, recovery falls back to the older one.

use std::fs;
use std::path::{Path, PathBuf};

use crate::dir::DataDir;
use crate::frame::{append_frame, put_bytes, put_u32, put_u64, read_frame, Fields};
use crate::recovery::ReplayFrom;
use crate::storage::{AppendFile, Storage};
use crate::LogError;

const PART_MAGIC: &[u8; 8] = b"VERSOCKP";
const MANIFEST_MAGIC: &[u8; 8] = b"VERSOMAN";
/// Version of the checkpoint format this build writes and reads.
pub const CHECKPOINT_FORMAT_VERSION: u32 = 1;
/// A part's batch frame is flushed once it holds this many bytes.
pub const CHECKPOINT_BATCH_BYTES: usize = 256 << 10;

const KIND_HEADER: u8 = 1;
const KIND_BATCH: u8 = 2;
const KIND_END: u8 = 3;

/// What a complete checkpoint is, and what recovery needs besides its entries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckpointMeta {
    /// The snapshot timestamp: the checkpoint holds every transaction below it.
    pub ts: u64,
    /// Log files from this (generation, seq) on hold what the checkpoint does not.
    pub generation: u64,
    pub seq: u64,
    /// An epoch every log had made durable before the checkpoint was published.
    pub epoch: u64,
    /// Table names in id order.
    pub tables: Vec<String>,
    /// Entries per part.
    pub parts: Vec<u64>,
}

impl CheckpointMeta {
    /// Where log replay starts: every transaction in the files from the rotation point,
    /// whatever its timestamp (see the module docs).
    pub fn replay_from(&self) -> ReplayFrom {
        ReplayFrom {
            generation: self.generation,
            seq: self.seq,
            ts: 0,
        }
    }
}

fn dir_name(ts: u64) -> String {
    format!("checkpoint-{ts:020}")
}

/// A checkpoint being written. Dropping it without [`finish`](Self::finish) leaves a `.tmp`
/// directory that the next open removes.
pub struct CheckpointBuilder {
    tmp: PathBuf,
    ts: u64,
    storage: std::sync::Arc<dyn Storage>,
}

/// One part file: feed it entries from one thread.
pub struct PartWriter {
    path: PathBuf,
    file: Box<dyn AppendFile>,
    batch: Vec<u8>,
    batch_entries: u32,
    entries: u64,
}

impl CheckpointBuilder {
    pub fn create(dir: &DataDir, ts: u64) -> Result<CheckpointBuilder, LogError> {
        let tmp = dir.path().join(format!("{}.tmp", dir_name(ts)));
        if tmp.exists() {
            fs::remove_dir_all(&tmp).map_err(LogError::io(&tmp))?;
        }
        fs::create_dir(&tmp).map_err(LogError::io(&tmp))?;
        Ok(CheckpointBuilder {
            tmp,
            ts,
            storage: dir.storage().clone(),
        })
    }

    pub fn part(&self, index: u32) -> Result<PartWriter, LogError> {
        let path = self.tmp.join(format!("part-{index:04}.vckp"));
        let mut file = self.storage.create(&path).map_err(LogError::io(&path))?;
        let mut header = Vec::new();
        append_frame(&mut header, |o| {
            o.push(KIND_HEADER);
            o.extend_from_slice(PART_MAGIC);
            put_u32(o, CHECKPOINT_FORMAT_VERSION);
            put_u64(o, self.ts);
            put_u32(o, index);
        });
        file.write_all(&header).map_err(LogError::io(&path))?;
        Ok(PartWriter {
            path,
            file,
            batch: Vec::with_capacity(CHECKPOINT_BATCH_BYTES + 4096),
            batch_entries: 0,
            entries: 0,
        })
    }

    /// Writes the manifest and publishes the checkpoint; then removes older checkpoints and
    /// the log files it covers.
    pub fn finish(self, dir: &DataDir, meta: &CheckpointMeta) -> Result<(), LogError> {
        assert_eq!(meta.ts, self.ts);
        let path = self.tmp.join("MANIFEST");
        let mut bytes = Vec::new();
        append_frame(&mut bytes, |o| {
            o.extend_from_slice(MANIFEST_MAGIC);
            put_u32(o, CHECKPOINT_FORMAT_VERSION);
            put_u64(o, meta.ts);
            put_u64(o, meta.generation);
            put_u64(o, meta.seq);
            put_u64(o, meta.epoch);
            put_u32(o, meta.tables.len() as u32);
            for t in &meta.tables {
                put_bytes(o, t.as_bytes());
            }
            put_u32(o, meta.parts.len() as u32);
            for &n in &meta.parts {
                put_u64(o, n);
            }
        });
        let mut f = self.storage.create(&path).map_err(LogError::io(&path))?;
        f.write_all(&bytes)
            .and_then(|()| f.sync_data())
            .map_err(LogError::io(&path))?;
        self.storage
            .sync_dir(&self.tmp)
            .map_err(LogError::io(&self.tmp))?;
        let done = dir.path().join(dir_name(self.ts));
        fs::rename(&self.tmp, &done).map_err(LogError::io(&done))?;
        self.storage
            .sync_dir(dir.path())
            .map_err(LogError::io(dir.path()))?;
        remove_covered(dir, meta)
    }
}

impl PartWriter {
    pub fn add(&mut self, table: u32, ts: u64, key: &[u8], value: &[u8]) -> Result<(), LogError> {
        Self::encode(&mut self.batch, table, ts, key, value);
        self.batch_entries += 1;
        self.entries += 1;
        if self.batch.len() >= CHECKPOINT_BATCH_BYTES {
            self.flush_batch()?;
        }
        Ok(())
    }

    /// Appends one entry's encoding to `out` (to build batches on another thread).
    pub fn encode(out: &mut Vec<u8>, table: u32, ts: u64, key: &[u8], value: &[u8]) {
        put_u32(out, table);
        put_u64(out, ts);
        put_bytes(out, key);
        put_bytes(out, value);
    }

    /// Adds `n` entries that [`encode`](Self::encode) wrote into `encoded`.
    pub fn add_encoded(&mut self, n: u32, encoded: &[u8]) -> Result<(), LogError> {
        self.flush_batch()?;
        let mut frame = Vec::with_capacity(encoded.len() + 16);
        append_frame(&mut frame, |o| {
            o.push(KIND_BATCH);
            put_u32(o, n);
            o.extend_from_slice(encoded);
        });
        self.entries += u64::from(n);
        self.file
            .write_all(&frame)
            .map_err(LogError::io(&self.path))
    }

    fn flush_batch(&mut self) -> Result<(), LogError> {
        if self.batch_entries == 0 {
            return Ok(());
        }
        let mut frame = Vec::with_capacity(self.batch.len() + 16);
        append_frame(&mut frame, |o| {
            o.push(KIND_BATCH);
            put_u32(o, self.batch_entries);
            o.extend_from_slice(&self.batch);
        });
        self.batch.clear();
        self.batch_entries = 0;
        self.file
            .write_all(&frame)
            .map_err(LogError::io(&self.path))
    }

    /// Ends the part and syncs it; returns its entry count.
    pub fn finish(mut self) -> Result<u64, LogError> {
        self.flush_batch()?;
        let mut end = Vec::new();
        append_frame(&mut end, |o| {
            o.push(KIND_END);
            put_u64(o, self.entries);
        });
        self.file
            .write_all(&end)
            .and_then(|()| self.file.sync_data())
            .map_err(LogError::io(&self.path))?;
        Ok(self.entries)
    }
}

/// Keeps `meta`'s checkpoint and the one before it, which recovery falls back to if the
/// newest turns out damaged; removes older checkpoints and the log files neither needs.
fn remove_covered(dir: &DataDir, meta: &CheckpointMeta) -> Result<(), LogError> {
    let all = list(dir.path())?;
    let previous = all
        .iter()
        .rev()
        .find(|(ts, _)| *ts < meta.ts)
        .and_then(|(ts, path)| Some((*ts, read_manifest(&path.join("MANIFEST")).ok()?)));
    let (keep_from, log_from) = match &previous {
        Some((ts, prev)) => (*ts, (prev.generation, prev.seq)),
        None => (meta.ts, (meta.generation, meta.seq)),
    };
    for (ts, path) in all {
        if ts < keep_from {
            fs::remove_dir_all(&path).map_err(LogError::io(&path))?;
        }
    }
    for id in dir.log_files()? {
        if (id.generation, id.seq) < log_from {
            let p = dir.log_path(id);
            fs::remove_file(&p).map_err(LogError::io(&p))?;
        }
    }
    Ok(())
}

/// Complete checkpoints, oldest first; removes `.tmp` debris.
fn list(data: &Path) -> Result<Vec<(u64, PathBuf)>, LogError> {
    let mut out = Vec::new();
    for e in fs::read_dir(data).map_err(LogError::io(data))? {
        let e = e.map_err(LogError::io(data))?;
        let name = e.file_name();
        let Some(name) = name.to_str() else { continue };
        let Some(rest) = name.strip_prefix("checkpoint-") else {
            continue;
        };
        if rest.ends_with(".tmp") {
            let p = e.path();
            tracing::info!(path = %p.display(), "removing an unfinished checkpoint");
            fs::remove_dir_all(&p).map_err(LogError::io(&p))?;
            continue;
        }
        if let Ok(ts) = rest.parse::<u64>() {
            out.push((ts, e.path()));
        }
    }
    out.sort();
    Ok(out)
}

/// One checkpoint entry: (table, version timestamp, key, value).
pub type Entry<'a> = (u32, u64, &'a [u8], &'a [u8]);

/// Entries handed to a checkpoint loader.
pub type Entries<'a> = dyn Iterator<Item = Entry<'a>> + 'a;

/// Loads the newest valid checkpoint, if any: checks every checksum of every part (in
/// parallel), then calls `apply(ts, entries)` for each part (in parallel). A damaged
/// checkpoint is skipped with a warning for the one before it (kept for this: see
/// `remove_covered`); if none is valid, the newest one's damage is the error.
pub fn load_newest(
    dir: &DataDir,
    apply: &(dyn Fn(u64, &mut Entries<'_>) + Sync),
) -> Result<Option<CheckpointMeta>, LogError> {
    let mut first_error = None;
    for (_, path) in list(dir.path())?.iter().rev() {
        match load(path, apply) {
            Ok(meta) => return Ok(Some(meta)),
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "checkpoint unusable; trying an older one");
                first_error.get_or_insert(e);
            }
        }
    }
    first_error.map_or(Ok(None), Err)
}

/// Reads and checks one checkpoint whole; applies it only if every part is intact.
fn load(
    path: &Path,
    apply: &(dyn Fn(u64, &mut Entries<'_>) + Sync),
) -> Result<CheckpointMeta, LogError> {
    let meta = read_manifest(&path.join("MANIFEST"))?;
    let files: Vec<(PathBuf, Vec<u8>)> = (0..meta.parts.len())
        .map(|i| {
            let p = path.join(format!("part-{i:04}.vckp"));
            let bytes = fs::read(&p).map_err(LogError::io(&p))?;
            Ok((p, bytes))
        })
        .collect::<Result<_, LogError>>()?;
    std::thread::scope(|s| -> Result<(), LogError> {
        let parsers: Vec<_> = files
            .iter()
            .enumerate()
            .map(|(i, (p, bytes))| {
                let meta = &meta;
                s.spawn(move || parse_part(p, bytes, meta, i))
            })
            .collect();
        let mut parts = Vec::with_capacity(parsers.len());
        for h in parsers {
            parts.push(h.join().expect("checkpoint parser panicked")?);
        }
        // Every part is intact: now install them.
        for entries in parts {
            let ts = meta.ts;
            s.spawn(move || apply(ts, &mut entries.into_iter()));
        }
        Ok(())
    })?;
    Ok(meta)
}

fn damaged(path: &Path, offset: usize, kind: crate::frame::DamageKind) -> LogError {
    LogError::Damaged {
        path: path.into(),
        offset: offset as u64,
        kind,
    }
}

fn read_manifest(path: &Path) -> Result<CheckpointMeta, LogError> {
    let bytes = fs::read(path).map_err(LogError::io(path))?;
    parse_manifest(path, &bytes)
}

pub(crate) fn parse_manifest(path: &Path, bytes: &[u8]) -> Result<CheckpointMeta, LogError> {
    use crate::frame::DamageKind::BadRecord;
    let (payload, _) = read_frame(bytes, 0).map_err(|d| damaged(path, 0, d.kind))?;
    let mut f = Fields::new(payload);
    let parse = |f: &mut Fields<'_>| -> Result<CheckpointMeta, crate::frame::Malformed> {
        if f.take(8)? != MANIFEST_MAGIC {
            return Err(crate::frame::Malformed);
        }
        let version = f.u32()?;
        if version > CHECKPOINT_FORMAT_VERSION {
            return Err(crate::frame::Malformed);
        }
        let ts = f.u64()?;
        let generation = f.u64()?;
        let seq = f.u64()?;
        let epoch = f.u64()?;
        let n = f.u32()? as usize;
        let mut tables = Vec::new();
        for _ in 0..n {
            let name = std::str::from_utf8(f.bytes()?).map_err(|_| crate::frame::Malformed)?;
            tables.push(name.to_owned());
        }
        let n = f.u32()? as usize;
        let mut parts = Vec::new();
        for _ in 0..n.min(1 << 16) {
            parts.push(f.u64()?);
        }
        Ok(CheckpointMeta {
            ts,
            generation,
            seq,
            epoch,
            tables,
            parts,
        })
    };
    parse(&mut f).map_err(|_| damaged(path, 0, BadRecord))
}

/// Checks every frame of a part and decodes its entries.
pub(crate) fn parse_part<'b>(
    path: &Path,
    bytes: &'b [u8],
    meta: &CheckpointMeta,
    index: usize,
) -> Result<Vec<Entry<'b>>, LogError> {
    use crate::frame::DamageKind::BadRecord;
    let (header, mut at) = read_frame(bytes, 0).map_err(|d| damaged(path, 0, d.kind))?;
    let mut h = Fields::new(header);
    let ok = h.u8().ok() == Some(KIND_HEADER)
        && h.take(8).ok() == Some(&PART_MAGIC[..])
        && h.u32().is_ok_and(|v| v <= CHECKPOINT_FORMAT_VERSION)
        && h.u64().ok() == Some(meta.ts)
        && h.u32().ok() == Some(index as u32);
    if !ok {
        return Err(damaged(path, 0, BadRecord));
    }
    // Verify every frame before applying any: a damaged checkpoint must not half-load.
    let mut batches = Vec::new();
    let mut seen = 0u64;
    loop {
        let (payload, next) = read_frame(bytes, at).map_err(|d| damaged(path, at, d.kind))?;
        let mut f = Fields::new(payload);
        match f.u8() {
            Ok(KIND_BATCH) => {
                let n = f.u32().map_err(|_| damaged(path, at, BadRecord))?;
                seen += u64::from(n);
                batches.push((at, n, payload));
            }
            Ok(KIND_END) => {
                let total = f.u64().map_err(|_| damaged(path, at, BadRecord))?;
                if total != seen || meta.parts.get(index) != Some(&total) {
                    return Err(damaged(path, at, BadRecord));
                }
                break;
            }
            _ => return Err(damaged(path, at, BadRecord)),
        }
        at = next;
    }
    // Decode fully once to validate, then hand the entries over.
    let mut entries: Vec<Entry<'_>> = Vec::with_capacity(seen as usize);
    for (offset, n, payload) in batches {
        let mut f = Fields::new(&payload[5..]);
        for _ in 0..n {
            let e = (|| {
                Ok::<_, crate::frame::Malformed>((f.u32()?, f.u64()?, f.bytes()?, f.bytes()?))
            })()
            .map_err(|_| damaged(path, offset, BadRecord))?;
            entries.push(e);
        }
        if !f.is_empty() {
            return Err(damaged(path, offset, BadRecord));
        }
    }
    Ok(entries)
}
