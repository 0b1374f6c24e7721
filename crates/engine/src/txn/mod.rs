//! Transactions under two protocols, chosen per `Db` ([`Concurrency`]), each with
//! serializable and snapshot isolation per transaction.
//!
//! **MVTO** (vMVCC §2). A transaction takes its timestamp `ts` at begin and is serialized at
//! `ts`. Reads see the newest version older than `ts` and record themselves in the record's
//! `tslast`; reads of absent keys and range reads leave `ts` as a gap stamp in the index.
//! Writes are buffered. Commit locks the written records in (table, key) order, aborts if
//! any was read or written by a younger transaction (its `tslast` is above `ts`, which
//! includes gap stamps inherited by newly inserted keys), installs the versions and unlocks.
//! Snapshot isolation skips the transaction's own read marks.
//!
//! **Precision locking** (HyPer §2.3, `validation.rs`). Reads see the snapshot at the start
//! timestamp and write nothing shared; serializable read-write transactions log each read
//! as a predicate (a key, or a range's bounds). Commit: (1) lock the written records without
//! waiting, aborting if one is held by an uncommitted writer or has a version newer than the
//! start (first committer wins); (2) list the write set in the recently-committed list and
//! draw the commit timestamp `cts` in one critical section (the list stays sorted by `cts`);
//! (3) stamp the records with `cts`; (4) validate the
//! predicates against every entry that committed in `(start, cts)` (serializable only);
//! (5) install the versions at `cts` and unlock. Read-only transactions do none of it and
//! never abort. A reader at `t` meeting a record held by a committer waits if the commit may
//! land below `t` (stamped below `t`, or not stamped yet): so a snapshot never misses a
//! commit below it, and a commit drawn after a read was made lands above that reader.
//!
//! [`Concurrency`]: crate::Concurrency

use std::ops::{Bound, RangeBounds};
use std::ptr::NonNull;
use std::sync::atomic::Ordering as StdOrdering;

use crate::db::{Db, SiteStats, Table, TableState};
use crate::durability::DurabilityTicket;
use crate::gc::GcEntry;
use crate::index::{OrderedIndex, RecordPtr, TableIndex};
use crate::range::{Range, ReadMode, Reader};
use crate::record::{Record, Refused, Removed, Version};
use crate::timestamp::SlotId;
use crate::two_pl::Held;
use crate::validation::{self, PredicateLog};
use crate::write_set::{self, WriteSet};
use crate::{Concurrency, ConflictReason, Error, Isolation};
use std::cell::RefCell;

mod locked;
mod mvto;
mod precision;

/// A commit's written records in (table, key) order, each with its version, allocated and
/// not yet published.
type Prepared = Vec<(RecordPtr, NonNull<Version>)>;

/// The timestamp a transaction committed at: its position in the serial order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CommitTs(pub(crate) u64);

impl CommitTs {
    /// The raw timestamp.
    pub fn get(self) -> u64 {
        self.0
    }
}

/// A point in a transaction's writes to return to ([`Txn::savepoint`]).
#[derive(Debug)]
#[must_use = "end a savepoint with rollback_to or release"]
pub struct Savepoint(Option<write_set::Mark>);

/// Which committed write of a key a transaction saw ([`Txn::version_of`]): equal versions
/// read at two times mean no commit wrote the key in between. Redis's WATCH needs exactly
/// this.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct KeyVersion(u64);

impl KeyVersion {
    /// The raw stamp: the commit timestamp of the version seen, or for an absent key a bound
    /// on its last removal (see [`Txn::version_of`]).
    pub fn get(self) -> u64 {
        self.0
    }
}

/// A transaction. Commit it with [`Txn::commit`]; dropping it aborts.
///
/// Slices returned by [`Txn::get`] and [`Txn::range`] borrow the transaction and stay valid
/// (without copying) until it ends; the borrow checker stops a `put` while any is held.
pub struct Txn<'db> {
    db: &'db Db,
    ts: u64,
    slot: SlotId,
    read_only: bool,
    isolation: Isolation,
    /// MVTO serializable: reads leave `tslast` and gap stamps. Otherwise reads are snapshot
    /// reads that write nothing shared.
    visible_reads: bool,
    /// Precision locking, serializable, read-write: reads are logged as predicates.
    logs_reads: bool,
    /// Taken from the thread's pool at the first logged read.
    preds: RefCell<Option<PredicateLog>>,
    /// Two-phase locking: every read and write takes locks, held to the end.
    two_pl: bool,
    /// The two-phase locks held.
    held: RefCell<Held>,
    /// Records found by reads (read-write transactions), reused by the commit.
    read_records: RefCell<Option<write_set::ReadRecords>>,
    /// Taken from the thread's pool at the first write.
    writes: Option<WriteSet>,
    /// Invariant: `true` once the slot is released; nothing may be read after that.
    ended: bool,
    /// The redo log epoch this commit joined (0: nothing logged).
    log_epoch: std::cell::Cell<u64>,
}

impl<'db> Txn<'db> {
    pub(crate) fn new(
        db: &'db Db,
        ts: u64,
        slot: SlotId,
        read_only: bool,
        isolation: Isolation,
    ) -> Self {
        let serializable = isolation == Isolation::Serializable;
        let cc = db.options.concurrency;
        Txn {
            db,
            ts,
            slot,
            read_only,
            isolation,
            visible_reads: cc == Concurrency::Mvto && serializable,
            logs_reads: cc == Concurrency::PrecisionLocking && serializable && !read_only,
            preds: RefCell::new(None),
            two_pl: cc == Concurrency::TwoPhaseLocking,
            held: RefCell::new(Held::default()),
            read_records: RefCell::new(None),
            writes: None,
            ended: false,
            log_epoch: std::cell::Cell::new(0),
        }
    }

    /// This transaction's isolation level.
    pub fn isolation(&self) -> Isolation {
        self.isolation
    }

    /// Logs a read predicate (precision locking only).
    fn log_read(&self, log: impl FnOnce(&mut PredicateLog)) {
        if self.logs_reads {
            log(self.preds.borrow_mut().get_or_insert_with(validation::take));
        }
    }

    /// This transaction's timestamp: its place in the serial order if it commits.
    pub fn timestamp(&self) -> u64 {
        self.ts
    }

    /// Whether the transaction has buffered any write (a replicated server's reply to a
    /// command that wrote waits for its own commit; one that only read, for a round to a
    /// majority).
    pub fn has_writes(&self) -> bool {
        self.writes.as_ref().is_some_and(|w| !w.is_empty())
    }

    /// Whether this is a read-only transaction.
    pub fn is_read_only(&self) -> bool {
        self.read_only
    }

    /// The largest value [`Txn::put`] accepts, in bytes (`Options::value_size_max`): a
    /// caller that builds a value (padding, concatenating) checks it before allocating.
    pub fn value_size_max(&self) -> usize {
        self.db.options.value_size_max
    }

    pub(crate) fn walk_word(&self) -> &'db crate::sync::AtomicU64 {
        self.db.timestamps.walk_word(self.slot)
    }

    fn check_key(&self, key: &[u8]) -> Result<(), Error> {
        let max = self.db.options.key_size_max;
        if key.len() > max {
            return Err(Error::KeyTooLarge {
                len: key.len(),
                max,
            });
        }
        Ok(())
    }

    /// The value of `key`, or `None` if it is absent. Sees this transaction's own writes.
    /// Never allocates; the slice is borrowed from the stored version.
    pub fn get(&self, table: &Table, key: impl AsRef<[u8]>) -> Result<Option<&[u8]>, Error> {
        let key = key.as_ref();
        self.check_key(key)?;
        let state = self.db.table_state(table)?;
        if let Some(own) = self.writes.as_ref().and_then(|w| w.get(table.id, key)) {
            return Ok(own);
        }
        Ok(self
            .read_committed(state, table.id, key)?
            .and_then(Version::value))
    }

    /// Which committed write of `key` this transaction sees (its own uncommitted writes do
    /// not count): the same `KeyVersion` read again later means no commit wrote the key in
    /// between, a different one that some commit did. It is a read of the key like
    /// [`Txn::get`] (validated at commit, and so on). For an absent key the version is the
    /// newest removal of a deleted key among the 1/4096 of keys that share its bucket, so
    /// it can differ with no write to this key when another key's deletion was collected
    /// meanwhile (a spurious "changed", never a missed one).
    pub fn version_of(&self, table: &Table, key: impl AsRef<[u8]>) -> Result<KeyVersion, Error> {
        let key = key.as_ref();
        self.check_key(key)?;
        let state = self.db.table_state(table)?;
        Ok(match self.read_committed(state, table.id, key)? {
            Some(version) => KeyVersion(version.ts()),
            None => KeyVersion(self.db.removal_stamp(table.id, key)),
        })
    }

    /// The committed version of `key` this transaction reads, by its protocol.
    #[inline]
    fn read_committed(
        &self,
        state: &'db TableState,
        table: u32,
        key: &[u8],
    ) -> Result<Option<&Version>, Error> {
        if self.two_pl {
            return self.get_locked(state, table, key);
        }
        if self.visible_reads {
            let Some(record) = state.index.get_or_stamp(key, self.ts) else {
                return Ok(None);
            };
            self.note_read(table, key, record);
            return Ok(read_visible(
                &state.index,
                record,
                self.ts,
                self.walk_word(),
            ));
        }
        self.log_read(|p| p.point(table, key));
        let Some(record) = state.index.get_or_stamp(key, 0) else {
            return Ok(None);
        };
        self.note_read(table, key, record);
        Ok(record.get().read_snapshot(self.ts, self.walk_word()))
    }

    /// Remembers the record a read-write transaction read, for its commit.
    #[inline]
    fn note_read(&self, table: u32, key: &[u8], record: RecordPtr) {
        if !self.read_only {
            self.read_records
                .borrow_mut()
                .get_or_insert_with(write_set::take_reads)
                .note(table, key, record);
        }
    }

    /// Buffers `key = value`; it becomes visible to others at commit.
    pub fn put(
        &mut self,
        table: &Table,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
    ) -> Result<(), Error> {
        let value = value.as_ref();
        let max = self.db.options.value_size_max;
        if value.len() > max {
            return Err(Error::ValueTooLarge {
                len: value.len(),
                max,
            });
        }
        self.write(table, key.as_ref(), Some(value))
    }

    /// Buffers `key = parts[0] ‖ parts[1] ‖ ...`, without building the value first (for
    /// callers that frame their values, like the server's type-and-deadline header).
    pub fn put_parts(
        &mut self,
        table: &Table,
        key: impl AsRef<[u8]>,
        parts: &[&[u8]],
    ) -> Result<(), Error> {
        let len: usize = parts.iter().map(|p| p.len()).sum();
        let max = self.db.options.value_size_max;
        if len > max {
            return Err(Error::ValueTooLarge { len, max });
        }
        let key = key.as_ref();
        if self.two_pl {
            // Locking may allocate the record with the value: build it whole for that path.
            return self.write(table, key, Some(&parts.concat()));
        }
        if self.read_only {
            return Err(Error::ReadOnly);
        }
        self.check_key(key)?;
        self.db.table_state(table)?;
        self.writes
            .get_or_insert_with(write_set::take)
            .put_parts(table.id, key, Some(parts));
        Ok(())
    }

    /// A savepoint: [`Txn::rollback_to`] it to undo this transaction's writes since, or
    /// [`Txn::release`] it to keep them. Savepoints nest; end the newest first. Reads since
    /// the savepoint stay part of the transaction (validated at commit) either way. The
    /// server runs each command of a MULTI block under one, so a command that fails halfway
    /// leaves no write behind.
    pub fn savepoint(&mut self) -> Savepoint {
        Savepoint(self.writes.as_mut().map(WriteSet::mark))
    }

    /// Undoes the writes since `sp`.
    pub fn rollback_to(&mut self, sp: Savepoint) {
        match (sp.0, self.writes.as_mut()) {
            (Some(m), Some(w)) => w.rollback(m),
            // No write set at the savepoint: everything buffered since goes.
            (None, Some(w)) => {
                let m = w.mark_empty();
                w.rollback(m);
            }
            (_, None) => {}
        }
    }

    /// Keeps the writes since `sp`.
    pub fn release(&mut self, sp: Savepoint) {
        if let (Some(m), Some(w)) = (sp.0, self.writes.as_mut()) {
            w.release(m);
        }
    }

    /// Buffers the deletion of `key` (a tombstone version at commit).
    pub fn delete(&mut self, table: &Table, key: impl AsRef<[u8]>) -> Result<(), Error> {
        self.write(table, key.as_ref(), None)
    }

    /// Deletes every key of `table` this transaction sees (its own writes included) and
    /// returns how many. The same as reading the whole table and deleting each key, and
    /// validated the same way, but a replicated commit carries it as one clear of the
    /// table rather than a tombstone per key, which each replica expands against its own
    /// copy (`replicated.rs`): so FLUSHALL of any size fits the replicated log.
    pub fn clear(&mut self, table: &Table) -> Result<u64, Error> {
        if self.read_only {
            return Err(Error::ReadOnly);
        }
        let keys: Vec<Vec<u8>> = self.range(table, ..)?.map(|(k, _)| k.to_vec()).collect();
        for k in &keys {
            self.delete(table, k)?;
        }
        if let Some(w) = self.writes.as_mut() {
            w.note_cleared(table.id);
        }
        Ok(keys.len() as u64)
    }

    fn write(&mut self, table: &Table, key: &[u8], value: Option<&[u8]>) -> Result<(), Error> {
        if self.read_only {
            return Err(Error::ReadOnly);
        }
        self.check_key(key)?;
        let state = self.db.table_state(table)?;
        if self.two_pl {
            let mut held = self.held.borrow_mut();
            loop {
                let record = state.index.get_or_insert_with(key, |gap_stamp| {
                    RecordPtr::alloc(table.id, key, gap_stamp, value)
                });
                if record.get().newest().is_none() {
                    // The key's first version: a phantom for anyone holding the table's S.
                    held.intend_table(table.id, &state.lock2pl)
                        .map_err(|r| self.lock_conflict(r))?;
                }
                match held.own_record(record) {
                    Ok(()) => break,
                    Err(Refused::Removed) => std::hint::spin_loop(),
                    Err(Refused::Conflict(r)) => return Err(self.lock_conflict(r)),
                }
            }
        }
        self.writes
            .get_or_insert_with(write_set::take)
            .put(table.id, key, value);
        Ok(())
    }

    /// The live keys in `bounds`, ascending, with their values, as of this transaction
    /// (its own writes included): `txn.range(&t, ..)`, `txn.range(&t, &b"a"[..]..&b"m"[..])`,
    /// or a `(Bound<&[u8]>, Bound<&[u8]>)` pair.
    pub fn range<'k>(
        &self,
        table: &Table,
        bounds: impl RangeBounds<&'k [u8]>,
    ) -> Result<Range<'_>, Error> {
        self.range_in(table, bounds, false)
    }

    /// As [`Txn::range`], descending.
    pub fn range_rev<'k>(
        &self,
        table: &Table,
        bounds: impl RangeBounds<&'k [u8]>,
    ) -> Result<Range<'_>, Error> {
        self.range_in(table, bounds, true)
    }

    fn range_in<'k>(
        &self,
        table: &Table,
        bounds: impl RangeBounds<&'k [u8]>,
        reverse: bool,
    ) -> Result<Range<'_>, Error> {
        let owned = |b: Bound<&&[u8]>| -> Result<Bound<Vec<u8>>, Error> {
            if let Bound::Included(k) | Bound::Excluded(k) = b {
                self.check_key(k)?;
            }
            Ok(b.map(|k| k.to_vec()))
        };
        let lo = owned(bounds.start_bound())?;
        let hi = owned(bounds.end_bound())?;
        let state = self.db.table_state(table)?;
        if self.two_pl {
            self.lock_range(state, table.id, &lo, &hi)?;
        }
        self.log_read(|p| {
            p.range(
                table.id,
                lo.as_ref().map(Vec::as_slice),
                hi.as_ref().map(Vec::as_slice),
            )
        });
        let reader = Reader {
            ts: self.ts,
            mode: if self.two_pl {
                ReadMode::Latest
            } else if self.visible_reads {
                ReadMode::Mvto
            } else {
                ReadMode::Snapshot
            },
            walk: self.walk_word(),
            writes: self.writes.as_ref(),
        };
        Ok(Range::new(state, table.id, reader, lo, hi, reverse))
    }

    /// Commits: afterwards every transaction with a larger timestamp sees the writes. With
    /// [`Durability::Sync`](crate::Durability) it returns once the commit is on disk (an
    /// `Error::Durability` then means it is visible but may not survive a crash).
    pub fn commit(self) -> Result<CommitTs, Error> {
        let db = self.db;
        let sync = db.durable.as_ref().is_some_and(|d| d.sync);
        let (ts, ticket) = self.commit_with_ticket()?;
        if sync {
            db.wait_durable(ticket)?;
        }
        Ok(ts)
    }

    /// Commits without waiting for the disk: returns the durability ticket to wait on
    /// later ([`Db::wait_durable`], [`Db::is_durable`]), so one thread can keep committing
    /// while earlier commits are being written (Silo's group commit).
    ///
    /// A transaction that only read gets a ticket too: what it read may not be on disk yet
    /// (a commit is visible before it is durable), and an answer built on it must not leave
    /// before it is, or a crash could take back what a client was told. It is durable at
    /// once unless a write it could have seen is still in flight.
    pub fn commit_with_ticket(mut self) -> Result<(CommitTs, DurabilityTicket), Error> {
        let result = self.commit_counted();
        let ticket = match self.log_epoch.get() {
            // Nothing logged: it only read (or wrote nothing). After the reads: at least
            // the epoch of every write they saw.
            0 if result.is_ok() => self.db.read_ticket(),
            epoch => DurabilityTicket(epoch),
        };
        self.end();
        result.map(|ts| (ts, ticket))
    }

    fn commit_counted(&mut self) -> Result<CommitTs, Error> {
        let result = self.commit_writes();
        let stats = self.site_stats();
        // One counter per outcome: `Db::stats` sums them, so a commit pays one increment.
        let counter = match result {
            Ok(_) if self.writes.is_none() => &stats.read_only_commits,
            Ok(_) => &stats.write_commits,
            Err(Error::Conflict { reason }) => match reason {
                ConflictReason::ReadByYounger => &stats.conflicts_read_by_younger,
                ConflictReason::WriteWrite => &stats.conflicts_write_write,
                ConflictReason::ReadChanged => &stats.conflicts_read_changed,
                ConflictReason::LockBusy => &stats.conflicts_lock_busy,
                ConflictReason::WrittenByYounger => &stats.conflicts_written_by_younger,
            },
            Err(_) => &stats.commit_errors,
        };
        counter.fetch_add(1, StdOrdering::Relaxed);
        result
    }

    /// Before a commit locks anything: refuses it if the log cannot take it.
    fn log_precheck(&self) -> Result<(), Error> {
        let (Some(d), Some(ws)) = (&self.db.durable, &self.writes) else {
            return Ok(());
        };
        d.logger.check_writable().map_err(Error::durability)?;
        d.logger
            .check_size(
                ws.entries()
                    .iter()
                    .map(|e| (e.table, ws.key(e), ws.value(e))),
            )
            .map_err(Error::durability)?;
        Ok(())
    }

    /// Appends the write set to this site's log, holding every write lock and before
    /// installing (the epoch order argument in `verso_log::logger` needs both).
    fn log_append(&self, ts: u64) {
        let (Some(d), Some(ws)) = (&self.db.durable, &self.writes) else {
            return;
        };
        let ticket = d.logger.append(
            self.slot.site as usize,
            ts,
            ws.entries()
                .iter()
                .map(|e| (e.table, ws.key(e), ws.value(e))),
        );
        self.log_epoch.set(ticket.epoch);
    }

    /// Aborts, discarding the writes. Dropping the transaction does the same.
    pub fn abort(mut self) {
        self.site_stats().aborts.fetch_add(1, StdOrdering::Relaxed);
        self.end();
    }

    fn site_stats(&self) -> &'db SiteStats {
        &self.db.stats[self.slot.site as usize]
    }

    /// Commits the buffered writes under the `Db`'s protocol (each in its own module).
    fn commit_writes(&mut self) -> Result<CommitTs, Error> {
        match self.db.options.concurrency {
            Concurrency::Mvto => self.commit_mvto(),
            Concurrency::PrecisionLocking => self.commit_precision(),
            Concurrency::TwoPhaseLocking => self.commit_locked(),
        }
    }

    /// A commit's first step, outside any lock: sorts the writes by (table, key), finds or
    /// inserts each record, and allocates each version at `ts`. Also hands out the buffer
    /// for the records the installs will queue for the GC.
    fn prepare(&mut self, ts: u64) -> (Prepared, Vec<GcEntry>) {
        let db = self.db;
        let reads_cell = self.read_records.borrow();
        let reads = reads_cell.as_ref();
        let ws = self.writes.as_mut().expect("a commit with writes");
        ws.sort_for_commit();
        let mut prepared = std::mem::take(&mut ws.prepared);
        for e in ws.entries() {
            let value = ws.value(e);
            let record = record_for_write(db, reads, e.table, ws.key(e), value);
            prepared.push((record, Version::new_in(record, ts, value)));
        }
        (prepared, std::mem::take(&mut ws.superseded))
    }

    /// A commit's last step: if it failed before installing (`installed` false), frees the
    /// versions and removes the records of inserts left empty (this commit's, or another's
    /// that failed too); queues the records whose older versions became garbage, collects
    /// this site's queue when it asks, and gives the buffers back to the write set.
    fn settle(&mut self, mut prepared: Prepared, mut superseded: Vec<GcEntry>, installed: bool) {
        let db = self.db;
        let site = self.slot.site as usize;
        if !installed {
            for &(_, version) in &prepared {
                // SAFETY: never published (the commit failed before installing), and
                // `prepared` is cleared below, so each is freed once.
                unsafe { Version::free(version) };
            }
            db.remove_empty_records(site, prepared.iter().map(|&(record, _)| record));
        }
        let count = prepared.len() as u64;
        prepared.clear();
        // The queue's mutex is taken only now, never while waiting for record locks.
        let collect = !superseded.is_empty() && {
            let mut gc = db.gc[site].lock().unwrap_or_else(|e| e.into_inner());
            gc.extend(superseded.drain(..));
            gc.wants_collection()
        };
        let ws = self.writes.as_mut().expect("a commit with writes");
        ws.prepared = prepared;
        ws.superseded = superseded;
        if installed {
            self.site_stats()
                .versions_installed
                .fetch_add(count, StdOrdering::Relaxed);
            if collect {
                db.collect_site(site);
            }
        }
    }

    fn end(&mut self) {
        if self.ended {
            return;
        }
        self.ended = true;
        self.db.timestamps.end(self.slot);
        if let Some(ws) = self.writes.take() {
            write_set::give_back(ws);
        }
        if let Some(p) = self.preds.get_mut().take() {
            validation::give_back(p);
        }
        if let Some(r) = self.read_records.get_mut().take() {
            write_set::give_back_reads(r);
        }
        if self.two_pl {
            let db = self.db;
            let held = self.held.get_mut();
            // Records this transaction inserted and never gave a version (it aborted).
            let empty = held.empty_owned();
            held.release_all(|id| &db.table_state_by_id(id).lock2pl);
            if !empty.is_empty() {
                db.remove_empty_records(self.slot.site as usize, empty.into_iter());
            }
        }
    }
}

/// Records `from..to` of a commit that are locked and not yet released. Dropping it releases
/// them: on a conflict (nothing installed yet), and on a panic mid-install (an invariant
/// broke), so other transactions are not left waiting on a lock nobody will release.
struct HeldRecords<'a> {
    records: &'a mut [(RecordPtr, NonNull<Version>)],
    ts: u64,
    from: usize,
    to: usize,
}

impl Drop for HeldRecords<'_> {
    fn drop(&mut self) {
        for &(record, _) in &self.records[self.from..self.to] {
            record.get().unlock(self.ts);
        }
    }
}

/// Replaces a prepared entry's record, which left the index since the commit found it, with
/// the key's record now ([`Db::record_again`]). A version prepared in the old record's
/// inline slot moves along: a version must not outlive the record it lives in.
fn rehome(db: &Db, entry: &mut (RecordPtr, NonNull<Version>)) {
    entry.0 = db.record_again(entry.0);
    // SAFETY: unpublished, owned by this commit.
    let version = unsafe { entry.1.as_ref() };
    if version.is_inline() {
        let moved = Version::new_in(entry.0, version.ts(), version.value());
        // SAFETY: never published, and replaced here; its record is still allocated, since
        // this transaction found it before it left the index.
        unsafe { Version::free(entry.1) };
        entry.1 = moved;
    }
}

/// The record of a written key: the one a read of this transaction found, else the
/// index's (inserting it).
fn record_for_write(
    db: &Db,
    reads: Option<&write_set::ReadRecords>,
    table: u32,
    key: &[u8],
    value: Option<&[u8]>,
) -> RecordPtr {
    reads.and_then(|r| r.find(table, key)).unwrap_or_else(|| {
        db.table_state_by_id(table)
            .index
            .get_or_insert_with(key, |gap_stamp| {
                RecordPtr::alloc(table, key, gap_stamp, value)
            })
    })
}

/// Snapshot read of `record` at `ts`, as a value slice (`None` if absent or deleted).
pub(crate) fn read_snapshot<'t>(
    record: &'t Record,
    ts: u64,
    walk: &crate::sync::AtomicU64,
) -> Option<&'t [u8]> {
    record.read_snapshot(ts, walk).and_then(|v| v.value())
}

/// MVTO read of `record` at `ts`: the version it sees (`None` if none). If the record has
/// left the index, reads the key again through `index`, leaving `ts` on the gap or reading
/// the record that holds the key now (`record/mod.rs`, "Removal").
pub(crate) fn read_visible<'t>(
    index: &'t TableIndex,
    mut record: RecordPtr,
    ts: u64,
    walk: &crate::sync::AtomicU64,
) -> Option<&'t Version> {
    let mut step = 0;
    loop {
        match record.get().read(ts, walk) {
            Ok(version) => return version,
            Err(Removed) => {
                // The removal may still be taking the key out of the index.
                crate::sync::spin_step(&mut step);
                record = index.get_or_stamp(record.key(), ts)?;
            }
        }
    }
}

impl Drop for Txn<'_> {
    fn drop(&mut self) {
        if !self.ended {
            self.site_stats().aborts.fetch_add(1, StdOrdering::Relaxed);
            self.end();
        }
    }
}

impl std::fmt::Debug for Txn<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Txn")
            .field("ts", &self.ts)
            .field("read_only", &self.read_only)
            .field("writes", &self.writes.as_ref().map_or(0, WriteSet::len))
            .finish()
    }
}
