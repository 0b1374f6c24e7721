//! The simulator over many seeds, each fault profile and both modes: every run must pass
//! every check. A failure prints its seed and the last events; `verso sim vsr --seed N
//! --trace` replays it.

use verso_vsr::Mode;
use verso_vsr_sim::{run, Faults, SimConfig};

fn sweep(first: u64, seeds: u64, faults: Faults, mode: Mode) -> (u64, u64) {
    sweep_with(first, seeds, faults, mode, 3)
}

fn sweep_with(first: u64, seeds: u64, faults: Faults, mode: Mode, replicas: u8) -> (u64, u64) {
    let (mut acked, mut lost) = (0, 0);
    for seed in first..first + seeds {
        let mut cfg = SimConfig::new(seed);
        cfg.faults = faults;
        cfg.mode = mode;
        cfg.replicas = replicas;
        cfg.clients = usize::from(replicas);
        match run(&cfg) {
            Ok(o) => {
                acked += o.ops_acknowledged;
                lost += o.ops_lost;
            }
            Err(f) => panic!("{f}"),
        }
    }
    (acked, lost)
}

#[test]
fn without_faults_nothing_is_lost() {
    let (acked, lost) = sweep(0, 200, Faults::None, Mode::Lazy);
    assert_eq!(acked, 200 * 3 * 30);
    assert_eq!(lost, 0);
}

#[test]
fn minority_faults_lose_nothing_acknowledged() {
    let (acked, lost) = sweep(1_000_000, 3_000, Faults::Minority, Mode::Lazy);
    assert!(acked > 0);
    assert_eq!(lost, 0);
}

/// The thesis's property 3 as stated (a crash while another replica lags). Failed before
/// restarted replicas stayed out of elections until recovered (`replica::recovery`; seed
/// 5000013 lost acknowledged operations; `mistakes.rs` reintroduces it). A restarted
/// replica counts as failed until it recovered (`Faults::Lagging`), as a recovering one
/// does in Viewstamped Replication Revisited.
#[test]
fn crashes_beside_a_lagging_replica_lose_nothing_acknowledged() {
    let (acked, lost) = sweep(5_000_000, 3_000, Faults::Lagging, Mode::Lazy);
    assert!(acked > 0);
    assert_eq!(lost, 0);
}

#[test]
fn total_crashes_lose_only_suffixes_never_durable_operations() {
    let (acked, lost) = sweep(2_000_000, 5_000, Faults::Total, Mode::Lazy);
    assert!(acked > 0);
    // The sweep must reach the interesting case: a total crash that loses something.
    assert!(
        lost > 0,
        "no seed lost anything: the total crashes are not biting"
    );
}

#[test]
fn five_replicas_pass_the_same_checks() {
    let (acked, _) = sweep_with(3_000_000, 1_000, Faults::Total, Mode::Lazy, 5);
    assert!(acked > 0);
}

#[test]
fn vsr_sync_mode_passes_the_same_checks() {
    // VSR-Sync acknowledges only what is on a majority's disks: nothing is ever lost.
    let (_, lost) = sweep(4_000_000, 1_000, Faults::Total, Mode::Sync);
    assert_eq!(lost, 0);
}

/// Disks write checkpoints aside, letting appends, syncs and truncations that keep what
/// they cover pass them, and report each one durable: the runs above go through that, not
/// around it.
#[test]
fn checkpoints_are_written_aside_and_reported() {
    let (mut durable, mut passed) = (0, 0);
    for seed in 6_000_000..6_000_300 {
        let mut cfg = SimConfig::new(seed);
        cfg.faults = Faults::Total;
        let o = run(&cfg).unwrap_or_else(|f| panic!("{f}"));
        durable += o.checkpoints_durable;
        passed += o.passed_checkpoints;
    }
    assert!(durable > 100, "{durable} checkpoints reported durable");
    assert!(
        passed > 100,
        "{passed} writes and syncs went ahead of a checkpoint"
    );
}

#[test]
fn a_seed_reproduces_its_run() {
    let mut cfg = SimConfig::new(77);
    cfg.faults = Faults::Total;
    let a = run(&cfg).expect("passes");
    let b = run(&cfg).expect("passes");
    assert_eq!(
        (a.messages, a.virtual_ms, a.ops_lost, a.crashes),
        (b.messages, b.virtual_ms, b.ops_lost, b.crashes)
    );
}
