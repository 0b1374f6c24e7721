//! `verso txn-client` processes for the distributed-transaction fault tests: each one's
//! count of commits and every line it printed, read as it goes, so that a killed one
//! leaves what it printed before.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A client process, its count of commits so far and every line it printed (read from
/// its stdout as it goes, so a killed one leaves what it printed before).
pub struct ClientProcess {
    child: Child,
    pub committed: Arc<AtomicU64>,
    lines: Arc<Mutex<Vec<String>>>,
    reader: Option<std::thread::JoinHandle<()>>,
}

impl ClientProcess {
    /// A client transferring value between `keys` keys for ever, against `servers`
    /// (`["--servers", "A,B"]` or `["--groups", "A,B,C;D,E,F"]`).
    pub fn transfers(exe: &Path, servers: [&str; 2], client: u32, keys: u64) -> ClientProcess {
        ClientProcess::start_with(exe, servers, client, keys, &["--transfers", "0"])
    }

    /// A client doing `work` (`txn-client` arguments) over `keys` keys.
    pub fn start_with(
        exe: &Path,
        servers: [&str; 2],
        client: u32,
        keys: u64,
        work: &[&str],
    ) -> ClientProcess {
        let mut child = Command::new(exe)
            .args(["txn-client"])
            .args(servers)
            .args(["--protocol", "ncc"])
            .args([
                "--client",
                &client.to_string(),
                "--seed",
                &client.to_string(),
            ])
            .args(work)
            .args(["--keys", &keys.to_string()])
            .stdout(Stdio::piped())
            .spawn()
            .expect("a client process starts");
        let committed = Arc::new(AtomicU64::new(0));
        let lines = Arc::new(Mutex::new(Vec::new()));
        let stdout = child.stdout.take().expect("piped");
        let (count, all) = (committed.clone(), lines.clone());
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                if let Some(n) = line.strip_prefix("committed ") {
                    count.store(n.parse().unwrap_or(0), Ordering::SeqCst);
                } else if line.starts_with("txn ") {
                    count.fetch_add(1, Ordering::SeqCst);
                }
                all.lock().expect("not poisoned").push(line);
            }
        });
        ClientProcess {
            child,
            committed,
            lines,
            reader: Some(reader),
        }
    }

    /// Every line it printed, once it has exited (killed or done) and its output is read
    /// to the end.
    pub fn finish(mut self) -> Vec<String> {
        self.child.wait().expect("the client process is waited for");
        if let Some(reader) = self.reader.take() {
            reader.join().expect("the reader thread");
        }
        std::mem::take(&mut *self.lines.lock().expect("not poisoned"))
    }

    /// Waits until it has committed `n` in all.
    pub fn wait_for(&self, n: u64, what: &str) {
        wait_until(Duration::from_secs(30), what, || {
            self.committed.load(Ordering::SeqCst) >= n
        });
    }

    pub fn signal(&self, signal: i32) {
        // SAFETY: `kill` only sends a signal; the pid is our own child's, not yet waited
        // for, so it cannot have been reused by another process.
        let rc = unsafe { libc::kill(self.child.id() as i32, signal) };
        assert_eq!(rc, 0, "signal {signal} to the client");
    }
}

impl Drop for ClientProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn wait_until(limit: Duration, what: &str, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < limit, "gave up waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The faults both group tests run on two groups, each once the work counted by `done`
/// has moved on since the last: each group's host killed (SIGKILL) and restarted in turn,
/// then every replica of group `whole` killed at once and restarted. Returns once the
/// work has moved on after the last.
pub fn kill_hosts_then_a_whole_group(
    groups: &mut verso_txn_net::local_groups::LocalGroups,
    done: &AtomicU64,
    whole: usize,
) {
    let progress = |n: u64, what: &str| {
        let target = done.load(Ordering::SeqCst) + n;
        wait_until(Duration::from_secs(60), what, || {
            done.load(Ordering::SeqCst) >= target
        });
    };
    progress(10, "work before the first fault");
    for group in [0usize, 1] {
        let host = groups.host(group, Duration::from_secs(30)).expect("a host");
        groups.kill(group, host).expect("kill the host");
        progress(10, "work after a host was killed");
        groups.restart(group, host).expect("the replica restarts");
        progress(5, "work after the replica came back");
    }
    for r in 0..3 {
        groups.kill(whole, r).expect("kill a replica");
    }
    for r in 0..3 {
        groups.restart(whole, r).expect("the replica restarts");
    }
    progress(10, "work after the whole group came back");
}
