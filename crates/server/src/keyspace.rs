//! The data commands on one engine transaction: each function runs inside a [`Txn`] the
//! caller owns, so a single command and a whole MULTI/EXEC block share one code path.
//! Values are framed with their kind and deadline ([`crate::stored`]); Verso stores strings
//! only so far. More string commands are in [`crate::strings`], whole-key ones in
//! [`crate::keys`], expiry in [`crate::expiry`].

use std::ops::Bound;

use verso_engine::{Error, Txn};

use crate::collections;
use crate::expiry::{self, When};
use crate::resp::Reply;
use crate::stored::{self, Space, Stored, KIND_STRING};

/// What a command failed with: a reply to send (a Redis error), or an engine error (a
/// conflict to retry, or a limit).
#[derive(Debug)]
pub enum CmdError {
    /// Reply with this error and keep going (wrong type, not an integer, syntax...).
    Reply(Reply),
    /// The engine refused; conflicts are retried by the caller.
    Engine(Error),
}

impl From<Error> for CmdError {
    fn from(e: Error) -> Self {
        CmdError::Engine(e)
    }
}

pub type CmdResult = Result<Reply, CmdError>;

/// Keys a scan returned, and the last key it looked at (`None` at the end).
pub type ScanPage = (Vec<Vec<u8>>, Option<Vec<u8>>);

fn err(msg: &str) -> CmdError {
    CmdError::Reply(Reply::err(msg))
}

pub(crate) const NOT_INTEGER: &str = "value is not an integer or out of range";

/// Parses an argument as a Redis integer (no spaces, no `+`, fits in `i64`).
pub fn parse_i64(b: &[u8]) -> Option<i64> {
    let s = std::str::from_utf8(b).ok()?;
    if s.is_empty() || s.starts_with('+') || (s.len() > 1 && s.starts_with('0')) || s == "-0" {
        return None;
    }
    s.parse().ok()
}

pub fn get(txn: &Txn<'_>, s: Space<'_>, key: &[u8]) -> CmdResult {
    Ok(match stored::read_string(txn, s, key)? {
        Some(v) => Reply::Bulk(v.to_vec()),
        None => Reply::Nil,
    })
}

/// SET key value [NX|XX] [GET] [EX s|PX ms|EXAT t|PXAT t|KEEPTTL].
pub fn set(txn: &mut Txn<'_>, s: Space<'_>, args: &[Vec<u8>]) -> CmdResult {
    let (key, value) = (&args[0], &args[1]);
    let (mut nx, mut xx, mut get_old, mut keep_ttl) = (false, false, false, false);
    let mut deadline = None;
    let mut i = 2;
    while i < args.len() {
        let opt = &args[i];
        match opt.to_ascii_uppercase().as_slice() {
            b"NX" => nx = true,
            b"XX" => xx = true,
            b"GET" => get_old = true,
            b"KEEPTTL" if deadline.is_none() => keep_ttl = true,
            _ => match (When::parse(opt), args.get(i + 1)) {
                (Some(when), Some(n)) if deadline.is_none() && !keep_ttl => {
                    deadline = Some(expiry::deadline_for_set(n, when, s.now_ms, "set")?);
                    i += 1;
                }
                _ => return Err(err("syntax error")),
            },
        }
        i += 1;
    }
    if nx && xx {
        return Err(err("syntax error"));
    }
    if !(nx || xx || get_old || keep_ttl) {
        // A blind write: the reply does not depend on the old value, so nothing is read
        // (no predicate to validate at commit; first-committer-wins still orders writers).
        stored::write(txn, s, key, KIND_STRING, deadline, value)?;
        return Ok(Reply::ok());
    }
    let old = if get_old {
        stored::read_string_with_deadline(txn, s, key)?.map(|(v, d)| (Some(v.to_vec()), d))
    } else {
        stored::read(txn, s, key)?.map(|v| (None, v.deadline))
    };
    let write = !(nx && old.is_some() || xx && old.is_none());
    if write {
        collections::bury_root(txn, s, key)?;
        let deadline = if keep_ttl {
            old.as_ref().and_then(|(_, d)| *d)
        } else {
            deadline
        };
        stored::write(txn, s, key, KIND_STRING, deadline, value)?;
    }
    Ok(match (get_old, write) {
        (true, _) => old.and_then(|(v, _)| v).map_or(Reply::Nil, Reply::Bulk),
        (false, true) => Reply::ok(),
        (false, false) => Reply::Nil,
    })
}

pub fn setnx(txn: &mut Txn<'_>, s: Space<'_>, key: &[u8], value: &[u8]) -> CmdResult {
    if stored::exists(txn, s, key)? {
        return Ok(Reply::Integer(0));
    }
    stored::write_string(txn, s, key, value)?;
    Ok(Reply::Integer(1))
}

pub fn getset(txn: &mut Txn<'_>, s: Space<'_>, key: &[u8], value: &[u8]) -> CmdResult {
    let old = stored::read_string(txn, s, key)?.map(<[u8]>::to_vec);
    stored::write_string(txn, s, key, value)?;
    Ok(old.map_or(Reply::Nil, Reply::Bulk))
}

pub fn getdel(txn: &mut Txn<'_>, s: Space<'_>, key: &[u8]) -> CmdResult {
    let old = stored::read_string(txn, s, key)?.map(<[u8]>::to_vec);
    if old.is_some() {
        txn.delete(s.data, key)?;
    }
    Ok(old.map_or(Reply::Nil, Reply::Bulk))
}

/// MGET: nil for an absent key and for one that holds another kind, as Redis answers.
pub fn mget(txn: &Txn<'_>, s: Space<'_>, keys: &[Vec<u8>]) -> CmdResult {
    let mut out = Vec::with_capacity(keys.len());
    for k in keys {
        out.push(match stored::read(txn, s, k)? {
            Some(v) if v.kind == KIND_STRING => Reply::Bulk(v.payload.to_vec()),
            _ => Reply::Nil,
        });
    }
    Ok(Reply::Array(out))
}

pub fn mset(txn: &mut Txn<'_>, s: Space<'_>, pairs: &[Vec<u8>], only_new: bool) -> CmdResult {
    if pairs.is_empty() || !pairs.len().is_multiple_of(2) {
        let name = if only_new { "msetnx" } else { "mset" };
        return Err(err(&format!(
            "wrong number of arguments for '{name}' command"
        )));
    }
    if only_new {
        for kv in pairs.chunks(2) {
            if stored::exists(txn, s, &kv[0])? {
                return Ok(Reply::Integer(0));
            }
        }
    }
    for kv in pairs.chunks(2) {
        stored::write_string(txn, s, &kv[0], &kv[1])?;
    }
    Ok(if only_new {
        Reply::Integer(1)
    } else {
        Reply::ok()
    })
}

/// DEL/UNLINK: the number of keys that existed.
pub fn del(txn: &mut Txn<'_>, s: Space<'_>, keys: &[Vec<u8>]) -> CmdResult {
    let mut n = 0;
    for k in keys {
        // A present key is deleted whatever it holds; an expired one is left to the expirer
        // (deleting it would make DEL of an absent key a write).
        if stored::exists(txn, s, k)? {
            collections::delete_key(txn, s, k)?;
            n += 1;
        }
    }
    Ok(Reply::Integer(n))
}

/// EXISTS: counts repeated keys each time, as Redis does.
pub fn exists(txn: &Txn<'_>, s: Space<'_>, keys: &[Vec<u8>]) -> CmdResult {
    let mut n = 0;
    for k in keys {
        n += i64::from(stored::exists(txn, s, k)?);
    }
    Ok(Reply::Integer(n))
}

/// INCR, INCRBY and the like: the value changes, its time to live stays.
pub fn incr_by(txn: &mut Txn<'_>, s: Space<'_>, key: &[u8], by: i64) -> CmdResult {
    let (current, deadline) = match stored::read_string_with_deadline(txn, s, key)? {
        None => (0, None),
        Some((v, d)) => (parse_i64(v).ok_or_else(|| err(NOT_INTEGER))?, d),
    };
    let next = current
        .checked_add(by)
        .ok_or_else(|| err("increment or decrement would overflow"))?;
    stored::write(
        txn,
        s,
        key,
        KIND_STRING,
        deadline,
        next.to_string().as_bytes(),
    )?;
    Ok(Reply::Integer(next))
}

pub fn append(txn: &mut Txn<'_>, s: Space<'_>, key: &[u8], tail: &[u8]) -> CmdResult {
    let (mut v, deadline) = match stored::read_string_with_deadline(txn, s, key)? {
        None => (Vec::new(), None),
        Some((v, d)) => (v.to_vec(), d),
    };
    v.extend_from_slice(tail);
    let len = v.len();
    stored::write(txn, s, key, KIND_STRING, deadline, &v)?;
    Ok(Reply::Integer(len as i64))
}

pub fn strlen(txn: &Txn<'_>, s: Space<'_>, key: &[u8]) -> CmdResult {
    Ok(Reply::Integer(
        stored::read_string(txn, s, key)?.map_or(0, |v| v.len() as i64),
    ))
}

/// GETRANGE key start end (inclusive, negative offsets count from the end).
pub fn getrange(txn: &Txn<'_>, s: Space<'_>, key: &[u8], start: &[u8], end: &[u8]) -> CmdResult {
    let (Some(st), Some(e)) = (parse_i64(start), parse_i64(end)) else {
        return Err(err(NOT_INTEGER));
    };
    let v = stored::read_string(txn, s, key)?.unwrap_or_default();
    Ok(Reply::Bulk(byte_range(v, st, e).to_vec()))
}

/// GETRANGE's bytes of `v`: `start..=end`, negative offsets counted from the end, clamped
/// as Redis clamps them (also the transaction gateway's).
pub fn byte_range(v: &[u8], mut start: i64, mut end: i64) -> &[u8] {
    let len = v.len() as i64;
    if start < 0 && end < 0 && start > end {
        return &[];
    }
    if start < 0 {
        start = (len + start).max(0);
    }
    if end < 0 {
        end = (len + end).max(0);
    }
    end = end.min(len - 1);
    if len == 0 || start > end {
        return &[];
    }
    &v[start as usize..=end as usize]
}

/// The name TYPE answers for a stored kind.
pub fn kind_name(kind: u8) -> &'static str {
    match kind {
        KIND_STRING => "string",
        collections::KIND_HASH => "hash",
        collections::KIND_SET => "set",
        collections::KIND_ZSET => "zset",
        collections::KIND_LIST => "list",
        _ => "unknown",
    }
}

pub fn type_of(txn: &Txn<'_>, s: Space<'_>, key: &[u8]) -> CmdResult {
    let name = stored::read(txn, s, key)?.map_or("none", |v| kind_name(v.kind));
    Ok(Reply::Simple(name.into()))
}

/// Keys in `[from, ..)` (from excluded), up to `limit` looked at, filtered by `pattern` and
/// `kind`, expired ones skipped: the keys and the last key looked at (for SCAN's cursor), or
/// `None` at the end.
pub fn scan_keys(
    txn: &Txn<'_>,
    s: Space<'_>,
    from: Option<&[u8]>,
    limit: usize,
    pattern: Option<&[u8]>,
    kind: Option<u8>,
) -> Result<ScanPage, CmdError> {
    let lo = match from {
        Some(k) => Bound::Excluded(k),
        None => Bound::Unbounded,
    };
    let mut keys = Vec::new();
    let mut last = None;
    let mut looked = 0;
    for (k, v) in txn.range(s.data, (lo, Bound::Unbounded))? {
        looked += 1;
        let live = Stored::decode(v)
            .is_some_and(|v| !v.expired_at(s.now_ms) && kind.is_none_or(|want| v.kind == want));
        if live && pattern.is_none_or(|p| crate::glob::matches(p, k)) {
            keys.push(k.to_vec());
        }
        if looked == limit {
            last = Some(k.to_vec());
            break;
        }
    }
    Ok((keys, last))
}

/// DBSIZE: the keys that have not expired (one pass over the database).
pub fn dbsize(txn: &Txn<'_>, s: Space<'_>) -> CmdResult {
    let mut n = 0;
    for (_, v) in txn.range(s.data, ..)? {
        n += i64::from(Stored::decode(v).is_some_and(|v| !v.expired_at(s.now_ms)));
    }
    Ok(Reply::Integer(n))
}

/// VRANGE start end [LIMIT n] [REV]: ordered keys and values in `[start, end]` (`-` and `+`
/// for unbounded ends), as a flat array of key, value pairs.
pub fn vrange(txn: &Txn<'_>, s: Space<'_>, args: &[Vec<u8>]) -> CmdResult {
    let bound = |b: &[u8], open: &[u8]| {
        if b == open {
            Bound::Unbounded
        } else {
            Bound::Included(b.to_vec())
        }
    };
    let lo = bound(&args[0], b"-");
    let hi = bound(&args[1], b"+");
    let (mut limit, mut rev) = (usize::MAX, false);
    let mut i = 2;
    while i < args.len() {
        match args[i].to_ascii_uppercase().as_slice() {
            b"LIMIT" => {
                let n = args
                    .get(i + 1)
                    .and_then(|n| parse_i64(n))
                    .filter(|&n| n >= 0)
                    .ok_or_else(|| err(NOT_INTEGER))?;
                limit = n as usize;
                i += 2;
            }
            b"REV" => {
                rev = true;
                i += 1;
            }
            _ => return Err(err("syntax error")),
        }
    }
    let bounds = (
        lo.as_ref().map(Vec::as_slice),
        hi.as_ref().map(Vec::as_slice),
    );
    let it = if rev {
        txn.range_rev(s.data, bounds)?
    } else {
        txn.range(s.data, bounds)?
    };
    let mut out = Vec::new();
    let strings = it.filter_map(|(k, v)| {
        let v = Stored::decode(v)?;
        (v.kind == KIND_STRING && !v.expired_at(s.now_ms)).then_some((k, v.payload))
    });
    for (k, v) in strings.take(limit) {
        out.push(Reply::Bulk(k.to_vec()));
        out.push(Reply::Bulk(v.to_vec()));
    }
    Ok(Reply::Array(out))
}

#[cfg(test)]
mod tests {
    use super::parse_i64;

    #[test]
    fn integers_parse_like_redis() {
        assert_eq!(parse_i64(b"42"), Some(42));
        assert_eq!(parse_i64(b"-7"), Some(-7));
        assert_eq!(parse_i64(b"0"), Some(0));
        for bad in [
            &b""[..],
            b"+1",
            b"01",
            b"-0",
            b" 1",
            b"1.5",
            b"9223372036854775808",
        ] {
            assert_eq!(parse_i64(bad), None, "{bad:?}");
        }
        assert_eq!(parse_i64(b"9223372036854775807"), Some(i64::MAX));
    }
}
