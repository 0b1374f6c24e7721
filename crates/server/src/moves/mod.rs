//! Online slot moves in a sharded cluster (issue 17): `verso-cluster`'s Lazen state machines
//! ([`verso_cluster::lazen`]) run by a mover thread on each node ([`mover`]) over the
//! engine ([`data`]), and what the request path needs of them (this module).
//!
//! The request path. While this node's group takes part in a move, the slots in it are
//! answered by the group's own state ([`Group::answer`]: serve, TRYAGAIN, ASK or MOVED),
//! which the mover publishes as a [`View`]. A request on such a slot holds the view's read
//! lock from its routing until its commit; the mover changes the view under the write lock,
//! so once it holds that lock no request it did not see is still running. Two steps rely on
//! it:
//! - **Tracking.** Before the source takes its snapshot of the slots it starts recording the
//!   keys that write requests name in them ([`Moves::track`]); the snapshot begins after
//!   the write lock, so a write is either in the snapshot or recorded.
//! - **Freezing.** When the source freezes the slots it publishes TRYAGAIN for them under
//!   the write lock; after that no request writes them, so the keys recorded since the
//!   snapshot, read again, are the whole change.
//!
//! Every request of a sharded node takes the read lock, moves or not: a fast path that
//! skipped it while no move was under way would let a request that checked just before a
//! move began commit after its snapshot, untracked (the history test found that). The lock
//! is uncontended between moves: two atomic operations per request. Until the mover has
//! read its group's log at start, every request with keys gets TRYAGAIN: the file's map may
//! give this group slots it has since sent away.
//!
//! [`Group::answer`]: verso_cluster::lazen::Group::answer

pub mod data;
pub mod mover;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Condvar, Mutex, RwLock, RwLockReadGuard};
use std::time::Duration;

use verso_cluster::lazen::{Answer, Message, MoveId, Node};
use verso_cluster::{key_slot, Slot, SlotSet};
use verso_replication::Replication;

/// After each piece of a move's bulk work (exporting or importing a chunk of the snapshot or
/// of a catch-up round) the mover pauses this many times as long as the piece took: the
/// move uses at most half of a core, and clients keep the rest (BENCHMARKS.md, "A slot move
/// under load"). Never while the slots are frozen: the last chunks go at full speed.
pub const PAUSE_PER_WORK: u32 = 1;

/// How this node's group answers for the slots in its moves.
#[derive(Default)]
pub struct View {
    /// Per slot in a move: the answer without and with ASKING.
    answers: HashMap<Slot, (Answer, Answer)>,
    /// Slots whose written keys are recorded (their snapshot is streaming).
    tracking: SlotSet,
    /// The mover has read the group's log, as primary of this replication generation (0
    /// unreplicated): until then no slot is served.
    ready: Option<u64>,
    /// Set when this node is a replica of a Lazy VSR group.
    replication: Option<Arc<Replication>>,
}

impl View {
    /// The answer for `slot`, if a move decides it.
    pub fn answer(&self, slot: Slot, asking: bool) -> Option<Answer> {
        if !self.serves() {
            return Some(Answer::TryAgain);
        }
        if self.answers.is_empty() {
            return None;
        }
        self.answers
            .get(&slot)
            .map(|&(plain, asked)| if asking { asked } else { plain })
    }

    /// Whether this view may decide requests: its mover read the logs as this replica's
    /// mover now. A backup serves no data request of its own (it relays them or refuses
    /// them, READONLY reads aside), so the view does not stop it; a replica that has just
    /// become primary serves nothing until its mover has resumed the group's moves.
    fn serves(&self) -> bool {
        match &self.replication {
            None => self.ready == Some(0),
            Some(r) => !r.is_primary() || self.ready == Some(r.generation()),
        }
    }

    pub fn tracks(&self, slot: Slot) -> bool {
        self.tracking.contains(slot)
    }
}

/// A move's slots and the keys written in them since its snapshot.
type Tracked = (SlotSet, BTreeSet<Vec<u8>>);

/// A request for the mover from a session (CLUSTER commands).
pub enum Request {
    /// A message from another group's mover (`VERSO.LAZEN`).
    Message(Node, Message),
    /// Start moving `slots` to group `to` (on the configuration group's primary).
    Start {
        slots: SlotSet,
        to: u16,
        reply: std::sync::mpsc::Sender<Result<MoveId, String>>,
    },
}

/// What sessions and the mover share.
#[derive(Default)]
pub struct Moves {
    view: RwLock<View>,
    /// Keys written per move since its snapshot.
    tracked: Mutex<BTreeMap<MoveId, Tracked>>,
    inbox: Mutex<Vec<Request>>,
    wake: Condvar,
    /// The status line of each move this node's group takes part in, for CLUSTER MOVES
    /// (`None` until the mover has read its logs).
    status: Mutex<Option<Vec<String>>>,
    /// Moves in flight at this group, and the chunks its sends have had logged / have.
    progress: Mutex<(usize, u64, u64)>,
    /// The slots this group's log says it owns: the map learned from the configuration
    /// group never overrides them (`crate::shard_prober`).
    owned: Mutex<Option<SlotSet>>,
}

impl Moves {
    /// For a node of a sharded cluster, replicated or not.
    pub fn new(replication: Option<Arc<Replication>>) -> Moves {
        let moves = Moves::default();
        moves
            .view
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .replication = replication;
        moves
    }

    /// The view, read-locked: hold it until the request has committed.
    pub fn enter(&self) -> Option<RwLockReadGuard<'_, View>> {
        Some(self.view.read().unwrap_or_else(|e| e.into_inner()))
    }

    /// Records `keys` as written, for the moves whose snapshot of their slots is streaming.
    /// Called with the view's read lock held, before the request runs.
    pub fn track<'k>(&self, keys: impl Iterator<Item = &'k [u8]>) {
        let mut tracked = self.tracked.lock().unwrap_or_else(|e| e.into_inner());
        for k in keys {
            let slot = key_slot(k);
            for (slots, written) in tracked.values_mut() {
                if slots.contains(slot) {
                    written.insert(k.to_vec());
                }
            }
        }
    }

    /// Publishes how the group answers for the slots in its moves (the mover, after every
    /// change of its state). Waits for the requests running under the previous view.
    /// `generation` is the replication generation the mover leads in (0 unreplicated).
    pub(crate) fn publish(&self, answers: HashMap<Slot, (Answer, Answer)>, generation: u64) {
        let mut view = self.view.write().unwrap_or_else(|e| e.into_inner());
        view.answers = answers;
        view.ready = Some(generation);
    }

    /// The mover stopped (this replica is no longer primary, or it reads the logs again):
    /// nothing it published or recorded holds any more, and no slot is served until it
    /// publishes again (CLUSTER MOVES answers LOADING meanwhile).
    pub(crate) fn reset(&self) {
        let mut view = self.view.write().unwrap_or_else(|e| e.into_inner());
        view.answers.clear();
        view.tracking = SlotSet::default();
        view.ready = None;
        self.tracked
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
        *self.owned.lock().unwrap_or_else(|e| e.into_inner()) = None;
        self.set_progress((0, 0, 0));
        *self.status.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }

    /// Drops the requests waiting for the mover (a backup's mover takes none).
    pub(crate) fn drop_requests(&self) {
        for r in std::mem::take(&mut *self.inbox.lock().unwrap_or_else(|e| e.into_inner())) {
            if let Request::Start { reply, .. } = r {
                let _ = reply.send(Err("this replica is no longer its group's primary".into()));
            }
        }
    }

    /// Starts recording the keys written in `slots` for move `id`: once this returns, every
    /// request that writes them either committed before or records its keys.
    pub(crate) fn start_tracking(&self, id: MoveId, slots: &SlotSet) {
        let mut view = self.view.write().unwrap_or_else(|e| e.into_inner());
        self.tracked
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id, (slots.clone(), BTreeSet::new()));
        for s in slots.iter() {
            view.tracking.insert(s);
        }
    }

    /// Stops recording for move `id` and returns what it recorded.
    pub(crate) fn stop_tracking(&self, id: MoveId) -> BTreeSet<Vec<u8>> {
        let mut view = self.view.write().unwrap_or_else(|e| e.into_inner());
        let mut tracked = self.tracked.lock().unwrap_or_else(|e| e.into_inner());
        let keys = tracked.remove(&id).map(|(_, k)| k).unwrap_or_default();
        let mut still = SlotSet::default();
        for (slots, _) in tracked.values() {
            for s in slots.iter() {
                still.insert(s);
            }
        }
        view.tracking = still;
        keys
    }

    /// Takes what was recorded for move `id` so far and goes on recording. Waits for the
    /// requests running under the view: a write recorded in what it returns has committed,
    /// so a read begun after this sees it.
    pub(crate) fn drain_tracking(&self, id: MoveId) -> BTreeSet<Vec<u8>> {
        let _view = self.view.write().unwrap_or_else(|e| e.into_inner());
        let mut tracked = self.tracked.lock().unwrap_or_else(|e| e.into_inner());
        tracked
            .get_mut(&id)
            .map(|(_, keys)| std::mem::take(keys))
            .unwrap_or_default()
    }

    /// How many keys move `id` has recorded since its snapshot or last drain.
    pub(crate) fn tracked_count(&self, id: MoveId) -> usize {
        let tracked = self.tracked.lock().unwrap_or_else(|e| e.into_inner());
        tracked.get(&id).map_or(0, |(_, keys)| keys.len())
    }

    /// Hands a request to the mover.
    pub fn post(&self, r: Request) {
        self.inbox.lock().unwrap_or_else(|e| e.into_inner()).push(r);
        self.wake.notify_one();
    }

    /// The mover waits for requests (or `timeout`).
    pub(crate) fn take(&self, timeout: Duration) -> Vec<Request> {
        let mut inbox = self.inbox.lock().unwrap_or_else(|e| e.into_inner());
        if inbox.is_empty() {
            inbox = self
                .wake
                .wait_timeout(inbox, timeout)
                .map(|(g, _)| g)
                .unwrap_or_else(|e| e.into_inner().0);
        }
        std::mem::take(&mut *inbox)
    }

    pub(crate) fn set_owned(&self, owned: &SlotSet) {
        *self.owned.lock().unwrap_or_else(|e| e.into_inner()) = Some(owned.clone());
    }

    /// The slots this group's log says it owns (`None` until the mover has read its log).
    pub fn owned(&self) -> Option<SlotSet> {
        self.owned.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    pub(crate) fn set_progress(&self, p: (usize, u64, u64)) {
        *self.progress.lock().unwrap_or_else(|e| e.into_inner()) = p;
    }

    /// Moves in flight at this group; chunks its sends have had logged, and have so far.
    pub fn progress(&self) -> (usize, u64, u64) {
        *self.progress.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The `field:value` lines INFO cluster and CLUSTER INFO show for moves.
    pub fn info_lines(&self) -> String {
        let (n, acked, total) = self.progress();
        format!(
            "verso_moves_in_flight:{n}\r\nverso_move_chunks_logged:{acked}\r\nverso_move_chunks:{total}\r\n"
        )
    }

    pub(crate) fn set_status(&self, lines: Vec<String>) {
        *self.status.lock().unwrap_or_else(|e| e.into_inner()) = Some(lines);
    }

    /// One line per move this node's group takes part in (`None`: the mover is starting).
    pub fn status(&self) -> Option<Vec<String>> {
        self.status
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}
