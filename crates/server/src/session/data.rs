//! The data commands as engine transactions: their arities, which only read, one command as
//! its own transaction (retried on conflict), and the dispatch of one data command inside a
//! transaction (shared by single commands and MULTI blocks, see `multi`).

use std::sync::atomic::Ordering;

use verso_engine::Txn;

use super::{backoff, engine_error, Session, RETRIES_MAX};
use crate::expiry::{self, TtlReport, When};
use crate::hashes::{self, Listing};
use crate::keyspace::{self, CmdError, CmdResult};
use crate::lists::{self, Side};
use crate::resp::Reply;
use crate::sets::{self, SetOp};
use crate::stored::{Space, Spaces, Stored};
use crate::zsets::{self, By, ZOp};
use crate::{keys, strings};

/// The data commands (run inside a transaction), with their arity as Redis states it:
/// positive = exact argument count including the name, negative = at least that many.
pub(super) fn arity(name: &[u8]) -> Option<i32> {
    Some(match name {
        b"GET" | b"GETDEL" | b"INCR" | b"DECR" | b"STRLEN" | b"TYPE" => 2,
        b"TTL" | b"PTTL" | b"EXPIRETIME" | b"PEXPIRETIME" | b"PERSIST" => 2,
        b"GETEX" => -2,
        b"EXPIRE" | b"PEXPIRE" | b"EXPIREAT" | b"PEXPIREAT" => -3,
        b"SETEX" | b"PSETEX" => 4,
        b"HSET" | b"HMSET" => -4,
        b"HSETNX" | b"HINCRBY" | b"HINCRBYFLOAT" | b"SMOVE" => 4,
        b"HGET" | b"HEXISTS" | b"HSTRLEN" | b"SISMEMBER" => 3,
        b"HMGET" | b"HDEL" | b"SADD" | b"SREM" | b"SMISMEMBER" => -3,
        b"HLEN" | b"HKEYS" | b"HVALS" | b"HGETALL" | b"SMEMBERS" | b"SCARD" => 2,
        b"HRANDFIELD" | b"SRANDMEMBER" | b"SPOP" => -2,
        b"SINTER" | b"SUNION" | b"SDIFF" => -2,
        b"SINTERSTORE" | b"SUNIONSTORE" | b"SDIFFSTORE" | b"SINTERCARD" => -3,
        b"ZADD" | b"ZRANGE" | b"ZREVRANGE" | b"ZRANGEBYSCORE" | b"ZREVRANGEBYSCORE" => -4,
        b"ZRANGEBYLEX" | b"ZREVRANGEBYLEX" | b"ZMPOP" => -4,
        b"ZUNIONSTORE" | b"ZINTERSTORE" | b"ZDIFFSTORE" => -4,
        b"ZRANGESTORE" => -5,
        b"ZINCRBY" | b"ZCOUNT" | b"ZLEXCOUNT" => 4,
        b"ZREMRANGEBYRANK" | b"ZREMRANGEBYSCORE" | b"ZREMRANGEBYLEX" => 4,
        b"ZSCORE" | b"ZRANK" | b"ZREVRANK" => 3,
        b"ZMSCORE" | b"ZREM" | b"ZUNION" | b"ZINTER" | b"ZDIFF" | b"ZINTERCARD" => -3,
        b"ZCARD" => 2,
        b"LPUSH" | b"RPUSH" | b"LPUSHX" | b"RPUSHX" | b"LPOS" => -3,
        b"LPOP" | b"RPOP" => -2,
        b"LLEN" => 2,
        b"LINDEX" | b"RPOPLPUSH" => 3,
        b"LRANGE" | b"LSET" | b"LREM" | b"LTRIM" => 4,
        b"LINSERT" | b"LMOVE" => 5,
        b"LMPOP" => -4,
        b"BLPOP" | b"BRPOP" | b"BZPOPMIN" | b"BZPOPMAX" => -3,
        b"BLMOVE" => 6,
        b"BRPOPLPUSH" => 4,
        b"BLMPOP" | b"BZMPOP" => -5,
        b"ZPOPMIN" | b"ZPOPMAX" | b"ZRANDMEMBER" => -2,
        b"SET" | b"LCS" | b"COPY" => -3,
        b"SETNX" | b"GETSET" | b"INCRBY" | b"DECRBY" | b"APPEND" | b"INCRBYFLOAT" => 3,
        b"RENAME" | b"RENAMENX" | b"MOVE" => 3,
        b"GETRANGE" | b"SUBSTR" | b"SETRANGE" => 4,
        b"MGET" | b"DEL" | b"UNLINK" | b"EXISTS" | b"TOUCH" | b"OBJECT" => -2,
        b"RANDOMKEY" => 1,
        b"MSET" | b"MSETNX" => -3,
        b"VRANGE" => -3,
        b"DBSIZE" => 1,
        b"FLUSHDB" | b"FLUSHALL" => -1,
        b"KEYS" => 2,
        _ => return None,
    })
}

/// FLUSHDB's and FLUSHALL's optional `ASYNC | SYNC`: both flush in one transaction (the
/// memory is reclaimed in the background either way).
fn flush_mode(args: &[Vec<u8>]) -> Result<(), CmdError> {
    match args {
        [] => Ok(()),
        [m] if m.eq_ignore_ascii_case(b"ASYNC") || m.eq_ignore_ascii_case(b"SYNC") => Ok(()),
        _ => Err(CmdError::Reply(Reply::err("syntax error"))),
    }
}

/// The data commands that only read: they run as read-only transactions, which take no
/// predicate log and never abort (serialized at their snapshot).
pub(super) fn read_only(name: &[u8]) -> bool {
    matches!(
        name,
        b"GET"
            | b"MGET"
            | b"EXISTS"
            | b"STRLEN"
            | b"GETRANGE"
            | b"SUBSTR"
            | b"LCS"
            | b"TOUCH"
            | b"RANDOMKEY"
            | b"OBJECT"
            | b"TYPE"
            | b"HGET"
            | b"HMGET"
            | b"HLEN"
            | b"HEXISTS"
            | b"HSTRLEN"
            | b"HKEYS"
            | b"HVALS"
            | b"HGETALL"
            | b"HRANDFIELD"
            | b"SISMEMBER"
            | b"SMISMEMBER"
            | b"SMEMBERS"
            | b"SCARD"
            | b"SINTER"
            | b"SUNION"
            | b"SDIFF"
            | b"SINTERCARD"
            | b"SRANDMEMBER"
            | b"ZSCORE"
            | b"ZMSCORE"
            | b"ZCARD"
            | b"ZRANGE"
            | b"ZREVRANGE"
            | b"ZRANGEBYSCORE"
            | b"ZREVRANGEBYSCORE"
            | b"ZRANGEBYLEX"
            | b"ZREVRANGEBYLEX"
            | b"ZCOUNT"
            | b"ZLEXCOUNT"
            | b"ZRANK"
            | b"ZREVRANK"
            | b"ZRANDMEMBER"
            | b"ZUNION"
            | b"ZINTER"
            | b"ZDIFF"
            | b"ZINTERCARD"
            | b"LLEN"
            | b"LRANGE"
            | b"LINDEX"
            | b"LPOS"
            | b"TTL"
            | b"PTTL"
            | b"EXPIRETIME"
            | b"PEXPIRETIME"
            | b"DBSIZE"
            | b"KEYS"
            | b"VRANGE"
    )
}

pub(super) fn arity_ok(arity: i32, n: usize) -> bool {
    if arity >= 0 {
        n == arity as usize
    } else {
        n >= (-arity) as usize
    }
}

impl<'s> Session<'s> {
    /// One data command as its own transaction, retried on conflict (a read-only command as
    /// a read-only transaction, which cannot conflict).
    pub(super) fn run_single(&mut self, name: &[u8], args: &[Vec<u8>]) -> Reply {
        let reads_only = read_only(name);
        for attempt in 0..RETRIES_MAX {
            let begun = self.begin(reads_only);
            let mut txn = match begun {
                Ok(txn) => txn,
                Err(e) => return engine_error(&e),
            };
            let all = self.shared.spaces();
            let result = data_command(&mut txn, all, self.db_index, name, args);
            let outcome = match result {
                Ok(reply) => self.commit(txn).map(|_| {
                    if super::blocking::may_wake(name) {
                        self.shared.blocking.notify();
                    }
                    reply
                }),
                Err(CmdError::Reply(r)) => {
                    // WRONGTYPE and the like tell what the command read.
                    txn.abort();
                    self.hold_reads();
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
}

/// One data command inside `txn` on database `db` of `all` (arity already checked).
pub(super) fn data_command(
    txn: &mut Txn<'_>,
    all: Spaces<'_>,
    db: usize,
    name: &[u8],
    args: &[Vec<u8>],
) -> CmdResult {
    let a = &args[1..];
    let t = all.get(db).expect("SELECT keeps the index in range");
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
        b"GETRANGE" | b"SUBSTR" => keyspace::getrange(txn, t, &a[0], &a[1], &a[2]),
        b"SETRANGE" => strings::setrange(txn, t, &a[0], &a[1], &a[2]),
        b"INCRBYFLOAT" => strings::incr_by_float(txn, t, &a[0], &a[1]),
        b"LCS" => strings::lcs(txn, t, a),
        b"RENAME" => keys::rename(txn, t, &a[0], &a[1], false),
        b"RENAMENX" => keys::rename(txn, t, &a[0], &a[1], true),
        b"COPY" => keys::copy(txn, t, all, a),
        b"MOVE" => keys::move_key(txn, t, all, &a[0], &a[1]),
        b"TOUCH" => keys::touch(txn, t, a),
        b"RANDOMKEY" => keys::random_key(txn, t),
        b"OBJECT" => keys::object(txn, t, a),
        b"TYPE" => keyspace::type_of(txn, t, &a[0]),
        b"SETEX" => expiry::setex(txn, t, a, When::Seconds, "setex"),
        b"PSETEX" => expiry::setex(txn, t, a, When::Millis, "psetex"),
        b"GETEX" => expiry::getex(txn, t, a),
        b"EXPIRE" => expiry::expire(txn, t, a, When::Seconds, "expire"),
        b"PEXPIRE" => expiry::expire(txn, t, a, When::Millis, "pexpire"),
        b"EXPIREAT" => expiry::expire(txn, t, a, When::AtSeconds, "expireat"),
        b"PEXPIREAT" => expiry::expire(txn, t, a, When::AtMillis, "pexpireat"),
        b"TTL" => expiry::ttl(txn, t, &a[0], TtlReport::Seconds),
        b"PTTL" => expiry::ttl(txn, t, &a[0], TtlReport::Millis),
        b"EXPIRETIME" => expiry::ttl(txn, t, &a[0], TtlReport::AtSeconds),
        b"PEXPIRETIME" => expiry::ttl(txn, t, &a[0], TtlReport::AtMillis),
        b"PERSIST" => expiry::persist(txn, t, &a[0]),
        b"HSET" => hashes::hset(txn, t, a, "hset"),
        b"HMSET" => hashes::hset(txn, t, a, "hmset"),
        b"HSETNX" => hashes::hsetnx(txn, t, a),
        b"HGET" => hashes::hget(txn, t, &a[0], &a[1]),
        b"HMGET" => hashes::hmget(txn, t, a),
        b"HDEL" => hashes::hdel(txn, t, a),
        b"HLEN" => hashes::hlen(txn, t, &a[0]),
        b"HEXISTS" => hashes::hexists(txn, t, &a[0], &a[1]),
        b"HSTRLEN" => hashes::hstrlen(txn, t, &a[0], &a[1]),
        b"HKEYS" => hashes::hlist(txn, t, &a[0], Listing::Keys),
        b"HVALS" => hashes::hlist(txn, t, &a[0], Listing::Values),
        b"HGETALL" => hashes::hlist(txn, t, &a[0], Listing::All),
        b"HINCRBY" => hashes::hincrby(txn, t, a),
        b"HINCRBYFLOAT" => hashes::hincrbyfloat(txn, t, a),
        b"HRANDFIELD" => hashes::hrandfield(txn, t, a),
        b"SADD" => sets::sadd(txn, t, a),
        b"SREM" => sets::srem(txn, t, a),
        b"SISMEMBER" => sets::sismember(txn, t, &a[0], &a[1]),
        b"SMISMEMBER" => sets::smismember(txn, t, a),
        b"SMEMBERS" => sets::smembers(txn, t, &a[0]),
        b"SCARD" => sets::scard(txn, t, &a[0]),
        b"SINTER" => sets::set_op(txn, t, a, SetOp::Inter),
        b"SUNION" => sets::set_op(txn, t, a, SetOp::Union),
        b"SDIFF" => sets::set_op(txn, t, a, SetOp::Diff),
        b"SINTERSTORE" => sets::set_op_store(txn, t, a, SetOp::Inter),
        b"SUNIONSTORE" => sets::set_op_store(txn, t, a, SetOp::Union),
        b"SDIFFSTORE" => sets::set_op_store(txn, t, a, SetOp::Diff),
        b"SINTERCARD" => sets::sintercard(txn, t, a),
        b"SMOVE" => sets::smove(txn, t, a),
        b"SRANDMEMBER" => sets::srandmember(txn, t, a),
        b"SPOP" => sets::spop(txn, t, a),
        b"ZADD" => zsets::zadd(txn, t, a),
        b"ZINCRBY" => zsets::zincrby(txn, t, a),
        b"ZSCORE" => zsets::zscore(txn, t, &a[0], &a[1]),
        b"ZMSCORE" => zsets::zmscore(txn, t, a),
        b"ZCARD" => zsets::zcard(txn, t, &a[0]),
        b"ZREM" => zsets::zrem(txn, t, a),
        b"ZRANGE" => zsets::zrange(txn, t, a, None),
        b"ZREVRANGE" => zsets::zrange(txn, t, a, Some((By::Rank, true))),
        b"ZRANGEBYSCORE" => zsets::zrange(txn, t, a, Some((By::Score, false))),
        b"ZREVRANGEBYSCORE" => zsets::zrange(txn, t, a, Some((By::Score, true))),
        b"ZRANGEBYLEX" => zsets::zrange(txn, t, a, Some((By::Lex, false))),
        b"ZREVRANGEBYLEX" => zsets::zrange(txn, t, a, Some((By::Lex, true))),
        b"ZRANGESTORE" => zsets::zrangestore(txn, t, a),
        b"ZCOUNT" => zsets::zcount(txn, t, a, By::Score),
        b"ZLEXCOUNT" => zsets::zcount(txn, t, a, By::Lex),
        b"ZREMRANGEBYRANK" => zsets::zremrange(txn, t, a, By::Rank),
        b"ZREMRANGEBYSCORE" => zsets::zremrange(txn, t, a, By::Score),
        b"ZREMRANGEBYLEX" => zsets::zremrange(txn, t, a, By::Lex),
        b"ZRANK" => zsets::zrank(txn, t, &a[0], &a[1], false),
        b"ZREVRANK" => zsets::zrank(txn, t, &a[0], &a[1], true),
        b"ZPOPMIN" => zsets::zpop(txn, t, a, false),
        b"ZPOPMAX" => zsets::zpop(txn, t, a, true),
        b"ZMPOP" => zsets::zmpop(txn, t, a),
        b"ZRANDMEMBER" => zsets::zrandmember(txn, t, a),
        b"ZUNION" => zsets::zcombine(txn, t, a, ZOp::Union),
        b"ZINTER" => zsets::zcombine(txn, t, a, ZOp::Inter),
        b"ZDIFF" => zsets::zcombine(txn, t, a, ZOp::Diff),
        b"ZUNIONSTORE" => zsets::zcombine_store(txn, t, a, ZOp::Union),
        b"ZINTERSTORE" => zsets::zcombine_store(txn, t, a, ZOp::Inter),
        b"ZDIFFSTORE" => zsets::zcombine_store(txn, t, a, ZOp::Diff),
        b"ZINTERCARD" => zsets::zintercard(txn, t, a),
        b"LPUSH" => lists::lpush(txn, t, a, Side::Left, false),
        b"RPUSH" => lists::lpush(txn, t, a, Side::Right, false),
        b"LPUSHX" => lists::lpush(txn, t, a, Side::Left, true),
        b"RPUSHX" => lists::lpush(txn, t, a, Side::Right, true),
        b"LPOP" => lists::lpop(txn, t, a, Side::Left),
        b"RPOP" => lists::lpop(txn, t, a, Side::Right),
        b"LLEN" => lists::llen(txn, t, &a[0]),
        b"LRANGE" => lists::lrange(txn, t, a),
        b"LINDEX" => lists::lindex(txn, t, &a[0], &a[1]),
        b"LSET" => lists::lset(txn, t, a),
        b"LINSERT" => lists::linsert(txn, t, a),
        b"LREM" => lists::lrem(txn, t, a),
        b"LTRIM" => lists::ltrim(txn, t, a),
        b"LPOS" => lists::lpos(txn, t, a),
        b"LMOVE" => lists::lmove_args(txn, t, a),
        b"RPOPLPUSH" => lists::lmove(txn, t, &a[0], &a[1], Side::Right, Side::Left),
        b"LMPOP" => lists::lmpop(txn, t, a),
        // The blocking pops, tried once (inside MULTI they never block, as in Redis; outside,
        // `blocking` blocks the connection when the try finds nothing).
        b"BLPOP" | b"BRPOP" | b"BLMOVE" | b"BRPOPLPUSH" | b"BLMPOP" | b"BZPOPMIN" | b"BZPOPMAX"
        | b"BZMPOP" => {
            super::parse_timeout(super::blocking::timeout_arg(name, args))
                .map_err(CmdError::Reply)?;
            try_pop(txn, t, name, a)
        }
        b"VRANGE" => keyspace::vrange(txn, t, a),
        b"KEYS" => {
            let (keys, _) = keyspace::scan_keys(txn, t, None, usize::MAX, Some(&a[0]), None)?;
            Ok(Reply::Array(keys.into_iter().map(Reply::Bulk).collect()))
        }
        b"DBSIZE" => keyspace::dbsize(txn, t),
        b"FLUSHDB" => {
            flush_mode(a)?;
            flush(txn, t)?;
            Ok(Reply::ok())
        }
        b"FLUSHALL" => {
            flush_mode(a)?;
            for i in 0..all.data.len() {
                flush(txn, all.get(i).expect("index in range"))?;
            }
            Ok(Reply::ok())
        }
        _ => Err(CmdError::Reply(Reply::err("unknown command"))),
    }
}

/// One try of a blocking pop: what the non-blocking form would answer (nil if nothing).
fn try_pop(txn: &mut Txn<'_>, s: Space<'_>, name: &[u8], a: &[Vec<u8>]) -> CmdResult {
    let keys = &a[..a.len() - 1];
    match name {
        b"BLPOP" | b"BRPOP" => {
            let side = if name == b"BLPOP" {
                Side::Left
            } else {
                Side::Right
            };
            for k in keys {
                if let Reply::Bulk(v) = lists::lpop(txn, s, std::slice::from_ref(k), side)? {
                    return Ok(Reply::Array(vec![Reply::Bulk(k.clone()), Reply::Bulk(v)]));
                }
            }
            Ok(Reply::NilArray)
        }
        b"BZPOPMIN" | b"BZPOPMAX" => {
            for k in keys {
                if let Reply::Array(mut pair) =
                    zsets::zpop(txn, s, std::slice::from_ref(k), name == b"BZPOPMAX")?
                {
                    if !pair.is_empty() {
                        pair.insert(0, Reply::Bulk(k.clone()));
                        return Ok(Reply::Array(pair));
                    }
                }
            }
            Ok(Reply::NilArray)
        }
        b"BLMOVE" => lists::lmove_args(txn, s, keys),
        b"BRPOPLPUSH" => lists::lmove(txn, s, &a[0], &a[1], Side::Right, Side::Left),
        b"BLMPOP" => lists::lmpop(txn, s, &a[1..]),
        b"BZMPOP" => zsets::zmpop(txn, s, &a[1..]),
        _ => Err(CmdError::Reply(Reply::err("unknown command"))),
    }
}

/// Deletes every key of a database (burying its collections), and its deadline queue.
fn flush(txn: &mut Txn<'_>, s: Space<'_>) -> Result<(), CmdError> {
    let ids: Vec<u64> = txn
        .range(s.data, ..)?
        .filter_map(|(_, v)| crate::collections::id_of(&Stored::decode(v)?))
        .collect();
    for id in ids {
        crate::collections::bury(txn, s.collections, id)?;
    }
    // One clear per table: a replicated group logs it as one record, whatever the size.
    for table in [s.data, s.deadlines] {
        txn.clear(table)?;
    }
    Ok(())
}
