//! The model: three real `Replica<KvApp>`s, their disks, a network and one client, with
//! every step a stateright action. See `tests/model.rs` for what is checked.
//!
//! Time. Each replica keeps its own clock. The replica's deadlines are either short
//! (heartbeat, ELECTACCEPT resend, catch-up retry: `SHORT` after they are set) or long
//! (view-change and election timeouts: `LONG_TIMEOUT`). `Tick` advances one replica's clock
//! by `SHORT`, which fires exactly its short deadlines (and a long one that is already due:
//! a primary that steps down keeps its old, expired view-change deadline and campaigns at
//! once); `Elect` advances it by `LONG`, which fires everything. So which timers fire
//! depends only on which are set and whether one is already due, never on the clock's
//! value: the replica's fingerprint (which leaves time out) plus that one bit is a sound
//! state.
//!
//! The state is hashed through `Replica::fingerprint`; two states with equal hashes are
//! the same state to the checker.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::hash::{Hash, Hasher};
use std::panic::{self, AssertUnwindSafe};
use std::sync::Once;

use stateright::{Model, Property};
use verso_vsr::kv::{KvApp, KvOp, KvReply};
use verso_vsr::{
    Action, Address, Body, Config, DiskWrite, Durable, Entry, Message, Mistake, Replica, ReplicaId,
    Request, Role, ViewNum, Viewstamp,
};

pub type Msg = Message<KvOp, KvReply, KvApp>;
pub type Write = DiskWrite<KvOp, KvReply, KvApp>;
pub type Disk = Durable<KvOp, KvReply, KvApp>;

/// The client's id.
pub const CLIENT: u64 = 7;
/// The key every operation writes (so a rollback changes the application's state).
pub const KEY: u64 = 1;
/// A short deadline is set this far ahead; a `Tick` moves the clock by this much.
pub const SHORT: u64 = 1;
/// The view-change and election timeouts.
pub const LONG_TIMEOUT: u64 = 1 << 31;
/// An `Elect` moves the clock by this much: past every deadline.
pub const LONG: u64 = 1 << 32;

/// The replica settings the model uses: short timers of `SHORT`, long ones of
/// `LONG_TIMEOUT`, no jitter, one request per entry, no checkpoints.
pub fn small_config(mistake: Option<Mistake>) -> Config {
    let mut c = Config::new(3);
    c.heartbeat_interval = SHORT;
    c.catch_up_timeout = SHORT;
    c.view_change_timeout = LONG_TIMEOUT;
    c.view_change_jitter = 0;
    c.election_timeout = LONG_TIMEOUT;
    c.batch_requests_max = 1;
    c.pipeline_max = 2;
    c.request_queue_max = 2;
    c.flush_entries_max = 4;
    c.unflushed_entries_max = 8;
    c.catch_up_entries_max = 4;
    c.checkpoint_interval = 0;
    c.clients_max = 4;
    c.mistake = mistake;
    c
}

/// A message in flight.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Envelope {
    pub from: Address,
    pub to: Address,
    pub msg: Msg,
}

/// A disk operation asked for and not yet durable, in the order asked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Pending {
    Write(Write),
    Sync(u64),
}

/// One replica slot: the replica (`None` while crashed), its clock, its disk as synced, and
/// the writes and syncs it asked for since.
#[derive(Clone)]
pub struct Node {
    pub replica: Option<Replica<KvApp>>,
    pub clock: u64,
    pub disk: Disk,
    pub pending: Vec<Pending>,
    /// The highest sync id asked for since the replica (re)started: bounds the state space.
    pub max_sync: u64,
}

/// What the client knows.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ClientState {
    /// The thesis's `ev`.
    pub ev: ViewNum,
    /// Requests submitted so far (sequence numbers 1..=submitted).
    pub submitted: u64,
    /// The request waiting for a reply.
    pub outstanding: Option<u64>,
    /// The view of the replica it last sent a request to: it resends only to a primary of
    /// another view (as its timeout and the replicas' hints would lead it there).
    pub sent_to_view: Option<ViewNum>,
}

/// A reply a replica sent to the client: the operation is acknowledged.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Ack {
    pub seq: u64,
    pub vs: Viewstamp,
    pub dp: Viewstamp,
}

#[derive(Clone)]
pub struct State {
    pub nodes: Vec<Node>,
    pub net: BTreeSet<Envelope>,
    pub client: ClientState,
    pub acks: BTreeSet<Ack>,
    /// Every durable point a replica has held (a primary's, or one a backup adopted from a
    /// primary) and every one announced to the client: Theorem 4.3.3 is about all of them.
    pub dps: BTreeSet<Viewstamp>,
    /// Single-replica crashes, total crashes, view-change timeouts so far.
    pub crashes: u8,
    pub totals: u8,
    pub elections: u8,
    /// Short timeouts fired so far (retries: bounded like message loss).
    pub ticks: u8,
    /// A replica crashed after an operation was acknowledged.
    pub crashed_after_ack: bool,
    /// A replica, the application or the disk panicked (an assertion failed).
    pub panic: Option<String>,
}

/// The model checker's actions.
#[derive(Clone, PartialEq, Eq)]
pub enum Act {
    /// Deliver a message and forget it.
    Deliver(Envelope),
    /// Deliver a message and keep it in flight (duplication).
    Duplicate(Envelope),
    /// Lose a message.
    Drop(Envelope),
    /// Fire a replica's short timers.
    Tick(ReplicaId),
    /// Fire a replica's view-change (or election) timeout.
    Elect(ReplicaId),
    /// Complete a replica's oldest pending sync.
    Sync(ReplicaId),
    /// Crash a replica: memory lost, and of the unsynced writes only the first `keep`
    /// reach the disk.
    Crash { r: ReplicaId, keep: usize },
    /// Restart a crashed replica from its disk.
    Restart(ReplicaId),
    /// Every live replica crashes at once, losing every unsynced write.
    TotalCrash,
    /// The client submits its next operation to the primary it believes in.
    Submit,
    /// The client (re)sends its outstanding request to a replica.
    ClientSend(ReplicaId),
}

/// The bounds and switches of one check.
#[derive(Clone)]
pub struct VsrModel {
    pub config: Config,
    /// Operations the client submits (one outstanding at a time).
    pub ops: u64,
    /// Ask for durable replies (`Request::sync`).
    pub sync_requests: bool,
    /// Start from replica 0 already primary of view 1.0 (elected deterministically).
    pub pre_elect: bool,
    pub max_view_changes: u8,
    /// Short timeouts (heartbeat, resend, catch-up retry) in all.
    pub max_ticks: u8,
    pub max_crashes: u8,
    pub max_total_crashes: u8,
    pub max_in_flight: usize,
    pub max_syncs: u64,
    pub lossy: bool,
    /// An idle primary's heartbeat timer may fire.
    pub heartbeats: bool,
    pub duplicating: bool,
    /// A crash may keep any prefix of the unsynced writes (otherwise it loses them all).
    pub crash_keeps_prefix: bool,
    /// A crashed replica restarts at once. This loses no behaviour: a replica that is up
    /// may still take no step for as long as the crash would have lasted, and messages
    /// sent to it meanwhile may stay in flight forever, as if lost.
    pub reboot_at_once: bool,
    /// Replicas whose view-change timeout may fire.
    pub candidates: Vec<ReplicaId>,
    /// Replicas that may crash alone.
    pub crashable: Vec<ReplicaId>,
    /// A replica crashes alone only while every other replica is up and holds everything
    /// any replica holds (the simulator's `Faults::Minority` discipline, under which the
    /// thesis's property 3 can hold).
    pub crash_only_when_others_hold_everything: bool,
    /// Replicas the client may resend its outstanding request to (it always sends to the
    /// primary it believes in on `Submit`, and after a `WrongView`).
    pub client_targets: Vec<ReplicaId>,
    /// The client may also resend to any replica that is primary at the time (as the
    /// `NotPrimary` hints would lead it there).
    pub client_finds_primary: bool,
    /// Also check the thesis's property 3 as stated: an acknowledged operation survives
    /// while at most f replicas lost their memory.
    pub thesis_property3: bool,
    /// `sometimes` properties this configuration must reach.
    pub expect_view_change: bool,
    pub expect_ack: bool,
    pub expect_total_crash: bool,
    pub expect_rollback: bool,
    pub expect_crash_after_ack: bool,
    pub expect_trim: bool,
    pub expect_state_transfer: bool,
}

impl VsrModel {
    /// The smallest configuration: no crash, one operation, one view-change timeout, one
    /// short timeout, at most three messages in flight and none lost (a message may stay in
    /// flight forever, which is how loss looks to the replicas), no heartbeats.
    pub fn new(mistake: Option<Mistake>) -> Self {
        VsrModel {
            config: small_config(mistake),
            ops: 1,
            sync_requests: false,
            pre_elect: true,
            max_view_changes: 1,
            max_ticks: 1,
            max_crashes: 0,
            max_total_crashes: 0,
            max_in_flight: 3,
            max_syncs: 8,
            lossy: false,
            heartbeats: false,
            duplicating: false,
            crash_keeps_prefix: true,
            reboot_at_once: true,
            candidates: vec![0, 1, 2],
            crashable: vec![0, 1, 2],
            crash_only_when_others_hold_everything: false,
            client_targets: vec![],
            client_finds_primary: true,
            thesis_property3: false,
            expect_view_change: true,
            expect_ack: true,
            expect_total_crash: false,
            expect_rollback: false,
            expect_crash_after_ack: false,
            expect_trim: false,
            expect_state_transfer: false,
        }
    }

    fn f(&self) -> u8 {
        self.config.replica_count / 2
    }

    /// The initial state: every replica a backup of view ZERO, or (with `pre_elect`)
    /// replica 0 elected by running its view-change timeout, then delivering every message
    /// and completing every sync in a fixed order until nothing is left.
    pub fn initial_state(&self) -> State {
        let nodes = (0..self.config.replica_count)
            .map(|i| Node {
                replica: Some(Replica::new(i, self.config.clone(), KvApp::new(), 0)),
                clock: 0,
                disk: Disk::default(),
                pending: Vec::new(),
                max_sync: 0,
            })
            .collect();
        let mut s = State {
            nodes,
            net: BTreeSet::new(),
            client: ClientState {
                ev: ViewNum::ZERO,
                submitted: 0,
                outstanding: None,
                sent_to_view: None,
            },
            acks: BTreeSet::new(),
            dps: BTreeSet::new(),
            crashes: 0,
            totals: 0,
            elections: 0,
            ticks: 0,
            crashed_after_ack: false,
            panic: None,
        };
        if self.pre_elect {
            self.apply(&mut s, &Act::Elect(0));
            loop {
                if let Some(env) = s.net.iter().next().cloned() {
                    self.apply(&mut s, &Act::Deliver(env));
                } else if let Some(r) = (0..s.nodes.len()).find(|&r| {
                    s.nodes[r]
                        .pending
                        .iter()
                        .any(|p| matches!(p, Pending::Sync(_)))
                }) {
                    self.apply(&mut s, &Act::Sync(r as ReplicaId));
                } else {
                    break;
                }
            }
            let r0 = s.nodes[0].replica.as_ref().expect("alive");
            assert_eq!(
                r0.role(),
                Role::Primary,
                "the initial election elects replica 0"
            );
            s.client.ev = r0.view();
            s.elections = 0;
            s.ticks = 0;
        }
        s
    }

    /// The view the initial state starts in.
    pub fn first_view(&self) -> ViewNum {
        if self.pre_elect {
            ViewNum {
                counter: 1,
                replica: 0,
            }
        } else {
            ViewNum::ZERO
        }
    }

    /// Puts the client's request `seq` in flight to `to`.
    fn send_request(&self, s: &mut State, to: ReplicaId, seq: u64) {
        let env = self.request(s, to, seq);
        s.client.sent_to_view = s.nodes[usize::from(to)].replica.as_ref().map(|r| r.view());
        s.net.insert(env);
    }

    fn request(&self, s: &State, to: ReplicaId, seq: u64) -> Envelope {
        Envelope {
            from: Address::Client(CLIENT),
            to: Address::Replica(to),
            msg: Message::Request {
                request: Request {
                    client: CLIENT,
                    seq,
                    op: KvOp::Put(KEY, seq),
                    sync: self.sync_requests,
                },
                ev: s.client.ev,
            },
        }
    }

    /// Carries out one action on `s`, catching a panic as a property violation.
    fn step(&self, s: &mut State, act: &Act) {
        quiet_panics();
        IN_STEP.with(|c| c.set(true));
        let result = panic::catch_unwind(AssertUnwindSafe(|| self.apply(s, act)));
        IN_STEP.with(|c| c.set(false));
        if result.is_err() {
            let what = LAST_PANIC.with(|m| m.borrow_mut().take());
            s.panic = Some(what.unwrap_or_else(|| "panic".to_string()));
        }
    }

    fn apply(&self, s: &mut State, act: &Act) {
        match act {
            Act::Deliver(env) | Act::Duplicate(env) => {
                if matches!(act, Act::Deliver(_)) {
                    s.net.remove(env);
                }
                self.deliver(s, env);
            }
            Act::Drop(env) => {
                s.net.remove(env);
            }
            Act::Tick(r) => {
                s.ticks += 1;
                let node = &mut s.nodes[usize::from(*r)];
                node.clock += SHORT;
                let now = node.clock;
                node.replica.as_mut().expect("alive").handle_timeout(now);
                self.drain(s, *r);
            }
            Act::Elect(r) => {
                s.elections += 1;
                let node = &mut s.nodes[usize::from(*r)];
                node.clock += LONG;
                let now = node.clock;
                node.replica.as_mut().expect("alive").handle_timeout(now);
                self.drain(s, *r);
            }
            Act::Sync(r) => {
                let node = &mut s.nodes[usize::from(*r)];
                let mut id = None;
                let mut taken = 0;
                // This disk writes a checkpoint in order (the replica allows later writes
                // to pass one, but need not): it is durable with the sync after it.
                let mut checkpoint = None;
                for p in &node.pending {
                    taken += 1;
                    match p {
                        Pending::Write(w) => {
                            if let DiskWrite::Checkpoint(cp) = w {
                                checkpoint = Some(cp.ap);
                            }
                            node.disk.apply(w, None)
                        }
                        Pending::Sync(i) => {
                            id = Some(*i);
                            break;
                        }
                    }
                }
                node.pending.drain(..taken);
                let id = id.expect("a pending sync");
                let now = node.clock;
                let replica = node.replica.as_mut().expect("alive");
                replica.handle_synced(now, id);
                if let Some(ap) = checkpoint {
                    replica.handle_checkpoint_durable(now, ap);
                }
                self.drain(s, *r);
            }
            Act::Crash { r, keep } => {
                s.crashes += 1;
                s.crashed_after_ack |= !s.acks.is_empty();
                crash(&mut s.nodes[usize::from(*r)], *keep);
                if self.reboot_at_once {
                    self.restart(s, *r);
                }
            }
            Act::Restart(r) => self.restart(s, *r),
            Act::TotalCrash => {
                s.totals += 1;
                for node in &mut s.nodes {
                    if node.replica.is_some() {
                        crash(node, 0);
                    }
                }
                if self.reboot_at_once {
                    for r in 0..self.config.replica_count {
                        self.restart(s, r);
                    }
                }
            }
            Act::Submit => {
                s.client.submitted += 1;
                let seq = s.client.submitted;
                s.client.outstanding = Some(seq);
                self.send_request(s, s.client.ev.leader(), seq);
            }
            Act::ClientSend(r) => {
                let seq = s.client.outstanding.expect("outstanding");
                self.send_request(s, *r, seq);
            }
        }
        for node in &s.nodes {
            if let Some(r) = &node.replica {
                if r.dp() != Viewstamp::ZERO {
                    s.dps.insert(r.dp());
                }
            }
        }
    }

    fn restart(&self, s: &mut State, r: ReplicaId) {
        let node = &mut s.nodes[usize::from(r)];
        assert!(node.replica.is_none());
        node.replica = Some(Replica::recover(
            r,
            self.config.clone(),
            KvApp::new(),
            &node.disk,
            node.clock,
        ));
        self.drain(s, r);
    }

    fn deliver(&self, s: &mut State, env: &Envelope) {
        match env.to {
            Address::Replica(r) => {
                let node = &mut s.nodes[usize::from(r)];
                let now = node.clock;
                let replica = node.replica.as_mut().expect("delivered to a live replica");
                replica.handle_message(now, env.from, env.msg.clone());
                self.drain(s, r);
            }
            Address::Client(_) => unreachable!("client messages are not in flight"),
        }
    }

    /// Carries out everything replica `r` asked for.
    fn drain(&self, s: &mut State, r: ReplicaId) {
        let from = Address::Replica(r);
        loop {
            let node = &mut s.nodes[usize::from(r)];
            let Some(action) = node.replica.as_mut().and_then(|x| x.poll_action()) else {
                return;
            };
            match action {
                Action::Send { to, message } => match (to, &message) {
                    (Address::Replica(_), _) => {
                        s.net.insert(Envelope {
                            from,
                            to,
                            msg: message,
                        });
                    }
                    // Messages to the client arrive at once (the client is not what is
                    // checked); the acknowledgement is recorded as it leaves.
                    (Address::Client(_), Message::Reply { seq, vs, dp, .. }) => {
                        s.acks.insert(Ack {
                            seq: *seq,
                            vs: *vs,
                            dp: *dp,
                        });
                        if *dp != Viewstamp::ZERO {
                            s.dps.insert(*dp);
                        }
                        if s.client.outstanding == Some(*seq) {
                            s.client.outstanding = None;
                        }
                    }
                    (Address::Client(_), Message::WrongView { view, .. }) => {
                        if *view > s.client.ev {
                            s.client.ev = *view;
                            if let Some(seq) = s.client.outstanding {
                                self.send_request(s, view.leader(), seq);
                            }
                        }
                    }
                    // Hints (NotPrimary, Stale): the client may send anywhere anyway.
                    (Address::Client(_), _) => {}
                },
                Action::Write(w) => node.pending.push(Pending::Write(w)),
                Action::Sync { id } => {
                    node.pending.push(Pending::Sync(id));
                    node.max_sync = node.max_sync.max(id);
                }
            }
        }
    }
}

/// Memory is lost; of the unsynced writes the first `keep` reach the disk.
fn crash(node: &mut Node, keep: usize) {
    let mut kept = 0;
    for p in &node.pending {
        if let Pending::Write(w) = p {
            if kept == keep {
                break;
            }
            node.disk.apply(w, None);
            kept += 1;
        }
    }
    node.pending.clear();
    node.replica = None;
    node.max_sync = 0;
}

fn unsynced_writes(node: &Node) -> usize {
    node.pending
        .iter()
        .filter(|p| matches!(p, Pending::Write(_)))
        .count()
}

impl Model for VsrModel {
    type State = State;
    type Action = Act;

    fn init_states(&self) -> Vec<State> {
        vec![self.initial_state()]
    }

    fn actions(&self, s: &State, actions: &mut Vec<Act>) {
        if s.panic.is_some() {
            return;
        }
        for env in &s.net {
            let live = match env.to {
                Address::Replica(r) => s.nodes[usize::from(r)].replica.is_some(),
                Address::Client(_) => true,
            };
            if live {
                actions.push(Act::Deliver(env.clone()));
                if self.duplicating {
                    actions.push(Act::Duplicate(env.clone()));
                }
            }
            if self.lossy || !live {
                actions.push(Act::Drop(env.clone()));
            }
        }
        let alive = s.nodes.iter().filter(|n| n.replica.is_some()).count();
        let top = live(s)
            .map(|r| r.op_max())
            .chain(s.acks.iter().map(|a| a.vs))
            .max()
            .unwrap_or(Viewstamp::ZERO);
        let may_crash = |i: usize| {
            !self.crash_only_when_others_hold_everything
                || s.nodes
                    .iter()
                    .enumerate()
                    .all(|(j, n)| j == i || n.replica.as_ref().is_some_and(|r| r.op_max() >= top))
        };
        for (i, node) in s.nodes.iter().enumerate() {
            let id = i as ReplicaId;
            match &node.replica {
                Some(r) => {
                    if r.poll_timeout() <= node.clock + SHORT
                        && s.ticks < self.max_ticks
                        && (self.heartbeats || r.role() != Role::Primary)
                    {
                        actions.push(Act::Tick(id));
                    }
                    if r.role() != Role::Primary
                        && s.elections < self.max_view_changes
                        && self.candidates.contains(&id)
                    {
                        actions.push(Act::Elect(id));
                    }
                    if node.pending.iter().any(|p| matches!(p, Pending::Sync(_))) {
                        actions.push(Act::Sync(id));
                    }
                    if s.crashes < self.max_crashes && self.crashable.contains(&id) && may_crash(i)
                    {
                        let most = if self.crash_keeps_prefix {
                            unsynced_writes(node)
                        } else {
                            0
                        };
                        for keep in 0..=most {
                            actions.push(Act::Crash { r: id, keep });
                        }
                    }
                }
                None => actions.push(Act::Restart(id)),
            }
        }
        if s.totals < self.max_total_crashes && alive > 0 {
            actions.push(Act::TotalCrash);
        }
        match s.client.outstanding {
            None if s.client.submitted < self.ops => actions.push(Act::Submit),
            Some(_) => {
                let in_flight = s.net.iter().any(|e| e.from == Address::Client(CLIENT));
                if !in_flight {
                    for (i, node) in s.nodes.iter().enumerate() {
                        let id = i as ReplicaId;
                        let primary = node.replica.as_ref().is_some_and(|r| {
                            r.role() == Role::Primary && Some(r.view()) != s.client.sent_to_view
                        });
                        if self.client_targets.contains(&id)
                            || (self.client_finds_primary && primary)
                        {
                            actions.push(Act::ClientSend(id));
                        }
                    }
                }
            }
            None => {}
        }
    }

    fn next_state(&self, last: &State, act: Act) -> Option<State> {
        let mut s = last.clone();
        self.step(&mut s, &act);
        Some(s)
    }

    fn within_boundary(&self, s: &State) -> bool {
        s.net.len() <= self.max_in_flight && s.nodes.iter().all(|n| n.max_sync <= self.max_syncs)
    }

    fn format_action(&self, act: &Act) -> String {
        format!("{act:?}")
    }

    fn properties(&self) -> Vec<Property<Self>> {
        let mut p = vec![
            Property::always("no panic", |_, s: &State| s.panic.is_none()),
            Property::always("a viewstamp names one entry", |_, s: &State| {
                unique_viewstamps(s)
            }),
            Property::always(
                "every durable point is on a majority of disks",
                |m, s: &State| dps_on_disks(m, s),
            ),
            Property::always("durable points survive", |_, s: &State| dps_survive(s)),
            Property::always(
                "acknowledged ops survive while no memory is lost",
                |_, s: &State| acks_survive(s, 0),
            ),
        ];
        if self.thesis_property3 {
            p.push(Property::always(
                "acknowledged ops survive while at most f replicas lose memory",
                |m, s: &State| acks_survive(s, m.f()),
            ));
        }
        if self.expect_view_change {
            p.push(Property::sometimes(
                "a view change completes",
                |m, s: &State| {
                    live(s).any(|r| r.role() == Role::Primary && r.view() != m.first_view())
                },
            ));
        }
        if self.expect_ack {
            p.push(Property::sometimes(
                "an op is acknowledged",
                |_, s: &State| !s.acks.is_empty(),
            ));
        }
        if self.expect_total_crash {
            p.push(Property::sometimes(
                "a primary after a total crash",
                |_, s: &State| s.totals > 0 && live(s).any(|r| r.role() == Role::Primary),
            ));
        }
        if self.expect_rollback {
            p.push(Property::sometimes(
                "a replica rolls back",
                |_, s: &State| live(s).any(|r| r.stats().entries_undone > 0),
            ));
        }
        if self.expect_crash_after_ack {
            p.push(Property::sometimes(
                "a crash after an acknowledgement",
                |_, s: &State| s.crashed_after_ack,
            ));
        }
        if self.expect_trim {
            p.push(Property::sometimes(
                "a checkpoint trims a log",
                |_, s: &State| live(s).any(|r| r.log_start() > 1),
            ));
        }
        if self.expect_state_transfer {
            p.push(Property::sometimes("a state transfer", |_, s: &State| {
                live(s).any(|r| r.stats().state_transfers_installed > 0)
            }));
        }
        p
    }
}

fn live(s: &State) -> impl Iterator<Item = &Replica<KvApp>> {
    s.nodes.iter().filter_map(|n| n.replica.as_ref())
}

/// Property 1: two entries with the same viewstamp are the same entry, wherever they are
/// (memory, disk, unsynced writes, messages), and a view has one first entry.
fn unique_viewstamps(s: &State) -> bool {
    let mut seen: BTreeMap<Viewstamp, &Entry<KvOp>> = BTreeMap::new();
    let mut starts: BTreeMap<ViewNum, Viewstamp> = BTreeMap::new();
    let mut ok = true;
    let mut entries: Vec<&Entry<KvOp>> = Vec::new();
    for node in &s.nodes {
        if let Some(r) = &node.replica {
            for op in r.log_start()..=r.op_max().op {
                if let Some(e) = r.entry(op) {
                    entries.push(e);
                }
            }
        }
        entries.extend(node.disk.log.iter());
        for p in &node.pending {
            if let Pending::Write(DiskWrite::Append(es)) = p {
                entries.extend(es.iter());
            }
        }
    }
    for env in &s.net {
        match &env.msg {
            Message::Prepare { entries: es, .. } | Message::CatchUpReply { entries: es, .. } => {
                entries.extend(es.iter())
            }
            _ => {}
        }
    }
    for e in entries {
        if let Some(other) = seen.insert(e.vs, e) {
            ok &= other == e;
        }
        if matches!(e.body, Body::ViewStart) {
            ok &= *starts.entry(e.vs.view).or_insert(e.vs) == e.vs;
        }
    }
    ok
}

/// Whether `r`'s log holds `vs` (or cannot tell: folded into a checkpoint).
fn holds(r: &Replica<KvApp>, vs: Viewstamp) -> bool {
    r.op_max().op >= vs.op && r.stamp(vs.op).is_none_or(|x| x == vs)
}

/// Whether `r`'s log must hold `vs`, if `vs` is durable: `r` leads a later view (its log
/// is that view's base), or its log ends beyond `vs` (the chain to its end was built by
/// primaries that held `vs`).
fn must_hold(r: &Replica<KvApp>, vs: Viewstamp) -> bool {
    let leads_later = matches!(r.role(), Role::Elected | Role::Primary) && r.view() > vs.view;
    leads_later || r.op_max() > vs
}

/// Property 2 (Theorem 4.3.3): every durable point any replica held or the client was told
/// is in the log of every leader of a later view and of every replica whose log ends
/// beyond it.
fn dps_survive(s: &State) -> bool {
    s.dps
        .iter()
        .all(|&d| live(s).all(|r| !must_hold(r, d) || holds(r, d)))
}

/// Property 3: an acknowledged operation is in every later leader's log (and every log
/// that ends beyond it) as long as at most `lost` replicas lost their memory and no total
/// crash happened. With `lost == 0` this is the guarantee the implementation gives; the
/// thesis states it for `lost == f`.
fn acks_survive(s: &State, lost: u8) -> bool {
    if s.totals > 0 || s.crashes > lost {
        return true;
    }
    s.acks
        .iter()
        .all(|a| live(s).all(|r| !must_hold(r, a.vs) || holds(r, a.vs)))
}

/// Whether the synced disk `d` holds `vs` (or cannot tell: trimmed).
fn disk_holds(d: &Disk, vs: Viewstamp) -> bool {
    if vs.op > d.log_base.op {
        d.log
            .get((vs.op - d.log_base.op - 1) as usize)
            .is_some_and(|e| e.vs == vs)
    } else {
        vs.op < d.log_base.op || d.log_base == vs
    }
}

/// Property 5: a durable point is on a majority of synced disks (the definition of dp).
fn dps_on_disks(m: &VsrModel, s: &State) -> bool {
    let quorum = m.config.quorum();
    s.dps
        .iter()
        .all(|&d| s.nodes.iter().filter(|n| disk_holds(&n.disk, d)).count() >= quorum)
}

thread_local! {
    static IN_STEP: Cell<bool> = const { Cell::new(false) };
    static LAST_PANIC: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Panics inside a model step are expected (they are property violations): record their
/// message instead of printing it.
fn quiet_panics() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let previous = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            if IN_STEP.with(|c| c.get()) {
                LAST_PANIC.with(|m| *m.borrow_mut() = Some(info.to_string()));
            } else {
                previous(info);
            }
        }));
    });
}

// ---- hashing: the replica's fingerprint stands for the replica ----

fn hash_write<H: Hasher>(w: &Write, h: &mut H) {
    match w {
        DiskWrite::View(v) => (0u8, v).hash(h),
        DiskWrite::Append(es) => (1u8, es).hash(h),
        DiskWrite::Truncate { keep_through } => (2u8, keep_through).hash(h),
        DiskWrite::Checkpoint(s) => (3u8, s).hash(h),
        DiskWrite::TrimLog { through } => (4u8, through).hash(h),
        DiskWrite::Install(s) => (5u8, s).hash(h),
        DiskWrite::LogBase(b) => (6u8, b).hash(h),
    }
}

impl Hash for Node {
    fn hash<H: Hasher>(&self, h: &mut H) {
        match &self.replica {
            None => 0u8.hash(h),
            Some(r) => {
                1u8.hash(h);
                r.fingerprint(h);
                // The fingerprint counts deadlines only as set or not; whether one is
                // already due (a stepped-down primary campaigns at once) decides `Tick`.
                (r.poll_timeout() <= self.clock + SHORT).hash(h);
            }
        }
        self.disk.hash(h);
        self.pending.len().hash(h);
        for p in &self.pending {
            match p {
                Pending::Write(w) => hash_write(w, h),
                Pending::Sync(id) => (9u8, id).hash(h),
            }
        }
    }
}

impl Hash for State {
    fn hash<H: Hasher>(&self, h: &mut H) {
        self.nodes.hash(h);
        self.net.hash(h);
        self.client.hash(h);
        self.acks.hash(h);
        self.dps.hash(h);
        (self.crashes, self.totals, self.elections, self.ticks).hash(h);
        self.crashed_after_ack.hash(h);
        self.panic.hash(h);
    }
}

fn digest<T: Hash>(t: &T) -> u64 {
    let mut h = std::hash::DefaultHasher::new();
    t.hash(&mut h);
    h.finish()
}

impl PartialEq for State {
    fn eq(&self, other: &Self) -> bool {
        digest(self) == digest(other)
    }
}

// ---- compact printing for traces ----

pub fn fmt_entry(e: &Entry<KvOp>) -> String {
    let body = match &e.body {
        Body::ViewStart => "start".to_string(),
        Body::Requests(rs) => rs
            .iter()
            .map(|r| format!("{:?}#{}", r.op, r.seq))
            .collect::<Vec<_>>()
            .join("+"),
    };
    format!("{}:{}", e.vs, body)
}

fn fmt_entries(es: &[Entry<KvOp>]) -> String {
    es.iter().map(fmt_entry).collect::<Vec<_>>().join(" ")
}

pub fn fmt_msg(m: &Msg) -> String {
    match m {
        Message::Request { request, ev } => format!("Request(#{} ev {ev})", request.seq),
        Message::Reply { seq, vs, dp, .. } => format!("Reply(#{seq} vs {vs} dp {dp})"),
        Message::WrongView { view, last_seq, .. } => {
            format!("WrongView({view} last #{last_seq})")
        }
        Message::NotPrimary { view, .. } => format!("NotPrimary({view})"),
        Message::Stale { seq, .. } => format!("Stale(#{seq})"),
        Message::Prepare {
            view,
            entries,
            dp,
            dp_min,
            ..
        } => format!(
            "Prepare({view} [{}] dp {dp} dpMin {dp_min})",
            fmt_entries(entries)
        ),
        Message::PrepareOk {
            view,
            op_max,
            disk_op_max,
            dp,
            ..
        } => format!("PrepareOk({view} opMax {op_max} diskOpMax {disk_op_max} dp {dp})"),
        Message::Heartbeat {
            view, op_max, dp, ..
        } => {
            format!("Heartbeat({view} opMax {op_max} dp {dp})")
        }
        Message::ElectPrepare {
            view,
            op_max,
            restarted,
        } => format!("ElectPrepare({view} opMax {op_max} restarted {restarted})"),
        Message::ElectPrepareOk { view } => format!("ElectPrepareOk({view})"),
        Message::ElectAccept { view, op_max } => format!("ElectAccept({view} opMax {op_max})"),
        Message::ElectAcceptOk { view } => format!("ElectAcceptOk({view})"),
        Message::CatchUp { view, op_max } => format!("CatchUp({view} opMax {op_max})"),
        Message::CatchUpReply {
            view,
            op_max,
            lower_bound,
            entries,
            dp,
            ..
        } => format!(
            "CatchUpReply({view} opMax {op_max} lb {lower_bound} [{}] dp {dp})",
            fmt_entries(entries)
        ),
        Message::CatchUpState { view, op_max, .. } => {
            format!("CatchUpState({view} opMax {op_max})")
        }
        Message::Recovering {
            ask, view, op_max, ..
        } => format!("Recovering(#{ask} {view} opMax {op_max})"),
        Message::RecoveringReply {
            ask,
            view,
            op_max,
            primary,
            restarted,
            ..
        } => format!(
            "RecoveringReply(#{ask} {view} opMax {op_max} primary {primary} restarted {restarted})"
        ),
    }
}

fn fmt_addr(a: Address) -> String {
    match a {
        Address::Replica(r) => format!("r{r}"),
        Address::Client(_) => "client".to_string(),
    }
}

impl fmt::Debug for Envelope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}→{} {}",
            fmt_addr(self.from),
            fmt_addr(self.to),
            fmt_msg(&self.msg)
        )
    }
}

impl fmt::Debug for Act {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Act::Deliver(e) => write!(f, "deliver {e:?}"),
            Act::Duplicate(e) => write!(f, "deliver (keep a copy) {e:?}"),
            Act::Drop(e) => write!(f, "drop {e:?}"),
            Act::Tick(r) => write!(f, "r{r} short timeout"),
            Act::Elect(r) => write!(f, "r{r} view-change timeout"),
            Act::Sync(r) => write!(f, "r{r} sync completes"),
            Act::Crash { r, keep } => write!(f, "r{r} crashes keeping {keep} unsynced writes"),
            Act::Restart(r) => write!(f, "r{r} restarts from disk"),
            Act::TotalCrash => write!(f, "TOTAL CRASH (unsynced writes lost)"),
            Act::Submit => write!(f, "client submits its next op"),
            Act::ClientSend(r) => write!(f, "client sends its request to r{r}"),
        }
    }
}

impl fmt::Debug for Node {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.replica {
            None => write!(f, "crashed")?,
            Some(r) => {
                let log: Vec<String> = (r.log_start()..=r.op_max().op)
                    .filter_map(|op| r.entry(op).map(fmt_entry))
                    .collect();
                write!(
                    f,
                    "{:?} v{} dp {} diskOpMax {} log [{}]",
                    r.role(),
                    r.view(),
                    r.dp(),
                    r.disk_op_max(),
                    log.join(" ")
                )?;
                if let Some(c) = r.commit() {
                    write!(f, " commit {c}")?;
                }
            }
        }
        write!(
            f,
            " | disk v{} [{}] +{} unsynced",
            self.disk.view,
            fmt_entries(&self.disk.log),
            unsynced_writes(self)
        )
    }
}

impl fmt::Debug for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f)?;
        for (i, n) in self.nodes.iter().enumerate() {
            writeln!(f, "  r{i}: {n:?}")?;
        }
        for e in &self.net {
            writeln!(f, "  in flight: {e:?}")?;
        }
        let acks: Vec<String> = self
            .acks
            .iter()
            .map(|a| format!("#{} at {} (dp {})", a.seq, a.vs, a.dp))
            .collect();
        let dps: Vec<String> = self.dps.iter().map(|d| d.to_string()).collect();
        writeln!(
            f,
            "  client: ev {} submitted {} outstanding {:?} sent to view {:?}; acks [{}]; dps [{}]",
            self.client.ev,
            self.client.submitted,
            self.client.outstanding,
            self.client.sent_to_view.map(|v| v.to_string()),
            acks.join(", "),
            dps.join(" ")
        )?;
        writeln!(
            f,
            "  crashes {} total crashes {} view-change timeouts {} short timeouts {}",
            self.crashes, self.totals, self.elections, self.ticks
        )?;
        if let Some(p) = &self.panic {
            writeln!(f, "  PANIC: {p}")?;
        }
        Ok(())
    }
}
