//! Reading the logs back: find each generation's consistent cut and replay up to it.
//!
//! A generation is one run of the database. Its cut `D` is the smallest, over its logs, of
//! the last epoch mark each log has intact on disk (thesis §3.2's τ, in epochs). Every
//! transaction with an epoch `<= D` is replayed and every later one dropped (`logger.rs`
//! explains why that is a dependency-closed prefix of the commit order). Generations are
//! replayed oldest first; the next run only ever builds on what this recovery produced.
//!
//! Damage: a bad frame with no intact epoch mark anywhere after it, in a log's last file, is
//! the torn tail of a write the crash interrupted; it is truncated with a warning. Any other
//! damage refuses recovery with the file and offset, unless the caller asked to truncate.

use std::collections::BTreeMap;
use std::fs::{self, OpenOptions};
use std::path::{Path, PathBuf};

use crate::dir::{DataDir, LogFileId};
use crate::frame::{read_frame, Damage, DamageKind, FRAME_HEADER_LEN};
use crate::record::{decode, LogRecord, Write};
use crate::{LogError, LOG_FORMAT_VERSION};

/// Where replay starts: what a checkpoint already holds is skipped.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReplayFrom {
    /// Files of earlier generations, and of this generation with a smaller seq, are covered.
    pub generation: u64,
    pub seq: u64,
    /// Transactions with a smaller timestamp are in the checkpoint.
    pub ts: u64,
}

/// What replay found and did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReplaySummary {
    /// Largest generation, epoch and timestamp in any record read (dropped ones included):
    /// the next run starts above all three.
    pub max_generation: u64,
    pub max_epoch: u64,
    pub max_ts: u64,
    /// Transactions replayed, and dropped for lying beyond their generation's cut.
    pub txns_replayed: u64,
    pub txns_dropped: u64,
    pub files_read: usize,
    pub bytes_read: u64,
    /// Files cut short: (file, offset), torn tails and (if asked) damage.
    pub truncated: Vec<(PathBuf, u64)>,
}

/// Replays every log at or after `from`, calling `apply(ts, write)` for each write of each
/// transaction inside its generation's cut, in log order within a log. Applying must be
/// idempotent and keep the write with the largest timestamp per key: logs are not merged.
pub fn replay_logs(
    dir: &DataDir,
    from: ReplayFrom,
    truncate_damaged: bool,
    progress: &mut dyn FnMut(u64, u64),
    apply: &mut dyn FnMut(u64, &Write<'_>),
) -> Result<ReplaySummary, LogError> {
    let ids: Vec<LogFileId> = dir
        .log_files()?
        .into_iter()
        .filter(|id| (id.generation, id.seq) >= (from.generation, from.seq))
        .collect();
    let total: u64 = ids
        .iter()
        .map(|id| fs::metadata(dir.log_path(*id)).map_or(0, |m| m.len()))
        .sum();
    let mut summary = ReplaySummary::default();
    let mut generations: BTreeMap<u64, BTreeMap<u32, Vec<LogFileId>>> = BTreeMap::new();
    for id in ids {
        generations
            .entry(id.generation)
            .or_default()
            .entry(id.log)
            .or_default()
            .push(id);
    }
    for (generation, logs) in generations {
        summary.max_generation = summary.max_generation.max(generation);
        let mut scanned: Vec<ScannedLog> = Vec::new();
        for (_, files) in logs {
            scanned.push(scan_log(dir, &files, truncate_damaged, &mut summary)?);
            progress(summary.bytes_read, total);
        }
        let cut = scanned.iter().map(|l| l.last_mark).min().unwrap_or(0);
        for log in &scanned {
            for file in &log.files {
                for &(start, end) in &file.txns {
                    let Ok(LogRecord::Txn { epoch, ts, writes }) = decode(&file.bytes[start..end])
                    else {
                        unreachable!("scan_log checked every record")
                    };
                    summary.max_epoch = summary.max_epoch.max(epoch);
                    summary.max_ts = summary.max_ts.max(ts);
                    if epoch > cut {
                        summary.txns_dropped += 1;
                        continue;
                    }
                    if ts < from.ts {
                        continue;
                    }
                    summary.txns_replayed += 1;
                    for w in &writes {
                        apply(ts, w);
                    }
                }
            }
        }
        summary.max_epoch = summary.max_epoch.max(cut);
    }
    Ok(summary)
}

struct ScannedFile {
    bytes: Vec<u8>,
    /// Payload ranges of the transaction records.
    txns: Vec<(usize, usize)>,
}

struct ScannedLog {
    files: Vec<ScannedFile>,
    /// The largest epoch mark intact in this log.
    last_mark: u64,
}

fn scan_log(
    dir: &DataDir,
    files: &[LogFileId],
    truncate_damaged: bool,
    summary: &mut ReplaySummary,
) -> Result<ScannedLog, LogError> {
    let mut out = ScannedLog {
        files: Vec::new(),
        last_mark: 0,
    };
    for (i, &id) in files.iter().enumerate() {
        let path = dir.log_path(id);
        if i > 0 && files[i - 1].seq + 1 != id.seq {
            return Err(LogError::Foreign {
                path,
                reason: format!("log file seq {} is missing before it", id.seq - 1),
            });
        }
        let last = i + 1 == files.len();
        let bytes = fs::read(&path).map_err(LogError::io(&path))?;
        summary.files_read += 1;
        summary.bytes_read += bytes.len() as u64;
        let (txns, mark, damage) = scan_file(&path, id, &bytes)?;
        out.last_mark = out.last_mark.max(mark);
        let mut stop = false;
        if let Some(d) = damage {
            let torn = last && !has_mark_after(&bytes, d.offset as usize);
            if !torn && !truncate_damaged {
                return Err(LogError::Damaged {
                    path,
                    offset: d.offset,
                    kind: d.kind,
                });
            }
            tracing::warn!(
                path = %path.display(),
                offset = d.offset,
                kind = %d.kind,
                torn,
                "truncating the log here"
            );
            truncate(&path, d.offset)?;
            summary.truncated.push((path.clone(), d.offset));
            // After damage that is not a tail, later files of this log cannot be trusted
            // to continue it.
            stop = !last;
        }
        out.files.push(ScannedFile { bytes, txns });
        if stop {
            for later in &files[i + 1..] {
                let p = dir.log_path(*later);
                tracing::warn!(path = %p.display(), "dropping a log file after damage");
                fs::remove_file(&p).map_err(LogError::io(&p))?;
            }
            break;
        }
    }
    Ok(out)
}

type Scanned = (Vec<(usize, usize)>, u64, Option<Damage>);

/// Validates one file: its header, then frames until the end or the first damage.
fn scan_file(path: &Path, id: LogFileId, bytes: &[u8]) -> Result<Scanned, LogError> {
    let mut txns = Vec::new();
    let mut mark = 0;
    let header = read_frame(bytes, 0).map(|(p, next)| (decode(p), next));
    let mut at = match header {
        Ok((Ok(LogRecord::Header(h)), next)) => {
            if h.format_version > LOG_FORMAT_VERSION {
                return Err(LogError::NewerFormat {
                    path: path.into(),
                    found: h.format_version,
                    supported: LOG_FORMAT_VERSION,
                });
            }
            if (h.generation, h.log, h.seq) != (id.generation, id.log, id.seq) {
                return Err(LogError::Foreign {
                    path: path.into(),
                    reason: format!("its header says {h:?}"),
                });
            }
            next
        }
        // A header that never reached the disk: the file was being created at the crash.
        Err(d) => return Ok((txns, mark, Some(d))),
        Ok((_, _)) => {
            return Err(LogError::Foreign {
                path: path.into(),
                reason: "no log header".into(),
            })
        }
    };
    while at < bytes.len() {
        let (payload, next) = match read_frame(bytes, at) {
            Ok(f) => f,
            Err(d) => return Ok((txns, mark, Some(d))),
        };
        match decode(payload) {
            Ok(LogRecord::Txn { .. }) => txns.push((at + FRAME_HEADER_LEN, next)),
            Ok(LogRecord::Mark { epoch }) => mark = mark.max(epoch),
            Ok(LogRecord::Pad) => {}
            Ok(LogRecord::Header(_)) | Err(_) => {
                let d = Damage {
                    offset: at as u64,
                    kind: DamageKind::BadRecord,
                };
                return Ok((txns, mark, Some(d)));
            }
        }
        at = next;
    }
    Ok((txns, mark, None))
}

/// Whether an intact epoch mark starts anywhere after `offset`: then the bytes at `offset`
/// were synced once (a mark is written after everything before it), so they are not a torn
/// tail.
fn has_mark_after(bytes: &[u8], offset: usize) -> bool {
    const MARK_LEN: u32 = 9;
    (offset + 1..bytes.len().saturating_sub(FRAME_HEADER_LEN)).any(|at| {
        bytes[at..at + 4] == MARK_LEN.to_le_bytes()
            && read_frame(bytes, at)
                .ok()
                .is_some_and(|(p, _)| matches!(decode(p), Ok(LogRecord::Mark { .. })))
    })
}

fn truncate(path: &Path, offset: u64) -> Result<(), LogError> {
    let f = OpenOptions::new()
        .write(true)
        .open(path)
        .map_err(LogError::io(path))?;
    f.set_len(offset)
        .and_then(|()| f.sync_all())
        .map_err(LogError::io(path))
}
