//! MULTI/EXEC/DISCARD/WATCH/UNWATCH: queueing (bounded by `SessionLimits`), running a block
//! as one transaction, WATCH's key versions and EXEC's check of them (module docs of
//! `session`), and PING/ECHO, which a block may hold.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering;

use verso_engine::{Error, Txn};

use super::limits::{queue_too_large, queued_bytes, too_many_queued, too_many_watched};
use super::{
    arity_error, backoff, connection, data, engine_error, unknown_command, upper, Session,
};
use super::{Shared, Watched, NAME_LEN_MAX, RETRIES_MAX};
use crate::collections::{watch_stamp, KIND_HASH, KIND_SET, KIND_ZSET};
use crate::keyspace::CmdError;
use crate::resp::{Reply, Version};
use crate::stored::Space;

/// What MULTI does with a command it is sent.
enum Queueing {
    /// Queue it, its arity (Redis's convention: negative means at least) checked now.
    Arity(i32),
    /// Refuse it and fail the block, as Redis does with its `no-multi` commands (once the
    /// arity, checked first as in Redis, is right).
    NotAllowed(i32),
    Unknown,
}

/// As in Redis 7, MULTI queues the connection's own commands too (checked against
/// redis-server 7.0): they run at their place in the block when EXEC runs it, so a SELECT
/// changes the database of the commands after it and of the connection after EXEC.
/// Refused are the commands that would wait while the block's transaction is open (for a
/// checkpoint, for replicas, for a slot move) or hand the connection elsewhere.
fn queueing(name: &[u8]) -> Queueing {
    let arity = match name {
        // PING's extra arguments are an error when it runs, as in Redis.
        b"PING" => -1,
        b"ECHO" | b"SELECT" => 2,
        b"UNWATCH" => 1,
        b"SCAN" => -2,
        b"HSCAN" | b"SSCAN" | b"ZSCAN" => -3,
        b"SAVE" => return Queueing::NotAllowed(1),
        b"WAIT" | b"VERSO.LAZEN" => return Queueing::NotAllowed(3),
        b"CLUSTER" => return Queueing::NotAllowed(-2),
        _ => match data::arity(name).or_else(|| connection::arity(name)) {
            Some(a) => a,
            None => return Queueing::Unknown,
        },
    };
    Queueing::Arity(arity)
}

/// What [`Session::restore`] puts back after an attempt at a block that did not commit.
struct Before {
    db_index: usize,
    /// Only for a block with connection commands in it: data commands change none of this.
    connection: Option<ConnectionBefore>,
}

struct ConnectionBefore {
    version: Version,
    authenticated: bool,
    name: Option<String>,
    backup_reads: bool,
    cursors: HashMap<u64, Vec<u8>>,
    next_cursor: u64,
}

impl<'s> Session<'s> {
    /// MULTI: start queueing.
    pub(super) fn multi(&mut self) -> Reply {
        if self.queue.is_some() {
            return Reply::err("MULTI calls can not be nested");
        }
        self.queue = Some(Vec::new());
        self.queue_bytes = 0;
        self.queue_failed = false;
        Reply::ok()
    }

    /// DISCARD: drop the queue and the watch.
    pub(super) fn discard(&mut self) -> Reply {
        if self.queue.take().is_none() {
            return Reply::err("DISCARD without MULTI");
        }
        self.queue_failed = false;
        self.unwatch();
        Reply::ok()
    }

    /// Forgets every watched key (and the memory they took).
    pub(super) fn unwatch(&mut self) {
        self.watched = Default::default();
    }

    pub(super) fn enqueue(&mut self, name: &[u8], args: &[Vec<u8>]) -> Reply {
        let reply = match queueing(name) {
            Queueing::Arity(a) if data::arity_ok(a, args.len()) => {
                let limits = self.shared.limits;
                let queue = self.queue.as_mut().expect("in MULTI");
                if self.queue_failed {
                    // EXEC will refuse the block: keeping the command would only cost memory.
                    return Reply::Simple("QUEUED".into());
                }
                let bytes = queued_bytes(args);
                if queue.len() >= limits.multi_commands_max {
                    too_many_queued(limits.multi_commands_max)
                } else if bytes > limits.multi_bytes_max.saturating_sub(self.queue_bytes) {
                    queue_too_large(limits.multi_bytes_max)
                } else {
                    queue.push(args.to_vec());
                    self.queue_bytes += bytes;
                    return Reply::Simple("QUEUED".into());
                }
            }
            Queueing::NotAllowed(a) if data::arity_ok(a, args.len()) => {
                Reply::err("Command not allowed inside a transaction")
            }
            Queueing::Arity(_) | Queueing::NotAllowed(_) => arity_error(&args[0]),
            Queueing::Unknown => unknown_command(args),
        };
        self.fail_queue();
        reply
    }

    /// As in Redis, an error while queueing fails the block (EXEC replies EXECABORT); the
    /// queue goes now rather than at EXEC.
    pub(super) fn fail_queue(&mut self) {
        self.queue_failed = true;
        self.queue = Some(Vec::new());
        self.queue_bytes = 0;
    }

    pub(super) fn exec(&mut self) -> Reply {
        let Some(queue) = self.queue.take() else {
            return Reply::err("EXEC without MULTI");
        };
        self.queue_bytes = 0;
        let watched = std::mem::take(&mut self.watched);
        if std::mem::take(&mut self.queue_failed) {
            return Reply::Error(
                "EXECABORT Transaction discarded because of previous errors.".into(),
            );
        }
        if !watched.is_empty() {
            return self.exec_watched(&watched, &queue);
        }
        // A block of reads runs as a read-only transaction (a backup may serve it).
        let reads_only = queue.iter().all(|c| {
            let mut buf = [0u8; NAME_LEN_MAX];
            let name = upper(&c[0], &mut buf);
            data::arity(name).is_none() || data::read_only(name)
        });
        let changes_connection = changes_connection(&queue);
        for attempt in 0..RETRIES_MAX {
            let mut txn = match self.begin(reads_only) {
                Ok(txn) => txn,
                Err(e) => return engine_error(&e),
            };
            // The clock is read once per attempt: the whole block runs at one instant.
            let before = self.before_block(changes_connection);
            let outcome = self
                .run_queue(&mut txn, &queue)
                .and_then(|r| self.commit(txn).map(|_| r));
            self.asking = false; // an ASKING in the block ends with it, as in Redis
            match outcome {
                Ok(r) => {
                    self.notify_blocked(&queue);
                    return Reply::Array(r);
                }
                Err(e) if e.is_conflict() => {
                    self.restore(before);
                    self.shared.stats.retries.fetch_add(1, Ordering::Relaxed);
                    backoff(attempt);
                }
                Err(e) => {
                    self.restore(before);
                    return engine_error(&e);
                }
            }
        }
        Reply::err("transaction kept conflicting; try again")
    }

    /// The session's state that a block may change (its database; with connection
    /// commands in it, the protocol, authentication, name, READONLY and SCAN cursors),
    /// kept before an attempt runs.
    fn before_block(&self, changes_connection: bool) -> Before {
        Before {
            db_index: self.db_index,
            connection: changes_connection.then(|| ConnectionBefore {
                version: self.version,
                authenticated: self.authenticated,
                name: self.name.clone(),
                backup_reads: self.backup_reads,
                cursors: self.cursors.clone(),
                next_cursor: self.next_cursor,
            }),
        }
    }

    /// Puts back what an attempt that did not commit changed: a block that fails, or
    /// that is retried, leaves the connection as it found it, as in Redis, where a block
    /// that did not run ran nothing. A BGSAVE it ran has started, and stays started.
    fn restore(&mut self, before: Before) {
        self.db_index = before.db_index;
        if let Some(c) = before.connection {
            self.version = c.version;
            self.authenticated = c.authenticated;
            self.name = c.name;
            self.backup_reads = c.backup_reads;
            self.cursors = c.cursors;
            self.next_cursor = c.next_cursor;
        }
    }

    /// EXEC after WATCH: one transaction that checks the watched versions first, then runs
    /// the block. One attempt: a conflict at commit may be a watched key written after the
    /// check, so it fails the EXEC like a changed version (no retry could tell them apart
    /// without reading the versions again, which is what the client's retry does).
    fn exec_watched(&mut self, watched: &Watched, queue: &[Vec<Vec<u8>>]) -> Reply {
        let mut txn = match self.begin(false) {
            Ok(txn) => txn,
            Err(e) => return engine_error(&e),
        };
        let shared = self.shared;
        let all = shared.spaces();
        let unchanged = watched.iter().try_fold(true, |same, ((db, key), seen)| {
            let s = all.get(*db).expect("watched in a database that exists");
            Ok::<_, Error>(same && watch_stamp(&txn, s, key)? == *seen)
        });
        let before = self.before_block(changes_connection(queue));
        let outcome = match unchanged {
            Ok(true) => self
                .run_queue(&mut txn, queue)
                .and_then(|r| self.commit(txn).map(|_| Some(r))),
            Ok(false) => {
                // The nil tells that a watched key changed: that change may be in flight.
                txn.abort();
                self.hold_reads();
                Ok(None)
            }
            Err(e) => Err(e),
        };
        self.asking = false; // an ASKING in the block ends with it, as in Redis
        if let Ok(Some(r)) = outcome {
            self.notify_blocked(queue);
            return Reply::Array(r);
        }
        self.restore(before);
        match outcome {
            Ok(_) => self.exec_failed(),
            Err(e) if e.is_conflict() => self.exec_failed(),
            Err(e) => engine_error(&e),
        }
    }

    /// After a committed block: blocked pops may have something now.
    fn notify_blocked(&self, queue: &[Vec<Vec<u8>>]) {
        let wakes = queue.iter().any(|c| {
            let mut buf = [0u8; NAME_LEN_MAX];
            super::blocking::may_wake(upper(&c[0], &mut buf))
        });
        if wakes {
            self.shared.blocking.notify();
        }
    }

    fn exec_failed(&self) -> Reply {
        self.shared
            .stats
            .exec_aborts
            .fetch_add(1, Ordering::Relaxed);
        Reply::NilArray
    }

    /// WATCH key...: notes the version of each key not watched yet (a key watched again
    /// keeps its first version, as in Redis), all read in one read-only transaction that
    /// ends before the reply. Over the limit, or on an engine error, none of the keys is
    /// watched.
    pub(super) fn watch(&mut self, keys: &[Vec<u8>]) -> Reply {
        if self.queue.is_some() {
            return Reply::err("WATCH inside MULTI is not allowed");
        }
        let db = self.db_index;
        let mut seen = HashSet::with_capacity(keys.len());
        let new: Vec<&Vec<u8>> = keys
            .iter()
            .filter(|k| seen.insert(k.as_slice()))
            .filter(|k| !self.watched.contains_key(&(db, k.to_vec())))
            .collect();
        let max = self.shared.limits.watched_keys_max;
        if new.len() > max.saturating_sub(self.watched.len()) {
            return too_many_watched(max);
        }
        if new.is_empty() {
            return Reply::ok();
        }
        let s = self.space();
        let txn = match self.begin(true) {
            Ok(txn) => txn,
            Err(e) => return engine_error(&e),
        };
        let versions: Result<Vec<_>, Error> = new.iter().map(|k| watch_stamp(&txn, s, k)).collect();
        if let Err(e) = self.commit(txn) {
            return engine_error(&e);
        }
        match versions {
            Ok(versions) => {
                for (k, v) in new.into_iter().zip(versions) {
                    self.watched.insert((db, k.clone()), v);
                }
                Reply::ok()
            }
            Err(e) => engine_error(&e),
        }
    }

    /// Runs a queued block in `txn`, in the connection's database (which a SELECT in it
    /// changes); a conflict ends it (the caller retries the block, or fails a watched EXEC),
    /// and any other error becomes that command's reply, as in Redis. A block that does not
    /// commit is undone in the session by [`Session::restore`].
    fn run_queue(
        &mut self,
        txn: &mut Txn<'s>,
        queue: &[Vec<Vec<u8>>],
    ) -> Result<Vec<Reply>, Error> {
        let shared: &'s Shared = self.shared;
        let all = shared.spaces();
        let mut out = Vec::with_capacity(queue.len());
        for args in queue {
            let mut name_buf = [0u8; NAME_LEN_MAX];
            let name = upper(&args[0], &mut name_buf);
            if data::arity(name).is_none() {
                let space = all
                    .get(self.db_index)
                    .expect("SELECT keeps the index in range");
                match self.in_block(txn, space, name, args) {
                    Ok(r) | Err(CmdError::Reply(r)) => out.push(r),
                    Err(CmdError::Engine(e)) if e.is_conflict() => return Err(e),
                    Err(CmdError::Engine(e)) => out.push(engine_error(&e)),
                }
                continue;
            }
            // A command that fails leaves nothing behind (its writes so far are undone), as a
            // failed command has no effect in Redis; the block goes on.
            let sp = txn.savepoint();
            match data::data_command(txn, all, self.db_index, name, args) {
                Ok(r) => {
                    txn.release(sp);
                    out.push(r);
                }
                Err(CmdError::Engine(e)) if e.is_conflict() => {
                    txn.release(sp);
                    return Err(e);
                }
                Err(CmdError::Reply(r)) => {
                    txn.rollback_to(sp);
                    out.push(r);
                }
                Err(CmdError::Engine(e)) => {
                    txn.rollback_to(sp);
                    out.push(engine_error(&e));
                }
            }
        }
        Ok(out)
    }

    /// A queued command other than a data command, run at its place in the block (`queueing`
    /// lists them; their arity was checked when they were queued). None writes: SCAN reads
    /// in the block's transaction, so it sees the block's own writes.
    fn in_block(
        &mut self,
        txn: &Txn<'s>,
        space: Space<'s>,
        name: &[u8],
        args: &[Vec<u8>],
    ) -> Result<Reply, CmdError> {
        Ok(match name {
            b"PING" | b"ECHO" => ping(args),
            b"SELECT" => {
                self.db_index = self.database(&args[1]).map_err(CmdError::Reply)?;
                Reply::ok()
            }
            // The watched keys were checked before the block began, and EXEC forgets them.
            b"UNWATCH" => Reply::ok(),
            b"SCAN" => return self.scan_page(txn, space, &args[1..]),
            b"HSCAN" => return self.members_page(txn, space, &args[1..], KIND_HASH),
            b"SSCAN" => return self.members_page(txn, space, &args[1..], KIND_SET),
            b"ZSCAN" => return self.members_page(txn, space, &args[1..], KIND_ZSET),
            _ => self.connection_command(name, args),
        })
    }
}

/// Whether a block holds a command other than a data command (one that may change the
/// connection's state: `Before`).
fn changes_connection(queue: &[Vec<Vec<u8>>]) -> bool {
    queue.iter().any(|c| {
        let mut buf = [0u8; NAME_LEN_MAX];
        data::arity(upper(&c[0], &mut buf)).is_none()
    })
}

/// PING [message] (and ECHO message, whose reply is the same): no transaction.
pub(super) fn ping(args: &[Vec<u8>]) -> Reply {
    match args.len() {
        1 => Reply::Simple("PONG".into()),
        2 => Reply::Bulk(args[1].clone()),
        _ => arity_error(&args[0]),
    }
}
