//! Keys with a time to live: the clock commands read, the expiry options and commands
//! (EXPIRE and its family, TTL and its family, PERSIST, GETEX, SETEX), and the active
//! expirer that deletes keys once their deadline passes.
//!
//! How a deadline is stored, and why an expired key is invisible before the expirer runs,
//! is in [`crate::stored`]. The expirer deletes through ordinary logged transactions, on the
//! primary only, so the log, a recovered copy and every replica agree on which keys are
//! gone; a replica that reads before the deletion arrives hides the key by its own clock, as
//! the primary does (Redis replicas do the same).

use std::ops::Bound;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use verso_engine::{Db, Error, Txn};

use crate::keyspace::{parse_i64, CmdError, CmdResult, NOT_INTEGER};
use crate::resp::Reply;
use crate::stored::{self, Space, Stored, KIND_STRING};

/// Where commands read the time. Each command (and each MULTI block) reads it once, when
/// it begins, so a key cannot expire in the middle of a transaction.
pub enum Clock {
    /// The system's wall clock (Unix time), as Redis uses.
    System,
    /// A clock set by hand, for tests that step time instead of sleeping.
    Manual(AtomicU64),
}

impl Clock {
    /// A manual clock at `ms` Unix milliseconds.
    pub fn manual(ms: u64) -> Clock {
        Clock::Manual(AtomicU64::new(ms))
    }

    /// Unix time in milliseconds.
    pub fn now_ms(&self) -> u64 {
        match self {
            Clock::System => SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64),
            Clock::Manual(ms) => ms.load(Ordering::Relaxed),
        }
    }

    /// Moves a manual clock forward by `ms` (the system clock cannot be set).
    pub fn advance_ms(&self, ms: u64) {
        if let Clock::Manual(t) = self {
            t.fetch_add(ms, Ordering::Relaxed);
        }
    }

    /// Moves a manual clock to `ms` (the system clock cannot be set).
    pub fn set_ms(&self, ms: u64) {
        if let Clock::Manual(t) = self {
            t.store(ms, Ordering::Relaxed);
        }
    }
}

fn err(msg: &str) -> CmdError {
    CmdError::Reply(Reply::err(msg))
}

fn invalid_expire(command: &str) -> CmdError {
    err(&format!("invalid expire time in '{command}' command"))
}

/// The unit and base of an expiry option.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum When {
    /// EX: seconds from now.
    Seconds,
    /// PX: milliseconds from now.
    Millis,
    /// EXAT: a Unix time in seconds.
    AtSeconds,
    /// PXAT: a Unix time in milliseconds.
    AtMillis,
}

impl When {
    /// The option named `opt` (EX, PX, EXAT, PXAT, any case).
    pub fn parse(opt: &[u8]) -> Option<When> {
        Some(match opt.to_ascii_uppercase().as_slice() {
            b"EX" => When::Seconds,
            b"PX" => When::Millis,
            b"EXAT" => When::AtSeconds,
            b"PXAT" => When::AtMillis,
            _ => return None,
        })
    }

    fn seconds(self) -> bool {
        matches!(self, When::Seconds | When::AtSeconds)
    }

    fn relative(self) -> bool {
        matches!(self, When::Seconds | When::Millis)
    }
}

/// SET/SETEX/GETEX's deadline for `arg` (Redis's `getExpireMillisecondsOrReply`): the
/// number must be positive, and the deadline must fit a signed 64-bit count of ms.
pub fn deadline_for_set(
    arg: &[u8],
    when: When,
    now_ms: u64,
    command: &str,
) -> Result<u64, CmdError> {
    let n = parse_i64(arg).ok_or_else(|| err(NOT_INTEGER))?;
    if n <= 0 || (when.seconds() && n > i64::MAX / 1000) {
        return Err(invalid_expire(command));
    }
    let ms = if when.seconds() { n * 1000 } else { n };
    let base = if when.relative() { now_ms as i64 } else { 0 };
    ms.checked_add(base)
        .map(|d| d as u64)
        .ok_or_else(|| invalid_expire(command))
}

/// EXPIRE family's deadline (Redis's `expireGenericCommand`): any integer, negative ones
/// meaning the past; `None` for a time before the Unix epoch (already expired).
fn deadline_for_expire(
    arg: &[u8],
    when: When,
    now_ms: u64,
    command: &str,
) -> Result<i64, CmdError> {
    let mut n = parse_i64(arg).ok_or_else(|| err(NOT_INTEGER))?;
    if when.seconds() {
        if !(i64::MIN / 1000..=i64::MAX / 1000).contains(&n) {
            return Err(invalid_expire(command));
        }
        n *= 1000;
    }
    let base = if when.relative() { now_ms as i64 } else { 0 };
    n.checked_add(base).ok_or_else(|| invalid_expire(command))
}

/// EXPIRE key seconds [NX|XX|GT|LT] and PEXPIRE, EXPIREAT, PEXPIREAT: 1 if the deadline was
/// set (or the key deleted for a deadline already passed), 0 if the key is absent or a
/// condition refused. A key without a deadline counts as an infinite one for GT and LT.
pub fn expire(
    txn: &mut Txn<'_>,
    s: Space<'_>,
    args: &[Vec<u8>],
    when: When,
    command: &str,
) -> CmdResult {
    let key = &args[0];
    let deadline = deadline_for_expire(&args[1], when, s.now_ms, command)?;
    let (mut nx, mut xx, mut gt, mut lt) = (false, false, false, false);
    for opt in &args[2..] {
        match opt.to_ascii_uppercase().as_slice() {
            b"NX" => nx = true,
            b"XX" => xx = true,
            b"GT" => gt = true,
            b"LT" => lt = true,
            _ => {
                return Err(err(&format!(
                    "Unsupported option {}",
                    String::from_utf8_lossy(opt)
                )))
            }
        }
    }
    if nx && (xx || gt || lt) {
        return Err(err(
            "NX and XX, GT or LT options at the same time are not compatible",
        ));
    }
    if gt && lt {
        return Err(err("GT and LT options at the same time are not compatible"));
    }
    let Some(v) = stored::read(txn, s, key)? else {
        return Ok(Reply::Integer(0));
    };
    let current = v.deadline.map(|d| d as i64);
    let refused = (nx && current.is_some())
        || (xx && current.is_none())
        || (gt && current.is_none_or(|c| deadline <= c))
        || (lt && current.is_some_and(|c| deadline >= c));
    if refused {
        return Ok(Reply::Integer(0));
    }
    let (kind, payload) = (v.kind, v.payload.to_vec());
    if deadline <= s.now_ms as i64 {
        crate::collections::delete_key(txn, s, key)?;
    } else {
        stored::write(txn, s, key, kind, Some(deadline as u64), &payload)?;
    }
    Ok(Reply::Integer(1))
}

/// What TTL and its family report.
#[derive(Clone, Copy)]
pub enum TtlReport {
    /// TTL: seconds left, rounded to nearest.
    Seconds,
    /// PTTL: milliseconds left.
    Millis,
    /// EXPIRETIME: the deadline in Unix seconds (rounded to nearest).
    AtSeconds,
    /// PEXPIRETIME: the deadline in Unix milliseconds.
    AtMillis,
}

/// TTL, PTTL, EXPIRETIME, PEXPIRETIME: -2 for an absent key, -1 for one without a deadline.
pub fn ttl(txn: &Txn<'_>, s: Space<'_>, key: &[u8], report: TtlReport) -> CmdResult {
    let Some(v) = stored::read(txn, s, key)? else {
        return Ok(Reply::Integer(-2));
    };
    let Some(deadline) = v.deadline else {
        return Ok(Reply::Integer(-1));
    };
    let left = deadline.saturating_sub(s.now_ms) as i64;
    let abs = deadline as i64;
    Ok(Reply::Integer(match report {
        TtlReport::Seconds => (left + 500) / 1000,
        TtlReport::Millis => left,
        TtlReport::AtSeconds => abs.saturating_add(500) / 1000,
        TtlReport::AtMillis => abs,
    }))
}

/// PERSIST key: 1 if a deadline was removed.
pub fn persist(txn: &mut Txn<'_>, s: Space<'_>, key: &[u8]) -> CmdResult {
    let Some(v) = stored::read(txn, s, key)? else {
        return Ok(Reply::Integer(0));
    };
    if v.deadline.is_none() {
        return Ok(Reply::Integer(0));
    }
    let (kind, payload) = (v.kind, v.payload.to_vec());
    stored::write(txn, s, key, kind, None, &payload)?;
    Ok(Reply::Integer(1))
}

/// SETEX key seconds value, PSETEX key milliseconds value.
pub fn setex(
    txn: &mut Txn<'_>,
    s: Space<'_>,
    args: &[Vec<u8>],
    when: When,
    command: &str,
) -> CmdResult {
    let deadline = deadline_for_set(&args[1], when, s.now_ms, command)?;
    stored::write(txn, s, &args[0], KIND_STRING, Some(deadline), &args[2])?;
    Ok(Reply::ok())
}

/// GETEX key [EX seconds|PX ms|EXAT t|PXAT t|PERSIST]: the value, after setting or
/// removing its deadline.
pub fn getex(txn: &mut Txn<'_>, s: Space<'_>, args: &[Vec<u8>]) -> CmdResult {
    let key = &args[0];
    // None: leave the deadline; Some(None): remove it; Some(Some(d)): set it.
    let mut change: Option<Option<u64>> = None;
    let mut i = 1;
    while i < args.len() {
        let opt = &args[i];
        if opt.eq_ignore_ascii_case(b"PERSIST") && change.is_none() {
            change = Some(None);
            i += 1;
            continue;
        }
        match (When::parse(opt), args.get(i + 1)) {
            (Some(when), Some(n)) if change.is_none() => {
                change = Some(Some(deadline_for_set(n, when, s.now_ms, "getex")?));
                i += 2;
            }
            _ => return Err(err("syntax error")),
        }
    }
    let Some((value, deadline)) = stored::read_string_with_deadline(txn, s, key)? else {
        return Ok(Reply::Nil);
    };
    let value = value.to_vec();
    match change {
        Some(new) if new != deadline => stored::write(txn, s, key, KIND_STRING, new, &value)?,
        _ => {}
    }
    Ok(Reply::Bulk(value))
}

/// What one round of the active expirer did in one database.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ExpireRound {
    /// Keys deleted because their deadline passed.
    pub deleted: usize,
    /// Queue entries removed (one per deleted key, plus stale ones).
    pub entries: usize,
    /// Whether due entries remain beyond this round's batch.
    pub more: bool,
}

/// Queue entries one expirer transaction handles: small enough that a conflict with a
/// client costs little, large enough to amortize the commit.
pub const EXPIRE_BATCH: usize = 128;

/// One expirer transaction on database `s`: takes up to `batch` queue entries due before
/// `s.now_ms`, deletes each key whose current deadline is still that entry's, and removes
/// the entries. A conflict with a client's transaction is returned (the caller tries again
/// on its next round).
pub fn expire_due(db: &Db, s: Space<'_>, batch: usize) -> Result<ExpireRound, Error> {
    let mut txn = db.begin()?;
    let now = s.now_ms.to_be_bytes();
    let mut due: Vec<Vec<u8>> = Vec::new();
    let mut more = false;
    for (k, _) in txn.range(s.deadlines, (Bound::Unbounded, Bound::Excluded(&now[..])))? {
        if due.len() == batch {
            more = true;
            break;
        }
        due.push(k.to_vec());
    }
    if due.is_empty() {
        txn.abort();
        return Ok(ExpireRound::default());
    }
    let mut deleted = 0;
    for entry in &due {
        let (deadline, key) = stored::split_queue_key(entry).expect("queue keys carry a deadline");
        let current = txn.get(s.data, key)?.and_then(Stored::decode);
        if current.and_then(|v| v.deadline) == Some(deadline) {
            if let Some(id) = current.and_then(|v| crate::collections::id_of(&v)) {
                crate::collections::bury(&mut txn, s.collections, id)?;
            }
            txn.delete(s.data, key)?;
            deleted += 1;
        }
        txn.delete(s.deadlines, entry)?;
    }
    txn.commit()?;
    Ok(ExpireRound {
        deleted,
        entries: due.len(),
        more,
    })
}

/// How often the active expirer looks for due keys (Redis's default `hz` is 10).
pub const EXPIRE_INTERVAL: Duration = Duration::from_millis(100);
/// The most time one expirer cycle spends before sleeping again (Redis's
/// `ACTIVE_EXPIRE_CYCLE_SLOW_TIME_PERC` of 25 % of a 100 ms cycle).
pub const EXPIRE_CYCLE_BUDGET: Duration = Duration::from_millis(25);

/// One cycle over every database: rounds of [`expire_due`] while due keys remain and the
/// budget lasts. Returns the keys deleted.
pub fn expire_cycle(db: &Db, spaces: crate::stored::Spaces<'_>, budget: Duration) -> usize {
    let start = Instant::now();
    let mut deleted = 0;
    for i in 0..spaces.data.len() {
        let s = spaces.get(i).expect("index in range");
        // An error (a conflict, a lost leadership, a full log) waits for the next cycle.
        while let Ok(round) = expire_due(db, s, EXPIRE_BATCH) {
            deleted += round.deleted;
            if !round.more {
                break;
            }
            if start.elapsed() >= budget {
                return deleted;
            }
        }
    }
    deleted
}

/// Keys with a deadline still ahead in database `s` (INFO keyspace's `expires`): each
/// queue entry that is its key's current deadline. Costs one read per queue entry.
pub fn count_expiring(txn: &Txn<'_>, s: Space<'_>) -> Result<usize, Error> {
    let mut n = 0;
    for (entry, _) in txn.range(s.deadlines, ..)? {
        let Some((deadline, key)) = stored::split_queue_key(entry) else {
            continue;
        };
        let current = txn.get(s.data, key)?.and_then(Stored::decode);
        if current.is_some_and(|v| v.deadline == Some(deadline) && !v.expired_at(s.now_ms)) {
            n += 1;
        }
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_deadlines_follow_redis_limits() {
        let now = 1_000_000;
        assert_eq!(
            deadline_for_set(b"10", When::Seconds, now, "set").unwrap(),
            now + 10_000
        );
        assert_eq!(
            deadline_for_set(b"10", When::Millis, now, "set").unwrap(),
            now + 10
        );
        assert_eq!(
            deadline_for_set(b"10", When::AtSeconds, now, "set").unwrap(),
            10_000
        );
        assert_eq!(
            deadline_for_set(b"10", When::AtMillis, now, "set").unwrap(),
            10
        );
        for bad in [&b"0"[..], b"-1", b"9223372036854776"] {
            assert!(
                deadline_for_set(bad, When::Seconds, now, "set").is_err(),
                "{bad:?}"
            );
        }
        assert!(deadline_for_set(b"9223372036854775807", When::Millis, now, "set").is_err());
        assert!(deadline_for_set(b"9223372036854775807", When::AtMillis, now, "set").is_ok());
    }

    #[test]
    fn expire_deadlines_may_be_in_the_past() {
        let now = 5_000;
        assert_eq!(
            deadline_for_expire(b"-3", When::Seconds, now, "expire").unwrap(),
            2_000
        );
        assert_eq!(
            deadline_for_expire(b"-3", When::AtMillis, now, "expire").unwrap(),
            -3
        );
        assert!(deadline_for_expire(b"9223372036854776", When::Seconds, now, "expire").is_err());
        assert!(deadline_for_expire(b"9223372036854775807", When::Millis, now, "expire").is_err());
    }
}
