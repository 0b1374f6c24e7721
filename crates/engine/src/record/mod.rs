//! Records (vMVCC's tuples) and their version chains, with the MVTO read and commit protocol.
//!
//! A record is one key's history: a newest-first chain of immutable versions, `tslast` (the
//! highest timestamp that read or wrote it) and `owner` (the timestamp of the transaction
//! committing to it, if any).
//!
//! The protocol is a Dekker pair on `tslast` and `owner`, both `SeqCst`:
//! - a reader at `T` first raises `tslast` to `T`, then looks at `owner`, and waits while an
//!   *older* transaction owns the record (its version would be visible to `T`);
//! - a committer at `W` first takes `owner`, then reads `tslast`, and aborts if it is above `W`.
//!
//! So for any reader `T` and committer `W < T` of the same record, either the committer sees
//! the read and aborts, or the reader sees the owner, waits, and then reads `W`'s version.
//!
//! **Removal.** A record whose chain is empty (an insert that aborted) or a lone tombstone
//! below the GC watermark says the same as no record at all, so it leaves the index
//! ([`Record::remove_if_empty`], [`Record::prune`]). The remover holds the record
//! ([`OWNER_GC`]), marks it [`OWNER_DEAD`] for good, and then reads `tslast` and folds it
//! into the index's gap stamp as it removes the key: the same Dekker pair as a committer's,
//! so a reader either had its read folded in or sees the record dead and looks the key up
//! again (stamping the gap, or finding a new record). Committers that meet a dead record
//! look the key up again too. The memory is freed once no transaction that could hold a
//! pointer to it is left (`gc.rs`).
//!
//! Here: the record's layout and its read, commit and removal protocol. `version.rs` holds
//! the versions and their allocation, `prune.rs` the garbage collector's side (pruning a
//! chain, moving the newest version inline, freeing), `loom_tests.rs` the models.

use std::alloc::{alloc, dealloc, handle_alloc_error, Layout};
use std::ptr::{self, NonNull};

use crate::gc::{MovedOriginal, Superseded};
use crate::index::RecordPtr;
use crate::sync::{dekker_fence, spin_step, AtomicPtr, AtomicU16, AtomicU32, AtomicU64, Ordering};
use crate::timestamp::GcSnapshot;
use crate::ConflictReason;

mod prune;
mod version;

pub(crate) use version::Version;
use version::VERSION_HEADER;

/// What pruning one record did.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Pruned {
    /// Bytes freed at once (versions unlinked mid-chain are counted when freed later).
    pub(crate) bytes_freed: usize,
    /// Whether the record may have garbage later: versions other than the head remain, or
    /// the head is a tombstone the watermark has not passed yet (it will be removed).
    pub(crate) history_kept: bool,
    /// The record is now dead (a lone tombstone below the watermark): remove its key from
    /// the index, folding in this `tslast`.
    pub(crate) removed: Option<u64>,
}

/// Why a commit could not take a record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Refused {
    /// A conflict: the transaction aborts.
    Conflict(ConflictReason),
    /// The record left the index: look the key up again and take that record instead.
    Removed,
}

impl From<ConflictReason> for Refused {
    fn from(reason: ConflictReason) -> Self {
        Refused::Conflict(reason)
    }
}

/// A read met a record that has left the index: look the key up again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Removed;

/// What [`Record::prune`] found.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Prune {
    /// A committer or another pruner holds the record: try again later.
    Busy,
    /// The record was removed already (by another queue's collection).
    Dead,
    /// Pruned (and maybe removed now: `Pruned::removed`).
    Pruned(Pruned),
}

/// `owner` when nobody is committing.
pub(crate) const OWNER_NONE: u64 = 0;
/// `owner` while the garbage collector prunes the chain. Above every timestamp, so readers
/// never wait for it.
pub(crate) const OWNER_GC: u64 = u64::MAX;
/// `owner` while a precision-locking committer holds the record but has not drawn its commit
/// timestamp yet. Snapshot readers wait for the stamp: the commit may land below them.
pub(crate) const OWNER_UNSTAMPED: u64 = u64::MAX - 1;
/// `owner` of a record that has left the index, for good. Above every timestamp, so readers
/// never wait for it; a read or commit that meets it looks the key up again.
pub(crate) const OWNER_DEAD: u64 = u64::MAX - 2;

/// One key's record. Lives while the index holds it and, after its removal, until every
/// transaction that might have found it has ended and every index operation that might
/// still compare against its key has too (`gc.rs`): a transaction may keep `&Record`s for
/// its whole life.
///
/// The record's copy of its key is the only one of a long key's tail: Masstree compares a
/// suffix past its slices against it (`IndexValue::HOLDS_KEY` in `index.rs`) instead of
/// keeping its own, which for a 100-byte sorted-set member saved an allocation of about 112
/// bytes per record (BENCHMARKS.md, "Long keys stored once").
///
/// Layout (Silo keeps the value in the record; a multi-version record cannot overwrite it
/// in place, so it keeps one *inline slot* for a version). One allocation:
///
/// ```text
///  0  owner | tslast | head            the protocol words a read touches first
/// 24  lock2pl | table | queued | key_len | inline_cap | inline_free
/// 48  inline slot: room for one Version (24-byte header + bytes), `inline_cap` bytes
///     the key, `key_len` bytes
/// ```
///
/// A read goes index → record → the newest version, which after a load or the first write
/// of a key is the inline one: [`Record::read`] starts fetching the slot's lines together
/// with the record's own, where a separately allocated version costs a second dependent
/// miss. The slot is sized exactly for the key's first value: an 8-byte key and a 100-byte
/// value make a 180-byte block, an 11-byte key (`key:0000001`) 183, both from mimalloc's
/// 192-byte class (which holds at most 184 bytes as built here: measured, 188 bytes go to
/// the 224-byte class), where a 64-byte record, a boxed key and a 128-byte version took 208
/// in three blocks. The slot is reused: an update while the slot holds the newest version goes
/// to the heap, and once the GC frees the superseded inline version (the same rule as for
/// any version) the next update that fits takes the slot again. Values above
/// [`INLINE_VALUE_MAX`] get no slot.
///
/// The record is not cache-line aligned: a 64-byte alignment would push the common block
/// sizes into a larger allocator class (measured with mimalloc: 188 bytes at 64-byte
/// alignment take 256), and every line of the block is fetched at once anyway.
pub(crate) struct Record {
    /// Invariant: [`OWNER_NONE`], [`OWNER_GC`], [`OWNER_UNSTAMPED`], the timestamp of the
    /// one transaction whose commit holds this record, or, from removal on, [`OWNER_DEAD`].
    owner: AtomicU64,
    /// Invariant: >= every timestamp that has read this record or installed a version in it,
    /// and >= the largest gap stamp its key inherited when it was inserted.
    tslast: AtomicU64,
    /// Invariant: versions in strictly decreasing timestamp order; null when none.
    head: AtomicPtr<Version>,
    /// Two-phase locking only (`two_pl.rs`): [`LOCK_WRITER`] or the number of shared holders.
    /// The other protocols never touch it. A removed record keeps [`LOCK_WRITER`] for good.
    lock2pl: AtomicU64,
    /// The table whose index holds the record: removal takes the key out of it.
    table: u32,
    /// How many GC queue entries, and inline versions in a limbo, name this record. A
    /// removed record is freed only at zero: until then some queue may still look at it
    /// (and drop its entry on seeing it dead), or free a version that lives inside it.
    queued: AtomicU32,
    /// Bytes of the key, which follows the inline slot.
    key_len: u32,
    /// Bytes of the inline slot that follows the record (0: none). Fixed at allocation.
    inline_cap: u16,
    /// 1 while the inline slot holds no version; a committer takes it by swapping in 0, and
    /// freeing the version in it (`Version::free`) stores 1 again. Always 0 without a slot.
    inline_free: AtomicU16,
}

#[cfg(not(loom))]
const _: () = assert!(std::mem::size_of::<Record>() == 48);

/// The record's alignment (its words'); the inline slot after the 48-byte header keeps it.
const RECORD_ALIGN: usize = std::mem::align_of::<Record>();
/// Values up to this many bytes get an inline slot; larger ones are not worth the space a
/// later, smaller value would leave unused.
pub(crate) const INLINE_VALUE_MAX: usize = 512;

/// `lock2pl` held exclusively.
pub(crate) const LOCK_WRITER: u64 = 1 << 63;

impl Record {
    /// The allocation of a record with `inline_cap` bytes of inline slot and a key of
    /// `key_len` bytes.
    fn layout(inline_cap: usize, key_len: usize) -> Layout {
        // Cannot fail: the slot is at most a few hundred bytes and keys are bounded by
        // `SIZE_LIMIT_CEILING`, far below `isize::MAX`.
        Layout::from_size_align(
            std::mem::size_of::<Record>() + inline_cap + key_len,
            RECORD_ALIGN,
        )
        .expect("record layout")
    }

    /// A record of `table` for `key` with no versions, whose `tslast` starts at
    /// `gap_stamp`: the largest timestamp of any range read (or absent-key read) that
    /// covered this key before it existed. `first` is the value about to be written, which
    /// sizes the inline slot.
    pub(crate) fn alloc(
        table: u32,
        key: &[u8],
        gap_stamp: u64,
        first: Option<&[u8]>,
    ) -> NonNull<Record> {
        assert!(key.len() <= crate::options::SIZE_LIMIT_CEILING);
        let inline_cap = match first {
            // Exactly the version's size: a few bytes more can push the block into the
            // allocator's next class (see the layout note on `Record`).
            Some(v) if v.len() <= INLINE_VALUE_MAX => VERSION_HEADER + v.len(),
            _ => 0,
        };
        let layout = Self::layout(inline_cap, key.len());
        // SAFETY: non-zero size (the record is 48 bytes).
        let raw = unsafe { alloc(layout) }.cast::<Record>();
        let Some(r) = NonNull::new(raw) else {
            handle_alloc_error(layout)
        };
        // SAFETY: a fresh allocation of `layout`: the header, then `inline_cap` bytes left
        // uninitialized until a version is written there (`Version::new_in`), then the key.
        unsafe {
            r.as_ptr().write(Record {
                owner: AtomicU64::new(OWNER_NONE),
                tslast: AtomicU64::new(gap_stamp),
                head: AtomicPtr::new(ptr::null_mut()),
                lock2pl: AtomicU64::new(0),
                table,
                queued: AtomicU32::new(0),
                key_len: key.len() as u32,
                inline_cap: inline_cap as u16,
                inline_free: AtomicU16::new(u16::from(inline_cap > 0)),
            });
            let key_at = raw
                .cast::<u8>()
                .add(std::mem::size_of::<Record>() + inline_cap);
            ptr::copy_nonoverlapping(key.as_ptr(), key_at, key.len());
        }
        r
    }

    /// Frees a record made by [`Record::alloc`] (its versions must be freed first).
    ///
    /// # Safety
    /// `r` came from `Record::alloc`, nothing references it any more, and it is freed once.
    pub(crate) unsafe fn dealloc(r: NonNull<Record>) {
        // SAFETY: live until here; the slot holds no live version (freed first).
        let rec = unsafe { r.as_ref() };
        let layout = Self::layout(rec.inline_cap as usize, rec.key_len as usize);
        // SAFETY: by contract (the header's atomics are dropped, which matters under loom).
        unsafe {
            ptr::drop_in_place(r.as_ptr());
            dealloc(r.as_ptr().cast(), layout);
        }
    }

    /// Where the inline slot of the record at `this` is: right after the `Record`. Derived
    /// from the allocation's pointer, whose provenance covers the slot (a `&Record`'s
    /// covers only the `Record`).
    fn inline_slot(this: NonNull<Record>) -> NonNull<Version> {
        // SAFETY: just past a live record, inside (or at the end of) its allocation, so not
        // null; only dereferenced when `inline_cap` says the slot exists.
        unsafe { this.cast::<u8>().add(std::mem::size_of::<Record>()).cast() }
    }

    /// The key of the record at `this`, which follows its inline slot (reached from the
    /// allocation's pointer, as the slot is).
    ///
    /// # Safety
    /// `this` is a live record from [`Record::alloc`], and stays so for `'a`.
    pub(crate) unsafe fn key_at<'a>(this: NonNull<Record>) -> &'a [u8] {
        // SAFETY: live by contract.
        let r = unsafe { this.as_ref() };
        let at = std::mem::size_of::<Record>() + r.inline_cap as usize;
        // SAFETY: `alloc` copied `key_len` bytes there, inside the allocation, and they never
        // change.
        unsafe {
            std::slice::from_raw_parts(this.cast::<u8>().as_ptr().add(at), r.key_len as usize)
        }
    }

    /// Starts fetching the inline slot's first lines, which a read of the newest
    /// version needs right after the record's own: the two misses overlap instead of
    /// following each other. A hint only: it never faults, even past the allocation.
    #[inline]
    pub(crate) fn prefetch_inline(&self) {
        #[cfg(all(target_arch = "x86_64", not(loom)))]
        {
            let slot = (self as *const Record).cast::<i8>();
            // SAFETY: prefetching is a hint that never faults, whatever the address.
            unsafe {
                use core::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
                // Every line under the block's first 192 bytes (the header, and the slot of
                // a value up to 120 bytes), wherever in a line the record starts; the
                // caller is loading the first line already.
                _mm_prefetch::<_MM_HINT_T0>(slot.wrapping_add(64));
                _mm_prefetch::<_MM_HINT_T0>(slot.wrapping_add(128));
                _mm_prefetch::<_MM_HINT_T0>(slot.wrapping_add(191));
            }
        }
    }

    /// Prefetches the lines a prune reads first: the header and the inline slot. For a
    /// collection that walks its queue a few records ahead (`gc.rs`).
    #[inline]
    pub(crate) fn prefetch_for_prune(&self) {
        #[cfg(all(target_arch = "x86_64", not(loom)))]
        // SAFETY: prefetching is a hint that never faults, whatever the address.
        unsafe {
            use core::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
            _mm_prefetch::<_MM_HINT_T0>((self as *const Record).cast::<i8>());
        }
        self.prefetch_inline();
    }

    /// Prefetches the head version a prune reads after the header. Only the pointer is
    /// loaded (the record is live: the caller's queue holds it), never the version, which
    /// another site's pruner may free meanwhile: a prefetch of a freed block is harmless.
    #[inline]
    pub(crate) fn prefetch_head(&self) {
        #[cfg(all(target_arch = "x86_64", not(loom)))]
        {
            let head = self.head.load(Ordering::Relaxed);
            // SAFETY: prefetching is a hint that never faults, whatever the address.
            unsafe {
                use core::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
                _mm_prefetch::<_MM_HINT_T0>(head.cast::<i8>());
            }
        }
    }

    pub(crate) fn table(&self) -> u32 {
        self.table
    }

    /// Whether the record has left the index (it never comes back).
    pub(crate) fn is_removed(&self) -> bool {
        self.owner.load(Ordering::SeqCst) == OWNER_DEAD
    }

    /// A limbo batch took an inline version of this record: the record stays allocated
    /// until the batch frees it (and `unqueue`s).
    pub(crate) fn queue_inline(&self) {
        self.queued.fetch_add(1, Ordering::Relaxed);
    }

    /// How many queue entries and limbo versions hold the record (the models check it).
    #[cfg(all(test, loom))]
    pub(crate) fn queued_count(&self) -> u32 {
        self.queued.load(Ordering::SeqCst)
    }

    /// A GC queue dropped an entry naming this record (one made by `install`), or a limbo
    /// batch freed an inline version of it.
    pub(crate) fn unqueue(&self) {
        // Release: this queue's last look at the record happens before a free that sees zero.
        let before = self.queued.fetch_sub(1, Ordering::Release);
        debug_assert!(before > 0, "GC queue entries miscounted");
    }

    /// Whether no GC queue names the record any more (a removed record may then be freed).
    pub(crate) fn is_unqueued(&self) -> bool {
        self.queued.load(Ordering::Acquire) == 0
    }

    /// Removes an empty record (an insert that aborted) if nobody holds it: marks it dead and
    /// returns its `tslast`, for the caller to fold into the index as it removes the key.
    /// `None` if it has a version or someone holds it (who will then install, or remove it
    /// in turn when it aborts).
    pub(crate) fn remove_if_empty(&self) -> Option<u64> {
        if !self.head.load(Ordering::Acquire).is_null() {
            return None;
        }
        self.owner
            .compare_exchange(OWNER_NONE, OWNER_GC, Ordering::Acquire, Ordering::Relaxed)
            .ok()?;
        if !self.head.load(Ordering::Acquire).is_null() {
            self.owner.store(OWNER_NONE, Ordering::Release);
            return None;
        }
        let stamp = self.die();
        if stamp.is_none() {
            self.owner.store(OWNER_NONE, Ordering::Release);
        }
        stamp
    }

    /// With [`OWNER_GC`] held: marks the record dead and returns `tslast` to fold into the
    /// index, or `None` (still held) if a two-phase lock is held on it.
    fn die(&self) -> Option<u64> {
        debug_assert_eq!(self.owner.load(Ordering::Relaxed), OWNER_GC);
        // Two-phase locking: a holder's lock must keep protecting the key, so a locked
        // record stays; taking the writer bit for good fails every later attempt.
        self.lock2pl
            .compare_exchange(0, LOCK_WRITER, Ordering::Acquire, Ordering::Relaxed)
            .ok()?;
        // The committer's half of the Dekker pair with readers (module docs): a reader that
        // raised `tslast` before this store is seen below; a later one sees the record dead.
        self.owner.store(OWNER_DEAD, Ordering::SeqCst);
        dekker_fence();
        Some(self.tslast.load(Ordering::SeqCst))
    }

    /// Two-phase locking: takes a shared lock if no writer holds one.
    pub(crate) fn try_lock_shared(&self) -> bool {
        let mut v = self.lock2pl.load(Ordering::Relaxed);
        loop {
            if v & LOCK_WRITER != 0 {
                return false;
            }
            match self
                .lock2pl
                .compare_exchange_weak(v, v + 1, Ordering::Acquire, Ordering::Relaxed)
            {
                Ok(_) => return true,
                Err(now) => v = now,
            }
        }
    }

    /// Two-phase locking: takes the exclusive lock if nobody else holds any (`upgrade`: the
    /// caller holds one shared lock, which this converts).
    pub(crate) fn try_lock_exclusive(&self, upgrade: bool) -> bool {
        let expected = u64::from(upgrade);
        self.lock2pl
            .compare_exchange(expected, LOCK_WRITER, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }

    /// Releases a two-phase lock taken with `try_lock_shared` or `try_lock_exclusive`.
    pub(crate) fn unlock_2pl(&self, exclusive: bool) {
        if exclusive {
            debug_assert_eq!(self.lock2pl.load(Ordering::Relaxed), LOCK_WRITER);
            self.lock2pl.store(0, Ordering::Release);
        } else {
            let before = self.lock2pl.fetch_sub(1, Ordering::Release);
            debug_assert!(before & LOCK_WRITER == 0 && before > 0);
        }
    }

    /// The highest timestamp that has read this record or installed a version in it.
    pub(crate) fn read_stamp(&self) -> u64 {
        self.tslast.load(Ordering::SeqCst)
    }

    /// Records a read at `ts` without reading (a read answered outside the engine, from a
    /// version it keeps: `Db::raise_read_stamp`). The reader's half of the Dekker pair, as
    /// in [`Record::read`]: `Err(Removed)` if the record died, perhaps without this stamp
    /// folded into the gap, so the caller looks the key up again.
    pub(crate) fn raise_read_stamp(&self, ts: u64) -> Result<(), Removed> {
        self.tslast.fetch_max(ts, Ordering::SeqCst);
        dekker_fence();
        if self.owner.load(Ordering::SeqCst) == OWNER_DEAD {
            return Err(Removed);
        }
        Ok(())
    }

    /// The newest version (two-phase locking reads the latest committed state, under a
    /// lock that keeps it the newest).
    pub(crate) fn newest(&self) -> Option<&Version> {
        // SAFETY: the head is never freed while it is the head; the caller's lock keeps
        // committers from superseding it, so the GC never frees it while held.
        unsafe { self.head.load(Ordering::Acquire).as_ref() }
    }

    /// Takes the commit word for an install at `ts` under an exclusive two-phase lock (or
    /// during recovery), waiting only for the GC, which holds it briefly. The record cannot
    /// be removed meanwhile: removal needs the two-phase lock free, and recovery runs before
    /// any collection.
    pub(crate) fn lock_for_install(&self, ts: u64) {
        let mut step = 0;
        while let Err(owner) =
            self.owner
                .compare_exchange(OWNER_NONE, ts, Ordering::SeqCst, Ordering::Relaxed)
        {
            assert_ne!(owner, OWNER_DEAD, "install into a removed record");
            spin_step(&mut step);
        }
    }

    /// MVTO read at `ts`: records the read in `tslast`, waits out an older in-flight commit,
    /// and returns the newest version older than `ts`. `walk` is the reading transaction's
    /// walk counter (see `Timestamps::walk_word`); only that transaction writes it.
    ///
    /// The returned reference stays valid while the transaction at `ts` is registered active:
    /// pruning keeps every version some active or future timestamp can see. `Err(Removed)`:
    /// the record left the index, perhaps without this read folded into the gap stamp, so
    /// the caller looks the key up again.
    pub(crate) fn read(&self, ts: u64, walk: &AtomicU64) -> Result<Option<&Version>, Removed> {
        self.prefetch_inline();
        // Announce the walk before loading `head`: a pruner that unlinks a version and then
        // finds this counter even knows this walk cannot reach it.
        let walk_seq = walk.load(Ordering::Relaxed);
        debug_assert_eq!(walk_seq % 2, 0, "nested walks on one transaction");
        walk.store(walk_seq + 1, Ordering::SeqCst);
        // Announce the read before looking at `owner` (the Dekker pair above). Skipping the
        // write when `tslast` is already high enough is safe: a committer that takes `owner`
        // later reads a `tslast` at least this large.
        if self.tslast.load(Ordering::SeqCst) < ts {
            self.tslast.fetch_max(ts, Ordering::SeqCst);
        }
        dekker_fence();
        let mut step = 0;
        loop {
            let owner = self.owner.load(Ordering::SeqCst);
            // OWNER_GC is above every timestamp, so pruning never delays a reader.
            if owner == OWNER_NONE || owner > ts {
                if owner == OWNER_DEAD {
                    walk.store(walk_seq + 2, Ordering::Release);
                    return Err(Removed);
                }
                break;
            }
            debug_assert_ne!(owner, ts, "a transaction reads while committing");
            spin_step(&mut step);
        }
        let found = self.newest_below(ts);
        walk.store(walk_seq + 2, Ordering::Release);
        Ok(found)
    }

    /// The newest version older than `ts`, walking the chain from `head`. The caller has
    /// announced the walk (its walk counter is odd) and ends it afterwards.
    #[inline]
    fn newest_below(&self, ts: u64) -> Option<&Version> {
        // The chain loads are `SeqCst` (a plain load on x86-64, like `Acquire`): with the
        // walk announcement they follow the pruner's `SeqCst` fence in the single total
        // order whenever the pruner missed the announcement, so they see its unlinks
        // (C++20 [atomics.order]: an SC load after an SC fence sees what preceded the fence).
        let mut v = self.head.load(Ordering::SeqCst);
        // SAFETY: a version on the chain is freed only when it is unreachable from `head` and
        // no walk announced before its unlink is still running; the one returned is visible
        // to `ts`, so pruning keeps it while `ts` is active.
        while let Some(version) = unsafe { v.as_ref() } {
            #[cfg(loom)]
            assert!(
                !version.freed.load(Ordering::SeqCst),
                "walked onto a freed version"
            );
            if version.ts() < ts {
                return Some(version);
            }
            v = version.next.load(Ordering::SeqCst);
        }
        None
    }

    /// A snapshot read at `ts` (snapshot isolation and precision locking): the newest
    /// version older than `ts`, leaving no trace in shared memory (no `tslast`). Waits while
    /// the record is held by a committer whose versions may land below `ts`: an older
    /// stamped one, or one not stamped yet (it stamps right after taking its locks).
    ///
    /// A removed record needs no second look: it was found while in the index, so the
    /// reader began before the removal, and any commit on a record inserted for the key
    /// since draws its timestamp later, above `ts`.
    pub(crate) fn read_snapshot(&self, ts: u64, walk: &AtomicU64) -> Option<&Version> {
        self.prefetch_inline();
        let walk_seq = walk.load(Ordering::Relaxed);
        debug_assert_eq!(walk_seq % 2, 0, "nested walks on one transaction");
        walk.store(walk_seq + 1, Ordering::SeqCst);
        let mut step = 0;
        loop {
            let owner = self.owner.load(Ordering::SeqCst);
            if owner == OWNER_NONE || (owner > ts && owner != OWNER_UNSTAMPED) {
                break;
            }
            spin_step(&mut step);
        }
        let found = self.newest_below(ts);
        walk.store(walk_seq + 2, Ordering::Release);
        found
    }

    /// Takes the record for a precision-locking commit of a transaction that started at
    /// `start`, without waiting: fails at once if another transaction holds it (its write is
    /// uncommitted) or committed a version after `start` (first committer wins). Leaves the
    /// record [`OWNER_UNSTAMPED`] until [`Record::stamp`].
    pub(crate) fn lock_no_wait(&self, start: u64) -> Result<(), Refused> {
        let mut step = 0;
        loop {
            match self.owner.compare_exchange(
                OWNER_NONE,
                OWNER_UNSTAMPED,
                Ordering::SeqCst,
                Ordering::SeqCst,
            ) {
                Ok(_) => break,
                // Pruning is brief and not a transaction: wait it out.
                Err(OWNER_GC) => spin_step(&mut step),
                Err(OWNER_DEAD) => return Err(Refused::Removed),
                Err(_) => return Err(ConflictReason::WriteWrite.into()),
            }
        }
        let head = self.head.load(Ordering::Acquire);
        // SAFETY: the head is never freed while it is the head, and we hold the record.
        if unsafe { head.as_ref() }.is_some_and(|v| v.ts > start) {
            self.unlock(OWNER_UNSTAMPED);
            return Err(ConflictReason::WriteWrite.into());
        }
        Ok(())
    }

    /// Replaces [`OWNER_UNSTAMPED`] with the commit timestamp: snapshot readers above `cts`
    /// now wait for the install, readers below it stop waiting.
    pub(crate) fn stamp(&self, cts: u64) {
        debug_assert_eq!(self.owner.load(Ordering::Relaxed), OWNER_UNSTAMPED);
        self.owner.store(cts, Ordering::SeqCst);
    }

    /// Takes the record for a commit at `ts`, waiting for an older committer or the GC to
    /// finish, and checks that no younger transaction read or wrote it.
    pub(crate) fn lock_for_commit(&self, ts: u64) -> Result<(), Refused> {
        let mut step = 0;
        loop {
            match self
                .owner
                .compare_exchange(OWNER_NONE, ts, Ordering::SeqCst, Ordering::SeqCst)
            {
                Ok(_) => break,
                Err(OWNER_DEAD) => return Err(Refused::Removed),
                // A younger owner will install a version above us: we would abort anyway.
                Err(owner) if owner != OWNER_GC && owner > ts => {
                    return Err(ConflictReason::WrittenByYounger.into())
                }
                // An older owner (or the GC) finishes without waiting on anything: waits only
                // point to older transactions, so they cannot form a cycle.
                Err(_) => spin_step(&mut step),
            }
        }
        dekker_fence();
        if self.tslast.load(Ordering::SeqCst) > ts {
            self.unlock(ts);
            return Err(ConflictReason::ReadByYounger.into());
        }
        Ok(())
    }

    /// Publishes `version` as the newest and raises `tslast` to its timestamp. Returns
    /// `Some` if the record now needs the GC (it superseded an older version, which the
    /// result names, or holds a tombstone, which the GC removes once no reader needs it);
    /// the caller then queues it, and this counts the entry. Caller holds the record
    /// (`lock_for_commit`).
    pub(crate) fn install(&self, version: NonNull<Version>) -> Option<Superseded> {
        // SAFETY: `version` is a fresh, unpublished allocation owned by the committer.
        let ts = unsafe { version.as_ref() }.ts;
        assert_eq!(
            self.owner.load(Ordering::Relaxed),
            ts,
            "install without the lock"
        );
        let old = self.head.load(Ordering::Relaxed);
        // SAFETY: `old` is null or the live head; nobody frees the head.
        if let Some(old_version) = unsafe { old.as_ref() } {
            assert!(
                old_version.ts < ts,
                "versions out of order: {} >= {ts}",
                old_version.ts
            );
        }
        // SAFETY: as above, `version` is still private to this thread.
        unsafe { version.as_ref() }
            .next
            .store(old, Ordering::Relaxed);
        self.head.store(version.as_ptr(), Ordering::Release);
        self.tslast.fetch_max(ts, Ordering::SeqCst);
        // SAFETY: `version` is now the head, which nobody frees.
        let tombstone = unsafe { version.as_ref() }.tombstone;
        // SAFETY: `old` as above: still live (only the GC frees, and we hold the record).
        let needs_gc = match unsafe { old.as_ref() } {
            Some(old_version) => Some(Superseded {
                ts: old_version.ts,
                by: ts,
            }),
            None if tombstone => Some(Superseded::UNKNOWN),
            None => None,
        };
        if needs_gc.is_some() {
            self.queued.fetch_add(1, Ordering::Relaxed);
        }
        needs_gc
    }

    /// [`Fault::StaleInstall`](crate::Fault): takes the record at `ts` ignoring younger
    /// readers and writers, and installs `version` in timestamp order, below newer versions.
    pub(crate) fn install_stale(
        &self,
        version: NonNull<Version>,
    ) -> Result<Option<Superseded>, Removed> {
        // SAFETY: `version` is a fresh, unpublished allocation owned by the committer.
        let ts = unsafe { version.as_ref() }.ts;
        let mut step = 0;
        while let Err(owner) =
            self.owner
                .compare_exchange(OWNER_NONE, ts, Ordering::SeqCst, Ordering::Relaxed)
        {
            if owner == OWNER_DEAD {
                return Err(Removed);
            }
            spin_step(&mut step);
        }
        // SAFETY: we hold the record; chain nodes are live while it is held (no pruning).
        let head = unsafe { self.head.load(Ordering::Acquire).as_ref() };
        let needs_gc = match head {
            Some(h) if h.ts > ts => {
                let mut above = h;
                // SAFETY: as above.
                while let Some(next) = unsafe { above.next.load(Ordering::Acquire).as_ref() } {
                    if next.ts < ts {
                        break;
                    }
                    above = next;
                }
                // SAFETY: still private to this thread.
                let v = unsafe { version.as_ref() };
                v.next
                    .store(above.next.load(Ordering::Acquire), Ordering::Relaxed);
                above.next.store(version.as_ptr(), Ordering::Release);
                self.tslast.fetch_max(ts, Ordering::SeqCst);
                self.queued.fetch_add(1, Ordering::Relaxed);
                Some(Superseded::UNKNOWN)
            }
            _ => {
                self.owner.store(ts, Ordering::SeqCst);
                return Ok(self.install(version)).inspect(|_| self.unlock(ts));
            }
        };
        self.unlock(ts);
        Ok(needs_gc)
    }

    /// Takes the commit word to install a replicated write at `ts`, waiting out the GC and
    /// readers' rollbacks; `Removed` if the record died meanwhile (look the key up again).
    pub(crate) fn lock_for_replay(&self, ts: u64) -> Result<(), Removed> {
        let mut step = 0;
        while let Err(owner) =
            self.owner
                .compare_exchange(OWNER_NONE, ts, Ordering::SeqCst, Ordering::Relaxed)
        {
            if owner == OWNER_DEAD {
                return Err(Removed);
            }
            spin_step(&mut step);
        }
        Ok(())
    }

    /// Unlinks the version written at exactly `ts` onto `unlinked`, wherever it is in the
    /// chain (an undo record names it: [`crate::Db::rollback_versions`]); nothing if there
    /// is none. Returns whether the record is left empty. `Removed` if it is dead (its
    /// last version was a tombstone below the GC watermark, never one a rollback names).
    pub(crate) fn rollback_version(
        &self,
        ts: u64,
        unlinked: &mut Vec<NonNull<Version>>,
    ) -> Result<bool, Removed> {
        let mut step = 0;
        loop {
            match self.owner.compare_exchange(
                OWNER_NONE,
                OWNER_GC,
                Ordering::Acquire,
                Ordering::Relaxed,
            ) {
                Ok(_) => break,
                Err(OWNER_DEAD) => return Err(Removed),
                Err(_) => spin_step(&mut step),
            }
        }
        // The link that points at `cur`: the head, then each version's `next`.
        let mut link = &self.head;
        let mut cur = link.load(Ordering::Acquire);
        // SAFETY: holding OWNER_GC excludes committers and pruners, so every version on the
        // chain is live; versions are in decreasing `ts` order, so the walk stops below `ts`.
        while let Some(v) = unsafe { cur.as_ref() } {
            if v.ts < ts {
                break;
            }
            if v.ts == ts {
                // Readers standing on it still find their way on: its own `next` is kept.
                link.store(v.next.load(Ordering::Acquire), Ordering::Release);
                // SAFETY: `cur` is non-null (just dereferenced).
                unlinked.push(unsafe { NonNull::new_unchecked(cur) });
                break;
            }
            link = &v.next;
            cur = link.load(Ordering::Acquire);
        }
        let empty = self.head.load(Ordering::Acquire).is_null();
        self.owner.store(OWNER_NONE, Ordering::Release);
        Ok(empty)
    }

    /// Releases the record after `lock_for_commit` at `ts`.
    pub(crate) fn unlock(&self, ts: u64) {
        debug_assert_eq!(self.owner.load(Ordering::Relaxed), ts);
        self.owner.store(OWNER_NONE, Ordering::Release);
    }
}

#[cfg(all(test, loom))]
pub(crate) mod loom_tests;
