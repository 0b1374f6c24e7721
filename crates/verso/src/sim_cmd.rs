//! `verso sim vsr`: the Lazy VSR simulator over many seeds, on every core (`verso sim
//! cluster` is in `sim_cluster_cmd`).

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use clap::{Args, Subcommand};
use verso_vsr::{Mistake, Mode};
use verso_vsr_sim::{run, Failure, Faults, SimConfig};

#[derive(Subcommand, Debug)]
pub enum Sim {
    /// Lazy VSR under a deterministic simulator: seeded message loss, duplication, delay,
    /// partitions, crashes of any replica and of all at once, and disks that lose, tear
    /// and stall writes; every run is checked (linearizability of what survived, lost
    /// operations a suffix and never durable, one entry per viewstamp, durable points
    /// kept, progress once faults stop). A failure prints its seed; --seed N --trace
    /// replays it event by event.
    #[command(verbatim_doc_comment)]
    Vsr(SimArgs),
    /// Online slot moves between replica groups (issue 17's protocol, after Lazen) under a
    /// deterministic simulator: several groups, the configuration group and clients that
    /// follow MOVED/TRYAGAIN, with message loss, duplication and reordering, failovers and
    /// total crashes of groups; checks that no slot is served by two groups at once, that
    /// no acknowledged write is lost beyond a total crash's lazy suffix, and that every
    /// move finishes once faults stop. A failure prints its seed.
    #[command(verbatim_doc_comment)]
    Cluster(crate::sim_cluster_cmd::ClusterSimArgs),
    /// NCC's distributed transactions (issue 18) under a deterministic simulator: servers
    /// (one shard each) and clients running read-only, one-shot and two-shot read-write
    /// transactions, with reordered and duplicated messages and skewed clocks; checks
    /// that every history is strictly serializable, that nothing is left undecided and
    /// that every transaction commits. A failure prints its seed.
    #[command(verbatim_doc_comment)]
    Ncc(crate::sim_ncc_cmd::NccSimArgs),
}

#[derive(Args, Debug)]
pub struct SimArgs {
    /// Seeds to run, starting at --seed.
    #[arg(long, default_value_t = 1, value_name = "N")]
    seeds: u64,
    /// The first seed.
    #[arg(long, default_value_t = 0, value_name = "S")]
    seed: u64,
    /// Fault profile: none, minority (at most f replicas lose memory at a time, and only
    /// while the others hold everything: nothing acknowledged may be lost), lagging (as
    /// minority, but the others may lag: the thesis's property 3) or total
    /// (all replicas may crash at once).
    #[arg(long, default_value = "total", value_name = "PROFILE")]
    faults: String,
    /// lazy (Lazy VSR) or sync (VSR-Sync: every entry on disk before it is acknowledged).
    #[arg(long, default_value = "lazy", value_parser = ["lazy", "sync"])]
    mode: String,
    /// Replicas in the group (odd, 1-15).
    #[arg(long, default_value_t = 3)]
    replicas: u8,
    /// Clients, each with one request outstanding.
    #[arg(long, default_value_t = 3)]
    clients: usize,
    /// Operations per client.
    #[arg(long, default_value_t = 30)]
    ops: usize,
    /// Print every event of each run (use with one seed).
    #[arg(long)]
    trace: bool,
    /// Every checkpoint takes 200-1500 virtual ms to write (a large database), so view
    /// changes meet checkpoints still being written.
    #[arg(long)]
    slow_checkpoints: bool,
    /// Worker threads. Default: the number of cores.
    #[arg(long)]
    threads: Option<usize>,
    /// Reintroduce one of the thesis's known mistakes (longest-log-wins,
    /// prepare-ok-carries-op-max, view-not-persisted, undo-dropped-above-dp,
    /// elect-prepare-as-printed, restarted-replica-votes, lease-ignored), to see the checks
    /// catch it.
    #[arg(long, hide = true)]
    mistake: Option<String>,
}

pub fn run_sim(sim: &Sim) -> ExitCode {
    let args = match sim {
        Sim::Vsr(args) => args,
        Sim::Cluster(args) => return crate::sim_cluster_cmd::run(args),
        Sim::Ncc(args) => return crate::sim_ncc_cmd::run_ncc(args),
    };
    let faults: Faults = match args.faults.parse() {
        Ok(f) => f,
        Err(e) => {
            eprintln!("error: --faults: {e}");
            return ExitCode::from(2);
        }
    };
    if args.replicas == 0 || args.replicas % 2 == 0 || args.replicas > 15 {
        eprintln!("error: --replicas must be odd, 1 to 15");
        return ExitCode::from(2);
    }
    if args.seeds == 0 || args.clients == 0 {
        eprintln!("error: --seeds and --clients must be at least 1");
        return ExitCode::from(2);
    }
    let mode = if args.mode == "sync" {
        Mode::Sync
    } else {
        Mode::Lazy
    };
    let mistake = match args.mistake.as_deref() {
        None => None,
        Some("longest-log-wins") => Some(Mistake::LongestLogWins),
        Some("prepare-ok-carries-op-max") => Some(Mistake::PrepareOkCarriesOpMax),
        Some("view-not-persisted") => Some(Mistake::ViewNotPersisted),
        Some("undo-dropped-above-dp") => Some(Mistake::UndoDroppedAboveDp),
        Some("elect-prepare-as-printed") => Some(Mistake::ElectPrepareAsPrinted),
        Some("restarted-replica-votes") => Some(Mistake::RestartedReplicaVotes),
        Some("lease-ignored") => Some(Mistake::LeaseIgnored),
        Some(other) => {
            eprintln!("error: unknown --mistake {other}");
            return ExitCode::from(2);
        }
    };
    let threads = args
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .max(1);
    println!(
        "verso sim vsr: seeds {}..{}, faults {}, mode {}, {} replicas, {} clients x {} ops",
        args.seed,
        args.seed + args.seeds,
        args.faults,
        args.mode,
        args.replicas,
        args.clients,
        args.ops
    );
    let next = AtomicU64::new(args.seed);
    let end = args.seed + args.seeds;
    let done = AtomicU64::new(0);
    let acked = AtomicU64::new(0);
    let lost = AtomicU64::new(0);
    let messages = AtomicU64::new(0);
    let stop = AtomicBool::new(false);
    let failure: Mutex<Option<Failure>> = Mutex::new(None);
    let by_kind: Mutex<BTreeMap<&'static str, u64>> = Mutex::new(BTreeMap::new());
    let views = AtomicU64::new(0);
    let transfers = AtomicU64::new(0);
    let checkpoints = AtomicU64::new(0);
    let passed = AtomicU64::new(0);
    let truncates = AtomicU64::new(0);
    let crashes = AtomicU64::new(0);
    let total_crashes = AtomicU64::new(0);
    let lease_reads = AtomicU64::new(0);
    let began = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                // A seed that panics stops the progress line, so the scope ends and passes
                // the panic on (instead of waiting forever for a seed that never finishes).
                let _stop_on_panic = StopOnPanic(&stop);
                while !stop.load(Ordering::Relaxed) {
                    let seed = next.fetch_add(1, Ordering::Relaxed);
                    if seed >= end {
                        break;
                    }
                    let mut cfg = SimConfig::new(seed);
                    cfg.faults = faults;
                    cfg.mode = mode;
                    cfg.replicas = args.replicas;
                    cfg.clients = args.clients;
                    cfg.ops_per_client = args.ops;
                    cfg.trace = args.trace;
                    cfg.slow_checkpoints = args.slow_checkpoints;
                    cfg.mistake = mistake;
                    match run(&cfg) {
                        Ok(o) => {
                            acked.fetch_add(o.ops_acknowledged, Ordering::Relaxed);
                            lost.fetch_add(o.ops_lost, Ordering::Relaxed);
                            messages.fetch_add(o.messages, Ordering::Relaxed);
                            views.fetch_add(o.view_changes, Ordering::Relaxed);
                            transfers.fetch_add(o.state_transfers, Ordering::Relaxed);
                            checkpoints.fetch_add(o.checkpoints_durable, Ordering::Relaxed);
                            passed.fetch_add(o.passed_checkpoints, Ordering::Relaxed);
                            truncates.fetch_add(o.truncates_passed_checkpoints, Ordering::Relaxed);
                            crashes.fetch_add(o.crashes, Ordering::Relaxed);
                            total_crashes.fetch_add(o.total_crashes, Ordering::Relaxed);
                            lease_reads.fetch_add(o.lease_reads, Ordering::Relaxed);
                            let mut k = by_kind.lock().unwrap_or_else(|p| p.into_inner());
                            for (kind, n) in &o.messages_by_kind {
                                *k.entry(kind).or_default() += n;
                            }
                        }
                        Err(f) => {
                            stop.store(true, Ordering::Relaxed);
                            let mut slot = failure.lock().unwrap_or_else(|p| p.into_inner());
                            if slot.as_ref().is_none_or(|g| f.seed < g.seed) {
                                *slot = Some(f);
                            }
                        }
                    }
                    done.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
        report_progress(&done, &stop, args.seeds, began);
    });
    let secs = began.elapsed().as_secs_f64();
    if let Some(f) = failure.into_inner().unwrap_or_else(|p| p.into_inner()) {
        eprintln!("FAILED {f}");
        return ExitCode::FAILURE;
    }
    let a = acked.load(Ordering::Relaxed);
    println!(
        "passed {} seeds in {secs:.1} s: {a} operations acknowledged ({:.0} per second of wall \
         time), {} lost to total crashes, {:.1} messages per acknowledged operation",
        args.seeds,
        a as f64 / secs.max(1e-9),
        lost.load(Ordering::Relaxed),
        messages.load(Ordering::Relaxed) as f64 / a.max(1) as f64
    );
    let by_kind = by_kind.into_inner().unwrap_or_else(|p| p.into_inner());
    let per_op: Vec<String> = by_kind
        .iter()
        .filter(|(k, _)| !k.starts_with("elect"))
        .map(|(k, n)| format!("{k} {:.2}", *n as f64 / a.max(1) as f64))
        .collect();
    println!(
        "  faults survived: {} crashes ({} of every replica at once), {} state transfers",
        crashes.load(Ordering::Relaxed),
        total_crashes.load(Ordering::Relaxed),
        transfers.load(Ordering::Relaxed)
    );
    println!(
        "  checkpoints written aside and reported durable: {} ({} writes and syncs went ahead of one, {} of them truncations)",
        checkpoints.load(Ordering::Relaxed),
        passed.load(Ordering::Relaxed),
        truncates.load(Ordering::Relaxed)
    );
    println!("  per acknowledged operation: {}", per_op.join(", "));
    println!(
        "  reads answered under a primary's lease (checked with the rest): {}",
        lease_reads.load(Ordering::Relaxed)
    );
    let v = views.load(Ordering::Relaxed);
    let per_view: Vec<String> = by_kind
        .iter()
        .filter(|(k, _)| k.starts_with("elect"))
        .map(|(k, n)| format!("{k} {:.2}", *n as f64 / v.max(1) as f64))
        .collect();
    println!("  per view led ({v} views): {}", per_view.join(", "));
    ExitCode::SUCCESS
}

/// Runs `one(seed)` for the seeds `first..first + count` on `threads` threads with a
/// progress line, stopping at the first failure: the results summed by `add`, or the lowest
/// failing seed with its error. Shared by `sim cluster` and `sim ncc`.
pub fn run_seeds<T: Default + Send, E: Send>(
    first: u64,
    count: u64,
    threads: usize,
    one: impl Fn(u64) -> Result<T, E> + Sync,
    add: impl Fn(&mut T, &T) + Sync,
) -> Result<T, (u64, E)> {
    let next = AtomicU64::new(first);
    let end = first + count;
    let done = AtomicU64::new(0);
    let stop = AtomicBool::new(false);
    let total = Mutex::new(T::default());
    let failure: Mutex<Option<(u64, E)>> = Mutex::new(None);
    let began = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..threads.max(1) {
            s.spawn(|| {
                // A seed that panics stops the progress line, so the scope ends and passes
                // the panic on (instead of waiting forever for a seed that never finishes).
                let _stop_on_panic = StopOnPanic(&stop);
                while !stop.load(Ordering::Relaxed) {
                    let seed = next.fetch_add(1, Ordering::Relaxed);
                    if seed >= end {
                        break;
                    }
                    match one(seed) {
                        Ok(r) => add(&mut total.lock().unwrap_or_else(|p| p.into_inner()), &r),
                        Err(e) => {
                            stop.store(true, Ordering::Relaxed);
                            let mut f = failure.lock().unwrap_or_else(|p| p.into_inner());
                            if f.as_ref().is_none_or(|(s, _)| seed < *s) {
                                *f = Some((seed, e));
                            }
                        }
                    }
                    done.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
        report_progress(&done, &stop, count, began);
    });
    match failure.into_inner().unwrap_or_else(|p| p.into_inner()) {
        Some(f) => Err(f),
        None => Ok(total.into_inner().unwrap_or_else(|p| p.into_inner())),
    }
}

/// Sets its flag if dropped while its thread panics.
struct StopOnPanic<'a>(&'a AtomicBool);

impl Drop for StopOnPanic<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.store(true, Ordering::Relaxed);
        }
    }
}

/// Prints progress until `done` reaches `seeds` or `stop` is set: a line that rewrites
/// itself on a terminal, one every 5 s otherwise. Shared by the `sim` commands.
pub fn report_progress(done: &AtomicU64, stop: &AtomicBool, seeds: u64, began: Instant) {
    let tty = std::io::stderr().is_terminal();
    let mut last = Instant::now();
    while done.load(Ordering::Relaxed) < seeds && !stop.load(Ordering::Relaxed) {
        std::thread::sleep(std::time::Duration::from_millis(10));
        if last.elapsed().as_secs_f64() >= if tty { 0.2 } else { 5.0 } {
            last = Instant::now();
            let d = done.load(Ordering::Relaxed);
            let rate = d as f64 / began.elapsed().as_secs_f64().max(1e-9);
            let eta = (seeds - d.min(seeds)) as f64 / rate.max(1e-9);
            let line = format!("{d}/{seeds} seeds  {rate:.0} seeds/s  eta {eta:.0} s");
            if tty {
                eprint!("\r{line}   ");
            } else {
                eprintln!("{line}");
            }
        }
    }
    if tty {
        eprint!("\r");
    }
}
