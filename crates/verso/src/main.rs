//! `verso`: the command-line front end. Today: `verso bench ycsb`. Subcommands are enums so
//! `bench tpcc`, `bench index` and `serve` slot in beside it.

#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::io::Write;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};

mod churn_cmd;
mod cluster_cmd;
mod cluster_move;
mod durability_cmd;
mod gateway_cmd;
mod persist_args;
mod results_cmd;
mod serve_cmd;
mod sim_cluster_cmd;
mod sim_cmd;
mod sim_ncc_cmd;
mod tatp_cmd;
mod txn_client_cmd;
mod txn_cmd;
mod wire_cmd;
use verso_bench::core_workloads::CoreWorkload;
use verso_bench::index_bench::{self, IndexBenchConfig};
use verso_bench::results::csv;
use verso_bench::tpcc::{self, TpccConfig};
use verso_bench::ycsb::{self, YcsbConfig};
use verso_bench::{BenchError, Dist, Progress};
use verso_engine::{IndexKind, TimestampSource};

/// Verso: an in-memory, multi-version, strictly serializable transactional key-value store.
#[derive(Parser, Debug)]
#[command(name = "verso", version, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run a benchmark against an in-process database.
    #[command(subcommand)]
    Bench(Bench),
    /// Serve the Redis protocol (RESP2/RESP3) on 127.0.0.1:6380: string commands,
    /// MULTI/EXEC/WATCH, SCAN, VRANGE, AUTH, INFO; durable by default (redo logs and
    /// checkpoints in --data-dir, recovered at start).
    Serve(serve_cmd::ServeArgs),
    /// Run a protocol under the deterministic simulator.
    #[command(subcommand)]
    Sim(sim_cmd::Sim),
    /// Sharded clusters: `verso cluster local` starts one on loopback.
    #[command(subcommand)]
    Cluster(cluster_cmd::Cluster),
    /// Check a recorded history with Verso's checker (`verso-check`).
    #[command(subcommand)]
    Check(Check),
    /// One shard server of a distributed-transaction protocol (NCC or a baseline) over
    /// TCP: what `verso bench txn` starts, one process per shard.
    TxnServer(txn_cmd::TxnServerArgs),
    /// Transactions against txn-server processes from this process (its coordinator runs
    /// here): --get, --put, or --transfers between keys on different servers.
    TxnClient(txn_client_cmd::TxnClientArgs),
    /// The Redis protocol over txn-server groups: every command and every MULTI/EXEC one
    /// strictly serializable NCC transaction, whatever groups its keys live in.
    Gateway(gateway_cmd::GatewayArgs),
}

#[derive(Subcommand, Debug)]
enum Check {
    /// Linearizability of single-key registers: FILE holds one JSON object per line,
    /// `{"key": [bytes], "start": ns, "end": ns, "kind": {"Get": {"observed": v|null}} |
    /// {"Put": {"value": v}} | "Remove"}`, every Put of a key with a distinct value. Exits
    /// 1 with the violation when there is one.
    #[command(verbatim_doc_comment)]
    Registers { file: std::path::PathBuf },
}

fn check_registers(file: &std::path::Path) -> ExitCode {
    let text = match std::fs::read_to_string(file) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("error: cannot read {}: {e}", file.display());
            return ExitCode::FAILURE;
        }
    };
    let mut ops = Vec::new();
    for (i, line) in text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        match serde_json::from_str::<verso_check::RegisterOp>(line) {
            Ok(op) => ops.push(op),
            Err(e) => {
                eprintln!("error: {}:{}: {e}", file.display(), i + 1);
                return ExitCode::FAILURE;
            }
        }
    }
    match verso_check::check_linearizable_registers(&ops) {
        Ok(()) => {
            println!("linearizable: {} operations", ops.len());
            ExitCode::SUCCESS
        }
        Err(v) => {
            eprintln!("{v}");
            ExitCode::FAILURE
        }
    }
}

#[derive(Subcommand, Debug)]
enum Bench {
    /// YCSB-style workload: point reads and blind writes, or range reads, over N keys.
    ///
    /// Keys are 8-byte big-endian integers 0..N, loaded before measuring in transactions of
    /// 1000 puts. Each worker then loops: draw the transaction's ops, begin, run them,
    /// commit; a conflict retries the same ops (counted as an abort) until it commits.
    /// Throughput counts commits in the measured window (after --warmup). Latency is from
    /// the first begin to the commit, retries included, recorded for 1 transaction in 16 to
    /// keep clock reads off the hot path. --json prints one JSON object as the last stdout
    /// line.
    #[command(verbatim_doc_comment)]
    Ycsb(YcsbArgs),
    /// TPC-C (specification v5.11): the nine tables, the five transactions in the standard
    /// mix (45% New-Order, 43% Payment, 4% each Order-Status, Delivery, Stock-Level).
    ///
    /// Loads --warehouses warehouses (default: one per thread) as clause 4.3 populates them,
    /// then each worker thread runs transactions back to back against its home warehouse
    /// (thread i -> warehouse i % W + 1), with no keying or think times, retrying a
    /// conflicted transaction until it commits (each retry counts as an abort; the 1% of
    /// New-Orders with an unused item roll back and count as rollbacks). After the run,
    /// the twelve consistency conditions of clause 3.3.2 are checked (condition 11 only
    /// while no Delivery has run: it cannot hold after one): a violation fails the run
    /// (exit status 1). --json prints one JSON object as the last stdout line.
    #[command(verbatim_doc_comment)]
    Tpcc(TpccArgs),
    /// TATP (v1.0): a subscriber database with the seven transactions in the standard mix
    /// (35% get_subscriber_data, 10% get_new_destination, 35% get_access_data, 2%
    /// update_subscriber_data, 14% update_location, 2% insert and 2% delete
    /// call_forwarding). Subscriber ids are TATP's non-uniform NURand. Throughput counts
    /// every completed transaction; per-type success rates show the unsuccessful ones
    /// the specification expects. --json prints one JSON object as the last stdout line.
    #[command(verbatim_doc_comment)]
    Tatp(tatp_cmd::TatpArgs),
    /// Durability costs: loads --keys keys into a durable database (--durability lazy by
    /// default, or sync), measures update throughput without and then with checkpoints
    /// running back to back, writes a log tail, then closes and reopens it and reports the
    /// recovery time (checkpoint load + log replay) and checks every key is back.
    #[command(verbatim_doc_comment)]
    Durability(durability_cmd::DurabilityArgs),
    /// Memory under key churn: loads --keys keys, then each transaction inserts a fresh key
    /// and deletes a live one, so the live set stays exactly --keys, for --duration seconds.
    ///
    /// Each thread owns a stripe of the key space (thread << 48 | j) and slides a window
    /// along it: insert j = hi, delete j = lo. Every --sample-interval it records the RSS,
    /// the interval's throughput and the engine's reclamation counters (records removed
    /// from the index and freed, GC backlog). The summary gives RSS a minute in (10 % of a
    /// shorter run), at the end and at most, and their ratio (the target: <= 1.10); after
    /// the run a range read checks the live set. `verso bench plot` draws the RSS curve
    /// from the --json output. Exit status 1 if the live set did not hold.
    #[command(verbatim_doc_comment)]
    Churn(churn_cmd::ChurnArgs),
    /// Index micro-benchmark: Verso's Masstree against other concurrent ordered maps.
    ///
    /// The index alone, no transactions: byte keys to u64 values. rw1 (masstree-beta's
    /// mttest) puts random decimal keys for half the duration, then reads every key back in
    /// a shuffled order and checks its value. The other workloads load --keys keys in a
    /// random order, then run for the duration: get and put (uniform), scan (100 entries
    /// from a uniform key), ycsb-a (50% get, 50% put) and ycsb-c (gets), both zipfian 0.99.
    /// bytes_per_key is the RSS growth while filling the index divided by the keys.
    /// --json prints one JSON object as the last stdout line.
    #[command(verbatim_doc_comment)]
    Index(IndexArgs),
    /// Compare saved results: the numeric fields they share, side by side, with ratios.
    ///
    /// Each FILE is the saved stdout of a `verso bench ... --json` run (its last non-empty
    /// line is the report) or a plain JSON file; all must be of one benchmark. Nested fields
    /// are flattened with dots (per_type.new_order.p99_us). Key fields come first
    /// (txn_per_sec, new_order_per_sec, gets_per_sec, puts_per_sec, p50/p99/p99.9, abort_rate,
    /// peak_rss_bytes), then the others that changed; --all shows every field. B/A, C/A, ...
    /// are ratios to the first file, and * marks a change beyond +-5%. Bad input (a missing
    /// file, no JSON, different benchmarks) exits with status 2.
    #[command(verbatim_doc_comment)]
    Compare(results_cmd::CompareArgs),
    /// Draw charts of saved results as SVG and PNG (with an embedded font).
    ///
    /// Files are grouped by benchmark. Per benchmark: throughput (--y, default txn_per_sec)
    /// against --x (default threads), one line per series, a series being the rest of the
    /// configuration that differs between the files (workload, index, long_readers, ...);
    /// and a latency chart of every file's p50, p99 and p99.9 on a log scale. `bench churn`
    /// reports get one chart instead: RSS (MiB) and throughput over the run's seconds, one
    /// line per file. Prints the paths written.
    #[command(verbatim_doc_comment)]
    Plot(results_cmd::PlotArgs),
    /// Distributed transactions between real processes (issue 19): starts --servers shard
    /// server processes on loopback per run (`verso txn-server`), drives them with
    /// open-loop clients at each of --rates (0: closed loop) and prints committed
    /// transactions per second, latency from arrival to commit, the share committed at
    /// the first attempt and protocol messages per transaction, for each protocol in
    /// --protocols, interleaved. --check records the history and checks it against the
    /// servers' committed versions (exit status 1 on a violation).
    #[command(verbatim_doc_comment)]
    Txn(txn_cmd::BenchTxnArgs),
    /// The transaction messages' two byte forms (binary and RESP) side by side: bytes, and
    /// nanoseconds to encode and to decode each of an F1 transaction's messages, without
    /// the network (`bench txn --wire binary,resp` measures them with it).
    Wire(wire_cmd::BenchWireArgs),
}

#[derive(Args, Debug)]
struct YcsbArgs {
    /// Number of keys (8-byte big-endian integers 0..N).
    #[arg(long, default_value_t = 1_000_000, value_name = "N")]
    keys: u64,

    /// Bytes per value.
    #[arg(long, default_value_t = 100, value_name = "B")]
    value_size: usize,

    /// Point operations per transaction.
    #[arg(long, default_value_t = 1, value_name = "K")]
    ops_per_txn: u32,

    /// YCSB core workload a-f (a: 50% read/50% update; b: 95/5; c: read only; d: 95% read
    /// latest, 5% insert; e: 95% scans of 1-100 keys, 5% insert; f: 50% read, 50%
    /// read-modify-write), zipfian by default. Replaces --read-ratio and --scan-length.
    #[arg(long, value_name = "W", value_parser = ["a", "b", "c", "d", "e", "f"])]
    workload: Option<String>,

    /// Percentage of point operations that are reads (0-100); the rest are blind writes of
    /// a fresh value. Default 100.
    #[arg(long, value_name = "P")]
    read_ratio: Option<u32>,

    /// If > 0, each transaction is one range read of L keys starting at a key drawn from
    /// --dist, instead of point operations (--ops-per-txn and --read-ratio are ignored).
    #[arg(long, value_name = "L")]
    scan_length: Option<u64>,

    /// Key distribution: uniform, or zipf (YCSB's scrambled zipfian). Default: zipf with
    /// --workload, uniform otherwise.
    #[arg(long, value_name = "DIST", value_parser = ["uniform", "zipf"])]
    dist: Option<String>,

    /// Zipfian parameter; must be in (0, 1) or (1, inf).
    #[arg(
        long,
        default_value_t = 0.99,
        value_name = "T",
        allow_negative_numbers = true
    )]
    theta: f64,

    /// Worker threads (they also load the keys).
    #[arg(long, default_value_t = 1, value_name = "T")]
    threads: usize,

    /// Measured seconds (fractions allowed).
    #[arg(
        long,
        default_value_t = 10.0,
        value_name = "S",
        allow_negative_numbers = true
    )]
    duration: f64,

    /// Seconds to run before measuring (not counted).
    #[arg(
        long,
        default_value_t = 1.0,
        value_name = "S",
        allow_negative_numbers = true
    )]
    warmup: f64,

    /// Extra threads that repeatedly run one read-only transaction reading 1% of the keys
    /// at random positions; reported separately, not counted in txn/s.
    #[arg(long, default_value_t = 0, value_name = "N")]
    long_readers: usize,

    /// Timestamp source: rdtsc, atomic, mutex, or auto (rdtsc when the TSC is invariant).
    #[arg(long, default_value = "auto", value_name = "SRC", value_parser = ["auto", "rdtsc", "atomic", "mutex"])]
    timestamps: String,

    /// Concurrency control: mvto (vMVCC's timestamp ordering), precision-locking (HyPer's
    /// serializable MVCC), snapshot (precision locking at snapshot isolation: not
    /// serializable), or 2pl (strict two-phase locking, no-wait: a comparison baseline).
    #[arg(long, default_value = "mvto", value_name = "CC", value_parser = ["mvto", "precision-locking", "snapshot", "2pl"])]
    cc: String,

    #[command(flatten)]
    persist: persist_args::PersistArgs,

    /// Ordered index: masstree (the engine's), or btree (a BTreeMap behind a RwLock, the
    /// placeholder kept for comparison). Applies to --raw-index too.
    #[arg(long, default_value = "masstree", value_name = "INDEX", value_parser = ["masstree", "btree"])]
    index: String,

    /// Run the same key stream as plain lookups on the index with no transactions (values
    /// in per-key slots behind seqlocks): the ceiling the engine is measured against.
    #[arg(long)]
    raw_index: bool,

    /// Seed for the key and operation streams (each thread derives its own).
    #[arg(long, value_name = "S")]
    seed: Option<u64>,

    /// Print one JSON object with the results as the last line of stdout.
    #[arg(long)]
    json: bool,

    /// Print the results as CSV, a header line and one data line, as the last two lines of
    /// stdout: the JSON's fields, nested ones flattened with dots. Not with --json.
    #[arg(long, conflicts_with = "json")]
    csv: bool,
}

impl YcsbArgs {
    fn to_config(&self) -> Result<YcsbConfig, BenchError> {
        let workload: Option<CoreWorkload> = match &self.workload {
            Some(w) => Some(w.parse().map_err(BenchError::Config)?),
            None => None,
        };
        if workload.is_some() && self.read_ratio.is_some() {
            return Err(BenchError::Config(
                "--read-ratio and --workload both choose the operations: pick one".into(),
            ));
        }
        let dist: Dist = match &self.dist {
            Some(d) => d.parse().map_err(BenchError::Config)?,
            None if workload.is_some() => Dist::Zipf,
            None => Dist::Uniform,
        };
        let timestamps: TimestampSource = self.timestamps.parse().map_err(BenchError::Config)?;
        let index: IndexKind = self.index.parse().map_err(BenchError::Config)?;
        let defaults = YcsbConfig::default();
        Ok(YcsbConfig {
            keys: self.keys,
            value_size: self.value_size,
            ops_per_txn: self.ops_per_txn,
            read_ratio: self.read_ratio.unwrap_or(100),
            scan_length: self.scan_length.unwrap_or(0),
            workload,
            dist,
            theta: self.theta,
            threads: self.threads,
            duration_s: self.duration,
            warmup_s: self.warmup,
            long_readers: self.long_readers,
            timestamps,
            cc: self.cc.parse().map_err(BenchError::Config)?,
            persist: self.persist.to_persist()?,
            index,
            raw_index: self.raw_index,
            seed: self.seed.unwrap_or(defaults.seed),
            progress: Progress::Auto,
        })
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // The simulator catches a panic of the protocol code as a failed seed and reports it.
    if !matches!(cli.command, Command::Sim(_)) {
        exit_on_panic();
    }
    match cli.command {
        Command::Serve(args) => serve_cmd::run(&args),
        Command::Bench(Bench::Ycsb(args)) => bench_ycsb(&args),
        Command::Bench(Bench::Tpcc(args)) => bench_tpcc(&args),
        Command::Bench(Bench::Tatp(args)) => tatp_cmd::run(&args),
        Command::Bench(Bench::Durability(args)) => durability_cmd::run(&args),
        Command::Bench(Bench::Churn(args)) => churn_cmd::run(&args),
        Command::Sim(sim) => sim_cmd::run_sim(&sim),
        Command::Cluster(c) => cluster_cmd::run(&c),
        Command::Check(Check::Registers { file }) => check_registers(&file),
        Command::Bench(Bench::Index(args)) => bench_index(&args),
        Command::Bench(Bench::Compare(args)) => results_cmd::run_compare(&args),
        Command::Bench(Bench::Plot(args)) => results_cmd::run_plot(&args),
        Command::Bench(Bench::Txn(args)) => txn_cmd::run_bench(&args),
        Command::Bench(Bench::Wire(args)) => wire_cmd::run(&args),
        Command::TxnServer(args) => txn_cmd::run_server(&args),
        Command::TxnClient(args) => txn_client_cmd::run(&args),
        Command::Gateway(args) => gateway_cmd::run(&args),
    }
}

/// Makes a panic on any thread end the process at once (after the usual message). A worker
/// that panics inside the engine may leave records locked, and the other workers would then
/// wait for them forever: a benchmark must fail loudly instead of hanging.
fn exit_on_panic() {
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        default_hook(info);
        eprintln!("error: a benchmark thread panicked; the run is invalid");
        std::process::exit(101);
    }));
}

fn bench_ycsb(args: &YcsbArgs) -> ExitCode {
    let result = args.to_config().and_then(|cfg| ycsb::run(&cfg));
    let report = match result {
        Ok(r) => r,
        Err(e @ BenchError::Config(_)) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut out = std::io::stdout().lock();
    let mut text = report.summary();
    if args.json {
        text.push_str(&report.to_json());
        text.push('\n');
    }
    if args.csv {
        if let Err(code) = results_cmd::push_csv(&mut text, csv::from_report(&report)) {
            return code;
        }
    }
    // A closed stdout (`| head`) is not worth a panic; the run itself succeeded.
    if out
        .write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .is_err()
    {
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}

#[derive(Args, Debug)]
struct IndexArgs {
    /// The index: masstree (Verso's), skiplist (crossbeam-skiplist), scc (scc::TreeIndex),
    /// btree-rwlock (std BTreeMap behind a RwLock), masstree-crate (the masstree crate).
    #[arg(long, default_value = "masstree", value_name = "INDEX", value_parser = ["masstree", "skiplist", "scc", "btree-rwlock", "masstree-crate"])]
    index: String,

    /// What the threads do: rw1, get, put, scan, ycsb-a or ycsb-c.
    #[arg(long, default_value = "get", value_name = "W", value_parser = ["rw1", "get", "put", "scan", "ycsb-a", "ycsb-c"])]
    workload: String,

    /// Keys loaded before measuring (not used by rw1).
    #[arg(long, default_value_t = 1_000_000, value_name = "N")]
    keys: u64,

    /// Key bytes: int64 (8-byte big-endian), decimal (ASCII), long-prefix (a 40-byte
    /// shared prefix, then int64), long-suffix (int64, then a 40-byte tail: a long key
    /// suffix per key). rw1 always uses decimal keys of random i32s.
    #[arg(long, default_value = "int64", value_name = "F", value_parser = ["int64", "decimal", "long-prefix", "long-suffix"])]
    key_format: String,

    /// Worker threads (they also load the keys).
    #[arg(long, default_value_t = 1, value_name = "T")]
    threads: usize,

    /// Measured seconds (rw1: half for puts, then gets of every key, about as long).
    #[arg(
        long,
        default_value_t = 5.0,
        value_name = "S",
        allow_negative_numbers = true
    )]
    duration: f64,

    /// Entries per scan (the scan workload).
    #[arg(long, default_value_t = 100, value_name = "L")]
    scan_length: usize,

    /// Seed for the load order and the key streams.
    #[arg(long, value_name = "S")]
    seed: Option<u64>,

    /// Print one JSON object with the results as the last line of stdout.
    #[arg(long)]
    json: bool,

    /// Print the results as CSV, a header line and one data line, as the last two lines of
    /// stdout: the JSON's fields, nested ones flattened with dots. Not with --json.
    #[arg(long, conflicts_with = "json")]
    csv: bool,
}

impl IndexArgs {
    fn to_config(&self) -> Result<IndexBenchConfig, BenchError> {
        let defaults = IndexBenchConfig::default();
        Ok(IndexBenchConfig {
            index: self.index.parse().map_err(BenchError::Config)?,
            workload: self.workload.parse().map_err(BenchError::Config)?,
            keys: self.keys,
            key_format: self.key_format.parse().map_err(BenchError::Config)?,
            threads: self.threads,
            duration_s: self.duration,
            scan_length: self.scan_length,
            seed: self.seed.unwrap_or(defaults.seed),
            ..defaults
        })
    }
}

fn bench_index(args: &IndexArgs) -> ExitCode {
    let report = match args.to_config().and_then(|cfg| index_bench::run(&cfg)) {
        Ok(r) => r,
        Err(e @ BenchError::Config(_)) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut text = report.summary();
    if args.json {
        text.push_str(&report.to_json());
        text.push('\n');
    }
    if args.csv {
        if let Err(code) = results_cmd::push_csv(&mut text, csv::from_report(&report)) {
            return code;
        }
    }
    let mut out = std::io::stdout().lock();
    // A closed stdout (`| head`) is not worth a panic; the run itself succeeded.
    if out
        .write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .is_err()
    {
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}

#[derive(Args, Debug)]
struct TpccArgs {
    /// Warehouses (default: one per worker thread).
    #[arg(long, value_name = "W")]
    warehouses: Option<u32>,

    /// Worker threads (also the load threads, at most one per warehouse).
    #[arg(long, default_value_t = 1, value_name = "T")]
    threads: usize,

    /// Measured seconds (fractions allowed).
    #[arg(
        long,
        default_value_t = 10.0,
        value_name = "S",
        allow_negative_numbers = true
    )]
    duration: f64,

    /// Seconds to run before measuring (not counted).
    #[arg(
        long,
        default_value_t = 1.0,
        value_name = "S",
        allow_negative_numbers = true
    )]
    warmup: f64,

    /// Run an extra thread executing a read-only StockScan (sums S_QUANTITY over every
    /// stock row of every warehouse) every N milliseconds; reported separately.
    #[arg(long, value_name = "N")]
    stock_scan_ms: Option<u64>,

    /// Timestamp source: rdtsc, atomic, mutex, or auto (rdtsc when the TSC is invariant).
    #[arg(long, default_value = "auto", value_name = "SRC", value_parser = ["auto", "rdtsc", "atomic", "mutex"])]
    timestamps: String,

    /// Concurrency control: mvto (vMVCC's timestamp ordering), precision-locking (HyPer's
    /// serializable MVCC), snapshot (precision locking at snapshot isolation: not
    /// serializable), or 2pl (strict two-phase locking, no-wait: a comparison baseline).
    #[arg(long, default_value = "mvto", value_name = "CC", value_parser = ["mvto", "precision-locking", "snapshot", "2pl"])]
    cc: String,

    #[command(flatten)]
    persist: persist_args::PersistArgs,

    /// Seed for population, transaction inputs and NURand's C constants.
    #[arg(long, value_name = "S")]
    seed: Option<u64>,

    /// Print one JSON object with the results as the last line of stdout.
    #[arg(long)]
    json: bool,

    /// Print the results as CSV, a header line and one data line, as the last two lines of
    /// stdout: the JSON's fields, nested ones flattened with dots. Not with --json.
    #[arg(long, conflicts_with = "json")]
    csv: bool,
}

impl TpccArgs {
    fn to_config(&self) -> Result<TpccConfig, BenchError> {
        let timestamps: TimestampSource = self.timestamps.parse().map_err(BenchError::Config)?;
        let defaults = TpccConfig::default();
        Ok(TpccConfig {
            warehouses: self.warehouses,
            threads: self.threads,
            duration_s: self.duration,
            warmup_s: self.warmup,
            stock_scan_ms: self.stock_scan_ms,
            timestamps,
            cc: self.cc.parse().map_err(BenchError::Config)?,
            persist: self.persist.to_persist()?,
            seed: self.seed.unwrap_or(defaults.seed),
            progress: Progress::Auto,
        })
    }
}

fn bench_tpcc(args: &TpccArgs) -> ExitCode {
    let report = match args.to_config().and_then(|cfg| tpcc::run(&cfg)) {
        Ok(r) => r,
        Err(e @ BenchError::Config(_)) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut out = std::io::stdout().lock();
    let mut text = report.summary();
    if args.json {
        text.push_str(&report.to_json());
        text.push('\n');
    }
    let csv_failed =
        args.csv && results_cmd::push_csv(&mut text, csv::from_report(&report)).is_err();
    // A closed stdout (`| head`) is not worth a panic; the run itself succeeded.
    let written = out.write_all(text.as_bytes()).and_then(|()| out.flush());
    if !report.consistency_passed() {
        eprintln!("error: TPC-C {}", report.consistency);
        return ExitCode::FAILURE;
    }
    if written.is_err() || csv_failed {
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}
