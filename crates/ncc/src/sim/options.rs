//! What a simulator run is told ([`SimOptions`]) and what it reports ([`SimStats`]).

use crate::client::ClientStats;
use crate::protocol::ProtocolKind;
use crate::replicated::{ReplicationModel, ReplicationStats};
use crate::server::Mistakes;
use crate::store::Store;
use crate::types::ServerId;
use crate::workload::{Workload, F1_WRITES_PER_100K};

/// Open loop: arrivals a client holds behind the transaction it runs before it sheds
/// (as `verso bench txn`'s driver).
pub const OPEN_LOOP_BACKLOG: usize = 4;

/// What one run does.
#[derive(Clone, Debug)]
pub struct SimOptions {
    pub seed: u64,
    pub servers: u32,
    pub clients: u32,
    pub keys: u64,
    pub txns_per_client: usize,
    /// Requests per transaction, at most.
    pub ops_max: usize,
    /// Percent of transactions that only read.
    pub read_only_percent: u64,
    /// One-way message delay, in microseconds of virtual time.
    pub delay_min: u64,
    pub delay_max: u64,
    pub duplicate_percent: u64,
    /// Percent of messages lost (the clients send again after a timeout).
    pub loss_percent: u64,
    /// Each clock is off real time by up to this many microseconds, either way.
    pub skew_max: u64,
    pub protocol: ProtocolKind,
    /// What the clients run (`keys`, `ops_max` and `read_only_percent` shape `Mixed`;
    /// `F1` has its own).
    pub workload: Workload,
    pub mistakes: Mistakes,
    /// Percent of clients that crash once, at a random moment, and never come back; and
    /// percent that pause once (their messages lost, their timers stopped) for twice the
    /// recovery timeout, so the backup coordinator steps in while they live (Figure 8c).
    pub crash_percent: u64,
    pub pause_percent: u64,
    /// A crashed client comes back, as a new process taking over its id would, before the
    /// recovery timeout: numbering its transactions above the dead one's, knowing nothing
    /// of them, and running the rest of the dead one's share (the crashed transaction is
    /// lost). Its requests must not keep the backup coordinator from deciding what the dead
    /// one left (`Finished`).
    pub restart_crashed: bool,
    /// NCC's recovery timeout (App. D), in microseconds of each server's clock; `None`:
    /// no backup coordinator.
    pub recovery_after: Option<u64>,
    /// NCC-RW: transactions without writes run as read-write ones (no §5.5 protocol).
    pub ncc_rw: bool,
    /// Each server's inputs go through a modelled replication log before its outputs
    /// leave ([`crate::replicated`]); `None`: a server that never fails.
    pub replication: Option<ReplicationModel>,
    /// With `replication`: per server, failovers of its group and total crashes of it, at
    /// random moments over a run's usual length.
    pub group_failovers: u32,
    pub group_total_crashes: u32,
    /// F1's read-write transactions per 100,000 (the paper's 300; Google-WF sweeps it up
    /// to 30,000).
    pub f1_writes_per_100k: u64,
    /// TPC-C's warehouses per server (the paper's 8; at most 256 in all).
    pub tpcc_warehouses_per_server: u32,
    /// A server's CPU per protocol message it receives or sends, in microseconds (`None`:
    /// servers are infinitely fast, the default for correctness runs). With it each server
    /// is one processor: messages wait their turn in arrival order and a server's answers
    /// leave when it is done, so throughput saturates and latency grows as on real
    /// machines (issue 19 item 7; calibrated by `verso bench txn`'s `cpu µs` column).
    pub server_cost_us: Option<u64>,
    /// How long clients wait for an answer before sending again (`None`: their default,
    /// 10 ms). With a cost model and no loss, a longer wait keeps resends from piling onto
    /// a busy server (a real TCP client's messages are not lost either).
    pub resend_after_us: Option<u64>,
    /// Open loop: transactions arrive at this many per simulated second over all clients
    /// (Poisson, each client its share), wait at their client behind the one it runs (at
    /// most [`OPEN_LOOP_BACKLOG`], the rest shed and counted), and their latency counts from
    /// arrival. `None`: closed loop, each client starts its next when one commits. The
    /// paper's clients are open-loop; closed-loop ones pile retries on an overloaded system.
    pub open_loop_rate: Option<u64>,
    /// Where NCC's servers keep their decided versions (`store.rs`): `None`, a
    /// [`crate::MemStore`] each; otherwise what this makes per server (`verso-txn-net`'s
    /// engine store: `verso sim ncc --store engine`). Not with `replication`, whose model
    /// copies a server's whole state.
    pub store: Option<StoreFactory>,
    /// The mixed workload's keys as text (`user:N`, of several lengths, some prefixes of
    /// others) instead of numbers: servers are then chosen by the keys' hash, as for an
    /// application's keys (`crate::client::shard_of`).
    pub text_keys: bool,
    /// Print every event (for replaying one seed).
    pub trace: bool,
}

/// Makes a server's [`Store`] (`SimOptions::store`).
pub type StoreFactory = fn(ServerId) -> Box<dyn Store>;

impl SimOptions {
    pub fn new(seed: u64) -> SimOptions {
        SimOptions {
            seed,
            servers: 3,
            clients: 4,
            keys: 8,
            txns_per_client: 30,
            ops_max: 3,
            read_only_percent: 30,
            delay_min: 50,
            delay_max: 2_000,
            duplicate_percent: 5,
            loss_percent: 2,
            skew_max: 500,
            protocol: ProtocolKind::Ncc,
            workload: Workload::Mixed,
            mistakes: Mistakes::default(),
            crash_percent: 0,
            pause_percent: 0,
            restart_crashed: false,
            recovery_after: Some(200_000),
            ncc_rw: false,
            replication: None,
            group_failovers: 0,
            group_total_crashes: 0,
            f1_writes_per_100k: F1_WRITES_PER_100K,
            tpcc_warehouses_per_server: 1,
            server_cost_us: None,
            resend_after_us: None,
            open_loop_rate: None,
            store: None,
            text_keys: false,
            trace: false,
        }
    }
}

/// What a run did.
#[derive(Clone, Debug, Default)]
pub struct SimStats {
    pub committed: u64,
    /// Runs whose history is serializable but not strictly (counted for TAPIR-CC, which
    /// promises no more; for the others it fails the run).
    pub strict_violations: u64,
    pub clients: ClientStats,
    pub messages: u64,
    pub lost: u64,
    pub end_time_us: u64,
    /// Clients crashed and paused, and transactions their backup coordinator committed
    /// that no client reported.
    pub crashed: u64,
    pub paused: u64,
    pub recovered_commits: u64,
    /// Crashed clients that came back (`SimOptions::restart_crashed`).
    pub restarted: u64,
    /// Summed over the servers' replication groups (zero without replication).
    pub replication: ReplicationStats,
    /// With a cost model: each committed transaction's latency (first begin to commit,
    /// simulated µs), and the commits in each run's steady middle (10th to 90th percentile
    /// of completion times) with that span's simulated length, for throughput.
    pub latencies_us: Vec<u64>,
    pub steady_commits: u64,
    pub simulated_us: u64,
    /// Open loop: arrivals shed because their client's backlog was full.
    pub shed: u64,
    /// What the servers held at the end, summed (zeros for a protocol that does not say).
    pub held: crate::protocol::Footprint,
}

impl SimStats {
    pub fn add(&mut self, o: &SimStats) {
        self.committed += o.committed;
        self.clients.add(&o.clients);
        self.strict_violations += o.strict_violations;
        self.messages += o.messages;
        self.lost += o.lost;
        self.end_time_us = self.end_time_us.max(o.end_time_us);
        self.crashed += o.crashed;
        self.paused += o.paused;
        self.recovered_commits += o.recovered_commits;
        self.restarted += o.restarted;
        self.latencies_us.extend_from_slice(&o.latencies_us);
        self.steady_commits += o.steady_commits;
        self.simulated_us += o.simulated_us;
        self.shed += o.shed;
        self.held.records += o.held.records;
        self.held.versions += o.held.versions;
        self.held.keys += o.held.keys;
        let (r, q) = (&mut self.replication, &o.replication);
        r.inputs_committed += q.inputs_committed;
        r.failovers += q.failovers;
        r.total_crashes += q.total_crashes;
        r.uncommitted_lost += q.uncommitted_lost;
        r.committed_lost += q.committed_lost;
        r.reads_unlogged += q.reads_unlogged;
        r.read_notes += q.read_notes;
        r.floor_promises += q.floor_promises;
    }
}
