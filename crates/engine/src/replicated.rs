//! What a replicated `Db` needs beyond a single one (`verso-replication` drives it; see
//! ARCHITECTURE.md, "Replication").
//!
//! - A primary hands every commit's write set to a [`CommitSink`] in commit-timestamp order:
//!   the slot is reserved inside the critical section that draws the commit timestamp
//!   (precision locking's recently-committed list), and filled after validation, holding
//!   the write locks, before installing. So the replicated log's order is the commit
//!   order, and a transaction that read or overwrote another's writes comes after it.
//! - A backup installs those write sets at their timestamps ([`Db::apply_replicated`]).
//! - Discarding a suffix of the log undoes its operations newest first, each by its undo
//!   records: the exact (key, timestamp) versions it installed ([`Db::rollback_versions`]),
//!   not "every version above a timestamp", so nothing here relies on timestamps growing
//!   along the log (NCC's do not). The garbage collector must keep every version such a
//!   rollback may uncover ([`Db::set_gc_floor`]); that floor is still a timestamp, which
//!   holds while the log is in timestamp order (precision locking's commit order).
//! - A replica that becomes primary continues above every timestamp it applied
//!   ([`Db::raise_timestamp_floor`]).
//! - A commit that emptied a table ([`crate::Txn::clear`]: FLUSHALL) reaches the sink as
//!   one *clear* of it ([`ReplicatedWrite::clear`]) ahead of its writes. The log carries
//!   the clear instead of the deletions it covers ([`ClearFilter`]), so its size does not
//!   grow with the table; each backup expands it against its own copy, which at that point
//!   of the log is the primary's at the commit (precision locking validated the whole
//!   table as read, and the log is in commit order), and reports the keys it deleted for
//!   its undo records ([`Db::apply_replicated_with`]).

use std::ops::Bound;
use std::ptr::NonNull;
use std::sync::Arc;

use crate::db::Db;
use crate::error::Error;
use crate::gc::GcEntry;
use crate::index::{OrderedIndex, RecordPtr};
use crate::record::Version;
use verso_index::Direction;

/// One write of a replicated commit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReplicatedWrite<'a> {
    /// The table's name (ids are per process: a backup may number tables differently).
    pub table: &'a str,
    pub key: &'a [u8],
    /// `None` deletes.
    pub value: Option<&'a [u8]>,
}

impl<'a> ReplicatedWrite<'a> {
    /// The clear of `table`: every key it holds at this point of the log goes. Encoded as
    /// a write to the empty table name, which no table has, keyed by the table's name.
    pub fn clear(table: &'a str) -> ReplicatedWrite<'a> {
        ReplicatedWrite {
            table: "",
            key: table.as_bytes(),
            value: None,
        }
    }

    /// The table this write clears, if it is a clear.
    pub fn cleared_table(&self) -> Option<&'a str> {
        if self.table.is_empty() {
            std::str::from_utf8(self.key).ok()
        } else {
            None
        }
    }
}

/// Which of a commit's writes, in the order the sink gets them, the replicated log carries:
/// the clears, and every write except a deletion in a table the commit cleared (the clear
/// covers it). A covered deletion is still installed on the primary, and undone by key.
#[derive(Default)]
pub struct ClearFilter<'a> {
    cleared: Vec<&'a str>,
}

impl<'a> ClearFilter<'a> {
    /// Whether the log carries `w` (call it on the commit's writes in order).
    pub fn logged(&mut self, w: &ReplicatedWrite<'a>) -> bool {
        if let Some(t) = w.cleared_table() {
            self.cleared.push(t);
            return true;
        }
        w.value.is_some() || !self.cleared.contains(&w.table)
    }
}

/// Receives a primary's commits, in commit-timestamp order (module docs).
pub trait CommitSink: Send + Sync {
    /// Called inside the critical section that draws `cts`, so calls come in `cts` order.
    /// Returns the slot the commit fills, or `None` to refuse it (this replica does not
    /// accept writes now: the commit fails with [`Error::NotPrimary`]).
    fn reserve(&self, cts: u64) -> Option<u64>;
    /// The validated commit's writes, holding its write locks, before it installs them:
    /// the tables it cleared first, then every write; the log takes what [`ClearFilter`]
    /// keeps.
    fn fill(&self, slot: u64, cts: u64, writes: &mut dyn Iterator<Item = ReplicatedWrite<'_>>);
    /// The commit failed validation after reserving: the slot carries nothing.
    fn abandon(&self, slot: u64);
    /// The largest write set the replicated log takes, in bytes as
    /// [`write_set_bytes`] counts them: a larger commit fails with
    /// [`Error::TransactionTooLarge`] before it reserves anything.
    fn write_set_bytes_max(&self) -> usize {
        usize::MAX
    }
}

/// A write set's size as the replicated log bounds it: per write, the table name, the key,
/// the value and 16 bytes for lengths and the commit timestamp's share.
pub fn write_set_bytes<'a>(writes: impl Iterator<Item = ReplicatedWrite<'a>>) -> usize {
    writes
        .map(|w| w.table.len() + w.key.len() + w.value.map_or(0, <[u8]>::len) + 16)
        .fold(0usize, usize::saturating_add)
}

impl Db {
    /// Makes this database a primary's: every commit goes through `sink` (module docs).
    /// Only precision locking orders commits by a timestamp drawn at commit, which the
    /// replicated log needs; set once.
    pub fn set_commit_sink(&self, sink: Arc<dyn CommitSink>) -> Result<(), Error> {
        if self.options.concurrency != crate::Concurrency::PrecisionLocking {
            return Err(Error::Unsupported {
                what: "replication needs concurrency = precision-locking (commit timestamps \
                       drawn at commit give the log its order)",
            });
        }
        self.commit_sink.set(sink).map_err(|_| Error::Unsupported {
            what: "a commit sink is set once",
        })
    }

    /// Whether this database is a replica's (a commit sink is set): its tables then come
    /// from the replicated log, not from its own catalog alone.
    pub fn is_replicated(&self) -> bool {
        self.commit_sink.get().is_some()
    }

    pub(crate) fn commit_sink(&self) -> Option<&Arc<dyn CommitSink>> {
        self.commit_sink.get()
    }

    /// Installs a replicated commit's writes at `ts` (a backup applying the primary's log,
    /// in log order). Tables are created on first use. Fails, changing nothing more, if a
    /// key already holds a version at or above `ts`: the log was not applied in order.
    pub fn apply_replicated<'a>(
        &self,
        ts: u64,
        writes: impl Iterator<Item = ReplicatedWrite<'a>>,
    ) -> Result<(), Error> {
        self.apply_replicated_with(ts, writes, |_, _| {})
    }

    /// As [`Db::apply_replicated`], expanding each clear (module docs) into a deletion of
    /// every key its table holds, except those the commit writes itself, and calling
    /// `cleared(table, key)` for each: the caller's undo records need them.
    pub fn apply_replicated_with<'a>(
        &self,
        ts: u64,
        writes: impl Iterator<Item = ReplicatedWrite<'a>>,
        mut cleared: impl FnMut(&str, &[u8]),
    ) -> Result<(), Error> {
        let mut writes = writes.peekable();
        // A commit's clears come first (`CommitSink::fill`); most commits have none and
        // are installed as they stream in.
        if writes
            .peek()
            .and_then(ReplicatedWrite::cleared_table)
            .is_none()
        {
            return self.install_replicated(ts, writes);
        }
        let writes: Vec<ReplicatedWrite<'a>> = writes.collect();
        let mut expanded: Vec<(&str, Vec<u8>)> = Vec::new();
        for t in writes.iter().filter_map(ReplicatedWrite::cleared_table) {
            let own: std::collections::HashSet<&[u8]> = writes
                .iter()
                .filter(|w| w.table == t)
                .map(|w| w.key)
                .collect();
            for key in self.live_keys(t)? {
                if !own.contains(key.as_slice()) {
                    cleared(t, &key);
                    expanded.push((t, key));
                }
            }
        }
        let deletions = expanded.iter().map(|(t, k)| ReplicatedWrite {
            table: t,
            key: k,
            value: None,
        });
        let rest = writes
            .iter()
            .copied()
            .filter(|w| w.cleared_table().is_none());
        self.install_replicated(ts, deletions.chain(rest))
    }

    /// Installs writes (no clears) at `ts`, as [`Db::apply_replicated`] describes.
    fn install_replicated<'a>(
        &self,
        ts: u64,
        writes: impl Iterator<Item = ReplicatedWrite<'a>>,
    ) -> Result<(), Error> {
        let site = (ts as usize) % self.gc.len();
        let mut queued = Vec::new();
        let mut result = Ok(());
        for w in writes {
            let table = self.table(w.table)?;
            let state = self.table_state(&table)?;
            let mut record = state
                .index
                .get_or_insert_with(w.key, |gap| RecordPtr::alloc(table.id, w.key, gap, w.value));
            while record.get().lock_for_replay(ts).is_err() {
                record = self.record_again(record);
            }
            let r = record.get();
            if let Some(newest) = r.newest().filter(|v| v.ts() >= ts) {
                r.unlock(ts);
                result = Err(Error::Replication {
                    reason: format!(
                        "write at {ts} below the key's newest version at {}: log applied out of order",
                        newest.ts()
                    ),
                });
                break;
            }
            if let Some(superseded) = r.install(Version::new_in(record, ts, w.value)) {
                queued.push(GcEntry::new(record, superseded));
            }
            r.unlock(ts);
        }
        if !queued.is_empty() {
            let collect = {
                let mut q = self.gc[site].lock().unwrap_or_else(|e| e.into_inner());
                q.extend(queued.into_iter());
                q.wants_collection()
            };
            if collect {
                self.collect_site(site);
            }
        }
        result
    }

    /// Every key of `table` whose newest version is not a deletion (none if the table does
    /// not exist yet), in key order. For a clear, on the thread that applies the log, so no
    /// commit changes the table meanwhile.
    fn live_keys(&self, table: &str) -> Result<Vec<Vec<u8>>, Error> {
        let Some(id) = self.table_names().iter().position(|n| n == table) else {
            return Ok(Vec::new());
        };
        let mut keys = Vec::new();
        self.scan_table_chunked(id as u32, |r, _| {
            if r.get().newest().is_some_and(|v| v.value().is_some()) {
                keys.push(r.key().to_vec());
            }
            Ok::<(), Error>(())
        })?;
        Ok(keys)
    }

    /// Calls `f(record, walk word)` for every record of table `id`, in key order, a chunk
    /// at a time, each under a short read-only transaction begun before its scan: the
    /// records found stay allocated while `f` looks at them, even if they leave the index
    /// meanwhile (`gc.rs`). Stops at `f`'s first error and returns it.
    fn scan_table_chunked<E>(
        &self,
        id: u32,
        mut f: impl FnMut(RecordPtr, &crate::sync::AtomicU64) -> Result<(), E>,
    ) -> Result<(), E> {
        const CHUNK: usize = 64;
        let state = self.table_state_by_id(id);
        let mut chunk: Vec<RecordPtr> = Vec::with_capacity(CHUNK);
        let mut lo: Option<Vec<u8>> = None;
        loop {
            chunk.clear();
            let start = lo.as_deref().map_or(Bound::Unbounded, Bound::Excluded);
            let Ok(txn) = self.begin_read_only() else {
                return Ok(()); // cannot happen: read-only transactions always begin
            };
            // Stamp 0: reads invisibly (no gap stamps for writers to validate against).
            let done = state
                .index
                .scan(start, Bound::Unbounded, Direction::Forward, 0, |r| {
                    chunk.push(r);
                    chunk.len() < CHUNK
                });
            let walk = txn.walk_word();
            for &r in &chunk {
                f(r, walk)?;
            }
            drop(txn);
            match chunk.last() {
                Some(last) if !done => lo = Some(last.key().to_vec()),
                _ => return Ok(()),
            }
        }
    }

    /// Undoes single writes: drops, for each `(table, key, ts)`, the version of `key`
    /// written at exactly `ts` (an undo record of the replicated log: the write of an
    /// operation a view change discarded, or a deposed primary's commit that never reached
    /// the log), wherever it sits in the key's chain. It assumes nothing about how
    /// timestamps grow along the log, which NCC's refined and re-stamped timestamps need
    /// (issue 18): undo the discarded operations newest first. Keys left with no version leave the index; readers walking
    /// a dropped version finish safely (it is freed through the GC's limbo).
    pub fn rollback_versions<'a>(&self, writes: impl Iterator<Item = (&'a str, &'a [u8], u64)>) {
        let mut unlinked: Vec<NonNull<Version>> = Vec::new();
        let mut emptied = Vec::new();
        let mut site = 0;
        for (table, key, ts) in writes {
            site = (ts as usize) % self.gc.len();
            let Ok(table) = self.table(table) else {
                continue;
            };
            let Ok(state) = self.table_state(&table) else {
                continue;
            };
            let Some(record) = state.index.get_or_stamp(key, 0) else {
                continue;
            };
            // A key named twice may be listed twice: removing a dead record again fails.
            if let Ok(true) = record.get().rollback_version(ts, &mut unlinked) {
                emptied.push(record);
            }
        }
        if !unlinked.is_empty() {
            // Drawn after the unlinks: a reader that could have read one began before it.
            let after = self.timestamps.fresh(site);
            self.gc[site]
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push_limbo(unlinked, after, &self.timestamps);
        }
        if !emptied.is_empty() {
            self.remove_empty_records(site, emptied.into_iter());
        }
    }

    /// The version of `key` written at exactly `ts`: `Some(None)` for a deletion, `None`
    /// if there is none (never written then, or already freed: keep the GC floor below
    /// `ts`). Waits out a commit still installing at or below `ts`.
    pub fn read_version_at(&self, table: &str, key: &[u8], ts: u64) -> Option<Option<Vec<u8>>> {
        let table = self.table(table).ok()?;
        let state = self.table_state(&table).ok()?;
        let txn = self.begin_read_only().ok()?;
        let record = state.index.get_or_stamp(key, 0)?;
        let v = record
            .get()
            .read_snapshot(ts.saturating_add(1), txn.walk_word())?;
        let found = (v.ts() == ts).then(|| v.value().map(<[u8]>::to_vec));
        drop(txn);
        found
    }

    /// Calls `f(table, key, version_ts, value)` for every key's newest version at or
    /// below `ts` that is not a deletion, table by table in key order: the state the
    /// replicated log's prefix through `ts` left (a Lazy VSR checkpoint, taken while
    /// commits go on). The caller keeps the GC floor at or below `ts` until this returns
    /// ([`Db::set_gc_floor`]), so every version it reads stays. Reads in chunks, each under
    /// a short read-only transaction that keeps the records it found allocated (`gc.rs`).
    /// Stops at `f`'s first error and returns it.
    pub fn scan_versions_at<E>(
        &self,
        ts: u64,
        mut f: impl FnMut(&str, &[u8], u64, &[u8]) -> Result<(), E>,
    ) -> Result<(), E> {
        for (id, name) in self.table_names().iter().enumerate() {
            self.scan_table_chunked(id as u32, |r, walk| {
                // Newest strictly below `ts + 1`; waits out a commit stamping below it.
                match r.get().read_snapshot(ts.saturating_add(1), walk) {
                    Some(v) => match v.value() {
                        Some(value) => f(name, r.key(), v.ts(), value),
                        None => Ok(()),
                    },
                    None => Ok(()),
                }
            })?;
        }
        Ok(())
    }

    /// Keeps every version a rollback to a timestamp at or above `floor` may uncover: the
    /// GC treats `floor` as a bound on future readers, so it frees nothing superseded above
    /// it. Raise it as the replicated log's durable point advances (`u64::MAX`: no floor).
    pub fn set_gc_floor(&self, floor: u64) {
        // A version superseded at `newer` is kept when `newer > future + 1`: every version
        // above `floor` and the newest one at or below it are.
        let bound = if floor == u64::MAX {
            floor
        } else {
            floor.saturating_sub(1)
        };
        self.timestamps.set_gc_floor(bound);
    }

    /// Makes transactions that begin from now on read at a timestamp no later than
    /// `horizon` (`None`: no bound). A backup serving reads sets it to one past the commit
    /// timestamp of the last operation the replicated log made durable, so readers see a
    /// prefix of the log that is fully applied and will never be rolled back: stale, never
    /// torn or undone.
    ///
    /// Safe for the GC because the horizon never drops below the GC floor: the GC keeps
    /// every version superseded above the floor ([`Db::set_gc_floor`]), which is every
    /// version a reader at or above `floor + 1` may need. Only read-only transactions may
    /// run while a horizon is set (a backup commits nothing).
    pub fn set_read_horizon(&self, horizon: Option<u64>) {
        self.timestamps
            .set_read_horizon(horizon.unwrap_or(u64::MAX).max(1));
    }

    /// Makes every later timestamp larger than `ts`, while transactions run (a replica
    /// becoming primary continues above what it applied).
    pub fn raise_timestamp_floor(&self, ts: u64) {
        self.timestamps.raise_floor_live(ts.saturating_add(1));
    }
}
