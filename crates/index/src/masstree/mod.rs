//! Masstree (Mao, Kohler, Morris; thesis ch. 3, §3.1): a trie of B+trees over 8-byte key
//! slices, with lock-free optimistic reads and fine-grained locked writes.
//!
//! * `key.rs` slices keys; `version.rs` is the whole lock protocol (one version word per
//!   node); `node.rs` lays out width-15 interior and border nodes; `insert.rs` holds the
//!   locked write path (inserts, new layers, splits with hand-over-hand parent locking);
//!   `remove.rs` removes; `scan.rs` walks ranges both ways.
//! * Readers never write shared memory (except a scan or absent lookup leaving a gap stamp)
//!   and never lock: `stable()` version, read, re-validate, retry locally after an insert
//!   and from the root after a split (thesis Figs 3-6, 3-7).
//! * Values are word-sized ([`IndexValue`]) and stored in atomic slots, so an optimistic get
//!   reads the value with one atomic load from the border node line it already fetched and
//!   validates it with the node version: no extra cache miss (a `Box<V>` would add one) and
//!   nothing to reclaim when a value is overwritten.
//! * Gap stamps: one `AtomicU64` per border node covering its key range `[lowkey, highkey)`.
//!   Scans and absent `get_or_stamp` `fetch_max` it (`SeqCst`) and then validate the node
//!   version (`SeqCst`); writers mark the node dirty (`SeqCst` store) and then load the
//!   stamp (`SeqCst`). In the single total order of `SeqCst` operations either the reader's
//!   validation follows the writer's mark (the reader sees the change and retries, so it
//!   observes the key) or the reader's `fetch_max` precedes the writer's load (the writer
//!   learns the stamp). Splits copy the stamp into the new sibling after marking the node
//!   splitting; a new layer's root copies the stamp of the border node holding the slot,
//!   after marking that node inserting.
//! * Reclamation: key suffixes replaced or removed are retired through `crossbeam-epoch`;
//!   every operation pins the epoch. Values that hold their key ([`IndexValue::HOLDS_KEY`])
//!   are retired the same way by their owner ([`retire_after_readers`]).
//! * Removes (`remove.rs`): an emptied border node is unlinked (marked `DELETED`, its
//!   range and gap stamp handed to its previous sibling, removed from the border list and
//!   from the interior tree together with any interior nodes left without another child,
//!   freed through the epoch collector); when it was a leftmost child, the bounding
//!   separator in the nearest ancestor is rewritten (masstree-beta's "redirect"), with every
//!   node on that path marked split. An emptied layer (h >= 1) is removed from its parent
//!   slot, interior nodes and all. `remove_if` leaves a stamp where the key was (the engine
//!   folds a removed record's read timestamp in this way).
//! * Stale layer roots (h >= 1) are written back into their slot lazily, by the next
//!   insert or update that passes through it; until then readers climb `parent` pointers.
//!   The layer-0 root is updated at once.
//! * The thesis's sequential-insert split optimization, extended to ascending streams in
//!   the middle of a layer (`Border::last_insert`: a third insert in a row, each right after
//!   the one before, splits right after the new key, so interleaved streams such as
//!   TPC-C's ten districts fill their nodes instead of halving them).
//!
//! # Not implemented (precisely)
//! * A layer's leftmost border node stays (empty, valid) while its layer lives, and
//!   interior nodes left with one child and no separator are not collapsed into their
//!   parent (they are freed when their last border node goes).
//! * Suffixes of up to 8 bytes are packed into a word of the node's suffix block (one
//!   allocation per node, at its first suffix, prefetched with the node); longer ones are
//!   out of line, one allocation each (length, then bytes), or, when the values hold their
//!   keys (the engine's records), not stored at all: `keylenx` [`key::KSUF_IN_VALUE`] says
//!   to compare against the value's key. masstree-beta keeps a per-node string bag for all
//!   lengths.

mod cursor;
mod insert;
mod key;
mod map;
mod node;
mod remove;
mod scan;
mod sync;
mod version;

#[cfg(all(test, not(loom)))]
mod tests;

#[cfg(all(test, loom))]
mod loom_tests;

#[cfg(all(test, shuttle))]
mod shuttle_tests;

use core::marker::PhantomData;

use crossbeam_epoch as epoch;

pub use self::cursor::Cursor;
pub use self::map::MasstreeMap;

use self::key::{Key, LAYER, UNSTABLE};
use self::node::{Border, Header, Interior, Suf, Suffix};
use self::sync::{AtomicPtr, Ordering};
use self::version::{is_deleted, is_leaf, is_root, NodeVersion};

/// A word-sized value the index can store in an atomic slot.
///
/// # Safety
/// `from_bits(into_bits(v))` must return `v`, and `from_bits` is only ever called on bits
/// produced by `into_bits` of the same type.
pub unsafe trait IndexValue: Copy + Send + Sync + 'static {
    /// The value as a word.
    fn into_bits(self) -> u64;
    /// The value back from a word made by [`IndexValue::into_bits`].
    ///
    /// # Safety
    /// `bits` must come from `into_bits` of this type.
    unsafe fn from_bits(bits: u64) -> Self;

    /// Whether a value names an object that holds its entry's whole key. [`Masstree`] then
    /// keeps no copy of a long key suffix (one past a layer's slice of more than 8 bytes,
    /// which otherwise costs an allocation per key) and compares against the value's key
    /// through [`IndexValue::key_of`]. The engine's records hold their keys, so a key is
    /// stored once instead of twice.
    const HOLDS_KEY: bool = false;

    /// The whole key of the entry whose value is `bits`; only called when
    /// [`IndexValue::HOLDS_KEY`].
    ///
    /// # Safety
    /// `bits` come from `into_bits` of a value the index holds, or held while the caller
    /// has been pinned. Implementors keep the object and its key alive and unchanged for
    /// that long: its key is the entry's key, and once removed from the index the object is
    /// freed only through [`retire_after_readers`] (or when nothing can read the index).
    unsafe fn key_of(bits: u64) -> *const [u8] {
        let _ = bits;
        unreachable!("key_of is only called for values that hold their key")
    }
}

/// Runs `free` once every index operation in progress now has ended: for objects whose
/// keys the index reads ([`IndexValue::HOLDS_KEY`]) after they are removed from it. Call
/// [`flush_retired`] after a batch of them.
pub fn retire_after_readers(free: impl FnOnce() + Send + 'static) {
    epoch::pin().defer(free);
}

/// Whether the index may read `key` from a value that holds it: only a key with more than
/// 8 bytes past some layer's 8-byte slice, so longer than 16 bytes. Objects holding shorter
/// keys can be freed without [`retire_after_readers`].
pub fn reads_held_key(key: &[u8]) -> bool {
    key.len() > 16
}

/// Runs the frees retired so far that no index operation can reach any more, as far as the
/// threads pinned now allow. The epoch collector otherwise runs at most a few hundred of
/// them per hundred-odd index operations, so the records of a burst of deletions (a
/// FLUSHALL) would wait for later traffic; `retired` (how many were just retired) sets how
/// many rounds to try.
pub fn flush_retired(retired: usize) {
    // A round advances the epoch once (if no thread is pinned in an older one) and runs up
    // to 8 bags of 64 frees; the first two only age what was just retired.
    for _ in 0..retired / 512 + 3 {
        epoch::pin().flush();
    }
}

// SAFETY: the identity round-trips.
unsafe impl IndexValue for u64 {
    fn into_bits(self) -> u64 {
        self
    }
    unsafe fn from_bits(bits: u64) -> Self {
        bits
    }
}

// SAFETY: usize is at most 64 bits on supported targets; the cast round-trips.
unsafe impl IndexValue for usize {
    fn into_bits(self) -> u64 {
        self as u64
    }
    unsafe fn from_bits(bits: u64) -> Self {
        bits as usize
    }
}

// SAFETY: zero extension then truncation round-trips.
unsafe impl IndexValue for u32 {
    fn into_bits(self) -> u64 {
        u64::from(self)
    }
    unsafe fn from_bits(bits: u64) -> Self {
        bits as u32
    }
}

const _: () = assert!(core::mem::size_of::<usize>() <= 8);

/// A concurrent ordered map from byte strings to word-sized values, keeping the gap-stamp
/// contract of the crate docs.
pub struct Masstree<V: IndexValue> {
    /// The layer-0 root, possibly stale (a node that has since got a parent).
    root: AtomicPtr<Header>,
    _values: PhantomData<V>,
}

// SAFETY: the tree owns its nodes; all shared state is reached through atomics under the
// version protocol, and values are `Send + Sync` words.
unsafe impl<V: IndexValue> Send for Masstree<V> {}
// SAFETY: as above; every `&self` method is safe to run concurrently (that is the protocol).
unsafe impl<V: IndexValue> Sync for Masstree<V> {}

impl<V: IndexValue> Default for Masstree<V> {
    fn default() -> Self {
        Self::new()
    }
}

/// Dereferences a node pointer.
///
/// # Safety
/// `p` must point at a live node of this tree: nodes are freed only by `Drop` (and, later,
/// through the epoch collector while the caller is pinned).
#[inline(always)]
unsafe fn node<'g>(p: *const Header) -> &'g Header {
    debug_assert!(!p.is_null());
    // SAFETY: the caller guarantees `p` is live.
    unsafe { &*p }
}

/// The border node behind a header whose version has `LEAF`.
///
/// # Safety
/// As [`node`], and the node must be a border node (`LEAF` never changes).
#[inline(always)]
unsafe fn as_border<'g>(p: *const Header) -> &'g Border {
    // SAFETY: `Border` is `repr(C)` with the header first, and the caller says it is one.
    unsafe { &*p.cast::<Border>() }
}

/// # Safety
/// As [`node`], and the node must be an interior node.
#[inline(always)]
unsafe fn as_interior<'g>(p: *const Header) -> &'g Interior {
    // SAFETY: `Interior` is `repr(C)` with the header first, and the caller says it is one.
    unsafe { &*p.cast::<Interior>() }
}

/// What an optimistic read of one border node found for a key.
enum Found {
    Value(u64),
    Layer(*mut Header),
    Absent,
}

impl<V: IndexValue> Masstree<V> {
    /// An empty index.
    pub fn new() -> Self {
        Masstree {
            root: AtomicPtr::new(Border::alloc_root(0).cast()),
            _values: PhantomData,
        }
    }

    /// Walks from a (possibly stale) layer root down to the border node responsible for
    /// `slice`, returning it with the stable version it was validated at (thesis Fig 3-6).
    #[allow(clippy::needless_lifetimes)] // the guard's lifetime bounds the node borrow
    fn find_border<'g>(root: *mut Header, slice: u64, _g: &'g epoch::Guard) -> (&'g Border, u64) {
        'retry: loop {
            let mut n = root;
            // SAFETY: roots and nodes reached from them are live while pinned (module docs).
            let mut v = unsafe { node(n) }.version.stable();
            while !is_root(v) {
                // Safe even if racing a split: `ROOT` is cleared (release) only after the
                // parent pointer is set, and parents are never freed while we are pinned.
                // SAFETY: `n` is live (as above).
                n = unsafe { node(n) }.parent.load(Ordering::Acquire).cast();
                assert!(!n.is_null(), "a non-root node without a parent");
                // SAFETY: parents are live nodes of the same tree.
                v = unsafe { node(n) }.version.stable();
            }
            while is_deleted(v) && !is_leaf(v) {
                // The root of a removed layer (`remove_empty_layer`): frozen, and every
                // node under it is deleted too. Go down to its border node, which the
                // caller sees deleted and so restarts from the top of the tree.
                // SAFETY: not `LEAF`; a removed layer's nodes stay live while pinned.
                n = unsafe { as_interior(n) }.children[0].load(Ordering::Acquire);
                // SAFETY: as above.
                v = unsafe { node(n) }.version.stable();
            }
            loop {
                if is_leaf(v) {
                    // SAFETY: `LEAF` says this is a border node.
                    return (unsafe { as_border(n) }, v);
                }
                // SAFETY: not `LEAF`, so an interior node, live while pinned.
                let inode = unsafe { as_interior(n) };
                // Racy reads of `nkeys`, keys and the child: validated below before use.
                let child = inode.children[inode.child_index(slice)].load(Ordering::Acquire);
                if !child.is_null() {
                    // All of the child's lines in parallel with its version's line.
                    node::prefetch_lines(child.cast(), core::mem::size_of::<Border>());
                    // SAFETY: a child pointer read from a node is a live node (maybe a
                    // stale one, which the validation below rejects).
                    let cv = unsafe { node(child) }.version.stable();
                    // The child's version is loaded (acquire) *before* the parent's is
                    // re-checked: a split that moved our key marks the child first.
                    if !inode.header.version.has_changed(v) {
                        n = child;
                        v = cv;
                        continue;
                    }
                }
                let v2 = inode.header.version.stable();
                if NodeVersion::has_split(v, v2) {
                    continue 'retry;
                }
                v = v2;
            }
        }
    }

    /// Moves right from `n` (at version `v`) while `slice` belongs to a right sibling, after
    /// a failed validation (thesis Fig 3-7 "forward"). Returns the node and a stable version.
    fn walk_right(mut n: &Border, slice: u64) -> (&Border, u64) {
        let mut v = n.header.version.stable();
        loop {
            if is_deleted(v) {
                return (n, v);
            }
            let next = n.next.load(Ordering::Acquire);
            // Safe even though `next` may be changing: `lowkey` is immutable and nodes are
            // live while pinned.
            // SAFETY: sibling pointers name live border nodes.
            if next.is_null() || slice < unsafe { &*next }.lowkey {
                return (n, v);
            }
            // SAFETY: as above.
            n = unsafe { &*next };
            v = n.header.version.stable();
        }
    }

    /// Where the suffix of an entry with value `bits`, met while looking for `k`, is when
    /// the value holds it.
    #[inline]
    pub(crate) fn held(bits: u64, k: &Key<'_>) -> node::Held {
        node::Held {
            bits,
            key_of: V::key_of,
            off: k.suffix_offset(),
        }
    }

    /// Looks `k` up in border node `n` (reached at version `v`), retrying locally until a
    /// consistent read. Returns the node it was decided in, that version, and the finding.
    fn read_in<'g>(mut n: &'g Border, mut v: u64, k: &Key<'_>) -> Option<(&'g Border, u64, Found)> {
        let (slice, ilen) = (k.slice(), k.ilen());
        loop {
            if is_deleted(v) {
                return None;
            }
            // A suffix in the value, compared only once the read validates: until then the
            // slot may hold another entry's value, or a layer's root.
            let mut held = None;
            if k.has_suffix() {
                // Its miss overlaps the search instead of following it.
                n.prefetch_suffixes();
            }
            let perm = n.perm();
            let found = match n.search(perm, slice, ilen) {
                Err(_) => Found::Absent,
                Ok(pos) => {
                    let s = perm.slot(pos);
                    let klx = n.keylenx[s].load(Ordering::Relaxed);
                    let bits = n.values[s].load(Ordering::Acquire);
                    if klx == LAYER {
                        Found::Layer(bits as usize as *mut Header)
                    } else if klx == key::KSUF_IN_VALUE {
                        held = Some(bits);
                        Found::Absent
                    } else if key::has_suffix(klx) {
                        // Safe even if the slot is being reused: a suffix pointer read from a
                        // slot is null or a suffix not yet reclaimed (we are pinned), and
                        // suffixes are immutable; a torn combination fails validation.
                        // SAFETY: see above.
                        if unsafe { n.suffix(s, klx).is(k.suffix(), Self::held(bits, k)) } {
                            Found::Value(bits)
                        } else {
                            Found::Absent
                        }
                    } else if klx == UNSTABLE {
                        // A new layer is being installed: wait for it.
                        v = n.header.version.stable();
                        continue;
                    } else {
                        Found::Value(bits)
                    }
                }
            };
            if n.header.version.has_changed(v) {
                (n, v) = Self::walk_right(n, slice);
                continue;
            }
            let found = match held {
                // SAFETY: the read validated, so `bits` are this key's entry's value (an
                // update stores a value holding the same key), and we are pinned.
                Some(bits) => match unsafe { Suf::InValue.is(k.suffix(), Self::held(bits, k)) } {
                    true => Found::Value(bits),
                    false => Found::Absent,
                },
                None => found,
            };
            return Some((n, v, found));
        }
    }

    /// The value stored under `key`. Lock-free, allocation-free, writes nothing shared.
    pub fn get(&self, key: &[u8]) -> Option<V> {
        let g = epoch::pin();
        self.get_impl(key, None, &g)
    }

    /// The value stored under `key`; if there is none, leaves `stamp` on the border node whose
    /// range holds `key`, so a later insert of `key` learns it.
    pub fn get_or_stamp(&self, key: &[u8], stamp: u64) -> Option<V> {
        let g = epoch::pin();
        self.get_impl(key, Some(stamp), &g)
    }

    /// The value stored under `key`, or, if there is none, the stamp on the border node
    /// whose range holds `key` (at least every stamp left for `key` before this call: the
    /// largest stamp a later insert of `key` would learn, as far as it is known now).
    pub fn get_or_gap_stamp(&self, key: &[u8]) -> Result<V, u64> {
        let g = epoch::pin();
        let mut root = self.root.load(Ordering::Acquire);
        let mut k = Key::new(key);
        loop {
            let (n, v) = Self::find_border(root, k.slice(), &g);
            let Some((n, v, found)) = Self::read_in(n, v, &k) else {
                root = self.root.load(Ordering::Acquire);
                k = Key::new(key);
                continue;
            };
            match found {
                // SAFETY: as in `get_impl`: value slots hold only `V::into_bits` words.
                Found::Value(bits) => return Ok(unsafe { V::from_bits(bits) }),
                Found::Layer(r) => {
                    root = r;
                    k.shift();
                }
                Found::Absent => {
                    let stamp = n.stamp.load(Ordering::SeqCst);
                    // A split since `v` may have moved `key`'s range (and its stamp, which a
                    // split copies to both halves) elsewhere: look again.
                    if n.header.version.has_changed_seqcst(v) {
                        root = self.root.load(Ordering::Acquire);
                        k = Key::new(key);
                        continue;
                    }
                    return Err(stamp);
                }
            }
        }
    }

    fn get_impl(&self, key: &[u8], stamp: Option<u64>, g: &epoch::Guard) -> Option<V> {
        let mut root = self.root.load(Ordering::Acquire);
        let mut k = Key::new(key);
        'layer: loop {
            let (n, v) = Self::find_border(root, k.slice(), g);
            let Some((n, v, found)) = Self::read_in(n, v, &k) else {
                // A deleted node (maybe the root of a removed layer): restart from the top.
                root = self.root.load(Ordering::Acquire);
                k = Key::new(key);
                continue 'layer;
            };
            match found {
                // SAFETY: value slots only ever hold `V::into_bits` words (LAYER slots are
                // excluded by `keylenx`, validated together).
                Found::Value(bits) => return Some(unsafe { V::from_bits(bits) }),
                Found::Layer(r) => {
                    root = r;
                    k.shift();
                    continue 'layer;
                }
                Found::Absent => {
                    let s = stamp?;
                    n.stamp.fetch_max(s, Ordering::SeqCst);
                    // The reader half of the gap-stamp Dekker pair (module docs): if no
                    // writer changed `n` since `v`, any later insert into `n` loads a stamp
                    // ordered after our fetch_max.
                    if n.header.version.has_changed_seqcst(v) {
                        continue 'layer;
                    }
                    return None;
                }
            }
        }
    }

    /// Calls `f` on every entry in key order (not atomic with concurrent writers).
    pub fn for_each(&self, mut f: impl FnMut(&[u8], V)) {
        self.scan(
            core::ops::Bound::Unbounded,
            core::ops::Bound::Unbounded,
            crate::Direction::Forward,
            0,
            |k, v| {
                f(k, v);
                true
            },
        );
    }

    /// Number of keys: a full walk (no shared counter, so writers do not contend on one).
    pub fn len(&self) -> usize {
        let mut n = 0;
        self.for_each(|_, _| n += 1);
        n
    }

    /// `true` when there are no keys.
    pub fn is_empty(&self) -> bool {
        let mut empty = true;
        self.scan(
            core::ops::Bound::Unbounded,
            core::ops::Bound::Unbounded,
            crate::Direction::Forward,
            0,
            |_, _| {
                empty = false;
                false
            },
        );
        empty
    }
}

impl<V: IndexValue> Drop for Masstree<V> {
    fn drop(&mut self) {
        // SAFETY: `&mut self`: no concurrent users; nodes are live until freed below.
        let root = unsafe { layer_root_of(self.root.load(Ordering::Relaxed)) };
        // SAFETY: exclusive access; every node is reachable exactly once from its root.
        unsafe { free_tree(root) };
    }
}

/// Frees the subtree at `n`, deeper layers and owned suffixes included.
///
/// # Safety
/// Exclusive access; `n` is a live node reachable only through the structure being freed.
unsafe fn free_tree(n: *mut Header) {
    // SAFETY: exclusive access (caller).
    let h = unsafe { node(n) };
    if is_leaf(h.version.load()) {
        // SAFETY: `LEAF` says so.
        let b = unsafe { as_border(n) };
        let perm = b.perm();
        for i in 0..perm.count() {
            let e = b.read_slot(perm.slot(i));
            if e.keylenx == LAYER {
                // SAFETY: a live LAYER slot owns its layer's root.
                unsafe { free_tree(layer_root_of(e.value as usize as *mut Header)) };
            } else if let Suf::Long(p) = e.suffix {
                if !p.is_null() {
                    // SAFETY: live slots own their long suffix (node.rs invariant), made by
                    // `Suffix::alloc`; exclusive access, so no one reads it again.
                    unsafe { Suffix::free(p) };
                }
            }
        }
        let block = b.ksuf.load(Ordering::Relaxed);
        if !block.is_null() {
            // SAFETY: allocated by `Border::set_suffix`, owned by the node, freed once.
            drop(unsafe { Box::from_raw(block) });
        }
        // SAFETY: allocated by `Border::alloc`, freed once.
        drop(unsafe { Box::from_raw(n.cast::<Border>()) });
    } else {
        // SAFETY: not `LEAF`.
        let inode = unsafe { as_interior(n) };
        let nk = inode.nkeys.load(Ordering::Relaxed) as usize;
        for c in &inode.children[..=nk] {
            // SAFETY: children are owned by their parent.
            unsafe { free_tree(c.load(Ordering::Relaxed)) };
        }
        // SAFETY: allocated by `Interior::alloc`, freed once.
        drop(unsafe { Box::from_raw(n.cast::<Interior>()) });
    }
}

/// The true root above a possibly stale layer root (exclusive access).
///
/// # Safety
/// `r` is a live node and no one else is changing the tree.
unsafe fn layer_root_of(mut r: *mut Header) -> *mut Header {
    // SAFETY: live nodes (caller).
    while let Some(p) = core::ptr::NonNull::new(unsafe { node(r) }.parent.load(Ordering::Relaxed)) {
        r = p.as_ptr().cast();
    }
    r
}

/// Retires a suffix that readers may still be reading (a long one; a short one is only a
/// word of its node's suffix block).
fn retire_suffix(g: &epoch::Guard, suf: Suf) {
    let Suf::Long(p) = suf else {
        return;
    };
    if p.is_null() {
        return;
    }
    let addr = p as usize;
    // SAFETY: `p` is no longer reachable from any live slot (the caller just dropped it from
    // the permutation or replaced the slot), so once every thread pinned now has unpinned no
    // one can hold it; it was made by `Suffix::alloc` and is retired exactly once.
    unsafe {
        g.defer_unchecked(move || Suffix::free(addr as *mut Suffix));
    }
}
