//! Strict two-phase locking, no-wait: **a baseline for comparison only**
//! (`Concurrency::TwoPhaseLocking`), the protocol vMVCC and HyPer measure MVCC against.
//!
//! * Records carry a reader-writer lock word (`Record::try_lock_shared` and friends). A read
//!   takes it shared, a write exclusive (at `put`, upgrading a shared lock the transaction
//!   holds), and every lock is held to the end of the transaction (strict).
//! * Phantoms: each table has a lock word with two modes, S (range reads, and point reads
//!   of keys with no record at all) and IX (writes that give a key its first version).
//!   S excludes IX from other transactions and vice versa; a key that has a record (even a
//!   deleted one) is protected by its record lock instead.
//! * No-wait: a read-write transaction that cannot get a lock aborts at once
//!   (`ConflictReason::LockBusy`), so there are no deadlocks. A read-only transaction waits
//!   instead: it waits only for writers, which never wait, so it never aborts.
//! * Reads see the newest version (the lock keeps it the newest); commit installs the
//!   buffered writes at a fresh timestamp, then releases everything.

use std::collections::HashMap;

use crate::index::RecordPtr;
use crate::record::Refused;
use crate::sync::{spin_step, AtomicU64, Ordering};
use crate::ConflictReason;

/// One unit of the table lock's IX count (the S count is the low 32 bits).
const IX_UNIT: u64 = 1 << 32;
const S_MASK: u64 = IX_UNIT - 1;

/// A table's phantom lock (see the module docs).
#[derive(Default)]
pub(crate) struct TableLock(AtomicU64);

impl TableLock {
    /// Takes S unless another transaction holds IX (`own_ix`: the caller holds one).
    fn try_shared(&self, own_ix: bool) -> bool {
        let mut v = self.0.load(Ordering::Relaxed);
        loop {
            if v / IX_UNIT > u64::from(own_ix) {
                return false;
            }
            match self
                .0
                .compare_exchange_weak(v, v + 1, Ordering::Acquire, Ordering::Relaxed)
            {
                Ok(_) => return true,
                Err(now) => v = now,
            }
        }
    }

    /// Takes IX unless another transaction holds S (`own_s`: the caller holds one).
    fn try_intent(&self, own_s: bool) -> bool {
        let mut v = self.0.load(Ordering::Relaxed);
        loop {
            if v & S_MASK > u64::from(own_s) {
                return false;
            }
            match self
                .0
                .compare_exchange_weak(v, v + IX_UNIT, Ordering::Acquire, Ordering::Relaxed)
            {
                Ok(_) => return true,
                Err(now) => v = now,
            }
        }
    }

    fn release(&self, s: bool, ix: bool) {
        let amount = u64::from(s) + if ix { IX_UNIT } else { 0 };
        self.0.fetch_sub(amount, Ordering::Release);
    }
}

/// The locks one transaction holds.
#[derive(Default)]
pub(crate) struct Held {
    /// Records and whether exclusively.
    records: Vec<(RecordPtr, bool)>,
    /// Record address -> position in `records`: a scan of a whole table (TPC-C's consistency
    /// check) holds hundreds of thousands of locks, so lookups must not be linear.
    by_addr: HashMap<usize, usize>,
    /// Tables: (id, S held, IX held).
    tables: Vec<(u32, bool, bool)>,
}

impl Held {
    fn record_mode(&self, r: RecordPtr) -> Option<bool> {
        self.by_addr.get(&r.addr()).map(|&i| self.records[i].1)
    }

    fn push_record(&mut self, r: RecordPtr, exclusive: bool) {
        self.by_addr.insert(r.addr(), self.records.len());
        self.records.push((r, exclusive));
    }

    fn table(&mut self, id: u32) -> &mut (u32, bool, bool) {
        if let Some(i) = self.tables.iter().position(|t| t.0 == id) {
            return &mut self.tables[i];
        }
        self.tables.push((id, false, false));
        self.tables.last_mut().expect("just pushed")
    }

    /// A shared lock on `r` (nothing if any lock on it is held already). Read-only
    /// transactions wait; others fail at once. `Removed`: `r` left the index (it keeps its
    /// writer bit for good), look the key up again.
    pub(crate) fn share_record(&mut self, r: RecordPtr, wait: bool) -> Result<(), Refused> {
        if self.record_mode(r).is_some() {
            return Ok(());
        }
        let mut step = 0;
        while !r.get().try_lock_shared() {
            if r.get().is_removed() {
                return Err(Refused::Removed);
            }
            if !wait {
                return Err(ConflictReason::LockBusy.into());
            }
            spin_step(&mut step);
        }
        self.push_record(r, false);
        Ok(())
    }

    /// The exclusive lock on `r`, upgrading a shared one. (A record this transaction holds
    /// a lock on cannot be removed: removal needs the lock word free.)
    pub(crate) fn own_record(&mut self, r: RecordPtr) -> Result<(), Refused> {
        match self.record_mode(r) {
            Some(true) => Ok(()),
            Some(false) => {
                if !r.get().try_lock_exclusive(true) {
                    return Err(ConflictReason::LockBusy.into());
                }
                let i = self.by_addr[&r.addr()];
                self.records[i].1 = true;
                Ok(())
            }
            None => {
                if !r.get().try_lock_exclusive(false) {
                    if r.get().is_removed() {
                        return Err(Refused::Removed);
                    }
                    return Err(ConflictReason::LockBusy.into());
                }
                self.push_record(r, true);
                Ok(())
            }
        }
    }

    /// The records held exclusively that have no version: inserts this transaction made and
    /// did not commit (to remove once the locks are released).
    pub(crate) fn empty_owned(&self) -> Vec<RecordPtr> {
        self.records
            .iter()
            .filter(|&&(r, exclusive)| exclusive && r.get().newest().is_none())
            .map(|&(r, _)| r)
            .collect()
    }

    /// S on table `id` (its lock word `lock`).
    pub(crate) fn share_table(
        &mut self,
        id: u32,
        lock: &TableLock,
        wait: bool,
    ) -> Result<(), ConflictReason> {
        let t = self.table(id);
        if t.1 {
            return Ok(());
        }
        let mut step = 0;
        while !lock.try_shared(t.2) {
            if !wait {
                return Err(ConflictReason::LockBusy);
            }
            spin_step(&mut step);
        }
        t.1 = true;
        Ok(())
    }

    /// IX on table `id`.
    pub(crate) fn intend_table(&mut self, id: u32, lock: &TableLock) -> Result<(), ConflictReason> {
        let t = self.table(id);
        if t.2 {
            return Ok(());
        }
        if !lock.try_intent(t.1) {
            return Err(ConflictReason::LockBusy);
        }
        t.2 = true;
        Ok(())
    }

    /// Releases everything; `table_lock` finds a table's lock word.
    pub(crate) fn release_all<'a>(&mut self, table_lock: impl Fn(u32) -> &'a TableLock) {
        for (r, x) in self.records.drain(..) {
            r.get().unlock_2pl(x);
        }
        self.by_addr.clear();
        for (id, s, ix) in self.tables.drain(..) {
            table_lock(id).release(s, ix);
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn table_modes_exclude_each_other_across_transactions() {
        let l = TableLock::default();
        assert!(l.try_shared(false) && l.try_shared(false));
        assert!(!l.try_intent(false), "IX while others hold S");
        l.release(true, false);
        assert!(l.try_intent(true), "S upgraded to SIX by its only holder");
        assert!(!l.try_shared(false), "S while another holds IX");
        assert!(l.try_shared(true), "its own IX does not block its S");
        l.release(true, true);
        l.release(true, false);
        assert_eq!(l.0.load(Ordering::Relaxed), 0);
    }
}
