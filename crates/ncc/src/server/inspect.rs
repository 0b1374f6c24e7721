//! Looking into a server from outside: its size, its committed history, what waits on
//! what, and its invariants.

use super::*;

impl<S: Store> Server<S> {
    /// What this server holds (for tests that it stays bounded).
    pub fn footprint(&self) -> crate::protocol::Footprint {
        crate::protocol::Footprint {
            records: self.txns.len(),
            versions: self.keys.values().map(|ks| ks.versions.len()).sum(),
            keys: self.keys.len(),
        }
    }

    /// Whether `msg`'s timestamps, keys and values fit its store (`Store::admits`,
    /// `Store::fits`) and its message limits (`MessageLimits::request_bytes_max`): a
    /// transport drops a sender whose message does not, instead of handing it to
    /// [`Server::on_message`].
    pub fn admits(&self, msg: &Msg) -> bool {
        let within = |op: &Op| op.bytes() <= self.limits.request_bytes_max;
        match msg {
            Msg::Execute { ts, ops, .. } => {
                self.store.admits(*ts) && ops.iter().all(|op| within(op) && self.store.fits(op))
            }
            Msg::SmartRetry { to, .. } | Msg::RecoverRetry { to, .. } => self.store.admits(*to),
            // Only a group's host writes these, into its own log.
            Msg::Group(_) => false,
            _ => true,
        }
    }

    /// Whether `msg` begins a transaction here ([`crate::TxnServer::starts_work`]): an
    /// execution for a transaction it holds no record of and has not finished. Later
    /// shots, resends, the last shot's notice, smart retries (which act only on a record
    /// held), decisions and recoveries all act on work begun.
    pub fn starts_work(&self, msg: &Msg) -> bool {
        match msg {
            Msg::Execute { txn, .. } => !self.txns.contains_key(txn) && !self.is_forgotten(*txn),
            _ => false,
        }
    }

    /// Where its decided versions are.
    pub fn store(&self) -> &S {
        &self.store
    }

    /// Every version numbered up to this one is decided (committed or gone).
    pub fn decided_through(&self) -> u64 {
        self.undecided_versions
            .first()
            .map_or(self.latest, |&first| first - 1)
    }

    /// Every key's committed versions, oldest first, as (key, values): the version order a
    /// checker needs. The initial version (value 0) is included. Without the history kept
    /// ([`Server::without_history`]) it is no such order: only the keys in memory, each
    /// with the committed versions it still holds there.
    pub fn committed_versions(&self) -> Vec<(Key, Vec<Value>)> {
        if !self.keep_history {
            return self
                .keys
                .iter()
                .map(|(k, ks)| {
                    let live = ks.versions.iter().filter(|v| v.committed);
                    (k.clone(), live.map(|v| v.value.clone()).collect())
                })
                .collect();
        }
        let keys: BTreeSet<Key> = self
            .archive
            .keys()
            .chain(self.keys.keys())
            .cloned()
            .collect();
        keys.into_iter()
            .map(|k| {
                let archived = self.archive.get(&k).into_iter().flatten().cloned();
                let pending = self.keys.get(&k).into_iter().flat_map(|ks| {
                    let live = ks.versions.iter();
                    live.filter(|v| v.committed && v.id > ks.installed)
                        .map(|v| v.value.clone())
                });
                let values = std::iter::once(Value::default())
                    .chain(archived)
                    .chain(pending);
                (k, values.collect())
            })
            .collect()
    }

    /// Transactions with a version or a response still undecided here.
    pub fn undecided(&self) -> Vec<TxnId> {
        let mut out: Vec<TxnId> = self
            .txns
            .iter()
            .filter(|(_, t)| t.status == Status::Undecided && !t.read_only)
            .map(|(&id, _)| id)
            .collect();
        out.sort();
        out
    }

    /// The non-empty response queues and waiting read-only reads, for a report of a run
    /// that made no progress.
    pub fn describe_waits(&self) -> String {
        let mut out = String::new();
        for (k, ks) in &self.keys {
            if ks.queue.is_empty() && ks.ro_waiting.is_empty() {
                continue;
            }
            let items: Vec<String> = ks
                .queue
                .iter()
                .map(|i| {
                    format!(
                        "{}{}@{}.{}:{:?}{}",
                        if i.op.is_write() { "W" } else { "R" },
                        i.txn.seq,
                        i.ts.clk,
                        i.ts.cid,
                        i.status,
                        if i.sent { "+sent" } else { "" }
                    )
                })
                .collect();
            let ro: Vec<String> = ks
                .ro_waiting
                .iter()
                .map(|w| {
                    format!(
                        "ro {}.{} waits {}.{}",
                        w.txn.client, w.txn.seq, w.writer.client, w.writer.seq
                    )
                })
                .collect();
            out += &format!("key {k}: [{}] {ro:?}; ", items.join(" "));
        }
        out
    }

    /// Checks the module's invariants; the error says which broke.
    pub fn check_invariants(&self) -> Result<(), String> {
        if let Some(v) = &self.violation {
            return Err(v.clone());
        }
        let awaiting = self
            .txns
            .values()
            .filter(|t| recovery::awaits_decision(t))
            .count();
        if awaiting != self.awaiting_decision {
            return Err(format!(
                "{awaiting} read-write transactions undecided, {} counted",
                self.awaiting_decision
            ));
        }
        for range in self.finished.ranges() {
            let mut kept = self.txns.range(range);
            if let Some((id, _)) = kept.find(|(_, t)| !recovery::awaits_decision(t)) {
                return Err(format!("{id:?} is finished but kept"));
            }
        }
        for (k, ks) in &self.keys {
            if ks.versions.is_empty() {
                return Err(format!("key {k} has no version"));
            }
            if ks.queue.is_empty()
                && ks.ro_waiting.is_empty()
                && ks.versions.iter().all(|v| v.committed)
            {
                return Err(format!("key {k}: nothing in flight, but its state is kept"));
            }
            if ks.versions.windows(2).any(|w| w[0].id >= w[1].id) {
                return Err(format!("key {k}: version ids out of order"));
            }
            let first_uninstalled = ks.versions.iter().position(|v| v.id > ks.installed);
            if let Some(i) = first_uninstalled.filter(|&i| i > 0) {
                if ks.versions[..i].iter().any(|v| !v.committed) || ks.versions[i].committed {
                    return Err(format!(
                        "key {k}: installed through {}, but {:?} is not the first undecided",
                        ks.installed, ks.versions[i]
                    ));
                }
            }
            for w in ks.versions.windows(2) {
                if w[0].tw >= w[1].tw || w[0].tr >= w[1].tw {
                    return Err(format!("key {k}: versions out of order: {w:?}"));
                }
            }
            for v in &ks.versions {
                if v.tr < v.tw {
                    return Err(format!("key {k}: t_r below t_w: {v:?}"));
                }
                let undecided = v.writer.is_some_and(|w| {
                    self.txns
                        .get(&w)
                        .is_some_and(|t| t.status == Status::Undecided)
                });
                if v.committed == undecided {
                    return Err(format!("key {k}: version {v:?} committed={}", v.committed));
                }
            }
        }
        Ok(())
    }
}
