//! One client connection's state and command dispatch, free of I/O (quinn-proto style): the
//! network loop feeds parsed requests to [`Session::execute`] and writes back the replies.
//!
//! Every data command is one serializable engine transaction, retried on conflict. MULTI
//! queues commands and EXEC runs them as one transaction. WATCH begins a transaction and
//! reads the watched keys in it; EXEC then runs the queue *in that transaction*, so under
//! precision locking its commit validation fails exactly when a watched key (or anything else
//! the block read) was changed by a commit after the WATCH, and EXEC replies nil. That needs
//! precision locking, the server's protocol (MVTO would serialize the block at the WATCH and
//! let it commit); so the server's database always runs it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

use verso_engine::{Db, Error, Table, Txn};

use crate::keyspace::{self, CmdError, CmdResult};
use crate::resp::{Reply, Version};

/// Longest command name the dispatcher upper-cases (longer names are unknown commands).
const NAME_LEN_MAX: usize = 16;

/// Logical databases (SELECT 0-15), each an engine table.
pub const DATABASES: usize = 16;
/// Open SCAN cursors kept per connection; the oldest is forgotten past this.
const SCAN_CURSORS_MAX: usize = 64;
/// Times a single command is retried after a conflict before the client gets an error.
const RETRIES_MAX: u32 = 64;

/// What every connection shares.
pub struct Shared {
    pub db: Db,
    pub tables: Vec<Table>,
    /// `--requirepass`: connections must AUTH first.
    pub password: Option<String>,
    pub stats: Stats,
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
    pub fn new(db: Db, password: Option<String>) -> Result<Shared, Error> {
        let tables = (0..DATABASES)
            .map(|i| db.table(&format!("db{i}")))
            .collect::<Result<_, _>>()?;
        Ok(Shared {
            db,
            tables,
            password,
            stats: Stats::default(),
            next_client: AtomicU64::new(1),
        })
    }
}

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
    /// A command in the MULTI block was rejected: EXEC must fail.
    queue_failed: bool,
    /// The transaction WATCH began (it read the watched keys).
    watch: Option<Txn<'s>>,
    /// SCAN cursor id -> last key returned.
    cursors: HashMap<u64, Vec<u8>>,
    next_cursor: u64,
    /// QUIT was received: close after this reply.
    pub closing: bool,
    /// Commands run and not yet added to `Stats::commands` (one shared increment per batch,
    /// not per command: [`Session::flush_stats`]).
    commands_pending: u64,
}

fn arity_error(name: &[u8]) -> Reply {
    Reply::err(format!(
        "wrong number of arguments for '{}' command",
        String::from_utf8_lossy(name).to_lowercase()
    ))
}

/// `name` in upper case, in `buf`; a name longer than any command comes back empty, which
/// matches no command (the error messages quote the original).
fn upper<'b>(name: &[u8], buf: &'b mut [u8; NAME_LEN_MAX]) -> &'b [u8] {
    if name.len() > NAME_LEN_MAX {
        return &[];
    }
    let upper = &mut buf[..name.len()];
    upper.copy_from_slice(name);
    upper.make_ascii_uppercase();
    upper
}

fn unknown_command(args: &[Vec<u8>]) -> Reply {
    let mut msg = format!(
        "unknown command '{}', with args beginning with: ",
        String::from_utf8_lossy(&args[0])
    );
    for a in args.iter().skip(1).take(20) {
        msg.push_str(&format!("'{}' ", String::from_utf8_lossy(a)));
    }
    Reply::err(msg)
}

/// The data commands (run inside a transaction), with their arity as Redis states it:
/// positive = exact argument count including the name, negative = at least that many.
fn data_arity(name: &[u8]) -> Option<i32> {
    Some(match name {
        b"GET" | b"GETDEL" | b"INCR" | b"DECR" | b"STRLEN" | b"TYPE" => 2,
        b"SET" => -3,
        b"SETNX" | b"GETSET" | b"INCRBY" | b"DECRBY" | b"APPEND" => 3,
        b"GETRANGE" => 4,
        b"MGET" | b"DEL" | b"UNLINK" | b"EXISTS" => -2,
        b"MSET" | b"MSETNX" => -3,
        b"VRANGE" => -3,
        b"DBSIZE" | b"FLUSHDB" | b"FLUSHALL" => 1,
        b"KEYS" => 2,
        _ => return None,
    })
}

/// The data commands that only read: they run as read-only transactions, which take no
/// predicate log and never abort (serialized at their snapshot).
fn read_only(name: &[u8]) -> bool {
    matches!(
        name,
        b"GET"
            | b"MGET"
            | b"EXISTS"
            | b"STRLEN"
            | b"GETRANGE"
            | b"TYPE"
            | b"DBSIZE"
            | b"KEYS"
            | b"VRANGE"
    )
}

/// The commands MULTI queues: the data commands, and PING and ECHO (answered in EXEC's array
/// as Redis does), with their arities.
fn queued_arity(name: &[u8]) -> Option<i32> {
    match name {
        b"PING" => Some(-1), // more than one argument is an error when it runs, as in Redis
        b"ECHO" => Some(2),
        _ => data_arity(name),
    }
}

fn arity_ok(arity: i32, n: usize) -> bool {
    if arity >= 0 {
        n == arity as usize
    } else {
        n >= (-arity) as usize
    }
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
            queue_failed: false,
            watch: None,
            cursors: HashMap::new(),
            next_cursor: 1,
            closing: false,
            commands_pending: 0,
        }
    }

    fn table(&self) -> Table {
        self.shared.tables[self.db_index]
    }

    /// Runs one request and returns its reply.
    pub fn execute(&mut self, args: Vec<Vec<u8>>) -> Reply {
        let reply = self.dispatch(&args);
        self.flush_stats();
        reply
    }

    /// Runs one request and appends its encoded reply to `out` (nothing for an empty
    /// request). The server's path: the command counter is published by
    /// [`Session::flush_stats`], which the caller runs after each batch of requests.
    pub fn execute_into(&mut self, args: &[Vec<u8>], out: &mut Vec<u8>) {
        if args.is_empty() {
            return;
        }
        self.dispatch(args).encode(self.version, out);
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
        let mut name_buf = [0u8; NAME_LEN_MAX];
        let name = upper(&args[0], &mut name_buf);
        if !self.authenticated && !matches!(name, b"AUTH" | b"HELLO" | b"QUIT") {
            return Reply::Error("NOAUTH Authentication required.".into());
        }
        if self.queue.is_some()
            && !matches!(name, b"EXEC" | b"DISCARD" | b"MULTI" | b"WATCH" | b"QUIT")
        {
            return self.enqueue(name, args);
        }
        match name {
            b"PING" => ping(args),
            b"ECHO" if args.len() == 2 => Reply::Bulk(args[1].clone()),
            b"QUIT" => {
                self.closing = true;
                Reply::ok()
            }
            b"AUTH" => self.auth(args),
            b"HELLO" => self.hello(args),
            b"SELECT" if args.len() == 2 => self.select(&args[1]),
            b"MULTI" if args.len() == 1 => {
                if self.queue.is_some() {
                    return Reply::err("MULTI calls can not be nested");
                }
                self.queue = Some(Vec::new());
                self.queue_failed = false;
                Reply::ok()
            }
            b"EXEC" if args.len() == 1 => self.exec(),
            b"DISCARD" if args.len() == 1 => {
                if self.queue.take().is_none() {
                    return Reply::err("DISCARD without MULTI");
                }
                self.watch = None;
                Reply::ok()
            }
            b"WATCH" if args.len() >= 2 => self.watch(&args[1..]),
            b"UNWATCH" if args.len() == 1 => {
                self.watch = None;
                Reply::ok()
            }
            b"SCAN" if args.len() >= 2 => self.scan(&args[1..]),
            b"CLIENT" if args.len() >= 2 => self.client(args),
            b"COMMAND" => self.command(args),
            b"CONFIG" if args.len() >= 3 => self.config(args),
            b"INFO" => {
                self.flush_stats(); // this request and those before it count
                Reply::Verbatim(crate::info::render(self.shared, &args[1..]))
            }
            _ => match data_arity(name) {
                Some(a) if arity_ok(a, args.len()) => self.run_single(name, args),
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
                        | b"CLIENT"
                        | b"CONFIG"
                ) =>
                {
                    arity_error(&args[0])
                }
                None => unknown_command(args),
            },
        }
    }

    fn enqueue(&mut self, name: &[u8], args: &[Vec<u8>]) -> Reply {
        match queued_arity(name) {
            Some(a) if arity_ok(a, args.len()) => {
                self.queue.as_mut().expect("in MULTI").push(args.to_vec());
                Reply::Simple("QUEUED".into())
            }
            Some(_) => {
                self.queue_failed = true;
                arity_error(&args[0])
            }
            None => {
                self.queue_failed = true;
                unknown_command(args)
            }
        }
    }

    /// One data command as its own transaction, retried on conflict (a read-only command as
    /// a read-only transaction, which cannot conflict).
    fn run_single(&mut self, name: &[u8], args: &[Vec<u8>]) -> Reply {
        let t = self.table();
        let reads_only = read_only(name);
        for attempt in 0..RETRIES_MAX {
            let begun = if reads_only {
                self.shared.db.begin_read_only()
            } else {
                self.shared.db.begin()
            };
            let mut txn = match begun {
                Ok(txn) => txn,
                Err(e) => return engine_error(&e),
            };
            let result = data_command(&mut txn, &t, &self.shared.tables, name, args);
            let outcome = match result {
                Ok(reply) => txn.commit().map(|_| reply),
                Err(CmdError::Reply(r)) => {
                    txn.abort();
                    return r;
                }
                Err(CmdError::Engine(e)) => Err(e),
            };
            match outcome {
                Ok(reply) => return reply,
                Err(e) if e.is_conflict() => {
                    self.shared.stats.retries.fetch_add(1, Ordering::Relaxed);
                    backoff(attempt);
                }
                Err(e) => return engine_error(&e),
            }
        }
        Reply::err("transaction kept conflicting; try again")
    }

    fn exec(&mut self) -> Reply {
        let Some(queue) = self.queue.take() else {
            return Reply::err("EXEC without MULTI");
        };
        if std::mem::take(&mut self.queue_failed) {
            self.watch = None;
            return Reply::Error(
                "EXECABORT Transaction discarded because of previous errors.".into(),
            );
        }
        let t = self.table();
        if let Some(mut txn) = self.watch.take() {
            // One attempt: a conflict means something the block saw (a watched key above
            // all) changed since WATCH.
            let replies = run_queue(&mut txn, &t, &self.shared.tables, &queue);
            return match replies.and_then(|r| txn.commit().map(|_| r)) {
                Ok(r) => Reply::Array(r),
                Err(e) if e.is_conflict() => {
                    self.shared
                        .stats
                        .exec_aborts
                        .fetch_add(1, Ordering::Relaxed);
                    Reply::NilArray
                }
                Err(e) => engine_error(&e),
            };
        }
        for attempt in 0..RETRIES_MAX {
            let mut txn = match self.shared.db.begin() {
                Ok(txn) => txn,
                Err(e) => return engine_error(&e),
            };
            match run_queue(&mut txn, &t, &self.shared.tables, &queue)
                .and_then(|r| txn.commit().map(|_| r))
            {
                Ok(r) => return Reply::Array(r),
                Err(e) if e.is_conflict() => {
                    self.shared.stats.retries.fetch_add(1, Ordering::Relaxed);
                    backoff(attempt);
                }
                Err(e) => return engine_error(&e),
            }
        }
        Reply::err("transaction kept conflicting; try again")
    }

    fn watch(&mut self, keys: &[Vec<u8>]) -> Reply {
        if self.queue.is_some() {
            return Reply::err("WATCH inside MULTI is not allowed");
        }
        if self.watch.is_none() {
            match self.shared.db.begin() {
                Ok(txn) => self.watch = Some(txn),
                Err(e) => return engine_error(&e),
            }
        }
        let t = self.table();
        let txn = self.watch.as_ref().expect("just set");
        for k in keys {
            // Reading logs the key as a predicate: EXEC's commit validates it.
            if let Err(e) = txn.get(&t, k) {
                return engine_error(&e);
            }
        }
        Reply::ok()
    }

    fn auth(&mut self, args: &[Vec<u8>]) -> Reply {
        let given = match args.len() {
            2 => &args[1],
            3 => &args[2], // AUTH username password: only "default" exists
            _ => return arity_error(&args[0]),
        };
        let Some(expected) = &self.shared.password else {
            return Reply::err("AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?");
        };
        if args.len() == 3 && args[1] != b"default" || !constant_time_eq(given, expected.as_bytes())
        {
            return Reply::Error(
                "WRONGPASS invalid username-password pair or user is disabled.".into(),
            );
        }
        self.authenticated = true;
        Reply::ok()
    }

    fn hello(&mut self, args: &[Vec<u8>]) -> Reply {
        let mut i = 1;
        let mut version = self.version;
        if let Some(v) = args.get(1) {
            version = match v.as_slice() {
                b"2" => Version::Resp2,
                b"3" => Version::Resp3,
                _ => {
                    return Reply::Error("NOPROTO unsupported protocol version".into());
                }
            };
            i = 2;
        }
        while i < args.len() {
            match args[i].to_ascii_uppercase().as_slice() {
                b"AUTH" if args.len() >= i + 3 => {
                    let r =
                        self.auth(&[b"AUTH".to_vec(), args[i + 1].clone(), args[i + 2].clone()]);
                    if matches!(r, Reply::Error(_)) {
                        return r;
                    }
                    i += 3;
                }
                b"SETNAME" if args.len() > i + 1 => {
                    self.name = Some(String::from_utf8_lossy(&args[i + 1]).into_owned());
                    i += 2;
                }
                _ => return Reply::err("syntax error in HELLO option"),
            }
        }
        if !self.authenticated {
            return Reply::Error("NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time".into());
        }
        self.version = version;
        let proto = if version == Version::Resp3 { 3 } else { 2 };
        let s = |x: &str| Reply::Bulk(x.as_bytes().to_vec());
        Reply::Map(vec![
            (s("server"), s("verso")),
            (s("version"), s(env!("CARGO_PKG_VERSION"))),
            (s("proto"), Reply::Integer(proto)),
            (s("id"), Reply::Integer(self.id as i64)),
            (s("mode"), s("standalone")),
            (s("role"), s("master")),
            (s("modules"), Reply::Array(Vec::new())),
        ])
    }

    fn select(&mut self, index: &[u8]) -> Reply {
        match keyspace::parse_i64(index) {
            Some(i) if (0..DATABASES as i64).contains(&i) => {
                // Keys watched before stay watched (in their database), as in Redis.
                self.db_index = i as usize;
                Reply::ok()
            }
            Some(_) => Reply::err("DB index is out of range"),
            None => Reply::err("value is not an integer or out of range"),
        }
    }

    /// SCAN cursor [MATCH pattern] [COUNT n] [TYPE t]: cursors are ids of the last key
    /// returned, kept per connection; 0 starts and ends an iteration. Keys present for the
    /// whole iteration are returned exactly once, in key order.
    fn scan(&mut self, args: &[Vec<u8>]) -> Reply {
        let Some(cursor) = keyspace::parse_i64(&args[0]).filter(|&c| c >= 0) else {
            return Reply::err("invalid cursor");
        };
        let (mut pattern, mut count, mut only_strings) = (None, 10usize, true);
        let mut i = 1;
        while i < args.len() {
            let val = args.get(i + 1);
            match (args[i].to_ascii_uppercase().as_slice(), val) {
                (b"MATCH", Some(p)) => pattern = Some(p.clone()),
                (b"COUNT", Some(n)) => match keyspace::parse_i64(n) {
                    Some(n) if n >= 1 => count = (n as usize).min(1 << 20),
                    _ => return Reply::err("syntax error"),
                },
                (b"TYPE", Some(t)) => only_strings = t.eq_ignore_ascii_case(b"string"),
                _ => return Reply::err("syntax error"),
            }
            i += 2;
        }
        let from = if cursor == 0 {
            None
        } else {
            match self.cursors.remove(&(cursor as u64)) {
                Some(k) => Some(k),
                None => return Reply::err("invalid cursor"),
            }
        };
        let t = self.table();
        let txn = match self.shared.db.begin_read_only() {
            Ok(txn) => txn,
            Err(e) => return engine_error(&e),
        };
        let found = keyspace::scan_keys(&txn, &t, from.as_deref(), count, pattern.as_deref());
        drop(txn);
        let (keys, last) = match found {
            Ok(x) => x,
            Err(CmdError::Reply(r)) => return r,
            Err(CmdError::Engine(e)) => return engine_error(&e),
        };
        let next = match last {
            Some(k) => {
                if self.cursors.len() >= SCAN_CURSORS_MAX {
                    let oldest = *self.cursors.keys().min().expect("non-empty");
                    self.cursors.remove(&oldest);
                }
                let id = self.next_cursor;
                self.next_cursor += 1;
                self.cursors.insert(id, k);
                id
            }
            None => 0,
        };
        let keys = if only_strings { keys } else { Vec::new() };
        Reply::Array(vec![
            Reply::Bulk(next.to_string().into_bytes()),
            Reply::Array(keys.into_iter().map(Reply::Bulk).collect()),
        ])
    }

    fn client(&mut self, args: &[Vec<u8>]) -> Reply {
        match (args[1].to_ascii_uppercase().as_slice(), args.len()) {
            (b"SETNAME", 3) => {
                if args[2].iter().any(|&b| b <= b' ' || b > b'~') {
                    return Reply::err(
                        "Client names cannot contain spaces, newlines or special characters.",
                    );
                }
                self.name = Some(String::from_utf8_lossy(&args[2]).into_owned());
                Reply::ok()
            }
            (b"GETNAME", 2) => self
                .name
                .as_ref()
                .map_or(Reply::Nil, |n| Reply::Bulk(n.as_bytes().to_vec())),
            (b"ID", 2) => Reply::Integer(self.id as i64),
            (b"INFO", 2) => Reply::Verbatim(format!(
                "id={} name={} db={} resp={}\n",
                self.id,
                self.name.as_deref().unwrap_or(""),
                self.db_index,
                if self.version == Version::Resp3 { 3 } else { 2 }
            )),
            (b"SETINFO", 4) => Reply::ok(),
            _ => Reply::err("unknown subcommand or wrong number of arguments for 'client' command"),
        }
    }

    fn command(&self, args: &[Vec<u8>]) -> Reply {
        match args.get(1).map(|a| a.to_ascii_uppercase()) {
            Some(sub) if sub == b"COUNT" => Reply::Integer(COMMANDS.len() as i64),
            // DOCS: an empty map is a valid answer; redis-cli only needs the command to exist.
            Some(sub) if sub == b"DOCS" => Reply::Map(Vec::new()),
            None => Reply::Array(
                COMMANDS
                    .iter()
                    .map(|c| Reply::Bulk(c.to_ascii_lowercase().into_bytes()))
                    .collect(),
            ),
            Some(_) => Reply::err("unknown subcommand for 'command'"),
        }
    }

    fn config(&self, args: &[Vec<u8>]) -> Reply {
        if !args[1].eq_ignore_ascii_case(b"GET") {
            return Reply::err("CONFIG subcommands other than GET are not supported");
        }
        let mut pairs = Vec::new();
        for pat in &args[2..] {
            for (k, v) in [
                ("databases", DATABASES.to_string()),
                ("maxmemory", "0".into()),
                ("appendonly", "no".into()),
                ("save", String::new()),
            ] {
                if crate::glob::matches(&pat.to_ascii_lowercase(), k.as_bytes()) {
                    pairs.push((
                        Reply::Bulk(k.as_bytes().to_vec()),
                        Reply::Bulk(v.into_bytes()),
                    ));
                }
            }
        }
        Reply::Map(pairs)
    }
}

impl Drop for Session<'_> {
    fn drop(&mut self) {
        self.flush_stats();
        let before = self.shared.stats.clients.fetch_sub(1, Ordering::Relaxed);
        assert!(before > 0, "more sessions dropped than made");
    }
}

/// Every command the server knows (COMMAND COUNT and the plain COMMAND list).
pub const COMMANDS: &[&str] = &[
    "PING", "ECHO", "HELLO", "AUTH", "SELECT", "QUIT", "GET", "SET", "SETNX", "GETSET", "GETDEL",
    "MGET", "MSET", "MSETNX", "DEL", "UNLINK", "EXISTS", "INCR", "INCRBY", "DECR", "DECRBY",
    "APPEND", "STRLEN", "GETRANGE", "SCAN", "KEYS", "DBSIZE", "FLUSHDB", "FLUSHALL", "TYPE",
    "MULTI", "EXEC", "DISCARD", "WATCH", "UNWATCH", "INFO", "CONFIG", "CLIENT", "COMMAND",
    "VRANGE",
];

/// Runs a queued block; the first engine error ends it (a conflict retries the block), and a
/// command's own error becomes its reply, as in Redis.
fn run_queue(
    txn: &mut Txn<'_>,
    t: &Table,
    tables: &[Table],
    queue: &[Vec<Vec<u8>>],
) -> Result<Vec<Reply>, Error> {
    let mut out = Vec::with_capacity(queue.len());
    for args in queue {
        let mut name_buf = [0u8; NAME_LEN_MAX];
        let name = upper(&args[0], &mut name_buf);
        if matches!(name, b"PING" | b"ECHO") {
            out.push(ping(args)); // ECHO's arity was checked when it was queued
            continue;
        }
        match data_command(txn, t, tables, name, args) {
            Ok(r) => out.push(r),
            Err(CmdError::Reply(r)) => out.push(r),
            Err(CmdError::Engine(e)) if e.is_conflict() => return Err(e),
            Err(CmdError::Engine(e)) => out.push(engine_error(&e)),
        }
    }
    Ok(out)
}

/// One data command inside `txn` (arity already checked).
fn data_command(
    txn: &mut Txn<'_>,
    t: &Table,
    tables: &[Table],
    name: &[u8],
    args: &[Vec<u8>],
) -> CmdResult {
    let a = &args[1..];
    match name {
        b"GET" => keyspace::get(txn, t, &a[0]),
        b"SET" => keyspace::set(txn, t, a),
        b"SETNX" => keyspace::setnx(txn, t, &a[0], &a[1]),
        b"GETSET" => keyspace::getset(txn, t, &a[0], &a[1]),
        b"GETDEL" => keyspace::getdel(txn, t, &a[0]),
        b"MGET" => keyspace::mget(txn, t, a),
        b"MSET" => keyspace::mset(txn, t, a, false),
        b"MSETNX" => keyspace::mset(txn, t, a, true),
        b"DEL" | b"UNLINK" => keyspace::del(txn, t, a),
        b"EXISTS" => keyspace::exists(txn, t, a),
        b"INCR" => keyspace::incr_by(txn, t, &a[0], 1),
        b"DECR" => keyspace::incr_by(txn, t, &a[0], -1),
        b"INCRBY" | b"DECRBY" => {
            let by = keyspace::parse_i64(&a[1]).ok_or_else(|| {
                CmdError::Reply(Reply::err("value is not an integer or out of range"))
            })?;
            let by = if name == b"DECRBY" {
                by.checked_neg()
                    .ok_or_else(|| CmdError::Reply(Reply::err("decrement would overflow")))?
            } else {
                by
            };
            keyspace::incr_by(txn, t, &a[0], by)
        }
        b"APPEND" => keyspace::append(txn, t, &a[0], &a[1]),
        b"STRLEN" => keyspace::strlen(txn, t, &a[0]),
        b"GETRANGE" => keyspace::getrange(txn, t, &a[0], &a[1], &a[2]),
        b"TYPE" => keyspace::type_of(txn, t, &a[0]),
        b"VRANGE" => keyspace::vrange(txn, t, a),
        b"KEYS" => {
            let (keys, _) = keyspace::scan_keys(txn, t, None, usize::MAX, Some(&a[0]))?;
            Ok(Reply::Array(keys.into_iter().map(Reply::Bulk).collect()))
        }
        b"DBSIZE" => Ok(Reply::Integer(txn.range(t, ..)?.count() as i64)),
        b"FLUSHDB" => {
            flush(txn, t)?;
            Ok(Reply::ok())
        }
        b"FLUSHALL" => {
            for table in tables {
                flush(txn, table)?;
            }
            Ok(Reply::ok())
        }
        _ => Err(CmdError::Reply(Reply::err("unknown command"))),
    }
}

/// PING [message] (and ECHO message, whose reply is the same): no transaction.
fn ping(args: &[Vec<u8>]) -> Reply {
    match args.len() {
        1 => Reply::Simple("PONG".into()),
        2 => Reply::Bulk(args[1].clone()),
        _ => arity_error(&args[0]),
    }
}

fn flush(txn: &mut Txn<'_>, t: &Table) -> Result<(), CmdError> {
    let keys: Vec<Vec<u8>> = txn.range(t, ..)?.map(|(k, _)| k.to_vec()).collect();
    for k in keys {
        txn.delete(t, &k)?;
    }
    Ok(())
}

fn engine_error(e: &Error) -> Reply {
    match e {
        Error::ValueTooLarge { .. } => Reply::err("string exceeds maximum allowed size"),
        Error::KeyTooLarge { .. } => Reply::err("key exceeds maximum allowed size"),
        other => Reply::err(other),
    }
}

fn backoff(attempt: u32) {
    for _ in 0..(1u32 << attempt.min(8)) {
        std::hint::spin_loop();
    }
    if attempt > 4 {
        std::thread::yield_now();
    }
}

/// Compares secrets in time independent of where they differ.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let mut diff = a.len() ^ b.len();
    for i in 0..a.len().max(b.len()) {
        let x = a.get(i).copied().unwrap_or(0);
        let y = b.get(i).copied().unwrap_or(0);
        diff |= usize::from(x ^ y);
    }
    diff == 0
}
