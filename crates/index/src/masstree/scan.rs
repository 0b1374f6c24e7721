//! Range scans in both directions (not atomic with concurrent writers, as in the thesis),
//! leaving gap stamps on every border node whose range the scan covers.
//!
//! Each border node is read as a validated snapshot: stable version, copy the live entries
//! and the `next` pointer, stamp (`fetch_max`, `SeqCst`), re-validate (`SeqCst`), retry the
//! node if it changed. Entries are visited only after validation, so a retry never repeats
//! a key. Forward scans follow `next` (lowkeys never change, so the snapshot's `next` starts
//! exactly where the snapshot ends); reverse scans re-descend to the node holding
//! `lowkey - 1`. Layer entries recurse with the key prefix grown by 8 bytes in a reusable
//! buffer.

use core::ops::Bound;

use crossbeam_epoch as epoch;

use super::key::{slice_of, LAYER, UNSTABLE};
use super::node::{Border, Entry, Header, Held, KeyOf, WIDTH};
use super::sync::Ordering;
use super::version::is_deleted;
use super::{IndexValue, Masstree};
use crate::Direction;

/// How a layer walk ended.
#[derive(PartialEq, Eq)]
enum Flow {
    /// The layer is exhausted; the caller goes on.
    Continue,
    /// The walk passed the far bound.
    Done,
    /// `visit` returned `false`.
    Stop,
}

struct Scan<'a, 'g, F> {
    lo: Bound<&'a [u8]>,
    hi: Bound<&'a [u8]>,
    stamp: u64,
    visit: F,
    buf: Vec<u8>,
    g: &'g epoch::Guard,
    /// The tree's reader of keys held by values (`IndexValue::key_of`).
    key_of: KeyOf,
}

fn below_lo(k: &[u8], lo: Bound<&[u8]>) -> bool {
    match lo {
        Bound::Unbounded => false,
        Bound::Included(l) => k < l,
        Bound::Excluded(l) => k <= l,
    }
}

fn above_hi(k: &[u8], hi: Bound<&[u8]>) -> bool {
    match hi {
        Bound::Unbounded => false,
        Bound::Included(h) => k > h,
        Bound::Excluded(h) => k >= h,
    }
}

/// Every key strictly extending prefix `q` is below `lo`.
fn layer_below_lo(q: &[u8], lo: Bound<&[u8]>) -> bool {
    match lo {
        Bound::Unbounded => false,
        Bound::Included(l) | Bound::Excluded(l) => q < l && !l.starts_with(q),
    }
}

/// Every key strictly extending prefix `q` is above `hi`.
fn layer_above_hi(q: &[u8], hi: Bound<&[u8]>) -> bool {
    match hi {
        Bound::Unbounded => false,
        Bound::Included(h) | Bound::Excluded(h) => q >= h,
    }
}

/// The slice a bound selects inside the layer with prefix `q`, if the bound starts with `q`.
fn bound_slice(q: &[u8], b: Bound<&[u8]>) -> Option<u64> {
    match b {
        Bound::Included(k) | Bound::Excluded(k) if k.starts_with(q) => {
            Some(slice_of(&k[q.len()..]))
        }
        _ => None,
    }
}

/// Whether border node `n`, found at version `v` by descending a layer, shows that the whole
/// layer was removed: only a removed layer's leftmost node (lowkey 0) is ever deleted; an
/// unlinked node always has a previous sibling, hence lowkey > 0.
fn layer_removed(n: &Border, v: u64) -> bool {
    is_deleted(v) && n.lowkey == 0
}

/// `BTreeMap::range`-style empty ranges (inverted, or excluded-equal).
fn range_is_empty(lo: Bound<&[u8]>, hi: Bound<&[u8]>) -> bool {
    match (lo, hi) {
        (Bound::Included(l), Bound::Included(h)) => l > h,
        (Bound::Included(l), Bound::Excluded(h))
        | (Bound::Excluded(l), Bound::Included(h))
        | (Bound::Excluded(l), Bound::Excluded(h)) => l >= h,
        _ => false,
    }
}

impl<V: IndexValue> Masstree<V> {
    /// Visits the entries within `(lo, hi)` in `direction` until `visit` returns `false`,
    /// leaving `stamp` on every border node the walk covers (`0` leaves nothing). Returns
    /// `true` when the walk reached the far bound, `false` when `visit` stopped it.
    ///
    /// Not atomic: keys present for the whole scan are visited exactly once, in order;
    /// keys inserted or removed concurrently may or may not be. `visit` must not block.
    pub fn scan(
        &self,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        direction: Direction,
        stamp: u64,
        mut visit: impl FnMut(&[u8], V) -> bool,
    ) -> bool {
        if range_is_empty(lo, hi) {
            return true;
        }
        let g = epoch::pin();
        let mut s = Scan {
            lo,
            hi,
            stamp,
            // SAFETY: value bits in non-LAYER slots come from `V::into_bits`.
            visit: |k: &[u8], bits: u64| visit(k, unsafe { V::from_bits(bits) }),
            buf: Vec::with_capacity(64),
            g: &g,
            key_of: V::key_of,
        };
        let root = self.root.load(Ordering::Acquire);
        let flow = match direction {
            Direction::Forward => s.forward(root),
            Direction::Reverse => s.reverse(root),
        };
        flow != Flow::Stop
    }
}

impl<F: FnMut(&[u8], u64) -> bool> Scan<'_, '_, F> {
    /// A validated snapshot of the node responsible for `slice`, starting at `n`; stamps it.
    /// Returns the node (maybe a right sibling of `n`), its entries, and its `next`.
    ///
    /// Only entries with slices in `keep` are copied: after a re-descent (a deleted node)
    /// the node found may also hold keys the walk has already passed.
    fn snapshot<'g>(
        &self,
        mut n: &'g Border,
        slice: u64,
        keep: core::ops::RangeInclusive<u64>,
        out: &mut [Entry; WIDTH],
    ) -> Option<(&'g Border, usize, *mut Border)> {
        loop {
            let (m, v) = Masstree::<u64>::walk_right(n, slice);
            n = m;
            if is_deleted(v) {
                return None;
            }
            Border::prefetch(n);
            let perm = n.perm();
            let mut torn = false;
            let mut count = 0;
            for i in 0..perm.count() {
                let e = n.read_slot(perm.slot(i));
                torn |= e.keylenx == UNSTABLE;
                if keep.contains(&e.slice) {
                    out[count] = e;
                    count += 1;
                }
            }
            let next = n.next.load(Ordering::Acquire);
            let changed = if self.stamp != 0 {
                n.stamp.fetch_max(self.stamp, Ordering::SeqCst);
                // Reader half of the gap-stamp Dekker pair (see mod.rs).
                n.header.version.has_changed_seqcst(v)
            } else {
                n.header.version.has_changed(v)
            };
            if !changed && !torn {
                return Some((n, count, next));
            }
        }
    }

    /// Appends entry `e`'s key bytes for this layer to the buffer (8 bytes for layers).
    fn push_key(&mut self, e: &Entry) {
        let bytes = e.slice.to_be_bytes();
        let len = if e.keylenx <= 8 {
            e.keylenx as usize
        } else {
            8
        };
        let held = Held {
            bits: e.value,
            key_of: self.key_of,
            off: self.buf.len() + 8,
        };
        self.buf.extend_from_slice(&bytes[..len]);
        // SAFETY: the entry came from a validated snapshot taken while pinned: the suffix
        // (or the value holding it) was a live slot's then, so it is retired (if at all)
        // after our pin.
        unsafe { e.suffix.push_to(&mut self.buf, held) };
    }

    /// One entry of a forward walk.
    fn visit_forward(&mut self, e: &Entry) -> Flow {
        let plen = self.buf.len();
        self.push_key(e);
        let flow = if e.keylenx == LAYER {
            if layer_below_lo(&self.buf, self.lo) {
                Flow::Continue
            } else if layer_above_hi(&self.buf, self.hi) {
                Flow::Done
            } else {
                self.forward(e.value as usize as *mut Header)
            }
        } else if below_lo(&self.buf, self.lo) {
            Flow::Continue
        } else if above_hi(&self.buf, self.hi) {
            Flow::Done
        } else if (self.visit)(&self.buf, e.value) {
            Flow::Continue
        } else {
            Flow::Stop
        };
        self.buf.truncate(plen);
        flow
    }

    /// One entry of a reverse walk.
    fn visit_reverse(&mut self, e: &Entry) -> Flow {
        let plen = self.buf.len();
        self.push_key(e);
        let flow = if e.keylenx == LAYER {
            if layer_above_hi(&self.buf, self.hi) {
                Flow::Continue
            } else if layer_below_lo(&self.buf, self.lo) {
                Flow::Done
            } else {
                self.reverse(e.value as usize as *mut Header)
            }
        } else if above_hi(&self.buf, self.hi) {
            Flow::Continue
        } else if below_lo(&self.buf, self.lo) {
            Flow::Done
        } else if (self.visit)(&self.buf, e.value) {
            Flow::Continue
        } else {
            Flow::Stop
        };
        self.buf.truncate(plen);
        flow
    }

    /// Walks the layer rooted at `root` (prefix = the buffer) upward from `lo`.
    fn forward(&mut self, root: *mut Header) -> Flow {
        let start = bound_slice(&self.buf, self.lo).unwrap_or(0);
        let (mut n, _) = Masstree::<u64>::find_border(root, start, self.g);
        let mut slice = start;
        let mut es = [Entry::EMPTY; WIDTH];
        loop {
            let Some((m, count, next)) = self.snapshot(n, slice, slice..=u64::MAX, &mut es) else {
                // A deleted node: re-descend; the node found may hold keys below `slice`.
                let (m, v) = Masstree::<u64>::find_border(root, slice, self.g);
                if layer_removed(m, v) {
                    return Flow::Continue; // the whole layer was removed (it was empty)
                }
                n = m;
                continue;
            };
            for e in &es[..count] {
                let f = self.visit_forward(e);
                if f != Flow::Continue {
                    return f;
                }
            }
            if next.is_null() {
                return Flow::Continue;
            }
            // SAFETY: sibling pointers name live border nodes (pinned).
            n = unsafe { &*next };
            slice = n.lowkey;
            let _ = m;
        }
    }

    /// Walks the layer rooted at `root` (prefix = the buffer) downward from `hi`.
    fn reverse(&mut self, root: *mut Header) -> Flow {
        let mut target = bound_slice(&self.buf, self.hi).unwrap_or(u64::MAX);
        let mut es = [Entry::EMPTY; WIDTH];
        loop {
            let (n, v) = Masstree::<u64>::find_border(root, target, self.g);
            if layer_removed(n, v) {
                return Flow::Continue; // the whole layer was removed (it was empty)
            }
            let Some((m, count, _)) = self.snapshot(n, target, 0..=target, &mut es) else {
                continue;
            };
            for e in es[..count].iter().rev() {
                let f = self.visit_reverse(e);
                if f != Flow::Continue {
                    return f;
                }
            }
            // Lowkey 0 only for a layer's leftmost node: a split boundary lies between two
            // distinct slices, so a right sibling's lowkey is > 0.
            if m.lowkey == 0 {
                return Flow::Continue;
            }
            target = m.lowkey - 1;
        }
    }
}
