//! Hash commands, each field a record of its own ([`crate::collections`]): HSET on two
//! different fields of one hash do not conflict (unless both add a field in the same length
//! stripe), where Redis serializes every command on the key.

use verso_engine::Txn;

use crate::collections::{self as coll, Coll, KIND_HASH};
use crate::keyspace::{parse_i64, CmdError, CmdResult};
use crate::resp::Reply;
use crate::stored::Space;
use crate::strings::{format_f64, parse_f64};

fn err(msg: &str) -> CmdError {
    CmdError::Reply(Reply::err(msg))
}

fn open(txn: &Txn<'_>, s: Space<'_>, key: &[u8]) -> Result<Option<Coll>, CmdError> {
    coll::open(txn, s, key, KIND_HASH)
}

/// HSET key field value [field value ...] (the number of new fields), and HMSET (OK).
pub fn hset(txn: &mut Txn<'_>, s: Space<'_>, args: &[Vec<u8>], name: &str) -> CmdResult {
    let pairs = &args[1..];
    if pairs.is_empty() || !pairs.len().is_multiple_of(2) {
        return Err(err(&format!(
            "wrong number of arguments for '{name}' command"
        )));
    }
    let c = coll::open_or_create(txn, s, &args[0], KIND_HASH)?;
    let mut added = 0;
    for fv in pairs.chunks(2) {
        added += i64::from(coll::put(txn, s, c, &fv[0], &fv[1])?);
    }
    Ok(if name == "hmset" {
        Reply::ok()
    } else {
        Reply::Integer(added)
    })
}

/// HSETNX key field value: 1 if set, 0 if the field existed.
pub fn hsetnx(txn: &mut Txn<'_>, s: Space<'_>, args: &[Vec<u8>]) -> CmdResult {
    if let Some(c) = open(txn, s, &args[0])? {
        if coll::get(txn, s, c, &args[1])?.is_some() {
            return Ok(Reply::Integer(0));
        }
    }
    let c = coll::open_or_create(txn, s, &args[0], KIND_HASH)?;
    coll::put(txn, s, c, &args[1], &args[2])?;
    Ok(Reply::Integer(1))
}

pub fn hget(txn: &Txn<'_>, s: Space<'_>, key: &[u8], field: &[u8]) -> CmdResult {
    let Some(c) = open(txn, s, key)? else {
        return Ok(Reply::Nil);
    };
    Ok(coll::get(txn, s, c, field)?.map_or(Reply::Nil, |v| Reply::Bulk(v.to_vec())))
}

pub fn hmget(txn: &Txn<'_>, s: Space<'_>, args: &[Vec<u8>]) -> CmdResult {
    let c = open(txn, s, &args[0])?;
    let mut out = Vec::with_capacity(args.len() - 1);
    for f in &args[1..] {
        out.push(match c {
            Some(c) => coll::get(txn, s, c, f)?.map_or(Reply::Nil, |v| Reply::Bulk(v.to_vec())),
            None => Reply::Nil,
        });
    }
    Ok(Reply::Array(out))
}

/// HDEL key field...: the number removed; the key goes with its last field.
pub fn hdel(txn: &mut Txn<'_>, s: Space<'_>, args: &[Vec<u8>]) -> CmdResult {
    let Some(c) = open(txn, s, &args[0])? else {
        return Ok(Reply::Integer(0));
    };
    let mut n = 0;
    for f in &args[1..] {
        n += i64::from(coll::remove(txn, s, c, f)?);
    }
    if n > 0 {
        coll::drop_if_empty(txn, s, &args[0], c)?;
    }
    Ok(Reply::Integer(n))
}

pub fn hlen(txn: &Txn<'_>, s: Space<'_>, key: &[u8]) -> CmdResult {
    Ok(Reply::Integer(match open(txn, s, key)? {
        Some(c) => coll::len(txn, s, c)?,
        None => 0,
    }))
}

pub fn hexists(txn: &Txn<'_>, s: Space<'_>, key: &[u8], field: &[u8]) -> CmdResult {
    let found = match open(txn, s, key)? {
        Some(c) => coll::get(txn, s, c, field)?.is_some(),
        None => false,
    };
    Ok(Reply::Integer(i64::from(found)))
}

pub fn hstrlen(txn: &Txn<'_>, s: Space<'_>, key: &[u8], field: &[u8]) -> CmdResult {
    let len = match open(txn, s, key)? {
        Some(c) => coll::get(txn, s, c, field)?.map_or(0, <[u8]>::len),
        None => 0,
    };
    Ok(Reply::Integer(len as i64))
}

/// What HKEYS, HVALS and HGETALL list.
#[derive(Clone, Copy)]
pub enum Listing {
    Keys,
    Values,
    All,
}

pub fn hlist(txn: &Txn<'_>, s: Space<'_>, key: &[u8], what: Listing) -> CmdResult {
    let Some(c) = open(txn, s, key)? else {
        return Ok(match what {
            Listing::All => Reply::Map(Vec::new()),
            _ => Reply::Array(Vec::new()),
        });
    };
    let fields = coll::members(txn, s, c, None)?;
    Ok(match what {
        Listing::Keys => Reply::Array(fields.map(|(f, _)| Reply::Bulk(f.to_vec())).collect()),
        Listing::Values => Reply::Array(fields.map(|(_, v)| Reply::Bulk(v.to_vec())).collect()),
        Listing::All => Reply::Map(
            fields
                .map(|(f, v)| (Reply::Bulk(f.to_vec()), Reply::Bulk(v.to_vec())))
                .collect(),
        ),
    })
}

/// HINCRBY key field increment.
pub fn hincrby(txn: &mut Txn<'_>, s: Space<'_>, args: &[Vec<u8>]) -> CmdResult {
    let by = parse_i64(&args[2]).ok_or_else(|| err(crate::keyspace::NOT_INTEGER))?;
    let c = coll::open_or_create(txn, s, &args[0], KIND_HASH)?;
    let old = match coll::get(txn, s, c, &args[1])? {
        Some(v) => parse_i64(v).ok_or_else(|| err("hash value is not an integer"))?,
        None => 0,
    };
    let new = old
        .checked_add(by)
        .ok_or_else(|| err("increment or decrement would overflow"))?;
    coll::put(txn, s, c, &args[1], new.to_string().as_bytes())?;
    Ok(Reply::Integer(new))
}

/// HINCRBYFLOAT key field increment.
pub fn hincrbyfloat(txn: &mut Txn<'_>, s: Space<'_>, args: &[Vec<u8>]) -> CmdResult {
    let by = parse_f64(&args[2]).ok_or_else(|| err("value is not a valid float"))?;
    let c = coll::open_or_create(txn, s, &args[0], KIND_HASH)?;
    let old = match coll::get(txn, s, c, &args[1])? {
        Some(v) => parse_f64(v).ok_or_else(|| err("hash value is not a float"))?,
        None => 0.0,
    };
    let new = old + by;
    if !new.is_finite() {
        return Err(err("increment would produce NaN or Infinity"));
    }
    let text = format_f64(new).into_bytes();
    coll::put(txn, s, c, &args[1], &text)?;
    Ok(Reply::Bulk(text))
}

/// HRANDFIELD key [count [WITHVALUES]]: random fields (module docs of
/// [`crate::collections::random_member`] on what "random" means here). A positive count
/// gives distinct fields, a run of consecutive ones from a random point; a negative one
/// `|count|` independent draws.
pub fn hrandfield(txn: &Txn<'_>, s: Space<'_>, args: &[Vec<u8>]) -> CmdResult {
    let count = match args.get(1) {
        Some(n) => Some(parse_i64(n).ok_or_else(|| err(crate::keyspace::NOT_INTEGER))?),
        None => None,
    };
    let with_values = match args.get(2) {
        Some(w) if w.eq_ignore_ascii_case(b"WITHVALUES") && args.len() == 3 => true,
        Some(_) => return Err(err("syntax error")),
        None => false,
    };
    let c = open(txn, s, &args[0])?;
    let seed = txn.timestamp();
    let Some(count) = count else {
        return Ok(match c {
            Some(c) => coll::random_member(txn, s, c, seed)?
                .map_or(Reply::Nil, |(f, _)| Reply::Bulk(f.to_vec())),
            None => Reply::Nil,
        });
    };
    let Some(c) = c else {
        return Ok(Reply::Array(Vec::new()));
    };
    let picked = random_run(txn, s, c, count, seed, with_values)?;
    Ok(if with_values {
        Reply::Pairs(
            picked
                .into_iter()
                .map(|(f, v)| (Reply::Bulk(f), Reply::Bulk(v)))
                .collect(),
        )
    } else {
        Reply::Array(picked.into_iter().map(|(f, _)| Reply::Bulk(f)).collect())
    })
}

/// Most draws of a negative count (HRANDFIELD, SRANDMEMBER, ZRANDMEMBER).
pub const RANDOM_DRAWS_MAX: u64 = 1 << 20;
/// Most bytes of members (and values) one such call copies.
pub const RANDOM_BYTES_MAX: usize = 1 << 28;

/// `count` members for HRANDFIELD/SRANDMEMBER: count >= 0 distinct (all if count >= len),
/// count < 0 `|count|` draws that may repeat. Bounded by Redis's own range checks.
pub fn random_run(
    txn: &Txn<'_>,
    s: Space<'_>,
    c: Coll,
    count: i64,
    seed: u64,
    with_values: bool,
) -> Result<Vec<coll::OwnedMember>, CmdError> {
    // Values are copied only for callers that reply with them.
    let own = |(m, v): (&[u8], &[u8])| {
        (
            m.to_vec(),
            if with_values { v.to_vec() } else { Vec::new() },
        )
    };
    if count >= 0 {
        let want = count as usize;
        let len = coll::len(txn, s, c)? as usize;
        if want >= len {
            return Ok(coll::members(txn, s, c, None)?.map(own).collect());
        }
        let Some((first, _)) = coll::random_member(txn, s, c, seed)? else {
            return Ok(Vec::new());
        };
        let first = first.to_vec();
        let mut out: Vec<coll::OwnedMember> = Vec::with_capacity(want);
        if let Some(v) = coll::get(txn, s, c, &first)? {
            out.push((first.clone(), v.to_vec()));
        }
        out.extend(
            coll::members(txn, s, c, Some(&first))?
                .chain(coll::members(txn, s, c, None)?)
                .take(want.saturating_sub(1))
                .map(own),
        );
        out.truncate(want);
        return Ok(out);
    }
    if count == i64::MIN {
        // Redis parses the count in [-LONG_MAX, LONG_MAX] and says so.
        return Err(err(
            "value is out of range, value must between -9223372036854775807 and 9223372036854775807",
        ));
    }
    let n = count.unsigned_abs();
    if n > (i64::MAX / 2) as u64 {
        return Err(err("value is out of range"));
    }
    // Redis would try to build any reply; one request must not hold a worker (and its
    // memory) that long here.
    if n > RANDOM_DRAWS_MAX {
        return Err(err(&format!(
            "count is out of range: Verso draws at most {RANDOM_DRAWS_MAX} random members per call"
        )));
    }
    let mut out = Vec::with_capacity(n.min(1 << 16) as usize);
    let mut bytes = 0usize;
    for i in 0..n {
        match coll::random_member(txn, s, c, seed.wrapping_add(i.wrapping_mul(0x9e37_79b9)))? {
            Some(hit) => {
                bytes += hit.0.len() + if with_values { hit.1.len() } else { 0 };
                if bytes > RANDOM_BYTES_MAX {
                    return Err(err(&format!(
                        "reply too large: Verso draws at most {RANDOM_BYTES_MAX} bytes of random members per call"
                    )));
                }
                out.push(own(hit));
            }
            None => break,
        }
    }
    Ok(out)
}
