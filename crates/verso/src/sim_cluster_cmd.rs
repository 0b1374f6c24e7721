//! `verso sim cluster`: the slot-move simulator (`verso_cluster::sim`) over many seeds, on
//! every core, with a progress line.

use std::process::ExitCode;
use std::time::Instant;

use clap::Args;
use verso_cluster::lazen::Mistakes;
use verso_cluster::sim::{Sim, SimOptions, SimStats};

#[derive(Args, Debug)]
pub struct ClusterSimArgs {
    /// Seeds to run, starting at --seed.
    #[arg(long, default_value_t = 1, value_name = "N")]
    seeds: u64,
    /// The first seed.
    #[arg(long, default_value_t = 0, value_name = "S")]
    seed: u64,
    /// Data groups (2-16).
    #[arg(long, default_value_t = 3)]
    groups: u16,
    /// Clients, each with one operation outstanding.
    #[arg(long, default_value_t = 4)]
    clients: usize,
    /// Operations per client.
    #[arg(long, default_value_t = 80)]
    ops: usize,
    /// Every data group as three real Lazy VSR replicas (crashes, restarts and cut-off
    /// replicas inside groups, read leases), instead of one abstract log per group.
    #[arg(long)]
    replicated: bool,
    /// Print what happens in the run (with --seeds 1; replicated runs say the most).
    #[arg(long)]
    trace: bool,
    /// Worker threads. Default: the number of cores.
    #[arg(long)]
    threads: Option<usize>,
    /// Reintroduce a mistake (source-serves-when-frozen, target-serves-before-endrecv,
    /// lazy-transfers), to see the checks catch it.
    #[arg(long, hide = true)]
    mistake: Option<String>,
}

pub fn run(args: &ClusterSimArgs) -> ExitCode {
    if !(2..=16).contains(&args.groups) || args.seeds == 0 || args.clients == 0 {
        eprintln!("error: --groups must be 2 to 16, --seeds and --clients at least 1");
        return ExitCode::from(2);
    }
    let mut mistakes = Mistakes::default();
    match args.mistake.as_deref() {
        None => {}
        Some("source-serves-when-frozen") => mistakes.source_serves_when_frozen = true,
        Some("target-serves-before-endrecv") => mistakes.target_serves_before_endrecv = true,
        Some("lazy-transfers") => mistakes.lazy_transfers = true,
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
        "verso sim cluster: seeds {}..{}, {} groups{}, {} clients x {} ops",
        args.seed,
        args.seed + args.seeds,
        args.groups,
        if args.replicated {
            " of 3 Lazy VSR replicas"
        } else {
            ""
        },
        args.clients,
        args.ops
    );
    let began = Instant::now();
    let one = |seed| {
        let mut opts = SimOptions::new(seed);
        opts.groups = args.groups;
        opts.clients = args.clients;
        opts.ops_per_client = args.ops;
        opts.mistakes = mistakes;
        opts.replicated = args.replicated;
        opts.trace = args.trace;
        Sim::new(opts).run()
    };
    let t = match crate::sim_cmd::run_seeds(args.seed, args.seeds, threads, one, SimStats::add) {
        Ok(t) => t,
        Err((seed, v)) => {
            eprintln!("FAILED seed {seed} at {} ms: {}", v.at_ms, v.what);
            return ExitCode::FAILURE;
        }
    };
    println!(
        "passed {} seeds in {:.1} s: {} moves finished, {} operations ({} writes acknowledged, \
         {} of them lost to total crashes of their group's lazy suffix), {} redirects, {} \
         TRYAGAIN, {} failovers ({} records not yet seen committed kept by the new log), {} total \
         crashes of a group",
        args.seeds,
        began.elapsed().as_secs_f64(),
        t.moves_done,
        t.ops_done,
        t.writes_acked,
        t.writes_lost_to_total_crashes,
        t.redirects,
        t.try_agains,
        t.failovers,
        t.survived_failovers,
        t.total_crashes
    );
    ExitCode::SUCCESS
}
