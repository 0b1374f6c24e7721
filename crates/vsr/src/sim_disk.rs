//! A replica's disk as a simulator keeps it: writes wait for a sync to become durable, syncs
//! complete in the order they were asked for, and a crash keeps a random prefix of what was
//! not synced, the last append maybe torn (a log with per-record checksums recovers such a
//! prefix). The slot moves' simulator (`verso-cluster`) and NCC's (`verso-ncc`) run their
//! groups' replicas on it; `verso-vsr-sim` has its own, with stalls and checkpoints written
//! aside.

use std::collections::VecDeque;

use crate::replica::{DiskWrite, Durable};
use crate::types::Viewstamp;

#[derive(Clone, Debug)]
pub struct SimDisk<O, R, S> {
    /// What survives a crash.
    pub durable: Durable<O, R, S>,
    /// Writes issued and not yet durable, oldest first.
    unsynced: VecDeque<DiskWrite<O, R, S>>,
    /// Syncs asked for, oldest first, with how many writes had been issued by then: each
    /// makes those durable.
    syncs: VecDeque<(u64, usize)>,
    issued: usize,
    made_durable: usize,
    /// When the last sync asked for completes.
    sync_at: u64,
}

impl<O: Clone, R: Clone, S: Clone> Default for SimDisk<O, R, S> {
    fn default() -> Self {
        SimDisk {
            durable: Durable::default(),
            unsynced: VecDeque::new(),
            syncs: VecDeque::new(),
            issued: 0,
            made_durable: 0,
            sync_at: 0,
        }
    }
}

impl<O: Clone, R: Clone, S: Clone> SimDisk<O, R, S> {
    /// The replica's [`Action::Write`](crate::Action::Write).
    pub fn write(&mut self, w: DiskWrite<O, R, S>) {
        self.unsynced.push_back(w);
        self.issued += 1;
    }

    /// The replica's [`Action::Sync`](crate::Action::Sync), asked for at `now`: the disk
    /// takes `delay`, but completes no sync before an earlier one. When it completes: call
    /// [`SimDisk::complete_sync`] then.
    pub fn sync(&mut self, id: u64, now: u64, delay: u64) -> u64 {
        self.syncs.push_back((id, self.issued));
        self.sync_at = (now + delay).max(self.sync_at);
        self.sync_at
    }

    /// The oldest sync completes: its writes are durable. Returns the sync's id, for
    /// [`Replica::handle_synced`](crate::Replica::handle_synced), and the checkpoints it made
    /// durable, for [`Replica::handle_checkpoint_durable`](crate::Replica::handle_checkpoint_durable).
    pub fn complete_sync(&mut self) -> Option<(u64, Vec<Viewstamp>)> {
        let (id, mark) = self.syncs.pop_front()?;
        let mut checkpoints = Vec::new();
        while self.made_durable < mark {
            let w = self.unsynced.pop_front().expect("an issued write");
            self.durable.apply(&w, None);
            if let DiskWrite::Checkpoint(s) = &w {
                checkpoints.push(s.ap);
            }
            self.made_durable += 1;
        }
        Some((id, checkpoints))
    }

    /// The replica crashes: of the writes not synced, the first `keep_draw % (n + 1)`
    /// survive, the last of them cut to a prefix of its entries by `torn_draw` if it is an
    /// append; syncs under way are forgotten.
    pub fn crash(&mut self, keep_draw: u64, torn_draw: u64) {
        let writes: Vec<DiskWrite<O, R, S>> = self.unsynced.drain(..).collect();
        let keep = (keep_draw % (writes.len() as u64 + 1)) as usize;
        for (i, w) in writes.iter().take(keep).enumerate() {
            let part = match w {
                DiskWrite::Append(es) if i + 1 == keep => {
                    Some((torn_draw % (es.len() as u64 + 1)) as usize)
                }
                _ => None,
            };
            self.durable.apply(w, part);
        }
        self.syncs.clear();
        self.issued = 0;
        self.made_durable = 0;
        self.sync_at = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{Body, Entry};
    use crate::types::ViewNum;

    type Disk = SimDisk<u64, (), ()>;

    fn append(ops: &[u64]) -> DiskWrite<u64, (), ()> {
        DiskWrite::Append(
            ops.iter()
                .map(|&op| {
                    let vs = |op| Viewstamp {
                        view: ViewNum::ZERO,
                        op,
                    };
                    Entry {
                        vs: vs(op),
                        prev: vs(op - 1),
                        body: Body::Requests(Vec::new()),
                    }
                })
                .collect(),
        )
    }

    fn ops(d: &Disk) -> Vec<u64> {
        d.durable.log.iter().map(|e| e.vs.op).collect()
    }

    #[test]
    fn a_sync_makes_the_writes_before_it_durable_in_order() {
        let mut d = Disk::default();
        d.write(append(&[1, 2]));
        assert_eq!(d.sync(7, 100, 50), 150);
        d.write(append(&[3]));
        // A faster disk still completes the second sync after the first.
        assert_eq!(d.sync(8, 110, 10), 150);
        assert_eq!(ops(&d), Vec::<u64>::new());
        assert_eq!(d.complete_sync(), Some((7, vec![])));
        assert_eq!(ops(&d), vec![1, 2]);
        assert_eq!(d.complete_sync(), Some((8, vec![])));
        assert_eq!(ops(&d), vec![1, 2, 3]);
        assert_eq!(d.complete_sync(), None);
    }

    #[test]
    fn a_crash_keeps_a_prefix_of_the_unsynced_writes_the_last_append_maybe_torn() {
        for keep in 0..4u64 {
            for torn in 0..3u64 {
                let mut d = Disk::default();
                d.write(append(&[1]));
                d.sync(1, 0, 1);
                d.complete_sync();
                d.write(append(&[2, 3]));
                d.write(append(&[4]));
                d.sync(2, 0, 1); // never completes
                d.crash(keep, torn);
                let expected: Vec<u64> = match keep % 3 {
                    0 => vec![1],
                    1 => [1, 2, 3][..1 + (torn % 3) as usize].to_vec(),
                    _ => [1, 2, 3, 4][..3 + (torn % 2) as usize].to_vec(),
                };
                assert_eq!(ops(&d), expected, "keep {keep} torn {torn}");
                // Nothing from before the crash completes afterwards.
                assert_eq!(d.complete_sync(), None);
            }
        }
    }
}
