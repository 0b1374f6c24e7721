//! Atomics, switched to `loom`'s models under `--cfg loom` so the version-word protocol is
//! model-checked as written (same shape as `verso-engine`'s `sync` module).

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicPtr, AtomicU64, AtomicU8, Ordering};
#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicPtr, AtomicU64, AtomicU8, Ordering};

/// A fence of the given ordering (loom's under loom).
#[inline(always)]
pub(crate) fn fence(order: Ordering) {
    #[cfg(loom)]
    loom::sync::atomic::fence(order);
    #[cfg(not(loom))]
    std::sync::atomic::fence(order);
}

/// Restores, under loom, the Dekker ordering that `SeqCst` accesses give the real build.
///
/// All `SeqCst` operations form one total order in the Rust (C++20) model, which the gap-stamp
/// argument relies on (store-then-load on each side). Loom models `SeqCst` accesses only as
/// `AcqRel` but models `SeqCst` fences exactly; the real build pays nothing.
#[inline(always)]
pub(crate) fn dekker_fence() {
    #[cfg(loom)]
    loom::sync::atomic::fence(Ordering::SeqCst);
}

/// One step of a wait loop. Under loom a spin must yield or the model never ends.
#[inline]
pub(crate) fn spin_step(step: &mut u32) {
    #[cfg(loom)]
    {
        let _ = step;
        loom::thread::yield_now();
    }
    #[cfg(not(loom))]
    {
        // Holders keep a node lock for a few hundred nanoseconds; with 2 cores the holder may
        // be descheduled, so give the core away after a short spin.
        if *step < 64 {
            std::hint::spin_loop();
        } else {
            std::thread::yield_now();
        }
        *step = step.saturating_add(1);
    }
}
