//! Concurrent clients over TCP whose recorded history must be strictly serializable
//! (`verso-check`), and whose totals must be conserved.
//!
//! Each client thread runs, at random:
//! * `INCR ctrN` (a single-command transaction);
//! * a MULTI/EXEC transfer `INCRBY outI x; INCRBY inJ x; MGET <all in/out keys>; HMGET bank
//!   <all hinJ fields>`, where half the time the money goes to the hash field `bank.hinJ`
//!   (`HINCRBY bank hinJ x`) instead of the string `inJ`: strings and hash fields in one
//!   transaction. Balances are `in - out`, and the in/out keys and fields only grow, so
//!   every value written is unique and names its writer (the value before an INCRBY is its
//!   reply minus `x`); a hash field is the register `bank.hinJ` in the history;
//! * a WATCH read-modify-write transfer between two `wN` keys (`WATCH a b; GET a; GET b;
//!   MULTI; SET a ..; SET b ..; EXEC`): values are `balance:txn-id`, so each names its writer;
//!   an EXEC answered nil is recorded as aborted. The GETs run outside the block, yet are
//!   this transaction's reads: WATCH holds no transaction, but EXEC fails unless neither key
//!   was written between the WATCH (before the GETs) and EXEC's commit, so a committed
//!   transfer read the values current when it committed;
//! * a read-only MULTI/EXEC of every key;
//! * a SET or GET of a register key (checked for linearizability separately).
//!
//! Every successful command or EXEC is one transaction in the history. No engine timestamps
//! cross the wire, so the checker orders versions by the read-modify-write chains (every
//! write here reads its key first) and real time.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Barrier;

use redis::Value;
use verso_check::{
    check_linearizable_registers, check_strict_serializable, Observed, Op, Outcome, Recorder,
    RegisterOp, RegisterOpKind, TxnRecord, VersionId,
};
use verso_engine::{Concurrency, Db, Options};
use verso_server::server::{self, ServerConfig};
use verso_server::session::Shared;

const THREADS: u64 = 4;
const OPS_PER_THREAD: u64 = 250;
const ACCOUNTS: usize = 3;
const WATCHED: usize = 3;
const COUNTERS: usize = 2;
/// A `wN` key that was never written holds this balance.
const W_INITIAL: i64 = 1000;

mod common;
use common::Rng;

/// What a client saw, before values are resolved to versions.
enum RawOp {
    Read { key: String, value: Option<String> },
    Write { key: String, value: String },
}

struct RawTxn {
    id: u64,
    begin: u64,
    end: u64,
    committed: bool,
    ops: Vec<RawOp>,
}

fn in_key(i: usize) -> String {
    format!("in{i}")
}
fn out_key(i: usize) -> String {
    format!("out{i}")
}
fn w_key(i: usize) -> String {
    format!("w{i}")
}
fn ctr_key(i: usize) -> String {
    format!("ctr{i}")
}
/// The hash field `hinI` of `bank`, and its name as a register in the history.
fn hin_field(i: usize) -> String {
    format!("hin{i}")
}
fn hin_key(i: usize) -> String {
    format!("bank.hin{i}")
}
fn hin_fields() -> Vec<String> {
    (0..ACCOUNTS).map(hin_field).collect()
}
fn hin_keys() -> Vec<String> {
    (0..ACCOUNTS).map(hin_key).collect()
}

fn all_keys() -> Vec<String> {
    let mut keys: Vec<String> = (0..ACCOUNTS)
        .flat_map(|i| [in_key(i), out_key(i)])
        .collect();
    keys.extend((0..WATCHED).map(w_key));
    keys.extend((0..COUNTERS).map(ctr_key));
    keys
}

fn bulk(v: &Value) -> Option<String> {
    match v {
        Value::Nil => None,
        Value::BulkString(b) => Some(String::from_utf8(b.clone()).expect("utf-8 value")),
        other => panic!("expected a bulk string, got {other:?}"),
    }
}

fn int(v: &Value) -> i64 {
    match v {
        Value::Int(n) => *n,
        other => panic!("expected an integer, got {other:?}"),
    }
}

fn w_balance(v: Option<&str>) -> i64 {
    v.map_or(W_INITIAL, |s| {
        s.split(':').next().unwrap().parse().expect("balance")
    })
}

/// INCRBY `key` by `by` replied `reply`: it read `reply - by` (0: absent) and wrote `reply`.
fn rmw(ops: &mut Vec<RawOp>, key: &str, by: i64, reply: i64) {
    let before = reply - by;
    ops.push(RawOp::Read {
        key: key.into(),
        value: (before != 0).then(|| before.to_string()),
    });
    ops.push(RawOp::Write {
        key: key.into(),
        value: reply.to_string(),
    });
}

/// Reads of every key (a MULTI'd MGET) and the invariants one consistent snapshot must hold.
fn snapshot(ops: &mut Vec<RawOp>, keys: &[String], values: &[Value]) {
    assert_eq!(keys.len(), values.len());
    let mut got = HashMap::new();
    for (k, v) in keys.iter().zip(values) {
        let v = bulk(v);
        got.insert(k.clone(), v.clone());
        ops.push(RawOp::Read {
            key: k.clone(),
            value: v,
        });
    }
    let num = |k: &str| -> i64 { got[k].as_deref().map_or(0, |s| s.parse().unwrap()) };
    let ins: i64 = (0..ACCOUNTS)
        .map(|i| num(&in_key(i)) + num(&hin_key(i)))
        .sum();
    let outs: i64 = (0..ACCOUNTS).map(|i| num(&out_key(i))).sum();
    assert_eq!(ins, outs, "a snapshot saw half a transfer: {got:?}");
    if got.contains_key(&w_key(0)) {
        let w: i64 = (0..WATCHED)
            .map(|i| w_balance(got[&w_key(i)].as_deref()))
            .sum();
        assert_eq!(
            w,
            W_INITIAL * WATCHED as i64,
            "a snapshot saw money created or lost: {got:?}"
        );
    }
}

/// A transfer's snapshot: MGET of the string accounts and HMGET of the hash ones.
fn snapshot_money(ops: &mut Vec<RawOp>, money_keys: &[String], mget: &Value, hmget: &Value) {
    let (Value::Array(strings), Value::Array(fields)) = (mget, hmget) else {
        panic!("MGET / HMGET answered {mget:?} / {hmget:?}")
    };
    let mut keys = money_keys.to_vec();
    keys.extend(hin_keys());
    let values: Vec<Value> = strings.iter().chain(fields).cloned().collect();
    snapshot(ops, &keys, &values);
}

struct ThreadLog {
    txns: Vec<RawTxn>,
    registers: Vec<RegisterOp>,
    incrs: [i64; COUNTERS],
    exec_nils: u64,
}

fn client(port: u16, rec: &Recorder, start: &Barrier, seed: u64) -> ThreadLog {
    let mut c = redis::Client::open(format!("redis://127.0.0.1:{port}/"))
        .unwrap()
        .get_connection()
        .unwrap();
    let mut rng = Rng(seed);
    let keys = all_keys();
    let money_keys: Vec<String> = (0..ACCOUNTS)
        .flat_map(|i| [in_key(i), out_key(i)])
        .collect();
    let mut log = ThreadLog {
        txns: Vec::new(),
        registers: Vec::new(),
        incrs: [0; COUNTERS],
        exec_nils: 0,
    };
    start.wait();
    for n in 0..OPS_PER_THREAD {
        let id = rec.next_txn_id();
        let begin = rec.clock();
        let mut ops = Vec::new();
        let mut committed = true;
        match rng.below(10) {
            0..=1 => {
                let k = rng.below(COUNTERS as u64) as usize;
                let r: i64 = redis::cmd("INCR").arg(ctr_key(k)).query(&mut c).unwrap();
                rmw(&mut ops, &ctr_key(k), 1, r);
                log.incrs[k] += 1;
            }
            2..=4 => {
                let (i, j) = (
                    rng.below(ACCOUNTS as u64) as usize,
                    rng.below(ACCOUNTS as u64) as usize,
                );
                let x = 1 + rng.below(9) as i64;
                let to_hash = rng.below(2) == 0;
                let mut pipe = redis::pipe();
                pipe.atomic().incr(out_key(i), x);
                if to_hash {
                    pipe.hincr("bank", hin_field(j), x);
                } else {
                    pipe.incr(in_key(j), x);
                }
                let r: Value = pipe
                    .mget(&money_keys)
                    .cmd("HMGET")
                    .arg("bank")
                    .arg(hin_fields())
                    .query(&mut c)
                    .unwrap();
                let Value::Array(r) = r else {
                    panic!("EXEC without WATCH answered {r:?}")
                };
                rmw(&mut ops, &out_key(i), x, int(&r[0]));
                let to = if to_hash { hin_key(j) } else { in_key(j) };
                rmw(&mut ops, &to, x, int(&r[1]));
                snapshot_money(&mut ops, &money_keys, &r[2], &r[3]);
            }
            5..=7 => {
                let a = rng.below(WATCHED as u64) as usize;
                let b = (a + 1 + rng.below(WATCHED as u64 - 1) as usize) % WATCHED;
                let (ka, kb) = (w_key(a), w_key(b));
                let () = redis::cmd("WATCH").arg(&ka).arg(&kb).query(&mut c).unwrap();
                let va: Option<String> = redis::cmd("GET").arg(&ka).query(&mut c).unwrap();
                let vb: Option<String> = redis::cmd("GET").arg(&kb).query(&mut c).unwrap();
                if rng.below(4) == 0 {
                    std::thread::yield_now(); // widen the race window now and then
                }
                let x = rng.below(50) as i64;
                let na = format!("{}:{id}", w_balance(va.as_deref()) - x);
                let nb = format!("{}:{id}", w_balance(vb.as_deref()) + x);
                ops.push(RawOp::Read {
                    key: ka.clone(),
                    value: va,
                });
                ops.push(RawOp::Read {
                    key: kb.clone(),
                    value: vb,
                });
                ops.push(RawOp::Write {
                    key: ka.clone(),
                    value: na.clone(),
                });
                ops.push(RawOp::Write {
                    key: kb.clone(),
                    value: nb.clone(),
                });
                let r: Value = redis::pipe()
                    .atomic()
                    .set(&ka, &na)
                    .set(&kb, &nb)
                    .query(&mut c)
                    .unwrap();
                match r {
                    Value::Nil => {
                        committed = false;
                        log.exec_nils += 1;
                    }
                    Value::Array(r) => assert_eq!(r, vec![Value::Okay, Value::Okay]),
                    other => panic!("EXEC answered {other:?}"),
                }
            }
            8 => {
                let r: (Vec<Value>, Vec<Value>) = redis::pipe()
                    .atomic()
                    .mget(&keys)
                    .cmd("HMGET")
                    .arg("bank")
                    .arg(hin_fields())
                    .query(&mut c)
                    .unwrap();
                let mut all = keys.clone();
                all.extend(hin_keys());
                let values: Vec<Value> = r.0.into_iter().chain(r.1).collect();
                snapshot(&mut ops, &all, &values);
            }
            _ => {
                // A register: single SET/GET commands, for the linearizability checker.
                let start = rec.clock();
                let kind = if rng.below(2) == 0 {
                    let value = seed * 1_000_000 + n;
                    let () = redis::cmd("SET")
                        .arg("reg")
                        .arg(value)
                        .query(&mut c)
                        .unwrap();
                    RegisterOpKind::Put { value }
                } else {
                    let observed: Option<u64> = redis::cmd("GET").arg("reg").query(&mut c).unwrap();
                    RegisterOpKind::Get { observed }
                };
                log.registers.push(RegisterOp {
                    key: b"reg".to_vec(),
                    start,
                    end: rec.clock(),
                    kind,
                });
                continue;
            }
        }
        let end = rec.clock();
        log.txns.push(RawTxn {
            id,
            begin,
            end,
            committed,
            ops,
        });
    }
    log
}

/// Resolves every read to the version that wrote the value it saw.
fn build_history(raw: &[RawTxn]) -> Vec<TxnRecord> {
    let mut writer: HashMap<(&str, &str), VersionId> = HashMap::new();
    for t in raw {
        let mut seqs: HashMap<&str, u32> = HashMap::new();
        for op in &t.ops {
            if let RawOp::Write { key, value } = op {
                let seq = seqs.entry(key).or_default();
                let v = VersionId::new(t.id, *seq);
                *seq += 1;
                if let Some(prev) = writer.insert((key, value), v) {
                    panic!("{key} = {value} written by both {prev} and {v} (a lost update)");
                }
            }
        }
    }
    raw.iter()
        .map(|t| {
            let ops = t
                .ops
                .iter()
                .map(|op| match op {
                    RawOp::Read { key, value } => {
                        let observed = match value {
                            None => Observed::Absent,
                            Some(v) => match writer.get(&(key.as_str(), v.as_str())) {
                                Some(&w) => Observed::Version(w),
                                None => panic!("T{} read {key} = {v}, which nobody wrote", t.id),
                            },
                        };
                        Op::read(key.as_bytes(), observed)
                    }
                    RawOp::Write { key, .. } => Op::write(key.as_bytes()),
                })
                .collect();
            let outcome = if t.committed {
                Outcome::Committed
            } else {
                Outcome::Aborted
            };
            TxnRecord::new(t.id, t.begin, t.end, None, outcome, ops)
        })
        .collect()
}

#[test]
fn concurrent_clients_are_strictly_serializable_and_conserve_totals() {
    let cfg = ServerConfig {
        port: 0,
        ..ServerConfig::default()
    };
    let listener = server::bind(&cfg).expect("bind");
    let port = listener.local_addr().unwrap().port();
    let db = Db::open(Options::default().concurrency(Concurrency::PrecisionLocking)).unwrap();
    let shared = Shared::new(db, None).unwrap();
    let stop = AtomicBool::new(false);
    let rec = Recorder::new();
    let start = Barrier::new(THREADS as usize);
    let mut logs: Vec<ThreadLog> = std::thread::scope(|s| {
        s.spawn(|| server::serve(listener, &shared, &cfg, &stop));
        let handles: Vec<_> = (0..THREADS)
            .map(|t| {
                let (rec, start) = (&rec, &start);
                s.spawn(move || client(port, rec, start, 1 + t))
            })
            .collect();
        let logs = handles.into_iter().map(|h| h.join()).collect::<Vec<_>>();
        stop.store(true, Ordering::Relaxed);
        logs.into_iter()
            .map(|l| l.unwrap_or_else(|e| std::panic::resume_unwind(e)))
            .collect()
    });

    // The history: every command and EXEC the clients saw succeed (or fail with nil).
    let raw: Vec<RawTxn> = logs
        .iter_mut()
        .flat_map(|l| std::mem::take(&mut l.txns))
        .collect();
    let history = verso_check::History::from_txns(build_history(&raw));
    let committed = raw.iter().filter(|t| t.committed).count();
    assert!(
        committed > 500,
        "too few transactions committed: {committed}"
    );
    if let Err(v) = check_strict_serializable(&history) {
        panic!("not strictly serializable: {v}");
    }

    let registers: Vec<RegisterOp> = logs.iter().flat_map(|l| l.registers.clone()).collect();
    assert!(registers.len() > 20);
    if let Err(v) = check_linearizable_registers(&registers) {
        panic!("register not linearizable: {v}");
    }

    // Totals, read on a fresh connection after every client finished.
    // The server has stopped; read the final state through a session on the same data.
    let mut s = verso_server::session::Session::new(&shared);
    let get = |s: &mut verso_server::session::Session<'_>, k: &str| -> Option<String> {
        match s.execute(vec![b"GET".to_vec(), k.as_bytes().to_vec()]) {
            verso_server::resp::Reply::Nil => None,
            verso_server::resp::Reply::Bulk(b) => Some(String::from_utf8(b).unwrap()),
            other => panic!("GET {k}: {other:?}"),
        }
    };
    for k in 0..COUNTERS {
        let want: i64 = logs.iter().map(|l| l.incrs[k]).sum();
        let got = get(&mut s, &ctr_key(k)).map_or(0, |v| v.parse().unwrap());
        assert_eq!(got, want, "{}: every INCR counted once", ctr_key(k));
    }
    let num = |s: &mut verso_server::session::Session<'_>, k: String| -> i64 {
        get(s, &k).map_or(0, |v| v.parse().unwrap())
    };
    let hget = |s: &mut verso_server::session::Session<'_>, f: String| -> i64 {
        match s.execute(vec![b"HGET".to_vec(), b"bank".to_vec(), f.into_bytes()]) {
            verso_server::resp::Reply::Nil => 0,
            verso_server::resp::Reply::Bulk(b) => String::from_utf8(b).unwrap().parse().unwrap(),
            other => panic!("HGET: {other:?}"),
        }
    };
    let hins: i64 = (0..ACCOUNTS).map(|i| hget(&mut s, hin_field(i))).sum();
    assert!(hins > 0, "some transfers went to the hash");
    let ins: i64 = hins + (0..ACCOUNTS).map(|i| num(&mut s, in_key(i))).sum::<i64>();
    let outs: i64 = (0..ACCOUNTS).map(|i| num(&mut s, out_key(i))).sum();
    assert_eq!(ins, outs, "MULTI transfers must conserve money");
    assert!(ins > 0);
    let w: i64 = (0..WATCHED)
        .map(|i| w_balance(get(&mut s, &w_key(i)).as_deref()))
        .sum();
    assert_eq!(
        w,
        W_INITIAL * WATCHED as i64,
        "WATCH transfers must conserve money"
    );
    let watch_commits = raw
        .iter()
        .filter(|t| {
            t.committed
                && t.ops
                    .iter()
                    .any(|o| matches!(o, RawOp::Write { key, .. } if key.starts_with('w')))
        })
        .count();
    assert!(
        watch_commits > 50,
        "too few WATCH transfers committed: {watch_commits}"
    );
    eprintln!(
        "{} transactions ({committed} committed, {} EXEC nil), {} register ops",
        raw.len(),
        logs.iter().map(|l| l.exec_nils).sum::<u64>(),
        registers.len()
    );
}
