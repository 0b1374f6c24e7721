//! Saved results: flattening, CSV, compare and plot, on small synthetic reports.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};
use verso_bench::results::compare::{self, CHANGE_THRESHOLD};
use verso_bench::results::plot::{self, PlotOptions};
use verso_bench::results::{csv, flatten, ResultFile, ResultsError};

fn names(v: &Value) -> Vec<String> {
    flatten(v).into_iter().map(|(k, _)| k).collect()
}

fn file(name: &str, v: Value) -> ResultFile {
    match v {
        Value::Object(m) => ResultFile::from_object(Path::new(name), m).expect("a report"),
        _ => panic!("test reports are objects"),
    }
}

/// A YCSB-shaped report (the fields `verso bench plot` and `compare` look at).
fn ycsb(threads: u64, workload: &str, txn_per_sec: f64, p99_us: f64) -> Value {
    json!({
        "benchmark": "ycsb",
        "txn_per_sec": txn_per_sec,
        "abort_rate": 0.001 * threads as f64,
        "p50_us": p99_us / 4.0,
        "p99_us": p99_us,
        "p999_us": p99_us * 3.0,
        "peak_rss_bytes": 100_000_000,
        "threads": threads,
        "keys": 100_000,
        "read_ratio": 100,
        "workload": workload,
        "index": "masstree",
        "engine": { "commits": 1000 * threads, "gc_runs": 3 },
        "machine": { "cpu_model": "Test CPU, 2 GHz", "cores": 2 },
        "version": "0.1.0",
    })
}

#[test]
fn nested_objects_flatten_with_dots_in_report_order() {
    let v = json!({
        "benchmark": "tpcc",
        "txn_per_sec": 5.0,
        "per_type": {
            "new_order": { "count": 3, "p99_us": 12.5 },
            "payment": { "count": 2, "p99_us": null },
        },
        "empty": {},
        "nurand": { "c_id": 7 },
    });
    assert_eq!(
        names(&v),
        [
            "benchmark",
            "txn_per_sec",
            "per_type.new_order.count",
            "per_type.new_order.p99_us",
            "per_type.payment.count",
            "per_type.payment.p99_us",
            "nurand.c_id",
        ]
    );
    let flat = flatten(&v);
    assert_eq!(flat[3].1, json!(12.5));
    assert_eq!(flat[5].1, Value::Null);
}

#[test]
fn arrays_flatten_by_name_or_else_by_position() {
    let v = json!({
        "per_type": [
            { "name": "get_subscriber_data", "count": 35, "p99_us": 1.5 },
            { "name": "update_location", "count": 14, "p99_us": 4.0 },
        ],
        "per_thread": [ { "puts": 1 }, { "puts": 2 } ],
        "dup": [ { "name": "x", "a": 1 }, { "name": "x", "a": 2 } ],
        "plain": [10, 20],
    });
    assert_eq!(
        names(&v),
        [
            "per_type.get_subscriber_data.count",
            "per_type.get_subscriber_data.p99_us",
            "per_type.update_location.count",
            "per_type.update_location.p99_us",
            "per_thread.0.puts",
            "per_thread.1.puts",
            // Names that repeat cannot key the columns: positions do, name included.
            "dup.0.name",
            "dup.0.a",
            "dup.1.name",
            "dup.1.a",
            "plain.0",
            "plain.1",
        ]
    );
}

#[test]
fn csv_is_a_header_and_a_row_with_quoting() {
    let v = json!({
        "benchmark": "ycsb",
        "txn_per_sec": 1234.5,
        "machine": { "cpu_model": "Intel(R) Xeon(R), 2.2 GHz", "quote": "say \"hi\"" },
        "long_reader_avg_ms": null,
        "raw_index": false,
    });
    let text = csv::from_value(&v);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert!(text.ends_with('\n'));
    assert_eq!(
        lines[0],
        "benchmark,txn_per_sec,machine.cpu_model,machine.quote,long_reader_avg_ms,raw_index"
    );
    assert_eq!(
        lines[1],
        "ycsb,1234.5,\"Intel(R) Xeon(R), 2.2 GHz\",\"say \"\"hi\"\"\",,false"
    );
    assert_eq!(csv::escape("a\nb"), "\"a\nb\"");
    assert_eq!(csv::escape("plain"), "plain");
}

#[test]
fn csv_of_a_typed_report_goes_through_its_json() {
    #[derive(serde::Serialize)]
    struct Tiny {
        benchmark: &'static str,
        rate: f64,
        inner: Option<Inner>,
    }
    #[derive(serde::Serialize)]
    struct Inner {
        n: u64,
    }
    let r = Tiny {
        benchmark: "tiny",
        rate: 2.5,
        inner: Some(Inner { n: 4 }),
    };
    assert_eq!(
        csv::from_report(&r).unwrap(),
        "benchmark,rate,inner.n\ntiny,2.5,4\n"
    );
}

#[test]
fn result_files_are_the_last_json_line_or_a_whole_json_file() {
    let saved = concat!(
        "verso bench ycsb: 1 thread\n",
        "  throughput 1 M txn/s\n",
        "{\"benchmark\":\"ycsb\",\"txn_per_sec\":7}\n\n",
    );
    let f = ResultFile::parse(Path::new("run.txt"), saved).unwrap();
    assert_eq!(f.benchmark, "ycsb");
    assert_eq!(f.number("txn_per_sec"), Some(7.0));
    let pretty = "{\n  \"benchmark\": \"tpcc\",\n  \"threads\": 2\n}\n";
    let f = ResultFile::parse(Path::new("run.json"), pretty).unwrap();
    assert_eq!(f.benchmark, "tpcc");
    for (text, want) in [
        ("", "empty"),
        ("just a summary\n", "no JSON report"),
        ("[1, 2]\n", "no JSON report"),
        ("{\"txn_per_sec\": 1}\n", "no \"benchmark\" field"),
    ] {
        match ResultFile::parse(Path::new("bad.txt"), text) {
            Err(ResultsError::Input(m)) => {
                assert!(m.contains(want) && m.contains("bad.txt"), "{m}")
            }
            other => panic!("{text:?}: {other:?}"),
        }
    }
    match ResultFile::load(Path::new("/nonexistent/verso/result.json")) {
        Err(ResultsError::Input(m)) => assert!(m.contains("cannot read"), "{m}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn write_ratio_is_derived_from_the_read_ratio() {
    let f = file("a", json!({ "benchmark": "ycsb", "read_ratio": 80 }));
    assert_eq!(f.number("write_ratio"), Some(20.0));
}

#[test]
fn compare_gives_ratios_to_the_first_file_and_marks_changes() {
    let a = file("a.json", ycsb(1, "custom", 1_000_000.0, 10.0));
    let b = file("b.json", ycsb(2, "custom", 1_900_000.0, 10.2));
    let c = compare::compare(&[a.clone(), b.clone()], false).unwrap();
    assert_eq!(c.benchmark, "ycsb");
    let row = |field: &str| c.rows.iter().find(|r| r.field == field);
    let tps = row("txn_per_sec").expect("key field shown");
    assert_eq!(tps.values, [1_000_000.0, 1_900_000.0]);
    assert!((tps.ratios[0].unwrap() - 1.9).abs() < 1e-12);
    assert!(tps.changed);
    let p99 = row("p99_us").unwrap();
    assert!((p99.ratios[0].unwrap() - 1.02).abs() < 1e-12);
    assert!(!p99.changed, "2% is within ±{CHANGE_THRESHOLD}");
    // Key fields first, in their order; then the rest.
    assert_eq!(c.rows[0].field, "txn_per_sec");
    let first_other = c.rows.iter().position(|r| !r.key).unwrap();
    assert!(c.rows[first_other..].iter().all(|r| !r.key));
    // Unchanged non-key fields are left out unless --all.
    assert!(row("keys").is_none() && row("engine.gc_runs").is_none());
    assert!(row("threads").is_some_and(|r| r.changed));
    assert!(row("engine.commits").is_some());
    let all = compare::compare(&[a, b], true).unwrap();
    assert!(all.rows.iter().any(|r| r.field == "engine.gc_runs"));
    assert!(all.rows.iter().any(|r| r.field == "machine.cores"));
    // The table names the files, their differing configuration, and the ratio column.
    let text = c.render();
    assert!(
        text.contains("a.json") && text.contains("threads=2"),
        "{text}"
    );
    assert!(text.contains("B/A") && text.contains("1.900"), "{text}");
}

#[test]
fn compare_refuses_mismatched_or_too_few_files() {
    let a = file("a.json", ycsb(1, "a", 1.0, 1.0));
    let t = file(
        "t.json",
        json!({ "benchmark": "tpcc", "txn_per_sec": 2.0, "threads": 1 }),
    );
    match compare::compare(&[a.clone(), t], false) {
        Err(ResultsError::Input(m)) => {
            assert!(
                m.contains("different benchmark") && m.contains("tpcc"),
                "{m}"
            )
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        compare::compare(&[a], false),
        Err(ResultsError::Input(_))
    ));
}

#[test]
fn compare_handles_a_zero_base() {
    let a = file(
        "a",
        json!({ "benchmark": "x", "abort_rate": 0.0, "aborts": 0 }),
    );
    let b = file(
        "b",
        json!({ "benchmark": "x", "abort_rate": 0.1, "aborts": 0 }),
    );
    let c = compare::compare(&[a, b], true).unwrap();
    assert_eq!(c.rows[0].field, "abort_rate");
    assert_eq!(c.rows[0].ratios, [None]);
    assert!(c.rows[0].changed);
    assert_eq!(c.rows[1].ratios, [Some(1.0)]);
    assert!(c.render().contains("n/a"));
}

fn temp_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "verso-results-{tag}-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos())
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn plot_writes_svg_and_png_charts() {
    let files = [
        file("r1.json", ycsb(1, "custom", 1_000_000.0, 2.0)),
        file("r2.json", ycsb(2, "custom", 1_800_000.0, 2.5)),
        file("r4.json", ycsb(4, "custom", 3_000_000.0, 4.0)),
        file("ra.json", ycsb(1, "a", 700_000.0, 3.0)),
        file("ra2.json", ycsb(2, "a", 1_200_000.0, 5.0)),
    ];
    let dir = temp_dir("plot");
    let out = dir.join("plots");
    let opts = PlotOptions {
        out_dir: out.clone(),
        x: None,
        y: None,
    };
    let done = plot::plot(&files, &opts).unwrap();
    let want = [
        "ycsb_txn_per_sec_vs_threads.svg",
        "ycsb_txn_per_sec_vs_threads.png",
        "ycsb_latency.svg",
        "ycsb_latency.png",
    ];
    assert_eq!(done.written, want.map(|n| out.join(n)));
    for path in &done.written {
        let bytes = std::fs::read(path).unwrap();
        assert!(
            bytes.len() > 1000,
            "{} is {} bytes",
            path.display(),
            bytes.len()
        );
        if path.extension().is_some_and(|e| e == "png") {
            assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
        } else {
            let svg = String::from_utf8(bytes).unwrap();
            assert!(
                svg.starts_with("<svg") && svg.contains("workload=a"),
                "{svg:.200}"
            );
            assert!(svg.contains("worker threads") || svg.contains("latency"));
        }
    }
    // An x field nobody has is an input error, with nothing written.
    let opts = PlotOptions {
        out_dir: dir.join("none"),
        x: Some("warehouses".into()),
        y: Some("no_such_field".into()),
    };
    let only = [file(
        "i.json",
        json!({ "benchmark": "ycsb", "txn_per_sec": 1.0, "threads": 1 }),
    )];
    match plot::plot(&only, &opts) {
        Err(ResultsError::Input(m)) => assert!(m.contains("nothing to plot"), "{m}"),
        other => panic!("{other:?}"),
    }
    let _ = std::fs::remove_dir_all(&dir);
}
