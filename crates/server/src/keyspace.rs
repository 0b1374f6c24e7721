//! The data commands on one engine transaction: each function runs inside a [`Txn`] the
//! caller owns, so a single command and a whole MULTI/EXEC block share one code path.
//! Verso stores strings only (Redis's other types are not supported yet). More string
//! commands are in [`crate::strings`], whole-key ones in [`crate::keys`].

use std::ops::Bound;

use verso_engine::{Error, Table, Txn};

use crate::resp::Reply;

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

pub fn get(txn: &Txn<'_>, t: &Table, key: &[u8]) -> CmdResult {
    Ok(match txn.get(t, key)? {
        Some(v) => Reply::Bulk(v.to_vec()),
        None => Reply::Nil,
    })
}

/// SET key value [NX|XX] [GET]; expirations are refused (no TTLs yet).
pub fn set(txn: &mut Txn<'_>, t: &Table, args: &[Vec<u8>]) -> CmdResult {
    let (key, value) = (&args[0], &args[1]);
    let (mut nx, mut xx, mut get_old) = (false, false, false);
    for opt in &args[2..] {
        match opt.to_ascii_uppercase().as_slice() {
            b"NX" => nx = true,
            b"XX" => xx = true,
            b"GET" => get_old = true,
            b"EX" | b"PX" | b"EXAT" | b"PXAT" | b"KEEPTTL" => {
                return Err(err(
                    "expiration (EX/PX/EXAT/PXAT/KEEPTTL) is not supported yet",
                ))
            }
            _ => return Err(err("syntax error")),
        }
    }
    if nx && xx {
        return Err(err("syntax error"));
    }
    if !(nx || xx || get_old) {
        // A blind write: the reply does not depend on the old value, so nothing is read
        // (no predicate to validate at commit; first-committer-wins still orders writers).
        txn.put(t, key, value)?;
        return Ok(Reply::ok());
    }
    let old = txn.get(t, key)?.map(<[u8]>::to_vec);
    let write = !(nx && old.is_some() || xx && old.is_none());
    if write {
        txn.put(t, key, value)?;
    }
    Ok(match (get_old, write) {
        (true, _) => old.map_or(Reply::Nil, Reply::Bulk),
        (false, true) => Reply::ok(),
        (false, false) => Reply::Nil,
    })
}

pub fn setnx(txn: &mut Txn<'_>, t: &Table, key: &[u8], value: &[u8]) -> CmdResult {
    if txn.get(t, key)?.is_some() {
        return Ok(Reply::Integer(0));
    }
    txn.put(t, key, value)?;
    Ok(Reply::Integer(1))
}

pub fn getset(txn: &mut Txn<'_>, t: &Table, key: &[u8], value: &[u8]) -> CmdResult {
    let old = txn.get(t, key)?.map(<[u8]>::to_vec);
    txn.put(t, key, value)?;
    Ok(old.map_or(Reply::Nil, Reply::Bulk))
}

pub fn getdel(txn: &mut Txn<'_>, t: &Table, key: &[u8]) -> CmdResult {
    let old = txn.get(t, key)?.map(<[u8]>::to_vec);
    if old.is_some() {
        txn.delete(t, key)?;
    }
    Ok(old.map_or(Reply::Nil, Reply::Bulk))
}

pub fn mget(txn: &Txn<'_>, t: &Table, keys: &[Vec<u8>]) -> CmdResult {
    let mut out = Vec::with_capacity(keys.len());
    for k in keys {
        out.push(
            txn.get(t, k)?
                .map_or(Reply::Nil, |v| Reply::Bulk(v.to_vec())),
        );
    }
    Ok(Reply::Array(out))
}

pub fn mset(txn: &mut Txn<'_>, t: &Table, pairs: &[Vec<u8>], only_new: bool) -> CmdResult {
    if pairs.is_empty() || !pairs.len().is_multiple_of(2) {
        let name = if only_new { "msetnx" } else { "mset" };
        return Err(err(&format!(
            "wrong number of arguments for '{name}' command"
        )));
    }
    if only_new {
        for kv in pairs.chunks(2) {
            if txn.get(t, &kv[0])?.is_some() {
                return Ok(Reply::Integer(0));
            }
        }
    }
    for kv in pairs.chunks(2) {
        txn.put(t, &kv[0], &kv[1])?;
    }
    Ok(if only_new {
        Reply::Integer(1)
    } else {
        Reply::ok()
    })
}

/// DEL/UNLINK: the number of keys that existed.
pub fn del(txn: &mut Txn<'_>, t: &Table, keys: &[Vec<u8>]) -> CmdResult {
    let mut n = 0;
    for k in keys {
        if txn.get(t, k)?.is_some() {
            txn.delete(t, k)?;
            n += 1;
        }
    }
    Ok(Reply::Integer(n))
}

/// EXISTS: counts repeated keys each time, as Redis does.
pub fn exists(txn: &Txn<'_>, t: &Table, keys: &[Vec<u8>]) -> CmdResult {
    let mut n = 0;
    for k in keys {
        n += i64::from(txn.get(t, k)?.is_some());
    }
    Ok(Reply::Integer(n))
}

pub fn incr_by(txn: &mut Txn<'_>, t: &Table, key: &[u8], by: i64) -> CmdResult {
    let current = match txn.get(t, key)? {
        None => 0,
        Some(v) => parse_i64(v).ok_or_else(|| err(NOT_INTEGER))?,
    };
    let next = current
        .checked_add(by)
        .ok_or_else(|| err("increment or decrement would overflow"))?;
    txn.put(t, key, next.to_string())?;
    Ok(Reply::Integer(next))
}

pub fn append(txn: &mut Txn<'_>, t: &Table, key: &[u8], tail: &[u8]) -> CmdResult {
    let mut v = txn.get(t, key)?.map(<[u8]>::to_vec).unwrap_or_default();
    v.extend_from_slice(tail);
    let len = v.len();
    txn.put(t, key, v)?;
    Ok(Reply::Integer(len as i64))
}

pub fn strlen(txn: &Txn<'_>, t: &Table, key: &[u8]) -> CmdResult {
    Ok(Reply::Integer(
        txn.get(t, key)?.map_or(0, |v| v.len() as i64),
    ))
}

/// GETRANGE key start end (inclusive, negative offsets count from the end).
pub fn getrange(txn: &Txn<'_>, t: &Table, key: &[u8], start: &[u8], end: &[u8]) -> CmdResult {
    let (Some(mut s), Some(mut e)) = (parse_i64(start), parse_i64(end)) else {
        return Err(err(NOT_INTEGER));
    };
    let v = txn.get(t, key)?.unwrap_or_default();
    let len = v.len() as i64;
    if s < 0 && e < 0 && s > e {
        return Ok(Reply::Bulk(Vec::new()));
    }
    if s < 0 {
        s = (len + s).max(0);
    }
    if e < 0 {
        e = (len + e).max(0);
    }
    e = e.min(len - 1);
    if len == 0 || s > e {
        return Ok(Reply::Bulk(Vec::new()));
    }
    Ok(Reply::Bulk(v[s as usize..=e as usize].to_vec()))
}

pub fn type_of(txn: &Txn<'_>, t: &Table, key: &[u8]) -> CmdResult {
    Ok(Reply::Simple(
        if txn.get(t, key)?.is_some() {
            "string"
        } else {
            "none"
        }
        .into(),
    ))
}

/// Keys in `[from, ..)` (from excluded when `after`), up to `limit`, filtered by `pattern`:
/// the keys and the last key looked at (for SCAN's cursor), or `None` at the end.
pub fn scan_keys(
    txn: &Txn<'_>,
    t: &Table,
    from: Option<&[u8]>,
    limit: usize,
    pattern: Option<&[u8]>,
) -> Result<ScanPage, CmdError> {
    let lo = match from {
        Some(k) => Bound::Excluded(k),
        None => Bound::Unbounded,
    };
    let mut keys = Vec::new();
    let mut last = None;
    let mut looked = 0;
    for (k, _) in txn.range(t, (lo, Bound::Unbounded))? {
        looked += 1;
        if pattern.is_none_or(|p| crate::glob::matches(p, k)) {
            keys.push(k.to_vec());
        }
        if looked == limit {
            last = Some(k.to_vec());
            break;
        }
    }
    Ok((keys, last))
}

/// VRANGE start end [LIMIT n] [REV]: ordered keys and values in `[start, end]` (`-` and `+`
/// for unbounded ends), as a flat array of key, value pairs.
pub fn vrange(txn: &Txn<'_>, t: &Table, args: &[Vec<u8>]) -> CmdResult {
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
        txn.range_rev(t, bounds)?
    } else {
        txn.range(t, bounds)?
    };
    let mut out = Vec::new();
    for (k, v) in it.take(limit) {
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
