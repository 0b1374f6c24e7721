//! The paper's scenarios as deterministic runs with fixed timestamps (issue 18, item 5):
//! real clients and servers, with the test choosing which message arrives next. Figure 3's
//! timestamp inversion is caught without response timing control and passes with it;
//! Figure 4b's false reject is saved by smart retry; Figure 4c commits; smart retry's
//! "has been read" test, broken, lets a read-only transaction read half of another.

use std::collections::HashMap;

use verso_ncc::check::{strictly_serializable, TxnRecord};
use verso_ncc::{
    Client, ClientEvent, ClientId, Key, Mistakes, Msg, Op, Server, ServerId, Ts, Value,
};

/// Keys and values in the scenarios are numbers (`From<u64>`).
fn kv(pairs: &[(u64, u64)]) -> Vec<(Key, Value)> {
    pairs
        .iter()
        .map(|&(k, v)| (Key::from(k), Value::from(v)))
        .collect()
}

/// Keys: `A` on server 0, `B` on server 1 (two servers: a key's server is `key % 2`).
const A: u64 = 0;
const B: u64 = 1;

#[derive(Debug)]
enum To {
    Server(ServerId),
    Client(ClientId, ServerId),
}

/// Servers, clients and the messages in flight; the test delivers them one by one.
struct Net {
    servers: Vec<Server>,
    clients: HashMap<ClientId, Client>,
    flight: Vec<(To, Msg)>,
    /// Real time: one tick per delivery.
    now: u64,
    began: HashMap<ClientId, u64>,
    history: Vec<TxnRecord>,
}

impl Net {
    fn new(mistakes: Mistakes) -> Net {
        Net {
            servers: (0..2).map(|_| Server::new(mistakes)).collect(),
            clients: HashMap::new(),
            flight: Vec::new(),
            now: 0,
            began: HashMap::new(),
            history: Vec::new(),
        }
    }

    /// Client `c` begins a one-shot transaction at timestamp `clk` (its clock reads `clk`).
    fn begin(&mut self, c: ClientId, clk: u64, ops: Vec<Op>) {
        self.now += 1;
        let mut client = Client::new(c, 2);
        client.begin(clk, ops, true);
        self.clients.insert(c, client);
        self.began.insert(c, self.now);
        self.collect(c);
    }

    fn collect(&mut self, c: ClientId) {
        let client = self.clients.get_mut(&c).expect("began");
        for (s, m) in client.drain() {
            self.flight.push((To::Server(s), m));
        }
        for e in client.events() {
            if let ClientEvent::Committed(o) = e {
                let writes = o.writes();
                self.history.push(TxnRecord {
                    client: c,
                    invoked: self.began[&c],
                    completed: self.now,
                    reads: o.reads,
                    writes,
                    commit_ts: o.commit_ts,
                });
            }
        }
    }

    /// Delivers the first message in flight that `pick` accepts; false if there is none.
    fn deliver(&mut self, pick: impl Fn(&To, &Msg) -> bool) -> bool {
        let Some(i) = self.flight.iter().position(|(to, m)| pick(to, m)) else {
            return false;
        };
        let (to, msg) = self.flight.remove(i);
        self.now += 1;
        match to {
            To::Server(s) => {
                let server = &mut self.servers[s as usize];
                server.on_message(self.now, msg);
                server.check_invariants().expect("server invariants");
                for (c, m) in server.drain() {
                    self.flight.push((To::Client(c, s), m));
                }
            }
            To::Client(c, from) => {
                let now = self.now;
                self.clients
                    .get_mut(&c)
                    .expect("began")
                    .on_message(now, from, msg);
                self.collect(c);
            }
        }
        true
    }

    /// Delivers everything of client `c`'s (to or from it) until none is left.
    fn run_client(&mut self, c: ClientId) {
        while self.deliver(|to, m| involves(to, m, c)) {}
    }

    fn run_all(&mut self) {
        while self.deliver(|_, _| true) {}
    }

    fn committed(&self, c: ClientId) -> bool {
        self.history.iter().any(|t| t.client == c)
    }

    fn check(&self) -> Result<(), String> {
        let versions: Vec<(Key, Vec<Value>)> = self
            .servers
            .iter()
            .flat_map(Server::committed_versions)
            .collect();
        strictly_serializable(&self.history, &versions)
    }
}

fn involves(to: &To, m: &Msg, c: ClientId) -> bool {
    match to {
        To::Client(to, _) => *to == c,
        To::Server(_) => txn_client(m) == Some(c),
    }
}

fn txn_client(m: &Msg) -> Option<ClientId> {
    m.txn().map(|t| t.client)
}

fn to_server(s: ServerId, c: ClientId) -> impl Fn(&To, &Msg) -> bool {
    move |to, m| matches!(to, To::Server(x) if *x == s) && txn_client(m) == Some(c)
}

/// Figure 3: tx1 (timestamp 10) and tx2 (5) are single-server transactions of different
/// clients, tx2 begun after tx1 returned; tx3 (7) writes both keys and reaches A before
/// tx1. Without response timing control tx1 reads tx3's undecided write and returns at
/// once, tx2 then reads B before tx3's write reaches it, and tx3 commits: tx1 -> tx2 in
/// real time, tx2 -> tx3 (anti-dependency on B), tx3 -> tx1 (tx1 read its write): a cycle.
/// With it, tx1 returns only once tx3 is decided, so tx2 begins after tx3 committed.
fn figure_3(mistakes: Mistakes) -> Net {
    let mut net = Net::new(mistakes);
    net.begin(3, 7, vec![Op::write(A, 31), Op::write(B, 32)]);
    assert!(net.deliver(to_server(0, 3))); // tx3's write reaches A
    net.begin(1, 10, vec![Op::read(A)]);
    net.run_client(1); // tx1 runs as far as it can
    if mistakes.no_timing_control {
        assert!(
            net.committed(1),
            "without timing control tx1 returns at once"
        );
    } else {
        // tx1's read of A waits for tx3's decision, which waits for tx3's write on B.
        assert!(!net.committed(1), "tx1 returned before tx3 was decided");
        net.run_all();
        assert!(net.committed(1));
    }
    // tx2 begins only now that tx1 has returned (tx1 -> tx2 in real time).
    net.begin(2, 5, vec![Op::read(B)]);
    net.run_client(2);
    net.run_all();
    assert!((1..=3).all(|c| net.committed(c)));
    net
}

#[test]
fn figure_3_inversion_is_caught_without_timing_control() {
    let net = figure_3(Mistakes {
        no_timing_control: true,
        ..Mistakes::default()
    });
    let e = net.check().unwrap_err();
    assert!(e.contains("rt"), "{e}");
}

#[test]
fn figure_3_is_strictly_serializable_with_ncc() {
    let net = figure_3(Mistakes::default());
    assert_eq!(net.check(), Ok(()));
    let tx2 = net
        .history
        .iter()
        .find(|t| t.client == 2)
        .expect("committed");
    assert_eq!(tx2.reads, kv(&[(B, 32)]));
}

/// A committed read of `key` at timestamp `clk` by client `c` (it leaves `t_r` there).
fn read_to(net: &mut Net, c: ClientId, key: u64, clk: u64) {
    net.begin(c, clk, vec![Op::read(key)]);
    net.run_client(c);
    assert!(net.committed(c));
}

/// Figure 4b: A0 is (0, 0) and B0 is (0, 5). tx1 (timestamp 4) reads A, getting (0, 4),
/// and writes B, refined to (6, 6): the pairs do not overlap (a false reject for a plain
/// safeguard), and smart retry to 6 saves it.
#[test]
fn figure_4b_false_reject_is_saved_by_smart_retry() {
    let mut net = Net::new(Mistakes::default());
    read_to(&mut net, 9, B, 5);
    net.begin(1, 4, vec![Op::read(A), Op::write(B, 11)]);
    net.run_all();
    let tx1 = net
        .history
        .iter()
        .find(|t| t.client == 1)
        .expect("committed");
    assert_eq!(tx1.commit_ts, Ts { clk: 6, cid: 1 });
    let c = &net.clients[&1].stats;
    assert_eq!(
        (c.smart_retries, c.smart_retries_ok, c.committed_first_try),
        (1, 1, 1)
    );
    assert_eq!(net.check(), Ok(()));
}

/// Figure 4c: as 4b, but a newer tx2 (timestamp 8) writes A before tx1's smart retry
/// arrives (executed; its answer waits behind tx1's read of A); its pre-assigned timestamp
/// leaves room (8 > 6), so tx1 still commits at 6, where validation would abort it.
#[test]
fn figure_4c_smart_retry_succeeds_after_a_newer_write() {
    let mut net = Net::new(Mistakes::default());
    read_to(&mut net, 9, B, 5);
    net.begin(1, 4, vec![Op::read(A), Op::write(B, 11)]);
    // tx1's requests run and answer; its smart retry is held back...
    while net.deliver(|to, m| involves(to, m, 1) && !matches!(m, Msg::SmartRetry { .. })) {}
    // ...while tx2 writes A.
    net.begin(2, 8, vec![Op::write(A, 21)]);
    assert!(net.deliver(to_server(0, 2)));
    net.run_all();
    assert!(net.committed(1) && net.committed(2));
    let tx1 = net
        .history
        .iter()
        .find(|t| t.client == 1)
        .expect("committed");
    assert_eq!(tx1.commit_ts, Ts { clk: 6, cid: 1 });
    assert_eq!(net.clients[&1].stats.committed_first_try, 1);
    assert_eq!(net.check(), Ok(()));
}

/// Smart retry's "has been read" test (Alg 5.4) with the read-only freshness check removed.
/// tx1 (4) writes A and B. tx2 (6), read-only, reads tx1's undecided A (its answer waits for
/// tx1's decision) and B before tx1's write of B arrives, raising B's `t_r` to 6, so tx1's
/// B is refined to 7. tx1's safeguard fails (A's (4, 4) lies below B's 7). Smart retry must
/// refuse to move A's version, which tx2 read (`t_r` 6 != `t_w` 4): tx1 aborts, tx2's read
/// of A runs again and finds the initial version. Moved, tx1 commits at 7 and tx2 has read
/// tx1's A and the B from before tx1: a fractured read, no serial order.
///
/// In full NCC this test is not the last line of defence (see
/// `Mistakes::no_read_test_in_smart_retry`): a read-only read never sees an undecided
/// version there, and a read-write reader's entry in B's queue would early-abort tx1's
/// write. With the paper's per-server `t_ro` check a read-only read can see one, and then
/// this test is all that stands between it and a fractured read, as here.
fn smart_retry_after_a_read(mistakes: Mistakes) -> Net {
    let mut net = Net::new(Mistakes {
        no_read_only_check: true,
        ..mistakes
    });
    net.begin(1, 4, vec![Op::write(A, 11), Op::write(B, 12)]);
    assert!(net.deliver(to_server(0, 1))); // tx1's write of A: (4, 1)
    net.begin(2, 6, vec![Op::read(A), Op::read(B)]);
    assert!(net.deliver(to_server(0, 2))); // tx2 reads tx1's undecided A
    assert!(net.deliver(to_server(1, 2))); // tx2 reads B's initial version
    assert!(net.deliver(to_server(1, 1))); // tx1's write of B: refined to (7, 1)
    assert!(
        !net.committed(2),
        "tx2's read of A waits for tx1's decision"
    );
    net.run_all();
    net
}

#[test]
fn smart_retry_keeps_a_read_version_in_place() {
    let net = smart_retry_after_a_read(Mistakes::default());
    assert!(net.committed(1) && net.committed(2));
    let c = &net.clients[&1].stats;
    assert_eq!(
        (c.smart_retries, c.smart_retries_ok),
        (1, 0),
        "A's version was read"
    );
    let tx2 = net
        .history
        .iter()
        .find(|t| t.client == 2)
        .expect("committed");
    assert_eq!(tx2.reads, kv(&[(A, 0), (B, 0)]));
    assert_eq!(net.check(), Ok(()));
}

#[test]
fn smart_retry_without_the_read_test_is_caught() {
    let net = smart_retry_after_a_read(Mistakes {
        no_read_test_in_smart_retry: true,
        ..Mistakes::default()
    });
    let tx2 = net
        .history
        .iter()
        .find(|t| t.client == 2)
        .expect("committed");
    assert_eq!(tx2.reads, kv(&[(A, 11), (B, 0)]), "a fractured read of tx1");
    let e = net.check().unwrap_err();
    assert!(e.contains("-wr->") && e.contains("-rw->"), "{e}");
}
