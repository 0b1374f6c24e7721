//! Shards served by replication groups on loopback (`crate::group`): three `verso
//! txn-server --replica R` processes per shard, each with its log in a directory of its
//! own, for the tests. Replicas can be killed (`SIGKILL`: what was not on disk is lost)
//! and restarted on the same address from the same directory.

use std::fs::File;
use std::io::{self, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::frame::{write_frame, Frame};
use crate::group::{GroupDurability, REPLICAS};
use crate::local::{control, listening, process_cpu_seconds, process_rss, wait_or_kill};
use crate::local::{dump_one, Dump, DumpAnswer};
use crate::{Protocol, StoreKind};
use verso_ncc::wire::Encoding;

/// How long [`LocalGroups::dump`] looks for each group's host.
const HOST_TIMEOUT: Duration = Duration::from_secs(30);

/// What [`LocalGroups::start_spec`] starts: `servers` shards, each a group of three
/// `verso txn-server --replica` processes with these settings.
#[derive(Clone, Copy, Debug)]
pub struct GroupsSpec {
    pub servers: u32,
    pub protocol: Protocol,
    pub keep_history: bool,
    /// Where NCC's servers keep their decided versions.
    pub store: StoreKind,
    pub durability: GroupDurability,
    /// `--log-max-bytes` (`None`: the server's default).
    pub log_max_bytes: Option<u64>,
}

/// Replica processes started by [`LocalGroups::start`]; killed when dropped.
pub struct LocalGroups {
    exe: PathBuf,
    dir: PathBuf,
    spec: GroupsSpec,
    /// By shard, then replica; `None` while killed.
    children: Vec<Vec<Option<Child>>>,
    /// Every shard's group of addresses.
    pub groups: Vec<Vec<SocketAddr>>,
}

impl LocalGroups {
    /// Starts `servers` shards of three replicas each, their logs and output under `dir`,
    /// and returns once every shard's group has a host.
    pub fn start(
        exe: &Path,
        servers: u32,
        protocol: Protocol,
        keep_history: bool,
        durability: GroupDurability,
        dir: &Path,
    ) -> io::Result<LocalGroups> {
        let spec = GroupsSpec {
            servers,
            protocol,
            keep_history,
            store: StoreKind::Memory,
            durability,
            log_max_bytes: None,
        };
        LocalGroups::start_spec(exe, spec, dir)
    }

    /// As [`LocalGroups::start`], with every setting of `spec`.
    pub fn start_spec(exe: &Path, spec: GroupsSpec, dir: &Path) -> io::Result<LocalGroups> {
        let mut g = LocalGroups {
            exe: exe.to_path_buf(),
            dir: dir.to_path_buf(),
            spec,
            children: Vec::new(),
            groups: Vec::new(),
        };
        for s in 0..spec.servers as usize {
            let mut children = Vec::new();
            let mut addrs = Vec::new();
            for r in 0..usize::from(REPLICAS) {
                let mut child = g.command(s, r, None)?.spawn()?;
                addrs.push(listening(&mut child, &format!("shard {s} replica {r}"))?);
                children.push(Some(child));
            }
            g.children.push(children);
            g.groups.push(addrs);
        }
        let line = format!("peers {}\n", g.groups_arg());
        for child in g.children.iter_mut().flatten().flatten() {
            let stdin = child.stdin.as_mut().expect("piped");
            stdin.write_all(line.as_bytes())?;
            stdin.flush()?;
        }
        // A group elects its first primary (a view change, after the replicas' timeout)
        // before it hosts: a run should not start with none.
        for s in 0..spec.servers as usize {
            if g.host(s, HOST_TIMEOUT).is_none() {
                return Err(io::Error::other(format!("shard {s} elected no host")));
            }
        }
        Ok(g)
    }

    fn groups_arg(&self) -> String {
        let group = |g: &Vec<SocketAddr>| {
            g.iter()
                .map(SocketAddr::to_string)
                .collect::<Vec<_>>()
                .join(",")
        };
        self.groups.iter().map(group).collect::<Vec<_>>().join(";")
    }

    /// The command for replica `r` of shard `s`; with `listen`, it binds that address and
    /// is given its peers (a restart), else it binds any port and reads them.
    fn command(&self, s: usize, r: usize, listen: Option<SocketAddr>) -> io::Result<Command> {
        let dir = self.dir.join(format!("shard{s}-replica{r}"));
        std::fs::create_dir_all(&dir)?;
        let log = File::options()
            .create(true)
            .append(true)
            .open(dir.join("stderr.log"))?;
        let spec = &self.spec;
        let mut c = Command::new(&self.exe);
        c.args(["txn-server", "--id", &s.to_string()])
            .args(["--servers", &spec.servers.to_string()])
            .args(["--protocol", spec.protocol.name()])
            .args(["--replica", &r.to_string()])
            .arg("--dir")
            .arg(&dir)
            .args(["--durability", spec.durability.name()])
            .args(spec.keep_history.then_some("--keep-history"))
            .args(["--store", spec.store.name()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log));
        if let Some(max) = spec.log_max_bytes {
            c.args(["--log-max-bytes", &max.to_string()]);
        }
        if let Some(addr) = listen {
            c.args(["--listen", &addr.to_string()])
                .args(["--peers", &self.groups_arg()]);
        }
        Ok(c)
    }

    /// Kills replica `r` of shard `s` with `SIGKILL` (a crash: what it had not synced is
    /// lost) and waits for it to be gone.
    pub fn kill(&mut self, s: usize, r: usize) -> io::Result<()> {
        if let Some(mut child) = self.children[s][r].take() {
            child.kill()?;
            child.wait()?;
        }
        Ok(())
    }

    /// The process id of replica `r` of shard `s`, unless it was killed.
    pub fn pid(&self, s: usize, r: usize) -> Option<u32> {
        self.children[s][r].as_ref().map(Child::id)
    }

    /// Starts a killed replica again, on its address and from its directory.
    pub fn restart(&mut self, s: usize, r: usize) -> io::Result<()> {
        if self.children[s][r].is_some() {
            return Ok(());
        }
        let mut child = self.command(s, r, Some(self.groups[s][r]))?.spawn()?;
        let addr = listening(&mut child, &format!("shard {s} replica {r}"))?;
        self.children[s][r] = Some(child);
        if addr != self.groups[s][r] {
            return Err(io::Error::other(format!(
                "shard {s} replica {r} came back on {addr}, not {}",
                self.groups[s][r]
            )));
        }
        Ok(())
    }

    /// The replica of shard `s` that hosts now, if one answers as host within `timeout`.
    pub fn host(&self, s: usize, timeout: Duration) -> Option<usize> {
        let deadline = Instant::now() + timeout;
        loop {
            for (r, &addr) in self.groups[s].iter().enumerate() {
                if self.children[s][r].is_none() {
                    continue;
                }
                let answer = dump_one(addr, s, &mut Dump::default());
                if matches!(answer, Ok(DumpAnswer::Dumped | DumpAnswer::Unsettled)) {
                    return Some(r);
                }
            }
            if Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The longest log file among shard `s`'s replicas, in bytes: the group's progress,
    /// for a test that waits for inputs to have been logged.
    pub fn log_bytes(&self, s: usize) -> u64 {
        (0..usize::from(REPLICAS))
            .map(|r| self.replica_log_bytes(s, r))
            .max()
            .unwrap_or(0)
    }

    /// The size of replica `r` of shard `s`'s log file, in bytes (0 if it has none yet).
    pub fn replica_log_bytes(&self, s: usize, r: usize) -> u64 {
        let path = self
            .dir
            .join(format!("shard{s}-replica{r}"))
            .join("group.log");
        std::fs::metadata(path).map_or(0, |m| m.len())
    }

    /// Every shard's committed versions and state, from each group's host once none of
    /// its inputs waits to commit (call it once the load has stopped).
    pub fn dump(&self) -> io::Result<Dump> {
        let mut dump = Dump::default();
        for s in 0..self.groups.len() {
            self.dump_into(s, &mut dump)?;
        }
        Ok(dump)
    }

    /// What shard `s`'s host holds alone (which keys live there, for a placement check).
    pub fn dump_group(&self, s: usize) -> io::Result<Dump> {
        let mut dump = Dump::default();
        self.dump_into(s, &mut dump)?;
        Ok(dump)
    }

    fn dump_into(&self, s: usize, dump: &mut Dump) -> io::Result<()> {
        let deadline = Instant::now() + HOST_TIMEOUT;
        loop {
            let r = self
                .host(s, HOST_TIMEOUT)
                .ok_or_else(|| io::Error::other(format!("shard {s} has no host")))?;
            if dump_one(self.groups[s][r], s, dump)? == DumpAnswer::Dumped {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(io::Error::other(format!("shard {s}'s host never settled")));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl LocalGroups {
    fn pids(&self) -> impl Iterator<Item = u32> + '_ {
        self.children.iter().flatten().flatten().map(Child::id)
    }

    /// Every live replica's CPU time so far (user and system), in seconds.
    pub fn cpu_seconds(&self) -> Vec<Option<f64>> {
        self.pids().map(process_cpu_seconds).collect()
    }

    /// Every live replica's resident memory now, in bytes.
    pub fn rss_bytes(&self) -> Vec<Option<u64>> {
        self.pids().map(process_rss).collect()
    }

    /// Asks every replica to exit and waits (bounded) for it; kills what does not.
    pub fn shutdown(mut self) -> io::Result<()> {
        for (s, group) in self.groups.iter().enumerate() {
            for (r, &addr) in group.iter().enumerate() {
                if self.children[s][r].is_none() {
                    continue;
                }
                if let Ok(stream) = control(addr) {
                    let mut w = io::BufWriter::new(stream);
                    let _ =
                        write_frame(&mut w, Encoding::Binary, &Frame::Shutdown, &mut Vec::new());
                    let _ = w.flush();
                }
            }
        }
        wait_or_kill(self.children.iter_mut().flatten().flatten())
    }
}

impl Drop for LocalGroups {
    fn drop(&mut self) {
        for child in self.children.iter_mut().flatten().flatten() {
            if matches!(child.try_wait(), Ok(None)) {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
}
