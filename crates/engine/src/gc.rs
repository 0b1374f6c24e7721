//! Garbage collection of superseded versions, with no background thread.
//!
//! A commit that supersedes a version pushes `(record, ts)` onto its site's queue: no
//! transaction at or above `ts` can see the older version. When a queue grows past its
//! trigger, the committing thread computes the watermark (the oldest active or future
//! timestamp) and prunes the records whose entries are below it. Nothing ever sweeps a table.

use crate::index::RecordPtr;

/// A queue is collected once it holds this many entries (or twice what the last collection
/// had to leave behind, so a long reader does not make every commit rescan the queue).
pub(crate) const GC_TRIGGER_MIN: usize = 256;

pub(crate) struct GcQueue {
    /// Invariant: every entry's record had a version superseded at the entry's timestamp
    /// that may not have been freed yet.
    entries: Vec<(RecordPtr, u64)>,
    trigger: usize,
}

/// What one collection did.
#[derive(Default, Clone, Copy)]
pub(crate) struct Collected {
    pub(crate) bytes: usize,
    pub(crate) records: usize,
}

impl Default for GcQueue {
    fn default() -> Self {
        GcQueue { entries: Vec::new(), trigger: GC_TRIGGER_MIN }
    }
}

impl GcQueue {
    pub(crate) fn push(&mut self, record: RecordPtr, superseded_at: u64) {
        self.entries.push((record, superseded_at));
    }

    pub(crate) fn wants_collection(&self) -> bool {
        self.entries.len() >= self.trigger
    }

    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// Prunes every record whose entry is below `watermark`; keeps the rest.
    pub(crate) fn collect(&mut self, watermark: u64) -> Collected {
        let mut done = Collected::default();
        self.entries.retain(|&(record, superseded_at)| {
            if superseded_at >= watermark {
                return true;
            }
            match record.get().prune(watermark) {
                Some(bytes) => {
                    done.bytes += bytes;
                    done.records += 1;
                    false
                }
                None => true, // busy: a committer or another pruner holds it
            }
        });
        self.trigger = GC_TRIGGER_MIN.max(2 * self.entries.len());
        // A long reader can make a queue grow large; give that memory back once it drains.
        if self.entries.capacity() > 4 * self.trigger {
            self.entries.shrink_to(self.trigger);
        }
        done
    }
}
