//! `--raw-index`: the same key stream as plain index lookups, no transactions. The ceiling
//! the engine is measured against.
//!
//! Keys live in the selected index (Masstree or `LockedBTree`) mapping each key to a *slot number*; the
//! values live outside the index in a [`ValueStore`], one fixed-size slot per key. A read is
//! an index lookup plus a read of the slot's first 8 bytes; a write is an index lookup plus
//! a copy of the new value into the slot.
//!
//! # The value store: a seqlock per slot
//!
//! Concurrent writers to one slot must not interleave, and a reader must not see a torn
//! word. Each slot is `[seq, w0, w1, ...]` in one array of `AtomicU64` (the sequence word
//! next to the value, so a lookup touches one or two cache lines):
//!
//! * A writer takes the slot's tiny spinlock by CAS-ing `seq` from even to odd, stores the
//!   value words, and releases by storing `seq + 2`. Writers to one slot are thus serialized.
//! * A reader does not lock: it reads `seq` (must be even), the words, then `seq` again, and
//!   retries if it changed. Reads stay free of read-modify-writes, as a ceiling should be.
//!
//! Every shared access is atomic (the value words are `AtomicU64` accessed `Relaxed`, ordered
//! by the fences Boehm gives for seqlocks in "Can Seqlocks Get Along With Programming
//! Language Memory Models?", MSPC'12), so there is no data race in Rust's memory model and
//! no `unsafe` here at all.

use std::ops::Bound;
use std::sync::atomic::{fence, AtomicU64, Ordering};

use verso_engine::IndexKind;
use verso_index::{Direction, LockedBTree, Masstree};

use crate::rng::Rng;
use crate::runner::{Control, Workload};
use crate::ycsb::{OpKind, PointOps, Spin};
use crate::BenchError;

/// Fixed-size value slots behind per-slot seqlocks. See the module docs.
pub struct ValueStore {
    /// `slots * stride` words: each slot is its sequence word then its value words.
    words: Box<[AtomicU64]>,
    /// 1 + value words per slot.
    stride: usize,
    value_size: usize,
}

impl ValueStore {
    /// A store of `slots` zeroed values of `value_size` bytes each.
    pub fn new(slots: u64, value_size: usize) -> Result<Self, BenchError> {
        let stride = 1 + value_size.div_ceil(8);
        let len = usize::try_from(slots)
            .ok()
            .and_then(|s| s.checked_mul(stride))
            .ok_or_else(|| {
                BenchError::Config(format!(
                    "{slots} slots of {value_size} bytes do not fit in memory"
                ))
            })?;
        Ok(ValueStore {
            words: (0..len).map(|_| AtomicU64::new(0)).collect(),
            stride,
            value_size,
        })
    }

    /// Bytes per value.
    pub fn value_size(&self) -> usize {
        self.value_size
    }

    fn slot(&self, slot: u64) -> &[AtomicU64] {
        let start = slot as usize * self.stride;
        &self.words[start..start + self.stride]
    }

    /// The first 8 bytes of the value in `slot` (little-endian; zero-padded when the value
    /// is shorter), read consistently with respect to concurrent writers.
    #[inline]
    pub fn read_first_word(&self, slot: u64) -> u64 {
        let s = self.slot(slot);
        let mut spin = Spin::default();
        loop {
            let before = s[0].load(Ordering::Acquire);
            if before & 1 == 0 {
                let word = s.get(1).map_or(0, |w| w.load(Ordering::Relaxed));
                // Keeps the word load above the re-check: if a writer's stores were seen,
                // so is its odd (or bumped) sequence number.
                fence(Ordering::Acquire);
                if s[0].load(Ordering::Relaxed) == before {
                    return word;
                }
            }
            spin.spin();
        }
    }

    /// Copies `value` (at most `value_size` bytes; shorter values are zero-padded) into `slot`.
    #[inline]
    pub fn write(&self, slot: u64, value: &[u8]) {
        let s = self.slot(slot);
        let mut spin = Spin::default();
        let seq = loop {
            let seq = s[0].load(Ordering::Relaxed);
            if seq & 1 == 0
                && s[0]
                    .compare_exchange_weak(seq, seq + 1, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
            {
                break seq;
            }
            spin.spin();
        };
        // A reader that sees any of the stores below must also see the odd sequence number.
        fence(Ordering::Release);
        let mut chunks = value[..value.len().min(self.value_size)].chunks(8);
        for w in &s[1..] {
            let mut bytes = [0u8; 8];
            if let Some(c) = chunks.next() {
                bytes[..c.len()].copy_from_slice(c);
            }
            w.store(u64::from_le_bytes(bytes), Ordering::Relaxed);
        }
        s[0].store(seq + 2, Ordering::Release);
    }
}

/// The index under the raw-index ceiling: the same kinds the engine can use.
pub enum RawIndex {
    /// Masstree, the engine's default.
    Masstree(Masstree<u64>),
    /// The `BTreeMap` behind a `RwLock`.
    BTree(LockedBTree<u64>),
}

impl RawIndex {
    fn new(kind: IndexKind) -> Self {
        match kind {
            IndexKind::LockedBTree => RawIndex::BTree(LockedBTree::new()),
            _ => RawIndex::Masstree(Masstree::new()),
        }
    }

    /// The slot of `key`.
    #[inline]
    pub fn get(&self, key: &[u8]) -> Option<u64> {
        match self {
            RawIndex::Masstree(m) => m.get(key),
            RawIndex::BTree(b) => b.get(key),
        }
    }

    /// Inserts `key` unless present.
    pub fn get_or_insert_with(&self, key: &[u8], make: impl FnOnce(u64) -> u64) -> (u64, bool) {
        match self {
            RawIndex::Masstree(m) => m.get_or_insert_with(key, make),
            RawIndex::BTree(b) => b.get_or_insert_with(key, make),
        }
    }

    /// A stamped scan, as the engine's index does it.
    pub fn scan(
        &self,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        direction: Direction,
        stamp: u64,
        visit: impl FnMut(&[u8], u64) -> bool,
    ) -> bool {
        match self {
            RawIndex::Masstree(m) => m.scan(lo, hi, direction, stamp, visit),
            RawIndex::BTree(b) => b.scan(lo, hi, direction, stamp, visit),
        }
    }
}

/// The raw-index "database": the key index and the value slots.
pub struct RawDb {
    /// Key (8-byte big-endian) to slot number.
    pub index: RawIndex,
    /// The values.
    pub store: ValueStore,
}

impl RawDb {
    /// An empty index over a store for `keys` values of `value_size` bytes.
    pub fn new(keys: u64, value_size: usize, index: IndexKind) -> Result<Self, BenchError> {
        Ok(RawDb {
            index: RawIndex::new(index),
            store: ValueStore::new(keys, value_size)?,
        })
    }

    /// Inserts keys `lo..hi`, each into the slot of the same number, with its initial value.
    pub fn load(&self, lo: u64, hi: u64, value: &mut [u8]) {
        for k in lo..hi {
            self.index.get_or_insert_with(&k.to_be_bytes(), |_| k);
            crate::ycsb::stamp_value(value, k);
            self.store.write(k, value);
        }
    }
}

/// One worker thread's raw-index loop state.
pub(crate) struct RawWorker<'a> {
    pub(crate) db: &'a RawDb,
    pub(crate) ops: PointOps,
    pub(crate) scan_length: u64,
    pub(crate) sink: u64,
}

impl<'a> RawWorker<'a> {
    pub(crate) fn new(db: &'a RawDb, ops: PointOps, scan_length: u64) -> Self {
        RawWorker {
            db,
            ops,
            scan_length,
            sink: 0,
        }
    }
}

impl Workload for RawWorker<'_> {
    fn txn(&mut self, _ctl: &Control) -> Result<Option<u64>, BenchError> {
        let db = self.db;
        if self.scan_length > 0 {
            let start = self.ops.chooser.next(&mut self.ops.rng);
            let lo = start.to_be_bytes();
            let hi = start.saturating_add(self.scan_length).to_be_bytes();
            let mut acc = 0u64;
            // Stamp 0: no reader ever needs phantom protection here; the index still does
            // its `fetch_max` on each gap, which is part of what a scan costs it.
            db.index.scan(
                Bound::Included(&lo),
                Bound::Excluded(&hi),
                Direction::Forward,
                0,
                |_, slot| {
                    acc ^= db.store.read_first_word(slot);
                    true
                },
            );
            self.sink ^= std::hint::black_box(acc);
            return Ok(Some(0));
        }
        self.ops.fill();
        for i in 0..self.ops.len() {
            let (kind, key) = self.ops.get(i);
            let Some(slot) = db.index.get(&key) else {
                // Every key was loaded, so this is a harness bug, not an input error.
                return Err(BenchError::Other(format!(
                    "raw index lost key {}",
                    u64::from_be_bytes(key)
                )));
            };
            match kind {
                OpKind::Read => self.sink ^= std::hint::black_box(db.store.read_first_word(slot)),
                OpKind::Insert | OpKind::Scan => {
                    // `YcsbConfig::validate` keeps core workloads off the raw index.
                    return Err(BenchError::Other(
                        "the raw index runs reads and writes only".into(),
                    ));
                }
                OpKind::ReadModifyWrite => {
                    self.sink ^= std::hint::black_box(db.store.read_first_word(slot));
                    let value = self.ops.fresh_value();
                    db.store.write(slot, value);
                }
                OpKind::Write => {
                    let value = self.ops.fresh_value();
                    db.store.write(slot, value);
                }
            }
        }
        Ok(Some(0))
    }
}

/// A long reader without transactions: the same 1%-of-keys lookups, for symmetry with the
/// engine mode (nothing holds back anything here, so these only add load).
pub(crate) struct RawLongReader<'a> {
    pub(crate) db: &'a RawDb,
    pub(crate) rng: Rng,
    pub(crate) keys: u64,
    pub(crate) reads: u64,
    pub(crate) sink: u64,
}

impl crate::runner::LongReader for RawLongReader<'_> {
    fn read(&mut self, ctl: &Control) -> Result<bool, BenchError> {
        for i in 0..self.reads {
            if i % 1024 == 1023 && ctl.stopped() {
                return Ok(false);
            }
            let key = self.rng.below(self.keys).to_be_bytes();
            if let Some(slot) = self.db.index.get(&key) {
                self.sink ^= std::hint::black_box(self.db.store.read_first_word(slot));
            }
        }
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_round_trips_and_pads() {
        let s = ValueStore::new(4, 13).unwrap();
        assert_eq!(s.read_first_word(2), 0);
        s.write(2, b"abcdefghijklm");
        assert_eq!(s.read_first_word(2), u64::from_le_bytes(*b"abcdefgh"));
        s.write(3, b"xy");
        assert_eq!(
            s.read_first_word(3),
            u64::from_le_bytes([b'x', b'y', 0, 0, 0, 0, 0, 0])
        );
        let empty = ValueStore::new(2, 0).unwrap();
        empty.write(1, b"ignored");
        assert_eq!(empty.read_first_word(1), 0);
    }

    #[test]
    fn readers_never_see_torn_values() {
        // Writers store values whose 16 bytes repeat one byte; a reader checking two words
        // would catch a torn copy. Here we check the first word is always uniform.
        let s = ValueStore::new(1, 16).unwrap();
        s.write(0, &[0u8; 16]);
        std::thread::scope(|scope| {
            for t in 0..2u8 {
                let s = &s;
                scope.spawn(move || {
                    for i in 0..20_000u32 {
                        s.write(0, &[(i as u8).wrapping_add(t * 128); 16]);
                    }
                });
            }
            for _ in 0..20_000 {
                let w = s.read_first_word(0).to_le_bytes();
                assert!(w.iter().all(|&b| b == w[0]), "torn read {w:?}");
            }
        });
    }
}
