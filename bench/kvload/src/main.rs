//! kvload: C connections (one thread each) issue puts back to back, one outstanding request
//! per connection, until N puts have been sent between them; prints `rps p50_ms p99_ms`.
//!
//!   kvload etcd|resp|resp-cluster|resp-cluster-wait1 HOST:PORT CLIENTS N VALUE [KEYSPACE=1000000]
//!
//! `etcd` speaks etcd's v3 gRPC-gateway JSON API over HTTP/1.1 keep-alive (`POST /v3/kv/put`
//! with base64 key and value; etcd 3.4 serves it on the client port). `resp` sends Redis
//! `SET key value`. Keys are like redis-benchmark's `-r KEYSPACE`: `key:` and 12 digits of a
//! random number below KEYSPACE; values are VALUE bytes of `x`, as redis-benchmark sends.
//! `resp-cluster` asks HOST:PORT for `CLUSTER SLOTS` and sends each SET to its slot's
//! primary (one connection per primary per client); `resp-cluster-wait1` sends `WAIT 1 0`
//! right behind each SET (one round trip) and counts the put once a replica acknowledged it:
//! Redis Cluster's nearest match to a write held by a majority.
//! Any answer other than HTTP 200 (etcd) or `+OK` (resp) aborts with a message.
//!
//!   kvload follow HOST:PORT CLIENTS SECONDS VALUE KEYSPACE TIMELINE_FILE
//!
//! `follow` is a cluster client for slot moves: SETs routed by slot for SECONDS, following
//! `MOVED` (the slot's owner changes), `ASK` (`ASKING` then the SET at the named node) and
//! `TRYAGAIN` (again after 1 ms) as cluster clients do. It writes the SETs completed in each
//! 100 ms to TIMELINE_FILE (`ms count` per line) and prints `rps redirects asks tryagain_requests
//! tryagain_p99_ms tryagain_max_ms`: how long a request kept getting TRYAGAIN before it
//! succeeded.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::exit;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

#[derive(Clone, Copy, PartialEq)]
enum Proto {
    Etcd,
    Resp,
    /// Routed by hash slot; `true`: each SET followed by `WAIT 1 0`.
    RespCluster(bool),
}

fn die(msg: &str) -> ! {
    eprintln!("kvload: {msg}");
    exit(1)
}

fn usage() -> ! {
    die("usage: kvload etcd|resp|resp-cluster|resp-cluster-wait1 HOST:PORT CLIENTS N VALUE [KEYSPACE=1000000]")
}

fn arg<T: std::str::FromStr>(args: &[String], i: usize, default: Option<T>) -> T {
    match args.get(i) {
        Some(s) => s.parse().unwrap_or_else(|_| usage()),
        None => default.unwrap_or_else(|| usage()),
    }
}

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

fn base64(input: &[u8], out: &mut Vec<u8>) {
    for chunk in input.chunks(3) {
        let b = [chunk[0], *chunk.get(1).unwrap_or(&0), *chunk.get(2).unwrap_or(&0)];
        let n = (b[0] as u32) << 16 | (b[1] as u32) << 8 | b[2] as u32;
        out.push(B64[(n >> 18) as usize & 63]);
        out.push(B64[(n >> 12) as usize & 63]);
        out.push(if chunk.len() > 1 { B64[(n >> 6) as usize & 63] } else { b'=' });
        out.push(if chunk.len() > 2 { B64[n as usize & 63] } else { b'=' });
    }
}

/// splitmix64: good enough to spread keys, no dependency.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

struct Conn {
    proto: Proto,
    host: String,
    w: TcpStream,
    r: BufReader<TcpStream>,
    value: Vec<u8>, // raw for resp, base64 for etcd
    req: Vec<u8>,
    body: Vec<u8>,
    line: String,
}

impl Conn {
    fn open(proto: Proto, addr: &str, value: &[u8]) -> Conn {
        let w = TcpStream::connect(addr).unwrap_or_else(|e| die(&format!("connect {addr}: {e}")));
        w.set_nodelay(true).ok();
        let r = BufReader::with_capacity(64 * 1024, w.try_clone().unwrap());
        let value = match proto {
            Proto::Resp | Proto::RespCluster(_) => value.to_vec(),
            Proto::Etcd => {
                let mut v = Vec::new();
                base64(value, &mut v);
                v
            }
        };
        Conn { proto, host: addr.to_string(), w, r, value, req: Vec::new(), body: Vec::new(), line: String::new() }
    }

    fn put(&mut self, key: &[u8]) {
        self.req.clear();
        match self.proto {
            Proto::Resp | Proto::RespCluster(_) => {
                write!(self.req, "*3\r\n$3\r\nSET\r\n${}\r\n", key.len()).unwrap();
                self.req.extend_from_slice(key);
                write!(self.req, "\r\n${}\r\n", self.value.len()).unwrap();
                self.req.extend_from_slice(&self.value);
                self.req.extend_from_slice(b"\r\n");
                let wait = self.proto == Proto::RespCluster(true);
                if wait {
                    self.req.extend_from_slice(b"*3\r\n$4\r\nWAIT\r\n$1\r\n1\r\n$1\r\n0\r\n");
                }
                self.send();
                self.read_line();
                if self.line != "+OK\r\n" {
                    die(&format!("SET answered {:?}", self.line.trim_end()));
                }
                if wait {
                    self.read_line();
                    if !self.line.starts_with(':') || self.line.starts_with(":0") {
                        die(&format!("WAIT answered {:?}", self.line.trim_end()));
                    }
                }
            }
            Proto::Etcd => {
                self.body.clear();
                self.body.extend_from_slice(b"{\"key\":\"");
                base64(key, &mut self.body);
                self.body.extend_from_slice(b"\",\"value\":\"");
                self.body.extend_from_slice(&self.value);
                self.body.extend_from_slice(b"\"}");
                write!(
                    self.req,
                    "POST /v3/kv/put HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
                    self.host,
                    self.body.len()
                )
                .unwrap();
                self.req.extend_from_slice(&self.body);
                self.send();
                self.read_http();
            }
        }
    }

    fn send(&mut self) {
        if let Err(e) = self.w.write_all(&self.req) {
            die(&format!("send to {}: {e}", self.host));
        }
    }

    fn read_line(&mut self) {
        self.line.clear();
        match self.r.read_line(&mut self.line) {
            Ok(0) => die(&format!("{} closed the connection", self.host)),
            Ok(_) => {}
            Err(e) => die(&format!("read from {}: {e}", self.host)),
        }
    }

    fn read_exact(&mut self, n: usize) {
        self.body.resize(n, 0);
        if let Err(e) = self.r.read_exact(&mut self.body) {
            die(&format!("read from {}: {e}", self.host));
        }
    }

    /// One HTTP/1.1 response: status line, headers, a body by Content-Length or chunked.
    fn read_http(&mut self) {
        self.read_line();
        let status = self.line.split_whitespace().nth(1).map(str::to_string).unwrap_or_default();
        let status_line = self.line.trim_end().to_string();
        let (mut length, mut chunked, mut close) = (None, false, false);
        loop {
            self.read_line();
            let l = self.line.trim_end();
            if l.is_empty() {
                break;
            }
            if let Some((name, v)) = l.split_once(':') {
                let (name, v) = (name.trim().to_ascii_lowercase(), v.trim().to_ascii_lowercase());
                match name.as_str() {
                    "content-length" => length = v.parse::<usize>().ok(),
                    "transfer-encoding" => chunked = v.contains("chunked"),
                    "connection" => close = v == "close",
                    _ => {}
                }
            }
        }
        let mut body = Vec::new();
        if chunked {
            loop {
                self.read_line();
                let size = self.line.trim_end().split(';').next().unwrap_or("");
                let size = usize::from_str_radix(size.trim(), 16)
                    .unwrap_or_else(|_| die(&format!("bad chunk size {:?}", self.line)));
                if size == 0 {
                    loop {
                        self.read_line();
                        if self.line.trim_end().is_empty() {
                            break;
                        }
                    }
                    break;
                }
                self.read_exact(size + 2);
                body.extend_from_slice(&self.body[..size]);
            }
        } else if let Some(n) = length {
            self.read_exact(n);
            body.extend_from_slice(&self.body);
        } else {
            die(&format!("{status_line}: a response with neither Content-Length nor chunked"));
        }
        if status != "200" {
            die(&format!("POST /v3/kv/put answered {status_line}: {}", String::from_utf8_lossy(&body)));
        }
        if close {
            die(&format!("{} closed the keep-alive connection", self.host));
        }
    }
}

/// Redis Cluster's hash slot of a key without a `{hash tag}`: CRC16/XMODEM mod 16384.
fn key_slot(key: &[u8]) -> usize {
    let mut crc: u16 = 0;
    for &b in key {
        crc ^= u16::from(b) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 { (crc << 1) ^ 0x1021 } else { crc << 1 };
        }
    }
    usize::from(crc) % 16384
}

/// One RESP value, enough of it for `CLUSTER SLOTS`.
enum Resp {
    Int(i64),
    Bulk(Vec<u8>),
    Array(Vec<Resp>),
}

fn read_resp(c: &mut Conn) -> Resp {
    c.read_line();
    let line = c.line.trim_end().to_string();
    let (kind, rest) = line.split_at(1);
    let n: i64 = rest.parse().unwrap_or_else(|_| die(&format!("unexpected reply {line:?}")));
    match kind {
        ":" => Resp::Int(n),
        "$" => {
            c.read_exact(n as usize + 2);
            Resp::Bulk(c.body[..n as usize].to_vec())
        }
        "*" => Resp::Array((0..n).map(|_| read_resp(c)).collect()),
        _ => die(&format!("unexpected reply {line:?}")),
    }
}

/// Each slot's primary (`ip:port`), from `CLUSTER SLOTS` asked of `addr`.
fn slot_owners(addr: &str) -> Vec<String> {
    let mut c = Conn::open(Proto::Resp, addr, b"");
    c.req = b"*2\r\n$7\r\nCLUSTER\r\n$5\r\nSLOTS\r\n".to_vec();
    c.send();
    let mut owners = vec![String::new(); 16384];
    let Resp::Array(ranges) = read_resp(&mut c) else { die("CLUSTER SLOTS: not an array") };
    for range in ranges {
        let Resp::Array(r) = range else { die("CLUSTER SLOTS: not an array") };
        let (Some(Resp::Int(first)), Some(Resp::Int(last)), Some(Resp::Array(node))) = (r.first(), r.get(1), r.get(2))
        else {
            die("CLUSTER SLOTS: a range without a primary")
        };
        let (Some(Resp::Bulk(ip)), Some(Resp::Int(port))) = (node.first(), node.get(1)) else {
            die("CLUSTER SLOTS: a node without an address")
        };
        let at = format!("{}:{port}", String::from_utf8_lossy(ip));
        for s in *first as usize..=*last as usize {
            owners[s] = at.clone();
        }
    }
    if let Some(s) = owners.iter().position(String::is_empty) {
        die(&format!("CLUSTER SLOTS: slot {s} has no owner"));
    }
    owners
}

/// One SET at a slot's owner, following redirects; returns how long it met TRYAGAIN.
fn follow_set(
    conns: &mut std::collections::HashMap<String, Conn>,
    owners: &mut [String],
    key: &[u8],
    value: &[u8],
    counts: &mut (u64, u64),
) -> Option<std::time::Duration> {
    let slot = key_slot(key);
    let mut addr = owners[slot].clone();
    let mut asking = false;
    let mut retry_since: Option<Instant> = None;
    loop {
        let conn = conns
            .entry(addr.clone())
            .or_insert_with(|| Conn::open(Proto::Resp, &addr, value));
        conn.req.clear();
        if asking {
            conn.req.extend_from_slice(b"*1\r\n$6\r\nASKING\r\n");
        }
        write!(conn.req, "*3\r\n$3\r\nSET\r\n${}\r\n", key.len()).unwrap();
        conn.req.extend_from_slice(key);
        write!(conn.req, "\r\n${}\r\n", value.len()).unwrap();
        conn.req.extend_from_slice(value);
        conn.req.extend_from_slice(b"\r\n");
        conn.send();
        if asking {
            conn.read_line();
            asking = false;
        }
        conn.read_line();
        let line = conn.line.trim_end().to_string();
        if line == "+OK" {
            return retry_since.map(|t| t.elapsed());
        }
        let mut words = line.split_whitespace();
        match words.next() {
            Some("-MOVED") => {
                counts.0 += 1;
                let to = words.nth(1).unwrap_or_else(|| die(&format!("bad redirect {line:?}")));
                owners[slot] = to.to_string();
                addr = to.to_string();
            }
            Some("-ASK") => {
                counts.1 += 1;
                addr = words.nth(1).unwrap_or_else(|| die(&format!("bad redirect {line:?}"))).to_string();
                asking = true;
            }
            Some("-TRYAGAIN") => {
                retry_since.get_or_insert_with(Instant::now);
                std::thread::sleep(std::time::Duration::from_millis(1));
                addr = owners[slot].clone();
            }
            _ => die(&format!("SET answered {line:?}")),
        }
    }
}

fn follow(args: &[String]) {
    let addr: String = arg(args, 2, None);
    let clients: usize = arg(args, 3, None);
    let seconds: f64 = arg(args, 4, None);
    let value = vec![b'x'; arg::<usize>(args, 5, None)];
    let keyspace: u64 = arg(args, 6, None);
    let timeline: String = arg(args, 7, None);
    let owners = slot_owners(&addr);
    let go = Arc::new(Barrier::new(clients + 1));
    let start = Arc::new(std::sync::OnceLock::<Instant>::new());
    let seed = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(1);
    let threads: Vec<_> = (0..clients)
        .map(|i| {
            let (mut owners, value, go, start) = (owners.clone(), value.clone(), go.clone(), start.clone());
            std::thread::spawn(move || {
                let mut conns = std::collections::HashMap::new();
                let mut rng = Rng(seed ^ (i as u64 + 1).wrapping_mul(0xA24B_AED4_963E_E407));
                let mut key = Vec::with_capacity(16);
                let mut buckets: Vec<u64> = Vec::new();
                let mut waits: Vec<u64> = Vec::new();
                let mut counts = (0u64, 0u64);
                go.wait();
                let t0 = *start.get().expect("set before the barrier");
                while t0.elapsed().as_secs_f64() < seconds {
                    key.clear();
                    write!(key, "key:{:012}", rng.next() % keyspace).unwrap();
                    if let Some(w) = follow_set(&mut conns, &mut owners, &key, &value, &mut counts) {
                        waits.push(w.as_micros() as u64);
                    }
                    let b = (t0.elapsed().as_millis() / 100) as usize;
                    if buckets.len() <= b {
                        buckets.resize(b + 1, 0);
                    }
                    buckets[b] += 1;
                }
                (buckets, waits, counts)
            })
        })
        .collect();
    let _ = start.set(Instant::now());
    go.wait();
    let (mut buckets, mut waits, mut counts) = (Vec::<u64>::new(), Vec::new(), (0, 0));
    for t in threads {
        let (b, w, c) = t.join().unwrap_or_else(|_| die("a client thread panicked"));
        if buckets.len() < b.len() {
            buckets.resize(b.len(), 0);
        }
        for (i, x) in b.into_iter().enumerate() {
            buckets[i] += x;
        }
        waits.extend(w);
        counts.0 += c.0;
        counts.1 += c.1;
    }
    let total: u64 = buckets.iter().sum();
    let mut out = String::new();
    for (i, b) in buckets.iter().enumerate() {
        out += &format!("{} {b}\n", i * 100);
    }
    std::fs::write(&timeline, out).unwrap_or_else(|e| die(&format!("write {timeline}: {e}")));
    waits.sort_unstable();
    let pct = |p: f64| {
        if waits.is_empty() {
            0.0
        } else {
            waits[((waits.len() as f64 * p).ceil() as usize).clamp(1, waits.len()) - 1] as f64 / 1e3
        }
    };
    println!(
        "{:.0} {} {} {} {:.1} {:.1}",
        total as f64 / seconds,
        counts.0,
        counts.1,
        waits.len(),
        pct(0.99),
        pct(1.0)
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("follow") {
        follow(&args);
        return;
    }
    let proto = match args.get(1).map(String::as_str) {
        Some("etcd") => Proto::Etcd,
        Some("resp") => Proto::Resp,
        Some("resp-cluster") => Proto::RespCluster(false),
        Some("resp-cluster-wait1") => Proto::RespCluster(true),
        _ => usage(),
    };
    let addr: String = arg(&args, 2, None);
    let clients: usize = arg(&args, 3, None);
    let n: u64 = arg(&args, 4, None);
    let value_len: usize = arg(&args, 5, None);
    let keyspace: u64 = arg(&args, 6, Some(1_000_000));
    if clients == 0 || n == 0 || keyspace == 0 {
        usage();
    }
    let value = vec![b'x'; value_len];
    let owners = Arc::new(match proto {
        Proto::RespCluster(_) => slot_owners(&addr),
        _ => Vec::new(),
    });
    let sent = Arc::new(AtomicU64::new(0));
    let go = Arc::new(Barrier::new(clients + 1));
    let seed = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(1);
    let threads: Vec<_> = (0..clients)
        .map(|i| {
            let (addr, value, sent, go) = (addr.clone(), value.clone(), sent.clone(), go.clone());
            let owners = owners.clone();
            std::thread::spawn(move || {
                // Not clustered: one connection. Clustered: one per primary, by address.
                let mut conns: Vec<(String, Conn)> = Vec::new();
                let primaries: Vec<&String> = if owners.is_empty() {
                    vec![&addr]
                } else {
                    let mut p: Vec<&String> = owners.iter().collect();
                    p.sort();
                    p.dedup();
                    p
                };
                for p in primaries {
                    conns.push((p.clone(), Conn::open(proto, p, &value)));
                }
                let mut rng = Rng(seed ^ (i as u64 + 1).wrapping_mul(0xA24B_AED4_963E_E407));
                let mut key = Vec::with_capacity(16);
                let mut lat = Vec::with_capacity((n as usize / clients) + 16);
                go.wait();
                while sent.fetch_add(1, Ordering::Relaxed) < n {
                    key.clear();
                    write!(key, "key:{:012}", rng.next() % keyspace).unwrap();
                    let i = if owners.is_empty() {
                        0
                    } else {
                        let owner = &owners[key_slot(&key)];
                        conns.iter().position(|(a, _)| a == owner).unwrap_or(0)
                    };
                    let t = Instant::now();
                    conns[i].1.put(&key);
                    lat.push(t.elapsed().as_nanos() as u64);
                }
                lat
            })
        })
        .collect();
    go.wait();
    let start = Instant::now();
    let mut lat: Vec<u64> = Vec::with_capacity(n as usize);
    for t in threads {
        lat.extend(t.join().unwrap_or_else(|_| die("a client thread panicked")));
    }
    let secs = start.elapsed().as_secs_f64();
    lat.sort_unstable();
    let pct = |p: f64| lat[((lat.len() as f64 * p).ceil() as usize).clamp(1, lat.len()) - 1] as f64 / 1e6;
    println!("{:.0} {:.3} {:.3}", lat.len() as f64 / secs, pct(0.50), pct(0.99));
}
