//! The data directory: its lock, its format stamp, the table catalog, and file names.
//!
//! ```text
//! DIR/LOCK                         flock(2)ed while a process has the directory open
//! DIR/FORMAT                       "verso-data <version>"
//! DIR/catalog.vcat                 table ids and names, one frame per table
//! DIR/log-G<gen>-L<log>-S<seq>.vlog   redo logs (`logger.rs`)
//! DIR/checkpoint-<ts>/             checkpoints (`checkpoint.rs`)
//! ```

use std::fs::{self, File, OpenOptions};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use crate::frame::{append_frame, put_bytes, put_u32, read_frame, Fields};
use crate::storage::{AppendFile, Storage};
use crate::LogError;

/// Version of the directory layout this build writes.
pub const DATA_FORMAT_VERSION: u32 = 1;
const FORMAT_PREFIX: &str = "verso-data ";
const CATALOG: &str = "catalog.vcat";
const CATALOG_MAGIC: &[u8; 8] = b"VERSOCAT";

/// An open, locked data directory. The lock is released when this is dropped.
pub struct DataDir {
    path: PathBuf,
    /// Holds the `flock`; closing it releases the lock.
    _lock: File,
    catalog: Box<dyn AppendFile>,
    storage: std::sync::Arc<dyn Storage>,
}

/// A log file's place: which run, which worker log, which file of that log.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LogFileId {
    pub generation: u64,
    pub log: u32,
    pub seq: u64,
}

impl LogFileId {
    pub fn file_name(&self) -> String {
        format!(
            "log-G{:08}-L{:03}-S{:08}.vlog",
            self.generation, self.log, self.seq
        )
    }

    pub fn parse(name: &str) -> Option<LogFileId> {
        let rest = name.strip_prefix("log-G")?.strip_suffix(".vlog")?;
        let (g, rest) = rest.split_once("-L")?;
        let (l, s) = rest.split_once("-S")?;
        Some(LogFileId {
            generation: g.parse().ok()?,
            log: l.parse().ok()?,
            seq: s.parse().ok()?,
        })
    }
}

impl DataDir {
    /// Opens (creating if needed) and locks `path`. Returns the directory and the catalog:
    /// table names in id order.
    pub fn open(
        path: &Path,
        storage: std::sync::Arc<dyn Storage>,
    ) -> Result<(DataDir, Vec<String>), LogError> {
        fs::create_dir_all(path).map_err(LogError::io(path))?;
        let lock_path = path.join("LOCK");
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(LogError::io(&lock_path))?;
        // SAFETY: `lock` is an open file descriptor for the duration of the call.
        let rc = unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if rc != 0 {
            let err = std::io::Error::last_os_error();
            if err.raw_os_error() == Some(libc::EWOULDBLOCK) {
                return Err(LogError::Locked { path: path.into() });
            }
            return Err(LogError::Io {
                path: lock_path,
                source: err,
            });
        }
        check_or_write_format(path, &*storage)?;
        let (tables, catalog) = open_catalog(path, &*storage)?;
        Ok((
            DataDir {
                path: path.into(),
                _lock: lock,
                catalog,
                storage,
            },
            tables,
        ))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn storage(&self) -> &std::sync::Arc<dyn Storage> {
        &self.storage
    }

    /// Records that table `id` is called `name`, durably, before the table is used.
    pub fn add_table(&mut self, id: u32, name: &str) -> Result<(), LogError> {
        let mut frame = Vec::new();
        append_frame(&mut frame, |o| {
            put_u32(o, id);
            put_bytes(o, name.as_bytes());
        });
        let path = self.path.join(CATALOG);
        self.catalog
            .write_all(&frame)
            .and_then(|()| self.catalog.sync_data())
            .map_err(LogError::io(path))
    }

    /// The log files present, sorted by (generation, log, seq).
    pub fn log_files(&self) -> Result<Vec<LogFileId>, LogError> {
        let mut ids: Vec<LogFileId> = fs::read_dir(&self.path)
            .map_err(LogError::io(&self.path))?
            .filter_map(|e| e.ok())
            .filter_map(|e| LogFileId::parse(e.file_name().to_str()?))
            .collect();
        ids.sort();
        Ok(ids)
    }

    pub fn log_path(&self, id: LogFileId) -> PathBuf {
        self.path.join(id.file_name())
    }
}

fn check_or_write_format(dir: &Path, storage: &dyn Storage) -> Result<(), LogError> {
    let path = dir.join("FORMAT");
    match fs::read_to_string(&path) {
        Ok(text) => {
            let version = text
                .trim()
                .strip_prefix(FORMAT_PREFIX)
                .and_then(|v| v.parse::<u32>().ok())
                .ok_or_else(|| LogError::Foreign {
                    path: path.clone(),
                    reason: format!("expected \"{FORMAT_PREFIX}<n>\", found {text:?}"),
                })?;
            if version > DATA_FORMAT_VERSION {
                return Err(LogError::NewerFormat {
                    path,
                    found: version,
                    supported: DATA_FORMAT_VERSION,
                });
            }
            Ok(())
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            // A directory with Verso files but no FORMAT is not ours to reinterpret.
            let tmp = dir.join("FORMAT.tmp");
            let _ = fs::remove_file(&tmp);
            let mut f = storage.create(&tmp).map_err(LogError::io(&tmp))?;
            f.write_all(format!("{FORMAT_PREFIX}{DATA_FORMAT_VERSION}\n").as_bytes())
                .and_then(|()| f.sync_data())
                .map_err(LogError::io(&tmp))?;
            fs::rename(&tmp, &path).map_err(LogError::io(&path))?;
            storage.sync_dir(dir).map_err(LogError::io(dir))
        }
        Err(e) => Err(LogError::Io { path, source: e }),
    }
}

/// Reads the catalog (truncating a torn last entry) and opens it for appending.
fn open_catalog(
    dir: &Path,
    storage: &dyn Storage,
) -> Result<(Vec<String>, Box<dyn AppendFile>), LogError> {
    let path = dir.join(CATALOG);
    let bytes = match fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let mut f = storage.create(&path).map_err(LogError::io(&path))?;
            let mut header = Vec::new();
            append_frame(&mut header, |o| {
                o.extend_from_slice(CATALOG_MAGIC);
                put_u32(o, DATA_FORMAT_VERSION);
            });
            f.write_all(&header)
                .and_then(|()| f.sync_data())
                .map_err(LogError::io(&path))?;
            storage.sync_dir(dir).map_err(LogError::io(dir))?;
            return Ok((Vec::new(), f));
        }
        Err(e) => return Err(LogError::Io { path, source: e }),
    };
    let foreign = |reason: &str| LogError::Foreign {
        path: path.clone(),
        reason: reason.into(),
    };
    let (header, mut at) = read_frame(&bytes, 0).map_err(|_| foreign("bad header"))?;
    let mut f = Fields::new(header);
    if f.take(8).ok() != Some(&CATALOG_MAGIC[..]) {
        return Err(foreign("bad magic"));
    }
    let mut tables = Vec::new();
    while at < bytes.len() {
        let entry = read_frame(&bytes, at).ok().and_then(|(payload, next)| {
            let mut f = Fields::new(payload);
            let id = f.u32().ok()?;
            let name = std::str::from_utf8(f.bytes().ok()?).ok()?.to_owned();
            Some((id, name, next))
        });
        let Some((id, name, next)) = entry else {
            // Only the last entry can be torn (each is synced before the next is written):
            // a bad entry with an intact one after it is damage, not a crash.
            if (at + 1..bytes.len()).any(|o| read_frame(&bytes, o).is_ok()) {
                return Err(LogError::Damaged {
                    path: path.clone(),
                    offset: at as u64,
                    kind: crate::frame::DamageKind::BadRecord,
                });
            }
            tracing::warn!(path = %path.display(), offset = at, "truncating a torn catalog entry");
            let file = OpenOptions::new()
                .write(true)
                .open(&path)
                .map_err(LogError::io(&path))?;
            file.set_len(at as u64)
                .and_then(|()| file.sync_all())
                .map_err(LogError::io(&path))?;
            break;
        };
        if id as usize != tables.len() {
            return Err(foreign("table ids out of order"));
        }
        tables.push(name);
        at = next;
    }
    let f = storage.append(&path).map_err(LogError::io(&path))?;
    Ok((tables, f))
}
