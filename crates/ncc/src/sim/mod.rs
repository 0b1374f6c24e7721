//! A deterministic simulator of NCC: servers (one shard each), clients running random
//! transactions (read-only, one-shot read-write, and two shots whose second writes keys
//! chosen by what the first read, or writes back the keys it read: read-modify-write) over a small, contended key space, and a network that delays
//! (so reorders) and duplicates every message, all driven by one seed (TigerBeetle's VOPR
//! style: one seed, one run, replayable); messages are also lost, and clients send again
//! what goes unanswered. Each process has its own clock, skewed from real
//! time by a constant, as loosely synchronized clocks are (the paper's A2).
//!
//! Checked in every run: each server's invariants after every event; at the end, every
//! transaction committed within a bound (liveness), nothing is left undecided at any server,
//! and the history is strictly serializable ([`crate::check`]).

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap};

use crate::baseline::{BaselineClient, BaselineServer, Flavor};
use crate::check::{serializable_with, strictly_serializable, TxnRecord};
use crate::client::{Client, ClientEvent};
use crate::protocol::{GroupFault, ProtocolKind, TxnClient, TxnServer};
use crate::replicated::{Replicated, ReplicationModel, VsrReplicated};
use crate::server::Server;
use crate::store::Store;
use crate::types::{ClientId, Effects, Key, ServerId, Ts, TxnId, Value};
use crate::workload::{random_program, Program, Rng, Zipf};

mod options;

pub use options::{SimOptions, SimStats, StoreFactory, OPEN_LOOP_BACKLOG};

/// Every transaction must have committed by then (virtual microseconds): far more than a
/// run needs, so reaching it means a transaction is stuck.
const TIME_LIMIT_US: u64 = 60_000_000;
/// Clocks start here, so a skewed clock never reads below zero.
const CLOCK_BASE: u64 = 1_000_000;

enum Event<M> {
    ToServer {
        to: ServerId,
        msg: M,
    },
    ToClient {
        to: ClientId,
        from: ServerId,
        msg: M,
    },
    Start(ClientId),
    /// Open loop: a transaction arrives at a client.
    Arrive(ClientId),
    /// A client looks at its timers.
    Tick(ClientId),
    /// A server looks at its timers.
    ServerTick(ServerId),
    /// A busy server (with a cost model) takes the next message of its inbox.
    ServerWork(ServerId),
    /// A client stops (for ever, unless `restart_crashed`).
    Crash(ClientId),
    /// A crashed client's id is taken over by a new process.
    Restart(ClientId),
    /// A client stops for this long, then goes on.
    Pause(ClientId, u64),
    /// A server's replication group fails.
    GroupFault(ServerId, GroupFault),
}

impl<M: Clone> Event<M> {
    fn duplicate(&self) -> Event<M> {
        match self {
            Event::ToServer { to, msg } => Event::ToServer {
                to: *to,
                msg: msg.clone(),
            },
            Event::ToClient { to, from, msg } => Event::ToClient {
                to: *to,
                from: *from,
                msg: msg.clone(),
            },
            Event::Start(c) => Event::Start(*c),
            Event::Arrive(c) => Event::Arrive(*c),
            Event::Tick(c) => Event::Tick(*c),
            Event::ServerTick(s) => Event::ServerTick(*s),
            Event::ServerWork(s) => Event::ServerWork(*s),
            Event::Crash(c) => Event::Crash(*c),
            Event::Restart(c) => Event::Restart(*c),
            Event::Pause(c, d) => Event::Pause(*c, *d),
            Event::GroupFault(s, f) => Event::GroupFault(*s, *f),
        }
    }
}

struct World<C: TxnClient, S> {
    opts: SimOptions,
    rng: Rng,
    now: u64,
    queue: BinaryHeap<Reverse<(u64, u64)>>,
    events: BTreeMap<u64, Event<C::Msg>>,
    next_event: u64,
    servers: Vec<S>,
    server_skew: Vec<i64>,
    clients: Vec<C>,
    client_skew: Vec<i64>,
    /// Per client: transactions left to start, and when the running one began.
    left: Vec<usize>,
    began: Vec<u64>,
    programs: Vec<Option<Program>>,
    /// Open loop, per client: arrivals still to come, the arrival times waiting, and the
    /// running transaction's arrival time (its `began` in closed loop).
    to_arrive: Vec<usize>,
    backlog: Vec<std::collections::VecDeque<u64>>,
    arrived: Vec<u64>,
    /// Each commit's latency from arrival, in commit order.
    latencies: Vec<u64>,
    /// Per client: a tick is scheduled.
    tick_at: Vec<u64>,
    /// Per server: when its next tick is scheduled (0: none). A replicated server wants
    /// ticks sooner once an input waits to commit, so an earlier one may be added.
    server_tick_at: Vec<u64>,
    /// With a cost model: per server, messages waiting their turn, whether a
    /// `ServerWork` is scheduled, and until when it is busy; and the extra delay of what
    /// a server sends while it finishes a message.
    inbox: Vec<std::collections::VecDeque<C::Msg>>,
    working: Vec<bool>,
    busy_until: Vec<u64>,
    output_delay: u64,
    flushes: u64,
    crashed: Vec<bool>,
    /// Per client that crashed: when its last transaction began (the history's invocation
    /// of one its backup coordinator commits), kept past a restart.
    crash_began: Vec<Option<u64>>,
    paused_until: Vec<u64>,
    /// Transactions whose client reported them committed.
    reported: BTreeSet<TxnId>,
    next_value: u64,
    zipf: Option<Zipf>,
    history: Vec<TxnRecord>,
    stats: SimStats,
}

/// Runs every seed of `range` with the options `tweak` sets, returning the summed stats of
/// the runs that passed and each failure with its seed (for tests; `verso sim ncc` runs
/// seeds on every core).
pub fn run_seeds(
    range: std::ops::Range<u64>,
    tweak: impl Fn(&mut SimOptions),
) -> (SimStats, Vec<(u64, String)>) {
    let mut total = SimStats::default();
    let mut failed = Vec::new();
    for seed in range {
        let mut o = SimOptions::new(seed);
        tweak(&mut o);
        match run(&o) {
            Ok(s) => total.add(&s),
            Err(e) => failed.push((seed, e)),
        }
    }
    (total, failed)
}

/// Runs one seed; the error names the broken property.
pub fn run(opts: &SimOptions) -> Result<SimStats, String> {
    let servers = 0..opts.servers;
    let clients = 0..opts.clients;
    match opts.protocol {
        ProtocolKind::Ncc => {
            fn with_recovery<S: Store>(
                server: Server<S>,
                s: ServerId,
                after: Option<u64>,
            ) -> Server<S> {
                match after {
                    Some(after) => server.with_recovery(s, after),
                    None => server,
                }
            }
            let clients: Vec<Client> = clients
                .map(|c| {
                    let mut client = Client::new(c, opts.servers);
                    client.read_only_protocol = !opts.ncc_rw;
                    if let Some(after) = opts.resend_after_us {
                        client.resend_after = after;
                    }
                    client
                })
                .collect();
            if let Some(make) = opts.store {
                if opts.replication.is_some() {
                    return Err("a store other than the in-memory one cannot run under the \
                        replication model (it copies a server's whole state)"
                        .into());
                }
                let servers: Vec<Server<Box<dyn Store>>> = servers
                    .map(|s| {
                        with_recovery(
                            Server::with_store(opts.mistakes, make(s)),
                            s,
                            opts.recovery_after,
                        )
                    })
                    .collect();
                return run_with(opts, servers, clients);
            }
            let servers: Vec<Server> = servers
                .map(|s| with_recovery(Server::new(opts.mistakes), s, opts.recovery_after))
                .collect();
            run_replicated_or_not(opts, servers, clients)
        }
        kind => {
            let flavor = match kind {
                ProtocolKind::Docc => Flavor::Docc,
                ProtocolKind::D2plNoWait => Flavor::D2plNoWait,
                ProtocolKind::D2plWoundWait => Flavor::D2plWoundWait,
                ProtocolKind::TapirCc => Flavor::TapirCc,
                ProtocolKind::Ncc => unreachable!("matched above"),
            };
            let servers: Vec<BaselineServer> =
                servers.map(|_| BaselineServer::new(flavor)).collect();
            let clients: Vec<BaselineClient> = clients
                .map(|c| {
                    let mut client = BaselineClient::new(c, opts.servers, flavor);
                    if let Some(after) = opts.resend_after_us {
                        client.resend_after = after;
                    }
                    client
                })
                .collect();
            run_replicated_or_not(opts, servers, clients)
        }
    }
}

/// Runs `servers` as they are, or each behind its replication group as `opts` says.
fn run_replicated_or_not<C, S>(
    opts: &SimOptions,
    servers: Vec<S>,
    clients: Vec<C>,
) -> Result<SimStats, String>
where
    C: TxnClient,
    S: TxnServer<Msg = C::Msg> + Clone,
    S::Msg: PartialEq,
{
    match opts.replication {
        Some(model) if model.real_replicas => {
            run_with(opts, vsr_replicated(servers, model, opts.seed), clients)
        }
        Some(model) => run_with(opts, replicated(servers, model), clients),
        None => run_with(opts, servers, clients),
    }
}

fn replicated<S>(servers: Vec<S>, model: ReplicationModel) -> Vec<Replicated<S>>
where
    S: TxnServer + Clone,
    S::Msg: PartialEq,
{
    servers
        .into_iter()
        .map(|s| Replicated::new(s, model))
        .collect()
}

fn vsr_replicated<S>(servers: Vec<S>, model: ReplicationModel, seed: u64) -> Vec<VsrReplicated<S>>
where
    S: TxnServer + Clone,
{
    servers
        .into_iter()
        .enumerate()
        .map(|(i, s)| VsrReplicated::new(s, model, seed.wrapping_mul(31).wrapping_add(i as u64)))
        .collect()
}

fn run_with<C, S>(opts: &SimOptions, servers: Vec<S>, clients: Vec<C>) -> Result<SimStats, String>
where
    C: TxnClient,
    S: TxnServer<Msg = C::Msg>,
{
    let mut rng = Rng(opts.seed);
    let skew = |rng: &mut Rng| rng.range(0, 2 * opts.skew_max) as i64 - opts.skew_max as i64;
    let server_skew = (0..opts.servers).map(|_| skew(&mut rng)).collect();
    let client_skew = (0..opts.clients).map(|_| skew(&mut rng)).collect();
    let mut w = World {
        opts: opts.clone(),
        rng,
        now: 0,
        queue: BinaryHeap::new(),
        events: BTreeMap::new(),
        next_event: 0,
        servers,
        server_skew,
        clients,
        client_skew,
        left: vec![opts.txns_per_client; opts.clients as usize],
        began: vec![0; opts.clients as usize],
        programs: (0..opts.clients).map(|_| None).collect(),
        to_arrive: vec![opts.txns_per_client; opts.clients as usize],
        backlog: (0..opts.clients).map(|_| Default::default()).collect(),
        arrived: vec![0; opts.clients as usize],
        latencies: Vec::new(),
        tick_at: vec![0; opts.clients as usize],
        server_tick_at: vec![0; opts.servers as usize],
        inbox: (0..opts.servers).map(|_| Default::default()).collect(),
        working: vec![false; opts.servers as usize],
        busy_until: vec![0; opts.servers as usize],
        output_delay: 0,
        flushes: 0,
        crashed: vec![false; opts.clients as usize],
        crash_began: vec![None; opts.clients as usize],
        paused_until: vec![0; opts.clients as usize],
        reported: BTreeSet::new(),
        next_value: 1,
        zipf: opts.workload.zipf(),
        history: Vec::new(),
        stats: SimStats::default(),
    };
    for c in 0..opts.clients {
        if opts.open_loop_rate.is_some() {
            let at = w.interarrival();
            w.schedule(at, Event::Arrive(c));
        } else {
            let at = w.rng.below(1_000);
            w.schedule(at, Event::Start(c));
        }
        // A fault at a moment spread over a run's usual length.
        if w.rng.below(100) < opts.crash_percent {
            let at = w.rng.range(1_000, 300_000);
            w.schedule(at, Event::Crash(c));
        } else if w.rng.below(100) < opts.pause_percent {
            let at = w.rng.range(1_000, 300_000);
            let pause = 2 * opts.recovery_after.unwrap_or(200_000);
            w.schedule(at, Event::Pause(c, pause));
        }
    }
    if opts.replication.is_some() {
        for s in 0..opts.servers {
            for _ in 0..opts.group_failovers {
                let at = w.rng.range(1_000, 300_000);
                // Up to a few inputs the new primary's log holds beyond the committed ones.
                let keep = w.rng.below(4) as usize;
                w.schedule(at, Event::GroupFault(s, GroupFault::Failover { keep }));
            }
            for _ in 0..opts.group_total_crashes {
                let at = w.rng.range(1_000, 300_000);
                w.schedule(at, Event::GroupFault(s, GroupFault::TotalCrash));
            }
        }
    }
    while let Some(Reverse((at, id))) = w.queue.pop() {
        w.now = at;
        if at > TIME_LIMIT_US {
            return Err(w.stuck());
        }
        let ev = w.events.remove(&id).expect("scheduled");
        w.handle(ev)?;
    }
    let live = |c: &usize| !w.crashed[*c];
    if (0..w.clients.len())
        .filter(live)
        .any(|c| w.left[c] > 0 || !w.clients[c].idle())
    {
        return Err(w.stuck());
    }
    for (s, server) in w.servers.iter().enumerate() {
        let open = server.undecided();
        if !open.is_empty() {
            return Err(format!("server {s}: transactions left undecided: {open:?}"));
        }
    }
    for (s, server) in w.servers.iter().enumerate() {
        server
            .check_invariants()
            .map_err(|e| format!("server {s} at the end: {e}"))?;
    }
    w.check_decisions_agree()?;
    w.add_unreported_commits();
    let versions: Vec<(Key, Vec<Value>)> =
        w.servers.iter().flat_map(S::committed_versions).collect();
    if let Err(e) = strictly_serializable(&w.history, &versions) {
        if opts.protocol.strict() {
            return Err(e);
        }
        // Serializable it must still be: the same edges without real time.
        serializable_with(&w.history, &versions, &[])?;
        w.stats.strict_violations += 1;
    }
    for c in &w.clients {
        w.stats.add(&SimStats {
            clients: c.stats(),
            ..SimStats::default()
        });
    }
    for r in w.servers.iter().filter_map(S::replication_stats) {
        w.stats.add(&SimStats {
            replication: r,
            ..SimStats::default()
        });
    }
    for server in &w.servers {
        w.stats.add(&SimStats {
            held: server.footprint(),
            ..SimStats::default()
        });
    }
    w.stats.committed = w.history.len() as u64;
    w.stats.end_time_us = w.now;
    if opts.server_cost_us.is_some() {
        w.stats.latencies_us = std::mem::take(&mut w.latencies);
        // The steady middle of the run: the commits between the 10th and the 90th
        // percentile of completion times, over that span (the ramp-up, the tail where
        // clients run out of transactions, and stragglers left out).
        let mut done: Vec<u64> = w.history.iter().map(|t| t.completed).collect();
        done.sort_unstable();
        let (a, b) = (done.len() / 10, done.len() * 9 / 10);
        if b > a && done[b] > done[a] {
            w.stats.steady_commits = (b - a) as u64;
            w.stats.simulated_us = done[b] - done[a];
        }
    }
    Ok(w.stats)
}

impl<C, S> World<C, S>
where
    C: TxnClient,
    S: TxnServer<Msg = C::Msg>,
{
    /// Open loop: the time to a client's next arrival, exponentially distributed around
    /// its share of the offered rate.
    fn interarrival(&mut self) -> u64 {
        let rate = self.opts.open_loop_rate.expect("open loop").max(1) as f64;
        let mean_us = 1e6 * f64::from(self.opts.clients) / rate;
        let u = (self.rng.below(1 << 30) + 1) as f64 / (1u64 << 30) as f64;
        (-u.ln() * mean_us) as u64
    }

    fn schedule(&mut self, delay: u64, ev: Event<C::Msg>) {
        let id = self.next_event;
        self.next_event += 1;
        self.events.insert(id, ev);
        self.queue.push(Reverse((self.now + delay, id)));
    }

    fn clock(&self, skew: i64) -> u64 {
        (CLOCK_BASE as i64 + self.now as i64 + skew) as u64
    }

    fn handle(&mut self, ev: Event<C::Msg>) -> Result<(), String> {
        if self.opts.trace {
            match &ev {
                Event::ToServer { to, msg } => println!("{:>8} server {to} <- {msg:?}", self.now),
                Event::ToClient { to, from, msg } => {
                    println!("{:>8} client {to} <- server {from}: {msg:?}", self.now)
                }
                Event::Start(c) => println!("{:>8} client {c} starts", self.now),
                Event::Arrive(c) => println!("{:>8} a transaction arrives at {c}", self.now),
                Event::Crash(c) => println!("{:>8} client {c} crashes", self.now),
                Event::Restart(c) => println!("{:>8} client {c} restarts", self.now),
                Event::Pause(c, d) => println!("{:>8} client {c} pauses for {d} µs", self.now),
                Event::GroupFault(s, f) => println!("{:>8} server {s}'s group: {f:?}", self.now),
                Event::Tick(_) | Event::ServerTick(_) | Event::ServerWork(_) => {}
            }
        }
        match ev {
            // While a client that will restart is down, its arrivals are shed (and keep
            // coming); otherwise a crashed client's arrivals and starts are dropped.
            Event::Arrive(c) if self.crashed[c as usize] && self.opts.restart_crashed => {
                let i = c as usize;
                self.to_arrive[i] -= 1;
                if self.to_arrive[i] > 0 {
                    let next = self.interarrival();
                    self.schedule(next, Event::Arrive(c));
                }
                self.stats.shed += 1;
                self.left[i] -= 1;
            }
            Event::Start(c) | Event::Arrive(c) if self.crashed[c as usize] => {}
            Event::Arrive(c) => {
                let i = c as usize;
                self.to_arrive[i] -= 1;
                if self.to_arrive[i] > 0 {
                    let next = self.interarrival();
                    self.schedule(next, Event::Arrive(c));
                }
                if self.backlog[i].len() >= OPEN_LOOP_BACKLOG {
                    self.stats.shed += 1;
                    self.left[i] -= 1;
                } else {
                    self.backlog[i].push_back(self.now);
                    // Idle, and no start scheduled (that one would find this arrival).
                    if self.programs[i].is_none() && self.backlog[i].len() == 1 {
                        self.schedule(0, Event::Start(c));
                    }
                }
            }
            Event::Start(c) => {
                let program = self.random_program();
                let now = self.clock(self.client_skew[c as usize]);
                self.began[c as usize] = self.now;
                self.arrived[c as usize] = if self.opts.open_loop_rate.is_some() {
                    self.backlog[c as usize]
                        .pop_front()
                        .expect("started for an arrival")
                } else {
                    self.now
                };
                self.left[c as usize] -= 1;
                let last = program.second.is_none();
                self.clients[c as usize].begin(now, program.first.clone(), last);
                self.programs[c as usize] = Some(program);
                self.flush_client(c);
            }
            Event::ToServer { to, msg } if self.opts.server_cost_us.is_some() => {
                let s = to as usize;
                self.inbox[s].push_back(msg);
                if !self.working[s] {
                    self.working[s] = true;
                    let wait = self.busy_until[s].saturating_sub(self.now);
                    self.schedule(wait, Event::ServerWork(to));
                }
            }
            Event::ServerWork(to) => {
                let s = to as usize;
                let cost = self.opts.server_cost_us.expect("only with a cost model");
                let msg = self.inbox[s].pop_front().expect("scheduled for a message");
                let now = self.clock(self.server_skew[s]);
                self.servers[s].on_message(now, msg);
                let busy = self.flush_server_costed(to, cost)?;
                self.busy_until[s] = self.now + busy;
                if self.inbox[s].is_empty() {
                    self.working[s] = false;
                } else {
                    self.schedule(busy, Event::ServerWork(to));
                }
            }
            Event::ToServer { to, msg } => {
                let now = self.clock(self.server_skew[to as usize]);
                self.servers[to as usize].on_message(now, msg);
                self.flush_server(to)?;
            }
            Event::ServerTick(s) => {
                if self.server_tick_at[s as usize] <= self.now {
                    self.server_tick_at[s as usize] = 0;
                }
                let now = self.clock(self.server_skew[s as usize]);
                self.servers[s as usize].tick(now);
                self.flush_server(s)?;
            }
            Event::GroupFault(s, fault) => {
                let now = self.clock(self.server_skew[s as usize]);
                self.servers[s as usize].group_fault(now, fault);
                self.flush_server(s)?;
            }
            Event::Crash(c) => {
                let i = c as usize;
                self.crashed[i] = true;
                self.crash_began[i] = Some(self.began[i]);
                self.stats.crashed += 1;
                if self.opts.restart_crashed {
                    // Before the backup coordinator's timer, so the new process's first
                    // requests reach the servers while the dead one's transaction waits.
                    let half = self.opts.recovery_after.unwrap_or(200_000) / 2;
                    let at = self.rng.range(1_000, half.max(1_001));
                    self.schedule(at, Event::Restart(c));
                }
            }
            Event::Restart(c) => {
                let i = c as usize;
                // Numbers about a millisecond's worth of transactions above (the real
                // client numbers from its clock).
                self.clients[i] = self.clients[i].restarted(1_000);
                self.crashed[i] = false;
                self.programs[i] = None;
                self.tick_at[i] = 0;
                self.stats.restarted += 1;
                let waiting = if self.opts.open_loop_rate.is_some() {
                    !self.backlog[i].is_empty()
                } else {
                    self.left[i] > 0
                };
                if waiting {
                    self.schedule(0, Event::Start(c));
                }
            }
            Event::Pause(c, d) => {
                if !self.crashed[c as usize] {
                    self.paused_until[c as usize] = self.now + d;
                    self.stats.paused += 1;
                }
            }
            Event::ToClient { to, .. } | Event::Tick(to) if self.crashed[to as usize] => {}
            Event::ToClient { to, .. } if self.now < self.paused_until[to as usize] => {
                self.stats.lost += 1;
            }
            // A tick superseded by an earlier one (which ran, or runs at its time).
            Event::Tick(c) if self.tick_at[c as usize] != self.now => {}
            Event::Tick(c) if self.now < self.paused_until[c as usize] => {
                let wait = self.paused_until[c as usize] - self.now;
                self.tick_at[c as usize] = self.paused_until[c as usize];
                self.schedule(wait, Event::Tick(c));
            }
            Event::ToClient { to, from, msg } => {
                let now = self.clock(self.client_skew[to as usize]);
                self.clients[to as usize].on_message(now, from, msg);
                self.flush_client(to);
            }
            Event::Tick(c) => {
                self.tick_at[c as usize] = 0;
                let now = self.clock(self.client_skew[c as usize]);
                self.clients[c as usize].tick(now);
                self.flush_client(c);
            }
        }
        Ok(())
    }

    /// Checks `s`'s invariants and sends what it has to send; keeps its timers ticking.
    fn flush_server(&mut self, s: ServerId) -> Result<(), String> {
        self.flush_server_costed(s, 0).map(|_| ())
    }

    /// The same, for a server that spends `cost` microseconds on each message it received
    /// or sends: what it sends leaves when it is done. Returns how long it was busy.
    fn flush_server_costed(&mut self, s: ServerId, cost: u64) -> Result<u64, String> {
        let server = &mut self.servers[s as usize];
        if self.opts.trace {
            println!("         server {s}: {}", server.describe_waits());
        }
        // The invariants walk the server's whole state: after every event in correctness
        // runs, after every 256th in a cost-model run (long runs over 1 M keys, where the
        // walk would dominate; the end of the run checks them all again).
        self.flushes += 1;
        if self.opts.server_cost_us.is_none() || self.flushes.is_multiple_of(256) {
            server
                .check_invariants()
                .map_err(|e| format!("server {s}: {e}"))?;
        }
        let (to_clients, to_servers) = (server.drain(), server.drain_peers());
        let every = server.tick_every();
        let busy = cost * (1 + (to_clients.len() + to_servers.len()) as u64);
        self.output_delay = if cost > 0 { busy } else { 0 };
        for (c, msg) in to_clients {
            self.send(Event::ToClient {
                to: c,
                from: s,
                msg,
            });
        }
        for (to, msg) in to_servers {
            self.send(Event::ToServer { to, msg });
        }
        self.output_delay = 0;
        if let Some(every) = every {
            let at = self.now + every;
            let scheduled = self.server_tick_at[s as usize];
            if scheduled == 0 || at < scheduled {
                self.server_tick_at[s as usize] = at;
                self.schedule(every, Event::ServerTick(s));
            }
        }
        Ok(busy)
    }

    /// Every server that decided a transaction decided it the same way (App. E.4's I2).
    fn check_decisions_agree(&self) -> Result<(), String> {
        let mut seen: BTreeMap<TxnId, (bool, usize)> = BTreeMap::new();
        for (s, server) in self.servers.iter().enumerate() {
            for (txn, commit) in server.decisions() {
                if let Some(&(other, at)) = seen.get(&txn) {
                    if other != commit {
                        return Err(format!(
                            "{txn:?}: committed={other} at server {at}, committed={commit} at server {s}"
                        ));
                    }
                }
                seen.insert(txn, (commit, s));
            }
        }
        Ok(())
    }

    /// Transactions the backup coordinator committed for a client that crashed before it
    /// heard: in the history with what they read and wrote (from the servers), begun when
    /// their client began them and never returned (no real-time edge leaves them).
    fn add_unreported_commits(&mut self) {
        let mut effects: BTreeMap<TxnId, Effects> = BTreeMap::new();
        for server in &self.servers {
            for (txn, e) in server.committed_effects() {
                if self.reported.contains(&txn) {
                    continue;
                }
                let all = effects.entry(txn).or_default();
                all.reads.extend(e.reads);
                all.writes.extend(e.writes);
            }
        }
        for (txn, Effects { reads, writes }) in effects {
            let began = self.crash_began[txn.client as usize];
            debug_assert!(began.is_some(), "{txn:?} committed unreported");
            self.stats.recovered_commits += 1;
            self.history.push(TxnRecord {
                client: txn.client,
                invoked: began.unwrap_or(0),
                completed: u64::MAX,
                reads,
                writes,
                commit_ts: Ts::default(),
            });
        }
    }

    fn flush_client(&mut self, c: ClientId) {
        loop {
            let client = &mut self.clients[c as usize];
            let (out, events) = (client.drain(), client.events());
            if out.is_empty() && events.is_empty() {
                // Its timers run while it waits for anything, and a timer that wants to
                // fire sooner (a baseline's back-off before a restart) gets an earlier tick.
                if !client.idle() {
                    let every = client.tick_every();
                    let at = self.now + every;
                    let scheduled = self.tick_at[c as usize];
                    if scheduled == 0 || at < scheduled {
                        self.tick_at[c as usize] = at;
                        self.schedule(every, Event::Tick(c));
                    }
                }
                return;
            }
            for (s, msg) in out {
                self.send(Event::ToServer { to: s, msg });
            }
            for e in events {
                self.on_client_event(c, e);
            }
        }
    }

    fn on_client_event(&mut self, c: ClientId, e: ClientEvent) {
        if self.opts.trace {
            println!("{:>8} client {c}: {e:?}", self.now);
        }
        match e {
            ClientEvent::ShotDone { reads } => {
                let program = self.programs[c as usize].as_ref().expect("running");
                let ops = program.second.as_ref().expect("two shots").ops(&reads);
                let now = self.clock(self.client_skew[c as usize]);
                self.clients[c as usize].next_shot(now, ops, true);
            }
            ClientEvent::Restarted => {}
            ClientEvent::Committed(o) => {
                self.reported.insert(o.txn);
                let writes = o.writes();
                self.history.push(TxnRecord {
                    client: c,
                    invoked: self.began[c as usize],
                    completed: self.now,
                    reads: o.reads,
                    writes,
                    commit_ts: o.commit_ts,
                });
                self.latencies.push(self.now - self.arrived[c as usize]);
                self.programs[c as usize] = None;
                if self.opts.open_loop_rate.is_some() {
                    if !self.backlog[c as usize].is_empty() {
                        self.schedule(0, Event::Start(c));
                    }
                } else if self.left[c as usize] > 0 {
                    let think = self.rng.below(500);
                    self.schedule(think, Event::Start(c));
                }
            }
        }
    }

    /// Puts `ev` on the network: delayed, sometimes twice.
    fn send(&mut self, ev: Event<C::Msg>) {
        self.stats.messages += 1;
        if self.rng.below(100) < self.opts.loss_percent {
            self.stats.lost += 1;
            return;
        }
        if self.rng.below(100) < self.opts.duplicate_percent {
            let copy = ev.duplicate();
            let delay = self.rng.range(self.opts.delay_min, self.opts.delay_max);
            self.schedule(delay + self.output_delay, copy);
        }
        let delay = self.rng.range(self.opts.delay_min, self.opts.delay_max);
        self.schedule(delay + self.output_delay, ev);
    }

    fn random_program(&mut self) -> Program {
        random_program(
            &mut self.rng,
            &self.opts,
            &mut self.next_value,
            self.zipf.as_ref(),
        )
    }

    fn stuck(&self) -> String {
        let busy: Vec<String> = self
            .clients
            .iter()
            .enumerate()
            .filter(|(_, c)| c.busy())
            .map(|(i, _)| format!("client {i}"))
            .collect();
        let undecided: Vec<String> = self
            .servers
            .iter()
            .enumerate()
            .map(|(s, sv)| format!("server {s} {:?} {}", sv.undecided(), sv.describe_waits()))
            .collect();
        format!(
            "no progress by {} µs: still running {busy:?}; undecided {undecided:?}",
            self.now
        )
    }
}
