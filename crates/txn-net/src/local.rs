//! A cluster of shard server processes on loopback, for `verso bench txn` and the tests.
//!
//! Each server binds an ephemeral port and prints it; once all have, each learns every
//! address on its standard input (so no port is guessed and none raced for). The driver
//! talks to them over control connections: a dump of the committed versions for the
//! history check, and shutdown.

use std::io::{self, BufRead, BufReader, BufWriter, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::frame::{read_frame, write_frame, Frame, Hello};
use crate::group::{serve_group, GroupConfig};
use crate::server::{serve, ServerConfig};
use crate::{Protocol, StoreKind};
use verso_ncc::wire::Encoding;
use verso_ncc::{Effects, Key, TxnId, Value};

/// How long a server may take to start and say where it listens.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// Server processes started by [`LocalCluster::start`]; killed when dropped.
pub struct LocalCluster {
    children: Vec<Child>,
    pub addrs: Vec<SocketAddr>,
}

/// What the servers hold at the end of a run.
#[derive(Clone, Debug, Default)]
pub struct Dump {
    /// Every key's committed values, oldest first (the initial, empty one first).
    pub versions: Vec<(Key, Vec<Value>)>,
    /// Transactions still undecided, over all servers.
    pub undecided: u64,
    /// Servers whose protocol invariants do not hold, with the reason.
    pub broken: Vec<(usize, String)>,
    /// Committed read-write transactions the servers still hold records of, with what each
    /// read and wrote at each server (one entry per server; only while the history is
    /// kept): what a checker needs of transactions whose client died before reporting.
    pub effects: Vec<(TxnId, Effects)>,
}

impl LocalCluster {
    /// Starts `servers` processes of `exe txn-server` running `protocol`; `keep_history`
    /// for a run whose history [`LocalCluster::dump`] will check.
    pub fn start(
        exe: &Path,
        servers: u32,
        protocol: Protocol,
        keep_history: bool,
    ) -> io::Result<LocalCluster> {
        LocalCluster::start_with(exe, servers, protocol, keep_history, StoreKind::Memory)
    }

    /// As [`LocalCluster::start`], NCC's servers keeping their decided versions in `store`.
    pub fn start_with(
        exe: &Path,
        servers: u32,
        protocol: Protocol,
        keep_history: bool,
        store: StoreKind,
    ) -> io::Result<LocalCluster> {
        let mut cluster = LocalCluster {
            children: Vec::new(),
            addrs: Vec::new(),
        };
        for id in 0..servers {
            let mut child = Command::new(exe)
                .args(["txn-server", "--id", &id.to_string()])
                .args(["--servers", &servers.to_string()])
                .args(["--protocol", protocol.name()])
                .args(keep_history.then_some("--keep-history"))
                .args(["--store", store.name()])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()?;
            let addr = listening(&mut child, &format!("server {id}"));
            cluster.children.push(child);
            cluster.addrs.push(addr?);
        }
        let peers = peers_line(&cluster.addrs);
        for child in &mut cluster.children {
            let stdin = child.stdin.as_mut().expect("piped");
            stdin.write_all(peers.as_bytes())?;
            stdin.flush()?;
        }
        Ok(cluster)
    }

    /// Each server's CPU time so far (user and system), in seconds; `None` where
    /// `/proc` cannot tell (not Linux). The driver reads it before and after a run to
    /// calibrate the simulator's cost per message (issue 19 item 7).
    pub fn cpu_seconds(&self) -> Vec<Option<f64>> {
        self.children
            .iter()
            .map(|c| process_cpu_seconds(c.id()))
            .collect()
    }

    /// Each server's resident memory now, in bytes (`VmRSS`); `None` where `/proc` cannot
    /// tell.
    pub fn rss_bytes(&self) -> Vec<Option<u64>> {
        self.children.iter().map(|c| process_rss(c.id())).collect()
    }

    /// Every server's committed versions and state.
    pub fn dump(&self) -> io::Result<Dump> {
        let mut dump = Dump::default();
        for (s, &addr) in self.addrs.iter().enumerate() {
            if dump_one(addr, s, &mut dump)? != DumpAnswer::Dumped {
                return Err(io::Error::other(format!("server {s} is a group replica")));
            }
        }
        Ok(dump)
    }

    /// Asks every server to exit and waits (bounded) for it; kills what does not.
    pub fn shutdown(mut self) -> io::Result<()> {
        for &addr in &self.addrs {
            if let Ok(stream) = control(addr) {
                let mut w = BufWriter::new(stream);
                let _ = write_frame(&mut w, Encoding::Binary, &Frame::Shutdown, &mut Vec::new());
                let _ = w.flush();
            }
        }
        wait_or_kill(self.children.iter_mut())
    }
}

/// Waits (at most 10 s in all) for every child to exit after a shutdown request; kills
/// those that do not, and says so.
pub(crate) fn wait_or_kill<'a>(children: impl Iterator<Item = &'a mut Child>) -> io::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(10);
    for child in children {
        while child.try_wait()?.is_none() {
            if Instant::now() > deadline {
                child.kill()?;
                child.wait()?;
                return Err(io::Error::other("a server did not exit on shutdown"));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    Ok(())
}

/// The address a starting server prints (`listening ADDR`), read on a thread so that one
/// that never prints cannot hang the caller; `who` names it in errors.
pub(crate) fn listening(child: &mut Child, who: &str) -> io::Result<SocketAddr> {
    let stdout = child.stdout.take().expect("piped");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line);
        let _ = tx.send(line);
    });
    let line = rx
        .recv_timeout(START_TIMEOUT)
        .map_err(|_| io::Error::other(format!("{who} did not start")))?;
    line.trim()
        .strip_prefix("listening ")
        .and_then(|a| a.parse().ok())
        .ok_or_else(|| io::Error::other(format!("{who} said {line:?}")))
}

impl Drop for LocalCluster {
    fn drop(&mut self) {
        for child in &mut self.children {
            if matches!(child.try_wait(), Ok(None)) {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
}

/// What a server answered a dump request with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum DumpAnswer {
    /// Its state (added to the dump).
    Dumped,
    /// A group's replica that does not host.
    NotHosting,
    /// A group's host with inputs waiting to commit: ask again.
    Unsettled,
}

/// Asks the server at `addr` (shard `s`) for its dump and adds it to `dump` (only when it
/// answers [`DumpAnswer::Dumped`]).
pub(crate) fn dump_one(addr: SocketAddr, s: usize, dump: &mut Dump) -> io::Result<DumpAnswer> {
    let stream = control(addr)?;
    stream.set_read_timeout(Some(Duration::from_secs(60)))?;
    let mut w = BufWriter::new(stream.try_clone()?);
    write_frame(
        &mut w,
        Encoding::Binary,
        &Frame::DumpRequest,
        &mut Vec::new(),
    )?;
    w.flush()?;
    let mut r = BufReader::new(stream);
    let mut buf = Vec::new();
    let mut got = Dump::default();
    loop {
        match read_frame(&mut r, Encoding::Binary, &mut buf)? {
            Some(Frame::Dump(keys)) => got.versions.extend(keys),
            Some(Frame::Effects(txns)) => got.effects.extend(txns),
            Some(Frame::DumpEnd { undecided, broken }) => {
                match broken.as_deref() {
                    Some(crate::group::NOT_HOSTING) => return Ok(DumpAnswer::NotHosting),
                    Some(crate::group::UNSETTLED) => return Ok(DumpAnswer::Unsettled),
                    _ => {}
                }
                dump.undecided += u64::from(undecided);
                if let Some(why) = broken {
                    dump.broken.push((s, why));
                }
                dump.versions.extend(got.versions);
                dump.effects.extend(got.effects);
                return Ok(DumpAnswer::Dumped);
            }
            other => {
                return Err(io::Error::other(format!(
                    "server {s} answered a dump with {other:?}"
                )))
            }
        }
    }
}

/// User plus system time of process `pid` from `/proc/PID/stat` (fields 14 and 15, in
/// clock ticks of 1/100 s: the kernel's USER_HZ, 100 on every Linux ABI).
pub fn process_cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces; the fields after it follow its ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) / 100.0)
}

/// `VmRSS` of process `pid` from `/proc/PID/status`, in bytes.
pub(crate) fn process_rss(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

pub(crate) fn control(addr: SocketAddr) -> io::Result<TcpStream> {
    let stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
    let mut w = BufWriter::new(stream.try_clone()?);
    write_frame(
        &mut w,
        Encoding::Binary,
        &Frame::Hello(Hello::Control),
        &mut Vec::new(),
    )?;
    w.flush()?;
    Ok(stream)
}

fn peers_line(addrs: &[SocketAddr]) -> String {
    let list: Vec<String> = addrs.iter().map(SocketAddr::to_string).collect();
    format!("peers {}\n", list.join(","))
}

/// The `verso txn-server` process: binds `listen` (port 0: any), prints `listening ADDR`,
/// learns the peers (given, or a `peers A,B,...` line on standard input; `cfg.peers` is
/// replaced) and serves `cfg` as server `cfg.id` of `servers` until shut down.
pub fn server_process(
    listen: SocketAddr,
    servers: u32,
    peers: Option<Vec<SocketAddr>>,
    cfg: ServerConfig,
) -> io::Result<()> {
    let id = cfg.id;
    let listener = TcpListener::bind(listen)?;
    println!("listening {}", listener.local_addr()?);
    io::stdout().flush()?;
    let peers = match peers {
        Some(p) => p,
        None => {
            let mut line = String::new();
            io::stdin().lock().read_line(&mut line)?;
            parse_peers(line.trim().strip_prefix("peers ").unwrap_or(""))?
        }
    };
    if peers.len() != servers as usize || id >= servers {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "server {id} of {servers} was given {} peer addresses",
                peers.len()
            ),
        ));
    }
    serve(listener, ServerConfig { peers, ..cfg })
}

/// A group replica's process (`verso txn-server --replica R`): binds `listen`, prints
/// `listening ADDR`, learns every shard's group (given, or a `peers A,B,C;D,E,F` line on
/// standard input) and serves as replica `cfg.replica` of shard `cfg.server.id` until
/// shut down.
pub fn group_process(
    listen: SocketAddr,
    servers: u32,
    groups: Option<Vec<Vec<SocketAddr>>>,
    cfg: GroupConfig,
) -> io::Result<()> {
    let listener = TcpListener::bind(listen)?;
    println!("listening {}", listener.local_addr()?);
    io::stdout().flush()?;
    let groups = match groups {
        Some(g) => g,
        None => {
            let mut line = String::new();
            io::stdin().lock().read_line(&mut line)?;
            parse_groups(line.trim().strip_prefix("peers ").unwrap_or(""))?
        }
    };
    if groups.len() != servers as usize {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{servers} shards, but {} groups of addresses", groups.len()),
        ));
    }
    serve_group(listener, GroupConfig { groups, ..cfg })
}

/// `A,B,C;D,E,F;...`: each shard's group of addresses.
pub fn parse_groups(s: &str) -> io::Result<Vec<Vec<SocketAddr>>> {
    s.split(';').map(parse_peers).collect()
}

/// `A,B,...` as socket addresses.
pub fn parse_peers(s: &str) -> io::Result<Vec<SocketAddr>> {
    s.split(',')
        .map(|a| {
            a.trim().parse().map_err(|_| {
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("not an address: {a:?}"),
                )
            })
        })
        .collect()
}
