//! MVTO's commit (vMVCC §2): lock the written records in (table, key) order, abort if a
//! younger transaction read or wrote one (its `tslast` is above this timestamp), install
//! at the begin timestamp, unlock.

use std::ptr::NonNull;

use super::{rehome, HeldRecords, Txn};
use crate::db::Db;
use crate::gc::GcEntry;
use crate::index::RecordPtr;
use crate::record::{Refused, Removed, Version};
use crate::{CommitTs, ConflictReason, Error, Fault};

impl Txn<'_> {
    /// MVTO commit: serialized at the begin timestamp.
    pub(super) fn commit_mvto(&mut self) -> Result<CommitTs, Error> {
        let ts = self.ts;
        if !self.has_writes() {
            return Ok(CommitTs(ts));
        }
        self.log_precheck()?;
        let (mut prepared, mut superseded) = self.prepare(ts);
        if self.db.options.fault == Fault::StaleInstall {
            self.log_append(ts);
            for entry in prepared.iter_mut() {
                while entry.0.get().install_stale(entry.1).map(|gc| {
                    if let Some(s) = gc {
                        superseded.push(GcEntry::new(entry.0, s));
                    }
                }) == Err(Removed)
                {
                    rehome(self.db, entry);
                }
            }
            self.settle(prepared, superseded, true);
            return Ok(CommitTs(ts));
        }
        let result = lock_and_install(
            self.db,
            &mut prepared,
            ts,
            || self.log_append(ts),
            |entry| superseded.push(entry),
        );
        self.settle(prepared, superseded, result.is_ok());
        result.map_err(|reason| Error::Conflict { reason })?;
        Ok(CommitTs(ts))
    }
}

/// Locks every prepared record in (table, key) order, then installs and unlocks, calling
/// `superseded` for each record that now needs the GC. On a conflict, unlocks what it locked
/// and reports why; nothing was installed. A record that left the index since it was found
/// is replaced by the key's current one (same key, so the order holds).
fn lock_and_install(
    db: &Db,
    prepared: &mut [(RecordPtr, NonNull<Version>)],
    ts: u64,
    before_install: impl FnOnce(),
    mut superseded: impl FnMut(GcEntry),
) -> Result<(), ConflictReason> {
    let mut held = HeldRecords {
        records: prepared,
        ts,
        from: 0,
        to: 0,
    };
    for i in 0..held.records.len() {
        loop {
            match held.records[i].0.get().lock_for_commit(ts) {
                Ok(()) => break,
                Err(Refused::Conflict(reason)) => return Err(reason),
                Err(Refused::Removed) => rehome(db, &mut held.records[i]),
            }
        }
        held.to += 1;
    }
    // Every record is held and validated: the transaction is now serialized at `ts`.
    before_install();
    for i in 0..held.records.len() {
        let (record, version) = held.records[i];
        if let Some(s) = record.get().install(version) {
            superseded(GcEntry::new(record, s));
        }
        record.get().unlock(ts);
        held.from += 1;
    }
    Ok(())
}
