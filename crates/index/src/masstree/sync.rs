//! Atomics, switched to `loom`'s models under `--cfg loom` so the version-word protocol is
//! model-checked as written (same shape as `verso-engine`'s `sync` module), and to `shuttle`'s
//! under `--cfg shuttle` so whole-tree operations run under randomized schedules
//! (`shuttle_tests.rs`).
//!
//! Shuttle explores interleavings of sequentially consistent executions only: it finds
//! missing version marks, wrong publication order and lost wake-ups, not weak-memory
//! reorderings (that is loom's job, on the small models in `loom_tests.rs`). Every shuttle
//! atomic access is a scheduling point; code between them runs without preemption.

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicPtr, AtomicU64, AtomicU8, Ordering};
#[cfg(all(shuttle, not(loom)))]
pub(crate) use shuttle::sync::atomic::{AtomicPtr, AtomicU64, AtomicU8, Ordering};
#[cfg(not(any(loom, shuttle)))]
pub(crate) use std::sync::atomic::{AtomicPtr, AtomicU64, AtomicU8, Ordering};

/// A fence of the given ordering (loom's under loom, shuttle's under shuttle).
#[inline(always)]
pub(crate) fn fence(order: Ordering) {
    #[cfg(loom)]
    loom::sync::atomic::fence(order);
    #[cfg(all(shuttle, not(loom)))]
    shuttle::sync::atomic::fence(order);
    #[cfg(not(any(loom, shuttle)))]
    std::sync::atomic::fence(order);
}

/// Restores, under loom, the Dekker ordering that `SeqCst` accesses give the real build.
///
/// All `SeqCst` operations form one total order in the Rust (C++20) model, which the gap-stamp
/// argument relies on (store-then-load on each side). Loom models `SeqCst` accesses only as
/// `AcqRel` but models `SeqCst` fences exactly; the real build pays nothing. Shuttle's
/// executions are sequentially consistent already, so it needs nothing here either.
#[inline(always)]
pub(crate) fn dekker_fence() {
    #[cfg(loom)]
    loom::sync::atomic::fence(Ordering::SeqCst);
}

/// One step of a wait loop. Under loom and shuttle a spin must yield to the scheduler, or the
/// model never ends (and shuttle's PCT scheduler would run a high-priority spinner forever).
#[inline]
pub(crate) fn spin_step(step: &mut u32) {
    #[cfg(loom)]
    {
        let _ = step;
        loom::thread::yield_now();
    }
    #[cfg(all(shuttle, not(loom)))]
    {
        let _ = step;
        shuttle::thread::yield_now();
    }
    #[cfg(not(any(loom, shuttle)))]
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
