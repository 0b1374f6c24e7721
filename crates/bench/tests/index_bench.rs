//! Short end-to-end runs of `index_bench::run`: every index runs every workload, counts
//! operations of the kinds the workload does, rw1 reads back every key with its value, and
//! the JSON carries the fields scripts rely on.

use verso_bench::index_bench::{self, IndexBenchConfig, IndexName, IndexWorkload, KeyFormat};
use verso_bench::{BenchError, Progress};

/// The JSON fields the benchmark's consumers read.
const REQUIRED: &[&str] = &[
    "benchmark",
    "index",
    "workload",
    "key_format",
    "keys",
    "threads",
    "puts_per_sec",
    "gets_per_sec",
    "scans_per_sec",
    "peak_rss_bytes",
    "bytes_per_key",
    "duration_s",
    "seed",
    "machine",
];

fn tiny(index: IndexName, workload: IndexWorkload) -> IndexBenchConfig {
    IndexBenchConfig {
        index,
        workload,
        keys: 2_000,
        threads: 2,
        duration_s: 0.2,
        scan_length: 10,
        progress: Progress::Quiet,
        ..IndexBenchConfig::default()
    }
}

/// Runs `cfg`, checks what holds for every run, and returns the parsed JSON.
fn run_and_check(cfg: &IndexBenchConfig) -> serde_json::Value {
    let what = format!("{} {} {}", cfg.index, cfg.workload, cfg.key_format);
    let r = index_bench::run(cfg).unwrap_or_else(|e| panic!("{what}: run failed: {e}"));
    let (puts, gets, scans) = match cfg.workload {
        IndexWorkload::Rw1 | IndexWorkload::YcsbA => (true, true, false),
        IndexWorkload::Get | IndexWorkload::YcsbC => (false, true, false),
        IndexWorkload::Put => (true, false, false),
        IndexWorkload::Scan => (false, false, true),
    };
    assert_eq!(r.puts > 0, puts, "{what}: {} puts", r.puts);
    assert_eq!(r.gets > 0, gets, "{what}: {} gets", r.gets);
    assert_eq!(r.scans > 0, scans, "{what}: {} scans", r.scans);
    assert_eq!(r.puts_per_sec > 0.0, puts, "{what}");
    assert_eq!(r.gets_per_sec > 0.0, gets, "{what}");
    assert_eq!(r.scans_per_sec > 0.0, scans, "{what}");
    // Every key is loaded before the gets, so only an index whose overwrite is not atomic
    // (the skiplist's unlinks the old entry first) can miss one, and only while puts run.
    if cfg.index != IndexName::Skiplist || !puts {
        assert_eq!(r.get_misses, 0, "{what}");
    }
    if scans {
        // Starts near the end of the key space see fewer entries, but most see them all.
        let per_scan = r.scan_entries as f64 / r.scans as f64;
        assert!(per_scan > 5.0 && per_scan <= 10.0, "{what}: {per_scan}");
    }
    if cfg.workload == IndexWorkload::Rw1 {
        let rw1 = r.rw1.as_ref().expect("rw1 details");
        // Every key was read back and its value checked (a mismatch is an error above).
        assert_eq!(r.gets, r.puts, "{what}");
        assert_eq!(rw1.per_thread.len(), cfg.threads);
        assert!(rw1
            .per_thread
            .iter()
            .all(|t| t.puts > 0 && t.gets == t.puts));
        let total: f64 = rw1.per_thread.iter().map(|t| t.gets_per_sec).sum();
        assert!((total - r.gets_per_sec).abs() <= 1e-6 * total, "{what}");
        if cfg!(target_os = "linux") {
            assert!(rw1.puts_per_cpu_sec_per_thread > Some(0.0));
            assert!(rw1.gets_per_cpu_sec_per_thread > Some(0.0));
        }
    } else {
        assert!(r.rw1.is_none());
        assert!(r.load_seconds > 0.0);
        assert!(
            (r.duration_s - cfg.duration_s).abs() < 0.2,
            "{what}: window {} s",
            r.duration_s
        );
    }
    if cfg!(target_os = "linux") {
        assert!(r.peak_rss_bytes > 0);
        assert!(r.bytes_per_key.is_some(), "{what}: no bytes_per_key");
        let cpu = r.cpu_seconds.expect("cpu_seconds");
        assert!(
            cpu > 0.0 && r.ops_per_cpu_sec > Some(0.0),
            "{what}: cpu {cpu}"
        );
        // A worker cannot run longer than the wall clock (a little slack for the edges).
        assert!(
            r.cpu_share <= Some(1.1),
            "{what}: cpu share {:?}",
            r.cpu_share
        );
    }
    assert!(r.summary().contains(cfg.index.name()));

    let json: serde_json::Value = serde_json::from_str(&r.to_json()).expect("JSON parses");
    let obj = json.as_object().expect("a JSON object");
    for field in REQUIRED {
        assert!(obj.contains_key(*field), "{what}: JSON lacks {field}");
    }
    assert_eq!(json["benchmark"], "index");
    assert_eq!(json["index"], cfg.index.name());
    assert_eq!(json["workload"], cfg.workload.name());
    assert_eq!(json["threads"], cfg.threads);
    assert!(json["puts_per_sec"].is_f64() && json["gets_per_sec"].is_f64());
    let machine = &json["machine"];
    assert!(machine["cpu_model"].is_string() && machine["cores"].as_u64() >= Some(1));
    json
}

#[test]
fn every_index_runs_every_workload() {
    for &index in IndexName::ALL {
        for &workload in IndexWorkload::ALL {
            run_and_check(&tiny(index, workload));
        }
    }
}

#[test]
fn every_index_takes_every_key_format() {
    for &index in IndexName::ALL {
        for &key_format in KeyFormat::ALL {
            for workload in [IndexWorkload::YcsbA, IndexWorkload::Scan] {
                let json = run_and_check(&IndexBenchConfig {
                    key_format,
                    duration_s: 0.1,
                    ..tiny(index, workload)
                });
                assert_eq!(json["key_format"], key_format.name());
            }
        }
    }
}

#[test]
fn one_thread_and_one_key() {
    for &index in IndexName::ALL {
        run_and_check(&IndexBenchConfig {
            keys: 1,
            threads: 1,
            duration_s: 0.05,
            ..tiny(index, IndexWorkload::Get)
        });
    }
}

#[test]
fn rw1_reports_decimal_keys_whatever_the_flag() {
    let json = run_and_check(&IndexBenchConfig {
        key_format: KeyFormat::LongPrefix,
        ..tiny(IndexName::Masstree, IndexWorkload::Rw1)
    });
    assert_eq!(json["key_format"], "decimal");
    assert!(json["rw1"]["per_thread"].is_array());
}

#[test]
fn bad_configurations_are_config_errors() {
    let base = tiny(IndexName::Masstree, IndexWorkload::Get);
    let bad = [
        IndexBenchConfig {
            keys: 0,
            ..base.clone()
        },
        IndexBenchConfig {
            keys: u64::MAX,
            ..base.clone()
        },
        IndexBenchConfig {
            threads: 0,
            ..base.clone()
        },
        IndexBenchConfig {
            threads: 100_000,
            ..base.clone()
        },
        IndexBenchConfig {
            duration_s: 0.0,
            ..base.clone()
        },
        IndexBenchConfig {
            duration_s: f64::NAN,
            ..base.clone()
        },
        IndexBenchConfig {
            duration_s: -1.0,
            ..base.clone()
        },
        IndexBenchConfig {
            workload: IndexWorkload::Scan,
            scan_length: 0,
            ..base.clone()
        },
        IndexBenchConfig {
            workload: IndexWorkload::YcsbC,
            theta: 1.0,
            ..base.clone()
        },
    ];
    for cfg in bad {
        match index_bench::run(&cfg) {
            Err(BenchError::Config(_)) => {}
            other => panic!("{cfg:?} gave {:?}", other.map(|r| r.to_json())),
        }
    }
    assert!("nope".parse::<IndexName>().is_err());
    assert!("ycsb-b".parse::<IndexWorkload>().is_err());
    assert!("int32".parse::<KeyFormat>().is_err());
    assert_eq!(
        "btree-rwlock".parse::<IndexName>(),
        Ok(IndexName::BtreeRwlock)
    );
    assert_eq!(
        "long-prefix".parse::<KeyFormat>(),
        Ok(KeyFormat::LongPrefix)
    );
}
