//! Looking into a server from outside: its size, its committed history, what waits on
//! what, and its invariants.

use super::*;

impl Server {
    /// What this server holds (for tests that it stays bounded).
    pub fn footprint(&self) -> crate::protocol::Footprint {
        crate::protocol::Footprint {
            records: self.txns.len(),
            versions: self.keys.values().map(|ks| ks.versions.len()).sum(),
            keys: self.keys.len(),
        }
    }

    /// Every version numbered up to this one is decided (committed or gone).
    pub fn decided_through(&self) -> u64 {
        self.undecided_versions
            .first()
            .map_or(self.latest, |&first| first - 1)
    }

    /// Every key's committed versions, oldest first, as (key, values): the version order a
    /// checker needs. The initial version (value 0) is included.
    pub fn committed_versions(&self) -> Vec<(Key, Vec<Value>)> {
        self.keys
            .iter()
            .map(|(&k, ks)| {
                let live = ks.versions.iter().filter(|v| v.committed);
                let values = ks.archived.iter().copied().chain(live.map(|v| v.value));
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
