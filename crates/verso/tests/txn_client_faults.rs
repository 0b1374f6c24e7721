//! Coordinating clients that die or stop mid-transaction (issue 19 item 6, without
//! replication yet): `verso txn-client` processes on two NCC servers; one is killed with
//! SIGKILL (and a new process takes over its id at once, and is killed too), one is stopped
//! with SIGSTOP past the servers' recovery timer and then resumed. The servers' backup
//! coordinators (App. D) must decide every transaction the clients left behind. In the
//! first test the clients move value between keys, and the total must be conserved; in the
//! second they write unique values and report every transaction, and the history, with
//! what the servers committed for the dead, must be strictly serializable. Every wait is
//! on a condition, bounded in time.

mod common;

use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::Duration;

use common::txn_clients::{wait_until, ClientProcess};

use std::collections::{BTreeMap, BTreeSet};

use verso_ncc::check::{strictly_serializable, TxnRecord};
use verso_ncc::wire::Encoding;
use verso_ncc::{Effects, Key, Ts, TxnId, Value};
use verso_txn_net::local::LocalCluster;
use verso_txn_net::session::Session;
use verso_txn_net::Protocol;

const KEYS: u64 = 6;
const START: u64 = 1_000_000;

fn total(s: &mut Session) -> u64 {
    let keys: Vec<Key> = (0..KEYS).map(Key::from).collect();
    s.get(&keys)
        .expect("an audit")
        .iter()
        .map(|(_, v)| v.to_u64().expect("balances are numbers"))
        .sum()
}

fn undecided(cluster: &LocalCluster) -> u64 {
    cluster.dump().expect("the servers answer a dump").undecided
}

/// Two NCC servers on loopback, with their addresses as `--servers` takes them.
fn ncc_servers(exe: &Path, keep_history: bool) -> (Protocol, LocalCluster, String) {
    let protocol = Protocol::parse("ncc").expect("known");
    let cluster = LocalCluster::start(exe, 2, protocol, keep_history).expect("servers start");
    let servers = cluster
        .addrs
        .iter()
        .map(|a| a.to_string())
        .collect::<Vec<_>>()
        .join(",");
    (protocol, cluster, servers)
}

#[test]
fn the_servers_decide_for_clients_that_die_or_stop_mid_transaction() {
    let exe = Path::new(env!("CARGO_BIN_EXE_verso"));
    let (protocol, cluster, servers) = ncc_servers(exe, false);
    let mut auditor =
        Session::connect(&cluster.addrs, protocol, 0, Encoding::Binary).expect("connect");
    let initial: Vec<(Key, Value)> = (0..KEYS).map(|k| (k.into(), START.into())).collect();
    auditor.put(&initial).expect("the initial balances");

    let killed = ClientProcess::transfers(exe, ["--servers", &servers], 1, KEYS);
    let stopped = ClientProcess::transfers(exe, ["--servers", &servers], 2, KEYS);
    killed.wait_for(30, "the first client's transfers");
    stopped.wait_for(30, "the second client's transfers");

    // Kill one mid-stream (it is always inside a transaction) and stop the other.
    killed.signal(libc::SIGKILL);
    stopped.signal(libc::SIGSTOP);
    let at_stop = stopped.committed.load(Ordering::SeqCst);
    // A new process takes over the killed one's id at once, before the recovery timer,
    // and is killed in its turn: its requests must not make the servers take the first
    // one's unfinished transaction for finished (it would stay undecided for good).
    let successor = ClientProcess::transfers(exe, ["--servers", &servers], 1, KEYS);
    successor.wait_for(30, "the successor's transfers");
    successor.signal(libc::SIGKILL);
    // The recovery timer is 1 s: within a few, nothing either left is undecided.
    wait_until(
        Duration::from_secs(20),
        "recovery of both clients' transactions",
        || undecided(&cluster) == 0,
    );
    assert_eq!(
        total(&mut auditor),
        START * KEYS,
        "after the backup coordinators"
    );

    // The stopped client comes back to find its transaction decided without it, and
    // carries on; what it believes of that transaction must agree with the servers.
    stopped.signal(libc::SIGCONT);
    stopped.wait_for(at_stop + 30, "the resumed client's transfers");
    assert_eq!(
        total(&mut auditor),
        START * KEYS,
        "after the resumed client's transfers"
    );
    stopped.signal(libc::SIGKILL);
    wait_until(
        Duration::from_secs(20),
        "recovery after the last kill",
        || undecided(&cluster) == 0,
    );
    assert_eq!(total(&mut auditor), START * KEYS, "at the end");
    let keys: Vec<Key> = (0..KEYS).map(Key::from).collect();
    let balances = auditor.get(&keys).expect("a read");
    assert!(
        balances.iter().any(|(_, v)| *v != Value::from(START)),
        "{balances:?}"
    );
    drop(killed);
    drop(successor);
    drop(stopped);
    cluster.shutdown().expect("the servers stop");
}

/// One reported transaction, parsed from a `txn SEQ INVOKED COMPLETED r:.. w:..` line.
fn parse_txn(client: u32, line: &str) -> (u64, TxnRecord) {
    let f: Vec<&str> = line.split(' ').collect();
    assert_eq!(f.len(), 6, "{line}");
    let pairs = |s: &str, tag: &str| -> Vec<(Key, Value)> {
        let s = s.strip_prefix(tag).expect("tagged");
        s.split(',')
            .filter(|p| !p.is_empty())
            .map(|p| {
                let (k, v) = p.split_once('=').expect("K=V");
                let k: u64 = k.parse().expect("key");
                let v: u64 = v.parse().expect("value");
                (k.into(), v.into())
            })
            .collect()
    };
    let record = TxnRecord {
        client,
        invoked: f[2].parse().expect("invoked"),
        completed: f[3].parse().expect("completed"),
        reads: pairs(f[4], "r:"),
        writes: pairs(f[5], "w:"),
        commit_ts: Ts::default(),
    };
    (f[1].parse().expect("seq"), record)
}

/// Client processes, one killed (its id then taken over by a new process, killed too), one
/// stopped past the recovery timer and resumed, one left alone, run transactions over
/// unique values and report each. After the faults the servers decide what the dead left,
/// and the history (the reported transactions, plus the committed ones no client reported,
/// from the servers' records, as begun at their client's earliest unfinished begin and
/// never returned) is strictly serializable against the servers' version orders.
#[test]
fn the_history_with_clients_killed_and_stopped_is_strictly_serializable() {
    let exe = Path::new(env!("CARGO_BIN_EXE_verso"));
    let (_, cluster, servers) = ncc_servers(exe, true);
    let work = ["--reported", "0"];
    let killed = ClientProcess::start_with(exe, ["--servers", &servers], 1, KEYS, &work);
    let stopped = ClientProcess::start_with(exe, ["--servers", &servers], 2, KEYS, &work);
    let steady = ClientProcess::start_with(
        exe,
        ["--servers", &servers],
        3,
        KEYS,
        &["--reported", "150"],
    );
    killed.wait_for(40, "the first client's transactions");
    stopped.wait_for(40, "the second client's transactions");
    killed.signal(libc::SIGKILL);
    stopped.signal(libc::SIGSTOP);
    let at_stop = stopped.committed.load(Ordering::SeqCst);
    let successor = ClientProcess::start_with(exe, ["--servers", &servers], 1, KEYS, &work);
    successor.wait_for(40, "the successor's transactions");
    successor.signal(libc::SIGKILL);
    wait_until(Duration::from_secs(20), "recovery", || {
        undecided(&cluster) == 0
    });
    stopped.signal(libc::SIGCONT);
    stopped.wait_for(at_stop + 40, "the resumed client's transactions");
    stopped.signal(libc::SIGKILL);
    steady.wait_for(150, "the steady client's transactions");
    wait_until(
        Duration::from_secs(20),
        "recovery after the last kill",
        || undecided(&cluster) == 0,
    );
    let dump = cluster.dump().expect("the servers answer a dump");
    assert!(dump.broken.is_empty(), "{:?}", dump.broken);

    let mut history = Vec::new();
    let mut reported = BTreeSet::new();
    // Per client, the earliest begin a process printed without the transaction's report.
    let mut unfinished: BTreeMap<u32, u64> = BTreeMap::new();
    for (client, process) in [(1, killed), (2, stopped), (3, steady), (1, successor)] {
        let lines = process.finish();
        let mut open = None;
        for line in &lines {
            if let Some(t) = line.strip_prefix("begin ") {
                open = Some(t.parse::<u64>().expect("a time"));
            } else if line.starts_with("txn ") {
                let (seq, record) = parse_txn(client, line);
                reported.insert(TxnId { client, seq });
                history.push(record);
                open = None;
            }
        }
        if let Some(t) = open {
            let e = unfinished.entry(client).or_insert(t);
            *e = (*e).min(t);
        }
    }
    let reported_count = history.len();
    // The servers' records, merged per transaction over the servers.
    let mut recovered: BTreeMap<TxnId, Effects> = BTreeMap::new();
    for (txn, e) in &dump.effects {
        if reported.contains(txn) {
            continue;
        }
        let all = recovered.entry(*txn).or_default();
        all.reads.extend(e.reads.iter().cloned());
        all.writes.extend(e.writes.iter().cloned());
    }
    for (txn, e) in recovered {
        let invoked = *unfinished
            .get(&txn.client)
            .unwrap_or_else(|| panic!("{txn:?} committed, unreported, with no begin open"));
        history.push(TxnRecord {
            client: txn.client,
            invoked,
            completed: u64::MAX,
            reads: e.reads,
            writes: e.writes,
            commit_ts: Ts::default(),
        });
    }
    eprintln!(
        "{reported_count} reported transactions, {} committed for dead clients",
        history.len() - reported_count
    );
    assert!(reported_count > 200, "{reported_count}");
    if let Err(e) = strictly_serializable(&history, &dump.versions) {
        panic!("not strictly serializable: {e}");
    }
    cluster.shutdown().expect("the servers stop");
}
