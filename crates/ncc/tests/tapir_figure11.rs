//! The paper's Figure 11 (App. A.2) run step by step with TAPIR-CC's real client and
//! server state machines: every transaction passes TAPIR's validation and commits, and the
//! history is serializable but not strictly serializable (tx2 → tx3 in real time, yet
//! timestamp order puts tx3 at 5 before tx1 at 8 before tx2 at 10). The checker flags it.
//! The same schedule under dOCC is refused somewhere, and what commits is strictly
//! serializable.

use std::collections::HashMap;

use verso_ncc::baseline::{BMsg, BaselineClient, BaselineServer, Flavor};
use verso_ncc::check::{serializable_with, strictly_serializable, TxnRecord};
use verso_ncc::{ClientEvent, ClientId, Key, Op, ServerId, TxnClient, TxnServer, Value};

/// Keys A, B, C on servers 0, 1, 2 (a key's server is `key % 3`).
const A: u64 = 0;
const B: u64 = 1;
const C: u64 = 2;

struct Net {
    servers: Vec<BaselineServer>,
    clients: HashMap<ClientId, BaselineClient>,
    /// Messages in flight, by destination: servers, then clients.
    to_servers: Vec<(ServerId, BMsg)>,
    to_clients: Vec<(ClientId, ServerId, BMsg)>,
    now: u64,
    began: HashMap<ClientId, u64>,
    history: Vec<TxnRecord>,
    committed: HashMap<ClientId, u32>,
    restarted: HashMap<ClientId, u32>,
}

impl Net {
    fn new(flavor: Flavor) -> Net {
        Net {
            servers: (0..3).map(|_| BaselineServer::new(flavor)).collect(),
            clients: (1..=3)
                .map(|c| (c, BaselineClient::new(c, 3, flavor)))
                .collect(),
            to_servers: Vec::new(),
            to_clients: Vec::new(),
            now: 0,
            began: HashMap::new(),
            history: Vec::new(),
            committed: HashMap::new(),
            restarted: HashMap::new(),
        }
    }

    /// Client `c` begins a transaction whose first shot is `ops`, its clock reading `clk`
    /// (the proposed timestamp).
    fn begin(&mut self, c: ClientId, clk: u64, ops: Vec<Op>, last: bool) {
        self.now += 1;
        self.began.insert(c, self.now);
        self.clients
            .get_mut(&c)
            .expect("client")
            .begin(clk, ops, last);
        self.collect(c);
    }

    fn next_shot(&mut self, c: ClientId, clk: u64, ops: Vec<Op>) {
        self.clients
            .get_mut(&c)
            .expect("client")
            .next_shot(clk, ops, true);
        self.collect(c);
    }

    fn collect(&mut self, c: ClientId) {
        let client = self.clients.get_mut(&c).expect("client");
        self.to_servers.extend(client.drain());
        for e in client.events() {
            match e {
                ClientEvent::Committed(o) => {
                    *self.committed.entry(c).or_default() += 1;
                    self.history.push(TxnRecord {
                        client: c,
                        invoked: self.began[&c],
                        completed: self.now,
                        writes: o.writes(),
                        reads: o.reads,
                        commit_ts: o.commit_ts,
                    });
                }
                ClientEvent::Restarted => *self.restarted.entry(c).or_default() += 1,
                ClientEvent::ShotDone { .. } => {}
            }
        }
    }

    /// Delivers client `c`'s messages in flight to server `s`, and the answers.
    fn deliver(&mut self, c: ClientId, s: ServerId) {
        let (mine, rest): (Vec<_>, Vec<_>) = self
            .to_servers
            .drain(..)
            .partition(|(to, m)| *to == s && sender(m) == c);
        self.to_servers = rest;
        for (_, m) in mine {
            self.now += 1;
            let server = &mut self.servers[s as usize];
            server.on_message(self.now, m);
            server.check_invariants().expect("server invariants");
            for (c, reply) in server.drain() {
                self.to_clients.push((c, s, reply));
            }
        }
        self.answer_clients();
    }

    fn answer_clients(&mut self) {
        while !self.to_clients.is_empty() {
            let (c, from, m) = self.to_clients.remove(0);
            self.now += 1;
            self.clients
                .get_mut(&c)
                .expect("client")
                .on_message(self.now, from, m);
            self.collect(c);
        }
    }

    fn versions(&self) -> Vec<(Key, Vec<Value>)> {
        self.servers
            .iter()
            .flat_map(|s| s.committed_versions())
            .collect()
    }
}

/// Who sent (or is answered by) `m`.
fn sender(m: &BMsg) -> ClientId {
    match m {
        BMsg::Execute { txn, .. }
        | BMsg::ExecReply { txn, .. }
        | BMsg::Prepare { txn, .. }
        | BMsg::PrepareReply { txn, .. }
        | BMsg::Decide { txn, .. }
        | BMsg::DecideAck { txn } => txn.client,
    }
}

/// Figure 11's steps 1-17, each message delivered as the figure orders them.
fn figure_11(flavor: Flavor) -> Net {
    let mut net = Net::new(flavor);
    // 1-2. U1's tx1 reads A and B (a first shot), then buffers W1C.
    net.begin(1, 8, vec![Op::read(A), Op::read(B)], false);
    net.deliver(1, 0);
    net.deliver(1, 1);
    // 3-5. It proposes ts 8 and validates R1A at A and R1B at B; W1C's validation at C
    // is still on its way.
    net.next_shot(1, 8, vec![Op::write(C, 100)]);
    net.deliver(1, 0);
    net.deliver(1, 1);
    // 6-8. U2's tx2 writes B = 1 at ts 10 and commits (then its decision lands).
    net.begin(2, 10, vec![Op::write(B, 1)], true);
    net.deliver(2, 1);
    net.deliver(2, 1);
    // 9-11. Only then U3's tx3 writes C = 2 at ts 5 and commits.
    net.begin(3, 5, vec![Op::write(C, 2)], true);
    net.deliver(3, 2);
    net.deliver(3, 2);
    // 12-13. W1C validates at C, and tx1 commits; its decisions land.
    net.deliver(1, 2);
    for s in [0, 1, 2] {
        net.deliver(1, s);
    }
    // 14-17. U1's read-only tx4 at ts 20 reads B and C.
    net.begin(1, 20, vec![Op::read(B), Op::read(C)], true);
    for s in [1, 2, 1, 2] {
        net.deliver(1, s);
    }
    net
}

#[test]
fn tapir_cc_commits_figure_11_and_the_checker_flags_it() {
    let net = figure_11(Flavor::TapirCc);
    assert!(
        net.restarted.is_empty(),
        "nothing aborts: {:?}",
        net.restarted
    );
    assert_eq!(
        net.committed.values().sum::<u32>(),
        4,
        "all four commit under TAPIR-CC"
    );
    let tx4 = net.history.last().expect("tx4");
    assert_eq!(
        tx4.reads,
        vec![
            (Key::from(B), Value::from(1)),
            (Key::from(C), Value::from(100))
        ],
        "tx4 sees tx2's B and tx1's C"
    );
    let versions = net.versions();
    let strict = strictly_serializable(&net.history, &versions);
    let err = strict.expect_err("TAPIR-CC's Figure 11 history is not strictly serializable");
    assert!(
        err.contains("rt"),
        "the cycle goes through real time: {err}"
    );
    serializable_with(&net.history, &versions, &[]).expect("but it is serializable");
}

#[test]
fn docc_refuses_tx2_in_figure_11() {
    // dOCC keeps a shared lock on what tx1 validated until tx1 is decided, so tx2's write
    // of B is refused while tx1 is prepared, and what commits is strictly serializable.
    // (Validating tx1's reads without locking them would let all four commit, and the
    // checker would find the same cycle as TAPIR-CC's.)
    let net = figure_11(Flavor::Docc);
    assert_eq!(
        net.restarted.get(&2),
        Some(&1),
        "tx2 is refused: {:?}",
        net.restarted
    );
    assert_eq!(net.committed.get(&3), Some(&1));
    strictly_serializable(&net.history, &net.versions()).expect("strictly serializable");
}
