//! Data groups made of real Lazy VSR replicas (`SimOptions::replicated`).
//!
//! Each data group is three [`verso_vsr::Replica`]s with their own network, disks that lose
//! unsynced writes in a crash (a prefix kept, the last append maybe torn), crashes and
//! restarts of one replica or of all three, and replicas cut off from their peers. The
//! group's log holds Lazen's [`GroupRecord`]s; the replicated application ([`RecordApp`])
//! is the list of records applied, which is all a new primary needs to rebuild its part in
//! moves and its data ([`Group::recover`]).
//!
//! As in the server, the configuration lives in the first data group's log: group 0's
//! records are its own and the configuration's ([`LogRecord`]), and its host runs Lazen's
//! [`Config`] beside its [`Group`].
//!
//! Lazen's [`Group`] runs on a replica that leads (its *host*), as the server runs it on
//! the primary: it submits each record as a request (synchronous ones with `sync`, so the
//! reply waits for a majority's disks) and acts on a record only once the replies of it and
//! of every record before it came back: commits are acted on in log order. A replica that
//! becomes primary hosts once its view's first entry has committed and is durable (then
//! every earlier entry is on a majority's disks too: an entry is written after those before
//! it); it answers reads only while it holds its read lease, so a deposed primary that has
//! not heard of its successor never serves.
//!
//! What this mode checks beyond the abstract groups of `mod.rs`:
//! - **no record that counted is lost**: when a replica starts hosting, every record a host
//!   of the group acted on must still be in its log. A client write may be missing only if
//!   every replica of the group crashed at once after it counted (Lazy VSR's lost suffix);
//!   a transfer or configuration record never;
//! - **one lease at a time**: no two replicas of a group hold a read lease at once;
//! - and the checks of `mod.rs`, with a group's service being its lease holder's.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use verso_vsr::op_log::OpLog;
use verso_vsr::sim_disk::SimDisk;
use verso_vsr::{
    Action as VsrAction, Address, ClientId, Config as VsrConfig, Message as VsrMessage, MessageOf,
    Mistake, Replica, Request as VsrRequest, Role, ViewNum,
};

use super::{Event, Sim};
use crate::lazen::{
    Action, Config, ConfigRecord, Group, GroupId, GroupRecord, Message, Node, Reply, Request,
};
use crate::slot::SlotSet;

/// Replicas per data group.
const REPLICAS: u8 = 3;
/// How often replicas' timers are looked at (virtual ms).
const REPLICA_TICK_MS: u64 = 5;

/// A record of a data group's log: the group's own, or (group 0) the configuration's.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(super) enum LogRecord {
    Data(GroupRecord),
    Config(ConfigRecord),
}

/// A record as the group's log carries it: `uid` names it across failovers, so the
/// simulator can tell whether a record that counted is still in a new primary's log.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(super) struct LoggedRecord {
    uid: u64,
    record: LogRecord,
}

/// The replicated application: every record applied, with its operation number, in log
/// order. Operation 0 is the bootstrap (`Own`, and in group 0 the slot map's `Assign`s),
/// which no rollback reaches.
pub(super) type RecordApp = OpLog<LoggedRecord>;

fn bootstrap_app(records: &[LogRecord]) -> RecordApp {
    OpLog {
        applied: records
            .iter()
            .map(|r| {
                (
                    0,
                    LoggedRecord {
                        uid: 0,
                        record: r.clone(),
                    },
                )
            })
            .collect(),
    }
}

type Msg = MessageOf<RecordApp>;
type Disk = SimDisk<LoggedRecord, (), Vec<(u64, LoggedRecord)>>;

/// Lazen's group state machine on the replica that leads.
struct Host {
    view: ViewNum,
    /// A fresh client identity per host, so its request numbers start at 1.
    client: ClientId,
    node: Group,
    /// Group 0's: the slot map and the log of moves.
    config: Option<Config>,
    seq: u64,
    /// Submitted and not yet acted on, oldest first, with whether the reply came.
    pending: VecDeque<(u64, LoggedRecord, bool)>,
}

/// One replica with its disk.
struct ReplicaNode {
    replica: Option<Replica<RecordApp>>,
    /// Bumped by each crash: disk completions of an earlier life are dropped.
    incarnation: u64,
    disk: Disk,
    /// Messages to and from the other replicas are lost until then.
    cut_off_until: u64,
    host: Option<Host>,
}

/// One data group of real replicas.
pub(super) struct VsrGroup {
    nodes: Vec<ReplicaNode>,
    bootstrap: Vec<LogRecord>,
    /// Every record a host of this group acted on, by uid, with when it first counted.
    counted: BTreeMap<u64, (LogRecord, u64)>,
    /// When every replica of the group last crashed at once.
    total_crash_at: Option<u64>,
    /// Whether a replica has hosted yet (the first host is not a failover).
    hosted: bool,
    next_uid: u64,
    next_client: ClientId,
}

/// Events of the replicas inside data groups.
#[derive(Debug)]
pub(super) enum VsrEvent {
    Deliver {
        group: GroupId,
        to: u8,
        from: u8,
        incarnation: u64,
        msg: Box<Msg>,
    },
    SyncDone {
        group: GroupId,
        replica: u8,
        incarnation: u64,
    },
    Restart {
        group: GroupId,
        replica: u8,
    },
    Tick,
}

fn replica_config(seed: u64, mistake: Option<Mistake>, group: GroupId, replica: u8) -> VsrConfig {
    let mut c = VsrConfig::new(REPLICAS);
    // Times scaled to the simulator's (a client waits 60 ms for an answer).
    c.heartbeat_interval = 10;
    c.view_change_timeout = 120;
    c.view_change_jitter = 60;
    c.election_timeout = 80;
    c.catch_up_timeout = 30;
    // Each run draws its read lease: shorter than the view-change timeout, or longer (a
    // backup that times out then waits for its promise to end).
    c.lease = 30 + (seed.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 40) % 221;
    // The log stays small in a run: no checkpoints.
    c.checkpoint_interval = 0;
    c.seed = seed
        .wrapping_mul(0x9e37_79b9_7f4a_7c15)
        .wrapping_add(u64::from(group) * 16 + u64::from(replica));
    c.mistake = mistake;
    c
}

impl VsrGroup {
    /// Group `group`, owning `slots`; `config` is the slot map's bootstrap for group 0.
    pub(super) fn new(
        seed: u64,
        mistake: Option<Mistake>,
        group: GroupId,
        slots: &SlotSet,
        config: &[ConfigRecord],
    ) -> VsrGroup {
        let mut bootstrap = vec![LogRecord::Data(GroupRecord::Own {
            slots: slots.clone(),
        })];
        if group == 0 {
            bootstrap.extend(config.iter().cloned().map(LogRecord::Config));
        }
        let nodes = (0..REPLICAS)
            .map(|r| ReplicaNode {
                replica: Some(Replica::new(
                    r,
                    replica_config(seed, mistake, group, r),
                    bootstrap_app(&bootstrap),
                    0,
                )),
                incarnation: 0,
                disk: Disk::default(),
                cut_off_until: 0,
                host: None,
            })
            .collect();
        VsrGroup {
            nodes,
            bootstrap,
            counted: BTreeMap::new(),
            total_crash_at: None,
            hosted: false,
            next_uid: 1,
            next_client: 1,
        }
    }

    /// The replica whose host holds the read lease at `now` (at most one: checked).
    fn lease_holder(&self, now: u64) -> Option<usize> {
        self.nodes.iter().position(|n| {
            n.host.is_some() && n.replica.as_ref().is_some_and(|r| holds_lease(r, now))
        })
    }

    /// Where a message for the group goes: the lease holder, or else the host in the
    /// newest view.
    fn leader(&self, now: u64) -> Option<usize> {
        self.lease_holder(now).or_else(|| {
            (0..self.nodes.len())
                .filter(|&i| self.nodes[i].host.is_some())
                .max_by_key(|&i| self.nodes[i].host.as_ref().map(|h| h.view))
        })
    }

    /// The Lazen state of the group's lease holder (for the final check).
    pub(super) fn serving_node(&self, now: u64) -> Option<&Group> {
        self.lease_holder(now)
            .and_then(|i| self.nodes[i].host.as_ref())
            .map(|h| &h.node)
    }

    pub(super) fn describe(&self) -> String {
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
                    n.host
                        .as_ref()
                        .map_or(String::new(), |h| format!(" hosting {}", h.node.describe()))
                ),
            })
            .collect();
        replicas.join(" / ")
    }
}

fn holds_lease(r: &Replica<RecordApp>, now: u64) -> bool {
    r.role() == Role::Primary && r.lease_read(now).is_some()
}

impl Sim {
    fn vsr(&self, g: GroupId) -> &VsrGroup {
        self.groups[usize::from(g)]
            .vsr
            .as_ref()
            .expect("a replicated group")
    }

    fn vsr_mut(&mut self, g: GroupId) -> &mut VsrGroup {
        self.groups[usize::from(g)]
            .vsr
            .as_mut()
            .expect("a replicated group")
    }

    pub(super) fn vsr_step(&mut self, e: VsrEvent) {
        match e {
            VsrEvent::Deliver {
                group,
                to,
                from,
                incarnation,
                msg,
            } => {
                let now = self.now;
                let node = &mut self.vsr_mut(group).nodes[usize::from(to)];
                if node.incarnation != incarnation {
                    return; // sent to a life that crashed since
                }
                let Some(r) = node.replica.as_mut() else {
                    return;
                };
                r.handle_message(now, Address::Replica(from), *msg);
                self.pump(group, to);
            }
            VsrEvent::SyncDone {
                group,
                replica,
                incarnation,
            } => {
                let now = self.now;
                let node = &mut self.vsr_mut(group).nodes[usize::from(replica)];
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
                self.pump(group, replica);
            }
            VsrEvent::Restart { group, replica } => self.restart_replica(group, replica),
            VsrEvent::Tick => {
                for g in 0..self.opts.groups {
                    for r in 0..REPLICAS {
                        let now = self.now;
                        let node = &mut self.vsr_mut(g).nodes[usize::from(r)];
                        if let Some(rep) = node.replica.as_mut() {
                            if rep.poll_timeout() <= now {
                                rep.handle_timeout(now);
                                self.pump(g, r);
                            }
                        }
                    }
                    self.check_one_lease(g);
                }
                self.schedule(REPLICA_TICK_MS, Event::Vsr(VsrEvent::Tick));
            }
        }
    }

    /// Carries out what replica `r` of group `g` asked for, then lets its host (if it
    /// leads) act on what committed, until nothing is left to do.
    fn pump(&mut self, g: GroupId, r: u8) {
        loop {
            let mut replies = Vec::new();
            loop {
                let now = self.now;
                let node = &mut self.vsr_mut(g).nodes[usize::from(r)];
                let Some(rep) = node.replica.as_mut() else {
                    return;
                };
                let Some(action) = rep.poll_action() else {
                    break;
                };
                match action {
                    VsrAction::Send {
                        to: Address::Replica(to),
                        message,
                    } => self.replica_send(g, r, to, message),
                    VsrAction::Send {
                        to: Address::Client(c),
                        message,
                    } => replies.push((c, message)),
                    VsrAction::Write(w) => node.disk.write(w),
                    VsrAction::Sync { id } => {
                        // A slow disk under faults: more of the lazy suffix is in flight when
                        // a whole group crashes.
                        let delay = 1 + self.rng.below(if self.faulty() { 30 } else { 2 });
                        let node = &mut self.vsr_mut(g).nodes[usize::from(r)];
                        let at = node.disk.sync(id, now, delay);
                        let incarnation = node.incarnation;
                        self.schedule(
                            at - now,
                            Event::Vsr(VsrEvent::SyncDone {
                                group: g,
                                replica: r,
                                incarnation,
                            }),
                        );
                    }
                }
            }
            let node = &mut self.vsr_mut(g).nodes[usize::from(r)];
            if let Some(host) = node.host.as_mut() {
                for (c, m) in replies {
                    if let VsrMessage::Reply { client, seq, .. } = m {
                        if client == c && client == host.client {
                            if let Some(p) = host.pending.iter_mut().find(|p| p.0 == seq) {
                                p.2 = true;
                            }
                        }
                    }
                }
            }
            self.check_host(g, r);
            if !self.host_acts(g, r) {
                return;
            }
        }
    }

    fn replica_send(&mut self, g: GroupId, from: u8, to: u8, msg: Msg) {
        let faulty = self.faulty();
        let now = self.now;
        let vg = self.vsr(g);
        if vg.nodes[usize::from(from)].cut_off_until > now
            || vg.nodes[usize::from(to)].cut_off_until > now
        {
            return;
        }
        if faulty && self.rng.chance(40) {
            return;
        }
        let copies = if faulty && self.rng.chance(20) { 2 } else { 1 };
        let incarnation = self.vsr(g).nodes[usize::from(to)].incarnation;
        for _ in 0..copies {
            let delay = 1 + self.rng.below(if faulty { 6 } else { 2 });
            self.schedule(
                delay,
                Event::Vsr(VsrEvent::Deliver {
                    group: g,
                    to,
                    from,
                    incarnation,
                    msg: Box::new(msg.clone()),
                }),
            );
        }
    }

    /// Drops a host whose replica no longer leads its view; starts one on a replica that
    /// leads and whose view's first entry is committed and durable.
    fn check_host(&mut self, g: GroupId, r: u8) {
        let node = &self.vsr(g).nodes[usize::from(r)];
        let Some(rep) = node.replica.as_ref() else {
            return;
        };
        let leads = rep.role() == Role::Primary;
        if let Some(h) = &node.host {
            if !leads || rep.view() != h.view {
                self.drop_host(g, r);
            }
            return;
        }
        let op_max = rep.op_max();
        if !leads || rep.commit() != Some(op_max) || rep.dp() < op_max {
            return;
        }
        let view = rep.view();
        let log: Vec<LoggedRecord> = rep.app().applied.iter().map(|(_, l)| l.clone()).collect();
        self.start_host(g, r, view, log);
    }

    fn drop_host(&mut self, g: GroupId, r: u8) {
        self.trace(|| format!("group {g} r{r} stops hosting"));
        self.vsr_mut(g).nodes[usize::from(r)].host = None;
        // Clients waiting for a write's commit through this host time out (indeterminate),
        // as a real client whose connection to a deposed primary ends.
        self.awaited.retain(|(group, _), _| *group != g);
    }

    /// Replica `r` starts hosting over `log`, the group's records as of its view's start.
    fn start_host(&mut self, g: GroupId, r: u8, view: ViewNum, log: Vec<LoggedRecord>) {
        let uids: BTreeSet<u64> = log.iter().map(|l| l.uid).collect();
        // What counted and is gone: only client writes, only after a total crash.
        let gone: Vec<(u64, LogRecord, u64)> = self
            .vsr(g)
            .counted
            .iter()
            .filter(|(uid, _)| !uids.contains(uid))
            .map(|(uid, (rec, at))| (*uid, rec.clone(), *at))
            .collect();
        let total_crash_at = self.vsr(g).total_crash_at;
        for (uid, rec, at) in gone {
            self.vsr_mut(g).counted.remove(&uid);
            match rec {
                LogRecord::Data(GroupRecord::Put { key, tag, .. }) => {
                    if total_crash_at.is_none_or(|t| t < at) {
                        self.fail(format!(
                            "group {g} lost write {tag} (counted at {at} ms) without a total \
                             crash since"
                        ));
                    }
                    self.stats.writes_lost_to_total_crashes += 1;
                    self.keys
                        .get_mut(&key)
                        .expect("a known key")
                        .lost
                        .insert(tag);
                }
                other => self.fail(format!(
                    "group {g} lost {other:?}, which counted at {at} ms (a move record must \
                     never be lost)"
                )),
            }
        }
        // What committed without a host acting on it (its host was deposed first) counts
        // now: the new host's data holds it.
        let survived: Vec<LoggedRecord> = log
            .iter()
            .filter(|l| l.uid != 0 && !self.vsr(g).counted.contains_key(&l.uid))
            .cloned()
            .collect();
        for l in survived {
            self.stats.survived_failovers += 1;
            self.count(g, &l);
        }
        self.trace(|| {
            format!(
                "group {g} r{r} hosts in view {view:?} over {} records",
                log.len()
            )
        });
        let mut records = Vec::new();
        let mut config_records = Vec::new();
        for l in log {
            match l.record {
                LogRecord::Data(r) => records.push(r),
                LogRecord::Config(r) => config_records.push(r),
            }
        }
        let node = Group::recover(g, self.opts.mistakes, &records);
        let config = (g == 0).then(|| Config::recover(&config_records));
        let vg = self.vsr_mut(g);
        if vg.hosted {
            self.stats.failovers += 1;
        }
        let vg = self.vsr_mut(g);
        vg.hosted = true;
        let client = vg.next_client;
        vg.next_client += 1;
        vg.nodes[usize::from(r)].host = Some(Host {
            view,
            client,
            node,
            config,
            seq: 0,
            pending: VecDeque::new(),
        });
    }

    /// A record of group `g` counts (a host acted on it): a write is acknowledged.
    fn count(&mut self, g: GroupId, l: &LoggedRecord) {
        let now = self.now;
        let first = self
            .vsr_mut(g)
            .counted
            .insert(l.uid, (l.record.clone(), now))
            .is_none();
        if first {
            self.trace(|| format!("group {g} counts #{} {:?}", l.uid, l.record));
            match &l.record {
                LogRecord::Data(GroupRecord::Put { key, tag, .. }) => {
                    self.acked(g, key.clone(), *tag)
                }
                LogRecord::Config(ConfigRecord::Done { .. }) => self.stats.moves_done += 1,
                _ => {}
            }
        }
    }

    /// The host on replica `r` acts on the records whose replies came (in log order), then
    /// submits what it appended and sends what it must. Whether it submitted anything (the
    /// replica then has work).
    fn host_acts(&mut self, g: GroupId, r: u8) -> bool {
        let ready: Vec<LoggedRecord> = {
            let Some(host) = self.vsr_mut(g).nodes[usize::from(r)].host.as_mut() else {
                return false;
            };
            let mut ready = Vec::new();
            while host.pending.front().is_some_and(|p| p.2) {
                let (_, l, _) = host.pending.pop_front().expect("checked");
                ready.push(l);
            }
            ready
        };
        for l in &ready {
            self.count(g, l);
            if let Some(host) = self.vsr_mut(g).nodes[usize::from(r)].host.as_mut() {
                match &l.record {
                    LogRecord::Data(rec) => host.node.committed(rec),
                    LogRecord::Config(rec) => {
                        if let Some(c) = host.config.as_mut() {
                            c.committed(rec)
                        }
                    }
                }
            }
        }
        self.host_flush(g, r)
    }

    /// Submits the host's appends (its group's and, in group 0, the configuration's) to its
    /// replica and sends its messages. Whether it submitted anything.
    fn host_flush(&mut self, g: GroupId, r: u8) -> bool {
        let lazy = self.opts.mistakes.lazy_transfers;
        let mut appends = Vec::new();
        let mut sends = Vec::new();
        match self.vsr_mut(g).nodes[usize::from(r)].host.as_mut() {
            Some(h) => {
                for a in h.node.drain() {
                    match a {
                        Action::Append(rec) => {
                            let sync = rec.synchronous(lazy);
                            appends.push((LogRecord::Data(rec), sync));
                        }
                        Action::Send(to, msg) => sends.push((Node::Group(g), to, msg)),
                    }
                }
                for a in h.config.as_mut().map(Config::drain).unwrap_or_default() {
                    match a {
                        // Every configuration record is synchronous.
                        Action::Append(rec) => appends.push((LogRecord::Config(rec), true)),
                        Action::Send(to, msg) => sends.push((Node::Config, to, msg)),
                    }
                }
            }
            None => return false,
        }
        for (from, to, msg) in sends {
            self.send(from, to, msg);
        }
        let submitted = !appends.is_empty();
        for (record, sync) in appends {
            self.submit(g, r, record, sync);
        }
        submitted
    }

    /// The host on replica `r` hands `record` to its replica as a request.
    fn submit(&mut self, g: GroupId, r: u8, record: LogRecord, sync: bool) {
        let now = self.now;
        let vg = self.vsr_mut(g);
        let uid = vg.next_uid;
        vg.next_uid += 1;
        let node = &mut vg.nodes[usize::from(r)];
        let (Some(host), Some(rep)) = (node.host.as_mut(), node.replica.as_mut()) else {
            return;
        };
        host.seq += 1;
        let op = LoggedRecord { uid, record };
        host.pending.push_back((host.seq, op.clone(), false));
        let request = VsrRequest {
            client: host.client,
            seq: host.seq,
            op,
            sync,
        };
        let ev = rep.view();
        rep.handle_message(
            now,
            Address::Client(host.client),
            VsrMessage::Request { request, ev },
        );
    }

    fn check_one_lease(&mut self, g: GroupId) {
        let now = self.now;
        let holders: Vec<usize> = (0..usize::from(REPLICAS))
            .filter(|&i| {
                self.vsr(g).nodes[i]
                    .replica
                    .as_ref()
                    .is_some_and(|r| holds_lease(r, now))
            })
            .collect();
        if holders.len() > 1 {
            self.fail(format!(
                "replicas {holders:?} of group {g} hold a read lease at once"
            ));
        }
    }

    /// A message from another group or the configuration group reaches group `g`.
    pub(super) fn vsr_deliver(&mut self, g: GroupId, from: Node, msg: &Message) {
        let Some(i) = self.vsr(g).leader(self.now) else {
            return; // no primary: the sender asks again
        };
        let r = i as u8;
        if let Some(h) = self.vsr_mut(g).nodes[i].host.as_mut() {
            h.node.on_message(from, msg);
        }
        if self.host_flush(g, r) {
            self.pump(g, r);
        }
    }

    pub(super) fn vsr_tick_hosts(&mut self, g: GroupId) {
        for r in 0..REPLICAS {
            if let Some(h) = self.vsr_mut(g).nodes[usize::from(r)].host.as_mut() {
                h.node.tick();
                if let Some(c) = h.config.as_mut() {
                    c.tick();
                }
                if self.host_flush(g, r) {
                    self.pump(g, r);
                }
            }
        }
    }

    /// A client's request reaches group `g`: the client reaches the primary it knows of,
    /// now and then a replica that does not lead (or no longer does).
    pub(super) fn vsr_request(&mut self, g: GroupId, req: &Request, asking: bool) -> Reply {
        let now = self.now;
        let pick = if self.faulty() && self.rng.chance(100) {
            Some(self.rng.below(u64::from(REPLICAS)) as usize)
        } else {
            self.vsr(g).leader(now)
        };
        let Some(i) = pick else {
            return Reply::TryAgain; // no primary yet: the cluster is down for this group
        };
        let node = &self.vsr(g).nodes[i];
        let (Some(rep), Some(_)) = (node.replica.as_ref(), node.host.as_ref()) else {
            return Reply::TryAgain;
        };
        // A read is answered from the primary's own state only under its lease.
        if matches!(req, Request::Get(_)) && !holds_lease(rep, now) {
            return Reply::TryAgain;
        }
        let reply = match self.vsr_mut(g).nodes[i].host.as_mut() {
            Some(h) => h.node.request(req, asking),
            None => return Reply::TryAgain,
        };
        if self.host_flush(g, i as u8) {
            self.pump(g, i as u8);
        }
        reply
    }

    /// The slot map as group 0's lease holder knows it (its committed configuration).
    pub(super) fn hosted_config(&self) -> Option<&Config> {
        let vg = self.vsr(0);
        vg.lease_holder(self.now)
            .and_then(|i| vg.nodes[i].host.as_ref())
            .and_then(|h| h.config.as_ref())
    }

    /// A message reaches the configuration: group 0's primary.
    pub(super) fn vsr_config_deliver(&mut self, msg: &Message) {
        let Some(i) = self.vsr(0).leader(self.now) else {
            return;
        };
        if let Some(c) = self.vsr_mut(0).nodes[i]
            .host
            .as_mut()
            .and_then(|h| h.config.as_mut())
        {
            c.on_message(msg);
        }
        if self.host_flush(0, i as u8) {
            self.pump(0, i as u8);
        }
    }

    /// An operator starts a move at group 0's primary. Whether it began.
    pub(super) fn vsr_start_move(&mut self, slots: SlotSet, to: GroupId) -> bool {
        let Some(i) = self.vsr(0).leader(self.now) else {
            return false;
        };
        let began = self.vsr_mut(0).nodes[i]
            .host
            .as_mut()
            .and_then(|h| h.config.as_mut())
            .is_some_and(|c| c.start_move(slots, to).is_ok());
        if self.host_flush(0, i as u8) {
            self.pump(0, i as u8);
        }
        began
    }

    /// Replica `r` of group `g` crashes: its disk keeps a random prefix of what was not
    /// synced, the last append maybe torn.
    pub(super) fn crash_replica(&mut self, g: GroupId, r: u8) {
        if self.vsr(g).nodes[usize::from(r)].replica.is_none() {
            return;
        }
        if self.vsr(g).nodes[usize::from(r)].host.is_some() {
            self.drop_host(g, r);
        }
        let keep_draw = self.rng.next();
        let torn_draw = self.rng.next();
        self.trace(|| format!("group {g} r{r} crashes"));
        let node = &mut self.vsr_mut(g).nodes[usize::from(r)];
        node.replica = None;
        node.incarnation += 1;
        node.disk.crash(keep_draw, torn_draw);
    }

    fn restart_replica(&mut self, g: GroupId, r: u8) {
        let now = self.now;
        let (seed, mistake) = (self.opts.seed, self.opts.vsr_mistake);
        let vg = self.vsr_mut(g);
        let app = bootstrap_app(&vg.bootstrap);
        let node = &mut vg.nodes[usize::from(r)];
        if node.replica.is_some() {
            return;
        }
        let tail = node.disk.durable.tail();
        node.replica = Some(Replica::recover(
            r,
            replica_config(seed, mistake, g, r),
            app,
            &node.disk.durable,
            now,
        ));
        self.trace(|| format!("group {g} r{r} restarts, disk log to {tail:?}"));
        self.pump(g, r);
    }

    /// Whether some replica of `g` is down or has not recovered from a crash yet.
    fn impaired(&self, g: GroupId) -> bool {
        self.vsr(g)
            .nodes
            .iter()
            .any(|n| n.replica.as_ref().is_none_or(|r| r.is_amnesiac()))
    }

    /// A fault inside group `g`: one replica (often the primary) crashes and restarts
    /// later, or is cut off from its peers for a while. Never a second replica while one
    /// is down or recovering: that would be a total crash, which `total_crash` is.
    pub(super) fn replica_fault(&mut self, g: GroupId) {
        let now = self.now;
        let r = if self.rng.chance(500) {
            self.vsr(g)
                .leader(now)
                .map_or_else(|| self.rng.below(u64::from(REPLICAS)) as u8, |i| i as u8)
        } else {
            self.rng.below(u64::from(REPLICAS)) as u8
        };
        if self.rng.chance(500) && !self.impaired(g) {
            self.crash_replica(g, r);
            let after = 20 + self.rng.below(300);
            self.schedule(
                after,
                Event::Vsr(VsrEvent::Restart {
                    group: g,
                    replica: r,
                }),
            );
        } else {
            let until = now + 30 + self.rng.below(300);
            self.trace(|| format!("group {g} r{r} cut off until {until}"));
            self.vsr_mut(g).nodes[usize::from(r)].cut_off_until = until;
        }
    }

    /// Every replica of `g` crashes at once; each restarts a little later.
    pub(super) fn total_crash(&mut self, g: GroupId) {
        self.trace(|| format!("group {g} crashes whole"));
        self.stats.total_crashes += 1;
        self.vsr_mut(g).total_crash_at = Some(self.now);
        for r in 0..REPLICAS {
            self.crash_replica(g, r);
            let after = 20 + self.rng.below(200);
            self.schedule(
                after,
                Event::Vsr(VsrEvent::Restart {
                    group: g,
                    replica: r,
                }),
            );
        }
    }
}
