//! A small key-value application for tests, the simulator and the model checker: registers
//! of `u64` with get, put and delete, and an undo log.

use std::collections::BTreeMap;

use crate::app::App;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum KvOp {
    Get(u64),
    Put(u64, u64),
    Delete(u64),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum KvReply {
    /// A get's value.
    Value(Option<u64>),
    /// A put or delete was applied.
    Done,
}

/// Invariants: `undo` is ordered by op number, and every entry in it is above
/// `forgotten_through`; no undo is ever asked for below `forgotten_through` (the protocol
/// promised those operations are durable), which `undo_to` asserts.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct KvApp {
    pub map: BTreeMap<u64, u64>,
    undo: Vec<(u64, u64, Option<u64>)>,
    forgotten_through: u64,
}

impl KvApp {
    pub fn new() -> Self {
        Self::default()
    }

    /// Applies `op` to a plain map: the sequential specification.
    pub fn apply_to(map: &mut BTreeMap<u64, u64>, op: &KvOp) -> KvReply {
        match *op {
            KvOp::Get(k) => KvReply::Value(map.get(&k).copied()),
            KvOp::Put(k, v) => {
                map.insert(k, v);
                KvReply::Done
            }
            KvOp::Delete(k) => {
                map.remove(&k);
                KvReply::Done
            }
        }
    }
}

impl App for KvApp {
    type Op = KvOp;
    type Reply = KvReply;
    type Snapshot = KvApp;

    fn apply(&mut self, op_number: u64, op: &KvOp) -> KvReply {
        assert!(op_number > self.forgotten_through);
        assert!(self.undo.last().is_none_or(|u| u.0 <= op_number));
        let key = match *op {
            KvOp::Get(_) => None,
            KvOp::Put(k, _) | KvOp::Delete(k) => Some(k),
        };
        if let Some(k) = key {
            self.undo.push((op_number, k, self.map.get(&k).copied()));
        }
        Self::apply_to(&mut self.map, op)
    }

    /// Its encoded size: a tag and two 8-byte words at most.
    fn op_bytes(op: &KvOp) -> usize {
        match op {
            KvOp::Put(..) => 17,
            KvOp::Get(_) | KvOp::Delete(_) => 9,
        }
    }

    fn undo_to(&mut self, op_number: u64) {
        assert!(
            op_number >= self.forgotten_through,
            "asked to undo to op {op_number}, below op {} whose undo information was dropped \
             because the protocol said it was durable",
            self.forgotten_through
        );
        while self.undo.last().is_some_and(|u| u.0 > op_number) {
            let (_, k, before) = self.undo.pop().expect("checked");
            match before {
                Some(v) => self.map.insert(k, v),
                None => self.map.remove(&k),
            };
        }
    }

    fn forget_undo(&mut self, op_number: u64) {
        if op_number <= self.forgotten_through {
            return;
        }
        self.forgotten_through = op_number;
        let keep = self.undo.partition_point(|u| u.0 <= op_number);
        self.undo.drain(..keep);
    }

    fn snapshot(&self) -> KvApp {
        self.clone()
    }

    fn restore(&mut self, snapshot: &KvApp) {
        *self = snapshot.clone();
    }
}
