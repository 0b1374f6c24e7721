//! Precision locking (HyPer §2.3, §3): read predicates logged by serializable transactions
//! and validated at commit against the writes of transactions that committed during their
//! lifetime, kept in the *recently-committed list*.
//!
//! A predicate is a point key or a key range of one table (bounds as given, so an empty
//! result is still a predicate): a scan of a million keys costs one entry. A write is a
//! `(table, key)`; in a key-value store an insert, a delete and both images of an update
//! all have the same key, so one check covers them.
//!
//! Ordering argument (see `txn/precision.rs` for the commit steps): a committer draws its commit
//! timestamp *inside* the list's mutex and appends its entry in the same critical section,
//! so the list is sorted by commit timestamp, and a validator (which appended itself first)
//! finds every transaction that committed below it already listed. The window it checks,
//! `(start, cts)`, is a contiguous stretch just before its own entry.

use std::collections::VecDeque;
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// The keys one committed (or committing) transaction writes.
pub(crate) struct CommitEntry {
    /// The commit timestamp (entries are listed in this order).
    cts: u64,
    /// Set when the commit failed after drawing its timestamp (its writes never happened).
    aborted: AtomicBool,
    /// `(table, key)` sorted, flattened: `keys[ends[i-1]..ends[i]]` is key `i`.
    tables: Box<[u32]>,
    keys: Box<[u8]>,
    ends: Box<[u32]>,
}

impl CommitEntry {
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
}

/// A listed entry, owned by its committer.
pub(crate) struct Published(Arc<CommitEntry>);

impl Published {
    /// The commit failed validation: validators may ignore these writes from now on.
    pub(crate) fn abort(&self) {
        self.0.aborted.store(true, Ordering::Release);
    }
}

/// HyPer's recently-committed list, sorted by commit timestamp.
#[derive(Default)]
pub(crate) struct CommitLog {
    inner: Mutex<Listed>,
}

#[derive(Default)]
struct Listed {
    entries: VecDeque<Arc<CommitEntry>>,
    /// Appends since the last trim: trimming needs a GC snapshot, which is not free.
    since_trim: usize,
}

/// Appends between two trims of entries no active transaction can need.
const TRIM_EVERY: usize = 1024;

impl CommitLog {
    /// Lists the writes of a transaction and draws its commit timestamp with `draw`, in one
    /// critical section. `oldest` is called (once every [`TRIM_EVERY`] appends) for a lower
    /// bound on every active and future start timestamp, to drop entries below it.
    pub(crate) fn publish<'k>(
        &self,
        writes: impl Iterator<Item = (u32, &'k [u8])>,
        draw: impl FnOnce() -> u64,
        oldest: impl FnOnce() -> u64,
    ) -> (Published, u64) {
        let (mut tables, mut keys, mut ends) = (Vec::new(), Vec::new(), Vec::new());
        for (t, k) in writes {
            tables.push(t);
            keys.extend_from_slice(k);
            ends.push(keys.len() as u32);
        }
        let mut listed = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let cts = draw();
        debug_assert!(listed.entries.back().is_none_or(|e| e.cts < cts));
        let entry = Arc::new(CommitEntry {
            cts,
            aborted: AtomicBool::new(false),
            tables: tables.into(),
            keys: keys.into(),
            ends: ends.into(),
        });
        listed.since_trim += 1;
        if listed.since_trim >= TRIM_EVERY {
            listed.since_trim = 0;
            let low = oldest();
            while listed.entries.front().is_some_and(|e| e.cts < low) {
                listed.entries.pop_front();
            }
        }
        listed.entries.push_back(entry.clone());
        (Published(entry), cts)
    }

    /// Whether a transaction that started at `start`, read `preds`, and committed at `cts`
    /// (entry `me`) is still serializable: no write of a transaction committed in
    /// `(start, cts)` touches a predicate.
    pub(crate) fn validate(&self, me: &Published, start: u64, preds: &PredicateLog) -> bool {
        if preds.is_empty() {
            return true;
        }
        let cts = me.0.cts;
        let window: Vec<Arc<CommitEntry>> = {
            let listed = self.inner.lock().unwrap_or_else(|e| e.into_inner());
            listed
                .entries
                .iter()
                .rev()
                .skip_while(|e| e.cts >= cts)
                .take_while(|e| e.cts > start)
                .cloned()
                .collect()
        };
        window.iter().all(|e| {
            e.aborted.load(Ordering::Acquire) || !e.writes().any(|(t, k)| preds.covers(t, k))
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
        let _before = log.publish(w(b"m"), || 5, || 0);
        let (inside, _) = log.publish(w(b"n"), || 15, || 0);
        let (me, cts) = log.publish(w(b"q"), || 20, || 0);
        let _after = log.publish(w(b"o"), || 30, || 0);
        assert_eq!(cts, 20);
        // Started at 10, committed at 20: `inside` (15) wrote under the predicate.
        assert!(!log.validate(&me, 10, &preds));
        // Started at 15: the window (15, 20) is empty.
        assert!(log.validate(&me, 15, &preds));
        inside.abort();
        assert!(log.validate(&me, 10, &preds));
        let mut other = PredicateLog::default();
        other.point(0, b"zz");
        assert!(log.validate(&me, 10, &other));
    }

    #[test]
    fn old_entries_are_trimmed() {
        let log = CommitLog::default();
        for i in 0..(2 * TRIM_EVERY as u64) {
            let _ = log.publish(std::iter::empty(), || i + 1, || 1500);
        }
        let len = log.inner.lock().unwrap().entries.len();
        assert!(len < TRIM_EVERY + 600, "{len} entries kept");
    }
}
