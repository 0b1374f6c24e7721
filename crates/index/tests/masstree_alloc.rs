//! Counts live heap bytes around a `Masstree`'s life: inserting then removing every key, and
//! dropping the tree, must return every byte once the epoch collector has run (suffixes
//! retired by removes and new layers are freed through `crossbeam-epoch`).
//!
//! Its own test binary: the counting allocator is global.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};

use verso_index::Masstree;

struct Counting;

/// Live bytes in allocations smaller than [`COUNTED_BELOW`].
static LIVE: AtomicIsize = AtomicIsize::new(0);

/// Every allocation the tree makes is smaller: nodes are at most 512 bytes, and suffixes are
/// short here. The epoch collector keeps a varying number (0 or 1 in practice) of 2 KiB
/// queue nodes of sealed garbage bags, which are its bookkeeping, not the tree's.
const COUNTED_BELOW: usize = 1024;

std::thread_local! {
    /// Only the test's own thread counts: libtest's main thread allocates concurrently
    /// (printing progress), which would make a global count flaky.
    static TRACKED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

fn counted(layout: Layout) -> isize {
    if layout.size() < COUNTED_BELOW && TRACKED.with(|t| t.get()) {
        layout.size() as isize
    } else {
        0
    }
}

// SAFETY: forwards to the system allocator unchanged, only counting bytes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(counted(layout), Ordering::SeqCst);
        // SAFETY: the caller's contract is passed through.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(counted(layout), Ordering::SeqCst);
        // SAFETY: the caller's contract is passed through.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn key(i: u32) -> Vec<u8> {
    // Long keys with shared prefixes: suffixes, several layers, splits in each.
    let mut k = format!("user/{:04}/", i % 37).into_bytes();
    k.extend_from_slice(&i.to_be_bytes());
    if i.is_multiple_of(3) {
        k.extend_from_slice(b"/a-rather-long-tail-to-force-suffixes");
    }
    k
}

/// Runs the epoch collector until the garbage this thread retired is freed.
fn collect_garbage() {
    for _ in 0..256 {
        crossbeam_epoch::pin().flush();
    }
}

/// One test function: the count is global, so the scenarios must not run in parallel.
#[test]
fn everything_is_freed() {
    inserting_removing_and_dropping_frees_everything();
    removing_every_key_in_random_order_frees_the_nodes();
}

fn inserting_removing_and_dropping_frees_everything() {
    TRACKED.with(|t| t.set(true));
    // Warm up the epoch collector to its steady state before measuring: it registers this
    // thread (its `Local` lives on) and keeps one queue node of sealed garbage around.
    for i in 0..1000u64 {
        let g = crossbeam_epoch::pin();
        let b = Box::new(i);
        // SAFETY: the box is unreachable; retiring it once is fine.
        unsafe { g.defer_unchecked(move || drop(b)) };
    }
    collect_garbage();
    let keys: Vec<Vec<u8>> = (0..20_000).map(key).collect();
    let base = LIVE.load(Ordering::SeqCst);
    {
        let t = Masstree::<u64>::new();
        for (i, k) in keys.iter().enumerate() {
            assert_eq!(t.insert(k, i as u64), None);
        }
        for (i, k) in keys.iter().enumerate() {
            assert_eq!(t.remove(k), Some(i as u64));
        }
        assert!(t.is_empty());
        // Removes clean up as they go: emptied border nodes are unlinked (with the interior
        // nodes left without children), emptied layers are removed. What may remain is layer
        // 0's leftmost path, a few nodes.
        collect_garbage();
        let left = LIVE.load(Ordering::SeqCst) - base;
        assert!(
            left <= 4 * 512,
            "{left} bytes still allocated after removing every key"
        );
        let mut peak = 0;
        for k in keys.iter().step_by(2) {
            t.insert(k, 1);
            peak = peak.max(LIVE.load(Ordering::SeqCst) - base);
        }
        assert!(peak > 100_000, "the test allocates");
        for k in keys.iter().step_by(2) {
            assert_eq!(t.remove(k), Some(1));
        }
        // Insert half again, so the drop also frees live entries and layers.
        for k in keys.iter().step_by(2) {
            t.insert(k, 1);
        }
    }
    collect_garbage();
    let leaked = LIVE.load(Ordering::SeqCst) - base;
    assert_eq!(
        leaked, 0,
        "{leaked} bytes still allocated after drop and collection"
    );
}

fn removing_every_key_in_random_order_frees_the_nodes() {
    TRACKED.with(|t| t.set(true));
    collect_garbage();
    let base = LIVE.load(Ordering::SeqCst);
    let t = Masstree::<u64>::new();
    let n = 50_000u64;
    // A permutation of 0..n (n is not a multiple of the odd multiplier's factors).
    let order: Vec<u64> = (0..n).map(|i| (i * 7919 + 13) % n).collect();
    for &i in &order {
        t.insert(&i.to_be_bytes(), i);
    }
    let full = LIVE.load(Ordering::SeqCst) - base;
    assert!(full > 1_000_000, "the tree allocates ({full} bytes)");
    for &i in order.iter().rev() {
        assert_eq!(t.remove(&i.to_be_bytes()), Some(i));
    }
    collect_garbage();
    // Interior nodes emptied of children go with their last border node; what may remain
    // is the leftmost path (one node a level: 4 levels hold 50 000 keys).
    let left = LIVE.load(Ordering::SeqCst) - base;
    assert!(
        left <= 5 * 512,
        "{left} of {full} bytes still allocated after removing every key"
    );
    drop(t);
}
