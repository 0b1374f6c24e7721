//! The mover: one thread per node that runs this group's [`Group`] state machine over the
//! engine and, on the configuration group's node, the [`Config`] state machine; it is their
//! host and does their I/O, nothing more (the protocol is in `verso_cluster::lazen`).
//!
//! - **Logs.** A record a state machine appends is written to an engine table of the group
//!   (`cluster.moves`, and `cluster.config` on the configuration group) under the next
//!   sequence number, and the host waits until the engine's log has it on disk before it
//!   reports the record committed: every transfer record is synchronous. A chunk's keys are
//!   written in the same transaction as its record, so a crash never separates them. At
//!   start the tables are read back and the machines resume from them (the engine recovered
//!   the data itself), redoing what they began.
//! - **Messages** go to the other group's primary as `VERSO.LAZEN from message` over its
//!   client port (a cached connection, short timeouts); losing one is fine, the machines
//!   send again on their ticks. A message for this node's own group or configuration
//!   machine is delivered in place.
//! - **Answers.** After every step the mover publishes how the group answers for the slots
//!   in its moves ([`super::Moves::publish`]), and before it writes any record, so that a
//!   `Freeze` is visible to every request before its commit reads what changed.
//!
//! The configuration group is the group with the lowest id: it holds the slot map and the
//! log of moves in its own engine, so it needs no servers of its own (ARCHITECTURE.md).

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use verso_cluster::lazen::{
    Action, Answer, Config, ConfigRecord, Group, GroupRecord, Message, Mistakes, Node,
};
use verso_cluster::{Slot, SlotSet, SLOTS};
use verso_engine::Table;
use verso_replication::{Replication, Ticket, TicketState};

use super::data::{self, EngineData, Res};
use super::{Moves, Request};
use crate::session::Shared;
use crate::shards::ShardMap;

/// How long the mover waits for a request before it looks at its timers.
const WAIT: Duration = Duration::from_millis(20);
/// How often the machines resend what is unacknowledged.
const TICK: Duration = Duration::from_millis(200);
/// Connect, read and write timeout of a message to another group.
const SEND_TIMEOUT: Duration = Duration::from_millis(500);

/// The engine table of this group's move records.
pub const GROUP_LOG: &str = "cluster.moves";
/// The engine table of the configuration records (on the configuration group).
pub const CONFIG_LOG: &str = "cluster.config";

/// The index in the map's groups of the configuration group (the lowest id).
pub fn config_group(map: &ShardMap) -> usize {
    (0..map.groups.len())
        .min_by_key(|&gi| map.groups[gi].id)
        .expect("a map has a group")
}

/// Runs until `stop`. On a replica of a Lazy VSR group the machines run while it is the
/// primary: from its log when it becomes primary, and dropped (with all they published)
/// when it stops; a backup's mover only waits. Any failure to log a record starts the
/// machines again from the logs, which is always safe: they redo what they began.
pub fn run(shared: &Shared, stop: &AtomicBool) {
    let (Some(map), Some(moves)) = (shared.shards.as_ref(), shared.moves.as_ref()) else {
        return;
    };
    while !stop.load(Ordering::Relaxed) {
        let generation = match &shared.replication {
            None => 0,
            Some(r) if r.is_primary() => r.generation(),
            Some(_) => {
                moves.drop_requests();
                std::thread::sleep(WAIT);
                continue;
            }
        };
        let failed = match Mover::open(shared, map, moves, generation) {
            Ok(mut mover) => mover.run(stop),
            Err(e) => Some(format!("cannot read the move logs: {e}")),
        };
        moves.reset();
        if let Some(e) = failed {
            if leads(shared, generation) {
                tracing::error!("slot moves: {e}; reading the logs again");
            } else {
                tracing::info!("slot moves: this replica stopped being primary ({e})");
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

/// Whether this node still leads its group in `generation` (always, unreplicated).
fn leads(shared: &Shared, generation: u64) -> bool {
    shared
        .replication
        .as_ref()
        .is_none_or(|r| r.is_primary() && r.generation() == generation)
}

/// How long a record may wait for a majority of its group's disks before the mover gives
/// up and reads the logs again.
const REPLICATED_WAIT_MAX: Duration = Duration::from_secs(10);

/// Waits until the slots below `ticket` are committed by the group and on a majority's
/// disks: a record counts only then (issue 17: every transfer record is synchronous).
fn wait_replicated(r: &Replication, ticket: Ticket) -> Res<()> {
    let deadline = Instant::now() + REPLICATED_WAIT_MAX;
    loop {
        match r.ticket_state(ticket) {
            TicketState::Failed => return Err("this replica stopped being primary".into()),
            TicketState::Ready if r.majority_on_disk(ticket) == Some(true) => return Ok(()),
            _ => {}
        }
        if Instant::now() > deadline {
            return Err(format!(
                "a majority of the group did not have the record on disk within {} s",
                REPLICATED_WAIT_MAX.as_secs()
            ));
        }
        std::thread::sleep(Duration::from_micros(500));
    }
}

/// An appended log: an engine table of encoded records under sequence numbers.
struct Log {
    table: Table,
    next: u64,
}

impl Log {
    fn open(shared: &Shared, name: &str) -> Res<(Log, Vec<Vec<u8>>)> {
        let table = shared.db.table(name).map_err(|e| e.to_string())?;
        let txn = shared.db.begin_read_only().map_err(|e| e.to_string())?;
        let records: Vec<Vec<u8>> = txn
            .range(&table, (Bound::<&[u8]>::Unbounded, Bound::Unbounded))
            .map_err(|e| e.to_string())?
            .map(|(_, v)| v.to_vec())
            .collect();
        txn.abort();
        let next = records.len() as u64;
        Ok((Log { table, next }, records))
    }

    /// Writes `record` (and, in the same transaction, what `also` writes), and waits until
    /// it is on disk: the engine's own log's, or a majority of the group's (`generation`:
    /// the replication generation the mover leads in).
    fn append(
        &mut self,
        shared: &Shared,
        generation: u64,
        record: &[u8],
        also: impl Fn(&mut verso_engine::Txn<'_>) -> Res<()>,
    ) -> Res<()> {
        // Taken before the commit: the batch that carries it is proposed synchronous.
        let _sync = shared.replication.as_ref().map(|r| r.hold_sync());
        loop {
            let mut txn = shared.db.begin().map_err(|e| e.to_string())?;
            also(&mut txn)?;
            txn.put(&self.table, self.next.to_be_bytes(), record)
                .map_err(|e| e.to_string())?;
            match txn.commit_with_ticket() {
                Ok((_, ticket)) => {
                    shared.db.wait_durable(ticket).map_err(|e| e.to_string())?;
                    if let Some(r) = &shared.replication {
                        wait_replicated(r, r.write_ticket(generation))?;
                    }
                    self.next += 1;
                    return Ok(());
                }
                Err(e) if e.is_conflict() => continue,
                Err(e) => return Err(e.to_string()),
            }
        }
    }
}

struct Mover<'s> {
    shared: &'s Shared,
    map: &'s ShardMap,
    moves: &'s Moves,
    me: u16,
    /// The replication generation this node leads in (0 unreplicated): the mover stops
    /// when it ends.
    generation: u64,
    group: Group<EngineData<'s>>,
    group_log: Log,
    /// On the configuration group's node: the configuration machine and its log.
    config: Option<(Config, Log)>,
    links: HashMap<SocketAddr, BufReader<TcpStream>>,
    /// What was published last (`None`: nothing yet, so no slot is served).
    published: Option<HashMap<Slot, (Answer, Answer)>>,
    status: Option<Vec<String>>,
}

impl<'s> Mover<'s> {
    fn open(
        shared: &'s Shared,
        map: &'s ShardMap,
        moves: &'s Moves,
        generation: u64,
    ) -> Res<Mover<'s>> {
        if let Some(r) = &shared.replication {
            // A new primary reads the logs only once every entry before its first own one
            // is committed, applied and on a majority's disks: what it reads then is what
            // the group logged, and never undone.
            let _sync = r.hold_sync();
            wait_replicated(r, r.barrier_ticket(generation))?;
        }
        let me = map.my_group().id;
        let data = EngineData { shared, moves };
        let (mut group_log, raw) = Log::open(shared, GROUP_LOG)?;
        let records = raw
            .iter()
            .map(|b| GroupRecord::decode(b).map_err(|e| e.to_string()))
            .collect::<Res<Vec<_>>>()?;
        let fresh = records.is_empty();
        let mut group = Group::resume(me, Mistakes::default(), &records, data);
        if fresh {
            // Bootstrap: the file's slots are this group's first record.
            let own = GroupRecord::Own {
                slots: map.my_group().initial_slots.clone(),
            };
            group_log.append(shared, generation, &encoded(&own), |_| Ok(()))?;
            group.committed_applied(&own);
        } else {
            // The log, not the file, says which slots this group holds now, and where those
            // it sent away went.
            map.set_owner(group.owned(), map.my_group_index());
            for (slot, to) in group.moved_away() {
                if let Some(gi) = map.group_index(to) {
                    map.set_owner(&SlotSet::range(slot, slot), gi);
                }
            }
        }
        let config = if map.my_group_index() == config_group(map) {
            let (mut log, raw) = Log::open(shared, CONFIG_LOG)?;
            let records = raw
                .iter()
                .map(|b| ConfigRecord::decode(b).map_err(|e| e.to_string()))
                .collect::<Res<Vec<_>>>()?;
            let mut config = Config::recover(&records);
            if records.is_empty() {
                for g in &map.groups {
                    let r = ConfigRecord::Assign {
                        slots: g.initial_slots.clone(),
                        group: g.id,
                    };
                    let mut b = Vec::new();
                    r.encode(&mut b);
                    log.append(shared, generation, &b, |_| Ok(()))?;
                    config.committed(&r);
                }
            }
            Some((config, log))
        } else {
            None
        };
        // Keys of slots this group neither owns nor receives are what a crash left behind
        // between `EndSend` and their deletion: they go now (one pass over the keys).
        if !fresh {
            let mut keep = group.owned().clone();
            for s in group.moving().iter() {
                keep.insert(s);
            }
            let mut stale = SlotSet::default();
            for s in (0..SLOTS as Slot).filter(|&s| !keep.contains(s)) {
                stale.insert(s);
            }
            let n = data::drop_slots(shared, &stale)?;
            if n > 0 {
                tracing::info!("slot moves: deleted {n} keys of slots sent away before a restart");
            }
        }
        let mover = Mover {
            shared,
            map,
            moves,
            me,
            generation,
            group,
            group_log,
            config,
            links: HashMap::new(),
            published: None,
            status: None,
        };
        mover.sync_map_from_config();
        Ok(mover)
    }

    /// Runs the machines until `stop`, or until a record cannot be logged or this node
    /// stops leading its group (the error says which).
    fn run(&mut self, stop: &AtomicBool) -> Option<String> {
        let mut ticked = Instant::now();
        self.publish();
        while !stop.load(Ordering::Relaxed) {
            if !leads(self.shared, self.generation) {
                return Some("no longer primary".into());
            }
            for r in self.moves.take(WAIT) {
                // One at a time: a target logs a chunk before it can take the next one sent
                // with it (the machine refuses chunks while one is being logged).
                if let Err(e) = self.request(r).and_then(|()| self.pump()) {
                    return Some(e);
                }
            }
            if ticked.elapsed() >= TICK {
                ticked = Instant::now();
                self.group.tick();
                if let Some((c, _)) = &mut self.config {
                    c.tick();
                }
            }
            if let Err(e) = self.pump() {
                return Some(e);
            }
            self.publish();
        }
        None
    }

    fn request(&mut self, r: Request) -> Res<()> {
        match r {
            Request::Message(from, msg) => self.deliver(from, Node::Group(self.me), msg),
            Request::Start { slots, to, reply } => {
                let answer = match &mut self.config {
                    None => Err("this node is not the configuration group's".to_string()),
                    Some(_) if self.map.group_index(to).is_none() => {
                        Err(format!("there is no group {to}"))
                    }
                    Some((c, _)) => c.start_move(slots, to).map_err(|e| format!("{e:?}")),
                };
                // Answered once the Begin record is logged and the status shows the move,
                // so a caller that polls CLUSTER MOVES next sees it.
                if answer.is_ok() {
                    if let Err(e) = self.pump() {
                        let _ = reply.send(Err(e.clone()));
                        return Err(e);
                    }
                    self.publish();
                }
                let _ = reply.send(answer);
            }
        }
        Ok(())
    }

    /// Hands `msg` to this node's machine it is for.
    fn deliver(&mut self, from: Node, to: Node, msg: Message) {
        match (&msg, to) {
            (Message::SendStatus { .. } | Message::RecvStatus { .. }, _) | (_, Node::Config) => {
                if let Some((c, _)) = &mut self.config {
                    c.on_message(&msg);
                }
            }
            _ => self.group.on_message(from, &msg),
        }
    }

    /// Carries out what the machines asked until they ask nothing more.
    fn pump(&mut self) -> Res<()> {
        loop {
            let mut actions: Vec<(Node, Action<GroupRecord>)> = self
                .group
                .drain()
                .into_iter()
                .map(|a| (Node::Group(self.me), a))
                .collect();
            let mut config_actions = Vec::new();
            if let Some((c, _)) = &mut self.config {
                config_actions = c.drain();
            }
            if actions.is_empty() && config_actions.is_empty() {
                return Ok(());
            }
            for (from, a) in actions.drain(..) {
                match a {
                    Action::Append(r) => self.append_group(r)?,
                    Action::Send(to, msg) => self.send(from, to, msg),
                }
            }
            for a in config_actions {
                match a {
                    Action::Append(r) => self.append_config(r)?,
                    Action::Send(to, msg) => self.send(Node::Config, to, msg),
                }
            }
        }
    }

    fn append_group(&mut self, r: GroupRecord) -> Res<()> {
        // Requests see the state that appended `r` before it commits (a Freeze above all).
        self.publish();
        let shared = self.shared;
        let (empty, entries) = self.group.data_effect(&r);
        let (empty, entries) = (empty, entries.to_vec());
        if let (GroupRecord::RecvReset { .. }, Some(slots)) = (&r, &empty) {
            // What an earlier attempt sent goes before the reset is logged (idempotent: a
            // crash in between resets again).
            data::drop_slots(shared, slots)?;
        }
        // A chunk's keys live in the engine once; its record keeps only its place.
        let logged = match &r {
            GroupRecord::Chunk {
                id,
                attempt,
                seq,
                last,
                ..
            } => GroupRecord::Chunk {
                id: *id,
                attempt: *attempt,
                seq: *seq,
                entries: Vec::new(),
                last: *last,
            },
            other => other.clone(),
        };
        let owner_change = match &r {
            GroupRecord::EndRecv { id } => self
                .group
                .receiving(*id)
                .map(|(s, _)| (s.clone(), self.map.my_group_index())),
            GroupRecord::EndSend { id } => self
                .group
                .sending(*id)
                .and_then(|(s, to)| self.map.group_index(to).map(|gi| (s.clone(), gi))),
            _ => None,
        };
        let started = Instant::now();
        self.group_log
            .append(shared, self.generation, &encoded(&logged), |txn| {
                data::import_all(txn, shared, &entries)
            })?;
        if let GroupRecord::Chunk { last: false, .. } = &r {
            // Bulk work is paced; the last chunks (the slots are frozen) are not.
            std::thread::sleep(started.elapsed() * super::PAUSE_PER_WORK);
        }
        self.group.committed_applied(&r);
        if let Some((slots, gi)) = owner_change {
            self.map.set_owner(&slots, gi);
        }
        if let (GroupRecord::EndSend { .. }, Some(slots)) = (&r, &empty) {
            // Nothing serves these slots here any more: their keys go.
            let n = data::drop_slots(shared, slots)?;
            tracing::info!("slot move: deleted {n} keys of the slots sent away");
        }
        Ok(())
    }

    fn append_config(&mut self, r: ConfigRecord) -> Res<()> {
        let shared = self.shared;
        let generation = self.generation;
        let Some((c, log)) = &mut self.config else {
            return Ok(());
        };
        let mut b = Vec::new();
        r.encode(&mut b);
        log.append(shared, generation, &b, |_| Ok(()))?;
        c.committed(&r);
        self.sync_map_from_config();
        Ok(())
    }

    /// On the configuration group's node, its map is the configuration's.
    fn sync_map_from_config(&self) {
        let Some((c, _)) = &self.config else { return };
        let mut by_group: HashMap<usize, SlotSet> = HashMap::new();
        let (me, owned) = (self.map.my_group_index(), self.group.owned());
        for slot in 0..SLOTS as Slot {
            if let Some(gi) = c.owner(slot).and_then(|g| self.map.group_index(g)) {
                // This group's own log decides which slots are its own.
                if owned.contains(slot) || gi == me {
                    continue;
                }
                by_group.entry(gi).or_default().insert(slot);
            }
        }
        for (gi, slots) in by_group {
            self.map.set_owner(&slots, gi);
        }
    }

    fn send(&mut self, from: Node, to: Node, msg: Message) {
        let local = match to {
            Node::Config => self.config.is_some(),
            Node::Group(g) => g == self.me,
        };
        if local {
            self.deliver(from, to, msg);
            return;
        }
        let gi = match to {
            Node::Config => config_group(self.map),
            Node::Group(g) => match self.map.group_index(g) {
                Some(gi) => gi,
                None => return,
            },
        };
        let addr = self.map.leader(gi);
        let mut request = Vec::new();
        let (mut f, mut m) = (Vec::new(), Vec::new());
        from.encode(&mut f);
        msg.encode(&mut m);
        let parts: [&[u8]; 3] = [b"VERSO.LAZEN", &f, &m];
        request.extend_from_slice(b"*3\r\n");
        for p in parts {
            request.extend_from_slice(format!("${}\r\n", p.len()).as_bytes());
            request.extend_from_slice(p);
            request.extend_from_slice(b"\r\n");
        }
        if self.send_to(addr, &request).is_err() {
            // Lost: the machines send again on their next tick.
            self.links.remove(&addr);
        }
    }

    fn send_to(&mut self, addr: SocketAddr, request: &[u8]) -> std::io::Result<()> {
        if !self.links.contains_key(&addr) {
            let stream = TcpStream::connect_timeout(&addr, SEND_TIMEOUT)?;
            stream.set_read_timeout(Some(SEND_TIMEOUT))?;
            stream.set_write_timeout(Some(SEND_TIMEOUT))?;
            stream.set_nodelay(true)?;
            let mut link = BufReader::new(stream);
            if let Some(p) = &self.shared.password {
                let auth = format!("*2\r\n$4\r\nAUTH\r\n${}\r\n{p}\r\n", p.len());
                link.get_mut().write_all(auth.as_bytes())?;
                expect_ok(&mut link)?;
            }
            self.links.insert(addr, link);
        }
        let link = self.links.get_mut(&addr).expect("inserted above");
        link.get_mut().write_all(request)?;
        expect_ok(link)
    }

    /// Publishes the group's answers for the slots in its moves (and the status lines),
    /// when they changed.
    fn publish(&mut self) {
        if self.moves.owned().as_ref() != Some(self.group.owned()) {
            self.moves.set_owned(self.group.owned());
        }
        let answers: HashMap<Slot, (Answer, Answer)> = self
            .group
            .moving()
            .iter()
            .map(|s| (s, (self.group.answer(s, false), self.group.answer(s, true))))
            .collect();
        if self.published.as_ref() != Some(&answers) {
            self.moves.publish(answers.clone(), self.generation);
            self.published = Some(answers);
        }
        self.moves.set_progress(self.group.progress());
        let mut status: Vec<String> = Vec::new();
        let g = self.group.describe();
        if g.contains("sending") || g.contains("receiving") {
            status.push(g);
        }
        if let Some((c, _)) = &self.config {
            let d = c.describe();
            if !d.is_empty() {
                status.push(format!("config: {d}"));
            }
        }
        if Some(&status) != self.status.as_ref() {
            self.moves.set_status(status.clone());
            self.status = Some(status);
        }
    }
}

fn encoded(r: &GroupRecord) -> Vec<u8> {
    let mut b = Vec::new();
    r.encode(&mut b);
    b
}

/// Reads one reply line and fails unless it is `+OK`.
fn expect_ok(link: &mut BufReader<TcpStream>) -> std::io::Result<()> {
    let mut line = String::new();
    link.read_line(&mut line)?;
    if line.starts_with("+OK") {
        Ok(())
    } else {
        Err(std::io::Error::other(format!(
            "answered {}",
            line.trim_end()
        )))
    }
}
