//! SCAN: cursors are ids of the last key returned, kept per connection (bounded), each page
//! read in its own read-only transaction.

use super::{engine_error, Session};
use crate::keyspace::{self, CmdError};
use crate::resp::Reply;
use crate::stored::KIND_STRING;

/// Open SCAN cursors kept per connection; the oldest is forgotten past this.
const SCAN_CURSORS_MAX: usize = 64;

impl<'s> Session<'s> {
    /// SCAN cursor [MATCH pattern] [COUNT n] [TYPE t]: cursors are ids of the last key
    /// returned, kept per connection; 0 starts and ends an iteration. Keys present for the
    /// whole iteration are returned exactly once, in key order.
    pub(super) fn scan(&mut self, args: &[Vec<u8>]) -> Reply {
        let Some(cursor) = keyspace::parse_i64(&args[0]).filter(|&c| c >= 0) else {
            return Reply::err("invalid cursor");
        };
        // TYPE: the kind wanted; a type Verso does not store yet matches nothing.
        let (mut pattern, mut count, mut kind) = (None, 10usize, None);
        let mut i = 1;
        while i < args.len() {
            let val = args.get(i + 1);
            match (args[i].to_ascii_uppercase().as_slice(), val) {
                (b"MATCH", Some(p)) => pattern = Some(p.clone()),
                (b"COUNT", Some(n)) => match keyspace::parse_i64(n) {
                    Some(n) if n >= 1 => count = (n as usize).min(1 << 20),
                    _ => return Reply::err("syntax error"),
                },
                (b"TYPE", Some(t)) => {
                    kind = Some(if t.eq_ignore_ascii_case(b"string") {
                        KIND_STRING
                    } else {
                        u8::MAX
                    })
                }
                _ => return Reply::err("syntax error"),
            }
            i += 2;
        }
        let from = if cursor == 0 {
            None
        } else {
            match self.cursors.remove(&(cursor as u64)) {
                Some(k) => Some(k),
                None => return Reply::err("invalid cursor"),
            }
        };
        let s = self.space();
        let txn = match self.begin(true) {
            Ok(txn) => txn,
            Err(e) => return engine_error(&e),
        };
        let found = keyspace::scan_keys(&txn, s, from.as_deref(), count, pattern.as_deref(), kind);
        drop(txn);
        let (keys, last) = match found {
            Ok(x) => x,
            Err(CmdError::Reply(r)) => return r,
            Err(CmdError::Engine(e)) => return engine_error(&e),
        };
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
        Reply::Array(vec![
            Reply::Bulk(next.to_string().into_bytes()),
            Reply::Array(keys.into_iter().map(Reply::Bulk).collect()),
        ])
    }
}
