//! `verso bench compare` and `verso bench plot`: reading saved results, and `--csv` for the
//! benchmarks' own output.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use verso_bench::results::{self, compare, plot, ResultsError};

#[derive(Args, Debug)]
pub struct CompareArgs {
    /// Result files: the saved stdout of `verso bench ... --json` runs (the last non-empty
    /// line is the report) or plain .json files, all of one benchmark. Ratios are against
    /// the first.
    #[arg(value_name = "FILE", num_args = 2.., required = true)]
    files: Vec<PathBuf>,

    /// Show every numeric field the files share, not only the key ones and those that
    /// changed by more than 5%.
    #[arg(long)]
    all: bool,
}

#[derive(Args, Debug)]
pub struct PlotArgs {
    /// Result files (saved `--json` output or .json files), of one benchmark or several;
    /// each benchmark gets its own charts.
    #[arg(value_name = "FILE", num_args = 1.., required = true)]
    files: Vec<PathBuf>,

    /// Directory the charts are written to (created if missing).
    #[arg(long, default_value = "results/plots", value_name = "DIR")]
    out: PathBuf,

    /// Field on the x axis of the throughput chart: threads, write_ratio (100 -
    /// read_ratio), read_ratio, warehouses, long_readers, keys, or any numeric field.
    /// Default: threads, or the first of those that varies when the thread count does not.
    #[arg(long, value_name = "FIELD")]
    x: Option<String>,

    /// Field on the y axis of the throughput chart: any numeric field, flattened with dots
    /// (e.g. new_order_per_sec, abort_rate, per_type.payment.p99_us). Default: txn_per_sec
    /// (ops_per_sec for `bench index`).
    #[arg(long, value_name = "FIELD")]
    y: Option<String>,
}

/// Exit status 2 for the user's mistakes, 1 for failures to write.
fn fail(e: &ResultsError) -> ExitCode {
    eprintln!("error: {e}");
    match e {
        ResultsError::Input(_) => ExitCode::from(2),
        ResultsError::Output(_) => ExitCode::FAILURE,
    }
}

fn print(text: &str) -> ExitCode {
    let mut out = std::io::stdout().lock();
    // A closed stdout (`| head`) is not worth a panic.
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(_) => ExitCode::FAILURE,
    }
}

/// `verso bench compare`.
pub fn run_compare(args: &CompareArgs) -> ExitCode {
    let table = results::load_all(&args.files)
        .and_then(|files| compare::compare(&files, args.all))
        .map(|c| c.render());
    match table {
        Ok(text) => print(&text),
        Err(e) => fail(&e),
    }
}

/// `verso bench plot`.
pub fn run_plot(args: &PlotArgs) -> ExitCode {
    let opts = plot::PlotOptions {
        out_dir: args.out.clone(),
        x: args.x.clone(),
        y: args.y.clone(),
    };
    let plotted = match results::load_all(&args.files).and_then(|f| plot::plot(&f, &opts)) {
        Ok(p) => p,
        Err(e) => return fail(&e),
    };
    for note in &plotted.notes {
        eprintln!("note: {note}");
    }
    let mut text = String::new();
    for path in &plotted.written {
        text.push_str(&format!("wrote {}\n", path.display()));
    }
    print(&text)
}

/// Appends a report's two CSV lines (`--csv`, from `results::csv::from_report`) to
/// `text`; on failure says why on stderr and returns the exit status.
pub fn push_csv(text: &mut String, csv: Result<String, serde_json::Error>) -> Result<(), ExitCode> {
    match csv {
        Ok(lines) => {
            text.push_str(&lines);
            Ok(())
        }
        Err(e) => {
            eprintln!("error: cannot write the report as CSV: {e}");
            Err(ExitCode::FAILURE)
        }
    }
}
