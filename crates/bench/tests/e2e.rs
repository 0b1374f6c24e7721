//! Short end-to-end runs of `ycsb::run`: every mode commits, reports sane numbers, and its
//! JSON carries the fields scripts rely on.

use verso_bench::core_workloads::CoreWorkload;
use verso_bench::ycsb::{self, YcsbConfig};
use verso_bench::{BenchError, Dist, Progress};
use verso_engine::TimestampSource;

/// The JSON fields the benchmark's consumers read.
const REQUIRED: &[&str] = &[
    "txn_per_sec",
    "abort_rate",
    "p50_us",
    "p99_us",
    "p999_us",
    "peak_rss_bytes",
    "commits",
    "aborts",
    "threads",
    "keys",
    "value_size",
    "ops_per_txn",
    "read_ratio",
    "scan_length",
    "dist",
    "theta",
    "duration_s",
    "timestamps",
    "raw_index",
    "long_readers",
    "long_reader_txns",
    "load_seconds",
    "latency_sample_every",
    "machine",
];

fn short(f: impl FnOnce(&mut YcsbConfig)) -> YcsbConfig {
    let mut cfg = YcsbConfig {
        keys: 10_000,
        duration_s: 0.3,
        warmup_s: 0.1,
        threads: 2,
        read_ratio: 50,
        progress: Progress::Quiet,
        ..YcsbConfig::default()
    };
    f(&mut cfg);
    cfg
}

/// Runs `cfg`, checks what holds for every run, and returns the parsed JSON.
fn run_and_check(cfg: &YcsbConfig) -> serde_json::Value {
    let report = ycsb::run(cfg).unwrap_or_else(|e| panic!("run failed: {e}"));
    assert!(report.commits > 0, "nothing committed");
    assert!(
        (0.0..=1.0).contains(&report.abort_rate),
        "abort rate {}",
        report.abort_rate
    );
    assert!(report.txn_per_sec > 0.0);
    assert!(report.p50_us <= report.p99_us && report.p99_us <= report.p999_us);
    assert!(report.load_seconds > 0.0);
    assert!(
        (report.duration_s - cfg.duration_s).abs() < 0.25,
        "window {} s",
        report.duration_s
    );

    let json: serde_json::Value = serde_json::from_str(&report.to_json()).expect("JSON parses");
    let obj = json.as_object().expect("a JSON object");
    for field in REQUIRED {
        assert!(obj.contains_key(*field), "JSON lacks {field}");
    }
    assert_eq!(json["threads"], cfg.threads);
    assert_eq!(json["keys"], cfg.keys);
    assert_eq!(json["raw_index"], cfg.raw_index);
    assert_eq!(json["latency_sample_every"], 16);
    assert_eq!(json["commits"], report.commits);
    let machine = &json["machine"];
    assert!(machine["cpu_model"].is_string() && machine["cores"].as_u64() >= Some(1));
    assert!(machine["unix_time"].as_u64() > Some(1_600_000_000));
    if cfg!(target_os = "linux") {
        assert!(report.peak_rss_bytes > 0);
    }
    assert!(report.summary().contains("throughput"));
    json
}

#[test]
fn engine_mixed_reads_and_writes() {
    let json = run_and_check(&short(|_| {}));
    let ts = json["timestamps"].as_str().unwrap();
    assert!(
        ["rdtsc", "atomic", "mutex"].contains(&ts),
        "timestamps {ts}"
    );
    // Half the ops write, so versions were installed during the window.
    assert!(json["engine"]["versions_installed"].as_u64() > Some(0));
}

#[test]
fn engine_scans() {
    let json = run_and_check(&short(|c| c.scan_length = 50));
    assert_eq!(json["scan_length"], 50);
    assert_eq!(json["aborts"], 0, "read-only scans never conflict");
}

#[test]
fn raw_index_reads_and_writes() {
    let json = run_and_check(&short(|c| c.raw_index = true));
    assert_eq!(json["timestamps"], "none");
    assert_eq!(json["aborts"], 0);
    assert!(json["engine"].is_null());
}

#[test]
fn raw_index_scans() {
    run_and_check(&short(|c| {
        c.raw_index = true;
        c.scan_length = 20;
        c.threads = 1;
    }));
}

#[test]
fn contended_zipf_writes_retry_and_commit() {
    // 100 keys, 8 writes per transaction, 2 threads: conflicts are likely; every one must
    // be retried to commit and counted, never surfaced as an error.
    let json = run_and_check(&short(|c| {
        c.keys = 100;
        c.dist = Dist::Zipf;
        c.ops_per_txn = 8;
        c.read_ratio = 0;
        c.timestamps = TimestampSource::Atomic;
    }));
    assert_eq!(json["timestamps"], "atomic");
    assert_eq!(json["dist"], "zipf");
}

#[test]
fn long_readers_are_counted_separately() {
    let json = run_and_check(&short(|c| {
        c.long_readers = 1;
        c.threads = 1;
    }));
    assert_eq!(json["long_readers"], 1);
    assert_eq!(json["long_reader_reads"], 100);
    assert!(
        json["long_reader_txns"].as_u64() > Some(0),
        "no long reader finished in the window"
    );
    assert!(json["long_reader_avg_ms"].as_f64() > Some(0.0));
}

#[test]
fn no_warmup_and_tiny_values_work() {
    run_and_check(&short(|c| {
        c.warmup_s = 0.0;
        c.value_size = 0;
        c.threads = 3;
        c.keys = 2;
    }));
}

#[test]
fn bad_configurations_are_config_errors() {
    let bad = [
        short(|c| c.keys = 0),
        short(|c| c.read_ratio = 150),
        short(|c| c.ops_per_txn = 0),
        short(|c| c.threads = 0),
        short(|c| c.duration_s = 0.0),
        short(|c| c.duration_s = f64::NAN),
        short(|c| c.warmup_s = -1.0),
        short(|c| c.value_size = verso_engine::VALUE_SIZE_MAX_DEFAULT + 1),
        short(|c| {
            c.dist = Dist::Zipf;
            c.theta = 1.0;
        }),
        short(|c| {
            c.dist = Dist::Zipf;
            c.theta = 0.0;
        }),
        short(|c| c.keys = u64::MAX),
        short(|c| {
            c.workload = Some(CoreWorkload::A);
            c.raw_index = true;
        }),
        short(|c| {
            c.workload = Some(CoreWorkload::E);
            c.scan_length = 10;
        }),
    ];
    for cfg in bad {
        match ycsb::run(&cfg) {
            Err(BenchError::Config(msg)) => {
                assert!(msg.contains("--"), "message names no flag: {msg}")
            }
            other => panic!("{cfg:?} gave {other:?}"),
        }
    }
    // Theta is only checked where it is used.
    let uniform = short(|c| c.theta = 1.0);
    assert!(uniform.validate().is_ok());
}

#[test]
fn every_core_workload_runs() {
    for w in CoreWorkload::ALL {
        let json = run_and_check(&short(|c| {
            c.workload = Some(w);
            c.dist = Dist::Zipf;
        }));
        assert_eq!(json["workload"], w.to_string());
        let engine = &json["engine"];
        let writes = engine["versions_installed"].as_u64().unwrap();
        // C and E(ish) read; the others write during the window.
        match w {
            CoreWorkload::C => assert_eq!(writes, 0, "C wrote"),
            _ => assert!(writes > 0, "{w} wrote nothing"),
        }
    }
}
