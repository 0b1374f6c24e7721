//! The paper's baselines under the same simulator, workload and checker as NCC (issue 18
//! item 2 and item 4's "at least 1,000 seeds per protocol"): dOCC and both d2PL variants
//! are strictly serializable and finish; TAPIR-CC is serializable, and its strict
//! serializability violations are counted, not failures.

use verso_ncc::sim::{run, SimOptions, SimStats};
use verso_ncc::workload::Workload;
use verso_ncc::ProtocolKind;

fn seeds(
    protocol: ProtocolKind,
    range: std::ops::Range<u64>,
    tweak: impl Fn(&mut SimOptions),
) -> SimStats {
    let mut total = SimStats::default();
    let mut failed = Vec::new();
    for seed in range.clone() {
        let mut o = SimOptions::new(seed);
        o.protocol = protocol;
        tweak(&mut o);
        match run(&o) {
            Ok(s) => total.add(&s),
            Err(e) => failed.push((seed, e)),
        }
    }
    assert!(
        failed.is_empty(),
        "{}: {} of {} seeds failed, first: {:?}",
        protocol.name(),
        failed.len(),
        range.end - range.start,
        failed.first()
    );
    let n = range.end - range.start;
    assert_eq!(
        total.committed,
        n * 30 * u64::from(clients_of(&tweak)),
        "every transaction commits"
    );
    eprintln!("{}: {total:?}", protocol.name());
    total
}

fn clients_of(tweak: &impl Fn(&mut SimOptions)) -> u32 {
    let mut o = SimOptions::new(0);
    tweak(&mut o);
    o.clients
}

#[test]
fn docc_is_strictly_serializable() {
    let t = seeds(ProtocolKind::Docc, 0..1_000, |_| {});
    assert!(t.clients.aborts > 0 && t.clients.multi_shot > 0, "{t:?}");
    assert!(t.clients.read_after_write > 0, "{t:?}");
}

#[test]
fn d2pl_no_wait_is_strictly_serializable() {
    let t = seeds(ProtocolKind::D2plNoWait, 0..1_000, |_| {});
    assert!(t.clients.aborts > 0, "{t:?}");
}

#[test]
fn d2pl_wound_wait_is_strictly_serializable() {
    let t = seeds(ProtocolKind::D2plWoundWait, 0..1_000, |_| {});
    assert!(t.clients.aborts > 0, "{t:?}");
}

#[test]
fn tapir_cc_is_serializable() {
    let t = seeds(ProtocolKind::TapirCc, 0..1_000, |_| {});
    assert!(t.clients.aborts > 0, "{t:?}");
    eprintln!(
        "tapir-cc: {} of 1000 runs not strictly serializable",
        t.strict_violations
    );
}

#[test]
fn hot_keys_and_loss_stay_correct_for_every_baseline() {
    for p in [
        ProtocolKind::Docc,
        ProtocolKind::D2plNoWait,
        ProtocolKind::D2plWoundWait,
        ProtocolKind::TapirCc,
    ] {
        seeds(p, 0..200, |o| {
            o.keys = 3;
            o.loss_percent = 10;
            o.duplicate_percent = 20;
            o.skew_max = 5_000;
        });
    }
}

/// With clocks far apart, the simulator finds TAPIR-CC's timestamp inversions on its own
/// (the runs stay serializable: `seeds` fails a run that is not).
#[test]
fn tapir_cc_inversions_are_found_under_skew() {
    let t = seeds(ProtocolKind::TapirCc, 0..300, |o| {
        o.keys = 3;
        o.skew_max = 5_000;
    });
    assert!(t.strict_violations > 0, "{t:?}");
}

/// The F1 mix (read-dominated, one shot, low contention): NCC commits nearly everything at
/// the first attempt in one round, and sends at most half the messages per committed
/// transaction of dOCC and d2PL-wound-wait (issue 18's target; the network here loses
/// 2 % and duplicates 5 %, for every protocol alike).
#[test]
fn f1_ncc_needs_half_the_messages_of_docc_and_wound_wait() {
    let f1 = |o: &mut SimOptions| {
        o.workload = Workload::F1;
        o.servers = 8;
        o.clients = 16;
    };
    let per_txn = |p| {
        let t = seeds(p, 0..20, f1);
        (t.messages as f64 / t.committed as f64, t)
    };
    let (ncc, t) = per_txn(ProtocolKind::Ncc);
    let first = t.clients.committed_first_try as f64 / t.clients.committed as f64;
    assert!(first >= 0.99, "{t:?}");
    for p in [ProtocolKind::Docc, ProtocolKind::D2plWoundWait] {
        let (other, _) = per_txn(p);
        assert!(
            ncc <= 0.5 * other,
            "{}: ncc {ncc:.2} vs {other:.2}",
            p.name()
        );
    }
}

/// TPC-C (Payment and Order-Status in two shots, updates as server-side read-writes), one
/// warehouse per server and a client per warehouse: NCC-RW passes the safeguard for more
/// than 80 % of its transactions and aborts fewer than 10 % from scratch (issue 18's
/// target), and every protocol stays correct.
#[test]
fn tpcc_ncc_rw_mostly_passes_the_safeguard() {
    let tpcc = |o: &mut SimOptions| {
        o.workload = Workload::Tpcc;
        o.servers = 8;
        o.clients = 8;
    };
    let t = seeds(ProtocolKind::Ncc, 0..50, |o| {
        tpcc(o);
        o.ncc_rw = true;
    });
    let c = t.clients;
    let retried_from_scratch = 1.0 - c.committed_first_try as f64 / c.committed as f64;
    let passed_safeguard = 1.0 - c.smart_retries as f64 / c.committed as f64;
    assert!(retried_from_scratch < 0.10, "{c:?}");
    assert!(passed_safeguard > 0.80, "{c:?}");
    for p in [
        ProtocolKind::Docc,
        ProtocolKind::D2plNoWait,
        ProtocolKind::D2plWoundWait,
        ProtocolKind::TapirCc,
    ] {
        seeds(p, 0..20, tpcc);
    }
}
