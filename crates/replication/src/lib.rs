//! Lazy VSR (`verso-vsr`) run for real: the engine as the replicated application
//! (`app.rs`), the replica's disk (`disk.rs`) with its checkpoints (`checkpoint.rs`),
//! state transfer to a replica that lost its disk (`state_transfer.rs`), authenticated TCP
//! between replicas (`transport.rs`), and the thread that ties them to the protocol
//! (`node.rs`). The server talks to it through [`Replication`]: its commits fill slots,
//! its replies wait on tickets.

mod app;
mod checkpoint;
pub mod config;
pub mod disk;
#[doc(hidden)]
pub mod fuzzing;
mod node;
pub mod op;
mod shared;
mod state_transfer;
pub mod status;
pub mod transport;

pub use config::{ClusterConfig, ReplicaAddr};
pub use node::{Node, NodeOptions};
pub use shared::{Replication, SyncHold, Ticket, TicketState};
pub use status::{PeerStatus, Status};
