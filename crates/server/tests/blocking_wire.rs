//! Blocking pops over TCP, through the server's worker threads: producers push unique ids
//! onto two lists and a sorted set while consumers wait in BLPOP and BZPOPMIN, and a mover
//! shuttles elements from one list to another with BLMOVE. Every id must come out exactly
//! once: nothing lost, nothing delivered twice. (That a push wakes a waiter promptly, not at
//! its timeout, is checked by the redis-py suite's BLPOP test.)

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

use verso_engine::{Concurrency, Db, Options};
use verso_server::server::{self, ServerConfig};
use verso_server::session::Shared;

const PRODUCERS: u64 = 2;
const PER_PRODUCER: u64 = 300;

fn connect(port: u16) -> redis::Connection {
    redis::Client::open(format!("redis://127.0.0.1:{port}/"))
        .unwrap()
        .get_connection()
        .unwrap()
}

#[test]
fn every_pushed_element_is_popped_exactly_once() {
    let cfg = ServerConfig {
        port: 0,
        threads: 2,
        ..ServerConfig::default()
    };
    let listener = server::bind(&cfg).expect("bind");
    let port = listener.local_addr().unwrap().port();
    let db = Db::open(Options::default().concurrency(Concurrency::PrecisionLocking)).unwrap();
    let shared = Shared::new(db, None).unwrap();
    let stop = AtomicBool::new(false);
    let total = (PRODUCERS * PER_PRODUCER) as usize;
    let taken = AtomicUsize::new(0);
    let seen = Mutex::new(Vec::<String>::new());
    let mover_stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| server::serve(listener, &shared, &cfg, &stop));
        // Consumers first, so they block before the pushes arrive.
        let mut consumers = Vec::new();
        for c in 0..3 {
            let (taken, seen) = (&taken, &seen);
            consumers.push(s.spawn(move || {
                let mut conn = connect(port);
                // The timeouts only let a consumer notice that everything was taken.
                while taken.load(Ordering::SeqCst) < total {
                    let got = if c == 0 {
                        let z: Option<(String, String, f64)> = redis::cmd("BZPOPMIN")
                            .arg("zq")
                            .arg(0.5)
                            .query(&mut conn)
                            .unwrap();
                        z.map(|(_, m, _)| m)
                    } else {
                        let l: Option<(String, String)> = redis::cmd("BLPOP")
                            .arg("q")
                            .arg("moved")
                            .arg(0.5)
                            .query(&mut conn)
                            .unwrap();
                        l.map(|(_, v)| v)
                    };
                    if let Some(v) = got {
                        taken.fetch_add(1, Ordering::SeqCst);
                        seen.lock().unwrap().push(v);
                    }
                }
            }));
        }
        // A mover: takes from `side` into `moved` (where consumers also look).
        let mover = {
            let mover_stop = &mover_stop;
            s.spawn(move || {
                let mut conn = connect(port);
                let mut moved = 0;
                while !mover_stop.load(Ordering::SeqCst) {
                    let v: Option<String> = redis::cmd("BLMOVE")
                        .arg("side")
                        .arg("moved")
                        .arg("LEFT")
                        .arg("RIGHT")
                        .arg(0.2)
                        .query(&mut conn)
                        .unwrap();
                    moved += usize::from(v.is_some());
                }
                moved
            })
        };
        let producers: Vec<_> = (0..PRODUCERS)
            .map(|p| {
                s.spawn(move || {
                    let mut conn = connect(port);
                    for i in 0..PER_PRODUCER {
                        let id = format!("p{p}-{i}");
                        let () = match i % 3 {
                            0 => redis::cmd("RPUSH")
                                .arg("q")
                                .arg(&id)
                                .query(&mut conn)
                                .unwrap_or(()),
                            1 => redis::cmd("RPUSH")
                                .arg("side")
                                .arg(&id)
                                .query(&mut conn)
                                .unwrap_or(()),
                            _ => redis::cmd("ZADD")
                                .arg("zq")
                                .arg(i as f64)
                                .arg(&id)
                                .query(&mut conn)
                                .unwrap_or(()),
                        };
                    }
                })
            })
            .collect();
        for p in producers {
            p.join().unwrap();
        }
        for c in consumers {
            c.join().unwrap();
        }
        mover_stop.store(true, Ordering::SeqCst);
        let moved = mover.join().unwrap();
        assert!(moved > 0, "the mover moved something");
        stop.store(true, Ordering::Relaxed);
    });
    let seen = seen.into_inner().unwrap();
    let unique: BTreeSet<&String> = seen.iter().collect();
    assert_eq!(seen.len(), total, "every element popped once");
    assert_eq!(unique.len(), total, "no element popped twice");
}
