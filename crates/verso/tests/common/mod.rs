//! What the multi-process tests share: a minimal RESP client (no dependency, so a test can
//! see every reply exactly as sent), free ports, and server processes killed on drop.
#![allow(dead_code)]

pub mod txn_clients;

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::process::Child;
use std::time::Duration;

#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    Simple(String),
    Error(String),
    Int(i64),
    Bulk(Option<Vec<u8>>),
    Array(Option<Vec<Reply>>),
}

pub struct Conn {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

impl Conn {
    pub fn open(port: u16) -> std::io::Result<Conn> {
        let s = TcpStream::connect(("127.0.0.1", port))?;
        s.set_read_timeout(Some(Duration::from_secs(20)))?;
        s.set_nodelay(true)?;
        Ok(Conn {
            reader: BufReader::new(s.try_clone()?),
            writer: s,
        })
    }

    /// Like [`Conn::open`], with the connect and every read and write bounded by `timeout`.
    pub fn open_timeout(port: u16, timeout: Duration) -> std::io::Result<Conn> {
        let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
        let s = TcpStream::connect_timeout(&addr, timeout)?;
        s.set_read_timeout(Some(timeout))?;
        s.set_write_timeout(Some(timeout))?;
        s.set_nodelay(true)?;
        Ok(Conn {
            reader: BufReader::new(s.try_clone()?),
            writer: s,
        })
    }

    /// Sends commands of binary arguments in one write, without reading their replies.
    pub fn send(&mut self, commands: &[Vec<Vec<u8>>]) -> std::io::Result<()> {
        let mut out = Vec::new();
        for args in commands {
            out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
            for a in args {
                out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
                out.extend_from_slice(a);
                out.extend_from_slice(b"\r\n");
            }
        }
        self.writer.write_all(&out)
    }

    pub fn call(&mut self, args: &[&str]) -> std::io::Result<Reply> {
        let mut out = format!("*{}\r\n", args.len());
        for a in args {
            out.push_str(&format!("${}\r\n{a}\r\n", a.len()));
        }
        self.writer.write_all(out.as_bytes())?;
        self.read()
    }

    pub fn read(&mut self) -> std::io::Result<Reply> {
        let mut line = String::new();
        if self.reader.read_line(&mut line)? == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        let line = line.trim_end_matches("\r\n");
        let (kind, rest) = line.split_at(1);
        let bad = || std::io::Error::other(format!("bad reply line {line:?}"));
        Ok(match kind {
            "+" => Reply::Simple(rest.into()),
            "-" => Reply::Error(rest.into()),
            ":" => Reply::Int(rest.parse().map_err(|_| bad())?),
            "$" => {
                let n: i64 = rest.parse().map_err(|_| bad())?;
                if n < 0 {
                    Reply::Bulk(None)
                } else {
                    let mut buf = vec![0u8; n as usize + 2];
                    std::io::Read::read_exact(&mut self.reader, &mut buf)?;
                    buf.truncate(n as usize);
                    Reply::Bulk(Some(buf))
                }
            }
            "*" => {
                let n: i64 = rest.parse().map_err(|_| bad())?;
                if n < 0 {
                    Reply::Array(None)
                } else {
                    let mut v = Vec::new();
                    for _ in 0..n {
                        v.push(self.read()?);
                    }
                    Reply::Array(Some(v))
                }
            }
            _ => return Err(bad()),
        })
    }

    pub fn get_int(&mut self, key: &str) -> i64 {
        match self.call(&["GET", key]).unwrap() {
            Reply::Bulk(None) => 0,
            Reply::Bulk(Some(b)) => String::from_utf8(b).unwrap().parse().unwrap(),
            r => panic!("GET {key}: {r:?}"),
        }
    }
}

/// A port no one listens on, distinct from every other this process was given, and below
/// the kernel's ephemeral range: a port taken by binding port 0 and closing again can be
/// handed out again by the next bind to port 0 (a test's proxy) or taken by an outgoing
/// connection before the server that should listen on it has started.
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    const LOW: u32 = 10_000;
    let ephemeral_low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<u32>().ok())
        .filter(|&p| p > LOW + 1_000)
        .unwrap_or(32_768);
    let span = ephemeral_low - LOW;
    let start = std::process::id().wrapping_mul(7_919) % span;
    for _ in 0..span {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let port = (LOW + (start + n) % span) as u16;
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free port in {LOW}..{ephemeral_low}");
}

/// The last `last` lines of each replica's log `dir/replica{id}.log`, headed by its id: what a
/// failed multi-process test prints.
pub fn log_tails(dir: &std::path::Path, replicas: usize, last: usize) -> String {
    let mut out = String::new();
    for id in 0..replicas {
        let text =
            std::fs::read_to_string(dir.join(format!("replica{id}.log"))).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        out.push_str(&format!("--- replica {id} ---\n"));
        for l in &lines[lines.len().saturating_sub(last)..] {
            out.push_str(l);
            out.push('\n');
        }
    }
    out
}

/// A server process, killed when dropped (a failed check must not leave it running).
pub struct Server(pub Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// xorshift64*: a test's only randomness, seeded.
pub struct Rng(pub u64);
impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// The seed in environment variable `var` (to rerun a failure), or a fresh one.
pub fn seed_from_env(var: &str) -> u64 {
    std::env::var(var)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        })
}
