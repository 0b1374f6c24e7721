//! Elle's list-append workload over TCP: concurrent redis clients append unique 8-byte
//! elements to keys with `APPEND` and read whole lists with `GET`, in single commands,
//! MULTI/EXEC blocks, and WATCH read-modify-write blocks. The recorded history is checked by
//! `verso-check`'s append checker, which infers every key's version order from the lists
//! the clients read: no engine timestamp crosses the wire, and none is trusted.
//!
//! Keys are retired after a few dozen transactions (the window of live keys moves on), so
//! lists stay short and checking stays linear; the `soak` variant runs rounds of this for
//! `VERSO_SOAK_SECS` seconds (`scripts/soak.sh`).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Barrier;

use redis::Value;
use verso_check::{
    check_append_strict_serializable, decode_list, AppendRecorder, CheckStats, Outcome,
};
use verso_engine::{Concurrency, Db, Options};
use verso_server::server::{self, ServerConfig};
use verso_server::session::Shared;

mod common;
use common::Rng;

/// One run: how many clients, transactions each, live keys, and how often the window of
/// live keys moves on (in transactions over all clients).
#[derive(Clone, Copy, Debug)]
struct Workload {
    clients: u64,
    txns: u64,
    keys: u64,
    rotate_every: u64,
    seed: u64,
}

/// What one transaction does to one key.
enum Step {
    Append(Vec<u8>, u64),
    Read(Vec<u8>),
}

fn list_of(v: &Value) -> Vec<u64> {
    let bytes = match v {
        Value::Nil => None,
        Value::BulkString(b) => Some(b.as_slice()),
        other => panic!("GET answered {other:?}"),
    };
    decode_list(bytes).unwrap_or_else(|| panic!("a value that is not a list: {v:?}"))
}

fn client(w: Workload, port: u16, rec: &AppendRecorder, started: &AtomicU64, seed: u64) -> u64 {
    let mut c = redis::Client::open(format!("redis://127.0.0.1:{port}/"))
        .unwrap()
        .get_connection()
        .unwrap();
    let mut rng = Rng(seed);
    let mut nils = 0;
    for _ in 0..w.txns {
        let base = started.fetch_add(1, Ordering::Relaxed) / w.rotate_every;
        let key = |rng: &mut Rng| {
            let u = rng.below(1 << 16) as f64 / f64::from(1 << 16);
            format!("L{:08}", base + ((u * u) * w.keys as f64) as u64).into_bytes()
        };
        let mut t = rec.begin_txn();
        match rng.below(10) {
            // One command: an APPEND or a GET.
            0..=2 => {
                let k = key(&mut rng);
                if rng.below(2) == 0 {
                    let e = rec.next_element();
                    let _: i64 = redis::cmd("APPEND")
                        .arg(&k)
                        .arg(&e.to_le_bytes()[..])
                        .query(&mut c)
                        .unwrap();
                    t.append(k, e);
                } else {
                    let v: Value = redis::cmd("GET").arg(&k).query(&mut c).unwrap();
                    t.read(k, list_of(&v));
                }
                t.finish(Outcome::Committed, None);
            }
            // A MULTI/EXEC block of appends and reads.
            3..=6 => {
                let steps: Vec<Step> = (0..1 + rng.below(4))
                    .map(|_| {
                        if rng.below(2) == 0 {
                            Step::Append(key(&mut rng), rec.next_element())
                        } else {
                            Step::Read(key(&mut rng))
                        }
                    })
                    .collect();
                let mut pipe = redis::pipe();
                pipe.atomic();
                for s in &steps {
                    match s {
                        Step::Append(k, e) => pipe.cmd("APPEND").arg(k).arg(&e.to_le_bytes()[..]),
                        Step::Read(k) => pipe.cmd("GET").arg(k),
                    };
                }
                let r: Value = pipe.query(&mut c).unwrap();
                let Value::Array(replies) = r else {
                    panic!("EXEC without WATCH answered {r:?}")
                };
                for (s, reply) in steps.into_iter().zip(&replies) {
                    match s {
                        Step::Append(k, e) => {
                            t.append(k, e);
                        }
                        Step::Read(k) => {
                            t.read(k, list_of(reply));
                        }
                    }
                }
                t.finish(Outcome::Committed, None);
            }
            // WATCH read-modify-write: read a list outside the block, append in it.
            _ => {
                let k = key(&mut rng);
                let () = redis::cmd("WATCH").arg(&k).query(&mut c).unwrap();
                let v: Value = redis::cmd("GET").arg(&k).query(&mut c).unwrap();
                t.read(k.clone(), list_of(&v));
                if rng.below(4) == 0 {
                    std::thread::yield_now(); // widen the race window now and then
                }
                let e = rec.next_element();
                let r: Value = redis::pipe()
                    .atomic()
                    .cmd("APPEND")
                    .arg(&k)
                    .arg(&e.to_le_bytes()[..])
                    .query(&mut c)
                    .unwrap();
                t.append(k, e);
                match r {
                    Value::Nil => {
                        nils += 1;
                        t.finish(Outcome::Aborted, None);
                    }
                    Value::Array(_) => {
                        t.finish(Outcome::Committed, None);
                    }
                    other => panic!("EXEC answered {other:?}"),
                }
            }
        }
    }
    nils
}

/// Runs the workload against a fresh server and checks the history.
fn run(w: Workload) -> CheckStats {
    let cfg = ServerConfig {
        port: 0,
        ..ServerConfig::default()
    };
    let listener = server::bind(&cfg).expect("bind");
    let port = listener.local_addr().unwrap().port();
    let db = Db::open(Options::default().concurrency(Concurrency::PrecisionLocking)).unwrap();
    let shared = Shared::new(db, None).unwrap();
    let stop = AtomicBool::new(false);
    let rec = AppendRecorder::new();
    let started = AtomicU64::new(0);
    let barrier = Barrier::new(w.clients as usize);
    let nils: u64 = std::thread::scope(|s| {
        s.spawn(|| server::serve(listener, &shared, &cfg, &stop));
        let handles: Vec<_> = (0..w.clients)
            .map(|i| {
                let (rec, started, barrier) = (&rec, &started, &barrier);
                s.spawn(move || {
                    barrier.wait();
                    client(w, port, rec, started, w.seed * 1_000 + i)
                })
            })
            .collect();
        let nils = handles.into_iter().map(|h| h.join()).collect::<Vec<_>>();
        stop.store(true, Ordering::Relaxed);
        nils.into_iter()
            .map(|n| n.unwrap_or_else(|e| std::panic::resume_unwind(e)))
            .sum()
    });
    let history = rec.into_history();
    match check_append_strict_serializable(&history) {
        Ok(stats) => {
            assert!(nils > 0, "{w:?}: no WATCH block ever raced: {stats:?}");
            eprintln!("{w:?}: {} txns, {nils} EXEC nil; {stats:?}", history.len());
            stats
        }
        Err(v) => panic!("{w:?}: not strictly serializable:\n{v}"),
    }
}

#[test]
fn concurrent_list_appends_are_strictly_serializable() {
    let stats = run(Workload {
        clients: 6,
        txns: 300,
        keys: 8,
        rotate_every: 24,
        seed: 1,
    });
    assert!(stats.wr_edges > 100 && stats.rw_edges > 100, "{stats:?}");
}

/// `scripts/soak.sh`: rounds with fresh seeds and varying shapes, `VERSO_SOAK_SECS` long.
#[test]
#[ignore = "a soak run of minutes: scripts/soak.sh"]
fn soak_list_appends() {
    let secs = std::env::var("VERSO_SOAK_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(60);
    let started = std::time::Instant::now();
    let mut round = 0;
    while started.elapsed() < std::time::Duration::from_secs(secs) {
        round += 1;
        run(Workload {
            clients: 4 + round % 6,
            txns: 1_000,
            keys: [4, 16, 48][(round % 3) as usize],
            rotate_every: 32,
            seed: 1_000 + round,
        });
    }
    eprintln!("soak: {round} rounds passed");
}
