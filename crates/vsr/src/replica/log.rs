//! A replica's log in memory: the thesis's `memLog` together with what of `diskLog` it
//! still needs (the spec keeps `memLog` a superset of `diskLog`: `FlushLog` copies one to
//! the other and `Restart` sets `memLog := diskLog`).

use std::collections::VecDeque;

use crate::message::Entry;
use crate::types::Viewstamp;

/// Invariants: `entries[i].vs.op == base.op + 1 + i`; each entry's `prev` is the viewstamp
/// before it (`base` for the first); viewstamps strictly increase. `stamps` holds the
/// viewstamps of ops `base.op - stamps.len() .. base.op` (entries folded into the
/// application's state whose effects can still be undone), oldest first.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Log<O> {
    base: Viewstamp,
    stamps: VecDeque<Viewstamp>,
    entries: VecDeque<Entry<O>>,
}

impl<O> Log<O> {
    pub(crate) fn new() -> Self {
        Log {
            base: Viewstamp::ZERO,
            stamps: VecDeque::new(),
            entries: VecDeque::new(),
        }
    }

    /// A log that starts after `base`, knowing the viewstamps `stamps` before it.
    pub(crate) fn starting_at(base: Viewstamp, stamps: Vec<Viewstamp>) -> Self {
        let log = Log {
            base,
            stamps: stamps.into(),
            entries: VecDeque::new(),
        };
        log.check();
        log
    }

    pub fn base(&self) -> Viewstamp {
        self.base
    }

    /// The spec's `OpMax`: the last viewstamp of the log.
    pub(crate) fn op_max(&self) -> Viewstamp {
        self.entries.back().map_or(self.base, |e| e.vs)
    }

    /// The lowest op number whose viewstamp this log knows.
    fn stamps_from(&self) -> u64 {
        self.base.op - self.stamps.len() as u64
    }

    /// The viewstamp of op `op`, if this log knows it.
    pub(crate) fn stamp(&self, op: u64) -> Option<Viewstamp> {
        if op == self.base.op {
            Some(self.base)
        } else if op < self.base.op {
            let from = self.stamps_from();
            (op >= from).then(|| self.stamps[(op - from) as usize])
        } else {
            self.entry(op).map(|e| e.vs)
        }
    }

    /// Whether `vs` is in this log (or is its base, or a known folded entry).
    pub(crate) fn contains(&self, vs: Viewstamp) -> bool {
        vs == Viewstamp::ZERO || self.stamp(vs.op) == Some(vs)
    }

    pub(crate) fn entry(&self, op: u64) -> Option<&Entry<O>> {
        let i = op.checked_sub(self.base.op + 1)?;
        self.entries.get(usize::try_from(i).ok()?)
    }

    /// Entries after op `after`, at most `max`.
    pub(crate) fn entries_after(&self, after: u64, max: usize) -> impl Iterator<Item = &Entry<O>> {
        let skip = after.saturating_sub(self.base.op) as usize;
        self.entries.iter().skip(skip).take(max)
    }

    /// The spec's `LowerBound`: the largest viewstamp in this log at or below `vs`; `None`
    /// if every viewstamp this log knows is above it (the log was discarded that far).
    pub(crate) fn lower_bound(&self, vs: Viewstamp) -> Option<Viewstamp> {
        if vs >= self.base {
            let i = self.entries.partition_point(|e| e.vs <= vs);
            return Some(if i == 0 {
                self.base
            } else {
                self.entries[i - 1].vs
            });
        }
        let i = self.stamps.partition_point(|s| *s <= vs);
        (i > 0).then(|| self.stamps[i - 1])
    }

    pub(crate) fn append(&mut self, entry: Entry<O>) {
        assert_eq!(
            entry.prev,
            self.op_max(),
            "an entry must follow the log's end"
        );
        assert_eq!(entry.vs.op, self.op_max().op + 1, "op numbers have no gaps");
        assert!(entry.vs > entry.prev, "viewstamps increase along the log");
        self.entries.push_back(entry);
    }

    /// Keeps only the viewstamps at or below `vs` (the spec's `TruncateLog`), returning the
    /// new end. The caller undoes what it applied above it.
    pub(crate) fn truncate_to(&mut self, vs: Viewstamp) -> Viewstamp {
        while self.entries.back().is_some_and(|e| e.vs > vs) {
            self.entries.pop_back();
        }
        if self.entries.is_empty() && self.base > vs {
            // Below the base: the folded viewstamps say how far.
            while self.base > vs {
                match self.stamps.pop_back() {
                    Some(s) => self.base = s,
                    None => panic!(
                        "truncating to {vs} below everything the log knows ({})",
                        self.base
                    ),
                }
            }
        }
        self.check();
        self.op_max()
    }

    /// Folds entries up to op `through` into the base (they are in a checkpoint), keeping
    /// the viewstamps above op `keep_stamps_above` (they may still be undone).
    pub(crate) fn fold_through(&mut self, through: u64, keep_stamps_above: u64) {
        while self.entries.front().is_some_and(|e| e.vs.op <= through) {
            let e = self.entries.pop_front().expect("checked");
            self.stamps.push_back(self.base);
            self.base = e.vs;
        }
        self.forget_stamps_through(keep_stamps_above);
    }

    /// Drops folded viewstamps below op `op` (they can no longer be undone).
    pub(crate) fn forget_stamps_through(&mut self, op: u64) {
        while !self.stamps.is_empty() && self.stamps_from() < op {
            self.stamps.pop_front();
        }
    }

    /// The viewstamps of ops `after+1 ..= op_max()` that this log knows.
    pub(crate) fn stamps_after(&self, after: u64) -> Vec<Viewstamp> {
        (after + 1..=self.op_max().op)
            .filter_map(|op| self.stamp(op))
            .collect()
    }

    fn check(&self) {
        debug_assert!(self
            .entries
            .iter()
            .enumerate()
            .all(|(i, e)| e.vs.op == self.base.op + 1 + i as u64));
        debug_assert!(self
            .stamps
            .iter()
            .zip(self.stamps.iter().skip(1))
            .all(|(a, b)| a < b));
        assert!(self.stamps.back().is_none_or(|s| *s < self.base));
    }
}

#[cfg(test)]
mod tests {
    //! The log against a model: a plain vector of every viewstamp from op 0, with the
    //! range the log still knows.
    use proptest::prelude::*;

    use super::*;
    use crate::message::Body;
    use crate::types::ViewNum;

    #[derive(Clone, Debug)]
    enum Step {
        /// Append an entry in view `counter` (kept at or above the last one's).
        Append(u64),
        /// Truncate to the viewstamp at index `i % len` of the known ones, or just above it.
        Truncate(usize, bool),
        /// Fold through op `i % len`, keeping stamps above op `j % len`.
        Fold(usize, usize),
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            4 => (0u64..3).prop_map(Step::Append),
            1 => (any::<usize>(), any::<bool>()).prop_map(|(i, b)| Step::Truncate(i, b)),
            1 => (any::<usize>(), any::<usize>()).prop_map(|(i, j)| Step::Fold(i, j)),
        ]
    }

    proptest! {
        #[test]
        fn log_matches_a_vector_of_stamps(steps in proptest::collection::vec(step(), 1..80)) {
            let mut log: Log<()> = Log::new();
            // model[op] = the viewstamp of op; `known_from` = first op the log knows.
            let mut model = vec![Viewstamp::ZERO];
            let mut known_from = 0u64;
            for s in steps {
                match s {
                    Step::Append(bump) => {
                        let last = *model.last().unwrap();
                        let view = ViewNum { counter: last.view.counter + bump, replica: 0 };
                        let vs = Viewstamp { view, op: last.op + 1 };
                        log.append(Entry { vs, prev: last, body: Body::ViewStart });
                        model.push(vs);
                    }
                    Step::Truncate(i, above) => {
                        let n = model.len() as u64 - known_from;
                        let target_op = known_from + (i as u64 % n);
                        let mut target = model[target_op as usize];
                        if above {
                            // A viewstamp not in the log, between two that are.
                            target.op += 1;
                            if model.get(target.op as usize).is_some_and(|m| *m <= target) {
                                target = model[target.op as usize];
                            }
                        }
                        let end = log.truncate_to(target);
                        let keep = model.iter().take_while(|m| **m <= target).count();
                        model.truncate(keep.max(known_from as usize + 1));
                        prop_assert_eq!(end, *model.last().unwrap());
                    }
                    Step::Fold(i, j) => {
                        let n = model.len() as u64;
                        let through = (i as u64 % n).max(log.base().op);
                        let keep_above = (j as u64 % n).min(through);
                        log.fold_through(through, keep_above);
                        known_from = known_from.max(keep_above);
                    }
                }
                prop_assert_eq!(log.op_max(), *model.last().unwrap());
                for (op, vs) in model.iter().enumerate() {
                    let op = op as u64;
                    if op >= known_from {
                        prop_assert_eq!(log.stamp(op), Some(*vs));
                        prop_assert!(log.contains(*vs));
                        prop_assert_eq!(log.lower_bound(*vs), Some(*vs));
                    }
                    if op > log.base().op {
                        prop_assert_eq!(log.entry(op).map(|e| e.vs), Some(*vs));
                    }
                }
                prop_assert!(log.stamp(log.op_max().op + 1).is_none());
            }
        }
    }
}
