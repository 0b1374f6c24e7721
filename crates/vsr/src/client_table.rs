//! At-most-once execution (thesis §4.4.2): per client, the latest request executed and its
//! reply. Every replica keeps it, changes it only by executing log entries, rolls it back
//! with them, and checkpoints it with the application's state.

use std::collections::BTreeMap;

use crate::types::{ClientId, Viewstamp};

/// The latest request of one client that the log executed.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct ClientEntry<R> {
    pub seq: u64,
    pub result: R,
    /// The entry that executed it (for replies, eviction and rollback).
    pub vs: Viewstamp,
}

/// One change, kept until the entry that made it can no longer be rolled back.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
struct Change<R> {
    op: u64,
    client: ClientId,
    before: Option<ClientEntry<R>>,
    /// The entry evicted to make room, if any.
    evicted: Option<(ClientId, ClientEntry<R>)>,
}

/// The client table with its own undo information.
///
/// Invariants: at most `capacity` clients; `undo` is ordered by `op`, and holds a change
/// for every execution above the last `forget_undo` point.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct ClientTable<R> {
    clients: BTreeMap<ClientId, ClientEntry<R>>,
    undo: Vec<Change<R>>,
    capacity: usize,
}

/// What the table says about a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Seen<'a, R> {
    /// Never executed: execute it.
    New,
    /// The client's latest request: here is its reply.
    Latest(&'a ClientEntry<R>),
    /// Older than the client's latest: executed, reply gone.
    Older,
}

impl<R: Clone> ClientTable<R> {
    pub fn new(capacity: usize) -> Self {
        assert!(capacity > 0);
        ClientTable {
            clients: BTreeMap::new(),
            undo: Vec::new(),
            capacity,
        }
    }

    pub fn len(&self) -> usize {
        self.clients.len()
    }

    pub fn is_empty(&self) -> bool {
        self.clients.is_empty()
    }

    pub fn get(&self, client: ClientId) -> Option<&ClientEntry<R>> {
        self.clients.get(&client)
    }

    /// The highest sequence number of `client` executed (0 if none).
    pub fn last_seq(&self, client: ClientId) -> u64 {
        self.clients.get(&client).map_or(0, |e| e.seq)
    }

    pub fn seen(&self, client: ClientId, seq: u64) -> Seen<'_, R> {
        match self.clients.get(&client) {
            Some(e) if e.seq == seq => Seen::Latest(e),
            Some(e) if e.seq > seq => Seen::Older,
            _ => Seen::New,
        }
    }

    /// Records that entry `op` executed `seq` of `client` with `result`. When the table is
    /// full, the client whose latest request is oldest is evicted (deterministically, so
    /// every replica evicts the same one); a request of it that arrives later is executed
    /// again, the documented limit of at-most-once.
    pub fn record(&mut self, vs: Viewstamp, client: ClientId, seq: u64, result: R) {
        let op = vs.op;
        assert!(self.undo.last().is_none_or(|c| c.op <= op));
        let before = self.clients.get(&client).cloned();
        assert!(before.as_ref().is_none_or(|b| b.seq < seq));
        let mut evicted = None;
        if before.is_none() && self.clients.len() == self.capacity {
            let (&victim, _) = self
                .clients
                .iter()
                .min_by_key(|(id, e)| (e.vs.op, **id))
                .expect("a full table is not empty");
            let entry = self.clients.remove(&victim).expect("just found");
            evicted = Some((victim, entry));
        }
        self.clients.insert(client, ClientEntry { seq, result, vs });
        self.undo.push(Change {
            op,
            client,
            before,
            evicted,
        });
        assert!(self.clients.len() <= self.capacity);
    }

    /// Rolls back every execution by entries above `op`.
    pub fn undo_to(&mut self, op: u64) {
        while self.undo.last().is_some_and(|c| c.op > op) {
            let c = self.undo.pop().expect("checked");
            match c.before {
                Some(b) => self.clients.insert(c.client, b),
                None => self.clients.remove(&c.client),
            };
            if let Some((id, e)) = c.evicted {
                self.clients.insert(id, e);
            }
        }
    }

    /// Drops undo information for entries at or below `op` (they are durable).
    pub fn forget_undo(&mut self, op: u64) {
        let keep = self.undo.partition_point(|c| c.op <= op);
        self.undo.drain(..keep);
    }

    /// The lowest op number whose execution can still be undone, if any.
    pub fn undo_floor(&self) -> Option<u64> {
        self.undo.first().map(|c| c.op)
    }
}

#[cfg(test)]
mod tests {
    //! The table against a model that keeps a full copy of the table after every op
    //! number: undoing to op n must give back exactly the copy at n.
    use proptest::prelude::*;

    use super::*;
    use crate::types::ViewNum;

    fn vs(op: u64) -> Viewstamp {
        Viewstamp {
            view: ViewNum {
                counter: 1,
                replica: 0,
            },
            op,
        }
    }

    #[derive(Clone, Debug)]
    enum Step {
        Record(u64),
        Undo(u64),
        Forget(u64),
    }

    proptest! {
        #[test]
        fn undo_restores_every_earlier_table(
            steps in proptest::collection::vec(prop_oneof![
                5 => (0u64..6).prop_map(Step::Record),
                1 => (0u64..8).prop_map(Step::Undo),
                1 => (0u64..8).prop_map(Step::Forget),
            ], 1..100)
        ) {
            let mut t: ClientTable<u64> = ClientTable::new(4);
            let mut copies: BTreeMap<u64, BTreeMap<ClientId, ClientEntry<u64>>> = BTreeMap::new();
            copies.insert(0, BTreeMap::new());
            let (mut op, mut forgotten) = (0u64, 0u64);
            for s in steps {
                match s {
                    Step::Record(client) => {
                        op += 1;
                        let seq = t.last_seq(client) + 1;
                        prop_assert_eq!(t.seen(client, seq), Seen::New);
                        t.record(vs(op), client, seq, op * 10);
                        prop_assert!(matches!(t.seen(client, seq), Seen::Latest(_)));
                        if seq > 1 {
                            prop_assert_eq!(t.seen(client, seq - 1), Seen::Older);
                        }
                        prop_assert!(t.len() <= 4);
                        copies.insert(op, t.clients.clone());
                    }
                    Step::Undo(back) => {
                        let to = op.saturating_sub(back).max(forgotten);
                        t.undo_to(to);
                        op = to;
                        copies.retain(|k, _| *k <= to);
                        prop_assert_eq!(&t.clients, copies.get(&to).unwrap());
                    }
                    Step::Forget(back) => {
                        forgotten = forgotten.max(op.saturating_sub(back));
                        t.forget_undo(forgotten);
                        prop_assert!(t.undo_floor().is_none_or(|f| f > forgotten));
                    }
                }
            }
        }
    }
}
