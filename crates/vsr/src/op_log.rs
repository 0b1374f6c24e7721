//! The simplest replicated application: the operations applied, each with its operation
//! number, in log order. Undo drops the tail; a snapshot is the list. The simulators use it
//! when the state machine they replicate lives beside the replica and is rebuilt from the
//! log by whoever leads (Lazen's groups in `verso-cluster`, NCC's servers in `verso-ncc`).

use std::fmt::Debug;
use std::hash::Hash;

use crate::app::App;

#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OpLog<O> {
    /// (operation number, operation), oldest first.
    pub applied: Vec<(u64, O)>,
}

impl<O> Default for OpLog<O> {
    fn default() -> Self {
        OpLog {
            applied: Vec::new(),
        }
    }
}

impl<O: Clone + Debug + Eq + Hash + Ord> App for OpLog<O> {
    type Op = O;
    type Reply = ();
    type Snapshot = Vec<(u64, O)>;

    fn apply(&mut self, op_number: u64, op: &O) {
        debug_assert!(self.applied.last().is_none_or(|(n, _)| *n <= op_number));
        self.applied.push((op_number, op.clone()));
    }

    fn undo_to(&mut self, op_number: u64) {
        while self.applied.last().is_some_and(|(n, _)| *n > op_number) {
            self.applied.pop();
        }
    }

    fn forget_undo(&mut self, _op_number: u64) {}

    fn snapshot(&self) -> Self::Snapshot {
        self.applied.clone()
    }

    fn restore(&mut self, snapshot: &Self::Snapshot) {
        self.applied = snapshot.clone();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn undo_drops_the_operations_above_and_a_snapshot_restores() {
        let mut log = OpLog::default();
        for (n, op) in [(1, 'a'), (2, 'b'), (2, 'c'), (3, 'd')] {
            log.apply(n, &op);
        }
        let snap = log.snapshot();
        log.undo_to(1);
        assert_eq!(log.applied, vec![(1, 'a')]);
        log.restore(&snap);
        log.undo_to(2);
        assert_eq!(log.applied, vec![(1, 'a'), (2, 'b'), (2, 'c')]);
    }
}
