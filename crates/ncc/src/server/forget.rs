//! What a server forgets: finished transactions' records, versions nothing can need, and
//! the state of keys with nothing in flight (their decided versions go to the store,
//! `store.rs`).

use super::*;

impl<S: Store> Server<S> {
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

    /// Makes `key`'s in-memory state if it has none, from its newest decided version in
    /// the store. Version numbers continue above the loaded one (a store may outlive a
    /// server), and so does `latest`: a read-only client whose `t_ro` is below it has not
    /// heard that the version was decided.
    pub(super) fn load_key(&mut self, key: &Key) {
        if self.keys.contains_key(key) {
            return;
        }
        let stored = self.store.load(key);
        self.note_load(key, stored.tw, stored.tr);
        if self.keep_history {
            // Listed for the checker even if never written: its reads saw the initial 0.
            if !self.archive.contains_key(key) {
                self.archive.insert(key.clone(), Vec::new());
            }
        }
        debug_assert!(stored.tr >= stored.tw, "key {key}: {stored:?}");
        self.next_version = self.next_version.max(stored.id + 1);
        self.latest = self.latest.max(stored.id);
        let installed = stored.id;
        self.keys.insert(
            key.clone(),
            KeyState {
                versions: vec![stored_version(stored)],
                queue: VecDeque::new(),
                ro_waiting: Vec::new(),
                installed,
            },
        );
    }

    /// After a decision or an answer on `key`: installs its committed versions that have
    /// only decided ones below, drops the versions nothing can need, and, if nothing on
    /// the key is in flight any more, raises the newest version's `t_r` in the store and
    /// forgets the key's state.
    pub(super) fn settle(&mut self, key: &Key) {
        let Some(ks) = self.keys.get_mut(key) else {
            return;
        };
        // Versions are in id order (each is numbered when made, above the loaded one).
        let from = ks.installed;
        for v in ks.versions.iter().filter(|v| v.id > from) {
            if !v.committed {
                break;
            }
            let stored = Stored {
                id: v.id,
                value: v.value.clone(),
                tw: v.tw,
                tr: v.tr,
            };
            self.store.install(key, stored);
            if self.keep_history {
                match self.archive.get_mut(key) {
                    Some(a) => a.push(v.value.clone()),
                    None => {
                        self.archive.insert(key.clone(), vec![v.value.clone()]);
                    }
                }
            }
            ks.installed = v.id;
        }
        self.prune_versions(key);
        let ks = self.keys.get(key).expect("present above");
        let quiet = ks.queue.is_empty()
            && ks.ro_waiting.is_empty()
            && ks.versions.iter().all(|v| v.committed);
        if quiet {
            let newest = ks.versions.last().expect("a key has a version");
            debug_assert_eq!(
                newest.id, ks.installed,
                "key {key}: all committed, all installed"
            );
            self.store.raise_read(key, newest.tr);
            self.keys.remove(key);
            self.forget_unlogged_raise(key);
        }
    }

    /// Drops `key`'s versions below the oldest one that may still be needed: the newest;
    /// the one below the oldest undecided version (an abort makes it the newest again, and
    /// smart retry compares with its `t_r`); and the oldest one an undecided request read
    /// (smart retry moves its `t_r`, bounded by the next version's `t_w`). Everything below
    /// is committed, superseded by a committed version and installed in the store
    /// ([`Server::settle`] installs first), and no request will refer to it again: a new
    /// read or write goes to the newest version.
    fn prune_versions(&mut self, key: &Key) {
        let Some(ks) = self.keys.get_mut(key) else {
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
        let installed = ks.installed;
        for v in ks.versions.drain(..keep_from) {
            debug_assert!(
                v.committed && v.id <= installed,
                "pruned {v:?} not installed"
            );
        }
    }
}
