//! An open-loop load driver: transactions arrive at a target rate (the paper's clients
//! are open-loop, §6.1), wait for an idle protocol client if all are busy, and their
//! latency runs from arrival to commit, so a slow server shows as latency rather than as
//! a quietly lower offered load. Rate 0 runs closed-loop instead (each client starts its
//! next transaction when one commits): the peak a configuration can sustain.

use std::collections::{BTreeMap, VecDeque};
use std::io;
use std::net::SocketAddr;
use std::thread;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use verso_ncc::check::{serializable_with, strictly_serializable, TxnRecord};
use verso_ncc::sim::SimOptions;
use verso_ncc::wire::{Encoding, Wire};
use verso_ncc::workload::{Generator, Program};
use verso_ncc::{ClientEvent, ClientStats, TxnClient};

use crate::client::Pool;
use crate::local::Dump;
use crate::{now_us, Protocol};

/// One run's load.
#[derive(Clone, Debug)]
pub struct LoadConfig {
    /// Every server, indexed by server id: its address, or its replication group's
    /// (`crate::group`), to each of which the clients send.
    pub servers: Vec<Vec<SocketAddr>>,
    pub protocol: Protocol,
    /// The mix: `workload`, `keys`, `ops_max`, `read_only_percent`, `f1_writes_per_100k`
    /// and `seed` are used (the simulator's own fields otherwise).
    pub mix: SimOptions,
    pub threads: u32,
    pub clients_per_thread: u32,
    /// Transactions offered per second over all threads; 0: closed loop.
    pub rate: u64,
    pub duration: Duration,
    /// Keep every committed transaction for the history check.
    pub record_history: bool,
    /// How long a client waits for an answer before sending again.
    pub resend_after_us: u64,
    /// After `duration`, how long to wait for the transactions under way.
    pub drain_timeout: Duration,
    /// The first protocol client id (several driver processes must not overlap).
    pub first_client: u32,
    /// The baselines' first back-off after an abort, doubled per attempt up to 64 times
    /// (`None`: the client's default, 100 µs). NCC does not back off.
    pub baseline_backoff_us: Option<u64>,
    /// The byte form of the clients' messages (servers answer in kind).
    pub encoding: Encoding,
}

/// What a run measured.
#[derive(Debug)]
pub struct LoadReport {
    /// Transactions committed, and over how long (arrivals stop at `duration`; the ones
    /// under way then still count).
    pub committed: u64,
    pub elapsed: Duration,
    /// Arrival to commit, microseconds.
    pub latency: Histogram<u64>,
    pub stats: ClientStats,
    /// Arrivals dropped because the backlog was full (overload), and ones that never
    /// started before the end.
    pub shed: u64,
    pub unstarted: u64,
    /// Clients still busy after the drain timeout.
    pub unfinished: u64,
    pub messages_sent: u64,
    pub messages_received: u64,
    /// Bytes of those messages on the wire (frames included), both ways.
    pub bytes: u64,
    /// Commits by kind of transaction ([`Program::kind`]: TPC-C's types, else the mix).
    pub by_kind: BTreeMap<&'static str, u64>,
    pub history: Vec<TxnRecord>,
    /// The servers' CPU time over the run, summed, when the caller measured it (a local
    /// cluster can: [`crate::local::LocalCluster::cpu_seconds`]).
    pub server_cpu_seconds: Option<f64>,
    /// The client process's CPU time during the run (every client thread, readers
    /// included), filled in by the caller.
    pub client_cpu_seconds: Option<f64>,
    /// The largest server's resident memory at the end of the run, in bytes, when the
    /// caller measured it.
    pub server_rss_bytes: Option<u64>,
}

impl LoadReport {
    pub fn throughput(&self) -> f64 {
        self.committed as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    /// Commits of one kind per second.
    pub fn throughput_of(&self, kind: &str) -> f64 {
        let n = self.by_kind.get(kind).copied().unwrap_or(0);
        n as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    /// Server CPU per committed transaction, microseconds (all servers together).
    pub fn server_cpu_us_per_txn(&self) -> Option<f64> {
        Some(self.server_cpu_seconds? * 1e6 / self.committed.max(1) as f64)
    }

    /// Client-process CPU per committed transaction, microseconds.
    pub fn client_cpu_us_per_txn(&self) -> Option<f64> {
        Some(self.client_cpu_seconds? * 1e6 / self.committed.max(1) as f64)
    }

    /// Server CPU per protocol message a server received or sent, microseconds: the
    /// simulator's calibrated cost of a message.
    pub fn server_cpu_us_per_message(&self) -> Option<f64> {
        let messages = self.messages_sent + self.messages_received;
        Some(self.server_cpu_seconds? * 1e6 / messages.max(1) as f64)
    }

    /// Bytes on the wire (both ways) per committed transaction.
    pub fn bytes_per_txn(&self) -> f64 {
        self.bytes as f64 / self.committed.max(1) as f64
    }

    /// Protocol messages (both ways) per committed transaction.
    pub fn messages_per_txn(&self) -> f64 {
        (self.messages_sent + self.messages_received) as f64 / self.committed.max(1) as f64
    }
}

/// Microseconds from 1 to 10 minutes at 3 significant digits (a latency above is
/// recorded as 10 minutes: counted, not lost).
fn latency_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 600_000_000, 3).expect("valid bounds")
}

/// The most arrivals a thread holds while every client is busy, per client.
const BACKLOG_PER_CLIENT: usize = 4;

/// Runs the load; an error names a lost connection or a thread that failed.
pub fn run(cfg: &LoadConfig) -> io::Result<LoadReport> {
    if cfg.threads == 0 || cfg.clients_per_thread == 0 || cfg.servers.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "at least one thread, one client and one server",
        ));
    }
    let handles: Vec<_> = (0..cfg.threads)
        .map(|t| {
            let cfg = cfg.clone();
            thread::Builder::new()
                .name(format!("txn-load-{t}"))
                .spawn(move || drive_thread(&cfg, t))
        })
        .collect::<io::Result<_>>()?;
    let mut report = LoadReport {
        committed: 0,
        elapsed: Duration::ZERO,
        latency: latency_histogram(),
        stats: ClientStats::default(),
        shed: 0,
        unstarted: 0,
        unfinished: 0,
        messages_sent: 0,
        messages_received: 0,
        bytes: 0,
        by_kind: BTreeMap::new(),
        history: Vec::new(),
        server_cpu_seconds: None,
        client_cpu_seconds: None,
        server_rss_bytes: None,
    };
    for h in handles {
        let part = h
            .join()
            .map_err(|_| io::Error::other("a load thread panicked"))??;
        report.committed += part.committed;
        report
            .latency
            .add(&part.latency)
            .map_err(|e| io::Error::other(e.to_string()))?;
        report.stats.add(&part.stats);
        report.shed += part.shed;
        report.unstarted += part.unstarted;
        report.unfinished += part.unfinished;
        report.messages_sent += part.messages_sent;
        report.messages_received += part.messages_received;
        report.bytes += part.bytes;
        for (kind, n) in part.by_kind {
            *report.by_kind.entry(kind).or_default() += n;
        }
        report.history.extend(part.history);
    }
    report.elapsed = cfg.duration;
    Ok(report)
}

fn drive_thread(cfg: &LoadConfig, t: u32) -> io::Result<LoadReport> {
    let servers = cfg.servers.len() as u32;
    let first = cfg.first_client + t * cfg.clients_per_thread;
    let ids = first..first + cfg.clients_per_thread;
    match cfg.protocol {
        Protocol::Ncc { read_only } => {
            let clients = ids
                .map(|id| Protocol::ncc_client(id, servers, read_only, cfg.resend_after_us))
                .collect();
            drive(
                cfg,
                t,
                Pool::connect_groups(&cfg.servers, cfg.encoding, first, clients)?,
            )
        }
        Protocol::Baseline(flavor) => {
            let clients = ids
                .map(|id| {
                    let mut c = Protocol::baseline_client(id, servers, flavor);
                    c.resend_after = cfg.resend_after_us;
                    if let Some(b) = cfg.baseline_backoff_us {
                        c.backoff = b;
                    }
                    c
                })
                .collect();
            drive(
                cfg,
                t,
                Pool::connect_groups(&cfg.servers, cfg.encoding, first, clients)?,
            )
        }
    }
}

fn drive<C>(cfg: &LoadConfig, t: u32, mut pool: Pool<C>) -> io::Result<LoadReport>
where
    C: TxnClient,
    C::Msg: Wire + Send + 'static,
{
    let mut mix = cfg.mix.clone();
    mix.servers = cfg.servers.len() as u32;
    let mut gen = Generator::new(&mix, cfg.first_client + t);
    let n = pool.len();
    // Per client: the running program, when it arrived and when it began.
    let mut running: Vec<Option<(Program, u64, u64)>> = (0..n).map(|_| None).collect();
    let mut idle: Vec<usize> = (0..n).rev().collect();
    let mut backlog: VecDeque<u64> = VecDeque::new();
    let mut latency = latency_histogram();
    let mut history = Vec::new();
    let mut by_kind: BTreeMap<&'static str, u64> = BTreeMap::new();
    let (mut committed, mut shed) = (0u64, 0u64);
    let per_thread = cfg.rate as f64 / f64::from(cfg.threads);
    let interval_us = if cfg.rate == 0 { 0.0 } else { 1e6 / per_thread };
    let start = now_us();
    let end = start + cfg.duration.as_micros() as u64;
    let mut next_arrival = start as f64;
    let mut events = Vec::new();
    let mut draining_since: Option<Instant> = None;
    loop {
        let now = now_us();
        let open = now < end;
        if open {
            if cfg.rate == 0 {
                backlog.extend(std::iter::repeat_n(now, idle.len()));
            } else {
                while next_arrival <= now as f64 {
                    if backlog.len() < n * BACKLOG_PER_CLIENT {
                        backlog.push_back(next_arrival as u64);
                    } else {
                        shed += 1;
                    }
                    next_arrival += interval_us;
                }
            }
        } else if draining_since.is_none() {
            draining_since = Some(Instant::now());
        }
        while open && !backlog.is_empty() && !idle.is_empty() {
            let arrived = backlog.pop_front().expect("not empty");
            let i = idle.pop().expect("not empty");
            let program = gen.next_program();
            let (ops, last) = (program.first().to_vec(), !program.two_shots());
            running[i] = Some((program, arrived, now_us()));
            pool.begin(i, ops, last)?;
        }
        if !open && running.iter().all(Option::is_none) && (0..n).all(|i| pool.client(i).idle()) {
            break;
        }
        if draining_since.is_some_and(|d| d.elapsed() > cfg.drain_timeout) {
            break;
        }
        let wait = if open && cfg.rate > 0 {
            let until = (next_arrival - now as f64).max(0.0) as u64;
            Duration::from_micros(until.clamp(50, 1_000))
        } else {
            Duration::from_millis(1)
        };
        pool.poll(wait, &mut events)?;
        for (i, e) in events.drain(..) {
            match e {
                ClientEvent::ShotDone { reads } => {
                    let program = &running[i].as_ref().expect("a shot of a running one").0;
                    let ops = program.second(&reads).expect("two shots");
                    pool.next_shot(i, ops, true)?;
                }
                ClientEvent::Restarted => {}
                ClientEvent::Committed(o) => {
                    let (program, arrived, began) = running[i].take().expect("running");
                    let done = now_us();
                    committed += 1;
                    *by_kind.entry(program.kind()).or_default() += 1;
                    latency.saturating_record(done.saturating_sub(arrived));
                    if cfg.record_history {
                        let writes = o.writes();
                        history.push(TxnRecord {
                            client: o.txn.client,
                            invoked: began,
                            completed: done,
                            reads: o.reads,
                            writes,
                            commit_ts: o.commit_ts,
                        });
                    }
                    idle.push(i);
                }
            }
        }
    }
    Ok(LoadReport {
        committed,
        elapsed: cfg.duration,
        latency,
        stats: pool.stats(),
        shed,
        unstarted: backlog.len() as u64,
        unfinished: running.iter().filter(|r| r.is_some()).count() as u64,
        messages_sent: pool.sent,
        messages_received: pool.received,
        bytes: pool.bytes_sent + pool.bytes_received,
        by_kind,
        history,
        server_cpu_seconds: None,
        client_cpu_seconds: None,
        server_rss_bytes: None,
    })
}

/// Checks a finished run: every transaction finished and decided, the servers'
/// invariants hold, and the history is strictly serializable against the servers'
/// version orders (TAPIR-CC: serializable). `Ok` says what was checked.
pub fn check(protocol: Protocol, report: &LoadReport, dump: &Dump) -> Result<String, String> {
    if report.unfinished > 0 {
        return Err(format!("{} transactions never finished", report.unfinished));
    }
    if dump.undecided > 0 {
        return Err(format!(
            "{} transactions left undecided at the servers",
            dump.undecided
        ));
    }
    if let Some((s, why)) = dump.broken.first() {
        return Err(format!("server {s}: {why}"));
    }
    let n = report.history.len();
    match strictly_serializable(&report.history, &dump.versions) {
        Ok(()) => Ok(format!("{n} transactions strictly serializable")),
        Err(e) if !protocol.strict() => {
            serializable_with(&report.history, &dump.versions, &[])?;
            let e: String = e.chars().take(80).collect();
            Ok(format!("{n} transactions serializable, not strictly ({e})"))
        }
        Err(e) => Err(e),
    }
}
