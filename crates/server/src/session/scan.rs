//! SCAN, HSCAN, SSCAN and ZSCAN: cursors are ids of the last key (or member) returned, kept per
//! connection (bounded), each page read in its own read-only transaction.

use super::{engine_error, Session};
use crate::collections::{self as coll, KIND_HASH, KIND_SET, KIND_ZSET};
use crate::keyspace::{self, CmdError};
use crate::resp::Reply;
use crate::stored::KIND_STRING;

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
        let from = match self.cursor_from(&args[0]) {
            Ok(f) => f,
            Err(r) => return r,
        };
        let o = match options(&args[1..], true) {
            Ok(o) => o,
            Err(r) => return r,
        };
        let s = self.space();
        let txn = match self.begin(true) {
            Ok(txn) => txn,
            Err(e) => return engine_error(&e),
        };
        let found = keyspace::scan_keys(
            &txn,
            s,
            from.as_deref(),
            o.count,
            o.pattern.as_deref(),
            o.kind,
        );
        // Committed, not dropped: under `sync` the reply then waits for what it saw to be
        // on disk (`Txn::commit_with_ticket`).
        if let Err(e) = self.commit(txn) {
            return engine_error(&e);
        }
        let (keys, last) = match found {
            Ok(x) => x,
            Err(CmdError::Reply(r)) => return r,
            Err(CmdError::Engine(e)) => return engine_error(&e),
        };
        Reply::Array(vec![
            Reply::Bulk(self.cursor_to(last)),
            Reply::Array(keys.into_iter().map(Reply::Bulk).collect()),
        ])
    }

    /// HSCAN / SSCAN / ZSCAN key cursor [MATCH pattern] [COUNT n]: the same cursors over one
    /// collection's members (HSCAN returns field, value pairs; ZSCAN member, score).
    pub(super) fn scan_members(&mut self, args: &[Vec<u8>], kind: u8) -> Reply {
        let from = match self.cursor_from(&args[1]) {
            Ok(f) => f,
            Err(r) => return r,
        };
        let o = match options(&args[2..], false) {
            Ok(o) => o,
            Err(r) => return r,
        };
        let s = self.space();
        let txn = match self.begin(true) {
            Ok(txn) => txn,
            Err(e) => return engine_error(&e),
        };
        let page = (|| -> Result<(Vec<Reply>, Option<Vec<u8>>), CmdError> {
            let Some(c) = coll::open(&txn, s, &args[0], kind)? else {
                return Ok((Vec::new(), None));
            };
            let mut out = Vec::new();
            let mut last = None;
            for (looked, (m, v)) in coll::members(&txn, s, c, from.as_deref())?.enumerate() {
                if o.pattern
                    .as_deref()
                    .is_none_or(|p| crate::glob::matches(p, m))
                {
                    out.push(Reply::Bulk(m.to_vec()));
                    match kind {
                        KIND_HASH => out.push(Reply::Bulk(v.to_vec())),
                        KIND_ZSET => out.push(Reply::Bulk(crate::zsets::score_text(v))),
                        _ => {}
                    }
                }
                if looked + 1 == o.count {
                    last = Some(m.to_vec());
                    break;
                }
            }
            Ok((out, last))
        })();
        if let Err(e) = self.commit(txn) {
            return engine_error(&e);
        }
        let (items, last) = match page {
            Ok(x) => x,
            Err(CmdError::Reply(r)) => return r,
            Err(CmdError::Engine(e)) => return engine_error(&e),
        };
        Reply::Array(vec![Reply::Bulk(self.cursor_to(last)), Reply::Array(items)])
    }
}
