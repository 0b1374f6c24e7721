//! Versions whose timestamps are chosen outside the engine: an NCC server (`verso-ncc`)
//! decides each write's timestamp itself (the refined `t_w`, moved by smart retry) and
//! answers reads from versions it holds, so it installs committed versions at their `t_w`
//! ([`Db::apply_replicated`], the same path a backup applies the log by) and raises a key's
//! read stamp (`tslast`, NCC's `t_r` of the newest version) for the reads it answered
//! ([`Db::raise_read_stamp`]). [`Db::newest_stamped`] reads both back.
//!
//! One caller at a time per key: these are for a single protocol thread that owns the
//! keys it installs (NCC's server applies its inputs in order), not for transactions that
//! race it on the same keys.

use crate::db::Db;
use crate::error::Error;
use crate::index::OrderedIndex;

/// A key's newest version and its read stamp, as [`Db::newest_stamped`] reads them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StampedNewest {
    /// The newest version's timestamp and value (`None`: a deletion); `None` if the key has
    /// no version.
    pub version: Option<(u64, Option<Vec<u8>>)>,
    /// At least every timestamp that has read the key or written it (for a key without a
    /// record, its gap's stamp, which may be higher: a gap stamp covers its neighbours too).
    pub read_stamp: u64,
}

impl Db {
    /// `key`'s newest version in `table` and its read stamp (for a key without a record,
    /// its gap's stamp).
    pub fn newest_stamped(&self, table: &str, key: &[u8]) -> Result<StampedNewest, Error> {
        let table = self.table(table)?;
        check_key(self, key)?;
        let state = self.table_state(&table)?;
        // Keeps every record and version it finds allocated until it is dropped (`gc.rs`).
        let txn = self.begin_read_only()?;
        let mut step = 0;
        let found = loop {
            match state.index.get_or_gap_stamp(key) {
                Err(gap) => {
                    break StampedNewest {
                        version: None,
                        read_stamp: gap,
                    }
                }
                Ok(record) => {
                    let r = record.get();
                    let read_stamp = r.read_stamp();
                    // A record that left the index folded its stamp into the gap, once
                    // its removal is done: look again.
                    if r.is_removed() {
                        crate::sync::spin_step(&mut step);
                        continue;
                    }
                    let version = r.newest().map(|v| (v.ts(), v.value().map(<[u8]>::to_vec)));
                    break StampedNewest {
                        version,
                        read_stamp,
                    };
                }
            }
        };
        drop(txn);
        Ok(found)
    }

    /// Records that `key` was read at `ts` by a reader the engine did not see: raises its
    /// record's read stamp, or its gap's if it has no record (then `Ok(false)`: a gap's
    /// stamp covers its neighbours too, so a caller wanting this key's own stamp keeps it).
    /// A later install below `ts` is then refused by the engine's transactions (MVTO aborts
    /// a write under a younger read), and [`Db::newest_stamped`] reports it.
    pub fn raise_read_stamp(&self, table: &str, key: &[u8], ts: u64) -> Result<bool, Error> {
        let table = self.table(table)?;
        check_key(self, key)?;
        let state = self.table_state(&table)?;
        let txn = self.begin_read_only()?;
        let mut step = 0;
        // A record that dies after the raise may not have folded it into the gap: look
        // again, which stamps the gap once the removal is done.
        let mut on_record = false;
        while let Some(record) = state.index.get_or_stamp(key, ts) {
            if record.get().raise_read_stamp(ts).is_ok() {
                on_record = true;
                break;
            }
            crate::sync::spin_step(&mut step);
        }
        drop(txn);
        Ok(on_record)
    }
}

fn check_key(db: &Db, key: &[u8]) -> Result<(), Error> {
    let max = db.options.key_size_max;
    if key.len() > max {
        return Err(Error::KeyTooLarge {
            len: key.len(),
            max,
        });
    }
    Ok(())
}
