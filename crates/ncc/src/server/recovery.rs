//! Client failure (§5.6, App. D, digest §2.11 and pitfall 12): a transaction whose client
//! stops before deciding it is decided by its *backup coordinator*, one of its servers that
//! the client names on every request.
//!
//! Each server keeps a record per read-write transaction: *uncleared* while a request of
//! it has not arrived or not been answered, *cleared* once the last shot has arrived and
//! every answer has left, then committed or aborted. A client decides only after every
//! answer of its last shot is in, so an uncleared record proves the client has not decided
//! to commit: a server whose recovery timer fires on an uncleared record aborts the
//! transaction on its own. On a cleared record it asks the backup coordinator, which gathers
//! every cohort's record (all of them before deciding: the paper's Figure 15 returns on
//! the first, its prose says "any"; digest pitfall 12) and then: any committed → commit;
//! any aborted → abort; any uncleared → wait for the next timer; all cleared → run the
//! client's safeguard again over the recorded pairs, and smart retry if it fails. Smart
//! retry's outcome is recorded per (transaction, server), so the coordinator's replay and
//! the client's own attempt get the same answer whichever comes first. The decision goes to
//! every cohort; a cohort whose copy is lost asks again at its next timer.
//!
//! A record asked for that does not exist (the requests never arrived) is created aborted,
//! so the requests are refused if they arrive after all. A paused client that comes back
//! learns an abort from the early-abort answers its requests now get, and its own
//! decision, if it made one, is the one the backup reaches: a server that sees two
//! different decisions for one transaction reports a violation (`check_invariants`).

use crate::store::Store;
use std::collections::BTreeSet;

use super::{Server, Status, TxnState};
use crate::types::{Effects, ExecResult, Msg, Op, RecordState, ServerId, Ts, TxnId};

/// A recovery in progress at the backup coordinator.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) enum Recovery {
    /// Waiting for the other cohorts' records.
    Gathering {
        waiting: BTreeSet<ServerId>,
        records: Vec<RecordState>,
    },
    /// Smart retry to `to` on the client's behalf: the cohorts that have not answered.
    Retrying { waiting: BTreeSet<ServerId> },
}

impl<S: Store> Server<S> {
    /// Messages to other servers, as (server, message).
    pub fn drain_peers(&mut self) -> Vec<(ServerId, Msg)> {
        std::mem::take(&mut self.peers_out)
    }

    /// How often timers should be looked at: a quarter of the recovery timeout.
    pub fn recovery_period(&self) -> Option<u64> {
        self.recovery_after.map(|a| (a / 4).max(1))
    }

    /// Whether a recovery timer is running (the simulator ticks the server while so).
    pub fn has_timers(&self) -> bool {
        self.recovery_after.is_some() && self.awaiting_decision > 0
    }

    /// Fires the recovery timers due by `now` (this server's clock).
    pub fn tick(&mut self, now: u64) {
        let Some(after) = self.recovery_after else {
            return;
        };
        let due: Vec<TxnId> = self
            .txns
            .iter()
            .filter(|(_, t)| awaits_decision(t) && t.timer <= now)
            .map(|(&id, _)| id)
            .collect();
        for &txn in &due {
            self.txns.get_mut(&txn).expect("listed").timer = now.saturating_add(after);
        }
        self.fire(due);
    }

    /// Fires every recovery timer now, whatever is due (the model checker's time passes
    /// only when it chooses, and timers' values would only multiply its states).
    pub fn fire_all_timers(&mut self) {
        let all: Vec<TxnId> = self
            .txns
            .iter()
            .filter(|(_, t)| awaits_decision(t))
            .map(|(&id, _)| id)
            .collect();
        self.fire(all);
    }

    /// What a recovery timer does for each of `txns` (module docs).
    fn fire(&mut self, txns: Vec<TxnId>) {
        for txn in txns {
            if !self.cleared(txn) || self.mistakes.backup_aborts_cleared {
                self.abort_unilaterally(txn, None);
            } else if self.txns[&txn].coord == self.id {
                self.start_recovery(txn);
            } else {
                let coord = self.txns[&txn].coord;
                self.peers_out
                    .push((coord, Msg::Resolve { txn, from: self.id }));
            }
        }
    }

    /// Every committed read-write transaction with what it read and wrote here, for a
    /// checker that must account for transactions whose client never reported them.
    pub fn committed_effects(&self) -> Vec<(TxnId, Effects)> {
        self.txns
            .iter()
            .filter(|(_, t)| t.status == Status::Committed && !t.read_only)
            .map(|(&id, t)| {
                let mut e = Effects::default();
                for (op, answer) in t.ops.iter().zip(&t.answered) {
                    match (op, answer) {
                        (Op::Read(k), Some(ExecResult::Done(r))) => {
                            let read = r.value.clone().expect("a read returns a value");
                            e.reads.push((k.clone(), read));
                        }
                        (Op::Write(k, v), _) => e.writes.push((k.clone(), v.clone())),
                        (Op::ReadWrite(k, v), answer) => {
                            if let Some(ExecResult::Done(r)) = answer {
                                let read = r.value.clone().expect("a read-write returns a value");
                                e.reads.push((k.clone(), read));
                            }
                            e.writes.push((k.clone(), v.clone()));
                        }
                        _ => {}
                    }
                }
                (id, e)
            })
            .collect()
    }

    /// Every read-write transaction decided here, and how.
    pub fn decisions(&self) -> Vec<(TxnId, bool)> {
        self.txns
            .iter()
            .filter(|(_, t)| !t.read_only && t.status != Status::Undecided && !t.ops.is_empty())
            .map(|(&id, t)| (id, t.status == Status::Committed))
            .collect()
    }

    fn cleared(&self, txn: TxnId) -> bool {
        self.txns.get(&txn).is_some_and(|t| {
            t.cohorts.is_some()
                && t.answered
                    .iter()
                    .all(|a| matches!(a, Some(ExecResult::Done(_))))
        })
    }

    /// This server's record of `txn`; one never heard of is created aborted.
    fn record_of(&mut self, txn: TxnId) -> RecordState {
        if !self.txns.contains_key(&txn) {
            self.decide(txn, false); // creates the aborted record
            return RecordState::Aborted;
        }
        let t = &self.txns[&txn];
        match t.status {
            Status::Committed => RecordState::Committed,
            Status::Aborted => RecordState::Aborted,
            Status::Undecided if !self.cleared(txn) => RecordState::Uncleared,
            Status::Undecided => RecordState::Cleared(safeguard_pairs(t)),
        }
    }

    /// Aborts `txn` here without asking anyone: its client cannot have decided to commit
    /// (an answer it needed never left). Its unanswered requests are answered with an
    /// abort, so a client that was only paused restarts, and every cohort known (and
    /// `also`) hears the decision.
    fn abort_unilaterally(&mut self, txn: TxnId, also: Option<ServerId>) {
        self.decide(txn, false);
        let t = &self.txns[&txn];
        let unanswered: Vec<u32> = t
            .answered
            .iter()
            .enumerate()
            .filter(|(_, a)| a.is_none())
            .map(|(i, _)| i as u32)
            .collect();
        let mut to: BTreeSet<ServerId> = t.cohorts.iter().flatten().copied().collect();
        to.extend(also);
        for i in unanswered {
            self.answer(txn, i, ExecResult::EarlyAbort);
        }
        self.recovering.remove(&txn);
        self.send_decision(txn, false, to);
    }

    fn send_decision(&mut self, txn: TxnId, commit: bool, to: BTreeSet<ServerId>) {
        for s in to {
            if s != self.id {
                self.peers_out.push((s, Msg::Decide { txn, commit }));
            }
        }
    }

    /// A cohort asks the backup coordinator (this server) to decide `txn`.
    pub(super) fn on_resolve(&mut self, txn: TxnId, from: ServerId) {
        match self.record_of(txn) {
            RecordState::Committed => self.send_decision(txn, true, BTreeSet::from([from])),
            RecordState::Aborted => self.send_decision(txn, false, BTreeSet::from([from])),
            RecordState::Uncleared => self.abort_unilaterally(txn, Some(from)),
            RecordState::Cleared(_) => self.start_recovery(txn),
        }
    }

    fn start_recovery(&mut self, txn: TxnId) {
        let cohorts = self.txns[&txn].cohorts.clone().expect("cleared");
        let waiting: BTreeSet<ServerId> = cohorts.into_iter().filter(|&s| s != self.id).collect();
        for &s in &waiting {
            self.peers_out
                .push((s, Msg::GetRecord { txn, from: self.id }));
        }
        let done = waiting.is_empty();
        self.recovering.insert(
            txn,
            Recovery::Gathering {
                waiting,
                records: Vec::new(),
            },
        );
        if done {
            self.evaluate(txn);
        }
    }

    pub(super) fn on_get_record(&mut self, txn: TxnId, from: ServerId) {
        let record = self.record_of(txn);
        self.peers_out.push((
            from,
            Msg::Record {
                txn,
                from: self.id,
                record,
            },
        ));
    }

    pub(super) fn on_record(&mut self, txn: TxnId, from: ServerId, record: RecordState) {
        let Some(Recovery::Gathering { waiting, records }) = self.recovering.get_mut(&txn) else {
            return;
        };
        if !waiting.remove(&from) {
            return;
        }
        records.push(record);
        if waiting.is_empty() {
            self.evaluate(txn);
        }
    }

    /// Every cohort's record is in (this server's own is read now: it may have been decided
    /// meanwhile). Scans all of them before deciding.
    fn evaluate(&mut self, txn: TxnId) {
        let Some(Recovery::Gathering { records, .. }) = self.recovering.remove(&txn) else {
            return;
        };
        let mut all = records;
        all.push(self.record_of(txn));
        if all.contains(&RecordState::Committed) {
            return self.finish(txn, true);
        }
        if all.contains(&RecordState::Aborted) {
            return self.finish(txn, false);
        }
        if all.contains(&RecordState::Uncleared) {
            return; // the next timer asks again
        }
        let pairs: Vec<(Ts, Ts)> = all
            .into_iter()
            .flat_map(|r| match r {
                RecordState::Cleared(p) => p,
                _ => unreachable!("only cleared records are left"),
            })
            .collect();
        let Some(tw_max) = pairs.iter().map(|p| p.0).max() else {
            return self.finish(txn, true);
        };
        let tr_min = pairs.iter().map(|p| p.1).min().expect("non-empty");
        if tw_max <= tr_min {
            return self.finish(txn, true);
        }
        // The client's smart retry, again: each cohort answers with its recorded outcome if
        // the client's reached it first.
        let cohorts = self.txns[&txn].cohorts.clone().expect("cleared");
        let mut waiting = BTreeSet::new();
        for s in cohorts {
            if s == self.id {
                continue;
            }
            waiting.insert(s);
            self.peers_out.push((
                s,
                Msg::RecoverRetry {
                    txn,
                    to: tw_max,
                    from: self.id,
                },
            ));
        }
        if !self.smart_retry(txn, tw_max) {
            return self.finish(txn, false);
        }
        if waiting.is_empty() {
            return self.finish(txn, true);
        }
        self.recovering.insert(txn, Recovery::Retrying { waiting });
    }

    pub(super) fn on_recover_retry_reply(&mut self, txn: TxnId, from: ServerId, ok: bool) {
        let Some(Recovery::Retrying { waiting }) = self.recovering.get_mut(&txn) else {
            return;
        };
        if !waiting.remove(&from) {
            return;
        }
        if !ok {
            return self.finish(txn, false);
        }
        if waiting.is_empty() {
            self.finish(txn, true);
        }
    }

    fn finish(&mut self, txn: TxnId, commit: bool) {
        self.recovering.remove(&txn);
        self.decide(txn, commit);
        let to: BTreeSet<ServerId> = self.txns[&txn].cohorts.iter().flatten().copied().collect();
        self.send_decision(txn, commit, to);
    }
}

/// A read-write transaction here that a decision is still owed for.
pub(super) fn awaits_decision(t: &TxnState) -> bool {
    t.status == Status::Undecided && !t.read_only
}

/// The `(t_w, t_r)` pairs of `t`'s answers here that the client's safeguard takes: a
/// read-modify-write's read is left out (only its write's pair counts, §5.1).
fn safeguard_pairs(t: &TxnState) -> Vec<(Ts, Ts)> {
    let written: Vec<&crate::Key> = t.ops.iter().filter(|o| o.is_write()).map(Op::key).collect();
    t.ops
        .iter()
        .zip(&t.answered)
        .filter(|(op, _)| op.is_write() || !written.contains(&op.key()))
        .filter_map(|(_, a)| match a {
            Some(ExecResult::Done(r)) => Some((r.tw, r.tr)),
            _ => None,
        })
        .collect()
}
