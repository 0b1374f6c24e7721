//! The locked write path: inserts, value updates, new layers, border and interior splits
//! with hand-over-hand parent locking (thesis §3.1.5–3.1.6, Fig 3-5).
//!
//! Lock order: a border node, then right siblings (walking right under locks), then parents
//! upward. Nobody takes a lock to the left or downward, so there is no deadlock.

use crossbeam_epoch as epoch;

use super::key::{Key, LAYER, UNSTABLE};
use super::node::{Border, Entry, Header, Interior, Perm, Suf, NO_SLOT, STREAM, WIDTH};
use super::sync::{fence, Ordering};
use super::version::{is_deleted, is_root, NodeVersion, ROOT};
use super::{as_interior, node, retire_suffix, IndexValue, Masstree};

/// Unlocks a node if the user's `make` panics while we hold the lock.
struct UnlockOnUnwind<'a>(&'a NodeVersion);

impl Drop for UnlockOnUnwind<'_> {
    fn drop(&mut self) {
        self.0.unlock();
    }
}

/// Runs `make(stamp)` with `n` locked, unlocking it if `make` panics.
fn call_make<V>(n: &Border, stamp: u64, make: impl FnOnce(u64) -> V) -> V {
    let guard = UnlockOnUnwind(&n.header.version);
    let v = make(stamp);
    core::mem::forget(guard);
    v
}

/// The suffix of a new entry for `k` (a long one is allocated, unless values hold keys).
fn alloc_suffix<V: IndexValue>(k: &Key<'_>) -> Suf {
    Suf::of_key(k, V::HOLDS_KEY)
}

/// What the locked write does when the key exists.
pub(crate) enum OnFound {
    /// Leave the value, report it.
    Keep,
    /// Replace the value with `make(0)`.
    Replace,
}

/// Outcome of a locked write: the value now stored, the old value (if the key existed), and
/// whether the key was inserted now.
pub(crate) struct Written {
    pub(crate) value: u64,
    pub(crate) old: Option<u64>,
}

impl<V: IndexValue> Masstree<V> {
    /// The value under `key`, inserting `make(gap_stamp)` if absent, where `gap_stamp` is at
    /// least every stamp left (by a scan or absent lookup) on the range `key` lands in.
    /// `make` runs with a node lock held: it must not block or touch this index.
    pub fn get_or_insert_with(&self, key: &[u8], make: impl FnOnce(u64) -> V) -> (V, bool) {
        if let Some(v) = self.get(key) {
            return (v, false);
        }
        let w = self.write(key, OnFound::Keep, |s| make(s).into_bits());
        // SAFETY: the bits came from `V::into_bits` (value slots hold nothing else).
        (unsafe { V::from_bits(w.value) }, w.old.is_none())
    }

    /// Stores `value` under `key`, returning the previous value.
    pub fn insert(&self, key: &[u8], value: V) -> Option<V> {
        let w = self.write(key, OnFound::Replace, |_| value.into_bits());
        // SAFETY: the bits came from `V::into_bits`.
        w.old.map(|b| unsafe { V::from_bits(b) })
    }

    /// Locks the border node responsible for `k` at the layer rooted at `root`. `None` when
    /// it met a deleted node (an unlinked border node, or the root of a removed layer): the
    /// caller restarts from the layer-0 root (thesis: "any operation that encounters a
    /// deleted node retries from the root").
    pub(crate) fn lock_border<'g>(
        root: *mut Header,
        k: &Key<'_>,
        g: &'g epoch::Guard,
    ) -> Option<&'g Border> {
        let slice = k.slice();
        let (mut n, _) = Self::find_border(root, slice, g);
        n.header.version.lock();
        loop {
            if is_deleted(n.header.version.load()) {
                n.header.version.unlock();
                return None;
            }
            // Under `n`'s lock `next` changes only by our own splits and unlinks of `next`
            // (which need our lock too); `lowkey` is immutable.
            let next = n.next.load(Ordering::Acquire);
            // SAFETY: sibling pointers name live border nodes (pinned).
            if next.is_null() || slice < unsafe { &*next }.lowkey {
                return Some(n);
            }
            // SAFETY: as above.
            let nx = unsafe { &*next };
            nx.header.version.lock();
            n.header.version.unlock();
            n = nx;
        }
    }

    /// The locked write path shared by `insert` and `get_or_insert_with`.
    pub(crate) fn write(
        &self,
        key: &[u8],
        on_found: OnFound,
        make: impl FnOnce(u64) -> u64,
    ) -> Written {
        // Checked here, before any node is locked: a long suffix stores its length in a
        // `u32` (`node::Suffix`), and a panic under a node's lock would leave it locked.
        assert!(
            u32::try_from(key.len()).is_ok(),
            "a Masstree key of 4 GiB or more"
        );
        let g = epoch::pin();
        let mut root = self.root.load(Ordering::Acquire);
        let mut k = Key::new(key);
        let mut make = Some(make);
        loop {
            let Some(n) = Self::lock_border(root, &k, &g) else {
                root = self.root.load(Ordering::Acquire);
                k = Key::new(key);
                continue;
            };
            let perm = n.perm();
            match n.search(perm, k.slice(), k.ilen()) {
                Ok(pos) => {
                    let s = perm.slot(pos);
                    let e = n.read_slot(s);
                    debug_assert_ne!(e.keylenx, UNSTABLE, "UNSTABLE is only seen by readers");
                    if e.keylenx == LAYER {
                        root = Self::fresh_layer_root(n, s, e.value as usize as *mut Header);
                        n.header.version.unlock();
                        k.shift();
                        continue;
                    }
                    let held = Self::held(e.value, &k);
                    // SAFETY: a live slot owns its published suffix (or its value holds it);
                    // we hold the lock.
                    if e.has_suffix() && !unsafe { e.suffix.is(k.suffix(), held) } {
                        root = Self::make_layer(n, s, &e, &k, &g);
                        k.shift();
                        continue;
                    }
                    let make = make.take().expect("called once");
                    let out = match on_found {
                        OnFound::Keep => Written {
                            value: e.value,
                            old: Some(e.value),
                        },
                        OnFound::Replace => {
                            let new = call_make(n, 0, make);
                            // An update is one atomic store with no version bump (§3.1.6):
                            // readers see the old or the new word, both valid values.
                            let old = n.values[s].swap(new, Ordering::AcqRel);
                            Written {
                                value: new,
                                old: Some(old),
                            }
                        }
                    };
                    n.header.version.unlock();
                    return out;
                }
                Err(pos) => {
                    let make = make.take().expect("called once");
                    if perm.count() < WIDTH {
                        return Self::insert_here(n, perm, pos, &k, make);
                    }
                    return self.split_insert(n, perm, pos, &k, make);
                }
            }
        }
    }

    /// The true root of the layer whose (possibly stale) root `r` sits in slot `s` of locked
    /// `n`; writes it back into the slot so later operations skip the climb (thesis §3.1.6:
    /// "other roots ... are updated lazily"). The write is like a value update: one atomic
    /// store with no version bump; readers see the old or new pointer, both nodes of that
    /// layer (a layer's root is never freed: interior nodes and a layer's leftmost border
    /// node are never unlinked), and either climbs to the root.
    pub(crate) fn fresh_layer_root(n: &Border, s: usize, mut r: *mut Header) -> *mut Header {
        let stale = r;
        // SAFETY: layer nodes are live while pinned; parents of non-roots are non-null.
        while !is_root(unsafe { node(r) }.version.load()) {
            // SAFETY: as above.
            let p = unsafe { node(r) }.parent.load(Ordering::Acquire);
            assert!(!p.is_null(), "a non-root node without a parent");
            r = p.cast();
        }
        if r != stale {
            n.values[s].store(r as usize as u64, Ordering::Release);
        }
        r
    }

    /// Inserts into a locked border node with room, publishing through the permutation.
    fn insert_here(
        n: &Border,
        perm: Perm,
        pos: usize,
        k: &Key<'_>,
        make: impl FnOnce(u64) -> u64,
    ) -> Written {
        n.header.version.mark_insert();
        // Writer half of the gap-stamp Dekker pair: the SeqCst mark above, then this SeqCst
        // load. A reader that stamped and validated before our mark is seen here.
        let stamp = n.stamp.load(Ordering::SeqCst);
        let value = call_make(n, stamp, make);
        let (np, s) = perm.insert_from_back(pos);
        assert!(np.is_valid() && np.count() == perm.count() + 1);
        let follows = pos > 0 && follows_last_insert(n, perm.slot(pos - 1));
        n.last_insert.store(
            s as u8 | if follows { STREAM } else { 0 },
            Ordering::Relaxed,
        );
        // The free slot may have held a removed key: readers that read it fail validation
        // because `mark_insert` bumps `vinsert` at unlock (§3.1.6 "Removes").
        n.write_slot(
            s,
            &Entry {
                slice: k.slice(),
                keylenx: k.keylenx(V::HOLDS_KEY),
                value,
                suffix: alloc_suffix::<V>(k),
            },
        );
        // The single publication point: release orders the slot writes before it.
        n.permutation.store(np.0, Ordering::Release);
        n.header.version.unlock();
        Written { value, old: None }
    }

    /// Replaces the suffix entry in slot `s` of locked `n` by a new layer holding that entry,
    /// publishing in the thesis's order (UNSTABLE, root pointer, LAYER). Unlocks `n` and
    /// returns the new layer's root. `k` is the key being written, which shares the entry's
    /// slice in this layer.
    fn make_layer(n: &Border, s: usize, e: &Entry, k: &Key<'_>, g: &epoch::Guard) -> *mut Header {
        n.header.version.mark_insert();
        // Dekker pair as in `insert_here`: the new layer inherits every stamp left on `n`.
        let stamp = n.stamp.load(Ordering::SeqCst);
        let mut old_rest = Vec::new();
        // SAFETY: the slot is live and owns its suffix (or its value holds it); we hold the
        // lock.
        unsafe { e.suffix.push_to(&mut old_rest, Self::held(e.value, k)) };
        let lk = Key::new(&old_rest);
        let lroot = Border::alloc_root(stamp);
        // SAFETY: freshly allocated, not yet shared.
        let l = unsafe { &*lroot };
        l.write_slot(
            0,
            &Entry {
                slice: lk.slice(),
                keylenx: lk.keylenx(V::HOLDS_KEY),
                value: e.value,
                suffix: alloc_suffix::<V>(&lk),
            },
        );
        l.permutation
            .store(Perm::from_slots(&[0]).0, Ordering::Relaxed);
        n.keylenx[s].store(UNSTABLE, Ordering::Relaxed);
        fence(Ordering::Release);
        // Release: a reader that loads the pointer (acquire) sees the initialized layer.
        n.values[s].store(lroot as usize as u64, Ordering::Release);
        n.keylenx[s].store(LAYER, Ordering::Release);
        retire_suffix(g, e.suffix);
        n.header.version.unlock();
        lroot.cast()
    }

    /// Splits full, locked `n` while inserting `k` at sorted position `pos`, then ascends.
    fn split_insert(
        &self,
        n: &Border,
        perm: Perm,
        pos: usize,
        k: &Key<'_>,
        make: impl FnOnce(u64) -> u64,
    ) -> Written {
        n.header.version.mark_split();
        // Dekker pair: the new sibling and the inserted key inherit every stamp left on `n`.
        let stamp = n.stamp.load(Ordering::SeqCst);
        let value = call_make(n, stamp, make);
        const NEW: usize = usize::MAX;
        let new_e = Entry {
            slice: k.slice(),
            keylenx: k.keylenx(V::HOLDS_KEY),
            value,
            suffix: alloc_suffix::<V>(k),
        };
        let mut es = [(new_e, NEW); WIDTH + 1];
        for i in 0..WIDTH {
            let s = perm.slot(i);
            es[if i < pos { i } else { i + 1 }] = (n.read_slot(s), s);
        }
        let follows = pos > 0 && follows_last_insert(n, es[pos - 1].1);
        let stream = follows && n.last_insert.load(Ordering::Relaxed) & STREAM != 0;
        let p = split_point(
            &es,
            pos,
            pos == WIDTH && n.next.load(Ordering::Relaxed).is_null(),
            stream,
        );
        let streak = if follows { STREAM } else { 0 };
        let right_p = Border::alloc(
            NodeVersion::new_split_sibling(n.header.version.load()),
            es[p].0.slice,
            stamp,
        );
        // SAFETY: freshly allocated; reachable by others only after `n.next` is stored.
        let right = unsafe { &*right_p };
        for (j, (e, _)) in es[p..].iter().enumerate() {
            right.write_slot(j, e);
        }
        let in_right = pos >= p;
        right.last_insert.store(
            if in_right {
                (pos - p) as u8 | streak
            } else {
                NO_SLOT
            },
            Ordering::Relaxed,
        );
        let moved: Vec<usize> = (0..WIDTH + 1 - p).collect();
        right
            .permutation
            .store(Perm::from_slots(&moved).0, Ordering::Relaxed);
        let mut left = [0usize; WIDTH];
        let mut free = es[p..].iter().map(|&(_, s)| s).filter(|&s| s != NEW);
        for (i, (e, s)) in es[..p].iter().enumerate() {
            left[i] = if *s == NEW {
                // Reuse a slot whose entry moved right: readers of the old permutation fail
                // validation (`n` is marked splitting), and ownership of the moved suffix
                // went to `right`.
                let f = free.next().expect("a moved slot");
                n.write_slot(f, e);
                n.last_insert.store(f as u8 | streak, Ordering::Relaxed);
                f
            } else {
                *s
            };
        }
        if in_right {
            n.last_insert.store(NO_SLOT, Ordering::Relaxed);
        }
        let next = n.next.load(Ordering::Relaxed);
        right.next.store(next, Ordering::Relaxed);
        right
            .prev
            .store(n as *const Border as *mut Border, Ordering::Relaxed);
        if !next.is_null() {
            // `prev` is guarded by the previous sibling's lock, which we hold (`n`).
            // SAFETY: live sibling.
            unsafe { &*next }.prev.store(right_p, Ordering::Release);
        }
        // Release: a reader following `next` sees the initialized sibling.
        n.next.store(right_p, Ordering::Release);
        n.permutation
            .store(Perm::from_slots(&left[..p]).0, Ordering::Release);
        self.ascend(
            n as *const Border as *mut Header,
            right_p.cast(),
            right.lowkey,
        );
        Written { value, old: None }
    }

    /// Inserts `right` (separator `sep`) next to `n` in `n`'s parent, splitting upward as
    /// needed. `n` and `right` are locked; everything is unlocked on return.
    fn ascend(&self, mut n: *mut Header, mut right: *mut Header, mut sep: u64) {
        loop {
            // SAFETY: `n` is a live node of this tree and we hold its lock.
            let p = unsafe { locked_parent(n) };
            // SAFETY: nodes of the tree are live while pinned; we hold both locks.
            let (nh, rh) = unsafe { (node(n), node(right)) };
            if p.is_null() {
                let r = Interior::alloc(NodeVersion::new(ROOT));
                // SAFETY: fresh, unshared.
                let ri = unsafe { &*r };
                ri.keys[0].store(sep, Ordering::Relaxed);
                ri.children[0].store(n, Ordering::Relaxed);
                ri.children[1].store(right, Ordering::Relaxed);
                ri.nkeys.store(1, Ordering::Relaxed);
                nh.parent.store(r, Ordering::Release);
                rh.parent.store(r, Ordering::Release);
                // After the parent pointer: a reader seeing ROOT cleared can climb.
                nh.version.clear_root();
                // The layer-0 root moves at once; deeper layers' slots stay stale (mod docs).
                let _ =
                    self.root
                        .compare_exchange(n, r.cast(), Ordering::AcqRel, Ordering::Relaxed);
                nh.version.unlock();
                rh.version.unlock();
                return;
            }
            // SAFETY: a non-null parent is a live interior node, locked by `locked_parent`.
            let pi = unsafe { &*p };
            let nk = pi.nkeys.load(Ordering::Relaxed) as usize;
            let i = (0..=nk)
                .find(|&i| pi.children[i].load(Ordering::Relaxed) == n)
                .expect("a child is among its parent's children");
            if nk < WIDTH {
                pi.header.version.mark_insert();
                for j in (i..nk).rev() {
                    pi.keys[j + 1].store(pi.keys[j].load(Ordering::Relaxed), Ordering::Relaxed);
                    pi.children[j + 2].store(
                        pi.children[j + 1].load(Ordering::Relaxed),
                        Ordering::Relaxed,
                    );
                }
                pi.keys[i].store(sep, Ordering::Relaxed);
                pi.children[i + 1].store(right, Ordering::Release);
                pi.nkeys.store(nk as u8 + 1, Ordering::Relaxed);
                rh.parent.store(p, Ordering::Release);
                nh.version.unlock();
                rh.version.unlock();
                pi.header.version.unlock();
                return;
            }
            pi.header.version.mark_split();
            nh.version.unlock();
            let mut ks = [0u64; WIDTH + 1];
            let mut cs = [core::ptr::null_mut::<Header>(); WIDTH + 2];
            for j in 0..WIDTH {
                ks[if j < i { j } else { j + 1 }] = pi.keys[j].load(Ordering::Relaxed);
            }
            ks[i] = sep;
            for j in 0..=WIDTH {
                cs[if j <= i { j } else { j + 1 }] = pi.children[j].load(Ordering::Relaxed);
            }
            cs[i + 1] = right;
            const HALF: usize = WIDTH / 2 + 1; // left keeps 8 keys, 9 children
            let p2 = Interior::alloc(NodeVersion::new_split_sibling(pi.header.version.load()));
            // SAFETY: fresh; reachable only after it is inserted into the grandparent.
            let p2i = unsafe { &*p2 };
            for (j, &key) in ks[HALF + 1..].iter().enumerate() {
                p2i.keys[j].store(key, Ordering::Relaxed);
            }
            for (j, &c) in cs[HALF + 1..].iter().enumerate() {
                p2i.children[j].store(c, Ordering::Relaxed);
                // A child's parent pointer is guarded by its parent's lock: we hold `p`.
                // SAFETY: children of a live interior node are live nodes.
                unsafe { node(c) }.parent.store(p2, Ordering::Release);
            }
            p2i.nkeys.store((WIDTH - HALF) as u8, Ordering::Relaxed);
            for (j, &key) in ks[..HALF].iter().enumerate() {
                pi.keys[j].store(key, Ordering::Relaxed);
            }
            for (j, &c) in cs[..=HALF].iter().enumerate() {
                pi.children[j].store(c, Ordering::Relaxed);
            }
            pi.nkeys.store(HALF as u8, Ordering::Relaxed);
            if i < HALF {
                rh.parent.store(p, Ordering::Release);
            }
            rh.version.unlock();
            n = p.cast();
            right = p2.cast();
            sep = ks[HALF];
        }
    }
}

/// Locks and returns `n`'s parent, re-checking the parent pointer after locking (it may
/// have moved to a split sibling meanwhile). Null when `n` is a root.
///
/// # Safety
/// `n` is a live, locked node.
pub(crate) unsafe fn locked_parent(n: *mut Header) -> *mut Interior {
    // SAFETY: live (caller).
    let h = unsafe { node(n) };
    loop {
        let p = h.parent.load(Ordering::Acquire);
        if p.is_null() {
            return p;
        }
        // SAFETY: parents are live nodes.
        let pi = unsafe { as_interior(p.cast()) };
        pi.header.version.lock();
        if h.parent.load(Ordering::Acquire) == p {
            return p;
        }
        pi.header.version.unlock();
    }
}

/// Whether the entry in `slot` of locked `n` is the one inserted last.
fn follows_last_insert(n: &Border, slot: usize) -> bool {
    n.last_insert.load(Ordering::Relaxed) & !STREAM == slot as u8
}

/// Where a full border node's 16 sorted entries split, the new one at `pos`: entries
/// `[..p]` stay, `[p..]` move. Never between two entries with one slice (they must share a
/// border node). `sequential`: the insert is at the end of the rightmost node, so the old
/// keys stay put (§3.1.3). `stream`: the insert continues an ascending run of inserts
/// (the third in a row, each right after the one before), as at the end of the rightmost
/// node but in the middle of the layer; the split goes right after the new entry, so the
/// stream's keys stay full in the left node and the keys after them move out of its way
/// (a generalization of §3.1.3; a random insert continues a run with odds of about
/// 1 in 15 squared, and then only moves the split point).
fn split_point(
    es: &[(Entry, usize); WIDTH + 1],
    pos: usize,
    sequential: bool,
    stream: bool,
) -> usize {
    let boundary = |p: usize| es[p - 1].0.slice != es[p].0.slice;
    if sequential && boundary(WIDTH) {
        return WIDTH;
    }
    if stream {
        let p = (pos + 1).min(WIDTH);
        if boundary(p) {
            return p;
        }
    }
    let mid = WIDTH.div_ceil(2);
    for d in 0..WIDTH {
        for p in [mid.wrapping_sub(d), mid + d] {
            if (1..=WIDTH).contains(&p) && boundary(p) {
                return p;
            }
        }
    }
    unreachable!("at most 10 entries share a slice, so 16 entries have a boundary")
}
