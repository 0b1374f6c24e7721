//! A deterministic simulator of slot moves: several data groups, the configuration group and
//! clients that follow redirects, driven by one seeded random stream (TigerBeetle's VOPR
//! style: one seed, one run, replayable).
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
//! - **progress**: once faults stop, every move finishes and every client operation
//!   completes within a bounded time.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap};

use crate::lazen::{
    Action, Config, ConfigRecord, Group, GroupId, GroupRecord, Message, Mistakes, Node, Reply,
    Request,
};
use crate::slot::{key_slot, Slot, SlotSet, SLOTS};

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
}

/// Per key: the writes (tag → acknowledged?) and which acknowledged ones a total crash may
/// have dropped.
#[derive(Default)]
struct KeyModel {
    issued: BTreeSet<u64>,
    /// Writes committed (at some group), whether or not their client heard so.
    acked: BTreeSet<u64>,
    /// Committed writes a total crash dropped from the lazy suffix of a group's log.
    lost: BTreeSet<u64>,
    /// The writes that delete the key.
    deletes: BTreeSet<u64>,
    /// The newest value a read returned (0: none yet).
    seen_max: u64,
}

impl KeyModel {
    /// The newest write a read must see (0: none).
    fn floor(&self) -> u64 {
        self.acked
            .iter()
            .rev()
            .find(|t| !self.lost.contains(t))
            .copied()
            .unwrap_or(0)
    }
}

#[derive(Clone, Debug)]
enum Waiting {
    /// Ready to send the next operation.
    Idle,
    /// `attempt` is on its way, or its answer is.
    Answer { attempt: u64 },
    /// `attempt`, a write, was appended; its commit's acknowledgement is awaited.
    Commit { attempt: u64 },
}

/// How long a client waits for an answer or an acknowledgement (virtual ms).
const CLIENT_TIMEOUT_MS: u64 = 60;

struct Client {
    keys: Vec<Vec<u8>>,
    map: Vec<Option<GroupId>>,
    ops_left: usize,
    /// The current operation and how often it has been retried.
    op: Option<(Request, u32)>,
    asking: Option<GroupId>,
    waiting: Waiting,
    /// Numbers the client's sends, so late answers to earlier ones are ignored.
    attempt: u64,
}

/// Retries of one operation before a client gives up (counted against progress once
/// faults have stopped).
const RETRIES_MAX: u32 = 5_000;

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
            });
        }
        // Bootstrap: slots spread round-robin over the groups, all of SLOTS assigned.
        let mut config_log = Vec::new();
        let mut group_slots = vec![SlotSet::default(); usize::from(opts.groups)];
        for s in 0..SLOTS as Slot {
            group_slots[usize::from(s) % usize::from(opts.groups)].insert(s);
        }
        let mut groups = Vec::new();
        for (g, slots) in group_slots.into_iter().enumerate() {
            let g = g as GroupId;
            config_log.push(ConfigRecord::Assign {
                slots: slots.clone(),
                group: g,
            });
            let log = vec![(GroupRecord::Own { slots }, true)];
            let records: Vec<GroupRecord> = log.iter().map(|(r, _)| r.clone()).collect();
            groups.push(SimGroup {
                node: Group::recover(g, opts.mistakes, &records),
                log,
                life: 0,
                pending: std::collections::VecDeque::new(),
                commit_at: 0,
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
            opts,
        };
        for g in 0..sim.opts.groups {
            sim.schedule(TICK_MS, Event::Tick(Node::Group(g)));
        }
        sim.schedule(TICK_MS, Event::Tick(Node::Config));
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
                let groups: Vec<String> = self.groups.iter().map(|g| g.node.describe()).collect();
                return Err(Violation {
                    at_ms: self.now,
                    what: format!(
                        "no progress {SETTLE_MS} ms after faults stopped: {} moves in flight, \
                         operations left per client {clients:?}; {}; {}",
                        self.config.moves_in_flight(),
                        self.config.describe(),
                        groups.join("; ")
                    ),
                });
            }
        }
        self.check_final();
        if let Some(v) = self.violation.take() {
            return Err(v);
        }
        self.stats.end_time_ms = self.now;
        Ok(self.stats)
    }

    fn finished(&self) -> bool {
        !self.faulty()
            && self.config.moves_in_flight() == 0
            && self
                .clients
                .iter()
                .all(|c| c.ops_left == 0 && c.op.is_none())
    }

    fn step(&mut self, e: Event) {
        match e {
            Event::Deliver { to, from, msg } => match to {
                Node::Config => {
                    self.config.on_message(&msg);
                    self.flush_config();
                }
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
                    Node::Config => {
                        self.config.tick();
                        self.flush_config();
                    }
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

    fn start_move(&mut self) {
        // A random subset of one group's slots of interest, to another group.
        let from = self.rng.below(u64::from(self.opts.groups)) as GroupId;
        let mut slots = SlotSet::default();
        for &s in &self.slots {
            if self.config.owner(s) == Some(from) && self.rng.chance(500) {
                slots.insert(s);
            }
        }
        if slots.is_empty() {
            return;
        }
        let to = (from + 1 + self.rng.below(u64::from(self.opts.groups) - 1) as GroupId)
            % self.opts.groups;
        if self.config.start_move(slots, to).is_ok() {
            self.stats.moves_started += 1;
        }
        self.flush_config();
    }

    fn fault(&mut self) {
        let groups = u64::from(self.opts.groups);
        match self.rng.below(100) {
            0..=34 => {
                let g = self.rng.below(groups) as GroupId;
                self.restart_group(g, false);
            }
            35..=54 => {
                let g = self.rng.below(groups) as GroupId;
                self.restart_group(g, true);
            }
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
                    self.restart_group(g, true);
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

    /// Sends an answer to a client over the (lossy, slow) network.
    fn send_to_client(
        &mut self,
        client: usize,
        attempt: u64,
        group: GroupId,
        reply: Reply,
        committed: bool,
    ) {
        if self.faulty() && self.rng.chance(30) {
            return; // lost: the client times out
        }
        let delay = 1 + self.rng.below(if self.faulty() { 10 } else { 2 });
        self.schedule(
            delay,
            Event::Answer {
                client,
                attempt,
                group,
                reply,
                committed,
            },
        );
    }

    /// A request reaches `group`: its answer is checked where it is given, then sent.
    fn serve(&mut self, c: usize, attempt: u64, g: GroupId, asking: bool, req: &Request) {
        let reply = self.groups[usize::from(g)].node.request(req, asking);
        self.flush_group(g);
        match (&reply, req) {
            (Reply::Value(v), Request::Get(key)) => {
                let v = v.clone();
                self.check_read(key, v.as_deref(), g);
            }
            (Reply::Appended, Request::Put { tag, .. }) => {
                self.awaited.insert((g, *tag), (c, attempt));
            }
            _ => {}
        }
        self.send_to_client(c, attempt, g, reply, false);
    }

    fn finish_op(&mut self, c: usize, completed: bool) {
        let cl = &mut self.clients[c];
        cl.waiting = Waiting::Idle;
        cl.op = None;
        cl.ops_left -= 1;
        if completed {
            self.stats.ops_done += 1;
        }
        self.schedule(1, Event::Client(c));
    }

    fn answer(&mut self, c: usize, attempt: u64, _from: GroupId, reply: Reply, committed: bool) {
        let current = match self.clients[c].waiting {
            Waiting::Answer { attempt: a } | Waiting::Commit { attempt: a } => a == attempt,
            Waiting::Idle => false,
        };
        if !current {
            return; // a late answer to an attempt given up on
        }
        let slot = match &self.clients[c].op {
            Some((Request::Get(k) | Request::Put { key: k, .. }, _)) => key_slot(k),
            None => return,
        };
        match reply {
            Reply::Value(_) => self.finish_op(c, true),
            Reply::Appended if committed => self.finish_op(c, true),
            Reply::Appended => self.clients[c].waiting = Waiting::Commit { attempt },
            Reply::Moved(to) => {
                self.stats.redirects += 1;
                self.clients[c].map[usize::from(slot)] = Some(to);
                self.clients[c].waiting = Waiting::Idle;
                self.retry(c, 1);
            }
            Reply::Ask(to) => {
                self.stats.redirects += 1;
                self.clients[c].asking = Some(to);
                self.clients[c].waiting = Waiting::Idle;
                self.retry(c, 1);
            }
            Reply::TryAgain => {
                self.stats.try_agains += 1;
                self.refresh_map(c);
                self.clients[c].waiting = Waiting::Idle;
                self.retry(c, 5);
            }
        }
    }

    /// No answer in time: a read is sent again; a write may or may not have taken effect
    /// (indeterminate, as for a real client whose reply was lost), and the client moves on.
    fn timeout(&mut self, c: usize, attempt: u64) {
        let current = match self.clients[c].waiting {
            Waiting::Answer { attempt: a } | Waiting::Commit { attempt: a } => a == attempt,
            Waiting::Idle => false,
        };
        if !current {
            return;
        }
        match &self.clients[c].op {
            Some((Request::Get(_), _)) => {
                self.clients[c].waiting = Waiting::Idle;
                self.retry(c, 1);
            }
            _ => self.finish_op(c, false),
        }
    }

    fn client_step(&mut self, c: usize) {
        if !matches!(self.clients[c].waiting, Waiting::Idle) {
            return;
        }
        if self.clients[c].op.is_none() {
            if self.clients[c].ops_left == 0 {
                return;
            }
            let key = {
                let cl = &self.clients[c];
                cl.keys[self.rng.below(cl.keys.len() as u64) as usize].clone()
            };
            let req = if self.rng.chance(600) {
                let tag = self.next_tag;
                self.next_tag += 1;
                // One write in four deletes the key.
                let delete = self.rng.chance(250);
                let m = self.keys.get_mut(&key).expect("known");
                m.issued.insert(tag);
                if delete {
                    m.deletes.insert(tag);
                }
                Request::Put {
                    key,
                    value: (!delete).then(|| tag.to_string().into_bytes()),
                    tag,
                }
            } else if self.rng.chance(300) {
                // Another client's key, perhaps while its owner's write is in flight: a
                // read must never see a write that has not committed.
                let i = self.rng.below(self.keys.len() as u64) as usize;
                Request::Get(self.keys.keys().nth(i).expect("in range").clone())
            } else {
                Request::Get(key)
            };
            self.clients[c].op = Some((req, 0));
            self.clients[c].asking = None;
        }
        let (req, tries) = self.clients[c].op.clone().expect("an operation");
        if tries > RETRIES_MAX {
            if !self.faulty() {
                self.fail(format!("client {c} gave up on {req:?} after {tries} tries"));
            }
            self.clients[c].op = None;
            self.clients[c].ops_left -= 1;
            self.schedule(1, Event::Client(c));
            return;
        }
        let key = match &req {
            Request::Get(k) | Request::Put { key: k, .. } => k.clone(),
        };
        let slot = key_slot(&key);
        let target = match self.clients[c].asking.take() {
            Some(g) => Some((g, true)),
            None => {
                if self.clients[c].map[usize::from(slot)].is_none() {
                    self.refresh_map(c);
                }
                self.clients[c].map[usize::from(slot)].map(|g| (g, false))
            }
        };
        let Some((g, asking)) = target else {
            self.retry(c, 5);
            return;
        };
        let cl = &mut self.clients[c];
        cl.attempt += 1;
        let attempt = cl.attempt;
        cl.waiting = Waiting::Answer { attempt };
        self.schedule(CLIENT_TIMEOUT_MS, Event::Timeout { client: c, attempt });
        if self.faulty() && self.rng.chance(30) {
            return; // the request is lost
        }
        let delay = 1 + self.rng.below(if self.faulty() { 10 } else { 2 });
        self.schedule(
            delay,
            Event::Request {
                client: c,
                attempt,
                group: g,
                asking,
                req,
            },
        );
    }

    fn retry(&mut self, c: usize, delay: u64) {
        if let Some((_, tries)) = &mut self.clients[c].op {
            *tries += 1;
        }
        self.schedule(delay, Event::Client(c));
    }

    /// The client asks for the slot map (as CLUSTER SLOTS), served by the configuration
    /// group's committed state.
    fn refresh_map(&mut self, c: usize) {
        for s in 0..SLOTS as Slot {
            self.clients[c].map[usize::from(s)] = self.config.owner(s);
        }
    }

    fn check_read(&mut self, key: &[u8], value: Option<&[u8]>, group: GroupId) {
        let seen: u64 = match value {
            None => 0,
            Some(v) => match std::str::from_utf8(v).ok().and_then(|t| t.parse().ok()) {
                Some(t) => t,
                None => {
                    self.fail(format!("key {:?} holds a value never written", lossy(key)));
                    return;
                }
            },
        };
        let m = self.keys.get_mut(key).expect("a known key");
        let floor = m.floor();
        let why = if seen == 0 {
            // Absent: nothing committed and kept, or the newest such write deletes it.
            (floor != 0 && !m.deletes.contains(&floor)).then(|| {
                format!("nothing, where the newest write it must see ({floor}) is a value")
            })
        } else if !m.acked.contains(&seen) || m.deletes.contains(&seen) {
            Some(format!("{seen}, a value no commit wrote"))
        } else if seen < floor {
            Some(format!(
                "{seen}, older than its newest write it must see ({floor})"
            ))
        } else if seen < m.seen_max && !m.lost.contains(&m.seen_max) {
            // Reads never go back, unless a total crash dropped what an earlier one saw.
            Some(format!(
                "{seen}, older than {} which an earlier read saw",
                m.seen_max
            ))
        } else {
            m.seen_max = m.seen_max.max(seen);
            None
        };
        if let Some(why) = why {
            self.fail(format!(
                "group {group} answered {why}, for key {:?}",
                lossy(key)
            ));
        }
    }

    fn check_exclusive(&mut self) {
        for i in 0..self.slots.len() {
            let slot = self.slots[i];
            let serving: Vec<GroupId> = self
                .groups
                .iter()
                .filter(|g| g.node.serves(slot))
                .map(|g| g.node.id())
                .collect();
            if serving.len() > 1 {
                self.fail(format!("slot {slot} served by groups {serving:?} at once"));
                return;
            }
        }
    }

    /// Once settled: every key is served by the group the map names, with a value a read
    /// may return.
    fn check_final(&mut self) {
        let keys: Vec<Vec<u8>> = self.keys.keys().cloned().collect();
        for key in keys {
            let slot = key_slot(&key);
            let Some(owner) = self.config.owner(slot) else {
                self.fail(format!("slot {slot} has no owner"));
                return;
            };
            let g = &self.groups[usize::from(owner)].node;
            if !g.serves(slot) {
                self.fail(format!("slot {slot}'s owner {owner} does not serve it"));
                return;
            }
            let v = g.peek(&key).cloned();
            self.check_read(&key, v.as_deref(), owner);
        }
    }
}

fn lossy(key: &[u8]) -> String {
    String::from_utf8_lossy(key).into_owned()
}

/// Runs `seeds` seeds from `first`; the first violation, with its seed, if any.
pub fn run_seeds(first: u64, seeds: u64, mistakes: Mistakes) -> Result<SimStats, (u64, Violation)> {
    let mut total = SimStats::default();
    for seed in first..first + seeds {
        let mut opts = SimOptions::new(seed);
        opts.mistakes = mistakes;
        total.add(&Sim::new(opts).run().map_err(|v| (seed, v))?);
    }
    Ok(total)
}
