//! Removes (thesis §3.1.6 "Removes"): drop the entry from the permutation under the lock,
//! never clearing slot memory a reader may still read; the `INSERTING` mark bumps `vinsert`
//! so a reader that read the slot retries, and a later reuse of the slot bumps it again.
//!
//!
//! An emptied border node is then unlinked ([`Masstree::unlink_empty`]): locks are taken
//! left to right along the border list (the previous sibling, then the node), then the
//! parent (upward), the same order as everywhere else, so there is no deadlock.
//! Not done (see `mod.rs`): nodes that are their parent's leftmost child, empty interior
//! nodes, and empty layers stay in place.

use crossbeam_epoch as epoch;

use super::key::{Key, KSUF, LAYER};
use super::node::{Border, Header, SuffixBlock};
use super::sync::Ordering;
use super::version::is_deleted;
use super::{retire_suffix, IndexValue, Masstree};

impl<V: IndexValue> Masstree<V> {
    /// Removes `key`, returning its value.
    pub fn remove(&self, key: &[u8]) -> Option<V> {
        let g = epoch::pin();
        let mut root = self.root.load(Ordering::Acquire);
        let mut k = Key::new(key);
        loop {
            let n = Self::lock_border(root, &k, &g);
            let perm = n.perm();
            let Ok(pos) = n.search(perm, k.slice(), k.ilen()) else {
                n.header.version.unlock();
                return None;
            };
            let s = perm.slot(pos);
            let e = n.read_slot(s);
            if e.keylenx == LAYER {
                root = e.value as usize as *mut Header;
                n.header.version.unlock();
                k.shift();
                continue;
            }
            // SAFETY: a live KSUF slot owns a published suffix; we hold the lock.
            if e.keylenx == KSUF && *unsafe { &*e.suffix }.0 != *k.suffix() {
                n.header.version.unlock();
                return None;
            }
            n.header.version.mark_insert();
            let np = perm.remove(pos);
            assert!(np.is_valid() && np.count() + 1 == perm.count());
            n.permutation.store(np.0, Ordering::Release);
            if e.has_suffix() {
                // The slot keeps pointing at the suffix (never cleared); it no longer owns it.
                retire_suffix(&g, e.suffix);
            }
            n.header.version.unlock();
            if np.count() == 0 && n.lowkey != 0 {
                Self::unlink_empty(n, &g);
            }
            // SAFETY: a non-LAYER slot holds `V::into_bits` words.
            return Some(unsafe { V::from_bits(e.value) });
        }
    }
}

impl<V: IndexValue> Masstree<V> {
    /// Unlinks border node `n` if it is (still) empty and not its parent's leftmost child:
    /// its key range `[lowkey, highkey)` passes to its previous sibling, which inherits its
    /// gap stamp. Gives up (leaving a valid empty node) whenever the shape is not simple.
    fn unlink_empty(n: &Border, g: &epoch::Guard) {
        loop {
            let prev_p = n.prev.load(Ordering::Acquire);
            if prev_p.is_null() {
                return; // a layer's leftmost node stays until the layer is dropped
            }
            // SAFETY: sibling pointers name live border nodes (we are pinned).
            let prev = unsafe { &*prev_p };
            prev.header.version.lock();
            n.header.version.lock();
            let vn = n.header.version.load();
            // `prev` is guarded by the previous sibling's lock: re-check under it.
            if is_deleted(vn)
                || is_deleted(prev.header.version.load())
                || n.prev.load(Ordering::Relaxed) != prev_p
            {
                n.header.version.unlock();
                prev.header.version.unlock();
                if is_deleted(vn) {
                    return;
                }
                continue;
            }
            assert_eq!(
                prev.next.load(Ordering::Relaxed),
                n as *const Border as *mut Border
            );
            let done = Self::unlink_locked(prev, n, g);
            if !done {
                n.header.version.unlock();
                prev.header.version.unlock();
            }
            return;
        }
    }

    /// With `prev` and `n` locked: unlinks and retires `n` and unlocks everything (returns
    /// `true`), or changes nothing and leaves both locked (returns `false`).
    fn unlink_locked(prev: &Border, n: &Border, g: &epoch::Guard) -> bool {
        if n.perm().count() != 0 {
            return false;
        }
        let nh = n as *const Border as *mut Header;
        // SAFETY: `n` is live and locked.
        let p = unsafe { super::insert::locked_parent(nh) };
        if p.is_null() {
            return false;
        }
        // SAFETY: a non-null parent is a live interior node, now locked.
        let pi = unsafe { &*p };
        let nk = pi.nkeys.load(Ordering::Relaxed) as usize;
        let kp = (0..=nk)
            .find(|&i| pi.children[i].load(Ordering::Relaxed) == nh)
            .expect("a child is among its parent's children");
        if kp == 0 {
            // Removing a leftmost child would need an ancestor separator rewritten; leave it.
            pi.header.version.unlock();
            return false;
        }
        // Dekker pair with stamping readers, as for inserts: every reader that stamped `n`
        // and validated it before this mark is seen by the load below; every later one sees
        // DELETED, retries from the root and stamps whichever node then holds its key.
        n.header.version.mark_deleted();
        let stamp = n.stamp.load(Ordering::SeqCst);
        prev.header.version.mark_insert();
        // Before `prev` is unlocked: any insert into `n`'s old range locks `prev` first.
        prev.stamp.fetch_max(stamp, Ordering::SeqCst);
        let next = n.next.load(Ordering::Relaxed);
        prev.next.store(next, Ordering::Release);
        if !next.is_null() {
            // `next.prev` is guarded by its previous sibling's lock: `n`'s, which we hold.
            // SAFETY: live sibling.
            unsafe { &*next }
                .prev
                .store(prev as *const Border as *mut Border, Ordering::Release);
        }
        // Drop separator `kp - 1` and child `kp`: `n`'s range routes to child `kp - 1`, whose
        // rightmost border node is `prev`.
        pi.header.version.mark_insert();
        for j in kp..nk {
            pi.keys[j - 1].store(pi.keys[j].load(Ordering::Relaxed), Ordering::Relaxed);
            pi.children[j].store(
                pi.children[j + 1].load(Ordering::Relaxed),
                Ordering::Relaxed,
            );
        }
        pi.nkeys.store(nk as u8 - 1, Ordering::Relaxed);
        pi.header.version.unlock();
        n.header.version.unlock();
        prev.header.version.unlock();
        retire_border(g, n);
        true
    }
}

/// Frees an unlinked border node (and its suffix block) once no pinned reader can hold it.
fn retire_border(g: &epoch::Guard, n: &Border) {
    let addr = n as *const Border as usize;
    // SAFETY: `n` is unreachable from the tree (unlinked from its parent and the border
    // list, and it is nobody's root); readers still holding it are pinned, so it is freed
    // after they unpin. It owns no suffixes (it is empty); it was allocated by
    // `Border::alloc` and is retired exactly once (only the thread that set DELETED does).
    unsafe {
        g.defer_unchecked(move || {
            let b = Box::from_raw(addr as *mut Border);
            let block = b.ksuf.load(Ordering::Relaxed);
            if !block.is_null() {
                drop(Box::<SuffixBlock>::from_raw(block));
            }
            drop(b);
        });
    }
}
