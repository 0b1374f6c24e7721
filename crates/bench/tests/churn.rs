//! A short end-to-end run of `churn::run_on`: the live set holds, deleted keys' records are
//! freed, samples are taken, and the report goes through the results parser, `--csv` and
//! the plot. No timing is asserted: speed is what the benchmark measures, not what tests
//! check.

use std::path::Path;

use verso_bench::churn::{self, ChurnConfig};
use verso_bench::results::plot::{self, PlotOptions};
use verso_bench::results::ResultFile;
use verso_bench::{BenchError, Progress};
use verso_engine::{Db, Options};

fn short() -> ChurnConfig {
    ChurnConfig {
        keys: 10_000,
        threads: 2,
        duration_s: 2.0,
        sample_interval_s: 0.25,
        progress: Progress::Quiet,
        ..ChurnConfig::default()
    }
}

#[test]
fn churn_holds_the_live_set_frees_records_and_reports_a_curve() {
    let cfg = short();
    let db = Db::open(cfg.cc.apply(Options::default())).unwrap();
    let report = churn::run_on(&db, &cfg).unwrap_or_else(|e| panic!("run failed: {e}"));

    // The live set, counted here with a range read rather than taken from the report.
    let t = db.table(verso_bench::ycsb::TABLE).unwrap();
    let txn = db.begin_read_only().unwrap();
    let live = txn.range(&t, ..).unwrap().count() as u64;
    txn.commit().unwrap();
    assert_eq!(live, cfg.keys, "live set after the run");
    assert_eq!(report.live_keys_at_end, cfg.keys);
    assert!(report.live_set_constant);

    assert!(report.inserted > 0, "nothing churned");
    assert!(report.records_freed > 0, "no deleted record was freed");
    assert!(report.records_removed >= report.records_freed);
    // Once the queues are collected with nothing running, nothing of a deleted key stays
    // (an aborted insert's record is freed too, so only then is the count exact).
    assert_eq!(report.after_collect.gc_pending, 0);
    if report.aborts == 0 {
        assert_eq!(report.after_collect.records_alive, cfg.keys);
    }

    let n = report.samples.len();
    assert!(n >= 2, "{n} samples");
    assert!(report.samples.windows(2).all(|w| w[0].t_s < w[1].t_s));
    assert!(report
        .samples
        .windows(2)
        .all(|w| w[0].inserted <= w[1].inserted));
    if cfg!(target_os = "linux") {
        assert!(report.samples.iter().all(|s| s.rss_bytes > 0));
        assert!(report.rss_first_minute_bytes > 0 && report.rss_ratio > 0.0);
        assert!(report.rss_max_bytes >= report.rss_end_bytes);
    }
    assert!(report.summary().contains("RSS end/reference"));

    // The JSON round-trips through the results parser, samples included.
    let json = report.to_json();
    let parsed = ResultFile::parse(Path::new("churn.json"), &json).expect("parses");
    assert_eq!(parsed.benchmark, "churn");
    assert_eq!(parsed.number("keys"), Some(cfg.keys as f64));
    assert_eq!(parsed.number("inserted"), Some(report.inserted as f64));
    let last = &report.samples[n - 1];
    assert_eq!(
        parsed.number(&format!("samples.{}.t_s", n - 1)),
        Some(last.t_s)
    );
    assert_eq!(
        parsed.number(&format!("samples.{}.records_freed", n - 1)),
        Some(last.records_freed as f64)
    );
    assert!(parsed.config().any(|(k, _)| k == "sample_interval_s"));

    // --csv: a header and one row, without the per-sample columns.
    let csv = report.to_csv().unwrap();
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), 2);
    assert!(lines[0].starts_with("benchmark,") && !lines[0].contains("samples."));

    // `verso bench plot` draws the curve.
    let dir = std::env::temp_dir().join(format!("verso-churn-plot-{}", std::process::id()));
    let opts = PlotOptions {
        out_dir: dir.clone(),
        x: None,
        y: None,
    };
    let plotted = plot::plot(&[parsed], &opts).expect("plots");
    let names: Vec<String> = plotted
        .written
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        names,
        ["churn_rss_over_time.svg", "churn_rss_over_time.png"]
    );
    for p in &plotted.written {
        assert!(
            std::fs::metadata(p).unwrap().len() > 1000,
            "{}",
            p.display()
        );
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn bad_configurations_are_config_errors() {
    let bad = [
        ChurnConfig { keys: 1, ..short() },
        ChurnConfig {
            sample_interval_s: 0.0,
            ..short()
        },
        ChurnConfig {
            read_ratio: 101,
            ..short()
        },
        ChurnConfig {
            duration_s: f64::NAN,
            ..short()
        },
        ChurnConfig {
            threads: 0,
            ..short()
        },
    ];
    for cfg in bad {
        match churn::run(&cfg) {
            Err(BenchError::Config(msg)) => {
                assert!(msg.contains("--"), "message names no flag: {msg}")
            }
            other => panic!("{cfg:?} gave {other:?}"),
        }
    }
}
