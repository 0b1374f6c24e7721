//! Verso's ordered indexes.
//!
//! An index maps byte-string keys to small `Copy` values (the engine stores record pointers)
//! and knows nothing about transactions. What it does know is *gap stamps*: a reader may
//! leave a `u64` stamp on the part of the key space it looked at and found empty, and an
//! insert learns the largest stamp left on the gap it lands in. The engine uses this for
//! phantom protection (a range read leaves its timestamp; an older writer that later inserts
//! into that range sees it and aborts), but to the index a stamp is only a number that
//! grows by `max`.
//!
//! The contract every index here keeps, for a key `k` inserted by `get_or_insert` and a
//! scan or absent-key lookup `S` that covers `k` with stamp `s`:
//! **either `S` observes `k`, or the insert's returned gap stamp is `>= s`.**
//! Stamps are conservative: an index may return a larger stamp than strictly needed
//! (that only costs the engine a spurious abort), never a smaller one.
//!
//! [`Masstree::range`] gives a [`Cursor`] over a range in either direction, and
//! [`MasstreeMap`] holds values of any `V: Send + Sync` (boxed, dropped through the epoch
//! collector) for users that need more than a word.
//!
//! Two implementations: [`Masstree`] (thesis §3.1: a trie of B+trees with lock-free reads;
//! one gap stamp per border node) and [`LockedBTree`] (a `BTreeMap` behind a `RwLock`, the
//! original placeholder, kept as a reference and benchmark comparison).

#[doc(hidden)]
pub mod fuzzing;
mod locked_btree;
mod masstree;

pub use locked_btree::LockedBTree;
pub use masstree::{
    flush_retired, reads_held_key, retire_after_readers, Cursor, IndexValue, Masstree, MasstreeMap,
};

/// Which way a scan walks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// Ascending key order.
    Forward,
    /// Descending key order.
    Reverse,
}
