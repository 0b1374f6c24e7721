//! The slot-move simulator over many seeds (`verso_cluster::sim`): the protocol as built
//! passes; each of the three mistakes the issue names is caught.

use verso_cluster::lazen::Mistakes;
use verso_cluster::sim::run_seeds;

/// Seeds per `cargo test` run (the issue asks for at least 1,000).
const SEEDS: u64 = 1_000;

#[test]
fn moves_keep_every_invariant_under_faults() {
    match run_seeds(1, SEEDS, Mistakes::default()) {
        Ok(stats) => {
            // The runs did what they are for: moves finished, writes were acknowledged,
            // faults and redirects happened.
            assert!(stats.moves_done >= SEEDS, "{stats:?}");
            assert!(stats.writes_acked > SEEDS * 50, "{stats:?}");
            assert!(stats.total_crashes > 0 && stats.failovers > 0, "{stats:?}");
            // Some failovers kept records the old primary never saw commit.
            assert!(stats.survived_failovers > 0, "{stats:?}");
            assert!(stats.redirects > 0 && stats.try_agains > 0, "{stats:?}");
            eprintln!("{SEEDS} seeds: {stats:?}");
        }
        Err((seed, v)) => panic!("seed {seed}: {v:?}"),
    }
}

fn caught(mistakes: Mistakes) -> (u64, String) {
    match run_seeds(1, SEEDS, mistakes) {
        Ok(stats) => panic!("{mistakes:?} went unnoticed over {SEEDS} seeds: {stats:?}"),
        Err((seed, v)) => (seed, v.what),
    }
}

#[test]
fn a_source_serving_after_it_froze_is_caught() {
    let (seed, what) = caught(Mistakes {
        source_serves_when_frozen: true,
        ..Mistakes::default()
    });
    eprintln!("caught at seed {seed}: {what}");
}

#[test]
fn a_target_serving_before_endrecv_commits_is_caught() {
    let (seed, what) = caught(Mistakes {
        target_serves_before_endrecv: true,
        ..Mistakes::default()
    });
    eprintln!("caught at seed {seed}: {what}");
}

#[test]
fn lazily_written_transfer_records_are_caught() {
    let (seed, what) = caught(Mistakes {
        lazy_transfers: true,
        ..Mistakes::default()
    });
    eprintln!("caught at seed {seed}: {what}");
}
