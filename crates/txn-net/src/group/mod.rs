//! A shard served by a replication group: three `verso txn-server` processes, each a Lazy
//! VSR replica (`verso-vsr`) whose log holds the shard server's inputs (issue 18 item 3,
//! issue 19 item 3: every state change a response depends on goes through the group's log
//! before the response leaves; a read-only read's raised `t_r` goes as a note before the
//! next input that could depend on it, under a promised floor, while the host answers the
//! read itself under its read lease: `host.rs`, `verso_ncc`'s `server/unlogged.rs`). The
//! design is the simulator's, which proved it under
//! failovers and total crashes (`verso_ncc`'s `replicated/vsr_group.rs`; `verso sim ncc
//! --replicated ... --vsr`):
//!
//! - the log's application ([`log::InputLog`]) is the list of inputs applied: each a
//!   protocol message (its binary wire form) or a timer tick, with the host's clock;
//! - a replica that leads its view, once its view's first entry has committed and is
//!   durable (so everything in its log is), becomes the **host**: it rebuilds the server
//!   by replaying its log into a fresh one;
//! - the host executes each input at once on its live server (so later inputs see it) and
//!   hands it to its replica as a request; the input's outputs leave only when the
//!   replica's reply for it comes back, in log order: once the input is committed and,
//!   under [`GroupDurability::AnswersOnDisk`] (the default), on a majority's disks (the
//!   request is `sync`). [`GroupDurability::Sync`] runs the replicas as VSR-Sync, and
//!   [`GroupDurability::Lazy`] is plain Lazy VSR, which a total crash of the group can
//!   make forget answered inputs (the simulator shows it: do not use it for data that
//!   must survive one);
//! - clients send to the replica of the shard's group that last answered, and to every
//!   replica after a silence ([`crate::client::Pool::connect_groups`]); replicas that do
//!   not host drop what they get, and the protocol's resends carry a transaction across a
//!   failover. A server's messages to
//!   another shard go to every replica of that shard's group the same way.
//!
//! Threads: as [`crate::server`] (an acceptor, a reader per connection, one protocol
//! thread that owns the replica, the host's server and every write half), plus the disk
//! thread ([`disk`]). Limits: the log is never compacted (its file and each replica's
//! copy in memory grow with every input, and a new host replays all of it); at most
//! [`PENDING_MAX`] inputs wait for their replies, more are dropped (their senders resend).

pub mod disk;
mod host;
mod link;
pub mod log;

use std::collections::{BTreeMap, HashMap};
use std::hash::{BuildHasher, Hasher};
use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use verso_ncc::wire::{Encoding, Wire};
use verso_ncc::{ClientId, ServerId, TxnServer};
use verso_vsr::{Action, Address, Config as VsrConfig, Mode, Replica};

use crate::engine_store::{EngineStore, WALL_EPOCH_US};
use crate::frame::{write_frame, write_msg, Frame, Hello};
use crate::server::{spawn_acceptor, write_dump, Input, ServerConfig};
use crate::{now_us, Protocol, StoreKind};
use disk::{Disk, DiskDone};
use host::Host;
use link::Link;
use log::{InputLog, ReplicaMsg};

/// Replicas per group.
pub const REPLICAS: u8 = 3;

/// Inputs waiting for their replies, at most; more are dropped (their senders resend).
pub const PENDING_MAX: usize = 65_536;

/// What a replica that does not host answers a dump request with (`DumpEnd`'s reason):
/// the caller asks another replica.
pub const NOT_HOSTING: &str = "not the group's host";

/// What a host answers a dump request with while inputs it executed wait to commit (its
/// server's state may hold effects a failover would lose): the caller asks again.
pub const UNSETTLED: &str = "the host has inputs waiting to commit";

/// The default limit on a group log's input bytes ([`GroupConfig::log_max_bytes`]). Each
/// replica holds its whole log in memory (measured: resident memory grows by about one
/// byte per logged byte on a backup, two and a half on the host, whose server state grows
/// too) and on disk, and a new host replays all of it (about 1 µs per input). At F1's peak on this
/// machine a replica logs about 4 MB a second, so a group reaches this in about two
/// minutes: the groups are for tests and measurements until the log is checkpointed and
/// compacted, and this keeps six replicas on one 24 GiB machine within its memory.
pub const LOG_MAX_BYTES: u64 = 512 << 20;

/// The smallest limit a group takes: room for a few full batches.
pub const LOG_MAX_BYTES_MIN: u64 = 1 << 20;

/// When a host's answers may leave (module docs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum GroupDurability {
    /// Plain Lazy VSR: once committed (in a majority's memory).
    Lazy,
    /// Lazy VSR, each input's answers once it is on a majority's disks.
    #[default]
    AnswersOnDisk,
    /// VSR-Sync: every entry on disk before a replica acknowledges it.
    Sync,
}

impl GroupDurability {
    pub fn parse(s: &str) -> Option<GroupDurability> {
        match s {
            "lazy" => Some(GroupDurability::Lazy),
            "answers-on-disk" => Some(GroupDurability::AnswersOnDisk),
            "sync" => Some(GroupDurability::Sync),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            GroupDurability::Lazy => "lazy",
            GroupDurability::AnswersOnDisk => "answers-on-disk",
            GroupDurability::Sync => "sync",
        }
    }
}

/// One replica of a shard's group.
#[derive(Clone, Debug)]
pub struct GroupConfig {
    /// The shard server's settings (`server.id` is the shard; `server.peers` is unused:
    /// `groups` says where every shard is).
    pub server: ServerConfig,
    /// This replica's index in its group.
    pub replica: u8,
    /// Every shard's group, by shard id then replica index.
    pub groups: Vec<Vec<SocketAddr>>,
    /// Where this replica keeps its log.
    pub dir: PathBuf,
    pub durability: GroupDurability,
    /// The most input bytes the group's log takes (`verso txn-server --log-max-bytes`;
    /// [`LOG_MAX_BYTES`] by default): the log is never compacted, so once it holds this
    /// many a group refuses new transactions, and after an eighth more every input, rather
    /// than run its replicas out of memory and disk.
    pub log_max_bytes: u64,
}

impl GroupConfig {
    fn validate(&self) -> io::Result<()> {
        let bad = |why: String| Err(io::Error::new(io::ErrorKind::InvalidInput, why));
        let id = self.server.id as usize;
        if id >= self.groups.len() {
            return bad(format!("shard {id} of {} groups", self.groups.len()));
        }
        if let Some(g) = self
            .groups
            .iter()
            .position(|g| g.len() != REPLICAS as usize)
        {
            return bad(format!("group {g} does not have {REPLICAS} replicas"));
        }
        if self.replica >= REPLICAS {
            return bad(format!("replica {} of {REPLICAS}", self.replica));
        }
        if self.log_max_bytes < LOG_MAX_BYTES_MIN {
            return bad(format!(
                "a log limit of {} bytes: at least {LOG_MAX_BYTES_MIN}",
                self.log_max_bytes
            ));
        }
        Ok(())
    }
}

/// The replicas' timers, in milliseconds: a view change after half a second without the
/// primary (several heartbeats lost on a loaded machine, not one).
fn replica_config(durability: GroupDurability, replica: u8, seed: u64) -> VsrConfig {
    let mut c = VsrConfig::new(REPLICAS);
    c.mode = match durability {
        GroupDurability::Sync => Mode::Sync,
        GroupDurability::Lazy | GroupDurability::AnswersOnDisk => Mode::Lazy,
    };
    c.heartbeat_interval = 20;
    c.view_change_timeout = 500;
    c.view_change_jitter = 250;
    c.election_timeout = 400;
    c.catch_up_timeout = 100;
    // The host answers read-only reads from its own state while it holds the lease
    // (`host.rs`, `verso_ncc`'s `server/unlogged.rs`): 4/5 of the view-change timeout, as
    // the replicated `verso serve` has it.
    c.lease = 400;
    // The host bounds what it hands over (`PENDING_MAX`); a request the replica dropped
    // would hold back every later answer, which leave in order.
    c.request_queue_max = usize::MAX;
    // A message must fit a frame (`frame::MAX_FRAME`, 4 MiB); one input is at most about
    // 1 MiB (`frame::REQUEST_BYTES_MAX`).
    c.message_bytes_max = 1 << 20;
    c.checkpoint_interval = 0;
    c.seed = seed ^ u64::from(replica);
    c
}

/// Serves as replica `cfg.replica` of shard `cfg.server.id`'s group on `listener` until a
/// control connection sends [`Frame::Shutdown`] (or the disk fails: an error).
pub fn serve_group(listener: TcpListener, cfg: GroupConfig) -> io::Result<()> {
    cfg.validate()?;
    let (tx, rx) = mpsc::channel();
    spawn_acceptor(&listener, tx.clone())?;
    let (durable, disk) = Disk::open(&cfg.dir, tx, Input::Disk)?;
    let s = &cfg.server;
    let (id, after, keep) = (s.id, s.recovery_after_us, s.keep_history);
    match (s.protocol, s.store) {
        (Protocol::Ncc { .. }, StoreKind::Memory) => {
            let make = move || {
                Ok(Protocol::ncc_server(
                    verso_ncc::MemStore::new(),
                    id,
                    after,
                    keep,
                ))
            };
            run(make, &cfg, durable, disk, rx)
        }
        (Protocol::Ncc { .. }, StoreKind::Engine) => {
            let make = move || {
                let store = EngineStore::new(WALL_EPOCH_US).map_err(io::Error::other)?;
                Ok(Protocol::ncc_server(store, id, after, keep))
            };
            run(make, &cfg, durable, disk, rx)
        }
        (Protocol::Baseline(_), StoreKind::Engine) => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "--store engine is for NCC's servers (the baselines keep their versions in memory)",
        )),
        (Protocol::Baseline(flavor), StoreKind::Memory) => {
            let make = move || Ok(Protocol::baseline_server(flavor, keep));
            run(make, &cfg, durable, disk, rx)
        }
    }
}

/// A connection a peer opened, answered through a [`Link`].
struct Accepted {
    link: Link,
    encoding: Encoding,
    socket: TcpStream,
}

impl Accepted {
    fn new(stream: TcpStream, encoding: Encoding) -> io::Result<Accepted> {
        let socket = stream.try_clone()?;
        Ok(Accepted {
            link: Link::accepted(stream)?,
            encoding,
            socket,
        })
    }
}

/// The protocol thread's state.
struct Group<S: TxnServer, F> {
    make: F,
    shard: u32,
    me: u8,
    durability: GroupDurability,
    log_max_bytes: u64,
    replica: Replica<InputLog>,
    disk: Disk,
    /// Checkpoints written and not yet covered by a sync (none while the group runs
    /// without checkpoints; kept for a replica that installs a state transfer).
    checkpoints: Vec<(u64, verso_vsr::Viewstamp)>,
    syncs_asked: u64,
    started: Instant,
    host: Option<Host<S>>,
    /// Names this process's hosts' clients and inputs.
    nonce: u64,
    hosts_started: u64,
    /// Connections peers opened that this replica answers on (clients, control), with
    /// the encoding each speaks and the socket, to shut down.
    writers: HashMap<u64, Accepted>,
    /// Client connections by the first protocol client they speak for: (count, conn).
    clients: BTreeMap<u32, (u32, u64)>,
    /// Incoming connections from the other replicas: conn → replica.
    replica_conns: HashMap<u64, u8>,
    /// Outgoing: to this group's other replicas, and to every shard's replicas.
    to_replicas: Vec<Option<Link>>,
    to_servers: Vec<Vec<Link>>,
    scratch: Vec<u8>,
    shutdown: bool,
    history_kept: bool,
    /// The replica's view and role when last looked at (`check_host` says each change).
    last_seen: Option<(verso_vsr::ViewNum, verso_vsr::Role, bool)>,
}

fn run<S, F>(
    make: F,
    cfg: &GroupConfig,
    durable: log::LogDurable,
    disk: Disk,
    rx: Receiver<Input>,
) -> io::Result<()>
where
    S: TxnServer,
    S::Msg: Wire,
    F: Fn() -> io::Result<S>,
{
    let nonce = std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish()
        | 1;
    let vsr = replica_config(cfg.durability, cfg.replica, nonce);
    let replica = Replica::recover(cfg.replica, vsr, InputLog::default(), &durable, 0);
    let mut g = Group {
        make,
        shard: cfg.server.id,
        me: cfg.replica,
        durability: cfg.durability,
        log_max_bytes: cfg.log_max_bytes,
        replica,
        disk,
        checkpoints: Vec::new(),
        syncs_asked: 0,
        started: Instant::now(),
        host: None,
        nonce,
        hosts_started: 0,
        writers: HashMap::new(),
        clients: BTreeMap::new(),
        replica_conns: HashMap::new(),
        to_replicas: (0..REPLICAS)
            .map(|r| {
                let hello = Hello::Replica {
                    group: cfg.server.id,
                    replica: cfg.replica,
                };
                let addr = cfg.groups[cfg.server.id as usize][usize::from(r)];
                (r != cfg.replica)
                    .then(|| Link::outgoing(addr, hello))
                    .transpose()
            })
            .collect::<io::Result<_>>()?,
        to_servers: cfg
            .groups
            .iter()
            .map(|g| {
                let hello = Hello::Server { id: cfg.server.id };
                g.iter().map(|&a| Link::outgoing(a, hello)).collect()
            })
            .collect::<io::Result<_>>()?,
        scratch: Vec::new(),
        shutdown: false,
        history_kept: cfg.server.keep_history,
        last_seen: None,
    };
    g.pump()?;
    g.flush_links();
    while !g.shutdown {
        let wait = g.wait();
        match rx.recv_timeout(wait) {
            Ok(input) => {
                g.handle(input)?;
                for input in rx.try_iter().take(1024) {
                    g.handle(input)?;
                }
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => break,
        }
        let now = g.now_ms();
        if g.replica.poll_timeout() <= now {
            g.replica.handle_timeout(now);
        }
        g.replay()?;
        g.tick_host()?;
        g.hand_over();
        g.pump()?;
        g.flush_links();
    }
    Ok(())
}

impl<S, F> Group<S, F>
where
    S: TxnServer,
    S::Msg: Wire,
    F: Fn() -> io::Result<S>,
{
    /// The replica's clock: milliseconds since this process started.
    fn now_ms(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    /// How long the protocol thread may wait for input: until the replica's or the
    /// host's timers are due, and at most 10 ms.
    fn wait(&self) -> Duration {
        if self.host.as_ref().is_some_and(|h| !h.ready) {
            return Duration::ZERO; // replaying
        }
        // A reply freed the request slot while inputs gathered behind it: they go at the
        // end of the next turn, after whatever input is already waiting (a larger batch),
        // without waiting for more.
        if self.host.as_ref().is_some_and(Host::may_hand_over) {
            return Duration::ZERO;
        }
        let mut wait = Duration::from_millis(10);
        let now = self.now_ms();
        wait = wait.min(Duration::from_millis(
            self.replica.poll_timeout().saturating_sub(now),
        ));
        if let Some(h) = &self.host {
            if h.server.tick_every().is_some() {
                let us = h.next_tick.saturating_sub(now_us());
                wait = wait.min(Duration::from_micros(us));
            }
        }
        wait
    }

    fn handle(&mut self, input: Input) -> io::Result<()> {
        match input {
            Input::Open(conn, hello, encoding, stream) => match hello {
                Hello::Clients { first, count } => {
                    if let Ok(a) = Accepted::new(stream, encoding) {
                        self.clients.insert(first, (count, conn));
                        self.writers.insert(conn, a);
                    }
                }
                Hello::Control => {
                    if let Ok(a) = Accepted::new(stream, encoding) {
                        self.writers.insert(conn, a);
                    }
                }
                Hello::Replica { group, replica } => {
                    if group == self.shard && replica < REPLICAS && replica != self.me {
                        self.replica_conns.insert(conn, replica);
                    } else {
                        let _ = stream.shutdown(std::net::Shutdown::Both);
                    }
                }
                // Another shard's server only sends.
                Hello::Server { .. } => {}
            },
            Input::Frame(conn, encoding, frame) => self.on_frame(conn, encoding, frame),
            Input::Closed(conn) => self.forget_conn(conn),
            Input::Disk(DiskDone::Synced(id)) => {
                let now = self.now_ms();
                self.replica.handle_synced(now, id);
                while self.checkpoints.first().is_some_and(|&(at, _)| at <= id) {
                    let (_, ap) = self.checkpoints.remove(0);
                    self.replica.handle_checkpoint_durable(now, ap);
                }
            }
            Input::Disk(DiskDone::Failed(why)) => {
                return Err(io::Error::other(format!(
                    "the group log's disk failed: {why}"
                )));
            }
        }
        Ok(())
    }

    fn on_frame(&mut self, conn: u64, encoding: Encoding, frame: Frame) {
        match frame {
            Frame::Replica(bytes) => {
                let Some(&from) = self.replica_conns.get(&conn) else {
                    return self.drop_conn(conn);
                };
                match log::decode_msg(&bytes) {
                    Ok(m) => {
                        let now = self.now_ms();
                        self.replica.handle_message(now, Address::Replica(from), m);
                    }
                    Err(_) => self.drop_conn(conn),
                }
            }
            Frame::Msg { bytes, .. } => match S::Msg::decode_as(encoding, &bytes) {
                Ok(msg) if !self.admits(&msg) => {
                    eprintln!("txn-server: dropping a connection: a message with a timestamp, key or value this server's store cannot hold");
                    self.drop_conn(conn)
                }
                Ok(msg) => self.submit(Some(msg)),
                Err(_) => self.drop_conn(conn),
            },
            Frame::DumpRequest => self.dump(conn),
            Frame::Shutdown => self.shutdown = true,
            Frame::Hello(_) | Frame::Dump(_) | Frame::Effects(_) | Frame::DumpEnd { .. } => {
                self.drop_conn(conn)
            }
        }
    }

    /// Whether the store could hold what `msg` carries (any host's server would say the
    /// same: it depends on the message alone).
    fn admits(&self, msg: &S::Msg) -> bool {
        self.host.as_ref().is_none_or(|h| h.server.admits(msg))
    }

    fn forget_conn(&mut self, conn: u64) {
        // A peer that closed only its sending side still gets what this turn answered it
        // (a dump, say): flushed, the writer thread finishes it.
        if let Some(mut a) = self.writers.remove(&conn) {
            a.link.flush();
        }
        self.replica_conns.remove(&conn);
        self.clients.retain(|_, &mut (_, c)| c != conn);
    }

    fn drop_conn(&mut self, conn: u64) {
        if let Some(a) = self.writers.remove(&conn) {
            let _ = a.socket.shutdown(std::net::Shutdown::Both);
        }
        self.forget_conn(conn);
    }

    /// Answers a control connection's dump request: the host's committed state, once no
    /// input it executed is still waiting to commit (else [`UNSETTLED`]: the caller asks
    /// again); a replica that does not host says [`NOT_HOSTING`].
    fn dump(&mut self, conn: u64) {
        let Some(encoding) = self.writers.get(&conn).map(|a| a.encoding) else {
            return;
        };
        let mut bytes = Vec::new();
        let end = |why: &str| Frame::DumpEnd {
            undecided: 0,
            broken: Some(why.to_string()),
        };
        let written = match &self.host {
            Some(h) if h.ready && h.pending.is_empty() && h.turn.inputs.is_empty() => write_dump(
                &h.server,
                self.history_kept,
                &mut bytes,
                encoding,
                &mut self.scratch,
            ),
            Some(_) => write_frame(&mut bytes, encoding, &end(UNSETTLED), &mut self.scratch),
            None => write_frame(&mut bytes, encoding, &end(NOT_HOSTING), &mut self.scratch),
        };
        match (written, self.writers.get_mut(&conn)) {
            (Ok(()), Some(a)) => a.link.send_must_arrive(&bytes),
            _ => self.drop_conn(conn),
        }
    }

    /// Carries out what the replica asked for, then starts, keeps or drops the host and
    /// releases what committed.
    fn pump(&mut self) -> io::Result<()> {
        while let Some(action) = self.replica.poll_action() {
            match action {
                Action::Send {
                    to: Address::Replica(to),
                    message,
                } => self.send_replica(to, &message),
                Action::Send {
                    to: Address::Client(c),
                    message,
                } => self.on_reply(c, message),
                Action::Write(w) => {
                    if let verso_vsr::DiskWrite::Checkpoint(s) = &w {
                        // Durable with the next sync asked for.
                        self.checkpoints.push((self.syncs_asked + 1, s.ap));
                    }
                    self.disk.write(&w);
                }
                Action::Sync { id } => {
                    self.syncs_asked = self.syncs_asked.max(id);
                    self.disk.sync(id);
                }
            }
        }
        // Replied batches are committed: their outputs leave even if the host is about to
        // be dropped.
        self.release();
        self.check_host()?;
        Ok(())
    }

    /// Sends every connection's frames of this turn, one write each. A full queue drops
    /// a turn's frames, as a lossy network would; a client whose queue overflows, or whose
    /// connection failed, loses its connection (it reconnects).
    fn flush_links(&mut self) {
        // The replicas' first: their messages are on the commit path.
        for link in self.to_replicas.iter_mut().flatten() {
            link.flush();
        }
        let failed: Vec<u64> = self
            .writers
            .iter_mut()
            .filter_map(|(&conn, a)| (!a.link.flush()).then_some(conn))
            .collect();
        for conn in failed {
            self.drop_conn(conn);
        }
        for link in self.to_servers.iter_mut().flatten() {
            link.flush();
        }
    }

    fn client_conn(&self, client: u32) -> Option<u64> {
        let (&first, &(count, conn)) = self.clients.range(..=client).next_back()?;
        (client - first < count).then_some(conn)
    }

    fn send_client(&mut self, client: ClientId, msg: &S::Msg) {
        // A client that is gone sends again when it returns.
        let Some(conn) = self.client_conn(client) else {
            return;
        };
        let Some(a) = self.writers.get_mut(&conn) else {
            return;
        };
        // Written whole or not at all: a message too large for a frame fails before it
        // writes, and then the client loses its connection (it reconnects).
        if write_msg(a.link.turn(), a.encoding, client, msg, &mut self.scratch).is_err() {
            self.drop_conn(conn);
        }
    }

    /// To every replica of shard `to`'s group (only its host takes it).
    fn send_server(&mut self, to: ServerId, msg: &S::Msg) {
        let Some(group) = self.to_servers.get_mut(to as usize) else {
            return;
        };
        let mut bytes = Vec::new();
        if write_msg(
            &mut bytes,
            Encoding::Binary,
            self.shard,
            msg,
            &mut self.scratch,
        )
        .is_err()
        {
            return;
        }
        for link in group {
            link.send(&bytes);
        }
    }

    fn send_replica(&mut self, to: u8, msg: &ReplicaMsg) {
        let Some(Some(link)) = self.to_replicas.get_mut(usize::from(to)) else {
            return;
        };
        // A message too large for a frame is lost like any other; the protocol bounds
        // its messages below the limit (`message_bytes_max`).
        if let Ok(bytes) = link::frame_bytes(&Frame::Replica(log::encode_msg(msg))) {
            link.send(&bytes);
        }
    }
}
