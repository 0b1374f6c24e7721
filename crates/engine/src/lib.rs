//! Verso's transaction engine: an in-memory, multi-version, strictly serializable key-value
//! store.
//!
//! Concurrency control is multi-version timestamp ordering as vMVCC (OSDI'23) designs it:
//! strictly increasing RDTSC timestamps taken at begin, per-key version chains, and commits
//! that abort when a younger transaction already read or wrote a key they write. Verso adds
//! serializable range reads (gap stamps in the index stop phantoms) and garbage collection
//! on the committing threads, with no background sweeper.
//!
//! ```
//! use verso_engine::{Db, Options};
//!
//! let db = Db::open(Options::default())?;
//! let accounts = db.table("accounts")?;
//!
//! let mut txn = db.begin()?;
//! txn.put(&accounts, b"alice", b"100")?;
//! txn.put(&accounts, b"bob", b"50")?;
//! txn.commit()?;
//!
//! // `run` retries on conflict; the closure may run more than once.
//! db.run(|txn| {
//!     let alice = txn.get(&accounts, b"alice")?.map(<[u8]>::to_vec);
//!     txn.put(&accounts, b"carol", alice.unwrap_or_default())
//! })?;
//!
//! let txn = db.begin_read_only()?;
//! let keys: Vec<&[u8]> = txn.range(&accounts, &b"a"[..]..&b"c"[..])?.map(|(k, _)| k).collect();
//! assert_eq!(keys, [&b"alice"[..], &b"bob"[..]]);
//! assert_eq!(txn.get(&accounts, b"carol")?, Some(&b"100"[..]));
//! # Ok::<(), verso_engine::Error>(())
//! ```

mod db;
mod durability;
mod error;
mod gc;
mod index;
mod options;
mod range;
mod record;
mod replicated;
mod stamped;
mod sync;
mod timestamp;
mod two_pl;
mod txn;
mod validation;
mod write_set;

pub use db::{Db, Stats, Table, TABLES_MAX, TABLE_NAME_LEN_MAX};
pub use durability::{CheckpointReport, DurabilityTicket, RecoveryReport, CHECKPOINT_PARTS};
pub use error::{ConflictReason, Error};
pub use index::IndexKind;
pub use options::{
    Concurrency, Durability, Fault, Isolation, Options, TimestampSource, DATA_DIR_DEFAULT,
    FSYNC_INTERVAL_DEFAULT, KEY_SIZE_MAX_DEFAULT, RUN_ATTEMPTS_DEFAULT, SIZE_LIMIT_CEILING,
    VALUE_SIZE_MAX_DEFAULT,
};
pub use range::Range;
pub use replicated::{write_set_bytes, ClearFilter, CommitSink, ReplicatedWrite};
pub use stamped::StampedNewest;
pub use timestamp::{tsc_is_invariant, TRANSACTIONS_ACTIVE_MAX};
pub use txn::{CommitTs, KeyVersion, Savepoint, Txn};
/// The durability layer, for its fault-injecting storage and format constants.
pub use verso_log as log;

// A `Db` is shared between threads; a `Txn` may move to another thread (one at a time).
const _: () = {
    const fn send_sync<T: Send + Sync>() {}
    const fn send<T: Send>() {}
    send_sync::<Db>();
    send::<Txn<'static>>();
};

/// The README's examples, compiled and run as doctests so they cannot rot.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeDoctests;
