//! A restarted Lazy VSR replica's recovery (not in the thesis).
//!
//! Lazy VSR acknowledges an operation once f+1 replicas hold it in *memory*. A replica that
//! restarts has only its disk, so it may have lost operations the group acknowledged. If it
//! then voted, it and a replica that lagged behind (never received those operations) could
//! form a majority and elect a leader without them: acknowledged operations lost although
//! only one replica ever failed (the thesis's property 3 as stated; the simulator's
//! `Faults::Lagging`, seed 5000013, shows it).
//!
//! So a restarted replica is *amnesiac*: it neither votes nor campaigns. At once, and every
//! two heartbeat intervals until it recovers, it asks every replica who leads (`Recovering`,
//! with a nonce fresh for this restart, so no reply sent before the restart counts). Amnesia
//! ends
//! - when a primary in normal operation answered and this replica's log has since come to
//!   hold that primary's log end: a primary's log holds every acknowledged operation, and
//!   the answer was sent after the restart, so it covers everything acknowledged before it;
//! - or, partly, while the latest answers of f other replicas say they are amnesiac too (f+1
//!   replicas lost their memory at once, which Lazy VSR does not survive without loss
//!   anyway: a total crash loses a suffix; waiting longer would only keep the group from
//!   ever electing): the replica votes and campaigns again, but never for a log that ends
//!   below the longest in those latest answers, since a restarted replica whose disk was
//!   current holds everything. Only each replica's latest answer counts (questions are
//!   numbered): a log end a replica reported before it crashed no longer exists. Amnesia
//!   itself ends only as above, or when the replica becomes primary.
//!
//! Two shortcuts keep a total crash's election short (and within the model checker's
//! bounds): a `Recovering` question from a replica this one has no answer from counts as
//! an answer saying the asker restarted (only ever the asker's restart: an answer, which is
//! fresher, is never replaced by a question); and a candidate's `ElectPrepare` says whether
//! it is amnesiac, which a voter counts instead of the candidate's older answer. The second
//! also closes a race: a replica that answered "restarted" and recovered since must not be
//! counted as restarted when it asks for this replica's vote.
//!
//! VSR-Sync acknowledges only what a majority has on disk, so its replicas recover without
//! amnesia.

use super::{Replica, Status};
use crate::app::App;
use crate::message::Message;
use crate::types::{Address, ReplicaId, ViewNum, Viewstamp, REPLICAS_MAX};

/// One replica's answer to a `Recovering` question.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) struct Answer {
    /// Which question it answers (later ones supersede).
    pub(super) ask: u64,
    pub(super) view: ViewNum,
    pub(super) op_max: Viewstamp,
    pub(super) primary: bool,
    pub(super) restarted: bool,
}

/// A restarted replica that may lack acknowledged operations (module docs).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct Amnesia {
    /// Names this restart's questions.
    nonce: u64,
    /// Questions asked so far.
    asks: u64,
    /// Each replica's latest answer.
    answers: [Option<Answer>; REPLICAS_MAX],
    /// The log end of a primary that answered: reaching it ends the amnesia.
    target: Option<Viewstamp>,
    /// When to ask again: at once after the restart, then every two heartbeat intervals
    /// until recovered (a primary may die before this replica reaches its log end; the
    /// next one's answer sets a later target).
    pub(super) ask_at: u64,
}

impl Amnesia {
    /// Whether the latest answers show f+1 replicas amnesiac at once, this one included;
    /// `candidate`'s own word on whether it restarted replaces its answer.
    fn waived(&self, quorum: usize, candidate: Option<(ReplicaId, bool)>) -> bool {
        let others = self
            .answers
            .iter()
            .enumerate()
            .filter(|&(i, a)| match candidate {
                Some((c, restarted)) if usize::from(c) == i => restarted,
                _ => a.is_some_and(|a| a.restarted),
            })
            .count();
        others + 1 >= quorum
    }

    /// The longest log end in the latest answers.
    fn floor(&self) -> Viewstamp {
        self.answers
            .iter()
            .flatten()
            .map(|a| a.op_max)
            .max()
            .unwrap_or(Viewstamp::ZERO)
    }
}

impl<A: App> Replica<A> {
    /// Marks this replica as restarted with its memory lost (Lazy VSR only: module docs).
    /// [`Replica::recover`] calls it; a server that starts with an empty disk after a crash
    /// calls it too, since an empty disk does not mean nothing was acknowledged.
    pub fn assume_amnesia(&mut self) {
        if self.config.mode != crate::Mode::Lazy
            || self.config.replica_count == 1
            || self.config.mistake == Some(crate::Mistake::RestartedReplicaVotes)
        {
            return;
        }
        let nonce = self.random() ^ self.now.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 1;
        self.amnesia = Some(Amnesia {
            nonce,
            asks: 0,
            answers: [None; REPLICAS_MAX],
            target: None,
            ask_at: self.now,
        });
    }

    /// Whether this replica lost its memory and has not recovered (module docs).
    pub fn is_amnesiac(&self) -> bool {
        self.amnesia.is_some()
    }

    /// For traces: the amnesia's state, empty when there is none.
    #[doc(hidden)]
    pub fn amnesia_summary(&self) -> String {
        let quorum = self.quorum();
        self.amnesia.as_ref().map_or(String::new(), |a| {
            format!(
                " amnesiac(waived {}, floor {}, target {:?})",
                a.waived(quorum, None),
                a.floor(),
                a.target
            )
        })
    }

    /// Asks every replica who leads (`ask_at`).
    pub(super) fn ask_who_leads(&mut self) {
        let again = self.now + 2 * self.config.heartbeat_interval;
        let view = self.view;
        let Some(a) = &mut self.amnesia else {
            return;
        };
        a.ask_at = again;
        a.asks += 1;
        let (nonce, ask) = (a.nonce, a.asks);
        let op_max = self.log.op_max();
        self.send_to_others(Message::Recovering {
            nonce,
            ask,
            view,
            op_max,
        });
    }

    pub(super) fn on_recovering(
        &mut self,
        from: ReplicaId,
        nonce: u64,
        ask: u64,
        view: ViewNum,
        op_max: Viewstamp,
    ) {
        if let Some(a) = &mut self.amnesia {
            // The asker restarted; count that until it answers a question of ours (module
            // docs). `ask` 0 sorts below every answer.
            a.answers[usize::from(from)].get_or_insert(Answer {
                ask: 0,
                view,
                op_max,
                primary: false,
                restarted: true,
            });
        }
        if view > self.view {
            // Its view got ahead of ours: move up, as after a refused vote, so the group
            // elects a leader it can hear.
            self.raise_view(view);
        }
        let reply = Message::RecoveringReply {
            nonce,
            ask,
            view: self.view,
            op_max: self.log.op_max(),
            primary: matches!(self.status, Status::Primary(_)),
            restarted: self.amnesia.is_some(),
        };
        self.send(Address::Replica(from), reply);
    }

    pub(super) fn on_recovering_reply(&mut self, from: ReplicaId, nonce: u64, answer: Answer) {
        let Some(a) = &mut self.amnesia else {
            return;
        };
        if a.nonce != nonce {
            return; // an answer to an earlier restart's question
        }
        let slot = &mut a.answers[usize::from(from)];
        if slot.is_some_and(|old| old.ask >= answer.ask) {
            return; // a late answer to an earlier question
        }
        *slot = Some(answer);
        if answer.primary && answer.view >= self.view {
            a.target = Some(a.target.map_or(answer.op_max, |t| t.max(answer.op_max)));
            // Hear from it as a backup: its heartbeats and PREPAREs bring the log there.
            if answer.view > self.view {
                self.learn_view(answer.view);
            }
            if self.log.op_max() != answer.op_max {
                self.request_catch_up();
            }
        }
        self.end_amnesia_if_caught_up();
    }

    /// Whether it may vote for `candidate`, whose log ends at `op_max` and which says
    /// whether it `restarted`, as far as amnesia goes (module docs).
    pub(super) fn amnesia_allows_vote(
        &self,
        candidate: ReplicaId,
        op_max: Viewstamp,
        restarted: bool,
    ) -> bool {
        let quorum = self.quorum();
        self.amnesia
            .as_ref()
            .is_none_or(|a| a.waived(quorum, Some((candidate, restarted))) && op_max >= a.floor())
    }

    /// Whether it may campaign as far as amnesia goes.
    pub(super) fn amnesia_allows_campaign(&self) -> bool {
        let quorum = self.quorum();
        self.amnesia
            .as_ref()
            .is_none_or(|a| a.waived(quorum, None) && self.log.op_max() >= a.floor())
    }

    /// Ends the amnesia once the log holds the answering primary's log end (module docs).
    pub(super) fn end_amnesia_if_caught_up(&mut self) {
        let caught_up = self
            .amnesia
            .as_ref()
            .and_then(|a| a.target)
            .is_some_and(|t| self.log.contains(t));
        if caught_up {
            self.amnesia = None;
            self.stats.amnesia_recovered += 1;
        }
    }
}
