//! The paper's baselines (§6, digest §4 and pitfall 14), on NCC's interfaces and simulator:
//! dOCC, d2PL-no-wait, d2PL-wound-wait and TAPIR-CC. As the paper runs them, each one's
//! coordinator lives in the client, commit is asynchronous (the client answers its
//! application once the outcome is certain and sends the decision afterwards), and
//! d2PL-no-wait and TAPIR-CC merge execute with prepare.
//!
//! | protocol | rounds (read-write) | what a server does |
//! |---|---|---|
//! | dOCC | execute, prepare, commit | reads return the newest committed version; prepare validates each read (unchanged, not write-locked) and locks it shared, and locks each write exclusive, refusing rather than waiting |
//! | d2PL-no-wait | execute+prepare, commit | every request takes its lock as it executes; a lock held by another aborts the transaction |
//! | d2PL-wound-wait | execute, prepare, commit | as above, but an older transaction (smaller timestamp, kept across retries) wounds a younger unprepared holder and a younger one waits |
//! | TAPIR-CC | execute (earlier shots' reads), execute+prepare, commit | Figure 10's timestamp validation, plus the disclosed third check: a write aborts if another write to its key is prepared |
//!
//! One client type ([`BaselineClient`]) and one server type ([`BaselineServer`]) serve all
//! four, set by a [`Flavor`]: the protocols share the message shapes, the lock table, the
//! resend and idempotence machinery, and differ in what a server checks and when.

mod client;
mod server;

pub use client::BaselineClient;
pub use server::BaselineServer;

use crate::types::{Finished, Key, Op, Ts, TxnId, Value};

/// Which baseline.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Flavor {
    Docc,
    D2plNoWait,
    D2plWoundWait,
    TapirCc,
}

impl Flavor {
    /// Writes travel with the execute requests and take their locks then (d2PL), rather
    /// than being buffered at the client until prepare (dOCC, TAPIR-CC).
    fn locks_at_execute(self) -> bool {
        matches!(self, Flavor::D2plNoWait | Flavor::D2plWoundWait)
    }
}

/// A version of a key: its position in the key's committed versions (0: the initial one),
/// counting those a server no longer holds.
pub type Version = u64;

impl BMsg {
    /// The transaction the message is about.
    pub fn txn(&self) -> TxnId {
        match self {
            BMsg::Execute { txn, .. }
            | BMsg::ExecReply { txn, .. }
            | BMsg::Prepare { txn, .. }
            | BMsg::PrepareReply { txn, .. }
            | BMsg::Decide { txn, .. }
            | BMsg::DecideAck { txn } => *txn,
        }
    }
}

/// Messages between baseline clients and servers.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum BMsg {
    /// Client → server: run one shot's requests on this server. dOCC and TAPIR-CC send only
    /// reads (writes wait at the client for prepare); d2PL sends both, and each takes its
    /// lock.
    Execute {
        txn: TxnId,
        ts: Ts,
        shot: u32,
        ops: Vec<Op>,
        /// The client's finished transactions (as NCC's `Msg::Execute::done`).
        done: Finished,
    },
    /// Server → client: every request of the shot done (`ok`), with each read's value and
    /// version in the shot's order; or the transaction is aborted here.
    ExecReply {
        txn: TxnId,
        shot: u32,
        ok: bool,
        reads: Vec<(Key, Value, Version)>,
    },
    /// Client → server, after the last shot: validate and lock (dOCC), confirm the locks
    /// are still held (d2PL-wound-wait), or execute the last shot's reads and validate at
    /// `ts` (TAPIR-CC). `reads` are the earlier reads with the versions they returned;
    /// `execute` the reads to run now (TAPIR-CC's merged last shot).
    Prepare {
        txn: TxnId,
        ts: Ts,
        reads: Vec<(Key, Version)>,
        writes: Vec<(Key, Value)>,
        execute: Vec<Key>,
        /// As on `Execute` (TAPIR-CC's one-shot transactions send no `Execute`).
        done: Finished,
    },
    /// Server → client: the vote; for TAPIR-CC the reads of `execute`, and on a refusal
    /// the smallest timestamp that could pass (its RETRY).
    PrepareReply {
        txn: TxnId,
        ok: bool,
        reads: Vec<(Key, Value, Version)>,
        retry_above: Option<Ts>,
    },
    /// Client → server: the outcome, sent until acknowledged.
    Decide {
        txn: TxnId,
        commit: bool,
    },
    DecideAck {
        txn: TxnId,
    },
}
