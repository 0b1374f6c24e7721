//! What a server forgets: finished transactions' records, and versions nothing can need.

use super::*;

impl Server {
    /// Forgets `client`'s transactions in `done` (it has finished them).
    /// A record still undecided here is kept (it cannot be, unless this server lost what
    /// it answered; then the recovery timer decides it); a read-only one is dropped
    /// whatever it waits for, since its client has moved on.
    pub(super) fn forget_finished(&mut self, client: ClientId, done: Finished) {
        let forgettable = |t: &TxnState| t.read_only || t.status != Status::Undecided;
        let gone = self
            .finished
            .forget(&mut self.txns, client, done, forgettable);
        for txn in gone {
            self.recovering.remove(&txn);
        }
    }

    /// Whether `txn` is one its client finished and this server forgot.
    pub(super) fn is_forgotten(&self, txn: TxnId) -> bool {
        !self.txns.contains_key(&txn) && self.finished.finished(txn)
    }

    /// Drops `key`'s versions below the oldest one that may still be needed: the newest;
    /// the one below the oldest undecided version (an abort makes it the newest again, and
    /// smart retry compares with its `t_r`); and the oldest one an undecided request read
    /// (smart retry moves its `t_r`, bounded by the next version's `t_w`). Everything below
    /// is committed and superseded by a committed version, and no request will refer to it
    /// again: a new read or write goes to the newest version.
    pub(super) fn prune_versions(&mut self, key: Key) {
        let Some(ks) = self.keys.get_mut(&key) else {
            return;
        };
        if ks.versions.len() <= 2 {
            return;
        }
        let mut keep_from = ks.versions.len() - 1;
        if let Some(i) = ks.versions.iter().position(|v| !v.committed) {
            keep_from = keep_from.min(i.saturating_sub(1));
        }
        for item in ks.queue.iter().filter(|i| i.status == Status::Undecided) {
            if let Some(i) = ks.versions.iter().position(|v| v.id == item.version) {
                keep_from = keep_from.min(i);
            }
        }
        if keep_from == 0 {
            return;
        }
        let pruned = ks.versions.drain(..keep_from);
        if self.keep_history {
            ks.archived.extend(pruned.map(|v| {
                debug_assert!(v.committed, "only committed versions are pruned");
                v.value
            }));
        } else {
            drop(pruned);
        }
    }
}
