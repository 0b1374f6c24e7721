//! Partitions between the replicas of a real Lazy VSR group: three `verso serve` processes
//! whose peer links run through fault-injecting TCP proxies inside this test, under Elle's
//! list-append workload (single APPENDs and GETs, MULTI/EXEC blocks, WATCH read-modify-write
//! blocks) from clients that follow the primary.
//!
//! How links are cut. Each replica gets its own cluster file: its own `peer` entry is where it
//! listens, and every other replica j's `peer` entry is a proxy for the directed link i -> j
//! that forwards to j. A replica sends to a peer only on the connection it dials itself
//! (`crates/replication/src/transport.rs`), and the handshake authenticates replica ids, not
//! addresses, so proxy (i -> j) carries exactly the messages i sends to j. A proxy passes
//! bytes, *cuts* (closes its connections both ways, and every new one on accept), or
//! *blackholes* (accepts, holds what it reads and delivers it in order when healed, as a
//! stalled network does; a connection whose sender gives up meanwhile is dropped with what it
//! held). No product code knows about any of this.
//!
//! Scenarios, each a fault (cut or blackhole, chosen by the seed) while clients keep working,
//! then a heal:
//! 1. a backup is cut off both ways; healed, it catches up;
//! 2. one direction between the primary and a backup (which one, by the seed);
//! 3. the primary is isolated (all its links, both ways): the other two elect a primary and
//!    clients go on there; healed, the old primary rejoins as a backup and catches up;
//! 4. with everything healed and the clients stopped, every key is read on the primary.
//!
//! Checks:
//! - the history is strictly serializable (`verso-check`'s list-append checker: a lost
//!   acknowledged append, a stale read or divergent orders fail it); a request whose
//!   connection died or timed out is recorded with outcome unknown;
//! - no replica answers a request sent and answered while it was isolated, except a read
//!   answered under the read lease the primary held when it was cut off (within `LEASE` of
//!   the cut; the history check covers those reads like any other);
//! - at most one replica reports itself primary of any view, and only the view's leader;
//! - progress: appends are acknowledged during every fault and after every heal, waited for
//!   within deadlines.
//!
//! The seed is printed first; rerun with `VERSO_PARTITION_SEED=<seed>`.

use std::collections::BTreeMap;
use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use verso_check::{
    check_append_strict_serializable, decode_list, AppendHistory, AppendOp, AppendRecorder,
    AppendTxnRecord, Outcome,
};

mod common;
use common::{free_port, log_tails, seed_from_env, Conn, Reply, Rng, Server};

const REPLICAS: usize = 3;
/// Client threads, and the transactions each runs at most.
const CLIENTS: u64 = 4;
const CLIENT_TXNS_MAX: u64 = 100_000;
/// Live keys, and how often (in transactions over all clients) the window of live keys moves
/// on, so lists stay short.
const KEYS: u64 = 8;
const ROTATE_EVERY: u64 = 32;
/// Every connect, read and write of a client.
const IO_TIMEOUT: Duration = Duration::from_secs(2);
/// A transaction that keeps being refused (it never ran) gives up after this.
const TXN_DEADLINE: Duration = Duration::from_secs(8);
/// Acknowledged appending transactions each phase waits for, and for how long at most.
const PROGRESS: u64 = 30;
const PHASE_DEADLINE: Duration = Duration::from_secs(20);
/// A fault lasts at least this, longer than the view change timeout (500 ms), plus up to
/// `FAULT_JITTER_MS` more (by the seed).
const FAULT_MIN: Duration = Duration::from_millis(1_000);
const FAULT_JITTER_MS: u64 = 1_000;
/// Bytes one direction of a proxied connection holds while blackholed before it stops reading.
const HOLD_BYTES_MAX: usize = 1 << 20;
/// Connections a proxy carries at once; more are closed on accept.
const PROXY_CONNS_MAX: usize = 8;
/// The group's read lease (`lease_ms`): an isolated primary may answer reads this long
/// after it was cut off, and nothing after.
const LEASE: Duration = Duration::from_millis(400);

/// Keys read by one MGET of the final read.
const FINAL_READ_KEYS: usize = 64;

// ---------------------------------------------------------------------------------------
// The fault-injecting proxy of one directed link.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Pass = 0,
    Cut = 1,
    Blackhole = 2,
}

/// What a link's threads share.
struct LinkShared {
    /// The real peer address of the link's destination.
    target: SocketAddr,
    mode: AtomicU8,
    stop: AtomicBool,
    /// Both sockets of every connection carried now, by id, so that a cut can close them.
    live: Mutex<Vec<(u64, TcpStream, TcpStream)>>,
}

impl LinkShared {
    fn mode(&self) -> Mode {
        match self.mode.load(SeqCst) {
            0 => Mode::Pass,
            1 => Mode::Cut,
            _ => Mode::Blackhole,
        }
    }

    /// A cut also closes every connection carried now, under the lock that registers new
    /// ones, so none slips past it.
    fn set(&self, mode: Mode) {
        self.mode.store(mode as u8, SeqCst);
        if mode == Mode::Cut {
            for (_, a, b) in self.live.lock().unwrap().iter() {
                let _ = a.shutdown(Shutdown::Both);
                let _ = b.shutdown(Shutdown::Both);
            }
        }
    }
}

/// One directed link's proxy: an accepting thread and two pumping threads per connection,
/// all joined on drop.
struct Link {
    addr: SocketAddr,
    shared: Arc<LinkShared>,
    acceptor: Option<JoinHandle<()>>,
}

impl Link {
    fn new(target: SocketAddr) -> Link {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind a proxy");
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let shared = Arc::new(LinkShared {
            target,
            mode: AtomicU8::new(Mode::Pass as u8),
            stop: AtomicBool::new(false),
            live: Mutex::new(Vec::new()),
        });
        let sh = Arc::clone(&shared);
        let acceptor = std::thread::spawn(move || accept_loop(&listener, &sh));
        Link {
            addr,
            shared,
            acceptor: Some(acceptor),
        }
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        self.shared.stop.store(true, SeqCst);
        if let Some(h) = self.acceptor.take() {
            let _ = h.join();
        }
    }
}

fn accept_loop(listener: &TcpListener, sh: &Arc<LinkShared>) {
    let mut pumps: Vec<JoinHandle<()>> = Vec::new();
    let mut next_id = 0u64;
    while !sh.stop.load(SeqCst) {
        let (done, running): (Vec<_>, Vec<_>) = pumps.into_iter().partition(|h| h.is_finished());
        for h in done {
            h.join().expect("a proxy pump panicked");
        }
        pumps = running;
        let Ok((client, _)) = listener.accept() else {
            std::thread::sleep(Duration::from_millis(5));
            continue;
        };
        // Dropping `client` closes it: a cut link refuses, and so does a full one.
        if sh.mode() == Mode::Cut || pumps.len() >= 2 * PROXY_CONNS_MAX {
            continue;
        }
        let Ok(server) = TcpStream::connect_timeout(&sh.target, Duration::from_millis(500)) else {
            continue;
        };
        let (Ok(()), Ok(())) = (client.set_nonblocking(false), client.set_nodelay(true)) else {
            continue;
        };
        let _ = server.set_nodelay(true);
        let (Ok(c2), Ok(s2), Ok(c3), Ok(s3)) = (
            client.try_clone(),
            server.try_clone(),
            client.try_clone(),
            server.try_clone(),
        ) else {
            continue;
        };
        let id = next_id;
        next_id += 1;
        {
            let mut live = sh.live.lock().unwrap();
            if sh.mode() == Mode::Cut {
                continue;
            }
            live.push((id, c2, s2));
        }
        for (src, dst) in [(c3, s3), (server, client)] {
            let sh = Arc::clone(sh);
            pumps.push(std::thread::spawn(move || pump(id, src, dst, &sh)));
        }
    }
    sh.set(Mode::Cut);
    for h in pumps {
        let _ = h.join();
    }
}

/// Copies `src` to `dst` while the link passes, holds what it reads while blackholed (up to
/// `HOLD_BYTES_MAX`, then stops reading), and ends on a cut, on stop, or when either side
/// closes; it then closes both sockets, which ends the other direction's pump too.
fn pump(id: u64, mut src: TcpStream, mut dst: TcpStream, sh: &LinkShared) {
    let _ = src.set_read_timeout(Some(Duration::from_millis(20)));
    let _ = dst.set_write_timeout(Some(IO_TIMEOUT));
    let mut held = Vec::new();
    let mut buf = vec![0u8; 64 << 10];
    let mut eof = false;
    while !eof && !sh.stop.load(SeqCst) && sh.mode() != Mode::Cut {
        if held.len() < HOLD_BYTES_MAX {
            match src.read(&mut buf) {
                Ok(0) => eof = true,
                Ok(n) => held.extend_from_slice(&buf[..n]),
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
                Err(_) => break,
            }
        } else {
            std::thread::sleep(Duration::from_millis(20));
        }
        // The mode is read after the read: if it still passes, what was read was sent before
        // any cut or blackhole that comes now.
        if sh.mode() == Mode::Pass && !held.is_empty() {
            if dst.write_all(&held).is_err() {
                break;
            }
            held.clear();
        }
    }
    let _ = src.shutdown(Shutdown::Both);
    let _ = dst.shutdown(Shutdown::Both);
    sh.live.lock().unwrap().retain(|(i, _, _)| *i != id);
}

// ---------------------------------------------------------------------------------------
// The group: three replicas, each with its own cluster file pointing at its proxies.

struct Group {
    // Dropped in this order: processes first, then proxies, then the directory.
    _servers: Vec<Server>,
    /// `links[i][j]`: the proxy of i -> j (`None` where i == j).
    links: Vec<Vec<Option<Link>>>,
    ports: Vec<u16>,
    dir: tempfile::TempDir,
}

impl Group {
    fn new() -> Group {
        let dir = tempfile::tempdir().unwrap();
        let ports: Vec<u16> = (0..REPLICAS).map(|_| free_port()).collect();
        let peers: Vec<SocketAddr> = (0..REPLICAS)
            .map(|_| SocketAddr::from(([127, 0, 0, 1], free_port())))
            .collect();
        let links: Vec<Vec<Option<Link>>> = (0..REPLICAS)
            .map(|i| {
                (0..REPLICAS)
                    .map(|j| (i != j).then(|| Link::new(peers[j])))
                    .collect()
            })
            .collect();
        let mut servers = Vec::new();
        for i in 0..REPLICAS {
            // Checkpoints every 100 entries: catch-ups after a heal meet trimmed logs.
            let mut text = format!(
                "secret = \"a test secret of some length\"\nmode = \"lazy\"\nlease_ms = {}\n\
                 checkpoint_entries = 100\n",
                LEASE.as_millis()
            );
            for j in 0..REPLICAS {
                let peer = links[i][j].as_ref().map_or(peers[i], |l| l.addr);
                text.push_str(&format!(
                    "\n[[replica]]\nid = {j}\nclient = \"127.0.0.1:{}\"\npeer = \"{peer}\"\n",
                    ports[j]
                ));
            }
            let cluster = dir.path().join(format!("cluster{i}.toml"));
            std::fs::write(&cluster, text).unwrap();
            let log = std::fs::File::create(dir.path().join(format!("replica{i}.log"))).unwrap();
            let child = Command::new(env!("CARGO_BIN_EXE_verso"))
                .args(["serve", "--threads", "2", "--cluster"])
                .arg(&cluster)
                .args(["--replica", &i.to_string(), "--data-dir"])
                .arg(dir.path().join(format!("replica{i}")))
                .env("RUST_LOG", "info")
                .stdout(Stdio::null())
                .stderr(log)
                .spawn()
                .expect("start verso serve");
            servers.push(Server(child));
        }
        Group {
            _servers: servers,
            links,
            ports,
            dir,
        }
    }

    fn set(&self, from: usize, to: usize, mode: Mode) {
        self.links[from][to]
            .as_ref()
            .expect("a link")
            .shared
            .set(mode);
    }

    /// Sets every link of `id`, both ways.
    fn set_all_of(&self, id: usize, mode: Mode) {
        for other in (0..REPLICAS).filter(|&o| o != id) {
            self.set(id, other, mode);
            self.set(other, id, mode);
        }
    }

    fn heal(&self) {
        for l in self.links.iter().flatten().flatten() {
            l.shared.set(Mode::Pass);
        }
    }

    /// The last lines of each replica's log, and where all of it was copied (the temporary
    /// directory goes with the test).
    fn log_tail(&self) -> String {
        let keep = std::env::temp_dir().join(format!("verso-partition-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&keep);
        for id in 0..REPLICAS {
            let name = format!("replica{id}.log");
            let _ = std::fs::copy(self.dir.path().join(&name), keep.join(&name));
        }
        format!(
            "whole logs in {}\n{}",
            keep.display(),
            log_tails(self.dir.path(), REPLICAS, 25)
        )
    }
}

/// A replica's `INFO replication`, the fields this test reads.
#[derive(Debug)]
struct Info {
    role: String,
    view: String,
    view_counter: u64,
    /// The primary's commit point (0 on a backup).
    commit: u64,
    /// The last entry in memory.
    op_max: u64,
}

fn info(port: u16) -> Option<Info> {
    let mut c = Conn::open_timeout(port, Duration::from_millis(500)).ok()?;
    let Reply::Bulk(Some(text)) = c.call(&["INFO", "replication"]).ok()? else {
        return None;
    };
    let text = String::from_utf8_lossy(&text).into_owned();
    let field = |k: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(k).map(|v| v.trim().to_string()))
    };
    let view = field("vsr_view:")?;
    Some(Info {
        role: field("vsr_role:")?,
        view_counter: view.split('.').next()?.parse().ok()?,
        view,
        commit: field("vsr_commit:")?.parse().ok()?,
        op_max: field("vsr_op_max:")?.parse().ok()?,
    })
}

/// The primary, if one reports itself primary and every other replica a backup of its view.
fn settled_primary(ports: &[u16]) -> Option<(usize, Info)> {
    let infos: Vec<Info> = ports.iter().map(|&p| info(p)).collect::<Option<_>>()?;
    let p = infos.iter().position(|i| i.role == "primary")?;
    let settled = infos
        .iter()
        .enumerate()
        .all(|(id, i)| id == p || (i.role == "backup" && i.view == infos[p].view));
    let info = infos.into_iter().nth(p)?;
    settled.then_some((p, info))
}

// ---------------------------------------------------------------------------------------
// Clients.

/// Why a request got no answer.
#[derive(Debug)]
enum Failure {
    /// It never ran: no connection, or a backup's refusal.
    NotRun,
    /// It may have run: the connection died or timed out after sending, or a deposed primary
    /// said so.
    Unknown,
}

/// A client connection that follows the primary: a backup's refusal names it, and after a
/// replica that does not answer comes the next one.
struct Client<'p> {
    ports: &'p [u16],
    next: usize,
    conn: Option<(usize, Conn)>,
}

impl<'p> Client<'p> {
    fn new(ports: &'p [u16], start: usize) -> Client<'p> {
        Client {
            ports,
            next: start,
            conn: None,
        }
    }

    /// Sends `commands` in one write and reads a reply to each, from the replica that
    /// answered. A refusal (`READONLY`) among them means none ran (commands queued in MULTI
    /// are refused at EXEC), unless it says the outcome is unknown.
    fn exchange(&mut self, commands: &[Vec<Vec<u8>>]) -> Result<(usize, Vec<Reply>), Failure> {
        if self.conn.is_none() {
            let id = self.next % self.ports.len();
            match Conn::open_timeout(self.ports[id], IO_TIMEOUT) {
                Ok(c) => self.conn = Some((id, c)),
                Err(_) => {
                    self.next = id + 1;
                    return Err(Failure::NotRun);
                }
            }
        }
        let (id, c) = self.conn.as_mut().expect("just set");
        let id = *id;
        let mut replies = Vec::with_capacity(commands.len());
        let sent = c.send(commands).and_then(|()| {
            for _ in commands {
                replies.push(c.read()?);
            }
            Ok(())
        });
        if sent.is_err() {
            self.conn = None;
            self.next = id + 1;
            return Err(Failure::Unknown);
        }
        for reply in &replies {
            if let Reply::Error(e) = reply {
                if e.starts_with("READONLY") {
                    self.conn = None;
                    self.next = primary_named(e, self.ports).unwrap_or(id + 1);
                    return Err(if e.contains("may or may not") {
                        Failure::Unknown
                    } else {
                        Failure::NotRun
                    });
                }
                if e.starts_with("TRYAGAIN") {
                    // A backup promoted while it refused: nothing ran, and it now leads.
                    self.conn = None;
                    self.next = id;
                    return Err(Failure::NotRun);
                }
            }
        }
        Ok((id, replies))
    }
}

/// The replica a refusal names: "... The primary is 127.0.0.1:PORT."
fn primary_named(e: &str, ports: &[u16]) -> Option<usize> {
    let addr = e.split("The primary is ").nth(1)?.trim_end_matches('.');
    let port: u16 = addr.rsplit(':').next()?.parse().ok()?;
    ports.iter().position(|&p| p == port)
}

fn cmd(parts: &[&[u8]]) -> Vec<Vec<u8>> {
    parts.iter().map(|p| p.to_vec()).collect()
}

fn key_name(k: u64) -> Vec<u8> {
    format!("L{k:08}").into_bytes()
}

fn list_of(r: &Reply) -> Vec<u64> {
    let Reply::Bulk(b) = r else {
        panic!("GET answered {r:?}")
    };
    decode_list(b.as_deref()).unwrap_or_else(|| panic!("a value that is not a list: {r:?}"))
}

/// One step of a MULTI/EXEC block.
enum Step {
    Append(Vec<u8>, u64),
    Read(Vec<u8>),
}

/// One transaction of the workload.
enum Txn {
    Append(Vec<u8>, u64),
    Get(Vec<u8>),
    Block(Vec<Step>),
    /// WATCH key, GET key, then MULTI, APPEND key, EXEC.
    Rmw(Vec<u8>, u64),
}

impl Txn {
    fn generate(rng: &mut Rng, base: u64, rec: &AppendRecorder) -> Txn {
        let key = |rng: &mut Rng| {
            let u = rng.below(1 << 16) as f64 / f64::from(1 << 16);
            key_name(base + ((u * u) * KEYS as f64) as u64)
        };
        match rng.below(10) {
            0 | 1 => Txn::Append(key(rng), rec.next_element()),
            2 => Txn::Get(key(rng)),
            3..=6 => Txn::Block(
                (0..1 + rng.below(4))
                    .map(|_| {
                        if rng.below(2) == 0 {
                            Step::Append(key(rng), rec.next_element())
                        } else {
                            Step::Read(key(rng))
                        }
                    })
                    .collect(),
            ),
            _ => Txn::Rmw(key(rng), rec.next_element()),
        }
    }

    /// The appends, which is all that is known of a transaction whose outcome is unknown.
    fn appends(&self) -> Vec<AppendOp> {
        match self {
            Txn::Append(k, e) | Txn::Rmw(k, e) => vec![AppendOp::append(k.clone(), *e)],
            Txn::Get(_) => Vec::new(),
            Txn::Block(steps) => steps
                .iter()
                .filter_map(|s| match s {
                    Step::Append(k, e) => Some(AppendOp::append(k.clone(), *e)),
                    Step::Read(_) => None,
                })
                .collect(),
        }
    }
}

/// How a transaction ended: its outcome, what to record, and which replica answered.
struct Ended {
    outcome: Outcome,
    ops: Vec<AppendOp>,
    answered_by: Option<usize>,
}

fn conflict(reply: &Reply) -> bool {
    matches!(reply, Reply::Error(e) if e.starts_with("ERR transaction kept conflicting"))
}

impl Client<'_> {
    /// One attempt at `txn`. `Err(Unknown)` may have run, so [`Client::run`] does not retry a
    /// write after it (its element would be appended twice); a WATCH block whose EXEC is
    /// unknown ends here instead, keeping the read it did.
    fn attempt(&mut self, txn: &Txn) -> Result<Ended, Failure> {
        let answered = |outcome, ops, id| Ended {
            outcome,
            ops,
            answered_by: Some(id),
        };
        match txn {
            Txn::Append(k, e) => {
                let (id, r) = self.exchange(&[cmd(&[b"APPEND", k, &e.to_le_bytes()])])?;
                let ops = txn.appends();
                match &r[0] {
                    Reply::Int(_) => Ok(answered(Outcome::Committed, ops, id)),
                    r if conflict(r) => Ok(answered(Outcome::Aborted, ops, id)),
                    r => panic!("APPEND answered {r:?}"),
                }
            }
            Txn::Get(k) => {
                let (id, r) = self.exchange(&[cmd(&[b"GET", k])])?;
                let ops = vec![AppendOp::read(k.clone(), list_of(&r[0]))];
                Ok(answered(Outcome::Committed, ops, id))
            }
            Txn::Block(steps) => {
                let mut commands = vec![cmd(&[b"MULTI"])];
                for s in steps {
                    commands.push(match s {
                        Step::Append(k, e) => cmd(&[b"APPEND", k, &e.to_le_bytes()]),
                        Step::Read(k) => cmd(&[b"GET", k]),
                    });
                }
                commands.push(cmd(&[b"EXEC"]));
                let (id, r) = self.exchange(&commands)?;
                let exec = r.last().expect("EXEC's reply");
                if conflict(exec) {
                    return Ok(answered(Outcome::Aborted, txn.appends(), id));
                }
                let Reply::Array(Some(items)) = exec else {
                    panic!("EXEC answered {exec:?} (replies {r:?})")
                };
                assert_eq!(items.len(), steps.len(), "EXEC answered {items:?}");
                let ops = steps
                    .iter()
                    .zip(items)
                    .map(|(s, reply)| match s {
                        Step::Append(k, e) => {
                            assert!(matches!(reply, Reply::Int(_)), "APPEND in EXEC: {reply:?}");
                            AppendOp::append(k.clone(), *e)
                        }
                        Step::Read(k) => AppendOp::read(k.clone(), list_of(reply)),
                    })
                    .collect();
                Ok(answered(Outcome::Committed, ops, id))
            }
            Txn::Rmw(k, e) => {
                // Reads only: a failure here changed nothing.
                let (first, r) = self
                    .exchange(&[cmd(&[b"WATCH", k]), cmd(&[b"GET", k])])
                    .map_err(|_| Failure::NotRun)?;
                assert_eq!(
                    r[0],
                    Reply::Simple("OK".into()),
                    "WATCH answered {:?}",
                    r[0]
                );
                let read = AppendOp::read(k.clone(), list_of(&r[1]));
                let ops = vec![read, AppendOp::append(k.clone(), *e)];
                let block = [
                    cmd(&[b"MULTI"]),
                    cmd(&[b"APPEND", k, &e.to_le_bytes()]),
                    cmd(&[b"EXEC"]),
                ];
                // The same connection, or the block would run unwatched.
                assert_eq!(self.conn.as_ref().map(|c| c.0), Some(first));
                let (id, r) = match self.exchange(&block) {
                    Ok(answer) => answer,
                    Err(Failure::Unknown) => {
                        return Ok(Ended {
                            outcome: Outcome::Unknown,
                            ops,
                            answered_by: None,
                        })
                    }
                    Err(Failure::NotRun) => return Err(Failure::NotRun),
                };
                match &r[2] {
                    Reply::Array(Some(_)) => Ok(answered(Outcome::Committed, ops, id)),
                    Reply::Array(None) => Ok(answered(Outcome::Aborted, ops, id)),
                    r if conflict(r) => Ok(answered(Outcome::Aborted, ops, id)),
                    r => panic!("EXEC after WATCH answered {r:?}"),
                }
            }
        }
    }

    /// Runs `txn` until it is answered, its outcome is unknown, or it gives up (then it never
    /// ran, and is recorded as aborted: nobody may read its appends).
    fn run(&mut self, txn: &Txn, stop: &AtomicBool) -> Ended {
        let deadline = Instant::now() + TXN_DEADLINE;
        loop {
            if Instant::now() > deadline || stop.load(SeqCst) {
                return Ended {
                    outcome: Outcome::Aborted,
                    ops: txn.appends(),
                    answered_by: None,
                };
            }
            match self.attempt(txn) {
                Ok(ended) => return ended,
                // A read that got no answer changed nothing: ask again.
                Err(Failure::Unknown) if txn.appends().is_empty() => {}
                Err(Failure::Unknown) => {
                    return Ended {
                        outcome: Outcome::Unknown,
                        ops: txn.appends(),
                        answered_by: None,
                    }
                }
                Err(Failure::NotRun) => std::thread::sleep(Duration::from_millis(10)),
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// The shared state of the clients, the monitor and the scenario.

/// Phases: 0 before any fault, then each fault and the heal after it.
const PHASES: [&str; 7] = [
    "warm-up",
    "backup cut off",
    "healed",
    "one direction cut",
    "healed",
    "primary isolated",
    "healed",
];

struct Shared {
    stop: AtomicBool,
    /// A client failed: the scenario stops waiting.
    failed: AtomicBool,
    started: AtomicU64,
    phase: AtomicUsize,
    /// Appending transactions acknowledged, by the phase they began in.
    acked: [AtomicU64; PHASES.len()],
    outcomes: [AtomicU64; 3],
    /// Odd while `isolated` is cut off from the others; it turns odd after the links are cut
    /// and even before they heal, so an odd stretch lies inside the isolation.
    epoch: AtomicU64,
    isolated: AtomicUsize,
    /// When the isolated replica was cut off (odd `epoch`).
    cut_at: Mutex<Option<Instant>>,
    violations: Mutex<Vec<String>>,
    /// Per transaction: (id, phase it began in, replica that answered), for a failure's dump.
    notes: Mutex<Vec<(u64, usize, Option<usize>)>>,
    /// (view, replica) pairs seen reporting `vsr_role:primary`.
    primaries: Mutex<BTreeMap<String, Vec<usize>>>,
}

fn client_thread(ports: &[u16], sh: &Shared, rec: &AppendRecorder, seed: u64) {
    let body = || {
        let mut rng = Rng(seed | 1);
        let mut c = Client::new(ports, seed as usize);
        for _ in 0..CLIENT_TXNS_MAX {
            if sh.stop.load(SeqCst) {
                break;
            }
            let base = sh.started.fetch_add(1, SeqCst) / ROTATE_EVERY;
            let txn = Txn::generate(&mut rng, base, rec);
            let phase = sh.phase.load(SeqCst);
            let mut t = rec.begin_txn();
            let epoch = sh.epoch.load(SeqCst);
            let ended = c.run(&txn, &sh.stop);
            let epoch_after = sh.epoch.load(SeqCst);
            let appends = !txn.appends().is_empty();
            for op in ended.ops {
                match op {
                    AppendOp::Append { key, element } => t.append(key, element),
                    AppendOp::Read { key, list } => t.read(key, list),
                };
            }
            let id = t.finish(ended.outcome, None);
            sh.notes
                .lock()
                .unwrap()
                .push((id, phase, ended.answered_by));
            let isolated = sh.isolated.load(SeqCst);
            let leased = !appends
                && sh
                    .cut_at
                    .lock()
                    .unwrap()
                    .is_some_and(|at| at.elapsed() < LEASE);
            if epoch % 2 == 1
                && epoch == epoch_after
                && ended.answered_by == Some(isolated)
                && !leased
            {
                sh.violations.lock().unwrap().push(format!(
                    "txn {id:?} was answered ({:?}) by replica {isolated} while it was isolated",
                    ended.outcome
                ));
            }
            let slot = match ended.outcome {
                Outcome::Committed => 0,
                Outcome::Aborted => 1,
                _ => 2,
            };
            sh.outcomes[slot].fetch_add(1, SeqCst);
            if ended.outcome == Outcome::Committed && appends {
                sh.acked[phase].fetch_add(1, SeqCst);
            }
        }
    };
    if let Err(p) = catch_unwind(AssertUnwindSafe(body)) {
        sh.failed.store(true, SeqCst);
        sh.stop.store(true, SeqCst);
        resume_unwind(p);
    }
}

fn monitor(ports: &[u16], sh: &Shared) {
    while !sh.stop.load(SeqCst) {
        for (id, &port) in ports.iter().enumerate() {
            if let Some(i) = info(port).filter(|i| i.role == "primary") {
                let mut p = sh.primaries.lock().unwrap();
                let ids = p.entry(i.view).or_default();
                if !ids.contains(&id) {
                    ids.push(id);
                }
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

// ---------------------------------------------------------------------------------------
// The scenario.

/// Polls `cond` until it holds, failing after `within` (or at once if a client failed).
fn wait_until<T>(
    sh: &Shared,
    what: &str,
    within: Duration,
    mut cond: impl FnMut() -> Option<T>,
) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = cond() {
            return v;
        }
        assert!(
            !sh.failed.load(SeqCst),
            "a client failed while waiting until {what}"
        );
        assert!(start.elapsed() < within, "not within {within:?}: {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Enters `phase` and waits for its acknowledged appends, and for the fault to have lasted.
fn progress(sh: &Shared, phase: usize, since: Instant, at_least: Duration) {
    let what = format!(
        "{PROGRESS} appending txns acknowledged in phase {phase} ({})",
        PHASES[phase]
    );
    wait_until(sh, &what, PHASE_DEADLINE, || {
        (sh.acked[phase].load(SeqCst) >= PROGRESS && since.elapsed() >= at_least).then_some(())
    });
    eprintln!(
        "phase {phase} ({}): {} acknowledged after {:?}",
        PHASES[phase],
        sh.acked[phase].load(SeqCst),
        since.elapsed()
    );
}

fn settled(g: &Group, sh: &Shared) -> (usize, Info) {
    let start = Instant::now();
    loop {
        if let Some(v) = settled_primary(&g.ports) {
            return v;
        }
        assert!(
            !sh.failed.load(SeqCst),
            "a client failed while waiting until a primary with both others its backups"
        );
        if start.elapsed() >= PHASE_DEADLINE {
            // What each replica says about itself, to tell which one did not follow.
            let now: Vec<String> = g.ports.iter().map(|&p| info_text(p)).collect();
            panic!(
                "not within {PHASE_DEADLINE:?}: a primary with both others its backups; now {now:#?}"
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A replica's `vsr_` lines of `INFO replication`, or why there are none.
fn info_text(port: u16) -> String {
    let reply = Conn::open_timeout(port, Duration::from_millis(500))
        .and_then(|mut c| c.call(&["INFO", "replication"]));
    match reply {
        Ok(Reply::Bulk(Some(text))) => String::from_utf8_lossy(&text)
            .lines()
            .filter(|l| l.starts_with("vsr_"))
            .collect::<Vec<_>>()
            .join(" "),
        other => format!("no INFO: {other:?}"),
    }
}

fn lasting(rng: &mut Rng) -> Duration {
    FAULT_MIN + Duration::from_millis(rng.below(FAULT_JITTER_MS))
}

fn mode(rng: &mut Rng) -> Mode {
    if rng.below(2) == 0 {
        Mode::Cut
    } else {
        Mode::Blackhole
    }
}

fn other(rng: &mut Rng, than: usize) -> usize {
    (than + 1 + rng.below(REPLICAS as u64 - 1) as usize) % REPLICAS
}

/// Waits until `id` is a backup of `view_counter` or later holding every entry up to the
/// primary's `commit` point.
fn caught_up(g: &Group, sh: &Shared, id: usize, view_counter: u64, commit: u64) {
    let what = format!("replica {id} is a backup of view {view_counter}+ at commit {commit}+");
    let start = Instant::now();
    while start.elapsed() < PHASE_DEADLINE && !sh.failed.load(SeqCst) {
        let ok = info(g.ports[id]).is_some_and(|i| {
            i.role == "backup" && i.view_counter >= view_counter && i.op_max >= commit
        });
        if ok {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let infos: Vec<Option<Info>> = g.ports.iter().map(|&p| info(p)).collect();
    panic!("not within {PHASE_DEADLINE:?}: {what}; now {infos:#?}");
}

fn scenario(g: &Group, sh: &Shared, rng: &mut Rng) {
    let t = Instant::now();
    progress(sh, 0, t, Duration::ZERO);

    // 1. A backup cut off both ways.
    let (p, pi) = settled(g, sh);
    let (b, m) = (other(rng, p), mode(rng));
    g.set_all_of(b, m);
    sh.phase.store(1, SeqCst);
    eprintln!(
        "1: primary {p} (view {}); backup {b}'s links {m:?}",
        pi.view
    );
    progress(sh, 1, Instant::now(), lasting(rng));
    let target = info(g.ports[p]).map_or(0, |i| i.commit);
    g.heal();
    sh.phase.store(2, SeqCst);
    progress(sh, 2, Instant::now(), Duration::ZERO);
    caught_up(g, sh, b, pi.view_counter, target);

    // 2. One direction between the primary and a backup.
    let (p, pi) = settled(g, sh);
    let (b, m) = (other(rng, p), mode(rng));
    let (from, to) = if rng.below(2) == 0 { (p, b) } else { (b, p) };
    g.set(from, to, m);
    sh.phase.store(3, SeqCst);
    eprintln!(
        "2: primary {p} (view {}); link {from} -> {to} {m:?}",
        pi.view
    );
    progress(sh, 3, Instant::now(), lasting(rng));
    g.heal();
    sh.phase.store(4, SeqCst);
    progress(sh, 4, Instant::now(), Duration::ZERO);

    // 3. The primary isolated.
    let (p, pi) = settled(g, sh);
    let m = mode(rng);
    g.set_all_of(p, m);
    sh.isolated.store(p, SeqCst);
    *sh.cut_at.lock().unwrap() = Some(Instant::now());
    sh.epoch.fetch_add(1, SeqCst);
    sh.phase.store(5, SeqCst);
    eprintln!("3: primary {p} (view {}) isolated, {m:?}", pi.view);
    let cut_at = Instant::now();
    let (q, qi) = wait_until(
        sh,
        "another replica is elected primary",
        PHASE_DEADLINE,
        || {
            (0..REPLICAS).filter(|&q| q != p).find_map(|q| {
                info(g.ports[q])
                    .filter(|i| i.role == "primary" && i.view_counter > pi.view_counter)
                    .map(|i| (q, i))
            })
        },
    );
    eprintln!(
        "3: replica {q} primary of view {} after {:?}",
        qi.view,
        cut_at.elapsed()
    );
    progress(sh, 5, cut_at, lasting(rng));
    let target = info(g.ports[q]).map_or(0, |i| i.commit);
    sh.epoch.fetch_add(1, SeqCst);
    g.heal();
    sh.phase.store(6, SeqCst);
    let healed_at = Instant::now();
    caught_up(g, sh, p, qi.view_counter, target);
    eprintln!(
        "3: old primary {p} a backup again after {:?}",
        healed_at.elapsed()
    );
    progress(sh, 6, healed_at, Duration::ZERO);
}

/// Reads every key the clients may have used on the primary, a few MGETs recorded as
/// transactions of their own.
fn final_read(ports: &[u16], rec: &AppendRecorder, keys: u64) {
    let mut c = Client::new(ports, 0);
    let names: Vec<Vec<u8>> = (0..keys).map(key_name).collect();
    for chunk in names.chunks(FINAL_READ_KEYS) {
        let mut t = rec.begin_txn();
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut args = vec![b"MGET".to_vec()];
        args.extend(chunk.iter().cloned());
        let values = loop {
            match c.exchange(std::slice::from_ref(&args)) {
                Ok((_, r)) => match &r[0] {
                    Reply::Array(Some(values)) => break values.clone(),
                    other => panic!("MGET answered {other:?}"),
                },
                Err(_) => {
                    assert!(
                        Instant::now() < deadline,
                        "no primary answered the final read in 30 s"
                    );
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
        };
        assert_eq!(values.len(), chunk.len());
        for (k, v) in chunk.iter().zip(&values) {
            t.read(k.clone(), list_of(v));
        }
        t.finish(Outcome::Committed, None);
    }
}

/// The checker has teeth: an acknowledged append that the final read does not show (it
/// ended before any read began) must fail it.
fn assert_a_lost_append_is_caught(history: &AppendHistory) {
    let mut h = history.clone();
    let id = h.txns.iter().map(|t| t.id).max().expect("a history");
    let lost = AppendTxnRecord::new(
        id + 1,
        0,
        1,
        None,
        Outcome::Committed,
        vec![AppendOp::append(key_name(0), u64::MAX)],
    );
    h.push(lost);
    assert!(
        check_append_strict_serializable(&h).is_err(),
        "the checker missed a lost acknowledged append: the final read does not cover key 0"
    );
}

/// Writes the history and what the clients noted of each transaction (phase, replica that
/// answered) beside the logs, as JSON lines, and says where.
fn dump(history: &AppendHistory, notes: &[(u64, usize, Option<usize>)]) -> String {
    let keep = std::env::temp_dir().join(format!("verso-partition-{}", std::process::id()));
    let notes: std::collections::HashMap<u64, (usize, Option<usize>)> = notes
        .iter()
        .map(|&(id, phase, by)| (id, (phase, by)))
        .collect();
    let mut out = String::new();
    for t in &history.txns {
        let (phase, by) = notes.get(&t.id).copied().unwrap_or((usize::MAX, None));
        let line = serde_json::json!({ "txn": t, "phase": phase, "answered_by": by });
        out.push_str(&line.to_string());
        out.push('\n');
    }
    let path = keep.join("history.jsonl");
    match std::fs::write(&path, out) {
        Ok(()) => format!("history in {}\n", path.display()),
        Err(e) => format!("history not written to {}: {e}\n", path.display()),
    }
}

/// Found a lost acknowledged write (fixed since): a primary deposed and re-elected within
/// milliseconds retracted a commit that never reached the log, and that commit's client still
/// got a success reply, because the session took its reply ticket after the commit returned,
/// in the new generation. Tickets now carry the generation from before the transaction began
/// (`Replication::write_ticket`; unit test
/// `a_commit_across_a_change_of_generation_is_never_acknowledged`). Seeds that showed it:
/// 1795570657448408158, 1795570589387363399, 1795570025539937458 (timing decides more than
/// the seed).
#[test]
fn partitions_lose_no_acknowledged_append() {
    let seed: u64 = seed_from_env("VERSO_PARTITION_SEED");
    eprintln!("VERSO_PARTITION_SEED={seed}");
    let began = Instant::now();
    let mut rng = Rng(seed | 1);
    let g = Group::new();
    let ports = g.ports.clone();
    let rec = AppendRecorder::new();
    let sh = Shared {
        stop: AtomicBool::new(false),
        failed: AtomicBool::new(false),
        started: AtomicU64::new(0),
        phase: AtomicUsize::new(0),
        acked: Default::default(),
        outcomes: Default::default(),
        epoch: AtomicU64::new(0),
        isolated: AtomicUsize::new(usize::MAX),
        cut_at: Mutex::new(None),
        violations: Mutex::new(Vec::new()),
        notes: Mutex::new(Vec::new()),
        primaries: Mutex::new(BTreeMap::new()),
    };
    let run = catch_unwind(AssertUnwindSafe(|| {
        std::thread::scope(|s| {
            for i in 0..CLIENTS {
                let (ports, sh, rec) = (&ports, &sh, &rec);
                s.spawn(move || client_thread(ports, sh, rec, seed.wrapping_add(i)));
            }
            s.spawn(|| monitor(&ports, &sh));
            let r = catch_unwind(AssertUnwindSafe(|| scenario(&g, &sh, &mut rng)));
            sh.stop.store(true, SeqCst);
            if let Err(p) = r {
                resume_unwind(p);
            }
        });
        let keys = sh.started.load(SeqCst) / ROTATE_EVERY + KEYS;
        final_read(&ports, &rec, keys);
    }));
    if let Err(p) = run {
        eprintln!(
            "{}\nreproduce with VERSO_PARTITION_SEED={seed}",
            g.log_tail()
        );
        resume_unwind(p);
    }
    let history = rec.into_history();
    let [committed, aborted, unknown] = sh.outcomes.each_ref().map(|a| a.load(SeqCst));
    let acked: Vec<u64> = sh.acked.iter().map(|a| a.load(SeqCst)).collect();
    eprintln!(
        "{} txns: {committed} committed, {aborted} aborted, {unknown} unknown; appending txns \
         acknowledged by phase {acked:?}; primaries by view {:?}; {:?} in all",
        history.len(),
        sh.primaries.lock().unwrap(),
        began.elapsed()
    );
    match check_append_strict_serializable(&history) {
        Ok(stats) => eprintln!("strictly serializable: {stats:?}"),
        Err(v) => {
            let tail = g.log_tail();
            let dump = dump(&history, &sh.notes.lock().unwrap());
            panic!("not strictly serializable (VERSO_PARTITION_SEED={seed}):\n{v}\n{tail}{dump}")
        }
    }
    assert_a_lost_append_is_caught(&history);
    let violations = sh.violations.lock().unwrap();
    assert!(violations.is_empty(), "seed {seed}: {violations:#?}");
    for (view, ids) in sh.primaries.lock().unwrap().iter() {
        assert_eq!(
            ids.len(),
            1,
            "seed {seed}: view {view}: replicas {ids:?} all reported primary"
        );
        let leader: usize = view.rsplit('.').next().unwrap().parse().unwrap();
        assert_eq!(
            ids[0], leader,
            "seed {seed}: view {view} led by {leader} but {} said primary",
            ids[0]
        );
    }
}
