//! Precision locking (HyPer §2.3, §3): read predicates logged by serializable transactions
//! and validated at commit against the writes of transactions that committed during their
//! lifetime, kept in the *recently-committed list*.
//!
//! A predicate is a point key or a key range of one table (bounds as given, so an empty
//! result is still a predicate): a scan of a million keys costs one entry. A write is a
//! `(table, key)`; in a key-value store an insert, a delete and both images of an update
//! all have the same key, so one check covers them.
//!
//! Ordering argument (see `txn.rs` for the commit steps): a committer publishes its entry
//! *before* it draws its commit timestamp, and a validator collects entries *after* drawing
//! its own. So every transaction with a smaller commit timestamp is in the collected list,
//! perhaps still without its timestamp (it drew it but has not stored it): the validator
//! waits for that store, which follows the draw immediately.

use std::collections::VecDeque;
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::sync::spin_step;

/// Entry timestamp while the committer has not drawn its commit timestamp yet.
const PENDING: u64 = 0;
/// Entry timestamp of a commit that failed after publishing (its writes never happened).
pub(crate) const ABORTED: u64 = u64::MAX;

/// The keys one committed (or committing) transaction writes.
pub(crate) struct CommitEntry {
    /// [`PENDING`], [`ABORTED`], or the commit timestamp.
    cts: AtomicU64,
    /// `(table, key)` sorted, flattened: `keys[ends[i-1]..ends[i]]` is key `i`.
    tables: Box<[u32]>,
    keys: Box<[u8]>,
    ends: Box<[u32]>,
}

impl CommitEntry {
    /// Records the commit timestamp (or [`ABORTED`]).
    pub(crate) fn set_cts(&self, cts: u64) {
        self.cts.store(cts, Ordering::Release);
    }

    fn writes(&self) -> impl Iterator<Item = (u32, &[u8])> {
        let mut start = 0usize;
        self.tables
            .iter()
            .zip(self.ends.iter())
            .map(move |(&t, &end)| {
                let k = &self.keys[start..end as usize];
                start = end as usize;
                (t, k)
            })
    }

    /// The commit timestamp, waiting out the short window between draw and store.
    fn wait_cts(&self) -> u64 {
        let mut step = 0;
        loop {
            let c = self.cts.load(Ordering::Acquire);
            if c != PENDING {
                return c;
            }
            spin_step(&mut step);
        }
    }
}

/// A published entry, owned by its committer: if the commit unwinds before it records a
/// timestamp, dropping this marks it aborted, so no validator waits for it forever.
pub(crate) struct Published(Arc<CommitEntry>);

impl Published {
    pub(crate) fn set_cts(&self, cts: u64) {
        self.0.set_cts(cts);
    }
}

impl Drop for Published {
    fn drop(&mut self) {
        let _ = self
            .0
            .cts
            .compare_exchange(PENDING, ABORTED, Ordering::AcqRel, Ordering::Acquire);
    }
}

/// HyPer's recently-committed list: entries in publication order.
#[derive(Default)]
pub(crate) struct CommitLog {
    entries: Mutex<VecDeque<Arc<CommitEntry>>>,
}

/// Entries kept before the list trims the ones no active transaction can need.
const TRIM_AT: usize = 256;

impl CommitLog {
    /// Publishes the writes of a transaction about to draw its commit timestamp. `oldest`
    /// is called (rarely) for a lower bound on every active and future start timestamp,
    /// to drop entries that committed below it.
    pub(crate) fn publish<'k>(
        &self,
        writes: impl Iterator<Item = (u32, &'k [u8])>,
        oldest: impl FnOnce() -> u64,
    ) -> Published {
        let (mut tables, mut keys, mut ends) = (Vec::new(), Vec::new(), Vec::new());
        for (t, k) in writes {
            tables.push(t);
            keys.extend_from_slice(k);
            ends.push(keys.len() as u32);
        }
        let entry = Arc::new(CommitEntry {
            cts: AtomicU64::new(PENDING),
            tables: tables.into(),
            keys: keys.into(),
            ends: ends.into(),
        });
        let mut list = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        if list.len() >= TRIM_AT {
            let low = oldest();
            // Entries are roughly in timestamp order; stop at the first one still needed.
            while list.front().is_some_and(|e| {
                let c = e.cts.load(Ordering::Acquire);
                c != PENDING && (c == ABORTED || c < low)
            }) {
                list.pop_front();
            }
        }
        list.push_back(entry.clone());
        Published(entry)
    }

    /// Whether a transaction that started at `start`, read `preds`, and drew commit
    /// timestamp `cts` (after publishing `me`) is still serializable: no write of a
    /// transaction committed in `(start, cts)` touches a predicate.
    pub(crate) fn validate(
        &self,
        me: &Published,
        start: u64,
        cts: u64,
        preds: &PredicateLog,
    ) -> bool {
        if preds.is_empty() {
            return true;
        }
        let window: Vec<Arc<CommitEntry>> = {
            let list = self.entries.lock().unwrap_or_else(|e| e.into_inner());
            list.iter()
                .filter(|e| !Arc::ptr_eq(e, &me.0))
                .filter(|e| {
                    let c = e.cts.load(Ordering::Acquire);
                    c == PENDING || (c != ABORTED && c > start && c < cts)
                })
                .cloned()
                .collect()
        };
        window.iter().all(|e| {
            let c = e.wait_cts();
            c == ABORTED || c <= start || c >= cts || !e.writes().any(|(t, k)| preds.covers(t, k))
        })
    }
}

/// What one logged read looked at.
#[derive(Clone, Copy, Debug)]
enum Kind {
    Point,
    Range { lo: BoundKind, hi: BoundKind },
}

#[derive(Clone, Copy, Debug)]
enum BoundKind {
    Included,
    Excluded,
    Unbounded,
}

#[derive(Clone, Copy, Debug)]
struct Predicate {
    table: u32,
    kind: Kind,
    /// Point: the key. Range: the low bound's bytes, then the high bound's.
    start: u32,
    mid: u32,
    end: u32,
}

/// A transaction's read predicates, in one byte arena (reused through a thread-local pool).
#[derive(Default)]
pub(crate) struct PredicateLog {
    preds: Vec<Predicate>,
    bytes: Vec<u8>,
}

impl PredicateLog {
    pub(crate) fn is_empty(&self) -> bool {
        self.preds.is_empty()
    }

    /// Logs a point read of `key` (present or not).
    pub(crate) fn point(&mut self, table: u32, key: &[u8]) {
        let start = self.bytes.len() as u32;
        self.bytes.extend_from_slice(key);
        let end = self.bytes.len() as u32;
        self.preds.push(Predicate {
            table,
            kind: Kind::Point,
            start,
            mid: end,
            end,
        });
    }

    /// Logs a range read over `(lo, hi)`.
    pub(crate) fn range(&mut self, table: u32, lo: Bound<&[u8]>, hi: Bound<&[u8]>) {
        fn push(bytes: &mut Vec<u8>, b: Bound<&[u8]>) -> BoundKind {
            match b {
                Bound::Included(k) => {
                    bytes.extend_from_slice(k);
                    BoundKind::Included
                }
                Bound::Excluded(k) => {
                    bytes.extend_from_slice(k);
                    BoundKind::Excluded
                }
                Bound::Unbounded => BoundKind::Unbounded,
            }
        }
        let start = self.bytes.len() as u32;
        let lo = push(&mut self.bytes, lo);
        let mid = self.bytes.len() as u32;
        let hi = push(&mut self.bytes, hi);
        let end = self.bytes.len() as u32;
        self.preds.push(Predicate {
            table,
            kind: Kind::Range { lo, hi },
            start,
            mid,
            end,
        });
    }

    /// Whether a write of `(table, key)` falls under any logged predicate.
    pub(crate) fn covers(&self, table: u32, key: &[u8]) -> bool {
        self.preds.iter().any(|p| {
            if p.table != table {
                return false;
            }
            let lo = &self.bytes[p.start as usize..p.mid as usize];
            match p.kind {
                Kind::Point => key == lo,
                Kind::Range { lo: lk, hi: hk } => {
                    let hi = &self.bytes[p.mid as usize..p.end as usize];
                    let above = match lk {
                        BoundKind::Included => key >= lo,
                        BoundKind::Excluded => key > lo,
                        BoundKind::Unbounded => true,
                    };
                    let below = match hk {
                        BoundKind::Included => key <= hi,
                        BoundKind::Excluded => key < hi,
                        BoundKind::Unbounded => true,
                    };
                    above && below
                }
            }
        })
    }

    fn clear(&mut self) {
        self.preds.clear();
        self.bytes.clear();
    }
}

thread_local! {
    static POOL: std::cell::RefCell<Vec<PredicateLog>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// A cleared predicate log from this thread's pool (or a new one).
pub(crate) fn take() -> PredicateLog {
    POOL.try_with(|p| p.borrow_mut().pop())
        .ok()
        .flatten()
        .unwrap_or_default()
}

/// Returns a log to this thread's pool (huge ones are dropped).
pub(crate) fn give_back(mut log: PredicateLog) {
    if log.bytes.capacity() > 1 << 20 {
        return;
    }
    log.clear();
    let _ = POOL.try_with(|p| {
        let mut p = p.borrow_mut();
        if p.len() < 8 {
            p.push(log);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn predicates_cover_exactly_their_keys() {
        let mut p = PredicateLog::default();
        p.point(1, b"k");
        p.range(2, Bound::Included(b"b"), Bound::Excluded(b"d"));
        p.range(3, Bound::Excluded(b"m"), Bound::Unbounded);
        assert!(p.covers(1, b"k") && !p.covers(1, b"k2") && !p.covers(2, b"k"));
        assert!(p.covers(2, b"b") && p.covers(2, b"c\xff") && !p.covers(2, b"d"));
        assert!(!p.covers(3, b"m") && p.covers(3, b"m\0") && p.covers(3, b"zzz"));
    }

    #[test]
    fn validation_sees_only_the_window() {
        let log = CommitLog::default();
        let mut preds = PredicateLog::default();
        preds.range(0, Bound::Included(b"a"), Bound::Included(b"z"));
        let w = |k: &'static [u8]| std::iter::once((0u32, k));
        let before = log.publish(w(b"m"), || 0);
        before.set_cts(5);
        let inside = log.publish(w(b"n"), || 0);
        inside.set_cts(15);
        let after = log.publish(w(b"o"), || 0);
        after.set_cts(30);
        let me = log.publish(w(b"q"), || 0);
        me.set_cts(20);
        // Started at 10, commits at 20: `inside` (15) wrote under the predicate.
        assert!(!log.validate(&me, 10, 20, &preds));
        inside.set_cts(ABORTED);
        assert!(log.validate(&me, 10, 20, &preds));
        let mut other = PredicateLog::default();
        other.point(0, b"zz");
        inside.set_cts(15);
        assert!(log.validate(&me, 10, 20, &other));
    }
}
