//! The engine as a move's data: a slot's keys exported from an MVCC snapshot at the source
//! and imported at the target, whatever they hold.
//!
//! An entry is one key, whole: its root value as stored (kind, deadline and payload, see
//! `crate::stored`) and, for a collection, every element record under its id. The target
//! replaces the key with it, under a fresh collection id of its own (ids are random per
//! group, so a copied one could collide), so a hash, list, set or sorted set moves with all
//! its fields, positions and score index, and a deadline moves with the key.
//!
//! ```text
//! entry    root_len u32 | root | (suffix_len u32 | suffix | value_len u32 | value)*
//! ```
//!
//! `suffix` is an element key after its 8-byte collection id. Only database 0 moves: a
//! cluster has one database, as in Redis Cluster.

use std::ops::Bound;

use verso_cluster::lazen::{Entries, Key, MoveId, SlotData, Value};
use verso_cluster::{key_slot, SlotSet};
use verso_engine::{Error, Txn};

use crate::collections::{self, ID_LEN};
use crate::keyspace::CmdError;
use crate::session::Shared;
use crate::stored::{self, Space, Stored, KIND_STRING};

use super::Moves;

/// Bytes of entries per chunk: a chunk is one message and one transaction at the target.
/// A single key larger than this goes alone in its chunk.
pub const CHUNK_BYTES: usize = 256 * 1024;

/// Keys deleted per transaction when a group empties slots.
const DROP_BATCH: usize = 512;

/// A move's view of this node's engine.
pub struct EngineData<'s> {
    pub shared: &'s Shared,
    pub moves: &'s Moves,
}

fn space(shared: &Shared) -> Space<'_> {
    shared.spaces().get(0).expect("database 0 exists")
}

/// Why moving data failed: an engine error, or a damaged value or entry.
pub type Res<T> = Result<T, String>;

fn damaged(e: CmdError) -> String {
    match e {
        CmdError::Engine(e) => e.to_string(),
        CmdError::Reply(_) => "a stored value is damaged".into(),
    }
}

fn engine(e: Error) -> String {
    e.to_string()
}

/// The entry of `key` as `txn` sees it (`None`: absent).
pub fn export(txn: &Txn<'_>, s: Space<'_>, key: &[u8]) -> Res<Option<Vec<u8>>> {
    let Some(root) = txn.get(s.data, key).map_err(engine)? else {
        return Ok(None);
    };
    let mut out = Vec::with_capacity(4 + root.len());
    out.extend_from_slice(&(root.len() as u32).to_le_bytes());
    out.extend_from_slice(root);
    if let Some(id) = Stored::decode(root).and_then(|v| collections::id_of(&v)) {
        let lo = id.to_be_bytes();
        let hi = id.checked_add(1).map(u64::to_be_bytes);
        let hi = match &hi {
            Some(h) => Bound::Excluded(&h[..]),
            None => Bound::Unbounded,
        };
        let elements = txn
            .range(&s.collections.elements, (Bound::Included(&lo[..]), hi))
            .map_err(engine)?;
        for (k, v) in elements {
            let suffix = &k[ID_LEN..];
            out.extend_from_slice(&(suffix.len() as u32).to_le_bytes());
            out.extend_from_slice(suffix);
            out.extend_from_slice(&(v.len() as u32).to_le_bytes());
            out.extend_from_slice(v);
        }
    }
    Ok(Some(out))
}

/// An entry's element records: (key after the collection id, value).
type Elements<'e> = Vec<(&'e [u8], &'e [u8])>;

/// Splits an entry into its root and its elements; `None` if it is malformed.
fn parse(entry: &[u8]) -> Option<(&[u8], Elements<'_>)> {
    fn take<'a>(b: &mut &'a [u8]) -> Option<&'a [u8]> {
        let (len, rest) = b.split_at_checked(4)?;
        let n = u32::from_le_bytes(len.try_into().ok()?) as usize;
        let (item, rest) = rest.split_at_checked(n)?;
        *b = rest;
        Some(item)
    }
    let mut b = entry;
    let root = take(&mut b)?;
    let mut elements = Vec::new();
    while !b.is_empty() {
        let k = take(&mut b)?;
        let v = take(&mut b)?;
        elements.push((k, v));
    }
    Some((root, elements))
}

/// Replaces `key` with `entry` (`None`: deletes it), in `txn`.
pub fn import(txn: &mut Txn<'_>, s: Space<'_>, key: &[u8], entry: Option<&[u8]>) -> Res<()> {
    collections::delete_key(txn, s, key).map_err(damaged)?;
    let Some(entry) = entry else { return Ok(()) };
    let (root, elements) = parse(entry).ok_or("a moved entry is malformed")?;
    let v = Stored::decode(root).ok_or("a moved value is malformed")?;
    if v.kind == KIND_STRING {
        return stored::write(txn, s, key, v.kind, v.deadline, v.payload).map_err(damaged);
    }
    let id = collections::new_id(txn, s).map_err(damaged)?;
    let mut registry = Vec::with_capacity(1 + key.len());
    registry.push(s.index);
    registry.extend_from_slice(key);
    txn.put(&s.collections.registry, id.to_be_bytes(), registry)
        .map_err(engine)?;
    for (suffix, value) in elements {
        let mut k = Vec::with_capacity(ID_LEN + suffix.len());
        k.extend_from_slice(&id.to_be_bytes());
        k.extend_from_slice(suffix);
        txn.put(&s.collections.elements, k, value).map_err(engine)?;
    }
    stored::write(txn, s, key, v.kind, v.deadline, &id.to_be_bytes()).map_err(damaged)
}

/// Writes a chunk's entries at the target, in the transaction that logs the chunk.
pub fn import_all(txn: &mut Txn<'_>, shared: &Shared, entries: &[(Key, Option<Value>)]) -> Res<()> {
    let s = space(shared);
    for (k, v) in entries {
        import(txn, s, k, v.as_deref())?;
    }
    Ok(())
}

/// Deletes every key of `slots`, in batches (nothing serves them meanwhile: a source after
/// `EndSend`, a target before a new attempt). Conflicts (with the expirer) are retried.
pub fn drop_slots(shared: &Shared, slots: &SlotSet) -> Res<usize> {
    let mut dropped = 0;
    let mut after: Option<Vec<u8>> = None;
    loop {
        let s = space(shared);
        let batch: Vec<Vec<u8>> = {
            let txn = shared.db.begin_read_only().map_err(engine)?;
            let lo = match &after {
                Some(k) => Bound::Excluded(k.as_slice()),
                None => Bound::Unbounded,
            };
            let keys = txn
                .range(s.data, (lo, Bound::<&[u8]>::Unbounded))
                .map_err(engine)?
                .map(|(k, _)| k)
                .filter(|k| slots.contains(key_slot(k)))
                .take(DROP_BATCH)
                .map(<[u8]>::to_vec)
                .collect();
            txn.abort();
            keys
        };
        let Some(last) = batch.last().cloned() else {
            return Ok(dropped);
        };
        loop {
            let mut txn = shared.db.begin().map_err(engine)?;
            for k in &batch {
                collections::delete_key(&mut txn, s, k).map_err(damaged)?;
            }
            match txn.commit() {
                Ok(_) => break,
                Err(e) if e.is_conflict() => continue,
                Err(e) => return Err(engine(e)),
            }
        }
        dropped += batch.len();
        after = Some(last);
    }
}

impl EngineData<'_> {
    fn read_snapshot(&self, slots: &SlotSet) -> Res<Vec<Entries>> {
        let s = space(self.shared);
        let txn = self.shared.db.begin_read_only().map_err(engine)?;
        let mut chunks = Vec::new();
        let (mut chunk, mut bytes): (Entries, usize) = (Vec::new(), 0);
        let all = txn
            .range(s.data, (Bound::<&[u8]>::Unbounded, Bound::Unbounded))
            .map_err(engine)?;
        let mut piece = std::time::Instant::now();
        for (k, _) in all {
            if !slots.contains(key_slot(k)) {
                continue;
            }
            let Some(entry) = export(&txn, s, k)? else {
                continue;
            };
            bytes += k.len() + entry.len();
            chunk.push((k.to_vec(), Some(entry)));
            if bytes >= CHUNK_BYTES {
                chunks.push(std::mem::take(&mut chunk));
                bytes = 0;
                // The snapshot stays readable meanwhile (MVCC): pausing costs nothing but time.
                std::thread::sleep(piece.elapsed() * super::PAUSE_PER_WORK);
                piece = std::time::Instant::now();
            }
        }
        if !chunk.is_empty() {
            chunks.push(chunk);
        }
        txn.abort();
        Ok(chunks)
    }

    /// `keys` with their entries now (`None`: absent), in chunks of about [`CHUNK_BYTES`].
    fn read_keys(&self, keys: &[Vec<u8>]) -> Res<Vec<Entries>> {
        let s = space(self.shared);
        let txn = self.shared.db.begin_read_only().map_err(engine)?;
        let (mut chunks, mut chunk, mut bytes) = (Vec::new(), Vec::new(), 0);
        for k in keys {
            let entry = export(&txn, s, k)?;
            bytes += k.len() + entry.as_ref().map_or(0, Vec::len);
            chunk.push((k.clone(), entry));
            if bytes >= CHUNK_BYTES {
                chunks.push(std::mem::take(&mut chunk));
                bytes = 0;
            }
        }
        if !chunk.is_empty() {
            chunks.push(chunk);
        }
        txn.abort();
        Ok(chunks)
    }
}

/// Retries a read of the engine until it succeeds (a read-only transaction fails only when
/// the engine is shutting down or out of memory; the mover then has nothing better to do).
fn retrying<T>(what: &str, mut f: impl FnMut() -> Res<T>) -> T {
    let mut pause = std::time::Duration::from_millis(10);
    loop {
        match f() {
            Ok(v) => return v,
            Err(e) => {
                tracing::warn!("slot move: {what} failed ({e}); trying again");
                std::thread::sleep(pause);
                pause = (pause * 2).min(std::time::Duration::from_secs(1));
            }
        }
    }
}

impl SlotData for EngineData<'_> {
    fn snapshot(&mut self, id: MoveId, slots: &SlotSet) -> Vec<Entries> {
        // Tracking first: every write the snapshot misses is recorded (module docs).
        self.moves.start_tracking(id, slots);
        retrying("the snapshot", || self.read_snapshot(slots))
    }

    fn changes(&mut self, id: MoveId, _slots: &SlotSet) -> Vec<Entries> {
        let keys: Vec<Vec<u8>> = self.moves.stop_tracking(id).into_iter().collect();
        retrying("reading the keys written since the snapshot", || {
            self.read_keys(&keys)
        })
    }

    fn changed(&self, id: MoveId) -> usize {
        self.moves.tracked_count(id)
    }

    fn drain_changes(&mut self, id: MoveId, _slots: &SlotSet) -> Vec<Entries> {
        let keys: Vec<Vec<u8>> = self.moves.drain_tracking(id).into_iter().collect();
        retrying("reading the keys written in a catch-up round", || {
            self.read_keys(&keys)
        })
    }

    // About 50 KiB of 100-byte values: the freeze lasts one small chunk and three syncs.
    const FREEZE_AT: usize = 500;

    fn forget(&mut self, id: MoveId) {
        self.moves.stop_tracking(id);
    }
}
