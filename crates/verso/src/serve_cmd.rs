//! `verso serve`: the Redis-protocol server (in progress: see `verso-server`'s docs).

use std::io::IsTerminal;
use std::net::IpAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use clap::Args;
use verso_engine::Db;
use verso_server::config::{ConfigError, Settings};
use verso_server::metrics;
use verso_server::server::{self, ServerConfig};
use verso_server::session::Shared;

/// Every setting can also come from `--config FILE` under the same name without the dashes
/// (`max-clients = 100`); a flag overrides the file. See `verso.toml.example`.
#[derive(Args, Debug)]
#[command(after_help = "\
Every option can also be set in the --config file under the same name (`max-clients = 100`); \
a flag overrides the file. verso.toml.example lists them all with their defaults.

Logs go to stderr, filtered by RUST_LOG (default `info`: the startup line and protocol \
errors; `RUST_LOG=debug` adds client connects and disconnects).")]
pub struct ServeArgs {
    /// A TOML file of settings (the keys are the flag names below, e.g. `port = 6380`);
    /// flags override it, and an unknown key is an error.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,

    /// Address to listen on [default: 127.0.0.1]. A non-loopback address needs --requirepass.
    #[arg(long, value_name = "IP")]
    bind: Option<IpAddr>,

    /// TCP port [default: 6380].
    #[arg(long, value_name = "PORT")]
    port: Option<u16>,

    /// Password clients must give with AUTH, compared in constant time [default: none].
    #[arg(long, value_name = "PASSWORD")]
    requirepass: Option<String>,

    /// Worker threads; each serves many connections [default: the number of cores].
    #[arg(long, value_name = "N")]
    threads: Option<usize>,

    /// Most connected clients; more are refused with an error [default: 10000].
    #[arg(long, value_name = "N")]
    max_clients: Option<usize>,

    /// Seconds a silent client stays connected [default: 0, forever].
    #[arg(long, value_name = "S")]
    timeout: Option<u64>,

    /// Longest bulk string (one argument) in bytes [default: 67108864, the engine's value
    /// limit].
    #[arg(long, value_name = "BYTES")]
    max_bulk_len: Option<usize>,

    /// Most arguments in one request [default: 1048576].
    #[arg(long, value_name = "N")]
    max_multibulk_len: Option<usize>,

    /// Most bytes buffered for one incomplete request [default: 1073741824].
    #[arg(long, value_name = "BYTES")]
    max_query_buffer: Option<usize>,

    /// Bytes of replies a client may leave unread before it is disconnected
    /// [default: 268435456].
    #[arg(long, value_name = "BYTES")]
    max_output_buffer: Option<usize>,

    /// Keys one connection may watch at once; WATCH past it is refused [default: 10000].
    #[arg(long, value_name = "N")]
    max_watched_keys: Option<usize>,

    /// Commands one MULTI block may queue; past it the block fails [default: 100000].
    #[arg(long, value_name = "N")]
    max_multi_commands: Option<usize>,

    /// Bytes one MULTI block's queued commands may hold; past it the block fails
    /// [default: 268435456].
    #[arg(long, value_name = "BYTES")]
    max_multi_bytes: Option<usize>,

    /// Serve Prometheus metrics at http://BIND:PORT/metrics [default: off].
    #[arg(long, value_name = "PORT")]
    metrics_port: Option<u16>,

    /// none (memory only), lazy (acknowledge at once, on disk within --fsync-interval), or
    /// sync (reply only once the write is on disk) [default: lazy].
    #[arg(long, value_name = "MODE", value_parser = ["none", "lazy", "sync"])]
    durability: Option<String>,

    /// Directory of the redo logs and checkpoints, locked while the server runs
    /// [default: ./verso-data].
    #[arg(long, value_name = "DIR")]
    data_dir: Option<PathBuf>,

    /// Lazy durability: most milliseconds a commit waits in memory [default: 10].
    #[arg(long, value_name = "MS")]
    fsync_interval: Option<u64>,

    /// Seconds between automatic checkpoints while writes arrive [default: 300; 0: off].
    #[arg(long, value_name = "S")]
    checkpoint_interval: Option<u64>,

    /// Checkpoint once the log grew by this many MiB [default: 256; 0: off].
    #[arg(long, value_name = "MIB")]
    checkpoint_log_mb: Option<u64>,

    /// Read rate of background checkpoints in MiB/s [default: 16; 0: full speed].
    #[arg(long, value_name = "MIB_S")]
    checkpoint_rate: Option<u64>,

    /// Start even if a log is damaged in the middle, dropping it from the damage on
    /// (a torn tail from a crash is always cut; this is for real corruption).
    #[arg(long)]
    recovery_truncate: bool,

    /// Run as one replica of a Lazy VSR group: the cluster file lists the replicas (id,
    /// client address, peer address) and their shared secret (see cluster.toml.example).
    /// The client address replaces --bind and --port; the replica's log lives in --data-dir.
    #[arg(long, value_name = "FILE", requires = "replica")]
    cluster: Option<PathBuf>,

    /// This replica's id in the --cluster file.
    #[arg(long, value_name = "ID", requires = "cluster")]
    replica: Option<u8>,

    /// Serve one group's hash slots of a sharded cluster: the file gives every group its
    /// slots and its nodes' client addresses (see shards.toml.example); requests for other
    /// groups' slots are answered with MOVED, as Redis Cluster does.
    #[arg(long, value_name = "FILE", requires = "group")]
    shards: Option<PathBuf>,

    /// This server's group in the --shards file.
    #[arg(long, value_name = "ID", requires = "shards")]
    group: Option<u16>,
}

impl ServeArgs {
    fn settings(&self) -> Settings {
        Settings {
            bind: self.bind,
            port: self.port,
            requirepass: self.requirepass.clone(),
            threads: self.threads,
            max_clients: self.max_clients,
            timeout: self.timeout,
            max_bulk_len: self.max_bulk_len,
            max_multibulk_len: self.max_multibulk_len,
            max_query_buffer: self.max_query_buffer,
            max_output_buffer: self.max_output_buffer,
            max_watched_keys: self.max_watched_keys,
            max_multi_commands: self.max_multi_commands,
            max_multi_bytes: self.max_multi_bytes,
            metrics_port: self.metrics_port,
            durability: self.durability.clone(),
            data_dir: self.data_dir.clone(),
            fsync_interval: self.fsync_interval,
            checkpoint_interval: self.checkpoint_interval,
            checkpoint_log_mb: self.checkpoint_log_mb,
            checkpoint_rate: self.checkpoint_rate,
            recovery_truncate: self.recovery_truncate.then_some(true),
            cluster: self.cluster.clone(),
            replica: self.replica,
            shards: self.shards.clone(),
            group: self.group,
        }
    }

    /// The file's settings (if any) overridden by the flags.
    fn resolve(&self) -> Result<ServerConfig, ConfigError> {
        let file = match &self.config {
            Some(path) => Settings::load(path)?,
            None => Settings::default(),
        };
        file.overridden_by(self.settings()).resolve()
    }
}

/// Runs the server until SIGINT or SIGTERM.
pub fn run(args: &ServeArgs) -> ExitCode {
    init_logging();
    let cfg = match args.resolve() {
        Ok(cfg) => cfg,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let listener = match server::bind(&cfg) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    // Precision locking (EXEC after WATCH relies on its commit validation) and the durability
    // settings; a durable database recovers its data directory here.
    let db = match Db::open(cfg.db_options()) {
        Ok(db) => db,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    if let Some(r) = db.recovery_report() {
        tracing::info!(
            data_dir = %cfg.data_dir.display(),
            durability = %cfg.durability,
            checkpoint_keys = r.checkpoint_entries,
            log_txns = r.logs.txns_replayed,
            dropped_txns = r.logs.txns_dropped,
            ms = r.duration.as_millis() as u64,
            "recovered"
        );
    }
    let db = Arc::new(db);
    // A replica recovers its log into the (empty) database and joins its group.
    let node = match &cfg.cluster {
        None => None,
        Some(c) => {
            let opts = verso_replication::NodeOptions {
                me: c.replica,
                cluster: c.config.clone(),
                dir: cfg.data_dir.clone(),
                sync_replies: cfg.durability == verso_engine::Durability::Sync,
            };
            match verso_replication::Node::start(db.clone(), opts) {
                Ok(n) => Some(n),
                Err(e) => {
                    eprintln!("error: {e}");
                    return ExitCode::FAILURE;
                }
            }
        }
    };
    let shared = match Shared::with_policy(db, cfg.password.clone(), cfg.checkpoints.clone()) {
        Ok(s) => {
            let s = s.with_limits(cfg.session).with_shards(cfg.shards.clone());
            match &node {
                Some(n) => s.with_replication(n.replication().clone()),
                None => s,
            }
        }
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        if let Err(e) = signal_hook::flag::register(sig, stop.clone()) {
            eprintln!("error: cannot handle signal {sig}: {e}");
            return ExitCode::FAILURE;
        }
    }
    let metrics = match cfg
        .metrics_port
        .map(|port| metrics::bind(&cfg, port))
        .transpose()
    {
        Ok(m) => m,
        Err(e) => {
            eprintln!("error: metrics port: {e}");
            return ExitCode::from(2);
        }
    };
    let port = listener.local_addr().map_or(cfg.port, |a| a.port());
    tracing::info!(
        version = env!("CARGO_PKG_VERSION"),
        bind = %cfg.bind,
        port,
        protocol = "RESP2/RESP3",
        threads = cfg.threads,
        metrics_port = ?cfg.metrics_port,
        "verso listening on {}:{port} (Ctrl-C to stop)",
        cfg.bind
    );
    std::thread::scope(|s| {
        if let Some(m) = metrics {
            let (shared, stop) = (&shared, &*stop);
            s.spawn(move || metrics::serve(m, shared, stop));
        }
        let shared_ref = &shared;
        s.spawn(move || shared_ref.persistence.run(&shared_ref.db));
        server::serve(listener, &shared, &cfg, &stop);
        stop.store(true, Ordering::Relaxed); // ends the metrics thread too
        shared.persistence.stop();
    });
    // Dropping the database flushes the redo log.
    if let Err(e) = shared.db.flush() {
        tracing::error!(error = %e, "the last commits could not be written");
    }
    drop(node);
    tracing::info!("verso stopped");
    ExitCode::SUCCESS
}

/// Structured logs on stderr; `RUST_LOG` filters them (default `info`; `debug` adds client
/// connects and disconnects).
fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .try_init();
}
