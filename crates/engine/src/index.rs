//! The narrow boundary between the engine and its ordered index.
//!
//! The engine needs six things from an index: point lookups, lookups that leave a read stamp
//! on the gap of an absent key, insert-if-absent that reports the gap's stamp, removal that
//! leaves a stamp where the key was, stamped scans in both directions, and a full walk for
//! teardown. Stamps are what phantom protection rests on; see `verso_index` for the contract.

use std::ops::Bound;
use std::ptr::NonNull;

use verso_index::{Direction, IndexValue, LockedBTree, Masstree};

use crate::record::Record;

/// A pointer to a record that lives as long as the `Db`.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct RecordPtr(NonNull<Record>);

// SAFETY: a `Record` is `Sync` (atomics plus an immutable key); it lives while its index holds
// it and, once removed, until every transaction that could have found it has ended and no GC
// queue names it (`gc.rs`), or else until the `Db` drops.
unsafe impl Send for RecordPtr {}
// SAFETY: as above.
unsafe impl Sync for RecordPtr {}

impl RecordPtr {
    /// A new record (`Record::alloc`): `first` is the value about to be written to it, which
    /// sizes its inline slot.
    pub(crate) fn alloc(table: u32, key: &[u8], gap_stamp: u64, first: Option<&[u8]>) -> Self {
        RecordPtr(Record::alloc(table, key, gap_stamp, first))
    }

    /// The allocation's pointer (whose provenance covers the inline slot and the key).
    pub(crate) fn as_non_null(self) -> NonNull<Record> {
        self.0
    }

    /// The record's key. Lives as long as the record (see [`RecordPtr::get`]).
    pub(crate) fn key<'a>(self) -> &'a [u8] {
        // SAFETY: made by `Record::alloc`, and live for as long as callers hold it (`get`).
        unsafe { Record::key_at(self.0) }
    }

    /// The record's address, for sorting and deduplication.
    pub(crate) fn addr(self) -> usize {
        self.0.as_ptr() as usize
    }

    /// The record. Callers hold it the way `gc.rs` accounts for: found in the index by an
    /// active transaction (or, for the checkpoint, under one begun before the lookup), or
    /// named by a GC queue entry.
    pub(crate) fn get<'a>(self) -> &'a Record {
        // SAFETY: a record is freed only once it is out of the index, every transaction
        // that could have found it has ended, and no GC queue names it (`gc.rs`), or at
        // `Db::drop`; callers are in one of the groups that keeps it alive (above).
        unsafe { self.0.as_ref() }
    }

    /// Frees the record and its versions.
    ///
    /// # Safety
    /// Nothing references the record any more (`Db::drop`, or a retired record that no
    /// transaction or queue can reach), and each is freed once.
    pub(crate) unsafe fn destroy(self) {
        // SAFETY: exclusive by contract; made by `Record::alloc`, and its versions (an inline
        // one among them) are freed before the record.
        unsafe {
            self.0.as_ref().free_versions();
            Record::dealloc(self.0);
        }
    }
}

/// What the engine asks of an ordered index.
pub(crate) trait OrderedIndex: Send + Sync {
    fn get_or_stamp(&self, key: &[u8], stamp: u64) -> Option<RecordPtr>;
    fn get_or_insert_with(&self, key: &[u8], make: impl FnOnce(u64) -> RecordPtr) -> RecordPtr;
    /// The record of `key`, or the stamp of the gap it lands in (for reading a read stamp
    /// without leaving one: `Db::newest_stamped`).
    fn get_or_gap_stamp(&self, key: &[u8]) -> Result<RecordPtr, u64>;
    /// Removes `key` if it maps to `record`, leaving `stamp` where it was.
    fn remove_record(&self, key: &[u8], record: RecordPtr, stamp: u64) -> bool;
    fn scan(
        &self,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        direction: Direction,
        stamp: u64,
        visit: impl FnMut(RecordPtr) -> bool,
    ) -> bool;
    fn for_each(&self, f: impl FnMut(RecordPtr));
    fn len(&self) -> usize;
}

// SAFETY: the bits are the record's address; `from_bits` only sees bits from `into_bits`,
// which came from a non-null `NonNull`.
unsafe impl IndexValue for RecordPtr {
    fn into_bits(self) -> u64 {
        self.0.as_ptr() as usize as u64
    }
    unsafe fn from_bits(bits: u64) -> Self {
        // SAFETY: by the trait's contract `bits` came from `into_bits` of a `NonNull`.
        RecordPtr(unsafe { NonNull::new_unchecked(bits as usize as *mut Record) })
    }

    // A record holds its key (`Record::alloc` copies the key it is inserted under), so
    // Masstree keeps no second copy of a long key's tail.
    const HOLDS_KEY: bool = true;

    unsafe fn key_of(bits: u64) -> *const [u8] {
        // SAFETY: by the trait's contract `bits` name a record the index holds or held while
        // the caller was pinned; a removed record is freed only through
        // `verso_index::retire_after_readers` (`gc.rs`, `free_retired`), so it is alive.
        unsafe { Record::key_at(NonNull::new_unchecked(bits as usize as *mut Record)) }
    }
}

/// Which ordered index a `Db`'s tables use.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum IndexKind {
    /// Masstree (thesis §3.1): the engine's index.
    #[default]
    Masstree,
    /// A `BTreeMap` behind a `RwLock`: the placeholder Masstree replaced, kept only as a
    /// benchmark comparison.
    LockedBTree,
}

impl std::str::FromStr for IndexKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "masstree" => Ok(IndexKind::Masstree),
            "btree" | "locked-btree" => Ok(IndexKind::LockedBTree),
            other => Err(format!("unknown index {other:?} (masstree|btree)")),
        }
    }
}

/// A table's index: one of the kinds, dispatched by a (perfectly predicted) match.
pub(crate) enum TableIndex {
    Masstree(Masstree<RecordPtr>),
    BTree(LockedBTree<RecordPtr>),
}

impl TableIndex {
    pub(crate) fn new(kind: IndexKind) -> Self {
        match kind {
            IndexKind::Masstree => TableIndex::Masstree(Masstree::new()),
            IndexKind::LockedBTree => TableIndex::BTree(LockedBTree::new()),
        }
    }
}

impl OrderedIndex for TableIndex {
    fn get_or_stamp(&self, key: &[u8], stamp: u64) -> Option<RecordPtr> {
        if stamp == 0 {
            // No stamp to leave: a plain lookup, which writes nothing shared.
            return match self {
                TableIndex::Masstree(m) => m.get(key),
                TableIndex::BTree(b) => b.get(key),
            };
        }
        match self {
            TableIndex::Masstree(m) => m.get_or_stamp(key, stamp),
            TableIndex::BTree(b) => b.get_or_stamp(key, stamp),
        }
    }

    fn get_or_insert_with(&self, key: &[u8], make: impl FnOnce(u64) -> RecordPtr) -> RecordPtr {
        match self {
            TableIndex::Masstree(m) => m.get_or_insert_with(key, make).0,
            TableIndex::BTree(b) => b.get_or_insert_with(key, make).0,
        }
    }

    fn get_or_gap_stamp(&self, key: &[u8]) -> Result<RecordPtr, u64> {
        match self {
            TableIndex::Masstree(m) => m.get_or_gap_stamp(key),
            TableIndex::BTree(b) => b.get_or_gap_stamp(key),
        }
    }

    fn remove_record(&self, key: &[u8], record: RecordPtr, stamp: u64) -> bool {
        match self {
            TableIndex::Masstree(m) => m.remove_if(key, stamp, |r| r == record).is_some(),
            TableIndex::BTree(b) => b.remove_if(key, stamp, |r| r == record).is_some(),
        }
    }

    fn scan(
        &self,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        direction: Direction,
        stamp: u64,
        mut visit: impl FnMut(RecordPtr) -> bool,
    ) -> bool {
        match self {
            TableIndex::Masstree(m) => m.scan(lo, hi, direction, stamp, |_, r| visit(r)),
            TableIndex::BTree(b) => b.scan(lo, hi, direction, stamp, |_, r| visit(r)),
        }
    }

    fn for_each(&self, mut f: impl FnMut(RecordPtr)) {
        match self {
            TableIndex::Masstree(m) => m.for_each(|_, r| f(r)),
            TableIndex::BTree(b) => b.for_each(|_, r| f(r)),
        }
    }

    fn len(&self) -> usize {
        match self {
            TableIndex::Masstree(m) => m.len(),
            TableIndex::BTree(b) => b.len(),
        }
    }
}
