//! One immutable value (or tombstone) of a record and its allocation: on the heap, or in
//! its record's inline slot.

use super::*;

/// One immutable value (or tombstone) of a record, followed in memory by its bytes.
#[repr(C)]
pub(crate) struct Version {
    /// Timestamp of the transaction that wrote it.
    pub(super) ts: u64,
    /// The next older version. Cut (set null) only by pruning, under `OWNER_GC`.
    pub(super) next: AtomicPtr<Version>,
    pub(super) len: u32,
    pub(super) tombstone: bool,
    /// Lives in its record's inline slot (right after the record), not on the heap.
    pub(super) inline: bool,
    /// Under loom, `free` marks versions instead of releasing them, and walks assert they
    /// never step on one: the model's use-after-free check.
    #[cfg(loom)]
    pub(super) freed: crate::sync::AtomicBool,
}

pub(super) const VERSION_HEADER: usize = std::mem::size_of::<Version>();
#[cfg(not(loom))]
const _: () = assert!(VERSION_HEADER == 24);

impl Version {
    fn layout(len: usize) -> Layout {
        // Cannot fail: `len` is bounded by `SIZE_LIMIT_CEILING`, far below `isize::MAX`.
        Layout::from_size_align(VERSION_HEADER + len, std::mem::align_of::<Version>())
            .expect("version layout")
    }

    /// Allocates a version of `value` (`None` for a tombstone) at `ts` on the heap, not yet
    /// linked.
    pub(crate) fn new(ts: u64, value: Option<&[u8]>) -> NonNull<Version> {
        let bytes = value.unwrap_or(&[]);
        assert!(bytes.len() <= crate::options::SIZE_LIMIT_CEILING);
        let layout = Self::layout(bytes.len());
        // SAFETY: `layout` has non-zero size (the header is 24 bytes).
        let raw = unsafe { alloc(layout) }.cast::<Version>();
        let Some(v) = NonNull::new(raw) else {
            handle_alloc_error(layout)
        };
        // SAFETY: a fresh allocation of `layout`: room for the header and the bytes.
        unsafe { Self::write(v, ts, value, false) };
        v
    }

    /// A version of `value` at `ts` for `record`, not yet linked: in the record's inline
    /// slot if it is free and large enough, else on the heap. (The record comes as a
    /// pointer: the slot lies past the `Record` a reference covers, so it is reached from
    /// the allocation's own pointer.)
    pub(crate) fn new_in(record: RecordPtr, ts: u64, value: Option<&[u8]>) -> NonNull<Version> {
        let len = value.map_or(0, <[u8]>::len);
        let r = record.get();
        if VERSION_HEADER + len <= r.inline_cap as usize
            // Acquire: the previous occupant's free (and every read of it) happened before.
            && r.inline_free.swap(0, Ordering::Acquire) == 1
        {
            let v = Record::inline_slot(record.as_non_null());
            // SAFETY: the slot is `inline_cap` bytes, room for the header and `len` bytes;
            // taking `inline_free` made this thread its only user (no walk can reach the
            // version freed from it, or it would not have been freed).
            unsafe { Self::write(v, ts, value, true) };
            return v;
        }
        Self::new(ts, value)
    }

    /// Writes a version's header and bytes at `v`.
    ///
    /// # Safety
    /// `v` is aligned for `Version`, has room for the header and the bytes, and nothing
    /// else uses that memory.
    pub(super) unsafe fn write(v: NonNull<Version>, ts: u64, value: Option<&[u8]>, inline: bool) {
        let bytes = value.unwrap_or(&[]);
        // SAFETY: by the caller's contract.
        unsafe {
            v.as_ptr().write(Version {
                ts,
                next: AtomicPtr::new(ptr::null_mut()),
                len: bytes.len() as u32,
                tombstone: value.is_none(),
                inline,
                #[cfg(loom)]
                freed: crate::sync::AtomicBool::new(false),
            });
            let data = v.as_ptr().cast::<u8>().add(VERSION_HEADER);
            ptr::copy_nonoverlapping(bytes.as_ptr(), data, bytes.len());
        }
    }

    /// The record whose inline slot holds `v`, or `None` for a heap version.
    ///
    /// # Safety
    /// `v` is a live version (not freed yet).
    pub(crate) unsafe fn inline_record<'a>(v: NonNull<Version>) -> Option<&'a Record> {
        // SAFETY: live by contract.
        if !unsafe { v.as_ref() }.inline {
            return None;
        }
        // SAFETY: an inline version sits right after its record, in the same allocation
        // (`Record::inline_slot`), and the record outlives every version in its slot.
        Some(unsafe {
            &*v.as_ptr()
                .cast::<u8>()
                .sub(std::mem::size_of::<Record>())
                .cast::<Record>()
        })
    }

    /// Sets the timestamp of a version made before its commit timestamp was known.
    ///
    /// # Safety
    /// `v` came from `Version::new` and is not published yet (only its maker sees it).
    pub(crate) unsafe fn set_ts(v: NonNull<Version>, ts: u64) {
        // SAFETY: unpublished, so this thread has the only access (caller).
        unsafe { (*v.as_ptr()).ts = ts };
    }

    /// Asks for `v`'s first cache line ahead of a [`Version::free`] (which reads its length
    /// and hands the block to the allocator).
    #[inline]
    pub(crate) fn prefetch(v: NonNull<Version>) {
        #[cfg(all(target_arch = "x86_64", not(loom)))]
        // SAFETY: prefetching is a hint that never faults, whatever the address.
        unsafe {
            use core::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
            _mm_prefetch::<_MM_HINT_T0>(v.as_ptr().cast::<i8>());
        }
        #[cfg(not(all(target_arch = "x86_64", not(loom))))]
        let _ = v;
    }

    /// Frees a version made by [`Version::new`] or [`Version::new_in`]: an inline one gives
    /// its slot back to its record.
    ///
    /// # Safety
    /// `v` is not reachable by any reader, is freed once, and, if inline, its record is
    /// still allocated (the GC counts an inline version in limbo in the record's `queued`).
    pub(crate) unsafe fn free(v: NonNull<Version>) {
        // SAFETY: live until freed below.
        if let Some(record) = unsafe { Self::inline_record(v) } {
            #[cfg(loom)]
            {
                // SAFETY: as above.
                let was = unsafe { v.as_ref() }.freed.swap(true, Ordering::SeqCst);
                assert!(!was, "version freed twice");
            }
            debug_assert_eq!(record.inline_free.load(Ordering::Relaxed), 0);
            // Release: every use of the old version happens before the slot's next taker.
            record.inline_free.store(1, Ordering::Release);
            return;
        }
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

    /// Whether it lives in its record's inline slot.
    pub(crate) fn is_inline(&self) -> bool {
        self.inline
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
