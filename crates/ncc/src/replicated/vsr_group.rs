//! A shard whose replication group is three real Lazy VSR replicas (`verso-vsr`), not the
//! model of [`super::Replicated`]: the server's inputs are the requests of a real log, with
//! its view changes, lost suffixes and disks, inside the NCC simulator.
//!
//! The shape is the cluster simulator's (`verso-cluster`'s `sim/vsr_group.rs`), which runs
//! Lazen's group the same way:
//! - the log's application ([`InputLog`]) is the list of inputs applied, each with its
//!   operation number; undoing drops the tail. A replica that leads its view, once its
//!   view's first entry has committed and is durable (so everything in its log is
//!   committed), becomes the group's *host*: it rebuilds the server by replaying its log
//!   into a fresh one;
//! - the host executes each input at once on its live server (so later inputs see it) and
//!   hands it to its replica as a request; the input's outputs leave only when the
//!   replica's reply for it comes back, in log order, that is once the input committed
//!   (and, under [`Durability::LazyAnswersOnDisk`], once it is on a majority's disks: the
//!   request is `sync`). [`Durability::Sync`] runs the replicas as VSR-Sync;
//! - messages for the shard go to the host in the newest view; with none (an election
//!   under way) they are lost, and their senders send again, as after the model's
//!   failover.
//!
//! Time is the server's clock (µs): every event of the group (a message between replicas,
//! a disk's sync, a restart, the replicas' timers) is queued at a time on it, and runs when
//! the simulator next calls the server at or after that time, with its own time, so the
//! replicas see exactly the run they would have seen had they been called at once. The
//! server asks to be ticked while the group has work in flight.
//!
//! What this checks beyond the model: **every input whose outputs left is in every later
//! host's log**, unless a total crash under Lazy VSR came after it (Lazy VSR's lost
//! suffix, counted in [`ReplicationStats::committed_lost`]); anything else is reported by
//! [`TxnServer::check_invariants`].

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap, VecDeque};
use std::fmt::Debug;

use verso_vsr::sim_disk::SimDisk;
use verso_vsr::{
    Action, Address, ClientId as VsrClientId, Config as VsrConfig, Message as VsrMessage,
    MessageOf, Mode, Replica, Request as VsrRequest, Role, ViewNum,
};

mod input_log;

use input_log::{InputLog, Logged};

use super::{Durability, Input, Outputs, ReplicationModel, ReplicationStats, UnloggedMistake};
use crate::protocol::{GroupFault, TxnServer};
use crate::types::{ClientId, Effects, Key, ServerId, TxnId, Value};
use crate::workload::Rng;

/// Replicas per group.
const REPLICAS: u8 = 3;
/// How often the replicas' timers are looked at (µs of the server's clock).
const REPLICA_TICK: u64 = 500;

type Msg<M> = MessageOf<InputLog<M>>;
type Disk<M> = SimDisk<Logged<M>, (), Vec<(u64, Logged<M>)>>;

/// An input the host executed and handed to its replica.
#[derive(Debug)]
struct Submitted<M> {
    seq: u64,
    uid: u64,
    /// Its outputs, held until the reply comes (already sent under
    /// `answers_before_commit`).
    outputs: Option<Outputs<M>>,
    replied: bool,
}

/// The server on the replica that leads (module docs).
#[derive(Debug)]
struct Host<S: TxnServer> {
    view: ViewNum,
    /// A fresh client identity per host, so its request numbers start at 1.
    client: VsrClientId,
    seq: u64,
    server: S,
    /// When the server was last ticked (its recovery timers).
    ticked_at: u64,
    pending: VecDeque<Submitted<S::Msg>>,
}

/// One replica with its disk.
struct Node<M: Clone + Debug> {
    replica: Option<Replica<InputLog<M>>>,
    /// Bumped by each crash: what was under way for an earlier life is dropped.
    incarnation: u64,
    disk: Disk<M>,
    /// Its messages to and from the other replicas are lost until then: a primary cut off
    /// goes on hosting until it learns it was replaced.
    cut_off_until: u64,
}

#[derive(Debug)]
enum Event<M: Clone + Debug> {
    Deliver {
        to: u8,
        from: u8,
        /// The receiver's and the sender's lives when it was sent: a crash of either
        /// loses what was on the wire.
        incarnation: u64,
        from_incarnation: u64,
        msg: Box<Msg<M>>,
    },
    SyncDone {
        replica: u8,
        incarnation: u64,
    },
    Restart {
        replica: u8,
    },
    /// The replicas' timers (always one queued).
    Tick,
    /// A replica's cut-off ends (nothing to do but count as work in flight until then).
    Reconnect,
}

/// A server `S` whose replication group is three real `verso-vsr` replicas (module docs).
pub struct VsrReplicated<S: TxnServer> {
    model: ReplicationModel,
    /// The server in its initial state: every host rebuilds from it.
    initial: S,
    nodes: Vec<Node<S::Msg>>,
    hosts: Vec<Option<Host<S>>>,
    seed: u64,
    rng: Rng,
    /// The group's clock: the time of the event it runs, or of the last call.
    now: u64,
    queue: BinaryHeap<Reverse<(u64, u64)>>,
    events: BTreeMap<u64, Event<S::Msg>>,
    next_event: u64,
    /// Queued events other than the timers' tick: while there are any, the group has work.
    in_flight: usize,
    /// Per link (from, to): when its last message arrives (links are FIFO).
    link_free_at: [[u64; REPLICAS as usize]; REPLICAS as usize],
    next_uid: u64,
    next_client: VsrClientId,
    /// The newest view a replica hosted in (`None`: none yet; the first host is not a
    /// failover). A replica of an older view that catches up late does not host.
    hosted: Option<ViewNum>,
    /// Inputs whose outputs left, with when.
    answered: BTreeMap<u64, u64>,
    /// Inputs a deposed host handed to its replica without a reply: the next host's log
    /// tells whether they committed.
    orphans: BTreeSet<u64>,
    total_crash_at: Option<u64>,
    ready: Vec<(ClientId, S::Msg)>,
    ready_peers: Vec<(ServerId, S::Msg)>,
    violation: Option<String>,
    pub stats: ReplicationStats,
}

impl<S> VsrReplicated<S>
where
    S: TxnServer + Clone,
{
    /// `server` in its initial state, replicated by three replicas whose timing
    /// (`model.round`, `model.sync_gap`) and durability follow `model`; `seed` draws the
    /// group's delays and crashes.
    pub fn new(server: S, model: ReplicationModel, seed: u64) -> VsrReplicated<S> {
        assert!(model.round > 0, "a replication round takes time");
        let nodes = (0..REPLICAS)
            .map(|r| Node {
                replica: Some(Replica::new(
                    r,
                    replica_config(seed, model, r),
                    InputLog::default(),
                    0,
                )),
                incarnation: 0,
                disk: Disk::default(),
                cut_off_until: 0,
            })
            .collect();
        let mut g = VsrReplicated {
            model,
            initial: server,
            nodes,
            hosts: (0..REPLICAS).map(|_| None).collect(),
            seed,
            rng: Rng(seed ^ 0x5eed_0f9e),
            now: 0,
            queue: BinaryHeap::new(),
            events: BTreeMap::new(),
            next_event: 0,
            in_flight: 0,
            link_free_at: [[0; REPLICAS as usize]; REPLICAS as usize],
            next_uid: 1,
            next_client: 1,
            hosted: None,
            answered: BTreeMap::new(),
            orphans: BTreeSet::new(),
            total_crash_at: None,
            ready: Vec::new(),
            ready_peers: Vec::new(),
            violation: None,
            stats: ReplicationStats::default(),
        };
        g.schedule(REPLICA_TICK, Event::Tick);
        g
    }

    fn schedule(&mut self, after: u64, e: Event<S::Msg>) {
        if !matches!(e, Event::Tick) {
            self.in_flight += 1;
        }
        let id = self.next_event;
        self.next_event += 1;
        self.queue.push(Reverse((self.now + after, id)));
        self.events.insert(id, e);
    }

    /// Runs every event due by `now`, each at its own time.
    fn advance(&mut self, now: u64) {
        while let Some(&Reverse((at, id))) = self.queue.peek() {
            if at > now {
                break;
            }
            self.queue.pop();
            self.now = self.now.max(at);
            let e = self.events.remove(&id).expect("queued");
            if !matches!(e, Event::Tick) {
                self.in_flight -= 1;
            }
            self.step(e);
        }
        self.now = self.now.max(now);
    }

    fn step(&mut self, e: Event<S::Msg>) {
        let now = self.now;
        match e {
            Event::Deliver {
                to,
                from,
                incarnation,
                from_incarnation,
                msg,
            } => {
                if self.nodes[usize::from(from)].incarnation != from_incarnation
                    || self.cut_off(from, to)
                {
                    return; // its sender crashed since, or the link is cut
                }
                let node = &mut self.nodes[usize::from(to)];
                if node.incarnation != incarnation {
                    return; // sent to a life that crashed since
                }
                let Some(r) = node.replica.as_mut() else {
                    return;
                };
                r.handle_message(now, Address::Replica(from), *msg);
                self.pump(to);
            }
            Event::SyncDone {
                replica,
                incarnation,
            } => {
                let node = &mut self.nodes[usize::from(replica)];
                if node.incarnation != incarnation {
                    return;
                }
                let Some((id, checkpoints)) = node.disk.complete_sync() else {
                    return;
                };
                let Some(r) = node.replica.as_mut() else {
                    return;
                };
                r.handle_synced(now, id);
                for ap in checkpoints {
                    r.handle_checkpoint_durable(now, ap);
                }
                self.pump(replica);
            }
            Event::Restart { replica } => self.restart(replica),
            Event::Reconnect => {}
            Event::Tick => {
                for r in 0..REPLICAS {
                    let node = &mut self.nodes[usize::from(r)];
                    if let Some(rep) = node.replica.as_mut() {
                        if rep.poll_timeout() <= now {
                            rep.handle_timeout(now);
                            self.pump(r);
                        }
                    }
                }
                self.schedule(REPLICA_TICK, Event::Tick);
            }
        }
    }

    /// Carries out what replica `r` asked for, then lets its host release what committed.
    fn pump(&mut self, r: u8) {
        let mut replies = Vec::new();
        loop {
            let now = self.now;
            let node = &mut self.nodes[usize::from(r)];
            let Some(rep) = node.replica.as_mut() else {
                return;
            };
            let Some(action) = rep.poll_action() else {
                break;
            };
            match action {
                Action::Send {
                    to: Address::Replica(to),
                    message,
                } => self.send(to, r, message),
                Action::Send {
                    to: Address::Client(_),
                    message,
                } => replies.push(message),
                Action::Write(w) => node.disk.write(w),
                Action::Sync { id } => {
                    let delay = 1 + self.rng.below(self.model.sync_gap.max(1));
                    let node = &mut self.nodes[usize::from(r)];
                    let at = node.disk.sync(id, now, delay);
                    let incarnation = node.incarnation;
                    self.schedule(
                        at - now,
                        Event::SyncDone {
                            replica: r,
                            incarnation,
                        },
                    );
                }
            }
        }
        if let Some(host) = self.hosts[usize::from(r)].as_mut() {
            for m in replies {
                if let VsrMessage::Reply { client, seq, .. } = m {
                    if client == host.client {
                        if let Some(p) = host.pending.iter_mut().find(|p| p.seq == seq) {
                            p.replied = true;
                        }
                    }
                }
            }
        }
        self.check_host(r);
        self.release(r);
    }

    fn send(&mut self, to: u8, from: u8, msg: Msg<S::Msg>) {
        // One way is about half a round, give or take, and a link delivers in order, as a
        // TCP connection does (`verso sim vsr` is where replicas' messages are reordered,
        // lost and duplicated; reordered PREPAREs here cost a catch-up timeout each).
        if self.cut_off(from, to) {
            return;
        }
        let half = self.model.round / 2;
        let delay = 1 + half / 2 + self.rng.below(half.max(1));
        let link = &mut self.link_free_at[usize::from(from)][usize::from(to)];
        let at = (self.now + delay).max(*link);
        *link = at;
        let incarnation = self.nodes[usize::from(to)].incarnation;
        let from_incarnation = self.nodes[usize::from(from)].incarnation;
        self.schedule(
            at - self.now,
            Event::Deliver {
                to,
                from,
                incarnation,
                from_incarnation,
                msg: Box::new(msg),
            },
        );
    }

    /// Whether messages between `a` and `b` are lost now (one of them is cut off).
    fn cut_off(&self, a: u8, b: u8) -> bool {
        self.nodes[usize::from(a)].cut_off_until > self.now
            || self.nodes[usize::from(b)].cut_off_until > self.now
    }

    /// Drops a host whose replica no longer leads its view; starts one on a replica that
    /// leads and whose view's first entry is committed and durable.
    fn check_host(&mut self, r: u8) {
        let Some(rep) = self.nodes[usize::from(r)].replica.as_ref() else {
            return;
        };
        let leads = rep.role() == Role::Primary;
        if let Some(h) = &self.hosts[usize::from(r)] {
            if !leads || rep.view() != h.view {
                self.drop_host(r);
            }
            return;
        }
        let op_max = rep.op_max();
        if !leads || rep.commit() != Some(op_max) || rep.dp() < op_max {
            return;
        }
        let view = rep.view();
        if self.hosted.is_some_and(|v| v >= view) {
            return;
        }
        let log: Vec<Logged<S::Msg>> = rep.app().applied.iter().map(|(_, l)| l.clone()).collect();
        self.start_host(r, view, &log);
    }

    fn drop_host(&mut self, r: u8) {
        if let Some(h) = self.hosts[usize::from(r)].take() {
            self.orphans
                .extend(h.pending.iter().filter(|p| !p.replied).map(|p| p.uid));
        }
    }

    /// Replica `r` starts hosting over `log`, its committed inputs.
    fn start_host(&mut self, r: u8, view: ViewNum, log: &[Logged<S::Msg>]) {
        let uids: BTreeSet<u64> = log.iter().map(|l| l.uid).collect();
        let gone: Vec<(u64, u64)> = self
            .answered
            .iter()
            .filter(|(uid, _)| !uids.contains(uid))
            .map(|(&uid, &at)| (uid, at))
            .collect();
        for (uid, at) in gone {
            self.answered.remove(&uid);
            let lost_to_lazy_crash = self.model.durability == Durability::Lazy
                && self.total_crash_at.is_some_and(|t| t >= at);
            if lost_to_lazy_crash {
                self.stats.committed_lost += 1;
            } else if self.violation.is_none() {
                self.violation = Some(format!(
                    "input #{uid}, answered at {at} µs, is not in the log of the host starting \
                     on replica {r} in view {view:?} (last total crash: {:?})",
                    self.total_crash_at
                ));
            }
        }
        for uid in std::mem::take(&mut self.orphans) {
            if !uids.contains(&uid) {
                self.stats.uncommitted_lost += 1;
            }
        }
        let mut server = self.initial.clone();
        for l in log {
            execute(&mut server, &l.input);
        }
        let ticked_at = log
            .iter()
            .rev()
            .find_map(|l| match l.input {
                Input::Tick(t) => Some(t),
                Input::Message(..) => None,
            })
            .unwrap_or(0);
        if self.hosted.is_some() {
            self.stats.failovers += 1;
        }
        self.hosted = Some(view);
        let client = self.next_client;
        self.next_client += 1;
        self.hosts[usize::from(r)] = Some(Host {
            view,
            client,
            seq: 0,
            server,
            ticked_at,
            pending: VecDeque::new(),
        });
        // A new host's first input keeps its predecessors' promises to their unlogged
        // reads.
        if self.model.unlogged_reads
            && self.model.unlogged_mistake != Some(UnloggedMistake::NoFloor)
        {
            let note = self.hosts[usize::from(r)]
                .as_ref()
                .and_then(|h| h.server.floor_applied_note());
            if let Some(note) = note {
                self.submit(r, Input::Message(self.now, note));
            }
        }
    }

    /// The host on replica `r` releases the outputs of its inputs whose replies came, in
    /// log order.
    fn release(&mut self, r: u8) {
        let Some(host) = self.hosts[usize::from(r)].as_mut() else {
            return;
        };
        while host.pending.front().is_some_and(|p| p.replied) {
            let p = host.pending.pop_front().expect("checked");
            self.stats.inputs_committed += 1;
            if let Some((to_clients, to_peers)) = p.outputs {
                self.answered.insert(p.uid, self.now);
                self.ready.extend(to_clients);
                self.ready_peers.extend(to_peers);
            }
        }
    }

    /// The host in the newest view hosted, if it still hosts: where the shard's messages
    /// go. A deposed host that has not heard of its successor takes no new input (its
    /// replica could never commit it, and its server would see decisions for transactions
    /// its successor executed); what it already handed over may still commit and leave.
    fn leader(&self) -> Option<u8> {
        (0..REPLICAS).find(|&r| {
            self.hosts[usize::from(r)]
                .as_ref()
                .is_some_and(|h| Some(h.view) == self.hosted)
        })
    }

    /// A read-only read answered outside the log (`server/unlogged.rs`) by a host whose
    /// replica holds the read lease: the leader, or, half the time while one exists, a
    /// deposed host that has not heard of its successor (which must not answer: its lease
    /// has run out before anybody else could lead). Its answer leaves with the last input
    /// its host handed over, or at once. Gives the message back if it must be logged.
    fn try_read_unlogged(&mut self, msg: S::Msg) -> Option<S::Msg> {
        let deposed = (0..REPLICAS).find(|&r| {
            self.hosts[usize::from(r)]
                .as_ref()
                .is_some_and(|h| Some(h.view) != self.hosted)
        });
        let r = match (deposed, self.leader()) {
            (Some(d), _) if self.rng.below(2) == 0 => d,
            (_, Some(l)) => l,
            (Some(d), None) => d,
            (None, None) => return None,
        };
        let host = self.hosts[usize::from(r)].as_ref()?;
        let Some(clk) = host.server.unlogged_read(&msg) else {
            return Some(msg);
        };
        let leased = self.nodes[usize::from(r)]
            .replica
            .as_ref()
            .is_some_and(|rep| rep.lease_read(self.now).is_some());
        if !leased {
            // A deposed host drops it (its sender resends); the leader logs it.
            return (Some(r) == self.leader()).then_some(msg);
        }
        if let Some(note) = host.server.floor_promise_for(clk) {
            self.stats.floor_promises += 1;
            self.submit(r, Input::Message(self.now, note));
        }
        let host = self.hosts[usize::from(r)].as_mut()?;
        host.server.execute_unlogged(self.now, msg);
        let answers = host.server.drain();
        self.stats.reads_unlogged += 1;
        match host.pending.back_mut() {
            Some(Submitted {
                outputs: Some(held),
                ..
            }) => held.0.extend(answers),
            _ => self.ready.extend(answers),
        }
        None
    }

    /// The leader executes `input` and hands it to its replica, after the note a replay
    /// needs to run it as the host did (`server/unlogged.rs`).
    fn submit(&mut self, r: u8, input: Input<S::Msg>) {
        let Some(host) = self.hosts[usize::from(r)].as_mut() else {
            return;
        };
        if self.model.unlogged_reads {
            host.server.begin_logged();
        }
        let outputs = execute(&mut host.server, &input);
        if let Some(note) = host.server.end_logged() {
            if self.model.unlogged_mistake != Some(UnloggedMistake::NoNotes) {
                self.stats.read_notes += 1;
                let now = self.now;
                self.hand_over(r, Input::Message(now, note), (Vec::new(), Vec::new()));
            }
        }
        self.hand_over(r, input, outputs);
    }

    /// Hands an input the host on `r` executed to its replica, holding its outputs.
    fn hand_over(&mut self, r: u8, input: Input<S::Msg>, outputs: Outputs<S::Msg>) {
        let now = self.now;
        let uid = self.next_uid;
        self.next_uid += 1;
        let sync = self.model.durability == Durability::LazyAnswersOnDisk;
        let early = self.model.answers_before_commit;
        let Some(host) = self.hosts[usize::from(r)].as_mut() else {
            return;
        };
        let outputs = if early {
            self.answered.insert(uid, now);
            self.ready.extend(outputs.0);
            self.ready_peers.extend(outputs.1);
            None
        } else {
            Some(outputs)
        };
        host.seq += 1;
        host.pending.push_back(Submitted {
            seq: host.seq,
            uid,
            outputs,
            replied: false,
        });
        let request = VsrRequest {
            client: host.client,
            seq: host.seq,
            op: Logged { uid, input },
            sync,
        };
        let client = host.client;
        let Some(rep) = self.nodes[usize::from(r)].replica.as_mut() else {
            return;
        };
        let ev = rep.view();
        rep.handle_message(
            now,
            Address::Client(client),
            VsrMessage::Request { request, ev },
        );
        self.pump(r);
    }

    fn crash(&mut self, r: u8) {
        if self.nodes[usize::from(r)].replica.is_none() {
            return;
        }
        self.drop_host(r);
        let keep_draw = self.rng.next();
        let torn_draw = self.rng.next();
        let node = &mut self.nodes[usize::from(r)];
        node.replica = None;
        node.incarnation += 1;
        node.disk.crash(keep_draw, torn_draw);
    }

    fn restart(&mut self, r: u8) {
        let now = self.now;
        let config = replica_config(self.seed, self.model, r);
        let node = &mut self.nodes[usize::from(r)];
        if node.replica.is_some() {
            return;
        }
        node.replica = Some(Replica::recover(
            r,
            config,
            InputLog::default(),
            &node.disk.durable,
            now,
        ));
        self.pump(r);
    }

    /// Whether a replica is down, cut off, or has not recovered from a crash yet.
    fn impaired(&self) -> bool {
        self.nodes.iter().any(|n| {
            n.cut_off_until > self.now || n.replica.as_ref().is_none_or(|r| r.is_amnesiac())
        })
    }

    /// What the group's log says: the server rebuilt from the inputs of the replica that
    /// committed the most.
    fn logged_state(&self) -> S {
        let best = self
            .nodes
            .iter()
            .filter_map(|n| n.replica.as_ref())
            .max_by_key(|r| (r.commit(), r.app().applied.len()));
        let mut server = self.initial.clone();
        for (_, l) in best.map_or(&[][..], |r| &r.app().applied[..]) {
            execute(&mut server, &l.input);
        }
        server
    }

    /// A one-line account of the replicas.
    pub fn describe(&self) -> String {
        let replicas: Vec<String> = self
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| match &n.replica {
                None => format!("r{i} down"),
                Some(r) => format!(
                    "r{i} {:?} view {:?} op_max {} commit {:?} dp {}{}",
                    r.role(),
                    r.view(),
                    r.op_max().op,
                    r.commit().map(|c| c.op),
                    r.dp().op,
                    self.hosts[i].as_ref().map_or(String::new(), |h| format!(
                        " hosting, {} pending",
                        h.pending.len()
                    ))
                ),
            })
            .collect();
        replicas.join(" / ")
    }
}

fn execute<S: TxnServer>(server: &mut S, input: &Input<S::Msg>) -> Outputs<S::Msg> {
    match input {
        Input::Message(now, msg) => server.on_message(*now, msg.clone()),
        Input::Tick(now) => server.tick(*now),
    }
    (server.drain(), server.drain_peers())
}

/// The replicas' settings, in µs of the server's clock: a view change after about
/// 30 rounds without the primary, so that failovers are rare next to the clients' 10 ms
/// resends but happen many times in a run.
fn replica_config(seed: u64, model: ReplicationModel, replica: u8) -> VsrConfig {
    let mut c = VsrConfig::new(REPLICAS);
    c.mode = match model.durability {
        Durability::Sync => Mode::Sync,
        Durability::Lazy | Durability::LazyAnswersOnDisk => Mode::Lazy,
    };
    // The timers' unit: a round, or a tenth of the disks' delay if that is longer (an
    // election waits for a disk write; with timers shorter than the disks it never ends).
    let unit = model.round.max(model.sync_gap / 10);
    c.heartbeat_interval = 3 * unit;
    c.view_change_timeout = 30 * unit;
    c.view_change_jitter = 15 * unit;
    c.election_timeout = 25 * unit;
    c.catch_up_timeout = 10 * unit;
    // A request the primary dropped would hold back every later answer of its host, which
    // waits for replies in order: the queue is not the limit here.
    c.request_queue_max = usize::MAX;
    // Unlogged reads need the read lease: 4/5 of the view-change timeout, as the real
    // groups have it.
    c.lease = if model.unlogged_reads { 24 * unit } else { 0 };
    // The log stays small in a run: no checkpoints.
    c.checkpoint_interval = 0;
    c.seed = seed
        .wrapping_mul(0x9e37_79b9_7f4a_7c15)
        .wrapping_add(u64::from(replica));
    c
}

impl<S> TxnServer for VsrReplicated<S>
where
    S: TxnServer + Clone,
{
    type Msg = S::Msg;

    fn on_message(&mut self, now: u64, msg: S::Msg) {
        self.advance(now);
        if self.model.unlogged_reads {
            if let Some(msg) = self.try_read_unlogged(msg) {
                if let Some(r) = self.leader() {
                    self.submit(r, Input::Message(now, msg));
                }
            }
            return;
        }
        if let Some(r) = self.leader() {
            self.submit(r, Input::Message(now, msg));
        }
    }

    fn drain(&mut self) -> Vec<(ClientId, S::Msg)> {
        std::mem::take(&mut self.ready)
    }

    fn drain_peers(&mut self) -> Vec<(ServerId, S::Msg)> {
        std::mem::take(&mut self.ready_peers)
    }

    fn admits(&self, msg: &S::Msg) -> bool {
        self.initial.admits(msg)
    }

    fn starts_work(&self, msg: &S::Msg) -> bool {
        self.initial.starts_work(msg)
    }

    fn check_invariants(&self) -> Result<(), String> {
        if let Some(v) = &self.violation {
            return Err(format!("the replication group lost an answered input: {v}"));
        }
        let mut views = BTreeSet::new();
        for h in self.hosts.iter().flatten() {
            if !views.insert(h.view) {
                return Err(format!("two hosts in view {:?}", h.view));
            }
            h.server.check_invariants()?;
        }
        Ok(())
    }

    fn committed_versions(&self) -> Vec<(Key, Vec<Value>)> {
        self.logged_state().committed_versions()
    }

    fn undecided(&self) -> Vec<TxnId> {
        self.logged_state().undecided()
    }

    fn describe_waits(&self) -> String {
        let inner = self
            .leader()
            .and_then(|r| self.hosts[usize::from(r)].as_ref())
            .map_or("no host".to_string(), |h| h.server.describe_waits());
        format!("{}; {inner}", self.describe())
    }

    fn tick_every(&self) -> Option<u64> {
        let busy = self.in_flight > 0
            || self.leader().is_none()
            || self.hosts.iter().flatten().any(|h| !h.pending.is_empty());
        // Called back exactly when the group's next event is due, so that an answer leaves
        // when its reply comes, not at the next multiple of some period.
        let next = self.queue.peek().map_or(REPLICA_TICK, |Reverse((at, _))| {
            at.saturating_sub(self.now).max(1)
        });
        let replication = busy.then_some(next);
        let inner = self
            .leader()
            .and_then(|r| self.hosts[usize::from(r)].as_ref())
            .and_then(|h| h.server.tick_every());
        match (inner, replication) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn tick(&mut self, now: u64) {
        self.advance(now);
        let Some(r) = self.leader() else {
            return;
        };
        let due = self.hosts[usize::from(r)].as_ref().is_some_and(|h| {
            h.server
                .tick_every()
                .is_some_and(|every| now >= h.ticked_at + every)
        });
        if due {
            if let Some(h) = self.hosts[usize::from(r)].as_mut() {
                h.ticked_at = now;
            }
            self.submit(r, Input::Tick(now));
        }
    }

    fn committed_effects(&self) -> Vec<(TxnId, Effects)> {
        self.logged_state().committed_effects()
    }

    fn decisions(&self) -> Vec<(TxnId, bool)> {
        self.logged_state().decisions()
    }

    fn replication_stats(&self) -> Option<ReplicationStats> {
        Some(self.stats)
    }

    fn group_fault(&mut self, now: u64, fault: GroupFault) {
        self.advance(now);
        match fault {
            GroupFault::Failover { .. } => {
                // The primary crashes (what survives is the protocol's to decide, not
                // the fault's); never a second replica while one is down or recovering:
                // that is a total crash.
                if self.impaired() {
                    return;
                }
                let r = match self.leader() {
                    Some(r) => r,
                    None => self.rng.below(u64::from(REPLICAS)) as u8,
                };
                if self.rng.below(2) == 0 {
                    self.crash(r);
                    let after = self.model.round * (5 + self.rng.below(60));
                    self.schedule(after, Event::Restart { replica: r });
                } else {
                    // Cut off from its peers, long enough for them to elect another now
                    // and then: it hosts on, deposed, until it hears of its successor.
                    let until = now + self.model.round * (10 + self.rng.below(60));
                    self.nodes[usize::from(r)].cut_off_until = until;
                    self.schedule(until - now, Event::Reconnect);
                }
            }
            GroupFault::TotalCrash => {
                self.stats.total_crashes += 1;
                self.total_crash_at = Some(now);
                for r in 0..REPLICAS {
                    self.crash(r);
                    let after = self.model.round * (3 + self.rng.below(30));
                    self.schedule(after, Event::Restart { replica: r });
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
