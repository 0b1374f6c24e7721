//! `verso bench tatp`: flags and output.

use std::io::Write;
use std::process::ExitCode;

use clap::Args;
use verso_bench::results::csv;
use verso_bench::tatp::{self, TatpConfig};
use verso_bench::{BenchError, Progress};
use verso_engine::{IndexKind, TimestampSource};

#[derive(Args, Debug)]
pub struct TatpArgs {
    /// Subscribers (population P; the specification scales by 100 000).
    #[arg(long, default_value_t = 1_000_000, value_name = "P")]
    subscribers: u64,

    /// Worker threads (they also load the population).
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

    /// Seconds to run before measuring.
    #[arg(
        long,
        default_value_t = 1.0,
        value_name = "S",
        allow_negative_numbers = true
    )]
    warmup: f64,

    /// Timestamp source: rdtsc, atomic, mutex, or auto.
    #[arg(long, default_value = "auto", value_name = "SRC", value_parser = ["auto", "rdtsc", "atomic", "mutex"])]
    timestamps: String,

    /// Concurrency control: mvto (vMVCC's timestamp ordering), precision-locking (HyPer's
    /// serializable MVCC), snapshot (precision locking at snapshot isolation: not
    /// serializable), or 2pl (strict two-phase locking, no-wait: a comparison baseline).
    #[arg(long, default_value = "mvto", value_name = "CC", value_parser = ["mvto", "precision-locking", "snapshot", "2pl"])]
    cc: String,

    #[command(flatten)]
    persist: crate::persist_args::PersistArgs,

    /// Ordered index: masstree, or btree (the placeholder, for comparison).
    #[arg(long, default_value = "masstree", value_name = "INDEX", value_parser = ["masstree", "btree"])]
    index: String,

    /// Seed for the population and the transaction inputs.
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

impl TatpArgs {
    fn to_config(&self) -> Result<TatpConfig, BenchError> {
        let d = TatpConfig::default();
        Ok(TatpConfig {
            subscribers: self.subscribers,
            threads: self.threads,
            duration_s: self.duration,
            warmup_s: self.warmup,
            timestamps: self
                .timestamps
                .parse::<TimestampSource>()
                .map_err(BenchError::Config)?,
            index: self
                .index
                .parse::<IndexKind>()
                .map_err(BenchError::Config)?,
            cc: self.cc.parse().map_err(BenchError::Config)?,
            persist: self.persist.to_persist()?,
            seed: self.seed.unwrap_or(d.seed),
            progress: Progress::Auto,
        })
    }
}

/// Runs the benchmark and prints its summary (and JSON).
pub fn run(args: &TatpArgs) -> ExitCode {
    let report = match args.to_config().and_then(|cfg| tatp::run(&cfg)) {
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
        if let Err(code) = crate::results_cmd::push_csv(&mut text, csv::from_report(&report)) {
            return code;
        }
    }
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(_) => ExitCode::FAILURE,
    }
}
