//! One shard as a replicated state machine: the server's inputs (messages and timer ticks,
//! each with the server's clock) are the operations of the shard's replication log, and no
//! output leaves before the input that produced it commits. Paper §5.6 asks that every state
//! change a response depends on be replicated before the response leaves (versions, the `t_r`
//! a read raised, decisions, smart-retry outcomes, coordinator records); logging the inputs
//! of a deterministic server covers all of them at once, and the outputs it releases are
//! exactly the committed state's. The one exception is a read-only read, which the primary
//! answers without logging it (`ReplicationModel::unlogged_reads`): the `t_r` it raises
//! reaches the log as a note before the next input that could depend on it, and a promised
//! floor covers it for the next primary (`server/unlogged.rs`).
//!
//! The group is modelled, not run: the guarantees of Lazy VSR (`crates/vsr`), as the slot
//! moves' simulator models them (`verso-cluster`'s `sim.rs`):
//! - inputs commit in log order, one replication round after they were appended;
//! - a **failover** keeps every committed input and any prefix of the uncommitted ones (a
//!   new primary's log holds what reached a majority); the rest is lost, and so are the
//!   outputs held for it: clients and backup coordinators send again what goes unanswered,
//!   and every message is idempotent at the server;
//! - a **total crash** (every replica at once) keeps only what was on a majority's disks.
//!   Under [`Durability::Lazy`] the disks catch up every [`ReplicationModel::sync_gap`], so
//!   a total crash can lose committed inputs whose outputs already left; under
//!   [`Durability::Sync`] an input commits only once on the disks, and nothing committed is
//!   lost (VSR-Sync); under [`Durability::LazyAnswersOnDisk`] the log stays lazy but an
//!   answer waits for the disks to catch up with its input, so what a total crash loses
//!   nobody heard about.
//!
//! The primary executes an input at once on its live state (so later inputs see it) and
//! again, when it commits, on the committed state a new primary would rebuild. The two must
//! produce the same outputs ([`TxnServer::check_invariants`] reports a difference). Both are
//! copies of one server in one process, so this catches only what depends on more than the
//! inputs and the state (a global counter, the wall clock); a real backup could also differ
//! by its own hash seeds or clock, which the servers avoid by construction (ordered maps,
//! the time only from the input).

use std::collections::VecDeque;

mod vsr_group;
pub use vsr_group::VsrReplicated;

use crate::protocol::{GroupFault, TxnServer};
use crate::types::{ClientId, Effects, Key, ServerId, TxnId, Value};

/// When a committed input is safe from a total crash of the group.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Durability {
    /// Lazy VSR: committed on a majority's memory; the disks follow every `sync_gap`.
    Lazy,
    /// VSR-Sync: committed only once a majority's disks hold it.
    Sync,
    /// Lazy VSR's log, but an answer leaves only once its input is on a majority's disks
    /// too (group commit: it waits for the next catch-up of the disks, as a replicated
    /// server's `--durability sync` replies do). A total crash still loses committed
    /// inputs, but only ones nobody heard about.
    LazyAnswersOnDisk,
}

/// How the modelled replication group behaves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ReplicationModel {
    pub durability: Durability,
    /// From append to commit (the server's clock, µs).
    pub round: u64,
    /// Lazy only: the disks catch up with the committed inputs this often (µs).
    pub sync_gap: u64,
    /// A mistake, for tests: outputs leave as soon as the primary executed their input,
    /// before it commits (what a server does when its responses do not wait for the log).
    pub answers_before_commit: bool,
    /// The group is three real `verso-vsr` replicas ([`VsrReplicated`]) instead of this
    /// model: `round` and `sync_gap` then scale its message delays, timers and disks.
    pub real_replicas: bool,
    /// The primary answers read-only reads without logging them (`server/unlogged.rs`):
    /// each answer waits for the inputs executed before it, and for a logged promise
    /// covering its timestamp. Off, every read is an input like any other. (This model
    /// has one primary at a time; the real group also needs a read lease.)
    pub unlogged_reads: bool,
    /// A mistake in the unlogged reads' design, for tests.
    pub unlogged_mistake: Option<UnloggedMistake>,
}

/// Deliberate bugs in unlogged reads (`server/unlogged.rs`), for showing that the
/// simulator and the checker catch them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UnloggedMistake {
    /// No [`crate::GroupNote::ReadsRaised`] before logged inputs: a replay refines writes
    /// below reads the primary answered.
    NoNotes,
    /// A new primary does not apply the promised floor: its writes may go below reads the
    /// last one answered unlogged.
    NoFloor,
}

pub use crate::server::FLOOR_AHEAD;

impl Default for ReplicationModel {
    fn default() -> Self {
        ReplicationModel {
            durability: Durability::Lazy,
            round: 300,
            sync_gap: 2_000,
            answers_before_commit: false,
            real_replicas: false,
            unlogged_reads: true,
            unlogged_mistake: None,
        }
    }
}

#[derive(Clone, Debug)]
enum Input<M> {
    Message(u64, M),
    Tick(u64),
}

type Outputs<M> = (Vec<(ClientId, M)>, Vec<(ServerId, M)>);

#[derive(Clone, Debug)]
struct Appended<M> {
    input: Input<M>,
    commit_at: u64,
    /// What the primary's execution produced, held until the input commits.
    outputs: Outputs<M>,
    /// Answers to unlogged reads executed after this input, held with it (they may have
    /// seen its effects) but not compared with its replay's.
    riders: Vec<(ClientId, M)>,
}

/// Counts of what the group went through.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReplicationStats {
    pub inputs_committed: u64,
    pub failovers: u64,
    pub total_crashes: u64,
    /// Appended inputs a failover or total crash dropped before they committed.
    pub uncommitted_lost: u64,
    /// Committed inputs a total crash dropped (never under [`Durability::Sync`]).
    pub committed_lost: u64,
    /// Read-only executions the primary answered without logging them, and the notes it
    /// logged for them (`server/unlogged.rs`).
    pub reads_unlogged: u64,
    pub read_notes: u64,
    pub floor_promises: u64,
}

/// A server `S` behind a modelled replication log (module docs).
#[derive(Clone, Debug)]
pub struct Replicated<S: TxnServer> {
    model: ReplicationModel,
    /// The primary's state: every appended input executed.
    live: S,
    /// The state as of the last committed input: what a new primary rebuilds.
    committed: S,
    /// The state as of the last input on a majority's disks: what a total crash leaves
    /// (unused under [`Durability::Sync`], where it is `committed`).
    durable: S,
    /// Committed inputs not yet on the disks, oldest first (empty under `Sync`).
    undurable: Vec<Input<S::Msg>>,
    /// When the disks last caught up (the server's clock).
    synced_at: u64,
    /// Appended inputs not yet committed, oldest first.
    pending: VecDeque<Appended<S::Msg>>,
    /// Under [`Durability::LazyAnswersOnDisk`]: outputs of committed inputs that wait for
    /// the disks to catch up.
    awaiting_disk: Vec<Outputs<S::Msg>>,
    /// Outputs of committed inputs, not yet drained.
    ready: Vec<(ClientId, S::Msg)>,
    ready_peers: Vec<(ServerId, S::Msg)>,
    /// When the inner server was last ticked (its recovery timers).
    ticked_at: u64,
    /// The first time replaying an input produced other outputs than executing it did.
    divergence: Option<String>,
    pub stats: ReplicationStats,
}

impl<S> Replicated<S>
where
    S: TxnServer + Clone,
    S::Msg: PartialEq,
{
    /// `server` in its initial state, replicated as `model` says.
    pub fn new(server: S, model: ReplicationModel) -> Replicated<S> {
        assert!(model.round > 0, "a replication round takes time");
        Replicated {
            model,
            live: server.clone(),
            committed: server.clone(),
            durable: server,
            undurable: Vec::new(),
            awaiting_disk: Vec::new(),
            synced_at: 0,
            pending: VecDeque::new(),
            ready: Vec::new(),
            ready_peers: Vec::new(),
            ticked_at: 0,
            divergence: None,
            stats: ReplicationStats::default(),
        }
    }

    fn execute(server: &mut S, input: &Input<S::Msg>) -> Outputs<S::Msg> {
        match input {
            Input::Message(now, msg) => server.on_message(*now, msg.clone()),
            Input::Tick(now) => server.tick(*now),
        }
        (server.drain(), server.drain_peers())
    }

    fn append(&mut self, now: u64, input: Input<S::Msg>) {
        if self.model.unlogged_reads {
            self.live.begin_logged();
        }
        let outputs = Self::execute(&mut self.live, &input);
        let note = self.live.end_logged();
        if let Some(note) =
            note.filter(|_| self.model.unlogged_mistake != Some(UnloggedMistake::NoNotes))
        {
            // Logged just ahead of the input it was made for (the live state has it).
            self.stats.read_notes += 1;
            self.push_appended(now, Input::Message(now, note), (Vec::new(), Vec::new()));
        }
        self.push_appended(now, input, outputs);
    }

    fn push_appended(&mut self, now: u64, input: Input<S::Msg>, outputs: Outputs<S::Msg>) {
        if self.model.answers_before_commit {
            self.ready.extend(outputs.0.iter().cloned());
            self.ready_peers.extend(outputs.1.iter().cloned());
        }
        // Commits land in log order: never before the input ahead.
        let commit_at = self
            .pending
            .back()
            .map_or(0, |p| p.commit_at)
            .max(now + self.model.round);
        self.pending.push_back(Appended {
            input,
            commit_at,
            outputs,
            riders: Vec::new(),
        });
    }

    /// A read the primary answers without logging it (`server/unlogged.rs`): under a
    /// logged promise covering its clock, and released with the newest input executed
    /// before it (or, if all have committed, once they are as durable as any answer).
    fn read_unlogged(&mut self, now: u64, msg: S::Msg, clk: u64) {
        if let Some(note) = self.live.floor_promise_for(clk) {
            self.stats.floor_promises += 1;
            self.append(now, Input::Message(now, note));
        }
        self.stats.reads_unlogged += 1;
        self.live.execute_unlogged(now, msg);
        let answers = self.live.drain();
        debug_assert!(self.live.drain_peers().is_empty(), "a read asks no peer");
        if let Some(last) = self.pending.back_mut() {
            last.riders.extend(answers);
        } else if self.model.durability == Durability::LazyAnswersOnDisk
            && !self.undurable.is_empty()
        {
            self.awaiting_disk.push((answers, Vec::new()));
        } else {
            self.ready.extend(answers);
        }
    }

    /// Commits the inputs due by `now`, releasing their outputs, and lets the disks catch
    /// up if it is time.
    fn advance(&mut self, now: u64) {
        while self.pending.front().is_some_and(|p| p.commit_at <= now) {
            let p = self.pending.pop_front().expect("checked");
            self.commit(p.input, Some(p.outputs), p.riders);
        }
        if self.model.durability != Durability::Sync && now >= self.synced_at + self.model.sync_gap
        {
            self.sync_disks(now);
        }
    }

    /// Executes `input` on the committed state; `held`: the outputs the primary's
    /// execution produced, released now (none after a failover: the new primary does not
    /// know who waits).
    fn commit(
        &mut self,
        input: Input<S::Msg>,
        held: Option<Outputs<S::Msg>>,
        riders: Vec<(ClientId, S::Msg)>,
    ) {
        let replayed = Self::execute(&mut self.committed, &input);
        self.stats.inputs_committed += 1;
        if let Some((mut to_clients, to_peers)) = held {
            if self.divergence.is_none() && (to_clients != replayed.0 || to_peers != replayed.1) {
                self.divergence = Some(format!(
                    "replaying {input:?} answered {replayed:?}, the primary {:?}",
                    (&to_clients, &to_peers)
                ));
            }
            to_clients.extend(riders);
            if self.model.answers_before_commit {
                // Sent already, at execution.
            } else if self.model.durability == Durability::LazyAnswersOnDisk {
                self.awaiting_disk.push((to_clients, to_peers));
            } else {
                self.ready.extend(to_clients);
                self.ready_peers.extend(to_peers);
            }
        }
        // Under Sync the committed state is the durable one: nothing to keep apart.
        if self.model.durability != Durability::Sync {
            self.undurable.push(input);
        }
    }

    /// The disks catch up with every committed input; answers waiting for that leave.
    fn sync_disks(&mut self, now: u64) {
        for input in std::mem::take(&mut self.undurable) {
            Self::execute(&mut self.durable, &input);
        }
        for (to_clients, to_peers) in std::mem::take(&mut self.awaiting_disk) {
            self.ready.extend(to_clients);
            self.ready_peers.extend(to_peers);
        }
        self.synced_at = now;
    }

    /// Inputs appended and not yet committed.
    pub fn uncommitted(&self) -> usize {
        self.pending.len()
    }
}

impl<S> TxnServer for Replicated<S>
where
    S: TxnServer + Clone,
    S::Msg: PartialEq,
{
    type Msg = S::Msg;

    fn on_message(&mut self, now: u64, msg: S::Msg) {
        self.advance(now);
        if self.model.unlogged_reads && !self.model.answers_before_commit {
            if let Some(clk) = self.live.unlogged_read(&msg) {
                return self.read_unlogged(now, msg, clk);
            }
        }
        self.append(now, Input::Message(now, msg));
    }

    fn drain(&mut self) -> Vec<(ClientId, S::Msg)> {
        std::mem::take(&mut self.ready)
    }

    fn drain_peers(&mut self) -> Vec<(ServerId, S::Msg)> {
        std::mem::take(&mut self.ready_peers)
    }

    fn check_invariants(&self) -> Result<(), String> {
        if let Some(d) = &self.divergence {
            return Err(format!("not deterministic: {d}"));
        }
        self.live.check_invariants()?;
        self.committed.check_invariants()
    }

    fn committed_versions(&self) -> Vec<(Key, Vec<Value>)> {
        self.committed.committed_versions()
    }

    fn undecided(&self) -> Vec<TxnId> {
        self.live.undecided()
    }

    fn describe_waits(&self) -> String {
        format!(
            "{} uncommitted inputs; {}",
            self.pending.len(),
            self.live.describe_waits()
        )
    }

    fn tick_every(&self) -> Option<u64> {
        let inner = self.live.tick_every();
        let replication = if !self.pending.is_empty() {
            Some(self.model.round)
        } else if !self.undurable.is_empty() {
            Some(self.model.sync_gap)
        } else {
            None
        };
        match (inner, replication) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn tick(&mut self, now: u64) {
        self.advance(now);
        if let Some(every) = self.live.tick_every() {
            if now >= self.ticked_at + every {
                self.ticked_at = now;
                self.append(now, Input::Tick(now));
            }
        }
    }

    fn committed_effects(&self) -> Vec<(TxnId, Effects)> {
        self.committed.committed_effects()
    }

    fn decisions(&self) -> Vec<(TxnId, bool)> {
        self.committed.decisions()
    }

    fn replication_stats(&self) -> Option<ReplicationStats> {
        Some(self.stats)
    }

    fn group_fault(&mut self, now: u64, fault: GroupFault) {
        self.advance(now);
        match fault {
            GroupFault::Failover { keep } => {
                self.stats.failovers += 1;
                let keep = keep.min(self.pending.len());
                let lost = self.pending.split_off(keep);
                self.stats.uncommitted_lost += lost.len() as u64;
                for p in std::mem::take(&mut self.pending) {
                    self.commit(p.input, None, Vec::new());
                }
            }
            GroupFault::TotalCrash => {
                self.stats.total_crashes += 1;
                self.stats.uncommitted_lost += self.pending.len() as u64;
                self.stats.committed_lost += self.undurable.len() as u64;
                self.pending.clear();
                if self.model.durability != Durability::Sync {
                    self.undurable.clear();
                    self.committed = self.durable.clone();
                }
                self.synced_at = now;
            }
        }
        // Outputs already released stay released (they may be on the wire); the held ones
        // went with the old primary.
        self.awaiting_disk.clear();
        self.live = self.committed.clone();
        // The new primary's first input keeps the old one's promises to its unlogged
        // reads.
        if self.model.unlogged_reads
            && self.model.unlogged_mistake != Some(UnloggedMistake::NoFloor)
        {
            if let Some(note) = self.live.floor_applied_note() {
                self.append(now, Input::Message(now, note));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};

    /// A server that keeps every message it got and answers each with the count so far.
    #[derive(Clone, Debug, Default)]
    struct Counter {
        seen: Vec<u64>,
        out: Vec<(ClientId, u64)>,
        /// Answers with a process-wide counter instead: not a function of its inputs.
        nondeterministic: bool,
    }

    static CALLS: AtomicU64 = AtomicU64::new(0);

    impl TxnServer for Counter {
        type Msg = u64;
        fn on_message(&mut self, _now: u64, msg: u64) {
            self.seen.push(msg);
            let answer = if self.nondeterministic {
                CALLS.fetch_add(1, Ordering::Relaxed)
            } else {
                self.seen.len() as u64
            };
            self.out.push((0, answer));
        }
        fn drain(&mut self) -> Vec<(ClientId, u64)> {
            std::mem::take(&mut self.out)
        }
        fn check_invariants(&self) -> Result<(), String> {
            Ok(())
        }
        fn committed_versions(&self) -> Vec<(Key, Vec<Value>)> {
            let seen = self.seen.iter().map(|&v| Value::from(v)).collect();
            vec![(Key::from(0), seen)]
        }
        fn undecided(&self) -> Vec<TxnId> {
            Vec::new()
        }
        fn describe_waits(&self) -> String {
            String::new()
        }
    }

    fn group(durability: Durability) -> Replicated<Counter> {
        let model = ReplicationModel {
            durability,
            round: 100,
            sync_gap: 1_000,
            answers_before_commit: false,
            real_replicas: false,
            unlogged_reads: false,
            unlogged_mistake: None,
        };
        Replicated::new(Counter::default(), model)
    }

    fn state(g: &Replicated<Counter>) -> Vec<u64> {
        let values = &g.committed_versions()[0].1;
        values
            .iter()
            .map(|v| v.to_u64().expect("a number"))
            .collect()
    }

    #[test]
    fn answers_leave_only_once_their_input_commits_in_log_order() {
        let mut g = group(Durability::Lazy);
        g.on_message(0, 10);
        g.on_message(50, 11);
        assert!(g.drain().is_empty(), "nothing committed yet");
        assert_eq!(g.tick_every(), Some(100));
        g.tick(99);
        assert!(g.drain().is_empty());
        g.tick(100);
        assert_eq!(g.drain(), vec![(0, 1)]);
        g.tick(150);
        assert_eq!(g.drain(), vec![(0, 2)]);
        assert_eq!(state(&g), vec![10, 11]);
        assert!(g.check_invariants().is_ok());
    }

    #[test]
    fn a_failover_keeps_the_committed_inputs_and_a_prefix_of_the_others() {
        let mut g = group(Durability::Lazy);
        g.on_message(0, 1);
        g.tick(100);
        g.on_message(200, 2);
        g.on_message(201, 3);
        g.on_message(202, 4);
        assert_eq!(g.drain(), vec![(0, 1)]);
        g.group_fault(250, GroupFault::Failover { keep: 1 });
        // Input 2 reached the new primary's log; 3 and 4 did not. Neither's answer leaves:
        // the new primary does not know who waits (their clients send again).
        assert_eq!(state(&g), vec![1, 2]);
        assert_eq!(g.uncommitted(), 0);
        g.tick(1_000);
        assert!(g.drain().is_empty());
        g.on_message(1_000, 5);
        g.tick(1_100);
        assert_eq!(
            g.drain(),
            vec![(0, 3)],
            "the live state is the committed one"
        );
        assert_eq!(g.stats.uncommitted_lost, 2);
    }

    #[test]
    fn a_total_crash_keeps_what_the_disks_held() {
        for durability in [Durability::Lazy, Durability::Sync] {
            let mut g = group(durability);
            g.on_message(0, 1);
            g.tick(1_000); // commits, and the lazy disks catch up
            g.on_message(1_000, 2);
            g.tick(1_100); // commits; the lazy disks have not caught up
            assert_eq!(g.drain(), vec![(0, 1), (0, 2)]);
            g.group_fault(1_200, GroupFault::TotalCrash);
            match durability {
                Durability::Lazy => {
                    assert_eq!(state(&g), vec![1], "the answered input 2 is lost");
                    assert_eq!(g.stats.committed_lost, 1);
                }
                Durability::Sync => {
                    assert_eq!(state(&g), vec![1, 2]);
                    assert_eq!(g.stats.committed_lost, 0);
                }
                Durability::LazyAnswersOnDisk => unreachable!("its own test"),
            }
        }
    }

    #[test]
    fn answers_on_disk_wait_for_the_disks_and_a_total_crash_loses_only_unanswered_inputs() {
        let mut g = group(Durability::LazyAnswersOnDisk);
        g.on_message(0, 1);
        g.tick(100); // committed, not on disk
        assert!(g.drain().is_empty());
        g.tick(1_000); // the disks catch up
        assert_eq!(g.drain(), vec![(0, 1)]);
        g.on_message(1_000, 2);
        g.tick(1_100);
        assert!(
            g.drain().is_empty(),
            "committed, but the disks have not caught up"
        );
        g.group_fault(1_200, GroupFault::TotalCrash);
        assert_eq!(state(&g), vec![1]);
        assert_eq!(g.stats.committed_lost, 1);
        g.tick(5_000);
        assert!(g.drain().is_empty(), "the lost input's answer never leaves");
    }

    #[test]
    fn a_server_whose_answers_are_not_a_function_of_its_inputs_is_reported() {
        let mut g = group(Durability::Sync);
        g.live.nondeterministic = true;
        g.committed.nondeterministic = true;
        g.on_message(0, 1);
        g.tick(100);
        let err = g
            .check_invariants()
            .expect_err("replay answered differently");
        assert!(err.contains("not deterministic"), "{err}");
    }
}
