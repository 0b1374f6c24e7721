//! SCAN, HSCAN, SSCAN and ZSCAN: cursors are ids of the last key (or member) returned, kept per
//! connection (bounded), each page read in its own read-only transaction (or, inside MULTI, in the block's).

use verso_engine::Txn;

use super::{engine_error, Session};
use crate::collections::{self as coll, KIND_HASH, KIND_SET, KIND_ZSET};
use crate::keyspace::{self, CmdError};
use crate::resp::Reply;
use crate::stored::{Space, KIND_STRING};

/// Open SCAN cursors kept per connection; the oldest is forgotten past this.
const SCAN_CURSORS_MAX: usize = 64;

/// A page's options: MATCH, COUNT, and (SCAN only) TYPE.
struct Options {
    pattern: Option<Vec<u8>>,
    count: usize,
    kind: Option<u8>,
}

fn options(args: &[Vec<u8>], type_allowed: bool) -> Result<Options, Reply> {
    let mut o = Options {
        pattern: None,
        count: 10,
        kind: None,
    };
    let mut i = 0;
    while i < args.len() {
        let val = args.get(i + 1);
        match (args[i].to_ascii_uppercase().as_slice(), val) {
            (b"MATCH", Some(p)) => o.pattern = Some(p.clone()),
            (b"COUNT", Some(n)) => match keyspace::parse_i64(n) {
                Some(n) if n >= 1 => o.count = (n as usize).min(1 << 20),
                _ => return Err(Reply::err("syntax error")),
            },
            // TYPE: the kind wanted; a type Verso does not store yet matches nothing.
            (b"TYPE", Some(t)) if type_allowed => {
                o.kind = Some(match t.to_ascii_lowercase().as_slice() {
                    b"string" => KIND_STRING,
                    b"hash" => KIND_HASH,
                    b"set" => KIND_SET,
                    b"zset" => KIND_ZSET,
                    b"list" => crate::collections::KIND_LIST,
                    _ => u8::MAX,
                })
            }
            _ => return Err(Reply::err("syntax error")),
        }
        i += 2;
    }
    Ok(o)
}

impl<'s> Session<'s> {
    /// The position a cursor stands for (`None` for 0, the start), or the error reply.
    fn cursor_from(&mut self, arg: &[u8]) -> Result<Option<Vec<u8>>, Reply> {
        let Some(cursor) = keyspace::parse_i64(arg).filter(|&c| c >= 0) else {
            return Err(Reply::err("invalid cursor"));
        };
        if cursor == 0 {
            return Ok(None);
        }
        match self.cursors.remove(&(cursor as u64)) {
            Some(k) => Ok(Some(k)),
            None => Err(Reply::err("invalid cursor")),
        }
    }

    /// A cursor for `last` (0 at the end), kept for the next page.
    fn cursor_to(&mut self, last: Option<Vec<u8>>) -> Vec<u8> {
        let next = match last {
            Some(k) => {
                if self.cursors.len() >= SCAN_CURSORS_MAX {
                    let oldest = *self.cursors.keys().min().expect("non-empty");
                    self.cursors.remove(&oldest);
                }
                let id = self.next_cursor;
                self.next_cursor += 1;
                self.cursors.insert(id, k);
                id
            }
            None => 0,
        };
        next.to_string().into_bytes()
    }

    /// SCAN cursor [MATCH pattern] [COUNT n] [TYPE t]: cursors are ids of the last key
    /// returned, kept per connection; 0 starts and ends an iteration. Keys present for the
    /// whole iteration are returned exactly once, in key order.
    pub(super) fn scan(&mut self, args: &[Vec<u8>]) -> Reply {
        self.page_alone(|session, txn, s| session.scan_page(txn, s, args))
    }

    /// HSCAN / SSCAN / ZSCAN key cursor [MATCH pattern] [COUNT n]: the same cursors over one
    /// collection's members (HSCAN returns field, value pairs; ZSCAN member, score).
    pub(super) fn scan_members(&mut self, args: &[Vec<u8>], kind: u8) -> Reply {
        self.page_alone(|session, txn, s| session.members_page(txn, s, args, kind))
    }

    /// A page read in its own read-only transaction, committed before the reply (not
    /// dropped: under `sync` the reply then waits for what it saw to be on disk,
    /// `Txn::commit_with_ticket`).
    fn page_alone(
        &mut self,
        page: impl FnOnce(&mut Self, &Txn<'s>, Space<'s>) -> Result<Reply, CmdError>,
    ) -> Reply {
        let s = self.space();
        let txn = match self.begin(true) {
            Ok(txn) => txn,
            Err(e) => return engine_error(&e),
        };
        let found = page(self, &txn, s);
        if let Err(e) = self.commit(txn) {
            return engine_error(&e);
        }
        match found {
            Ok(r) | Err(CmdError::Reply(r)) => r,
            Err(CmdError::Engine(e)) => engine_error(&e),
        }
    }

    /// One SCAN page of `s`, read in `txn` (its own, or a MULTI block's).
    pub(super) fn scan_page(
        &mut self,
        txn: &Txn<'s>,
        s: Space<'s>,
        args: &[Vec<u8>],
    ) -> Result<Reply, CmdError> {
        let from = self.cursor_from(&args[0]).map_err(CmdError::Reply)?;
        let o = options(&args[1..], true).map_err(CmdError::Reply)?;
        let (keys, last) = keyspace::scan_keys(
            txn,
            s,
            from.as_deref(),
            o.count,
            o.pattern.as_deref(),
            o.kind,
        )?;
        Ok(Reply::Array(vec![
            Reply::Bulk(self.cursor_to(last)),
            Reply::Array(keys.into_iter().map(Reply::Bulk).collect()),
        ]))
    }

    /// One HSCAN / SSCAN / ZSCAN page, read in `txn`.
    pub(super) fn members_page(
        &mut self,
        txn: &Txn<'s>,
        s: Space<'s>,
        args: &[Vec<u8>],
        kind: u8,
    ) -> Result<Reply, CmdError> {
        let from = self.cursor_from(&args[1]).map_err(CmdError::Reply)?;
        let o = options(&args[2..], false).map_err(CmdError::Reply)?;
        let mut items = Vec::new();
        let mut last = None;
        if let Some(c) = coll::open(txn, s, &args[0], kind)? {
            for (looked, (m, v)) in coll::members(txn, s, c, from.as_deref())?.enumerate() {
                if o.pattern
                    .as_deref()
                    .is_none_or(|p| crate::glob::matches(p, m))
                {
                    items.push(Reply::Bulk(m.to_vec()));
                    match kind {
                        KIND_HASH => items.push(Reply::Bulk(v.to_vec())),
                        KIND_ZSET => items.push(Reply::Bulk(crate::zsets::score_text(v))),
                        _ => {}
                    }
                }
                if looked + 1 == o.count {
                    last = Some(m.to_vec());
                    break;
                }
            }
        }
        Ok(Reply::Array(vec![
            Reply::Bulk(self.cursor_to(last)),
            Reply::Array(items),
        ]))
    }
}
