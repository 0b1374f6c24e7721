//! `verso-server`: Verso behind the Redis protocol (issue "Verso server"; in progress).
//!
//! * [`resp`]: RESP2/RESP3 framing, free of I/O (fuzzed by `fuzz/fuzz_targets/resp_parse.rs`).
//! * [`session`]: one connection's state machine and command dispatch, free of I/O.
//! * [`keyspace`]: the data commands on one engine transaction; [`stored`]: how a value is
//!   framed (kind, deadline); [`expiry`]: time to live and the active expirer.
//! * [`commands`]: the command table (Redis 7's metadata for every command served), behind
//!   COMMAND INFO, DOCS and GETKEYS.
//! * [`shards`]: Redis Cluster's hash slots over a fixed slot map (`--shards`): MOVED,
//!   CROSSSLOT and the CLUSTER answers.
//! * [`glob`]: Redis's glob patterns for KEYS and SCAN MATCH.
//! * [`config`]: `verso serve`'s settings (the TOML file and the flags over it).
//! * [`server`]: the listener, protected mode, and the accepting thread; `worker`: the pool of
//!   poll-loop threads that serve the connections (the only code here that does I/O).

pub mod collections;
pub mod commands;
pub mod config;
pub mod expiry;
#[doc(hidden)]
mod forward;
pub mod fuzzing;
pub mod glob;
pub mod hashes;
pub mod info;
pub mod keys;
pub mod keyspace;
pub mod lists;
pub mod metrics;
pub mod moves;
pub mod persistence;
pub mod resp;
pub mod server;
pub mod session;
pub mod sets;
mod shard_prober;
pub mod shards;
pub mod stored;
pub mod strings;
mod worker;
pub mod zsets;
