//! `verso serve`: the Redis-protocol server (in progress: see `verso-server`'s docs).

use std::net::IpAddr;
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use clap::Args;
use verso_engine::{Concurrency, Db, Options};
use verso_server::server::{self, ServerConfig};
use verso_server::session::Shared;

#[derive(Args, Debug)]
pub struct ServeArgs {
    /// Address to listen on. A non-loopback address needs --requirepass.
    #[arg(long, default_value = "127.0.0.1", value_name = "IP")]
    bind: IpAddr,

    /// TCP port.
    #[arg(long, default_value_t = 6380, value_name = "PORT")]
    port: u16,

    /// Password clients must give with AUTH (compared in constant time).
    #[arg(long, value_name = "PASSWORD")]
    requirepass: Option<String>,

    /// Most connected clients.
    #[arg(long, default_value_t = 10_000, value_name = "N")]
    max_clients: usize,

    /// Seconds a silent client stays connected (0: forever).
    #[arg(long, default_value_t = 0, value_name = "S")]
    timeout: u64,
}

/// Runs the server until SIGINT or SIGTERM.
pub fn run(args: &ServeArgs) -> ExitCode {
    let cfg = ServerConfig {
        bind: args.bind,
        port: args.port,
        password: args.requirepass.clone(),
        max_clients: args.max_clients,
        idle_timeout_s: args.timeout,
        ..ServerConfig::default()
    };
    let listener = match server::bind(&cfg) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    // Precision locking: WATCH/EXEC relies on its commit validation (verso-server docs).
    let db = match Db::open(Options::default().concurrency(Concurrency::PrecisionLocking)) {
        Ok(db) => db,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    let shared = match Shared::new(db, cfg.password.clone()) {
        Ok(s) => s,
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
    eprintln!(
        "verso {} listening on {}:{} (Ctrl-C to stop)",
        env!("CARGO_PKG_VERSION"),
        cfg.bind,
        cfg.port
    );
    server::serve(listener, &shared, &cfg, &stop);
    eprintln!("verso: stopped");
    ExitCode::SUCCESS
}
