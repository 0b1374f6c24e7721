//! Verso's durability layer: per-worker redo logs with epoch-based group commit, checkpoints,
//! and recovery to a consistent cut (Masstree thesis §3.2, Silo's epochs).
//!
//! It knows nothing of transactions or indexes: the engine hands it committed write sets
//! (table id, key, value or tombstone, timestamp) and gets them back at recovery.
//!
//! Where to start: `logger.rs` (the write path and its invariants), then `recovery.rs`.

mod checkpoint;
mod dir;
mod error;
mod frame;
mod logger;
mod record;
mod recovery;
mod storage;

pub use checkpoint::{
    load_newest as load_newest_checkpoint, CheckpointBuilder, CheckpointMeta, Entries, PartWriter,
    CHECKPOINT_BATCH_BYTES, CHECKPOINT_FORMAT_VERSION,
};
pub use dir::{DataDir, LogFileId, DATA_FORMAT_VERSION};
pub use error::LogError;
pub use frame::{Damage, DamageKind, FRAME_PAYLOAD_MAX};
pub use logger::{
    Logger, LoggerConfig, SyncMode, Ticket, LOG_BUFFER_BYTES_MAX, LOG_FILE_BYTES_MAX,
    TXN_RECORD_BYTES_MAX,
};
pub use record::{LogRecord, Write, WriteRef, LOG_FORMAT_VERSION};
pub use recovery::{replay_logs, ReplayFrom, ReplaySummary};
pub use storage::{AppendFile, FaultPlan, FaultyStorage, OsStorage, Storage};

/// Decoders of untrusted bytes, for the fuzz targets and their corpus tests.
pub mod fuzzing {
    /// Runs every decoder over `bytes` as a log file, a record payload and a frame stream;
    /// none may panic.
    pub fn decode_everything(bytes: &[u8]) {
        let _ = crate::record::decode(bytes);
        let mut at = 0;
        while let Ok((payload, next)) = crate::frame::read_frame(bytes, at) {
            let _ = crate::record::decode(payload);
            at = next;
        }
    }
}
