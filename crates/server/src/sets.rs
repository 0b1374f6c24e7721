//! Set commands, each member a record of its own ([`crate::collections`]).

use std::collections::BTreeSet;

use verso_engine::Txn;

use crate::collections::{self as coll, Coll, KIND_SET};
use crate::hashes::random_run;
use crate::keyspace::{parse_i64, CmdError, CmdResult, NOT_INTEGER};
use crate::resp::Reply;
use crate::stored::Space;

fn err(msg: &str) -> CmdError {
    CmdError::Reply(Reply::err(msg))
}

fn open(txn: &Txn<'_>, s: Space<'_>, key: &[u8]) -> Result<Option<Coll>, CmdError> {
    coll::open(txn, s, key, KIND_SET)
}

fn bulks(members: impl IntoIterator<Item = Vec<u8>>) -> Vec<Reply> {
    members.into_iter().map(Reply::Bulk).collect()
}

/// SADD key member...: the number added.
pub fn sadd(txn: &mut Txn<'_>, s: Space<'_>, args: &[Vec<u8>]) -> CmdResult {
    let c = coll::open_or_create(txn, s, &args[0], KIND_SET)?;
    let mut n = 0;
    for m in &args[1..] {
        n += i64::from(coll::put(txn, s, c, m, b"")?);
    }
    Ok(Reply::Integer(n))
}

/// SREM key member...: the number removed; the key goes with its last member.
pub fn srem(txn: &mut Txn<'_>, s: Space<'_>, args: &[Vec<u8>]) -> CmdResult {
    let Some(c) = open(txn, s, &args[0])? else {
        return Ok(Reply::Integer(0));
    };
    let mut n = 0;
    for m in &args[1..] {
        n += i64::from(coll::remove(txn, s, c, m)?);
    }
    if n > 0 {
        coll::drop_if_empty(txn, s, &args[0], c)?;
    }
    Ok(Reply::Integer(n))
}

fn is_member(txn: &Txn<'_>, s: Space<'_>, c: Option<Coll>, m: &[u8]) -> Result<bool, CmdError> {
    Ok(match c {
        Some(c) => coll::get(txn, s, c, m)?.is_some(),
        None => false,
    })
}

pub fn sismember(txn: &Txn<'_>, s: Space<'_>, key: &[u8], m: &[u8]) -> CmdResult {
    let c = open(txn, s, key)?;
    Ok(Reply::Integer(i64::from(is_member(txn, s, c, m)?)))
}

pub fn smismember(txn: &Txn<'_>, s: Space<'_>, args: &[Vec<u8>]) -> CmdResult {
    let c = open(txn, s, &args[0])?;
    let mut out = Vec::with_capacity(args.len() - 1);
    for m in &args[1..] {
        out.push(Reply::Integer(i64::from(is_member(txn, s, c, m)?)));
    }
    Ok(Reply::Array(out))
}

pub fn scard(txn: &Txn<'_>, s: Space<'_>, key: &[u8]) -> CmdResult {
    Ok(Reply::Integer(match open(txn, s, key)? {
        Some(c) => coll::len(txn, s, c)?,
        None => 0,
    }))
}

/// The members of the set at `key` (empty if absent), WRONGTYPE for another kind.
fn members_of(txn: &Txn<'_>, s: Space<'_>, key: &[u8]) -> Result<BTreeSet<Vec<u8>>, CmdError> {
    Ok(match open(txn, s, key)? {
        Some(c) => coll::members(txn, s, c, None)?
            .map(|(m, _)| m.to_vec())
            .collect(),
        None => BTreeSet::new(),
    })
}

pub fn smembers(txn: &Txn<'_>, s: Space<'_>, key: &[u8]) -> CmdResult {
    Ok(Reply::Set(bulks(members_of(txn, s, key)?)))
}

/// The operation of SINTER, SUNION, SDIFF and their STORE forms.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum SetOp {
    Inter,
    Union,
    Diff,
}

fn combine(
    txn: &Txn<'_>,
    s: Space<'_>,
    keys: &[Vec<u8>],
    op: SetOp,
) -> Result<BTreeSet<Vec<u8>>, CmdError> {
    // Every key is read (and type-checked) even when the result is already decided, as
    // Redis checks every key's type.
    let mut sets = Vec::with_capacity(keys.len());
    for k in keys {
        sets.push(members_of(txn, s, k)?);
    }
    let mut it = sets.into_iter();
    let mut acc = it.next().unwrap_or_default();
    for next in it {
        match op {
            SetOp::Inter => acc.retain(|m| next.contains(m)),
            SetOp::Union => acc.extend(next),
            SetOp::Diff => acc.retain(|m| !next.contains(m)),
        }
    }
    Ok(acc)
}

/// SINTER, SUNION, SDIFF key...
pub fn set_op(txn: &Txn<'_>, s: Space<'_>, keys: &[Vec<u8>], op: SetOp) -> CmdResult {
    Ok(Reply::Set(bulks(combine(txn, s, keys, op)?)))
}

/// Replaces `dst` with a set of `members` (deleting it when empty): the new cardinality.
fn store(txn: &mut Txn<'_>, s: Space<'_>, dst: &[u8], members: BTreeSet<Vec<u8>>) -> CmdResult {
    coll::bury_root(txn, s, dst)?;
    txn.delete(s.data, dst)?;
    let n = members.len() as i64;
    if n > 0 {
        let c = coll::open_or_create(txn, s, dst, KIND_SET)?;
        for m in &members {
            coll::put(txn, s, c, m, b"")?;
        }
    }
    Ok(Reply::Integer(n))
}

/// SINTERSTORE, SUNIONSTORE, SDIFFSTORE destination key...
pub fn set_op_store(txn: &mut Txn<'_>, s: Space<'_>, args: &[Vec<u8>], op: SetOp) -> CmdResult {
    let result = combine(txn, s, &args[1..], op)?;
    store(txn, s, &args[0], result)
}

/// SINTERCARD numkeys key... [LIMIT limit].
pub fn sintercard(txn: &Txn<'_>, s: Space<'_>, args: &[Vec<u8>]) -> CmdResult {
    let n = parse_i64(&args[0]).ok_or_else(|| err(NOT_INTEGER))?;
    if n <= 0 {
        return Err(err("numkeys should be greater than 0"));
    }
    let n = n as usize;
    if args.len() < 1 + n {
        return Err(err("Number of keys can't be greater than number of args"));
    }
    let mut limit = 0usize;
    let rest = &args[1 + n..];
    match rest {
        [] => {}
        [opt, l] if opt.eq_ignore_ascii_case(b"LIMIT") => {
            let l = parse_i64(l).ok_or_else(|| err(NOT_INTEGER))?;
            if l < 0 {
                return Err(err("LIMIT can't be negative"));
            }
            limit = l as usize;
        }
        _ => return Err(err("syntax error")),
    }
    let card = combine(txn, s, &args[1..1 + n], SetOp::Inter)?.len();
    Ok(Reply::Integer(
        if limit > 0 { card.min(limit) } else { card } as i64,
    ))
}

/// SMOVE source destination member: 1 if moved.
pub fn smove(txn: &mut Txn<'_>, s: Space<'_>, args: &[Vec<u8>]) -> CmdResult {
    let (src, dst, m) = (&args[0], &args[1], &args[2]);
    // As Redis: an absent source answers 0 before the destination's type is checked.
    let Some(from) = open(txn, s, src)? else {
        return Ok(Reply::Integer(0));
    };
    let to = open(txn, s, dst)?;
    if !is_member(txn, s, Some(from), m)? {
        return Ok(Reply::Integer(0));
    }
    if src == dst {
        return Ok(Reply::Integer(1));
    }
    coll::remove(txn, s, from, m)?;
    coll::drop_if_empty(txn, s, src, from)?;
    let to = match to {
        Some(c) => c,
        None => coll::open_or_create(txn, s, dst, KIND_SET)?,
    };
    coll::put(txn, s, to, m, b"")?;
    Ok(Reply::Integer(1))
}

fn count_arg(args: &[Vec<u8>]) -> Result<Option<i64>, CmdError> {
    match args.get(1) {
        None => Ok(None),
        Some(_) if args.len() > 2 => Err(err("syntax error")),
        Some(n) => Ok(Some(parse_i64(n).ok_or_else(|| err(NOT_INTEGER))?)),
    }
}

/// SRANDMEMBER key [count].
pub fn srandmember(txn: &Txn<'_>, s: Space<'_>, args: &[Vec<u8>]) -> CmdResult {
    let count = count_arg(args)?;
    let c = open(txn, s, &args[0])?;
    let seed = txn.timestamp();
    match (count, c) {
        (None, None) => Ok(Reply::Nil),
        (None, Some(c)) => Ok(coll::random_member(txn, s, c, seed)?
            .map_or(Reply::Nil, |(m, _)| Reply::Bulk(m.to_vec()))),
        (Some(_), None) => Ok(Reply::Array(Vec::new())),
        (Some(n), Some(c)) => Ok(Reply::Array(bulks(
            random_run(txn, s, c, n, seed, false)?
                .into_iter()
                .map(|(m, _)| m),
        ))),
    }
}

/// SPOP key [count]: removes and returns random members.
pub fn spop(txn: &mut Txn<'_>, s: Space<'_>, args: &[Vec<u8>]) -> CmdResult {
    let count = count_arg(args)?;
    if count.is_some_and(|n| n < 0) {
        return Err(err("value is out of range, must be positive"));
    }
    let Some(c) = open(txn, s, &args[0])? else {
        return Ok(if count.is_some() {
            Reply::Set(Vec::new())
        } else {
            Reply::Nil
        });
    };
    let seed = txn.timestamp();
    let picked: Vec<Vec<u8>> = random_run(txn, s, c, count.unwrap_or(1), seed, false)?
        .into_iter()
        .map(|(m, _)| m)
        .collect();
    for m in &picked {
        coll::remove(txn, s, c, m)?;
    }
    if !picked.is_empty() {
        coll::drop_if_empty(txn, s, &args[0], c)?;
    }
    Ok(match count {
        None => picked.into_iter().next().map_or(Reply::Nil, Reply::Bulk),
        Some(_) => Reply::Set(bulks(picked)),
    })
}
