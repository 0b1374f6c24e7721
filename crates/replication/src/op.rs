//! The replicated operation: a batch of a primary's committed write sets, in commit order.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

/// The largest write set one replicated commit carries, in bytes as
/// [`verso_engine::write_set_bytes`] counts them; a larger commit fails with
/// `TransactionTooLarge`. With [`BATCH_BYTES`] and [`MESSAGE_OPS_BYTES`] it bounds every
/// message between replicas: a batch holds at most `max(BATCH_BYTES, one write set)`, a
/// PREPARE entry and a catch-up reply at most `max(MESSAGE_OPS_BYTES, one batch)`, all
/// under the transport's 64 MiB (`TransportConfig::max_payload`); a larger message would be
/// dropped, and retried, for ever.
pub const WRITE_SET_BYTES_MAX: usize = 32 << 20;
/// A batch takes commits while it holds at most this many bytes (at least one commit).
pub const BATCH_BYTES: usize = 1 << 20;
/// Bytes of batches per PREPARE entry and per catch-up reply
/// (`verso_vsr::Config::message_bytes_max`).
pub const MESSAGE_OPS_BYTES: usize = 4 << 20;

/// One write of a committed transaction, or, with an empty `table` (no table has that
/// name), the clear of the table named by `key`, which each replica expands against its own
/// copy (`verso_engine::ReplicatedWrite::clear`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Write {
    pub table: String,
    // As bytes, not as a sequence of `u8`s: the same encoding in postcard, but copied whole
    // instead of one element at a time (most of a backup's time went there for large
    // values).
    #[serde(with = "serde_bytes")]
    pub key: Vec<u8>,
    /// `None` deletes.
    #[serde(with = "serde_bytes")]
    pub value: Option<Vec<u8>>,
}

/// A committed transaction's writes at its commit timestamp. A *barrier* (no writes,
/// `cts == 0`) carries nothing: it exists so that reads waiting for a round to a majority
/// have an entry to wait for when no write is coming (ARCHITECTURE.md, "Replication").
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct TxnWrites {
    pub cts: u64,
    pub writes: Vec<Write>,
}

impl TxnWrites {
    pub fn barrier() -> TxnWrites {
        TxnWrites {
            cts: 0,
            writes: Vec::new(),
        }
    }

    /// At least its encoded size: the write set's bytes as the engine bounds them, and 16
    /// for the timestamp and the count.
    pub fn bytes(&self) -> usize {
        16 + verso_engine::write_set_bytes(self.writes.iter().map(|w| {
            verso_engine::ReplicatedWrite {
                table: &w.table,
                key: &w.key,
                value: w.value.as_deref(),
            }
        }))
    }
}

/// The operation VSR replicates: the write sets of the primary's commit slots
/// `first_slot..first_slot + txns.len()`, in commit-timestamp order. `origin` names the
/// process that committed them (random per process start): that process installed them
/// already and only records them; every other replica installs them.
///
/// The write sets are shared: VSR clones an entry for every disk append, PREPARE and
/// catch-up reply it builds, on the replication thread, and a deep copy of a log holding
/// large values took it hundreds of milliseconds. Encoded as the `Vec` it holds.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Batch {
    pub origin: u64,
    pub first_slot: u64,
    pub txns: Arc<Vec<TxnWrites>>,
}

impl Batch {
    /// The largest commit timestamp in the batch (0 if it holds only barriers).
    pub fn cts_max(&self) -> u64 {
        self.txns.iter().map(|t| t.cts).max().unwrap_or(0)
    }

    /// At least its encoded size ([`verso_vsr::App::op_bytes`]).
    pub fn bytes(&self) -> usize {
        32 + self.txns.iter().map(TxnWrites::bytes).sum::<usize>()
    }

    /// The slot after the batch's last.
    pub fn end_slot(&self) -> u64 {
        self.first_slot + self.txns.len() as u64
    }
}

/// The application's part of a checkpoint or a state transfer (`verso_vsr::Snapshot::app`):
/// small, because the data is in a file beside the replica log (`checkpoint.rs`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum EngineSnapshot {
    /// Nothing applied yet: an empty database.
    Empty,
    Taken {
        /// The data file's name in the replica's directory.
        file: String,
        /// The file holds every key's newest version at or below this commit timestamp:
        /// everything through the durable point when the checkpoint was taken.
        durable_cts: u64,
        /// The operations applied after it (which a view change may still undo), with
        /// their writes, in op order: replayed on top, with undo records.
        tail: Vec<(u64, Vec<TxnWrites>)>,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Replica logs and checkpoints written before the byte strings were encoded as bytes
    /// still load: postcard encodes both forms the same way.
    #[test]
    fn byte_strings_encode_as_before() {
        #[derive(Serialize)]
        struct Before {
            table: String,
            key: Vec<u8>,
            value: Option<Vec<u8>>,
        }
        for (key, value) in [
            (vec![], None),
            (b"k".to_vec(), Some(vec![])),
            (vec![0xff; 300], Some(vec![7; 70_000])),
        ] {
            let before = Before {
                table: "t".into(),
                key: key.clone(),
                value: value.clone(),
            };
            let now = Write {
                table: "t".into(),
                key,
                value,
            };
            let bytes = postcard::to_allocvec(&now).unwrap();
            assert_eq!(bytes, postcard::to_allocvec(&before).unwrap());
            assert_eq!(postcard::from_bytes::<Write>(&bytes).unwrap(), now);
        }
    }
}
