//! The `verso` binary's contract: help, clear errors with non-zero exit codes on bad flags,
//! and a JSON object as the last stdout line.

use std::process::{Command, Output};

fn verso(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_verso"))
        .args(args)
        .output()
        .expect("verso runs")
}

#[test]
fn help_lists_the_benchmark() {
    let out = verso(&["--help"]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("bench"));
    let out = verso(&["bench", "ycsb", "--help"]);
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    for flag in [
        "--keys",
        "--read-ratio",
        "--raw-index",
        "--long-readers",
        "--timestamps",
        "1 transaction in 16",
    ] {
        assert!(help.contains(flag), "help lacks {flag}");
    }
}

#[test]
fn bad_flags_fail_cleanly() {
    let cases: &[(&[&str], &str)] = &[
        (&["--read-ratio", "150"], "read-ratio"),
        (&["--keys", "0"], "keys"),
        (&["--dist", "zipf", "--theta", "1"], "theta"),
        (&["--dist", "zipf", "--theta", "-0.5"], "theta"),
        (&["--value-size", "1000000000"], "value-size"),
        (&["--duration", "-1"], "duration"),
        (&["--threads", "0"], "threads"),
        (&["--dist", "pareto"], "dist"),
        (&["--timestamps", "sundial"], "timestamps"),
        (&["--keys", "many"], "keys"),
    ];
    for (args, flag) in cases {
        let out = verso(&[&["bench", "ycsb"], *args].concat());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains("error") && stderr.contains(flag),
            "{args:?}: {stderr}"
        );
        assert!(!stderr.contains("panicked"), "{args:?} panicked: {stderr}");
    }
}

#[test]
fn json_is_the_last_stdout_line() {
    let out = verso(&[
        "bench",
        "ycsb",
        "--keys",
        "5000",
        "--duration",
        "0.2",
        "--warmup",
        "0.05",
        "--threads",
        "2",
        "--read-ratio",
        "50",
        "--json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    let last = stdout.lines().last().expect("some output");
    let json: serde_json::Value = serde_json::from_str(last).expect("last line is JSON");
    assert!(json["commits"].as_u64() > Some(0));
    assert_eq!(json["keys"], 5000);
    assert_eq!(json["read_ratio"], 50);
    // Progress goes to stderr, never stdout.
    assert!(!stdout.contains("t=0s") && !stdout.contains("t=1s"));
    assert!(
        stdout.lines().count() > 3,
        "the summary table precedes the JSON"
    );
}
