//! Range cursors: [`Masstree::range`] walks a key range in either direction, pulling entries
//! from the tree in small batches through [`Masstree::scan`].
//!
//! A batch is copied into one flat buffer (keys back to back, with their ends), so a cursor
//! allocates only when a batch outgrows the buffer, and holds no epoch pin between calls: a
//! cursor may live as long as the caller likes without holding back reclamation. Each batch
//! resumes just past the last key returned, so the walk has the same guarantee as `scan`:
//! keys present for the whole walk are returned exactly once, in order.

use core::ops::Bound;

use super::{IndexValue, Masstree};
use crate::Direction;

/// Entries fetched from the tree per batch.
const BATCH: usize = 32;

/// A cursor over `[lo, hi]` (bounds as given) of a [`Masstree`], in one direction.
pub struct Cursor<'t, V: IndexValue> {
    tree: &'t Masstree<V>,
    direction: Direction,
    /// The far bound (owned: the caller's borrow ends at `range`).
    far: Bound<Vec<u8>>,
    /// Where the next batch starts: the caller's near bound, then `Excluded(last key)`.
    near: Bound<Vec<u8>>,
    keys: Vec<u8>,
    ends: Vec<usize>,
    values: Vec<V>,
    /// Index of the next entry of the batch to return.
    at: usize,
    /// The tree has nothing more in range (the last batch reached the far bound).
    exhausted: bool,
}

fn owned(b: Bound<&[u8]>) -> Bound<Vec<u8>> {
    match b {
        Bound::Included(k) => Bound::Included(k.to_vec()),
        Bound::Excluded(k) => Bound::Excluded(k.to_vec()),
        Bound::Unbounded => Bound::Unbounded,
    }
}

fn borrowed(b: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    match b {
        Bound::Included(k) => Bound::Included(k),
        Bound::Excluded(k) => Bound::Excluded(k),
        Bound::Unbounded => Bound::Unbounded,
    }
}

impl<V: IndexValue> Masstree<V> {
    /// A cursor over the keys within `(lo, hi)`, ascending for [`Direction::Forward`] and
    /// descending for [`Direction::Reverse`]. Bounds are as in `BTreeMap::range` (an empty or
    /// inverted range yields nothing). Not a snapshot: see the module docs.
    pub fn range(&self, lo: Bound<&[u8]>, hi: Bound<&[u8]>, direction: Direction) -> Cursor<'_, V> {
        let (near, far) = match direction {
            Direction::Forward => (owned(lo), owned(hi)),
            Direction::Reverse => (owned(hi), owned(lo)),
        };
        Cursor {
            tree: self,
            direction,
            far,
            near,
            keys: Vec::new(),
            ends: Vec::new(),
            values: Vec::new(),
            at: 0,
            exhausted: false,
        }
    }
}

impl<V: IndexValue> Cursor<'_, V> {
    /// The next entry, or `None` at the end of the range. The key borrows the cursor.
    pub fn next_entry(&mut self) -> Option<(&[u8], V)> {
        if self.at == self.values.len() {
            if self.exhausted {
                return None;
            }
            self.fill();
            if self.values.is_empty() {
                return None;
            }
        }
        let i = self.at;
        self.at += 1;
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        Some((&self.keys[start..self.ends[i]], self.values[i]))
    }

    fn fill(&mut self) {
        self.keys.clear();
        self.ends.clear();
        self.values.clear();
        self.at = 0;
        let (keys, ends, values) = (&mut self.keys, &mut self.ends, &mut self.values);
        let (lo, hi) = match self.direction {
            Direction::Forward => (borrowed(&self.near), borrowed(&self.far)),
            Direction::Reverse => (borrowed(&self.far), borrowed(&self.near)),
        };
        let reached_end = self.tree.scan(lo, hi, self.direction, 0, |k, v| {
            keys.extend_from_slice(k);
            ends.push(keys.len());
            values.push(v);
            values.len() < BATCH
        });
        // `scan` reports `false` when we stopped it; a batch that filled up exactly at the
        // far bound costs one more (empty) batch, which is fine.
        self.exhausted = reached_end;
        if let Some(&end) = self.ends.last() {
            let start = if self.ends.len() > 1 {
                self.ends[self.ends.len() - 2]
            } else {
                0
            };
            self.near = Bound::Excluded(self.keys[start..end].to_vec());
        }
    }
}

impl<V: IndexValue> Iterator for Cursor<'_, V> {
    type Item = (Vec<u8>, V);

    /// The next entry with its key copied out; [`Cursor::next_entry`] avoids the copy.
    fn next(&mut self) -> Option<Self::Item> {
        self.next_entry().map(|(k, v)| (k.to_vec(), v))
    }
}
