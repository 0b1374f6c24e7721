//! The configuration group's part in moves: the slot map and the log of moves.

use std::collections::BTreeMap;

use super::{Action, ConfigRecord, GroupId, Message, MoveId, Node};
use crate::slot::{Slot, SlotSet, SLOTS};

#[derive(Clone, Debug, PartialEq, Eq)]
enum Phase {
    Begun,
    Ended,
    Done,
}

#[derive(Clone, Debug)]
struct ConfigMove {
    slots: SlotSet,
    from: GroupId,
    to: GroupId,
    phase: Phase,
    /// An `End` or `Done` is appended and not yet committed (no second append).
    appending: bool,
}

/// The configuration group's state: the slot map and the moves, folded from its log.
pub struct Config {
    owner: Vec<Option<GroupId>>,
    epoch: u64,
    moves: BTreeMap<MoveId, ConfigMove>,
    next_id: MoveId,
    /// `Begin`s appended and not yet committed, by move id.
    beginning: BTreeMap<MoveId, SlotSet>,
    out: Vec<Action<ConfigRecord>>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            owner: vec![None; SLOTS],
            epoch: 0,
            moves: BTreeMap::new(),
            next_id: 1,
            beginning: BTreeMap::new(),
            out: Vec::new(),
        }
    }
}

/// Why a move cannot start.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MoveRefused {
    /// Some slot has no owner, or the slots belong to more than one group.
    NotOneOwner,
    /// The slots already belong to the target.
    AlreadyThere,
    /// Some slot is in a move that has not finished.
    Busy,
}

impl Config {
    /// Rebuilds the state from the committed log (after a failover or a total crash: every
    /// record is synchronous, so the log is whole).
    pub fn recover(log: &[ConfigRecord]) -> Config {
        let mut c = Config::default();
        for r in log {
            c.committed(r);
        }
        c.out.clear();
        c
    }

    pub fn owner(&self, slot: Slot) -> Option<GroupId> {
        self.owner[usize::from(slot)]
    }

    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Moves not yet `Done`.
    pub fn moves_in_flight(&self) -> usize {
        self.moves
            .values()
            .filter(|m| m.phase != Phase::Done)
            .count()
    }

    /// Starts moving `slots` to `to`: appends its `Begin` and returns its id. The move
    /// exists once that record commits; a failover before then loses it (start it again).
    pub fn start_move(&mut self, slots: SlotSet, to: GroupId) -> Result<MoveId, MoveRefused> {
        let mut from = None;
        for s in slots.iter() {
            match (self.owner(s), from) {
                (None, _) => return Err(MoveRefused::NotOneOwner),
                (Some(g), None) => from = Some(g),
                (Some(g), Some(f)) if g != f => return Err(MoveRefused::NotOneOwner),
                _ => {}
            }
        }
        let from = from.ok_or(MoveRefused::NotOneOwner)?;
        if from == to {
            return Err(MoveRefused::AlreadyThere);
        }
        let busy = self
            .moves
            .values()
            .any(|m| m.phase != Phase::Done && m.slots.intersects(&slots))
            || self.beginning.values().any(|b| b.intersects(&slots));
        if busy {
            return Err(MoveRefused::Busy);
        }
        // The id is taken now, so two moves begun before either commits differ.
        let id = self.next_id;
        self.next_id += 1;
        self.beginning.insert(id, slots.clone());
        self.out.push(Action::Append(ConfigRecord::Begin {
            id,
            slots,
            from,
            to,
        }));
        Ok(id)
    }

    pub fn committed(&mut self, r: &ConfigRecord) {
        match r {
            ConfigRecord::Assign { slots, group } => {
                for s in slots.iter() {
                    self.owner[usize::from(s)] = Some(*group);
                }
                self.epoch += 1;
            }
            ConfigRecord::Begin {
                id,
                slots,
                from,
                to,
            } => {
                self.next_id = self.next_id.max(id + 1);
                self.beginning.remove(id);
                self.moves.entry(*id).or_insert(ConfigMove {
                    slots: slots.clone(),
                    from: *from,
                    to: *to,
                    phase: Phase::Begun,
                    appending: false,
                });
                self.ask(*id);
            }
            ConfigRecord::End { id } => {
                if let Some(m) = self.moves.get_mut(id) {
                    if m.phase == Phase::Begun {
                        m.phase = Phase::Ended;
                        for s in m.slots.iter() {
                            self.owner[usize::from(s)] = Some(m.to);
                        }
                        self.epoch += 1;
                    }
                    m.appending = false;
                }
                self.ask(*id);
            }
            ConfigRecord::Done { id } => {
                if let Some(m) = self.moves.get_mut(id) {
                    m.phase = Phase::Done;
                    m.appending = false;
                }
            }
        }
    }

    /// Asks both groups of an unfinished move where they are.
    fn ask(&mut self, id: MoveId) {
        let Some(m) = self.moves.get(&id) else { return };
        if m.phase == Phase::Done {
            return;
        }
        self.out.push(Action::Send(
            Node::Group(m.from),
            Message::BeginSend {
                id,
                slots: m.slots.clone(),
                to: m.to,
            },
        ));
        self.out.push(Action::Send(
            Node::Group(m.to),
            Message::BeginRecv {
                id,
                slots: m.slots.clone(),
                from: m.from,
            },
        ));
    }

    pub fn tick(&mut self) {
        let ids: Vec<MoveId> = self.moves.keys().copied().collect();
        for id in ids {
            self.ask(id);
        }
    }

    pub fn on_message(&mut self, msg: &Message) {
        match msg {
            Message::RecvStatus { id, sealed: true } => {
                if let Some(m) = self.moves.get_mut(id) {
                    if m.phase == Phase::Begun && !m.appending {
                        m.appending = true;
                        self.out.push(Action::Append(ConfigRecord::End { id: *id }));
                    }
                }
            }
            Message::SendStatus { id, ended: true } => {
                if let Some(m) = self.moves.get_mut(id) {
                    if m.phase == Phase::Ended && !m.appending {
                        m.appending = true;
                        self.out
                            .push(Action::Append(ConfigRecord::Done { id: *id }));
                    }
                }
            }
            _ => {}
        }
    }

    /// The unfinished moves, for a stuck run's report.
    pub fn describe(&self) -> String {
        let mut out = String::new();
        for (id, m) in &self.moves {
            if m.phase != Phase::Done {
                out += &format!(
                    "move {id} {:?} {}->{} {:?} appending={}; ",
                    m.slots, m.from, m.to, m.phase, m.appending
                );
            }
        }
        out
    }

    pub fn drain(&mut self) -> Vec<Action<ConfigRecord>> {
        std::mem::take(&mut self.out)
    }
}
