//! NCC, Natural Concurrency Control (Lu, Mu, Sen, Lloyd, OSDI 2023; `../shared/seeds/ncc.txt`,
//! digest `../shared/notes/seed-003-ncc.md`), as state machines free of I/O: a
//! [`Server`] holds the data of one shard and a [`Client`] coordinates its transactions.
//! Both are fed messages and the time, and answer with messages to send; the simulator
//! ([`sim`]) drives them under lost, reordered and duplicated messages and skewed clocks,
//! the model checker ([`explore`]) enumerates every schedule of small configurations, and
//! [`check`] proves each run strictly serializable from its recorded history.
//!
//! What the protocol does, in one paragraph: a client pre-assigns each transaction a
//! timestamp `(clk, cid)` from its clock plus what it measured of each server's lead
//! (asynchrony-aware, §5.3), and sends every request at once. Servers execute requests in
//! arrival order without locks, *refining* the timestamp to one that fits what the key has
//! seen (a write goes after the newest read, a read raises the version's `t_r`), and hold
//! each response in a per-key queue until the requests before it are decided (response
//! timing control, D1-D3): that is what keeps real-time order, which timestamp order alone
//! loses (the timestamp-inversion pitfall, §4). The client commits if the `(t_w, t_r)`
//! pairs it got back overlap (the safeguard), or if the servers can move them to a common
//! point (smart retry); otherwise it aborts and starts again with a new timestamp. A
//! request that would wait behind an undecided one with a higher timestamp is aborted
//! early (liveness, Lemma 3). Read-only transactions take one round and send no commit.
//!
//! Keys and values are byte strings ([`Key`], [`Value`]); the empty value is every key's
//! initial value.
//!
//! What is built so far (issue 18, part 1): read-write transactions of one or more shots
//! (a later shot may write back a key an earlier one read: read-modify-write) and one-shot
//! read-only transactions, with every piece above; and the paper's baselines ([`baseline`]:
//! dOCC, d2PL-no-wait, d2PL-wound-wait, TAPIR-CC) behind the same [`protocol`] traits, so
//! one simulator, workload ([`workload`]) and checker serve all five; and client failure,
//! handled by a backup coordinator among each transaction's servers (App. D; the server's
//! `recovery` module); and each server's state behind a modelled replication log
//! ([`replicated`]), so the simulator shows what failovers and total crashes of a shard's
//! group do to it. Running it over the real Lazy VSR groups of the cluster is not yet built.

pub mod baseline;
mod byte_string;
pub mod check;
pub mod client;
mod decisions;
pub mod explore;
mod finished;
pub mod protocol;
pub mod replicated;
pub mod server;
pub mod sim;
pub mod store;
mod types;
pub mod wire;
pub mod workload;

pub use client::{Client, ClientEvent, ClientStats, Outcome};
pub use protocol::{GroupFault, ProtocolKind, TxnClient, TxnServer};
pub use server::{MessageLimits, Mistakes, Server};
pub use store::{MemStore, Store, Stored};
pub use types::{
    ClientId, Effects, ExecResult, Finished, GroupNote, Key, Msg, Op, OpReply, RecordState,
    ServerId, Ts, TxnId, Value,
};
