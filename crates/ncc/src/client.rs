//! An NCC client, the coordinator of its own transactions (Alg 5.1; the paper co-locates
//! the coordinator with the client, §2.1): one transaction at a time, retried with a new
//! timestamp until it commits.

use std::collections::{BTreeMap, BTreeSet};

use crate::types::{ClientId, ExecResult, Key, Msg, Op, OpReply, ServerId, Ts, TxnId, Value};

/// A one-shot transaction: every request known up front, each key at most once. With no
/// write it runs as a read-only transaction (one round, no commit message, §5.5).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxnSpec {
    pub ops: Vec<Op>,
}

impl TxnSpec {
    pub fn read_only(&self) -> bool {
        !self.ops.iter().any(Op::is_write)
    }
}

/// A committed transaction, as its user sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    pub spec: TxnSpec,
    /// The value each read returned, in the spec's order of reads.
    pub reads: Vec<(Key, Value)>,
    /// Where NCC serialized it: the largest `t_w` of its pairs (Lemma 1).
    pub commit_ts: Ts,
    /// Attempts it took (1: committed at the first).
    pub attempts: u32,
    /// The attempt that committed.
    pub txn: TxnId,
}

#[derive(Debug, PartialEq, Eq)]
enum Phase {
    Executing,
    /// Smart retry to `to`: the servers that have not answered yet.
    Retrying {
        to: Ts,
        waiting: BTreeSet<ServerId>,
    },
}

#[derive(Debug)]
struct Attempt {
    spec: TxnSpec,
    txn: TxnId,
    /// Per server: the spec's indices of its requests, in the order sent.
    by_server: BTreeMap<ServerId, Vec<usize>>,
    /// Per request of the spec: its reply, once in.
    replies: Vec<Option<OpReply>>,
    /// This client's clock when it sent the requests (for `t_Δ`).
    sent_at: u64,
    phase: Phase,
    attempts: u32,
}

/// Counts for the simulator's report.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClientStats {
    pub committed: u64,
    pub committed_first_try: u64,
    pub smart_retries: u64,
    pub smart_retries_ok: u64,
    pub early_aborts: u64,
    pub ro_aborts: u64,
    pub safeguard_aborts: u64,
}

/// One client (module docs).
#[derive(Debug)]
pub struct Client {
    id: ClientId,
    servers: u32,
    /// The last timestamp's clock: each attempt's is higher, so `(clk, cid)` is unique.
    last_clk: u64,
    /// Per server, `t_s - t_c` as last measured: how far ahead the server's clock and queue
    /// are of this client's clock (§5.3).
    delta: Vec<i64>,
    /// Per server, the newest version this client has heard of (`t_ro`, §5.5).
    t_ro: Vec<u64>,
    next_seq: u64,
    current: Option<Attempt>,
    out: Vec<(ServerId, Msg)>,
    finished: Option<Outcome>,
    pub stats: ClientStats,
}

/// The server that holds `key` among `servers`.
pub fn shard_of(key: Key, servers: u32) -> ServerId {
    (key % u64::from(servers)) as ServerId
}

impl Client {
    pub fn new(id: ClientId, servers: u32) -> Client {
        Client {
            id,
            servers,
            last_clk: 0,
            delta: vec![0; servers as usize],
            t_ro: vec![0; servers as usize],
            next_seq: 1,
            current: None,
            out: Vec::new(),
            finished: None,
            stats: ClientStats::default(),
        }
    }

    pub fn id(&self) -> ClientId {
        self.id
    }

    /// Whether a transaction is under way.
    pub fn busy(&self) -> bool {
        self.current.is_some()
    }

    /// Starts `spec`; `now` is this client's clock.
    pub fn start(&mut self, now: u64, spec: TxnSpec) {
        assert!(self.current.is_none(), "one transaction at a time");
        let keys: BTreeSet<Key> = spec.ops.iter().map(Op::key).collect();
        assert_eq!(keys.len(), spec.ops.len(), "each key at most once");
        self.begin_attempt(now, spec, 1);
    }

    /// Messages to send, as (server, message).
    pub fn drain(&mut self) -> Vec<(ServerId, Msg)> {
        std::mem::take(&mut self.out)
    }

    /// The transaction that committed since the last call, if one did.
    pub fn take_outcome(&mut self) -> Option<Outcome> {
        self.finished.take()
    }

    fn begin_attempt(&mut self, now: u64, spec: TxnSpec, attempts: u32) {
        let mut by_server: BTreeMap<ServerId, Vec<usize>> = BTreeMap::new();
        for (i, op) in spec.ops.iter().enumerate() {
            by_server
                .entry(shard_of(op.key(), self.servers))
                .or_default()
                .push(i);
        }
        // Asynchrony-aware: the clock the slowest participant will have when the requests
        // arrive, so that they rarely arrive "late" (§5.3). Strictly increasing per client.
        let lead = by_server
            .keys()
            .map(|&s| self.delta[s as usize])
            .max()
            .unwrap_or(0);
        let clk = (now as i64 + lead).max(self.last_clk as i64 + 1) as u64;
        self.last_clk = clk;
        let ts = Ts { clk, cid: self.id };
        let txn = TxnId {
            client: self.id,
            seq: self.next_seq,
        };
        self.next_seq += 1;
        let read_only = spec.read_only();
        for (&s, idx) in &by_server {
            self.out.push((
                s,
                Msg::Execute {
                    txn,
                    ts,
                    ops: idx.iter().map(|&i| spec.ops[i]).collect(),
                    t_ro: read_only.then_some(self.t_ro[s as usize]),
                },
            ));
        }
        let n = spec.ops.len();
        self.current = Some(Attempt {
            spec,
            txn,
            by_server,
            replies: vec![None; n],
            sent_at: now,
            phase: Phase::Executing,
            attempts,
        });
    }

    /// Handles a server's message; `now` is this client's clock.
    pub fn on_message(&mut self, now: u64, from: ServerId, msg: Msg) {
        match msg {
            Msg::ExecReply {
                txn,
                index,
                result,
                ts_server,
                latest,
            } => {
                let t_ro = &mut self.t_ro[from as usize];
                *t_ro = (*t_ro).max(latest);
                let Some(a) = self.current.as_mut().filter(|a| a.txn == txn) else {
                    return; // an earlier attempt's, or a duplicate
                };
                if a.phase != Phase::Executing {
                    return;
                }
                self.delta[from as usize] = ts_server as i64 - a.sent_at as i64;
                let Some(&i) = a
                    .by_server
                    .get(&from)
                    .and_then(|idx| idx.get(index as usize))
                else {
                    return;
                };
                match result {
                    ExecResult::Done(reply) => a.replies[i] = Some(reply),
                    ExecResult::EarlyAbort => {
                        self.stats.early_aborts += 1;
                        return self.abort_and_retry(now);
                    }
                    ExecResult::RoAbort => {
                        self.stats.ro_aborts += 1;
                        return self.abort_and_retry(now);
                    }
                }
                if a.replies.iter().all(Option::is_some) {
                    self.safeguard(now);
                }
            }
            Msg::SmartRetryReply { txn, ok } => {
                let Some(a) = self.current.as_mut().filter(|a| a.txn == txn) else {
                    return;
                };
                let Phase::Retrying { to, waiting } = &mut a.phase else {
                    return;
                };
                let to = *to;
                if !ok {
                    self.stats.safeguard_aborts += 1;
                    return self.abort_and_retry(now);
                }
                waiting.remove(&from);
                if waiting.is_empty() {
                    self.stats.smart_retries_ok += 1;
                    self.commit(to);
                }
            }
            Msg::Execute { .. } | Msg::SmartRetry { .. } | Msg::Decide { .. } => {}
        }
    }

    /// Every reply is in: commit if the pairs overlap, else try to move them to the
    /// largest `t_w` (smart retry).
    fn safeguard(&mut self, _now: u64) {
        let a = self.current.as_mut().expect("called with an attempt");
        let pairs = a.replies.iter().map(|r| r.expect("all in"));
        let tw_max = pairs
            .clone()
            .map(|p| p.tw)
            .max()
            .expect("a transaction has a request");
        let tr_min = pairs
            .map(|p| p.tr)
            .min()
            .expect("a transaction has a request");
        if tw_max <= tr_min {
            return self.commit(tw_max);
        }
        self.stats.smart_retries += 1;
        let waiting: BTreeSet<ServerId> = a.by_server.keys().copied().collect();
        for &s in &waiting {
            self.out.push((
                s,
                Msg::SmartRetry {
                    txn: a.txn,
                    to: tw_max,
                },
            ));
        }
        a.phase = Phase::Retrying {
            to: tw_max,
            waiting,
        };
    }

    fn commit(&mut self, commit_ts: Ts) {
        let a = self.current.take().expect("called with an attempt");
        if !a.spec.read_only() {
            for &s in a.by_server.keys() {
                self.out.push((
                    s,
                    Msg::Decide {
                        txn: a.txn,
                        commit: true,
                    },
                ));
            }
        }
        let reads = a
            .spec
            .ops
            .iter()
            .zip(&a.replies)
            .filter_map(|(op, r)| match (op, r) {
                (Op::Read(k), Some(r)) => Some((*k, r.value.expect("a read returns a value"))),
                _ => None,
            })
            .collect();
        self.stats.committed += 1;
        if a.attempts == 1 {
            self.stats.committed_first_try += 1;
        }
        self.finished = Some(Outcome {
            spec: a.spec,
            reads,
            commit_ts,
            attempts: a.attempts,
            txn: a.txn,
        });
    }

    /// Aborts the attempt everywhere (a read-only one has nothing to undo) and starts the
    /// transaction again with a new timestamp (Alg 5.1, "go to 2").
    fn abort_and_retry(&mut self, now: u64) {
        let a = self.current.take().expect("called with an attempt");
        if !a.spec.read_only() {
            for &s in a.by_server.keys() {
                self.out.push((
                    s,
                    Msg::Decide {
                        txn: a.txn,
                        commit: false,
                    },
                ));
            }
        }
        self.begin_attempt(now, a.spec, a.attempts + 1);
    }
}
