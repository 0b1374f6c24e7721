//! Decisions a client has sent and sends again until every participant acknowledges them
//! (commit is asynchronous in NCC and in every baseline: a lost decision would leave the
//! transaction undecided at its servers for ever). Shared by NCC's client and the
//! baselines'; each wraps the returned (server, transaction, commit) in its own message.

use std::collections::{BTreeMap, BTreeSet};

use crate::types::{ServerId, TxnId};

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Pending {
    commit: bool,
    unacked: BTreeSet<ServerId>,
    last_sent: u64,
}

/// The unacknowledged decisions of one client.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub(crate) struct Decisions {
    pending: BTreeMap<TxnId, Pending>,
}

impl Decisions {
    /// Records `txn`'s decision as sent to `to` at `now`; returns the sends to make now.
    pub(crate) fn send(
        &mut self,
        now: u64,
        txn: TxnId,
        commit: bool,
        to: BTreeSet<ServerId>,
    ) -> Vec<(ServerId, TxnId, bool)> {
        if to.is_empty() {
            return Vec::new();
        }
        let sends = to.iter().map(|&s| (s, txn, commit)).collect();
        self.pending.insert(
            txn,
            Pending {
                commit,
                unacked: to,
                last_sent: now,
            },
        );
        sends
    }

    /// `from` acknowledged `txn`'s decision.
    pub(crate) fn acked(&mut self, txn: TxnId, from: ServerId) {
        if let Some(p) = self.pending.get_mut(&txn) {
            p.unacked.remove(&from);
            if p.unacked.is_empty() {
                self.pending.remove(&txn);
            }
        }
    }

    /// The decisions unacknowledged for `resend_after` since last sent, to send again.
    pub(crate) fn due(&mut self, now: u64, resend_after: u64) -> Vec<(ServerId, TxnId, bool)> {
        let mut sends = Vec::new();
        for (&txn, p) in &mut self.pending {
            if now >= p.last_sent + resend_after {
                sends.extend(p.unacked.iter().map(|&s| (s, txn, p.commit)));
                p.last_sent = now;
            }
        }
        sends
    }

    /// The oldest transaction whose decision is not acknowledged by every server yet.
    pub(crate) fn oldest(&self) -> Option<TxnId> {
        self.pending.keys().next().copied()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }
}
