//! Commands on whole keys (RENAME, RENAMENX, COPY, MOVE, RANDOMKEY, TOUCH, OBJECT), each
//! inside the caller's transaction like the rest of [`crate::keyspace`]. Every key holds a
//! string for now; when other types arrive, these move every record of a key.

use std::ops::Bound;

use verso_engine::{Table, Txn};

use crate::keyspace::{parse_i64, CmdError, CmdResult, NOT_INTEGER};
use crate::resp::Reply;

fn err(msg: &str) -> CmdError {
    CmdError::Reply(Reply::err(msg))
}

const NO_SUCH_KEY: &str = "no such key";
const SAME_OBJECT: &str = "source and destination objects are the same";

/// RENAME key newkey (`nx` false: `+OK`, overwriting) or RENAMENX (`nx` true: 1, or 0 when
/// `newkey` exists).
pub fn rename(txn: &mut Txn<'_>, t: &Table, from: &[u8], to: &[u8], nx: bool) -> CmdResult {
    let Some(value) = txn.get(t, from)?.map(<[u8]>::to_vec) else {
        return Err(err(NO_SUCH_KEY));
    };
    if from == to {
        return Ok(if nx { Reply::Integer(0) } else { Reply::ok() });
    }
    if nx && txn.get(t, to)?.is_some() {
        return Ok(Reply::Integer(0));
    }
    txn.put(t, to, &value)?;
    txn.delete(t, from)?;
    Ok(if nx { Reply::Integer(1) } else { Reply::ok() })
}

/// A database number argument, as an index into `tables`.
fn database<'t>(tables: &'t [Table], arg: &[u8]) -> Result<&'t Table, CmdError> {
    let n = parse_i64(arg).ok_or_else(|| err(NOT_INTEGER))?;
    usize::try_from(n)
        .ok()
        .and_then(|n| tables.get(n))
        .ok_or_else(|| err("DB index is out of range"))
}

/// COPY source destination [DB destination-db] [REPLACE]: 1 if copied, 0 if `source` is
/// absent or `destination` exists (without REPLACE).
pub fn copy(txn: &mut Txn<'_>, t: &Table, tables: &[Table], args: &[Vec<u8>]) -> CmdResult {
    let (from, to) = (&args[0], &args[1]);
    let (mut dst, mut replace) = (t, false);
    let mut i = 2;
    while i < args.len() {
        match args[i].to_ascii_uppercase().as_slice() {
            b"REPLACE" => replace = true,
            b"DB" if i + 1 < args.len() => {
                dst = database(tables, &args[i + 1])?;
                i += 1;
            }
            _ => return Err(err("syntax error")),
        }
        i += 1;
    }
    if dst == t && from == to {
        return Err(err(SAME_OBJECT));
    }
    let Some(value) = txn.get(t, from)?.map(<[u8]>::to_vec) else {
        return Ok(Reply::Integer(0));
    };
    if !replace && txn.get(dst, to)?.is_some() {
        return Ok(Reply::Integer(0));
    }
    txn.put(dst, to, &value)?;
    Ok(Reply::Integer(1))
}

/// MOVE key db: 1 if moved, 0 if `key` is absent here or present there.
pub fn move_key(
    txn: &mut Txn<'_>,
    t: &Table,
    tables: &[Table],
    key: &[u8],
    db: &[u8],
) -> CmdResult {
    let dst = database(tables, db)?;
    if dst == t {
        return Err(err(SAME_OBJECT));
    }
    let Some(value) = txn.get(t, key)?.map(<[u8]>::to_vec) else {
        return Ok(Reply::Integer(0));
    };
    if txn.get(dst, key)?.is_some() {
        return Ok(Reply::Integer(0));
    }
    txn.put(dst, key, &value)?;
    txn.delete(t, key)?;
    Ok(Reply::Integer(1))
}

/// TOUCH key...: how many exist (Verso keeps no access times to update).
pub fn touch(txn: &Txn<'_>, t: &Table, keys: &[Vec<u8>]) -> CmdResult {
    let mut n = 0;
    for k in keys {
        n += i64::from(txn.get(t, k)?.is_some());
    }
    Ok(Reply::Integer(n))
}

/// RANDOMKEY: the first key at or after a random point of the key space (wrapping to the
/// first key), so a key after a wide gap is likelier than one in a dense run: not uniform,
/// but O(log n) and never a scan. Nil when the database is empty.
pub fn random_key(txn: &Txn<'_>, t: &Table) -> CmdResult {
    // The transaction's timestamp (the cycle counter) seeds the draw.
    let point = splitmix64(txn.timestamp()).to_be_bytes();
    let first = |lo: Bound<&[u8]>| -> Result<Option<Vec<u8>>, CmdError> {
        Ok(txn
            .range(t, (lo, Bound::Unbounded))?
            .next()
            .map(|(k, _)| k.to_vec()))
    };
    let key = match first(Bound::Included(&point[..]))? {
        Some(k) => Some(k),
        None => first(Bound::Unbounded)?,
    };
    Ok(key.map_or(Reply::Nil, Reply::Bulk))
}

fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The encoding Redis would report for a string value.
fn string_encoding(v: &[u8]) -> &'static str {
    if v.len() <= 20 && parse_i64(v).is_some() {
        "int"
    } else if v.len() <= 44 {
        "embstr"
    } else {
        "raw"
    }
}

/// OBJECT ENCODING|FREQ|IDLETIME|REFCOUNT key, OBJECT HELP. Verso keeps no access times
/// or counts: IDLETIME answers 0 and REFCOUNT 1 for a key that exists, and FREQ the error
/// Redis gives when no LFU policy is set (Verso evicts nothing).
pub fn object(txn: &Txn<'_>, t: &Table, args: &[Vec<u8>]) -> CmdResult {
    let sub = args[0].to_ascii_uppercase();
    if sub == b"HELP" && args.len() == 1 {
        let lines = [
            "OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "ENCODING <key>",
            "    Return the kind of internal representation Redis would use for <key>.",
            "FREQ <key>",
            "    Verso keeps no access frequency: answers an error, as Redis without an LFU policy.",
            "IDLETIME <key>",
            "    Verso keeps no access times: 0 for an existing key.",
            "REFCOUNT <key>",
            "    1 for an existing key.",
            "HELP",
            "    Print this help.",
        ];
        return Ok(Reply::Array(
            lines.iter().map(|l| Reply::Simple((*l).into())).collect(),
        ));
    }
    let known = matches!(
        sub.as_slice(),
        b"ENCODING" | b"FREQ" | b"IDLETIME" | b"REFCOUNT"
    );
    if !known || args.len() != 2 {
        return Err(CmdError::Reply(Reply::Error(format!(
            "ERR unknown subcommand or wrong number of arguments for '{}'. Try OBJECT HELP.",
            String::from_utf8_lossy(&args[0])
        ))));
    }
    let Some(v) = txn.get(t, &args[1])? else {
        return Ok(Reply::Nil);
    };
    Ok(match sub.as_slice() {
        b"ENCODING" => Reply::Bulk(string_encoding(v).as_bytes().to_vec()),
        b"IDLETIME" => Reply::Integer(0),
        b"REFCOUNT" => Reply::Integer(1),
        _ => {
            return Err(err(
                "An LFU maxmemory policy is not selected, access frequency not tracked. Verso does not evict keys.",
            ))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodings_follow_redis_thresholds() {
        assert_eq!(string_encoding(b"12345"), "int");
        assert_eq!(string_encoding(b"-9223372036854775808"), "int");
        assert_eq!(string_encoding(b"012"), "embstr");
        assert_eq!(string_encoding(&[b'a'; 44]), "embstr");
        assert_eq!(string_encoding(&[b'a'; 45]), "raw");
    }
}
