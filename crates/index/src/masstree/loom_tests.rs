//! Loom models of the version-word protocol (`version.rs`). Run with
//! `RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test -p verso-index --lib --release loom`.

use loom::sync::Arc;
use loom::thread;

use super::sync::{dekker_fence, AtomicU64, Ordering};
use super::version::{NodeVersion, LEAF};

/// A reader that validates never sees a half-done insert: after `stable()` .. reads ..
/// `!has_changed`, the field it read matches the version it validated.
#[test]
fn loom_optimistic_read_validates() {
    loom::model(|| {
        let v = Arc::new(NodeVersion::new(LEAF));
        let a = Arc::new(AtomicU64::new(0));
        let b = Arc::new(AtomicU64::new(0));
        let w = {
            let (v, a, b) = (v.clone(), a.clone(), b.clone());
            thread::spawn(move || {
                v.lock();
                v.mark_insert();
                a.store(1, Ordering::Relaxed);
                b.store(1, Ordering::Relaxed);
                v.unlock();
            })
        };
        let s = v.stable();
        let x = a.load(Ordering::Relaxed);
        let y = b.load(Ordering::Relaxed);
        if !v.has_changed(s) {
            assert_eq!(x, y, "validated a torn read");
            let done = s != LEAF;
            assert_eq!(x == 1, done, "validated value disagrees with the version");
        }
        w.join().unwrap();
    });
}

/// The gap-stamp Dekker pair: a reader that stamps and then validates an unchanged version
/// (so it concluded "absent") is always seen by an insert that marks then loads the stamp.
#[test]
fn loom_gap_stamp_dekker() {
    loom::model(|| {
        let v = Arc::new(NodeVersion::new(LEAF));
        let stamp = Arc::new(AtomicU64::new(0));
        let w = {
            let (v, stamp) = (v.clone(), stamp.clone());
            thread::spawn(move || {
                v.lock();
                v.mark_insert();
                let s = stamp.load(Ordering::SeqCst);
                v.unlock();
                s
            })
        };
        let s0 = v.stable();
        let absent = s0 == LEAF; // the insert had not completed when we looked
        stamp.fetch_max(7, Ordering::SeqCst);
        dekker_fence();
        let validated = !v.has_changed_seqcst(s0);
        let seen = w.join().unwrap();
        if absent && validated {
            assert_eq!(
                seen, 7,
                "insert missed a stamp left by a validated absent read"
            );
        }
    });
}

/// Lock exclusion and counter bumps: two writers never hold the lock at once and each
/// insert bumps the counter once.
#[test]
fn loom_lock_excludes_and_counts() {
    loom::model(|| {
        let v = Arc::new(NodeVersion::new(LEAF));
        let data = Arc::new(AtomicU64::new(0));
        let hs: Vec<_> = (0..2)
            .map(|_| {
                let (v, data) = (v.clone(), data.clone());
                thread::spawn(move || {
                    v.lock();
                    v.mark_insert();
                    let d = data.load(Ordering::Relaxed);
                    data.store(d + 1, Ordering::Relaxed);
                    v.unlock();
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        assert_eq!(data.load(Ordering::Relaxed), 2);
        let s = v.stable();
        v.lock();
        v.mark_insert();
        v.unlock();
        assert!(v.has_changed(s));
    });
}
