//! The simulated world: replicas with their disks, clients, and the network between them,
//! all in one event queue ordered by virtual time (ties broken by insertion order, so a
//! seed fixes the run).

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap, VecDeque};

use verso_vsr::kv::{KvApp, KvOp, KvReply};
use verso_vsr::{
    Action, Address, Client, ClientEvent, Config, DiskWrite, Durable, Entry, Message, MessageOf,
    Replica, Role, Viewstamp,
};

use crate::checks::{self, History, OpRecord};
use crate::rng::Rng;
use crate::{Failure, Faults, SimConfig};

type Msg = MessageOf<KvApp>;
type Disk = Durable<KvOp, KvReply, KvApp>;
type Write = DiskWrite<KvOp, KvReply, KvApp>;

/// What a finished run measured.
#[derive(Clone, Debug, Default)]
pub struct Outcome {
    pub ops_acknowledged: u64,
    pub ops_lost: u64,
    pub crashes: u64,
    pub total_crashes: u64,
    pub view_changes: u64,
    pub state_transfers: u64,
    pub messages: u64,
    /// Messages between replicas and clients per acknowledged operation, by kind.
    pub messages_by_kind: BTreeMap<&'static str, u64>,
    pub virtual_ms: u64,
    /// Virtual milliseconds from the end of faults until the group had finished.
    pub recovery_ms: u64,
    /// Reads a primary answered under its lease (checked with the rest).
    pub lease_reads: u64,
    /// Checkpoints a disk wrote aside and reported durable.
    pub checkpoints_durable: u64,
    /// Writes and syncs that went ahead of a checkpoint being written.
    pub passed_checkpoints: u64,
    /// Of those, a view change's truncations (`DiskWrite::may_pass_checkpoint`).
    pub truncates_passed_checkpoints: u64,
}

enum Event {
    Deliver {
        to: Address,
        from: Address,
        msg: Box<Msg>,
    },
    SyncDone {
        replica: u8,
        incarnation: u64,
        id: u64,
    },
    /// The checkpoint a replica's disk was writing aside is written and synced.
    CheckpointDone {
        replica: u8,
        incarnation: u64,
    },
    Restart {
        replica: u8,
    },
    Fault,
    EndFaults,
    /// A client reads a key at a random replica under its read lease, if it holds one.
    LeaseRead,
}

/// A lease read taken and not answered yet: it waits for `last` to commit in `view`.
struct PendingRead {
    replica: u8,
    incarnation: u64,
    view: verso_vsr::ViewNum,
    last: Viewstamp,
    key: u64,
    observed: Option<u64>,
    start: u64,
}

/// What a replica hands its disk.
enum DiskItem {
    Write(Write),
    Sync(u64),
}

/// A replica's machine: the process (absent while crashed) and its disk.
struct Node {
    replica: Option<Replica<KvApp>>,
    incarnation: u64,
    durable: Disk,
    /// Writes handed to the disk and not yet synced.
    unsynced: Vec<Write>,
    /// Per pending sync: its id and how many unsynced writes it covers.
    syncs: VecDeque<(u64, usize)>,
    /// A checkpoint being written aside: `Append`s, `View`s and syncs go ahead of it
    /// (`verso_vsr::Action::Write`); anything else waits in `behind`, with everything
    /// handed to the disk after it.
    checkpoint: Option<Write>,
    behind: VecDeque<DiskItem>,
    /// When the disk's last sync completes (syncs complete in order).
    disk_free_at: u64,
    /// Restarted and not yet holding what was acknowledged before (see `Faults::Minority`).
    amnesia_until: Option<Viewstamp>,
    /// Role and view last traced.
    traced: Option<(Role, verso_vsr::ViewNum)>,
    /// How much faster (or slower, below 0) its clock runs than virtual time, in parts
    /// per million: the read lease must hold with clocks that drift apart.
    rate_ppm: i64,
}

struct SimClient {
    client: Client<KvOp, KvReply>,
    remaining: usize,
    /// The operation in flight: index into `history.ops`.
    current: Option<usize>,
}

pub(crate) struct World {
    cfg: SimConfig,
    rng: Rng,
    now: u64,
    seq: u64,
    queue: BinaryHeap<Reverse<(u64, u64)>>,
    events: HashMap<u64, Event>,
    nodes: Vec<Node>,
    clients: Vec<SimClient>,
    /// `blocked[a][b]`: messages from replica a to replica b are lost.
    blocked: Vec<Vec<bool>>,
    faults_on: bool,
    faults_ended_at: u64,
    // Per-run fault rates, drawn from the seed (swarm testing: each seed its own mix).
    drop_ppm: u64,
    dup_ppm: u64,
    delay_max: u64,
    stall_ppm: u64,
    /// `SimConfig::slow_checkpoints`.
    slow_checkpoints: bool,
    // Per-run timing, drawn from the seed too (no jitter, or uneven timeouts, is where
    // elections livelock).
    view_change_timeouts: Vec<u64>,
    view_change_jitter: u64,
    election_timeout: u64,
    history: History,
    /// Every entry seen on the wire, by viewstamp: two different ones are a violation.
    entries: HashMap<Viewstamp, Entry<KvOp>>,
    /// Every durable point a primary announced.
    announced_dps: Vec<Viewstamp>,
    max_acked: Viewstamp,
    /// The read lease most replicas are configured with (0: none this run), and each
    /// replica's own.
    lease: u64,
    leases: Vec<u64>,
    pending_reads: Vec<PendingRead>,
    /// A property broken while the run went on (reported with the trace).
    violation: Option<String>,
    trace: VecDeque<String>,
    outcome: Outcome,
}

const TRACE_KEPT: usize = 400;

impl World {
    pub(crate) fn new(cfg: SimConfig) -> World {
        let mut rng = Rng::new(cfg.seed);
        let n = cfg.replicas;
        let networked = cfg.faults != Faults::None;
        let drop_ppm = if networked { rng.range(0, 100_000) } else { 0 };
        let dup_ppm = if networked { rng.range(0, 50_000) } else { 0 };
        let delay_max = if networked { rng.range(1, 40) } else { 2 };
        let stall_ppm = if networked { rng.range(0, 50_000) } else { 0 };
        let view_change_jitter = [0, 100, 300][rng.below(3) as usize];
        let election_timeout = rng.range(200, 800);
        let view_change_timeouts: Vec<u64> = (0..n).map(|_| rng.range(300, 1200)).collect();
        // Most runs lease reads, with one setting for the whole group (a promise must
        // outlast the primary's lease): shorter than the view-change timeouts, or longer,
        // when a backup that times out must wait for its promise to end.
        let lease = match rng.below(4) {
            0 => 0,
            _ => rng.range(150, 2500),
        };
        // Some runs configure each replica's lease on its own (0 included): a promise must
        // still cover every lease a primary counts it for.
        let leases: Vec<u64> = (0..n)
            .map(|_| match (lease, rng.below(3)) {
                (0, _) | (_, 0 | 1) => lease,
                _ => match rng.below(4) {
                    0 => 0,
                    _ => rng.range(150, 2500),
                },
            })
            .collect();
        // Clock rates within 4 % of each other (`verso_vsr::LEASE_DRIFT_DIVISOR`).
        let rates: Vec<i64> = (0..n)
            .map(|_| rng.range(0, 40_001) as i64 - 20_000)
            .collect();
        let mut w = World {
            nodes: Vec::new(),
            clients: Vec::new(),
            blocked: vec![vec![false; usize::from(n)]; usize::from(n)],
            faults_on: cfg.faults != Faults::None,
            faults_ended_at: 0,
            drop_ppm,
            dup_ppm,
            delay_max,
            stall_ppm,
            slow_checkpoints: cfg.slow_checkpoints,
            view_change_timeouts,
            view_change_jitter,
            election_timeout,
            lease,
            leases,
            pending_reads: Vec::new(),
            history: History::default(),
            entries: HashMap::new(),
            announced_dps: Vec::new(),
            max_acked: Viewstamp::ZERO,
            violation: None,
            trace: VecDeque::new(),
            outcome: Outcome::default(),
            now: 0,
            seq: 0,
            queue: BinaryHeap::new(),
            events: HashMap::new(),
            rng,
            cfg,
        };
        let checkpoint_interval = match w.rng.below(3) {
            0 => 0,
            _ => w.rng.range(8, 64),
        };
        for id in 0..n {
            let mut config = w.replica_config(id);
            config.checkpoint_interval = checkpoint_interval;
            w.nodes.push(Node {
                rate_ppm: rates[usize::from(id)],
                replica: Some(Replica::new(id, config, KvApp::new(), 0)),
                incarnation: 0,
                durable: Disk::default(),
                unsynced: Vec::new(),
                syncs: VecDeque::new(),
                checkpoint: None,
                behind: VecDeque::new(),
                disk_free_at: 0,
                amnesia_until: None,
                traced: None,
            });
        }
        for c in 0..w.cfg.clients {
            w.clients.push(SimClient {
                client: Client::new(c as u64 + 1, n, 300),
                remaining: w.cfg.ops_per_client,
                current: None,
            });
        }
        if w.faults_on {
            let t = w.rng.range(200, 1500);
            w.schedule(t, Event::Fault);
        }
        let end = w.cfg.fault_ms;
        w.schedule(end, Event::EndFaults);
        if w.lease != 0 {
            let t = w.rng.range(1, 50);
            w.schedule(t, Event::LeaseRead);
        }
        w
    }

    /// Replica `r`'s clock at virtual time `t`.
    fn local_at(&self, r: usize, t: u64) -> u64 {
        let rate = 1_000_000 + self.nodes[r].rate_ppm;
        (i128::from(t) * i128::from(rate) / 1_000_000) as u64
    }

    /// Replica `r`'s clock now.
    fn local(&self, r: usize) -> u64 {
        self.local_at(r, self.now)
    }

    /// The first virtual time at which replica `r`'s clock reads at least `local`.
    fn global(&self, r: usize, local: u64) -> u64 {
        if local == u64::MAX {
            return u64::MAX;
        }
        let rate = 1_000_000 + self.nodes[r].rate_ppm;
        let mut t = (i128::from(local) * 1_000_000 / i128::from(rate)) as u64;
        while self.local_at(r, t) < local {
            t += 1;
        }
        while t > 0 && self.local_at(r, t - 1) >= local {
            t -= 1;
        }
        t
    }

    /// A lease read at a random live replica: recorded if it holds its lease, answered
    /// once what it saw is committed (`resolve_reads`).
    fn lease_read(&mut self) {
        let r = self.rng.below(u64::from(self.cfg.replicas)) as usize;
        let key = self.rng.below(self.cfg.keys);
        let local = self.local(r);
        let (start, node) = (self.now, &self.nodes[r]);
        let Some(rep) = node.replica.as_ref() else {
            return;
        };
        let Some(last) = rep.lease_read(local) else {
            return;
        };
        let observed = rep.app().map.get(&key).copied();
        self.pending_reads.push(PendingRead {
            replica: r as u8,
            incarnation: node.incarnation,
            view: rep.view(),
            last,
            key,
            observed,
            start,
        });
        self.log(|| format!("replica {r}: lease read of {key} saw {observed:?} through {last}"));
    }

    /// The lease's invariant (`verso_vsr` `replica::lease`): while a replica holds its
    /// read lease, no replica leads a later view that has committed anything. Checked after
    /// every event, so a broken promise is caught when it happens, not only when a read
    /// lands in the window it opens.
    fn check_leases(&mut self) {
        for i in 0..self.nodes.len() {
            let local = self.local(i);
            let Some(holder) = self.nodes[i].replica.as_ref() else {
                continue;
            };
            if holder.lease_read(local).is_none() {
                continue;
            }
            let view = holder.view();
            for (j, n) in self.nodes.iter().enumerate() {
                let Some(other) = n.replica.as_ref().filter(|_| j != i) else {
                    continue;
                };
                let later = other.role() == Role::Primary && other.view() > view;
                if later && other.commit().is_some_and(|c| c.view == other.view()) {
                    self.violation = Some(format!(
                        "replica {i} holds its read lease in view {view} while replica {j} \
                         leads view {} and has committed in it",
                        other.view()
                    ));
                    return;
                }
            }
        }
    }

    /// Answers the lease reads whose entries committed in their view, and drops those whose
    /// replica stopped leading it (crashed, or a view change).
    fn resolve_reads(&mut self) {
        let now = self.now;
        let mut answered = Vec::new();
        let nodes = &self.nodes;
        self.pending_reads.retain(|p| {
            let node = &nodes[usize::from(p.replica)];
            let Some(rep) = node
                .replica
                .as_ref()
                .filter(|_| node.incarnation == p.incarnation)
            else {
                return false;
            };
            if rep.committed_in(p.view, p.last) {
                answered.push(crate::checks::LeaseRead {
                    key: p.key,
                    observed: p.observed,
                    last: p.last,
                    start: p.start,
                    end: now,
                });
                return false;
            }
            rep.view() == p.view && rep.role() == Role::Primary
        });
        self.outcome.lease_reads += answered.len() as u64;
        self.history.lease_reads.extend(answered);
    }

    /// No replica here loses its disk (crashes lose only what was not synced), and the
    /// primary trims its log only below what every replica holds on disk: so none ever needs
    /// a state transfer. The engine cannot take one over data it holds (the server stops),
    /// so a transfer here is a failure, not a slow path.
    fn check_no_state_transfer(&mut self) {
        if self.violation.is_some() {
            return;
        }
        for n in &self.nodes {
            if let Some(r) = &n.replica {
                if r.stats().state_transfers_installed > 0 {
                    self.violation = Some(format!(
                        "replica {} installed a state transfer, though it kept its disk",
                        r.id()
                    ));
                    return;
                }
            }
        }
    }

    fn replica_config(&mut self, id: u8) -> Config {
        let mut c = Config::new(self.cfg.replicas);
        c.mode = self.cfg.mode;
        c.mistake = self.cfg.mistake;
        c.heartbeat_interval = 50;
        c.view_change_timeout = self.view_change_timeouts[usize::from(id)];
        c.view_change_jitter = self.view_change_jitter;
        c.election_timeout = self.election_timeout;
        c.catch_up_timeout = 100;
        c.lease = self.leases[usize::from(id)];
        c.batch_requests_max = 4;
        c.pipeline_max = 8;
        c.request_queue_max = 64;
        c.flush_entries_max = 16;
        c.unflushed_entries_max = 64;
        c.catch_up_entries_max = 8;
        // From the seed, not the random stream (the random draws of older seeds stay as
        // they were, though half of them now pack entries differently): half of the runs
        // cut entries, catch-up replies and disk appends by bytes, down to one request
        // each (`KvApp::op_bytes`: 9 or 17 per operation).
        c.message_bytes_max = match self.cfg.seed % 4 {
            0 => 1,
            1 => 40,
            _ => usize::MAX,
        };
        c.clients_max = 64;
        c.seed = self.rng.next();
        c
    }

    fn schedule(&mut self, at: u64, e: Event) {
        self.seq += 1;
        self.queue.push(Reverse((at, self.seq)));
        self.events.insert(self.seq, e);
    }

    fn log(&mut self, line: impl FnOnce() -> String) {
        let line = format!("{:>7} {}", self.now, line());
        if self.cfg.trace {
            println!("{line}");
        }
        if self.trace.len() == TRACE_KEPT {
            self.trace.pop_front();
        }
        self.trace.push_back(line);
    }

    fn fail(&self, message: String) -> Failure {
        Failure {
            seed: self.cfg.seed,
            message,
            trace: self.trace.iter().cloned().collect(),
        }
    }

    pub(crate) fn run(mut self) -> Result<Outcome, Failure> {
        let deadline = self.cfg.fault_ms + self.cfg.liveness_ms;
        loop {
            self.start_client_ops();
            if self.finished() {
                break;
            }
            let next_event = self.queue.peek().map(|Reverse((t, _))| *t);
            let next_timer = self.next_timer();
            let t = match (next_event, next_timer) {
                (Some(a), Some(b)) => a.min(b),
                (a, b) => a.or(b).expect("replicas always have a timer"),
            };
            if t > deadline {
                let states = self.describe_replicas();
                return Err(self.fail(format!(
                    "no progress: {} ms after faults stopped, {} client operations are \
                     unfinished and the replicas have not converged: {states}",
                    self.cfg.liveness_ms,
                    self.clients
                        .iter()
                        .map(|c| c.remaining + c.current.iter().count())
                        .sum::<usize>()
                )));
            }
            // A deadline already passed (a timer left running) fires now.
            let t = t.max(self.now);
            self.now = t;
            if next_event == Some(t) {
                let Reverse((_, seq)) = self.queue.pop().expect("peeked");
                let e = self.events.remove(&seq).expect("scheduled");
                self.handle(e)?;
            } else {
                self.fire_timers();
            }
            self.resolve_reads();
            self.check_leases();
            self.check_no_state_transfer();
            if let Some(m) = self.violation.take() {
                return Err(self.fail(m));
            }
        }
        self.outcome.virtual_ms = self.now;
        self.outcome.recovery_ms = self.now.saturating_sub(self.faults_ended_at);
        self.final_checks()?;
        Ok(self.outcome)
    }

    fn next_timer(&self) -> Option<u64> {
        let replicas = self
            .nodes
            .iter()
            .enumerate()
            .filter_map(|(i, n)| n.replica.as_ref().map(|r| self.global(i, r.poll_timeout())));
        let clients = self.clients.iter().map(|c| c.client.poll_timeout());
        replicas.chain(clients).min()
    }

    fn fire_timers(&mut self) {
        let now = self.now;
        for i in 0..self.nodes.len() {
            let local = self.local(i);
            let due = self.nodes[i]
                .replica
                .as_ref()
                .is_some_and(|r| r.poll_timeout() <= local);
            if due {
                let r = self.nodes[i].replica.as_mut().expect("checked");
                r.handle_timeout(local);
                self.drain(i as u8);
            }
        }
        for c in 0..self.clients.len() {
            if self.clients[c].client.poll_timeout() <= now {
                self.clients[c].client.handle_timeout(now);
                self.drain_client(c);
            }
        }
    }

    fn handle(&mut self, e: Event) -> Result<(), Failure> {
        match e {
            Event::Deliver { to, from, msg } => match to {
                Address::Replica(r) => {
                    let now = self.local(usize::from(r));
                    if let Some(rep) = self.nodes[usize::from(r)].replica.as_mut() {
                        rep.handle_message(now, from, *msg);
                        self.drain(r);
                    }
                }
                Address::Client(c) => {
                    let i = (c - 1) as usize;
                    self.clients[i].client.handle_message(self.now, *msg);
                    self.drain_client(i);
                }
            },
            Event::SyncDone {
                replica,
                incarnation,
                id,
            } => {
                let now = self.local(usize::from(replica));
                let node = &mut self.nodes[usize::from(replica)];
                if node.incarnation != incarnation || node.replica.is_none() {
                    return Ok(());
                }
                while node.syncs.front().is_some_and(|(s, _)| *s <= id) {
                    let (_, count) = node.syncs.pop_front().expect("checked");
                    for w in node.unsynced.drain(..count) {
                        node.durable.apply(&w, None);
                    }
                    for s in &mut node.syncs {
                        s.1 -= count;
                    }
                }
                node.replica
                    .as_mut()
                    .expect("checked")
                    .handle_synced(now, id);
                self.drain(replica);
            }
            Event::CheckpointDone {
                replica,
                incarnation,
            } => self.checkpoint_done(replica, incarnation),
            Event::Restart { replica } => self.restart(replica),
            Event::Fault => {
                if self.faults_on {
                    self.inject_fault();
                    let t = self.now + self.rng.range(100, 1500);
                    self.schedule(t, Event::Fault);
                }
            }
            Event::EndFaults => self.end_faults(),
            Event::LeaseRead => {
                self.lease_read();
                let t = self.now + self.rng.range(1, 20);
                self.schedule(t, Event::LeaseRead);
            }
        }
        self.check_amnesia();
        Ok(())
    }

    /// Carries out a replica's actions.
    fn drain(&mut self, r: u8) {
        let i = usize::from(r);
        if let Some(rep) = &self.nodes[i].replica {
            let now_state = (rep.role(), rep.view());
            if self.nodes[i].traced.as_ref() != Some(&now_state) {
                let (op_max, dp) = (rep.op_max(), rep.dp());
                self.nodes[i].traced = Some(now_state.clone());
                self.log(|| {
                    format!(
                        "replica {r}: {:?} in view {} (op_max {op_max}, dp {dp})",
                        now_state.0, now_state.1
                    )
                });
            }
        }
        while let Some(a) = self.nodes[i].replica.as_mut().and_then(|x| x.poll_action()) {
            match a {
                Action::Send { to, message } => self.send(Address::Replica(r), to, message),
                Action::Write(w) => self.hand_to_disk(r, DiskItem::Write(w)),
                Action::Sync { id } => self.hand_to_disk(r, DiskItem::Sync(id)),
            }
        }
    }

    /// Hands a write or a sync to replica `r`'s disk, which writes a checkpoint aside as
    /// the real one does (`verso_vsr::Action::Write`): it takes a while, and only syncs and
    /// what `DiskWrite::may_pass_checkpoint` names may pass it.
    fn hand_to_disk(&mut self, r: u8, item: DiskItem) {
        let node = &mut self.nodes[usize::from(r)];
        let pending_ap = node.checkpoint.as_ref().map(|w| match w {
            DiskWrite::Checkpoint(s) => s.ap,
            _ => unreachable!("only a checkpoint is written aside"),
        });
        if let Some(ap) = pending_ap {
            let passes = match &item {
                DiskItem::Sync(_) => true,
                DiskItem::Write(w) => w.may_pass_checkpoint(ap),
            };
            if !passes || !node.behind.is_empty() {
                node.behind.push_back(item);
                return;
            }
            self.outcome.passed_checkpoints += 1;
            if matches!(item, DiskItem::Write(DiskWrite::Truncate { .. })) {
                self.outcome.truncates_passed_checkpoints += 1;
            }
        }
        let stall = self.faults_on && self.rng.chance(self.stall_ppm);
        match item {
            DiskItem::Write(w @ DiskWrite::Checkpoint(_)) => {
                node.checkpoint = Some(w);
                let latency = if stall || self.slow_checkpoints {
                    self.rng.range(200, 1500)
                } else {
                    self.rng.range(1, 40)
                };
                let incarnation = node.incarnation;
                self.schedule(
                    self.now + latency,
                    Event::CheckpointDone {
                        replica: r,
                        incarnation,
                    },
                );
            }
            DiskItem::Write(w) => node.unsynced.push(w),
            DiskItem::Sync(id) => {
                let latency = if stall {
                    self.rng.range(200, 1500)
                } else {
                    self.rng.range(1, 8)
                };
                let count = node.unsynced.len();
                node.syncs.push_back((id, count));
                let at = node.disk_free_at.max(self.now) + latency;
                node.disk_free_at = at;
                let incarnation = node.incarnation;
                self.schedule(
                    at,
                    Event::SyncDone {
                        replica: r,
                        incarnation,
                        id,
                    },
                );
            }
        }
    }

    /// Replica `r`'s disk finished the checkpoint it was writing aside: its frame goes to
    /// the log and the file is synced (everything written so far becomes durable); then
    /// what waited behind it goes on.
    fn checkpoint_done(&mut self, r: u8, incarnation: u64) {
        let i = usize::from(r);
        let now = self.local(i);
        let node = &mut self.nodes[i];
        if node.incarnation != incarnation || node.replica.is_none() {
            return;
        }
        let w = node
            .checkpoint
            .take()
            .expect("a checkpoint was being written");
        let DiskWrite::Checkpoint(snapshot) = &w else {
            unreachable!("only a checkpoint is written aside")
        };
        let ap = snapshot.ap;
        node.unsynced.push(w);
        let count = node.unsynced.len();
        for w in node.unsynced.drain(..) {
            node.durable.apply(&w, None);
        }
        for s in &mut node.syncs {
            s.1 = s.1.saturating_sub(count);
        }
        node.replica
            .as_mut()
            .expect("checked")
            .handle_checkpoint_durable(now, ap);
        self.outcome.checkpoints_durable += 1;
        let behind = std::mem::take(&mut self.nodes[i].behind);
        for item in behind {
            self.hand_to_disk(r, item);
        }
        self.drain(r);
    }

    fn drain_client(&mut self, c: usize) {
        while let Some((to, msg)) = self.clients[c].client.poll_send::<KvApp>() {
            let from = Address::Client(self.clients[c].client.id());
            self.send(from, to, msg);
        }
        while let Some(ev) = self.clients[c].client.poll_event() {
            let now = self.now;
            let view = self.clients[c].client.view();
            match ev {
                ClientEvent::Done {
                    seq,
                    result,
                    vs,
                    dp,
                } => {
                    let i = self.clients[c]
                        .current
                        .take()
                        .expect("a reply to a request");
                    let op = &mut self.history.ops[i];
                    assert_eq!(op.seq, seq);
                    op.end = Some(now);
                    op.result = Some(result);
                    op.vs = Some(vs);
                    op.dp = Some(dp);
                    op.ev = view;
                    self.max_acked = self.max_acked.max(vs);
                    self.outcome.ops_acknowledged += 1;
                    self.log(|| format!("client {} done seq {seq} at {vs} (dp {dp})", c + 1));
                }
                ClientEvent::DoneWithoutReply { seq } => {
                    let i = self.clients[c]
                        .current
                        .take()
                        .expect("a reply to a request");
                    let op = &mut self.history.ops[i];
                    assert_eq!(op.seq, seq);
                    op.end = Some(now);
                    op.executed_unknown = true;
                }
                ClientEvent::Forgotten { seqs } => {
                    self.log(|| format!("client {} told it lost {seqs:?}", c + 1));
                    self.history.forgotten.push((c as u64 + 1, seqs));
                }
            }
        }
    }

    fn start_client_ops(&mut self) {
        for c in 0..self.clients.len() {
            let sc = &self.clients[c];
            if sc.current.is_some() || sc.remaining == 0 || !sc.client.is_idle() {
                continue;
            }
            let key = self.rng.below(self.cfg.keys);
            let client_id = sc.client.id();
            let seq = self
                .history
                .ops
                .iter()
                .filter(|o| o.client == client_id)
                .count() as u64
                + 1;
            let op = match self.rng.below(10) {
                0..=4 => KvOp::Put(key, client_id << 32 | seq),
                5 => KvOp::Delete(key),
                _ => KvOp::Get(key),
            };
            let sync = self.rng.below(8) == 0;
            let now = self.now;
            let sc = &mut self.clients[c];
            let got = sc.client.submit(now, op, sync);
            assert_eq!(got, seq);
            sc.remaining -= 1;
            sc.current = Some(self.history.ops.len());
            self.history
                .ops
                .push(OpRecord::new(client_id, seq, op, sync, now));
            self.drain_client(c);
        }
    }

    fn send(&mut self, from: Address, to: Address, msg: Msg) {
        self.outcome.messages += 1;
        *self.outcome.messages_by_kind.entry(msg.kind()).or_default() += 1;
        self.observe(&msg);
        if let (Address::Replica(a), Address::Replica(b)) = (from, to) {
            if self.blocked[usize::from(a)][usize::from(b)] {
                return;
            }
        }
        if self.faults_on && self.rng.chance(self.drop_ppm) {
            return;
        }
        let copies = if self.faults_on && self.rng.chance(self.dup_ppm) {
            2
        } else {
            1
        };
        for _ in 0..copies {
            let at = self.now + self.rng.range(1, self.delay_max);
            self.schedule(
                at,
                Event::Deliver {
                    to,
                    from,
                    msg: Box::new(msg.clone()),
                },
            );
        }
    }

    /// Records what the wire shows: entries (for the uniqueness check and the final log)
    /// and announced durable points.
    fn observe(&mut self, msg: &Msg) {
        let entries = match msg {
            Message::Prepare { entries, dp, .. } | Message::CatchUpReply { entries, dp, .. } => {
                self.announced_dps.push(*dp);
                entries.as_slice()
            }
            Message::Heartbeat { dp, .. } | Message::Reply { dp, .. } => {
                self.announced_dps.push(*dp);
                &[]
            }
            _ => &[],
        };
        for e in entries {
            match self.entries.get(&e.vs) {
                Some(seen) if seen != e => {
                    let m = format!(
                        "two different entries share viewstamp {}: {seen:?} and {e:?}",
                        e.vs
                    );
                    self.violation.get_or_insert(m);
                }
                Some(_) => {}
                None => {
                    self.entries.insert(e.vs, e.clone());
                }
            }
        }
    }

    fn describe_replicas(&self) -> String {
        let mut out = String::new();
        for (i, n) in self.nodes.iter().enumerate() {
            match &n.replica {
                None => out.push_str(&format!("[{i}: down] ")),
                Some(r) => out.push_str(&format!(
                    "[{i}: {:?} view {} op_max {} disk {} dp {} commit {:?}{}] ",
                    r.role(),
                    r.view(),
                    r.op_max(),
                    r.disk_op_max(),
                    r.dp(),
                    r.commit(),
                    r.amnesia_summary()
                )),
            }
        }
        out
    }

    /// Whether every replica but `except` is up and holds everything acknowledged so far.
    /// Under `Faults::Minority` a replica crashes only then: an acknowledged operation is
    /// then always in the memory of f+1 live replicas, as property 3 of the thesis needs (a
    /// crash while another replica lags behind can lose acknowledged operations: Lazy VSR
    /// holds them only in memory).
    fn others_hold_everything(&self, except: usize) -> bool {
        // Everything any replica holds, not just what clients heard acknowledged: an
        // acknowledgement may still be on its way when the crash comes.
        let top = self
            .nodes
            .iter()
            .filter_map(|n| n.replica.as_ref().map(|r| r.op_max()))
            .max()
            .unwrap_or(Viewstamp::ZERO)
            .max(self.max_acked);
        self.nodes.iter().enumerate().all(|(i, n)| {
            i == except
                || (n.amnesia_until.is_none()
                    && n.replica.as_ref().is_some_and(|r| r.op_max() >= top))
        })
    }

    /// Whether every replica but `except` is up and, if it restarted, recovered: caught up
    /// with what was acknowledged before (it may lag behind newer operations) *and* knowing
    /// it, as the protocol's amnesia ends (`verso_vsr` `replica::recovery`). A restarted
    /// replica that could not yet learn it holds everything counts as failed, as a
    /// recovering replica does in Viewstamped Replication Revisited: f of them and one
    /// crash are f+1 failures, which Lazy VSR does not survive without loss.
    fn others_up_and_recovered(&self, except: usize) -> bool {
        self.nodes.iter().enumerate().all(|(i, n)| {
            i == except
                || (n.amnesia_until.is_none()
                    && n.replica.as_ref().is_some_and(|r| !r.is_amnesiac()))
        })
    }

    fn check_amnesia(&mut self) {
        for n in &mut self.nodes {
            if let (Some(target), Some(r)) = (n.amnesia_until, n.replica.as_ref()) {
                if r.op_max() >= target {
                    n.amnesia_until = None;
                }
            }
        }
    }

    fn inject_fault(&mut self) {
        let n = self.nodes.len();
        let r = self.rng.below(n as u64) as usize;
        match self.rng.below(10) {
            0..=2 => {
                let allowed = self.nodes[r].replica.is_some()
                    && match self.cfg.faults {
                        Faults::Total => true,
                        Faults::Lagging => self.others_up_and_recovered(r),
                        _ => self.others_hold_everything(r),
                    };
                if allowed {
                    self.crash(r as u8);
                    let t = self.now + self.rng.range(50, 2000);
                    self.schedule(t, Event::Restart { replica: r as u8 });
                }
            }
            3 if self.cfg.faults == Faults::Total => {
                self.outcome.total_crashes += 1;
                self.log(|| "total crash".to_string());
                for i in 0..n {
                    if self.nodes[i].replica.is_some() {
                        self.crash(i as u8);
                    }
                    let t = self.now + self.rng.range(50, 2000);
                    self.schedule(t, Event::Restart { replica: i as u8 });
                }
            }
            4..=5 => {
                // A partition: a random side, cut both ways or (asymmetric) one way.
                let side: Vec<bool> = (0..n).map(|_| self.rng.below(2) == 0).collect();
                let one_way = self.rng.below(3) == 0;
                for a in 0..n {
                    for b in 0..n {
                        let cut = side[a] != side[b] && (!one_way || side[a]);
                        self.blocked[a][b] = cut;
                    }
                }
                self.log(|| format!("partition {side:?} one_way={one_way}"));
            }
            _ => {
                for row in &mut self.blocked {
                    row.fill(false);
                }
                self.log(|| "heal".to_string());
            }
        }
    }

    fn crash(&mut self, r: u8) {
        let node = &mut self.nodes[usize::from(r)];
        if node.replica.is_none() {
            return;
        }
        node.replica = None;
        node.incarnation += 1;
        // The disk keeps a random prefix of the unsynced writes, the last one maybe torn.
        let keep = self.rng.below(node.unsynced.len() as u64 + 1) as usize;
        let writes: Vec<Write> = node.unsynced.drain(..).collect();
        for (i, w) in writes.iter().take(keep).enumerate() {
            let torn = i + 1 == keep && matches!(w, DiskWrite::Append(_));
            let part = match w {
                DiskWrite::Append(es) if torn => Some(self.rng.below(es.len() as u64 + 1) as usize),
                _ => None,
            };
            node.durable.apply(w, part);
        }
        node.syncs.clear();
        // A checkpoint being written aside, and what waited behind it, never reached the
        // log.
        node.checkpoint = None;
        node.behind.clear();
        node.disk_free_at = self.now;
        self.outcome.crashes += 1;
        self.log(|| format!("crash replica {r} (kept {keep} unsynced writes)"));
    }

    fn restart(&mut self, r: u8) {
        let i = usize::from(r);
        if self.nodes[i].replica.is_some() {
            return;
        }
        let mut config = self.replica_config(r);
        config.checkpoint_interval = self
            .nodes
            .iter()
            .find_map(|n| n.replica.as_ref().map(|x| x.config().checkpoint_interval))
            .unwrap_or(16);
        let now = self.local(i);
        let replica = Replica::recover(r, config, KvApp::new(), &self.nodes[i].durable, now);
        let target = self.max_acked;
        self.log(|| {
            format!(
                "restart replica {r}: view {} op_max {} dp {}",
                replica.view(),
                replica.op_max(),
                replica.dp()
            )
        });
        let node = &mut self.nodes[i];
        node.replica = Some(replica);
        node.amnesia_until = Some(target);
    }

    fn end_faults(&mut self) {
        self.faults_on = false;
        self.faults_ended_at = self.now;
        for row in &mut self.blocked {
            row.fill(false);
        }
        for r in 0..self.nodes.len() {
            self.restart(r as u8);
        }
        self.log(|| "faults end".to_string());
    }

    /// Every client is done, and (after faults) the replicas agree with a primary.
    fn finished(&self) -> bool {
        if self.faults_on
            || self
                .clients
                .iter()
                .any(|c| c.remaining > 0 || c.current.is_some())
        {
            return false;
        }
        let reps: Vec<&Replica<KvApp>> = self
            .nodes
            .iter()
            .filter_map(|n| n.replica.as_ref())
            .collect();
        if reps.len() != self.nodes.len() {
            return false;
        }
        let Some(primary) = reps.iter().find(|r| r.role() == Role::Primary) else {
            return false;
        };
        let top = primary.op_max();
        primary.commit() == Some(top)
            && reps.iter().all(|r| {
                r.op_max() == top && r.view() == primary.view() && r.app() == primary.app()
            })
    }

    fn final_checks(&mut self) -> Result<(), Failure> {
        let primary = self
            .nodes
            .iter()
            .filter_map(|n| n.replica.as_ref())
            .find(|r| r.role() == Role::Primary)
            .expect("finished() found one");
        for n in &self.nodes {
            let r = n.replica.as_ref().expect("all up");
            self.outcome.view_changes += r.stats().views_led;
            self.outcome.state_transfers += r.stats().state_transfers_installed;
        }
        let top = primary.op_max();
        let map = primary.app().map.clone();
        let result = checks::check_run(
            &self.history,
            &self.entries,
            top,
            &map,
            &self.announced_dps,
            self.cfg.faults,
        );
        match result {
            Ok(lost) => {
                self.outcome.ops_lost = lost;
                Ok(())
            }
            Err(m) => Err(self.fail(m)),
        }
    }
}
