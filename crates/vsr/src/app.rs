//! The replicated application: what Lazy VSR asks of it (thesis §4.2: execute, keep undo
//! information, checkpoint).

use std::fmt::Debug;

/// A deterministic state machine with undo. Every replica applies the same operations in
/// the same order; a replica that applied operations the group later discards undoes them
/// (thesis Fig 4-1), so the application keeps undo information for every operation above
/// the durable point, and its snapshots include it.
///
/// Operation numbers are the log's: several operations may share one (a batch) and they
/// increase along the log; `undo_to(n)` reverts every operation numbered above `n`.
pub trait App {
    type Op: Clone + Debug + Eq + std::hash::Hash + Ord;
    type Reply: Clone + Debug + Eq + std::hash::Hash + Ord;
    /// State and undo information, as of the last applied operation.
    type Snapshot: Clone + Debug + Eq + std::hash::Hash + Ord;

    /// Executes `op`, numbered `op_number`, and returns its reply.
    fn apply(&mut self, op_number: u64, op: &Self::Op) -> Self::Reply;

    /// Reverts every operation numbered above `op_number`, newest first.
    fn undo_to(&mut self, op_number: u64);

    /// Undo information for operations at or below `op_number` is no longer needed: the
    /// group will never roll them back (they are covered by the durable point).
    fn forget_undo(&mut self, op_number: u64);

    /// The state and undo information, for a checkpoint or a state transfer.
    fn snapshot(&self) -> Self::Snapshot;

    /// Replaces the state with a snapshot's.
    fn restore(&mut self, snapshot: &Self::Snapshot);

    /// About how many bytes `op` takes in a message: the replica packs requests into a
    /// PREPARE entry, and entries into a catch-up reply, up to
    /// [`Config::message_bytes_max`](crate::Config::message_bytes_max) of these (at least one
    /// each, whatever its size), so that a message fits the transport's limit.
    fn op_bytes(_op: &Self::Op) -> usize {
        0
    }
}
