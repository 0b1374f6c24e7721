//! What the group's log holds: the server's inputs, each named by a uid, and the replicated
//! application that applies them (a list: the host rebuilds the server from it).

use std::fmt::Debug;
use std::hash::{Hash, Hasher};

use verso_vsr::App;

use crate::replicated::Input;

/// An input as the group's log carries it. `uid` names it across failovers (unique within
/// the group), and equality, order and hash are the uid's: the log asks them of its
/// operations, which a protocol's messages need not offer.
#[derive(Clone, Debug)]
pub(crate) struct Logged<M> {
    pub(super) uid: u64,
    pub(super) input: Input<M>,
}

impl<M> PartialEq for Logged<M> {
    fn eq(&self, other: &Self) -> bool {
        self.uid == other.uid
    }
}

impl<M> Eq for Logged<M> {}

impl<M> PartialOrd for Logged<M> {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl<M> Ord for Logged<M> {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.uid.cmp(&other.uid)
    }
}

impl<M> Hash for Logged<M> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.uid.hash(state);
    }
}

/// The replicated application: every input applied, with its operation number, in log
/// order. The server itself is rebuilt from it by the host (module docs), so undo is
/// dropping the tail.
#[derive(Clone, Debug)]
pub(crate) struct InputLog<M> {
    pub(super) applied: Vec<(u64, Logged<M>)>,
}

impl<M> Default for InputLog<M> {
    fn default() -> Self {
        InputLog {
            applied: Vec::new(),
        }
    }
}

impl<M: Clone + Debug> App for InputLog<M> {
    type Op = Logged<M>;
    type Reply = ();
    type Snapshot = Vec<(u64, Logged<M>)>;

    fn apply(&mut self, op_number: u64, op: &Logged<M>) {
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
