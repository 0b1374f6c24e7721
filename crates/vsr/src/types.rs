//! Names for the protocol's numbers (thesis Fig 4-2a).

use std::fmt;

/// A replica's index in the group, `0..replica_count`.
pub type ReplicaId = u8;

/// A client's identity, unique over the group's lifetime (the client table is keyed by it).
pub type ClientId = u64;

/// The most replicas a group may have (2f+1 with f = 7). Bounds every per-replica array.
pub const REPLICAS_MAX: usize = 15;

/// A view number: a counter with the primary's id in the low bits, so two candidates never
/// pick the same number (thesis §4.2.2, Lemma 4.3.1). Ordered by counter, then by id.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct ViewNum {
    pub counter: u64,
    pub replica: ReplicaId,
}

impl ViewNum {
    /// The view before any election: no primary, no entry.
    pub const ZERO: ViewNum = ViewNum {
        counter: 0,
        replica: 0,
    };

    /// The first view above `self` that `candidate` leads (the spec's `NextViewNum`).
    pub fn next_for(self, candidate: ReplicaId) -> ViewNum {
        ViewNum {
            counter: self.counter + 1,
            replica: candidate,
        }
    }

    /// The replica that leads this view.
    pub fn leader(self) -> ReplicaId {
        self.replica
    }
}

impl fmt::Display for ViewNum {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.counter, self.replica)
    }
}

/// A viewstamp `<view, op>`: names one log entry. Ordered by view, then op number; op numbers
/// have no gaps along one replica's log. `ZERO` is the spec's `NonViewstamp`, the empty log.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Viewstamp {
    pub view: ViewNum,
    pub op: u64,
}

impl Viewstamp {
    pub const ZERO: Viewstamp = Viewstamp {
        view: ViewNum::ZERO,
        op: 0,
    };
}

impl fmt::Display for Viewstamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "<{},{}>", self.view, self.op)
    }
}

/// Where a message goes or comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum Address {
    Replica(ReplicaId),
    Client(ClientId),
}
