//! The replication thread: owns the `Replica`, feeds it the network, the clock, the disk's
//! syncs and this primary's commits, and carries out what it asks. All protocol logic is in
//! `verso-vsr`; this is the I/O around it (STYLE.md: quinn-proto's split).

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::mpsc::{channel, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use verso_engine::Db;
use verso_vsr::{Action, Address, Message, Replica, Request, Role};

use crate::app::{retract_unlogged, EngineApp, Local};
use crate::checkpoint::GcPin;
use crate::config::ClusterConfig;
use crate::disk::{self, DiskDone, DiskHandle, DiskJob};
use crate::op::{Batch, TxnWrites};
use crate::shared::Replication;
use crate::state_transfer::{self, Incoming, Outgoing, Payload};
use crate::status::{PeerStatus, Status};
use crate::transport::{Transport, TransportConfig};

/// Commits per batch (one VSR request).
const BATCH_TXNS_MAX: usize = 4096;
/// A round stops taking events after this long, so that timers (a primary's heartbeats)
/// and the actions the events produced (PREPAREOKs, disk writes) are not held back behind a
/// long queue of large messages: a primary silent for `view_change_timeout_ms` is replaced.
const EVENTS_ROUND_TIME_MAX: Duration = Duration::from_millis(20);
/// A checkpoint that is due waits while more than this many bytes of writes after the
/// durable point would be copied into its snapshot...
const CHECKPOINT_TAIL_BYTES_MAX: usize = 16 << 20;
/// ...for at most this long.
const CHECKPOINT_WAIT_MAX: Duration = Duration::from_secs(5);
/// A round of the replication thread longer than this is logged: a backup that handles no
/// message from its primary for `view_change_timeout_ms` starts a view change.
const ROUND_SLOW: Duration = Duration::from_millis(250);
/// Events handled before the thread looks at its timers and actions again.
const EVENTS_PER_ROUND_MAX: usize = 4096;
/// Own batches remembered for `WAIT` while some replica has not reported them on disk.
const OWN_OPS_MAX: usize = 1 << 16;
/// How often INFO's copy of the state is refreshed when nothing else changes.
const STATUS_EVERY: Duration = Duration::from_millis(50);

enum Event {
    /// A payload from a peer, not yet decoded.
    Peer(u8, Vec<u8>),
    Disk(Result<DiskDone, String>),
    Wake,
    Stop,
}

/// How to run one replica.
#[derive(Clone, Debug)]
pub struct NodeOptions {
    pub me: u8,
    pub cluster: ClusterConfig,
    /// Holds the replica's log (`vsr.log`).
    pub dir: PathBuf,
    /// Reply only once a commit is on a majority's disks (`--durability sync`).
    pub sync_replies: bool,
}

/// A running replica.
pub struct Node {
    shared: Arc<Replication>,
    events: Sender<Event>,
    thread: Option<JoinHandle<()>>,
}

impl Node {
    /// Recovers the replica's disk into `db` (which must be empty and memory-only: the
    /// replica's log is its durability), makes `db` send its commits here, connects to the
    /// peers and starts the replication thread.
    pub fn start(db: Arc<Db>, opts: NodeOptions) -> Result<Node, String> {
        let me = opts.me;
        let cluster = &opts.cluster;
        let Some(mine) = cluster.replicas.iter().find(|r| r.id == me) else {
            return Err(format!(
                "--replica {me}: the cluster file lists replicas 0..{}",
                cluster.replicas.len()
            ));
        };
        let (mut recovered, file, path) = disk::recover(&opts.dir)
            .map_err(|e| format!("replica log in {}: {e}", opts.dir.display()))?;
        let mut seed = [0u8; 8];
        getrandom::getrandom(&mut seed).map_err(|e| format!("no randomness: {e}"))?;
        let origin = u64::from_le_bytes(seed) | 1;
        let status = Status {
            replica: me,
            replicas: cluster.replicas.len() as u8,
            role: "backup",
            mode: match cluster.mode {
                crate::config::ModeName::Lazy => "lazy",
                crate::config::ModeName::Sync => "sync",
            },
            recovered_entries: recovered.disk.log.len() as u64,
            ..Status::default()
        };
        let shared = Arc::new(Replication::new(origin, status));
        db.set_commit_sink(shared.clone())
            .map_err(|e| e.to_string())?;
        let (events, rx) = channel::<Event>();
        {
            let tx = events.clone();
            shared.set_node_waker(move || {
                let _ = tx.send(Event::Wake);
            });
        }
        let peers = cluster
            .replicas
            .iter()
            .filter(|r| r.id != me)
            .map(|r| (r.id, r.peer))
            .collect();
        let tx = events.clone();
        let transport = Transport::start(
            TransportConfig::new(me, mine.peer, peers, cluster.secret.clone()),
            move |from, bytes| {
                let _ = tx.send(Event::Peer(from, bytes));
            },
        )
        .map_err(|e| format!("replica {me} peer address {}: {e}", mine.peer))?;
        let (jobs, jobs_rx) = channel();
        let tx = events.clone();
        let gap = match cluster.mode {
            crate::config::ModeName::Lazy => cluster.lazy_sync_gap,
            crate::config::ModeName::Sync => std::time::Duration::ZERO,
        };
        let pin = GcPin::default();
        // The size trigger compares the log with the last checkpoint's data.
        let sizes = Arc::new(disk::LogSizes::default());
        if let Some(f) = disk::checkpoint_file(&recovered.disk) {
            let len = std::fs::metadata(opts.dir.join(f)).map_or(0, |m| m.len());
            sizes.checkpoint.store(len, Relaxed);
        }
        let disk_thread = disk::DiskThread {
            sizes: sizes.clone(),
            file,
            path: path.clone(),
            dir: opts.dir.clone(),
            layout: recovered.take_layout(),
            db: db.clone(),
            pin: pin.clone(),
            gap,
        };
        std::thread::Builder::new()
            .name(format!("vsr-disk-{me}"))
            .spawn(move || {
                disk::run(disk_thread, jobs_rx, |r| {
                    let _ = tx.send(Event::Disk(r));
                })
            })
            .map_err(|e| e.to_string())?;
        tracing::info!(
            replica = me,
            log = %path.display(),
            entries = recovered.disk.log.len(),
            cut_bytes = recovered.cut_bytes,
            "replica log recovered"
        );
        let thread_shared = shared.clone();
        let (started, started_rx) = std::sync::mpsc::sync_channel(1);
        let thread = std::thread::Builder::new()
            .name(format!("vsr-{me}"))
            .spawn(move || {
                let mut run = Run::new(db, thread_shared, opts, recovered, transport, jobs, pin);
                run.sizes = sizes;
                run.publish_status(true);
                let _ = started.send(());
                run.main(rx);
            })
            .map_err(|e| e.to_string())?;
        // INFO must not show the defaults (a restarted replica as recovered, say) to the
        // first client: the server starts listening only after the first status.
        started_rx
            .recv()
            .map_err(|_| "the replication thread failed to start".to_string())?;
        Ok(Node {
            shared,
            events,
            thread: Some(thread),
        })
    }

    /// The state the server's threads share with the replication thread.
    pub fn replication(&self) -> &Arc<Replication> {
        &self.shared
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.events.send(Event::Stop);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The replication thread's state.
struct Run {
    db: Arc<Db>,
    shared: Arc<Replication>,
    local: Rc<RefCell<Local>>,
    replica: Replica<EngineApp>,
    transport: Transport,
    disk: DiskHandle,
    /// State transfers this replica streams to others, and the one it receives.
    outgoing: Outgoing,
    incoming: Incoming,
    /// When the size trigger first found a checkpoint due that has not been taken yet.
    checkpoint_due_since: Option<Instant>,
    /// What the event being handled is, for the slow-round log.
    event_kind: &'static str,
    pin: GcPin,
    /// The log's bytes since the last checkpoint and that checkpoint's, from the disk
    /// thread: `ClusterConfig::checkpoint_log_bytes`.
    sizes: Arc<disk::LogSizes>,
    cluster: ClusterConfig,
    sync_replies: bool,
    start: Instant,
    /// Our requests in flight: client sequence number → the slot after its batch's last.
    outstanding: BTreeMap<u64, u64>,
    seq: u64,
    /// The view this process opened the commit slots in, while open.
    open_view: Option<verso_vsr::ViewNum>,
    status_at: Instant,
    became_primary: u64,
    slots_proposed: u64,
    batches_proposed: u64,
    /// `ClusterConfig::batches_in_flight`.
    in_flight_max: usize,
}

impl Run {
    fn new(
        db: Arc<Db>,
        shared: Arc<Replication>,
        opts: NodeOptions,
        recovered: disk::Recovered,
        transport: Transport,
        jobs: Sender<DiskJob>,
        pin: GcPin,
    ) -> Run {
        let (fresh, recovered) = (recovered.fresh, recovered.disk);
        // Read leases compare the server's threads' readings of this clock with VSR's.
        let start = shared.clock();
        let local = Rc::new(RefCell::new(Local {
            next_slot: shared.next_slot(),
            ..Local::default()
        }));
        let in_flight_max = opts.cluster.batches_in_flight;
        let app = EngineApp::new(
            db.clone(),
            shared.clone(),
            local.clone(),
            opts.dir.clone(),
            pin.clone(),
        );
        let config = opts.cluster.vsr_config(opts.me, shared.origin);
        let replica = if fresh {
            Replica::new(opts.me, config, app, 0)
        } else if recovered == disk::Disk::default() {
            let mut r = Replica::new(opts.me, config, app, 0);
            // An empty log does not mean nothing was acknowledged: this replica ran before,
            // may have held operations in memory and crashed before writing any. It stays
            // out of elections until it recovered (`verso_vsr` `replica::recovery`).
            r.assume_amnesia();
            r
        } else {
            Replica::recover(opts.me, config, app, &recovered, 0)
        };
        Run {
            outgoing: Outgoing::default(),
            incoming: Incoming::new(&opts.dir),
            event_kind: "",
            checkpoint_due_since: None,
            pin,
            sizes: Arc::default(),
            db,
            shared,
            local,
            replica,
            transport,
            disk: DiskHandle { jobs },
            cluster: opts.cluster,
            sync_replies: opts.sync_replies,
            start,
            outstanding: BTreeMap::new(),
            seq: 0,
            open_view: None,
            status_at: Instant::now() - STATUS_EVERY,
            became_primary: 0,
            slots_proposed: 0,
            batches_proposed: 0,
            in_flight_max,
        }
    }

    fn now(&self) -> u64 {
        self.start.elapsed().as_millis() as u64
    }

    fn main(&mut self, rx: std::sync::mpsc::Receiver<Event>) {
        loop {
            let now = self.now();
            let due = self.replica.poll_timeout();
            let wait = Duration::from_millis(due.saturating_sub(now).min(100));
            let mut stop = false;
            let received = match rx.recv_timeout(wait) {
                Ok(ev) => Some(ev),
                Err(RecvTimeoutError::Timeout) => None,
                Err(RecvTimeoutError::Disconnected) => {
                    stop = true;
                    None
                }
            };
            let round = Instant::now();
            let mut events = 0;
            // The slowest event of the round and what it was, for the slow-round log.
            let mut slowest = (Duration::ZERO, "");
            let mut timed = |this: &mut Self, ev: Event| {
                let at = Instant::now();
                let stop = this.handle(ev);
                slowest = slowest.max((at.elapsed(), this.event_kind));
                stop
            };
            if let Some(ev) = received {
                stop |= timed(self, ev);
                events += 1;
            }
            for _ in 0..EVENTS_PER_ROUND_MAX {
                if round.elapsed() > EVENTS_ROUND_TIME_MAX {
                    break;
                }
                match rx.try_recv() {
                    Ok(ev) => stop |= timed(self, ev),
                    Err(_) => break,
                }
                events += 1;
            }
            let handled = round.elapsed();
            if stop {
                self.shared.close();
                let _ = self.disk.jobs.send(DiskJob::Stop);
                return;
            }
            let now = self.now();
            // A round whose events took long (applying a huge operation: a FLUSHALL's clear
            // expanded into a million deletions) made the silence itself: the primary's
            // messages of that time wait in the queue. Take them in the next round before
            // the timers judge the primary, or both backups would depose a live primary
            // after every such operation. A primary that is really silent is judged one
            // round later.
            if handled <= ROUND_SLOW && self.replica.poll_timeout() <= now {
                let (view, started) = (
                    self.replica.view(),
                    self.replica.stats().view_changes_started,
                );
                self.replica.handle_timeout(now);
                if self.replica.stats().view_changes_started > started {
                    self.log_view_change(view);
                }
            }
            self.shared.clear_signal();
            self.follow_role();
            let phase = Instant::now();
            self.propose();
            let proposed = phase.elapsed();
            self.carry_out();
            let carried = phase.elapsed() - proposed;
            // Carrying out may have changed the role (a reply can't, but be exact).
            self.follow_role();
            let lease = self.replica.lease_until();
            self.shared
                .set_lease(lease.filter(|_| self.open_view == Some(self.replica.view())));
            self.publish_disk_slots();
            self.publish_status(false);
            if round.elapsed() > ROUND_SLOW {
                tracing::warn!(
                    ms = round.elapsed().as_millis() as u64,
                    events,
                    events_ms = handled.as_millis() as u64,
                    slowest_event = slowest.1,
                    slowest_event_ms = slowest.0.as_millis() as u64,
                    propose_ms = proposed.as_millis() as u64,
                    carry_out_ms = carried.as_millis() as u64,
                    "a slow round of the replication thread: a backup that handles nothing \
                     from its primary for view_change_timeout_ms starts a view change (raise it \
                     on a busy machine)"
                );
            }
        }
    }

    /// Says why this replica started a view change: what it last heard from the leader of
    /// `view` (transport frames of any kind), for an operator reading the log.
    fn log_view_change(&self, view: verso_vsr::ViewNum) {
        let leader = view.leader();
        let heard = self
            .transport
            .peer_states()
            .into_iter()
            .find(|p| p.id == leader)
            .and_then(|p| p.last_received)
            .map_or(-1, |d| d.as_millis() as i64);
        tracing::info!(
            from_view = %view,
            to_view = %self.replica.view(),
            leader,
            leader_heard_ms = heard,
            "started a view change"
        );
    }

    fn on_peer_message(&mut self, now: u64, from: u8, m: crate::state_transfer::Msg) {
        self.event_kind = m.kind();
        if self.incoming.ready(&m) {
            self.replica.handle_message(now, Address::Replica(from), m)
        } else {
            tracing::info!(from, "a state transfer without all its data, dropped");
        }
    }

    /// Handles one event; returns whether to stop.
    fn handle(&mut self, ev: Event) -> bool {
        let now = self.now();
        self.event_kind = match &ev {
            Event::Peer(..) => "peer payload", // a message names itself once decoded
            Event::Disk(Ok(DiskDone::Synced(_))) => "disk synced",
            Event::Disk(Ok(DiskDone::Checkpoint(_))) => "checkpoint durable",
            Event::Disk(Err(_)) => "disk failed",
            Event::Wake => "wake",
            Event::Stop => "stop",
        };
        match ev {
            Event::Peer(from, bytes) => match postcard::from_bytes::<Payload>(&bytes) {
                Ok(Payload::Vsr(m)) => self.on_peer_message(now, from, m),
                Ok(Payload::StateData(d)) => self.incoming.on_data(from, d),
                Ok(Payload::MessagePart(p)) => {
                    let Some(whole) = self.incoming.on_part(from, p) else {
                        return false;
                    };
                    match postcard::from_bytes::<Payload>(&whole) {
                        Ok(Payload::Vsr(m)) => self.on_peer_message(now, from, m),
                        Ok(_) => {
                            tracing::warn!(from, "a message in parts is not a message; dropped")
                        }
                        Err(e) => {
                            tracing::warn!(from, error = %e, "undecodable message from a peer, dropped");
                        }
                    }
                }
                Err(e) => {
                    tracing::warn!(from, error = %e, "undecodable message from a peer, dropped");
                }
            },
            Event::Disk(Ok(DiskDone::Synced(id))) => self.replica.handle_synced(now, id),
            Event::Disk(Ok(DiskDone::Checkpoint(ap))) => {
                self.replica.handle_checkpoint_durable(now, ap)
            }
            Event::Disk(Err(e)) => {
                // It must not acknowledge what it cannot keep; a restart recovers what the
                // disk holds.
                tracing::error!(error = %e, "the replica log failed; stopping the server");
                eprintln!("verso: the replica log failed: {e}");
                std::process::exit(70);
            }
            Event::Wake => {}
            Event::Stop => return true,
        }
        false
    }

    /// Opens the commit slots when this replica leads a view in normal operation; closes
    /// them, rolling back what never reached the log, when it stops.
    fn follow_role(&mut self) {
        let leading = self.replica.role() == Role::Primary;
        let view = self.replica.view();
        if self.open_view.is_some() && (!leading || self.open_view != Some(view)) {
            tracing::info!(view = %view, "no longer primary: commits are refused here");
            self.shared.set_lease(None);
            retract_unlogged(&self.db, &self.shared, &self.local);
            self.db
                .set_read_horizon(Some(self.replica.app().read_horizon()));
            self.outstanding.clear();
            self.local.borrow_mut().own_ops.clear();
            self.open_view = None;
            self.publish_status(true);
        }
        if leading && self.open_view.is_none() {
            // Retract anything left (nothing, normally), then continue above every
            // timestamp this replica applied.
            retract_unlogged(&self.db, &self.shared, &self.local);
            self.db
                .raise_timestamp_floor(self.replica.app().applied_cts());
            // Linearizable reads from now on (each waits for a round to a majority).
            self.db.set_read_horizon(None);
            let from = self.shared.open();
            self.shared.discard_below(from);
            self.local.borrow_mut().next_slot = from;
            self.open_view = Some(view);
            self.became_primary += 1;
            tracing::info!(view = %view, "primary: accepting commits");
            self.publish_status(true);
        }
    }

    /// Hands the filled commit slots to VSR, in order, a batch per request, keeping at most
    /// `in_flight_max` batches uncommitted (the rest wait and go in one larger batch).
    fn propose(&mut self) {
        if self.open_view.is_none() {
            return;
        }
        if self.shared.barrier_due() {
            let _ = self.shared.reserve_barrier();
        }
        loop {
            if self.outstanding.len() >= self.in_flight_max {
                return;
            }
            let (first, slots) = {
                let mut local = self.local.borrow_mut();
                let first = local.next_slot;
                let slots = self.shared.take_ready(
                    &mut local.next_slot,
                    Some(first + BATCH_TXNS_MAX as u64),
                    crate::op::BATCH_BYTES,
                );
                (first, slots)
            };
            if slots.is_empty() {
                return;
            }
            let mut keys = Vec::new();
            let txns: Vec<TxnWrites> = slots
                .into_iter()
                .map(|s| s.into_logged(&mut keys))
                .collect();
            let batch = Batch {
                origin: self.shared.origin,
                first_slot: first,
                txns: Arc::new(txns),
            };
            self.local.borrow_mut().handed.insert(first, keys);
            self.seq += 1;
            self.outstanding.insert(self.seq, batch.end_slot());
            self.slots_proposed += batch.txns.len() as u64;
            self.batches_proposed += 1;
            let client = self.shared.origin;
            let request = Request {
                client,
                seq: self.seq,
                op: batch,
                sync: self.sync_replies || self.shared.sync_held(),
            };
            let ev = self.replica.view();
            let now = self.now();
            self.replica.handle_message(
                now,
                Address::Client(client),
                Message::Request { request, ev },
            );
        }
    }

    fn carry_out(&mut self) {
        while let Some(action) = self.replica.poll_action() {
            match action {
                Action::Send {
                    to: Address::Replica(r),
                    message,
                } => {
                    if state_transfer::transfer_file(&message).is_some() {
                        self.outgoing.start(
                            r,
                            message,
                            self.db.clone(),
                            self.transport.handle(),
                            self.pin.clone(),
                        );
                    } else {
                        self.transport
                            .send(r, state_transfer::encode_message(&message));
                    }
                }
                Action::Send {
                    to: Address::Client(c),
                    message,
                } => {
                    if c != self.shared.origin {
                        continue; // another process's requests, from an earlier life
                    }
                    if let Message::Reply { seq, .. } = message {
                        let mut end = None;
                        while let Some((&s, &e)) = self.outstanding.first_key_value() {
                            if s > seq {
                                break;
                            }
                            end = Some(e);
                            self.outstanding.pop_first();
                        }
                        if let Some(end) = end {
                            self.shared.set_committed(end);
                        }
                    }
                }
                Action::Write(w) => self.disk.write(w),
                Action::Sync { id } => self.disk.sync(id),
            }
        }
        // The size trigger (`ClusterConfig::checkpoint_log_bytes`). Until the disk thread
        // has written the checkpoint and reset the count, `checkpoint_now` refuses a second
        // one, so this takes one more pass at most.
        let every = self.cluster.checkpoint_log_bytes;
        let logged = self.sizes.since_checkpoint.load(Relaxed);
        if every > 0 && logged >= every.max(self.sizes.checkpoint.load(Relaxed)) {
            // A snapshot copies the writes after the durable point on this thread: with
            // hundreds of MiB of large values not yet on a majority's disks that took 0.3-0.9
            // s, long enough for backups to start view changes. Wait for the durable point
            // to catch up, but not for ever (under a steady load it may stay behind).
            let waited = *self.checkpoint_due_since.get_or_insert_with(Instant::now);
            let tail = self.replica.app().undo_bytes();
            if (tail <= CHECKPOINT_TAIL_BYTES_MAX || waited.elapsed() >= CHECKPOINT_WAIT_MAX)
                && self.replica.checkpoint_now()
            {
                self.checkpoint_due_since = None;
                self.carry_out();
            }
        }
    }

    /// As primary, tells `WAIT` which of its slots each replica holds on disk: the end of
    /// the last own batch at or below the replica's reported `diskOpMax`.
    fn publish_disk_slots(&mut self) {
        let Some(disk) = self.replica.replica_disk_ops() else {
            return;
        };
        let mut local = self.local.borrow_mut();
        if local.own_ops.is_empty() {
            return;
        }
        let mut lowest = u64::MAX;
        for (i, d) in disk.iter().enumerate() {
            lowest = lowest.min(d.op);
            let below = local.own_ops.partition_point(|&(op, _)| op <= d.op);
            if below > 0 {
                self.shared.set_disk_slots(i, local.own_ops[below - 1].1);
            }
        }
        // Every replica holds these: their slots were published to each. A replica that
        // stays down must not make the list grow without end: past the cap the oldest go,
        // and a replica that comes back is credited from the next one it reaches (counting
        // late is safe for WAIT, counting early would not be).
        while local
            .own_ops
            .front()
            .is_some_and(|&(op, _)| op <= lowest || local.own_ops.len() > OWN_OPS_MAX)
        {
            local.own_ops.pop_front();
        }
    }

    fn publish_status(&mut self, force: bool) {
        if !force && self.status_at.elapsed() < STATUS_EVERY {
            return;
        }
        self.status_at = Instant::now();
        let r = &self.replica;
        let view = r.view();
        let stats = r.stats();
        let transport_peers = self.transport.peer_states();
        let peers = self
            .cluster
            .replicas
            .iter()
            .filter(|a| a.id != r.id())
            .map(|a| {
                let t = transport_peers.iter().find(|p| p.id == a.id);
                PeerStatus {
                    id: a.id,
                    peer_addr: a.peer.to_string(),
                    client_addr: a.client.to_string(),
                    connected_out: t.is_some_and(|p| p.connected_out),
                    connected_in: t.is_some_and(|p| p.connected_in),
                    last_heard_ms: t
                        .and_then(|p| p.last_received)
                        .map(|d| d.as_millis() as u64),
                    reconnects: t.map_or(0, |p| p.reconnects),
                    dropped: t.map_or(0, |p| p.frames_dropped),
                }
            })
            .collect();
        let leader = view.leader();
        // Mid view change (candidate or elected) the view's leader is only a proposal: no
        // one leads yet, so clients hear "no primary" (CLUSTERDOWN in a sharded cluster)
        // rather than being relayed to a replica that cannot serve.
        let known_leader = view.counter > 0 && matches!(r.role(), Role::Primary | Role::Backup);
        let mut s = self.shared.status.lock().unwrap_or_else(|e| e.into_inner());
        s.role = match r.role() {
            Role::Primary => "primary",
            Role::Backup => "backup",
            Role::Candidate => "candidate",
            Role::Elected => "elected",
        };
        s.view = view.to_string();
        s.view_counter = view.counter;
        s.recovering = r.is_amnesiac();
        s.primary_client_addr = known_leader
            .then(|| self.cluster.replicas.iter().find(|a| a.id == leader))
            .flatten()
            .map(|a| a.client.to_string());
        s.op_max = r.op_max().op;
        s.commit = r.commit().map_or(0, |c| c.op);
        s.dp = r.dp().op;
        s.dp_min = r.dp_min().op;
        s.disk_op_max = r.disk_op_max().op;
        s.log_base = r.log_base().op;
        s.checkpoints = stats.checkpoints;
        s.state_transfers_sent = self.outgoing.started;
        s.catch_ups = stats.catch_ups;
        s.state_transfers_installed = stats.state_transfers_installed;
        s.entries_applied = stats.entries_applied;
        s.entries_undone = stats.entries_undone;
        s.view_changes = stats.view_changes_started;
        s.became_primary = self.became_primary;
        s.reads_leased = self.shared.reads_leased.load(Relaxed);
        s.reads_with_round = self.shared.reads_with_round.load(Relaxed);
        s.slots_proposed = self.slots_proposed;
        s.batches_proposed = self.batches_proposed;
        s.slots_retracted = self.local.borrow().slots_retracted;
        s.handshakes_rejected = self.transport.stats().handshakes_rejected;
        s.peers = peers;
    }
}
