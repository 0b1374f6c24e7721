//! What a shard group's log holds: the server's inputs, each a protocol message (its binary
//! wire form) or a timer tick, with the host's clock when it ran, in batches (one request
//! per batch: the host hands over what it executed in one turn of its loop, as the
//! engine's replication batches commits). The replicated application is the list of
//! inputs applied, in log order, as in the simulator (`verso_ncc`'s
//! `replicated/vsr_group.rs`): a new host rebuilds its server by replaying it into a fresh
//! one.

use serde::{Deserialize, Serialize};
use verso_vsr::op_log::OpLog;
use verso_vsr::App;

/// One input as the log carries it. `uid` names it in the group (a host's random nonce
/// in the high half, a counter in the low), for tracing and tests.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct GroupInput {
    pub uid: u64,
    /// The host's clock (µs since the Unix epoch) when it executed the input: a replay
    /// executes it at the same time, so it decides the same way.
    pub at: u64,
    /// The message's binary wire form (`verso_ncc::wire`); `None`: a timer tick.
    #[serde(with = "serde_bytes")]
    pub msg: Option<Vec<u8>>,
}

impl GroupInput {
    /// At least its encoded size in a message or on disk.
    pub fn bytes(&self) -> usize {
        INPUT_OVERHEAD + self.msg.as_ref().map_or(0, Vec::len)
    }
}

/// Bytes an input adds to a message besides its own (uid, time, lengths, the entry's
/// stamps), an upper bound.
const INPUT_OVERHEAD: usize = 64;

/// One request of the log: inputs the host executed in one turn, in order.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct GroupBatch {
    pub inputs: Vec<GroupInput>,
}

impl GroupBatch {
    /// At least its encoded size.
    pub fn bytes(&self) -> usize {
        self.inputs.iter().map(GroupInput::bytes).sum()
    }
}

/// The replicated application: the inputs applied, each with its operation number (the
/// list of `verso_vsr::op_log::OpLog`, which a batch extends by all its inputs at once).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct InputLog {
    pub inputs: OpLog<GroupInput>,
}

impl InputLog {
    /// (operation number, input), oldest first.
    pub fn applied(&self) -> &[(u64, GroupInput)] {
        &self.inputs.applied
    }
}

impl App for InputLog {
    type Op = GroupBatch;
    type Reply = ();
    type Snapshot = Vec<(u64, GroupInput)>;

    fn apply(&mut self, op_number: u64, op: &GroupBatch) {
        for input in &op.inputs {
            self.inputs.apply(op_number, input);
        }
    }

    fn undo_to(&mut self, op_number: u64) {
        self.inputs.undo_to(op_number);
    }

    fn forget_undo(&mut self, _op_number: u64) {}

    fn snapshot(&self) -> Self::Snapshot {
        self.inputs.snapshot()
    }

    fn restore(&mut self, snapshot: &Self::Snapshot) {
        self.inputs.restore(snapshot);
    }

    /// Bounds what one replica message carries (`Config::message_bytes_max`), so that
    /// PREPAREs and catch-up replies fit a frame.
    fn op_bytes(op: &GroupBatch) -> usize {
        op.bytes()
    }
}

/// A message between the replicas of a group.
pub type ReplicaMsg = verso_vsr::MessageOf<InputLog>;
/// A write to a replica's disk.
pub type LogWrite = verso_vsr::DiskWrite<GroupBatch, (), Vec<(u64, GroupInput)>>;
/// What a replica's disk holds.
pub type LogDurable = verso_vsr::Durable<GroupBatch, (), Vec<(u64, GroupInput)>>;

/// A replica message's bytes (postcard).
pub fn encode_msg(m: &ReplicaMsg) -> Vec<u8> {
    postcard::to_allocvec(m).expect("a replica message serializes")
}

/// Decodes a replica message from bytes off the network: an error, never a panic.
pub fn decode_msg(bytes: &[u8]) -> Result<ReplicaMsg, postcard::Error> {
    postcard::from_bytes(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(uid: u64) -> GroupInput {
        GroupInput {
            uid,
            at: 10 * uid,
            msg: uid.is_multiple_of(2).then(|| vec![uid as u8; uid as usize]),
        }
    }

    #[test]
    fn undo_drops_the_tail_and_a_snapshot_restores() {
        let mut log = InputLog::default();
        let batch = |uids: &[u64]| GroupBatch {
            inputs: uids.iter().map(|&u| input(u)).collect(),
        };
        log.apply(1, &batch(&[1]));
        log.apply(2, &batch(&[2, 3]));
        log.apply(3, &batch(&[4]));
        let snap = log.snapshot();
        log.undo_to(1);
        assert_eq!(log.applied(), [(1, input(1))]);
        log.restore(&snap);
        log.undo_to(2);
        assert_eq!(
            log.applied(),
            vec![(1, input(1)), (2, input(2)), (2, input(3))]
        );
    }

    #[test]
    fn messages_round_trip_and_garbage_is_refused() {
        let m: ReplicaMsg = verso_vsr::Message::Stale { client: 7, seq: 9 };
        let bytes = encode_msg(&m);
        assert_eq!(decode_msg(&bytes).unwrap(), m);
        for cut in 0..bytes.len() {
            // A prefix either fails or decodes to something (never a panic).
            let _ = decode_msg(&bytes[..cut]);
        }
        assert!(decode_msg(&[0xff; 16]).is_err());
    }
}
