//! `verso bench durability`: checkpoint cost and recovery time.

use std::process::ExitCode;

use clap::Args;
use verso_bench::durability_bench::{self, DurabilityConfig};
use verso_bench::BenchError;

#[derive(Args, Debug)]
pub struct DurabilityArgs {
    /// Keys loaded before measuring.
    #[arg(long, default_value_t = 1_000_000, value_name = "N")]
    keys: u64,

    /// Value size in bytes.
    #[arg(long, default_value_t = 100, value_name = "BYTES")]
    value_size: usize,

    /// Update threads (and loader threads).
    #[arg(long, default_value_t = 2, value_name = "N")]
    threads: usize,

    /// Seconds of updates without, then with, checkpoints running.
    #[arg(long, default_value_t = 5.0, value_name = "SECS")]
    duration: f64,

    /// Updates after the last checkpoint, for recovery to replay from the log.
    #[arg(long, default_value_t = 200_000, value_name = "N")]
    extra_updates: u64,

    /// Concurrency control (see `bench ycsb --help`).
    #[arg(long, default_value = "mvto", value_name = "CC", value_parser = ["mvto", "precision-locking", "snapshot", "2pl"])]
    cc: String,

    /// Checkpoint read rate limit in MiB/s (0: full speed, using every core it can).
    #[arg(long, default_value_t = 0, value_name = "MIB_S")]
    checkpoint_rate: u64,

    #[command(flatten)]
    persist: crate::persist_args::PersistArgs,

    /// Print one JSON object with the results as the last line of stdout.
    #[arg(long)]
    json: bool,
}

pub fn run(args: &DurabilityArgs) -> ExitCode {
    let cfg = || -> Result<DurabilityConfig, BenchError> {
        let mut persist = args.persist.to_persist()?;
        if args.persist.durability == "none" {
            persist.durability = verso_engine::Durability::Lazy;
        }
        if args.keys == 0 || args.threads == 0 || args.duration.is_nan() || args.duration <= 0.0 {
            return Err(BenchError::Config(
                "--keys, --threads and --duration must be positive".into(),
            ));
        }
        Ok(DurabilityConfig {
            keys: args.keys,
            value_size: args.value_size,
            threads: args.threads,
            duration_s: args.duration,
            extra_updates: args.extra_updates,
            persist,
            cc: args.cc.parse().map_err(BenchError::Config)?,
            checkpoint_rate: (args.checkpoint_rate > 0).then_some(args.checkpoint_rate << 20),
            ..DurabilityConfig::default()
        })
    };
    match cfg().and_then(|c| durability_bench::run(&c)) {
        Ok(report) => {
            print!("{}", report.summary());
            if args.json {
                println!("{}", report.to_json());
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
