//! The simulator's cost model (issue 19 item 7): each server is one processor that spends
//! a fixed time on every message it receives or sends. What it must show, and what these
//! tests check: no run does more work than its servers have time for (a server that took
//! two messages at once would break the bound), and with more clients a protocol that
//! sends fewer messages carries more transactions, as on real machines.

mod common;

use common::{assert_passed, seeds};
use verso_ncc::sim::{SimOptions, SimStats};
use verso_ncc::workload::Workload;
use verso_ncc::ProtocolKind;

const COST_US: u64 = 8;
const SERVERS: u32 = 4;

fn f1(protocol: ProtocolKind, clients: u32) -> SimStats {
    f1_at(protocol, clients, None)
}

fn f1_at(protocol: ProtocolKind, clients: u32, open_loop_rate: Option<u64>) -> SimStats {
    let tweak = |o: &mut SimOptions| {
        o.open_loop_rate = open_loop_rate;
        o.protocol = protocol;
        o.workload = Workload::F1;
        o.servers = SERVERS;
        o.clients = clients;
        o.txns_per_client = 20;
        o.server_cost_us = Some(COST_US);
        o.loss_percent = 0;
        o.duplicate_percent = 0;
        o.delay_min = 100;
        o.delay_max = 300;
        o.resend_after_us = Some(1_000_000);
        o.recovery_after = Some(5_000_000);
    };
    let (stats, failed) = seeds(0..3, tweak);
    assert_passed(&failed);
    stats
}

/// Throughput × messages per transaction × cost per message stays within what the
/// servers' time allows (the messages a server handles are at most all of them).
#[test]
fn no_run_does_more_work_than_its_servers_have_time_for() {
    for protocol in [ProtocolKind::Ncc, ProtocolKind::Docc] {
        for clients in [16, 256] {
            let s = f1(protocol, clients);
            assert!(s.steady_commits > 0 && s.simulated_us > 0);
            let per_sec = s.steady_commits as f64 * 1e6 / s.simulated_us as f64;
            let messages_per_txn = s.messages as f64 / s.committed as f64;
            let busy = per_sec * messages_per_txn * COST_US as f64 / 1e6;
            assert!(
                busy <= f64::from(SERVERS) * 1.05,
                "{protocol:?}, {clients} clients: {per_sec:.0} txn/s x {messages_per_txn:.1} \
                 messages x {COST_US} µs keeps {busy:.2} servers busy, of {SERVERS}"
            );
        }
    }
}

/// Loaded (256 clients on 4 servers), dOCC saturates its servers with three rounds of
/// messages while NCC, with one, carries well more; lightly loaded (16 clients), neither
/// is near its servers' limit.
#[test]
fn under_load_the_protocol_with_fewer_messages_carries_more() {
    let rate = |s: &SimStats| s.steady_commits as f64 * 1e6 / s.simulated_us as f64;
    let (ncc, docc) = (f1(ProtocolKind::Ncc, 256), f1(ProtocolKind::Docc, 256));
    assert!(
        rate(&ncc) > 1.5 * rate(&docc),
        "NCC {:.0}/s, dOCC {:.0}/s",
        rate(&ncc),
        rate(&docc)
    );
    let light = f1(ProtocolKind::Docc, 16);
    let capacity = f64::from(SERVERS) * 1e6 / COST_US as f64;
    let used = rate(&light) * light.messages as f64 / light.committed as f64;
    assert!(
        used < 0.5 * capacity,
        "{used:.0} of {capacity:.0} messages per second"
    );
}

/// Open loop: below capacity the system carries what is offered and sheds nothing; far
/// above it, it sheds, carries no more than its servers allow, and (unlike closed-loop
/// clients piling retries on) NCC keeps most of its peak.
#[test]
fn open_loop_carries_what_is_offered_until_the_servers_are_full() {
    let rate = |s: &SimStats| s.steady_commits as f64 * 1e6 / s.simulated_us as f64;
    let light = f1_at(ProtocolKind::Ncc, 64, Some(20_000));
    assert_eq!(light.shed, 0, "{light:?}");
    let carried = rate(&light);
    assert!(
        (17_000.0..23_000.0).contains(&carried),
        "offered 20,000/s, carried {carried:.0}/s"
    );
    let capacity = f64::from(SERVERS) * 1e6 / COST_US as f64;
    for protocol in [ProtocolKind::Ncc, ProtocolKind::Docc] {
        let heavy = f1_at(protocol, 256, Some(400_000));
        assert!(heavy.shed > 0, "{protocol:?}: {heavy:?}");
        let messages = heavy.messages as f64 / heavy.committed as f64;
        let used = rate(&heavy) * messages;
        assert!(
            used <= 1.05 * capacity,
            "{protocol:?}: {used:.0} of {capacity:.0} messages per second"
        );
    }
}
