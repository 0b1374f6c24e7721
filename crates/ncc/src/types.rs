//! Timestamps, identifiers and the messages between clients and servers.

/// A transaction's timestamp: the client's clock reading and its id as tie-breaker (§5.3).
/// Ordered by `clk`, then `cid`; `(clk, cid)` names one transaction attempt, because each
/// client's `clk` strictly increases from attempt to attempt.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Ts {
    pub clk: u64,
    pub cid: ClientId,
}

pub type ClientId = u32;
pub type ServerId = u32;
/// Byte strings (`crate::byte_string`); the simulator makes each write's value unique, so a read
/// names the write it saw.
pub use crate::byte_string::{Key, Value};

/// One attempt of one transaction: a retry is a new attempt with a new timestamp, and the
/// servers treat it as a new transaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TxnId {
    pub client: ClientId,
    /// Numbered per client from 1, attempts included.
    pub seq: u64,
}

/// The transactions one incarnation of a client has finished, as it names them on its
/// requests: every one numbered in `from..below` is decided, and the decision acknowledged
/// by every server it reached (or it was read-only and answered).
///
/// `from` is the incarnation's first number. A process that takes over a client id numbers
/// its transactions above every number the id's previous holder used, but it knows nothing
/// of that holder's transactions: a mark "everything below" would declare finished one the
/// holder died inside, and servers would then refuse the backup coordinator's questions
/// about it, leaving it undecided for good. So each incarnation speaks only for its own
/// numbers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Finished {
    pub from: u64,
    pub below: u64,
}

/// A request on one key.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Op {
    Read(Key),
    Write(Key, Value),
    /// Read the key and write a new value in its place, in one request at one point of
    /// the key's order: a server-side read-modify-write (a TPC-C "piece" such as the
    /// district's next order number). The value is the client's (unique, so a read names
    /// its write); what the request returns is the value it replaced.
    ReadWrite(Key, Value),
}

impl Op {
    pub fn read(key: impl Into<Key>) -> Op {
        Op::Read(key.into())
    }

    pub fn write(key: impl Into<Key>, value: impl Into<Value>) -> Op {
        Op::Write(key.into(), value.into())
    }

    pub fn read_write(key: impl Into<Key>, value: impl Into<Value>) -> Op {
        Op::ReadWrite(key.into(), value.into())
    }

    pub fn key(&self) -> &Key {
        match self {
            Op::Read(k) | Op::Write(k, _) | Op::ReadWrite(k, _) => k,
        }
    }

    /// Whether it writes (a write, or a read-write).
    pub fn is_write(&self) -> bool {
        matches!(self, Op::Write(..) | Op::ReadWrite(..))
    }

    /// Whether it returns a value (a read, or a read-write).
    pub fn reads(&self) -> bool {
        matches!(self, Op::Read(_) | Op::ReadWrite(..))
    }

    /// The bytes of its key and the value it writes, together: what message limits count
    /// (`crate::MessageLimits::request_bytes_max`).
    pub fn bytes(&self) -> usize {
        self.key().len() + self.written().map_or(0, Value::len)
    }

    /// The value it writes.
    pub fn written(&self) -> Option<&Value> {
        match self {
            Op::Write(_, v) | Op::ReadWrite(_, v) => Some(v),
            Op::Read(_) => None,
        }
    }
}

/// What one executed request returns: the value read (or `None` for a write) and the pair
/// `(t_w, t_r)` of the version it read or wrote: the transaction may be serialized anywhere
/// in `[t_w, t_r]` as far as this request is concerned (a write's pair is one point).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct OpReply {
    pub value: Option<Value>,
    pub tw: Ts,
    pub tr: Ts,
}

/// A server's answer to one request of an execute message.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ExecResult {
    Done(OpReply),
    /// Not executed: it would wait behind an undecided request with a higher timestamp
    /// (early abort, §5.2's prose; Lemma 3).
    EarlyAbort,
    /// Not executed: a read-only transaction's view of this server is stale (§5.5).
    RoAbort,
}

/// Messages between clients and servers.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Msg {
    /// Client → server: run `ops` (the transaction's requests on this server) at `ts`.
    /// `t_ro` is set for a read-only transaction: the server's version number through which
    /// every version was decided, as this client last heard (a deviation from the paper's
    /// `t_w`, which is unsound: `Server::execute_read_only`).
    Execute {
        txn: TxnId,
        ts: Ts,
        /// Numbered from 1; a multi-shot transaction's later shots depend on earlier reads.
        shot: u32,
        ops: Vec<Op>,
        t_ro: Option<u64>,
        /// The transaction's backup coordinator (App. D): one of its servers, the same for
        /// every request.
        coord: ServerId,
        /// On the last shot: every server of the transaction (the cohorts). The last shot
        /// goes to each of them, with no requests where it has none there, so every cohort
        /// learns that the client's shots are complete (a record that never learns it
        /// stays uncleared and would be aborted unilaterally by the backup).
        cohorts: Option<Vec<ServerId>>,
        /// This client's finished transactions: a server forgets their records and ignores
        /// their late duplicates (`Server::forget_finished`); without it a server's memory
        /// grows with every transaction it ever saw.
        done: Finished,
    },
    /// Server → client: a last shot without requests here arrived; `ok` false if the
    /// transaction is aborted here (its backup coordinator may have aborted it while the
    /// client was away).
    LastShotAck {
        txn: TxnId,
        ok: bool,
    },
    /// Server → client: the results of requests of `txn` (each by its index among the
    /// transaction's requests at this server) that response timing control released
    /// together, in one message. `ts_server` is the server's clock when it executed the
    /// requests (for the client's asynchrony-aware timestamps); `latest` the version number
    /// through which every version is decided here (read-only transactions' `t_ro`).
    ExecReply {
        txn: TxnId,
        results: Vec<(u32, ExecResult)>,
        ts_server: u64,
        latest: u64,
    },
    /// Client → server: move every version `txn` touched here to `to` (smart retry, §5.4).
    SmartRetry {
        txn: TxnId,
        to: Ts,
    },
    SmartRetryReply {
        txn: TxnId,
        ok: bool,
    },
    /// Client → server: the decision. Sent asynchronously (the client answers its
    /// application at once), and again until acknowledged: a lost one would leave the
    /// transaction's versions undecided for ever.
    Decide {
        txn: TxnId,
        commit: bool,
    },
    DecideAck {
        txn: TxnId,
    },
    /// Cohort → backup coordinator: my recovery timer fired and my record is cleared;
    /// find the outcome (App. D's `resolve_status_coord`).
    Resolve {
        txn: TxnId,
        from: ServerId,
    },
    /// Backup coordinator → cohort: send me your record (`get_record`).
    GetRecord {
        txn: TxnId,
        from: ServerId,
    },
    Record {
        txn: TxnId,
        from: ServerId,
        record: RecordState,
    },
    /// Backup coordinator → cohort: smart retry on the client's behalf; the outcome
    /// recorded per (transaction, server) makes it agree with the client's own.
    RecoverRetry {
        txn: TxnId,
        to: Ts,
        from: ServerId,
    },
    RecoverRetryReply {
        txn: TxnId,
        from: ServerId,
        ok: bool,
    },
    /// Written into a replication group's log by its host, never sent over a network
    /// (a server drops a connection that sends one): what replaying the log needs to
    /// know of the reads the host answered without logging them (`replicated/unlogged.rs`).
    Group(GroupNote),
}

/// What a group's host logs about the read-only reads it answers without logging them
/// (`replicated/unlogged.rs`, ARCHITECTURE.md "Reads outside the log").
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum GroupNote {
    /// Logged just before the input it was made for: the `t_r` the newest version of each
    /// key had on the host before that input ran, where unlogged reads may have raised it
    /// (a replay raises them too, so the input refines its writes as it did on the host).
    ReadsRaised(Vec<(Key, Ts)>),
    /// The host will answer unlogged reads with timestamps up to this clock (a promise that
    /// a later host keeps with [`GroupNote::FloorApplied`]).
    FloorPromised(u64),
    /// A new host's first input: from here on every write goes above every clock promised
    /// before it, so no write lands below a read an earlier host answered unlogged.
    FloorApplied,
}

impl Msg {
    /// The transaction the message is about (none for a [`Msg::Group`] note).
    pub fn txn(&self) -> Option<TxnId> {
        Some(match self {
            Msg::Execute { txn, .. }
            | Msg::LastShotAck { txn, .. }
            | Msg::ExecReply { txn, .. }
            | Msg::SmartRetry { txn, .. }
            | Msg::SmartRetryReply { txn, .. }
            | Msg::Decide { txn, .. }
            | Msg::DecideAck { txn }
            | Msg::Resolve { txn, .. }
            | Msg::GetRecord { txn, .. }
            | Msg::Record { txn, .. }
            | Msg::RecoverRetry { txn, .. }
            | Msg::RecoverRetryReply { txn, .. } => *txn,
            Msg::Group(_) => return None,
        })
    }
}

/// A cohort's record of a read-write transaction, as the backup coordinator asks for it
/// (App. D).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RecordState {
    /// Some request has not arrived or not been answered: the client cannot have decided
    /// to commit.
    Uncleared,
    /// Every request of every shot answered: the `(t_w, t_r)` pairs the safeguard takes
    /// (a read-modify-write's read left out).
    Cleared(Vec<(Ts, Ts)>),
    Committed,
    /// Aborted here, or never heard of (now refused here: it can never be answered).
    Aborted,
}

/// What a committed transaction read and wrote at one server.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Effects {
    pub reads: Vec<(Key, Value)>,
    pub writes: Vec<(Key, Value)>,
}
