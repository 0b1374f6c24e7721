//! The node version word: the whole lock protocol of one node (thesis §3.1.4–3.1.6, Fig 3-3).
//!
//! Layout of the `u64` (low bits first):
//!
//! | bits   | name        | meaning                                                        |
//! |--------|-------------|----------------------------------------------------------------|
//! | 0      | `LOCKED`    | a writer holds the node's spinlock                             |
//! | 1      | `INSERTING` | dirty: keys/values/permutation are changing (bumps `vinsert`)  |
//! | 2      | `SPLITTING` | dirty: keys are moving to a new sibling (bumps `vsplit`)       |
//! | 3      | `DELETED`   | the node is unlinked (an emptied border node), sticky          |
//! | 4      | `ROOT`      | the node is the root of its layer's B+tree                     |
//! | 5      | `LEAF`      | the node is a border node                                      |
//! | 8..40  | `vinsert`   | insert counter (32 bits)                                       |
//! | 40..64 | `vsplit`    | split counter (24 bits)                                        |
//!
//! Wrap-around (thesis footnote 3): a reader is fooled only if it blocks between two version
//! loads of one node while exactly 2^32 inserts (or 2^24 splits of that very node) happen.
//! An overflowing `vinsert` carries into `vsplit`, which only makes readers retry from the root.
//!
//! Readers: `let v = n.version.stable(); ..read..; if n.version.has_changed(v) { retry }`.
//! Writers: `lock()`, `mark_insert()`/`mark_split()` *before* the first write readers may see,
//! then `unlock()`, which bumps the counter of whichever dirty bit was set, in one store.

use super::sync::{fence, spin_step, AtomicU64, Ordering};

pub(crate) const LOCKED: u64 = 1 << 0;
pub(crate) const INSERTING: u64 = 1 << 1;
pub(crate) const SPLITTING: u64 = 1 << 2;
pub(crate) const DELETED: u64 = 1 << 3;
pub(crate) const ROOT: u64 = 1 << 4;
pub(crate) const LEAF: u64 = 1 << 5;
const DIRTY: u64 = INSERTING | SPLITTING;
const VINSERT_UNIT: u64 = 1 << 8;
const VSPLIT_UNIT: u64 = 1 << 40;

const _: () = assert!(VINSERT_UNIT > LEAF && VSPLIT_UNIT > VINSERT_UNIT);

/// A node's version word.
#[repr(transparent)]
pub(crate) struct NodeVersion(AtomicU64);

/// True when `v` is a border node's version.
#[inline]
pub(crate) fn is_leaf(v: u64) -> bool {
    v & LEAF != 0
}

/// True when `v` is the version of a layer's root.
#[inline]
pub(crate) fn is_root(v: u64) -> bool {
    v & ROOT != 0
}

/// True when the node was unlinked.
#[inline]
pub(crate) fn is_deleted(v: u64) -> bool {
    v & DELETED != 0
}

impl NodeVersion {
    /// A fresh unlocked version with the given `ROOT`/`LEAF` bits.
    pub(crate) fn new(flags: u64) -> Self {
        assert_eq!(flags & !(ROOT | LEAF), 0);
        NodeVersion(AtomicU64::new(flags))
    }

    /// A version for a node born locked and splitting (a split's new sibling): a copy of the
    /// splitting node's word without `ROOT`, so the counters keep growing past the old node's.
    pub(crate) fn new_split_sibling(of: u64) -> Self {
        assert!(of & LOCKED != 0 && of & SPLITTING != 0);
        NodeVersion(AtomicU64::new(of & !ROOT))
    }

    /// The current word, racy: callers use it only as a hint or under the lock.
    #[inline]
    pub(crate) fn load(&self) -> u64 {
        self.0.load(Ordering::Acquire)
    }

    /// Spins until no writer has the node dirty, and returns that version. Acquire: reads
    /// made after it see every write published before the matching `unlock`.
    #[inline]
    pub(crate) fn stable(&self) -> u64 {
        let mut step = 0;
        loop {
            let v = self.0.load(Ordering::Acquire);
            if v & DIRTY == 0 {
                return v;
            }
            spin_step(&mut step);
        }
    }

    /// Re-validation after optimistic reads: true when anything but the lock bit changed
    /// since `old` (a stable version). The acquire fence keeps the preceding relaxed reads of
    /// node fields before this load (the seqlock reader pattern).
    #[inline]
    pub(crate) fn has_changed(&self, old: u64) -> bool {
        fence(Ordering::Acquire);
        (self.0.load(Ordering::Relaxed) ^ old) > LOCKED
    }

    /// Like [`Self::has_changed`] but a `SeqCst` load, the reader half of the gap-stamp Dekker
    /// pair: `stamp.fetch_max(SeqCst)` then this.
    #[inline]
    pub(crate) fn has_changed_seqcst(&self, old: u64) -> bool {
        fence(Ordering::Acquire);
        super::sync::dekker_fence();
        (self.0.load(Ordering::SeqCst) ^ old) > LOCKED
    }

    /// True when a split (or an unlink) happened between `old` and `new`.
    #[inline]
    pub(crate) fn has_split(old: u64, new: u64) -> bool {
        (old ^ new) >= VSPLIT_UNIT || (old ^ new) & DELETED != 0
    }

    /// Takes the node's spinlock; returns the locked word.
    pub(crate) fn lock(&self) -> u64 {
        let mut step = 0;
        loop {
            let v = self.0.load(Ordering::Relaxed);
            if v & LOCKED == 0 {
                if self
                    .0
                    .compare_exchange_weak(v, v | LOCKED, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
                {
                    return v | LOCKED;
                }
            } else {
                spin_step(&mut step);
            }
        }
    }

    /// Takes the lock if it is free, without waiting: for the few places that lock top-down
    /// (against the bottom-up order everywhere else) and so must not wait.
    pub(crate) fn try_lock(&self) -> bool {
        let v = self.0.load(Ordering::Relaxed);
        v & LOCKED == 0
            && self
                .0
                .compare_exchange(v, v | LOCKED, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
    }

    /// Sets a dirty bit (the lock must be held). The `SeqCst` store is the writer half of the
    /// gap-stamp Dekker pair (a `SeqCst` stamp load follows); the release fence keeps the
    /// relaxed field writes that follow after it, so a reader that sees any of them then
    /// sees this bit (or a later counter) on re-validation.
    #[inline]
    fn mark(&self, bit: u64) {
        let v = self.0.load(Ordering::Relaxed);
        assert!(v & LOCKED != 0, "mark without the lock");
        self.0.store(v | bit, Ordering::SeqCst);
        super::sync::dekker_fence();
        fence(Ordering::Release);
    }

    /// Marks the node as being changed in place (insert, remove, new layer).
    pub(crate) fn mark_insert(&self) {
        self.mark(INSERTING);
    }

    /// Marks the node as splitting: keys move to a new right sibling.
    pub(crate) fn mark_split(&self) {
        self.mark(SPLITTING);
    }

    /// Marks the node deleted (sticky) and dirty: it is being unlinked. Readers that meet it
    /// retry from the root.
    pub(crate) fn mark_deleted(&self) {
        self.mark(DELETED | INSERTING);
    }

    /// Drops `ROOT` (the lock must be held): the node got a parent. The store is a release so
    /// that a reader who sees `ROOT` cleared also sees the parent pointer written before it.
    pub(crate) fn clear_root(&self) {
        let v = self.0.load(Ordering::Relaxed);
        assert!(v & LOCKED != 0 && v & ROOT != 0);
        self.0.store(v & !ROOT, Ordering::Release);
    }

    /// Releases the lock in one store, bumping `vinsert` if `INSERTING` was set and `vsplit`
    /// if `SPLITTING` was. Release: all writes under the lock happen-before any reader that
    /// observes the new word.
    pub(crate) fn unlock(&self) {
        let v = self.0.load(Ordering::Relaxed);
        assert!(v & LOCKED != 0, "unlock of an unlocked node");
        let mut new = v;
        if v & INSERTING != 0 {
            new = new.wrapping_add(VINSERT_UNIT);
        }
        if v & SPLITTING != 0 {
            new = new.wrapping_add(VSPLIT_UNIT);
        }
        new &= !(LOCKED | DIRTY);
        self.0.store(new, Ordering::Release);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn counters_and_bits() {
        let n = NodeVersion::new(LEAF | ROOT);
        let v0 = n.stable();
        assert!(is_leaf(v0) && is_root(v0) && !is_deleted(v0));
        n.lock();
        assert!(!n.has_changed(v0), "the lock bit alone is not a change");
        n.mark_insert();
        assert!(n.has_changed(v0));
        n.unlock();
        let v1 = n.stable();
        assert!(n.has_changed(v0) && !NodeVersion::has_split(v0, v1));
        n.lock();
        n.mark_split();
        n.clear_root();
        n.unlock();
        let v2 = n.stable();
        assert!(NodeVersion::has_split(v1, v2) && !is_root(v2) && is_leaf(v2));
    }
}
