//! Deciding: smart retry (Alg 5.4), which moves a transaction's versions to a common
//! timestamp or none, and the client's (or a backup coordinator's) decision, which commits
//! or removes its versions and releases what waited for them.

use super::*;

impl<S: Store> Server<S> {
    /// Smart retry (Alg 5.4): moves every version `txn` touched here to `to`, or none. A
    /// version it wrote moves only if no one read it (`t_w == t_r`); any version only if
    /// the next one's `t_w` is above `to`. The outcome is recorded: a duplicate, or a
    /// backup coordinator's replay, gets the same answer (digest pitfall 12).
    pub(super) fn smart_retry(&mut self, txn: TxnId, to: Ts) -> bool {
        match self.txns.get(&txn) {
            None => false,
            Some(t) if t.status == Status::Aborted => false,
            Some(t) if t.retried.is_some_and(|(r, _)| r == to) => t.retried.expect("some").1,
            Some(t) => {
                // A read-modify-write's read is superseded by its write: only the write's
                // version moves (§5.1: only the write's pair goes through the safeguard).
                let written: Vec<&Key> = t
                    .ops
                    .iter()
                    .filter(|op| op.is_write())
                    .map(Op::key)
                    .collect();
                let targets: Vec<(Key, u64)> = t
                    .ops
                    .iter()
                    .zip(&t.versions)
                    .filter(|(op, _)| op.is_write() || !written.contains(&op.key()))
                    .filter_map(|(op, v)| v.map(|v| (op.key().clone(), v)))
                    .collect();
                let movable = targets.iter().all(|(k, v)| self.can_move(txn, k, *v, to));
                if movable {
                    for (k, v) in &targets {
                        let v = *v;
                        let ks = self.keys.get_mut(k).expect("checked");
                        let ver = ks.versions.iter_mut().find(|x| x.id == v).expect("checked");
                        if ver.writer == Some(txn) {
                            ver.tw = to;
                            ver.tr = to;
                        } else {
                            ver.tr = ver.tr.max(to);
                        }
                    }
                }
                self.txns.get_mut(&txn).expect("found").retried = Some((to, movable));
                movable
            }
        }
    }

    fn can_move(&self, txn: TxnId, key: &Key, version: u64, to: Ts) -> bool {
        let Some(ks) = self.keys.get(key) else {
            return false;
        };
        let Some(i) = ks.versions.iter().position(|v| v.id == version) else {
            return false;
        };
        let v = &ks.versions[i];
        if ks.versions.get(i + 1).is_some_and(|next| next.tw <= to) {
            return false;
        }
        // The paper's test is `t_w != t_r`; it misses a read whose timestamp was below
        // `t_w` (it leaves `t_r` alone), so any read counts here (`Version::read`). With
        // read-only reads never seeing undecided versions, such a read is one of a
        // read-write transaction between the writer's timestamp and its refined `t_w`.
        let read = (v.tw != v.tr || v.read) && !self.mistakes.no_read_test_in_smart_retry;
        if v.writer == Some(txn) && (read || ks.versions[i - 1].tr >= to) {
            return false;
        }
        // A version may only move later: its `t_w` is the transaction's, at most `to`.
        v.writer != Some(txn) || v.tw <= to
    }

    /// The client's decision (sent asynchronously): its versions commit or go; its queued
    /// responses are decided and each queue it was in may release the next.
    pub(super) fn decide(&mut self, txn: TxnId, commit: bool) {
        let status = if commit {
            Status::Committed
        } else {
            Status::Aborted
        };
        let Some(t) = self.txns.get_mut(&txn) else {
            // Aborted before its requests arrived (reordered): they will find it decided.
            // A commit cannot come first: the client commits only after this server
            // answered, unless the server lost what it answered (a replication group's
            // total crash, in the simulator).
            if commit && self.violation.is_none() {
                self.violation = Some(format!(
                    "{txn:?} committed here without its requests: their state was lost"
                ));
            }
            self.txns.insert(
                txn,
                TxnState {
                    ts: Ts::default(),
                    ops: Vec::new(),
                    versions: Vec::new(),
                    status: Status::Aborted,
                    read_only: false,
                    t_ro: 0,
                    answered: Vec::new(),
                    shots: Vec::new(),
                    retried: None,
                    ts_server: 0,
                    coord: 0,
                    cohorts: None,
                    timer: u64::MAX,
                },
            );
            return;
        };
        if t.read_only {
            return;
        }
        if t.status != Status::Undecided {
            if t.status != status {
                self.violation = Some(format!(
                    "{txn:?} decided {status:?} after it was {:?} here",
                    t.status
                ));
            }
            return;
        }
        t.status = status;
        // A recovery of it here is moot: the decision is made (and its client's, if it
        // came from the client, goes to every cohort).
        self.recovering.remove(&txn);
        let touched: Vec<(Op, Option<u64>)> =
            t.ops.iter().cloned().zip(t.versions.clone()).collect();
        self.awaiting_decision -= 1;
        // Every version first, every queue after: a key can appear twice (a read-modify-write
        // reads then writes it), and its queue must not release a read of the write's
        // version before that version is gone (the simulator found that).
        for (op, version) in &touched {
            let (true, Some(v)) = (op.is_write(), *version) else {
                continue;
            };
            let key = op.key();
            self.undecided_versions.remove(&v);
            let Some(ks) = self.keys.get_mut(key) else {
                continue;
            };
            if commit {
                if let Some(ver) = ks.versions.iter_mut().find(|x| x.id == v) {
                    ver.committed = true;
                }
            } else {
                let at = ks.versions.iter().position(|x| x.id == v);
                let above = at.and_then(|i| ks.versions.get(i + 1)).map(|x| x.id);
                ks.versions.retain(|x| x.id != v);
                if let Some(above) = above {
                    self.reread_below(key, above);
                }
                self.rerun_reads_of(key, v);
            }
        }
        let mut keys: Vec<&Key> = touched.iter().map(|(op, _)| op.key()).collect();
        keys.sort_unstable();
        keys.dedup();
        for key in keys {
            let Some(ks) = self.keys.get_mut(key) else {
                continue;
            };
            for item in ks.queue.iter_mut().filter(|i| i.txn == txn) {
                item.status = status;
            }
            // Read-only reads of its version: answered, or run again on what is left.
            let (woken, still): (Vec<RoWait>, Vec<RoWait>) = std::mem::take(&mut ks.ro_waiting)
                .into_iter()
                .partition(|w| w.writer == txn);
            ks.ro_waiting = still;
            for w in woken {
                let Some((ts, t_ro)) = self.txns.get(&w.txn).map(|t| (t.ts, t.t_ro)) else {
                    continue;
                };
                if commit {
                    self.answer(w.txn, w.index, ExecResult::Done(w.reply));
                } else {
                    // Run again on what is left, under the same freshness check: the newest
                    // version may now be one the client never heard of.
                    self.execute_read_only(w.txn, w.index, key, ts, t_ro);
                }
            }
            self.timing_control(key);
            self.settle(key);
        }
    }
}
