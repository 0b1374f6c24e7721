//! One Lazy VSR replica as a state machine: fed messages, the passing of virtual time and
//! the completion of disk syncs; it answers with actions (send, write, sync) that the
//! caller carries out. It owns the application and calls it directly: executing and
//! undoing are in-memory and deterministic, and the primary needs an operation's reply
//! before it can answer the client.
//!
//! The handlers live by protocol phase: `normal.rs` (§4.2.3), `view_change.rs` (§4.2.5),
//! `catch_up.rs` (§4.2.6), `disk.rs` (flushes, syncs, checkpoints, recovery, §4.2.4).

mod catch_up;
mod disk;
mod lease;
mod log;
mod normal;
mod recovery;
mod view_change;

pub use lease::LEASE_DRIFT_DIVISOR;

use std::collections::{BTreeMap, VecDeque};

pub use disk::{DiskWrite, Durable};

use crate::app::App;
use crate::client_table::ClientTable;
use crate::message::{Message, Request};
use crate::types::{Address, ReplicaId, ViewNum, Viewstamp, REPLICAS_MAX};
use log::Log;

/// The message type of a replica of `A`.
pub type MessageOf<A> = Message<<A as App>::Op, <A as App>::Reply, <A as App>::Snapshot>;
/// The action type of a replica of `A`.
pub type ActionOf<A> = Action<<A as App>::Op, <A as App>::Reply, <A as App>::Snapshot>;

/// What the caller must do for the replica.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action<O, R, S> {
    /// Deliver a message (best effort: the protocol tolerates loss, duplication, reordering).
    Send {
        to: Address,
        message: Message<O, R, S>,
    },
    /// Apply a write to the disk, after every write before it. It need not be durable
    /// until a later `Sync` completes; a crash may lose it, or keep a prefix of it.
    ///
    /// A [`DiskWrite::Checkpoint`] is the exception, because the application may write a
    /// whole copy of its state beside the log for it: the disk may take its time, letting
    /// later `Sync`s and the writes [`DiskWrite::may_pass_checkpoint`] names go ahead of it
    /// (appends, views, and truncations that keep what it covers; any other write waits,
    /// and everything after that), and calls
    /// [`Replica::handle_checkpoint_durable`] once the checkpoint is durable. A `Sync`
    /// that went ahead of it says nothing about it.
    Write(DiskWrite<O, R, S>),
    /// Make every earlier write durable (a checkpoint still being written aside), then
    /// call [`Replica::handle_synced`] with `id`. Syncs complete in the order they were
    /// asked for.
    Sync { id: u64 },
}

/// Lazy VSR, or the thesis's baseline VSR-Sync: the same protocol with every entry on
/// disk before a replica acknowledges it (§4.1.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mode {
    Lazy,
    Sync,
}

/// Mistakes the thesis warns about, reintroduced one at a time to show the simulator and
/// the model checker catch them. Not for use outside tests.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mistake {
    /// Vote for a candidate whose log is at least as long, comparing op numbers instead of
    /// viewstamps (pitfall 17, Fig 4-1).
    LongestLogWins,
    /// PREPAREOK reports `opMax` where it must report `diskOpMax` (pitfall 20).
    PrepareOkCarriesOpMax,
    /// The candidate sends ELECTPREPARE without first writing its new view number to disk
    /// (pitfall 18): after a crash it can reuse the view number.
    ViewNotPersisted,
    /// Undo information is dropped for everything applied, not just up to `dp` (pitfall 21).
    UndoDroppedAboveDp,
    /// The ELECTPREPARE comparison as the appendix prints it: vote for a candidate whose
    /// `opMax` is at most the voter's (pitfall 28).
    ElectPrepareAsPrinted,
    /// A restarted Lazy VSR replica votes at once, as the thesis has it, instead of staying
    /// amnesiac until it recovered (`replica::recovery`): with a lagging replica it elects a
    /// leader without an acknowledged operation.
    RestartedReplicaVotes,
    /// A replica that promised a primary its read lease votes and campaigns anyway
    /// (`replica::lease`): two primaries answer reads at once, one of them stale.
    LeaseIgnored,
}

/// A replica's settings. Times are in the caller's units of virtual time (milliseconds in
/// the simulator and the server).
#[derive(Clone, Debug)]
pub struct Config {
    /// 2f+1 replicas; at most [`REPLICAS_MAX`].
    pub replica_count: u8,
    pub mode: Mode,
    /// An idle primary's heartbeat period.
    pub heartbeat_interval: u64,
    /// A backup that hears no acceptable PREPARE or heartbeat for this long, plus a random
    /// part below `view_change_jitter`, starts a view change (the thesis: three seconds
    /// plus a short random interval).
    pub view_change_timeout: u64,
    pub view_change_jitter: u64,
    /// A candidate or elected leader that has not finished by then gives up and tries a
    /// higher view.
    pub election_timeout: u64,
    /// How long a replica waits for a catch-up reply before asking again.
    pub catch_up_timeout: u64,
    /// Read leases (`lease.rs`; 0: none). A replica that accepts a PREPARE or HEARTBEAT
    /// from its view's primary, or sends one as that primary, promises to vote for no
    /// other leader for this long on its own clock. The primary may then answer reads
    /// from its own state, without a round to the others, until a majority's promises end
    /// (each counted for the shorter of its giver's and the primary's `lease`, less
    /// [`LEASE_DRIFT_DIVISOR`]'s share).
    pub lease: u64,
    /// Requests per log entry (the primary's batch).
    pub batch_requests_max: usize,
    /// Entries proposed and not yet committed (the primary's pipeline).
    pub pipeline_max: u64,
    /// Requests waiting for a slot in the pipeline; more are dropped (the client retries).
    pub request_queue_max: usize,
    /// Entries per background disk write (the thesis's double buffer holds 100 MB).
    pub flush_entries_max: usize,
    /// Entries accepted but not on disk before a replica stops accepting (the
    /// double-buffer stall, pitfall 24).
    pub unflushed_entries_max: usize,
    /// Entries per catch-up reply.
    pub catch_up_entries_max: usize,
    /// Operation bytes ([`App::op_bytes`]) per PREPARE entry and per catch-up reply: a
    /// transport limits a message's size. A single larger request or entry still goes, alone,
    /// so the application bounds one operation's size below the transport's limit.
    pub message_bytes_max: usize,
    /// A checkpoint every this many entries (0: never; the log then grows without bound).
    pub checkpoint_interval: u64,
    /// Clients remembered for at-most-once execution.
    pub clients_max: usize,
    /// Seeds the replica's randomness (the view-change jitter).
    pub seed: u64,
    #[doc(hidden)]
    pub mistake: Option<Mistake>,
}

impl Config {
    /// Defaults for `replica_count` replicas, times in milliseconds.
    pub fn new(replica_count: u8) -> Config {
        Config {
            replica_count,
            mode: Mode::Lazy,
            heartbeat_interval: 100,
            view_change_timeout: 3000,
            view_change_jitter: 500,
            election_timeout: 1000,
            catch_up_timeout: 200,
            lease: 0,
            batch_requests_max: 256,
            pipeline_max: 32,
            request_queue_max: 8192,
            flush_entries_max: 4096,
            unflushed_entries_max: 65536,
            catch_up_entries_max: 256,
            message_bytes_max: usize::MAX,
            checkpoint_interval: 100_000,
            clients_max: 65536,
            seed: 0,
            mistake: None,
        }
    }

    /// f+1.
    pub fn quorum(&self) -> usize {
        usize::from(self.replica_count) / 2 + 1
    }

    /// What a majority has reached: the quorum-th largest of `values` (one per replica).
    pub(crate) fn quorum_reached<T: Ord + Copy>(&self, values: &[T]) -> T {
        let mut v = values[..usize::from(self.replica_count)].to_vec();
        v.sort_unstable_by(|a, b| b.cmp(a));
        v[self.quorum() - 1]
    }

    /// Checks the settings; the server validates user configuration with this before it
    /// builds a replica (whose constructor panics on a configuration this rejects).
    pub fn validate(&self) -> Result<(), String> {
        let n = usize::from(self.replica_count);
        if n == 0 || n > REPLICAS_MAX || n % 2 == 0 {
            return Err(format!(
                "replica_count must be odd, 1 to {REPLICAS_MAX} (2f+1), got {n}"
            ));
        }
        let positive = [
            ("batch_requests_max", self.batch_requests_max as u64),
            ("pipeline_max", self.pipeline_max),
            ("flush_entries_max", self.flush_entries_max as u64),
            ("catch_up_entries_max", self.catch_up_entries_max as u64),
            ("message_bytes_max", self.message_bytes_max as u64),
            ("clients_max", self.clients_max as u64),
            ("heartbeat_interval", self.heartbeat_interval),
            ("election_timeout", self.election_timeout),
            ("catch_up_timeout", self.catch_up_timeout),
        ];
        if let Some((name, _)) = positive.iter().find(|(_, v)| *v == 0) {
            return Err(format!("{name} must be at least 1"));
        }
        if self.unflushed_entries_max < self.flush_entries_max {
            return Err("unflushed_entries_max must be at least flush_entries_max".into());
        }
        if self.lease != 0 && self.lease <= 2 * self.heartbeat_interval {
            // Renewed by each heartbeat round, a shorter lease would lapse between rounds
            // and reads would fall back to rounds most of the time, silently.
            return Err(format!(
                "lease must be 0 (off) or above twice heartbeat_interval ({} ms), got {}",
                2 * self.heartbeat_interval,
                self.lease
            ));
        }
        if self.heartbeat_interval >= self.view_change_timeout {
            return Err("heartbeat_interval must be below view_change_timeout".into());
        }
        Ok(())
    }
}

/// Counters for tests, the simulator and `INFO replication`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub messages_sent: BTreeMap<&'static str, u64>,
    pub view_changes_started: u64,
    pub views_led: u64,
    pub entries_applied: u64,
    pub entries_undone: u64,
    pub catch_ups: u64,
    pub state_transfers_sent: u64,
    pub state_transfers_installed: u64,
    pub checkpoints: u64,
    pub stalls: u64,
    /// Restarts that ended their amnesia by catching up from a primary (`recovery`).
    pub amnesia_recovered: u64,
}

/// The replica's role in its view.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Role {
    Backup,
    /// Asked for votes in its own view.
    Candidate,
    /// Elected; bringing a majority's logs to its own before leading.
    Elected,
    Primary,
}

/// A request the primary executed, waiting for its entry to commit (or to be durable).
#[derive(Clone, Debug)]
struct PendingReply<R> {
    client: u64,
    seq: u64,
    result: R,
    sync: bool,
}

/// The primary's state for its view.
///
/// Invariants: `acked[i]` and `disk[i]` are viewstamps of this view or `ZERO`;
/// `commit <= log.op_max()`; every key of `replies` is above `start.op`.
#[derive(Clone, Debug)]
struct Leader<O, R> {
    /// The view's first entry.
    start: Viewstamp,
    /// Per replica, the last entry it holds in memory, and on disk (reported this view).
    acked: [Viewstamp; REPLICAS_MAX],
    disk: [Viewstamp; REPLICAS_MAX],
    /// Per replica, the durable point it has adopted.
    known_dp: [Viewstamp; REPLICAS_MAX],
    /// The last entry a majority holds in memory.
    commit: Viewstamp,
    queue: VecDeque<Request<O>>,
    replies: BTreeMap<u64, Vec<PendingReply<R>>>,
    heartbeat_at: u64,
    /// Per replica, the send time (the primary's clock) of the newest PREPARE or HEARTBEAT
    /// it acknowledged in this view (it promised at receipt, later) and how long it
    /// promises (`lease.rs`).
    lease_acked: [(u64, u64); REPLICAS_MAX],
}

#[derive(Clone, Debug)]
enum Status<O, R> {
    Backup,
    Candidate {
        votes: u32,
        deadline: u64,
    },
    Elected {
        accepts: u32,
        deadline: u64,
        resend_at: u64,
    },
    Primary(Box<Leader<O, R>>),
}

/// Something to do once a sync completes (and if the view is still the same).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Deferred {
    SendElectPrepare { view: ViewNum },
    ElectPrepareOk { to: ReplicaId, view: ViewNum },
    ElectAcceptOk { to: ReplicaId, view: ViewNum },
}

/// A sync asked for and not yet complete: what the disk holds once it is.
#[derive(Clone, Copy, Debug)]
struct PendingSync {
    id: u64,
    tail: Viewstamp,
    view: ViewNum,
}

/// One replica. See the module documentation.
#[derive(Clone)]
pub struct Replica<A: App> {
    id: ReplicaId,
    config: Config,
    app: A,
    clients: ClientTable<A::Reply>,
    /// The thesis's `v`: the highest view seen. Never decreases; on disk before any
    /// message that depends on it leaves (`view_durable`).
    view: ViewNum,
    view_durable: ViewNum,
    /// The view last handed to the disk.
    view_written: ViewNum,
    status: Status<A::Op, A::Reply>,
    /// Every entry here is applied to `app` (the application reflects `log.op_max()`).
    log: Log<A::Op>,
    /// The durable point and the primary's minimum of every replica's (§4.2.2). `dp` is in
    /// `log`: it is never truncated (Theorem 4.3.3).
    dp: Viewstamp,
    dp_min: Viewstamp,
    /// Entries up to this op have been handed to the disk (not necessarily synced).
    written_through: u64,
    /// The thesis's `diskOpMax`: the last entry of the log on disk, synced.
    disk_op_max: Viewstamp,
    syncs: VecDeque<PendingSync>,
    next_sync_id: u64,
    /// The background flush's sync, if one is in flight (one at a time: double buffering).
    background_sync: Option<u64>,
    deferred: Vec<(u64, Deferred)>,
    /// The `ap` of the checkpoint being written (at most one at a time).
    checkpoint_pending: Option<Viewstamp>,
    last_checkpoint_op: u64,
    now: u64,
    view_change_at: u64,
    /// When a catch-up may be sent again (`None`: none outstanding).
    catch_up_retry_at: Option<u64>,
    /// The last PREPAREOK sent: (view, op_max, disk_op_max).
    last_ack: Option<(ViewNum, Viewstamp, Viewstamp)>,
    rng: u64,
    /// Restarted with its memory lost and not recovered yet (`recovery`): no votes, no
    /// campaigns.
    amnesia: Option<recovery::Amnesia>,
    /// Until then (this replica's clock) it votes for no new leader and starts no view
    /// change: it promised a primary its lease (`lease.rs`). A replica starts promised,
    /// since it may have promised before a crash it does not remember.
    promised_until: u64,
    /// The send time carried by the newest PREPARE or HEARTBEAT accepted from this view's
    /// primary, echoed in PREPAREOK.
    lease_heard: (ViewNum, u64),
    actions: VecDeque<ActionOf<A>>,
    stats: Stats,
}

impl<A: App> Replica<A> {
    /// A replica of a new group, with an empty log and disk.
    ///
    /// # Panics
    /// If `config.validate()` fails or `id` is not below `config.replica_count`.
    pub fn new(id: ReplicaId, config: Config, app: A, now: u64) -> Self {
        if let Err(e) = config.validate() {
            panic!("invalid replica configuration: {e}");
        }
        assert!(id < config.replica_count);
        let clients = ClientTable::new(config.clients_max);
        let mut r = Replica {
            id,
            rng: config.seed ^ (u64::from(id) + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15),
            config,
            app,
            clients,
            view: ViewNum::ZERO,
            view_durable: ViewNum::ZERO,
            view_written: ViewNum::ZERO,
            status: Status::Backup,
            log: Log::new(),
            dp: Viewstamp::ZERO,
            dp_min: Viewstamp::ZERO,
            written_through: 0,
            disk_op_max: Viewstamp::ZERO,
            syncs: VecDeque::new(),
            next_sync_id: 1,
            background_sync: None,
            deferred: Vec::new(),
            checkpoint_pending: None,
            last_checkpoint_op: 0,
            now,
            view_change_at: 0,
            catch_up_retry_at: None,
            last_ack: None,
            amnesia: None,
            promised_until: 0,
            lease_heard: (ViewNum::ZERO, 0),
            actions: VecDeque::new(),
            stats: Stats::default(),
        };
        r.promised_until = now.saturating_add(r.config.lease);
        r.reset_view_change_timer();
        r
    }

    pub fn id(&self) -> ReplicaId {
        self.id
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    pub fn app(&self) -> &A {
        &self.app
    }

    pub fn view(&self) -> ViewNum {
        self.view
    }

    /// The last entry in memory (`opMax`).
    pub fn op_max(&self) -> Viewstamp {
        self.log.op_max()
    }

    /// The last entry on disk, synced (`diskOpMax`).
    pub fn disk_op_max(&self) -> Viewstamp {
        self.disk_op_max
    }

    pub fn dp(&self) -> Viewstamp {
        self.dp
    }

    pub fn dp_min(&self) -> Viewstamp {
        self.dp_min
    }

    /// The entry just before the log's first in memory (the ones up to it were folded into
    /// a checkpoint).
    pub fn log_base(&self) -> Viewstamp {
        self.log.base()
    }

    /// The primary's commit point (`None` unless primary).
    pub fn commit(&self) -> Option<Viewstamp> {
        match &self.status {
            Status::Primary(l) => Some(l.commit),
            _ => None,
        }
    }

    /// The primary's knowledge of each replica's `diskOpMax` in this view, from their
    /// PREPAREOKs, indexed by replica id (`None` unless primary). What Redis's `WAIT`
    /// counts: replicas holding an entry on disk.
    pub fn replica_disk_ops(&self) -> Option<&[Viewstamp]> {
        match &self.status {
            Status::Primary(l) => Some(&l.disk[..usize::from(self.config.replica_count)]),
            _ => None,
        }
    }

    pub fn role(&self) -> Role {
        match self.status {
            Status::Backup => Role::Backup,
            Status::Candidate { .. } => Role::Candidate,
            Status::Elected { .. } => Role::Elected,
            Status::Primary(_) => Role::Primary,
        }
    }

    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    pub fn clients(&self) -> &ClientTable<A::Reply> {
        &self.clients
    }

    /// The viewstamp of op `op` if this replica's log knows it.
    pub fn stamp(&self, op: u64) -> Option<Viewstamp> {
        self.log.stamp(op)
    }

    /// The entry numbered `op`, if this replica's in-memory log holds it.
    pub fn entry(&self, op: u64) -> Option<&crate::message::Entry<A::Op>> {
        self.log.entry(op)
    }

    /// The first op number whose entry the in-memory log holds.
    pub fn log_start(&self) -> u64 {
        self.log.base().op + 1
    }

    /// The next action to carry out, if any.
    pub fn poll_action(&mut self) -> Option<ActionOf<A>> {
        self.actions.pop_front()
    }

    /// When [`Replica::handle_timeout`] next has something to do.
    pub fn poll_timeout(&self) -> u64 {
        let mut t = match &self.status {
            Status::Backup => self.view_change_at,
            Status::Candidate { deadline, .. } => *deadline,
            Status::Elected {
                deadline,
                resend_at,
                ..
            } => (*deadline).min(*resend_at),
            Status::Primary(l) => l.heartbeat_at,
        };
        if let Some(at) = self.catch_up_retry_at {
            t = t.min(at);
        }
        if let Some(a) = &self.amnesia {
            t = t.min(a.ask_at);
        }
        t
    }

    /// A message arrived from `from`.
    pub fn handle_message(&mut self, now: u64, from: Address, message: MessageOf<A>) {
        self.advance(now);
        let sender = match from {
            Address::Replica(r) if r < self.config.replica_count => Some(r),
            Address::Replica(_) => return,
            Address::Client(_) => None,
        };
        match (message, sender) {
            (Message::Request { request, ev }, None) => self.on_request(request, ev),
            (
                Message::Prepare {
                    view,
                    entries,
                    dp,
                    dp_min,
                    lease,
                },
                Some(s),
            ) => self.on_prepare(s, view, entries, dp, dp_min, lease),
            (
                Message::PrepareOk {
                    view,
                    op_max,
                    disk_op_max,
                    dp,
                    lease,
                    lease_length,
                },
                Some(s),
            ) => self.on_prepare_ok(s, view, op_max, disk_op_max, dp, (lease, lease_length)),
            (
                Message::Heartbeat {
                    view,
                    op_max,
                    dp,
                    dp_min,
                    lease,
                },
                Some(s),
            ) => self.on_heartbeat(s, view, op_max, dp, dp_min, lease),
            (
                Message::ElectPrepare {
                    view,
                    op_max,
                    restarted,
                },
                Some(s),
            ) => self.on_elect_prepare(s, view, op_max, restarted),
            (Message::ElectPrepareOk { view }, Some(s)) => self.on_elect_prepare_ok(s, view),
            (Message::ElectAccept { view, op_max }, Some(s)) => {
                self.on_elect_accept(s, view, op_max)
            }
            (Message::ElectAcceptOk { view }, Some(s)) => self.on_elect_accept_ok(s, view),
            (
                Message::Recovering {
                    nonce,
                    ask,
                    view,
                    op_max,
                },
                Some(s),
            ) => self.on_recovering(s, nonce, ask, view, op_max),
            (
                Message::RecoveringReply {
                    nonce,
                    ask,
                    view,
                    op_max,
                    primary,
                    restarted,
                },
                Some(s),
            ) => {
                let answer = recovery::Answer {
                    ask,
                    view,
                    op_max,
                    primary,
                    restarted,
                };
                self.on_recovering_reply(s, nonce, answer)
            }
            (Message::CatchUp { view, op_max }, Some(s)) => self.on_catch_up(s, view, op_max),
            (
                Message::CatchUpReply {
                    view,
                    op_max,
                    lower_bound,
                    entries,
                    more,
                    dp,
                    dp_min,
                },
                Some(s),
            ) => self.on_catch_up_reply(s, view, op_max, lower_bound, entries, more, dp, dp_min),
            (
                Message::CatchUpState {
                    view,
                    op_max,
                    snapshot,
                    dp,
                    dp_min,
                },
                Some(s),
            ) => self.on_catch_up_state(s, view, op_max, snapshot, dp, dp_min),
            // Client-bound messages, or replica messages from a client: ignored.
            _ => {}
        }
        self.end_amnesia_if_caught_up();
        self.check_invariants();
    }

    /// Virtual time passed: fire whatever is due.
    pub fn handle_timeout(&mut self, now: u64) {
        self.advance(now);
        if self.catch_up_retry_at.is_some_and(|at| at <= now) {
            self.catch_up_retry_at = None;
            self.request_catch_up();
        }
        if self.amnesia.as_ref().is_some_and(|a| a.ask_at <= now) {
            self.ask_who_leads();
        }
        if self.promised() {
            // It may not campaign before its promise to a primary ends (`lease`).
            let until = self.promised_until;
            match &mut self.status {
                Status::Backup => self.view_change_at = self.view_change_at.max(until),
                Status::Candidate { deadline, .. } | Status::Elected { deadline, .. } => {
                    *deadline = (*deadline).max(until)
                }
                Status::Primary(_) => {}
            }
        }
        match &self.status {
            Status::Backup if self.view_change_at <= now && !self.amnesia_allows_campaign() => {
                self.reset_view_change_timer(); // it does not campaign (`recovery`)
            }
            Status::Backup if self.view_change_at <= now => self.start_view_change(),
            Status::Candidate { deadline, .. } if *deadline <= now => self.start_view_change(),
            Status::Elected { deadline, .. } if *deadline <= now => self.start_view_change(),
            Status::Elected { resend_at, .. } if *resend_at <= now => self.resend_elect_accept(),
            Status::Primary(l) if l.heartbeat_at <= now => self.send_heartbeat(),
            _ => {}
        }
        self.check_invariants();
    }

    fn advance(&mut self, now: u64) {
        assert!(now >= self.now, "time went backwards: {now} < {}", self.now);
        self.now = now;
    }

    fn send(&mut self, to: Address, message: MessageOf<A>) {
        assert_ne!(
            to,
            Address::Replica(self.id),
            "a replica handles its own part locally"
        );
        *self.stats.messages_sent.entry(message.kind()).or_default() += 1;
        self.actions.push_back(Action::Send { to, message });
    }

    fn send_to_others(&mut self, message: MessageOf<A>) {
        for r in 0..self.config.replica_count {
            if r != self.id {
                self.send(Address::Replica(r), message.clone());
            }
        }
    }

    fn random(&mut self) -> u64 {
        // SplitMix64: the replica's only randomness, seeded by the configuration.
        self.rng = self.rng.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn reset_view_change_timer(&mut self) {
        let jitter = match self.config.view_change_jitter {
            0 => 0,
            j => self.random() % j,
        };
        self.view_change_at = self.now + self.config.view_change_timeout + jitter;
    }

    fn quorum(&self) -> usize {
        self.config.quorum()
    }

    /// Hashes the protocol state: everything that decides future behaviour except virtual
    /// time (deadlines count only as set or not) and statistics. A model checker treats two
    /// replicas with equal fingerprints as the same state.
    #[doc(hidden)]
    pub fn fingerprint<H: std::hash::Hasher>(&self, h: &mut H)
    where
        A: std::hash::Hash,
    {
        use std::hash::Hash;
        self.id.hash(h);
        self.app.hash(h);
        self.clients.hash(h);
        (self.view, self.view_durable, self.view_written).hash(h);
        match &self.status {
            Status::Backup => 0u8.hash(h),
            Status::Candidate { votes, .. } => (1u8, votes).hash(h),
            Status::Elected { accepts, .. } => (2u8, accepts).hash(h),
            Status::Primary(l) => {
                3u8.hash(h);
                (l.start, l.acked, l.disk, l.known_dp, l.commit).hash(h);
                l.queue.hash(h);
                for (op, list) in &l.replies {
                    op.hash(h);
                    for p in list {
                        (p.client, p.seq, &p.result, p.sync).hash(h);
                    }
                }
            }
        }
        self.log.hash(h);
        (self.dp, self.dp_min, self.written_through, self.disk_op_max).hash(h);
        for s in &self.syncs {
            (s.id, s.tail, s.view).hash(h);
        }
        (self.next_sync_id, self.background_sync).hash(h);
        self.deferred.hash(h);
        (self.checkpoint_pending, self.last_checkpoint_op).hash(h);
        self.catch_up_retry_at.is_some().hash(h);
        self.amnesia.hash(h);
    }

    /// Moves to a higher view learned from a message, as a backup (the spec's "learn").
    fn learn_view(&mut self, view: ViewNum) {
        self.raise_view(view);
        self.reset_view_change_timer();
    }

    /// Moves to a higher view without hearing from its leader (a refused ELECTPREPARE): the
    /// view-change timer keeps running, so a candidate that cannot win does not keep the
    /// others from electing one that can (a primary that steps down campaigns at once).
    fn raise_view(&mut self, view: ViewNum) {
        assert!(view > self.view);
        self.view = view;
        self.status = Status::Backup;
        self.catch_up_retry_at = None;
        // The view goes to disk before this replica says anything in it.
        self.flush(true);
    }

    /// Checked after every handler (TigerBeetle's `invariants()`): cheap, always on.
    fn check_invariants(&self) {
        assert!(self.view_durable <= self.view_written && self.view_written <= self.view);
        assert!(self.log.contains(self.dp), "dp {} not in the log", self.dp);
        assert!(self.dp_min <= self.dp);
        assert!(self.dp <= self.log.op_max());
        assert!(self.written_through <= self.log.op_max().op);
        assert!(self.disk_op_max.op <= self.written_through.max(self.disk_op_max.op));
        match &self.status {
            Status::Primary(l) => {
                assert_eq!(self.view.leader(), self.id);
                assert!(l.commit <= self.log.op_max());
                assert!(l.queue.len() <= self.config.request_queue_max);
            }
            Status::Candidate { .. } | Status::Elected { .. } => {
                assert_eq!(self.view.leader(), self.id)
            }
            Status::Backup => {}
        }
    }
}

/// How many of `items` fit in `bytes_max` bytes as `size` counts them: at least one (a
/// larger one goes alone), none only if there are none.
pub(crate) fn count_within<T>(
    items: impl Iterator<Item = T>,
    bytes_max: usize,
    size: impl Fn(&T) -> usize,
) -> usize {
    let mut bytes = 0usize;
    let mut n = 0;
    for item in items {
        bytes = bytes.saturating_add(size(&item));
        if n > 0 && bytes > bytes_max {
            break;
        }
        n += 1;
    }
    n
}
