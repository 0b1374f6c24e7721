//! The client API (`verso_txn_net::session`) between real processes: threads move value
//! between keys held by different shard servers in two-shot transactions (read both, then
//! write both from what was read), while other transactions audit the total in one
//! read-only transaction. Every audit and the final total must equal the initial total:
//! a transfer seen half-done, or written from a stale read after a restart, breaks it.
//! Bounded: 3 threads × 60 transfers per protocol, each transaction at most 10 s.

use std::path::Path;

use verso_ncc::wire::Encoding;
use verso_ncc::{Key, Op, Value};
use verso_txn_net::local::LocalCluster;
use verso_txn_net::session::Session;
use verso_txn_net::Protocol;

const KEYS: u64 = 6;
const START: u64 = 1_000_000;

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

fn total(s: &mut Session) -> u64 {
    let keys: Vec<Key> = (0..KEYS).map(Key::from).collect();
    s.get(&keys)
        .expect("an audit commits")
        .iter()
        .map(|(_, v)| number(v))
        .sum()
}

/// Balances are numbers (`Value::from(u64)`).
fn number(v: &Value) -> u64 {
    v.to_u64().expect("a balance")
}

#[test]
fn transfers_between_servers_conserve_the_total_under_every_protocol() {
    let exe = Path::new(env!("CARGO_BIN_EXE_verso"));
    for name in Protocol::NAMES {
        let protocol = Protocol::parse(name).expect("a known name");
        let cluster = LocalCluster::start(exe, 2, protocol, false).expect("servers start");
        let servers = cluster.addrs.clone();
        let mut setup = Session::connect(&servers, protocol, 0, Encoding::Binary).expect("connect");
        let initial: Vec<(Key, Value)> = (0..KEYS).map(|k| (k.into(), START.into())).collect();
        setup.put(&initial).expect("the initial balances commit");
        assert_eq!(total(&mut setup), START * KEYS, "{name}");
        let audits: Vec<u64> = std::thread::scope(|scope| {
            let workers: Vec<_> = (1..=3u32)
                .map(|id| {
                    let servers = &servers;
                    scope.spawn(move || {
                        let encoding = if id == 2 {
                            Encoding::Resp
                        } else {
                            Encoding::Binary
                        };
                        let mut s =
                            Session::connect(servers, protocol, id, encoding).expect("connect");
                        let mut rng = Rng(0x9E37_79B9 ^ u64::from(id));
                        let mut seen = Vec::new();
                        for i in 0..60 {
                            // Keys of both parities: one on each server.
                            let from = rng.below(KEYS / 2) * 2;
                            let to = rng.below(KEYS / 2) * 2 + 1;
                            let (from, to) = if i % 2 == 0 { (from, to) } else { (to, from) };
                            let amount = 1 + rng.below(5);
                            s.transact(vec![Op::read(from), Op::read(to)], |reads| {
                                let (a, b) = (number(&reads[0].1), number(&reads[1].1));
                                (
                                    vec![Op::write(from, a - amount), Op::write(to, b + amount)],
                                    true,
                                )
                            })
                            .unwrap_or_else(|e| panic!("{name}: transfer {i}: {e}"));
                            if i % 5 == 0 {
                                seen.push(total(&mut s));
                            }
                        }
                        seen
                    })
                })
                .collect();
            workers
                .into_iter()
                .flat_map(|w| w.join().expect("no worker panics"))
                .collect()
        });
        assert_eq!(audits.len(), 36, "{name}");
        for (i, &t) in audits.iter().enumerate() {
            assert_eq!(
                t,
                START * KEYS,
                "{name}: audit {i}: the total is not conserved"
            );
        }
        assert_eq!(total(&mut setup), START * KEYS, "{name}: the final total");
        // The balances moved: the transfers really ran.
        let balances = setup
            .get(&(0..KEYS).map(Key::from).collect::<Vec<_>>())
            .expect("a read");
        assert!(
            balances.iter().any(|(_, v)| number(v) != START),
            "{name}: {balances:?}"
        );
        cluster.shutdown().expect("the servers stop");
    }
}
