//! MULTI/EXEC/DISCARD/WATCH: queueing, running a block as one transaction (in WATCH's
//! transaction when there is one, so its commit validation sees changes to watched keys), and
//! PING/ECHO, which a block may hold.

use std::sync::atomic::Ordering;

use verso_engine::{Error, Table, Txn};

use super::{arity_error, backoff, data, engine_error, unknown_command, upper, Session};
use super::{NAME_LEN_MAX, RETRIES_MAX};
use crate::keyspace::CmdError;
use crate::resp::Reply;

/// The commands MULTI queues: the data commands, and PING and ECHO (answered in EXEC's array
/// as Redis does), with their arities.
fn queued_arity(name: &[u8]) -> Option<i32> {
    match name {
        b"PING" => Some(-1), // more than one argument is an error when it runs, as in Redis
        b"ECHO" => Some(2),
        _ => data::arity(name),
    }
}

impl<'s> Session<'s> {
    /// MULTI: start queueing.
    pub(super) fn multi(&mut self) -> Reply {
        if self.queue.is_some() {
            return Reply::err("MULTI calls can not be nested");
        }
        self.queue = Some(Vec::new());
        self.queue_failed = false;
        Reply::ok()
    }

    /// DISCARD: drop the queue and the watch.
    pub(super) fn discard(&mut self) -> Reply {
        if self.queue.take().is_none() {
            return Reply::err("DISCARD without MULTI");
        }
        self.watch = None;
        Reply::ok()
    }

    pub(super) fn enqueue(&mut self, name: &[u8], args: &[Vec<u8>]) -> Reply {
        match queued_arity(name) {
            Some(a) if data::arity_ok(a, args.len()) => {
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

    pub(super) fn exec(&mut self) -> Reply {
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
            return match replies.and_then(|r| self.commit(txn).map(|_| r)) {
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
                .and_then(|r| self.commit(txn).map(|_| r))
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

    pub(super) fn watch(&mut self, keys: &[Vec<u8>]) -> Reply {
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
}

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
        match data::data_command(txn, t, tables, name, args) {
            Ok(r) => out.push(r),
            Err(CmdError::Reply(r)) => out.push(r),
            Err(CmdError::Engine(e)) if e.is_conflict() => return Err(e),
            Err(CmdError::Engine(e)) => out.push(engine_error(&e)),
        }
    }
    Ok(out)
}

/// PING [message] (and ECHO message, whose reply is the same): no transaction.
pub(super) fn ping(args: &[Vec<u8>]) -> Reply {
    match args.len() {
        1 => Reply::Simple("PONG".into()),
        2 => Reply::Bulk(args[1].clone()),
        _ => arity_error(&args[0]),
    }
}
