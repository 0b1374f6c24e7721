//! What the group's log holds: the server's inputs, each named by a uid. The replicated
//! application is the list of them applied (`verso_vsr::op_log::OpLog`): the host rebuilds
//! the server from it.

use std::fmt::Debug;
use std::hash::{Hash, Hasher};

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

/// The replicated application: the inputs applied, in log order.
pub(crate) type InputLog<M> = verso_vsr::op_log::OpLog<Logged<M>>;
