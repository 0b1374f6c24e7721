//! One client connection's state and command dispatch, free of I/O (quinn-proto style): the
//! network loop feeds parsed requests to [`Session::execute_into`], which appends the encoded
//! replies to the connection's output ([`Session::execute`] returns a [`Reply`] instead).
//!
//! Every data command is one serializable engine transaction, retried on conflict. MULTI
//! queues commands and EXEC runs them as one transaction.
//!
//! WATCH holds nothing open: it reads the version of each watched key in one short
//! read-only transaction and keeps (database, key, version). EXEC begins one serializable
//! transaction that first reads the versions again: if any differs, it is dropped and EXEC
//! replies nil. Otherwise the block runs in it and commits; precision locking's commit
//! validation fails if a watched key (or anything the block read) was written after EXEC's
//! transaction began, and that too is a nil reply (one attempt). So, exactly as in Redis, only
//! the watched keys matter, a write by this same connection counts, and keys stay watched in
//! the database they were watched in. A write is a commit that writes the key: DEL or GETDEL
//! of an absent key, SET NX of a present one and the like write nothing and do not disturb a
//! watch, while a SET of the same value does. An absent watched key may rarely be seen as
//! changed with no write to it (see [`verso_engine::Txn::version_of`]); never the reverse.
//! UNWATCH, DISCARD, EXEC and the end of the connection forget the watch.
//!
//! No state a client leaves between commands holds a transaction, a slot or the GC watermark
//! (WATCH keeps versions, SCAN keeps a key); what it does keep is bounded by
//! [`SessionLimits`].
//!
//! One job per file: this one holds the connection's state and the dispatcher (the one
//! `match` over command names); `data` runs the data commands as transactions, `multi` is
//! MULTI/EXEC/DISCARD/WATCH, `connection` the connection and server commands (AUTH, HELLO,
//! SELECT, CLIENT, CONFIG), `command` COMMAND and its subcommands (from `crate::commands`),
//! `cluster` CLUSTER and ASKING (`crate::shards`), `scan` SCAN's cursors, `replica` what a
//! replicated server adds (the relay to the primary, WAIT, READONLY), and `limits` the
//! bounds on what a connection keeps.
//!
//! Durability: commits never wait for the disk here. Each leaves its durability ticket in
//! the session ([`Session::take_ticket`]); the network loop holds the reply (and every later
//! one on the connection) until the ticket is durable, serving other clients meanwhile.
//! [`Session::execute`] (tests, simple callers) waits itself.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

use std::sync::Arc;
use verso_engine::{Db, DurabilityTicket, Error, Table, Txn};
use verso_replication::{Replication, TicketState};

use crate::resp::{Reply, Version};
use crate::shards::ShardMap;

mod blocking;
mod cluster;
mod command;
mod connection;
mod data;
mod limits;
mod multi;
mod replica;

pub(crate) use replica::RELAY_LIB_NAME;
use replica::{not_primary_any_more, NOT_PRIMARY};
mod scan;

pub use blocking::{parse_timeout, BlockingHub};
pub use connection::constant_time_eq;
pub use limits::{
    SessionLimits, MULTI_BYTES_MAX_DEFAULT, MULTI_COMMANDS_MAX_DEFAULT, WATCHED_KEYS_MAX_DEFAULT,
};

/// Longest command name the dispatcher upper-cases (longer names are unknown commands).
const NAME_LEN_MAX: usize = 16;

/// Logical databases (SELECT 0-15), each an engine table.
pub const DATABASES: usize = 16;
/// Times a command (or an unwatched MULTI block) is retried after a conflict before the
/// client gets an error.
const RETRIES_MAX: u32 = 64;

/// What every connection shares.
pub struct Shared {
    pub db: Arc<Db>,
    /// Set when this server is a replica of a Lazy VSR group (`--cluster`): commits are
    /// refused unless it is the primary, and replies wait for VSR (module docs).
    pub replication: Option<Arc<Replication>>,
    /// Each logical database's table of keys (values framed as [`crate::stored`] says).
    pub tables: Vec<Table>,
    /// Each logical database's deadline queue, for the active expirer ([`crate::expiry`]).
    pub deadline_tables: Vec<Table>,
    /// The tables all databases share for hashes, sets and the other collections.
    pub collections: crate::stored::CollectionTables,
    /// Where commands read the time for expiry.
    pub clock: crate::expiry::Clock,
    /// Wakes connections blocked in BLPOP and the like when a commit may have pushed.
    pub blocking: BlockingHub,
    /// `--requirepass`: connections must AUTH first.
    pub password: Option<String>,
    pub stats: Stats,
    /// Checkpoints: automatic, `BGSAVE`, `SAVE`, and their status.
    pub persistence: crate::persistence::Persistence,
    /// What one connection may keep between commands.
    pub limits: SessionLimits,
    /// Set in a sharded cluster (`--shards`): requests for other groups' slots are
    /// redirected ([`crate::shards`]).
    pub shards: Option<crate::shards::ShardMap>,
    /// Set with `shards`: the slot moves this node's group takes part in ([`crate::moves`]).
    pub moves: Option<Arc<crate::moves::Moves>>,
    next_client: AtomicU64,
}

/// Server-wide counters (INFO stats, the metrics endpoint).
#[derive(Default)]
pub struct Stats {
    pub commands: AtomicU64,
    pub connections: AtomicU64,
    pub retries: AtomicU64,
    pub exec_aborts: AtomicU64,
    /// Clients connected now (sessions alive).
    pub clients: AtomicU64,
    /// Resident set size in bytes, as the network side last measured it (0: not measured).
    pub used_memory: AtomicU64,
}

impl Shared {
    /// A shared state over `db` (which must run precision locking: see the module docs).
    pub fn new(db: impl Into<Arc<Db>>, password: Option<String>) -> Result<Shared, Error> {
        Self::with_policy(
            db,
            password,
            crate::persistence::CheckpointPolicy::default(),
        )
    }

    /// As [`Shared::new`], with the checkpoint policy of the server's settings.
    pub fn with_policy(
        db: impl Into<Arc<Db>>,
        password: Option<String>,
        policy: crate::persistence::CheckpointPolicy,
    ) -> Result<Shared, Error> {
        let db = db.into();
        let existing = db.table_names();
        let tables: Vec<Table> = (0..DATABASES)
            .map(|i| db.table(&format!("db{i}")))
            .collect::<Result<_, _>>()?;
        // Verso before expiry stored bare values in `db{i}` and had no deadline tables:
        // such data would be read as framed values, so it is refused, not misread. (A
        // replica's tables are created as its log replays, so a table no write reached
        // is missing there: the check is for a server's own data directory.)
        let old_format = existing.iter().any(|n| n == "db0")
            && !existing.iter().any(|n| n == "db0.deadlines")
            && !db.is_replicated();
        if old_format {
            for t in &tables {
                if db.table_index_len(t)? > 0 {
                    return Err(Error::Unsupported {
                        what: "this data directory was written by a Verso from before expiry (values without a type header); serve it with that version, or start from an empty directory",
                    });
                }
            }
        }
        let deadline_tables = (0..DATABASES)
            .map(|i| db.table(&format!("db{i}.deadlines")))
            .collect::<Result<_, _>>()?;
        let collections = crate::stored::CollectionTables {
            elements: db.table("elements")?,
            registry: db.table("collections")?,
            graveyard: db.table("collections.graveyard")?,
        };
        Ok(Shared {
            db,
            replication: None,
            tables,
            deadline_tables,
            collections,
            clock: crate::expiry::Clock::System,
            blocking: BlockingHub::default(),
            password,
            stats: Stats::default(),
            persistence: crate::persistence::Persistence::new(policy),
            limits: SessionLimits::default(),
            shards: None,
            moves: None,
            next_client: AtomicU64::new(1),
        })
    }

    /// The same, serving one group's slots of a sharded cluster.
    pub fn with_shards(self, shards: Option<crate::shards::ShardMap>) -> Shared {
        let moves = shards
            .as_ref()
            .map(|_| Arc::new(crate::moves::Moves::new(self.replication.clone())));
        Shared {
            shards,
            moves,
            ..self
        }
    }

    /// The same, as a replica of a VSR group.
    pub fn with_replication(self, replication: Arc<Replication>) -> Shared {
        // The moves' view must know the replica it decides for.
        let moves = self
            .moves
            .as_ref()
            .map(|_| Arc::new(crate::moves::Moves::new(Some(replication.clone()))));
        Shared {
            replication: Some(replication),
            moves,
            ..self
        }
    }

    /// The same, reading the time from `clock` (tests step a manual one).
    pub fn with_clock(self, clock: crate::expiry::Clock) -> Shared {
        Shared { clock, ..self }
    }

    /// Every logical database at the clock's current reading.
    pub fn spaces(&self) -> crate::stored::Spaces<'_> {
        crate::stored::Spaces {
            data: &self.tables,
            deadlines: &self.deadline_tables,
            collections: &self.collections,
            now_ms: self.clock.now_ms(),
        }
    }

    /// The same, with per-connection `limits` (the server's settings) instead of the defaults.
    pub fn with_limits(self, limits: SessionLimits) -> Shared {
        Shared { limits, ..self }
    }
}

/// The watched keys, by (database index, key), with the version WATCH saw of each.
type Watched = HashMap<(usize, Vec<u8>), crate::collections::WatchStamp>;

/// One connection.
pub struct Session<'s> {
    shared: &'s Shared,
    pub id: u64,
    pub version: Version,
    db_index: usize,
    authenticated: bool,
    pub name: Option<String>,
    /// Commands queued by MULTI; `Some` while in MULTI.
    queue: Option<Vec<Vec<Vec<u8>>>>,
    /// What the queued commands are charged against `SessionLimits::multi_bytes_max`.
    queue_bytes: usize,
    /// A command in the MULTI block was rejected: EXEC must fail.
    queue_failed: bool,
    watched: Watched,
    /// SCAN cursor id -> last key returned.
    cursors: HashMap<u64, Vec<u8>>,
    next_cursor: u64,
    /// QUIT was received: close after this reply.
    pub closing: bool,
    /// Commands run and not yet added to `Stats::commands` (one shared increment per batch,
    /// not per command: [`Session::flush_stats`]).
    commands_pending: u64,
    /// What the replies since the last [`Session::take_ticket`] wait for.
    ticket: Option<Hold>,
    /// Replicated: this command ran an engine transaction (as the primary), and whether
    /// it committed writes.
    touched: bool,
    /// Replicated: the generation before this command's first transaction began (what
    /// its ticket is valid in).
    began: u64,
    wrote: bool,
    /// The database acknowledges commits only once they are on disk.
    sync: bool,
    /// Replicated: the client sent READONLY, so a backup serves its reads (possibly stale).
    backup_reads: bool,
    /// The client sent ASKING: its next command may be served for a slot this group is
    /// receiving (Redis Cluster's one-shot flag).
    asking: bool,
    /// This connection comes from another replica's relay (`crate::forward`): it is never
    /// relayed on.
    relayed: bool,
    /// In a replicated sharded group: this request was routed while this replica was a
    /// backup, so no moves' view decided it; if the replica leads by the time it begins,
    /// it is refused (it may name a slot the new primary's mover has not resumed yet).
    routed_as_backup: bool,
    /// Replicated: the ticket of this connection's last write (what `WAIT` waits for).
    last_write: Option<verso_replication::Ticket>,
    /// A `WAIT` not answered yet: the connection runs nothing else until it is (as Redis
    /// blocks the client).
    blocked: Option<Blocked>,
}

/// What a blocked connection waits for.
#[derive(Clone, Debug)]
enum Blocked {
    Wait(WaitFor),
    Pop(blocking::BlockedPop),
}

/// A blocked `WAIT`: `replicas` other replicas must hold `ticket` on disk, until `deadline`.
#[derive(Clone, Copy, Debug)]
struct WaitFor {
    ticket: verso_replication::Ticket,
    replicas: usize,
    deadline: Option<std::time::Instant>,
}

pub(super) fn arity_error(name: &[u8]) -> Reply {
    Reply::err(format!(
        "wrong number of arguments for '{}' command",
        String::from_utf8_lossy(name).to_lowercase()
    ))
}

/// `name` in upper case, in `buf`; a name longer than any command comes back empty, which
/// matches no command (the error messages quote the original).
pub(super) fn upper<'b>(name: &[u8], buf: &'b mut [u8; NAME_LEN_MAX]) -> &'b [u8] {
    if name.len() > NAME_LEN_MAX {
        return &[];
    }
    let upper = &mut buf[..name.len()];
    upper.copy_from_slice(name);
    upper.make_ascii_uppercase();
    upper
}

/// Scripting does not exist yet: FUNCTION FLUSH and SCRIPT FLUSH (test harnesses send them
/// before every group of tests) succeed, since there is nothing to flush; every other
/// scripting command gets an error that says so.
fn scripting(name: &[u8], args: &[Vec<u8>]) -> Reply {
    let sub = args.get(1).map(|a| a.to_ascii_uppercase());
    let flush = matches!(name, b"FUNCTION" | b"SCRIPT") && sub.as_deref() == Some(b"FLUSH");
    let mode_ok = match args.get(2) {
        None => args.len() == 2,
        Some(m) => {
            args.len() == 3 && matches!(m.to_ascii_uppercase().as_slice(), b"ASYNC" | b"SYNC")
        }
    };
    if flush && mode_ok {
        return Reply::ok();
    }
    if flush {
        return Reply::err("syntax error");
    }
    Reply::err(
        "scripting (EVAL, FUNCTION, FCALL) is not supported by Verso yet; FUNCTION FLUSH and SCRIPT FLUSH are accepted (there is nothing to flush)",
    )
}

pub(super) fn unknown_command(args: &[Vec<u8>]) -> Reply {
    let mut msg = format!(
        "unknown command '{}', with args beginning with: ",
        String::from_utf8_lossy(&args[0])
    );
    for a in args.iter().skip(1).take(20) {
        msg.push_str(&format!("'{}' ", String::from_utf8_lossy(a)));
    }
    Reply::err(msg)
}

impl<'s> Session<'s> {
    pub fn new(shared: &'s Shared) -> Self {
        shared.stats.connections.fetch_add(1, Ordering::Relaxed);
        shared.stats.clients.fetch_add(1, Ordering::Relaxed);
        Session {
            shared,
            id: shared.next_client.fetch_add(1, Ordering::Relaxed),
            version: Version::Resp2,
            db_index: 0,
            authenticated: shared.password.is_none(),
            name: None,
            queue: None,
            queue_bytes: 0,
            queue_failed: false,
            watched: HashMap::new(),
            cursors: HashMap::new(),
            next_cursor: 1,
            closing: false,
            commands_pending: 0,
            ticket: None,
            touched: false,
            began: 0,
            wrote: false,
            sync: shared.db.durability() == verso_engine::Durability::Sync,
            backup_reads: false,
            asking: false,
            relayed: false,
            routed_as_backup: false,
            last_write: None,
            blocked: None,
        }
    }

    /// The selected database at the clock's current reading.
    fn space(&self) -> crate::stored::Space<'s> {
        let shared: &'s Shared = self.shared;
        shared
            .spaces()
            .get(self.db_index)
            .expect("SELECT keeps the index in range")
    }

    /// Runs one request and returns its reply, once its commit (if any) is durable (and,
    /// replicated, committed by VSR).
    pub fn execute(&mut self, args: Vec<Vec<u8>>) -> Reply {
        let mut reply = self.dispatch(&args);
        while self.blocked.is_some() {
            std::thread::sleep(std::time::Duration::from_millis(1));
            if let Some(r) = self.poll_wait(std::time::Instant::now()) {
                reply = r;
            }
        }
        self.settle_replication();
        self.flush_stats();
        match self.take_ticket() {
            None => {}
            Some(Hold::Durable(ticket)) => {
                if let Err(e) = self.shared.db.wait_durable(ticket) {
                    return engine_error(&e);
                }
            }
            Some(Hold::Replicated(ticket)) => {
                let r = self
                    .shared
                    .replication
                    .as_ref()
                    .expect("a replicated ticket");
                loop {
                    match r.ticket_state(ticket) {
                        TicketState::Ready => break,
                        TicketState::Failed => return not_primary_any_more(),
                        TicketState::Waiting => {
                            std::thread::sleep(std::time::Duration::from_micros(100))
                        }
                    }
                }
            }
        }
        reply
    }

    /// What the replies since the last call wait for, if anything (module docs).
    pub fn take_ticket(&mut self) -> Option<Hold> {
        self.ticket.take()
    }

    fn hold(&mut self, h: Hold) {
        self.ticket = Some(match (self.ticket.take(), h) {
            (None, h) => h,
            (Some(Hold::Durable(a)), Hold::Durable(b)) => Hold::Durable(a.max(b)),
            (Some(Hold::Replicated(a)), Hold::Replicated(b)) => Hold::Replicated(a.max(b)),
            // A server is either replicated or logs by itself, never both.
            (Some(_), h) => h,
        });
    }

    /// Begins the engine transaction of a data command. Replicated, the primary runs them;
    /// a backup refuses them, pointing at the primary, except the reads of a client that
    /// sent READONLY: those see what the log made durable (`Db::set_read_horizon`), possibly
    /// stale, and wait for no round.
    fn begin(&mut self, read_only: bool) -> Result<Txn<'s>, Error> {
        if let Some(r) = &self.shared.replication {
            if !self.touched {
                // Before the check: a generation that ends after it fails the ticket.
                self.began = r.generation();
            }
            if !r.is_primary() {
                if read_only && self.backup_reads {
                    return self.shared.db.begin_read_only();
                }
                return Err(Error::NotPrimary);
            }
            if self.routed_as_backup {
                return Err(Error::NotPrimary); // promoted since: `point_at_primary` says so
            }
            self.touched = true;
        }
        if read_only {
            self.shared.db.begin_read_only()
        } else {
            self.shared.db.begin()
        }
    }

    /// After each command, replicated: its reply waits for its commit, or (if it only
    /// read) for a round to a majority that proves this replica still led after the read.
    fn settle_replication(&mut self) {
        if !std::mem::take(&mut self.touched) {
            return;
        }
        let r = self
            .shared
            .replication
            .as_ref()
            .expect("touched only when replicated");
        let ticket = if std::mem::take(&mut self.wrote) {
            let t = r.write_ticket(self.began);
            self.last_write = Some(t);
            t
        } else {
            r.read_ticket(self.began)
        };
        self.hold(Hold::Replicated(ticket));
    }

    /// Under `sync`, holds the reply until every write visible now is durable: for an
    /// answer built from reads whose transaction did not commit (an error reply, an EXEC
    /// that a watched key failed). Call it after the reads.
    fn hold_reads(&mut self) {
        if self.sync {
            let ticket = self.shared.db.read_ticket();
            if ticket != DurabilityTicket::DURABLE {
                self.hold(Hold::Durable(ticket));
            }
        }
    }

    /// Commits `txn`, noting its ticket instead of waiting for the disk.
    fn commit(&mut self, txn: Txn<'_>) -> Result<(), Error> {
        let wrote = txn.has_writes();
        let (_, ticket) = txn.commit_with_ticket()?;
        self.wrote |= wrote;
        // Only `sync` acknowledges on the disk; `lazy` replies at once.
        if self.sync && ticket != DurabilityTicket::DURABLE {
            self.hold(Hold::Durable(ticket));
        }
        Ok(())
    }

    /// Runs one request and appends its encoded reply to `out` (nothing for an empty
    /// request). The server's path: the command counter is published by
    /// [`Session::flush_stats`], which the caller runs after each batch of requests.
    pub fn execute_into(&mut self, args: &[Vec<u8>], out: &mut Vec<u8>) {
        if args.is_empty() {
            return;
        }
        let reply = self.dispatch(args);
        self.settle_replication();
        if self.blocked.is_some() {
            return; // `WAIT`: the reply comes from `poll_wait`
        }
        let reply = self.point_at_primary(reply);
        reply.encode(self.version, out);
    }

    /// Whether a `WAIT` blocks this connection: run nothing else for it until
    /// [`Session::poll_wait`] answers.
    pub fn is_blocked(&self) -> bool {
        self.blocked.is_some()
    }

    /// Adds the commands run since the last call to the server-wide count.
    pub fn flush_stats(&mut self) {
        if self.commands_pending > 0 {
            let n = std::mem::take(&mut self.commands_pending);
            self.shared.stats.commands.fetch_add(n, Ordering::Relaxed);
        }
        assert!(self.commands_pending == 0);
    }

    fn dispatch(&mut self, args: &[Vec<u8>]) -> Reply {
        if args.is_empty() {
            return Reply::Array(Vec::new()); // an empty request gets no reply in Redis
        }
        self.commands_pending += 1;
        let view;
        let mut name_buf = [0u8; NAME_LEN_MAX];
        let name = upper(&args[0], &mut name_buf);
        if !self.authenticated && !matches!(name, b"AUTH" | b"HELLO" | b"QUIT") {
            return Reply::Error("NOAUTH Authentication required.".into());
        }
        if let Some(shards) = &self.shared.shards {
            // One database in a cluster, as in Redis Cluster (SELECT refuses the others).
            let other_db = match name {
                b"MOVE" => true,
                b"COPY" => args
                    .windows(2)
                    .skip(3)
                    .any(|w| w[0].eq_ignore_ascii_case(b"DB") && w[1] != b"0"),
                _ => false,
            };
            if other_db {
                if self.queue.is_some() {
                    self.fail_queue();
                }
                return Reply::err(format!(
                    "{} to another database is not allowed in cluster mode",
                    if name == b"MOVE" { "MOVE" } else { "Copying" }
                ));
            }
            let asking = std::mem::take(&mut self.asking);
            let shared: &'s Shared = self.shared;
            self.routed_as_backup = shared.replication.as_ref().is_some_and(|r| !r.is_primary());
            // While this group moves slots, the view decides them; held until this request
            // has committed, so a freeze waits for it (`crate::moves`).
            // Only requests that touch keys take it: CLUSTER MOVESLOTS waits for the mover,
            // which may be waiting for the write lock.
            let touches_keys = ShardMap::names_keys(args)
                || matches!(name, b"EXEC" | b"FLUSHALL" | b"FLUSHDB" | b"SWAPDB");
            view = if touches_keys {
                shared.moves.as_ref().and_then(|m| m.enter())
            } else {
                None
            };
            let route = match &view {
                Some(v) => shards.route_with(args, |slot| v.answer(slot, asking)),
                None => shards.route(args),
            };
            if let Some(redirect) = ShardMap::redirect_reply(route) {
                // As in Redis Cluster, a redirect while queueing fails the block.
                if self.queue.is_some() && !matches!(name, b"EXEC" | b"DISCARD" | b"MULTI") {
                    self.fail_queue();
                }
                return redirect;
            }
            if let Some(v) = &view {
                if let Some(refused) = self.moving_slots_check(name, args, v, asking) {
                    return refused;
                }
            }
        }
        if self.queue.is_some()
            && !matches!(name, b"EXEC" | b"DISCARD" | b"MULTI" | b"WATCH" | b"QUIT")
        {
            return self.enqueue(name, args);
        }
        match name {
            b"PING" => multi::ping(args),
            b"ECHO" if args.len() == 2 => Reply::Bulk(args[1].clone()),
            b"QUIT" => {
                self.closing = true;
                Reply::ok()
            }
            b"SELECT" if args.len() == 2 => self.select(&args[1]),
            b"MULTI" if args.len() == 1 => self.multi(),
            b"EXEC" if args.len() == 1 => self.exec(),
            b"DISCARD" if args.len() == 1 => self.discard(),
            b"WATCH" if args.len() >= 2 => self.watch(&args[1..]),
            b"UNWATCH" if args.len() == 1 => {
                self.unwatch();
                Reply::ok()
            }
            b"SCAN" if args.len() >= 2 => self.scan(&args[1..]),
            _ if blocking::timeout_reply(name).is_some()
                && data::arity(name).is_some_and(|a| data::arity_ok(a, args.len())) =>
            {
                self.run_blocking(name, args)
            }
            b"HSCAN" if args.len() >= 3 => {
                self.scan_members(&args[1..], crate::collections::KIND_HASH)
            }
            b"SSCAN" if args.len() >= 3 => {
                self.scan_members(&args[1..], crate::collections::KIND_SET)
            }
            b"ZSCAN" if args.len() >= 3 => {
                self.scan_members(&args[1..], crate::collections::KIND_ZSET)
            }
            b"WAIT" if args.len() == 3 => self.wait(args),
            b"CLUSTER" if args.len() >= 2 => self.cluster(args),
            b"VERSO.LAZEN" if args.len() == 3 => self.lazen_message(args),
            b"SAVE" if args.len() == 1 => self.save(),
            // Data commands first: the common request takes one lookup, as before.
            _ => match data::arity(name) {
                Some(a) if data::arity_ok(a, args.len()) => self.run_single(name, args),
                Some(_) => arity_error(&args[0]),
                None => match connection::arity(name) {
                    Some(a) if data::arity_ok(a, args.len()) => self.connection_command(name, args),
                    Some(_) => arity_error(&args[0]),
                    None if matches!(
                        name,
                        b"ECHO"
                            | b"SELECT"
                            | b"MULTI"
                            | b"EXEC"
                            | b"DISCARD"
                            | b"WATCH"
                            | b"UNWATCH"
                            | b"SCAN"
                            | b"HSCAN"
                            | b"SSCAN"
                            | b"ZSCAN"
                            | b"WAIT"
                            | b"SAVE"
                            | b"CLUSTER"
                    ) =>
                    {
                        arity_error(&args[0])
                    }
                    None => unknown_command(args),
                },
            },
        }
    }
}

impl Drop for Session<'_> {
    fn drop(&mut self) {
        self.flush_stats();
        let before = self.shared.stats.clients.fetch_sub(1, Ordering::Relaxed);
        assert!(before > 0, "more sessions dropped than made");
    }
}

/// A data command's arity as the dispatcher checks it (`None`: not a data command), for
/// the test that holds it to the command table's.
#[cfg(test)]
pub(crate) fn data_arity(name: &[u8]) -> Option<i32> {
    data::arity(name)
}

/// What a reply waits for before it goes out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hold {
    /// The redo log made the commit durable.
    Durable(DurabilityTicket),
    /// VSR committed the slots (replicated servers).
    Replicated(verso_replication::Ticket),
}

pub(super) fn engine_error(e: &Error) -> Reply {
    match e {
        Error::NotPrimary => Reply::Error(format!(
            "{NOT_PRIMARY} (verso: this replica is a backup; reads and writes go to the primary)"
        )),
        Error::ValueTooLarge { .. } => Reply::err("string exceeds maximum allowed size"),
        Error::KeyTooLarge { .. } => Reply::err("key exceeds maximum allowed size"),
        // Redis's error for "persistence is broken, writes are refused".
        Error::Durability { reason } => Reply::Error(format!(
            "MISCONF the redo log failed, so writes are refused until the server restarts: {reason}"
        )),
        other => Reply::err(other),
    }
}

pub(super) fn backoff(attempt: u32) {
    for _ in 0..(1u32 << attempt.min(8)) {
        std::hint::spin_loop();
    }
    if attempt > 12 {
        // The holder of the record may be descheduled (more busy threads than cores, as on a
        // replica): spinning would spend the retries within its time slice. Sleep, growing
        // to 1 ms, so the retries span about 50 ms.
        std::thread::sleep(std::time::Duration::from_micros(8 << (attempt - 12).min(7)));
    } else if attempt > 4 {
        std::thread::yield_now();
    }
}
