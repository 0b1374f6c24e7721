//! `verso txn-server` (one shard server of NCC or a baseline, issue 19) and `verso bench
//! txn` (a loopback cluster of them under an open-loop load, protocols side by side).

use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use verso_ncc::sim::SimOptions;
use verso_ncc::wire::Encoding;
use verso_ncc::workload::Workload;
use verso_txn_net::group::{GroupConfig, GroupDurability};
use verso_txn_net::load::{self, LoadConfig, LoadReport};
use verso_txn_net::local::{self, LocalCluster};
use verso_txn_net::local_groups::{GroupsSpec, LocalGroups};
use verso_txn_net::server::ServerConfig;
use verso_txn_net::{Protocol, StoreKind};

#[derive(Args, Debug)]
pub struct TxnServerArgs {
    /// This server's id, 0..SERVERS: it holds the keys k with k % SERVERS == id.
    #[arg(long)]
    id: u32,
    /// How many servers the cluster has.
    #[arg(long)]
    servers: u32,
    /// ncc, ncc-rw, docc, d2pl-no-wait, d2pl-wound-wait or tapir-cc (every server and
    /// client of a cluster must agree).
    #[arg(long, value_parser = parse_protocol)]
    protocol: Protocol,
    /// Where to listen (port 0: any free port; the address is printed as `listening ADDR`).
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: SocketAddr,
    /// Every server's address by id, comma-separated; without it, a `peers A,B,...` line
    /// is read from standard input after the address is printed.
    #[arg(long)]
    peers: Option<String>,
    /// NCC's recovery timer (App. D), milliseconds: how long a transaction may stay
    /// undecided before its cohorts ask its backup coordinator.
    #[arg(long, default_value_t = 1_000)]
    recovery_after_ms: u64,
    /// Keep every committed value so that a history check can read the whole version order
    /// (`verso bench txn --check` sets it). Without it NCC keeps only the versions still in
    /// use, and memory stays bounded however long the server runs.
    #[arg(long)]
    keep_history: bool,
    /// Where NCC keeps its decided versions: memory, or engine (Verso's engine: each
    /// committed version an engine version at its `t_w`; client ids below 65,536).
    #[arg(long, default_value = "memory", value_parser = parse_store)]
    store: StoreKind,
    /// Serve as this replica (0, 1 or 2) of shard ID's replication group of three Lazy VSR
    /// replicas, whose log holds the server's inputs. The peers are then every shard's
    /// group, `A,B,C;D,E,F;...` (shard by shard, replica by replica); clients send to
    /// every replica of a group and its host answers.
    #[arg(long)]
    replica: Option<u8>,
    /// With --replica: where this replica keeps its log (created if absent; a restarted
    /// replica recovers from it).
    #[arg(long)]
    dir: Option<std::path::PathBuf>,
    /// With --replica: when answers leave. answers-on-disk (each input's answers once it
    /// is on a majority's disks: nothing answered is lost even if the whole group
    /// crashes), sync (VSR-Sync), or lazy (plain Lazy VSR: a crash of the whole group may
    /// lose answered inputs).
    #[arg(long, default_value = "answers-on-disk", value_parser = parse_durability)]
    durability: GroupDurability,
    /// With --replica: the most input bytes the group's log takes. The log is not
    /// compacted yet, and every replica holds all of it in memory and on disk: at the
    /// limit the group refuses new transactions (said once on standard error) instead of
    /// running out of memory. The default, 512 MiB, lasts about two minutes at this
    /// machine's peak F1 load (about 4 MB a second per replica).
    #[arg(long, default_value_t = verso_txn_net::group::LOG_MAX_BYTES)]
    log_max_bytes: u64,
}

pub fn parse_durability(s: &str) -> Result<GroupDurability, String> {
    GroupDurability::parse(s)
        .ok_or_else(|| format!("unknown durability {s:?}; answers-on-disk, sync or lazy"))
}

fn parse_store(s: &str) -> Result<StoreKind, String> {
    StoreKind::parse(s).ok_or_else(|| format!("unknown store {s:?}; memory or engine"))
}

pub fn run_server(args: &TxnServerArgs) -> ExitCode {
    if let Some(replica) = args.replica {
        return run_group_replica(args, replica);
    }
    let peers = match args.peers.as_deref().map(local::parse_peers).transpose() {
        Ok(p) => p,
        Err(e) => {
            eprintln!("error: --peers: {e}");
            return ExitCode::from(2);
        }
    };
    let cfg = server_config(args);
    match local::server_process(args.listen, args.servers, peers, cfg) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: txn-server {}: {e}", args.id);
            ExitCode::FAILURE
        }
    }
}

/// The shard server's settings from the command line (its peers are learned later).
fn server_config(args: &TxnServerArgs) -> ServerConfig {
    ServerConfig {
        id: args.id,
        protocol: args.protocol,
        peers: Vec::new(),
        recovery_after_us: args.recovery_after_ms * 1_000,
        keep_history: args.keep_history,
        store: args.store,
    }
}

fn run_group_replica(args: &TxnServerArgs, replica: u8) -> ExitCode {
    let groups = match args.peers.as_deref().map(local::parse_groups).transpose() {
        Ok(p) => p,
        Err(e) => {
            eprintln!("error: --peers: {e}");
            return ExitCode::from(2);
        }
    };
    let Some(dir) = args.dir.clone() else {
        eprintln!("error: --replica needs --dir (where the replica keeps its log)");
        return ExitCode::from(2);
    };
    let cfg = GroupConfig {
        server: server_config(args),
        replica,
        groups: Vec::new(),
        dir,
        durability: args.durability,
        log_max_bytes: args.log_max_bytes,
    };
    match local::group_process(args.listen, args.servers, groups, cfg) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: txn-server {} replica {replica}: {e}", args.id);
            ExitCode::FAILURE
        }
    }
}

#[derive(Args, Debug)]
pub struct BenchTxnArgs {
    /// Protocols to compare, comma-separated, run interleaved (A, B, A, B, ...).
    #[arg(long, default_value = "ncc,docc,d2pl-wound-wait")]
    protocols: String,
    /// Server processes (one shard each).
    #[arg(long, default_value_t = 2)]
    servers: u32,
    /// mixed (every shape over --keys keys), f1 (the paper's Google-F1: 1-10 keys of 1 M,
    /// Zipf 0.8) or tpcc (one warehouse per server, Payment and Order-Status in two shots).
    #[arg(long, default_value = "f1", value_parser = parse_workload)]
    workload: Workload,
    /// TPC-C's warehouses per server (the paper runs 8; at most 256 in all).
    #[arg(long, default_value_t = 1)]
    warehouses_per_server: u32,
    /// Keys of the mixed workload.
    #[arg(long, default_value_t = 1_000)]
    keys: u64,
    /// F1's read-write transactions per 100,000 (300 as the paper; Google-WF sweeps it).
    #[arg(long, default_value_t = 300)]
    writes_per_100k: u64,
    /// Offered load in transactions per second, comma-separated for a curve; 0: closed
    /// loop (the peak).
    #[arg(long, default_value = "0")]
    rates: String,
    /// Client threads, each with --clients protocol clients.
    #[arg(long, default_value_t = 1)]
    threads: u32,
    #[arg(long, default_value_t = 32)]
    clients: u32,
    /// The clients' message encodings, comma-separated, each run beside the others:
    /// binary (Verso's own) or resp (the same fields as Redis-protocol arrays of decimal
    /// strings). Servers answer each connection in its own encoding.
    #[arg(long, default_value = "binary")]
    wire: String,
    /// Seconds per run (fractions allowed).
    #[arg(long, default_value_t = 5.0)]
    seconds: f64,
    /// Repetitions of the whole set (medians are printed at the end).
    #[arg(long, default_value_t = 1)]
    runs: u32,
    /// Record every committed transaction and check the history (strict serializability;
    /// TAPIR-CC: serializability) against the servers' committed versions.
    #[arg(long)]
    check: bool,
    /// Where NCC's servers keep their decided versions: memory or engine (the baselines
    /// keep theirs in memory).
    #[arg(long, default_value = "memory", value_parser = parse_store)]
    store: StoreKind,
    /// The baselines' first back-off after an abort, µs, doubled per attempt up to 64
    /// times (default 100). NCC never backs off.
    #[arg(long, value_name = "US")]
    baseline_backoff_us: Option<u64>,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Write each run's report as JSON to DIR/txn-PROTOCOL-RATE-RUN.json, for `verso bench
    /// plot --x txn_per_sec --y p50_us DIR/*.json` (latency against throughput, one line
    /// per protocol: the paper's Figure 7).
    #[arg(long, value_name = "DIR")]
    json_dir: Option<std::path::PathBuf>,
    /// Serve each shard by a replication group of three `txn-server --replica`
    /// processes (their logs in a temporary directory, removed after the run) with this
    /// durability: answers-on-disk, sync or lazy. Clients send to the replica that last
    /// answered, else to every replica. The replicas keep the default --log-max-bytes, so
    /// a run longer than about two minutes at the peak stalls once the logs are full.
    #[arg(long, value_name = "DURABILITY", value_parser = parse_durability)]
    replicated: Option<GroupDurability>,
}

pub fn parse_protocol(s: &str) -> Result<Protocol, String> {
    Protocol::parse(s).ok_or_else(|| {
        format!(
            "unknown protocol {s:?}; one of {}",
            Protocol::NAMES.join(", ")
        )
    })
}

fn parse_workload(s: &str) -> Result<Workload, String> {
    Workload::parse(s).ok_or_else(|| format!("unknown workload {s:?}; one of mixed, f1, tao, tpcc"))
}

/// One run's row.
struct Row {
    /// The protocol's name, with the encoding when several are compared.
    label: String,
    rate: u64,
    throughput: f64,
    p50_us: u64,
    p99_us: u64,
}

pub fn run_bench(args: &BenchTxnArgs) -> ExitCode {
    let protocols: Result<Vec<Protocol>, String> = args
        .protocols
        .split(',')
        .map(|p| parse_protocol(p.trim()))
        .collect();
    let rates: Result<Vec<u64>, _> = args.rates.split(',').map(|r| r.trim().parse()).collect();
    let wires: Result<Vec<Encoding>, String> =
        args.wire.split(',').map(|w| w.trim().parse()).collect();
    let wires = match wires {
        Ok(w) => w,
        Err(e) => {
            eprintln!("error: --wire: {e}");
            return ExitCode::from(2);
        }
    };
    let label = |protocol: Protocol, wire: Encoding| match (wires.len(), wire) {
        (1, _) => protocol.name().to_string(),
        (_, Encoding::Binary) => format!("{}/binary", protocol.name()),
        (_, Encoding::Resp) => format!("{}/resp", protocol.name()),
    };
    let (protocols, rates) = match (protocols, rates) {
        (Ok(p), Ok(r)) if !p.is_empty() && !r.is_empty() => (p, r),
        (Err(e), _) => {
            eprintln!("error: --protocols: {e}");
            return ExitCode::from(2);
        }
        _ => {
            eprintln!("error: --rates: comma-separated transactions per second");
            return ExitCode::from(2);
        }
    };
    if args.servers == 0 || args.threads == 0 || args.clients == 0 || args.seconds <= 0.0 {
        eprintln!("error: --servers, --threads, --clients and --seconds must be positive");
        return ExitCode::from(2);
    }
    let exe = match std::env::current_exe() {
        Ok(e) => e,
        Err(e) => {
            eprintln!("error: cannot find the verso binary to start servers: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut mix = SimOptions::new(args.seed);
    mix.workload = args.workload;
    mix.keys = args.keys;
    mix.f1_writes_per_100k = args.writes_per_100k;
    mix.tpcc_warehouses_per_server = args.warehouses_per_server;
    if u64::from(args.servers) * u64::from(args.warehouses_per_server) > 256 {
        eprintln!("error: at most 256 TPC-C warehouses in all");
        return ExitCode::from(2);
    }
    println!(
        "verso bench txn: {:?} on {} servers, {} thread(s) x {} clients, {} s per run, {} run(s)",
        args.workload, args.servers, args.threads, args.clients, args.seconds, args.runs
    );
    println!(
        "{:<16} {:>8} {:>4} {:>10} {:>8} {:>8} {:>7} {:>8} {:>8} {:>7} {:>8} {:>8} {:>8} {:>6} check",
        "protocol",
        "rate",
        "run",
        "commit/s",
        "p50 µs",
        "p99 µs",
        "1st %",
        "retries",
        "msg/txn",
        "B/txn",
        "cpu µs",
        "cli µs",
        "rss MiB",
        "shed"
    );
    let mut rows = Vec::new();
    let mut failed = false;
    for run in 1..=args.runs {
        for &rate in &rates {
            for (&protocol, &wire) in protocols
                .iter()
                .flat_map(|p| wires.iter().map(move |w| (p, w)))
            {
                match one_run(&exe, args, &mix, protocol, wire, rate) {
                    Ok((report, verdict)) => {
                        let s = &report.stats;
                        let first =
                            100.0 * s.committed_first_try as f64 / s.committed.max(1) as f64;
                        let retries = s.committed.saturating_sub(s.committed_first_try);
                        let row = Row {
                            label: label(protocol, wire),
                            rate,
                            throughput: report.throughput(),
                            p50_us: report.latency.value_at_quantile(0.5),
                            p99_us: report.latency.value_at_quantile(0.99),
                        };
                        println!(
                            "{:<16} {:>8} {:>4} {:>10.0} {:>8} {:>8} {:>7.2} {:>8} {:>8.2} {:>7.0} {:>8} {:>8} {:>8} {:>6} {}",
                            row.label,
                            rate,
                            run,
                            row.throughput,
                            row.p50_us,
                            row.p99_us,
                            first,
                            retries,
                            report.messages_per_txn(),
                            report.bytes_per_txn(),
                            report
                                .server_cpu_us_per_txn()
                                .map_or("-".into(), |c| format!("{c:.1}")),
                            report
                                .client_cpu_us_per_txn()
                                .map_or("-".into(), |c| format!("{c:.1}")),
                            report
                                .server_rss_bytes
                                .map_or("-".into(), |b| format!("{:.1}", b as f64 / 1048576.0)),
                            report.shed,
                            verdict.as_deref().unwrap_or("-"),
                        );
                        if args.workload == Workload::Tpcc {
                            println!(
                                "{:<16} new-order/s {:.0}",
                                "",
                                report.throughput_of("new-order")
                            );
                        }
                        if let Some(dir) = &args.json_dir {
                            let json =
                                report_json(args, protocol, wire, rate, run, &report, &verdict);
                            let name = label(protocol, wire).replace('/', "-");
                            let path = dir.join(format!("txn-{name}-{rate}-{run}.json"));
                            if let Err(e) = std::fs::create_dir_all(dir)
                                .and_then(|()| std::fs::write(&path, format!("{json}\n")))
                            {
                                eprintln!("error: cannot write {}: {e}", path.display());
                                failed = true;
                            }
                        }
                        if verdict.as_deref().is_some_and(|v| !v.starts_with("ok")) {
                            failed = true;
                        }
                        rows.push(row);
                    }
                    Err(e) => {
                        eprintln!("error: {} at rate {rate}: {e}", label(protocol, wire));
                        failed = true;
                    }
                }
            }
        }
    }
    if args.runs > 1 {
        println!("medians over {} runs:", args.runs);
        for &rate in &rates {
            for (&protocol, &wire) in protocols
                .iter()
                .flat_map(|p| wires.iter().map(move |w| (p, w)))
            {
                let name = label(protocol, wire);
                let mut of: Vec<&Row> = rows
                    .iter()
                    .filter(|r| r.label == name && r.rate == rate)
                    .collect();
                if of.is_empty() {
                    continue;
                }
                of.sort_by(|a, b| a.throughput.total_cmp(&b.throughput));
                let mid = of[of.len() / 2];
                println!(
                    "{:<16} {:>8} {:>10.0} commit/s  p50 {} µs  p99 {} µs",
                    mid.label, rate, mid.throughput, mid.p50_us, mid.p99_us
                );
            }
        }
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// Starts the servers, runs the load, checks the history if asked, stops the servers.
fn one_run(
    exe: &std::path::Path,
    args: &BenchTxnArgs,
    mix: &SimOptions,
    protocol: Protocol,
    wire: Encoding,
    rate: u64,
) -> std::io::Result<(LoadReport, Option<String>)> {
    let store = match protocol {
        Protocol::Ncc { .. } => args.store,
        Protocol::Baseline(_) => StoreKind::Memory,
    };
    let cluster = Servers::start(exe, args, protocol, store)?;
    let cfg = LoadConfig {
        servers: cluster.addrs(),
        protocol,
        mix: mix.clone(),
        threads: args.threads,
        clients_per_thread: args.clients,
        rate,
        duration: Duration::from_secs_f64(args.seconds),
        record_history: args.check,
        resend_after_us: 200_000,
        drain_timeout: Duration::from_secs(30),
        first_client: 0,
        baseline_backoff_us: args.baseline_backoff_us,
        encoding: wire,
    };
    let cpu_before = cluster.cpu_seconds();
    let client_before = local::process_cpu_seconds(std::process::id());
    let mut report = load::run(&cfg)?;
    let cpu_after = cluster.cpu_seconds();
    let client_after = local::process_cpu_seconds(std::process::id());
    report.client_cpu_seconds = client_after.zip(client_before).map(|(a, b)| a - b);
    report.server_cpu_seconds = cpu_before
        .iter()
        .zip(&cpu_after)
        .map(|(b, a)| Some(a.as_ref()? - b.as_ref()?))
        .sum::<Option<f64>>();
    report.server_rss_bytes = cluster.rss_bytes().into_iter().flatten().max();
    let verdict = if args.check {
        let dump = cluster.dump()?;
        Some(match load::check(protocol, &report, &dump) {
            Ok(ok) => format!("ok: {ok}"),
            Err(e) => e,
        })
    } else {
        None
    };
    cluster.shutdown()?;
    Ok((report, verdict))
}

/// A run's servers: plain ones, or replication groups.
enum Servers {
    Plain(LocalCluster),
    Groups(LocalGroups, std::path::PathBuf),
}

impl Servers {
    fn start(
        exe: &std::path::Path,
        args: &BenchTxnArgs,
        protocol: Protocol,
        store: StoreKind,
    ) -> std::io::Result<Servers> {
        let Some(durability) = args.replicated else {
            let c = LocalCluster::start_with(exe, args.servers, protocol, args.check, store)?;
            return Ok(Servers::Plain(c));
        };
        // One directory per run of this process.
        static RUNS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let run = RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir =
            std::env::temp_dir().join(format!("verso-bench-txn-{}-{run}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let spec = GroupsSpec {
            servers: args.servers,
            protocol,
            keep_history: args.check,
            store,
            durability,
            log_max_bytes: None,
        };
        let g = LocalGroups::start_spec(exe, spec, &dir);
        match g {
            Ok(g) => Ok(Servers::Groups(g, dir)),
            Err(e) => {
                let _ = std::fs::remove_dir_all(&dir);
                Err(e)
            }
        }
    }

    fn addrs(&self) -> Vec<Vec<SocketAddr>> {
        match self {
            Servers::Plain(c) => c.addrs.iter().map(|&a| vec![a]).collect(),
            Servers::Groups(g, _) => g.groups.clone(),
        }
    }

    fn cpu_seconds(&self) -> Vec<Option<f64>> {
        match self {
            Servers::Plain(c) => c.cpu_seconds(),
            Servers::Groups(g, _) => g.cpu_seconds(),
        }
    }

    fn rss_bytes(&self) -> Vec<Option<u64>> {
        match self {
            Servers::Plain(c) => c.rss_bytes(),
            Servers::Groups(g, _) => g.rss_bytes(),
        }
    }

    fn dump(&self) -> std::io::Result<local::Dump> {
        match self {
            Servers::Plain(c) => c.dump(),
            Servers::Groups(g, _) => g.dump(),
        }
    }

    fn shutdown(self) -> std::io::Result<()> {
        match self {
            Servers::Plain(c) => c.shutdown(),
            Servers::Groups(g, dir) => {
                let stopped = g.shutdown();
                let _ = std::fs::remove_dir_all(&dir);
                stopped
            }
        }
    }
}

/// One run as the results tools read it (`verso bench plot`, `verso bench compare`):
/// strings are configuration, numbers measurements unless listed as configuration.
fn report_json(
    args: &BenchTxnArgs,
    protocol: Protocol,
    wire: Encoding,
    rate: u64,
    run: u32,
    report: &LoadReport,
    verdict: &Option<String>,
) -> serde_json::Value {
    let s = &report.stats;
    let q = |x: f64| report.latency.value_at_quantile(x);
    serde_json::json!({
        "benchmark": "txn",
        "protocol": protocol.name(),
        "wire": format!("{wire:?}").to_lowercase(),
        "workload": format!("{:?}", args.workload).to_lowercase(),
        "servers": args.servers,
        "replicated": args.replicated.map_or("no", GroupDurability::name),
        "threads": args.threads,
        "clients_per_thread": args.clients,
        "writes_per_100k": args.writes_per_100k,
        "warehouses_per_server": args.warehouses_per_server,
        "new_order_per_sec": report.throughput_of("new-order"),
        "offered_per_sec": rate,
        "run": run,
        "seconds": args.seconds,
        "txn_per_sec": report.throughput(),
        "committed": report.committed,
        "committed_first_try": s.committed_first_try,
        "smart_retries": s.smart_retries,
        "smart_retries_ok": s.smart_retries_ok,
        "aborts": s.aborts + s.early_aborts + s.ro_aborts + s.safeguard_aborts,
        "messages_per_txn": report.messages_per_txn(),
        "bytes_per_txn": report.bytes_per_txn(),
        "server_cpu_us_per_txn": report.server_cpu_us_per_txn(),
        "server_cpu_us_per_message": report.server_cpu_us_per_message(),
        "client_cpu_us_per_txn": report.client_cpu_us_per_txn(),
        "server_rss_bytes": report.server_rss_bytes,
        "shed": report.shed,
        "p50_us": q(0.5),
        "p99_us": q(0.99),
        "p999_us": q(0.999),
        "consistency": verdict.clone().unwrap_or_else(|| "not checked".into()),
    })
}
