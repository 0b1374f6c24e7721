//! NCC's servers and the baselines with each shard's group made of three real Lazy VSR
//! replicas (`verso_ncc::replicated::VsrReplicated`, `verso sim ncc --replicated ... --vsr`)
//! instead of the model of `tests/replicated.rs`: the same claims, now against the log's
//! own view changes, lost suffixes, torn disk writes and recoveries (issue 18 item 3: the
//! servers' NCC state in the real `verso-vsr` log).

mod common;

use common::{assert_passed, seeds};
use verso_ncc::replicated::{Durability, ReplicationModel};
use verso_ncc::ProtocolKind;

fn real(durability: Durability) -> ReplicationModel {
    ReplicationModel {
        durability,
        real_replicas: true,
        ..ReplicationModel::default()
    }
}

/// VSR-Sync replicas: primaries crash and whole groups crash, clients crash and pause, and
/// every run stays strictly serializable with every answered input in the log.
#[test]
fn real_sync_groups_survive_failovers_and_total_crashes() {
    let (total, failed) = seeds(0..150, |o| {
        o.replication = Some(real(Durability::Sync));
        o.group_failovers = 2;
        o.group_total_crashes = 1;
        o.crash_percent = 20;
        o.pause_percent = 20;
        o.recovery_after = Some(5_000);
    });
    assert_passed(&failed);
    let r = total.replication;
    assert_eq!(r.total_crashes, 150 * 3);
    assert!(r.failovers > 150 * 3, "{r:?}");
    // Failovers and total crashes lost inputs in flight (and the runs passed anyway).
    assert!(r.uncommitted_lost > 0, "{r:?}");
    assert!(total.recovered_commits > 0, "{total:?}");
}

/// A lazy log whose answers are `sync` requests (each waits for a majority's disks): total
/// crashes lose only inputs nobody heard about, so NCC stays strictly serializable, with
/// message loss and restarted clients too.
#[test]
fn real_lazy_groups_with_answers_on_disk_survive_total_crashes() {
    let (total, failed) = seeds(0..100, |o| {
        o.replication = Some(real(Durability::LazyAnswersOnDisk));
        o.group_failovers = 2;
        o.group_total_crashes = 2;
        o.loss_percent = 5;
        o.crash_percent = 10;
        o.restart_crashed = true;
        o.text_keys = true;
    });
    assert_passed(&failed);
    let r = total.replication;
    assert_eq!(r.total_crashes, 100 * 3 * 2);
    assert!(r.uncommitted_lost > 0, "{r:?}");
}

/// The baselines' state goes through the same log.
#[test]
fn the_baselines_survive_total_crashes_of_real_groups() {
    for protocol in [
        ProtocolKind::Docc,
        ProtocolKind::D2plNoWait,
        ProtocolKind::D2plWoundWait,
        ProtocolKind::TapirCc,
    ] {
        let (_, failed) = seeds(0..50, |o| {
            o.protocol = protocol;
            o.replication = Some(real(Durability::LazyAnswersOnDisk));
            o.group_failovers = 1;
            o.group_total_crashes = 1;
        });
        assert_passed(&failed);
    }
}

/// Plain Lazy VSR answers once an input is in a majority's memory: a total crash loses
/// answered inputs and runs break, as under the model. What issue 19 item 3 must prevent.
/// The same seed with answers on disk passes: the durability is what broke it.
#[test]
fn total_crashes_of_real_lazy_groups_lose_answered_state() {
    // Seed by seed until one breaks (about every other one does): a broken run often ends
    // only at the simulator's time limit, which costs seconds in a test build.
    for seed in 0..40 {
        let (_, failed) = seeds(seed..seed + 1, |o| {
            o.replication = Some(real(Durability::Lazy));
            o.group_total_crashes = 2;
        });
        if !failed.is_empty() {
            let (_, control) = seeds(seed..seed + 1, |o| {
                o.replication = Some(real(Durability::LazyAnswersOnDisk));
                o.group_total_crashes = 2;
            });
            assert_passed(&control);
            return;
        }
    }
    panic!("no run of 40 broke");
}

/// Answers that leave when the primary executes their input, before the log commits it,
/// are caught.
#[test]
fn answers_before_commit_are_caught_with_real_groups() {
    let faults = |o: &mut verso_ncc::sim::SimOptions| {
        o.group_failovers = 3;
        o.group_total_crashes = 1;
    };
    let (_, failed) = seeds(0..8, |o| {
        o.replication = Some(ReplicationModel {
            answers_before_commit: true,
            ..real(Durability::Sync)
        });
        faults(o);
    });
    assert!(!failed.is_empty(), "nothing caught");
    // The same seeds without the mistake pass.
    let (_, control) = seeds(0..8, |o| {
        o.replication = Some(real(Durability::Sync));
        faults(o);
    });
    assert_passed(&control);
}

/// Read-only reads answered outside the log by real replicas' hosts under the read lease
/// (`server/unlogged.rs`), half of them sent to a deposed host while one exists (it must
/// drop them: its lease ran out before a successor could lead): runs with failovers stay
/// strictly serializable. (Answering without the lease was not caught in 2,000 seeds, a
/// deposed host's reads mostly waiting behind inputs that never commit, so no such mistake
/// is claimed here.)
#[test]
fn unlogged_reads_under_the_read_lease_survive_failovers() {
    let (total, failed) = seeds(0..300, |o| {
        o.replication = Some(real(Durability::Sync));
        o.group_failovers = 3;
        o.keys = 3;
    });
    assert_passed(&failed);
    let r = total.replication;
    assert!(r.reads_unlogged > 1_000 && r.floor_promises > 100, "{r:?}");
}
