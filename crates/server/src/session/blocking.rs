//! Blocking pops (BLPOP, BRPOP, BLMOVE, BRPOPLPUSH, BLMPOP, BZPOPMIN, BZPOPMAX, BZMPOP):
//! a command that finds nothing blocks its connection until a commit may have given it
//! something, or its timeout passes.
//!
//! Waking is driven by commits, not by polling the data: every commit of a command that can
//! add to a list or a sorted set ([`may_wake`]) bumps [`BlockingHub`]'s epoch and wakes the
//! worker threads; a blocked connection retries its command only when the epoch moved
//! since its last try (and its worker otherwise only checks the timeout). The epoch is read
//! before each try, so a push that commits between a try and the block is never missed.
//! When several clients wait on one key, every one of them retries and the first commit
//! wins (Redis serves the longest-waiting client first; Verso does not order them).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use super::Session;
use crate::resp::Reply;

/// Commits that may unblock a pop tell the blocked connections through this.
#[derive(Default)]
pub struct BlockingHub {
    epoch: AtomicU64,
    wake_workers: OnceLock<Box<dyn Fn() + Send + Sync>>,
}

impl BlockingHub {
    /// How the server wakes its workers (set once, when serving starts).
    pub fn set_waker(&self, wake: Box<dyn Fn() + Send + Sync>) {
        let _ = self.wake_workers.set(wake);
    }

    pub fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::SeqCst)
    }

    /// A commit that may have pushed something.
    pub fn notify(&self) {
        self.epoch.fetch_add(1, Ordering::SeqCst);
        if let Some(wake) = self.wake_workers.get() {
            wake();
        }
    }
}

/// Commands whose commit may give a blocked pop something.
pub(super) fn may_wake(name: &[u8]) -> bool {
    matches!(
        name,
        b"LPUSH"
            | b"RPUSH"
            | b"LPUSHX"
            | b"RPUSHX"
            | b"LINSERT"
            | b"LMOVE"
            | b"RPOPLPUSH"
            | b"BLMOVE"
            | b"BRPOPLPUSH"
            | b"ZADD"
            | b"ZINCRBY"
            | b"ZUNIONSTORE"
            | b"ZINTERSTORE"
            | b"ZDIFFSTORE"
            | b"ZRANGESTORE"
            | b"RENAME"
            | b"RENAMENX"
            | b"COPY"
            | b"MOVE"
    )
}

/// The blocking commands, and what their timeout answers.
pub(super) fn timeout_reply(name: &[u8]) -> Option<Reply> {
    match name {
        b"BLPOP" | b"BRPOP" | b"BLMPOP" | b"BZPOPMIN" | b"BZPOPMAX" | b"BZMPOP" => {
            Some(Reply::NilArray)
        }
        b"BLMOVE" | b"BRPOPLPUSH" => Some(Reply::Nil),
        _ => None,
    }
}

/// Where a blocking command's timeout is in the request `args` (the name included): the
/// last argument, or the first after the name for the M forms.
pub(super) fn timeout_arg<'a>(name: &[u8], args: &'a [Vec<u8>]) -> &'a [u8] {
    match name {
        b"BLMPOP" | b"BZMPOP" => &args[1],
        _ => &args[args.len() - 1],
    }
}

/// Parses a timeout in seconds (a float, as Redis 6+ takes it): `None` for 0 (no limit).
pub fn parse_timeout(arg: &[u8]) -> Result<Option<Duration>, Reply> {
    let secs = crate::strings::parse_f64(arg)
        .filter(|s| s.is_finite())
        .ok_or_else(|| Reply::err("timeout is not a float or out of range"))?;
    if secs < 0.0 {
        return Err(Reply::err("timeout is negative"));
    }
    if secs == 0.0 {
        return Ok(None);
    }
    Duration::try_from_secs_f64(secs)
        .map(Some)
        .map_err(|_| Reply::err("timeout is out of range"))
}

/// A blocked pop: the command to try again, in the database it was sent in.
#[derive(Clone, Debug)]
pub(super) struct BlockedPop {
    args: Vec<Vec<u8>>,
    name: Vec<u8>,
    db: usize,
    deadline: Option<Instant>,
    /// The hub's epoch before the last try.
    seen: u64,
}

impl BlockedPop {
    pub(super) fn deadline(&self) -> Option<Instant> {
        self.deadline
    }
}

fn nothing(reply: &Reply) -> bool {
    matches!(reply, Reply::Nil | Reply::NilArray)
}

impl<'s> Session<'s> {
    /// A blocking command outside MULTI: one try, and if it found nothing, the connection
    /// blocks (no reply yet; [`Session::poll_blocked_pop`] gives it).
    pub(super) fn run_blocking(&mut self, name: &[u8], args: &[Vec<u8>]) -> Reply {
        // A timeout too far to represent is no limit.
        let deadline = match parse_timeout(timeout_arg(name, args)) {
            Ok(t) => t.and_then(|t| Instant::now().checked_add(t)),
            Err(e) => return e,
        };
        let seen = self.shared.blocking.epoch();
        let reply = self.run_single(name, args);
        if !nothing(&reply) {
            return reply;
        }
        self.blocked = Some(super::Blocked::Pop(BlockedPop {
            args: args.to_vec(),
            name: name.to_vec(),
            db: self.db_index,
            deadline,
            seen,
        }));
        reply // not sent: the connection is blocked
    }

    /// A blocked pop's reply, once a retry found something or the timeout passed (`None`:
    /// still blocked). Retries only when a commit may have pushed since the last try.
    pub(super) fn poll_blocked_pop(&mut self, mut p: BlockedPop, now: Instant) -> Option<Reply> {
        let epoch = self.shared.blocking.epoch();
        if epoch != p.seen {
            p.seen = epoch;
            // A slot of its keys may have frozen or moved while it waited: it answers as a
            // new request would, holding the moves' view while it runs (`crate::moves`).
            let shared = self.shared;
            let view = shared.moves.as_ref().and_then(|m| m.enter());
            if let (Some(v), Some(shards)) = (&view, &shared.shards) {
                let route = shards.route_with(&p.args, |slot| v.answer(slot, false));
                if let Some(redirect) = crate::shards::ShardMap::redirect_reply(route) {
                    self.blocked = None;
                    return Some(redirect);
                }
                let keys = crate::shards::ShardMap::written_keys(&p.args);
                if keys.iter().any(|k| v.tracks(verso_cluster::key_slot(k))) {
                    if let Some(m) = &shared.moves {
                        m.track(keys.into_iter());
                    }
                }
            }
            let selected = std::mem::replace(&mut self.db_index, p.db);
            let reply = self.run_single(&p.name, &p.args);
            self.db_index = selected;
            if !nothing(&reply) {
                self.blocked = None;
                self.settle_replication();
                return Some(reply);
            }
        }
        if p.deadline.is_some_and(|d| now >= d) {
            self.blocked = None;
            self.settle_replication();
            return Some(timeout_reply(&p.name).unwrap_or(Reply::Nil));
        }
        self.blocked = Some(super::Blocked::Pop(p));
        None
    }
}
