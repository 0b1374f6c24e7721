//! One move walked by hand, every message delivered at once and in order: the records each
//! party logs, and what a client sees at the source and the target at each stage.

use super::*;
use crate::slot::key_slot;

/// Every party, with logs that commit what is appended at once.
struct World {
    config: Config,
    groups: Vec<Group>,
    /// Messages in flight, delivered by `settle` (or held back by a test).
    inbox: Vec<(Node, Node, Message)>,
    group_logs: Vec<Vec<GroupRecord>>,
}

impl World {
    fn new(slots: &SlotSet) -> World {
        let mut config = Config::default();
        config.committed(&ConfigRecord::Assign {
            slots: slots.clone(),
            group: 0,
        });
        let own = GroupRecord::Own {
            slots: slots.clone(),
        };
        let g0 = Group::recover(0, Mistakes::default(), std::slice::from_ref(&own));
        let g1 = Group::recover(1, Mistakes::default(), &[]);
        World {
            config,
            groups: vec![g0, g1],
            inbox: Vec::new(),
            group_logs: vec![vec![own], vec![]],
        }
    }

    /// Commits what every party appended and queues what it sent; true if anything happened.
    fn pump(&mut self) -> bool {
        let mut any = false;
        for a in self.config.drain() {
            any = true;
            match a {
                Action::Append(r) => self.config.committed(&r),
                Action::Send(to, m) => self.inbox.push((Node::Config, to, m)),
            }
        }
        for g in 0..self.groups.len() {
            for a in self.groups[g].drain() {
                any = true;
                match a {
                    Action::Append(r) => {
                        self.group_logs[g].push(r.clone());
                        self.groups[g].committed(&r);
                    }
                    Action::Send(to, m) => self.inbox.push((Node::Group(g as GroupId), to, m)),
                }
            }
        }
        any
    }

    fn deliver_one(&mut self) -> bool {
        if self.inbox.is_empty() {
            return false;
        }
        let (from, to, m) = self.inbox.remove(0);
        match to {
            Node::Config => self.config.on_message(&m),
            Node::Group(g) => self.groups[usize::from(g)].on_message(from, &m),
        }
        true
    }

    fn settle(&mut self) {
        for _ in 0..10_000 {
            let pumped = self.pump();
            if !self.deliver_one() && !pumped {
                return;
            }
        }
        panic!("did not settle");
    }

    fn kinds(&self, g: usize) -> Vec<&'static str> {
        self.group_logs[g]
            .iter()
            .map(|r| match r {
                GroupRecord::Put { .. } => "Put",
                GroupRecord::Own { .. } => "Own",
                GroupRecord::BeginSend { .. } => "BeginSend",
                GroupRecord::Restream { .. } => "Restream",
                GroupRecord::Freeze { .. } => "Freeze",
                GroupRecord::EndSend { .. } => "EndSend",
                GroupRecord::BeginRecv { .. } => "BeginRecv",
                GroupRecord::RecvReset { .. } => "RecvReset",
                GroupRecord::Chunk { .. } => "Chunk",
                GroupRecord::EndRecv { .. } => "EndRecv",
            })
            .collect()
    }
}

fn put(key: &[u8], v: &str) -> Request {
    Request::Put {
        key: key.to_vec(),
        value: Some(v.as_bytes().to_vec()),
        tag: 0,
    }
}

#[test]
fn one_move_step_by_step() {
    let key = b"{t1}k".to_vec();
    let slot = key_slot(&key);
    let mut slots = SlotSet::default();
    slots.insert(slot);
    let mut w = World::new(&slots);
    // Twenty keys, so the snapshot takes three chunks.
    for i in 0..20 {
        let k = format!("{{t1}}k{i}").into_bytes();
        assert_eq!(w.groups[0].request(&put(&k, "old"), false), Reply::Appended);
    }
    w.pump();

    w.config.start_move(slots.clone(), 1).unwrap();
    assert_eq!(
        w.config.start_move(slots.clone(), 1),
        Err(MoveRefused::Busy),
        "one move per slot at a time"
    );
    // Begin, BeginSend/BeginRecv, the first snapshot chunks: the source still serves.
    for _ in 0..6 {
        w.pump();
        w.deliver_one();
    }
    assert!(w.groups[0].serves(slot));
    let k0 = b"{t1}k0".to_vec();
    assert_eq!(
        w.groups[0].request(&put(&k0, "new"), false),
        Reply::Appended
    );
    assert_eq!(
        w.groups[1].request(&Request::Get(k0.clone()), false),
        Reply::Moved(0),
        "the target redirects to the source until it has sealed"
    );
    assert_eq!(
        w.groups[1].request(&Request::Get(k0.clone()), true),
        Reply::TryAgain
    );
    w.settle();

    // Done: the target serves what the source had, including the write made mid-stream.
    assert_eq!(w.config.owner(slot), Some(1));
    assert_eq!(w.config.moves_in_flight(), 0);
    assert!(w.groups[1].serves(slot) && !w.groups[0].serves(slot));
    assert_eq!(
        w.groups[1].request(&Request::Get(k0.clone()), false),
        Reply::Value(Some(b"new".to_vec()))
    );
    assert_eq!(
        w.groups[1].request(&Request::Get(b"{t1}k19".to_vec()), false),
        Reply::Value(Some(b"old".to_vec()))
    );
    assert_eq!(
        w.groups[0].request(&Request::Get(k0.clone()), false),
        Reply::Moved(1)
    );
    assert_eq!(w.groups[0].peek(&k0), None, "the source deleted its copy");
    assert_eq!(
        w.kinds(0),
        [
            "Own",
            "Put",
            "Put",
            "Put",
            "Put",
            "Put",
            "Put",
            "Put",
            "Put",
            "Put",
            "Put",
            "Put",
            "Put",
            "Put",
            "Put",
            "Put",
            "Put",
            "Put",
            "Put",
            "Put",
            "Put",
            "BeginSend",
            "Put",
            "Freeze",
            "EndSend"
        ]
    );
    assert_eq!(
        w.kinds(1),
        ["BeginRecv", "Chunk", "Chunk", "Chunk", "Chunk", "EndRecv"]
    );
}

#[test]
fn the_source_answers_tryagain_then_ask_then_moved() {
    let key = b"{t2}x".to_vec();
    let slot = key_slot(&key);
    let mut slots = SlotSet::default();
    slots.insert(slot);
    let mut w = World::new(&slots);
    w.config.start_move(slots, 1).unwrap();
    let get = Request::Get(key.clone());
    let mut seen = Vec::new();
    for _ in 0..200 {
        let reply = w.groups[0].request(&get, false);
        if seen.last() != Some(&reply) {
            seen.push(reply);
        }
        w.pump();
        if !w.deliver_one() && w.inbox.is_empty() && !w.pump() {
            break;
        }
    }
    assert_eq!(
        seen,
        [
            Reply::Value(None),
            Reply::TryAgain,
            Reply::Ask(1),
            Reply::Moved(1)
        ]
    );
}

#[test]
fn a_move_is_refused_when_it_cannot_be_one() {
    let mut w = World::new(&SlotSet::range(0, 9));
    assert_eq!(
        w.config.start_move(SlotSet::range(0, 3), 0),
        Err(MoveRefused::AlreadyThere)
    );
    assert_eq!(
        w.config.start_move(SlotSet::range(5, 12), 1),
        Err(MoveRefused::NotOneOwner),
        "slots 10-12 have no owner"
    );
    assert_eq!(
        w.config.start_move(SlotSet::default(), 1),
        Err(MoveRefused::NotOneOwner)
    );
    assert!(w.config.start_move(SlotSet::range(0, 3), 1).is_ok());
}

#[test]
fn moves_begun_before_either_commits_get_their_own_ids() {
    let mut w = World::new(&SlotSet::range(0, 99));
    let a = w.config.start_move(SlotSet::range(0, 9), 1).unwrap();
    let b = w.config.start_move(SlotSet::range(50, 59), 1).unwrap();
    assert_ne!(a, b);
    assert_eq!(
        w.config.start_move(SlotSet::range(55, 56), 1),
        Err(MoveRefused::Busy),
        "a slot of a move whose Begin has not committed yet"
    );
    w.settle();
    assert_eq!(w.config.owner(5), Some(1));
    assert_eq!(w.config.owner(55), Some(1));
    assert_eq!(w.config.owner(20), Some(0));
}

#[test]
fn a_late_acknowledgement_does_not_freeze_a_restarted_source() {
    let key = b"{t3}k".to_vec();
    let slot = key_slot(&key);
    let mut slots = SlotSet::default();
    slots.insert(slot);
    let log = [
        GroupRecord::Own {
            slots: slots.clone(),
        },
        GroupRecord::BeginSend {
            id: 7,
            slots: slots.clone(),
            to: 1,
        },
    ];
    let mut g = Group::recover(0, Mistakes::default(), &log);
    let appended = g.drain();
    assert!(matches!(
        appended.as_slice(),
        [Action::Append(GroupRecord::Restream { id: 7, attempt: 1 })]
    ));
    // An acknowledgement of the attempt before the restart arrives before Restream commits.
    g.on_message(
        Node::Group(1),
        &Message::ChunkAck {
            id: 7,
            attempt: 0,
            next_seq: 0,
            sealed: false,
        },
    );
    assert!(
        g.drain().is_empty(),
        "no Freeze before the new snapshot streams"
    );
    assert!(g.serves(slot));
}
