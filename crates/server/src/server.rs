//! The TCP side: a listener, one thread per connection (bounded by `max_clients`), and the
//! read-parse-execute-write loop with pipelining (every complete request in the buffer is
//! answered before the next read). All protocol logic is in [`crate::session`].

use std::io::{ErrorKind, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::resp::{Limits, Parser, Reply};
use crate::session::{Session, Shared};

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
    /// Seconds a client may stay silent before it is disconnected (0: never).
    pub idle_timeout_s: u64,
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
            idle_timeout_s: 0,
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

/// Serves until `stop` is set, then stops accepting and waits for connections to finish
/// their current request (they are told to close at their next read).
pub fn serve(listener: TcpListener, shared: &Shared, cfg: &ServerConfig, stop: &AtomicBool) {
    let clients = Arc::new(AtomicUsize::new(0));
    std::thread::scope(|s| {
        while !stop.load(Ordering::Relaxed) {
            match listener.accept() {
                Ok((stream, _)) => {
                    if clients.load(Ordering::Relaxed) >= cfg.max_clients {
                        let _ = refuse(stream);
                        continue;
                    }
                    clients.fetch_add(1, Ordering::Relaxed);
                    let clients = clients.clone();
                    let spawned = std::thread::Builder::new()
                        .name("verso-conn".into())
                        .spawn_scoped(s, move || {
                            let _ = connection(stream, shared, cfg, stop);
                            clients.fetch_sub(1, Ordering::Relaxed);
                        });
                    if spawned.is_err() {
                        // Out of threads: the connection is dropped (closed).
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    std::thread::sleep(Duration::from_millis(5));
                }
                Err(_) => std::thread::sleep(Duration::from_millis(5)),
            }
        }
    });
}

fn refuse(mut stream: TcpStream) -> std::io::Result<()> {
    stream.write_all(b"-ERR max number of clients reached\r\n")
}

fn connection(
    mut stream: TcpStream,
    shared: &Shared,
    cfg: &ServerConfig,
    stop: &AtomicBool,
) -> std::io::Result<()> {
    stream.set_nonblocking(false)?;
    stream.set_nodelay(true)?;
    // Wake up now and then to notice a shutdown, and to enforce the idle timeout.
    stream.set_read_timeout(Some(Duration::from_millis(200)))?;
    let parser = Parser::new(cfg.limits);
    let mut session = Session::new(shared);
    let mut input: Vec<u8> = Vec::with_capacity(16 << 10);
    let mut output: Vec<u8> = Vec::with_capacity(16 << 10);
    let mut chunk = vec![0u8; 64 << 10];
    let mut idle = Duration::ZERO;
    loop {
        if stop.load(Ordering::Relaxed) {
            return Ok(());
        }
        let n = match stream.read(&mut chunk) {
            Ok(0) => return Ok(()), // the client closed
            Ok(n) => n,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                idle += Duration::from_millis(200);
                if cfg.idle_timeout_s > 0 && idle >= Duration::from_secs(cfg.idle_timeout_s) {
                    return Ok(());
                }
                continue;
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        idle = Duration::ZERO;
        input.extend_from_slice(&chunk[..n]);
        let mut used = 0;
        loop {
            match parser.parse(&input[used..]) {
                Ok(Some((args, len))) => {
                    used += len;
                    if args.is_empty() {
                        continue;
                    }
                    let reply = session.execute(args);
                    reply.encode(session.version, &mut output);
                    if output.len() > cfg.output_buffer_max {
                        // The client pipelines faster than it reads: drop it, as Redis does.
                        return Ok(());
                    }
                    if session.closing {
                        stream.write_all(&output)?;
                        return Ok(());
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    Reply::Error(format!("ERR {e}")).encode(session.version, &mut output);
                    stream.write_all(&output)?;
                    return Ok(());
                }
            }
        }
        input.drain(..used);
        if !output.is_empty() {
            stream.write_all(&output)?;
            output.clear();
        }
    }
}
