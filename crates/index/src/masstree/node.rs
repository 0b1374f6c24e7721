//! Node layouts (thesis Fig 3-2): width-15 interior and border nodes, cache-line aligned.
//!
//! Every field a reader may look at without the lock is an atomic; readers load them
//! relaxed between a stable version and a re-validation (see `version.rs`). Nodes start with
//! a common [`Header`] so a child pointer can be typed by its version's `LEAF` bit.

use super::key::{has_suffix, ilen_of, slice_of, Key, KSUF, KSUF_IN_VALUE};
use super::sync::{AtomicPtr, AtomicU64, AtomicU8, Ordering};
use super::version::{NodeVersion, LEAF, ROOT};

/// Node width: keys per node.
pub(crate) const WIDTH: usize = 15;

/// The fields every node starts with.
#[repr(C)]
pub(crate) struct Header {
    pub(crate) version: NodeVersion,
    /// The parent interior node, null for a layer root. Guarded by the *parent's* lock.
    pub(crate) parent: AtomicPtr<Interior>,
}

/// An interior node: `nkeys` separators (slices only: all keys sharing a slice live in one
/// border node) and `nkeys + 1` children; child `i` holds slices in `[keys[i-1], keys[i])`.
#[repr(C, align(64))]
pub(crate) struct Interior {
    pub(crate) header: Header,
    pub(crate) nkeys: AtomicU8,
    pub(crate) keys: [AtomicU64; WIDTH],
    pub(crate) children: [AtomicPtr<Header>; WIDTH + 1],
}

/// An out-of-line key suffix: one allocation holding its length and then its bytes,
/// immutable once published, freed through the epoch collector ([`Suffix::free`]).
///
/// Layout: a `u32` length followed by that many bytes, so comparing a key with it reads
/// one allocation (one miss for a short suffix that does not straddle a cache line), and a
/// 100-byte key's suffix costs one allocator size class instead of a boxed slice behind a
/// box (16 bytes more under mimalloc, and a second dependent miss on every lookup that
/// compares it).
#[repr(C)]
pub(crate) struct Suffix {
    len: u32,
}

impl Suffix {
    fn layout(len: usize) -> core::alloc::Layout {
        core::alloc::Layout::from_size_align(core::mem::size_of::<Suffix>() + len, 4)
            .expect("suffix layout")
    }

    /// A new suffix holding `bytes`, owned by the caller until it is freed with
    /// [`Suffix::free`].
    ///
    /// Panics if `bytes` is 4 GiB or longer: keys that long are far beyond every caller's
    /// limit (the server's bulk strings stop at 512 MiB), and `Masstree::write` refuses them
    /// before it locks a node, so this never fires under a lock.
    pub(crate) fn alloc(bytes: &[u8]) -> *mut Suffix {
        let len = u32::try_from(bytes.len()).expect("a key suffix of 4 GiB or more");
        let layout = Suffix::layout(bytes.len());
        // SAFETY: the layout's size is at least 4 (the header), so it is not zero-sized.
        let p = unsafe { std::alloc::alloc(layout) }.cast::<Suffix>();
        if p.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        // SAFETY: `p` is a fresh allocation of `layout`: the header, then `len` bytes.
        unsafe {
            p.write(Suffix { len });
            core::ptr::copy_nonoverlapping(bytes.as_ptr(), p.add(1).cast::<u8>(), bytes.len());
        }
        p
    }

    /// The suffix's bytes.
    ///
    /// # Safety
    /// `p` was made by [`Suffix::alloc`] and is not freed while the slice lives.
    pub(crate) unsafe fn bytes<'a>(p: *const Suffix) -> &'a [u8] {
        // SAFETY: by the caller's contract `p` is live: its header, then `len` initialized
        // bytes, immutable since `alloc`.
        unsafe { core::slice::from_raw_parts(p.add(1).cast::<u8>(), (*p).len as usize) }
    }

    /// Frees a suffix.
    ///
    /// # Safety
    /// `p` was made by [`Suffix::alloc`], is freed once, and no one reads it afterwards.
    pub(crate) unsafe fn free(p: *mut Suffix) {
        // SAFETY: by the caller's contract; the layout is the one `alloc` used.
        unsafe {
            let layout = Suffix::layout((*p).len as usize);
            std::alloc::dealloc(p.cast::<u8>(), layout);
        }
    }
}

/// A border node's suffixes, one per slot: a suffix of up to 8 bytes packed into `short`
/// (big-endian and zero-padded like a slice; its length is in `keylenx`), a longer one
/// behind a pointer in `long`. Allocated at the node's first suffix.
pub(crate) struct SuffixBlock {
    pub(crate) short: [AtomicU64; WIDTH],
    pub(crate) long: [AtomicPtr<Suffix>; WIDTH],
}

/// A slot's key suffix, as an entry snapshot holds it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Suf {
    None,
    /// `len` (1..=8) bytes packed into a word.
    Short {
        word: u64,
        len: u8,
    },
    /// Out of line, owned by the slot while it is live.
    Long(*mut Suffix),
    /// Longer than 8 bytes and not stored: the value holds the whole key
    /// ([`super::IndexValue::HOLDS_KEY`]), read through [`Held`].
    InValue,
}

/// Reads the whole key a value names ([`super::IndexValue::key_of`]).
pub(crate) type KeyOf = unsafe fn(u64) -> *const [u8];

/// Where an [`Suf::InValue`] suffix is: the entry's value bits, the tree's key reader, and
/// the offset of the suffix in the whole key (past the slice of the layer the entry is in).
#[derive(Clone, Copy)]
pub(crate) struct Held {
    pub(crate) bits: u64,
    pub(crate) key_of: KeyOf,
    pub(crate) off: usize,
}

impl Held {
    /// The suffix, or `None` if the value's key is too short to have one here (which a
    /// consistent entry never is).
    ///
    /// # Safety
    /// `bits` are a value read under the node's lock, or from a read of the node that
    /// validated, while pinned: the object they name is not freed before the pin ends
    /// (`IndexValue::key_of`'s contract).
    unsafe fn suffix<'a>(self) -> Option<&'a [u8]> {
        // SAFETY: by the caller's contract the key outlives this use.
        let full: &'a [u8] = unsafe { &*(self.key_of)(self.bits) };
        full.get(self.off..)
    }
}

impl Suf {
    /// The suffix for a new entry of key `k` (its remainder past this layer's slice), in a
    /// tree whose values hold their keys when `held`: a long one is then left in the value,
    /// otherwise allocated.
    pub(crate) fn of_key(k: &Key<'_>, held: bool) -> Suf {
        let rest = k.suffix();
        match rest.len() {
            9.. if held => Suf::InValue,
            0 => Suf::None,
            1..=8 => Suf::Short {
                word: slice_of(rest),
                len: rest.len() as u8,
            },
            _ => Suf::Long(Suffix::alloc(rest)),
        }
    }

    /// Whether this suffix is `rest`; `held` says where an [`Suf::InValue`] one is.
    ///
    /// # Safety
    /// A long suffix's pointer is null or names a suffix not yet reclaimed (a live slot's,
    /// read under the lock or while pinned); for an `InValue` one, as [`Held::suffix`].
    #[inline]
    pub(crate) unsafe fn is(&self, rest: &[u8], held: Held) -> bool {
        match *self {
            Suf::None => rest.is_empty(),
            Suf::Short { word, len } => rest.len() == len as usize && slice_of(rest) == word,
            // SAFETY: by the caller's contract.
            Suf::Long(p) => !p.is_null() && unsafe { Suffix::bytes(p) } == rest,
            // SAFETY: by the caller's contract.
            Suf::InValue => (unsafe { held.suffix() }) == Some(rest),
        }
    }

    /// Appends the suffix's bytes to `buf`.
    ///
    /// # Safety
    /// As for [`Suf::is`].
    pub(crate) unsafe fn push_to(&self, buf: &mut Vec<u8>, held: Held) {
        match *self {
            Suf::None => {}
            Suf::Short { word, len } => buf.extend_from_slice(&word.to_be_bytes()[..len as usize]),
            // SAFETY: by the caller's contract; a null pointer is never a live slot's.
            Suf::Long(p) => buf.extend_from_slice(unsafe { Suffix::bytes(p) }),
            // SAFETY: by the caller's contract.
            Suf::InValue => buf.extend_from_slice(unsafe { held.suffix() }.unwrap_or(&[])),
        }
    }
}

/// `Border::last_insert` when no key was inserted since the node was made.
pub(crate) const NO_SLOT: u8 = 0x0f;
/// `Border::last_insert`'s flag: the last insert continued an ascending stream.
pub(crate) const STREAM: u8 = 0x10;
const _: () = assert!(WIDTH <= NO_SLOT as usize);

/// A border (leaf) node.
///
/// Invariants: slots named by the first `count` nibbles of `permutation` are live, in key
/// order, and *own* their suffix (a slot outside the permutation owns nothing: its suffix
/// moved to a split sibling or was retired); `lowkey` never changes; all entries with one
/// slice live in one border node.
#[repr(C, align(64))]
pub(crate) struct Border {
    pub(crate) header: Header,
    pub(crate) permutation: AtomicU64,
    /// The slice of the first key this node may hold (0 for a layer's leftmost node).
    pub(crate) lowkey: u64,
    /// The largest gap stamp left on this node's key range (`lowkey..highkey`).
    pub(crate) stamp: AtomicU64,
    pub(crate) keylenx: [AtomicU8; WIDTH],
    /// The slot of the last key inserted here (`NO_SLOT` if none since the node was made),
    /// plus `STREAM` if that key went right after the one inserted before it. Written and
    /// read under the node's lock; it fills the byte `keylenx` leaves before `keys`. A
    /// split that continues such a stream keeps the stream's keys together and full
    /// (`insert::split_point`): ten interleaved ascending streams, as TPC-C's districts
    /// appending orders to one tree, would otherwise leave half-empty nodes behind each.
    pub(crate) last_insert: AtomicU8,
    pub(crate) keys: [AtomicU64; WIDTH],
    /// Value bits ([`super::IndexValue`]) or, for `LAYER` entries, the next layer's root.
    pub(crate) values: [AtomicU64; WIDTH],
    /// Per-slot suffix pointers, allocated at the node's first suffix and then fixed until
    /// the node is freed (so the node itself stays at 5 cache lines; most nodes of short
    /// keys never need it, thesis §3.1.2 "adaptive" suffix storage).
    pub(crate) ksuf: AtomicPtr<SuffixBlock>,
    pub(crate) next: AtomicPtr<Border>,
    /// Guarded by the previous sibling's lock.
    pub(crate) prev: AtomicPtr<Border>,
}

// Model atomics (loom's, shuttle's) are larger than the real ones.
#[cfg(not(any(loom, shuttle)))]
const _: () = assert!(WIDTH < 16 && core::mem::size_of::<Border>() <= 5 * 64);
#[cfg(not(any(loom, shuttle)))]
const _: () = assert!(core::mem::size_of::<Interior>() <= 5 * 64);

impl Interior {
    pub(crate) fn alloc(version: NodeVersion) -> *mut Interior {
        Box::into_raw(Box::new(Interior {
            header: Header {
                version,
                parent: AtomicPtr::new(core::ptr::null_mut()),
            },
            nkeys: AtomicU8::new(0),
            keys: core::array::from_fn(|_| AtomicU64::new(0)),
            children: core::array::from_fn(|_| AtomicPtr::new(core::ptr::null_mut())),
        }))
    }

    /// The child index for `slice`: the number of separators `<= slice`. Racy reads; the
    /// caller validates the version before trusting the result.
    #[inline]
    pub(crate) fn child_index(&self, slice: u64) -> usize {
        // Clamped: a torn read of `nkeys` must not index out of bounds.
        let n = (self.nkeys.load(Ordering::Relaxed) as usize).min(WIDTH);
        // Separators are sorted, so the child is the number of them <= `slice`. Counted
        // without an early exit: with random keys an exit branch mispredicts at every level
        // of the descent, which costs more than comparing all of at most 15 keys.
        self.keys[..n]
            .iter()
            .map(|k| usize::from(k.load(Ordering::Relaxed) <= slice))
            .sum()
    }
}

impl Border {
    pub(crate) fn alloc(version: NodeVersion, lowkey: u64, stamp: u64) -> *mut Border {
        Box::into_raw(Box::new(Border {
            header: Header {
                version,
                parent: AtomicPtr::new(core::ptr::null_mut()),
            },
            permutation: AtomicU64::new(Perm::EMPTY.0),
            lowkey,
            stamp: AtomicU64::new(stamp),
            keylenx: core::array::from_fn(|_| AtomicU8::new(0)),
            last_insert: AtomicU8::new(NO_SLOT),
            keys: core::array::from_fn(|_| AtomicU64::new(0)),
            values: core::array::from_fn(|_| AtomicU64::new(0)),
            ksuf: AtomicPtr::new(core::ptr::null_mut()),
            next: AtomicPtr::new(core::ptr::null_mut()),
            prev: AtomicPtr::new(core::ptr::null_mut()),
        }))
    }

    /// A new, empty layer root.
    pub(crate) fn alloc_root(stamp: u64) -> *mut Border {
        Self::alloc(NodeVersion::new(ROOT | LEAF), 0, stamp)
    }

    #[inline]
    pub(crate) fn perm(&self) -> Perm {
        Perm(self.permutation.load(Ordering::Acquire))
    }

    /// Searches the entries named by `perm` for `(slice, ilen)`: `Ok(position)` of the entry
    /// with that slice and length class, or `Err(position)` where it would be inserted.
    /// Racy reads are safe: every field is an atomic and the caller validates.
    #[inline]
    pub(crate) fn search(&self, perm: Perm, slice: u64, ilen: u8) -> Result<usize, usize> {
        // Skip the entries with smaller slices without branching on each (see
        // `child_index`), then settle the few entries that share `slice` in order.
        let count = perm.count();
        let below: usize = (0..count)
            .map(|i| usize::from(self.keys[perm.slot(i)].load(Ordering::Relaxed) < slice))
            .sum();
        for i in below..count {
            let s = perm.slot(i);
            let ks = self.keys[s].load(Ordering::Relaxed);
            if ks < slice {
                continue;
            }
            if ks > slice {
                return Err(i);
            }
            let l = ilen_of(self.keylenx[s].load(Ordering::Relaxed));
            if l == ilen {
                return Ok(i);
            }
            if l > ilen {
                return Err(i);
            }
        }
        Err(perm.count())
    }

    /// Writes a whole entry into slot `s` (the lock must be held and the slot must not be
    /// live in the published permutation, or the node must be marked dirty).
    pub(crate) fn write_slot(&self, s: usize, e: &Entry) {
        self.keys[s].store(e.slice, Ordering::Relaxed);
        self.keylenx[s].store(e.keylenx, Ordering::Relaxed);
        self.values[s].store(e.value, Ordering::Relaxed);
        self.set_suffix(s, e.suffix);
    }

    /// Sets slot `s`'s suffix (the lock must be held), allocating the block first. A slot
    /// whose new entry has no long suffix keeps its old pointer (never read again: its
    /// `keylenx` says where the suffix is); it no longer owns it.
    pub(crate) fn set_suffix(&self, s: usize, suf: Suf) {
        let mut block = self.ksuf.load(Ordering::Relaxed);
        if block.is_null() {
            if matches!(suf, Suf::None | Suf::InValue) {
                return;
            }
            block = Box::into_raw(Box::new(SuffixBlock {
                short: core::array::from_fn(|_| AtomicU64::new(0)),
                long: core::array::from_fn(|_| AtomicPtr::new(core::ptr::null_mut())),
            }));
            // Release: a reader that loads the block pointer (acquire) sees it initialized.
            self.ksuf.store(block, Ordering::Release);
        }
        // SAFETY: a published block lives as long as its node.
        let block = unsafe { &*block };
        match suf {
            Suf::None | Suf::InValue => {}
            Suf::Short { word, .. } => block.short[s].store(word, Ordering::Relaxed),
            Suf::Long(p) => block.long[s].store(p, Ordering::Relaxed),
        }
    }

    /// Slot `s`'s suffix, as `keylenx` says. Racy reads are safe: the block, once published,
    /// lives as long as the node, and long suffix pointers name suffixes not yet reclaimed
    /// while the reader is pinned (a torn combination fails validation).
    #[inline]
    pub(crate) fn suffix(&self, s: usize, keylenx: u8) -> Suf {
        if !has_suffix(keylenx) {
            return Suf::None;
        }
        if keylenx == KSUF_IN_VALUE {
            return Suf::InValue;
        }
        let block = self.ksuf.load(Ordering::Acquire);
        if block.is_null() {
            // Only in a torn read: a slot with a suffix has a block.
            return Suf::Long(core::ptr::null_mut());
        }
        // SAFETY: as above.
        let block = unsafe { &*block };
        if keylenx == KSUF {
            Suf::Long(block.long[s].load(Ordering::Relaxed))
        } else {
            Suf::Short {
                word: block.short[s].load(Ordering::Relaxed),
                len: keylenx - KSUF,
            }
        }
    }

    /// Starts fetching the suffix block, if any, while the node's own lines are searched.
    #[inline(always)]
    pub(crate) fn prefetch_suffixes(&self) {
        let block = self.ksuf.load(Ordering::Relaxed);
        if !block.is_null() {
            prefetch_lines(block.cast(), core::mem::size_of::<SuffixBlock>());
        }
    }

    /// Reads slot `s` (under the lock, or racily with validation).
    pub(crate) fn read_slot(&self, s: usize) -> Entry {
        let keylenx = self.keylenx[s].load(Ordering::Relaxed);
        Entry {
            slice: self.keys[s].load(Ordering::Relaxed),
            keylenx,
            value: self.values[s].load(Ordering::Acquire),
            suffix: self.suffix(s, keylenx),
        }
    }

    /// Prefetches the node's cache lines (thesis §3.1.2: all lines in parallel).
    #[inline(always)]
    pub(crate) fn prefetch(p: *const Border) {
        prefetch_lines(p.cast(), core::mem::size_of::<Border>());
    }
}

/// Prefetches `bytes` from `p` (a node), one line at a time.
#[inline(always)]
pub(crate) fn prefetch_lines(p: *const u8, bytes: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        let mut off = 0;
        while off < bytes {
            // SAFETY: prefetch is a hint that never faults; `p + off` stays within the node
            // allocation (`off < size_of` the node), so the pointer arithmetic is in bounds.
            unsafe {
                core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(
                    p.add(off).cast(),
                );
            }
            off += 64;
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (p, bytes);
    }
}

/// One border entry, copied out of a node.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Entry {
    pub(crate) slice: u64,
    pub(crate) keylenx: u8,
    pub(crate) value: u64,
    pub(crate) suffix: Suf,
}

impl Entry {
    pub(crate) const EMPTY: Entry = Entry {
        slice: 0,
        keylenx: 0,
        value: 0,
        suffix: Suf::None,
    };

    pub(crate) fn has_suffix(&self) -> bool {
        has_suffix(self.keylenx)
    }
}

/// The permutation word: low nibble = live count, nibble `i + 1` = the slot at sorted
/// position `i`; positions `count..15` list the free slots.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct Perm(pub(crate) u64);

impl Perm {
    /// No live entries; free slots 0..15 in order.
    pub(crate) const EMPTY: Perm = {
        let mut w = 0u64;
        let mut i = 0;
        while i < WIDTH {
            w |= (i as u64) << (4 * (i + 1));
            i += 1;
        }
        Perm(w)
    };

    #[inline]
    pub(crate) fn count(self) -> usize {
        (self.0 & 15) as usize
    }

    #[inline]
    pub(crate) fn slot(self, i: usize) -> usize {
        ((self.0 >> (4 * (i + 1))) & 15) as usize
    }

    fn with_slot(self, i: usize, s: usize) -> Perm {
        let sh = 4 * (i + 1);
        Perm((self.0 & !(15u64 << sh)) | ((s as u64) << sh))
    }

    fn with_count(self, c: usize) -> Perm {
        Perm((self.0 & !15) | c as u64)
    }

    /// Makes the first free slot live at position `pos`; returns the new word and the slot.
    pub(crate) fn insert_from_back(self, pos: usize) -> (Perm, usize) {
        let c = self.count();
        assert!(c < WIDTH && pos <= c);
        let s = self.slot(c);
        let mut p = self;
        let mut i = c;
        while i > pos {
            p = p.with_slot(i, self.slot(i - 1));
            i -= 1;
        }
        (p.with_slot(pos, s).with_count(c + 1), s)
    }

    /// Removes the entry at `pos`; its slot becomes the *last* free slot, so it is reused as
    /// late as possible (fewer reader retries).
    pub(crate) fn remove(self, pos: usize) -> Perm {
        let c = self.count();
        assert!(pos < c);
        let s = self.slot(pos);
        let mut p = self;
        for i in pos..WIDTH - 1 {
            p = p.with_slot(i, self.slot(i + 1));
        }
        p.with_slot(WIDTH - 1, s).with_count(c - 1)
    }

    /// A permutation listing `live` slots in order, then the remaining slots.
    pub(crate) fn from_slots(live: &[usize]) -> Perm {
        assert!(live.len() <= WIDTH);
        let mut used = [false; WIDTH];
        let mut p = Perm(0).with_count(live.len());
        for (i, &s) in live.iter().enumerate() {
            assert!(!used[s]);
            used[s] = true;
            p = p.with_slot(i, s);
        }
        let mut i = live.len();
        for (s, u) in used.iter().enumerate() {
            if !u {
                p = p.with_slot(i, s);
                i += 1;
            }
        }
        p
    }

    /// Debug check: the nibbles are a permutation of 0..15.
    pub(crate) fn is_valid(self) -> bool {
        let mut seen = 0u32;
        for i in 0..WIDTH {
            seen |= 1 << self.slot(i);
        }
        seen == (1 << WIDTH) - 1 && self.count() <= WIDTH
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn permutation_ops() {
        let p = Perm::EMPTY;
        assert!(p.is_valid() && p.count() == 0);
        let (p, s0) = p.insert_from_back(0);
        let (p, s1) = p.insert_from_back(0);
        let (p, s2) = p.insert_from_back(1);
        assert_eq!(
            (p.count(), p.slot(0), p.slot(1), p.slot(2)),
            (3, s1, s2, s0)
        );
        let q = p.remove(1);
        assert!(q.is_valid());
        assert_eq!(
            (q.count(), q.slot(0), q.slot(1), q.slot(WIDTH - 1)),
            (2, s1, s0, s2)
        );
        let r = Perm::from_slots(&[4, 2]);
        assert!(r.is_valid() && r.count() == 2 && r.slot(0) == 4 && r.slot(1) == 2);
    }
}
