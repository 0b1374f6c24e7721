//! Precision locking's commit (HyPer §2.3; the module docs of `txn` list the steps): lock
//! the written records without waiting, draw the commit timestamp while listing the write
//! set in the recently-committed list, stamp the records, validate the read predicates
//! against what committed in between, then install at the commit timestamp.

use std::ptr::NonNull;

use super::{rehome, HeldRecords, Txn};
use crate::gc::GcEntry;
use crate::index::RecordPtr;
use crate::record::{Refused, Version, OWNER_UNSTAMPED};
use crate::validation::PredicateLog;
use crate::{CommitTs, ConflictReason, Error};

impl Txn<'_> {
    /// Precision-locking commit (steps 1-5 of the module docs of `txn`).
    pub(super) fn commit_precision(&mut self) -> Result<CommitTs, Error> {
        let start = self.ts;
        if !self.has_writes() {
            // Nothing written: serialized at its snapshot, nothing to validate.
            return Ok(CommitTs(start));
        }
        self.log_precheck()?;
        self.replication_precheck()?;
        // The commit timestamp is not known yet; `Version::set_ts` fills it in.
        let (mut prepared, mut superseded) = self.prepare(0);
        let result = self.lock_validate_install(&mut prepared, start, |e| superseded.push(e));
        self.settle(prepared, superseded, result.is_ok());
        result.map(CommitTs)
    }

    /// `ws` as the commit sink takes it: table names, not ids; the tables it cleared first.
    fn replicated_writes<'a>(
        &self,
        ws: &'a crate::write_set::WriteSet,
    ) -> impl Iterator<Item = crate::ReplicatedWrite<'a>> + 'a
    where
        Self: 'a,
    {
        let db = self.db;
        let clears = ws
            .cleared()
            .iter()
            .map(move |&t| crate::ReplicatedWrite::clear(&db.table_state_by_id(t).name));
        clears.chain(ws.entries().iter().map(move |e| crate::ReplicatedWrite {
            table: &db.table_state_by_id(e.table).name,
            key: ws.key(e),
            value: ws.value(e),
        }))
    }

    /// A replicated commit's write set must fit the replicated log's messages.
    fn replication_precheck(&self) -> Result<(), Error> {
        let (Some(sink), Some(ws)) = (self.db.commit_sink(), &self.writes) else {
            return Ok(());
        };
        let max = sink.write_set_bytes_max();
        let mut logged = crate::ClearFilter::default();
        let bytes = crate::replicated::write_set_bytes(
            self.replicated_writes(ws).filter(|w| logged.logged(w)),
        );
        if bytes > max {
            return Err(Error::TransactionTooLarge { bytes, max });
        }
        Ok(())
    }

    /// Steps 1-5 of a precision-locking commit over `prepared` (sorted); returns `cts`.
    fn lock_validate_install(
        &self,
        prepared: &mut [(RecordPtr, NonNull<Version>)],
        start: u64,
        mut superseded: impl FnMut(GcEntry),
    ) -> Result<u64, Error> {
        let mut held = HeldRecords {
            records: prepared,
            ts: OWNER_UNSTAMPED,
            from: 0,
            to: 0,
        };
        for i in 0..held.records.len() {
            loop {
                match held.records[i].0.get().lock_no_wait(start) {
                    Ok(()) => break,
                    Err(Refused::Conflict(reason)) => return Err(Error::Conflict { reason }),
                    Err(Refused::Removed) => {
                        rehome(self.db, &mut held.records[i]);
                    }
                }
            }
            held.to += 1;
        }
        let site = self.slot.site as usize;
        let ws = self.writes.as_ref().expect("a commit with writes");
        let timestamps = &self.db.timestamps;
        let sink = self.db.commit_sink();
        let mut slot = None;
        let (entry, cts) = self.db.commit_log.publish(
            ws.entries().iter().map(|e| (e.table, ws.key(e))),
            || {
                let cts = timestamps.fresh(site);
                // In the same critical section: the replicated log is in `cts` order.
                slot = sink.map(|s| s.reserve(cts));
                cts
            },
            || timestamps.snapshot().low,
        );
        debug_assert!(cts > start);
        let slot = match slot {
            None => None,
            Some(Some(slot)) => Some(slot),
            Some(None) => {
                entry.abort();
                return Err(Error::NotPrimary);
            }
        };
        for &(record, _) in held.records.iter() {
            record.get().stamp(cts);
        }
        held.ts = cts;
        if self.logs_reads {
            let preds = self.preds.borrow();
            let empty = PredicateLog::default();
            let preds = preds.as_ref().unwrap_or(&empty);
            if !self.db.commit_log.validate(&entry, start, preds) {
                entry.abort();
                if let (Some(sink), Some(slot)) = (sink, slot) {
                    sink.abandon(slot);
                }
                return Err(Error::Conflict {
                    reason: ConflictReason::ReadChanged,
                });
            }
        }
        // Validated: the transaction is serialized at `cts`.
        if let (Some(sink), Some(slot)) = (sink, slot) {
            sink.fill(slot, cts, &mut self.replicated_writes(ws));
        }
        self.log_append(cts);
        for i in 0..held.records.len() {
            let (record, version) = held.records[i];
            // SAFETY: still private to this commit.
            unsafe { Version::set_ts(version, cts) };
            if let Some(s) = record.get().install(version) {
                superseded(GcEntry::new(record, s));
            }
            record.get().unlock(cts);
            held.from += 1;
        }
        Ok(cts)
    }
}
