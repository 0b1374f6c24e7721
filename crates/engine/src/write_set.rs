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
    pub(crate) superseded: Vec<RecordPtr>,
}

// SAFETY: `prepared` holds pointers only during a commit, on the committing thread, and is
// empty whenever a `WriteSet` could move (between transactions or with its `Txn`); the
// versions it points to are unpublished allocations owned by that commit.
unsafe impl Send for WriteSet {}

/// A fixed-seed hasher: the index lives only inside one transaction, so flooding it costs
/// only that transaction's own time.
#[derive(Clone, Copy, Default)]
struct FixedState;

impl BuildHasher for FixedState {
    type Hasher = std::collections::hash_map::DefaultHasher;
    fn build_hasher(&self) -> Self::Hasher {
        std::collections::hash_map::DefaultHasher::new()
    }
}

fn hash_of(table: u32, key: &[u8]) -> u64 {
    let mut h = FixedState.build_hasher();
    h.write_u32(table);
    h.write(key);
    h.finish()
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
        let value_start = self.bytes.len();
        let value_bytes = value.unwrap_or(&[]);
        if let Some(i) = self.find(table, key) {
            self.bytes.extend_from_slice(value_bytes);
            let e = &mut self.entries[i];
            e.value_start = value_start;
            e.value_len = value_bytes.len() as u32;
            e.tombstone = value.is_none();
            return;
        }
        assert!(
            self.entries.len() < NO_ENTRY as usize,
            "write set entry count overflow"
        );
        self.bytes.extend_from_slice(value_bytes);
        let key_start = self.bytes.len();
        self.bytes.extend_from_slice(key);
        self.entries.push(Entry {
            table,
            key_start,
            key_len: key.len() as u32,
            value_start,
            value_len: value_bytes.len() as u32,
            tombstone: value.is_none(),
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
