//! What the simulator needs of a protocol, so that NCC and the baselines (dOCC, d2PL,
//! TAPIR-CC) run on one simulator, one workload and one checker (issue 18 item 2: "on the
//! same interfaces and simulator").
//!
//! A client coordinates its own transactions (every protocol here co-locates the
//! coordinator with the client, digest pitfall 14) and tells the application what happened
//! with the same [`ClientEvent`]s; a server holds one shard. Both are fed messages and their
//! own clock and answer with messages to send: no I/O, no threads, no randomness of their
//! own.

use crate::client::{ClientEvent, ClientStats};
use crate::types::{ClientId, Effects, Key, Op, ServerId, TxnId, Value};

/// One client's side of a protocol.
pub trait TxnClient {
    type Msg: Clone + std::fmt::Debug;
    /// Begins a transaction with its first shot (`last`: it is also the last).
    fn begin(&mut self, now: u64, ops: Vec<Op>, last: bool);
    /// Sends the next shot, after [`ClientEvent::ShotDone`].
    fn next_shot(&mut self, now: u64, ops: Vec<Op>, last: bool);
    fn on_message(&mut self, now: u64, from: ServerId, msg: Self::Msg);
    /// Looks at its timers (sends again what went unanswered, restarts after a back-off).
    fn tick(&mut self, now: u64);
    /// Messages to send, as (server, message).
    fn drain(&mut self) -> Vec<(ServerId, Self::Msg)>;
    /// What happened since the last call.
    fn events(&mut self) -> Vec<ClientEvent>;
    /// Whether it has nothing left to do: no transaction, no unacknowledged decision.
    fn idle(&self) -> bool;
    /// Whether a transaction is under way.
    fn busy(&self) -> bool;
    /// How long (its clock) until it should be ticked again while not idle.
    fn tick_every(&self) -> u64;
    fn stats(&self) -> ClientStats;
    /// The client a new process taking over this one's id would start as (the simulator's
    /// restart after a crash): the same settings, numbering from `gap` above every number
    /// this one used, and knowing nothing of its transactions.
    fn restarted(&self, gap: u64) -> Self
    where
        Self: Sized;
}

/// One server's side of a protocol: the data of one shard.
pub trait TxnServer {
    type Msg: Clone + std::fmt::Debug;
    fn on_message(&mut self, now: u64, msg: Self::Msg);
    /// Messages to send, as (client, message).
    fn drain(&mut self) -> Vec<(ClientId, Self::Msg)>;
    /// The protocol's invariants over this server's state; checked after every event.
    fn check_invariants(&self) -> Result<(), String>;
    /// Each key's committed versions, oldest first, the initial value 0 first: the version
    /// order the history checker uses.
    fn committed_versions(&self) -> Vec<(Key, Vec<Value>)>;
    /// Transactions that hold state here and are not decided.
    fn undecided(&self) -> Vec<TxnId>;
    /// A one-line account of who waits for whom (for a trace or a stuck run).
    fn describe_waits(&self) -> String;
    /// Whether it can take `msg` (a timestamp its storage cannot hold: the transport then
    /// drops the sender).
    fn admits(&self, _msg: &Self::Msg) -> bool {
        true
    }
    /// Whether `msg` would start new work here (a transaction's execution) rather than
    /// finish or recover work begun (a decision, an acknowledgement, a backup
    /// coordinator's question). A server that must shed load (a replication group whose
    /// log is full) refuses the first kind and still takes the second, so that what began
    /// can end.
    fn starts_work(&self, _msg: &Self::Msg) -> bool {
        true
    }
    /// Messages to other servers (a backup coordinator's), as (server, message).
    fn drain_peers(&mut self) -> Vec<(ServerId, Self::Msg)> {
        Vec::new()
    }
    /// Whether it has a timer running, and then how often (its clock) to call `tick`.
    fn tick_every(&self) -> Option<u64> {
        None
    }
    fn tick(&mut self, _now: u64) {}
    /// Committed read-write transactions with what they read and wrote here: the
    /// simulator adds those whose client crashed before reporting them to the history.
    fn committed_effects(&self) -> Vec<(TxnId, Effects)> {
        Vec::new()
    }
    /// Read-write transactions decided here, and whether committed: every cohort must
    /// agree.
    fn decisions(&self) -> Vec<(TxnId, bool)> {
        Vec::new()
    }
    /// What this server holds: transaction records and versions (summed over keys). A
    /// protocol that does not count them answers zeros.
    fn footprint(&self) -> Footprint {
        Footprint::default()
    }
    /// The shard's replication group loses its primary or all its replicas. Only a
    /// replicated server ([`crate::replicated::Replicated`]) has a group; others ignore it.
    fn group_fault(&mut self, _now: u64, _fault: GroupFault) {}
    /// What the replication group went through, if there is one.
    fn replication_stats(&self) -> Option<crate::replicated::ReplicationStats> {
        None
    }
    /// `Some(its clock)` if a replication group's host may answer `msg`, a read, without
    /// logging it (`server/unlogged.rs`); `None` for every message of a protocol without
    /// that.
    fn unlogged_read(&self, _msg: &Self::Msg) -> Option<u64> {
        None
    }
    /// Executes a message [`TxnServer::unlogged_read`] accepted.
    fn execute_unlogged(&mut self, now: u64, msg: Self::Msg) {
        self.on_message(now, msg);
    }
    /// Around a logged input on a host that answers reads unlogged: what to log just
    /// before the input, so that a replay runs it as the host did.
    fn begin_logged(&mut self) {}
    fn end_logged(&mut self) -> Option<Self::Msg> {
        None
    }
    /// The note to log before answering an unlogged read at clock `clk`, if the promises
    /// logged so far do not cover it (a promise [`crate::replicated::FLOOR_AHEAD`] past it).
    fn floor_promise_for(&self, _clk: u64) -> Option<Self::Msg> {
        None
    }
    /// The note a new host logs first: it applies every promise so far.
    fn floor_applied_note(&self) -> Option<Self::Msg> {
        None
    }
}

/// What a server holds, for tests that its state stays bounded.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Footprint {
    /// Transaction records (every state a transaction keeps here).
    pub records: usize,
    /// Versions, over every key, that the server still holds in full.
    pub versions: usize,
    /// Keys with state.
    pub keys: usize,
}

/// A fault of a shard's replication group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GroupFault {
    /// The primary is replaced; the new one's log holds the first `keep` of the inputs
    /// that had not committed yet.
    Failover { keep: usize },
    /// Every replica crashes at once and restarts from its disk.
    TotalCrash,
}

/// The protocols the simulator runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ProtocolKind {
    /// NCC, with the read-only protocol unless the options say NCC-RW.
    Ncc,
    /// Distributed OCC: execute, then prepare (validate reads, lock writes), then commit:
    /// three rounds, the last asynchronous.
    Docc,
    /// Distributed two-phase locking, a refused lock aborts; execute and prepare merged:
    /// two rounds.
    D2plNoWait,
    /// Distributed two-phase locking where an older transaction wounds (aborts) a younger
    /// holder and a younger one waits: execute, prepare, commit.
    D2plWoundWait,
    /// TAPIR's concurrency control (its Figure 10's validation plus the third check its
    /// authors disclosed): serializable, **not** strictly serializable (the paper's App. A).
    TapirCc,
}

impl ProtocolKind {
    pub const ALL: [ProtocolKind; 5] = [
        ProtocolKind::Ncc,
        ProtocolKind::Docc,
        ProtocolKind::D2plNoWait,
        ProtocolKind::D2plWoundWait,
        ProtocolKind::TapirCc,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ProtocolKind::Ncc => "ncc",
            ProtocolKind::Docc => "docc",
            ProtocolKind::D2plNoWait => "d2pl-no-wait",
            ProtocolKind::D2plWoundWait => "d2pl-wound-wait",
            ProtocolKind::TapirCc => "tapir-cc",
        }
    }

    pub fn parse(s: &str) -> Option<ProtocolKind> {
        Self::ALL.into_iter().find(|p| p.name() == s)
    }

    /// Whether it promises strict serializability (TAPIR-CC promises only serializability).
    pub fn strict(self) -> bool {
        self != ProtocolKind::TapirCc
    }
}

impl TxnClient for crate::Client {
    type Msg = crate::Msg;
    fn begin(&mut self, now: u64, ops: Vec<Op>, last: bool) {
        crate::Client::begin(self, now, ops, last);
    }
    fn next_shot(&mut self, now: u64, ops: Vec<Op>, last: bool) {
        crate::Client::next_shot(self, now, ops, last);
    }
    fn on_message(&mut self, now: u64, from: ServerId, msg: crate::Msg) {
        crate::Client::on_message(self, now, from, msg);
    }
    fn tick(&mut self, now: u64) {
        crate::Client::tick(self, now);
    }
    fn drain(&mut self) -> Vec<(ServerId, crate::Msg)> {
        crate::Client::drain(self)
    }
    fn events(&mut self) -> Vec<ClientEvent> {
        crate::Client::events(self)
    }
    fn idle(&self) -> bool {
        crate::Client::idle(self)
    }
    fn busy(&self) -> bool {
        crate::Client::busy(self)
    }
    fn tick_every(&self) -> u64 {
        self.resend_after / 2
    }
    fn stats(&self) -> ClientStats {
        self.stats
    }
    fn restarted(&self, gap: u64) -> Self {
        crate::Client::restarted(self, gap)
    }
}

impl<S: crate::Store> TxnServer for crate::Server<S> {
    type Msg = crate::Msg;
    fn on_message(&mut self, now: u64, msg: crate::Msg) {
        crate::Server::on_message(self, now, msg);
    }
    fn drain(&mut self) -> Vec<(ClientId, crate::Msg)> {
        crate::Server::drain(self)
    }
    fn check_invariants(&self) -> Result<(), String> {
        crate::Server::check_invariants(self)
    }
    fn committed_versions(&self) -> Vec<(Key, Vec<Value>)> {
        crate::Server::committed_versions(self)
    }
    fn undecided(&self) -> Vec<TxnId> {
        crate::Server::undecided(self)
    }
    fn describe_waits(&self) -> String {
        crate::Server::describe_waits(self)
    }
    fn admits(&self, msg: &crate::Msg) -> bool {
        crate::Server::admits(self, msg)
    }
    fn starts_work(&self, msg: &crate::Msg) -> bool {
        crate::Server::starts_work(self, msg)
    }
    fn drain_peers(&mut self) -> Vec<(ServerId, crate::Msg)> {
        crate::Server::drain_peers(self)
    }
    fn tick_every(&self) -> Option<u64> {
        self.recovery_period().filter(|_| self.has_timers())
    }
    fn tick(&mut self, now: u64) {
        crate::Server::tick(self, now);
    }
    fn committed_effects(&self) -> Vec<(TxnId, Effects)> {
        crate::Server::committed_effects(self)
    }
    fn decisions(&self) -> Vec<(TxnId, bool)> {
        crate::Server::decisions(self)
    }
    fn footprint(&self) -> Footprint {
        crate::Server::footprint(self)
    }
    fn unlogged_read(&self, msg: &crate::Msg) -> Option<u64> {
        crate::Server::unlogged_read(self, msg)
    }
    fn execute_unlogged(&mut self, now: u64, msg: crate::Msg) {
        crate::Server::execute_unlogged(self, now, msg);
    }
    fn begin_logged(&mut self) {
        crate::Server::begin_logged(self);
    }
    fn end_logged(&mut self) -> Option<crate::Msg> {
        crate::Server::end_logged(self)
    }
    fn floor_promise_for(&self, clk: u64) -> Option<crate::Msg> {
        crate::Server::floor_promise_for(self, clk)
    }
    fn floor_applied_note(&self) -> Option<crate::Msg> {
        Some(crate::Msg::Group(crate::GroupNote::FloorApplied))
    }
}
