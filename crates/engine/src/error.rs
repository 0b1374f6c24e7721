//! The engine's typed errors. Nothing a user passes in makes the engine panic; it returns one
//! of these instead.

/// Why a transaction could not commit. Retrying (with a new, younger timestamp) may succeed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ConflictReason {
    /// A younger transaction already read (or range-read past) a key this one writes, so
    /// this write would change what that reader should have seen.
    ReadByYounger,
    /// A younger transaction already wrote, or is committing, a key this one writes.
    WrittenByYounger,
    /// Snapshot isolation and precision locking: another transaction holds an uncommitted
    /// write to a key this one writes, or committed one after this one started (first
    /// committer wins).
    WriteWrite,
    /// Precision locking: a transaction that committed after this one started wrote a key
    /// inside something this one read (a key, or a range, even an empty one).
    ReadChanged,
    /// Two-phase locking (no-wait): another transaction holds a conflicting lock.
    LockBusy,
}

impl std::fmt::Display for ConflictReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ConflictReason::ReadByYounger => "a younger transaction already read a key it writes",
            ConflictReason::WrittenByYounger => {
                "a younger transaction already wrote a key it writes"
            }
            ConflictReason::WriteWrite => {
                "another transaction wrote a key it writes after it started (or has not committed yet)"
            }
            ConflictReason::ReadChanged => {
                "a transaction that committed after it started wrote into what it read"
            }
            ConflictReason::LockBusy => "another transaction holds a conflicting lock",
        })
    }
}

/// Every error the engine returns.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The transaction conflicts with a younger one and was aborted; `Db::run` retries these.
    #[error("transaction conflict: {reason}")]
    Conflict {
        /// What the conflict was.
        reason: ConflictReason,
    },
    /// A key longer than `Options::key_size_max`. The transaction stays usable.
    #[error("key of {len} bytes exceeds the limit of {max} bytes")]
    KeyTooLarge {
        /// Length of the rejected key.
        len: usize,
        /// The configured limit.
        max: usize,
    },
    /// A value longer than `Options::value_size_max`. The transaction stays usable.
    #[error("value of {len} bytes exceeds the limit of {max} bytes")]
    ValueTooLarge {
        /// Length of the rejected value.
        len: usize,
        /// The configured limit.
        max: usize,
    },
    /// A write set larger than the replicated log takes in one commit (a replicated
    /// database's limit, documented with the server's). Nothing was written.
    #[error("transaction writes {bytes} bytes; a replicated commit takes at most {max}")]
    TransactionTooLarge {
        /// The write set's size.
        bytes: usize,
        /// The limit.
        max: usize,
    },
    /// A write inside a read-only transaction.
    #[error("write in a read-only transaction")]
    ReadOnly,
    /// All transaction slots are taken (see `TRANSACTIONS_ACTIVE_MAX`).
    #[error("too many active transactions (at most {max})")]
    TooManyTransactions {
        /// The limit.
        max: usize,
    },
    /// A table handle from another `Db`.
    #[error("table handle does not belong to this database")]
    ForeignTable,
    /// A table name that is empty or too long.
    #[error("invalid table name: {reason}")]
    InvalidTableName {
        /// Why it was rejected.
        reason: &'static str,
    },
    /// More tables than `TABLES_MAX`.
    #[error("too many tables (at most {max})")]
    TooManyTables {
        /// The limit.
        max: usize,
    },
    /// A combination the engine does not offer (named in the message).
    #[error("unsupported: {what}")]
    Unsupported {
        /// What is not supported, and what to use instead.
        what: &'static str,
    },
    /// The data directory or redo log failed (named in the message): the transaction was
    /// not committed, or (from a durability wait) may not be durable. After a write or
    /// `fsync` error every later write is refused until the database is reopened.
    #[error("durability: {reason}")]
    Durability {
        /// What failed, with the file (and offset) involved.
        reason: String,
    },
    /// A replicated database that is not its group's primary now refused a commit (its
    /// writes were not installed). Send writes to the primary.
    #[error("this replica is not the primary")]
    NotPrimary,
    /// Applying or rolling back the replicated log went wrong (named in the message).
    #[error("replication: {reason}")]
    Replication {
        /// What failed.
        reason: String,
    },
    /// `Options` that cannot work.
    #[error("invalid options: {reason}")]
    InvalidOptions {
        /// What is wrong.
        reason: String,
    },
}

impl Error {
    /// Whether retrying the whole transaction may succeed.
    pub fn is_conflict(&self) -> bool {
        matches!(self, Error::Conflict { .. })
    }
}

impl Error {
    /// The durability layer's errors, as the engine reports them. Not a `From` impl: that
    /// would make `?` in users' closures ambiguous about the error type.
    pub(crate) fn durability(e: verso_log::LogError) -> Self {
        Error::Durability {
            reason: e.to_string(),
        }
    }
}
