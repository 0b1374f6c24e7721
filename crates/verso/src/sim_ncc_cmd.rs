//! `verso sim ncc`: NCC's simulator (`verso_ncc::sim`) over many seeds, on every core, with
//! a progress line.

use std::process::ExitCode;
use std::time::Instant;

use clap::Args;
use verso_ncc::replicated::{Durability, ReplicationModel};
use verso_ncc::sim::{run, SimOptions, SimStats};
use verso_ncc::workload::Workload;
use verso_ncc::{Mistakes, ProtocolKind};

#[derive(Args, Debug)]
pub struct NccSimArgs {
    /// Seeds to run, starting at --seed.
    #[arg(long, default_value_t = 1, value_name = "N")]
    seeds: u64,
    /// The first seed.
    #[arg(long, default_value_t = 0, value_name = "S")]
    seed: u64,
    /// Servers (one shard each).
    #[arg(long, default_value_t = 3)]
    servers: u32,
    /// Clients, each running one transaction at a time.
    #[arg(long, default_value_t = 4)]
    clients: u32,
    /// Keys in all (fewer: more contention).
    #[arg(long, default_value_t = 8)]
    keys: u64,
    /// Transactions per client.
    #[arg(long, default_value_t = 30)]
    txns: usize,
    /// Clocks are off real time by up to this many microseconds, either way.
    #[arg(long, default_value_t = 500, value_name = "US")]
    skew: u64,
    /// One-way message delay, uniform in [--delay-min, --delay-max] microseconds (a wide
    /// range reorders much more than a datacenter network does).
    #[arg(long, default_value_t = 50, value_name = "US")]
    delay_min: u64,
    #[arg(long, default_value_t = 2_000, value_name = "US")]
    delay_max: u64,
    /// Percent of messages lost (clients send again what goes unanswered).
    #[arg(long, default_value_t = 2, value_name = "PCT")]
    loss: u64,
    /// Percent of clients that crash once at a random moment (NCC: their transactions are
    /// decided by the backup coordinator, App. D).
    #[arg(long, default_value_t = 0, value_name = "PCT")]
    crash: u64,
    /// Percent of clients that pause once, for twice the recovery timeout, and go on.
    #[arg(long, default_value_t = 0, value_name = "PCT")]
    pause: u64,
    /// A crashed client's id is taken over by a new process before the recovery timeout
    /// (it numbers its transactions above the dead one's and knows nothing of them).
    #[arg(long, requires = "crash")]
    restart: bool,
    /// NCC's recovery timeout, in microseconds (at least two --delay-max).
    #[arg(long, default_value_t = 200_000, value_name = "US")]
    recovery_after: u64,
    /// NCC-RW: transactions without writes run as read-write ones.
    #[arg(long)]
    ncc_rw: bool,
    /// The mixed workload's keys as text (`user:N`), placed on servers by their hash.
    #[arg(long)]
    text_keys: bool,
    /// The protocol: ncc, docc, d2pl-no-wait, d2pl-wound-wait or tapir-cc (the paper's
    /// baselines on the same simulator and checker; tapir-cc's strict serializability
    /// violations are counted, not failures).
    #[arg(long, default_value = "ncc", value_parser = parse_protocol)]
    protocol: ProtocolKind,
    /// What clients run: mixed (every transaction shape over --keys contended keys), f1
    /// (the paper's Google-F1 mix: 1-10 keys of 1 M by Zipf 0.8, 0.3 % writing) or tpcc
    /// (TPC-C's five transactions, one warehouse per server); --keys is for mixed only.
    #[arg(long, default_value = "mixed", value_parser = parse_workload)]
    workload: Workload,
    /// Put each server behind a modelled replication log (`verso_ncc::replicated`): no
    /// output leaves before the input that produced it commits. lazy: Lazy VSR (a total
    /// crash loses what the disks had not caught up with); sync: VSR-Sync;
    /// lazy-answers-on-disk: Lazy VSR's log, each answer held until the disks caught up
    /// with its input (group commit).
    #[arg(long, value_parser = parse_durability, value_name = "lazy|sync|lazy-answers-on-disk")]
    replicated: Option<Durability>,
    /// With --replicated: each server's group is three real Lazy VSR replicas
    /// (`verso_vsr`, with view changes, lost suffixes and disks) instead of the model.
    #[arg(long)]
    vsr: bool,
    /// With --replicated: log every read-only read as an input, instead of answering it
    /// outside the log under a promised `t_r` floor (the default; `verso_ncc`'s
    /// `server/unlogged.rs`; with --vsr, under the primary's read lease).
    #[arg(long)]
    logged_reads: bool,
    /// With --replicated: failovers of each server's group per run, at random moments
    /// (default 2).
    #[arg(long, value_name = "N")]
    group_failovers: Option<u32>,
    /// With --replicated: total crashes of each server's group per run (every replica at
    /// once; default 0). Under lazy durability these lose committed state: expect failures.
    #[arg(long, value_name = "N")]
    group_total_crashes: Option<u32>,
    /// Print every event of each run (use with one seed).
    #[arg(long)]
    trace: bool,
    /// Worker threads. Default: the number of cores.
    #[arg(long)]
    threads: Option<usize>,
    /// Give each server a CPU: this many microseconds per protocol message it receives or
    /// sends, one message at a time (`verso bench txn` measures it: its `cpu µs` column
    /// over messages per transaction). Prints the simulated throughput and latency.
    #[arg(long, value_name = "US")]
    server_cost_us: Option<u64>,
    /// How long clients wait for an answer before sending again, microseconds (default
    /// 10,000). With --server-cost-us and --loss 0, make it long: resends pile onto busy
    /// servers.
    #[arg(long, value_name = "US")]
    resend_after_us: Option<u64>,
    /// Open-loop clients: transactions arrive at this many per simulated second over all
    /// clients (each holds at most 4 behind the one it runs and sheds the rest; latency
    /// counts from arrival). Without it clients are closed-loop.
    #[arg(long, value_name = "TXN_PER_SEC")]
    rate: Option<u64>,
    /// Where NCC's servers keep their decided versions: memory (a map) or engine (Verso's
    /// engine, each committed version an engine version at its `t_w`; not with
    /// --replicated).
    #[arg(long, default_value = "memory", value_parser = ["memory", "engine"])]
    store: String,
    /// TPC-C's warehouses per server (the paper runs 8).
    #[arg(long, default_value_t = 1)]
    warehouses_per_server: u32,
    /// Reintroduce a mistake (no-timing-control, no-early-abort, no-read-only-check,
    /// backup-aborts-cleared, no-read-test-in-smart-retry, and with --replicated
    /// answers-before-commit), to see the checks catch it.
    #[arg(long, hide = true)]
    mistake: Option<String>,
}

fn parse_protocol(s: &str) -> Result<ProtocolKind, String> {
    ProtocolKind::parse(s).ok_or_else(|| {
        let names: Vec<&str> = ProtocolKind::ALL.iter().map(|p| p.name()).collect();
        format!("unknown protocol {s:?}; one of {}", names.join(", "))
    })
}

fn parse_durability(s: &str) -> Result<Durability, String> {
    match s {
        "lazy" => Ok(Durability::Lazy),
        "sync" => Ok(Durability::Sync),
        "lazy-answers-on-disk" => Ok(Durability::LazyAnswersOnDisk),
        _ => Err(format!(
            "unknown durability {s:?}; lazy, sync or lazy-answers-on-disk"
        )),
    }
}

fn parse_workload(s: &str) -> Result<Workload, String> {
    Workload::parse(s).ok_or_else(|| format!("unknown workload {s:?}; one of mixed, f1, tao, tpcc"))
}

pub fn run_ncc(args: &NccSimArgs) -> ExitCode {
    if args.servers == 0 || args.clients == 0 || args.keys == 0 || args.seeds == 0 {
        eprintln!("error: --servers, --clients, --keys and --seeds must be at least 1");
        return ExitCode::from(2);
    }
    if args.delay_min > args.delay_max {
        eprintln!("error: --delay-min must not exceed --delay-max");
        return ExitCode::from(2);
    }
    if args.recovery_after < 2 * args.delay_max {
        // Shorter than a round trip, the backup aborts transactions faster than their
        // clients can finish them: correct, but no run ends.
        eprintln!(
            "error: --recovery-after must be at least {} µs (two message delays)",
            2 * args.delay_max
        );
        return ExitCode::from(2);
    }
    if args.protocol != ProtocolKind::Ncc && (args.crash > 0 || args.pause > 0) {
        eprintln!("error: --crash and --pause need --protocol ncc (the baselines, as the paper runs them, have no backup coordinator)");
        return ExitCode::from(2);
    }
    if args.replicated.is_none()
        && (args.group_failovers.is_some() || args.group_total_crashes.is_some() || args.vsr)
    {
        eprintln!("error: --group-failovers, --group-total-crashes and --vsr need --replicated");
        return ExitCode::from(2);
    }
    let engine_store = args.store == "engine";
    if engine_store && (args.protocol != ProtocolKind::Ncc || args.replicated.is_some()) {
        eprintln!("error: --store engine needs --protocol ncc and no --replicated");
        return ExitCode::from(2);
    }
    let store: Option<verso_ncc::sim::StoreFactory> =
        engine_store.then_some(verso_txn_net::engine_store::sim_store);
    let mut mistakes = Mistakes::default();
    let mut answers_before_commit = false;
    match args.mistake.as_deref() {
        None => {}

        Some("answers-before-commit") if args.replicated.is_some() => answers_before_commit = true,
        Some("answers-before-commit") => {
            eprintln!("error: --mistake answers-before-commit needs --replicated");
            return ExitCode::from(2);
        }
        Some("no-timing-control") => mistakes.no_timing_control = true,
        Some("no-early-abort") => mistakes.no_early_abort = true,
        Some("no-read-only-check") => mistakes.no_read_only_check = true,
        Some("no-read-test-in-smart-retry") => mistakes.no_read_test_in_smart_retry = true,
        Some("backup-aborts-cleared") => mistakes.backup_aborts_cleared = true,
        Some(other) => {
            eprintln!("error: unknown --mistake {other}");
            return ExitCode::from(2);
        }
    }
    let threads = args
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .max(1);
    println!(
        "verso sim ncc: seeds {}..{}, {} servers, {} clients x {} transactions over {} keys",
        args.seed,
        args.seed + args.seeds,
        args.servers,
        args.clients,
        args.txns,
        args.keys
    );
    let began = Instant::now();
    let one = |seed| {
        let mut o = SimOptions::new(seed);
        o.servers = args.servers;
        o.clients = args.clients;
        o.keys = args.keys;
        o.txns_per_client = args.txns;
        o.skew_max = args.skew;
        o.delay_min = args.delay_min;
        o.delay_max = args.delay_max;
        o.loss_percent = args.loss;
        o.ncc_rw = args.ncc_rw;
        o.text_keys = args.text_keys;
        o.protocol = args.protocol;
        o.crash_percent = args.crash;
        o.pause_percent = args.pause;
        o.restart_crashed = args.restart;
        o.recovery_after = Some(args.recovery_after);
        o.workload = args.workload;
        o.trace = args.trace;
        o.mistakes = mistakes;
        o.replication = args.replicated.map(|durability| ReplicationModel {
            durability,
            answers_before_commit,
            real_replicas: args.vsr,
            unlogged_reads: !args.logged_reads,
            ..ReplicationModel::default()
        });
        o.group_failovers = args.group_failovers.unwrap_or(2);
        o.group_total_crashes = args.group_total_crashes.unwrap_or(0);
        o.server_cost_us = args.server_cost_us;
        o.resend_after_us = args.resend_after_us;
        o.open_loop_rate = args.rate;
        o.tpcc_warehouses_per_server = args.warehouses_per_server;
        o.store = store;
        run(&o)
    };
    let t = match crate::sim_cmd::run_seeds(args.seed, args.seeds, threads, one, SimStats::add) {
        Ok(t) => t,
        Err((seed, e)) => {
            eprintln!("FAILED seed {seed}: {e}");
            eprintln!("replay: verso sim ncc --seed {seed} --trace (with the same options)");
            return ExitCode::FAILURE;
        }
    };
    let c = t.clients;
    let pct = |n: u64| 100.0 * n as f64 / c.committed.max(1) as f64;
    let strict = if args.protocol.strict() {
        "strictly serializable".to_string()
    } else {
        format!(
            "serializable; {} of {} runs not strictly serializable (counted, not failures)",
            t.strict_violations, args.seeds
        )
    };
    println!(
        "passed {} seeds in {:.1} s: {} transactions committed ({} of two shots), {strict}; \
         {:.1} % at the first attempt; {:.2} messages per committed transaction",
        args.seeds,
        began.elapsed().as_secs_f64(),
        c.committed,
        c.multi_shot,
        pct(c.committed_first_try),
        t.messages as f64 / c.committed.max(1) as f64,
    );
    if args.server_cost_us.is_some() && !t.latencies_us.is_empty() {
        let mut l = t.latencies_us.clone();
        l.sort_unstable();
        let q = |x: f64| l[((l.len() - 1) as f64 * x) as usize];
        println!(
            "simulated: {:.0} committed transactions per second per run, latency p50 {} µs, p99 {} µs{}",
            t.steady_commits as f64 * 1e6 / t.simulated_us.max(1) as f64,
            q(0.5),
            q(0.99),
            if args.rate.is_some() {
                format!(", {} arrivals shed", t.shed)
            } else {
                String::new()
            }
        );
    }
    if args.protocol == ProtocolKind::Ncc {
        println!(
            "per committed transaction: {:.2} % smart retries ({:.2} % succeeded), {:.2} % early \
             aborts, {:.2} % read-only aborts, {:.2} % safeguard aborts",
            pct(c.smart_retries),
            pct(c.smart_retries_ok),
            pct(c.early_aborts),
            pct(c.ro_aborts),
            pct(c.safeguard_aborts),
        );
    } else {
        println!(
            "per committed transaction: {:.2} % aborted attempts (a refused lock, a failed \
             validation or a wound)",
            pct(c.aborts)
        );
    }
    println!(
        "{} messages, {} lost, {} sent again",
        t.messages, t.lost, c.resent
    );
    if let Some(d) = args.replicated {
        let r = t.replication;
        println!(
            "replicated ({d:?}): {} inputs committed; {} failovers and {} total crashes of a \
             group lost {} uncommitted inputs and {} committed ones",
            r.inputs_committed, r.failovers, r.total_crashes, r.uncommitted_lost, r.committed_lost
        );
        if r.reads_unlogged > 0 {
            println!(
                "{} read-only executions answered outside the log, with {} notes of raised \
                 t_r and {} floor promises logged for them",
                r.reads_unlogged, r.read_notes, r.floor_promises
            );
        }
    }
    if t.crashed + t.paused > 0 {
        println!(
            "{} clients crashed ({} restarted), {} paused; {} transactions committed by a \
             backup coordinator for a crashed client",
            t.crashed, t.restarted, t.paused, t.recovered_commits
        );
    }
    ExitCode::SUCCESS
}
