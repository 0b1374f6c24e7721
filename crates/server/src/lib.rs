//! `verso-server`: Verso behind the Redis protocol (issue "Verso server"; in progress).
//!
//! * [`resp`]: RESP2/RESP3 framing, free of I/O (fuzzed by `fuzz/fuzz_targets/resp_parse.rs`).
//! * [`session`]: one connection's state machine and command dispatch, free of I/O.
//! * [`keyspace`]: the data commands on one engine transaction.
//! * [`glob`]: Redis's glob patterns for KEYS and SCAN MATCH.
//!
//! Not built yet: the TCP server (`verso serve`), its configuration, limits on clients and
//! output buffers, INFO memory, the metrics endpoint, and the wire-level test suites.

pub mod config;
pub mod glob;
pub mod keyspace;
pub mod resp;
pub mod server;
pub mod session;
