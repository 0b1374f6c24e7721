//! How a key's value is stored in its database's table, and the reads and writes every
//! command goes through so that an expired key is never seen.
//!
//! A stored value is framed by a header (the layout is chosen for the hot path: `GET` of a
//! string without a deadline reads one byte before the payload):
//!
//! ```text
//! byte 0          kind (low 7 bits: 0 = string) | 0x80 when a deadline follows
//! bytes 1..9      deadline, Unix milliseconds, u64 little-endian (only when flagged)
//! rest            the payload (a string's bytes)
//! ```
//!
//! The deadline lives in the value, not beside it: a read of the key reads its deadline in
//! the same version, so a transaction sees the key and its time to live together (never one
//! without the other), and precision locking validates both with the one read. A key whose
//! deadline is before the transaction's clock reading ([`Space::now_ms`], fixed when the
//! command or EXEC begins) is absent to every command, whether or not the active expirer
//! ([`crate::expiry`]) has deleted it yet.
//!
//! Every write of a value with a deadline also writes an entry in the database's deadline
//! queue table, keyed `deadline (u64 big-endian) ‖ key`, so the expirer finds what is due
//! in deadline order without scanning the keyspace. Writes that drop or change a deadline
//! (a plain SET, PERSIST, DEL) leave the old queue entry in place, so a plain SET stays a
//! blind write: the expirer checks each entry against the key's current deadline when it
//! comes due and only deletes the key if they still agree. A stale entry therefore lives
//! until its old deadline passes.

use verso_engine::{Table, Txn};

use crate::keyspace::{CmdError, CmdResult};
use crate::resp::Reply;

/// The kind of value a key holds (byte 0's low bits).
pub const KIND_STRING: u8 = 0;
const HAS_DEADLINE: u8 = 0x80;
const DEADLINE_LEN: usize = 8;
/// The longest header: a stored value is at most this much longer than its payload.
pub const HEADER_LEN_MAX: usize = 1 + DEADLINE_LEN;

/// Redis's reply to a command on a key of another type.
pub const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

/// The tables every database shares for collections (hashes, sets...): their elements,
/// the registry of collection ids, and the ids waiting to be reclaimed
/// ([`crate::collections`]).
pub struct CollectionTables {
    pub elements: Table,
    pub registry: Table,
    pub graveyard: Table,
}

/// One logical database (SELECT's index) as a command sees it: its data table, its
/// deadline queue, the shared collection tables, and the clock reading the whole command
/// (or MULTI block) runs at.
#[derive(Clone, Copy)]
pub struct Space<'a> {
    pub data: &'a Table,
    pub deadlines: &'a Table,
    pub collections: &'a CollectionTables,
    /// SELECT's index, recorded in the collection registry.
    pub index: u8,
    /// Unix time in milliseconds: keys whose deadline is before this are absent.
    pub now_ms: u64,
}

/// All the logical databases, for commands that name another one (COPY ... DB, MOVE).
#[derive(Clone, Copy)]
pub struct Spaces<'a> {
    pub data: &'a [Table],
    pub deadlines: &'a [Table],
    pub collections: &'a CollectionTables,
    pub now_ms: u64,
}

impl<'a> Spaces<'a> {
    /// Database `index`, if it exists.
    pub fn get(&self, index: usize) -> Option<Space<'a>> {
        Some(Space {
            data: self.data.get(index)?,
            deadlines: self.deadlines.get(index)?,
            collections: self.collections,
            index: u8::try_from(index).ok()?,
            now_ms: self.now_ms,
        })
    }
}

impl Space<'_> {
    /// Whether two spaces are the same database.
    pub fn same_db(&self, other: &Space<'_>) -> bool {
        self.data == other.data
    }
}

/// A decoded stored value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stored<'v> {
    pub kind: u8,
    /// Unix milliseconds after which the key is gone, if it has a time to live.
    pub deadline: Option<u64>,
    pub payload: &'v [u8],
}

impl<'v> Stored<'v> {
    /// Parses a stored value; `None` if it is not framed as above (a value written by an
    /// older Verso, which the server refuses to open, or a damaged one).
    pub fn decode(raw: &'v [u8]) -> Option<Stored<'v>> {
        let (&head, rest) = raw.split_first()?;
        if head & HAS_DEADLINE == 0 {
            return Some(Stored {
                kind: head,
                deadline: None,
                payload: rest,
            });
        }
        let (deadline, payload) = rest.split_at_checked(DEADLINE_LEN)?;
        Some(Stored {
            kind: head & !HAS_DEADLINE,
            deadline: Some(u64::from_le_bytes(deadline.try_into().ok()?)),
            payload,
        })
    }

    /// Whether the key is gone at `now_ms` (Redis: expired once the clock is past the
    /// deadline, so a key is still there at its deadline's exact millisecond).
    pub fn expired_at(&self, now_ms: u64) -> bool {
        self.deadline.is_some_and(|d| now_ms > d)
    }
}

/// The header bytes for `kind` with an optional deadline (1 or 9 bytes).
fn header(kind: u8, deadline: Option<u64>) -> ([u8; 1 + DEADLINE_LEN], usize) {
    let mut h = [0u8; 1 + DEADLINE_LEN];
    match deadline {
        None => {
            h[0] = kind;
            (h, 1)
        }
        Some(d) => {
            h[0] = kind | HAS_DEADLINE;
            h[1..].copy_from_slice(&d.to_le_bytes());
            (h, 1 + DEADLINE_LEN)
        }
    }
}

/// A stored value that does not decode: the server refuses to serve it rather than guess.
fn corrupt() -> CmdError {
    CmdError::Reply(Reply::err(
        "stored value has an unknown format (written by an older Verso?)",
    ))
}

/// The key's value as of the transaction, `None` if absent or expired.
pub fn read<'t>(
    txn: &'t Txn<'_>,
    s: Space<'_>,
    key: &[u8],
) -> Result<Option<Stored<'t>>, CmdError> {
    let Some(raw) = txn.get(s.data, key)? else {
        return Ok(None);
    };
    let v = Stored::decode(raw).ok_or_else(corrupt)?;
    Ok((!v.expired_at(s.now_ms)).then_some(v))
}

/// The key's string, `None` if absent or expired, `WRONGTYPE` if it holds another kind.
pub fn read_string<'t>(
    txn: &'t Txn<'_>,
    s: Space<'_>,
    key: &[u8],
) -> Result<Option<&'t [u8]>, CmdError> {
    match read(txn, s, key)? {
        None => Ok(None),
        Some(v) if v.kind == KIND_STRING => Ok(Some(v.payload)),
        Some(_) => Err(CmdError::Reply(Reply::Error(WRONGTYPE.into()))),
    }
}

/// A string's bytes and its deadline.
pub type StringAndDeadline<'t> = (&'t [u8], Option<u64>);

/// As [`read_string`], with its deadline.
pub fn read_string_with_deadline<'t>(
    txn: &'t Txn<'_>,
    s: Space<'_>,
    key: &[u8],
) -> Result<Option<StringAndDeadline<'t>>, CmdError> {
    match read(txn, s, key)? {
        None => Ok(None),
        Some(v) if v.kind == KIND_STRING => Ok(Some((v.payload, v.deadline))),
        Some(_) => Err(CmdError::Reply(Reply::Error(WRONGTYPE.into()))),
    }
}

/// Whether the key exists (any kind) as of the transaction.
pub fn exists(txn: &Txn<'_>, s: Space<'_>, key: &[u8]) -> Result<bool, CmdError> {
    Ok(read(txn, s, key)?.is_some())
}

/// Writes `key = payload` of `kind` with `deadline` (and its queue entry). A deadline
/// not after the clock deletes the key instead, as Redis does.
pub fn write(
    txn: &mut Txn<'_>,
    s: Space<'_>,
    key: &[u8],
    kind: u8,
    deadline: Option<u64>,
    payload: &[u8],
) -> Result<(), CmdError> {
    if let Some(d) = deadline {
        if d <= s.now_ms {
            txn.delete(s.data, key)?;
            return Ok(());
        }
        txn.put(s.deadlines, queue_key(d, key), b"")
            .map_err(queue_key_error)?;
    }
    let (h, n) = header(kind, deadline);
    txn.put_parts(s.data, key, &[&h[..n], payload])?;
    Ok(())
}

/// A queue key is the key plus 8 bytes: a key within 8 bytes of the limit cannot expire.
fn queue_key_error(e: verso_engine::Error) -> CmdError {
    match e {
        verso_engine::Error::KeyTooLarge { .. } => CmdError::Reply(Reply::err(
            "key too long for a time to live (keys with a deadline are limited to the maximum key size minus 8 bytes)",
        )),
        e => CmdError::Engine(e),
    }
}

/// Writes a string without a deadline (SET, MSET...: a new value drops the old TTL).
pub fn write_string(txn: &mut Txn<'_>, s: Space<'_>, key: &[u8], payload: &[u8]) -> CmdResult {
    write(txn, s, key, KIND_STRING, None, payload)?;
    Ok(Reply::ok())
}

/// The queue entry's key for `key` due at `deadline`.
pub fn queue_key(deadline: u64, key: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(DEADLINE_LEN + key.len());
    k.extend_from_slice(&deadline.to_be_bytes());
    k.extend_from_slice(key);
    k
}

/// Splits a queue entry's key into its deadline and the key it is for.
pub fn split_queue_key(k: &[u8]) -> Option<(u64, &[u8])> {
    let (d, key) = k.split_at_checked(DEADLINE_LEN)?;
    Some((u64::from_be_bytes(d.try_into().ok()?), key))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_round_trip() {
        for deadline in [None, Some(0), Some(1_700_000_000_000), Some(u64::MAX)] {
            for payload in [&b""[..], b"x", b"hello world"] {
                let (h, n) = header(KIND_STRING, deadline);
                let raw = [&h[..n], payload].concat();
                let v = Stored::decode(&raw).expect("decodes");
                assert_eq!(v.kind, KIND_STRING);
                assert_eq!(v.deadline, deadline);
                assert_eq!(v.payload, payload);
            }
        }
        assert_eq!(Stored::decode(b""), None);
        assert_eq!(Stored::decode(&[HAS_DEADLINE, 1, 2, 3]), None);
    }

    #[test]
    fn a_key_is_there_until_past_its_deadline() {
        let v = Stored {
            kind: KIND_STRING,
            deadline: Some(100),
            payload: b"",
        };
        assert!(!v.expired_at(99));
        assert!(!v.expired_at(100));
        assert!(v.expired_at(101));
    }

    #[test]
    fn queue_keys_sort_by_deadline_first() {
        let a = queue_key(5, b"zzz");
        let b = queue_key(6, b"aaa");
        assert!(a < b);
        assert_eq!(split_queue_key(&a), Some((5, &b"zzz"[..])));
    }
}
