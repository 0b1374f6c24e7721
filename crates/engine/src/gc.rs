//! Garbage collection of superseded versions, with no background thread.
//!
//! A commit that supersedes a version pushes the record onto its site's queue. When a
//! queue grows past its trigger, the committing thread takes a [`GcSnapshot`] (the active
//! timestamps, and bounds on all present and future ones) and prunes the queued records:
//!
//! - versions below the newest one older than the oldest reader are freed at once: no walk
//!   reaches them;
//! - versions above it that no active or future reader can see (a long reader keeps only the
//!   one version it sees, not everything newer) are unlinked from the middle of the chain and
//!   put in *limbo*, because a reader older than them may be walking past them right now.
//!   A limbo batch records which transactions were mid-walk when it was made (odd walk
//!   counters) and is freed once each of those counters has moved on.
//!
//! - a record left holding only a tombstone below the oldest reader dies in the prune
//!   (`record/mod.rs`, "Removal"): its key leaves the index with its `tslast` folded into the
//!   gap stamp, and the record is *retired*, freed once every transaction that could have
//!   found it has ended (the watermark passed a timestamp drawn after the removal) and no
//!   other queue names it any more (its `queued` count is zero). Records of aborted
//!   inserts are retired here too, by the thread whose commit failed.
//!
//! Nothing ever sweeps a table.

use std::ptr::NonNull;

use crate::db::Db;
use crate::index::RecordPtr;
use crate::record::{Prune, Version};
use crate::sync::Ordering;
use crate::timestamp::{GcSnapshot, SlotId, Timestamps};

/// A queue is collected once it holds this many entries (or twice what the last collection
/// had to leave behind, so a long reader does not make every commit rescan the queue).
pub(crate) const GC_TRIGGER_MIN: usize = 256;
/// ... or once this many removed records wait to be freed.
const RETIRED_TRIGGER: usize = 256;

/// The version a commit superseded, as `Record::install` reports it: written at `ts`, and
/// superseded at `by`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Superseded {
    pub(crate) ts: u64,
    pub(crate) by: u64,
}

impl Superseded {
    /// Nothing known about what the record holds (a tombstone without an older version, an
    /// install below newer versions, a record that needs another look): always pruned.
    pub(crate) const UNKNOWN: Superseded = Superseded { ts: 0, by: 0 };

    /// Whether a snapshot's readers still need the superseded version. If so, a prune could
    /// not take it, and the versions below it were queued by their own entries.
    fn pinned(self, snap: &GcSnapshot) -> bool {
        self.ts < self.by && snap.visible_to_someone(self.ts, self.by)
    }
}

/// A record queued for pruning, and what queued it.
///
/// Why the pair is kept: next to a long reader, nearly every write supersedes a version
/// the reader could still read (anything written before it began), so a prune right after
/// the write could take nothing and would only pay its cache misses; the record would then
/// wait in `stuck` and be pruned again once the reader ended. A collection parks such an
/// entry in `stuck` without touching the record.
#[derive(Clone, Copy)]
pub(crate) struct GcEntry {
    pub(crate) record: RecordPtr,
    pub(crate) superseded: Superseded,
}

impl GcEntry {
    pub(crate) fn new(record: RecordPtr, superseded: Superseded) -> Self {
        GcEntry { record, superseded }
    }

    fn unknown(record: RecordPtr) -> Self {
        GcEntry::new(record, Superseded::UNKNOWN)
    }
}

pub(crate) struct GcQueue {
    /// Invariant: every record with a version below its head that may become garbage, or
    /// with a tombstone at its head, has an entry here or in `stuck` (or in another site's
    /// queue); each entry is counted in its record's `queued`. An entry whose superseded
    /// version is pinned (it goes to `stuck` unpruned) is only ever parked while the entry
    /// of every version below that one is still queued somewhere too, and `stuck` gives
    /// its entries back as `Superseded::UNKNOWN`, so the record is pruned in the end.
    entries: Vec<GcEntry>,
    trigger: usize,
    /// Records whose last prune could take nothing: every version they keep was needed by
    /// an active transaction (typically a long reader's). Pruning them at every collection
    /// would cost a cache miss each and free nothing, so they wait until the oldest active
    /// transaction moves on (`stuck_low`), or until the collections since have pruned eight
    /// times as many records as wait here (a bound on how long a version needed only by a
    /// younger, finished transaction can linger). A new version re-queues a record anyway.
    stuck: Vec<GcEntry>,
    /// `low` of the snapshot the stuck records were pruned against.
    stuck_low: u64,
    /// `stuck`'s length after its last deduplication.
    stuck_deduped: usize,
    pruned_since_park: usize,
    /// Unlinked versions waiting for the walks that were in progress when they were unlinked.
    limbo: Vec<LimboBatch>,
    /// Records out of the index, waiting for the transactions that may still hold them.
    retired: Vec<Retired>,
    /// Newest versions copied into their record's inline slot (`Record::prune`), waiting
    /// for the transactions that may still hold them.
    moved: Vec<MovedBatch>,
    /// Collect once this many records are retired or versions moved (adapts, as `trigger`
    /// does: a long reader can keep them waiting, and rescanning them at every commit
    /// would cost far more than they hold).
    retired_trigger: usize,
    /// The prunes' output of one collection, and emptied batches' buffers, kept so that
    /// collections do not allocate.
    moved_now: Vec<MovedOriginal>,
    spare: Vec<Vec<MovedOriginal>>,
}

/// Heap versions whose copies replaced them as their records' heads, in one collection.
///
/// Who may still use an original: a transaction that read it (one at a timestamp above the
/// original's, begun before the copy was published, so below `after`), and a walk that
/// stood on it when the copy was published (of any transaction, older ones included, on
/// their way down the chain). So an original is freed once no active timestamp lies
/// between its own and `after`, and every walk in progress at the move has ended. A long
/// reader older than the original holds back neither.
struct MovedBatch {
    versions: Vec<MovedOriginal>,
    /// A timestamp drawn after the copies were published.
    after: u64,
    /// (slot, odd walk counter) of each walk in progress at the move.
    walks: Vec<(SlotId, u64)>,
    /// `low` of the last snapshot that kept some of `versions`, if any. The transactions
    /// that keep an original are below `after`, and no transaction that begins later is,
    /// so the set that holds the batch only shrinks; while its oldest member (typically a
    /// long reader) stays, rescanning the batch would cost a cache miss per original and
    /// usually free nothing. A younger member that ends meanwhile only delays the free
    /// until the oldest moves on, as for the stuck records.
    kept_at_low: Option<u64>,
}

/// A heap original (`Record::prune` moved a copy of it into the record's inline slot), with
/// its timestamp kept beside it: a long reader typically holds a batch through one check,
/// and reading the timestamp from the original would cost a cache miss per original each
/// time the batch is looked at.
#[derive(Clone, Copy)]
pub(crate) struct MovedOriginal {
    pub(crate) version: NonNull<Version>,
    pub(crate) ts: u64,
}

/// A record removed from the index, owned by the queue that retired it.
struct Retired {
    record: RecordPtr,
    /// A timestamp drawn after the removal: every transaction that could have found the
    /// record is below it, so once the watermark passes it none is left.
    after: u64,
}

struct LimboBatch {
    versions: Vec<NonNull<Version>>,
    bytes: usize,
    /// (slot, odd walk counter) of each walk in progress at the unlink.
    walks: Vec<(SlotId, u64)>,
    /// A rollback's batch: a timestamp drawn after the unlink. Its versions were visible
    /// (a reader may hold one it read, not only be walking past it, as it may past a pruned
    /// one), so they also wait until every transaction begun before then has ended, as a
    /// retired record does.
    after: Option<u64>,
}

// SAFETY: limbo versions are unreachable from any record and owned by the queue; they are
// only freed, never read, and the queue is behind a mutex.
unsafe impl Send for GcQueue {}

/// What one collection did.
#[derive(Default, Clone, Copy)]
pub(crate) struct Collected {
    pub(crate) bytes: usize,
    pub(crate) records: usize,
    /// Records taken out of the index.
    pub(crate) removed: usize,
    /// Removed records freed.
    pub(crate) freed: usize,
    /// Newest versions moved into their record's inline slot.
    pub(crate) moved: usize,
}

impl Default for GcQueue {
    fn default() -> Self {
        GcQueue {
            entries: Vec::new(),
            trigger: GC_TRIGGER_MIN,
            stuck: Vec::new(),
            stuck_low: 0,
            stuck_deduped: GC_TRIGGER_MIN,
            pruned_since_park: 0,
            limbo: Vec::new(),
            retired: Vec::new(),
            moved: Vec::new(),
            retired_trigger: RETIRED_TRIGGER,
            moved_now: Vec::new(),
            spare: Vec::new(),
        }
    }
}

impl GcQueue {
    /// Queues records whose `install` asked for the GC (and counted the entry).
    pub(crate) fn extend(&mut self, records: impl Iterator<Item = GcEntry>) {
        self.entries.extend(records);
    }

    /// Takes records already out of the index; `after` is a timestamp drawn after their
    /// removal.
    pub(crate) fn retire(&mut self, records: impl Iterator<Item = RecordPtr>, after: u64) {
        self.retired
            .extend(records.map(|record| Retired { record, after }));
    }

    /// Takes versions a rollback unlinked, to free once the walks in progress now end and
    /// every transaction begun before `after` (a timestamp drawn after the unlink) has too.
    pub(crate) fn push_limbo(
        &mut self,
        versions: Vec<NonNull<Version>>,
        after: u64,
        timestamps: &Timestamps,
    ) {
        let mut batch = LimboBatch::new(versions, timestamps);
        batch.after = Some(after);
        self.limbo.push(batch);
    }

    pub(crate) fn wants_collection(&self) -> bool {
        self.entries.len() >= self.trigger
            || self.retired.len() + self.moved_len() >= self.retired_trigger
    }

    pub(crate) fn len(&self) -> usize {
        self.entries.len()
            + self.stuck.len()
            + self.limbo.iter().map(|b| b.versions.len()).sum::<usize>()
            + self.retired.len()
            + self.moved_len()
    }

    fn moved_len(&self) -> usize {
        self.moved.iter().map(|b| b.versions.len()).sum()
    }

    /// Prunes the queued records against a fresh snapshot, removes the records that died,
    /// and frees what limbo and the retired list allow. `site` is the caller's timestamp
    /// site (for the timestamp drawn after removals).
    pub(crate) fn collect(&mut self, db: &Db, site: usize) -> Collected {
        let timestamps = &db.timestamps;
        let mut done = self.free_limbo(timestamps);
        let snap = timestamps.snapshot();
        done.freed = self.free_retired(snap.low);
        done.bytes += self.free_moved(&snap, timestamps);
        let mut unlinked = Vec::new();
        let mut moved = std::mem::take(&mut self.moved_now);
        if !self.stuck.is_empty()
            && (snap.low > self.stuck_low || self.pruned_since_park >= 8 * self.stuck.len())
        {
            // Back as unknown: a parked entry stood for every entry of its record that
            // `dedup` merged into it (in `stuck`), not only for its own pair.
            self.entries
                .extend(self.stuck.drain(..).map(|e| GcEntry::unknown(e.record)));
            self.pruned_since_park = 0;
        }
        let stuck = &mut self.stuck;
        // Pinned entries (see `GcEntry`) are parked first, so that neither `dedup`'s sort
        // nor the walk below spends time on them; each takes its count in `queued` with
        // it. A record with entries on both sides is pruned now for the others, and once
        // more when its parked entry comes back.
        self.entries.retain(|&e| {
            let pinned = e.superseded.pinned(&snap);
            if pinned {
                stuck.push(e);
            }
            !pinned
        });
        // A hot key has many entries but needs one prune; while a long reader keeps its
        // history alive, the queue then holds one entry per record, not one per write.
        dedup(&mut self.entries);
        let mut removed = Vec::new();
        // A prune's first loads miss (the queue's records were written a while ago, and
        // a long reader's stuck records come back cold): fetch the records `AHEAD_RECORD`
        // entries ahead and their head versions `AHEAD_HEAD` ahead, so the misses overlap.
        const AHEAD_RECORD: usize = 8;
        const AHEAD_HEAD: usize = 4;
        let entries = &mut self.entries;
        let mut kept_entries = 0;
        for i in 0..entries.len() {
            if let Some(ahead) = entries.get(i + AHEAD_RECORD) {
                ahead.record.get().prefetch_for_prune();
            }
            if let Some(ahead) = entries.get(i + AHEAD_HEAD) {
                ahead.record.get().prefetch_head();
            }
            let entry = entries[i];
            let record = entry.record;
            let before = (unlinked.len(), moved.len());
            let keep = match record.get().prune(record, &snap, &mut unlinked, &mut moved) {
                Prune::Pruned(p) => {
                    done.bytes += p.bytes_freed;
                    done.records += 1;
                    if let Some(stamp) = p.removed {
                        db.remove_from_index(record, stamp);
                        removed.push(record);
                    }
                    let progressed = p.bytes_freed > 0 || before != (unlinked.len(), moved.len());
                    if p.history_kept && !progressed {
                        // The entry (and its count in `queued`) moves to the stuck list.
                        stuck.push(entry);
                        continue;
                    }
                    p.history_kept
                }
                Prune::Busy => true, // a committer or another pruner holds it
                Prune::Dead => false,
            };
            if keep {
                entries[kept_entries] = GcEntry::unknown(record);
                kept_entries += 1;
            } else {
                record.get().unqueue();
            }
        }
        entries.truncate(kept_entries);
        if !self.stuck.is_empty() {
            self.stuck_low = snap.low;
            // A record written again while stuck comes back here once more: one entry each.
            if self.stuck.len() >= 2 * self.stuck_deduped {
                dedup(&mut self.stuck);
                self.stuck_deduped = self.stuck.len().max(GC_TRIGGER_MIN);
            }
        }
        self.pruned_since_park += done.records;
        if !removed.is_empty() || !moved.is_empty() {
            let after = timestamps.fresh(site);
            done.moved = moved.len();
            done.removed = removed.len();
            self.retire(removed.into_iter(), after);
            if !moved.is_empty() {
                // Order the head stores before reading the walk counters (as for limbo).
                crate::sync::fence_seq_cst();
                let buffer = self.spare.pop().unwrap_or_default();
                self.moved.push(MovedBatch {
                    versions: std::mem::replace(&mut moved, buffer),
                    after,
                    walks: timestamps.walks_in_progress(),
                    kept_at_low: None,
                });
            }
        }
        self.moved_now = moved;
        self.retired_trigger = RETIRED_TRIGGER.max(2 * (self.retired.len() + self.moved_len()));
        if !unlinked.is_empty() {
            self.limbo.push(LimboBatch::new(unlinked, timestamps));
            done.bytes += self.free_limbo(timestamps).bytes;
        }
        self.trigger = GC_TRIGGER_MIN.max(2 * self.entries.len());
        // A long reader can make a queue grow large; give that memory back once it drains.
        if self.entries.capacity() > 4 * self.trigger {
            self.entries.shrink_to(self.trigger);
        }
        done
    }

    /// Frees the retired records that no transaction (all are at or above `low`) and no
    /// queue can reach any more.
    fn free_retired(&mut self, low: u64) -> usize {
        let before = self.retired.len();
        let mut deferred = 0;
        self.retired.retain(|r| {
            if r.after >= low || !r.record.get().is_unqueued() {
                return true;
            }
            let record = r.record;
            // SAFETY (of both `destroy`s below): out of the index since before `after` was
            // drawn, so only transactions begun before then (all ended: the watermark is past
            // `after`) could have found it, and no GC queue names it (`queued` is zero, and
            // nothing queues a dead record); this queue retired it once and frees it once.
            if verso_index::reads_held_key(record.key()) {
                // Masstree reads a long key's tail from the record (`IndexValue::HOLDS_KEY`):
                // an index operation outside any transaction (a rollback's lookup) that
                // began before now may still compare against it.
                deferred += 1;
                verso_index::retire_after_readers(move || {
                    // SAFETY: as above, and no index operation can read its key any more.
                    unsafe { record.destroy() };
                });
            } else {
                // SAFETY: as above.
                unsafe { record.destroy() };
            }
            false
        });
        if deferred > 0 {
            verso_index::flush_retired(deferred);
        }
        before - self.retired.len()
    }

    /// Frees the moved originals no transaction can use any more, judged by `snap` (taken
    /// after their batch's `after` was drawn; see [`MovedBatch`]); returns the bytes freed.
    fn free_moved(&mut self, snap: &GcSnapshot, timestamps: &Timestamps) -> usize {
        let mut bytes = 0;
        let spare = &mut self.spare;
        self.moved.retain_mut(|batch| {
            let walked = batch
                .walks
                .iter()
                .all(|&(slot, seq)| timestamps.walk_word(slot).load(Ordering::SeqCst) != seq);
            if !walked || batch.kept_at_low == Some(snap.low) {
                return true;
            }
            // Freeing reads each original, written a while ago: fetch ahead the ones that
            // will be freed, so that the misses overlap.
            const AHEAD: usize = 8;
            let after = batch.after;
            let held = |m: &MovedOriginal| m.ts >= after || snap.visible_to_someone(m.ts, after);
            let versions = &mut batch.versions;
            for m in versions.iter().take(AHEAD) {
                if !held(m) {
                    Version::prefetch(m.version);
                }
            }
            let mut kept = 0;
            for i in 0..versions.len() {
                if let Some(m) = versions.get(i + AHEAD).filter(|m| !held(m)) {
                    Version::prefetch(m.version);
                }
                let m = versions[i];
                if held(&m) {
                    versions[kept] = m;
                    kept += 1;
                    continue;
                }
                // SAFETY: off its chain since before `after`, no walk that stood on it is
                // left, and no transaction that could have read it is active: the readers
                // were above its timestamp and below `after`, and `snap` has none there.
                // Each original is listed once, and is dropped from the list here.
                unsafe {
                    bytes += m.version.as_ref().footprint();
                    Version::free(m.version);
                }
            }
            versions.truncate(kept);
            if batch.versions.is_empty() {
                spare.push(std::mem::take(&mut batch.versions));
                return false;
            }
            batch.kept_at_low = Some(snap.low);
            true
        });
        bytes
    }

    /// Frees every moved original, used or not: only when no transaction is left.
    fn free_all_moved(&mut self) {
        for batch in self.moved.drain(..) {
            for v in batch.versions {
                // SAFETY: no transaction is left (`Db::drop`); each is listed once.
                unsafe { Version::free(v.version) };
            }
        }
    }

    /// Frees every limbo batch whose recorded walks have all finished.
    fn free_limbo(&mut self, timestamps: &Timestamps) -> Collected {
        let mut done = Collected::default();
        // Taken once, and only if a rollback's batch needs it.
        let mut low = None;
        self.limbo.retain_mut(|batch| {
            let finished = batch
                .walks
                .iter()
                .all(|&(slot, seq)| timestamps.walk_word(slot).load(Ordering::SeqCst) != seq);
            if !finished {
                return true;
            }
            if let Some(after) = batch.after {
                if *low.get_or_insert_with(|| timestamps.snapshot().low) <= after {
                    return true;
                }
            }
            batch.free();
            done.bytes += batch.bytes;
            false
        });
        done
    }

    /// Frees every limbo batch, walks or not: only when no transaction is left (`Db::drop`,
    /// before the records that inline versions live in are freed).
    pub(crate) fn free_all_limbo(&mut self) {
        for mut batch in self.limbo.drain(..) {
            batch.free();
        }
    }
}

/// Leaves one entry per record, dropping the others' counts.
fn dedup(entries: &mut Vec<GcEntry>) {
    entries.sort_unstable_by_key(|e| e.record.addr());
    entries.dedup_by(|dup, kept| {
        let same = dup.record.addr() == kept.record.addr();
        if same {
            dup.record.get().unqueue();
        }
        same
    });
}

impl LimboBatch {
    /// A batch of versions just unlinked, with the walks in progress now. An inline version
    /// is counted in its record's `queued`, so the record outlives the batch.
    fn new(versions: Vec<NonNull<Version>>, timestamps: &Timestamps) -> LimboBatch {
        // Order the unlinks before reading the walk counters (the pruning side of the
        // announce-then-load pair in `Record::read`).
        crate::sync::fence_seq_cst();
        let walks = timestamps.walks_in_progress();
        let mut bytes = 0;
        for &v in &versions {
            // SAFETY: just unlinked by the caller and owned here, not freed yet.
            bytes += unsafe { v.as_ref() }.footprint();
            // SAFETY: as above.
            if let Some(record) = unsafe { Version::inline_record(v) } {
                record.queue_inline();
            }
        }
        LimboBatch {
            versions,
            bytes,
            walks,
            after: None,
        }
    }

    /// Frees the batch's versions; the caller knows no walk can be on them.
    fn free(&mut self) {
        for v in self.versions.drain(..) {
            // SAFETY: unlinked from its chain before the walk snapshot, and every walk that
            // could have been on it has ended (or none is left); each limbo version is freed
            // once, and an inline one's record is alive: this batch holds it (`new`).
            unsafe {
                let record = Version::inline_record(v);
                Version::free(v);
                if let Some(record) = record {
                    record.unqueue();
                }
            }
        }
    }
}

impl Drop for GcQueue {
    fn drop(&mut self) {
        // Only when the `Db` drops: no transaction is left to walk anything.
        self.free_all_limbo();
        self.free_all_moved();
        for r in self.retired.drain(..) {
            // SAFETY: out of the index (so not freed with it), retired here only, and no
            // transaction is left.
            unsafe { r.record.destroy() };
        }
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use crate::record::loom_tests::TestRecord;
    use crate::timestamp::GcSnapshot;
    use crate::TimestampSource;
    use loom::sync::Arc;

    /// A reader older than two newer versions walks past them while the collector unlinks
    /// the middle one (no active reader sees it) and frees it as soon as limbo allows. The
    /// reader must never step on a freed version and must still find its own.
    #[test]
    fn unlinked_versions_outlive_the_walks_that_may_see_them() {
        loom::model(|| {
            let timestamps =
                Arc::new(Timestamps::with_layout(TimestampSource::Rdtsc, 1, 2).unwrap());
            let (reader_ts, slot) = timestamps.begin(0).unwrap();
            let rec = TestRecord::new(0);
            for (i, ts) in [reader_ts - 1, reader_ts + 100, reader_ts + 200]
                .into_iter()
                .enumerate()
            {
                rec.lock_for_commit(ts).unwrap();
                // The middle version lives in the record's inline slot.
                let v = if i == 1 {
                    Version::new_in(rec.0, ts, Some(&[i as u8]))
                } else {
                    Version::new(ts, Some(&[i as u8]))
                };
                rec.install(v);
                rec.unlock(ts);
            }
            let (rec2, ts2) = (rec.clone(), timestamps.clone());
            let reader = loom::thread::spawn(move || {
                let seen = rec2
                    .read(reader_ts, ts2.walk_word(slot))
                    .unwrap()
                    .map(|v| v.ts());
                assert_eq!(seen, Some(reader_ts - 1));
            });
            let snap = GcSnapshot {
                low: reader_ts,
                future: reader_ts + 1000,
                active: vec![reader_ts],
            };
            let (mut unlinked, mut moved) = (Vec::new(), Vec::new());
            assert!(matches!(
                rec.prune(rec.0, &snap, &mut unlinked, &mut moved),
                Prune::Pruned(_)
            ));
            assert!(moved.is_empty(), "the slot is in limbo, not free");
            assert_eq!(
                unlinked.len(),
                1,
                "the middle version is invisible to everyone"
            );
            let mut q = GcQueue::default();
            let queued = rec.queued_count();
            q.limbo.push(LimboBatch::new(unlinked, &timestamps));
            assert_eq!(rec.queued_count(), queued + 1, "limbo holds the record");
            q.free_limbo(&timestamps);
            // A committer that takes the slot now overwrites the unlinked version: only
            // after limbo freed it, so never under the reader's walk.
            let reuse = Version::new_in(rec.0, reader_ts + 300, Some(b"x"));
            reader.join().unwrap();
            q.free_limbo(&timestamps);
            assert!(q.limbo.is_empty(), "limbo must drain once the walk is over");
            // SAFETY: never published.
            unsafe { Version::free(reuse) };
            assert_eq!(
                rec.queued_count(),
                queued,
                "a freed inline version no longer holds its record"
            );
        });
    }
}
