//! A Lazy VSR group of three real `verso serve` processes on loopback, under concurrent
//! transfers (MULTI/EXEC), INCRs and whole-database reads, while replicas are killed with
//! SIGKILL (the primary included) and restarted, and finally all three at once.
//!
//! Checks:
//! - totals are conserved: every read of all accounts sums to zero, and so does the end;
//! - nothing acknowledged is lost while a majority survives: before the total crash the
//!   counter is at least every INCR reply a client got;
//! - after the total crash only a suffix of acknowledged INCRs may be lost (Lazy VSR), and
//!   how many is printed;
//! - at most one replica reports itself primary of any view, and only the view's leader.
//!
//! The seed is printed first; rerun with `VERSO_CLUSTER_SEED=<seed>`. `scripts/cluster-soak.sh`
//! runs it many times with more rounds (`VERSO_CLUSTER_ROUNDS`).

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

mod common;
use common::{free_port, log_tails, seed_from_env, Conn, Reply, Rng, Server};

const REPLICAS: usize = 3;
const ACCOUNTS: usize = 8;

struct Group {
    dir: tempfile::TempDir,
    cluster: std::path::PathBuf,
    ports: Vec<u16>,
    servers: Vec<Option<Server>>,
}

impl Group {
    fn new() -> Group {
        let dir = tempfile::tempdir().unwrap();
        let ports: Vec<u16> = (0..REPLICAS).map(|_| free_port()).collect();
        // Checkpoints every 100 entries: restarts and the total crash recover from a
        // checkpoint and a compacted log, not the whole log.
        let mut text = String::from(
            "secret = \"a test secret of some length\"\nmode = \"lazy\"\ncheckpoint_entries = 100\n",
        );
        for (id, port) in ports.iter().enumerate() {
            text.push_str(&format!(
                "\n[[replica]]\nid = {id}\nclient = \"127.0.0.1:{port}\"\npeer = \"127.0.0.1:{}\"\n",
                free_port()
            ));
        }
        let cluster = dir.path().join("cluster.toml");
        std::fs::write(&cluster, text).unwrap();
        let mut g = Group {
            dir,
            cluster,
            ports,
            servers: (0..REPLICAS).map(|_| None).collect(),
        };
        for id in 0..REPLICAS {
            g.start(id);
        }
        g
    }

    fn start(&mut self, id: usize) {
        let data = self.dir.path().join(format!("replica{id}"));
        let log = std::fs::File::create(self.dir.path().join(format!("replica{id}.log"))).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_verso"))
            .args(["serve", "--threads", "2", "--cluster"])
            .arg(&self.cluster)
            .args(["--replica", &id.to_string(), "--data-dir"])
            .arg(&data)
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start verso serve");
        self.servers[id] = Some(Server(child));
    }

    fn kill(&mut self, id: usize) {
        // Drop sends SIGKILL and reaps the process.
        self.servers[id] = None;
    }

    fn log_tail(&self) -> String {
        log_tails(self.dir.path(), REPLICAS, 15)
    }
}

/// A connection to whichever replica is primary now, found by trying each (a backup
/// answers READONLY; a dead one refuses the connection).
struct PrimaryConn {
    ports: Vec<u16>,
    next: usize,
    conn: Option<Conn>,
}

impl PrimaryConn {
    fn new(ports: &[u16], start: usize) -> PrimaryConn {
        PrimaryConn {
            ports: ports.to_vec(),
            next: start,
            conn: None,
        }
    }

    /// Runs `f` on a connection to the primary until it gets an answer that is not a
    /// backup's refusal, within `deadline`. `Err` means the outcome is unknown (the
    /// connection failed after sending), or the deadline passed.
    fn run<T>(
        &mut self,
        deadline: Instant,
        mut f: impl FnMut(&mut Conn) -> std::io::Result<Result<T, String>>,
    ) -> Result<T, String> {
        loop {
            if Instant::now() > deadline {
                return Err("deadline".into());
            }
            if self.conn.is_none() {
                let port = self.ports[self.next % self.ports.len()];
                self.next += 1;
                match Conn::open(port) {
                    Ok(c) => self.conn = Some(c),
                    Err(_) => {
                        std::thread::sleep(Duration::from_millis(20));
                        continue;
                    }
                }
            }
            let c = self.conn.as_mut().expect("just set");
            match f(c) {
                Ok(Ok(v)) => return Ok(v),
                Ok(Err(e)) if e.starts_with("READONLY") => {
                    // A backup, or a primary deposed after it refused: try the next one.
                    self.conn = None;
                    if e.contains("may or may not") {
                        return Err(e);
                    }
                    std::thread::sleep(Duration::from_millis(5));
                }
                // A backup promoted while it refused: nothing ran, and this replica now
                // leads, so ask it again.
                Ok(Err(e)) if e.starts_with("TRYAGAIN") => {
                    std::thread::sleep(Duration::from_millis(5));
                }
                Ok(Err(e)) => panic!("unexpected error reply: {e}"),
                Err(e) => {
                    self.conn = None;
                    return Err(format!("connection: {e}"));
                }
            }
        }
    }
}

fn int(r: &Reply) -> Result<i64, String> {
    match r {
        Reply::Int(n) => Ok(*n),
        Reply::Bulk(None) => Ok(0),
        Reply::Bulk(Some(b)) => Ok(String::from_utf8_lossy(b).parse().unwrap()),
        Reply::Error(e) => Err(e.clone()),
        other => panic!("not an integer: {other:?}"),
    }
}

struct Shared {
    stop: AtomicBool,
    /// The largest INCR reply acknowledged.
    incr_acked: AtomicI64,
    transfers: AtomicU64,
    reads: AtomicU64,
    /// Reads of all accounts served by a backup (READONLY).
    backup_reads: AtomicU64,
    /// (view, replica) pairs seen reporting `vsr_role:primary`.
    primaries: Mutex<BTreeMap<String, Vec<usize>>>,
}

fn transfer_client(ports: &[u16], seed: u64, sh: &Shared) {
    let mut rng = Rng(seed | 1);
    let mut pc = PrimaryConn::new(ports, seed as usize);
    while !sh.stop.load(Ordering::Relaxed) {
        let (from, to) = (rng.below(ACCOUNTS as u64), rng.below(ACCOUNTS as u64));
        let amount = (1 + rng.below(50)).to_string();
        let (a, b) = (format!("acct:{from}"), format!("acct:{to}"));
        let r = pc.run(Instant::now() + Duration::from_secs(5), |c| {
            c.call(&["MULTI"])?;
            c.call(&["DECRBY", &a, &amount])?;
            c.call(&["INCRBY", &b, &amount])?;
            Ok(match c.call(&["EXEC"])? {
                Reply::Array(Some(_)) => Ok(()),
                Reply::Error(e) => Err(e),
                other => panic!("EXEC: {other:?}"),
            })
        });
        if r.is_ok() {
            sh.transfers.fetch_add(1, Ordering::Relaxed);
        }
    }
}

fn incr_client(ports: &[u16], sh: &Shared) {
    let mut pc = PrimaryConn::new(ports, 1);
    while !sh.stop.load(Ordering::Relaxed) {
        let r = pc.run(Instant::now() + Duration::from_secs(5), |c| {
            Ok(int(&c.call(&["INCR", "ctr"])?))
        });
        if let Ok(v) = r {
            sh.incr_acked.fetch_max(v, Ordering::Relaxed);
        }
    }
}

fn accounts_sum(c: &mut Conn) -> std::io::Result<Result<i64, String>> {
    let keys: Vec<String> = (0..ACCOUNTS).map(|i| format!("acct:{i}")).collect();
    let mut args = vec!["MGET"];
    args.extend(keys.iter().map(String::as_str));
    Ok(match c.call(&args)? {
        Reply::Array(Some(items)) => items.iter().map(int).sum(),
        Reply::Error(e) => Err(e),
        other => panic!("MGET: {other:?}"),
    })
}

fn reader(ports: &[u16], sh: &Shared) {
    let mut pc = PrimaryConn::new(ports, 2);
    while !sh.stop.load(Ordering::Relaxed) {
        if let Ok(sum) = pc.run(Instant::now() + Duration::from_secs(5), accounts_sum) {
            assert_eq!(sum, 0, "a read saw a transfer half done (sum {sum})");
            sh.reads.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Reads all accounts with READONLY from every replica in turn, in one MGET and in a
/// MULTI/EXEC of GETs: a backup answers from what the log made durable, stale but never a
/// transfer half applied (or one later undone, which would break the sum the same way).
fn backup_reader(ports: &[u16], sh: &Shared) {
    let mut turn = 0usize;
    while !sh.stop.load(Ordering::Relaxed) {
        turn += 1;
        let Ok(mut c) = Conn::open(ports[turn % ports.len()]) else {
            std::thread::sleep(Duration::from_millis(20));
            continue;
        };
        if !matches!(c.call(&["READONLY"]), Ok(Reply::Simple(_))) {
            continue;
        }
        for _ in 0..50 {
            let Ok(Reply::Bulk(Some(info))) = c.call(&["INFO", "replication"]) else {
                break;
            };
            let backup = String::from_utf8_lossy(&info).contains("vsr_role:backup");
            let Ok(Ok(sum)) = accounts_sum(&mut c) else {
                break;
            };
            assert_eq!(
                sum, 0,
                "a read on a backup saw a transfer half done (sum {sum})"
            );
            let keys: Vec<String> = (0..ACCOUNTS).map(|i| format!("acct:{i}")).collect();
            let mut block = vec![vec![b"MULTI".to_vec()]];
            block.extend(
                keys.iter()
                    .map(|k| vec![b"GET".to_vec(), k.as_bytes().to_vec()]),
            );
            block.push(vec![b"EXEC".to_vec()]);
            if c.send(&block).is_err() {
                break;
            }
            let mut replies = Vec::new();
            for _ in 0..block.len() {
                match c.read() {
                    Ok(r) => replies.push(r),
                    Err(_) => break,
                }
            }
            match replies.last() {
                Some(Reply::Array(Some(items))) => {
                    let sum: i64 = items.iter().map(|r| int(r).unwrap()).sum();
                    assert_eq!(sum, 0, "a MULTI on a backup saw a transfer half done");
                }
                _ => break, // refused (a replica changing role) or the connection died
            }
            if backup {
                sh.backup_reads.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

fn monitor(ports: &[u16], sh: &Shared) {
    while !sh.stop.load(Ordering::Relaxed) {
        for (id, &port) in ports.iter().enumerate() {
            let Ok(mut c) = Conn::open(port) else {
                continue;
            };
            let Ok(Reply::Bulk(Some(text))) = c.call(&["INFO", "replication"]) else {
                continue;
            };
            let text = String::from_utf8_lossy(&text).to_string();
            let field = |k: &str| {
                text.lines()
                    .find_map(|l| l.strip_prefix(k).map(|v| v.trim().to_string()))
            };
            if field("vsr_role:").as_deref() == Some("primary") {
                let view = field("vsr_view:").unwrap();
                let mut p = sh.primaries.lock().unwrap();
                let ids = p.entry(view).or_default();
                if !ids.contains(&id) {
                    ids.push(id);
                }
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Waits until some replica accepts a write (a primary is elected and caught up).
fn wait_for_primary(ports: &[u16], within: Duration) -> Duration {
    let start = Instant::now();
    let mut pc = PrimaryConn::new(ports, 0);
    let r = loop {
        let r = pc.run(start + within, |c| {
            Ok(match c.call(&["SET", "probe", "1"])? {
                Reply::Simple(_) => Ok(()),
                Reply::Error(e) => Err(e),
                other => panic!("SET: {other:?}"),
            })
        });
        // A connection that died mid-request (a replica killed, or a deposed primary
        // closing held replies) is not an answer: ask again until the deadline.
        match r {
            Err(e) if e != "deadline" => continue,
            r => break r,
        }
    };
    assert!(
        r.is_ok(),
        "no primary accepted a write within {within:?}: {r:?}"
    );
    start.elapsed()
}

/// Waits until replica `id` reports `vsr_recovering:0`: restarted, it counts as failed until
/// it caught up from a primary (it does not vote before), so killing another replica
/// sooner would be a second failure, more than a group of three survives.
fn wait_recovered(port: u16, within: Duration) -> Duration {
    let start = Instant::now();
    loop {
        let info = Conn::open(port).and_then(|mut c| c.call(&["INFO", "replication"]));
        if let Ok(Reply::Bulk(Some(text))) = info {
            if String::from_utf8_lossy(&text).contains("vsr_recovering:0") {
                return start.elapsed();
            }
        }
        assert!(
            start.elapsed() < within,
            "the restarted replica on port {port} did not recover within {within:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Runs `f` on the primary until it answers (connections dying mid-request are retried).
fn answer<T>(
    ports: &[u16],
    mut f: impl FnMut(&mut Conn) -> std::io::Result<Result<T, String>>,
) -> T {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut pc = PrimaryConn::new(ports, 0);
    loop {
        match pc.run(deadline, &mut f) {
            Ok(v) => return v,
            Err(e) if e != "deadline" => continue,
            Err(e) => panic!("no answer from a primary within 30 s: {e}"),
        }
    }
}

fn read_ctr(ports: &[u16]) -> i64 {
    answer(ports, |c| Ok(int(&c.call(&["GET", "ctr"])?)))
}

#[test]
fn three_replicas_survive_kills_of_any_and_of_all() {
    let seed: u64 = seed_from_env("VERSO_CLUSTER_SEED");
    let rounds: usize = std::env::var("VERSO_CLUSTER_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(4);
    eprintln!("VERSO_CLUSTER_SEED={seed} VERSO_CLUSTER_ROUNDS={rounds}");
    let mut rng = Rng(seed | 1);
    let mut g = Group::new();
    let ports = g.ports.clone();
    let first = wait_for_primary(&ports, Duration::from_secs(30));
    eprintln!("first primary after {first:?}");
    let sh = Shared {
        stop: AtomicBool::new(false),
        incr_acked: AtomicI64::new(0),
        transfers: AtomicU64::new(0),
        reads: AtomicU64::new(0),
        backup_reads: AtomicU64::new(0),
        primaries: Mutex::new(BTreeMap::new()),
    };
    let mut failovers = Vec::new();
    std::thread::scope(|s| {
        for t in 0..2 {
            let (ports, sh) = (&ports, &sh);
            s.spawn(move || transfer_client(ports, seed.wrapping_add(t), sh));
        }
        s.spawn(|| incr_client(&ports, &sh));
        s.spawn(|| reader(&ports, &sh));
        s.spawn(|| backup_reader(&ports, &sh));
        s.spawn(|| monitor(&ports, &sh));
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            for round in 0..rounds {
                std::thread::sleep(Duration::from_millis(500 + rng.below(700)));
                let victim = rng.below(REPLICAS as u64) as usize;
                let acked = sh.incr_acked.load(Ordering::Relaxed);
                g.kill(victim);
                let took = wait_for_primary(&ports, Duration::from_secs(20));
                failovers.push(took);
                eprintln!(
                    "round {round}: killed replica {victim}; a primary took a write after {took:?}"
                );
                std::thread::sleep(Duration::from_millis(200 + rng.below(500)));
                g.start(victim);
                let recovered = wait_recovered(ports[victim], Duration::from_secs(20));
                eprintln!(
                    "round {round}: replica {victim} recovered {recovered:?} after its start"
                );
                // Nothing acknowledged is lost while a majority survives.
                let ctr = read_ctr(&ports);
                assert!(
                    ctr >= acked,
                    "round {round}: ctr {ctr} < acknowledged {acked}"
                );
            }
            std::thread::sleep(Duration::from_millis(500));
            let acked = sh.incr_acked.load(Ordering::Relaxed);
            let before = read_ctr(&ports);
            assert!(
                before >= acked,
                "before the total crash: ctr {before} < acknowledged {acked}"
            );
            for id in 0..REPLICAS {
                g.kill(id);
            }
            let acked = sh.incr_acked.load(Ordering::Relaxed);
            for id in 0..REPLICAS {
                g.start(id);
            }
            let took = wait_for_primary(&ports, Duration::from_secs(30));
            let after = read_ctr(&ports);
            eprintln!(
                "total crash: back after {took:?}; ctr {after}, acknowledged {acked}: {} acknowledged INCRs lost (Lazy VSR may lose a suffix)",
                (acked - after).max(0)
            );
            std::thread::sleep(Duration::from_millis(500));
        }));
        sh.stop.store(true, Ordering::Relaxed);
        if let Err(p) = result {
            eprintln!("{}", g.log_tail());
            std::panic::resume_unwind(p);
        }
    });
    let sum = answer(&ports, accounts_sum);
    assert_eq!(sum, 0, "money was created or destroyed");
    let transfers = sh.transfers.load(Ordering::Relaxed);
    let reads = sh.reads.load(Ordering::Relaxed);
    let backup_reads = sh.backup_reads.load(Ordering::Relaxed);
    eprintln!(
        "transfers acknowledged {transfers}, consistent reads {reads} (and {backup_reads} on backups), failovers {failovers:?}"
    );
    assert!(
        transfers > 0 && reads > 0 && backup_reads > 0,
        "the workload made no progress"
    );
    for (view, ids) in sh.primaries.lock().unwrap().iter() {
        assert_eq!(
            ids.len(),
            1,
            "view {view}: replicas {ids:?} all reported primary"
        );
        let leader: usize = view.rsplit('.').next().unwrap().parse().unwrap();
        assert_eq!(
            ids[0], leader,
            "view {view} led by {leader} but replica {} said primary",
            ids[0]
        );
    }
    let _ = Path::new(g.dir.path());
}

/// `WAIT numreplicas timeout` counts the backups holding the connection's writes on disk,
/// and a READONLY client's reads on a backup come to see a write once it is durable.
#[test]
fn wait_counts_backups_with_writes_on_disk_and_backups_serve_readonly_reads() {
    let mut g = Group::new();
    let ports = g.ports.clone();
    wait_for_primary(&ports, Duration::from_secs(30));
    // Which replica leads (a backup would relay a write, so ask each).
    let primary = find_primary(&ports);
    let mut c = Conn::open(ports[primary]).unwrap();
    let wait = |c: &mut Conn, n: &str, ms: &str| match c.call(&["WAIT", n, ms]).unwrap() {
        Reply::Int(k) => k,
        other => panic!("WAIT: {other:?}"),
    };
    assert!(matches!(
        c.call(&["SET", "k", "1"]).unwrap(),
        Reply::Simple(_)
    ));
    // Both backups write their logs in the background: WAIT returns once both have.
    assert_eq!(wait(&mut c, "2", "0"), 2);
    // More than exist: the timeout answers with how many hold it.
    assert_eq!(wait(&mut c, "5", "100"), 2);
    for (args, want) in [
        (["WAIT", "x", "0"], "not an integer"),
        (["WAIT", "1", "-1"], "timeout is negative"),
    ] {
        match c.call(&args).unwrap() {
            Reply::Error(e) => assert!(e.contains(want), "{e}"),
            other => panic!("{args:?}: {other:?}"),
        }
    }
    // Reads on the primary go through its read lease once it holds one (a quiet group
    // renews it with every heartbeat round), and see the write.
    let leased = |c: &mut Conn| -> u64 {
        let Reply::Bulk(Some(text)) = c.call(&["INFO", "replication"]).unwrap() else {
            panic!("INFO replication");
        };
        let text = String::from_utf8_lossy(&text).into_owned();
        let line = text
            .lines()
            .find_map(|l| l.strip_prefix("vsr_reads_leased:"))
            .expect("INFO replication counts leased reads");
        line.trim().parse().unwrap()
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while leased(&mut c) == 0 {
        match c.call(&["GET", "k"]).unwrap() {
            Reply::Bulk(Some(v)) if v == b"1" => {}
            other => panic!("GET on the primary: {other:?}"),
        }
        assert!(Instant::now() < deadline, "no read went through the lease");
    }
    let backups: Vec<usize> = (0..REPLICAS).filter(|&id| id != primary).collect();
    // A READONLY client on a backup reads what is durable there, and is refused writes
    // (as on a Redis Cluster replica).
    let mut b = Conn::open(ports[backups[0]]).unwrap();
    assert!(matches!(b.call(&["READONLY"]).unwrap(), Reply::Simple(_)));
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match b.call(&["GET", "k"]).unwrap() {
            Reply::Bulk(Some(v)) if v == b"1" => break,
            Reply::Bulk(_) => {}
            other => panic!("GET on a backup with READONLY: {other:?}"),
        }
        assert!(
            Instant::now() < deadline,
            "a durable write never showed on the backup"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    match b.call(&["SET", "k", "2"]).unwrap() {
        Reply::Error(e) => assert!(e.starts_with("READONLY"), "{e}"),
        other => panic!("SET on a backup with READONLY: {other:?}"),
    }
    match b.call(&["WAIT", "1", "0"]).unwrap() {
        Reply::Error(e) => assert!(e.contains("replica"), "{e}"),
        other => panic!("WAIT on a backup with READONLY: {other:?}"),
    }
    // After READWRITE (and for any client that never sent READONLY) the backup relays the
    // connection to the primary: writes, linearizable reads, transactions, WAIT, and the
    // connection's database and protocol carried over.
    assert!(matches!(b.call(&["READWRITE"]).unwrap(), Reply::Simple(_)));
    assert!(matches!(
        b.call(&["SET", "k", "2"]).unwrap(),
        Reply::Simple(_)
    ));
    assert!(matches!(c.call(&["GET", "k"]).unwrap(), Reply::Bulk(Some(v)) if v == b"2"));
    let mut f = Conn::open(ports[backups[0]]).unwrap();
    assert!(matches!(
        f.call(&["SELECT", "3"]).unwrap(),
        Reply::Simple(_)
    ));
    assert!(matches!(
        f.call(&["CLIENT", "SETNAME", "relayed"]).unwrap(),
        Reply::Simple(_)
    ));
    assert_eq!(f.call(&["INCR", "n"]).unwrap(), Reply::Int(1));
    assert_eq!(f.call(&["INCR", "n"]).unwrap(), Reply::Int(2));
    assert!(matches!(f.call(&["GET", "k"]).unwrap(), Reply::Bulk(None)));
    f.send(&[
        vec![b"MULTI".to_vec()],
        vec![b"INCR".to_vec(), b"n".to_vec()],
        vec![b"GET".to_vec(), b"n".to_vec()],
        vec![b"EXEC".to_vec()],
    ])
    .unwrap();
    for _ in 0..3 {
        f.read().unwrap(); // OK, QUEUED, QUEUED
    }
    match f.read().unwrap() {
        Reply::Array(Some(items)) => {
            assert_eq!(items, vec![Reply::Int(3), Reply::Bulk(Some(b"3".to_vec()))])
        }
        other => panic!("EXEC relayed: {other:?}"),
    }
    assert_eq!(f.call(&["WAIT", "2", "5000"]).unwrap(), Reply::Int(2));
    match f.call(&["CLIENT", "GETNAME"]).unwrap() {
        Reply::Bulk(Some(n)) => assert_eq!(n, b"relayed"),
        other => panic!("CLIENT GETNAME relayed: {other:?}"),
    }
    // A connection that is itself a relay is never relayed on (no loop between two
    // replicas that each think the other leads).
    let mut r = Conn::open(ports[backups[0]]).unwrap();
    let setinfo = ["CLIENT", "SETINFO", "LIB-NAME", "verso-relay"];
    assert!(matches!(r.call(&setinfo).unwrap(), Reply::Simple(_)));
    match r.call(&["SET", "k", "9"]).unwrap() {
        Reply::Error(e) => assert!(e.starts_with("READONLY"), "{e}"),
        other => panic!("a relay's SET on a backup: {other:?}"),
    }
    assert!(matches!(
        c.call(&["SELECT", "3"]).unwrap(),
        Reply::Simple(_)
    ));
    assert!(matches!(c.call(&["GET", "n"]).unwrap(), Reply::Bulk(Some(v)) if v == b"3"));
    assert!(matches!(
        c.call(&["SELECT", "0"]).unwrap(),
        Reply::Simple(_)
    ));
    // One backup down: a write reaches only the other one's disk.
    g.kill(backups[1]);
    assert!(matches!(
        c.call(&["SET", "k", "3"]).unwrap(),
        Reply::Simple(_)
    ));
    assert_eq!(wait(&mut c, "1", "0"), 1);
    assert_eq!(wait(&mut c, "2", "200"), 1);
    // Pipelined behind a blocked WAIT, a command waits its turn and replies stay in order.
    c.send(&[
        vec![b"WAIT".to_vec(), b"2".to_vec(), b"100".to_vec()],
        vec![b"GET".to_vec(), b"k".to_vec()],
    ])
    .unwrap();
    assert!(matches!(c.read().unwrap(), Reply::Int(1)));
    assert!(matches!(c.read().unwrap(), Reply::Bulk(Some(v)) if v == b"3"));
}

/// The replica that reports itself primary, waited for.
fn find_primary(ports: &[u16]) -> usize {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let leader = (0..ports.len()).find(|&id| {
            matches!(
                Conn::open(ports[id]).and_then(|mut c| c.call(&["INFO", "replication"])),
                Ok(Reply::Bulk(Some(text))) if String::from_utf8_lossy(&text).contains("vsr_role:primary")
            )
        });
        match leader {
            Some(id) => return id,
            None if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            None => panic!("no replica reports primary"),
        }
    }
}

/// Waits until replica `port` serves `model` exactly from its own state (`READONLY`: a
/// backup would otherwise relay the reads to the primary; its reads trail the primary's).
fn wait_serves(port: u16, model: &BTreeMap<String, String>, within: Duration) {
    let deadline = Instant::now() + within;
    loop {
        let mut wrong = None;
        match Conn::open(port) {
            Ok(mut c) => {
                assert!(matches!(c.call(&["READONLY"]), Ok(Reply::Simple(_))));
                for (k, v) in model {
                    match c.call(&["GET", k]) {
                        Ok(Reply::Bulk(Some(got))) if got == v.as_bytes() => {}
                        other => {
                            wrong = Some(format!("{k}: {other:?}, want {v}"));
                            break;
                        }
                    }
                }
            }
            Err(e) => wrong = Some(e.to_string()),
        }
        let Some(wrong) = wrong else { return };
        assert!(
            Instant::now() < deadline,
            "the replica on port {port} does not serve what was written: {wrong}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Checkpoints (every 100 entries here) keep each replica log to its live entries, and a
/// replica that lost its disk rejoins through a state transfer of the primary's data (its
/// log does not reach the trimmed base): it then serves every acknowledged write, and so
/// does the whole group after all three are killed and restarted from their checkpoints.
#[test]
fn a_replica_that_lost_its_disk_rejoins_by_state_transfer() {
    let mut g = Group::new();
    let ports = g.ports.clone();
    wait_for_primary(&ports, Duration::from_secs(30));
    let mut model: BTreeMap<String, String> = BTreeMap::new();
    let value = |i: usize| format!("{i:0>1000}");
    let write = |model: &mut BTreeMap<String, String>, i: usize| {
        let (k, v) = (format!("key:{}", i % 700), value(i));
        answer(&ports, |c| {
            Ok(match c.call(&["SET", &k, &v])? {
                Reply::Simple(_) => Ok(()),
                Reply::Error(e) => Err(e),
                other => panic!("SET: {other:?}"),
            })
        });
        model.insert(k, v);
    };
    for i in 0..3000 {
        write(&mut model, i);
    }
    // Lost: a backup's process and its whole directory.
    let lost = (find_primary(&ports) + 1) % REPLICAS;
    g.kill(lost);
    std::fs::remove_dir_all(g.dir.path().join(format!("replica{lost}"))).unwrap();
    for i in 3000..4000 {
        write(&mut model, i);
    }
    g.start(lost);
    wait_recovered(ports[lost], Duration::from_secs(30));
    wait_serves(ports[lost], &model, Duration::from_secs(30));
    let info = |port: u16| match Conn::open(port).and_then(|mut c| c.call(&["INFO", "replication"]))
    {
        Ok(Reply::Bulk(Some(text))) => String::from_utf8_lossy(&text).to_string(),
        other => panic!("INFO: {other:?}"),
    };
    // INFO's copy of the state is refreshed a few times a second.
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut lost_info = info(ports[lost]);
    while !lost_info.contains("vsr_state_transfers_installed:1") && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
        lost_info = info(ports[lost]);
    }
    assert!(
        lost_info.contains("vsr_state_transfers_installed:1"),
        "the replica caught up without a state transfer:\n{lost_info}\nthe primary:\n{}\n{}",
        info(ports[find_primary(&ports)]),
        g.log_tail()
    );
    // With every replica back, the logs are trimmed again at the next checkpoints.
    let wait_on_disks = || {
        answer(&ports, |c| {
            Ok(match c.call(&["WAIT", "2", "10000"])? {
                Reply::Int(2) => Ok(()),
                other => panic!("WAIT: {other:?}"),
            })
        })
    };
    for i in 4000..4500 {
        write(&mut model, i);
    }
    // Every acknowledged write is on every disk, then every process dies.
    wait_on_disks();
    // 4.5 MB of values went through each log; compacted, each holds about the entries
    // since its last checkpoint (100 KB or so). Writes start checkpoints, and a loaded
    // machine (the tests run side by side) may still be writing one when WAIT returns: so
    // more writes, 100 at a time, until every log is small (bounded: 20 rounds).
    let log_sizes = || -> Vec<u64> {
        (0..REPLICAS)
            .map(|id| {
                let log = g.dir.path().join(format!("replica{id}/vsr.log"));
                std::fs::metadata(log).unwrap().len()
            })
            .collect()
    };
    let mut next = 4500;
    while log_sizes().iter().any(|&size| size >= 1 << 20) {
        assert!(next < 6500, "the logs hold {:?} bytes", log_sizes());
        for i in next..next + 100 {
            write(&mut model, i);
        }
        next += 100;
        wait_on_disks();
    }
    for id in 0..REPLICAS {
        g.kill(id);
    }
    for id in 0..REPLICAS {
        g.start(id);
    }
    wait_for_primary(&ports, Duration::from_secs(30));
    wait_serves(ports[find_primary(&ports)], &model, Duration::from_secs(10));
}

/// DBSIZE as a replica serves it from its own state (`READONLY`).
fn local_dbsize(port: u16) -> std::io::Result<i64> {
    let mut c = Conn::open(port)?;
    c.call(&["READONLY"])?;
    match c.call(&["DBSIZE"])? {
        Reply::Int(n) => Ok(n),
        other => Err(std::io::Error::other(format!("DBSIZE: {other:?}"))),
    }
}

/// FLUSHALL of more than one replicated commit may carry (32 MiB of deletions: 34,000 keys
/// of 1,000 bytes here) goes through the log as one clear, which every replica expands
/// against its own copy: it answers OK, every replica ends up empty, and a write after it
/// survives the whole group's restart, the clear replayed from the logs and checkpoints.
#[test]
fn flushall_larger_than_a_replicated_commit_empties_every_replica() {
    const KEYS: usize = 34_000;
    const PER_MSET: usize = 250;
    let mut g = Group::new();
    let ports = g.ports.clone();
    wait_for_primary(&ports, Duration::from_secs(30));
    let primary = find_primary(&ports);
    let mut c = Conn::open(ports[primary]).unwrap();
    // `wait_for_primary` wrote a probe key.
    let before = local_dbsize(ports[primary]).unwrap();
    let pad = "k".repeat(990);
    for batch in 0..KEYS / PER_MSET {
        let mut args: Vec<String> = vec!["MSET".into()];
        for i in batch * PER_MSET..(batch + 1) * PER_MSET {
            args.push(format!("{pad}{i:08}"));
            args.push("v".into());
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        match c.call(&args).unwrap() {
            Reply::Simple(_) => {}
            other => panic!("MSET: {other:?}\n{}", g.log_tail()),
        }
    }
    assert_eq!(local_dbsize(ports[primary]).unwrap(), before + KEYS as i64);
    match c.call(&["FLUSHALL"]).unwrap() {
        Reply::Simple(s) if s == "OK" => {}
        other => panic!("FLUSHALL: {other:?}\n{}", g.log_tail()),
    }
    assert!(matches!(
        c.call(&["SET", "after", "1"]).unwrap(),
        Reply::Simple(_)
    ));
    match c.call(&["WAIT", "2", "20000"]).unwrap() {
        Reply::Int(2) => {}
        other => panic!("WAIT: {other:?}\n{}", g.log_tail()),
    }
    let dir = g.dir.path().to_path_buf();
    let dir = dir.as_path();
    // Only `after` is left, or `after` and the probe `wait_for_primary` writes.
    let only = |port: u16, keys: i64, within: Duration| {
        let deadline = Instant::now() + within;
        loop {
            match local_dbsize(port) {
                Ok(n) if n == keys => return,
                other => assert!(
                    Instant::now() < deadline,
                    "replica on port {port}: DBSIZE {other:?}, want {keys}\n{}",
                    log_tails(dir, REPLICAS, 15)
                ),
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    for &port in &ports {
        only(port, 1, Duration::from_secs(30));
    }
    for id in 0..REPLICAS {
        g.kill(id);
    }
    for id in 0..REPLICAS {
        g.start(id);
    }
    wait_for_primary(&ports, Duration::from_secs(60));
    let primary = find_primary(&ports);
    only(ports[primary], 2, Duration::from_secs(30));
    let mut c = Conn::open(ports[primary]).unwrap();
    assert!(matches!(c.call(&["GET", "after"]).unwrap(), Reply::Bulk(Some(v)) if v == b"1"));
}
