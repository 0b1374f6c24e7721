//! The disk side (thesis §4.2.2 on-disk state, §4.2.4): flushing the log lazily in the
//! background, syncs, checkpoints, and rebuilding a replica from its disk after a crash.

use super::{log::Log, Deferred, Mistake, Mode, PendingSync, Replica, Status};
use crate::app::App;
use crate::client_table::ClientTable;
use crate::message::{Body, Entry, Message, Snapshot};
use crate::types::{Address, ReplicaId, ViewNum, Viewstamp};

/// One write to a replica's disk. [`Durable::apply`] gives each its meaning.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum DiskWrite<O, R, S> {
    /// The thesis's on-disk `v`.
    View(ViewNum),
    /// Entries that follow the disk log's last one.
    Append(Vec<Entry<O>>),
    /// Keep only the entries up to `keep_through` (a catch-up rolled the log back). It may
    /// lie below the log's first entry, inside the checkpoint's part that can be undone
    /// (after a state transfer installed a leader's tentative state).
    Truncate { keep_through: Viewstamp },
    /// A checkpoint: replaces the previous one.
    Checkpoint(Snapshot<R, S>),
    /// Drops the log's entries up to op `through`: they are in the checkpoint, and in a
    /// majority's logs below the primary's `dpMin`.
    TrimLog { through: u64 },
    /// A state transfer: the checkpoint is replaced and the log emptied, to start after
    /// the snapshot's `ap`.
    Install(Snapshot<R, S>),
    /// The log, empty, starts after `0` (its entries up to there are in the checkpoint).
    /// The replica never asks for this write: it opens a compacted copy of a disk (a file
    /// rewritten after `TrimLog`: view, checkpoint, this, then the live entries).
    LogBase(Viewstamp),
}

impl<O, R, S> DiskWrite<O, R, S> {
    /// Whether this write may go ahead of a checkpoint at `ap` that is still being written
    /// ([`super::Action::Write`]): an `Append` or a `View`, and a `Truncate` that keeps
    /// everything up to `ap`: it removes only entries the checkpoint does not cover, and
    /// the disk's log base is never above a pending checkpoint's `ap`, so replaying the two
    /// in either order gives the same disk. (A checkpoint taken at the log's newest entry
    /// covers tentative entries too; a truncation that cuts into those waits for it.) Any
    /// other write waits for the checkpoint.
    pub fn may_pass_checkpoint(&self, ap: Viewstamp) -> bool {
        match self {
            DiskWrite::Append(_) | DiskWrite::View(_) => true,
            DiskWrite::Truncate { keep_through } => keep_through.op >= ap.op,
            _ => false,
        }
    }
}

/// What a replica's disk holds: the thesis's Fig 4-2c. The simulator keeps one per replica
/// and hands it back after a crash; [`Durable::apply`] is the reference meaning of a write.
///
/// Invariants: `log[i].vs.op == log_base.op + 1 + i`, chained by `prev`; `log_base.op` is
/// at most the checkpoint's `ap.op`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Durable<O, R, S> {
    pub view: ViewNum,
    pub checkpoint: Option<Snapshot<R, S>>,
    /// The viewstamp of the entry just before the log's first (trimmed ones are in the
    /// checkpoint).
    pub log_base: Viewstamp,
    pub log: Vec<Entry<O>>,
}

impl<O: Clone, R: Clone, S: Clone> Default for Durable<O, R, S> {
    fn default() -> Self {
        Durable {
            view: ViewNum::ZERO,
            checkpoint: None,
            log_base: Viewstamp::ZERO,
            log: Vec::new(),
        }
    }
}

impl<O: Clone, R: Clone, S: Clone> Durable<O, R, S> {
    /// The last entry on disk.
    pub fn tail(&self) -> Viewstamp {
        self.log.last().map_or(self.log_base, |e| e.vs)
    }

    /// Applies one write. `keep` entries of an `Append` (all if `None`) models a write
    /// torn by a crash: a prefix survives, as a log with per-record checksums recovers.
    pub fn apply(&mut self, write: &DiskWrite<O, R, S>, keep: Option<usize>) {
        match write {
            DiskWrite::View(v) => {
                assert!(*v >= self.view, "the view on disk never decreases");
                self.view = *v;
            }
            DiskWrite::Append(entries) => {
                let n = keep.unwrap_or(entries.len()).min(entries.len());
                for e in &entries[..n] {
                    assert_eq!(e.prev, self.tail(), "disk append out of order");
                    self.log.push(e.clone());
                }
            }
            DiskWrite::Truncate { keep_through } => {
                if keep_through.op >= self.log_base.op {
                    self.log
                        .truncate((keep_through.op - self.log_base.op) as usize);
                } else {
                    let cp = self
                        .checkpoint
                        .as_ref()
                        .expect("a log base comes from a checkpoint");
                    assert!(
                        keep_through.op >= cp.undo_base.op,
                        "truncating below the checkpoint's durable point"
                    );
                    self.log.clear();
                    self.log_base = *keep_through;
                }
            }
            DiskWrite::Checkpoint(s) => self.checkpoint = Some(s.clone()),
            DiskWrite::TrimLog { through } => {
                let ap = self.checkpoint.as_ref().map_or(0, |c| c.ap.op);
                assert!(*through <= ap, "trimming past the checkpoint");
                let n = through.saturating_sub(self.log_base.op) as usize;
                let n = n.min(self.log.len());
                if n > 0 {
                    self.log_base = self.log[n - 1].vs;
                    self.log.drain(..n);
                }
            }
            DiskWrite::Install(s) => {
                self.checkpoint = Some(s.clone());
                self.log_base = s.ap;
                self.log.clear();
            }
            DiskWrite::LogBase(base) => {
                assert!(self.log.is_empty(), "a log base is set on an empty log");
                let ap = self.checkpoint.as_ref().map_or(0, |c| c.ap.op);
                assert!(base.op <= ap, "a log base inside the checkpoint");
                self.log_base = *base;
            }
        }
    }
}

impl<A: App> Replica<A> {
    /// Hands the log's unwritten entries (all of them if `force`, else at most one
    /// buffer's worth) and a changed view to the disk, then asks for a sync. Returns the
    /// sync's id.
    pub(super) fn flush(&mut self, force: bool) -> u64 {
        if self.view_written != self.view {
            self.view_written = self.view;
            self.actions
                .push_back(super::Action::Write(DiskWrite::View(self.view)));
        }
        let max = if force {
            usize::MAX
        } else {
            self.config.flush_entries_max
        };
        self.write_entries(max);
        let id = self.next_sync_id;
        self.next_sync_id += 1;
        let tail = self
            .log
            .stamp(self.written_through)
            .expect("written entries are in the log");
        self.syncs.push_back(PendingSync {
            id,
            tail,
            view: self.view_written,
        });
        self.actions.push_back(super::Action::Sync { id });
        id
    }

    /// Starts a background flush if none is in flight and something is unwritten.
    pub(super) fn maybe_background_flush(&mut self) {
        if self.background_sync.is_none() && self.written_through < self.log.op_max().op {
            self.background_sync = Some(self.flush(false));
        }
    }

    /// Whether accepting more entries must wait for the disk (the double buffer is full).
    pub(super) fn stalled(&self) -> bool {
        self.log.op_max().op - self.disk_op_max.op.min(self.log.op_max().op)
            >= self.config.unflushed_entries_max as u64
    }

    /// The disk finished sync `id` (and every one before it).
    pub fn handle_synced(&mut self, now: u64, id: u64) {
        self.advance(now);
        let before = self.disk_op_max;
        while self.syncs.front().is_some_and(|s| s.id <= id) {
            let s = self.syncs.pop_front().expect("checked");
            self.disk_op_max = s.tail;
            self.view_durable = s.view;
        }
        if self.background_sync.is_some_and(|b| b <= id) {
            self.background_sync = None;
        }
        let due: Vec<Deferred> = {
            let (due, keep) = std::mem::take(&mut self.deferred)
                .into_iter()
                .partition(|(sid, _)| *sid <= id);
            self.deferred = keep;
            due.into_iter().map(|(_, d)| d).collect()
        };
        for d in due {
            self.run_deferred(d);
        }
        if self.disk_op_max != before {
            self.on_disk_advanced();
        }
        self.maybe_background_flush();
        self.check_invariants();
    }

    /// The disk holds the checkpoint taken at `ap`, durably (with every write before it).
    /// A report of a checkpoint this replica no longer waits for (a state transfer replaced
    /// it) is ignored.
    pub fn handle_checkpoint_durable(&mut self, now: u64, ap: Viewstamp) {
        self.advance(now);
        if self.checkpoint_pending == Some(ap) {
            self.checkpoint_pending = None;
            self.checkpoint_written(ap);
        }
        self.check_invariants();
    }

    fn run_deferred(&mut self, d: Deferred) {
        match d {
            Deferred::SendElectPrepare { view } => {
                if self.view == view && matches!(self.status, Status::Candidate { .. }) {
                    let (op_max, restarted) = (self.log.op_max(), self.is_amnesiac());
                    self.send_to_others(Message::ElectPrepare {
                        view,
                        op_max,
                        restarted,
                    });
                }
            }
            Deferred::ElectPrepareOk { to, view } => {
                if self.view == view && self.view_durable == view {
                    if to == self.id {
                        self.on_elect_prepare_ok(to, view);
                    } else {
                        self.send(Address::Replica(to), Message::ElectPrepareOk { view });
                    }
                }
            }
            Deferred::ElectAcceptOk { to, view } => self.elect_accept_ok(to, view),
        }
    }

    /// The snapshot of the replicated state as of `op_max`: the application's, the client
    /// table, and the viewstamps it may still have to undo (everything above `dp`).
    pub(super) fn snapshot(&self) -> Snapshot<A::Reply, A::Snapshot> {
        let ap = self.log.op_max();
        let tail = self.log.stamps_after(self.dp.op);
        assert_eq!(
            tail.len() as u64,
            ap.op - self.dp.op,
            "the log knows every stamp above dp"
        );
        Snapshot {
            ap,
            tail,
            undo_base: self.dp,
            app: self.app.snapshot(),
            clients: self.clients.clone(),
        }
    }

    /// Writes a checkpoint every `checkpoint_interval` entries (one at a time).
    pub(super) fn maybe_checkpoint(&mut self) {
        let every = self.config.checkpoint_interval;
        if every == 0 || self.log.op_max().op < self.last_checkpoint_op + every {
            return;
        }
        self.take_checkpoint();
    }

    /// Takes a checkpoint of what is applied now, for an application that decides by its
    /// own measure (the bytes its log holds) when to take one. Does nothing, and says so,
    /// while one is being written, when nothing was applied since the last, or outside
    /// normal operation (what is applied then may be rolled back by the view change).
    pub fn checkpoint_now(&mut self) -> bool {
        let normal = matches!(self.status, Status::Primary(_) | Status::Backup);
        if !normal || self.log.op_max().op <= self.last_checkpoint_op {
            return false;
        }
        self.take_checkpoint()
    }

    fn take_checkpoint(&mut self) -> bool {
        if self.checkpoint_pending.is_some() {
            return false;
        }
        let op_max = self.log.op_max();
        self.last_checkpoint_op = op_max.op;
        let snapshot = self.snapshot();
        // The log is write-ahead of the checkpoint: its entries go first.
        self.written_through_all();
        self.actions
            .push_back(super::Action::Write(DiskWrite::Checkpoint(snapshot)));
        self.flush(true);
        self.checkpoint_pending = Some(op_max);
        self.stats.checkpoints += 1;
        true
    }

    fn written_through_all(&mut self) {
        self.write_entries(usize::MAX);
    }

    /// Hands at most `max` unwritten entries to the disk, in appends of at most
    /// `message_bytes_max` of operations each (one larger entry alone): a disk frame has a
    /// size limit too, and one past it would read back as a torn tail.
    fn write_entries(&mut self, max: usize) {
        let mut left = max;
        while left > 0 {
            let n = count_within(
                self.log.entries_after(self.written_through, left),
                self.config.message_bytes_max,
                |e| e.op_bytes::<A>(),
            );
            if n == 0 {
                return;
            }
            let entries: Vec<_> = self
                .log
                .entries_after(self.written_through, n)
                .cloned()
                .collect();
            self.written_through = entries.last().expect("n > 0").vs.op;
            self.actions
                .push_back(super::Action::Write(DiskWrite::Append(entries)));
            left -= n;
        }
    }

    /// A checkpoint reflecting entries up to `ap` is on disk: entries below both it and
    /// `dpMin` are no longer needed by anyone (property 6) and leave memory and disk.
    fn checkpoint_written(&mut self, ap: Viewstamp) {
        if !self.log.contains(ap) || !self.log.contains(self.dp_min) {
            return; // rolled back since; the next checkpoint will do
        }
        let through = ap.op.min(self.dp_min.op);
        if through > self.log.base().op {
            self.log.fold_through(through, self.dp.op);
            self.actions
                .push_back(super::Action::Write(DiskWrite::TrimLog { through }));
        }
    }

    /// Rolls the log back to its largest viewstamp at or below `to`, undoing what was
    /// applied above it, on disk too. Never below `dp` (Theorem 4.3.3).
    pub(super) fn truncate(&mut self, to: Viewstamp) {
        let new_max = self.log.truncate_to(to);
        assert!(
            self.log.contains(self.dp),
            "replica {} asked to discard durable entries: dp {} but the log now ends at {new_max}",
            self.id,
            self.dp
        );
        let undone = self.written_through.max(new_max.op) - new_max.op;
        self.stats.entries_undone += undone;
        self.app.undo_to(new_max.op);
        self.clients.undo_to(new_max.op);
        if self.written_through > new_max.op {
            self.written_through = new_max.op;
            self.actions
                .push_back(super::Action::Write(DiskWrite::Truncate {
                    keep_through: new_max,
                }));
        }
        // What the disk holds after a pending sync can no longer be above the new end.
        for s in &mut self.syncs {
            if s.tail.op > new_max.op {
                s.tail = new_max;
            }
        }
        if self.disk_op_max.op > new_max.op {
            self.disk_op_max = new_max;
        }
        if self.last_checkpoint_op > new_max.op {
            self.last_checkpoint_op = new_max.op;
        }
    }

    /// Appends an entry from the primary (or a catch-up) and executes it, returning the
    /// replies of the requests it executed (duplicates by the client table are skipped).
    pub(super) fn accept(&mut self, entry: Entry<A::Op>) -> Vec<(u64, u64, A::Reply, bool)> {
        let (vs, op) = (entry.vs, entry.vs.op);
        let mut replies = Vec::new();
        if let Body::Requests(requests) = &entry.body {
            for r in requests {
                if matches!(
                    self.clients.seen(r.client, r.seq),
                    crate::client_table::Seen::New
                ) {
                    let result = self.app.apply(op, &r.op);
                    self.clients.record(vs, r.client, r.seq, result.clone());
                    replies.push((r.client, r.seq, result, r.sync));
                }
            }
        }
        let force = matches!(entry.body, Body::ViewStart) || self.config.mode == Mode::Sync;
        self.log.append(entry);
        self.stats.entries_applied += 1;
        if self.config.mistake == Some(Mistake::UndoDroppedAboveDp) {
            self.app.forget_undo(op);
        }
        if force {
            // A view's first entry is on disk before anyone acknowledges it (Lemma 4.3.6);
            // under VSR-Sync every entry is.
            self.flush(true);
        } else {
            self.maybe_background_flush();
        }
        self.maybe_checkpoint();
        replies
    }

    /// Adopts the primary's durable points if this log holds them.
    pub(super) fn adopt_dp(&mut self, dp: Viewstamp, dp_min: Viewstamp) {
        if dp > self.dp && self.log.contains(dp) {
            self.dp = dp;
            self.app.forget_undo(dp.op);
            self.clients.forget_undo(dp.op);
            self.log.forget_stamps_through(dp.op);
        }
        if dp_min > self.dp_min && dp_min <= self.dp && self.log.contains(dp_min) {
            self.dp_min = dp_min;
        }
    }

    /// Rebuilds a replica from its disk after a crash (§4.2.4): the newest checkpoint, rolled
    /// back to where it agrees with the disk log, then the log replayed after it. `app` is
    /// a fresh application. The replica starts as a backup; the first message from the
    /// primary usually starts a catch-up.
    pub fn recover(
        id: ReplicaId,
        config: Config,
        mut app: A,
        disk: &Durable<A::Op, A::Reply, A::Snapshot>,
        now: u64,
    ) -> Self {
        let mut clients = ClientTable::new(config.clients_max);
        let (log, dp) = match &disk.checkpoint {
            None => {
                assert_eq!(
                    disk.log_base,
                    Viewstamp::ZERO,
                    "a trimmed log needs its checkpoint"
                );
                (Log::new(), Viewstamp::ZERO)
            }
            Some(cp) => {
                app.restore(&cp.app);
                clients = cp.clients.clone();
                // The checkpoint's stamp of each op above its undo base.
                let cp_stamp = |op: u64| -> Viewstamp {
                    if op == cp.undo_base.op {
                        cp.undo_base
                    } else {
                        cp.tail[(op - cp.undo_base.op - 1) as usize]
                    }
                };
                let disk_stamp = |op: u64| -> Option<Viewstamp> {
                    if op <= disk.log_base.op {
                        None
                    } else {
                        disk.log
                            .get((op - disk.log_base.op - 1) as usize)
                            .map(|e| e.vs)
                    }
                };
                // The highest op where the checkpoint and the disk log agree: at or below
                // the trimmed base they agree (trimmed entries are durable).
                let mut agree = cp.ap.op;
                while agree > cp.undo_base.op
                    && agree > disk.log_base.op
                    && disk_stamp(agree) != Some(cp_stamp(agree))
                {
                    agree -= 1;
                }
                app.undo_to(agree);
                clients.undo_to(agree);
                // The log starts where the disk's does, not at the checkpoint: the entries
                // between the trimmed base and the checkpoint's end are on this disk, the
                // primary trims only below what every replica holds on disk, and a peer
                // that lags behind the checkpoint catches up from them. Starting at the
                // checkpoint instead left such a peer, after a crash of every replica, with
                // a leader that could only send it a state transfer, which a replica holding
                // data refuses (found by the cluster test's total crash). They are applied
                // already (the checkpoint covers them), and they agree with it: below
                // `agree` the disk log and the checkpoint name the same viewstamps.
                let at_checkpoint = cp_stamp(agree.max(cp.undo_base.op));
                let from_disk = (disk.log_base.op < agree)
                    .then(|| {
                        let stamps = (cp.undo_base.op..disk.log_base.op).map(cp_stamp);
                        let mut log = Log::starting_at(disk.log_base, stamps.collect());
                        for e in disk.log.iter().take_while(|e| e.vs.op <= agree) {
                            if e.prev != log.op_max() {
                                break;
                            }
                            log.append(e.clone());
                        }
                        log
                    })
                    .filter(|log| log.op_max() == at_checkpoint);
                let log = from_disk.unwrap_or_else(|| {
                    let stamps = (cp.undo_base.op..agree).map(cp_stamp).collect();
                    Log::starting_at(at_checkpoint, stamps)
                });
                (log, cp.undo_base)
            }
        };
        let mut r = Replica::new(id, config, app, now);
        r.clients = clients;
        r.log = log;
        r.dp = dp;
        r.view = disk.view;
        r.view_durable = disk.view;
        r.view_written = disk.view;
        // Replay the disk log after the state's end. The log is write-ahead, so it is a
        // chain; a torn tail was already cut to a prefix.
        let from = r.log.op_max().op;
        for e in disk.log.iter().filter(|e| e.vs.op > from) {
            if e.prev != r.log.op_max() {
                break;
            }
            let op = e.vs.op;
            if let Body::Requests(requests) = &e.body {
                for q in requests {
                    if matches!(
                        r.clients.seen(q.client, q.seq),
                        crate::client_table::Seen::New
                    ) {
                        let result = r.app.apply(op, &q.op);
                        r.clients.record(e.vs, q.client, q.seq, result);
                    }
                }
            }
            r.log.append(e.clone());
        }
        r.written_through = r.log.op_max().op;
        r.disk_op_max = r.log.op_max();
        r.last_checkpoint_op = disk.checkpoint.as_ref().map_or(0, |c| c.ap.op);
        // Acknowledged from memory, lost with it (Lazy VSR): no votes until recovered.
        r.assume_amnesia();
        r.check_invariants();
        r
    }
}

use super::{count_within, Config};

#[cfg(test)]
mod tests {
    use super::*;

    type W = DiskWrite<u64, (), ()>;

    #[test]
    fn only_writes_that_commute_with_a_pending_checkpoint_pass_it() {
        let vs = |op| Viewstamp {
            view: ViewNum::default(),
            op,
        };
        let ap = vs(10);
        assert!(W::Append(Vec::new()).may_pass_checkpoint(ap));
        assert!(W::View(ViewNum::default()).may_pass_checkpoint(ap));
        // A truncation that keeps everything the checkpoint covers commutes with it; one
        // that cuts into it must come after it on disk.
        assert!(W::Truncate {
            keep_through: vs(10)
        }
        .may_pass_checkpoint(ap));
        assert!(W::Truncate {
            keep_through: vs(12)
        }
        .may_pass_checkpoint(ap));
        assert!(!W::Truncate {
            keep_through: vs(9)
        }
        .may_pass_checkpoint(ap));
        assert!(!W::TrimLog { through: 5 }.may_pass_checkpoint(ap));
        assert!(!W::LogBase(vs(3)).may_pass_checkpoint(ap));
    }
}
