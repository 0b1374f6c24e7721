//! `--csv`, `verso bench compare` and `verso bench plot` from the command line: output
//! shapes, and exit status 2 (not a panic) on bad input.

use std::path::PathBuf;
use std::process::{Command, Output};

fn verso(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_verso"))
        .args(args)
        .output()
        .expect("verso runs")
}

fn temp_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "verso-results-cli-{tag}-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos())
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

const TINY_YCSB: &[&str] = &[
    "bench",
    "ycsb",
    "--keys",
    "2000",
    "--duration",
    "0.1",
    "--warmup",
    "0.02",
];

#[test]
fn csv_is_the_last_two_stdout_lines() {
    let out = verso(&[TINY_YCSB, &["--csv"]].concat());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    let (header, row) = (lines[lines.len() - 2], lines[lines.len() - 1]);
    assert!(header.starts_with("benchmark,txn_per_sec,"), "{header}");
    assert!(header.contains("engine.commits") && header.contains("machine.cores"));
    assert!(row.starts_with("ycsb,"), "{row}");
    assert!(header.split(',').all(|name| !name.is_empty()), "{header}");
}

#[test]
fn json_and_csv_together_are_refused() {
    let out = verso(&[TINY_YCSB, &["--json", "--csv"]].concat());
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--csv"));
}

#[test]
fn compare_and_plot_saved_runs() {
    let dir = temp_dir("cmp");
    let mut files = Vec::new();
    for threads in ["1", "2"] {
        let out = verso(&[TINY_YCSB, &["--threads", threads, "--json"]].concat());
        assert!(out.status.success());
        let path = dir.join(format!("r_{threads}.json"));
        std::fs::write(&path, &out.stdout).unwrap();
        files.push(path.to_string_lossy().into_owned());
    }
    let out = verso(&["bench", "compare", &files[0], &files[1]]);
    assert!(out.status.success());
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        table.contains("txn_per_sec") && table.contains("B/A"),
        "{table}"
    );

    let plots = dir.join("plots");
    let out = verso(&[
        "bench",
        "plot",
        &files[0],
        &files[1],
        "--out",
        &plots.to_string_lossy(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let written = String::from_utf8_lossy(&out.stdout);
    assert_eq!(written.lines().count(), 4, "{written}");
    assert!(plots.join("ycsb_txn_per_sec_vs_threads.png").is_file());

    // Bad input: a missing file, a file without JSON, mixed benchmarks.
    let junk = dir.join("junk.txt");
    std::fs::write(&junk, "no report here\n").unwrap();
    let tpcc = dir.join("t.json");
    std::fs::write(&tpcc, "{\"benchmark\":\"tpcc\",\"txn_per_sec\":1}\n").unwrap();
    let missing = dir.join("missing.json");
    for (other, want) in [
        (&missing, "cannot read"),
        (&junk, "no JSON report"),
        (&tpcc, "different benchmark kinds"),
    ] {
        let out = verso(&["bench", "compare", &files[0], &other.to_string_lossy()]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(
            stderr.contains(want) && !stderr.contains("panicked"),
            "{stderr}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
