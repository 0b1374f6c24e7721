//! A deterministic simulator of slot moves: several data groups, the configuration group and
//! clients that follow redirects, driven by one seeded random stream (TigerBeetle's VOPR
//! style: one seed, one run, replayable).
//!
//! Each data group is either one abstract state machine over its log (below), or, with
//! `SimOptions::replicated`, three real Lazy VSR replicas with their own network and disks
//! (`vsr_group.rs`, which lists what that mode adds); the configuration then lives in group
//! 0's log, as on the servers, instead of in an abstract group of its own.
//!
//! Faults, until `faults_until`: messages between groups are lost, duplicated and delayed
//! (so reordered), and two nodes are partitioned for a while; clients' requests and answers
//! are lost and delayed too (a read is sent again; a write whose answer is lost counts as
//! indeterminate, as for a real client); a group fails over (a random prefix of what it
//! appended and had not seen commit survives in the new primary's log and commits there,
//! the rest is lost) or crashes whole (its log loses the lazy records after its last
//! synchronous one); the configuration group fails over the same way; every group crashes
//! at once. Commits land in append order, as a replicated log's do.
//! Moves of random slot sets between random groups run throughout.
//!
//! Checked after every event and at the end:
//! - **exclusive service**: no slot is served by two groups at once;
//! - **nothing acknowledged lost, nothing uncommitted seen**: every read of a key (by its
//!   writer or by another client, a quarter of the writes being deletions) returns its
//!   newest committed write or a later committed one, unless a total crash of the group that
//!   held that write dropped it from the log's lazy suffix (then an older value is allowed);
//!   never a write that did not commit; and never older than what an earlier read saw,
//!   unless a total crash dropped that;
//! - **linearizable per key**: at the end, the clients' history (an indeterminate write
//!   pending from its start on) passes `verso-check`'s register check, leaving out writes a
//!   total crash lost and the reads that saw them (a read that found the key absent, if a
//!   lost deletion of it had begun);
//! - **progress**: once faults stop, every move finishes and every client operation
//!   completes within a bounded time.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};

use crate::lazen::{
    Action, Config, ConfigRecord, Group, GroupId, GroupRecord, Message, Mistakes, Node, Reply,
    Request,
};
use crate::slot::{key_slot, Slot, SlotSet, SLOTS};

mod checks;
mod clients;
mod vsr_group;
use checks::KeyModel;
use clients::{Client, Waiting};
use vsr_group::{VsrEvent, VsrGroup};

/// What one run does.
#[derive(Clone, Debug)]
pub struct SimOptions {
    pub seed: u64,
    pub groups: u16,
    pub clients: usize,
    /// Keys per client (each client owns its keys: one operation per key at a time).
    pub keys_per_client: usize,
    /// Operations per client.
    pub ops_per_client: usize,
    /// Faults happen before this virtual time (ms); afterwards the run must settle.
    pub faults_until: u64,
    pub mistakes: Mistakes,
    /// Data groups of three real Lazy VSR replicas each, instead of abstract logs.
    pub replicated: bool,
    /// A replication mistake every replica makes (with `replicated`), to show that the
    /// checks here catch replication bugs too.
    #[doc(hidden)]
    pub vsr_mistake: Option<verso_vsr::Mistake>,
    /// Print what happens (replicated runs: crashes, hosts, records acted on, reads).
    pub trace: bool,
}

impl SimOptions {
    pub fn new(seed: u64) -> SimOptions {
        SimOptions {
            seed,
            groups: 3,
            clients: 4,
            keys_per_client: 4,
            ops_per_client: 80,
            faults_until: 2_000,
            mistakes: Mistakes::default(),
            replicated: false,
            vsr_mistake: None,
            trace: false,
        }
    }
}

/// What a run did.
#[derive(Clone, Debug, Default)]
pub struct SimStats {
    pub moves_started: u64,
    pub moves_done: u64,
    pub ops_done: u64,
    pub writes_acked: u64,
    pub writes_lost_to_total_crashes: u64,
    pub redirects: u64,
    pub try_agains: u64,
    pub failovers: u64,
    pub total_crashes: u64,
    /// Records appended and not yet seen committed that a failover's new primary, or a
    /// total crash's disks, kept (they commit in the new view without the old primary
    /// seeing it).
    pub survived_failovers: u64,
    pub end_time_ms: u64,
}

impl SimStats {
    /// Adds another run's counts (the end time is the later one).
    pub fn add(&mut self, o: &SimStats) {
        self.moves_started += o.moves_started;
        self.moves_done += o.moves_done;
        self.ops_done += o.ops_done;
        self.writes_acked += o.writes_acked;
        self.writes_lost_to_total_crashes += o.writes_lost_to_total_crashes;
        self.redirects += o.redirects;
        self.try_agains += o.try_agains;
        self.failovers += o.failovers;
        self.total_crashes += o.total_crashes;
        self.survived_failovers += o.survived_failovers;
        self.end_time_ms = self.end_time_ms.max(o.end_time_ms);
    }
}

/// A broken invariant, with the virtual time it was seen at.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    pub at_ms: u64,
    pub what: String,
}

/// After faults stop, everything must settle within this much virtual time.
const SETTLE_MS: u64 = 20_000;
const TICK_MS: u64 = 10;

#[derive(Debug)]
enum Event {
    Deliver {
        to: Node,
        from: Node,
        msg: Message,
    },
    GroupCommit {
        group: GroupId,
        life: u64,
        record: GroupRecord,
    },
    ConfigCommit {
        life: u64,
        record: ConfigRecord,
    },
    Tick(Node),
    Client(usize),
    /// A client's request reaches a group.
    Request {
        client: usize,
        attempt: u64,
        group: GroupId,
        asking: bool,
        req: Request,
    },
    /// A group's answer (or a write's acknowledgement, `Reply::Appended` then meaning
    /// "committed") reaches a client.
    Answer {
        client: usize,
        attempt: u64,
        group: GroupId,
        reply: Reply,
        committed: bool,
    },
    /// A client stops waiting for `attempt`.
    Timeout {
        client: usize,
        attempt: u64,
    },
    Fault,
    StartMove,
    /// Inside a replicated data group.
    Vsr(VsrEvent),
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn chance(&mut self, per_mille: u64) -> bool {
        self.below(1000) < per_mille
    }
}

struct SimGroup {
    node: Group,
    /// The committed log, each record with whether it was synchronous.
    log: Vec<(GroupRecord, bool)>,
    /// Bumped by every failover: commits scheduled by an earlier life are dropped.
    life: u64,
    /// When the last scheduled commit lands (commits land in append order).
    commit_at: u64,
    /// Appended by this life and not committed yet, oldest first.
    pending: std::collections::VecDeque<GroupRecord>,
    /// The real replicas (`SimOptions::replicated`), which then replace the fields above.
    vsr: Option<VsrGroup>,
}

pub struct Sim {
    opts: SimOptions,
    rng: Rng,
    now: u64,
    seq: u64,
    queue: BinaryHeap<Reverse<(u64, u64, usize)>>,
    events: BTreeMap<usize, Event>,
    next_event: usize,
    config: Config,
    config_log: Vec<ConfigRecord>,
    config_life: u64,
    /// Appended by the configuration group's current life and not committed yet.
    config_pending: std::collections::VecDeque<ConfigRecord>,
    /// When the configuration group's last scheduled commit lands.
    config_commit_at: u64,
    groups: Vec<SimGroup>,
    clients: Vec<Client>,
    keys: BTreeMap<Vec<u8>, KeyModel>,
    /// The slots the keys live in (the only ones moves touch and checks look at).
    slots: Vec<Slot>,
    next_tag: u64,
    /// Appended writes whose commit a client awaits: (group, tag) -> (client, attempt).
    awaited: BTreeMap<(GroupId, u64), (usize, u64)>,
    /// Messages between these two nodes are lost until the time given.
    partition: Option<(Node, Node, u64)>,
    pub stats: SimStats,
    violation: Option<Violation>,
    /// Every client operation that finished (indeterminate writes end at `u64::MAX`), with
    /// the write's tag.
    history: Vec<(verso_check::RegisterOp, Option<u64>)>,
}

impl Sim {
    pub fn new(opts: SimOptions) -> Sim {
        let mut rng = Rng(opts.seed);
        // Sixteen slots of interest, by hash tag; every key carries one.
        let tags: Vec<String> = (0..16).map(|i| format!("t{i}")).collect();
        let slots: Vec<Slot> = {
            let mut s: Vec<Slot> = tags.iter().map(|t| key_slot(t.as_bytes())).collect();
            s.sort_unstable();
            s.dedup();
            s
        };
        let mut clients = Vec::new();
        let mut keys = BTreeMap::new();
        for c in 0..opts.clients {
            let ks: Vec<Vec<u8>> = (0..opts.keys_per_client)
                .map(|j| {
                    let tag = &tags[rng.below(tags.len() as u64) as usize];
                    format!("{{{tag}}}c{c}k{j}").into_bytes()
                })
                .collect();
            for k in &ks {
                keys.insert(k.clone(), KeyModel::default());
            }
            clients.push(Client {
                keys: ks,
                map: vec![None; SLOTS],
                ops_left: opts.ops_per_client,
                op: None,
                asking: None,
                waiting: Waiting::Idle,
                attempt: 0,
                started: 0,
            });
        }
        // Bootstrap: slots spread round-robin over the groups, all of SLOTS assigned.
        let mut group_slots = vec![SlotSet::default(); usize::from(opts.groups)];
        for s in 0..SLOTS as Slot {
            group_slots[usize::from(s) % usize::from(opts.groups)].insert(s);
        }
        let config_log: Vec<ConfigRecord> = group_slots
            .iter()
            .enumerate()
            .map(|(g, slots)| ConfigRecord::Assign {
                slots: slots.clone(),
                group: g as GroupId,
            })
            .collect();
        let mut groups = Vec::new();
        for (g, slots) in group_slots.into_iter().enumerate() {
            let g = g as GroupId;
            let vsr = opts
                .replicated
                .then(|| VsrGroup::new(opts.seed, opts.vsr_mistake, g, &slots, &config_log));
            let log = vec![(GroupRecord::Own { slots }, true)];
            let records: Vec<GroupRecord> = log.iter().map(|(r, _)| r.clone()).collect();
            groups.push(SimGroup {
                node: Group::recover(g, opts.mistakes, &records),
                log,
                life: 0,
                pending: std::collections::VecDeque::new(),
                commit_at: 0,
                vsr,
            });
        }
        let config = Config::recover(&config_log);
        let mut sim = Sim {
            rng,
            now: 0,
            seq: 0,
            queue: BinaryHeap::new(),
            events: BTreeMap::new(),
            next_event: 0,
            config,
            config_log,
            config_life: 0,
            config_pending: std::collections::VecDeque::new(),
            config_commit_at: 0,
            groups,
            clients,
            keys,
            slots,
            next_tag: 1,
            awaited: BTreeMap::new(),
            partition: None,
            stats: SimStats::default(),
            violation: None,
            history: Vec::new(),
            opts,
        };
        for g in 0..sim.opts.groups {
            sim.schedule(TICK_MS, Event::Tick(Node::Group(g)));
        }
        sim.schedule(TICK_MS, Event::Tick(Node::Config));
        if sim.opts.replicated {
            sim.schedule(1, Event::Vsr(VsrEvent::Tick));
        }
        for c in 0..sim.clients.len() {
            sim.schedule(1 + c as u64, Event::Client(c));
        }
        sim.schedule(50, Event::Fault);
        sim.schedule(20, Event::StartMove);
        sim
    }

    fn schedule(&mut self, delay: u64, e: Event) {
        let id = self.next_event;
        self.next_event += 1;
        self.seq += 1;
        self.events.insert(id, e);
        self.queue.push(Reverse((self.now + delay, self.seq, id)));
    }

    fn trace(&self, what: impl FnOnce() -> String) {
        if self.opts.trace {
            // A closed pipe (`| head`) only ends the trace.
            use std::io::Write;
            let _ = writeln!(std::io::stdout(), "{:>6} {}", self.now, what());
        }
    }

    fn faulty(&self) -> bool {
        self.now < self.opts.faults_until
    }

    fn fail(&mut self, what: String) {
        if self.violation.is_none() {
            self.violation = Some(Violation {
                at_ms: self.now,
                what,
            });
        }
    }

    /// Runs to the end: `Ok` with the statistics, or the first violation.
    pub fn run(mut self) -> Result<SimStats, Violation> {
        let deadline = self.opts.faults_until + SETTLE_MS;
        while let Some(Reverse((at, _, id))) = self.queue.pop() {
            self.now = at;
            let e = self.events.remove(&id).expect("scheduled");
            self.step(e);
            if self.violation.is_none() {
                self.check_exclusive();
            }
            if let Some(v) = self.violation.take() {
                return Err(v);
            }
            if self.finished() {
                break;
            }
            if self.now > deadline {
                let clients: Vec<usize> = self.clients.iter().map(|c| c.ops_left).collect();
                let groups: Vec<String> = self
                    .groups
                    .iter()
                    .map(|g| match &g.vsr {
                        Some(v) => v.describe(),
                        None => g.node.describe(),
                    })
                    .collect();
                return Err(Violation {
                    at_ms: self.now,
                    what: format!(
                        "no progress {SETTLE_MS} ms after faults stopped: {} moves in flight, \
                         operations left per client {clients:?}; {}; {}",
                        self.slot_map().map_or(0, Config::moves_in_flight),
                        self.slot_map()
                            .map_or("no configuration primary".into(), Config::describe),
                        groups.join("; ")
                    ),
                });
            }
        }
        self.check_final();
        if self.violation.is_none() {
            checks::check_linearizable(&mut self);
        }
        if let Some(v) = self.violation.take() {
            return Err(v);
        }
        self.stats.end_time_ms = self.now;
        Ok(self.stats)
    }

    fn finished(&self) -> bool {
        !self.faulty()
            && self.slot_map().is_some_and(|c| c.moves_in_flight() == 0)
            && self
                .clients
                .iter()
                .all(|c| c.ops_left == 0 && c.op.is_none())
            && (0..self.opts.groups).all(|g| self.serving_node(g).is_some())
    }

    fn step(&mut self, e: Event) {
        match e {
            Event::Deliver { to, from, msg } => match to {
                Node::Config if self.opts.replicated => self.vsr_config_deliver(&msg),
                Node::Config => {
                    self.config.on_message(&msg);
                    self.flush_config();
                }
                Node::Group(g) if self.opts.replicated => self.vsr_deliver(g, from, &msg),
                Node::Group(g) => {
                    self.groups[usize::from(g)].node.on_message(from, &msg);
                    self.flush_group(g);
                }
            },
            Event::GroupCommit {
                group,
                life,
                record,
            } => {
                let sg = &mut self.groups[usize::from(group)];
                if sg.life != life {
                    return; // appended by a life that failed over
                }
                let appended = sg.pending.pop_front();
                assert_eq!(appended.as_ref(), Some(&record), "commits in append order");
                self.commit_to_log(group, record.clone());
                self.groups[usize::from(group)].node.committed(&record);
                self.flush_group(group);
            }
            Event::ConfigCommit { life, record } => {
                if self.config_life != life {
                    return;
                }
                let appended = self.config_pending.pop_front();
                assert_eq!(appended.as_ref(), Some(&record), "commits in append order");
                self.config_log.push(record.clone());
                self.config.committed(&record);
                if let ConfigRecord::Done { .. } = record {
                    self.stats.moves_done += 1;
                }
                self.flush_config();
            }
            Event::Tick(node) => {
                match node {
                    // Group 0's host ticks the configuration it runs.
                    Node::Config if self.opts.replicated => {}
                    Node::Config => {
                        self.config.tick();
                        self.flush_config();
                    }
                    Node::Group(g) if self.opts.replicated => self.vsr_tick_hosts(g),
                    Node::Group(g) => {
                        self.groups[usize::from(g)].node.tick();
                        self.flush_group(g);
                    }
                }
                self.schedule(TICK_MS, Event::Tick(node));
            }
            Event::Client(c) => self.client_step(c),
            Event::Request {
                client,
                attempt,
                group,
                asking,
                req,
            } => self.serve(client, attempt, group, asking, &req),
            Event::Answer {
                client,
                attempt,
                group,
                reply,
                committed,
            } => self.answer(client, attempt, group, reply, committed),
            Event::Timeout { client, attempt } => self.timeout(client, attempt),
            Event::Fault => {
                if self.faulty() {
                    self.fault();
                    let next = 20 + self.rng.below(200);
                    self.schedule(next, Event::Fault);
                }
            }
            Event::Vsr(e) => self.vsr_step(e),
            Event::StartMove => {
                self.start_move();
                if self.faulty() {
                    let next = 30 + self.rng.below(150);
                    self.schedule(next, Event::StartMove);
                }
            }
        }
    }

    fn send(&mut self, from: Node, to: Node, msg: Message) {
        let faulty = self.faulty();
        if faulty && self.rng.chance(50) {
            return; // lost
        }
        if let Some((a, b, until)) = self.partition {
            if self.now < until && ((a, b) == (from, to) || (a, b) == (to, from)) {
                return; // partitioned
            }
        }
        let copies = if faulty && self.rng.chance(30) { 2 } else { 1 };
        for _ in 0..copies {
            let delay = 1 + self.rng.below(if faulty { 20 } else { 3 });
            self.schedule(
                delay,
                Event::Deliver {
                    to,
                    from,
                    msg: msg.clone(),
                },
            );
        }
    }

    fn flush_group(&mut self, g: GroupId) {
        for a in self.groups[usize::from(g)].node.drain() {
            match a {
                Action::Append(record) => {
                    let delay = 1 + self.rng.below(4);
                    let sg = &mut self.groups[usize::from(g)];
                    sg.pending.push_back(record.clone());
                    let at = (self.now + delay).max(sg.commit_at);
                    sg.commit_at = at;
                    let life = sg.life;
                    self.schedule(
                        at - self.now,
                        Event::GroupCommit {
                            group: g,
                            life,
                            record,
                        },
                    );
                }
                Action::Send(to, msg) => self.send(Node::Group(g), to, msg),
            }
        }
    }

    fn flush_config(&mut self) {
        for a in self.config.drain() {
            match a {
                Action::Append(record) => {
                    let delay = 1 + self.rng.below(4);
                    self.config_pending.push_back(record.clone());
                    // Commits land in append order, as a replicated log's do.
                    let at = (self.now + delay).max(self.config_commit_at);
                    self.config_commit_at = at;
                    let life = self.config_life;
                    self.schedule(at - self.now, Event::ConfigCommit { life, record });
                }
                Action::Send(to, msg) => self.send(Node::Config, to, msg),
            }
        }
    }

    /// The committed slot map and moves: the configuration group's, or in replicated runs
    /// group 0's lease holder's (none while it has no primary).
    fn slot_map(&self) -> Option<&Config> {
        if self.opts.replicated {
            self.hosted_config()
        } else {
            Some(&self.config)
        }
    }

    /// Every slot's owner in the committed map.
    fn owners(&self) -> Option<Vec<Option<GroupId>>> {
        let c = self.slot_map()?;
        Some((0..SLOTS as Slot).map(|s| c.owner(s)).collect())
    }

    fn start_move(&mut self) {
        // A random subset of one group's slots of interest, to another group.
        let from = self.rng.below(u64::from(self.opts.groups)) as GroupId;
        let Some(owners) = self.owners() else {
            return; // no configuration primary to ask
        };
        let mut slots = SlotSet::default();
        for &s in &self.slots {
            if owners[usize::from(s)] == Some(from) && self.rng.chance(500) {
                slots.insert(s);
            }
        }
        if slots.is_empty() {
            return;
        }
        let to = (from + 1 + self.rng.below(u64::from(self.opts.groups) - 1) as GroupId)
            % self.opts.groups;
        let began = if self.opts.replicated {
            self.vsr_start_move(slots, to)
        } else {
            let began = self.config.start_move(slots, to).is_ok();
            self.flush_config();
            began
        };
        if began {
            self.stats.moves_started += 1;
        }
    }

    fn fault(&mut self) {
        let groups = u64::from(self.opts.groups);
        match self.rng.below(100) {
            0..=34 if self.opts.replicated => {
                let g = self.rng.below(groups) as GroupId;
                self.replica_fault(g);
            }
            35..=54 if self.opts.replicated => {
                let g = self.rng.below(groups) as GroupId;
                self.total_crash(g);
            }
            0..=34 => {
                let g = self.rng.below(groups) as GroupId;
                self.restart_group(g, false);
            }
            35..=54 => {
                let g = self.rng.below(groups) as GroupId;
                self.restart_group(g, true);
            }
            // In replicated runs the configuration is group 0's, which fails with it.
            55..=69 if self.opts.replicated => self.replica_fault(0),
            55..=69 => {
                // The configuration group fails over: a random prefix of its uncommitted
                // appends survives (and commits in the new view), the rest is lost.
                let pending = std::mem::take(&mut self.config_pending);
                let keep = self.rng.below(pending.len() as u64 + 1) as usize;
                for record in pending.into_iter().take(keep) {
                    self.stats.survived_failovers += 1;
                    if let ConfigRecord::Done { .. } = record {
                        self.stats.moves_done += 1;
                    }
                    self.config_log.push(record);
                }
                self.config_life += 1;
                self.config_commit_at = self.now;
                self.config = Config::recover(&self.config_log);
            }
            70..=72 => {
                for g in 0..self.opts.groups {
                    if self.opts.replicated {
                        self.total_crash(g);
                    } else {
                        self.restart_group(g, true);
                    }
                }
            }
            73..=84 => {
                // Two nodes (the configuration group or data groups) stop hearing each
                // other for a while.
                let pick = |x: u64| {
                    if x == groups {
                        Node::Config
                    } else {
                        Node::Group(x as GroupId)
                    }
                };
                let a = self.rng.below(groups + 1);
                let b = (a + 1 + self.rng.below(groups)) % (groups + 1);
                let until = self.now + 50 + self.rng.below(400);
                self.partition = Some((pick(a), pick(b), until));
            }
            _ => {} // a quiet spell
        }
    }

    /// Appends a committed record to `group`'s log; a write counts as committed (its client
    /// hears so if it still waits).
    fn commit_to_log(&mut self, group: GroupId, record: GroupRecord) {
        let sync = record.synchronous(self.opts.mistakes.lazy_transfers);
        self.groups[usize::from(group)]
            .log
            .push((record.clone(), sync));
        if let GroupRecord::Put { key, tag, .. } = record {
            self.acked(group, key, tag);
        }
    }

    /// A failover (`total`: every replica of the group crashed; the lazy records after the
    /// last synchronous one are lost). A failover keeps a random prefix of what the old
    /// primary appended and had not seen commit (Lazy VSR's new primary holds what reached
    /// a majority): those records commit in the new view, where the recovered node learns
    /// them only from the log. A total crash may keep such a prefix too, if it ends with a
    /// synchronous record (one a majority's disks may hold, with everything before it).
    fn restart_group(&mut self, g: GroupId, total: bool) {
        // Writes appended and not committed by the old primary: their clients time out and
        // count them indeterminate (also those that commit now: nobody tells them).
        self.awaited.retain(|(group, _), _| *group != g);
        let pending = std::mem::take(&mut self.groups[usize::from(g)].pending);
        if !pending.is_empty() {
            let keep = if total {
                let lazy = self.opts.mistakes.lazy_transfers;
                let ends: Vec<usize> = std::iter::once(0)
                    .chain(
                        (0..pending.len())
                            .filter(|&i| pending[i].synchronous(lazy))
                            .map(|i| i + 1),
                    )
                    .collect();
                ends[self.rng.below(ends.len() as u64) as usize]
            } else {
                self.rng.below(pending.len() as u64 + 1) as usize
            };
            for record in pending.into_iter().take(keep) {
                self.stats.survived_failovers += 1;
                self.commit_to_log(g, record);
            }
        }
        let sg = &mut self.groups[usize::from(g)];
        sg.life += 1;
        sg.commit_at = self.now;
        let mut dropped = Vec::new();
        if total {
            self.stats.total_crashes += 1;
            let keep = sg
                .log
                .iter()
                .rposition(|(_, sync)| *sync)
                .map_or(0, |i| i + 1);
            dropped = sg.log.split_off(keep);
        } else {
            self.stats.failovers += 1;
        }
        let records: Vec<GroupRecord> = sg.log.iter().map(|(r, _)| r.clone()).collect();
        sg.node = Group::recover(g, self.opts.mistakes, &records);
        for (r, _) in dropped {
            if let GroupRecord::Put { key, tag, .. } = r {
                let m = self.keys.get_mut(&key).expect("a known key");
                if m.acked.contains(&tag) {
                    self.stats.writes_lost_to_total_crashes += 1;
                }
                m.lost.insert(tag);
            }
        }
        self.flush_group(g);
    }

    fn acked(&mut self, group: GroupId, key: Vec<u8>, tag: u64) {
        self.stats.writes_acked += 1;
        self.keys
            .get_mut(&key)
            .expect("a known key")
            .acked
            .insert(tag);
        if let Some((client, attempt)) = self.awaited.remove(&(group, tag)) {
            self.send_to_client(client, attempt, group, Reply::Appended, true);
        }
    }
}

/// Runs `seeds` seeds from `first` (with real VSR replicas in each data group if
/// `replicated`); the first violation, with its seed, if any.
pub fn run_seeds(
    first: u64,
    seeds: u64,
    mistakes: Mistakes,
    replicated: bool,
) -> Result<SimStats, (u64, Violation)> {
    let mut total = SimStats::default();
    for seed in first..first + seeds {
        let mut opts = SimOptions::new(seed);
        opts.mistakes = mistakes;
        opts.replicated = replicated;
        total.add(&Sim::new(opts).run().map_err(|v| (seed, v))?);
    }
    Ok(total)
}
