//! A replica's checkpoint data: the engine's state through the durable point, in a file
//! beside the replica log, so the log can drop what it covers (thesis §4.2: a checkpoint
//! plus the log after it is the replica's state; ARCHITECTURE.md, "Replication").
//!
//! The engine is multi-version, so the file is written while commits go on: every key's
//! newest version at or below a commit timestamp (`Db::scan_versions_at`), with the GC
//! floor held at that timestamp until the scan ends ([`GcPin`]).
//!
//! File format (`checkpoint-<origin>-<n>.data`): `"VSRCKPT1"`, then frames
//! `len: u32 LE | crc32c(len ++ payload): u32 LE | payload (postcard)` as in the replica
//! log: one [`Frame::Tables`], [`Frame::Entries`] of about 256 KiB each, and
//! [`Frame::End`] with the count. A file without its end frame, or with a damaged frame, is
//! refused whole: it is written to `.tmp`, synced and renamed, so a complete name means a
//! complete file.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufWriter, Read, Write};
use std::path::Path;
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use verso_engine::{Db, ReplicatedWrite};

const MAGIC: &[u8; 8] = b"VSRCKPT1";
/// An entries frame holds at most this many bytes of entries, or one larger entry alone.
const BATCH_BYTES: usize = 256 << 10;
/// Largest frame accepted when loading (checked before allocating). A replicated commit
/// writes at most `WRITE_SET_BYTES_MAX`, so no single entry, and no frame, comes near it.
const FRAME_MAX: u32 = 64 << 20;
const _: () = assert!(crate::op::WRITE_SET_BYTES_MAX + BATCH_BYTES < FRAME_MAX as usize);

#[derive(Serialize, Deserialize)]
enum Frame {
    /// Table names; entries name a table by its index here.
    Tables(Vec<String>),
    Entries(Vec<Entry>),
    End {
        entries: u64,
    },
}

/// One key's version. Encoded as the tuple `(table, key, ts, value)` would be; the byte
/// strings as bytes, copied whole rather than element by element.
#[derive(Serialize, Deserialize)]
struct Entry {
    /// An index into the [`Frame::Tables`] list.
    table: u32,
    #[serde(with = "serde_bytes")]
    key: Vec<u8>,
    ts: u64,
    #[serde(with = "serde_bytes")]
    value: Vec<u8>,
}

/// Holds the engine's GC floor at a checkpoint's timestamp while its data is written (the
/// app raises the floor only to `min(durable point, every pin)`), one pin per data file: a
/// local checkpoint's (the disk thread releases it) and a state transfer's (its stream's
/// thread does).
#[derive(Clone, Debug, Default)]
pub(crate) struct GcPin(Arc<Mutex<BTreeMap<String, u64>>>);

impl GcPin {
    pub(crate) fn hold(&self, file: &str, ts: u64) {
        lock(&self.0).insert(file.to_string(), ts);
    }

    pub(crate) fn release(&self, file: &str) {
        lock(&self.0).remove(file);
    }

    /// A guard that releases `file`'s pin when it is dropped, also while a panic unwinds:
    /// a pin left behind would hold the GC floor, and memory would grow without bound.
    pub(crate) fn release_on_drop(&self, file: &str) -> PinRelease {
        PinRelease {
            pin: self.clone(),
            file: file.to_string(),
        }
    }

    /// The lowest timestamp pinned (`u64::MAX`: none).
    pub(crate) fn get(&self) -> u64 {
        lock(&self.0).values().copied().min().unwrap_or(u64::MAX)
    }
}

/// Releases one file's GC pin when dropped ([`GcPin::release_on_drop`]).
pub(crate) struct PinRelease {
    pin: GcPin,
    file: String,
}

impl Drop for PinRelease {
    fn drop(&mut self) {
        self.pin.release(&self.file);
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// What writing or loading a checkpoint did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DataStats {
    pub entries: u64,
    pub bytes: u64,
}

fn put_frame(out: &mut impl Write, frame: &Frame) -> std::io::Result<u64> {
    let payload = postcard::to_allocvec(frame).expect("serializing to memory cannot fail");
    let len = (payload.len() as u32).to_le_bytes();
    let sum = crate::disk::crc(&len, &payload);
    out.write_all(&len)?;
    out.write_all(&sum.to_le_bytes())?;
    out.write_all(&payload)?;
    Ok(8 + payload.len() as u64)
}

fn invalid(what: String) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, what)
}

fn get_frame(input: &mut impl Read, name: &str) -> std::io::Result<Frame> {
    let mut head = [0u8; 8];
    input.read_exact(&mut head)?;
    let len: [u8; 4] = head[..4].try_into().expect("4 bytes");
    let sum = u32::from_le_bytes(head[4..].try_into().expect("4 bytes"));
    let n = u32::from_le_bytes(len);
    if n > FRAME_MAX {
        return Err(invalid(format!("{name}: a frame of {n} bytes")));
    }
    // Read, not preallocated: a damaged length must not allocate what is not there.
    let mut payload = Vec::new();
    input.take(u64::from(n)).read_to_end(&mut payload)?;
    if payload.len() != n as usize {
        return Err(invalid(format!("{name}: cut inside a frame")));
    }
    if crate::disk::crc(&len, &payload) != sum {
        return Err(invalid(format!("{name}: checksum mismatch")));
    }
    postcard::from_bytes(&payload).map_err(|e| invalid(format!("{name}: {e}")))
}

fn sync_dir(dir: &Path) -> std::io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Writes `dir/name`: every key's newest version at or below `cts` in `db`. The caller holds
/// the GC floor at or below `cts` until this returns.
pub(crate) fn write(dir: &Path, name: &str, db: &Db, cts: u64) -> std::io::Result<DataStats> {
    let tmp = dir.join(format!("{name}.tmp"));
    let mut out = BufWriter::with_capacity(1 << 20, File::create(&tmp)?);
    let stats = write_to(&mut out, db, cts)?;
    let file = out.into_inner().map_err(|e| e.into_error())?;
    file.sync_data()?;
    drop(file);
    std::fs::rename(&tmp, dir.join(name))?;
    sync_dir(dir)?;
    Ok(stats)
}

/// Writes a checkpoint's bytes to `out` (a file, or a state transfer's stream).
pub(crate) fn write_to(out: &mut impl Write, db: &Db, cts: u64) -> std::io::Result<DataStats> {
    out.write_all(MAGIC)?;
    let mut stats = DataStats {
        entries: 0,
        bytes: MAGIC.len() as u64,
    };
    let tables = db.table_names();
    stats.bytes += put_frame(out, &Frame::Tables(tables.clone()))?;
    let mut batch: Vec<Entry> = Vec::new();
    let mut batch_bytes = 0usize;
    let table_of = |name: &str| tables.iter().position(|t| t == name).map(|i| i as u32);
    db.scan_versions_at(cts, |table, key, ts, value| -> std::io::Result<()> {
        let Some(t) = table_of(table) else {
            return Ok(()); // created after the scan began: nothing at or below `cts`
        };
        let bytes = key.len() + value.len() + 16;
        if !batch.is_empty() && batch_bytes + bytes > BATCH_BYTES {
            stats.bytes += put_frame(out, &Frame::Entries(std::mem::take(&mut batch)))?;
            batch_bytes = 0;
        }
        batch_bytes += bytes;
        batch.push(Entry {
            table: t,
            key: key.to_vec(),
            ts,
            value: value.to_vec(),
        });
        stats.entries += 1;
        Ok(())
    })?;
    if !batch.is_empty() {
        stats.bytes += put_frame(out, &Frame::Entries(batch))?;
    }
    stats.bytes += put_frame(
        out,
        &Frame::End {
            entries: stats.entries,
        },
    )?;
    Ok(stats)
}

/// Whether `name` is a checkpoint data file's name as this code makes them (a name from a
/// peer is checked before it becomes a path).
pub(crate) fn valid_name(name: &str) -> bool {
    let Some(rest) = name
        .strip_prefix("checkpoint-")
        .and_then(|r| r.strip_suffix(".data"))
    else {
        return false;
    };
    let mut parts = rest.split('-');
    let (Some(origin), Some(n), None) = (parts.next(), parts.next(), parts.next()) else {
        return false;
    };
    !origin.is_empty()
        && origin.len() <= 16
        && origin.bytes().all(|b| b.is_ascii_hexdigit())
        && !n.is_empty()
        && n.len() <= 20
        && n.bytes().all(|b| b.is_ascii_digit())
}

/// Installs `dir/name` into `db`, which holds nothing at or above the versions' timestamps
/// (a replica starting, or one taking a state transfer before it applied anything).
pub(crate) fn load(dir: &Path, name: &str, db: &Db) -> std::io::Result<DataStats> {
    let path = dir.join(name);
    let mut input = std::io::BufReader::with_capacity(1 << 20, File::open(&path)?);
    load_from(&mut input, db, &path.display().to_string())
}

/// Installs a checkpoint's bytes from `input` into `db` (`shown` names them in errors).
/// The bytes may come from a peer: a damaged or cut file is an error, never a panic.
pub fn load_from(input: &mut impl Read, db: &Db, shown: &str) -> std::io::Result<DataStats> {
    let mut magic = [0u8; 8];
    input.read_exact(&mut magic)?;
    if &magic != MAGIC {
        return Err(invalid(format!("{shown}: not a Verso checkpoint")));
    }
    let Frame::Tables(tables) = get_frame(input, shown)? else {
        return Err(invalid(format!("{shown}: no table list")));
    };
    let mut stats = DataStats::default();
    loop {
        match get_frame(input, shown)? {
            Frame::Tables(_) => return Err(invalid(format!("{shown}: a second table list"))),
            Frame::Entries(entries) => {
                for Entry {
                    table: t,
                    key,
                    ts,
                    value,
                } in entries
                {
                    let table = tables
                        .get(t as usize)
                        .ok_or_else(|| invalid(format!("{shown}: table {t} is not listed")))?;
                    stats.bytes += (key.len() + value.len()) as u64;
                    let write = ReplicatedWrite {
                        table,
                        key: &key,
                        value: Some(&value),
                    };
                    db.apply_replicated(ts, std::iter::once(write))
                        .map_err(|e| invalid(format!("{shown}: {e}")))?;
                    stats.entries += 1;
                }
            }
            Frame::End { entries } if entries == stats.entries => return Ok(stats),
            Frame::End { entries } => {
                return Err(invalid(format!(
                    "{shown}: {} entries where the end frame says {entries}",
                    stats.entries
                )))
            }
        }
    }
}

/// Removes checkpoint files in `dir` other than `keep` (superseded, or debris of a crash).
pub(crate) fn remove_others(dir: &Path, keep: Option<&str>) {
    let Ok(list) = std::fs::read_dir(dir) else {
        return;
    };
    for e in list.flatten() {
        let name = e.file_name();
        let Some(name) = name.to_str() else { continue };
        let ours = name.starts_with("checkpoint-") || name.starts_with("incoming-");
        if ours && Some(name) != keep {
            if let Err(err) = std::fs::remove_file(e.path()) {
                tracing::warn!(file = name, error = %err, "could not remove an old checkpoint");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use verso_engine::Options;

    #[test]
    fn a_pin_is_released_when_its_guard_drops_also_in_a_panic() {
        let pin = GcPin::default();
        pin.hold("checkpoint-0-1.data", 10);
        pin.hold("checkpoint-0-2.data", 20);
        let guard = pin.release_on_drop("checkpoint-0-1.data");
        assert_eq!(pin.get(), 10);
        drop(guard);
        assert_eq!(pin.get(), 20);
        let held = pin.clone();
        let unwound = std::panic::catch_unwind(move || {
            let _guard = held.release_on_drop("checkpoint-0-2.data");
            panic!("the scan failed");
        });
        assert!(unwound.is_err());
        assert_eq!(pin.get(), u64::MAX, "a panicking scan left its pin behind");
    }

    /// Per (table, key), its versions (timestamp, value or deletion) in order.
    type Model = std::collections::BTreeMap<(String, Vec<u8>), Vec<(u64, Option<Vec<u8>>)>>;

    fn put(db: &Db, ts: u64, table: &str, key: &[u8], value: Option<&[u8]>) {
        let w = ReplicatedWrite { table, key, value };
        db.apply_replicated(ts, std::iter::once(w)).unwrap();
    }

    /// A checkpoint at `cts` holds exactly each key's newest live version at or below it,
    /// whatever was written above it, and loads back into an empty database as that.
    #[test]
    fn a_checkpoint_holds_the_state_at_its_timestamp_and_loads_back() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(Options::default()).unwrap();
        db.set_gc_floor(0);
        // A model: per (table, key), versions (ts, value).
        let mut model = Model::default();
        let mut ts = 10;
        for i in 0..3000u64 {
            let table = if i % 3 == 0 { "a" } else { "b" };
            let key = format!("k{}", (i * 7919) % 700).into_bytes();
            let value = (i % 5 != 0).then(|| format!("v{i}").into_bytes());
            put(&db, ts, table, &key, value.as_deref());
            model
                .entry((table.to_string(), key))
                .or_default()
                .push((ts, value));
            ts += 1 + i % 3;
        }
        let cts = 10 + ts / 2;
        write(dir.path(), "checkpoint-t-1.data", &db, cts).unwrap();
        let expected: std::collections::BTreeMap<(String, Vec<u8>), (u64, Vec<u8>)> = model
            .iter()
            .filter_map(|(k, vs)| {
                let (ts, v) = vs.iter().rev().find(|(t, _)| *t <= cts)?;
                Some((k.clone(), (*ts, v.clone()?)))
            })
            .collect();
        let copy = Db::open(Options::default()).unwrap();
        let stats = load(dir.path(), "checkpoint-t-1.data", &copy).unwrap();
        assert_eq!(stats.entries, expected.len() as u64);
        let mut got = std::collections::BTreeMap::new();
        copy.scan_versions_at(u64::MAX - 1, |t, k, ts, v| -> Result<(), ()> {
            got.insert((t.to_string(), k.to_vec()), (ts, v.to_vec()));
            Ok(())
        })
        .unwrap();
        assert_eq!(got, expected);
    }

    /// An entries frame holds at most `BATCH_BYTES` of entries, or one larger entry alone,
    /// so whatever the values' sizes no frame passes what loading accepts.
    #[test]
    fn frames_are_bounded_whatever_the_value_sizes() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(Options::default()).unwrap();
        let sizes = [
            10usize,
            200 << 10,
            100 << 10,
            3 << 20,
            5,
            255 << 10,
            1 << 20,
            7,
        ];
        for (i, len) in sizes.iter().cycle().take(40).enumerate() {
            let value = vec![i as u8; *len];
            put(
                &db,
                5 + i as u64,
                "t",
                &(i as u64).to_be_bytes(),
                Some(&value),
            );
        }
        write(dir.path(), "checkpoint-f-1.data", &db, u64::MAX - 1).unwrap();
        let bytes = std::fs::read(dir.path().join("checkpoint-f-1.data")).unwrap();
        let mut at = MAGIC.len();
        let mut entries = 0;
        while at < bytes.len() {
            let n = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
            assert!(n <= FRAME_MAX as usize);
            let frame: Frame = postcard::from_bytes(&bytes[at + 8..at + 8 + n]).unwrap();
            if let Frame::Entries(es) = frame {
                let sum: usize = es.iter().map(|e| e.key.len() + e.value.len() + 16).sum();
                assert!(
                    es.len() == 1 || sum <= BATCH_BYTES,
                    "{} entries, {sum} bytes",
                    es.len()
                );
                entries += es.len();
            }
            at += 8 + n;
        }
        assert_eq!(entries, 40);
        let copy = Db::open(Options::default()).unwrap();
        assert_eq!(
            load(dir.path(), "checkpoint-f-1.data", &copy)
                .unwrap()
                .entries,
            40
        );
    }

    #[test]
    fn a_damaged_or_cut_checkpoint_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(Options::default()).unwrap();
        for i in 0..500u64 {
            put(&db, 5 + i, "t", &i.to_be_bytes(), Some(&[7u8; 300]));
        }
        write(dir.path(), "checkpoint-x-1.data", &db, u64::MAX - 1).unwrap();
        let path = dir.path().join("checkpoint-x-1.data");
        let whole = std::fs::read(&path).unwrap();
        for cut in [whole.len() - 1, whole.len() / 2, 9] {
            std::fs::write(&path, &whole[..cut]).unwrap();
            let copy = Db::open(Options::default()).unwrap();
            assert!(
                load(dir.path(), "checkpoint-x-1.data", &copy).is_err(),
                "cut at {cut}"
            );
        }
        let mut flipped = whole.clone();
        flipped[whole.len() / 3] ^= 0x40;
        std::fs::write(&path, &flipped).unwrap();
        let copy = Db::open(Options::default()).unwrap();
        assert!(load(dir.path(), "checkpoint-x-1.data", &copy).is_err());
    }
}
