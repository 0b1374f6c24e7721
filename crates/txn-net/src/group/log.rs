//! What a shard group's log holds: the server's inputs, each a protocol message (its binary
//! wire form) or a timer tick, with the host's clock when it ran, in batches (one request
//! per batch: the host hands over what it executed while its previous request was in
//! flight, as the engine's replication batches commits). The replicated application is the list of
//! inputs applied, in log order, as in the simulator (`verso_ncc`'s
//! `replicated/vsr_group.rs`): a new host rebuilds its server by replaying it into a fresh
//! one.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
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

/// One request of the log: inputs the host executed while its previous request was in
/// flight, in order. Shared, not copied: the replica's log entry, its messages and the
/// application's list of inputs all hold the same batch (the log is most of a replica's memory). On the
/// wire and on disk it is the list itself.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct GroupBatch {
    pub inputs: Arc<Vec<GroupInput>>,
}

impl GroupBatch {
    /// At least its encoded size.
    pub fn bytes(&self) -> usize {
        self.inputs.iter().map(GroupInput::bytes).sum()
    }
}

/// The replicated application: the inputs applied, batch by batch, each batch with its
/// operation number (a batch's inputs share it, as in `verso_vsr::op_log::OpLog`, whose
/// snapshot form this keeps).
#[derive(Clone, Debug, Default)]
pub struct InputLog {
    /// (operation number, index of the batch's first input in the whole list, batch),
    /// oldest first.
    batches: Vec<(u64, usize, Arc<Vec<GroupInput>>)>,
    len: usize,
}

/// Two logs are equal when they hold the same inputs at the same operation numbers,
/// however batched (a restore from a snapshot merges batches that share a number).
impl PartialEq for InputLog {
    fn eq(&self, other: &InputLog) -> bool {
        self.len == other.len && self.flat().eq(other.flat())
    }
}

impl Eq for InputLog {}

impl std::hash::Hash for InputLog {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.len.hash(state);
        self.flat().for_each(|x| x.hash(state));
    }
}

impl PartialOrd for InputLog {
    fn partial_cmp(&self, other: &InputLog) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for InputLog {
    fn cmp(&self, other: &InputLog) -> std::cmp::Ordering {
        self.flat().cmp(other.flat())
    }
}

impl InputLog {
    /// (operation number, input), oldest first, without copying.
    fn flat(&self) -> impl Iterator<Item = (u64, &GroupInput)> {
        self.batches
            .iter()
            .flat_map(|(op, _, inputs)| inputs.iter().map(move |i| (*op, i)))
    }

    /// How many inputs it holds.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The inputs from the `from`th on (counting from 0), oldest first.
    pub fn inputs_from(&self, from: usize) -> impl Iterator<Item = &GroupInput> {
        let b = self.batches.partition_point(|(_, first, _)| *first <= from);
        let (skip, batches) = match b.checked_sub(1) {
            Some(b) => (from - self.batches[b].1, &self.batches[b..]),
            None => (0, &self.batches[..0]),
        };
        batches
            .iter()
            .flat_map(|(_, _, inputs)| inputs.iter())
            .skip(skip)
    }

    /// (operation number, input), oldest first: the snapshot form.
    pub fn applied(&self) -> Vec<(u64, GroupInput)> {
        self.flat().map(|(op, i)| (op, i.clone())).collect()
    }

    fn push(&mut self, op_number: u64, inputs: Arc<Vec<GroupInput>>) {
        debug_assert!(self.batches.last().is_none_or(|(n, _, _)| *n <= op_number));
        if inputs.is_empty() {
            return;
        }
        let n = inputs.len();
        self.batches.push((op_number, self.len, inputs));
        self.len += n;
    }
}

impl App for InputLog {
    type Op = GroupBatch;
    type Reply = ();
    type Snapshot = Vec<(u64, GroupInput)>;

    fn apply(&mut self, op_number: u64, op: &GroupBatch) {
        self.push(op_number, Arc::clone(&op.inputs));
    }

    fn undo_to(&mut self, op_number: u64) {
        while self.batches.last().is_some_and(|(n, _, _)| *n > op_number) {
            let (_, first, _) = self.batches.pop().expect("checked");
            self.len = first;
        }
    }

    fn forget_undo(&mut self, _op_number: u64) {}

    fn snapshot(&self) -> Self::Snapshot {
        self.applied()
    }

    fn restore(&mut self, snapshot: &Self::Snapshot) {
        *self = InputLog::default();
        let mut at = 0;
        while at < snapshot.len() {
            let op = snapshot[at].0;
            let end = at + snapshot[at..].partition_point(|(n, _)| *n == op);
            let inputs = snapshot[at..end].iter().map(|(_, i)| i.clone()).collect();
            self.push(op, Arc::new(inputs));
            at = end;
        }
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
            inputs: Arc::new(uids.iter().map(|&u| input(u)).collect()),
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

    #[derive(Clone, Debug)]
    enum Step {
        /// A batch of this many inputs, at the next operation number.
        Apply(u8),
        /// Undo to this many operations back.
        Undo(u8),
        Snapshot,
        Restore,
    }

    fn step() -> impl proptest::strategy::Strategy<Value = Step> {
        use proptest::prelude::*;
        prop_oneof![
            4 => (0u8..5).prop_map(Step::Apply),
            1 => (0u8..4).prop_map(Step::Undo),
            1 => Just(Step::Snapshot),
            1 => Just(Step::Restore),
        ]
    }

    proptest::proptest! {
        /// The batched log against the plain list of inputs (`OpLog`, which it replaced):
        /// the same inputs, numbers and snapshots after any run of applies, undos and
        /// restores, and the same inputs from every position.
        #[test]
        fn the_batched_log_behaves_as_the_plain_list(
            steps in proptest::collection::vec(step(), 0..60)
        ) {
            use verso_vsr::op_log::OpLog;
            let mut log = InputLog::default();
            let mut model = OpLog::<GroupInput>::default();
            let (mut op, mut uid) = (0u64, 0u64);
            let mut snap = (Vec::new(), 0u64);
            for s in steps {
                match s {
                    Step::Apply(n) => {
                        op += 1;
                        let inputs: Vec<GroupInput> = (0..n)
                            .map(|_| {
                                uid += 1;
                                input(uid)
                            })
                            .collect();
                        for i in &inputs {
                            model.apply(op, i);
                        }
                        log.apply(op, &GroupBatch { inputs: Arc::new(inputs) });
                    }
                    Step::Undo(back) => {
                        op = op.saturating_sub(u64::from(back));
                        log.undo_to(op);
                        model.undo_to(op);
                    }
                    Step::Snapshot => snap = (log.snapshot(), op),
                    Step::Restore => {
                        log.restore(&snap.0);
                        model.restore(&snap.0);
                        op = snap.1;
                    }
                }
                proptest::prop_assert_eq!(log.snapshot(), model.snapshot());
                let mut restored = InputLog::default();
                restored.restore(&log.snapshot());
                proptest::prop_assert_eq!(&restored, &log);
                proptest::prop_assert_eq!(log.len(), model.applied.len());
                for from in 0..=model.applied.len() {
                    let got: Vec<&GroupInput> = log.inputs_from(from).collect();
                    let want: Vec<&GroupInput> =
                        model.applied[from..].iter().map(|(_, i)| i).collect();
                    proptest::prop_assert_eq!(got, want);
                }
            }
        }
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
