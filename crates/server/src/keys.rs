//! Commands on whole keys (RENAME, RENAMENX, COPY, MOVE, RANDOMKEY, TOUCH, OBJECT), each
//! inside the caller's transaction like the rest of [`crate::keyspace`]. Every key holds a
//! string for now; when other types arrive, these move every record of a key. A key keeps
//! its time to live when it is renamed, copied or moved, as in Redis.

use std::ops::Bound;

use verso_engine::Txn;

use crate::collections;
use crate::keyspace::{parse_i64, CmdError, CmdResult, NOT_INTEGER};
use crate::resp::Reply;
use crate::stored::{self, Space, Spaces, Stored};

fn err(msg: &str) -> CmdError {
    CmdError::Reply(Reply::err(msg))
}

const NO_SUCH_KEY: &str = "no such key";
const SAME_OBJECT: &str = "source and destination objects are the same";

/// RENAME key newkey (`nx` false: `+OK`, overwriting) or RENAMENX (`nx` true: 1, or 0 when
/// `newkey` exists).
pub fn rename(txn: &mut Txn<'_>, s: Space<'_>, from: &[u8], to: &[u8], nx: bool) -> CmdResult {
    let Some(value) = read_owned(txn, s, from)? else {
        return Err(err(NO_SUCH_KEY));
    };
    if from == to {
        return Ok(if nx { Reply::Integer(0) } else { Reply::ok() });
    }
    if nx && stored::exists(txn, s, to)? {
        return Ok(Reply::Integer(0));
    }
    value.move_to(txn, s, to)?;
    txn.delete(s.data, from)?;
    Ok(if nx { Reply::Integer(1) } else { Reply::ok() })
}

/// A key's value taken out of the transaction's borrow, to be written elsewhere.
struct Owned {
    kind: u8,
    deadline: Option<u64>,
    payload: Vec<u8>,
}

impl Owned {
    fn stored(&self) -> Stored<'_> {
        Stored {
            kind: self.kind,
            deadline: self.deadline,
            payload: &self.payload,
        }
    }

    /// Writes this root at `key` in `s` (whatever was there is replaced), its collection's
    /// registry entry following it: RENAME and MOVE (the caller deletes the old root).
    fn move_to(&self, txn: &mut Txn<'_>, s: Space<'_>, key: &[u8]) -> Result<(), CmdError> {
        collections::bury_root(txn, s, key)?;
        stored::write(txn, s, key, self.kind, self.deadline, &self.payload)?;
        if let Some(id) = collections::id_of(&self.stored()) {
            collections::rehome(txn, s, id, key)?;
        }
        Ok(())
    }

    /// Writes a copy of this value at `key` in `s` (a collection's elements copied under a
    /// new id): COPY.
    fn copy_to(&self, txn: &mut Txn<'_>, s: Space<'_>, key: &[u8]) -> Result<(), CmdError> {
        collections::bury_root(txn, s, key)?;
        match collections::id_of(&self.stored()) {
            None => stored::write(txn, s, key, self.kind, self.deadline, &self.payload),
            Some(id) => collections::clone_to(
                txn,
                s,
                key,
                collections::Coll {
                    id,
                    kind: self.kind,
                    deadline: self.deadline,
                },
            ),
        }
    }
}

fn read_owned(txn: &Txn<'_>, s: Space<'_>, key: &[u8]) -> Result<Option<Owned>, CmdError> {
    Ok(stored::read(txn, s, key)?.map(|v: Stored<'_>| Owned {
        kind: v.kind,
        deadline: v.deadline,
        payload: v.payload.to_vec(),
    }))
}

/// A database number argument.
fn database<'a>(all: Spaces<'a>, arg: &[u8]) -> Result<Space<'a>, CmdError> {
    let n = parse_i64(arg).ok_or_else(|| err(NOT_INTEGER))?;
    usize::try_from(n)
        .ok()
        .and_then(|n| all.get(n))
        .ok_or_else(|| err("DB index is out of range"))
}

/// COPY source destination [DB destination-db] [REPLACE]: 1 if copied, 0 if `source` is
/// absent or `destination` exists (without REPLACE).
pub fn copy(txn: &mut Txn<'_>, s: Space<'_>, all: Spaces<'_>, args: &[Vec<u8>]) -> CmdResult {
    let (from, to) = (&args[0], &args[1]);
    let (mut dst, mut replace) = (s, false);
    let mut i = 2;
    while i < args.len() {
        match args[i].to_ascii_uppercase().as_slice() {
            b"REPLACE" => replace = true,
            b"DB" if i + 1 < args.len() => {
                dst = database(all, &args[i + 1])?;
                i += 1;
            }
            _ => return Err(err("syntax error")),
        }
        i += 1;
    }
    if dst.same_db(&s) && from == to {
        return Err(err(SAME_OBJECT));
    }
    let Some(value) = read_owned(txn, s, from)? else {
        return Ok(Reply::Integer(0));
    };
    if !replace && stored::exists(txn, dst, to)? {
        return Ok(Reply::Integer(0));
    }
    value.copy_to(txn, dst, to)?;
    Ok(Reply::Integer(1))
}

/// MOVE key db: 1 if moved, 0 if `key` is absent here or present there.
pub fn move_key(
    txn: &mut Txn<'_>,
    s: Space<'_>,
    all: Spaces<'_>,
    key: &[u8],
    db: &[u8],
) -> CmdResult {
    let dst = database(all, db)?;
    if dst.same_db(&s) {
        return Err(err(SAME_OBJECT));
    }
    let Some(value) = read_owned(txn, s, key)? else {
        return Ok(Reply::Integer(0));
    };
    if stored::exists(txn, dst, key)? {
        return Ok(Reply::Integer(0));
    }
    value.move_to(txn, dst, key)?;
    txn.delete(s.data, key)?;
    Ok(Reply::Integer(1))
}

/// TOUCH key...: how many exist (Verso keeps no access times to update).
pub fn touch(txn: &Txn<'_>, s: Space<'_>, keys: &[Vec<u8>]) -> CmdResult {
    let mut n = 0;
    for k in keys {
        n += i64::from(stored::exists(txn, s, k)?);
    }
    Ok(Reply::Integer(n))
}

/// RANDOMKEY: the first key at or after a random point between the first and last keys
/// ([`collections::random_point`]), so a key after a wide gap is likelier than one in a
/// dense run: not uniform, but O(log n) and never a scan. Nil when the database is empty. Expired keys not yet
/// deleted are stepped over (so a run of them costs a walk past them).
pub fn random_key(txn: &Txn<'_>, s: Space<'_>) -> CmdResult {
    let live = |v: &[u8]| Stored::decode(v).is_some_and(|v| !v.expired_at(s.now_ms));
    let first_from = |lo: Bound<&[u8]>| -> Result<Option<Vec<u8>>, CmdError> {
        Ok(txn
            .range(s.data, (lo, Bound::Unbounded))?
            .find(|(_, v)| live(v))
            .map(|(k, _)| k.to_vec()))
    };
    let Some(first) = first_from(Bound::Unbounded)? else {
        return Ok(Reply::Nil);
    };
    let last = txn
        .range_rev(s.data, ..)?
        .find(|(_, v)| live(v))
        .map_or_else(|| first.clone(), |(k, _)| k.to_vec());
    // The transaction's timestamp (the cycle counter) seeds the draw.
    let point = collections::random_point(&first, &last, txn.timestamp());
    let key = first_from(Bound::Included(&point[..]))?.unwrap_or(first);
    Ok(Reply::Bulk(key))
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
pub fn object(txn: &Txn<'_>, s: Space<'_>, args: &[Vec<u8>]) -> CmdResult {
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
    let Some(v) = stored::read(txn, s, &args[1])? else {
        return Ok(Reply::Nil);
    };
    Ok(match sub.as_slice() {
        b"ENCODING" => Reply::Bulk(
            match v.kind {
                stored::KIND_STRING => string_encoding(v.payload),
                collections::KIND_ZSET => "skiplist",
                collections::KIND_LIST => "quicklist",
                _ => "hashtable",
            }
            .as_bytes()
            .to_vec(),
        ),
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
