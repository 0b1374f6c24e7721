//! The host: the server on the replica that leads its group (module docs of `group`). It
//! replays the log into a fresh server, executes inputs in batches handed to its replica
//! one request at a time (the inputs of the turns meanwhile gather into the next), and
//! releases each batch's outputs once the replica replies.

use std::collections::VecDeque;
use std::io;
use std::time::{Duration, Instant};

use verso_ncc::wire::Wire;
use verso_ncc::{ClientId, ServerId, TxnServer};
use verso_vsr::{Address, Message as VsrMessage, Request as VsrRequest, Role, ViewNum};

use super::log::{GroupBatch, GroupInput, ReplicaMsg};
use super::{Group, GroupDurability, PENDING_MAX};
use crate::now_us;

/// A batch (one request of the log) is handed over at the end of the host's turn, or once
/// it holds this many bytes.
const BATCH_BYTES: usize = 256 << 10;

/// Requests a host has handed over and not yet seen replied. While one is in flight the
/// next turns' inputs gather into one batch (group commit): each request costs a prepare
/// to every backup and a disk sync on each replica, whatever its size, so under load
/// fewer, larger requests save most of the group's CPU. Measured with F1 on 2 groups
/// (BENCHMARKS.md, "NCC over replicated shards between processes"): 1 in flight against
/// unlimited, 27,765 against 23,579 txn/s at 256 clients, no slower at low load.
const IN_FLIGHT_MAX: usize = 1;

/// How long a new host replays its log per turn of the loop (`Group::replay`).
const REPLAY_SLICE: Duration = Duration::from_millis(5);

/// An input's outputs: to clients, and to other shards.
type Outputs<M> = (Vec<(ClientId, M)>, Vec<(ServerId, M)>);

/// A batch of inputs the host executed and handed to its replica.
pub(super) struct Pending<M> {
    seq: u64,
    inputs: usize,
    outputs: Outputs<M>,
    replied: bool,
}

/// The inputs the host executed since its last hand-over, and their outputs.
pub(super) struct Batch<M> {
    pub(super) inputs: Vec<GroupInput>,
    bytes: usize,
    outputs: Outputs<M>,
}

impl<M> Default for Batch<M> {
    fn default() -> Self {
        Batch {
            inputs: Vec::new(),
            bytes: 0,
            outputs: (Vec::new(), Vec::new()),
        }
    }
}

/// The server on the replica that leads (module docs).
pub(super) struct Host<S: TxnServer> {
    pub(super) view: ViewNum,
    /// A fresh client identity per host, so its request numbers start at 1.
    pub(super) client: u64,
    pub(super) seq: u64,
    pub(super) server: S,
    /// Log inputs replayed into `server` so far; it serves once all are (`ready`).
    pub(super) replayed: usize,
    pub(super) ready: bool,
    pub(super) created: Instant,
    /// The latest input time it has seen: a new host's clock may be behind its
    /// predecessor's, and the server must not see time go backwards.
    pub(super) last_at: u64,
    /// When the server's timers are next due (µs, the wall clock).
    pub(super) next_tick: u64,
    /// Names the next input (this process's nonce and host count in the high half).
    pub(super) next_uid: u64,
    /// Inputs executed since the last hand-over.
    pub(super) turn: Batch<S::Msg>,
    /// Inputs executed and handed over, waiting for their replies.
    pub(super) pending_inputs: usize,
    pub(super) pending: VecDeque<Pending<S::Msg>>,
    /// The log's input bytes: those replayed and those executed since
    /// (`GroupConfig::log_max_bytes` bounds it).
    pub(super) log_bytes: u64,
    /// What it has said about a full log: 0 nothing, 1 that it refuses new work, 2 that
    /// it refuses everything.
    pub(super) log_full_reported: u8,
}

impl<S: TxnServer> Host<S> {
    /// Adds an executed input (its wire bytes; `None`: a timer tick) to the turn's batch.
    fn push_input(&mut self, at: u64, msg: Option<Vec<u8>>) {
        self.next_uid += 1;
        let input = GroupInput {
            uid: self.next_uid,
            at,
            msg,
        };
        // Each input's overhead counts too: a gathered batch can hold thousands.
        self.turn.bytes += input.bytes();
        self.log_bytes += input.bytes() as u64;
        self.turn.inputs.push(input);
    }

    /// Whether it has gathered inputs and a request slot is free ([`IN_FLIGHT_MAX`]).
    pub(super) fn may_hand_over(&self) -> bool {
        !self.turn.inputs.is_empty()
            && self.pending.iter().filter(|p| !p.replied).count() < IN_FLIGHT_MAX
    }
}

impl<S, F> Group<S, F>
where
    S: TxnServer,
    S::Msg: Wire,
    F: Fn() -> io::Result<S>,
{
    /// The host executes an input (a message, or with `None` a timer tick) and adds it to
    /// its turn's batch; without a host it is dropped (its sender resends).
    pub(super) fn submit(&mut self, msg: Option<S::Msg>) {
        let Some(h) = self.host.as_mut().filter(|h| h.ready) else {
            return;
        };
        if h.pending_inputs + h.turn.inputs.len() >= PENDING_MAX {
            return;
        }
        // A full log refuses new work, and takes what finishes work begun (decisions,
        // recoveries, their timers) up to an eighth more, then nothing. A refused
        // message's sender resends, and times out.
        // (Transactions still undecided at the hard limit stay so until the group restarts
        // with a larger limit: their other shards' records wait for them.)
        let full = h.log_bytes >= self.log_max_bytes;
        let hard_full = h.log_bytes >= self.log_max_bytes.saturating_add(self.log_max_bytes / 8);
        if hard_full || (full && msg.as_ref().is_some_and(|m| h.server.starts_work(m))) {
            // Said once per stage, where an operator looks.
            let stage = if hard_full { 2 } else { 1 };
            if h.log_full_reported < stage {
                h.log_full_reported = stage;
                let refused = if hard_full {
                    "every input is refused from now on, also those that would end \
                     transactions begun"
                } else {
                    "new transactions are refused from now on (those begun may still end, \
                     for an eighth more)"
                };
                eprintln!(
                    "txn-server: shard {} replica {}: the group log holds {} bytes of \
                     inputs, past its limit (--log-max-bytes {}); {refused}: the log is not \
                     compacted yet (ARCHITECTURE.md)",
                    self.shard, self.me, h.log_bytes, self.log_max_bytes
                );
            }
            return;
        }
        let at = now_us().max(h.last_at);
        h.last_at = at;
        if let Some(m) = msg.as_ref() {
            if let Some(clk) = h.server.unlogged_read(m) {
                let now = self.now_ms();
                if self.replica.lease_read(now).is_some() {
                    let msg = msg.expect("checked");
                    return self.read_unlogged(at, msg, clk);
                }
            }
        }
        self.log_input(at, msg);
    }

    /// Executes an input on the host's server and adds it to the turn's batch, after the
    /// note a replay needs to run it as the host did (`verso_ncc`'s `server/unlogged.rs`).
    fn log_input(&mut self, at: u64, msg: Option<S::Msg>) {
        let Some(h) = self.host.as_mut() else {
            return;
        };
        let bytes = msg.as_ref().map(|m| {
            let mut b = Vec::new();
            m.encode(&mut b);
            b
        });
        h.server.begin_logged();
        match msg {
            Some(m) => h.server.on_message(at, m),
            None => h.server.tick(at),
        }
        h.turn.outputs.0.extend(h.server.drain());
        h.turn.outputs.1.extend(h.server.drain_peers());
        if let Some(note) = h.server.end_logged() {
            let mut b = Vec::new();
            note.encode(&mut b);
            h.push_input(at, Some(b));
        }
        h.push_input(at, bytes);
        if h.turn.bytes >= BATCH_BYTES {
            self.hand_over();
        }
    }

    /// A read-only read the host answers without logging it, while it holds the group's
    /// read lease (no other replica can host meanwhile): under a logged promise covering
    /// its clock, and released with the newest input executed before it, or at once if
    /// every such input has been replied (`verso_ncc`'s `server/unlogged.rs`).
    fn read_unlogged(&mut self, at: u64, msg: S::Msg, clk: u64) {
        let Some(h) = self.host.as_mut() else {
            return;
        };
        if let Some(note) = h.server.floor_promise_for(clk) {
            self.log_input(at, Some(note));
        }
        let Some(h) = self.host.as_mut() else {
            return;
        };
        h.server.execute_unlogged(at, msg);
        let answers = h.server.drain();
        debug_assert!(h.server.drain_peers().is_empty(), "a read asks no peer");
        if !h.turn.inputs.is_empty() {
            h.turn.outputs.0.extend(answers);
        } else if let Some(last) = h.pending.back_mut() {
            last.outputs.0.extend(answers);
        } else {
            for (client, m) in answers {
                self.send_client(client, &m);
            }
        }
    }

    /// The host hands its turn's batch to its replica as one request; its outputs leave
    /// when the reply comes.
    pub(super) fn hand_over(&mut self) {
        let Some(h) = self.host.as_mut() else {
            return;
        };
        if h.turn.inputs.is_empty() {
            return;
        }
        if !h.may_hand_over() && h.turn.bytes < BATCH_BYTES {
            return;
        }
        let turn = std::mem::take(&mut h.turn);
        h.seq += 1;
        h.pending_inputs += turn.inputs.len();
        h.pending.push_back(Pending {
            seq: h.seq,
            inputs: turn.inputs.len(),
            outputs: turn.outputs,
            replied: false,
        });
        let request = VsrRequest {
            client: h.client,
            seq: h.seq,
            op: GroupBatch {
                inputs: std::sync::Arc::new(turn.inputs),
            },
            sync: self.durability == GroupDurability::AnswersOnDisk,
        };
        let client = h.client;
        let ev = self.replica.view();
        let now = self.now_ms();
        self.replica.handle_message(
            now,
            Address::Client(client),
            VsrMessage::Request { request, ev },
        );
    }

    /// Runs the host's server timers when due (an input like any other).
    pub(super) fn tick_host(&mut self) -> io::Result<()> {
        let Some(h) = self.host.as_mut().filter(|h| h.ready) else {
            return Ok(());
        };
        let Some(every) = h.server.tick_every() else {
            return Ok(());
        };
        let now = now_us();
        if now < h.next_tick {
            return Ok(());
        }
        h.next_tick = now + every;
        self.submit(None);
        Ok(())
    }

    pub(super) fn on_reply(&mut self, client: u64, message: ReplicaMsg) {
        let Some(h) = self.host.as_mut() else {
            return;
        };
        if client != h.client {
            return;
        }
        match message {
            VsrMessage::Reply { seq, .. } => {
                if let Some(p) = h.pending.iter_mut().find(|p| p.seq == seq) {
                    p.replied = true;
                }
            }
            // The replica no longer takes this host's requests: what it executed past
            // them will never commit. A new host rebuilds from the log.
            _ => self.host = None,
        }
    }

    /// Drops a host whose replica no longer leads its view; starts one on a replica that
    /// leads and whose log is all committed and durable.
    pub(super) fn check_host(&mut self) -> io::Result<()> {
        let seen = (
            self.replica.view(),
            self.replica.role(),
            self.replica.is_amnesiac(),
        );
        if self.last_seen.as_ref() != Some(&seen) {
            // Each change of view, role or amnesia (a replica that started from its disk
            // neither votes nor campaigns until it has caught up with a primary: the
            // `verso_vsr` recovery), for whoever reads a replica's log after a failover.
            eprintln!(
                "txn-server: shard {} replica {}: view {:?}, {:?}{}",
                self.shard,
                self.me,
                seen.0,
                seen.1,
                if seen.2 { ", amnesiac" } else { "" }
            );
            self.last_seen = Some(seen);
        }
        let leads = self.replica.role() == Role::Primary;
        if let Some(h) = &self.host {
            if !leads || self.replica.view() != h.view {
                self.host = None;
            }
            return Ok(());
        }
        let op_max = self.replica.op_max();
        if !leads || self.replica.commit() != Some(op_max) || self.replica.dp() < op_max {
            return Ok(());
        }
        self.hosts_started += 1;
        self.host = Some(Host {
            view: self.replica.view(),
            client: (self.nonce << 16) ^ self.hosts_started,
            seq: 0,
            server: (self.make)()?,
            replayed: 0,
            ready: false,
            created: Instant::now(),
            last_at: 0,
            next_tick: 0,
            next_uid: (self.nonce ^ self.hosts_started) << 32,
            turn: Batch::default(),
            pending_inputs: 0,
            pending: VecDeque::new(),
            log_bytes: 0,
            log_full_reported: 0,
        });
        Ok(())
    }

    /// A new host replays its log into its server, a slice of at most [`REPLAY_SLICE`] per
    /// turn of the loop, so that the replica's heartbeats and votes go on meanwhile (a long
    /// log takes seconds, and the group would depose a primary that stops for that long).
    pub(super) fn replay(&mut self) -> io::Result<()> {
        let Some(h) = self.host.as_mut().filter(|h| !h.ready) else {
            return Ok(());
        };
        let log = self.replica.app();
        let started = Instant::now();
        for input in log.inputs_from(h.replayed) {
            if h.replayed % 256 == 0 && started.elapsed() > REPLAY_SLICE {
                return Ok(());
            }
            match &input.msg {
                None => h.server.tick(input.at),
                Some(bytes) => match S::Msg::decode(bytes) {
                    Ok(m) => h.server.on_message(input.at, m),
                    // Every logged message was encoded by a host from a message it
                    // decoded: this is a bug, not a peer's garbage.
                    Err(e) => {
                        return Err(io::Error::other(format!(
                            "input {} in the group log does not decode: {e}",
                            input.uid
                        )))
                    }
                },
            }
            // Replayed outputs left when their inputs first ran (or were never answered,
            // and their senders resend).
            h.server.drain();
            h.server.drain_peers();
            h.last_at = h.last_at.max(input.at);
            h.log_bytes += input.bytes() as u64;
            h.replayed += 1;
        }
        h.ready = true;
        // The first input of a new host: writes go above every clock its predecessors
        // promised their unlogged reads.
        if let Some(note) = h.server.floor_applied_note() {
            let at = now_us().max(h.last_at);
            h.last_at = at;
            self.log_input(at, Some(note));
        }
        let Some(h) = self.host.as_ref() else {
            return Ok(());
        };
        eprintln!(
            "txn-server: shard {} replica {} hosts in view {:?} after replaying {} inputs in {} ms",
            self.shard,
            self.me,
            h.view,
            h.replayed,
            h.created.elapsed().as_millis()
        );
        Ok(())
    }

    /// Sends the outputs of the inputs whose replies came, in log order.
    pub(super) fn release(&mut self) {
        let mut ready = Vec::new();
        if let Some(h) = self.host.as_mut() {
            while h.pending.front().is_some_and(|p| p.replied) {
                let p = h.pending.pop_front().expect("checked");
                h.pending_inputs -= p.inputs;
                ready.push(p.outputs);
            }
        }
        for (to_clients, to_servers) in ready {
            for (client, msg) in to_clients {
                self.send_client(client, &msg);
            }
            for (to, msg) in to_servers {
                self.send_server(to, &msg);
            }
        }
    }
}
