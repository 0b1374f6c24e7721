//! The TCP side: the listener, protected mode, and the accepting thread that hands connections
//! to a fixed pool of worker threads ([`crate::worker`]: a poll loop each, many connections
//! per worker, pipelining). All protocol logic is in [`crate::session`].

use std::io::{ErrorKind, Write};
use std::net::{IpAddr, SocketAddr, TcpListener};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mio::{Events, Interest, Poll, Token, Waker};

use crate::resp::Limits;
use crate::session::Shared;

/// How the server runs (flags and the config file fill it).
#[derive(Clone, Debug)]
pub struct ServerConfig {
    pub bind: IpAddr,
    pub port: u16,
    pub password: Option<String>,
    pub limits: Limits,
    /// Worker threads serving connections (each serves many).
    pub threads: usize,
    /// Most connected clients; more are refused with Redis's error.
    pub max_clients: usize,
    /// Bytes of replies one client may have pending before it is disconnected.
    pub output_buffer_max: usize,
    /// What one connection may keep between commands (watched keys, a MULTI queue).
    pub session: crate::session::SessionLimits,
    /// Seconds a client may stay silent before it is disconnected (0: never).
    pub idle_timeout_s: u64,
    /// Port of the Prometheus endpoint on `bind` (`None`: off); see [`crate::metrics`].
    pub metrics_port: Option<u16>,
    /// Redo logging of the server's database.
    pub durability: verso_engine::Durability,
    pub data_dir: std::path::PathBuf,
    pub fsync_interval: Duration,
    pub checkpoints: crate::persistence::CheckpointPolicy,
    pub recovery_truncate: bool,
    /// A replica of a Lazy VSR group (`--cluster`, `--replica`); `None`: a single server.
    pub cluster: Option<crate::config::ClusterSettings>,
    /// This server's group's slots in a sharded cluster (`--shards`, `--group`).
    pub shards: Option<crate::shards::ShardMap>,
}

impl ServerConfig {
    /// The engine options of the server's database: precision locking (WATCH needs its
    /// validation) and the durability settings.
    pub fn db_options(&self) -> verso_engine::Options {
        // A replica's durability is its replicated log (`verso_replication::disk`), not
        // the engine's redo log.
        let durability = if self.cluster.is_some() {
            verso_engine::Durability::None
        } else {
            self.durability
        };
        verso_engine::Options::default()
            .concurrency(verso_engine::Concurrency::PrecisionLocking)
            .durability(durability)
            .data_dir(&self.data_dir)
            .fsync_interval(self.fsync_interval)
            .recovery_truncate(self.recovery_truncate)
    }
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            bind: IpAddr::from([127, 0, 0, 1]),
            port: 6380,
            password: None,
            limits: Limits {
                bulk_len_max: verso_engine::VALUE_SIZE_MAX_DEFAULT,
                ..Limits::default()
            },
            threads: crate::config::default_threads(),
            max_clients: 10_000,
            output_buffer_max: 256 << 20,
            session: crate::session::SessionLimits::default(),
            idle_timeout_s: 0,
            metrics_port: None,
            durability: verso_engine::Durability::Lazy,
            data_dir: verso_engine::DATA_DIR_DEFAULT.into(),
            fsync_interval: verso_engine::FSYNC_INTERVAL_DEFAULT,
            checkpoints: crate::persistence::CheckpointPolicy::default(),
            recovery_truncate: false,
            cluster: None,
            shards: None,
        }
    }
}

/// Why the server would not start.
#[derive(Debug)]
pub enum StartError {
    /// Protected mode: a non-loopback address without `--requirepass`.
    Unprotected(IpAddr),
    Io(std::io::Error),
}

impl std::fmt::Display for StartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StartError::Unprotected(ip) => write!(
                f,
                "refusing to listen on {ip} without a password: anyone who can reach it could read and change every key. Set --requirepass (or bind a loopback address such as 127.0.0.1)"
            ),
            StartError::Io(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for StartError {}

/// Checks the configuration and binds the listener.
pub fn bind(cfg: &ServerConfig) -> Result<TcpListener, StartError> {
    if !cfg.bind.is_loopback() && cfg.password.is_none() {
        return Err(StartError::Unprotected(cfg.bind));
    }
    let listener =
        TcpListener::bind(SocketAddr::new(cfg.bind, cfg.port)).map_err(StartError::Io)?;
    // Polled, so a shutdown request is noticed without a connection arriving.
    listener.set_nonblocking(true).map_err(StartError::Io)?;
    Ok(listener)
}

/// How long a blocked poll sleeps before looking at `stop` (and idle clients) again.
const POLL_INTERVAL: Duration = Duration::from_millis(100);
const LISTENER: Token = Token(0);
/// How often INFO memory's figure is refreshed.
const MEMORY_INTERVAL: Duration = Duration::from_secs(1);

/// Serves until `stop` is set, then stops accepting, and each worker closes its connections
/// (a request is never left half-executed: requests run whole between polls).
///
/// This thread accepts; `cfg.threads` workers each multiplex many connections over their own
/// poll loop ([`crate::worker`]), and new connections go to them in turn.
pub fn serve(listener: TcpListener, shared: &Shared, cfg: &ServerConfig, stop: &AtomicBool) {
    assert!(cfg.threads >= 1);
    assert!(cfg.max_clients >= 1);
    let clients = AtomicUsize::new(0);
    let workers: Vec<Worker> = match (0..cfg.threads).map(|_| Worker::new()).collect() {
        Ok(w) => w,
        Err(_) => return, // no poll instance: nothing can be served
    };
    let mut listener = mio::net::TcpListener::from_std(listener);
    let Ok(mut poll) = Poll::new() else { return };
    if poll
        .registry()
        .register(&mut listener, LISTENER, Interest::READABLE)
        .is_err()
    {
        return;
    }
    // Workers holding replies for the disk are woken when the log makes progress.
    let wakes: Vec<Arc<crate::worker::Wake>> = workers.iter().map(|w| w.wake.clone()).collect();
    if let Some(r) = &shared.replication {
        let on_commit = wakes.clone();
        r.on_progress(move || {
            for w in &on_commit {
                w.durable_progress();
            }
        });
        let on_disk = wakes.clone();
        r.on_disk_progress(move || {
            for w in &on_disk {
                w.disk_progress();
            }
        });
    }
    {
        // A commit that may unblock a BLPOP wakes every worker to let its blocked
        // connections try again (`session::BlockingHub`).
        let wakes = wakes.clone();
        shared.blocking.set_waker(Box::new(move || {
            for w in &wakes {
                w.durable_progress();
            }
        }));
    }
    shared.db.on_durable(move || {
        for w in &wakes {
            w.durable_progress();
        }
    });
    std::thread::scope(|s| {
        let mut handles = Vec::with_capacity(workers.len());
        for (i, w) in workers.into_iter().enumerate() {
            let (poll, rx, wake) = (w.poll, w.rx, w.wake.clone());
            let clients = &clients;
            handles.push((w.tx, w.wake));
            let spawned = std::thread::Builder::new()
                .name(format!("verso-worker-{i}"))
                .spawn_scoped(s, move || {
                    crate::worker::run(poll, rx, shared, cfg, stop, clients, &wake)
                });
            if spawned.is_err() {
                stop.store(true, Ordering::Relaxed); // the scope joins those already started
                return;
            }
        }
        let expirer = std::thread::Builder::new()
            .name("verso-expirer".into())
            .spawn_scoped(s, move || run_expirer(shared, stop));
        if expirer.is_err() {
            stop.store(true, Ordering::Relaxed);
            return;
        }
        if shared.shards.is_some() {
            let prober = std::thread::Builder::new()
                .name("verso-shard-prober".into())
                .spawn_scoped(s, move || crate::shard_prober::run(shared, stop));
            if prober.is_err() {
                stop.store(true, Ordering::Relaxed);
                return;
            }
            let mover = std::thread::Builder::new()
                .name("verso-mover".into())
                .spawn_scoped(s, move || crate::moves::mover::run(shared, stop));
            if mover.is_err() {
                stop.store(true, Ordering::Relaxed);
                return;
            }
        }
        let mut events = Events::with_capacity(16);
        let mut next = 0usize;
        let mut memory_measured: Option<Instant> = None;
        while !stop.load(Ordering::Relaxed) {
            if memory_measured.is_none_or(|t| t.elapsed() >= MEMORY_INTERVAL) {
                crate::metrics::refresh_memory(shared);
                memory_measured = Some(Instant::now());
            }
            if let Err(e) = poll.poll(&mut events, Some(POLL_INTERVAL)) {
                if e.kind() != ErrorKind::Interrupted {
                    break;
                }
            }
            loop {
                let stream = match listener.accept() {
                    Ok((stream, _)) => stream,
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                    // Out of descriptors and the like: try again at the next event.
                    Err(_) => break,
                };
                if clients.load(Ordering::Relaxed) >= cfg.max_clients {
                    let _ = refuse(stream);
                    continue;
                }
                clients.fetch_add(1, Ordering::Relaxed);
                let (tx, waker) = &handles[next % handles.len()];
                next = next.wrapping_add(1);
                if tx.send(stream).is_err() || waker.waker.wake().is_err() {
                    break;
                }
            }
        }
        stop.store(true, Ordering::Relaxed);
        for (_, waker) in &handles {
            let _ = waker.waker.wake();
        }
    });
}

/// Transactions of element deletions the reclaimer runs per expirer cycle (512 elements
/// each).
const RECLAIM_BATCHES_PER_CYCLE: usize = 32;

/// The active expirer: every [`crate::expiry::EXPIRE_INTERVAL`], deletes keys whose
/// deadline passed, for at most [`crate::expiry::EXPIRE_CYCLE_BUDGET`] a cycle, on the primary
/// only (a backup receives the deletions through the log).
///
/// The engine collects garbage when a queue fills, so the last few deletions of a quiet
/// server would stay in the index; after a cycle that deleted keys, the next two collect
/// every queue (the first takes the keys out of the index, the second frees their records
/// once no transaction can hold them).
///
/// The same thread frees the elements of dropped collections and sweeps the collection
/// registry ([`crate::collections::reclaim`]).
fn run_expirer(shared: &Shared, stop: &AtomicBool) {
    let mut collections_due = 0;
    let mut sweep_cursor = None;
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(crate::expiry::EXPIRE_INTERVAL);
        if collections_due > 0 {
            shared.db.collect_garbage();
            collections_due -= 1;
        }
        if shared.replication.as_ref().is_some_and(|r| !r.is_primary()) {
            continue;
        }
        let deleted = crate::expiry::expire_cycle(
            &shared.db,
            shared.spaces(),
            crate::expiry::EXPIRE_CYCLE_BUDGET,
        );
        let reclaimed = crate::collections::reclaim(
            &shared.db,
            shared.spaces(),
            &mut sweep_cursor,
            RECLAIM_BATCHES_PER_CYCLE,
        );
        if deleted > 0 || reclaimed.elements > 0 {
            collections_due = 2;
        }
    }
}

/// A worker's poll instance and its inbox of new connections, made before it starts.
struct Worker {
    poll: Poll,
    wake: Arc<crate::worker::Wake>,
    tx: Sender<mio::net::TcpStream>,
    rx: Receiver<mio::net::TcpStream>,
}

impl Worker {
    fn new() -> std::io::Result<Worker> {
        let poll = Poll::new()?;
        let waker = Waker::new(poll.registry(), crate::worker::WAKER)?;
        let (tx, rx) = std::sync::mpsc::channel();
        Ok(Worker {
            poll,
            wake: Arc::new(crate::worker::Wake::new(waker)),
            tx,
            rx,
        })
    }
}

fn refuse(mut stream: mio::net::TcpStream) -> std::io::Result<()> {
    // Best effort: a fresh socket's send buffer is empty, so this short write goes out whole.
    stream.write_all(b"-ERR max number of clients reached\r\n")
}
