//! The metrics endpoint (`--metrics-port`): a tiny HTTP/1.0 responder on its own thread that
//! answers `GET /metrics` with [`crate::info::prometheus`] and anything else with 404, one
//! short request at a time; and the process's resident memory, read from `/proc`.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::server::ServerConfig;
use crate::session::Shared;

/// Bytes of a request read before it is answered (only its first line matters).
const REQUEST_BYTES_MAX: usize = 4096;
/// How long a scrape may take to send its request or read the answer.
const SCRAPE_TIMEOUT: Duration = Duration::from_secs(2);
/// How often the listener looks at `stop` while nobody connects.
const ACCEPT_INTERVAL: Duration = Duration::from_millis(50);

/// The resident set size of this process in bytes (`None` where `/proc` is missing).
/// `VmRSS` in `/proc/self/status` is the same figure as `statm`'s second field, but in kB, so
/// no page size is needed.
pub fn rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Stores the current RSS in the shared stats (INFO memory reads it from there).
pub fn refresh_memory(shared: &Shared) {
    if let Some(rss) = rss_bytes() {
        shared.stats.used_memory.store(rss, Ordering::Relaxed);
    }
}

/// Binds the metrics listener on the server's address and `port`.
pub fn bind(cfg: &ServerConfig, port: u16) -> std::io::Result<TcpListener> {
    let listener = TcpListener::bind(SocketAddr::new(cfg.bind, port))?;
    listener.set_nonblocking(true)?;
    Ok(listener)
}

/// Answers scrapes until `stop` is set.
pub fn serve(listener: TcpListener, shared: &Shared, stop: &AtomicBool) {
    while !stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((stream, _)) => {
                if let Err(e) = answer(stream, shared) {
                    tracing::debug!(error = %e, "metrics scrape failed");
                }
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => std::thread::sleep(ACCEPT_INTERVAL),
        }
    }
}

fn answer(mut stream: TcpStream, shared: &Shared) -> std::io::Result<()> {
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(SCRAPE_TIMEOUT))?;
    stream.set_write_timeout(Some(SCRAPE_TIMEOUT))?;
    let mut request = Vec::with_capacity(512);
    let mut chunk = [0u8; 512];
    while !request.windows(4).any(|w| w == b"\r\n\r\n") && !request.windows(2).any(|w| w == b"\n\n")
    {
        let n = stream.read(&mut chunk)?;
        if n == 0 {
            break;
        }
        request.extend_from_slice(&chunk[..n]);
        if request.len() >= REQUEST_BYTES_MAX {
            break;
        }
    }
    let (status, body) = route(&request, shared);
    let head = format!(
        "HTTP/1.0 {status}\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes())?;
    stream.write_all(body.as_bytes())?;
    stream.flush()
}

/// The status line and body for a request (only `GET /metrics` exists).
fn route(request: &[u8], shared: &Shared) -> (&'static str, String) {
    let line = request.split(|&b| b == b'\n').next().unwrap_or_default();
    let mut parts = line
        .split(|&b| b == b' ' || b == b'\r')
        .filter(|p| !p.is_empty());
    let (method, path) = (parts.next(), parts.next());
    if method == Some(b"GET".as_slice()) && matches!(path, Some(b"/metrics" | b"/metrics/")) {
        refresh_memory(shared);
        ("200 OK", crate::info::prometheus(shared))
    } else {
        ("404 Not Found", "not found: try GET /metrics\n".into())
    }
}
