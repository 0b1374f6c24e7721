//! Read leases: the primary answers reads from its own state, without a round to the other
//! replicas, while a majority has promised to elect nobody else (Raft's leader lease; the
//! thesis sends every read through the log or a round instead).
//!
//! A replica that accepts a PREPARE or HEARTBEAT its view's primary sent at `s` (the
//! primary's clock) promises, on receipt, to vote for no new leader and start no view
//! change for [`Config::lease`] on its own clock; the primary promises the same each time
//! it sends one. PREPAREOK echoes the newest `s` accepted, and the sender's own lease
//! length (replicas may be configured differently). For each replica the primary counts
//! `s + l - l / LEASE_DRIFT_DIVISOR`, with `l` the shorter of the two lengths, and holds the
//! lease until the latest time a majority (itself included) reaches. Every replica of that
//! majority promised at or after its `s`, for at least `l`, so while the lease holds each
//! of them is still promised. A new view needs a majority's votes (`view_change.rs`), and
//! any two majorities share a replica: no other primary exists, every operation committed
//! anywhere was committed here, and a read of this primary's state, answered once every
//! entry it saw has committed in this view ([`Replica::lease_read`]), is linearizable.
//!
//! **Assumptions.** No synchronized clocks: each clock only has to run at a rate within 4 %
//! of every other's (the margin of `LEASE_DRIFT_DIVISOR`, 10 %, covers two clocks 4 % apart
//! either way). A replica that restarts starts promised for a whole lease, since it may
//! have promised before a crash it does not remember. A new primary holds no lease until
//! its view's first entry is committed: its state then holds every operation committed
//! in an earlier view. `Mistake::LeaseIgnored` breaks the promise, for the simulator to
//! catch.

use super::{Mistake, Replica, Status};
use crate::app::App;
use crate::types::{ReplicaId, ViewNum, Viewstamp};

/// The primary's lease ends this share of [`Config::lease`] before the backups' promises,
/// to cover clocks that run at different rates (module docs).
///
/// [`Config::lease`]: super::Config::lease
pub const LEASE_DRIFT_DIVISOR: u64 = 10;

impl<A: App> Replica<A> {
    /// Whether this replica must not vote for a new leader or campaign now (module docs).
    pub(super) fn promised(&self) -> bool {
        self.now < self.promised_until && self.config.mistake != Some(Mistake::LeaseIgnored)
    }

    /// Promises a lease from now on (a backup that accepted its primary's PREPARE or
    /// HEARTBEAT, or the primary sending one).
    pub(super) fn promise(&mut self) {
        if self.config.lease == 0 {
            return;
        }
        self.promised_until = self
            .promised_until
            .max(self.now.saturating_add(self.config.lease));
    }

    /// A backup accepted a PREPARE or HEARTBEAT sent at `sent` by its view's primary.
    pub(super) fn heard_lease(&mut self, view: ViewNum, sent: u64) {
        self.promise();
        if self.lease_heard.0 != view {
            self.lease_heard = (view, 0);
        }
        self.lease_heard.1 = self.lease_heard.1.max(sent);
    }

    /// What a PREPAREOK in this view echoes.
    pub(super) fn lease_to_echo(&self) -> u64 {
        if self.lease_heard.0 == self.view {
            self.lease_heard.1
        } else {
            0
        }
    }

    /// The primary sends a PREPARE or HEARTBEAT now: it promises too, and counts the send
    /// as its own acknowledgement.
    pub(super) fn lease_sent(&mut self) -> u64 {
        self.promise();
        let (id, now, lease) = (self.id, self.now, self.config.lease);
        self.lease_acknowledged(id, now, lease);
        now
    }

    /// A PREPAREOK from `from` in this view echoed `sent`; it promises for `length`.
    pub(super) fn lease_acknowledged(&mut self, from: ReplicaId, sent: u64, length: u64) {
        if let Status::Primary(leader) = &mut self.status {
            let acked = &mut leader.lease_acked[usize::from(from)];
            if sent >= acked.0 {
                *acked = (sent, length);
            }
        }
    }

    /// Until when (this replica's clock) it holds a read lease, if it is a primary that
    /// holds one at all (module docs).
    pub fn lease_until(&self) -> Option<u64> {
        let lease = self.config.lease;
        let Status::Primary(leader) = &self.status else {
            return None;
        };
        if lease == 0 || leader.commit < leader.start {
            return None;
        }
        // Until when each replica's promise covers this primary (0: none this view).
        let until: Vec<u64> = leader
            .lease_acked
            .iter()
            .map(|&(sent, length)| {
                let l = length.min(lease);
                if sent == 0 || l == 0 {
                    0
                } else {
                    sent + l - l / LEASE_DRIFT_DIVISOR
                }
            })
            .collect();
        let q = self.config.quorum_reached(&until);
        (q != 0).then_some(q)
    }

    /// A read of the application's state at `now`, under the lease: `Some(last)` if this
    /// primary holds its lease at `now`, where `last` is the newest entry the state
    /// reflects. Answer the read only once `last` is committed in this view
    /// ([`Replica::committed_in`]); if this replica stops leading first, drop it.
    pub fn lease_read(&self, now: u64) -> Option<Viewstamp> {
        assert!(now >= self.now, "time went backwards: {now} < {}", self.now);
        let until = self.lease_until()?;
        (now < until).then(|| self.log.op_max())
    }

    /// Whether this replica still leads `view` and has committed every entry up to `last`
    /// (a read of [`Replica::lease_read`] may be answered).
    pub fn committed_in(&self, view: ViewNum, last: Viewstamp) -> bool {
        match &self.status {
            Status::Primary(leader) => self.view == view && leader.commit >= last,
            _ => false,
        }
    }
}
