//! The Redis protocol in front of NCC's replicated shard groups (issue 19 item 1, first
//! part): a client that speaks RESP sends GET, SET, MGET, MSET, INCR, DEL, MULTI/EXEC with
//! WATCH, ... to a gateway, and each command, or each EXEC, runs as **one strictly
//! serializable NCC transaction, whatever groups its keys live in** (no `CROSSSLOT`). The
//! gateway is the coordinator the paper puts in the client: it runs NCC's client state
//! machine, so the groups (`verso txn-server --replica`) see it as one client process.
//!
//! Start at `plan.rs` (a request as a transaction: read-only in one round, blind writes in
//! one shot, read-modify-write in two), then `conn.rs` (one connection's state machine:
//! MULTI, WATCH, the connection commands) and `coordinator.rs` (plans run on a pool of
//! protocol clients). `server.rs` is the event loop over the client sockets that drives
//! both; `command.rs` parses the data commands, `value.rs` is a value's stored form.
//!
//! Keys are placed by Redis Cluster's hash slots (`verso_ncc::client::Placement::Slots`).
//! Strings only, for now: no expiry, no other types, no key listing (`KEYS`, `SCAN`,
//! `DBSIZE`); the Redis-protocol server's data model runs over the engine alone.

pub mod command;
pub mod conn;
pub mod coordinator;
pub mod plan;
pub mod server;
pub mod value;
