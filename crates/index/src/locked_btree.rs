//! The placeholder index: a `BTreeMap` behind a `RwLock`, with gap stamps.
//!
//! Every entry carries the stamp of the gap that follows it (the open interval up to the
//! next key), and the map carries the stamp of the gap before its first key. Readers stamp
//! with `fetch_max` under the *read* lock; inserts read the stamp under the *write* lock, so
//! a stamp and an insert into the same gap are always ordered by the lock: either the insert
//! came first (and the reader sees the key) or the stamp did (and the insert sees it).

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::RwLock;

use crate::Direction;

/// A `BTreeMap<Box<[u8]>, V>` behind a `RwLock`, keeping the gap-stamp contract.
pub struct LockedBTree<V> {
    map: RwLock<BTreeMap<Box<[u8]>, Entry<V>>>,
    /// Stamp of the gap before the first key (the whole key space when empty).
    head_gap: AtomicU64,
}

struct Entry<V> {
    value: V,
    /// Stamp of the gap between this key and the next one.
    gap_after: AtomicU64,
}

impl<V: Copy> Default for LockedBTree<V> {
    fn default() -> Self {
        Self::new()
    }
}

impl<V: Copy> LockedBTree<V> {
    /// An empty index.
    pub fn new() -> Self {
        LockedBTree {
            map: RwLock::new(BTreeMap::new()),
            head_gap: AtomicU64::new(0),
        }
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<Box<[u8]>, Entry<V>>> {
        // A poisoned lock means a panic inside a map operation; the map itself stays
        // consistent (BTreeMap is unwind-safe for these calls), so keep serving.
        self.map.read().unwrap_or_else(|e| e.into_inner())
    }

    /// The value stored under `key`.
    pub fn get(&self, key: &[u8]) -> Option<V> {
        self.read().get(key).map(|e| e.value)
    }

    /// The value stored under `key`; if there is none, leaves `stamp` on the gap that
    /// would hold `key`, so a later insert of `key` learns it.
    pub fn get_or_stamp(&self, key: &[u8], stamp: u64) -> Option<V> {
        let map = self.read();
        if let Some(e) = map.get(key) {
            return Some(e.value);
        }
        gap_before(&map, &self.head_gap, Bound::Excluded(key)).fetch_max(stamp, Ordering::AcqRel);
        None
    }

    /// The value under `key`, or, if absent, the stamp on the gap it lands in.
    pub fn get_or_gap_stamp(&self, key: &[u8]) -> Result<V, u64> {
        let map = self.read();
        if let Some(e) = map.get(key) {
            return Ok(e.value);
        }
        Err(gap_before(&map, &self.head_gap, Bound::Excluded(key)).load(Ordering::Acquire))
    }

    /// The value under `key`, inserting `make(gap_stamp)` if absent, where `gap_stamp` is
    /// the largest stamp left on the gap `key` lands in. Returns the value and whether it
    /// was inserted now.
    pub fn get_or_insert_with(&self, key: &[u8], make: impl FnOnce(u64) -> V) -> (V, bool) {
        if let Some(v) = self.get(key) {
            return (v, false);
        }
        let mut map = self.map.write().unwrap_or_else(|e| e.into_inner());
        if let Some(e) = map.get(key) {
            return (e.value, false);
        }
        let stamp = gap_before(&map, &self.head_gap, Bound::Excluded(key)).load(Ordering::Acquire);
        let value = make(stamp);
        // The new key splits one gap into two; both halves were covered by the old stamp.
        map.insert(
            key.into(),
            Entry {
                value,
                gap_after: AtomicU64::new(stamp),
            },
        );
        (value, true)
    }

    /// Removes `key` if `keep_going(value)` says so, leaving `stamp` on the gap the key
    /// leaves behind (with the stamps of the two gaps it separated): a later insert of `key`
    /// learns a stamp `>= stamp`. Returns the removed value.
    pub fn remove_if(
        &self,
        key: &[u8],
        stamp: u64,
        keep_going: impl FnOnce(V) -> bool,
    ) -> Option<V> {
        let mut map = self.map.write().unwrap_or_else(|e| e.into_inner());
        if !keep_going(map.get(key)?.value) {
            return None;
        }
        let e = map.remove(key)?;
        let merged = stamp.max(e.gap_after.load(Ordering::Acquire));
        gap_before(&map, &self.head_gap, Bound::Excluded(key)).fetch_max(merged, Ordering::AcqRel);
        Some(e.value)
    }

    /// Removes `key`, returning its value.
    pub fn remove(&self, key: &[u8]) -> Option<V> {
        self.remove_if(key, 0, |_| true)
    }

    /// Visits the entries within `(lo, hi)` in `direction`, under the read lock, until `visit`
    /// returns `false`, stamping every gap the walk covers. Returns `true` when the walk
    /// reached the far bound (nothing is left), `false` when `visit` stopped it.
    ///
    /// `visit` runs under the read lock: it must not block or touch this index.
    pub fn scan(
        &self,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        direction: Direction,
        stamp: u64,
        mut visit: impl FnMut(&[u8], V) -> bool,
    ) -> bool {
        if range_is_empty(lo, hi) {
            return true;
        }
        let map = self.read();
        match direction {
            Direction::Forward => {
                // The gap holding the start of the range, then the gap after each key seen.
                gap_before(&map, &self.head_gap, lo).fetch_max(stamp, Ordering::AcqRel);
                for (k, e) in map.range::<[u8], _>((lo, hi)) {
                    e.gap_after.fetch_max(stamp, Ordering::AcqRel);
                    if !visit(k, e.value) {
                        return false;
                    }
                }
                true
            }
            Direction::Reverse => {
                // Walk down from `hi` over *all* smaller keys: the first key below `lo` is the
                // one whose following gap holds the bottom of the range.
                for (k, e) in map.range::<[u8], _>((Bound::Unbounded, hi)).rev() {
                    e.gap_after.fetch_max(stamp, Ordering::AcqRel);
                    if !bound_admits_from_below(lo, k) {
                        return true;
                    }
                    if !visit(k, e.value) {
                        return false;
                    }
                }
                self.head_gap.fetch_max(stamp, Ordering::AcqRel);
                true
            }
        }
    }

    /// Calls `f` on every entry in key order. Holds the read lock throughout.
    pub fn for_each(&self, mut f: impl FnMut(&[u8], V)) {
        for (k, e) in self.read().iter() {
            f(k, e.value);
        }
    }

    /// Number of keys.
    pub fn len(&self) -> usize {
        self.read().len()
    }

    /// `true` when there are no keys.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The stamp cell of the gap that holds the keys just above `bound`: the gap after the
/// greatest key below it (`< k` for `Included(k)`, `<= k` for `Excluded(k)`), or the head gap.
fn gap_before<'m, V>(
    map: &'m BTreeMap<Box<[u8]>, Entry<V>>,
    head_gap: &'m AtomicU64,
    bound: Bound<&[u8]>,
) -> &'m AtomicU64 {
    let below = match bound {
        Bound::Unbounded => None,
        Bound::Included(k) => map
            .range::<[u8], _>((Bound::Unbounded, Bound::Excluded(k)))
            .next_back(),
        Bound::Excluded(k) => map
            .range::<[u8], _>((Bound::Unbounded, Bound::Included(k)))
            .next_back(),
    };
    below.map_or(head_gap, |(_, e)| &e.gap_after)
}

fn bound_admits_from_below(lo: Bound<&[u8]>, k: &[u8]) -> bool {
    match lo {
        Bound::Unbounded => true,
        Bound::Included(l) => k >= l,
        Bound::Excluded(l) => k > l,
    }
}

/// `BTreeMap::range` panics on inverted or doubly-excluded-equal bounds; such ranges are
/// simply empty to a user.
fn range_is_empty(lo: Bound<&[u8]>, hi: Bound<&[u8]>) -> bool {
    match (lo, hi) {
        (Bound::Included(l), Bound::Included(h)) => l > h,
        (Bound::Included(l), Bound::Excluded(h))
        | (Bound::Excluded(l), Bound::Included(h))
        | (Bound::Excluded(l), Bound::Excluded(h)) => l >= h,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    fn collect(t: &LockedBTree<u32>, lo: Bound<&[u8]>, hi: Bound<&[u8]>, d: Direction) -> Vec<u32> {
        let mut out = Vec::new();
        assert!(t.scan(lo, hi, d, 0, |_, v| {
            out.push(v);
            true
        }));
        out
    }

    #[test]
    fn empty_and_inverted_ranges_are_empty() {
        let t = LockedBTree::new();
        t.get_or_insert_with(b"m", |_| 1u32);
        let (a, z) = (b"z".as_slice(), b"a".as_slice());
        assert!(collect(
            &t,
            Bound::Included(a),
            Bound::Included(z),
            Direction::Forward
        )
        .is_empty());
        let m = b"m".as_slice();
        assert!(collect(
            &t,
            Bound::Excluded(m),
            Bound::Excluded(m),
            Direction::Reverse
        )
        .is_empty());
        assert_eq!(
            collect(
                &t,
                Bound::Included(m),
                Bound::Included(m),
                Direction::Reverse
            ),
            vec![1]
        );
    }

    /// A stamp left by a scan or an absent lookup must reach any later insert in the range,
    /// and must not reach an insert outside every stamped range... except conservatively
    /// through gaps the walk touched. Model: the set of stamped key intervals.
    #[derive(Debug, Clone)]
    enum Op {
        Insert(u8),
        Lookup(u8),
        Scan(u8, u8, bool),
        /// Removes the key, leaving the op's stamp where it was.
        Remove(u8),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (0u8..32).prop_map(Op::Insert),
            (0u8..32).prop_map(Op::Lookup),
            (0u8..32, 0u8..32, any::<bool>()).prop_map(|(a, b, r)| Op::Scan(a, b, r)),
            (0u8..32).prop_map(Op::Remove),
        ]
    }

    proptest! {
        #[test]
        fn stamps_reach_every_insert_they_cover(ops in proptest::collection::vec(op(), 1..60)) {
            let t = LockedBTree::new();
            let mut model = BTreeSet::new();
            // (lo, hi, stamp) of every covered interval, inclusive.
            let mut covered: Vec<(u8, u8, u64)> = Vec::new();
            for (i, op) in ops.into_iter().enumerate() {
                let stamp = i as u64 + 1;
                match op {
                    Op::Insert(k) => {
                        let (v, inserted) = t.get_or_insert_with(&[k], |s| (u32::from(k) << 16) | s as u32);
                        prop_assert_eq!(inserted, model.insert(k));
                        if inserted {
                            let gap = u64::from(v & 0xffff);
                            for &(lo, hi, s) in &covered {
                                if lo <= k && k <= hi {
                                    prop_assert!(gap >= s, "insert of {} missed stamp {}", k, s);
                                }
                            }
                        }
                    }
                    Op::Lookup(k) => {
                        let got = t.get_or_stamp(&[k], stamp).map(|v| (v >> 16) as u8);
                        prop_assert_eq!(got, model.get(&k).copied());
                        if got.is_none() { covered.push((k, k, stamp)); }
                    }
                    Op::Remove(k) => {
                        let got = t.remove_if(&[k], stamp, |_| true).map(|v| (v >> 16) as u8);
                        prop_assert_eq!(got, model.take(&k));
                        if got.is_some() { covered.push((k, k, stamp)); }
                    }
                    Op::Scan(a, b, rev) => {
                        let (lo, hi) = (a.min(b), a.max(b));
                        let (l, h) = ([lo], [hi]);
                        let d = if rev { Direction::Reverse } else { Direction::Forward };
                        let mut seen = Vec::new();
                        t.scan(Bound::Included(&l), Bound::Included(&h), d, stamp, |k, _| { seen.push(k[0]); true });
                        let mut want: Vec<u8> = model.range(lo..=hi).copied().collect();
                        if rev { want.reverse(); }
                        prop_assert_eq!(seen, want);
                        covered.push((lo, hi, stamp));
                    }
                }
            }
        }
    }
}
