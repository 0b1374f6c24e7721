//! Errors of the durability layer. Each names the file (and offset) it is about.

use std::io;
use std::path::PathBuf;

use crate::frame::DamageKind;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LogError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error(
        "data directory {path} is in use by another process (it holds {path}/LOCK); \
         stop it or choose another --data-dir"
    )]
    Locked { path: PathBuf },
    #[error(
        "{path} was written by a newer Verso (format version {found}; this build understands \
         up to {supported}); upgrade Verso to open it"
    )]
    NewerFormat {
        path: PathBuf,
        found: u32,
        supported: u32,
    },
    #[error("{path} is not a Verso data file: {reason}")]
    Foreign { path: PathBuf, reason: String },
    #[error(
        "{path} is damaged at byte {offset} ({kind}) and valid data follows, so this is not a \
         torn write from a crash; refusing to start. Restore the file, or restart with the \
         truncate-damaged-log option (--recovery-truncate) to drop it from byte {offset} on"
    )]
    Damaged {
        path: PathBuf,
        offset: u64,
        kind: DamageKind,
    },
    #[error("the redo log cannot be written ({reason}); writes are refused until restart")]
    Failed { reason: String },
    #[error("a transaction of {bytes} bytes exceeds the log's record limit of {max} bytes")]
    TooLarge { bytes: u64, max: u64 },
}

impl LogError {
    pub(crate) fn io(path: impl Into<PathBuf>) -> impl FnOnce(io::Error) -> LogError {
        let path = path.into();
        move |source| LogError::Io { path, source }
    }
}
