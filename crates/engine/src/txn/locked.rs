//! Strict two-phase locking (`two_pl.rs` holds the locks): reads and writes lock as they
//! go, and the commit, holding every lock, installs at a fresh timestamp. A comparison
//! baseline only.

use std::ops::Bound;

use super::Txn;
use crate::db::TableState;
use crate::gc::GcEntry;
use crate::index::OrderedIndex;
use crate::record::{Refused, Version};
use crate::{CommitTs, ConflictReason, Error};
use std::sync::atomic::Ordering as StdOrdering;

impl Txn<'_> {
    /// Two-phase locking read: lock, then read the newest version.
    pub(super) fn get_locked(
        &self,
        state: &TableState,
        table: u32,
        key: &[u8],
    ) -> Result<Option<&Version>, Error> {
        let wait = self.read_only;
        let mut held = self.held.borrow_mut();
        loop {
            let record = match state.index.get_or_stamp(key, 0) {
                Some(r) => r,
                None => {
                    // No record at all: the table's S lock keeps the key from appearing.
                    held.share_table(table, &state.lock2pl, wait)
                        .map_err(|r| self.lock_conflict(r))?;
                    match state.index.get_or_stamp(key, 0) {
                        Some(r) => r,
                        None => return Ok(None),
                    }
                }
            };
            match held.share_record(record, wait) {
                Ok(()) => return Ok(record.get().newest()),
                // Removed from the index meanwhile: look again.
                Err(Refused::Removed) => std::hint::spin_loop(),
                Err(Refused::Conflict(r)) => return Err(self.lock_conflict(r)),
            }
        }
    }

    /// Counts a two-phase-locking conflict (it surfaces at a read or write, not at commit).
    pub(super) fn lock_conflict(&self, reason: ConflictReason) -> Error {
        self.site_stats()
            .conflicts_lock_busy
            .fetch_add(1, StdOrdering::Relaxed);
        Error::Conflict { reason }
    }

    /// Two-phase locking range: the table's S lock (no new keys), then every record in the
    /// range shared, before anything is read.
    pub(super) fn lock_range(
        &self,
        state: &TableState,
        table: u32,
        lo: &Bound<Vec<u8>>,
        hi: &Bound<Vec<u8>>,
    ) -> Result<(), Error> {
        let wait = self.read_only;
        let mut held = self.held.borrow_mut();
        held.share_table(table, &state.lock2pl, wait)
            .map_err(|r| self.lock_conflict(r))?;
        let mut records = Vec::new();
        state.index.scan(
            lo.as_ref().map(Vec::as_slice),
            hi.as_ref().map(Vec::as_slice),
            verso_index::Direction::Forward,
            0,
            |r| {
                records.push(r);
                true
            },
        );
        for r in records {
            match held.share_record(r, wait) {
                // Removed: the key is absent, and the table's S keeps it from coming back.
                Ok(()) | Err(Refused::Removed) => {}
                Err(Refused::Conflict(r)) => return Err(self.lock_conflict(r)),
            }
        }
        Ok(())
    }

    /// Two-phase-locking commit: every written record is locked exclusively already, so it
    /// cannot fail; installs at a fresh timestamp (locks are released by `end`).
    pub(super) fn commit_locked(&mut self) -> Result<CommitTs, Error> {
        // Serialized at a point where it holds all its locks: now, not at begin (a reader
        // may have read what committed after it began).
        let cts = self.db.timestamps.fresh(self.slot.site as usize);
        if !self.has_writes() {
            return Ok(CommitTs(cts));
        }
        self.log_precheck()?;
        self.log_append(cts);
        let (prepared, mut superseded) = self.prepare(cts);
        for &(record, version) in &prepared {
            let r = record.get();
            r.lock_for_install(cts);
            if let Some(s) = r.install(version) {
                superseded.push(GcEntry::new(record, s));
            }
            r.unlock(cts);
        }
        self.settle(prepared, superseded, true);
        Ok(CommitTs(cts))
    }
}
