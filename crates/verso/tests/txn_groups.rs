//! Shards served by replication groups between real processes (issue 18 item 3, issue 19
//! items 3 and 6): shards of three `verso txn-server --replica R` processes each, on
//! loopback, while replicas are killed with SIGKILL (the host of each shard in turn, then
//! a whole group at once) and restarted from their logs, or stopped with SIGSTOP:
//! - threads move value between keys of two shards in two-shot transactions and audit
//!   the total in one-round read-only transactions: every audit and the final total must
//!   equal the initial total;
//! - the load driver's recorded history must be strictly serializable;
//! - a stopped backup must not stop its group;
//! - a group whose log reaches its limit refuses new transactions and keeps what it has;
//! - coordinating client processes killed or stopped mid-transaction must be decided for
//!   by the backup coordinators, across a failover.
//!
//! Nothing may stay undecided, and each group's host must report its invariants intact.
//! Every wait is on a condition, bounded in time.

mod common;

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use verso_ncc::wire::Encoding;
use verso_ncc::{Key, Op, Value};
use verso_txn_net::group::GroupDurability;
use verso_txn_net::local_groups::{GroupsSpec, LocalGroups};
use verso_txn_net::session::Session;
use verso_txn_net::{Protocol, StoreKind};

const KEYS: u64 = 6;
const START: u64 = 1_000_000;
const WORKERS: u32 = 3;

/// A small seeded generator (xorshift), so each thread's transfers repeat run to run.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

fn number(v: &Value) -> u64 {
    v.to_u64().expect("a balance")
}

fn total(s: &mut Session) -> u64 {
    let keys: Vec<Key> = (0..KEYS).map(Key::from).collect();
    s.get(&keys)
        .expect("an audit commits")
        .iter()
        .map(|(_, v)| number(v))
        .sum()
}

/// The tests of this file run one at a time: each starts 3 to 9 processes, and four such
/// runs at once on two cores stretch failovers past the tests' bounds.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

/// `shards` groups of three NCC replicas (answers on disk), their logs under `dir`.
fn start(shards: u32, keep_history: bool, dir: &tempfile::TempDir) -> (LocalGroups, Protocol) {
    let exe = Path::new(env!("CARGO_BIN_EXE_verso"));
    let protocol = Protocol::parse("ncc").expect("a known name");
    let groups = LocalGroups::start(
        exe,
        shards,
        protocol,
        keep_history,
        GroupDurability::AnswersOnDisk,
        dir.path(),
    )
    .expect("the replicas start");
    (groups, protocol)
}

use common::txn_clients::{kill_hosts_then_a_whole_group, wait_until, ClientProcess};

#[test]
fn transfers_conserve_the_total_while_group_replicas_crash_and_restart() {
    let _serial = one_at_a_time();
    let dir = tempfile::tempdir().expect("a temporary directory");
    let (mut groups, protocol) = start(2, true, &dir);
    let servers = groups.groups.clone();
    let mut setup =
        Session::connect_groups(&servers, protocol, 0, Encoding::Binary).expect("connect");
    setup.set_timeout(Duration::from_secs(30));
    let initial: Vec<(Key, Value)> = (0..KEYS).map(|k| (k.into(), START.into())).collect();
    setup.put(&initial).expect("the initial balances commit");
    assert_eq!(total(&mut setup), START * KEYS);

    let done = AtomicU64::new(0);
    let stop = AtomicBool::new(false);
    let audits: Vec<u64> = std::thread::scope(|scope| {
        let workers: Vec<_> = (1..=WORKERS)
            .map(|id| {
                let (servers, done, stop) = (&servers, &done, &stop);
                scope.spawn(move || {
                    let mut s = Session::connect_groups(servers, protocol, id, Encoding::Binary)
                        .expect("connect");
                    // A failover takes about a second (a view change, then the new host
                    // replays its log); a transaction may see two.
                    s.set_timeout(Duration::from_secs(30));
                    let mut rng = Rng(0x9E37_79B9 ^ u64::from(id));
                    let mut seen = Vec::new();
                    let mut i = 0u64;
                    // At least 40 transfers each, then on until the faults are over.
                    while i < 40 || !stop.load(Ordering::SeqCst) {
                        assert!(i < 100_000, "the faults never ended");
                        let from = rng.below(KEYS / 2) * 2;
                        let to = rng.below(KEYS / 2) * 2 + 1;
                        let (from, to) = if i.is_multiple_of(2) {
                            (from, to)
                        } else {
                            (to, from)
                        };
                        let amount = 1 + rng.below(5);
                        s.transact(vec![Op::read(from), Op::read(to)], |reads| {
                            let (a, b) = (number(&reads[0].1), number(&reads[1].1));
                            (
                                vec![Op::write(from, a - amount), Op::write(to, b + amount)],
                                true,
                            )
                        })
                        .unwrap_or_else(|e| panic!("worker {id}: transfer {i}: {e}"));
                        done.fetch_add(1, Ordering::SeqCst);
                        if i.is_multiple_of(5) {
                            seen.push(total(&mut s));
                        }
                        i += 1;
                    }
                    seen
                })
            })
            .collect();

        // Each host killed in turn, then (group 0) every replica at once: answers left
        // only once their inputs were on a majority's disks, so none is lost.
        kill_hosts_then_a_whole_group(&mut groups, &done, 0);
        stop.store(true, Ordering::SeqCst);
        workers
            .into_iter()
            .flat_map(|w| w.join().expect("no worker panics"))
            .collect()
    });
    for (i, &t) in audits.iter().enumerate() {
        assert_eq!(t, START * KEYS, "audit {i}: the total is not conserved");
    }
    assert_eq!(total(&mut setup), START * KEYS, "the final total");
    let moved = setup
        .get(&(0..KEYS).map(Key::from).collect::<Vec<_>>())
        .expect("a read");
    assert!(moved.iter().any(|(_, v)| number(v) != START), "{moved:?}");
    let dump = groups.dump().expect("each group's host dumps");
    assert!(dump.broken.is_empty(), "{:?}", dump.broken);
    assert_eq!(dump.undecided, 0, "transactions left undecided");
}

/// The load driver's recorded history, over groups whose replicas crash: a host of shard 0
/// is killed and restarted, then the whole of shard 1's group, while contended
/// transactions of every shape run. With what each group's host committed, the history
/// must be strictly serializable, and every transaction must finish.
#[test]
fn the_history_is_strictly_serializable_across_failovers_and_a_total_crash() {
    let _serial = one_at_a_time();
    use verso_ncc::sim::SimOptions;
    use verso_txn_net::load::{self, LoadConfig};

    let dir = tempfile::tempdir().expect("a temporary directory");
    let (mut groups, protocol) = start(2, true, &dir);
    // Every shard has a host before the load starts.
    for s in 0..2 {
        groups.host(s, Duration::from_secs(30)).expect("a host");
    }
    let mut mix = SimOptions::new(11);
    mix.keys = 40;
    let cfg = LoadConfig {
        servers: groups.groups.clone(),
        protocol,
        mix,
        threads: 2,
        clients_per_thread: 6,
        rate: 0,
        duration: Duration::from_secs(4),
        record_history: true,
        resend_after_us: 200_000,
        drain_timeout: Duration::from_secs(60),
        first_client: 100,
        baseline_backoff_us: None,
        encoding: Encoding::Binary,
    };
    // Each fault once the load has logged more inputs (the logs' bytes on disk).
    let logged = |groups: &LocalGroups, s: usize, more: u64, what: &str| {
        let target = groups.log_bytes(s) + more;
        wait_until(Duration::from_secs(60), what, || {
            groups.log_bytes(s) >= target
        });
    };
    let report = std::thread::scope(|scope| {
        let load = scope.spawn(|| load::run(&cfg));
        logged(&groups, 0, 20_000, "inputs before the first fault");
        let host = groups.host(0, Duration::from_secs(30)).expect("a host");
        groups.kill(0, host).expect("kill the host");
        logged(&groups, 0, 20_000, "inputs after the host was killed");
        groups.restart(0, host).expect("the replica restarts");
        logged(&groups, 1, 20_000, "inputs on shard 1");
        for r in 0..3 {
            groups.kill(1, r).expect("kill a replica");
        }
        for r in 0..3 {
            groups.restart(1, r).expect("the replica restarts");
        }
        load.join().expect("the load does not panic")
    })
    .expect("the load runs");
    assert!(
        report.committed > 100,
        "only {} committed",
        report.committed
    );
    let dump = groups.dump().expect("each group's host dumps");
    let verdict = load::check(protocol, &report, &dump);
    assert!(verdict.is_ok(), "{verdict:?}");
}

/// A replica that stops reading (SIGSTOP: a hung process, or a partition that drops
/// packets) must not stop its group: the host keeps committing with the other backup while
/// megabytes of messages for the stopped one pile up (more than the sockets' buffers) and
/// are dropped; once resumed, it catches up, and can then take over as host.
#[test]
fn a_stopped_backup_does_not_stop_its_group() {
    let _serial = one_at_a_time();
    let dir = tempfile::tempdir().expect("a temporary directory");
    let (mut groups, protocol) = start(1, false, &dir);
    let host = groups.host(0, Duration::from_secs(30)).expect("a host");
    let stopped = (host + 1) % 3;
    // A group's replicas start amnesiac (an empty disk may be a lost one) and neither vote
    // nor campaign until they have caught up with a primary. A backup stopped before that,
    // whose primary then dies, leaves the other backup no vote to win: the group stays
    // without a primary (Lazy VSR survives one failure, and that is two). The test is of a
    // backup stopped in a group that has formed.
    wait_until(
        Duration::from_secs(30),
        "the backup's recovery from its start",
        || recovered(dir.path(), 0, stopped),
    );
    let pid = groups.pid(0, stopped).expect("running") as i32;
    // SAFETY: `kill` only sends a signal, to our own child, which is not yet waited for.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGSTOP) }, 0);
    let mut s =
        Session::connect_groups(&groups.groups, protocol, 1, Encoding::Binary).expect("connect");
    s.set_timeout(Duration::from_secs(30));
    let before = groups.log_bytes(0);
    // 48 values of 512 KiB: 24 MiB through the log while a backup reads nothing.
    let value = |i: u64| Value::from(vec![i as u8; 512 << 10]);
    for i in 0..48u64 {
        s.put(&[(Key::from(i % 4), value(i))])
            .unwrap_or_else(|e| panic!("put {i} with a backup stopped: {e}"));
    }
    assert!(groups.log_bytes(0) - before > 16 << 20);
    // SAFETY: as above.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGCONT) }, 0);
    // The resumed replica catches up (its log on disk reaches the host's); then, with the
    // host killed, it and the other backup elect a primary, which must hold every value
    // written.
    let host_log = groups.replica_log_bytes(0, host);
    wait_until(
        Duration::from_secs(60),
        "the resumed replica's catch-up",
        || groups.replica_log_bytes(0, stopped) + (1 << 20) >= host_log,
    );
    groups.kill(0, host).expect("kill the host");
    let got = s
        .get(&(0..4).map(Key::from).collect::<Vec<_>>())
        .unwrap_or_else(|e| {
            panic!(
                "a read after the failover: {e}; the replicas said:\n{}",
                replica_logs(dir.path(), 1)
            )
        });
    for (k, v) in got {
        let i = 44 + k.to_u64().expect("a numeric key");
        assert!(v == value(i), "key {k:?} lost its last value");
    }
}

/// The group log is not compacted, so `--log-max-bytes` bounds it: once a group's log
/// holds that many input bytes, its host refuses new transactions (they time out, and the
/// host says why on standard error) while its replicas stay up, their logs stop growing,
/// and everything acknowledged before stays readable in a dump.
#[test]
fn a_group_whose_log_is_full_refuses_new_transactions_and_keeps_the_old() {
    let _serial = one_at_a_time();
    let exe = Path::new(env!("CARGO_BIN_EXE_verso"));
    let dir = tempfile::tempdir().expect("a temporary directory");
    let protocol = Protocol::parse("ncc").expect("a known name");
    let limit = 4u64 << 20;
    let spec = GroupsSpec {
        servers: 1,
        protocol,
        // So that the dump lists every committed value.
        keep_history: true,
        store: StoreKind::Memory,
        durability: GroupDurability::AnswersOnDisk,
        log_max_bytes: Some(limit),
    };
    let groups = LocalGroups::start_spec(exe, spec, dir.path()).expect("the replicas start");
    let mut s =
        Session::connect_groups(&groups.groups, protocol, 1, Encoding::Binary).expect("connect");
    s.set_timeout(Duration::from_secs(3));
    // Values of 256 KiB: about 16 fit in the limit.
    let value = |i: u64| Value::from(vec![i as u8 | 1; 256 << 10]);
    let mut acknowledged = 0u64;
    while s
        .put(&[(Key::from(acknowledged), value(acknowledged))])
        .is_ok()
    {
        acknowledged += 1;
        assert!(
            acknowledged < 64,
            "the log took {acknowledged} puts of 256 KiB"
        );
    }
    assert!(
        (12..=16).contains(&acknowledged),
        "{acknowledged} puts of 256 KiB acknowledged under a limit of 4 MiB"
    );
    let host = groups.host(0, Duration::from_secs(10)).expect("a host");
    let full = groups.replica_log_bytes(0, host);
    // Refused, again and again: the logs stop growing (a refused input is not logged).
    let mut refused =
        Session::connect_groups(&groups.groups, protocol, 2, Encoding::Binary).expect("connect");
    refused.set_timeout(Duration::from_millis(500));
    for i in 0..3u64 {
        assert!(refused.put(&[(Key::from(100 + i), value(i))]).is_err());
    }
    assert!(
        groups.replica_log_bytes(0, host) <= full + (64 << 10),
        "the full log grew from {full} to {} bytes",
        groups.replica_log_bytes(0, host)
    );
    let said = std::fs::read_to_string(dir.path().join(format!("shard0-replica{host}/stderr.log")))
        .expect("the host's standard error");
    assert!(said.contains("--log-max-bytes"), "the host said: {said}");
    let dump = groups.dump().expect("a full group still answers a dump");
    for i in 0..acknowledged {
        let versions = dump
            .versions
            .iter()
            .find(|(k, _)| *k == Key::from(i))
            .map(|(_, v)| v)
            .unwrap_or_else(|| panic!("acknowledged key {i} is not in the dump"));
        assert!(
            versions.last() == Some(&value(i)),
            "acknowledged key {i} lost its value"
        );
    }
    assert_eq!(dump.undecided, 0);
}

/// Whether replica `r` of shard `s` last said it is no longer amnesiac (each change of
/// view, role or amnesia is a line on its standard error).
fn recovered(dir: &Path, s: usize, r: usize) -> bool {
    let path = dir.join(format!("shard{s}-replica{r}/stderr.log"));
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let tag = format!("shard {s} replica {r}: view");
    text.lines()
        .rfind(|l| l.contains(&tag))
        .is_some_and(|l| !l.ends_with("amnesiac"))
}

/// What every replica of `shards` shards wrote on standard error (for a failure's message).
fn replica_logs(dir: &Path, shards: usize) -> String {
    let mut out = String::new();
    for s in 0..shards {
        for r in 0..3 {
            let path = dir.join(format!("shard{s}-replica{r}/stderr.log"));
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            out += &format!("--- shard {s} replica {r}:\n{text}");
        }
    }
    out
}

/// No transaction of a shard's groups is left undecided (false if no host answers).
fn all_decided(groups: &LocalGroups) -> bool {
    groups.dump().is_ok_and(|d| d.undecided == 0)
}

/// Coordinating client processes die (SIGKILL) or stop (SIGSTOP) mid-transaction, and the
/// host of one shard is killed before their transactions are decided: the backup
/// coordinators (NCC's App. D), on the new host and across the groups, must still decide
/// every one of them, and the total of the transfers must hold throughout; the stopped
/// client, resumed, must agree with what was decided without it.
#[test]
fn clients_that_die_or_stop_are_decided_for_while_a_host_fails_over() {
    let _serial = one_at_a_time();
    let exe = Path::new(env!("CARGO_BIN_EXE_verso"));
    let dir = tempfile::tempdir().expect("a temporary directory");
    // With the history kept, each host's dump also reports its protocol invariants.
    let (mut groups, protocol) = start(2, true, &dir);
    let spec = groups
        .groups
        .iter()
        .map(|g| {
            g.iter()
                .map(|a| a.to_string())
                .collect::<Vec<_>>()
                .join(",")
        })
        .collect::<Vec<_>>()
        .join(";");
    let mut auditor =
        Session::connect_groups(&groups.groups, protocol, 0, Encoding::Binary).expect("connect");
    auditor.set_timeout(Duration::from_secs(30));
    let initial: Vec<(Key, Value)> = (0..KEYS).map(|k| (k.into(), START.into())).collect();
    auditor.put(&initial).expect("the initial balances commit");

    let killed = ClientProcess::transfers(exe, ["--groups", &spec], 1, KEYS);
    let stopped = ClientProcess::transfers(exe, ["--groups", &spec], 2, KEYS);
    killed.wait_for(30, "the first client's transfers");
    stopped.wait_for(30, "the second client's transfers");
    killed.signal(libc::SIGKILL);
    stopped.signal(libc::SIGSTOP);
    let at_stop = stopped.committed.load(Ordering::SeqCst);
    let host = groups.host(0, Duration::from_secs(30)).expect("a host");
    groups.kill(0, host).expect("kill the host");
    wait_until(
        Duration::from_secs(60),
        "recovery across the failover",
        || all_decided(&groups),
    );
    assert_eq!(total(&mut auditor), START * KEYS, "after the failover");
    groups.restart(0, host).expect("the replica restarts");

    stopped.signal(libc::SIGCONT);
    stopped.wait_for(at_stop + 30, "the resumed client's transfers");
    assert_eq!(
        total(&mut auditor),
        START * KEYS,
        "after the resumed client's"
    );
    stopped.signal(libc::SIGKILL);
    wait_until(
        Duration::from_secs(60),
        "recovery after the last kill",
        || all_decided(&groups),
    );
    assert_eq!(total(&mut auditor), START * KEYS, "at the end");
    let dump = groups.dump().expect("each group's host dumps");
    assert!(dump.broken.is_empty(), "{:?}", dump.broken);
}
