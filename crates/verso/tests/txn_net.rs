//! NCC and its baselines between real processes (issue 19): two shard server processes on
//! loopback, contended transactions of every shape from a client pool, and the recorded
//! history checked against the servers' version orders. Runs are bounded in time (1.5 s of
//! load, 30 s of drain at most) and their workloads seeded.

use std::path::Path;
use std::time::Duration;

use verso_ncc::sim::SimOptions;
use verso_ncc::wire::Encoding;
use verso_ncc::workload::Workload;
use verso_ncc::{Key, Value};
use verso_txn_net::frame::REQUEST_BYTES_MAX;
use verso_txn_net::load::{self, LoadConfig};
use verso_txn_net::local::{Dump, LocalCluster};
use verso_txn_net::session::Session;
use verso_txn_net::{Protocol, StoreKind};

fn run(protocol: Protocol, workload: Workload, keys: u64) -> (load::LoadReport, Dump) {
    run_keeping(protocol, workload, keys, true)
}

fn run_keeping(
    protocol: Protocol,
    workload: Workload,
    keys: u64,
    keep_history: bool,
) -> (load::LoadReport, Dump) {
    run_on(protocol, workload, keys, keep_history, StoreKind::Memory, 0).expect("the load runs")
}

fn run_on(
    protocol: Protocol,
    workload: Workload,
    keys: u64,
    keep_history: bool,
    store: StoreKind,
    first_client: u32,
) -> std::io::Result<(load::LoadReport, Dump)> {
    let mut mix = SimOptions::new(7);
    mix.workload = workload;
    mix.keys = keys;
    run_mix(protocol, mix, keep_history, store, first_client)
}

fn run_mix(
    protocol: Protocol,
    mix: SimOptions,
    keep_history: bool,
    store: StoreKind,
    first_client: u32,
) -> std::io::Result<(load::LoadReport, Dump)> {
    let exe = Path::new(env!("CARGO_BIN_EXE_verso"));
    let cluster =
        LocalCluster::start_with(exe, 2, protocol, keep_history, store).expect("servers start");
    let cfg = LoadConfig {
        servers: cluster.addrs.iter().map(|&a| vec![a]).collect(),
        protocol,
        mix,
        threads: 2,
        clients_per_thread: 6,
        rate: 0,
        duration: Duration::from_millis(1_500),
        record_history: true,
        resend_after_us: 100_000,
        drain_timeout: Duration::from_secs(30),
        first_client,
        baseline_backoff_us: None,
        encoding: Default::default(),
    };
    let report = load::run(&cfg);
    let dump = cluster.dump().expect("the servers dump their versions");
    cluster.shutdown().expect("the servers stop");
    Ok((report?, dump))
}

/// NCC's servers with their decided versions in Verso's engine (`--store engine`):
/// strictly serializable over contended keys and over F1, nothing left undecided.
#[test]
fn ncc_over_the_engine_is_strictly_serializable_between_processes() {
    for (name, workload, keys) in [
        ("ncc", Workload::Mixed, 16),
        ("ncc-rw", Workload::Mixed, 16),
        ("ncc", Workload::F1, 0),
    ] {
        let protocol = Protocol::parse(name).expect("a known name");
        let (report, dump) =
            run_on(protocol, workload, keys, true, StoreKind::Engine, 0).expect("the load runs");
        assert!(
            report.committed > 100,
            "{name}: only {} committed",
            report.committed
        );
        if let Err(e) = load::check(protocol, &report, &dump) {
            panic!("{name} over the engine: {e}");
        }
    }
    // Keys as an application names them: text, placed on the servers by hash.
    let protocol = Protocol::parse("ncc").expect("a known name");
    let mut mix = SimOptions::new(7);
    mix.keys = 16;
    mix.text_keys = true;
    let (report, dump) = run_mix(protocol, mix, true, StoreKind::Engine, 0).expect("the load runs");
    assert!(report.committed > 100, "text keys: {}", report.committed);
    if let Err(e) = load::check(protocol, &report, &dump) {
        panic!("text keys over the engine: {e}");
    }
}

/// Keys and values are any bytes, in both wire forms: empty ones, bytes RESP itself uses,
/// a key just under the engine's limit and a value just under the request limit come back
/// as written. Reads whose values together pass the frame limit come back too (the servers
/// split their answers). A value over the request limit is refused by the session before
/// anything is sent, and the session goes on; a key over the engine's limit is refused by
/// the server, which drops the connection (an error, no hang), and goes on serving others.
#[test]
fn any_bytes_are_keys_and_values_between_processes() {
    let exe = Path::new(env!("CARGO_BIN_EXE_verso"));
    let protocol = Protocol::parse("ncc").expect("a known name");
    let cluster = LocalCluster::start_with(exe, 2, protocol, false, StoreKind::Engine)
        .expect("servers start");
    let began = std::time::Instant::now();
    // Room for the rewrite's extra byte and the key within `REQUEST_BYTES_MAX`.
    let large = REQUEST_BYTES_MAX - 64;
    let pairs: Vec<(Key, Value)> = vec![
        (Key::from(&b""[..]), Value::from("the empty key")),
        (Key::from("empty value"), Value::from(&b""[..])),
        (Key::from("*1\r\n$3\r\nGET"), Value::from("$-1\r\n")),
        (
            Key::from(vec![0xff; 300]),
            Value::from(vec![0u8, 1, 2, 0, 255]),
        ),
        (Key::from(vec![b'k'; 64 << 10]), Value::from("at the limit")),
        (Key::from("large"), Value::from(vec![7u8; large])),
    ];
    for (client, encoding) in [(1, Encoding::Binary), (2, Encoding::Resp)] {
        let mut s = Session::connect(&cluster.addrs, protocol, client, encoding).expect("connect");
        s.set_timeout(Duration::from_secs(20));
        s.put(&pairs).expect("the writes commit");
        let keys: Vec<Key> = pairs.iter().map(|(k, _)| k.clone()).collect();
        let got = s.get(&keys).expect("the reads commit");
        assert_eq!(got, pairs, "{encoding:?}");
        // Written by the other session too, so not a read of its own cache.
        let fresh: Vec<(Key, Value)> = pairs
            .iter()
            .map(|(k, v)| (k.clone(), Value::from([v.as_bytes(), b"!"].concat())))
            .collect();
        s.put(&fresh).expect("the rewrites commit");
        assert_eq!(
            s.get(&keys).expect("the reads commit"),
            fresh,
            "{encoding:?}"
        );
        // Ten large values, written one per transaction, read in one: at least five on
        // one server, more than a frame holds in a single answer.
        let many: Vec<(Key, Value)> = (0..10u8)
            .map(|i| (Key::from(format!("large {i}")), Value::from(vec![i; large])))
            .collect();
        for pair in &many {
            s.put(std::slice::from_ref(pair))
                .expect("a large write commits");
        }
        let keys: Vec<Key> = many.iter().map(|(k, _)| k.clone()).collect();
        assert!(
            s.get(&keys).expect("the large reads commit") == many,
            "{encoding:?}"
        );
        // Over the request limit: refused here, and the session is still usable.
        let over = s.put(&[(Key::from("over"), Value::from(vec![1u8; REQUEST_BYTES_MAX]))]);
        assert_eq!(
            over.map(|_| ()).map_err(|e| e.kind()),
            Err(std::io::ErrorKind::InvalidInput)
        );
        assert_eq!(
            s.get(&[Key::from("empty value")])
                .expect("still usable")
                .len(),
            1
        );
    }
    let mut s = Session::connect(&cluster.addrs, protocol, 3, Encoding::Binary).expect("connect");
    s.set_timeout(Duration::from_secs(20));
    let too_long = Key::from(vec![b'k'; (64 << 10) + 1]);
    assert!(
        s.put(&[(too_long, Value::from("x"))]).is_err(),
        "a key over the engine's limit"
    );
    let mut s = Session::connect(&cluster.addrs, protocol, 4, Encoding::Binary).expect("connect");
    s.set_timeout(Duration::from_secs(20));
    let got = s.get(&[Key::from("large")]).expect("still served");
    assert_eq!(got[0].1.len(), large + 1);
    assert!(began.elapsed() < Duration::from_secs(60));
    cluster.shutdown().expect("the servers stop");
}

/// A client id the engine's timestamp encoding cannot hold (2^16 and up) is refused:
/// the server drops its connection and the load fails with an error, without hanging
/// and without storing anything out of order.
#[test]
fn clients_the_engine_encoding_cannot_hold_are_refused() {
    let protocol = Protocol::parse("ncc").expect("a known name");
    let began = std::time::Instant::now();
    let got = run_on(
        protocol,
        Workload::Mixed,
        16,
        true,
        StoreKind::Engine,
        70_000,
    );
    match got {
        Err(_) => {}
        Ok((report, dump)) => {
            assert_eq!(report.committed, 0, "a refused client committed");
            assert!(dump.broken.is_empty(), "{:?}", dump.broken);
        }
    }
    assert!(began.elapsed() < Duration::from_secs(60));
}

/// Every protocol, over a small contended key space with one-shot, two-shot,
/// read-only and read-modify-write transactions: strictly serializable (TAPIR-CC:
/// serializable), nothing left undecided, and work done.
#[test]
fn every_protocol_is_serializable_between_processes() {
    for name in Protocol::NAMES {
        let protocol = Protocol::parse(name).expect("a known name");
        let (report, dump) = run(protocol, Workload::Mixed, 16);
        assert!(
            report.committed > 100,
            "{name}: only {} committed",
            report.committed
        );
        assert_eq!(report.history.len() as u64, report.committed);
        if let Err(e) = load::check(protocol, &report, &dump) {
            panic!("{name}: {e}");
        }
    }
}

/// Servers answer each connection in its own encoding: a binary and a RESP client process
/// load the same servers at once, and their joint history is strictly serializable.
#[test]
fn binary_and_resp_clients_share_the_servers() {
    let exe = Path::new(env!("CARGO_BIN_EXE_verso"));
    for name in ["ncc", "d2pl-wound-wait"] {
        let protocol = Protocol::parse(name).expect("a known name");
        let cluster = LocalCluster::start(exe, 2, protocol, true).expect("servers start");
        let mut mix = SimOptions::new(11);
        mix.workload = Workload::Mixed;
        mix.keys = 16;
        let cfg = |encoding: Encoding, first_client: u32| LoadConfig {
            servers: cluster.addrs.iter().map(|&a| vec![a]).collect(),
            protocol,
            mix: mix.clone(),
            threads: 2,
            clients_per_thread: 4,
            rate: 0,
            duration: Duration::from_millis(1_500),
            record_history: true,
            resend_after_us: 100_000,
            drain_timeout: Duration::from_secs(30),
            first_client,
            baseline_backoff_us: None,
            encoding,
        };
        let (binary, resp) = std::thread::scope(|s| {
            let b = s.spawn(|| load::run(&cfg(Encoding::Binary, 0)));
            let r = s.spawn(|| load::run(&cfg(Encoding::Resp, 100)));
            (b.join().expect("no panic"), r.join().expect("no panic"))
        });
        let (binary, resp) = (binary.expect("binary load"), resp.expect("resp load"));
        let dump = cluster.dump().expect("the servers dump their versions");
        cluster.shutdown().expect("the servers stop");
        assert!(binary.committed > 50 && resp.committed > 50, "{name}");
        let per_msg = |r: &load::LoadReport| {
            r.bytes as f64 / (r.messages_sent + r.messages_received).max(1) as f64
        };
        // The RESP clients' messages really went as RESP (decimal fields take more bytes).
        assert!(
            per_msg(&resp) > 1.5 * per_msg(&binary),
            "{name}: {} vs {} bytes per message",
            per_msg(&resp),
            per_msg(&binary)
        );
        let mut joint = binary;
        joint.committed += resp.committed;
        joint.unfinished += resp.unfinished;
        joint.history.extend(resp.history);
        if let Err(e) = load::check(protocol, &joint, &dump) {
            panic!("{name}: {e}");
        }
    }
}

/// A server started without `--keep-history` forgets superseded versions, so its dump
/// cannot be checked, and says so rather than failing the check with a wrong reason.
#[test]
fn a_server_without_its_history_says_it_cannot_be_checked() {
    for name in ["ncc", "docc"] {
        let protocol = Protocol::parse(name).expect("a known name");
        let (report, dump) = run_keeping(protocol, Workload::Mixed, 16, false);
        assert!(report.committed > 100, "{name}: {}", report.committed);
        assert_eq!(dump.broken.len(), 2, "{name}: {:?}", dump.broken);
        let e = load::check(protocol, &report, &dump).unwrap_err();
        assert!(e.contains("no history kept"), "{name}: {e}");
    }
}

/// The check reads what the servers hold: a committed write dropped from its key's
/// versions fails it, and so does a read answered with a value nobody wrote.
#[test]
fn the_check_fails_when_the_servers_disagree_with_the_history() {
    let protocol = Protocol::Ncc { read_only: true };
    let (report, dump) = run(protocol, Workload::Mixed, 16);
    load::check(protocol, &report, &dump).expect("the real run passes");
    let written = dump
        .versions
        .iter()
        .position(|(_, vs)| vs.len() >= 2)
        .expect("some key written");
    let mut lost = dump.clone();
    lost.versions[written].1.pop();
    let e = load::check(protocol, &report, &lost).unwrap_err();
    assert!(e.contains("missing from its versions"), "{e}");
    let mut forged = report;
    let reader = forged
        .history
        .iter()
        .position(|t| !t.reads.is_empty())
        .expect("some transaction read");
    forged.history[reader].reads[0].1 = u64::MAX.into();
    let e = load::check(protocol, &forged, &dump).unwrap_err();
    assert!(e.contains("which no committed transaction wrote"), "{e}");
}
