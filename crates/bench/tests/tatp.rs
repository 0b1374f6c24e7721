//! End-to-end TATP runs: the mix, the success rates the population implies, the JSON.

use verso_bench::tatp::{self, TatpConfig};
use verso_bench::{BenchError, Progress};

fn short(threads: usize) -> TatpConfig {
    TatpConfig {
        subscribers: 5_000,
        threads,
        duration_s: 0.5,
        warmup_s: 0.1,
        progress: Progress::Quiet,
        ..TatpConfig::default()
    }
}

#[test]
fn tatp_runs_the_standard_mix_with_the_expected_outcomes() {
    for threads in [1, 2] {
        let r = tatp::run(&short(threads)).unwrap_or_else(|e| panic!("run failed: {e}"));
        let total: u64 = r.per_type.iter().map(|t| t.count).sum();
        assert!(total > 1000, "only {total} transactions");
        let share = |name: &str| {
            let t = r.per_type.iter().find(|t| t.name == name).unwrap();
            (100.0 * t.count as f64 / total as f64, t.success_rate)
        };
        for (name, pct) in [
            ("get_subscriber_data", 35.0),
            ("get_new_destination", 10.0),
            ("get_access_data", 35.0),
            ("update_subscriber_data", 2.0),
            ("update_location", 14.0),
            ("insert_call_forwarding", 2.0),
            ("delete_call_forwarding", 2.0),
        ] {
            let (got, _) = share(name);
            assert!(
                (got - pct).abs() < 1.5,
                "{name}: {got:.2}% of the mix, want {pct}%"
            );
        }
        // Rows exist for every subscriber; types 1-4 exist with probability 62.5%.
        assert_eq!(share("get_subscriber_data").1, 1.0);
        assert_eq!(share("update_location").1, 1.0);
        let (_, access) = share("get_access_data");
        assert!(
            (access - 0.625).abs() < 0.05,
            "get_access_data succeeded {access}"
        );
        let (_, upd) = share("update_subscriber_data");
        assert!(
            (upd - 0.625).abs() < 0.15,
            "update_subscriber_data succeeded {upd}"
        );
        let (_, dest) = share("get_new_destination");
        assert!(
            dest > 0.05 && dest < 0.4,
            "get_new_destination succeeded {dest}"
        );
        let json: serde_json::Value = serde_json::from_str(&r.to_json()).unwrap();
        for f in [
            "txn_per_sec",
            "abort_rate",
            "per_type",
            "load_seconds",
            "machine",
        ] {
            assert!(json.get(f).is_some(), "JSON lacks {f}");
        }
        assert!(r.summary().contains("get_access_data"));
    }
}

#[test]
fn bad_tatp_configurations_are_config_errors() {
    for cfg in [
        TatpConfig {
            subscribers: 0,
            ..short(1)
        },
        TatpConfig {
            threads: 0,
            ..short(1)
        },
        TatpConfig {
            duration_s: f64::NAN,
            ..short(1)
        },
    ] {
        assert!(matches!(tatp::run(&cfg), Err(BenchError::Config(m)) if m.contains("--")));
    }
}
