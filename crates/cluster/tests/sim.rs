//! The slot-move simulator over many seeds (`verso_cluster::sim`), with abstract group logs
//! and with real Lazy VSR replicas in every data group: the protocol as built passes; each
//! of the three mistakes the issue names is caught, and so are replication mistakes.

use verso_cluster::lazen::Mistakes;
use verso_cluster::sim::{run_seeds, Sim, SimOptions, SimStats, Violation};

/// Seeds per `cargo test` run (the issue asks for at least 1,000).
const SEEDS: u64 = 1_000;

#[test]
fn moves_keep_every_invariant_under_faults() {
    match run_seeds(1, SEEDS, Mistakes::default(), false) {
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

#[test]
fn moves_over_real_replicas_keep_every_invariant_under_faults() {
    match run_seeds(1, SEEDS, Mistakes::default(), true) {
        Ok(stats) => {
            assert!(stats.moves_done >= SEEDS, "{stats:?}");
            assert!(stats.writes_acked > SEEDS * 50, "{stats:?}");
            // Primaries crashed or were cut off and others took over; whole groups crashed
            // and lost some acknowledged writes of their lazy suffix (allowed), never a
            // move record (checked).
            assert!(
                stats.failovers > SEEDS && stats.total_crashes > SEEDS,
                "{stats:?}"
            );
            assert!(stats.writes_lost_to_total_crashes > 0, "{stats:?}");
            // Some records committed in a view whose primary had not appended them.
            assert!(stats.survived_failovers > 0, "{stats:?}");
            assert!(stats.redirects > 0 && stats.try_agains > 0, "{stats:?}");
            eprintln!("{SEEDS} seeds over real replicas: {stats:?}");
        }
        Err((seed, v)) => panic!("seed {seed}: {v:?}"),
    }
}

/// Runs seeds until one fails: the seed and what broke.
fn caught_with(opts: impl Fn(u64) -> SimOptions) -> (u64, String) {
    let mut total = SimStats::default();
    for seed in 1..=SEEDS {
        match Sim::new(opts(seed)).run() {
            Ok(stats) => total.add(&stats),
            Err(Violation { what, .. }) => return (seed, what),
        }
    }
    panic!("the mistake went unnoticed over {SEEDS} seeds: {total:?}");
}

fn caught(mistakes: Mistakes, replicated: bool) -> (u64, String) {
    caught_with(|seed| {
        let mut o = SimOptions::new(seed);
        o.mistakes = mistakes;
        o.replicated = replicated;
        o
    })
}

const SOURCE_SERVES_WHEN_FROZEN: Mistakes = Mistakes {
    source_serves_when_frozen: true,
    target_serves_before_endrecv: false,
    lazy_transfers: false,
};
const TARGET_SERVES_BEFORE_ENDRECV: Mistakes = Mistakes {
    source_serves_when_frozen: false,
    target_serves_before_endrecv: true,
    lazy_transfers: false,
};
const LAZY_TRANSFERS: Mistakes = Mistakes {
    source_serves_when_frozen: false,
    target_serves_before_endrecv: false,
    lazy_transfers: true,
};

#[test]
fn a_source_serving_after_it_froze_is_caught() {
    for replicated in [false, true] {
        let (seed, what) = caught(SOURCE_SERVES_WHEN_FROZEN, replicated);
        eprintln!("replicated {replicated}: caught at seed {seed}: {what}");
    }
}

#[test]
fn a_target_serving_before_endrecv_commits_is_caught() {
    for replicated in [false, true] {
        let (seed, what) = caught(TARGET_SERVES_BEFORE_ENDRECV, replicated);
        eprintln!("replicated {replicated}: caught at seed {seed}: {what}");
    }
}

#[test]
fn lazily_written_transfer_records_are_caught() {
    for replicated in [false, true] {
        let (seed, what) = caught(LAZY_TRANSFERS, replicated);
        eprintln!("replicated {replicated}: caught at seed {seed}: {what}");
        if replicated {
            // Over real replicas the record itself is seen lost, whatever it broke next.
            assert!(what.contains("must never be lost"), "{what}");
        }
    }
}

fn caught_replicating(mistake: verso_vsr::Mistake) -> (u64, String) {
    caught_with(|seed| {
        let mut o = SimOptions::new(seed);
        o.replicated = true;
        o.vsr_mistake = Some(mistake);
        o
    })
}

/// Pitfall 20: a backup acknowledges what is only in its memory as if on its disk, so a
/// "synchronous" record counts before a majority's disks hold it.
#[test]
fn durability_claimed_too_early_is_caught_as_a_lost_move_record() {
    let (seed, what) = caught_replicating(verso_vsr::Mistake::PrepareOkCarriesOpMax);
    eprintln!("caught at seed {seed}: {what}");
    assert!(what.contains("must never be lost"), "{what}");
}

/// A replica that promised a primary its read lease votes anyway: two primaries of one
/// group answer reads at once.
#[test]
fn an_ignored_read_lease_is_caught() {
    let (seed, what) = caught_replicating(verso_vsr::Mistake::LeaseIgnored);
    eprintln!("caught at seed {seed}: {what}");
}
