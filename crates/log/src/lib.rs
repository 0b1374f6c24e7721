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
    load_newest as load_newest_checkpoint, CheckpointBuilder, CheckpointMeta, Entries, Entry,
    PartWriter, CHECKPOINT_BATCH_BYTES, CHECKPOINT_FORMAT_VERSION,
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
pub use storage::{AppendFile, FaultPlan, FaultyStorage, OsStorage, Storage, SyncsHeld};

/// The log format's encoders (what the logger writes), for tools and tests that build logs.
pub mod encode {
    pub use crate::record::{append_header, append_mark, append_pad_to, append_txn, LogHeader};
}

/// Decoders of untrusted bytes, for the fuzz targets and their corpus tests.
pub mod fuzzing {
    use std::path::Path;

    /// Runs every decoder over `bytes`: as a record payload, a log frame stream, a checkpoint
    /// manifest and a checkpoint part. None may panic; whatever decodes must re-encode to
    /// frames that decode the same.
    pub fn decode_everything(bytes: &[u8]) {
        let _ = crate::record::decode(bytes);
        let mut at = 0;
        while let Ok((payload, next)) = crate::frame::read_frame(bytes, at) {
            if let Ok(crate::record::LogRecord::Txn { epoch, ts, writes }) =
                crate::record::decode(payload)
            {
                let mut again = Vec::new();
                crate::record::append_txn(
                    &mut again,
                    epoch,
                    ts,
                    writes.iter().map(|w| (w.table, w.key, w.value)),
                );
                let (p, _) = crate::frame::read_frame(&again, 0).expect("re-encoded frame");
                assert_eq!(p, payload, "a decoded record re-encodes to the same bytes");
            }
            at = next;
        }
        let path = Path::new("fuzz-input");
        if let Ok(meta) = crate::checkpoint::parse_manifest(path, bytes) {
            assert!(meta.parts.len() <= 1 << 16);
        }
        let meta = crate::CheckpointMeta {
            ts: 1,
            generation: 0,
            seq: 0,
            epoch: 0,
            tables: Vec::new(),
            parts: vec![bytes.len() as u64],
        };
        let _ = crate::checkpoint::parse_part(path, bytes, &meta, 0);
    }
}
