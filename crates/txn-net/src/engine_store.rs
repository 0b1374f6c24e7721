//! An NCC server's decided versions kept in Verso's engine (issue 18 item 3: "versions are
//! engine versions"): each committed version is an engine version of the key at its `t_w`
//! as the commit timestamp, and the `t_r` reads reached is the engine record's read stamp,
//! so the engine's own transactions and NCC's are ordered by one clock (an engine writer
//! below a read NCC answered aborts: `crates/engine/tests/stamped.rs`).
//!
//! **One timestamp encoding.** NCC's `(clk, cid)` becomes the engine's `u64` as
//! `(clk - epoch) << 16 | cid`, the layout of the engine's own RDTSC timestamps (a clock in
//! the high bits, the id of who took it in the low ones), and the order is the same: by
//! `clk`, then `cid`. Limits, checked on every conversion: client ids below 2^16, and
//! `clk - epoch` below 2^48 (with microseconds since a start-of-2026 epoch, until 2034).
//!
//! **What the engine does not see.** Undecided versions stay in the NCC server's memory
//! until decided, so an engine transaction reading this table directly may miss a version
//! that later commits below its timestamp: reads must go through NCC's server (issue 18
//! item 3: every transaction of a shard does), and the engine's own writers are only
//! ordered after the reads NCC answered, not after its undecided writes. And if the engine
//! is replicated with its GC floor (`Db::set_gc_floor`), the floor must be the lowest `t_w`
//! an operation not yet durable installed, not a log position's timestamp: installs do not
//! come in timestamp order (a version commits when its decision arrives).
//!
//! **Layout.** Table `ncc`; a key is the key's bytes (a number's are big-endian, so the
//! engine's order is the numbers' order), a value the server's version number
//! (little-endian) then the value's bytes. The number survives the server:
//! `Server::decided_through` compares read-only clients' `t_ro` against it. So an empty
//! value (NCC's initial value, and what a deletion writes) is still a record of 8 bytes:
//! an engine tombstone would lose the number.
//!
//! **Limits.** A key up to the engine's `key_size_max` (64 KiB by default), a value up to
//! its `value_size_max` less the 8 bytes of the number; `Store::fits` refuses the rest, and
//! the txn-server drops the connection that sent them.

use std::collections::{HashMap, VecDeque};

use verso_engine::{Db, Options, ReplicatedWrite};
use verso_ncc::{ClientId, Key, Op, Store, Stored, Ts, Value};

/// The engine table an NCC server's keys live in.
pub const TABLE: &str = "ncc";
/// Low bits of an engine timestamp that hold the client id.
pub const CID_BITS: u32 = 16;
/// `clk - epoch` must be below this.
pub const CLK_SPAN: u64 = 1 << (64 - CID_BITS);
/// How far above every admitted clock a refined `t_w` may land: each write on a key lands
/// at most 1 above the `t_r` before it, so only this many writes in a row on one key, each
/// pre-stamped below the last, could run past the encoding (2^40 µs is 12.7 days of the
/// encoding's 8.9 years). Past it an install panics rather than store a version out of order.
pub const REFINEMENT_ROOM: u64 = 1 << 40;
/// 2026-01-01T00:00:00Z in microseconds since the Unix epoch: the epoch for clocks that
/// read wall time (`crate::now_us`).
pub const WALL_EPOCH_US: u64 = 1_767_225_600_000_000;

/// A timestamp the engine encoding cannot hold (module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("timestamp ({clk}, {cid}) is outside the engine encoding: client ids below {}, clocks from {epoch} to {} (exclusive)", 1u64 << CID_BITS, epoch.saturating_add(CLK_SPAN))]
pub struct OutOfRange {
    pub clk: u64,
    pub cid: ClientId,
    pub epoch: u64,
}

/// NCC's `(clk, cid)` as an engine timestamp, or why it cannot be one.
pub fn encode(ts: Ts, epoch: u64) -> Result<u64, OutOfRange> {
    let err = OutOfRange {
        clk: ts.clk,
        cid: ts.cid,
        epoch,
    };
    let clk = ts.clk.checked_sub(epoch).ok_or(err)?;
    if clk >= CLK_SPAN || u64::from(ts.cid) >= 1 << CID_BITS {
        return Err(err);
    }
    Ok(clk << CID_BITS | u64::from(ts.cid))
}

/// The inverse of [`encode`].
pub fn decode(ts: u64, epoch: u64) -> Ts {
    Ts {
        clk: (ts >> CID_BITS) + epoch,
        cid: (ts & ((1 << CID_BITS) - 1)) as ClientId,
    }
}

/// An NCC server's [`Store`] in an engine `Db` (module docs).
pub struct EngineStore {
    db: Db,
    epoch: u64,
    /// Read stamps (encoded) of keys without a record: exact for the most recent ones, and
    /// below `absent_floor` for every other. The engine keeps them only in its gap stamps,
    /// which neighbouring keys share, and a first write to a key read through such a stamp
    /// is refined above reads of other keys: smart retries went from 0.28 % to 8.3 % of
    /// transactions (`verso sim ncc --keys 1000`). CockroachDB's timestamp cache is the model:
    /// a bounded map and a low-water mark.
    absent_reads: HashMap<Key, u64>,
    /// Keys in `absent_reads` by when they entered (a key may be listed after it left).
    absent_order: VecDeque<Key>,
    /// At least every read stamp dropped from `absent_reads`.
    absent_floor: u64,
    absent_reads_max: usize,
}

/// How many keys without a record [`EngineStore`] keeps an exact read stamp for (about
/// 40 bytes each).
pub const ABSENT_READS_MAX: usize = 1 << 16;

impl EngineStore {
    /// A store in a fresh in-memory engine, for clocks that count from `epoch`.
    pub fn new(epoch: u64) -> Result<EngineStore, verso_engine::Error> {
        EngineStore::in_db(Db::open(Options::default())?, epoch)
    }

    /// A store in `db` (its table [`TABLE`] is made if missing).
    pub fn in_db(db: Db, epoch: u64) -> Result<EngineStore, verso_engine::Error> {
        db.table(TABLE)?;
        Ok(EngineStore {
            db,
            epoch,
            absent_reads: HashMap::new(),
            absent_order: VecDeque::new(),
            absent_floor: 0,
            absent_reads_max: ABSENT_READS_MAX,
        })
    }

    /// Keeps exact read stamps for at most `n` keys without a record (default
    /// [`ABSENT_READS_MAX`]; at least 1).
    pub fn with_absent_reads_max(mut self, n: usize) -> EngineStore {
        self.absent_reads_max = n.max(1);
        self
    }

    /// The read stamp of `key`, which has no record: its own if kept, else the floor, or
    /// the gap's if that is lower (both are at least every read of it).
    fn absent_read_stamp(&self, key: &Key, gap: u64) -> u64 {
        match self.absent_reads.get(key) {
            Some(&own) => own,
            None => self.absent_floor.min(gap),
        }
    }

    /// Keeps `ts` as a read stamp of `key`, which has no record.
    fn note_absent_read(&mut self, key: &Key, ts: u64) {
        let floor = self.absent_floor;
        if let Some(own) = self.absent_reads.get_mut(key) {
            *own = (*own).max(ts);
        } else {
            // Reads of it dropped earlier are below the floor.
            self.absent_reads.insert(key.clone(), ts.max(floor));
            self.absent_order.push_back(key.clone());
        }
        while self.absent_reads.len() > self.absent_reads_max {
            let Some(old) = self.absent_order.pop_front() else {
                break;
            };
            if let Some(stamp) = self.absent_reads.remove(&old) {
                self.absent_floor = self.absent_floor.max(stamp);
            }
        }
        // A key that left and came back is listed twice: keep the list bounded too.
        if self.absent_order.len() > 2 * self.absent_reads_max {
            let kept = &self.absent_reads;
            let mut seen = std::collections::HashSet::new();
            self.absent_order
                .retain(|k| kept.contains_key(k) && seen.insert(k.clone()));
        }
    }

    pub fn db(&self) -> &Db {
        &self.db
    }

    /// A timestamp from the server, which got it from a client or refined it: in range while
    /// the transport refuses what `Store::admits` does not (with [`REFINEMENT_ROOM`] to
    /// spare); a server would otherwise store versions out of order.
    fn encode(&self, ts: Ts) -> u64 {
        match encode(ts, self.epoch) {
            Ok(t) => t,
            Err(e) => panic!("{e}: refuse such clients before they reach the server"),
        }
    }
}

/// The bytes of a version's number.
const ID_BYTES: usize = 8;

impl Store for EngineStore {
    fn load(&mut self, key: &Key) -> Stored {
        // The table exists (made in `in_db`) and `fits` kept the key within the limit.
        let got = self
            .db
            .newest_stamped(TABLE, key.as_bytes())
            .expect("the table exists and the key fits");
        let tr = decode(got.read_stamp, self.epoch);
        match got.version {
            Some((ts, Some(bytes))) => {
                let (id, value) = bytes.split_at(ID_BYTES);
                let tw = decode(ts, self.epoch);
                Stored {
                    id: u64::from_le_bytes(id.try_into().expect("a version's number")),
                    value: Value::from(value),
                    tw,
                    tr: tr.max(tw),
                }
            }
            // Never written (a deletion is never installed here).
            _ => {
                let stamp = self.absent_read_stamp(key, got.read_stamp);
                Stored {
                    tr: if stamp == 0 {
                        Ts::default()
                    } else {
                        decode(stamp, self.epoch)
                    },
                    ..Stored::default()
                }
            }
        }
    }

    fn install(&mut self, key: &Key, version: Stored) {
        let mut bytes = Vec::with_capacity(ID_BYTES + version.value.len());
        bytes.extend_from_slice(&version.id.to_le_bytes());
        bytes.extend_from_slice(version.value.as_bytes());
        let write = ReplicatedWrite {
            table: TABLE,
            key: key.as_bytes(),
            value: Some(&bytes),
        };
        let tw = self.encode(version.tw);
        self.db
            .apply_replicated(tw, std::iter::once(write))
            .expect("versions are installed in t_w order");
        // The record holds its read stamp from now on (at least `tw`, above every read).
        self.absent_reads.remove(key);
        // The engine's clock continues above what NCC installed: its garbage collector
        // takes a version as freeable only below every timestamp a reader may still take,
        // and its own transactions then begin above NCC's versions.
        self.db.raise_timestamp_floor(tw);
        if version.tr > version.tw {
            self.raise_read(key, version.tr);
        }
    }

    fn admits(&self, ts: Ts) -> bool {
        // Refinement puts a write 1 above the `t_r` before it, and writes on one key can
        // chain: leave room for `REFINEMENT_ROOM` of them above every admitted clock.
        let room = Ts {
            clk: ts.clk.saturating_add(REFINEMENT_ROOM),
            ..ts
        };
        encode(room, self.epoch).is_ok()
    }

    fn fits(&self, op: &Op) -> bool {
        let value = op.written().map_or(0, Value::len);
        op.key().len() <= self.db.key_size_max()
            && value <= self.db.value_size_max().saturating_sub(ID_BYTES)
    }

    fn raise_read(&mut self, key: &Key, tr: Ts) {
        if tr == Ts::default() {
            return; // nothing read it (the initial version's t_r)
        }
        let tr = self.encode(tr);
        let on_record = self
            .db
            .raise_read_stamp(TABLE, key.as_bytes(), tr)
            .expect("the table exists and the key fits");
        if !on_record {
            self.note_absent_read(key, tr);
        }
        self.db.raise_timestamp_floor(tr);
    }
}

/// A [`Store`] in the engine per simulated server (`verso_ncc::sim::SimOptions::store`):
/// simulated clocks count from 0.
pub fn sim_store(_: verso_ncc::ServerId) -> Box<dyn Store> {
    Box::new(EngineStore::new(0).expect("an in-memory engine opens"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Against a model: a key's loaded `t_r` is at least every read raised on it, and,
        /// for keys never written while the map of read stamps keeps them all, exactly the
        /// highest (not a neighbour's); `t_w` and values are the newest installed, byte for
        /// byte. Keys of every shape: empty, prefixes of one another, text, a number.
        #[test]
        fn read_stamps_of_keys_without_records(
            ops in prop::collection::vec(
                (0u8..3, 0usize..6, 1u64..100, prop::collection::vec(any::<u8>(), 0..20)),
                1..80,
            ),
            max in 1usize..8,
        ) {
            let keys: [Key; 6] = [
                Key::from(&b""[..]),
                Key::from(&[0u8][..]),
                Key::from(&[0u8, 0][..]),
                Key::from("a"),
                Key::from("user:1"),
                Key::from(7),
            ];
            let mut s = EngineStore::new(0).unwrap().with_absent_reads_max(max);
            // Per key: (highest read clock, newest installed (id, clk, value)).
            type Newest = Option<(u64, u64, Value)>;
            let mut model: [(u64, Newest); 6] = Default::default();
            let mut next_id = 1;
            for (op, i, d, bytes) in ops {
                let (key, m) = (&keys[i], &mut model[i]);
                let above = m.0.max(m.1.as_ref().map_or(0, |v| v.1));
                match op {
                    0 => {
                        s.raise_read(key, Ts { clk: above + d, cid: 1 });
                        m.0 = above + d;
                    }
                    1 => {
                        let tw = Ts { clk: above + d, cid: 2 };
                        let value = Value::from(bytes);
                        s.install(key, Stored { id: next_id, value: value.clone(), tw, tr: tw });
                        m.1 = Some((next_id, above + d, value));
                        next_id += 1;
                    }
                    _ => {
                        let got = s.load(key);
                        prop_assert!(got.tr.clk >= m.0, "key {key}: {got:?} below read {}", m.0);
                        match &m.1 {
                            Some((id, clk, value)) => {
                                prop_assert_eq!(
                                    (got.id, &got.value, got.tw.clk),
                                    (*id, value, *clk)
                                );
                            }
                            None => {
                                prop_assert_eq!(got.id, 0);
                                if max >= 6 {
                                    prop_assert_eq!(got.tr.clk, m.0, "key {}: not exact", key);
                                }
                            }
                        }
                    }
                }
            }
        }

        /// The encoding keeps NCC's order and is undone by `decode`.
        #[test]
        fn encoding_keeps_order(a in (0u64..CLK_SPAN, 0u32..1 << CID_BITS),
                                b in (0u64..CLK_SPAN, 0u32..1 << CID_BITS),
                                epoch in 0u64..1 << 60) {
            let ta = Ts { clk: a.0 + epoch, cid: a.1 };
            let tb = Ts { clk: b.0 + epoch, cid: b.1 };
            let (ea, eb) = (encode(ta, epoch).unwrap(), encode(tb, epoch).unwrap());
            prop_assert_eq!(ea.cmp(&eb), ta.cmp(&tb));
            prop_assert_eq!(decode(ea, epoch), ta);
        }
    }

    /// Versions installed at wall-clock timestamps, far above the engine's own clock, are
    /// still freed once superseded (the engine's clock is raised past each).
    #[test]
    fn superseded_versions_are_freed_at_wall_clock_timestamps() {
        let mut s = EngineStore::new(WALL_EPOCH_US).unwrap();
        let at = |clk| Ts { clk, cid: 3 };
        let base = crate::now_us(); // as a client stamps: far above the engine's own clock
        let key = Key::from(9);
        for i in 1..=20_000u64 {
            let tw = at(base + i);
            s.install(
                &key,
                Stored {
                    id: i,
                    value: i.into(),
                    tw,
                    tr: tw,
                },
            );
        }
        s.db().collect_garbage();
        let stats = s.db().stats();
        assert!(stats.gc_bytes_freed > 0, "{stats:?}");
        assert_eq!(s.load(&key).value, Value::from(20_000));
    }

    #[test]
    fn out_of_range_timestamps_are_refused() {
        let at = |clk, cid| Ts { clk, cid };
        assert!(encode(at(5, 1 << CID_BITS), 0).is_err());
        assert!(encode(at(CLK_SPAN, 0), 0).is_err());
        assert!(encode(at(4, 0), 5).is_err());
        assert_eq!(
            encode(at(CLK_SPAN - 1, 0), 0),
            Ok((CLK_SPAN - 1) << CID_BITS)
        );
        assert!(encode(at(WALL_EPOCH_US + 1, 7), WALL_EPOCH_US).is_ok());
        let s = EngineStore::new(0).unwrap();
        assert!(s.admits(at(CLK_SPAN - REFINEMENT_ROOM - 1, 7)));
        assert!(!s.admits(at(CLK_SPAN - REFINEMENT_ROOM, 7)));
        assert!(!s.admits(at(5, 1 << CID_BITS)));
    }

    /// Keys and values up to the engine's limits fit; one byte more does not (the server
    /// then refuses the message rather than fail an install).
    #[test]
    fn keys_and_values_fit_up_to_the_engine_limits() {
        let db = Db::open(Options::default().key_size_max(16).value_size_max(40)).unwrap();
        let s = EngineStore::in_db(db, 0).unwrap();
        let key = |n: usize| Key::from(vec![b'k'; n]);
        let value = |n: usize| Value::from(vec![b'v'; n]);
        assert!(s.fits(&Op::Read(key(16))));
        assert!(!s.fits(&Op::Read(key(17))));
        assert!(s.fits(&Op::Write(key(1), value(40 - ID_BYTES))));
        assert!(!s.fits(&Op::Write(key(1), value(41 - ID_BYTES))));
        assert!(!s.fits(&Op::ReadWrite(key(1), value(41 - ID_BYTES))));
    }
}
