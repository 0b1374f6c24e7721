//! Range reads: an index walk in chunks, merged with the transaction's own writes.
//!
//! Each chunk is taken under the index's protection and leaves the transaction's timestamp as
//! a stamp on every gap it covered (phantom protection); the records are then read with the
//! ordinary MVTO read outside the index, where waiting for an older commit is allowed. Keys
//! the transaction wrote itself come from its write set instead, in key order.

use std::collections::VecDeque;
use std::ops::Bound;

use verso_index::Direction;

use crate::db::TableState;
use crate::index::{OrderedIndex, RecordPtr};
use crate::sync::AtomicU64;
use crate::txn::{read_snapshot, read_visible};
use crate::write_set::WriteSet;

/// Records fetched from the index per chunk.
const CHUNK_LEN: usize = 64;

/// How a range reads each record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ReadMode {
    /// MVTO serializable: gap stamps on the index, `tslast` on records.
    Mvto,
    /// Snapshot reads that write nothing shared.
    Snapshot,
    /// Two-phase locking: the newest version (the caller locked every record first).
    Latest,
}

/// What a range needs from the transaction reading it.
pub(crate) struct Reader<'t> {
    pub(crate) ts: u64,
    pub(crate) mode: ReadMode,
    /// The transaction's walk counter (see `Record::read`).
    pub(crate) walk: &'t AtomicU64,
    pub(crate) writes: Option<&'t WriteSet>,
}

/// An iterator over `(key, value)` pairs of a range read, borrowed from the transaction.
pub struct Range<'t> {
    table: &'t TableState,
    table_id: u32,
    ts: u64,
    mode: ReadMode,
    /// The transaction's walk counter (see `Record::read`).
    walk: &'t AtomicU64,
    direction: Direction,
    /// What is left of the range in the index: the near bound moves past each chunk.
    lo: Bound<Vec<u8>>,
    hi: Bound<Vec<u8>>,
    chunk: VecDeque<RecordPtr>,
    index_done: bool,
    /// The next index entry that is visible and not shadowed by an own write.
    peeked: Option<(&'t [u8], &'t [u8])>,
    writes: Option<&'t WriteSet>,
    /// Own-write entries in the range, in iteration order, and the next one to merge.
    own: Vec<u32>,
    own_next: usize,
}

impl<'t> Range<'t> {
    pub(crate) fn new(
        table: &'t TableState,
        table_id: u32,
        reader: Reader<'t>,
        lo: Bound<Vec<u8>>,
        hi: Bound<Vec<u8>>,
        reverse: bool,
    ) -> Self {
        let Reader {
            ts,
            mode,
            walk,
            writes,
        } = reader;
        let mut own = match writes {
            Some(w) if !w.is_empty() => w.sorted_in_range(table_id, |k| contains(&lo, &hi, k)),
            _ => Vec::new(),
        };
        if reverse {
            own.reverse();
        }
        Range {
            table,
            table_id,
            ts,
            mode,
            walk,
            direction: if reverse {
                Direction::Reverse
            } else {
                Direction::Forward
            },
            lo,
            hi,
            chunk: VecDeque::new(),
            index_done: false,
            peeked: None,
            writes,
            own,
            own_next: 0,
        }
    }

    /// Fetches the next chunk of records from the index, stamping the gaps it covers.
    fn fetch_chunk(&mut self) {
        debug_assert!(self.chunk.is_empty());
        let chunk = &mut self.chunk;
        self.index_done = self.table.index.scan(
            self.lo.as_ref().map(Vec::as_slice),
            self.hi.as_ref().map(Vec::as_slice),
            self.direction,
            if self.mode == ReadMode::Mvto {
                self.ts
            } else {
                0
            },
            |record| {
                chunk.push_back(record);
                chunk.len() < CHUNK_LEN
            },
        );
        if let Some(last) = self.chunk.back() {
            let near = match self.direction {
                Direction::Forward => &mut self.lo,
                Direction::Reverse => &mut self.hi,
            };
            let mut buf = match std::mem::replace(near, Bound::Unbounded) {
                Bound::Included(v) | Bound::Excluded(v) => v,
                Bound::Unbounded => Vec::new(),
            };
            buf.clear();
            buf.extend_from_slice(last.key());
            *near = Bound::Excluded(buf);
        }
    }

    /// Fills `peeked` with the next visible index entry not shadowed by an own write.
    fn peek_index(&mut self) -> Option<(&'t [u8], &'t [u8])> {
        while self.peeked.is_none() {
            if self.chunk.is_empty() {
                if self.index_done {
                    return None;
                }
                self.fetch_chunk();
                continue;
            }
            let ptr = self.chunk.pop_front()?;
            let (record, key) = (ptr.get(), ptr.key());
            // An own write decides this key; the commit validates the record anyway.
            if self
                .writes
                .is_some_and(|w| w.get(self.table_id, key).is_some())
            {
                continue;
            }
            let value = match self.mode {
                ReadMode::Mvto => {
                    read_visible(&self.table.index, ptr, self.ts, self.walk).and_then(|v| v.value())
                }
                ReadMode::Snapshot => read_snapshot(record, self.ts, self.walk),
                ReadMode::Latest => record.newest().and_then(|v| v.value()),
            };
            if let Some(value) = value {
                self.peeked = Some((key, value));
            }
        }
        self.peeked
    }

    /// The next own write in iteration order: (key, value or `None` for a delete).
    fn peek_own(&self) -> Option<(&'t [u8], Option<&'t [u8]>)> {
        let writes = self.writes?;
        let &i = self.own.get(self.own_next)?;
        let e = writes.entry(i);
        Some((writes.key(e), writes.value(e)))
    }

    fn comes_first(&self, a: &[u8], b: &[u8]) -> bool {
        match self.direction {
            Direction::Forward => a < b,
            Direction::Reverse => a > b,
        }
    }
}

impl<'t> Iterator for Range<'t> {
    type Item = (&'t [u8], &'t [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let from_index = self.peek_index();
            let own = self.peek_own();
            match (from_index, own) {
                (None, None) => return None,
                (Some((ik, _)), Some((ok, ov))) if self.comes_first(ok, ik) => {
                    self.own_next += 1;
                    if let Some(v) = ov {
                        return Some((ok, v));
                    }
                }
                (None, Some((ok, ov))) => {
                    self.own_next += 1;
                    if let Some(v) = ov {
                        return Some((ok, v));
                    }
                }
                (Some(item), _) => {
                    self.peeked = None;
                    return Some(item);
                }
            }
        }
    }
}

fn contains(lo: &Bound<Vec<u8>>, hi: &Bound<Vec<u8>>, k: &[u8]) -> bool {
    let above = match lo {
        Bound::Included(l) => k >= l.as_slice(),
        Bound::Excluded(l) => k > l.as_slice(),
        Bound::Unbounded => true,
    };
    let below = match hi {
        Bound::Included(h) => k <= h.as_slice(),
        Bound::Excluded(h) => k < h.as_slice(),
        Bound::Unbounded => true,
    };
    above && below
}
