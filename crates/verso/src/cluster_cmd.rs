//! `verso cluster local`: a sharded cluster on loopback, for trying it and for tests:
//! `--groups` replica groups of `--replicas` `verso serve` processes each, the slots split
//! evenly between the groups. Writes the cluster files and the shards file into `--dir`,
//! starts every process as a child, prints where clients connect, and stops them all on
//! Ctrl-C (or, by default, when one exits on its own: `--on-exit` restarts it or keeps going).

use std::fmt::Write as _;
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::{Args, Subcommand};
use verso_cluster::SLOTS;

#[derive(Subcommand, Debug)]
pub enum Cluster {
    /// Start a sharded cluster on 127.0.0.1: group g's replica r takes clients on
    /// base-port + 10g + r (peers on base-port + 1000 + 10g + r); slots are split evenly.
    /// `redis-cli -c -p BASE-PORT` then follows MOVED between groups.
    #[command(verbatim_doc_comment)]
    Local(LocalArgs),
    /// Move slots to another group online (Lazen): the source keeps serving while it
    /// streams a snapshot, then stops them for the writes since; follows the move to its
    /// end with a progress line.
    Move(crate::cluster_move::MoveArgs),
    /// Spread the slots evenly over the groups, one `move` at a time (each with its
    /// progress line).
    Rebalance(crate::cluster_move::RebalanceArgs),
}

#[derive(Args, Debug)]
pub struct LocalArgs {
    /// Replica groups (1-16).
    #[arg(long, default_value_t = 2)]
    groups: u16,
    /// Replicas per group (odd, 1-9; 1: a single server per group, no replication).
    #[arg(long, default_value_t = 3)]
    replicas: u16,
    /// The first client port.
    #[arg(long, default_value_t = 7000)]
    base_port: u16,
    /// Where the files, logs and data of every process go.
    #[arg(long, default_value = "verso-cluster-local")]
    dir: PathBuf,
    /// Seconds to wait for every process to listen.
    #[arg(long, default_value_t = 30)]
    start_timeout: u64,
    /// Each server's --durability (none, lazy or sync; a replicated group needs lazy or
    /// sync).
    #[arg(long, default_value = "lazy", value_parser = ["none", "lazy", "sync"])]
    durability: String,
    /// What happens when a node exits on its own (a crash, or kill -9 in a test): stop the
    /// whole cluster, restart that node (as a process supervisor would; it recovers from
    /// its data directory), or keep the others running without it.
    #[arg(long, default_value = "stop", value_parser = ["stop", "restart", "keep"])]
    on_exit: String,
}

/// One `verso serve` child and how to start it again.
struct Node {
    name: String,
    group: u16,
    replica: u16,
    cluster_file: Option<PathBuf>,
    /// `None` once it exited and is not restarted (`--on-exit keep`).
    child: Option<Child>,
}

pub fn run(cmd: &Cluster) -> ExitCode {
    let done = match cmd {
        Cluster::Local(args) => local(args),
        Cluster::Move(args) => crate::cluster_move::run(args),
        Cluster::Rebalance(args) => crate::cluster_move::rebalance(args),
    };
    match done {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn client_addr(base: u16, g: u16, r: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], base + 10 * g + r))
}

/// The slots of group `g` of `groups`: an even split, as `first-last`.
fn slot_range(g: u16, groups: u16) -> String {
    let per = SLOTS / usize::from(groups);
    let first = usize::from(g) * per;
    let last = if g + 1 == groups {
        SLOTS - 1
    } else {
        first + per - 1
    };
    format!("{first}-{last}")
}

fn local(args: &LocalArgs) -> Result<(), String> {
    let (groups, replicas) = (args.groups, args.replicas);
    if !(1..=16).contains(&groups) {
        return Err("--groups must be 1 to 16".into());
    }
    if replicas == 0 || replicas % 2 == 0 || replicas > 9 {
        return Err("--replicas must be odd, 1 to 9".into());
    }
    if replicas > 1 && args.durability == "none" {
        return Err("a replicated group keeps its log: --durability must be lazy or sync".into());
    }
    if u32::from(args.base_port) + 1000 + 10 * u32::from(groups) > 65_535 {
        return Err("--base-port is too high for that many groups".into());
    }
    let dir = &args.dir;
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let write = |name: &str, text: &str| {
        let path = dir.join(name);
        std::fs::write(&path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        Ok::<PathBuf, String>(path)
    };
    let mut shards =
        String::from("# Made by `verso cluster local`; see shards.toml.example for the format.\n");
    for g in 0..groups {
        let nodes: Vec<String> = (0..replicas)
            .map(|r| format!("\"{}\"", client_addr(args.base_port, g, r)))
            .collect();
        let _ = write!(
            shards,
            "\n[[group]]\nid = {g}\nslots = \"{}\"\nnodes = [{}]\n",
            slot_range(g, groups),
            nodes.join(", ")
        );
    }
    let shards_path = write("shards.toml", &shards)?;
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this program: {e}"))?;
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone())
            .map_err(|e| format!("cannot handle signal {sig}: {e}"))?;
    }
    let mut nodes: Vec<Node> = Vec::new();
    let started = (|| {
        for g in 0..groups {
            let cluster_file = if replicas > 1 {
                Some(write(&format!("group{g}.toml"), &cluster_file(args, g))?)
            } else {
                None
            };
            for r in 0..replicas {
                let name = format!("group {g} replica {r}");
                let child = spawn(&exe, dir, &shards_path, cluster_file.as_deref(), args, g, r)
                    .map_err(|e| format!("cannot start {name}: {e}"))?;
                nodes.push(Node {
                    name,
                    group: g,
                    replica: r,
                    cluster_file: cluster_file.clone(),
                    child: Some(child),
                });
            }
        }
        wait_listening(args, &stop)
    })();
    if let Err(e) = started {
        stop_all(&mut nodes);
        return Err(e);
    }
    println!(
        "verso cluster local: {groups} groups x {replicas} replicas, files and logs in {}",
        dir.display()
    );
    for g in 0..groups {
        let nodes: Vec<String> = (0..replicas)
            .map(|r| client_addr(args.base_port, g, r).to_string())
            .collect();
        println!(
            "  group {g}: slots {}, nodes {}",
            slot_range(g, groups),
            nodes.join(" ")
        );
    }
    println!(
        "clients: redis-cli -c -p {} (cluster clients start from any node). Ctrl-C stops.",
        args.base_port
    );
    let mut exited = None;
    while !stop.load(Ordering::Relaxed) && exited.is_none() {
        std::thread::sleep(Duration::from_millis(100));
        for node in &mut nodes {
            let Some(c) = &mut node.child else { continue };
            let Ok(Some(status)) = c.try_wait() else {
                continue;
            };
            match args.on_exit.as_str() {
                "restart" => {
                    eprintln!(
                        "verso cluster local: {} exited ({status}); restarting it",
                        node.name
                    );
                    let again = spawn(
                        &exe,
                        dir,
                        &shards_path,
                        node.cluster_file.as_deref(),
                        args,
                        node.group,
                        node.replica,
                    );
                    match again {
                        Ok(child) => node.child = Some(child),
                        Err(e) => {
                            node.child = None;
                            exited = Some(format!("{} could not be restarted: {e}", node.name));
                        }
                    }
                }
                "keep" => {
                    eprintln!(
                        "verso cluster local: {} exited ({status}); the others keep running",
                        node.name
                    );
                    node.child = None;
                }
                _ => exited = Some(format!("{} exited ({status})", node.name)),
            }
        }
    }
    stop_all(&mut nodes);
    match exited {
        Some(why) => Err(format!(
            "{why}; stopped the others (logs in {})",
            dir.display()
        )),
        None => Ok(()),
    }
}

/// Group `g`'s Lazy VSR cluster file.
fn cluster_file(args: &LocalArgs, g: u16) -> String {
    // Peers authenticate with this secret; a local cluster only needs it unguessable
    // enough that two local clusters never pair up.
    let seed = (u128::from(std::process::id()) * 0x9e37_79b9_7f4a_7c15) ^ now_nanos();
    let mut text = format!(
        "# Made by `verso cluster local`; see cluster.toml.example.\nsecret = \"verso-local-{seed:032x}\"\nmode = \"lazy\"\n"
    );
    for r in 0..args.replicas {
        let _ = write!(
            text,
            "\n[[replica]]\nid = {r}\nclient = \"{}\"\npeer = \"127.0.0.1:{}\"\n",
            client_addr(args.base_port, g, r),
            args.base_port + 1000 + 10 * g + r
        );
    }
    text
}

fn now_nanos() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}

fn spawn(
    exe: &Path,
    dir: &Path,
    shards: &Path,
    cluster: Option<&Path>,
    args: &LocalArgs,
    g: u16,
    r: u16,
) -> std::io::Result<Child> {
    // Appended to: a restarted node's log follows its earlier life's.
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join(format!("g{g}r{r}.log")))?;
    let mut cmd = Command::new(exe);
    cmd.arg("serve")
        .arg("--data-dir")
        .arg(dir.join(format!("g{g}r{r}")))
        .arg("--shards")
        .arg(shards)
        .arg("--group")
        .arg(g.to_string())
        .arg("--durability")
        .arg(&args.durability);
    match cluster {
        Some(file) => {
            cmd.arg("--cluster")
                .arg(file)
                .arg("--replica")
                .arg(r.to_string());
        }
        None => {
            cmd.arg("--port")
                .arg(client_addr(args.base_port, g, r).port().to_string());
        }
    }
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
}

/// Waits until every node accepts connections (bounded by --start-timeout).
fn wait_listening(args: &LocalArgs, stop: &AtomicBool) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(args.start_timeout);
    for g in 0..args.groups {
        for r in 0..args.replicas {
            let addr = client_addr(args.base_port, g, r);
            while TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err() {
                if Instant::now() > deadline || stop.load(Ordering::Relaxed) {
                    return Err(format!(
                        "{addr} (group {g} replica {r}) did not start listening; see {}",
                        args.dir.join(format!("g{g}r{r}.log")).display()
                    ));
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
    Ok(())
}

fn stop_all(nodes: &mut [Node]) {
    for c in nodes.iter_mut().filter_map(|n| n.child.as_mut()) {
        // SIGTERM first: each server stops cleanly (and flushes its log).
        // SAFETY: `kill` with a child's pid and SIGTERM has no memory effects.
        unsafe {
            libc::kill(c.id() as i32, libc::SIGTERM);
        }
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    for c in nodes.iter_mut().filter_map(|n| n.child.as_mut()) {
        while matches!(c.try_wait(), Ok(None)) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = c.kill();
        let _ = c.wait();
    }
}
