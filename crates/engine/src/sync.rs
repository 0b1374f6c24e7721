//! Atomics and spinning, switched to `loom`'s models under `--cfg loom` so the concurrent
//! primitives (timestamp sites, the record protocol) are model-checked as they are written.

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{
    AtomicBool, AtomicPtr, AtomicU16, AtomicU32, AtomicU64, Ordering,
};
#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{
    AtomicBool, AtomicPtr, AtomicU16, AtomicU32, AtomicU64, Ordering,
};

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
        // Spin briefly (the holder is usually mid-commit, microseconds from done), then give
        // the core away: with 2 cores the holder may be waiting for ours.
        if *step < 64 {
            std::hint::spin_loop();
        } else {
            std::thread::yield_now();
        }
        *step = step.saturating_add(1);
    }
}

/// Restores, under loom, the Dekker ordering that `SeqCst` accesses give the real build.
///
/// In the Rust (C++20) memory model all `SeqCst` operations form one total order, which is
/// what the record protocol's store-then-load pairs rely on (on x86-64 the `SeqCst` RMW is a
/// locked instruction, already a full barrier). Loom models `SeqCst` *accesses* only as
/// `AcqRel` but models `SeqCst` *fences* exactly, so the model gets the fence and the real
/// build does not pay for a redundant `mfence`.
#[inline(always)]
pub(crate) fn dekker_fence() {
    #[cfg(loom)]
    loom::sync::atomic::fence(Ordering::SeqCst);
}

/// A `SeqCst` fence (loom's under loom).
#[inline]
pub(crate) fn fence_seq_cst() {
    #[cfg(loom)]
    loom::sync::atomic::fence(Ordering::SeqCst);
    #[cfg(not(loom))]
    std::sync::atomic::fence(Ordering::SeqCst);
}
