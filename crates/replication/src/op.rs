//! The replicated operation: a batch of a primary's committed write sets, in commit order.

use serde::{Deserialize, Serialize};

/// One write of a committed transaction.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Write {
    pub table: String,
    pub key: Vec<u8>,
    /// `None` deletes.
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
}

/// The operation VSR replicates: the write sets of the primary's commit slots
/// `first_slot..first_slot + txns.len()`, in commit-timestamp order. `origin` names the
/// process that committed them (random per process start): that process installed them
/// already and only records them; every other replica installs them.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Batch {
    pub origin: u64,
    pub first_slot: u64,
    pub txns: Vec<TxnWrites>,
}

impl Batch {
    /// The largest commit timestamp in the batch (0 if it holds only barriers).
    pub fn cts_max(&self) -> u64 {
        self.txns.iter().map(|t| t.cts).max().unwrap_or(0)
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
