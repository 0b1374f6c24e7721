//! Lazy Viewstamped Replication (Yandong Mao's thesis, chapter 4), free of I/O.
//!
//! A [`Replica`] acknowledges an operation once it holds it in memory and writes its log to
//! disk lazily in the background; the group still recovers a prefix of what it
//! acknowledged after every replica crashes at once, rolling back (with the application's
//! undo information) whatever a replica applied that the group forgot. The replica is a
//! state machine in the quinn-proto style: [`Replica::handle_message`],
//! [`Replica::handle_timeout`], [`Replica::handle_synced`] and
//! [`Replica::handle_checkpoint_durable`] feed it, and
//! [`Replica::poll_action`] drains what to send and write. No threads, sockets, clocks or
//! global randomness: time is a parameter and randomness a seed, so a simulator can drive
//! it deterministically (`verso-vsr-sim`).
//!
//! ```
//! use verso_vsr::{Config, Replica, kv::KvApp};
//! let mut r = Replica::new(0, Config::new(3), KvApp::new(), 0);
//! assert!(r.poll_action().is_none()); // a backup with nothing to do yet
//! ```

pub mod app;
pub mod client;
pub mod client_table;
pub mod kv;
pub mod message;
pub mod op_log;
mod replica;
pub mod sim_disk;
pub mod types;

pub use app::App;
pub use client::{Client, ClientEvent};
pub use message::{Body, Entry, Message, Request, Snapshot};
pub use replica::{
    Action, ActionOf, Config, DiskWrite, Durable, MessageOf, Mistake, Mode, Replica, Role, Stats,
    LEASE_DRIFT_DIVISOR,
};
pub use types::{Address, ClientId, ReplicaId, ViewNum, Viewstamp, REPLICAS_MAX};
