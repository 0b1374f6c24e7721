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

use std::alloc::{alloc, dealloc, handle_alloc_error, Layout};
use std::ptr::{self, NonNull};

use crate::sync::{dekker_fence, spin_step, AtomicPtr, AtomicU32, AtomicU64, Ordering};
use crate::timestamp::GcSnapshot;
use crate::ConflictReason;

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
/// transaction that might have found it has ended (`gc.rs`): a transaction may keep
/// `&Record`s for its whole life.
///
/// Layout: the three protocol words share the first cache line with the key pointer, so a
/// read touches one line of the record (plus the version it returns). The whole record is
/// that one line.
#[repr(C, align(64))]
pub(crate) struct Record {
    /// Invariant: [`OWNER_NONE`], [`OWNER_GC`], [`OWNER_UNSTAMPED`], the timestamp of the
    /// one transaction whose commit holds this record, or, from removal on, [`OWNER_DEAD`].
    owner: AtomicU64,
    /// Invariant: >= every timestamp that has read this record or installed a version in it,
    /// and >= the largest gap stamp its key inherited when it was inserted.
    tslast: AtomicU64,
    /// Invariant: versions in strictly decreasing timestamp order; null when none.
    head: AtomicPtr<Version>,
    key: Box<[u8]>,
    /// Two-phase locking only (`two_pl.rs`): [`LOCK_WRITER`] or the number of shared holders.
    /// Fills the first cache line's spare word, so the other protocols pay nothing. A removed
    /// record keeps [`LOCK_WRITER`] for good.
    lock2pl: AtomicU64,
    /// The table whose index holds the record: removal takes the key out of it.
    table: u32,
    /// How many GC queue entries name this record. A removed record is freed only at zero:
    /// until then some queue may still look at it (and drop its entry on seeing it dead).
    queued: AtomicU32,
}

#[cfg(not(loom))]
const _: () = assert!(std::mem::size_of::<Record>() == 64);

/// `lock2pl` held exclusively.
pub(crate) const LOCK_WRITER: u64 = 1 << 63;

/// One immutable value (or tombstone) of a record, followed in memory by its bytes.
#[repr(C)]
pub(crate) struct Version {
    /// Timestamp of the transaction that wrote it.
    ts: u64,
    /// The next older version. Cut (set null) only by pruning, under `OWNER_GC`.
    next: AtomicPtr<Version>,
    len: u32,
    tombstone: bool,
    /// Under loom, `free` marks versions instead of releasing them, and walks assert they
    /// never step on one: the model's use-after-free check.
    #[cfg(loom)]
    freed: crate::sync::AtomicBool,
}

const VERSION_HEADER: usize = std::mem::size_of::<Version>();
#[cfg(not(loom))]
const _: () = assert!(VERSION_HEADER == 24);

impl Version {
    fn layout(len: usize) -> Layout {
        // Cannot fail: `len` is bounded by `SIZE_LIMIT_CEILING`, far below `isize::MAX`.
        Layout::from_size_align(VERSION_HEADER + len, std::mem::align_of::<Version>())
            .expect("version layout")
    }

    /// Allocates a version of `value` (`None` for a tombstone) at `ts`, not yet linked.
    pub(crate) fn new(ts: u64, value: Option<&[u8]>) -> NonNull<Version> {
        let bytes = value.unwrap_or(&[]);
        assert!(bytes.len() <= crate::options::SIZE_LIMIT_CEILING);
        let layout = Self::layout(bytes.len());
        // SAFETY: `layout` has non-zero size (the header is 24 bytes).
        let raw = unsafe { alloc(layout) }.cast::<Version>();
        let Some(v) = NonNull::new(raw) else {
            handle_alloc_error(layout)
        };
        // SAFETY: `v` points to a fresh allocation of `layout`, large enough for the header
        // followed by `bytes.len()` bytes; nothing else refers to it yet.
        unsafe {
            v.as_ptr().write(Version {
                ts,
                next: AtomicPtr::new(ptr::null_mut()),
                len: bytes.len() as u32,
                tombstone: value.is_none(),
                #[cfg(loom)]
                freed: crate::sync::AtomicBool::new(false),
            });
            let data = v.as_ptr().cast::<u8>().add(VERSION_HEADER);
            ptr::copy_nonoverlapping(bytes.as_ptr(), data, bytes.len());
        }
        v
    }

    /// Sets the timestamp of a version made before its commit timestamp was known.
    ///
    /// # Safety
    /// `v` came from `Version::new` and is not published yet (only its maker sees it).
    pub(crate) unsafe fn set_ts(v: NonNull<Version>, ts: u64) {
        // SAFETY: unpublished, so this thread has the only access (caller).
        unsafe { (*v.as_ptr()).ts = ts };
    }

    /// Frees a version allocated by [`Version::new`].
    ///
    /// # Safety
    /// `v` came from `Version::new`, is not reachable by any reader, and is freed once.
    pub(crate) unsafe fn free(v: NonNull<Version>) {
        #[cfg(loom)]
        {
            // SAFETY: as below; under loom the memory is leaked, only marked.
            let was = unsafe { v.as_ref() }.freed.swap(true, Ordering::SeqCst);
            assert!(!was, "version freed twice");
            return;
        }
        #[allow(unreachable_code)]
        // SAFETY: the caller guarantees `v` is a live version; its header gives the layout.
        let layout = Self::layout(unsafe { v.as_ref() }.len as usize);
        // SAFETY: allocated by `alloc` with this layout (see `new`), freed once by contract.
        unsafe { dealloc(v.as_ptr().cast(), layout) }
    }

    pub(crate) fn ts(&self) -> u64 {
        self.ts
    }

    /// The value, or `None` for a tombstone.
    pub(crate) fn value(&self) -> Option<&[u8]> {
        if self.tombstone {
            return None;
        }
        // SAFETY: `new` allocated `len` bytes right after the header and initialized them;
        // versions are immutable once published.
        Some(unsafe {
            std::slice::from_raw_parts(
                (self as *const Version).cast::<u8>().add(VERSION_HEADER),
                self.len as usize,
            )
        })
    }

    /// Heap bytes this version occupies.
    pub(crate) fn footprint(&self) -> usize {
        VERSION_HEADER + self.len as usize
    }
}

impl Record {
    /// A record of `table` with no versions whose `tslast` starts at `gap_stamp`: the
    /// largest timestamp of any range read (or absent-key read) that covered this key before
    /// it existed.
    pub(crate) fn new(table: u32, key: &[u8], gap_stamp: u64) -> Box<Record> {
        Box::new(Record {
            owner: AtomicU64::new(OWNER_NONE),
            tslast: AtomicU64::new(gap_stamp),
            head: AtomicPtr::new(ptr::null_mut()),
            key: key.into(),
            lock2pl: AtomicU64::new(0),
            table,
            queued: AtomicU32::new(0),
        })
    }

    pub(crate) fn table(&self) -> u32 {
        self.table
    }

    /// Whether the record has left the index (it never comes back).
    pub(crate) fn is_removed(&self) -> bool {
        self.owner.load(Ordering::SeqCst) == OWNER_DEAD
    }

    /// A GC queue dropped an entry naming this record (one made by `install`).
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

    pub(crate) fn key(&self) -> &[u8] {
        &self.key
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
    /// whether the record now needs the GC (it superseded an older version, or holds a
    /// tombstone, which the GC removes once no reader needs it); the caller then queues it,
    /// and this counts the entry. Caller holds the record (`lock_for_commit`).
    pub(crate) fn install(&self, version: NonNull<Version>) -> bool {
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
        // SAFETY: as above.
        let needs_gc = !old.is_null() || unsafe { version.as_ref() }.tombstone;
        if needs_gc {
            self.queued.fetch_add(1, Ordering::Relaxed);
        }
        needs_gc
    }

    /// [`Fault::StaleInstall`](crate::Fault): takes the record at `ts` ignoring younger
    /// readers and writers, and installs `version` in timestamp order, below newer versions.
    pub(crate) fn install_stale(&self, version: NonNull<Version>) -> Result<bool, Removed> {
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
                true
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

    /// Unlinks the versions above `ts` from the head of the chain onto `unlinked` (the
    /// caller's limbo: a walk standing on one still finds its way on, since their `next`
    /// links are left intact). Returns whether the record is left empty. `Removed` if it is
    /// dead (its last version was a tombstone below the GC watermark: nothing above `ts`).
    pub(crate) fn rollback_above(
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
        let mut head = self.head.load(Ordering::Acquire);
        // SAFETY: holding OWNER_GC excludes committers and pruners, so every version on the
        // chain is live.
        while let Some(v) = unsafe { head.as_ref() } {
            if v.ts <= ts {
                break;
            }
            // SAFETY: `head` is non-null (just dereferenced).
            unlinked.push(unsafe { NonNull::new_unchecked(head) });
            head = v.next.load(Ordering::Acquire);
        }
        self.head.store(head, Ordering::Release);
        self.owner.store(OWNER_NONE, Ordering::Release);
        Ok(head.is_null())
    }

    /// Releases the record after `lock_for_commit` at `ts`.
    pub(crate) fn unlock(&self, ts: u64) {
        debug_assert_eq!(self.owner.load(Ordering::Relaxed), ts);
        self.owner.store(OWNER_NONE, Ordering::Release);
    }

    /// Drops every version no reader can see, given `snap`. Versions below the newest one
    /// older than `snap.low` are freed at once (no walk reaches them); versions unlinked from
    /// the middle of the chain are pushed onto `unlinked`, to be freed after the walks in
    /// progress finish. A record left holding only a tombstone below `snap.low` dies
    /// (`Pruned::removed`): every reader, now and later, sees that tombstone, which says
    /// what no record says. Returns `Busy` if the record was held (try again later).
    pub(crate) fn prune(&self, snap: &GcSnapshot, unlinked: &mut Vec<NonNull<Version>>) -> Prune {
        match self.owner.compare_exchange(
            OWNER_NONE,
            OWNER_GC,
            Ordering::Acquire,
            Ordering::Relaxed,
        ) {
            Ok(_) => {}
            Err(OWNER_DEAD) => return Prune::Dead,
            Err(_) => return Prune::Busy,
        }
        let mut pruned = Pruned::default();
        // SAFETY: holding OWNER_GC excludes committers and other pruners, so the chain is
        // stable and every version on it is live.
        let Some(mut kept) = (unsafe { self.head.load(Ordering::Acquire).as_ref() }) else {
            self.owner.store(OWNER_NONE, Ordering::Release);
            return Prune::Pruned(pruned);
        };
        let head = kept;
        // `kept` is the newest version kept so far (the head always is); `relink` is set
        // once versions after it were dropped, so its `next` must skip them.
        let mut relink = false;
        let mut cur = kept.next.load(Ordering::Acquire);
        // SAFETY: as above.
        while let Some(v) = unsafe { cur.as_ref() } {
            let next = v.next.load(Ordering::Acquire);
            let needed = snap.visible_to_someone(v.ts(), kept.ts());
            if v.ts() < snap.low {
                // The newest version below `low`: every reader stops here or earlier, so
                // nothing walks below it and that tail can go now. It goes too if no reader
                // sees it (then no reader stops on it either).
                let tail = if needed {
                    if relink {
                        kept.next.store(cur, Ordering::Release);
                    }
                    pruned.history_kept = true;
                    v.next.swap(ptr::null_mut(), Ordering::AcqRel)
                } else {
                    kept.next.store(ptr::null_mut(), Ordering::Release);
                    cur
                };
                relink = false;
                let mut dead = tail;
                while let Some(d) = NonNull::new(dead) {
                    // SAFETY: below the cut, unreachable by any walk (see above); freed once.
                    unsafe {
                        dead = d.as_ref().next.load(Ordering::Relaxed);
                        pruned.bytes_freed += d.as_ref().footprint();
                        Version::free(d);
                    }
                }
                break;
            }
            if needed {
                if relink {
                    kept.next.store(cur, Ordering::Release);
                    relink = false;
                }
                pruned.history_kept = true;
                kept = v;
            } else {
                // Unlinked but not touched: a walk standing on it still finds its way on.
                // SAFETY: `cur` is a live chain node, now owned by the caller's limbo.
                unlinked.push(unsafe { NonNull::new_unchecked(cur) });
                relink = true;
            }
            cur = next;
        }
        if relink {
            kept.next.store(ptr::null_mut(), Ordering::Release);
        }
        if head.tombstone {
            if head.ts < snap.low && head.next.load(Ordering::Relaxed).is_null() {
                pruned.removed = self.die();
                if pruned.removed.is_some() {
                    // Stays `OWNER_DEAD`.
                    return Prune::Pruned(pruned);
                }
            }
            // Not yet (or two-phase locked): keep it queued for a later collection.
            pruned.history_kept = true;
        }
        self.owner.store(OWNER_NONE, Ordering::Release);
        Prune::Pruned(pruned)
    }

    /// Frees the whole chain. Only for dropping the `Db`, when nothing else runs.
    ///
    /// # Safety
    /// No reader or writer can reach this record any more.
    pub(crate) unsafe fn free_versions(&self) {
        let mut v = self.head.swap(ptr::null_mut(), Ordering::AcqRel);
        while let Some(dead) = NonNull::new(v) {
            // SAFETY: the caller guarantees exclusivity; each chain node is freed once.
            unsafe {
                v = dead.as_ref().next.load(Ordering::Relaxed);
                Version::free(dead);
            }
        }
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use loom::sync::Arc;

    /// A reader at T=2 and a committer at W=1 race on one record: either the committer
    /// aborts or the reader sees its version. Never both "committed" and "missed".
    #[test]
    fn older_commit_is_either_seen_or_aborted() {
        loom::model(|| {
            let rec = Arc::new(*Record::new(0, b"k", 0));
            let r2 = rec.clone();
            let writer = loom::thread::spawn(move || {
                if r2.lock_for_commit(1).is_err() {
                    return false;
                }
                r2.install(Version::new(1, Some(b"v")));
                r2.unlock(1);
                true
            });
            let walk = AtomicU64::new(0);
            let saw = rec.read(2, &walk).unwrap().map(|v| v.ts());
            let committed = writer.join().unwrap();
            if committed {
                assert_eq!(saw, Some(1), "reader at 2 missed a committed write at 1");
            } else {
                assert_eq!(saw, None);
            }
            // SAFETY: both threads are done.
            unsafe { rec.free_versions() };
        });
    }

    /// Precision locking: a committer that draws its commit timestamp after locking, and a
    /// snapshot reader, share one clock. The reader sees the version exactly when the
    /// commit timestamp is below its snapshot, whatever the interleaving (it waits out an
    /// unstamped or older owner).
    #[test]
    fn snapshot_reader_sees_exactly_the_commits_below_it() {
        loom::model(|| {
            let clock = Arc::new(AtomicU64::new(10));
            let rec = Arc::new(*Record::new(0, b"k", 0));
            let (r2, c2) = (rec.clone(), clock.clone());
            let writer = loom::thread::spawn(move || {
                let start = 1;
                r2.lock_no_wait(start).expect("no other writer");
                let cts = c2.fetch_add(1, Ordering::SeqCst);
                r2.stamp(cts);
                let v = Version::new(0, Some(b"v"));
                // SAFETY: unpublished.
                unsafe { Version::set_ts(v, cts) };
                r2.install(v);
                r2.unlock(cts);
                cts
            });
            let ts = clock.fetch_add(1, Ordering::SeqCst);
            let walk = AtomicU64::new(0);
            let saw = rec.read_snapshot(ts, &walk).map(|v| v.ts());
            let cts = writer.join().unwrap();
            if cts < ts {
                assert_eq!(
                    saw,
                    Some(cts),
                    "a snapshot at {ts} missed a commit at {cts}"
                );
            } else {
                assert_eq!(saw, None, "a snapshot at {ts} saw a commit at {cts}");
            }
            // SAFETY: both threads are done.
            unsafe { rec.free_versions() };
        });
    }

    /// A stand-in for the index: one key's slot and its gap stamp, under a mutex (the real
    /// index's gap-stamp contract is Masstree's own, tested there).
    struct OneKeyIndex(loom::sync::Mutex<(Option<Arc<Record>>, u64)>);

    impl OneKeyIndex {
        fn get_or_stamp(&self, ts: u64) -> Option<Arc<Record>> {
            let mut g = self.0.lock().unwrap();
            if g.0.is_none() {
                g.1 = g.1.max(ts);
            }
            g.0.clone()
        }
        fn get_or_insert(&self, made: &loom::sync::Mutex<Vec<Arc<Record>>>) -> Arc<Record> {
            let mut g = self.0.lock().unwrap();
            if g.0.is_none() {
                let r = Arc::new(*Record::new(0, b"k", g.1));
                made.lock().unwrap().push(r.clone());
                g.0 = Some(r);
            }
            g.0.clone().unwrap()
        }
        fn remove(&self, r: &Arc<Record>, stamp: u64) {
            let mut g = self.0.lock().unwrap();
            assert!(g.0.as_ref().is_some_and(|x| Arc::ptr_eq(x, r)));
            g.0 = None;
            g.1 = g.1.max(stamp);
        }
    }

    /// Removal of a deleted key's record against a reader at 4 and an older writer at 3 that
    /// inserts the key: either the writer aborts or the reader sees its write, whichever
    /// record each of them ends up on (the dead one, or one inserted after the removal).
    #[test]
    fn removal_keeps_reads_and_older_inserts_ordered() {
        // Three threads with retry loops: every schedule with up to two preemptions (three
        // take tens of minutes, unbounded hours), with room for the loops' yields. Bound 2
        // catches a reader that ignores a dead record and a removal that folds nothing.
        let mut model = loom::model::Builder::new();
        model.preemption_bound = Some(2);
        model.max_branches = 100_000;
        model.check(|| {
            let made = Arc::new(loom::sync::Mutex::new(Vec::new()));
            let dead = Arc::new(*Record::new(0, b"k", 0));
            dead.lock_for_commit(1).unwrap();
            assert!(
                dead.install(Version::new(1, None)),
                "a tombstone wants the GC"
            );
            dead.unlock(1);
            made.lock().unwrap().push(dead.clone());
            let index = Arc::new(OneKeyIndex(loom::sync::Mutex::new((Some(dead.clone()), 0))));
            let (index2, made2) = (index.clone(), made.clone());
            let writer = loom::thread::spawn(move || {
                let mut r = index2.get_or_insert(&made2);
                loop {
                    match r.lock_for_commit(3) {
                        Ok(()) => break,
                        Err(Refused::Removed) => {
                            loom::thread::yield_now();
                            r = index2.get_or_insert(&made2);
                        }
                        Err(Refused::Conflict(_)) => return false,
                    }
                }
                r.install(Version::new(3, Some(b"v")));
                r.unlock(3);
                true
            });
            let (index3, dead3) = (index.clone(), dead.clone());
            let remover = loom::thread::spawn(move || {
                let snap = GcSnapshot {
                    low: 3,
                    future: 5,
                    active: vec![3, 4],
                };
                let mut unlinked = Vec::new();
                if let Prune::Pruned(p) = dead3.prune(&snap, &mut unlinked) {
                    if let Some(stamp) = p.removed {
                        index3.remove(&dead3, stamp);
                    }
                }
                assert!(unlinked.is_empty());
            });
            let walk = AtomicU64::new(0);
            let saw = loop {
                let Some(r) = index.get_or_stamp(4) else {
                    break None;
                };
                match r.read(4, &walk) {
                    Ok(v) => break v.map(|v| (v.ts(), v.value().is_some())),
                    Err(Removed) => loom::thread::yield_now(),
                }
            };
            let committed = writer.join().unwrap();
            remover.join().unwrap();
            if committed {
                assert_eq!(saw, Some((3, true)), "a reader at 4 missed a commit at 3");
            } else {
                assert_ne!(saw, Some((3, true)));
            }
            for r in made.lock().unwrap().iter() {
                // SAFETY: every thread is done.
                unsafe { r.free_versions() };
            }
        });
    }

    /// Two committers on one record: the younger one never installs below the older one.
    #[test]
    fn committers_keep_the_chain_ordered() {
        loom::model(|| {
            let rec = Arc::new(*Record::new(0, b"k", 0));
            let r2 = rec.clone();
            let t = loom::thread::spawn(move || {
                if r2.lock_for_commit(1).is_ok() {
                    r2.install(Version::new(1, Some(b"a")));
                    r2.unlock(1);
                }
            });
            // The younger committer waits out the older one and never conflicts with it.
            rec.lock_for_commit(2).expect("younger committer aborted");
            rec.install(Version::new(2, Some(b"b")));
            rec.unlock(2);
            t.join().unwrap();
            // `install` asserts the order; the newest is the younger write.
            assert_eq!(
                rec.read(3, &AtomicU64::new(0)).unwrap().map(|v| v.ts()),
                Some(2)
            );
            // SAFETY: both threads are done.
            unsafe { rec.free_versions() };
        });
    }
}
