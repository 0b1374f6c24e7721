//! Atomics and spinning, switched to `loom`'s models under `--cfg loom` so the concurrent
//! primitives (timestamp sites, the record protocol) are model-checked as they are written.

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, Ordering};
#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, Ordering};

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
