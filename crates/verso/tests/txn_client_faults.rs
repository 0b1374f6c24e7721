//! Coordinating clients that die or stop mid-transaction (issue 19 item 6, without
//! replication yet): `verso txn-client` processes move value between keys on two NCC
//! servers; one is killed with SIGKILL (and a new process takes over its id at once, and is
//! killed too), one is stopped with SIGSTOP past the servers' recovery timer and then
//! resumed. The servers' backup coordinators (App. D) must decide every transaction the
//! clients left behind, and the total must be conserved. Every wait is on a condition,
//! bounded in time.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use verso_ncc::wire::Encoding;
use verso_txn_net::local::LocalCluster;
use verso_txn_net::session::Session;
use verso_txn_net::Protocol;

const KEYS: u64 = 6;
const START: u64 = 1_000_000;

/// A transfer client process and its count of commits so far (read from its stdout).
struct TransferClient {
    child: Child,
    committed: Arc<AtomicU64>,
}

impl TransferClient {
    fn start(exe: &Path, servers: &str, client: u32) -> TransferClient {
        let mut child = Command::new(exe)
            .args(["txn-client", "--servers", servers, "--protocol", "ncc"])
            .args([
                "--client",
                &client.to_string(),
                "--seed",
                &client.to_string(),
            ])
            .args(["--transfers", "0", "--keys", &KEYS.to_string()])
            .stdout(Stdio::piped())
            .spawn()
            .expect("a client process starts");
        let committed = Arc::new(AtomicU64::new(0));
        let stdout = child.stdout.take().expect("piped");
        let count = committed.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                if let Some(n) = line.strip_prefix("committed ") {
                    count.store(n.parse().unwrap_or(0), Ordering::SeqCst);
                }
            }
        });
        TransferClient { child, committed }
    }

    /// Waits until it has committed `n` in all.
    fn wait_for(&self, n: u64, what: &str) {
        wait_until(Duration::from_secs(30), what, || {
            self.committed.load(Ordering::SeqCst) >= n
        });
    }

    fn signal(&self, signal: i32) {
        // SAFETY: `kill` only sends a signal; the pid is our own child's, not yet waited
        // for, so it cannot have been reused by another process.
        let rc = unsafe { libc::kill(self.child.id() as i32, signal) };
        assert_eq!(rc, 0, "signal {signal} to the client");
    }
}

impl Drop for TransferClient {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn wait_until(limit: Duration, what: &str, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < limit, "gave up waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn total(s: &mut Session) -> u64 {
    let keys: Vec<u64> = (0..KEYS).collect();
    s.get(&keys)
        .expect("an audit")
        .iter()
        .map(|&(_, v)| v)
        .sum()
}

fn undecided(cluster: &LocalCluster) -> u64 {
    cluster.dump().expect("the servers answer a dump").undecided
}

#[test]
fn the_servers_decide_for_clients_that_die_or_stop_mid_transaction() {
    let exe = Path::new(env!("CARGO_BIN_EXE_verso"));
    let protocol = Protocol::parse("ncc").expect("known");
    let cluster = LocalCluster::start(exe, 2, protocol, false).expect("servers start");
    let servers = cluster
        .addrs
        .iter()
        .map(|a| a.to_string())
        .collect::<Vec<_>>()
        .join(",");
    let mut auditor =
        Session::connect(&cluster.addrs, protocol, 0, Encoding::Binary).expect("connect");
    let initial: Vec<(u64, u64)> = (0..KEYS).map(|k| (k, START)).collect();
    auditor.put(&initial).expect("the initial balances");

    let killed = TransferClient::start(exe, &servers, 1);
    let stopped = TransferClient::start(exe, &servers, 2);
    killed.wait_for(30, "the first client's transfers");
    stopped.wait_for(30, "the second client's transfers");

    // Kill one mid-stream (it is always inside a transaction) and stop the other.
    killed.signal(libc::SIGKILL);
    stopped.signal(libc::SIGSTOP);
    let at_stop = stopped.committed.load(Ordering::SeqCst);
    // A new process takes over the killed one's id at once, before the recovery timer,
    // and is killed in its turn: its requests must not make the servers take the first
    // one's unfinished transaction for finished (it would stay undecided for good).
    let successor = TransferClient::start(exe, &servers, 1);
    successor.wait_for(30, "the successor's transfers");
    successor.signal(libc::SIGKILL);
    // The recovery timer is 1 s: within a few, nothing either left is undecided.
    wait_until(
        Duration::from_secs(20),
        "recovery of both clients' transactions",
        || undecided(&cluster) == 0,
    );
    assert_eq!(
        total(&mut auditor),
        START * KEYS,
        "after the backup coordinators"
    );

    // The stopped client comes back to find its transaction decided without it, and
    // carries on; what it believes of that transaction must agree with the servers.
    stopped.signal(libc::SIGCONT);
    stopped.wait_for(at_stop + 30, "the resumed client's transfers");
    assert_eq!(
        total(&mut auditor),
        START * KEYS,
        "after the resumed client's transfers"
    );
    stopped.signal(libc::SIGKILL);
    wait_until(
        Duration::from_secs(20),
        "recovery after the last kill",
        || undecided(&cluster) == 0,
    );
    assert_eq!(total(&mut auditor), START * KEYS, "at the end");
    let balances = auditor.get(&(0..KEYS).collect::<Vec<_>>()).expect("a read");
    assert!(balances.iter().any(|&(_, v)| v != START), "{balances:?}");
    drop(killed);
    drop(successor);
    drop(stopped);
    cluster.shutdown().expect("the servers stop");
}
