//! A server forgets what no message can need again: versions superseded by committed ones
//! below everything in flight, and the records of transactions their clients finished.
//! The runs stay strictly serializable (the simulator checks every history, with the
//! pruned values kept aside for the checker) and what the servers hold at the end is
//! bounded by clients and keys, not by the transactions run.

mod common;

use common::{assert_passed, seeds};
use verso_ncc::sim::SimOptions;
use verso_ncc::ProtocolKind;

const TXNS: u64 = 200;

fn long_runs(o: &mut SimOptions) {
    o.txns_per_client = TXNS as usize;
}

#[test]
fn long_runs_hold_state_bounded_by_clients_and_keys() {
    let runs = 100;
    let (total, failed) = seeds(0..runs, long_runs);
    assert_passed(&failed);
    let o = SimOptions::new(0);
    let per_run = |n: usize| n as f64 / runs as f64;
    let (records, versions, keys) = (
        per_run(total.held.records),
        per_run(total.held.versions),
        per_run(total.held.keys),
    );
    eprintln!("per run: {records} records, {versions} versions over {keys} keys; {total:?}");
    assert_eq!(total.committed, runs * o.clients as u64 * TXNS);
    // Without forgetting a server keeps a record per transaction that reached it (about
    // 4 × 200 × 2 here) and every version written.
    let pairs = (o.clients * o.servers) as f64;
    assert!(records <= 3.0 * pairs, "{records} records per run");
    assert!(
        versions <= 2.0 * keys,
        "{versions} versions for {keys} keys"
    );
}

#[test]
fn forgetting_survives_duplicates_loss_and_failing_clients() {
    let (total, failed) = seeds(0..200, |o| {
        long_runs(o);
        o.txns_per_client = 60;
        o.duplicate_percent = 30;
        o.loss_percent = 10;
        o.crash_percent = 2;
        o.pause_percent = 2;
    });
    assert_passed(&failed);
    assert!(total.crashed > 0 && total.paused > 0, "{total:?}");
}

/// The baselines forget as NCC does: decided transactions below the client's mark, and
/// every version but the newest.
#[test]
fn the_baselines_hold_state_bounded_by_clients_and_keys() {
    for protocol in ProtocolKind::ALL
        .into_iter()
        .filter(|&p| p != ProtocolKind::Ncc)
    {
        let runs = 30;
        let (total, failed) = seeds(0..runs, |o| {
            long_runs(o);
            o.protocol = protocol;
        });
        assert_passed(&failed);
        let o = SimOptions::new(0);
        let records = total.held.records as f64 / runs as f64;
        let pairs = (o.clients * o.servers) as f64;
        assert!(
            records <= 3.0 * pairs,
            "{protocol:?}: {records} records per run"
        );
        assert_eq!(
            total.held.versions, total.held.keys,
            "{protocol:?}: {total:?}"
        );
    }
}

/// A crashed client's id is taken over by a new process before the recovery timeout. The
/// new one's requests say which of its own transactions are finished, and must not make
/// the servers treat the dead one's unfinished transaction as finished: its backup
/// coordinator still decides it (a run that leaves it undecided, or keeps a record the
/// marks call finished, fails). With one mark per client ("everything below") this fails
/// at seed 0.
#[test]
fn a_client_id_taken_over_after_a_crash_leaves_the_dead_ones_transaction_decidable() {
    let (total, failed) = seeds(0..400, |o| {
        o.crash_percent = 40;
        o.restart_crashed = true;
        o.loss_percent = 5;
        o.duplicate_percent = 10;
    });
    assert_passed(&failed);
    assert!(total.restarted > 0, "{total:?}");
    assert!(total.recovered_commits > 0, "{total:?}");
}
