//! View change (thesis §4.2.5; the spec's `Timeout`, `ElectPrepare`, `ElectSync`).
//!
//! Where the prose and the TLA+ specification differ (digest pitfall 28), this follows the
//! specification, except for the one comparison the appendix prints inverted:
//! - A voter accepts ELECTPREPARE only for a view strictly above its own (spec:
//!   `rvn[d] < m.view`). A refused one still raises the voter's view, as the prose says
//!   ("in either case, the replica sets its v to max(v', v)"), where the spec leaves it
//!   unchanged: otherwise a replica whose log is behind and whose view got ahead (it kept
//!   timing out while cut off) never hears a primary of a lower view again, and the
//!   simulator found that livelock. Raising the view makes the group elect a leader above
//!   it, from whom the straggler catches up. The refusing voter's view-change timer keeps
//!   running (a scripted test of Fig 4-1 found that resetting it lets a straggler that
//!   campaigns every election timeout keep the others from ever electing).
//! - ELECTACCEPT is accepted only in the voter's current view with the same `opMax` (spec
//!   `ElectSync`); a voter whose log ends elsewhere catches up first, then the leader's
//!   resent ELECTACCEPT finds it ready.
//! - The elected leader's first entry is a PREPARE of the spec's `NonRequest` entry, which
//!   every replica writes to disk before acknowledging (`Body::ViewStart`); the log is
//!   flushed at a timeout, at a vote and at an ELECTACCEPT, as in the spec.
//! - The spec's enabling condition for a vote prints `m.opmax <= OpMax(d)`: vote for a
//!   candidate whose log is *older*. That loses acknowledged operations (the model checker
//!   finds it: `Mistake::ElectPrepareAsPrinted`), and the prose, the proof (Lemma 4.3.9,
//!   case 1b) and property 3 all need the reverse, so this votes iff the candidate's
//!   `opMax` is at least the voter's, compared as viewstamps.

use super::{Deferred, Mistake, Replica, Status};
use crate::app::App;
use crate::message::Message;
use crate::types::{Address, ReplicaId, ViewNum, Viewstamp};

fn bit(r: ReplicaId) -> u32 {
    1 << r
}

impl<A: App> Replica<A> {
    /// The spec's `Timeout`: a higher view with this replica's id, persisted (with the log)
    /// before the ELECTPREPARE leaves, so a crash cannot reuse the number (pitfall 18).
    pub(super) fn start_view_change(&mut self) {
        let view = self.view.next_for(self.id);
        self.view = view;
        self.status = Status::Candidate {
            votes: bit(self.id),
            deadline: self.now + self.config.election_timeout + self.random_jitter(),
        };
        self.catch_up_retry_at = None;
        self.stats.view_changes_started += 1;
        if self.config.mistake == Some(Mistake::ViewNotPersisted) {
            // The mistake: ask for votes at once; the view reaches disk only with the
            // next flush, if any comes before a crash.
            let (op_max, restarted) = (self.log.op_max(), self.is_amnesiac());
            self.send_to_others(Message::ElectPrepare {
                view,
                op_max,
                restarted,
            });
            self.view_written = view;
            self.view_durable = view;
            return;
        }
        let sync = self.flush(true);
        self.deferred
            .push((sync, Deferred::SendElectPrepare { view }));
        if self.config.replica_count == 1 {
            // Alone, the vote is already a majority once the view is durable.
            self.deferred
                .push((sync, Deferred::ElectPrepareOk { to: self.id, view }));
        }
    }

    fn random_jitter(&mut self) -> u64 {
        match self.config.view_change_jitter {
            0 => 0,
            j => self.random() % j,
        }
    }

    /// Whether to vote for a candidate whose log ends at `candidate` (see the module doc).
    fn vote_ok(&self, candidate: Viewstamp) -> bool {
        let mine = self.log.op_max();
        match self.config.mistake {
            Some(Mistake::LongestLogWins) => candidate.op >= mine.op,
            Some(Mistake::ElectPrepareAsPrinted) => candidate <= mine,
            _ => candidate >= mine,
        }
    }

    pub(super) fn on_elect_prepare(
        &mut self,
        from: ReplicaId,
        view: ViewNum,
        op_max: Viewstamp,
        restarted: bool,
    ) {
        if from == self.id || view.leader() != from || view <= self.view {
            return;
        }
        // A restarted replica may lack acknowledged operations: its vote could elect a
        // leader without them (`recovery`). One that promised a primary its lease votes for
        // nobody until the promise ends (`lease`); the candidate asks again later.
        if !self.vote_ok(op_max)
            || !self.amnesia_allows_vote(from, op_max, restarted)
            || self.promised()
        {
            self.raise_view(view);
            return;
        }
        // Step down, adopt the view, flush; the vote leaves once both are on disk.
        self.view = view;
        self.status = Status::Backup;
        self.catch_up_retry_at = None;
        self.reset_view_change_timer();
        let sync = self.flush(true);
        self.deferred
            .push((sync, Deferred::ElectPrepareOk { to: from, view }));
    }

    pub(super) fn on_elect_prepare_ok(&mut self, from: ReplicaId, view: ViewNum) {
        if view != self.view || self.view_durable != view {
            return;
        }
        let quorum = self.quorum();
        let Status::Candidate { votes, .. } = &mut self.status else {
            return;
        };
        *votes |= bit(from);
        if votes.count_ones() as usize >= quorum {
            self.status = Status::Elected {
                accepts: 0,
                deadline: self.now + self.config.election_timeout,
                resend_at: self.now,
            };
            self.resend_elect_accept();
        }
    }

    /// Sends ELECTACCEPT to every replica that has not accepted yet, itself included.
    pub(super) fn resend_elect_accept(&mut self) {
        let (view, op_max) = (self.view, self.log.op_max());
        let Status::Elected {
            accepts, resend_at, ..
        } = &mut self.status
        else {
            return;
        };
        *resend_at = self.now + self.config.heartbeat_interval;
        let accepts = *accepts;
        for r in 0..self.config.replica_count {
            if accepts & bit(r) != 0 {
                continue;
            }
            if r == self.id {
                self.on_elect_accept(r, view, op_max);
            } else {
                self.send(Address::Replica(r), Message::ElectAccept { view, op_max });
            }
        }
    }

    pub(super) fn on_elect_accept(&mut self, from: ReplicaId, view: ViewNum, op_max: Viewstamp) {
        if view != self.view || view.leader() != from {
            return;
        }
        if from != self.id {
            if !matches!(self.status, Status::Backup) {
                return;
            }
            self.reset_view_change_timer();
        }
        if self.log.op_max() != op_max {
            // Re-synchronize first (a majority must hold the old view's final entries
            // before the new view commits, pitfall 19).
            self.request_catch_up();
            return;
        }
        let sync = self.flush(true);
        self.deferred
            .push((sync, Deferred::ElectAcceptOk { to: from, view }));
    }

    /// Once the ELECTACCEPT's log is on disk: accept, if nothing changed meanwhile.
    pub(super) fn elect_accept_ok(&mut self, to: ReplicaId, view: ViewNum) {
        if self.view != view || self.view_durable != view {
            return;
        }
        if to == self.id {
            self.on_elect_accept_ok(to, view);
        } else {
            self.send(Address::Replica(to), Message::ElectAcceptOk { view });
        }
    }

    pub(super) fn on_elect_accept_ok(&mut self, from: ReplicaId, view: ViewNum) {
        if view != self.view {
            return;
        }
        let quorum = self.quorum();
        let Status::Elected { accepts, .. } = &mut self.status else {
            return;
        };
        *accepts |= bit(from);
        if accepts.count_ones() as usize >= quorum {
            self.become_primary();
        }
    }
}
