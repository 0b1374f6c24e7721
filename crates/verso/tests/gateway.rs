//! The transaction gateway between real processes (issue 19 item 1, first part): two
//! groups of three `verso txn-server --replica` processes and a `verso gateway` in front,
//! spoken to over RESP as any Redis client would, while the host of each group is killed
//! with SIGKILL and restarted, then a whole group at once:
//! - threads move value between keys of both groups in `MULTI; DECRBY; INCRBY; EXEC`
//!   blocks, and audit the total with `MGET` (one read-only transaction): every audit and
//!   the final total equal the initial total;
//! - other threads run `MULTI; MGET k1 k2; MSET k1 v1 k2 v2; EXEC` with values written
//!   once each, and `MGET`s: with what the groups committed, the recorded history must be
//!   strictly serializable (`verso_ncc::check`);
//! - nothing stays undecided, and each group's host reports its invariants intact.
//!
//! And the gateway itself fails: stopped (SIGSTOP) past the groups' recovery timer, so their
//! backup coordinators decide its transactions while it lives, then resumed; then killed
//! (SIGKILL) mid-transfer and replaced by a new gateway with the same protocol client ids.
//! Every audit conserves the total, and nothing stays undecided.
//!
//! Every wait is on a condition, bounded in time; every request has a timeout.

mod common;

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::txn_clients::{kill_hosts_then_a_whole_group, wait_until};
use common::{Conn, Reply};
use verso_gateway::value;
use verso_ncc::check::{strictly_serializable, TxnRecord};
use verso_ncc::client::Placement;
use verso_ncc::wire::Encoding;
use verso_ncc::{Key, Op, Value};
use verso_txn_net::group::GroupDurability;
use verso_txn_net::local_groups::LocalGroups;
use verso_txn_net::session::Session;
use verso_txn_net::Protocol;

const ACCOUNTS: usize = 6;
const START: i64 = 1_000_000;
/// Keys of the recorded history.
const HISTORY_KEYS: usize = 6;

/// The tests of this file run one at a time: each starts seven processes, and two such
/// runs at once on two cores stretch failovers past the tests' bounds.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

/// A `verso gateway` process, killed when dropped.
struct Gateway {
    child: Child,
    port: u16,
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Gateway {
    fn start(groups: &LocalGroups, dir: &Path) -> Gateway {
        Gateway::start_with(
            groups,
            dir,
            &["--client-ids", "1000-1063", "--timeout-ms", "30000"],
        )
    }

    fn start_with(groups: &LocalGroups, dir: &Path, extra: &[&str]) -> Gateway {
        let groups_arg = groups
            .groups
            .iter()
            .map(|g| {
                g.iter()
                    .map(SocketAddr::to_string)
                    .collect::<Vec<_>>()
                    .join(",")
            })
            .collect::<Vec<_>>()
            .join(";");
        let log = std::fs::File::create(dir.join("gateway.log")).expect("a log file");
        let mut child = Command::new(env!("CARGO_BIN_EXE_verso"))
            .args([
                "gateway",
                "--listen",
                "127.0.0.1:0",
                "--groups",
                &groups_arg,
            ])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log))
            .spawn()
            .expect("the gateway starts");
        let stdout = child.stdout.take().expect("piped");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let line = rx
            .recv_timeout(Duration::from_secs(30))
            .expect("the gateway says where it listens");
        let addr: SocketAddr = line
            .trim()
            .strip_prefix("listening ")
            .and_then(|a| a.parse().ok())
            .unwrap_or_else(|| panic!("the gateway said {line:?}"));
        Gateway {
            child,
            port: addr.port(),
        }
    }

    fn signal(&self, signal: i32) {
        // SAFETY: `kill` only sends a signal; the pid is our own child's, not yet waited
        // for, so it cannot have been reused by another process.
        let rc = unsafe { libc::kill(self.child.id() as i32, signal) };
        assert_eq!(rc, 0, "signal {signal} to the gateway");
    }

    fn conn(&self) -> Conn {
        Conn::open_timeout(self.port, Duration::from_secs(60)).expect("connect to the gateway")
    }
}

/// `shards` groups of three NCC replicas (answers on disk), their logs under `dir`, the
/// history kept (the dump checks the hosts' invariants, and the history with it).
fn start_groups(shards: u32, dir: &tempfile::TempDir) -> LocalGroups {
    let exe = Path::new(env!("CARGO_BIN_EXE_verso"));
    let protocol = Protocol::parse("ncc").expect("a known name");
    LocalGroups::start(
        exe,
        shards,
        protocol,
        true,
        GroupDurability::AnswersOnDisk,
        dir.path(),
    )
    .expect("the replicas start")
}

/// Every account at `START`, in one MSET.
fn fund_accounts(c: &mut Conn) {
    let mut mset = vec!["MSET".to_string()];
    for k in accounts() {
        mset.extend([k, START.to_string()]);
    }
    let mset: Vec<&str> = mset.iter().map(String::as_str).collect();
    assert_eq!(call(c, &mset), Reply::Simple("OK".into()));
}

/// The groups' dump: invariants intact, nothing undecided.
fn assert_settled(groups: &LocalGroups) -> verso_txn_net::local::Dump {
    let dump = groups.dump().expect("each group's host dumps");
    assert!(dump.broken.is_empty(), "{:?}", dump.broken);
    assert_eq!(dump.undecided, 0, "transactions left undecided");
    dump
}

fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after 1970")
        .as_micros() as u64
}

fn call(c: &mut Conn, args: &[&str]) -> Reply {
    c.call(args).expect("the gateway answers")
}

fn int_of(r: &Reply) -> i64 {
    match r {
        Reply::Bulk(Some(b)) => std::str::from_utf8(b).unwrap().parse().unwrap(),
        Reply::Int(n) => *n,
        other => panic!("not a number: {other:?}"),
    }
}

fn accounts() -> Vec<String> {
    (0..ACCOUNTS).map(|i| format!("account:{i}")).collect()
}

fn audit(c: &mut Conn) -> i64 {
    let keys = accounts();
    let mut args = vec!["MGET"];
    args.extend(keys.iter().map(String::as_str));
    match call(c, &args) {
        Reply::Array(Some(vs)) => vs.iter().map(int_of).sum(),
        other => panic!("MGET: {other:?}"),
    }
}

/// What a value read over RESP was in the groups: its stored form.
fn stored(r: &Reply) -> Value {
    match r {
        Reply::Bulk(None) => Value::from(value::encode(None)),
        Reply::Bulk(Some(b)) => Value::from(value::encode(Some(b))),
        other => panic!("not a string reply: {other:?}"),
    }
}

/// A transfer that may meet a failed gateway: `Ok(true)` committed, `Ok(false)` answered
/// with an error (its outcome unknown), `Err` the connection is gone.
fn try_transfer(c: &mut Conn, from: &str, to: &str, amount: i64) -> std::io::Result<bool> {
    let amount = amount.to_string();
    c.call(&["MULTI"])?;
    c.call(&["DECRBY", from, &amount])?;
    c.call(&["INCRBY", to, &amount])?;
    Ok(match c.call(&["EXEC"])? {
        Reply::Array(Some(r)) if r.len() == 2 => true,
        Reply::Error(e) if e.starts_with("TIMEOUT") || e.starts_with("CLUSTERDOWN") => false,
        other => panic!("EXEC of a transfer: {other:?}"),
    })
}

/// One transfer between an account of each parity (the keys spread over both groups),
/// as a MULTI block; panics on anything but the two new balances.
fn transfer(c: &mut Conn, from: &str, to: &str, amount: i64) {
    let amount = amount.to_string();
    assert_eq!(call(c, &["MULTI"]), Reply::Simple("OK".into()));
    assert_eq!(
        call(c, &["DECRBY", from, &amount]),
        Reply::Simple("QUEUED".into())
    );
    assert_eq!(
        call(c, &["INCRBY", to, &amount]),
        Reply::Simple("QUEUED".into())
    );
    match call(c, &["EXEC"]) {
        Reply::Array(Some(r)) if r.len() == 2 && r.iter().all(|x| matches!(x, Reply::Int(_))) => {}
        other => panic!("EXEC of a transfer: {other:?}"),
    }
}

/// A read of two history keys and a write of both, recorded.
fn read_write(c: &mut Conn, client: u32, keys: [&str; 2], tag: u64) -> TxnRecord {
    let invoked = now_us();
    let values = [format!("{client}-{tag}-0"), format!("{client}-{tag}-1")];
    assert_eq!(call(c, &["MULTI"]), Reply::Simple("OK".into()));
    assert_eq!(
        call(c, &["MGET", keys[0], keys[1]]),
        Reply::Simple("QUEUED".into())
    );
    let mset = ["MSET", keys[0], &values[0], keys[1], &values[1]];
    assert_eq!(call(c, &mset), Reply::Simple("QUEUED".into()));
    let reply = call(c, &["EXEC"]);
    let completed = now_us();
    let Reply::Array(Some(r)) = reply else {
        panic!("EXEC of a read-write block: {reply:?}")
    };
    let Reply::Array(Some(read)) = &r[0] else {
        panic!("MGET in EXEC: {r:?}")
    };
    assert_eq!(r[1], Reply::Simple("OK".into()));
    TxnRecord {
        client,
        invoked,
        completed,
        reads: (0..2)
            .map(|i| (Key::from(keys[i]), stored(&read[i])))
            .collect(),
        writes: (0..2)
            .map(|i| {
                (
                    Key::from(keys[i]),
                    Value::from(value::encode(Some(values[i].as_bytes()))),
                )
            })
            .collect(),
        commit_ts: Default::default(),
    }
}

fn read_only(c: &mut Conn, client: u32, keys: [&str; 2]) -> TxnRecord {
    let invoked = now_us();
    let reply = call(c, &["MGET", keys[0], keys[1]]);
    let completed = now_us();
    let Reply::Array(Some(read)) = reply else {
        panic!("MGET: {reply:?}")
    };
    TxnRecord {
        client,
        invoked,
        completed,
        reads: (0..2)
            .map(|i| (Key::from(keys[i]), stored(&read[i])))
            .collect(),
        writes: Vec::new(),
        commit_ts: Default::default(),
    }
}

#[test]
fn transactions_through_the_gateway_stay_atomic_and_strictly_serializable_across_failovers() {
    let _serial = one_at_a_time();
    let dir = tempfile::tempdir().expect("a temporary directory");
    let mut groups = start_groups(2, &dir);
    // The accounts lie in both groups (the gateway places keys by hash slot).
    let placed: Vec<u32> = accounts()
        .iter()
        .map(|k| Placement::Slots.server_of(&Key::from(k.as_str()), 2))
        .collect();
    assert!(placed.contains(&0) && placed.contains(&1), "{placed:?}");
    let gateway = Gateway::start(&groups, dir.path());
    let mut setup = gateway.conn();
    fund_accounts(&mut setup);
    assert_eq!(audit(&mut setup), START * ACCOUNTS as i64);

    let done = AtomicU64::new(0);
    let stop = AtomicBool::new(false);
    let history = Mutex::new(Vec::new());
    let audits: Vec<i64> = std::thread::scope(|scope| {
        let transfers: Vec<_> = (0..2u64)
            .map(|t| {
                let (gateway, done, stop) = (&gateway, &done, &stop);
                scope.spawn(move || {
                    let mut c = gateway.conn();
                    let mut rng = common::Rng(0x9E37_79B9 ^ (t + 1));
                    let mut seen = Vec::new();
                    let keys = accounts();
                    let mut i = 0u64;
                    while i < 30 || !stop.load(Ordering::SeqCst) {
                        assert!(i < 100_000, "the faults never ended");
                        let (a, b) = (rng.below(ACCOUNTS as u64), rng.below(ACCOUNTS as u64));
                        if a != b {
                            transfer(
                                &mut c,
                                &keys[a as usize],
                                &keys[b as usize],
                                1 + rng.below(5) as i64,
                            );
                        }
                        done.fetch_add(1, Ordering::SeqCst);
                        if i.is_multiple_of(4) {
                            seen.push(audit(&mut c));
                        }
                        i += 1;
                    }
                    seen
                })
            })
            .collect();
        for client in 0..2u32 {
            let (gateway, stop, history) = (&gateway, &stop, &history);
            scope.spawn(move || {
                let mut c = gateway.conn();
                let mut rng = common::Rng(0xC0FFEE ^ u64::from(client + 7));
                let keys: Vec<String> = (0..HISTORY_KEYS).map(|i| format!("h:{i}")).collect();
                let mut mine = Vec::new();
                let mut i = 0u64;
                while i < 30 || !stop.load(Ordering::SeqCst) {
                    let a = rng.below(HISTORY_KEYS as u64) as usize;
                    let b = (a + 1 + rng.below(HISTORY_KEYS as u64 - 1) as usize) % HISTORY_KEYS;
                    let pair = [keys[a].as_str(), keys[b].as_str()];
                    mine.push(if rng.below(4) == 0 {
                        read_only(&mut c, client, pair)
                    } else {
                        read_write(&mut c, client, pair, i)
                    });
                    i += 1;
                }
                history.lock().unwrap().extend(mine);
            });
        }

        kill_hosts_then_a_whole_group(&mut groups, &done, 1);
        stop.store(true, Ordering::SeqCst);
        transfers
            .into_iter()
            .flat_map(|w| w.join().expect("no transfer thread panics"))
            .collect()
    });
    for (i, &t) in audits.iter().enumerate() {
        assert_eq!(
            t,
            START * ACCOUNTS as i64,
            "audit {i}: the total is not conserved"
        );
    }
    assert_eq!(
        audit(&mut setup),
        START * ACCOUNTS as i64,
        "the final total"
    );
    let started = Instant::now();
    let dump = assert_settled(&groups);
    // Each group holds exactly the keys the gateway's placement gives it (hash slots).
    for s in 0..2 {
        let held = groups.dump_group(s).expect("the group's host dumps");
        for (k, _) in &held.versions {
            let placed = Placement::Slots.server_of(k, 2) as usize;
            assert_eq!(placed, s, "key {k:?} is in group {s}, placed in {placed}");
        }
        assert!(!held.versions.is_empty(), "group {s} holds no key");
    }
    let history = history.into_inner().unwrap();
    assert!(
        history.len() >= 60,
        "{} transactions recorded",
        history.len()
    );
    // The accounts' versions have no recorded writers: the check covers the history keys.
    let versions: Vec<(Key, Vec<Value>)> = dump
        .versions
        .into_iter()
        .filter(|(k, _)| k.as_bytes().starts_with(b"h:"))
        .collect();
    assert_eq!(
        versions.len(),
        HISTORY_KEYS,
        "every history key was written"
    );
    strictly_serializable(&history, &versions)
        .unwrap_or_else(|e| panic!("the gateway's history is not strictly serializable: {e}"));
    eprintln!(
        "{} transfers, {} audits, {} recorded transactions; dump and check took {:?}",
        done.load(Ordering::SeqCst),
        audits.len(),
        history.len(),
        started.elapsed()
    );
}

/// Transfers from `threads` connections to `gateway` until `stop`, each thread's count of
/// committed transfers in `done`; a connection that fails ends its thread.
fn transfers_until<'s>(
    scope: &'s std::thread::Scope<'s, '_>,
    gateway: &'s Gateway,
    seed: u64,
    done: &'s AtomicU64,
    stop: &'s AtomicBool,
) -> Vec<std::thread::ScopedJoinHandle<'s, ()>> {
    (0..2u64)
        .map(|t| {
            scope.spawn(move || {
                let Ok(mut c) = Conn::open_timeout(gateway.port, Duration::from_secs(60)) else {
                    return;
                };
                let mut rng = common::Rng(seed ^ (t + 1));
                let keys = accounts();
                for _ in 0..100_000 {
                    if stop.load(Ordering::SeqCst) {
                        return;
                    }
                    let (a, b) = (rng.below(ACCOUNTS as u64), rng.below(ACCOUNTS as u64));
                    if a == b {
                        continue;
                    }
                    match try_transfer(
                        &mut c,
                        &keys[a as usize],
                        &keys[b as usize],
                        1 + rng.below(5) as i64,
                    ) {
                        Ok(true) => {
                            done.fetch_add(1, Ordering::SeqCst);
                        }
                        Ok(false) => {}
                        Err(_) => return, // the gateway died
                    }
                }
                panic!("the transfers never stopped");
            })
        })
        .collect()
}

#[test]
fn a_gateway_stopped_or_killed_mid_transaction_is_decided_for_by_the_groups() {
    let _serial = one_at_a_time();
    let dir = tempfile::tempdir().expect("a temporary directory");
    let groups = start_groups(2, &dir);
    let first = Gateway::start(&groups, dir.path());
    let mut setup = first.conn();
    fund_accounts(&mut setup);
    let total = START * ACCOUNTS as i64;
    let done = AtomicU64::new(0);
    let progress = |n: u64, what: &str| {
        let target = done.load(Ordering::SeqCst) + n;
        wait_until(Duration::from_secs(60), what, || {
            done.load(Ordering::SeqCst) >= target
        });
    };

    // Stopped past the groups' recovery timer (1 s): the cohorts ask the backup
    // coordinators, which decide the stopped gateway's transactions; resumed, it learns
    // the decisions and carries on.
    let stop = AtomicBool::new(false);
    std::thread::scope(|scope| {
        let threads = transfers_until(scope, &first, 0x5EED, &done, &stop);
        progress(10, "transfers before the gateway stops");
        first.signal(libc::SIGSTOP);
        std::thread::sleep(Duration::from_millis(2_500));
        first.signal(libc::SIGCONT);
        progress(10, "transfers after the gateway resumed");
        stop.store(true, Ordering::SeqCst);
        for t in threads {
            t.join().expect("no transfer thread panics");
        }
    });
    assert_eq!(audit(&mut setup), total, "the total after the stop");

    // Killed mid-transfer: what it had under way is decided by the groups, and a new
    // gateway takes over its protocol client ids.
    let stop = AtomicBool::new(false);
    std::thread::scope(|scope| {
        let threads = transfers_until(scope, &first, 0xDEAD, &done, &stop);
        progress(10, "transfers before the gateway is killed");
        first.signal(libc::SIGKILL);
        for t in threads {
            t.join().expect("no transfer thread panics");
        }
    });
    drop(first);
    let second = Gateway::start(&groups, dir.path());
    let mut after = second.conn();
    wait_until(
        Duration::from_secs(60),
        "the killed gateway's transactions decided",
        || groups.dump().expect("each group's host dumps").undecided == 0,
    );
    assert_eq!(audit(&mut after), total, "the total after the kill");
    let stop = AtomicBool::new(false);
    std::thread::scope(|scope| {
        let threads = transfers_until(scope, &second, 0xBEEF, &done, &stop);
        progress(10, "transfers through the new gateway");
        stop.store(true, Ordering::SeqCst);
        for t in threads {
            t.join().expect("no transfer thread panics");
        }
    });
    assert_eq!(audit(&mut after), total, "the final total");
    assert_settled(&groups);
}

/// The group stops answering (every replica stopped with SIGSTOP) while the gateway's only
/// protocol client is inside a two-shot INCR: the INCR is answered TIMEOUT, a second one
/// waiting for the client TRYAGAIN, and once the group resumes the first INCR runs to its
/// end and the client serves again (a first build dropped the late first-shot answer of a
/// timed-out plan, and its client stayed busy for ever).
#[test]
fn a_timed_out_transaction_finishes_and_frees_its_protocol_client() {
    let _serial = one_at_a_time();
    let dir = tempfile::tempdir().expect("a temporary directory");
    let groups = start_groups(1, &dir);
    let gateway = Gateway::start_with(
        &groups,
        dir.path(),
        &["--client-ids", "1000-1000", "--timeout-ms", "700"],
    );
    let (mut a, mut b) = (gateway.conn(), gateway.conn());
    assert_eq!(call(&mut a, &["SET", "n", "0"]), Reply::Simple("OK".into()));
    let signal_all = |sig: i32| {
        for r in 0..3 {
            let pid = groups.pid(0, r).expect("a running replica") as i32;
            // SAFETY: `kill` only sends a signal; the pid is a child of `groups`, alive.
            assert_eq!(unsafe { libc::kill(pid, sig) }, 0);
        }
    };
    signal_all(libc::SIGSTOP);
    let (first, second) = std::thread::scope(|scope| {
        let first = scope.spawn(|| call(&mut a, &["INCR", "n"]));
        std::thread::sleep(Duration::from_millis(100));
        let second = call(&mut b, &["INCR", "n"]);
        (first.join().expect("no panic"), second)
    });
    let starts = |r: &Reply, code: &str| matches!(r, Reply::Error(e) if e.starts_with(code));
    assert!(starts(&first, "TIMEOUT"), "{first:?}");
    assert!(
        starts(&second, "TRYAGAIN") || starts(&second, "TIMEOUT"),
        "{second:?}"
    );
    signal_all(libc::SIGCONT);
    let mut served = None;
    wait_until(
        Duration::from_secs(60),
        "the protocol client serves again",
        || match call(&mut a, &["INCR", "n"]) {
            Reply::Int(n) => {
                served = Some(n);
                true
            }
            Reply::Error(e) if e.starts_with("TRYAGAIN") || e.starts_with("TIMEOUT") => false,
            other => panic!("INCR: {other:?}"),
        },
    );
    // The timed-out INCR ran to its end: it committed, or the servers' backup coordinator
    // aborted it. Every INCR answered with a number was applied once.
    let n = int_of(&call(&mut a, &["GET", "n"]));
    assert_eq!(Some(n), served);
    assert!((1..=3).contains(&n), "n = {n}");
    assert_settled(&groups);
}

/// An application's own coordinator (`Session`, issue 19 item 2) placed by hash slots runs
/// transactions on the gateway's keys: what one writes the other reads, in both
/// directions, a two-shot read-modify-write included, and every key lands in the group the
/// slot map names.
#[test]
fn a_session_placed_by_slots_shares_the_gateways_keys() {
    let _serial = one_at_a_time();
    let dir = tempfile::tempdir().expect("a temporary directory");
    let groups = start_groups(2, &dir);
    let gateway = Gateway::start(&groups, dir.path());
    let mut c = gateway.conn();
    let keys: Vec<String> = (0..24).map(|i| format!("shared:{i}")).collect();
    let mut mset = vec!["MSET".to_string()];
    for (i, k) in keys.iter().enumerate() {
        mset.extend([k.clone(), format!("g{i}")]);
    }
    let mset: Vec<&str> = mset.iter().map(String::as_str).collect();
    assert_eq!(call(&mut c, &mset), Reply::Simple("OK".into()));

    let protocol = Protocol::parse("ncc").expect("a known name");
    // An id outside the gateway's 1000-1063.
    let mut s = Session::connect_placed(
        &groups.groups,
        Placement::Slots,
        protocol,
        7,
        Encoding::Binary,
    )
    .expect("the session connects");
    s.set_timeout(Duration::from_secs(30));
    let as_keys: Vec<Key> = keys.iter().map(|k| Key::from(k.as_str())).collect();
    let string = |v: String| Value::from(value::encode(Some(v.as_bytes())));
    let read = s.get(&as_keys).expect("the session reads");
    for (i, (_, v)) in read.iter().enumerate() {
        assert_eq!(
            *v,
            string(format!("g{i}")),
            "{} as the session reads it",
            keys[i]
        );
    }
    // A two-shot transaction: read two keys of different groups, write both from what it
    // read. The gateway then reads what the session wrote.
    let (a, b) = (0..keys.len())
        .flat_map(|i| (0..keys.len()).map(move |j| (i, j)))
        .find(|&(i, j)| {
            Placement::Slots.server_of(&as_keys[i], 2) != Placement::Slots.server_of(&as_keys[j], 2)
        })
        .expect("the keys span both groups");
    let swapped = s
        .transact(
            vec![Op::read(as_keys[a].clone()), Op::read(as_keys[b].clone())],
            |reads| {
                let writes = vec![
                    Op::Write(as_keys[a].clone(), reads[1].1.clone()),
                    Op::Write(as_keys[b].clone(), reads[0].1.clone()),
                ];
                (writes, true)
            },
        )
        .expect("the swap commits");
    assert_eq!(swapped.reads.len(), 2);
    assert_eq!(
        call(&mut c, &["MGET", &keys[a], &keys[b]]),
        Reply::Array(Some(vec![
            Reply::Bulk(Some(format!("g{b}").into_bytes())),
            Reply::Bulk(Some(format!("g{a}").into_bytes())),
        ]))
    );
    let put: Vec<(Key, Value)> = as_keys
        .iter()
        .enumerate()
        .map(|(i, k)| (k.clone(), string(format!("s{i}"))))
        .collect();
    s.put(&put).expect("the session writes");
    for (i, k) in keys.iter().enumerate() {
        assert_eq!(
            call(&mut c, &["GET", k]),
            Reply::Bulk(Some(format!("s{i}").into_bytes())),
            "{k} as the gateway reads it"
        );
    }
    assert_settled(&groups);
    for g in 0..2 {
        let held = groups.dump_group(g).expect("the group's host dumps");
        let shared = held
            .versions
            .iter()
            .filter(|(k, _)| k.as_bytes().starts_with(b"shared:"))
            .inspect(|(k, _)| {
                assert_eq!(
                    Placement::Slots.server_of(k, 2) as usize,
                    g,
                    "{k:?} in group {g}"
                )
            })
            .count();
        assert!(shared > 0, "group {g} holds none of the keys");
    }
}
