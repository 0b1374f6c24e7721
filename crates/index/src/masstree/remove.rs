//! Removes (thesis §3.1.6 "Removes"): drop the entry from the permutation under the lock,
//! never clearing slot memory a reader may still read; the `INSERTING` mark bumps `vinsert`
//! so a reader that read the slot retries, and a later reuse of the slot bumps it again.
//!
//!
//! An emptied border node is then unlinked ([`Masstree::unlink_empty`]): locks are taken
//! left to right along the border list (the previous sibling, then the node), then the
//! parents (upward), the same order as everywhere else, so there is no deadlock. Interior
//! nodes that held only that node go with it.
//! An emptied layer (h >= 1) is removed from its parent slot
//! ([`Masstree::remove_empty_layer`]) when its tree is one empty border node under a chain
//! of interior nodes without separators: the upper border node is locked first (upper
//! layers before lower ones, as every operation that holds locks in two layers), then the
//! layer top-down with `try_lock` only, giving up rather than waiting.

use crossbeam_epoch as epoch;

use super::key::{Key, LAYER};
use super::node::{Border, Header, Interior, SuffixBlock};
use super::sync::Ordering;
use super::version::{is_deleted, is_leaf, is_root};
use super::{as_border, node, retire_suffix, IndexValue, Masstree};

impl<V: IndexValue> Masstree<V> {
    /// Removes `key`, returning its value.
    pub fn remove(&self, key: &[u8]) -> Option<V> {
        self.remove_if(key, 0, |_| true)
    }

    /// Removes `key` if `keep_going(value)` says so, leaving `stamp` as a gap stamp where
    /// the key was: a later insert of `key` learns a stamp `>= stamp` (the engine folds a
    /// removed record's read timestamp into the index this way, so phantom protection
    /// survives the removal). Returns the removed value; `None` if the key was absent or
    /// `keep_going` refused. `keep_going` runs with a node lock held: it must not block or
    /// touch this index.
    pub fn remove_if(
        &self,
        key: &[u8],
        stamp: u64,
        keep_going: impl FnOnce(V) -> bool,
    ) -> Option<V> {
        let g = epoch::pin();
        let mut root = self.root.load(Ordering::Acquire);
        let mut k = Key::new(key);
        let mut depth = 0;
        loop {
            let Some(n) = Self::lock_border(root, &k, &g) else {
                root = self.root.load(Ordering::Acquire);
                k = Key::new(key);
                depth = 0;
                continue;
            };
            let perm = n.perm();
            let Ok(pos) = n.search(perm, k.slice(), k.ilen()) else {
                n.header.version.unlock();
                return None;
            };
            let s = perm.slot(pos);
            let e = n.read_slot(s);
            if e.keylenx == LAYER {
                root = Self::fresh_layer_root(n, s, e.value as usize as *mut Header);
                n.header.version.unlock();
                k.shift();
                depth += 1;
                continue;
            }
            // SAFETY: a live slot owns its published suffix (or its value holds it); we hold
            // the lock.
            if e.has_suffix() && !unsafe { e.suffix.is(k.suffix(), Self::held(e.value, &k)) } {
                n.header.version.unlock();
                return None;
            }
            // SAFETY: a non-LAYER slot holds `V::into_bits` words.
            if !keep_going(unsafe { V::from_bits(e.value) }) {
                n.header.version.unlock();
                return None;
            }
            n.header.version.mark_insert();
            // Under the lock: an insert into `n` locks it and then loads the stamp, and an
            // unlink or layer removal hands the stamp on to whichever node takes the range.
            n.stamp.fetch_max(stamp, Ordering::SeqCst);
            let np = perm.remove(pos);
            assert!(np.is_valid() && np.count() + 1 == perm.count());
            n.permutation.store(np.0, Ordering::Release);
            if e.has_suffix() {
                // The slot keeps pointing at the suffix (never cleared); it no longer owns it.
                retire_suffix(&g, e.suffix);
            }
            n.header.version.unlock();
            if np.count() == 0 {
                if n.lowkey != 0 {
                    Self::unlink_empty(n, &g);
                }
                if depth > 0 {
                    // Cheap when it does not apply: it gives up at the first node that is
                    // not part of an empty single-leaf layer.
                    self.remove_empty_layer(key, depth, &g);
                }
            }
            // SAFETY: a non-LAYER slot holds `V::into_bits` words.
            return Some(unsafe { V::from_bits(e.value) });
        }
    }
}

impl<V: IndexValue> Masstree<V> {
    /// Unlinks border node `n` if it is (still) empty, has a previous sibling and is not its
    /// parent's only child: its key range `[lowkey, highkey)` passes to its previous sibling,
    /// which inherits its gap stamp. Otherwise leaves a valid empty node.
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
        // What leaves the interior tree: `n`, or the highest of a chain of interior nodes
        // with no separator whose only leaf is `n` (`chain`, bottom-up, all locked). Chain
        // nodes are never stale layer roots: those lie on the layer's leftmost path, whose
        // leftmost border node has no previous sibling and is never unlinked.
        let mut detach = nh;
        let mut chain: Vec<*mut Interior> = Vec::new();
        // SAFETY: `n` is live and locked.
        let mut p = unsafe { super::insert::locked_parent(nh) };
        loop {
            if p.is_null() {
                // `n` has a previous sibling, so some ancestor has two children: only a
                // tree changing under us (impossible with these locks) gets here. Give up.
                unlock_all(&chain);
                return false;
            }
            // SAFETY: a non-null parent is a live interior node, now locked.
            if unsafe { &*p }.nkeys.load(Ordering::Relaxed) != 0 {
                break;
            }
            chain.push(p);
            detach = p.cast();
            // SAFETY: `p` is live and locked.
            p = unsafe { super::insert::locked_parent(detach) };
        }
        // SAFETY: as above.
        let pi = unsafe { &*p };
        let nk = pi.nkeys.load(Ordering::Relaxed) as usize;
        let kp = (0..=nk)
            .find(|&i| pi.children[i].load(Ordering::Relaxed) == detach)
            .expect("a child is among its parent's children");
        // A leftmost child's range is bounded by a separator in some ancestor `A` (the first
        // one where the path is not child 0): it equals `n.lowkey` and must become the new
        // leftmost lowkey under `p` (`p.keys[0]`), so `n`'s range routes to `prev`'s subtree.
        // Every node from `p` up to `A` is locked and marked *split*, so a reader anywhere on
        // that path restarts from the root instead of descending to a node whose lowkey is
        // above its key.
        let mut path: Vec<*mut Interior> = Vec::new();
        if kp == 0 && Self::lock_redirect_path(p, n.lowkey, &mut path).is_none() {
            unlock_all(&path);
            pi.header.version.unlock();
            unlock_all(&chain);
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
        if kp == 0 {
            pi.header.version.mark_split();
            let new_low = pi.keys[0].load(Ordering::Relaxed);
            for j in 0..nk {
                if j + 1 < nk {
                    pi.keys[j].store(pi.keys[j + 1].load(Ordering::Relaxed), Ordering::Relaxed);
                }
                pi.children[j].store(
                    pi.children[j + 1].load(Ordering::Relaxed),
                    Ordering::Relaxed,
                );
            }
            pi.nkeys.store(nk as u8 - 1, Ordering::Relaxed);
            let (&a, mids) = path
                .split_last()
                .expect("an ancestor bounds a non-leftmost node");
            for &q in mids {
                // SAFETY: locked, live.
                unsafe { &*q }.header.version.mark_split();
            }
            // SAFETY: locked, live.
            let ai = unsafe { &*a };
            ai.header.version.mark_split();
            let c = Self::redirect_index(ai, n.lowkey);
            ai.keys[c].store(new_low, Ordering::Relaxed);
            unlock_all(&path);
        } else {
            // Drop separator `kp - 1` and child `kp`: `n`'s range routes to child `kp - 1`,
            // whose rightmost border node is `prev`.
            pi.header.version.mark_insert();
            for j in kp..nk {
                pi.keys[j - 1].store(pi.keys[j].load(Ordering::Relaxed), Ordering::Relaxed);
                pi.children[j].store(
                    pi.children[j + 1].load(Ordering::Relaxed),
                    Ordering::Relaxed,
                );
            }
            pi.nkeys.store(nk as u8 - 1, Ordering::Relaxed);
        }
        pi.header.version.unlock();
        for &c in &chain {
            // SAFETY: locked, live, now unreachable from the tree. Marked split as well, so
            // a reader that reached it before the detach restarts from the root.
            let ci = unsafe { &*c };
            ci.header.version.mark_split();
            ci.header.version.mark_deleted();
            ci.header.version.unlock();
            retire_interior(g, ci);
        }
        n.header.version.unlock();
        prev.header.version.unlock();
        retire_border(g, n);
        true
    }
}

impl<V: IndexValue> Masstree<V> {
    /// Locks the ancestors of `p` upward (hand-over-hand, keeping every lock, pushed onto
    /// `path`) until one where the path is not its leftmost child, and returns it. `None`
    /// (with `path` still to be unlocked by the caller) if the separator found is not `low`.
    fn lock_redirect_path(
        p: *mut Interior,
        low: u64,
        path: &mut Vec<*mut Interior>,
    ) -> Option<*mut Interior> {
        let mut child = p;
        loop {
            // SAFETY: `child` is live and locked by us (it is `p` or on `path`).
            let q = unsafe { super::insert::locked_parent(child.cast()) };
            if q.is_null() {
                return None; // `n` was its layer's leftmost node after all
            }
            path.push(q);
            // SAFETY: locked, live.
            let qi = unsafe { &*q };
            let nk = qi.nkeys.load(Ordering::Relaxed) as usize;
            let c = (0..=nk)
                .find(|&i| qi.children[i].load(Ordering::Relaxed) == child.cast())
                .expect("a child is among its parent's children");
            if c > 0 {
                return (qi.keys[c - 1].load(Ordering::Relaxed) == low).then_some(q);
            }
            child = q;
        }
    }

    /// The index of separator `low` in locked ancestor `a`.
    fn redirect_index(a: &Interior, low: u64) -> usize {
        let nk = a.nkeys.load(Ordering::Relaxed) as usize;
        (0..nk)
            .find(|&i| a.keys[i].load(Ordering::Relaxed) == low)
            .expect("the bounding separator is in the ancestor")
    }
}

/// Unlocks locked interior nodes, last locked first.
fn unlock_all(nodes: &[*mut Interior]) {
    for &q in nodes.iter().rev() {
        // SAFETY: the caller locked these live nodes.
        unsafe { &*q }.header.version.unlock();
    }
}

/// Frees a detached interior node once no pinned reader can hold it.
fn retire_interior(g: &epoch::Guard, n: &Interior) {
    let addr = n as *const Interior as usize;
    // SAFETY: `n` is out of the tree (out of its parent, never a layer root slot's target:
    // see `unlink_locked`); pinned readers still holding it are waited for by the epoch
    // collector. It was allocated by `Interior::alloc` and is retired exactly once (only
    // the thread that detached it, holding its lock, does).
    unsafe {
        g.defer_unchecked(move || drop(Box::from_raw(addr as *mut Interior)));
    }
}

/// Frees an unlinked border node (and its suffix block) once no pinned reader can hold it.
///
/// The suffix block pointer is read now, not in the deferred closure: the node is DELETED,
/// so no writer sets it again (`set_suffix` runs under the node's lock, and a writer that
/// locks a DELETED node retries from the root). The closure then touches no atomic at all,
/// which matters because it may run on any thread, at any later pin or at thread exit
/// (under `--cfg shuttle` an atomic access outside a shuttle execution panics).
fn retire_border(g: &epoch::Guard, n: &Border) {
    let addr = n as *const Border as usize;
    let block = n.ksuf.load(Ordering::Acquire) as usize;
    // SAFETY: `n` is unreachable from the tree: an unlinked border node is out of its
    // parent and the border list; a removed layer's root is out of its upper node's
    // permutation (the stale slot memory is read only by readers with an older permutation,
    // who are pinned). Readers still holding it are pinned, so it is freed after they
    // unpin. It owns no suffixes (it is empty) besides its suffix block, read above and
    // stable since the node became DELETED; it was allocated by `Border::alloc` and is
    // retired exactly once (only the thread that set DELETED does).
    unsafe {
        g.defer_unchecked(move || {
            if block != 0 {
                drop(Box::<SuffixBlock>::from_raw(block as *mut SuffixBlock));
            }
            drop(Box::from_raw(addr as *mut Border));
        });
    }
}

impl<V: IndexValue> Masstree<V> {
    /// Removes the layer at depth `depth` (>= 1) on `key`'s path if its tree is one empty
    /// border node: the slot leaves the upper border node's permutation (its memory is not
    /// cleared; readers that still follow it meet a DELETED root and restart from the top),
    /// the layer root's gap stamp passes to the upper node, and the root is retired.
    fn remove_empty_layer(&self, key: &[u8], depth: usize, g: &epoch::Guard) {
        assert!(depth >= 1);
        'top: loop {
            let mut root = self.root.load(Ordering::Acquire);
            let mut k = Key::new(key);
            let mut d = 0;
            loop {
                let Some(u) = Self::lock_border(root, &k, g) else {
                    continue 'top;
                };
                let perm = u.perm();
                let found = u.search(perm, k.slice(), k.ilen());
                let Ok(pos) = found else {
                    u.header.version.unlock();
                    return;
                };
                let s = perm.slot(pos);
                let e = u.read_slot(s);
                if e.keylenx != LAYER {
                    u.header.version.unlock();
                    return;
                }
                let r = Self::fresh_layer_root(u, s, e.value as usize as *mut Header);
                d += 1;
                if d < depth {
                    u.header.version.unlock();
                    root = r;
                    k.shift();
                    continue;
                }
                // Lock the layer's tree top-down with `try_lock` (everyone else locks
                // bottom-up, so waiting here could deadlock): a chain of interior nodes
                // without separators (left by unlinks) down to a single empty border node.
                let mut locked: Vec<*mut Header> = Vec::new();
                let release = |locked: &[*mut Header]| {
                    for &q in locked.iter().rev() {
                        // SAFETY: we locked these live nodes.
                        unsafe { node(q) }.version.unlock();
                    }
                };
                let mut c = r;
                let l = loop {
                    // SAFETY: nodes reached from a locked parent are live while pinned.
                    let h = unsafe { node(c) };
                    if !h.version.try_lock() {
                        release(&locked);
                        u.header.version.unlock();
                        return;
                    }
                    locked.push(c);
                    let vc = h.version.load();
                    let first = locked.len() == 1;
                    if is_deleted(vc) || (first && !is_root(vc)) {
                        break None;
                    }
                    if is_leaf(vc) {
                        // SAFETY: `LEAF` says it is a border node.
                        break Some(unsafe { as_border(c) });
                    }
                    // SAFETY: not `LEAF`: an interior node.
                    let ci = unsafe { &*c.cast::<Interior>() };
                    if ci.nkeys.load(Ordering::Relaxed) != 0 {
                        break None;
                    }
                    c = ci.children[0].load(Ordering::Relaxed);
                };
                let Some(l) = l.filter(|l| {
                    l.perm().count() == 0
                        && l.next.load(Ordering::Relaxed).is_null()
                        && l.prev.load(Ordering::Relaxed).is_null()
                }) else {
                    release(&locked);
                    u.header.version.unlock();
                    return;
                };
                // Dekker pair with stamping readers of `l` (as in `unlink_locked`). Every
                // node of the layer is marked deleted before any is unlocked: a reader that
                // sees a deleted interior root descends to `l` and sees it deleted too.
                l.header.version.mark_deleted();
                let stamp = l.stamp.load(Ordering::SeqCst);
                for &q in &locked[..locked.len() - 1] {
                    // SAFETY: locked, live.
                    let qv = &unsafe { node(q) }.version;
                    qv.mark_split();
                    qv.mark_deleted();
                }
                u.header.version.mark_insert();
                u.stamp.fetch_max(stamp, Ordering::SeqCst);
                let np = perm.remove(pos);
                u.permutation.store(np.0, Ordering::Release);
                release(&locked);
                u.header.version.unlock();
                for &q in &locked[..locked.len() - 1] {
                    // SAFETY: locked above, so live; not `LEAF`.
                    retire_interior(g, unsafe { &*q.cast::<Interior>() });
                }
                retire_border(g, l);
                if np.count() == 0 {
                    if u.lowkey != 0 {
                        Self::unlink_empty(u, g);
                    }
                    if depth > 1 {
                        self.remove_empty_layer(key, depth - 1, g);
                    }
                }
                return;
            }
        }
    }
}
