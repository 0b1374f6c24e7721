//! Crash test: `verso serve` is killed with SIGKILL at a random moment while clients run
//! INCR and MULTI/EXEC, then restarted on the same data directory, 20 times per mode.
//!
//! Each MULTI/EXEC increments a shared sequence `seq` and two counters `a` and `b`, and sets
//! `seen:<client>` to the client's own transaction count. After every restart:
//! - all or nothing: `a == b == seq`;
//! - a prefix of the commit order: for each client, `seen` is the count of its last
//!   acknowledged transaction whose `seq` value is within the recovered `seq` (or of the one
//!   still in flight when the server died), never of one beyond it;
//! - `sync` only: every acknowledged transaction survived (`seq` is at least every
//!   acknowledged value, and each INCR counter at least its last acknowledged reply).
//!
//! The seed is printed first; rerun with `VERSO_CRASH_SEED=<seed>`.

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

mod common;
use common::{free_port, seed_from_env, Conn, Reply, Server};

const ROUNDS: usize = 20;
const SEQ_CLIENTS: usize = 2;

fn start(dir: &Path, mode: &str, port: u16) -> Server {
    Server(
        Command::new(env!("CARGO_BIN_EXE_verso"))
            .args(["serve", "--port", &port.to_string(), "--threads", "2"])
            .args(["--durability", mode, "--data-dir"])
            .arg(dir)
            .args(["--fsync-interval", "5"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start verso serve"),
    )
}

fn wait_ready(port: u16, server: &mut Server) -> Conn {
    let child = &mut server.0;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            panic!("verso serve exited during start: {status}");
        }
        if let Ok(mut c) = Conn::open(port) {
            if c.call(&["PING"])
                .is_ok_and(|r| r == Reply::Simple("PONG".into()))
            {
                return c;
            }
        }
        assert!(Instant::now() < deadline, "server did not come up");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// What one MULTI/EXEC client saw: (seq value, own count) per acknowledged transaction, and
/// the count of the one in flight when the connection died.
#[derive(Default, Debug)]
struct SeqLog {
    acked: Vec<(i64, i64)>,
    inflight: Option<i64>,
}

fn seq_client(port: u16, ns: String, client: usize, log: Arc<Mutex<SeqLog>>, stop: &AtomicBool) {
    let Ok(mut c) = Conn::open(port) else { return };
    let seen = format!("{ns}:seen:{client}");
    let (seq, a, b) = (format!("{ns}:seq"), format!("{ns}:a"), format!("{ns}:b"));
    let mut count = 0i64;
    while !stop.load(Ordering::Relaxed) {
        count += 1;
        log.lock().unwrap().inflight = Some(count);
        let n = count.to_string();
        let mut send = || -> std::io::Result<Reply> {
            c.call(&["MULTI"])?;
            c.call(&["INCR", &seq])?;
            c.call(&["INCR", &a])?;
            c.call(&["SET", &seen, &n])?;
            c.call(&["INCR", &b])?;
            c.call(&["EXEC"])
        };
        match send() {
            Ok(Reply::Array(Some(items))) => {
                let Reply::Int(v) = items[0] else {
                    panic!("EXEC reply {items:?}")
                };
                let mut l = log.lock().unwrap();
                l.acked.push((v, count));
                l.inflight = None;
            }
            Ok(Reply::Error(e)) => panic!("EXEC failed: {e}"),
            Ok(r) => panic!("EXEC reply {r:?}"),
            Err(_) => return,
        }
    }
}

fn incr_client(port: u16, key: String, acked: Arc<Mutex<i64>>, stop: &AtomicBool) {
    let Ok(mut c) = Conn::open(port) else { return };
    while !stop.load(Ordering::Relaxed) {
        match c.call(&["INCR", &key]) {
            Ok(Reply::Int(n)) => *acked.lock().unwrap() = n,
            Ok(r) => panic!("INCR reply {r:?}"),
            Err(_) => return,
        }
    }
}

fn check(conn: &mut Conn, ns: &str, mode: &str, logs: &[SeqLog], incr_acked: i64, round: usize) {
    let seq = conn.get_int(&format!("{ns}:seq"));
    let a = conn.get_int(&format!("{ns}:a"));
    let b = conn.get_int(&format!("{ns}:b"));
    assert_eq!((a, b), (seq, seq), "round {round}: a transaction was split");
    for (client, log) in logs.iter().enumerate() {
        let seen = conn.get_int(&format!("{ns}:seen:{client}"));
        let last_within = log
            .acked
            .iter()
            .filter(|(v, _)| *v <= seq)
            .map(|x| x.1)
            .max();
        let beyond = log.acked.iter().any(|(v, _)| *v > seq);
        let allowed_inflight = log.inflight.filter(|_| !beyond);
        assert!(
            seen == last_within.unwrap_or(0) || Some(seen) == allowed_inflight,
            "round {round} client {client}: seen {seen}, seq {seq}, acked {:?}, in flight {:?}",
            log.acked.last(),
            log.inflight
        );
        if mode == "sync" {
            assert!(
                !beyond,
                "round {round}: an acknowledged EXEC was lost (seq {seq})"
            );
        }
    }
    let ctr = conn.get_int(&format!("{ns}:ctr"));
    if mode == "sync" {
        assert!(
            ctr >= incr_acked,
            "round {round}: INCR acked {incr_acked}, {ctr} survived"
        );
    }
    assert!(
        ctr <= incr_acked + 1,
        "round {round}: INCR counter ran ahead"
    );
}

fn run(mode: &str) {
    let seed: u64 = seed_from_env("VERSO_CRASH_SEED");
    eprintln!("crash test ({mode}): seed {seed} (rerun with VERSO_CRASH_SEED={seed})");
    let mut x = seed | 1;
    let dir = tempfile::tempdir().unwrap();
    for round in 0..ROUNDS {
        let port = free_port();
        let mut server = start(dir.path(), mode, port);
        let _ = wait_ready(port, &mut server);
        let ns = format!("r{round}");
        let stop = AtomicBool::new(false);
        let logs: Vec<Arc<Mutex<SeqLog>>> = (0..SEQ_CLIENTS).map(|_| Arc::default()).collect();
        let incr_acked = Arc::new(Mutex::new(0i64));
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let kill_after = Duration::from_millis(20 + x % 300);
        std::thread::scope(|s| {
            for (client, log) in logs.iter().enumerate() {
                let (ns, log, stop) = (ns.clone(), log.clone(), &stop);
                s.spawn(move || seq_client(port, ns, client, log, stop));
            }
            let (key, acked, stop) = (format!("{ns}:ctr"), incr_acked.clone(), &stop);
            s.spawn(move || incr_client(port, key, acked, stop));
            std::thread::sleep(kill_after);
            server.0.kill().expect("SIGKILL");
            server.0.wait().unwrap();
            stop.store(true, Ordering::Relaxed);
        });
        let mut server = start(dir.path(), mode, port);
        let mut conn = wait_ready(port, &mut server);
        let logs: Vec<SeqLog> = logs
            .iter()
            .map(|l| std::mem::take(&mut *l.lock().unwrap()))
            .collect();
        let acked: usize = logs.iter().map(|l| l.acked.len()).sum();
        check(
            &mut conn,
            &ns,
            mode,
            &logs,
            *incr_acked.lock().unwrap(),
            round,
        );
        // Earlier rounds' data survived this round's crash too.
        if round > 0 {
            let prev = format!("r{}", round - 1);
            let s = conn.get_int(&format!("{prev}:seq"));
            assert_eq!(conn.get_int(&format!("{prev}:a")), s);
        }
        eprintln!("{mode} round {round}: killed after {kill_after:?}, {acked} EXECs acknowledged");
        drop(server); // SIGKILL again: the next round recovers from this crash too
    }
}

#[test]
fn sigkill_loses_nothing_acknowledged_sync() {
    run("sync");
}

#[test]
fn sigkill_leaves_a_prefix_lazy() {
    run("lazy");
}
