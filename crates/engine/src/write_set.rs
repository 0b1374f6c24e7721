//! A transaction's buffered writes, and the per-thread pool that recycles their memory.
//!
//! Keys and values live back to back in one byte arena; entries point into it. Small write
//! sets are searched linearly; past [`LINEAR_SEARCH_MAX`] entries a hash index (hash of
//! table and key -> newest entry with that hash, chained through the entries) takes over.
//! After a transaction ends the buffers are cleared and kept for the thread's next one, so
//! a steady stream of small transactions allocates nothing for its writes.

use std::cell::RefCell;
use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};

use crate::gc::GcEntry;
use crate::index::RecordPtr;
use crate::record::Version;

const LINEAR_SEARCH_MAX: usize = 8;
/// Write sets whose buffers grew past this are dropped rather than pooled.
const POOLED_BYTES_MAX: usize = 4 << 20;
/// Write sets kept per thread.
const POOL_LEN_MAX: usize = 4;
const NO_ENTRY: u32 = u32::MAX;

#[derive(Clone, Copy)]
pub(crate) struct Entry {
    pub(crate) table: u32,
    key_start: usize,
    key_len: u32,
    value_start: usize,
    value_len: u32,
    pub(crate) tombstone: bool,
    /// Previous entry with the same hash (the hash index's chain), or `NO_ENTRY`.
    prev_same_hash: u32,
}

#[derive(Default)]
pub(crate) struct WriteSet {
    entries: Vec<Entry>,
    bytes: Vec<u8>,
    /// Hash of (table, key) -> newest entry with that hash. Empty while the set is small.
    by_hash: HashMap<u64, u32, FixedState>,
    /// Commit scratch: the record and prepared version for each entry, in lock order.
    pub(crate) prepared: Vec<(RecordPtr, std::ptr::NonNull<Version>)>,
    /// Commit scratch: records whose older versions became garbage.
    pub(crate) superseded: Vec<GcEntry>,
    /// Savepoints open on this set ([`WriteSet::mark`]); while any is, a put that replaces
    /// an entry saves the entry first, in `undo`.
    marks: u32,
    undo: Vec<(u32, Entry)>,
    /// Tables this transaction emptied ([`crate::Txn::clear`]), each once: a replicated
    /// commit logs each as one clear instead of a tombstone per key (`replicated.rs`).
    cleared: Vec<u32>,
}

/// Where [`WriteSet::rollback`] returns the set to.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Mark {
    entries: usize,
    bytes: usize,
    undo: usize,
    cleared: usize,
}

// SAFETY: `prepared` holds pointers only during a commit, on the committing thread, and is
// empty whenever a `WriteSet` could move (between transactions or with its `Txn`); the
// versions it points to are unpublished allocations owned by that commit.
unsafe impl Send for WriteSet {}

/// The hash index's hasher: the keys are already hashes ([`hash_of`]), so it passes them
/// through. The index lives only inside one transaction, so a key set built to collide
/// costs only that transaction's own time (collisions are resolved by comparing keys).
#[derive(Clone, Copy, Default)]
struct FixedState;

#[derive(Default)]
struct PassThrough(u64);

impl Hasher for PassThrough {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        // Only `u64` keys are hashed here; stay correct for anything else anyway.
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(MIX);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = v;
    }
}

impl BuildHasher for FixedState {
    type Hasher = PassThrough;
    fn build_hasher(&self) -> Self::Hasher {
        PassThrough::default()
    }
}

/// An odd constant with well-spread bits (the one FxHash uses).
const MIX: u64 = 0x517c_c1b7_2722_0a95;

/// A fast, non-cryptographic hash of (table, key), 8 key bytes a step: it runs on every
/// `put` of a large write set, where SipHash's cost showed in TPC-C profiles.
pub(crate) fn hash_of(table: u32, key: &[u8]) -> u64 {
    let step = |h: u64, word: u64| (h.rotate_left(5) ^ word).wrapping_mul(MIX);
    let mut h = step(u64::from(table), key.len() as u64);
    let mut chunks = key.chunks_exact(8);
    for c in &mut chunks {
        h = step(h, u64::from_le_bytes(c.try_into().expect("8-byte chunk")));
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        let mut b = [0u8; 8];
        b[..rest.len()].copy_from_slice(rest);
        h = step(h, u64::from_le_bytes(b));
    }
    // Fold the high bits down: the table uses the low bits for the bucket.
    h ^ (h >> 29)
}

impl WriteSet {
    pub(crate) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    pub(crate) fn key(&self, e: &Entry) -> &[u8] {
        &self.bytes[e.key_start..e.key_start + e.key_len as usize]
    }

    /// The buffered value (`None` for a delete).
    pub(crate) fn value(&self, e: &Entry) -> Option<&[u8]> {
        (!e.tombstone).then(|| &self.bytes[e.value_start..e.value_start + e.value_len as usize])
    }

    pub(crate) fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// The buffered write to `key`: `Some(None)` for a delete, `None` if not written.
    pub(crate) fn get(&self, table: u32, key: &[u8]) -> Option<Option<&[u8]>> {
        self.find(table, key).map(|i| self.value(&self.entries[i]))
    }

    fn find(&self, table: u32, key: &[u8]) -> Option<usize> {
        if self.by_hash.is_empty() {
            return self
                .entries
                .iter()
                .position(|e| e.table == table && self.key(e) == key);
        }
        let mut i = *self.by_hash.get(&hash_of(table, key))?;
        while i != NO_ENTRY {
            let e = &self.entries[i as usize];
            if e.table == table && self.key(e) == key {
                return Some(i as usize);
            }
            i = e.prev_same_hash;
        }
        None
    }

    /// Buffers a put (`Some`) or delete (`None`), replacing an earlier write to the same key.
    pub(crate) fn put(&mut self, table: u32, key: &[u8], value: Option<&[u8]>) {
        match value {
            Some(v) => self.put_parts(table, key, Some(&[v])),
            None => self.put_parts(table, key, None),
        }
    }

    /// As [`WriteSet::put`], the value being the concatenation of `parts` (written straight
    /// into the arena, so a caller that frames values builds no temporary).
    pub(crate) fn put_parts(&mut self, table: u32, key: &[u8], parts: Option<&[&[u8]]>) {
        let value_start = self.bytes.len();
        for part in parts.unwrap_or(&[]) {
            self.bytes.extend_from_slice(part);
        }
        let value_len = (self.bytes.len() - value_start) as u32;
        if let Some(i) = self.find(table, key) {
            if self.marks > 0 {
                self.undo.push((i as u32, self.entries[i]));
            }
            let e = &mut self.entries[i];
            e.value_start = value_start;
            e.value_len = value_len;
            e.tombstone = parts.is_none();
            return;
        }
        assert!(
            self.entries.len() < NO_ENTRY as usize,
            "write set entry count overflow"
        );
        let key_start = self.bytes.len();
        self.bytes.extend_from_slice(key);
        self.entries.push(Entry {
            table,
            key_start,
            key_len: key.len() as u32,
            value_start,
            value_len,
            tombstone: parts.is_none(),
            prev_same_hash: NO_ENTRY,
        });
        let index = self.entries.len() - 1;
        if index == LINEAR_SEARCH_MAX {
            for i in 0..=index {
                self.index_entry(i);
            }
        } else if index > LINEAR_SEARCH_MAX {
            self.index_entry(index);
        }
    }

    fn index_entry(&mut self, i: usize) {
        let e = self.entries[i];
        let h = hash_of(e.table, self.key(&e));
        let prev = self.by_hash.insert(h, i as u32).unwrap_or(NO_ENTRY);
        self.entries[i].prev_same_hash = prev;
    }

    /// Sorts entries by (table, key): the fixed order commits lock records in. Invalidates the
    /// hash index, which is not needed after this point.
    pub(crate) fn sort_for_commit(&mut self) {
        let bytes = &self.bytes;
        let key = |e: &Entry| &bytes[e.key_start..e.key_start + e.key_len as usize];
        self.entries
            .sort_unstable_by(|a, b| a.table.cmp(&b.table).then_with(|| key(a).cmp(key(b))));
        self.by_hash.clear();
    }

    /// Indices of the entries of `table` whose keys satisfy `in_range`, sorted by key.
    pub(crate) fn sorted_in_range(&self, table: u32, in_range: impl Fn(&[u8]) -> bool) -> Vec<u32> {
        let mut out: Vec<u32> = (0..self.entries.len() as u32)
            .filter(|&i| {
                let e = &self.entries[i as usize];
                e.table == table && in_range(self.key(e))
            })
            .collect();
        out.sort_unstable_by(|&a, &b| {
            self.key(&self.entries[a as usize])
                .cmp(self.key(&self.entries[b as usize]))
        });
        out
    }

    pub(crate) fn entry(&self, i: u32) -> &Entry {
        &self.entries[i as usize]
    }

    fn clear(&mut self) {
        debug_assert!(self.prepared.is_empty(), "prepared versions leaked");
        debug_assert!(self.superseded.is_empty());
        self.entries.clear();
        self.bytes.clear();
        self.by_hash.clear();
        self.marks = 0;
        self.undo.clear();
        self.cleared.clear();
    }

    /// Records that this transaction emptied `table` (its deletes are in the set too).
    pub(crate) fn note_cleared(&mut self, table: u32) {
        if !self.cleared.contains(&table) {
            self.cleared.push(table);
        }
    }

    /// The tables this transaction emptied, in the order it did.
    pub(crate) fn cleared(&self) -> &[u32] {
        &self.cleared
    }

    /// A savepoint: [`WriteSet::rollback`] to it undoes every put since, and
    /// [`WriteSet::release`] keeps them. Each mark is ended by exactly one of the two, the
    /// newest first.
    pub(crate) fn mark(&mut self) -> Mark {
        self.marks += 1;
        Mark {
            entries: self.entries.len(),
            bytes: self.bytes.len(),
            undo: self.undo.len(),
            cleared: self.cleared.len(),
        }
    }

    /// A mark at the empty state, for a savepoint taken before this set existed: nothing
    /// was there to replace, so rolling back to it drops everything.
    pub(crate) fn mark_empty(&mut self) -> Mark {
        self.marks += 1;
        Mark {
            entries: 0,
            bytes: 0,
            undo: self.undo.len(),
            cleared: 0,
        }
    }

    /// Keeps the puts since `m`.
    pub(crate) fn release(&mut self, m: Mark) {
        assert!(self.marks > 0, "a savepoint released twice");
        self.marks -= 1;
        if self.marks == 0 {
            self.undo.clear();
        } else {
            debug_assert!(self.undo.len() >= m.undo);
        }
    }

    /// Undoes every put since `m`: replaced entries get their old values back, entries added
    /// since are dropped (from the hash index too), and so are the bytes they used.
    pub(crate) fn rollback(&mut self, m: Mark) {
        assert!(self.marks > 0, "a savepoint rolled back twice");
        while self.undo.len() > m.undo {
            let (i, old) = self.undo.pop().expect("undo is longer than the mark's");
            self.entries[i as usize] = old;
        }
        // The entries added since are the newest, so each heads its hash chain.
        if !self.by_hash.is_empty() {
            for i in (m.entries..self.entries.len()).rev() {
                let e = self.entries[i];
                let h = hash_of(e.table, self.key(&e));
                if e.prev_same_hash == NO_ENTRY {
                    self.by_hash.remove(&h);
                } else {
                    self.by_hash.insert(h, e.prev_same_hash);
                }
            }
        }
        self.entries.truncate(m.entries);
        self.bytes.truncate(m.bytes);
        self.cleared.truncate(m.cleared);
        if self.entries.len() <= LINEAR_SEARCH_MAX {
            self.by_hash.clear();
        }
        self.marks -= 1;
        if self.marks == 0 {
            self.undo.clear();
        }
    }

    fn capacity_bytes(&self) -> usize {
        self.bytes.capacity() + self.entries.capacity() * std::mem::size_of::<Entry>()
    }
}

thread_local! {
    static POOL: RefCell<Vec<WriteSet>> = const { RefCell::new(Vec::new()) };
}

/// A cleared write set from this thread's pool (or a new one).
pub(crate) fn take() -> WriteSet {
    POOL.try_with(|p| p.borrow_mut().pop())
        .ok()
        .flatten()
        .unwrap_or_default()
}

/// Returns a write set to this thread's pool.
pub(crate) fn give_back(mut ws: WriteSet) {
    if ws.capacity_bytes() > POOLED_BYTES_MAX {
        return;
    }
    ws.clear();
    let _ = POOL.try_with(|p| {
        let mut p = p.borrow_mut();
        if p.len() < POOL_LEN_MAX {
            p.push(ws);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    proptest! {
        /// Against a map model, across the switch from linear search to the hash index.
        #[test]
        fn behaves_like_a_map(ops in proptest::collection::vec((0u32..2, 0u8..24, proptest::option::of(any::<u8>())), 0..80)) {
            let mut ws = WriteSet::default();
            let mut model: BTreeMap<(u32, Vec<u8>), Option<Vec<u8>>> = BTreeMap::new();
            for (table, k, v) in ops {
                let key = vec![k; (k % 5) as usize];
                let value = v.map(|b| vec![b; 3]);
                ws.put(table, &key, value.as_deref());
                model.insert((table, key), value);
                for ((t, key), want) in &model {
                    prop_assert_eq!(ws.get(*t, key), Some(want.as_deref()));
                }
                prop_assert_eq!(ws.len(), model.len());
            }
            let in_t0: Vec<Vec<u8>> = ws.sorted_in_range(0, |_| true).into_iter().map(|i| ws.key(ws.entry(i)).to_vec()).collect();
            let want: Vec<Vec<u8>> = model.keys().filter(|(t, _)| *t == 0).map(|(_, k)| k.clone()).collect();
            prop_assert_eq!(in_t0, want);
        }
    }
}

/// Records a read-write transaction found in the index while reading, so its commit does
/// not look the same keys up again (most writes rewrite a key just read: TPC-C's stock and
/// district rows, YCSB F). Keyed by [`hash_of`]; a hit is confirmed against the record's key.
#[derive(Default)]
pub(crate) struct ReadRecords {
    entries: Vec<(u32, u64, RecordPtr)>,
}

/// Reads remembered per transaction; past this a commit looks the rest up in the index.
const READ_RECORDS_MAX: usize = 64;

impl ReadRecords {
    pub(crate) fn note(&mut self, table: u32, key: &[u8], record: RecordPtr) {
        if self.entries.len() < READ_RECORDS_MAX {
            self.entries.push((table, hash_of(table, key), record));
        }
    }

    /// The record of `(table, key)` if this transaction read it.
    pub(crate) fn find(&self, table: u32, key: &[u8]) -> Option<RecordPtr> {
        if self.entries.is_empty() {
            return None;
        }
        let h = hash_of(table, key);
        self.entries
            .iter()
            .rev()
            .find(|&&(t, eh, r)| t == table && eh == h && r.key() == key)
            .map(|&(_, _, r)| r)
    }

    pub(crate) fn clear(&mut self) {
        self.entries.clear();
    }
}

thread_local! {
    static READ_POOL: RefCell<Vec<ReadRecords>> = const { RefCell::new(Vec::new()) };
}

/// A cleared [`ReadRecords`] from this thread's pool (or a new one).
pub(crate) fn take_reads() -> ReadRecords {
    READ_POOL
        .try_with(|p| p.borrow_mut().pop())
        .ok()
        .flatten()
        .unwrap_or_default()
}

/// Returns a [`ReadRecords`] to this thread's pool.
pub(crate) fn give_back_reads(mut r: ReadRecords) {
    r.clear();
    let _ = READ_POOL.try_with(|p| {
        let mut p = p.borrow_mut();
        if p.len() < POOL_LEN_MAX {
            p.push(r);
        }
    });
}
