//! A data group's part in moves, as source and as target, and its answers to clients.
//!
//! The group's data is behind [`SlotData`]: the simulator's model keeps a map
//! ([`MapData`]), a server its engine. The protocol state here is the same for both.

use std::collections::{BTreeMap, BTreeSet};

use super::{
    Action, Entries, GroupId, GroupRecord, Key, Message, Mistakes, MoveId, Node, Reply, Request,
    Value, CHUNK_ENTRIES,
};
use crate::slot::{key_slot, Slot, SlotSet};

/// What a move reads of a group's data.
pub trait SlotData {
    /// A consistent snapshot of the keys of `slots` with their values, in chunks (each within
    /// the transport's message limit), for move `id`'s new attempt; from now on the store
    /// remembers which keys of `slots` are written, for [`SlotData::changes`].
    fn snapshot(&mut self, id: MoveId, slots: &SlotSet) -> Vec<Entries>;
    /// The keys of `slots` written since move `id`'s snapshot (or its last
    /// [`SlotData::drain_changes`]), with their values now (`None`: deleted), in chunks; it
    /// stops remembering. Called once the slots are frozen (nothing writes them).
    fn changes(&mut self, id: MoveId, slots: &SlotSet) -> Vec<Entries>;
    /// How many keys of move `id`'s slots were written since its snapshot or last drain.
    fn changed(&self, id: MoveId) -> usize;
    /// As [`SlotData::changes`], while the slots are still served: the writes go on being
    /// remembered from here (a catch-up round before the freeze).
    fn drain_changes(&mut self, id: MoveId, slots: &SlotSet) -> Vec<Entries>;
    /// The source freezes once at most this many keys changed since the last round (so the
    /// slots are refused only while that many keys go over).
    const FREEZE_AT: usize;
    /// Stops remembering writes for move `id` (its source ended, or restarted frozen).
    fn forget(&mut self, id: MoveId);
}

/// The data effects of committed records, for a store the group applies them to itself (the
/// model). A server applies each record's effect in the transaction that logs it instead
/// ([`Group::data_effect`], [`Group::committed_applied`]), so a crash never separates them.
pub trait SlotWrites {
    /// Writes `entries` (a chunk at the target, or the model's client write).
    fn apply(&mut self, entries: &[(Key, Option<Value>)]);
    /// Deletes every key of `slots` (the source after `EndSend`; the target when a new
    /// attempt replaces what an earlier one sent).
    fn drop_slots(&mut self, slots: &SlotSet);
}

/// The model's data: a map, and the keys written since each move's snapshot.
#[derive(Default)]
pub struct MapData {
    data: BTreeMap<Key, Value>,
    dirty: BTreeMap<MoveId, (SlotSet, BTreeSet<Key>)>,
}

impl MapData {
    pub fn get(&self, key: &[u8]) -> Option<&Value> {
        self.data.get(key)
    }

    fn read(&self, keys: BTreeSet<Key>) -> Vec<Entries> {
        let all: Entries = keys
            .into_iter()
            .map(|k| {
                let v = self.data.get(&k).cloned();
                (k, v)
            })
            .collect();
        all.chunks(CHUNK_ENTRIES).map(<[_]>::to_vec).collect()
    }
}

impl SlotData for MapData {
    fn snapshot(&mut self, id: MoveId, slots: &SlotSet) -> Vec<Entries> {
        self.dirty.insert(id, (slots.clone(), BTreeSet::new()));
        let all: Entries = self
            .data
            .iter()
            .filter(|(k, _)| slots.contains(key_slot(k)))
            .map(|(k, v)| (k.clone(), Some(v.clone())))
            .collect();
        all.chunks(CHUNK_ENTRIES).map(<[_]>::to_vec).collect()
    }

    fn forget(&mut self, id: MoveId) {
        self.dirty.remove(&id);
    }

    fn changes(&mut self, id: MoveId, _slots: &SlotSet) -> Vec<Entries> {
        let keys = self.dirty.remove(&id).map(|(_, k)| k).unwrap_or_default();
        self.read(keys)
    }

    fn changed(&self, id: MoveId) -> usize {
        self.dirty.get(&id).map_or(0, |(_, k)| k.len())
    }

    fn drain_changes(&mut self, id: MoveId, _slots: &SlotSet) -> Vec<Entries> {
        let keys = self
            .dirty
            .get_mut(&id)
            .map(|(_, k)| std::mem::take(k))
            .unwrap_or_default();
        self.read(keys)
    }

    // Small, so the simulator's moves take catch-up rounds.
    const FREEZE_AT: usize = 2;
}

impl SlotWrites for MapData {
    fn apply(&mut self, entries: &[(Key, Option<Value>)]) {
        for (k, v) in entries {
            match v {
                Some(v) => self.data.insert(k.clone(), v.clone()),
                None => self.data.remove(k),
            };
            let slot = key_slot(k);
            for (slots, keys) in self.dirty.values_mut() {
                if slots.contains(slot) {
                    keys.insert(k.clone());
                }
            }
        }
    }

    fn drop_slots(&mut self, slots: &SlotSet) {
        self.data.retain(|k, _| !slots.contains(key_slot(k)));
    }
}

/// Catch-up rounds before a source freezes, at most (`Group::freeze_if_streamed`).
pub const CATCH_UP_ROUNDS_MAX: u32 = 8;

/// How a group answers a request for one slot, before looking at the data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answer {
    /// Serve it from this group's data.
    Serve,
    Moved(GroupId),
    Ask(GroupId),
    TryAgain,
}

#[derive(Clone, Debug)]
struct Sending {
    slots: SlotSet,
    to: GroupId,
    attempt: u32,
    frozen: bool,
    /// `Freeze` appended, not yet committed: the slots are already refused.
    freezing: bool,
    /// This attempt's chunks so far (the snapshot, then the last one once frozen).
    chunks: Vec<(Entries, bool)>,
    /// Chunks the target has logged.
    acked: u32,
    /// Catch-up rounds sent in this attempt (each the keys written since the last).
    rounds: u32,
    /// The target said it sealed; `EndSend` is appended.
    ending: bool,
    /// This attempt's snapshot is taken (`BeginSend` or `Restream` committed): until then
    /// acknowledgements, perhaps of an attempt before a restart, mean nothing.
    streaming: bool,
}

#[derive(Clone, Debug)]
struct Receiving {
    slots: SlotSet,
    from: GroupId,
    attempt: u32,
    next_seq: u32,
    /// The chunk flagged `last` is logged: `EndRecv` is next.
    last_logged: bool,
    /// A record of this move is appended and not yet committed (one at a time, in order).
    appending: bool,
}

/// One data group: its data and its part in moves, folded from its log.
pub struct Group<D = MapData> {
    id: GroupId,
    mistakes: Mistakes,
    data: D,
    owned: SlotSet,
    sending: BTreeMap<MoveId, Sending>,
    receiving: BTreeMap<MoveId, Receiving>,
    /// Moves this group finished as source (`EndSend`) and as target (`EndRecv`).
    sent: BTreeSet<MoveId>,
    received: BTreeSet<MoveId>,
    /// For MOVED after a move out: the slot's new group.
    moved_to: BTreeMap<Slot, GroupId>,
    /// The source of each move this group sealed as target (to answer late chunks).
    received_from: BTreeMap<MoveId, GroupId>,
    /// `BeginSend`/`BeginRecv` appended and not yet committed.
    beginning: BTreeSet<MoveId>,
    out: Vec<Action<GroupRecord>>,
}

impl Group<MapData> {
    pub fn new(id: GroupId, mistakes: Mistakes) -> Group<MapData> {
        Group::with_data(id, mistakes, MapData::default())
    }

    /// Rebuilds the model group from its committed log, data included (what survived a
    /// failover or a total crash), then redoes what the log began and did not finish.
    pub fn recover(id: GroupId, mistakes: Mistakes, log: &[GroupRecord]) -> Group<MapData> {
        let mut g = Group::new(id, mistakes);
        for r in log {
            g.apply_data(r);
            g.apply(r);
        }
        g.redo();
        g
    }

    /// The value of `key` in this group's data, whether or not it serves it (for checkers).
    pub fn peek(&self, key: &[u8]) -> Option<&Value> {
        self.data.get(key)
    }

    pub fn request(&mut self, req: &Request, asking: bool) -> Reply {
        let key = match req {
            Request::Get(k) | Request::Put { key: k, .. } => k,
        };
        match self.answer(key_slot(key), asking) {
            Answer::Serve => match req {
                Request::Get(k) => Reply::Value(self.data.get(k).cloned()),
                Request::Put { key, value, tag } => {
                    self.out.push(Action::Append(GroupRecord::Put {
                        key: key.clone(),
                        value: value.clone(),
                        tag: *tag,
                    }));
                    Reply::Appended
                }
            },
            Answer::Moved(g) => Reply::Moved(g),
            Answer::Ask(g) => Reply::Ask(g),
            Answer::TryAgain => Reply::TryAgain,
        }
    }
}

impl<D: SlotData + SlotWrites> Group<D> {
    /// A record this group appended has committed: applies its effect on the data, then
    /// folds it in.
    pub fn committed(&mut self, r: &GroupRecord) {
        self.apply_data(r);
        self.committed_applied(r);
    }

    fn apply_data(&mut self, r: &GroupRecord) {
        if let GroupRecord::Put { key, value, .. } = r {
            self.data.apply(&[(key.clone(), value.clone())]);
            return;
        }
        let (empty, entries) = self.data_effect(r);
        if let Some(slots) = empty {
            self.data.drop_slots(&slots);
        }
        self.data.apply(entries);
    }
}

impl<D: SlotData> Group<D> {
    pub fn with_data(id: GroupId, mistakes: Mistakes, data: D) -> Group<D> {
        Group {
            id,
            mistakes,
            data,
            owned: SlotSet::default(),
            sending: BTreeMap::new(),
            receiving: BTreeMap::new(),
            sent: BTreeSet::new(),
            received: BTreeSet::new(),
            moved_to: BTreeMap::new(),
            received_from: BTreeMap::new(),
            beginning: BTreeSet::new(),
            out: Vec::new(),
        }
    }

    /// Rebuilds the group's part in moves from its committed log over `data`, which
    /// recovered with the log (a server's engine replays its own), then redoes what the log
    /// began and did not finish.
    pub fn resume(id: GroupId, mistakes: Mistakes, log: &[GroupRecord], data: D) -> Group<D> {
        let mut g = Group::with_data(id, mistakes, data);
        for r in log {
            g.apply(r);
        }
        g.redo();
        g
    }

    /// After recovery: what the log began and did not finish.
    fn redo(&mut self) {
        self.out.clear();
        // Each unfinished send streams again from a fresh snapshot, once a new attempt is
        // logged (a frozen source has lost its record of what changed since its snapshot,
        // so it sends everything; nothing changes while it is frozen).
        let restarts: Vec<(MoveId, u32)> = self
            .sending
            .iter()
            .map(|(id, s)| (*id, s.attempt + 1))
            .collect();
        for (id, attempt) in restarts {
            self.append(GroupRecord::Restream { id, attempt });
        }
        // A target that logged the last chunk and not `EndRecv` seals now.
        let sealing: Vec<MoveId> = self
            .receiving
            .iter()
            .filter(|(_, r)| r.last_logged)
            .map(|(id, _)| *id)
            .collect();
        for id in sealing {
            self.seal(id);
        }
    }

    pub fn data(&self) -> &D {
        &self.data
    }

    pub fn data_mut(&mut self) -> &mut D {
        &mut self.data
    }

    /// The slots this group owns (it may not serve them all: see [`Group::answer`]).
    pub fn owned(&self) -> &SlotSet {
        &self.owned
    }

    /// Moves this group takes part in now (as source or target), and of those it sends,
    /// the chunks the targets have logged and the chunks so far.
    pub fn progress(&self) -> (usize, u64, u64) {
        let (acked, total) = self.sending.values().fold((0, 0), |(a, t), s| {
            (a + u64::from(s.acked), t + s.chunks.len() as u64)
        });
        (self.sending.len() + self.receiving.len(), acked, total)
    }

    /// The slots this group sent away, with the group each went to.
    pub fn moved_away(&self) -> impl Iterator<Item = (Slot, GroupId)> + '_ {
        self.moved_to.iter().map(|(&s, &g)| (s, g))
    }

    /// Move `id`'s slots and the other group, while this group sends them.
    pub fn sending(&self, id: MoveId) -> Option<(&SlotSet, GroupId)> {
        self.sending.get(&id).map(|s| (&s.slots, s.to))
    }

    /// Move `id`'s slots and the other group, while this group receives them.
    pub fn receiving(&self, id: MoveId) -> Option<(&SlotSet, GroupId)> {
        self.receiving.get(&id).map(|r| (&r.slots, r.from))
    }

    /// Every slot in a move this group takes part in, as source or target.
    pub fn moving(&self) -> SlotSet {
        let mut all = SlotSet::default();
        let slots = self
            .sending
            .values()
            .map(|s| &s.slots)
            .chain(self.receiving.values().map(|r| &r.slots));
        for set in slots {
            for slot in set.iter() {
                all.insert(slot);
            }
        }
        all
    }

    pub fn id(&self) -> GroupId {
        self.id
    }

    /// Whether this group answers requests for `slot` from its own data right now.
    pub fn serves(&self, slot: Slot) -> bool {
        if !self.owned.contains(slot) {
            return false;
        }
        !self.sending.values().any(|s| {
            s.slots.contains(slot)
                && (s.frozen || s.freezing || s.ending)
                && !self.mistakes.source_serves_when_frozen
        })
    }

    /// How this group answers a request for `slot` right now (`asking`: the client sent
    /// ASKING, following an ASK redirect).
    pub fn answer(&self, slot: Slot, asking: bool) -> Answer {
        if self.serves(slot) {
            return Answer::Serve;
        }
        if self.owned.contains(slot) {
            // Frozen for a move: TRYAGAIN until the target has sealed, then ASK it (the
            // target serves; `EndSend` here is on its way), then MOVED once that commits.
            return match self.sending.values().find(|s| s.slots.contains(slot)) {
                Some(s) if s.ending => Answer::Ask(s.to),
                _ => Answer::TryAgain,
            };
        }
        if let Some(r) = self.receiving.values().find(|r| r.slots.contains(slot)) {
            return if asking {
                Answer::TryAgain
            } else {
                Answer::Moved(r.from)
            };
        }
        match self.moved_to.get(&slot) {
            Some(&g) => Answer::Moved(g),
            None => Answer::TryAgain, // no knowledge: the client asks the map again
        }
    }

    fn append(&mut self, r: GroupRecord) {
        self.out.push(Action::Append(r));
    }

    /// Folds one committed record into the protocol state (shared by recovery and live
    /// commits); its effect on the data is applied apart ([`Group::data_effect`]).
    fn apply(&mut self, r: &GroupRecord) {
        match r {
            GroupRecord::Put { .. } => {}
            GroupRecord::Own { slots } => {
                for s in slots.iter() {
                    self.owned.insert(s);
                }
            }
            GroupRecord::BeginSend { id, slots, to } => {
                self.beginning.remove(id);
                if !self.sent.contains(id) && !self.sending.contains_key(id) {
                    self.sending.insert(
                        *id,
                        Sending {
                            slots: slots.clone(),
                            to: *to,
                            attempt: 0,
                            frozen: false,
                            freezing: false,
                            chunks: Vec::new(),
                            acked: 0,
                            rounds: 0,
                            ending: false,
                            streaming: false,
                        },
                    );
                }
            }
            GroupRecord::Restream { id, attempt } => {
                if let Some(s) = self.sending.get_mut(id) {
                    s.attempt = s.attempt.max(*attempt);
                    s.chunks.clear();
                    s.streaming = false;
                }
            }
            GroupRecord::Freeze { id } => {
                if let Some(s) = self.sending.get_mut(id) {
                    s.frozen = true;
                }
            }
            GroupRecord::EndSend { id } => {
                self.data.forget(*id);
                if let Some(s) = self.sending.remove(id) {
                    for slot in s.slots.iter() {
                        self.owned.remove(slot);
                        self.moved_to.insert(slot, s.to);
                    }
                }
                self.sent.insert(*id);
            }
            GroupRecord::BeginRecv { id, slots, from } => {
                self.beginning.remove(id);
                if !self.received.contains(id) && !self.receiving.contains_key(id) {
                    self.receiving.insert(
                        *id,
                        Receiving {
                            slots: slots.clone(),
                            from: *from,
                            attempt: 0,
                            next_seq: 0,
                            last_logged: false,
                            appending: false,
                        },
                    );
                }
            }
            GroupRecord::RecvReset { id, attempt } => {
                if let Some(r) = self.receiving.get_mut(id) {
                    r.attempt = *attempt;
                    r.next_seq = 0;
                    r.last_logged = false;
                    r.appending = false;
                }
            }
            GroupRecord::Chunk {
                id,
                attempt,
                seq,
                last,
                ..
            } => {
                let Some(r) = self.receiving.get_mut(id) else {
                    return;
                };
                r.appending = false;
                if *attempt != r.attempt || *seq != r.next_seq {
                    return; // a duplicate: already applied
                }
                r.next_seq += 1;
                r.last_logged = *last;
            }
            GroupRecord::EndRecv { id } => {
                if let Some(r) = self.receiving.remove(id) {
                    for s in r.slots.iter() {
                        self.owned.insert(s);
                        self.moved_to.remove(&s);
                    }
                    self.received_from.insert(*id, r.from);
                }
                self.received.insert(*id);
            }
        }
    }

    /// What committing `r` does to the data, given this group's state before it commits:
    /// slots to empty, then entries to write. A chunk that repeats one already logged (a
    /// duplicate) does nothing.
    pub fn data_effect<'r>(
        &self,
        r: &'r GroupRecord,
    ) -> (Option<SlotSet>, &'r [(Key, Option<Value>)]) {
        match r {
            GroupRecord::Chunk {
                id,
                attempt,
                seq,
                entries,
                ..
            } => match self.receiving.get(id) {
                Some(rc) if rc.attempt == *attempt && rc.next_seq == *seq => (None, entries),
                _ => (None, &[]),
            },
            GroupRecord::EndSend { id } => (self.sending.get(id).map(|s| s.slots.clone()), &[]),
            GroupRecord::RecvReset { id, .. } => {
                (self.receiving.get(id).map(|r| r.slots.clone()), &[])
            }
            _ => (None, &[]),
        }
    }

    /// A record this group appended has committed, and the host applied its effect on the
    /// data ([`Group::data_effect`]) in the same transaction.
    pub fn committed_applied(&mut self, r: &GroupRecord) {
        self.apply(r);
        match r {
            // Each is committed once (an append lost to a failover never commits).
            GroupRecord::BeginSend { id, .. } | GroupRecord::Restream { id, .. } => {
                self.start_attempt(*id);
            }
            GroupRecord::Freeze { id } => {
                if let Some(s) = self.sending.get_mut(id) {
                    // The last chunks: everything written since the snapshot (or the last
                    // catch-up round); the final one is flagged.
                    let mut last = self.data.changes(*id, &s.slots);
                    if last.is_empty() {
                        last.push(Vec::new());
                    }
                    let n = last.len();
                    s.chunks
                        .extend(last.into_iter().enumerate().map(|(i, c)| (c, i + 1 == n)));
                    self.send_chunks(*id);
                }
            }
            GroupRecord::EndSend { id } => {
                self.out.push(Action::Send(
                    Node::Config,
                    Message::SendStatus {
                        id: *id,
                        ended: true,
                    },
                ));
            }
            GroupRecord::Chunk { id, last, .. } => {
                if *last && !self.mistakes.target_serves_before_endrecv {
                    self.seal(*id);
                }
                self.ack(*id);
            }
            GroupRecord::EndRecv { id } => self.sealed(*id),
            _ => {}
        }
    }

    /// Appends `EndRecv` for a move whose last chunk is logged.
    fn seal(&mut self, id: MoveId) {
        if let Some(r) = self.receiving.get_mut(&id) {
            if r.last_logged && !r.appending {
                r.appending = true;
                self.append(GroupRecord::EndRecv { id });
            }
        }
    }

    /// Tells the source and the configuration group that move `id` is sealed here.
    fn sealed(&mut self, id: MoveId) {
        if let Some(&from) = self.received_from.get(&id) {
            self.out.push(Action::Send(
                Node::Group(from),
                Message::ChunkAck {
                    id,
                    attempt: 0,
                    next_seq: 0,
                    sealed: true,
                },
            ));
        }
        self.out.push(Action::Send(
            Node::Config,
            Message::RecvStatus { id, sealed: true },
        ));
    }

    /// A fresh snapshot of the slots for the current attempt (all of them if frozen).
    fn start_attempt(&mut self, id: MoveId) {
        let Some(s) = self.sending.get_mut(&id) else {
            return;
        };
        s.chunks = self
            .data
            .snapshot(id, &s.slots)
            .into_iter()
            .map(|c| (c, false))
            .collect();
        if s.frozen {
            // Nothing writes frozen slots: the snapshot is the whole of it.
            s.chunks.push((Vec::new(), true));
            self.data.forget(id);
        }
        s.acked = 0;
        s.rounds = 0;
        s.streaming = true;
        self.send_chunks(id);
        self.freeze_if_streamed(id);
    }

    /// Once the target holds everything sent (at once, for slots without data): while more
    /// than `FREEZE_AT` keys changed since, another catch-up round of them goes while the
    /// slots are still served (at most [`CATCH_UP_ROUNDS_MAX`], so writes that outpace the
    /// move cannot hold it off); then the source freezes the slots to send the rest.
    fn freeze_if_streamed(&mut self, id: MoveId) {
        let Some(s) = self.sending.get_mut(&id) else {
            return;
        };
        if !s.streaming || s.acked as usize != s.chunks.len() || s.frozen || s.freezing {
            return;
        }
        if s.rounds < CATCH_UP_ROUNDS_MAX && self.data.changed(id) > D::FREEZE_AT {
            let round = self.data.drain_changes(id, &s.slots);
            s.rounds += 1;
            s.chunks.extend(round.into_iter().map(|c| (c, false)));
            self.send_chunks(id);
            return;
        }
        s.freezing = true;
        self.append(GroupRecord::Freeze { id });
    }

    /// (Re)sends the chunks the target has not acknowledged; once it has them all, the last
    /// one again, as a probe its seal answers (that answer may have been lost).
    fn send_chunks(&mut self, id: MoveId) {
        let Some(s) = self.sending.get(&id) else {
            return;
        };
        let from = if s.frozen && s.acked as usize == s.chunks.len() {
            s.chunks.len().saturating_sub(1)
        } else {
            s.acked as usize
        };
        for (seq, (entries, last)) in s.chunks.iter().enumerate().skip(from) {
            self.out.push(Action::Send(
                Node::Group(s.to),
                Message::Chunk {
                    id,
                    attempt: s.attempt,
                    seq: seq as u32,
                    entries: entries.clone(),
                    last: *last,
                },
            ));
        }
    }

    fn ack(&mut self, id: MoveId) {
        let (to, msg) = if let Some(r) = self.receiving.get(&id) {
            (
                r.from,
                Message::ChunkAck {
                    id,
                    attempt: r.attempt,
                    next_seq: r.next_seq,
                    sealed: false,
                },
            )
        } else {
            return;
        };
        self.out.push(Action::Send(Node::Group(to), msg));
    }

    pub fn tick(&mut self) {
        let ids: Vec<MoveId> = self.sending.keys().copied().collect();
        for id in ids {
            self.send_chunks(id);
        }
    }

    pub fn on_message(&mut self, from: Node, msg: &Message) {
        match msg {
            Message::BeginSend { id, slots, to } => {
                if self.sent.contains(id) || self.sending.contains_key(id) {
                    let ended = self.sent.contains(id);
                    self.out
                        .push(Action::Send(from, Message::SendStatus { id: *id, ended }));
                } else if self.beginning.insert(*id) {
                    self.append(GroupRecord::BeginSend {
                        id: *id,
                        slots: slots.clone(),
                        to: *to,
                    });
                }
            }
            Message::BeginRecv {
                id,
                slots,
                from: src,
            } => {
                if self.received.contains(id) || self.receiving.contains_key(id) {
                    let sealed = self.received.contains(id);
                    self.out
                        .push(Action::Send(from, Message::RecvStatus { id: *id, sealed }));
                } else if self.beginning.insert(*id) {
                    self.append(GroupRecord::BeginRecv {
                        id: *id,
                        slots: slots.clone(),
                        from: *src,
                    });
                }
            }
            Message::Chunk {
                id,
                attempt,
                seq,
                entries,
                last,
            } => self.on_chunk(*id, *attempt, *seq, entries, *last),
            Message::ChunkAck {
                id,
                attempt,
                next_seq,
                sealed,
            } => self.on_chunk_ack(*id, *attempt, *next_seq, *sealed),
            Message::SendStatus { .. } | Message::RecvStatus { .. } => {}
        }
    }

    fn on_chunk(
        &mut self,
        id: MoveId,
        attempt: u32,
        seq: u32,
        entries: &[(Key, Option<Value>)],
        last: bool,
    ) {
        if self.received.contains(&id) {
            // Sealed: say so again, so the source can end (the first answer may be lost).
            self.sealed(id);
            return;
        }
        let Some(r) = self.receiving.get_mut(&id) else {
            return; // BeginRecv not logged yet: the source sends again
        };
        if r.appending || attempt < r.attempt {
            return;
        }
        if r.last_logged {
            // Everything is logged; `EndRecv` was lost to a failover: seal again.
            self.seal(id);
            return;
        }
        if attempt > r.attempt {
            r.appending = true;
            self.append(GroupRecord::RecvReset { id, attempt });
            return; // the chunk comes again
        }
        if seq != r.next_seq {
            self.ack(id);
            return;
        }
        r.appending = true;
        let (from, slots) = (r.from, r.slots.clone());
        self.append(GroupRecord::Chunk {
            id,
            attempt,
            seq,
            entries: entries.to_vec(),
            last,
        });
        if last && self.mistakes.target_serves_before_endrecv {
            // The mistake: serve at once and tell the source it may end, before the last
            // chunk and `EndRecv` commit.
            if let Some(r) = self.receiving.get_mut(&id) {
                r.last_logged = true;
            }
            self.append(GroupRecord::EndRecv { id });
            for s in slots.iter() {
                self.owned.insert(s);
            }
            self.out.push(Action::Send(
                Node::Group(from),
                Message::ChunkAck {
                    id,
                    attempt,
                    next_seq: seq + 1,
                    sealed: true,
                },
            ));
        }
    }

    fn on_chunk_ack(&mut self, id: MoveId, attempt: u32, next_seq: u32, sealed: bool) {
        let Some(s) = self.sending.get_mut(&id) else {
            return;
        };
        if sealed {
            if !s.ending {
                s.ending = true;
                self.append(GroupRecord::EndSend { id });
            }
            return;
        }
        if attempt != s.attempt || !s.streaming {
            return;
        }
        s.acked = s.acked.max(next_seq);
        self.freeze_if_streamed(id);
    }

    /// The group's moves in progress, for a stuck run's report.
    pub fn describe(&self) -> String {
        let mut out = format!("group {}: ", self.id);
        for (id, s) in &self.sending {
            out += &format!(
                "sending {id} to {} attempt {} frozen={} freezing={} ending={} chunks={} acked={}; ",
                s.to, s.attempt, s.frozen, s.freezing, s.ending, s.chunks.len(), s.acked
            );
        }
        for (id, r) in &self.receiving {
            out += &format!(
                "receiving {id} from {} attempt {} next={} appending={}; ",
                r.from, r.attempt, r.next_seq, r.appending
            );
        }
        out += &format!("sent {:?} received {:?}", self.sent, self.received);
        out
    }

    pub fn drain(&mut self) -> Vec<Action<GroupRecord>> {
        std::mem::take(&mut self.out)
    }
}
