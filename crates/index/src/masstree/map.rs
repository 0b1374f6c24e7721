//! [`MasstreeMap`]: a Masstree holding any `V: Send + Sync`, not only word-sized values.
//!
//! The tree itself stores words ([`IndexValue`]) so that a get reads its value from the
//! border node line it already has (see `mod.rs`). Larger or owning values live in a `Box`
//! whose pointer is the word; a value that is overwritten or removed is dropped through the
//! epoch collector, after every reader that might still look at it has unpinned. Readers
//! see values by reference inside a closure (the pin lasts exactly as long as the closure).

use core::ops::Bound;
use core::ptr::NonNull;

use crossbeam_epoch as epoch;

use super::{IndexValue, Masstree};
use crate::Direction;

/// A boxed value's pointer, as stored in the tree.
struct Slot<V>(NonNull<V>);

impl<V> Clone for Slot<V> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<V> Copy for Slot<V> {}

// SAFETY: a `Slot` is a shared reference to a `V` in all but name: readers only ever get
// `&V`, and the owner (the map) drops it once; so it may cross threads when `V: Sync`, and
// the drop may run on another thread when `V: Send`.
unsafe impl<V: Send + Sync> Send for Slot<V> {}
// SAFETY: as above.
unsafe impl<V: Send + Sync> Sync for Slot<V> {}

// SAFETY: the word is the pointer; `from_bits` rebuilds exactly the pointer `into_bits` gave,
// which is non-null (it came from a `Box`).
unsafe impl<V: Send + Sync + 'static> IndexValue for Slot<V> {
    fn into_bits(self) -> u64 {
        self.0.as_ptr() as usize as u64
    }
    unsafe fn from_bits(bits: u64) -> Self {
        // SAFETY: `bits` came from `into_bits`, so it is a non-null `Box` pointer.
        Slot(unsafe { NonNull::new_unchecked(bits as usize as *mut V) })
    }
}

impl<V> Slot<V> {
    fn new(value: V) -> Self {
        Slot(NonNull::from(Box::leak(Box::new(value))))
    }

    /// Drops the value once every reader pinned now has unpinned.
    fn retire(self, g: &epoch::Guard) {
        let addr = self.0.as_ptr() as usize;
        // SAFETY: the slot left the tree (replaced or removed under the node lock, which
        // only one writer holds), so it is retired exactly once; readers that found it are
        // pinned, and the collector runs the drop after they unpin.
        unsafe { g.defer_unchecked(move || drop(Box::from_raw(addr as *mut V))) };
    }
}

/// A concurrent ordered map from byte strings to any `V: Send + Sync`, built on
/// [`Masstree`]. Same concurrency and ordering guarantees; values are boxed.
pub struct MasstreeMap<V: Send + Sync + 'static> {
    tree: Masstree<Slot<V>>,
}

impl<V: Send + Sync + 'static> Default for MasstreeMap<V> {
    fn default() -> Self {
        Self::new()
    }
}

impl<V: Send + Sync + 'static> MasstreeMap<V> {
    /// An empty map.
    pub fn new() -> Self {
        MasstreeMap {
            tree: Masstree::new(),
        }
    }

    /// Calls `f` on the value stored under `key` and returns what it returns.
    pub fn get_with<R>(&self, key: &[u8], f: impl FnOnce(&V) -> R) -> Option<R> {
        let _g = epoch::pin();
        let s = self.tree.get(key)?;
        // SAFETY: we were pinned before reading the slot, so even if it is replaced or
        // removed now, its drop waits for our unpin (`Slot::retire`).
        Some(f(unsafe { s.0.as_ref() }))
    }

    /// A clone of the value stored under `key`.
    pub fn get(&self, key: &[u8]) -> Option<V>
    where
        V: Clone,
    {
        self.get_with(key, V::clone)
    }

    /// Stores `value` under `key`; returns `true` if it replaced a value (which is dropped
    /// once no reader can see it).
    pub fn insert(&self, key: &[u8], value: V) -> bool {
        let g = epoch::pin();
        match self.tree.insert(key, Slot::new(value)) {
            Some(old) => {
                old.retire(&g);
                true
            }
            None => false,
        }
    }

    /// Stores `make()` under `key` if it is absent; calls `f` on the value now stored
    /// (found or made) and returns its result with `true` if this call inserted it.
    pub fn get_or_insert_with<R>(
        &self,
        key: &[u8],
        make: impl FnOnce() -> V,
        f: impl FnOnce(&V) -> R,
    ) -> (R, bool) {
        let _g = epoch::pin();
        let (s, inserted) = self
            .tree
            .get_or_insert_with(key, |_stamp| Slot::new(make()));
        // SAFETY: pinned before the slot was read or published (see `get_with`).
        (f(unsafe { s.0.as_ref() }), inserted)
    }

    /// Removes `key`; returns `true` if it was present (its value is dropped once no
    /// reader can see it).
    pub fn remove(&self, key: &[u8]) -> bool {
        let g = epoch::pin();
        match self.tree.remove(key) {
            Some(old) => {
                old.retire(&g);
                true
            }
            None => false,
        }
    }

    /// Visits the entries within `(lo, hi)` in `direction` until `visit` returns `false`
    /// (same guarantees as [`Masstree::scan`]); returns `true` if it reached the far bound.
    pub fn scan(
        &self,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        direction: Direction,
        mut visit: impl FnMut(&[u8], &V) -> bool,
    ) -> bool {
        let _g = epoch::pin();
        self.tree.scan(lo, hi, direction, 0, |k, s| {
            // SAFETY: pinned for the whole scan (see `get_with`).
            visit(k, unsafe { s.0.as_ref() })
        })
    }

    /// Number of keys (a full walk).
    pub fn len(&self) -> usize {
        self.tree.len()
    }

    /// `true` when there are no keys.
    pub fn is_empty(&self) -> bool {
        self.tree.is_empty()
    }
}

impl<V: Send + Sync + 'static> Drop for MasstreeMap<V> {
    fn drop(&mut self) {
        self.tree.for_each(|_, s| {
            // SAFETY: `&mut self`: no readers; each live slot is owned by the map and
            // dropped once here (retired ones are the collector's, not in the tree).
            drop(unsafe { Box::from_raw(s.0.as_ptr()) });
        });
    }
}
