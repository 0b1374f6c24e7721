//! The protocol's messages and log entries (thesis §4.2.3-§4.2.6, Appendix A).
//!
//! Names follow the thesis's prose; the TLA+ specification's names are given where they
//! differ (`ElectAccept` is the spec's `ElectSync`, `Body::ViewStart` its `NonRequest`).
//! Every message is generic over the application's operation `O`, reply `R` and
//! snapshot `S` (see [`crate::App`]).

use crate::types::{ClientId, ViewNum, Viewstamp};

/// One client operation as the log carries it: the client table needs `client` and `seq`
/// on every replica (thesis §4.4.2), and `sync` travels so that a new primary still knows
/// which replies wait for the disk.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Request<O> {
    pub client: ClientId,
    /// The client's sequence number, 1, 2, 3, ... one outstanding request at a time.
    pub seq: u64,
    pub op: O,
    /// Reply only once the operation is durable (on a majority's disks), not just committed.
    pub sync: bool,
}

/// What a log entry holds.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum Body<O> {
    /// A batch of client requests, executed in order under one viewstamp (the primary
    /// batches requests into PREPAREs, thesis §4.4.3).
    Requests(Vec<Request<O>>),
    /// The first entry of a view: the thesis's ELECTACCEPT, which "consumes a viewstamp"
    /// (Fig 4-3), proposed as the spec's `NonRequest` entry once the view is decided. Every
    /// replica writes it to disk before acknowledging it (Lemma 4.3.6).
    ViewStart,
}

/// A log entry: the spec's `<vs, prev vs, request>`. `prev` names the entry before it, so a
/// viewstamp determines the whole log up to it (Lemma 4.3.2).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Entry<O> {
    pub vs: Viewstamp,
    pub prev: Viewstamp,
    pub body: Body<O>,
}

impl<O> Entry<O> {
    /// The operation bytes this entry carries, as [`App::op_bytes`](crate::App::op_bytes)
    /// counts them.
    pub fn op_bytes<A: crate::App<Op = O>>(&self) -> usize {
        match &self.body {
            Body::Requests(rs) => rs.iter().map(|r| A::op_bytes(&r.op)).sum(),
            Body::ViewStart => 0,
        }
    }
}

/// A message between replicas, or between a client and a replica.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum Message<O, R, S> {
    // ---- client and primary (§4.2.3) ----
    /// `<op, ev>`: `ev` is the view the client believes current; a primary in another view
    /// answers `WrongView`, so a client never has a later operation executed after an
    /// earlier one was forgotten (lost operations are a suffix).
    Request {
        request: Request<O>,
        ev: ViewNum,
    },
    /// The result, the operation's viewstamp, and the durable point: the client may forget
    /// cached operations at or below `dp`.
    Reply {
        client: ClientId,
        seq: u64,
        vs: Viewstamp,
        dp: Viewstamp,
        result: R,
    },
    /// From a primary whose view is not the client's `ev`. `last_seq` is the highest
    /// sequence number of the client's this primary's log holds: acknowledged requests
    /// above it were forgotten.
    WrongView {
        client: ClientId,
        view: ViewNum,
        last_seq: u64,
    },
    /// From a replica that is not the primary: the view it knows, so the client can find
    /// the primary.
    NotPrimary {
        client: ClientId,
        view: ViewNum,
    },
    /// A request older than the client's latest: it was executed; its reply is gone
    /// (§4.4.2, "the primary replies with an error").
    Stale {
        client: ClientId,
        seq: u64,
    },

    // ---- normal operation (§4.2.3) ----
    /// `<PREPARE vs, op, dp, dpMin>`, with consecutive entries pipelined in one message.
    Prepare {
        view: ViewNum,
        entries: Vec<Entry<O>>,
        dp: Viewstamp,
        dp_min: Viewstamp,
        /// The primary's clock when it sent this (read leases; 0 without them).
        lease: u64,
    },
    /// `<PREPAREOK diskOpMax>`: the sender holds every entry up to `op_max` in memory, and
    /// up to `disk_op_max` on disk (never `op_max`: the durable point comes from this).
    /// `dp` is the durable point the sender has adopted (the primary's `knownDp`).
    PrepareOk {
        view: ViewNum,
        op_max: Viewstamp,
        disk_op_max: Viewstamp,
        dp: Viewstamp,
        /// The `lease` of the newest PREPARE or HEARTBEAT the sender accepted in `view`:
        /// it promised the primary a lease from a moment after that.
        lease: u64,
        /// How long the sender promises (its `Config::lease`): replicas may be configured
        /// differently, and the primary counts no promise for longer than it lasts.
        lease_length: u64,
    },
    /// From an idle primary: keeps backups from starting a view change and carries the
    /// durable points; a backup behind `op_max` catches up.
    Heartbeat {
        view: ViewNum,
        op_max: Viewstamp,
        dp: Viewstamp,
        dp_min: Viewstamp,
        /// As PREPARE's.
        lease: u64,
    },

    // ---- view change (§4.2.5) ----
    ElectPrepare {
        view: ViewNum,
        op_max: Viewstamp,
        /// Not in the thesis: the candidate restarted and has not recovered (it campaigns
        /// under the waiver of `replica::recovery`). Fresher than any earlier answer, so an
        /// amnesiac voter counts the candidate by this.
        restarted: bool,
    },
    ElectPrepareOk {
        view: ViewNum,
    },
    /// The spec's `ElectSync`: the elected candidate's log ends at `op_max`; a replica
    /// whose log ends elsewhere catches up first.
    ElectAccept {
        view: ViewNum,
        op_max: Viewstamp,
    },
    ElectAcceptOk {
        view: ViewNum,
    },

    // ---- a restarted replica's recovery (not in the thesis; see `replica::recovery`) ----
    /// A Lazy VSR replica that restarted (its memory, and so possibly acknowledged
    /// operations, lost) asks who leads; `nonce` is fresh per restart, so only replies
    /// sent after it count.
    /// `view` is the asker's: a replica behind it moves up to it (as after a refused vote),
    /// so a restarted replica whose view got ahead of the group's is not left unable to
    /// hear any primary.
    Recovering {
        nonce: u64,
        /// Counts this restart's questions, so a late answer to an earlier one is known.
        ask: u64,
        view: ViewNum,
        /// The asker's log end: an amnesiac receiver counts the question as an answer
        /// saying the asker restarted.
        op_max: Viewstamp,
    },
    /// The answer: the sender's view and log end, whether it leads that view in normal
    /// operation, and whether it is itself a restarted replica that has not recovered.
    RecoveringReply {
        nonce: u64,
        ask: u64,
        view: ViewNum,
        op_max: Viewstamp,
        primary: bool,
        restarted: bool,
    },

    // ---- re-synchronization (§4.2.6) ----
    /// `<CATCHUP v, tailView>`: the sender's log ends at `op_max` (the spec sends the last
    /// viewstamp; with unique predecessors it names the whole log).
    CatchUp {
        view: ViewNum,
        op_max: Viewstamp,
    },
    /// `<CATCHUPOK v, vstMin, ops>`, echoing the requester's `op_max` so a stale reply is
    /// dropped. `lower_bound` is the largest viewstamp of the leader's log at or below it:
    /// if it is not `op_max` the requester truncates to it (rolling back what it applied),
    /// otherwise it appends `entries`.
    CatchUpReply {
        view: ViewNum,
        op_max: Viewstamp,
        lower_bound: Viewstamp,
        entries: Vec<Entry<O>>,
        /// The leader's log goes on after `entries` (they were cut at
        /// `catch_up_entries_max` or `message_bytes_max`): ask again.
        more: bool,
        dp: Viewstamp,
        dp_min: Viewstamp,
    },
    /// State transfer: the leader no longer has the log the requester needs (it was
    /// discarded after a checkpoint), so it sends its state as of `base`.
    CatchUpState {
        view: ViewNum,
        op_max: Viewstamp,
        snapshot: Snapshot<R, S>,
        dp: Viewstamp,
        dp_min: Viewstamp,
    },
}

/// The replicated state as of one log entry: the application's snapshot (state and undo
/// information) and the client table, with the viewstamps of the entries in it that may
/// still be rolled back. This is what a checkpoint writes and a state transfer sends.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Snapshot<R, S> {
    /// The thesis's `ap`: the last entry the state reflects.
    pub ap: Viewstamp,
    /// The viewstamps of the entries after `undo_base` up to `ap`, whose effects the
    /// application can still undo.
    pub tail: Vec<Viewstamp>,
    /// The durable point at the time: nothing at or below it can be undone.
    pub undo_base: Viewstamp,
    pub app: S,
    pub clients: crate::client_table::ClientTable<R>,
}

impl<O, R, S> Message<O, R, S> {
    /// A short name for traces and statistics.
    pub fn kind(&self) -> &'static str {
        match self {
            Message::Request { .. } => "request",
            Message::Reply { .. } => "reply",
            Message::WrongView { .. } => "wrong_view",
            Message::NotPrimary { .. } => "not_primary",
            Message::Stale { .. } => "stale",
            Message::Prepare { .. } => "prepare",
            Message::PrepareOk { .. } => "prepare_ok",
            Message::Heartbeat { .. } => "heartbeat",
            Message::ElectPrepare { .. } => "elect_prepare",
            Message::ElectPrepareOk { .. } => "elect_prepare_ok",
            Message::ElectAccept { .. } => "elect_accept",
            Message::ElectAcceptOk { .. } => "elect_accept_ok",
            Message::Recovering { .. } => "recovering",
            Message::RecoveringReply { .. } => "recovering_reply",
            Message::CatchUp { .. } => "catch_up",
            Message::CatchUpReply { .. } => "catch_up_reply",
            Message::CatchUpState { .. } => "catch_up_state",
        }
    }
}
