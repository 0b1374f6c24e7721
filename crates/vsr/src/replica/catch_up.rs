//! Re-synchronization (thesis §4.2.6; the spec's `CatchUp` and `CatchUpReply`) and state
//! transfer from the leader's state when its log no longer reaches back far enough.
//!
//! As in the spec, the requester sends its last viewstamp, which names its whole log
//! (Lemma 4.3.2); the leader answers with the largest viewstamp of its own log at or below
//! it. If that is the requester's last, the reply carries the entries after it (a batch,
//! where the spec sends one); otherwise the requester rolls back to it and asks again.
//! The prose's `tailView` list is this exchange done in one round; the spec's loop is
//! simpler to check and converges in as many rounds as there are divergent views.

use super::{count_within, log::Log, Replica, Status};
use crate::app::App;
use crate::message::{Entry, Message, Snapshot};
use crate::types::{Address, ReplicaId, ViewNum, Viewstamp};

impl<A: App> Replica<A> {
    /// Asks the leader of this view for what this replica is missing (one request
    /// outstanding; a lost one is repeated after `catch_up_timeout`).
    pub(super) fn request_catch_up(&mut self) {
        if !matches!(self.status, Status::Backup)
            || self.view.leader() == self.id
            || self.view_durable != self.view
            || self.catch_up_retry_at.is_some_and(|at| at > self.now)
        {
            if self.view_durable != self.view && self.catch_up_retry_at.is_none() {
                // Once the view is on disk; the retry timer brings us back.
                self.catch_up_retry_at = Some(self.now + self.config.catch_up_timeout);
            }
            return;
        }
        self.catch_up_retry_at = Some(self.now + self.config.catch_up_timeout);
        self.stats.catch_ups += 1;
        let (view, op_max) = (self.view, self.log.op_max());
        self.send(
            Address::Replica(view.leader()),
            Message::CatchUp { view, op_max },
        );
    }

    pub(super) fn on_catch_up(&mut self, from: ReplicaId, view: ViewNum, op_max: Viewstamp) {
        let leads = matches!(self.status, Status::Elected { .. } | Status::Primary(_));
        if !leads || view != self.view || from == self.id {
            return;
        }
        let (dp, dp_min) = (self.dp, self.dp_min);
        let to = Address::Replica(from);
        match self.log.lower_bound(op_max) {
            Some(lb) if lb != op_max => self.send(
                to,
                Message::CatchUpReply {
                    view,
                    op_max,
                    lower_bound: lb,
                    entries: Vec::new(),
                    more: false,
                    dp,
                    dp_min,
                },
            ),
            Some(lb) if lb.op >= self.log.base().op => {
                let n = count_within(
                    self.log
                        .entries_after(lb.op, self.config.catch_up_entries_max),
                    self.config.message_bytes_max,
                    |e| e.op_bytes::<A>(),
                );
                let entries: Vec<Entry<A::Op>> =
                    self.log.entries_after(lb.op, n).cloned().collect();
                let more = lb.op + (n as u64) < self.log.op_max().op;
                self.send(
                    to,
                    Message::CatchUpReply {
                        view,
                        op_max,
                        lower_bound: lb,
                        entries,
                        more,
                        dp,
                        dp_min,
                    },
                );
            }
            // The entries it needs were folded into a checkpoint: send the state.
            _ => {
                let snapshot = self.snapshot();
                self.stats.state_transfers_sent += 1;
                self.send(
                    to,
                    Message::CatchUpState {
                        view,
                        op_max,
                        snapshot,
                        dp,
                        dp_min,
                    },
                );
            }
        }
    }

    fn catch_up_reply_enabled(&self, from: ReplicaId, view: ViewNum, op_max: Viewstamp) -> bool {
        // The spec: not a leader, same view, and the reply answers our current log (a
        // stale reply is dropped, pitfall 23).
        matches!(self.status, Status::Backup)
            && view == self.view
            && from == view.leader()
            && op_max == self.log.op_max()
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn on_catch_up_reply(
        &mut self,
        from: ReplicaId,
        view: ViewNum,
        op_max: Viewstamp,
        lower_bound: Viewstamp,
        entries: Vec<Entry<A::Op>>,
        more: bool,
        dp: Viewstamp,
        dp_min: Viewstamp,
    ) {
        if !self.catch_up_reply_enabled(from, view, op_max) {
            return;
        }
        self.reset_view_change_timer();
        self.catch_up_retry_at = None;
        if lower_bound != op_max {
            // Roll back what the group no longer has, then ask again.
            self.truncate(lower_bound);
            self.request_catch_up();
            return;
        }
        let full = more;
        let got = !entries.is_empty();
        for e in entries {
            if e.prev != self.log.op_max() {
                break;
            }
            self.accept(e);
        }
        if got {
            // The prose appends the caught-up entries to the disk log at once.
            self.flush(true);
        }
        self.adopt_dp(dp, dp_min);
        if full {
            self.request_catch_up();
        }
    }

    pub(super) fn on_catch_up_state(
        &mut self,
        from: ReplicaId,
        view: ViewNum,
        op_max: Viewstamp,
        snapshot: Snapshot<A::Reply, A::Snapshot>,
        dp: Viewstamp,
        dp_min: Viewstamp,
    ) {
        if !self.catch_up_reply_enabled(from, view, op_max) {
            return;
        }
        // Our durable point must survive in the leader's state (Theorem 4.3.3).
        let contains_dp = snapshot.ap >= self.dp
            && (self.dp.op <= snapshot.undo_base.op
                || snapshot
                    .tail
                    .get((self.dp.op - snapshot.undo_base.op - 1) as usize)
                    == Some(&self.dp));
        assert!(
            contains_dp || self.dp == Viewstamp::ZERO,
            "state transfer would discard durable entries"
        );
        self.reset_view_change_timer();
        self.catch_up_retry_at = None;
        self.stats.state_transfers_installed += 1;
        self.app.restore(&snapshot.app);
        self.clients = snapshot.clients.clone();
        let stamps: Vec<Viewstamp> = std::iter::once(snapshot.undo_base)
            .chain(snapshot.tail.iter().copied())
            .filter(|s| *s < snapshot.ap)
            .collect();
        self.log = Log::starting_at(snapshot.ap, stamps);
        self.dp = snapshot.undo_base;
        self.dp_min = self.dp_min.min(self.dp);
        if !self.log.contains(self.dp_min) {
            self.dp_min = self.dp;
        }
        // The disk now holds only what the install writes; report nothing until it is
        // synced.
        self.disk_op_max = Viewstamp::ZERO;
        for s in &mut self.syncs {
            s.tail = Viewstamp::ZERO;
        }
        self.written_through = snapshot.ap.op;
        self.last_checkpoint_op = snapshot.ap.op;
        // The install replaces a checkpoint still being written (the disk finishes that
        // one first): its report is no longer awaited.
        self.checkpoint_pending = None;
        self.actions
            .push_back(super::Action::Write(super::DiskWrite::Install(snapshot)));
        self.flush(true);
        self.adopt_dp(dp, dp_min);
        self.request_catch_up();
    }
}
