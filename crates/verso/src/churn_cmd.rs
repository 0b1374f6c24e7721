//! `verso bench churn`: memory under insert/delete at a constant live set.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;
use verso_bench::churn::{self, ChurnConfig};
use verso_bench::{BenchError, Progress};

#[derive(Args, Debug)]
pub struct ChurnArgs {
    /// The live set: keys loaded (8-byte big-endian integers), and alive after every commit.
    #[arg(long, default_value_t = 1_000_000, value_name = "N")]
    keys: u64,

    /// Worker threads (they also load the keys). Default: the number of cores.
    #[arg(long, value_name = "T")]
    threads: Option<usize>,

    /// Seconds of churn (fractions allowed).
    #[arg(
        long,
        default_value_t = 600.0,
        value_name = "S",
        allow_negative_numbers = true
    )]
    duration: f64,

    /// Bytes per value.
    #[arg(long, default_value_t = 100, value_name = "B")]
    value_size: usize,

    /// Seconds between two samples of RSS, throughput and the engine's counters.
    #[arg(
        long,
        default_value_t = 1.0,
        value_name = "S",
        allow_negative_numbers = true
    )]
    sample_interval: f64,

    /// Percentage of transactions that read one live key instead of churning (0-100).
    #[arg(long, default_value_t = 0, value_name = "P")]
    read_ratio: u32,

    /// Concurrency control (see `bench ycsb --help`).
    #[arg(long, default_value = "mvto", value_name = "CC", value_parser = ["mvto", "precision-locking", "snapshot", "2pl"])]
    cc: String,

    /// Seed for the read key streams.
    #[arg(long, value_name = "S")]
    seed: Option<u64>,

    /// Print one JSON object with the results, every sample included, as the last line of
    /// stdout; with FILE, write it to FILE instead (stdout keeps the summary).
    #[arg(long, value_name = "FILE", num_args = 0..=1)]
    json: Option<Option<PathBuf>>,

    /// Print the results without the samples as CSV, a header line and one data line, as
    /// the last two lines of stdout; with FILE, write them to FILE instead. Not with --json
    /// on stdout.
    #[arg(long, value_name = "FILE", num_args = 0..=1)]
    csv: Option<Option<PathBuf>>,
}

impl ChurnArgs {
    fn to_config(&self) -> Result<ChurnConfig, BenchError> {
        if matches!((&self.json, &self.csv), (Some(None), Some(None))) {
            return Err(BenchError::Config(
                "--json and --csv cannot both go to stdout: give one a FILE".into(),
            ));
        }
        let defaults = ChurnConfig::default();
        Ok(ChurnConfig {
            keys: self.keys,
            value_size: self.value_size,
            threads: self.threads.unwrap_or(defaults.threads),
            duration_s: self.duration,
            sample_interval_s: self.sample_interval,
            read_ratio: self.read_ratio,
            cc: self.cc.parse().map_err(BenchError::Config)?,
            seed: self.seed.unwrap_or(defaults.seed),
            progress: Progress::Auto,
        })
    }
}

fn write_file(path: &Path, text: &str) -> Result<(), ExitCode> {
    std::fs::write(path, text).map_err(|e| {
        eprintln!("error: cannot write {}: {e}", path.display());
        ExitCode::FAILURE
    })
}

pub fn run(args: &ChurnArgs) -> ExitCode {
    let report = match args.to_config().and_then(|cfg| churn::run(&cfg)) {
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
    // Written before anything can fail: a ten-minute run's curve is worth keeping.
    let mut failed = false;
    match &args.json {
        Some(Some(path)) => failed |= write_file(path, &(report.to_json() + "\n")).is_err(),
        Some(None) => {
            text.push_str(&report.to_json());
            text.push('\n');
        }
        None => {}
    }
    if let Some(to) = &args.csv {
        match (report.to_csv(), to) {
            (Ok(lines), Some(path)) => failed |= write_file(path, &lines).is_err(),
            (Ok(lines), None) => text.push_str(&lines),
            (Err(e), _) => {
                eprintln!("error: cannot write the report as CSV: {e}");
                failed = true;
            }
        }
    }
    let mut out = std::io::stdout().lock();
    // A closed stdout (`| head`) is not worth a panic; the run itself succeeded.
    let written = out.write_all(text.as_bytes()).and_then(|()| out.flush());
    if !report.live_set_constant {
        eprintln!(
            "error: the live set did not hold: {} keys at the end, {} expected",
            report.live_keys_at_end, report.keys
        );
        return ExitCode::FAILURE;
    }
    if written.is_err() || failed {
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}
