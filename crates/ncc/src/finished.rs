//! What a server knows of its clients' finished transactions: each incarnation of a client
//! names, on its requests, the range of its own sequence numbers it has finished
//! ([`Finished`]: decided, and the decision acknowledged by every server it reached). A
//! server forgets the records in those ranges and treats a message about a transaction in
//! one that it has no record of as a late duplicate. Shared by NCC's server and the
//! baselines'.
//!
//! The ranges are kept per incarnation, not as one mark per client: a process that takes
//! over the id of one that died inside a transaction numbers its own transactions above,
//! and the dead one's transaction, below the new range, stays a question the backup
//! coordinator may ask (`Finished` says why). Adjacent ranges merge, so a server keeps one
//! range per incarnation that left a gap: one per client process that died or stopped
//! before finishing its last transaction, 16 bytes each.

use std::collections::BTreeMap;
use std::ops::Range;

use crate::types::{ClientId, Finished, TxnId};

/// Per client, the disjoint, non-adjacent ranges of sequence numbers finished, keyed by
/// `(client, start)` with the end as value.
///
/// Invariant: for one client, each range is non-empty and ends before the next one starts.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub(crate) struct FinishedMarks(BTreeMap<(ClientId, u64), u64>);

impl FinishedMarks {
    /// Adds `done` to `client`'s finished ranges; a range holding every number newly
    /// covered, if any (a message may be late and carry an older range).
    fn raise(&mut self, client: ClientId, done: Finished) -> Option<Range<u64>> {
        if done.below <= done.from {
            return None;
        }
        // The range that starts at or before `done.from`, if it reaches it, grows;
        // otherwise `done` starts a range of its own.
        let below_or_at = self
            .0
            .range((client, 0)..=(client, done.from))
            .next_back()
            .map(|(&(_, start), &end)| (start, end));
        let (start, newly) = match below_or_at {
            Some((start, end)) if end >= done.from => {
                if done.below <= end {
                    return None;
                }
                (start, end..done.below)
            }
            _ => (done.from, done.from..done.below),
        };
        let mut end = done.below;
        // Merge the ranges the grown one reaches (a later incarnation's, adjacent).
        let reached: Vec<(u64, u64)> = self
            .0
            .range((client, start + 1)..=(client, end))
            .map(|(&(_, s), &e)| (s, e))
            .collect();
        for (s, e) in reached {
            self.0.remove(&(client, s));
            end = end.max(e);
        }
        self.0.insert((client, start), end);
        Some(newly)
    }

    /// Adds `done` to `client`'s finished ranges and removes from `records` the
    /// transactions newly covered that `forgettable` allows (a server keeps one it still
    /// owes a decision). Returns the removed ones.
    pub(crate) fn forget<T>(
        &mut self,
        records: &mut BTreeMap<TxnId, T>,
        client: ClientId,
        done: Finished,
        forgettable: impl Fn(&T) -> bool,
    ) -> Vec<TxnId> {
        let Some(newly) = self.raise(client, done) else {
            return Vec::new();
        };
        let from = TxnId {
            client,
            seq: newly.start,
        };
        let to = TxnId {
            client,
            seq: newly.end,
        };
        let gone: Vec<TxnId> = records
            .range(from..to)
            .filter(|(_, t)| forgettable(t))
            .map(|(&id, _)| id)
            .collect();
        for txn in &gone {
            records.remove(txn);
        }
        gone
    }

    /// Whether `txn`'s client has said it finished it.
    pub(crate) fn finished(&self, txn: TxnId) -> bool {
        self.0
            .range((txn.client, 0)..=(txn.client, txn.seq))
            .next_back()
            .is_some_and(|(_, &end)| txn.seq < end)
    }

    /// Every client's ranges of finished transactions (for invariant checks).
    pub(crate) fn ranges(&self) -> impl Iterator<Item = Range<TxnId>> + '_ {
        self.0.iter().map(|(&(client, start), &end)| {
            TxnId { client, seq: start }..TxnId { client, seq: end }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The model: the set of numbers some `done` covered.
    fn covered(dones: &[(u64, u64)], seq: u64) -> bool {
        dones
            .iter()
            .any(|&(from, below)| from <= seq && seq < below)
    }

    proptest! {
        /// Whatever order ranges arrive in, a number is finished (and its record gone)
        /// exactly when some range named it, and the stored ranges stay disjoint and
        /// non-adjacent.
        #[test]
        fn ranges_match_the_set_they_cover(
            dones in proptest::collection::vec((0u64..40, 0u64..12), 0..12),
        ) {
            let dones: Vec<(u64, u64)> = dones.iter().map(|&(f, l)| (f, f + l)).collect();
            let mut marks = FinishedMarks::default();
            let mut records: BTreeMap<TxnId, ()> = (0..60)
                .map(|seq| (TxnId { client: 3, seq }, ()))
                .collect();
            for &(from, below) in &dones {
                marks.forget(&mut records, 3, Finished { from, below }, |_| true);
            }
            for seq in 0..60 {
                let txn = TxnId { client: 3, seq };
                prop_assert_eq!(marks.finished(txn), covered(&dones, seq), "seq {}", seq);
                prop_assert_eq!(records.contains_key(&txn), !covered(&dones, seq));
                let other = TxnId { client: 4, seq };
                prop_assert!(!marks.finished(other), "another client's {}", seq);
            }
            let ranges: Vec<_> = marks.ranges().collect();
            for w in ranges.windows(2) {
                prop_assert!(w[0].start < w[0].end);
                prop_assert!(w[0].end < w[1].start, "{:?} and {:?} touch", w[0], w[1]);
            }
        }
    }

    /// The defect this shape fixes: a new incarnation's range leaves the dead one's
    /// unfinished transaction a live question.
    #[test]
    fn a_new_incarnation_does_not_finish_the_old_ones_gap() {
        let mut marks = FinishedMarks::default();
        let mut records: BTreeMap<TxnId, ()> = BTreeMap::new();
        records.insert(TxnId { client: 1, seq: 7 }, ());
        marks.forget(&mut records, 1, Finished { from: 1, below: 7 }, |_| true);
        marks.forget(
            &mut records,
            1,
            Finished {
                from: 1_000,
                below: 1_005,
            },
            |_| true,
        );
        assert!(marks.finished(TxnId { client: 1, seq: 6 }));
        assert!(!marks.finished(TxnId { client: 1, seq: 7 }));
        assert!(!marks.finished(TxnId {
            client: 1,
            seq: 999
        }));
        assert!(marks.finished(TxnId {
            client: 1,
            seq: 1_004
        }));
        assert!(records.contains_key(&TxnId { client: 1, seq: 7 }));
    }
}
