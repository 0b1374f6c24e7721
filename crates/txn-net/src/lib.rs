//! NCC and its baselines between real processes (issue 19, first part): the state machines
//! of `verso-ncc`, unchanged, driven by threads and TCP instead of the simulator.
//!
//! - [`server`]: one shard server process; a thread per connection reads frames, one
//!   protocol thread owns the state machine (so it stays single-threaded, as the
//!   simulator runs it), feeds it messages and its timers, and writes what it answers.
//! - [`client`]: a pool of protocol clients (each coordinates its own transactions, as the
//!   paper puts the coordinator in the client) sharing one connection per server.
//! - [`load`]: an open-loop load driver over pools (arrivals at a target rate, as the
//!   paper's clients send), which records the history for `verso_ncc::check`.
//! - [`local`]: starts a cluster of server processes on loopback for benchmarks and tests.
//! - [`session`]: a blocking transaction API (`get`, `put`, multi-shot `transact`) for an
//!   application thread, its coordinator in the application's process.
//!
//! - [`engine_store`]: an NCC server's decided versions as engine versions (issue 18 item
//!   3), run by the simulator (`tests/engine_store_sim.rs`, `verso sim ncc --store engine`).
//!
//! - [`group`]: a shard served by a replication group of three processes, each a Lazy VSR
//!   replica whose log holds the server's inputs; the replica that leads hosts the server
//!   and answers only once an input is committed (by default, on a majority's disks).
//!   [`local_groups`] starts such groups on loopback and kills and restarts replicas.
//!
//! Not yet here (issue 19's later items): the shards are not the cluster's slots
//! (`verso serve --cluster` does not run NCC).

pub mod client;
pub mod engine_store;
pub mod frame;
pub mod group;
pub mod load;
pub mod local;
pub mod local_groups;
pub mod server;
pub mod session;

use std::time::{SystemTime, UNIX_EPOCH};

use verso_ncc::baseline::{BaselineClient, BaselineServer, Flavor};
use verso_ncc::{Client, ClientId, ProtocolKind, Server};

/// Where an NCC server keeps its decided versions (`verso txn-server --store`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum StoreKind {
    /// A map in the server process (`verso_ncc::MemStore`).
    #[default]
    Memory,
    /// Verso's engine ([`engine_store::EngineStore`]): committed versions are engine
    /// versions at their `t_w`.
    Engine,
}

impl StoreKind {
    pub fn parse(s: &str) -> Option<StoreKind> {
        match s {
            "memory" => Some(StoreKind::Memory),
            "engine" => Some(StoreKind::Engine),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            StoreKind::Memory => "memory",
            StoreKind::Engine => "engine",
        }
    }
}

/// The protocol a cluster runs (`--txn-protocol`, issue 19 item 4): every server and
/// client of a run agree on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    /// NCC; `read_only`: with its one-round read-only protocol (NCC-RW without).
    Ncc {
        read_only: bool,
    },
    Baseline(Flavor),
}

impl Protocol {
    pub const NAMES: [&'static str; 6] = [
        "ncc",
        "ncc-rw",
        "docc",
        "d2pl-no-wait",
        "d2pl-wound-wait",
        "tapir-cc",
    ];

    pub fn parse(s: &str) -> Option<Protocol> {
        match s {
            "ncc" => Some(Protocol::Ncc { read_only: true }),
            "ncc-rw" => Some(Protocol::Ncc { read_only: false }),
            other => match ProtocolKind::parse(other)? {
                ProtocolKind::Ncc => None,
                ProtocolKind::Docc => Some(Protocol::Baseline(Flavor::Docc)),
                ProtocolKind::D2plNoWait => Some(Protocol::Baseline(Flavor::D2plNoWait)),
                ProtocolKind::D2plWoundWait => Some(Protocol::Baseline(Flavor::D2plWoundWait)),
                ProtocolKind::TapirCc => Some(Protocol::Baseline(Flavor::TapirCc)),
            },
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Protocol::Ncc { read_only: true } => "ncc",
            Protocol::Ncc { read_only: false } => "ncc-rw",
            Protocol::Baseline(Flavor::Docc) => "docc",
            Protocol::Baseline(Flavor::D2plNoWait) => "d2pl-no-wait",
            Protocol::Baseline(Flavor::D2plWoundWait) => "d2pl-wound-wait",
            Protocol::Baseline(Flavor::TapirCc) => "tapir-cc",
        }
    }

    /// Whether it promises strict serializability (TAPIR-CC only serializability).
    pub fn strict(self) -> bool {
        self != Protocol::Baseline(Flavor::TapirCc)
    }

    fn ncc_server<S: verso_ncc::Store>(
        store: S,
        id: u32,
        recovery_after_us: u64,
        keep_history: bool,
    ) -> Server<S> {
        let limits = verso_ncc::MessageLimits {
            request_bytes_max: frame::REQUEST_BYTES_MAX,
            reply_bytes_max: frame::REPLY_BYTES_MAX,
        };
        let server = Server::with_store(verso_ncc::Mistakes::default(), store)
            .with_recovery(id, recovery_after_us)
            .with_message_limits(limits);
        if keep_history {
            server
        } else {
            server.without_history()
        }
    }

    /// NCC's client `id` among `servers`, resending what goes unanswered after `resend_us`.
    pub fn ncc_client(id: ClientId, servers: u32, read_only: bool, resend_us: u64) -> Client {
        let mut c = Client::new(id, servers);
        c.read_only_protocol = read_only;
        c.resend_after = resend_us;
        c
    }

    fn baseline_server(flavor: Flavor, keep_history: bool) -> BaselineServer {
        let server = BaselineServer::new(flavor);
        if keep_history {
            server
        } else {
            server.without_history()
        }
    }

    /// A baseline's client `id` among `servers`.
    pub fn baseline_client(id: ClientId, servers: u32, flavor: Flavor) -> BaselineClient {
        BaselineClient::new(id, servers, flavor)
    }
}

/// Microseconds since the Unix epoch: the clock every process of a run reads (one
/// machine, so one clock; NCC's asynchrony-aware timestamps need no agreement anyway).
pub fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0)
}
