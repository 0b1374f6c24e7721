//! Keys with a time to live against a model: random sequences of the expiry commands, the
//! string commands that keep or drop a deadline, steps of a manual clock and runs of the
//! active expirer, on a session and on a map of (value, deadline), every reply compared.
//! After each expirer run and at the end, the stored state's invariants: nothing past its
//! deadline is left once the expirer ran, every key with a deadline has its queue entry, and
//! `INFO keyspace` counts `expires` exactly. Then transactional and durable expiry.

use std::collections::BTreeMap;
use std::time::Duration;

use proptest::prelude::*;
use verso_engine::{Concurrency, Db, Durability, Options};
use verso_server::expiry::{self, Clock};
use verso_server::resp::Reply;
use verso_server::session::{Session, Shared};
use verso_server::stored::{self, Stored};

const START_MS: u64 = 1_700_000_000_000;

fn shared_at(ms: u64) -> Shared {
    let db = Db::open(Options::default().concurrency(Concurrency::PrecisionLocking)).unwrap();
    Shared::new(db, None).unwrap().with_clock(Clock::manual(ms))
}

fn run(s: &mut Session<'_>, args: &[Vec<u8>]) -> Reply {
    s.execute(args.to_vec())
}

fn cmd(s: &mut Session<'_>, line: &str) -> Reply {
    s.execute(line.split(' ').map(|w| w.as_bytes().to_vec()).collect())
}

fn bulk(s: &[u8]) -> Reply {
    Reply::Bulk(s.to_vec())
}

fn err(msg: &str) -> Reply {
    Reply::Error(format!("ERR {msg}"))
}

#[derive(Clone, Copy, Debug)]
enum Unit {
    Ex,
    Px,
    ExAt,
    PxAt,
}

#[derive(Clone, Copy, Debug)]
enum Cond {
    None,
    Nx,
    Xx,
    Gt,
    Lt,
}

#[derive(Clone, Copy, Debug)]
enum Report {
    Ttl,
    Pttl,
    ExpireTime,
    PexpireTime,
}

#[derive(Clone, Debug)]
enum Op {
    Advance(u16),
    Expirer,
    Set {
        k: u8,
        v: u8,
        expiry: Option<(Unit, i16)>,
        keep_ttl: bool,
        cond: Cond,
        get: bool,
    },
    SetEx(u8, i16, u8, bool),
    GetEx(u8, Option<(Unit, i16)>, bool),
    Expire(u8, Unit, i16, Cond),
    Ttl(u8, Report),
    Persist(u8),
    Get(u8),
    Del(u8),
    Exists(u8),
    Incr(u8),
    Append(u8, u8),
    Rename(u8, u8),
    Copy(u8, u8, bool),
    DbSize,
    Keys,
}

const KEYS: [&[u8]; 3] = [b"a", b"b", b"c"];
const VALUES: [&[u8]; 3] = [b"1", b"x", b"22"];

fn unit() -> impl Strategy<Value = Unit> {
    prop_oneof![
        Just(Unit::Ex),
        Just(Unit::Px),
        Just(Unit::ExAt),
        Just(Unit::PxAt)
    ]
}

fn cond() -> impl Strategy<Value = Cond> {
    prop_oneof![
        3 => Just(Cond::None),
        1 => Just(Cond::Nx),
        1 => Just(Cond::Xx),
        1 => Just(Cond::Gt),
        1 => Just(Cond::Lt)
    ]
}

fn op() -> impl Strategy<Value = Op> {
    let k = 0u8..3;
    let v = 0u8..3;
    // Amounts: seconds for EX, milliseconds for PX, an offset from now for EXAT/PXAT.
    let amount = -3i16..6;
    prop_oneof![
        // Steps of 250 ms land exactly on deadlines (PX amounts are multiples of 250).
        2 => (0u16..16).prop_map(|n| Op::Advance(n * 250)),
        2 => (0u16..4000).prop_map(Op::Advance),
        2 => Just(Op::Expirer),
        4 => (
            k.clone(),
            v.clone(),
            proptest::option::of((unit(), amount.clone())),
            any::<bool>(),
            prop_oneof![Just(Cond::None), Just(Cond::Nx), Just(Cond::Xx)],
            any::<bool>()
        )
            .prop_map(|(k, v, expiry, keep_ttl, cond, get)| Op::Set {
                k,
                v,
                expiry,
                keep_ttl: keep_ttl && expiry.is_none(),
                cond,
                get
            }),
        2 => (k.clone(), amount.clone(), v.clone(), any::<bool>())
            .prop_map(|(k, n, v, ms)| Op::SetEx(k, n, v, ms)),
        2 => (k.clone(), proptest::option::of((unit(), amount.clone())), any::<bool>())
            .prop_map(|(k, e, persist)| Op::GetEx(k, e, persist)),
        4 => (k.clone(), unit(), amount, cond())
            .prop_map(|(k, u, n, c)| Op::Expire(k, u, n, c)),
        2 => (
            k.clone(),
            prop_oneof![
                Just(Report::Ttl),
                Just(Report::Pttl),
                Just(Report::ExpireTime),
                Just(Report::PexpireTime)
            ]
        )
            .prop_map(|(k, r)| Op::Ttl(k, r)),
        1 => k.clone().prop_map(Op::Persist),
        2 => k.clone().prop_map(Op::Get),
        1 => k.clone().prop_map(Op::Del),
        1 => k.clone().prop_map(Op::Exists),
        1 => k.clone().prop_map(Op::Incr),
        1 => (k.clone(), v).prop_map(|(k, v)| Op::Append(k, v)),
        1 => (k.clone(), k.clone()).prop_map(|(a, b)| Op::Rename(a, b)),
        1 => (k.clone(), k, any::<bool>()).prop_map(|(a, b, r)| Op::Copy(a, b, r)),
        1 => Just(Op::DbSize),
        1 => Just(Op::Keys),
    ]
}

/// The milliseconds an amount stands for, and the number to send for it.
fn expiry_arg(unit: Unit, n: i16, now: u64) -> (i64, &'static str) {
    let n = i64::from(n);
    match unit {
        Unit::Ex => (n, "EX"),
        Unit::Px => (n * 250, "PX"),
        Unit::ExAt => ((now / 1000) as i64 + n, "EXAT"),
        Unit::PxAt => (now as i64 + n * 250, "PXAT"),
    }
}

/// The deadline SET-style options give `n` (None: invalid, as Redis refuses n <= 0).
fn set_deadline(unit: Unit, n: i64, now: u64) -> Option<u64> {
    if n <= 0 {
        return None;
    }
    Some(match unit {
        Unit::Ex => now + n as u64 * 1000,
        Unit::Px => now + n as u64,
        Unit::ExAt => n as u64 * 1000,
        Unit::PxAt => n as u64,
    })
}

/// Redis's semantics over (value, deadline) with lazy expiry: a key is there while
/// `now <= deadline`.
struct Model {
    now: u64,
    keys: BTreeMap<Vec<u8>, (Vec<u8>, Option<u64>)>,
}

impl Model {
    fn alive(&self, k: &[u8]) -> Option<(Vec<u8>, Option<u64>)> {
        self.keys
            .get(k)
            .filter(|(_, d)| d.is_none_or(|d| self.now <= d))
            .cloned()
    }

    /// A write: a deadline not after now deletes instead.
    fn put(&mut self, k: &[u8], v: Vec<u8>, d: Option<u64>) {
        if d.is_some_and(|d| d <= self.now) {
            self.keys.remove(k);
        } else {
            self.keys.insert(k.to_vec(), (v, d));
        }
    }

    fn apply(&mut self, op: &Op) -> (Vec<Vec<u8>>, Option<Reply>) {
        let now = self.now;
        let key = |k: u8| KEYS[k as usize].to_vec();
        let words = |w: &[&str]| w.iter().map(|w| w.as_bytes().to_vec()).collect::<Vec<_>>();
        match *op {
            Op::Advance(ms) => {
                self.now += u64::from(ms);
                (Vec::new(), None)
            }
            Op::Expirer => (Vec::new(), None),
            Op::Set {
                k,
                v,
                expiry,
                keep_ttl,
                cond,
                get,
            } => {
                let (k, v) = (key(k), VALUES[v as usize].to_vec());
                let mut args = vec![b"SET".to_vec(), k.clone(), v.clone()];
                let mut deadline = Ok(None);
                if let Some((unit, n)) = expiry {
                    let (n, word) = expiry_arg(unit, n, now);
                    args.extend(words(&[word, &n.to_string()]));
                    deadline = set_deadline(unit, n, now).map(Some).ok_or(());
                }
                if keep_ttl {
                    args.push(b"KEEPTTL".to_vec());
                }
                match cond {
                    Cond::Nx => args.push(b"NX".to_vec()),
                    Cond::Xx => args.push(b"XX".to_vec()),
                    _ => {}
                }
                if get {
                    args.push(b"GET".to_vec());
                }
                let Ok(deadline) = deadline else {
                    return (args, Some(err("invalid expire time in 'set' command")));
                };
                let old = self.alive(&k);
                let write = !(matches!(cond, Cond::Nx) && old.is_some()
                    || matches!(cond, Cond::Xx) && old.is_none());
                if write {
                    let d = if keep_ttl {
                        old.as_ref().and_then(|o| o.1)
                    } else {
                        deadline
                    };
                    self.put(&k, v, d);
                }
                let reply = match (get, write) {
                    (true, _) => old.map_or(Reply::Nil, |o| bulk(&o.0)),
                    (false, true) => Reply::ok(),
                    (false, false) => Reply::Nil,
                };
                (args, Some(reply))
            }
            Op::SetEx(k, n, v, ms) => {
                let (k, v) = (key(k), VALUES[v as usize].to_vec());
                let (name, unit) = if ms {
                    ("PSETEX", Unit::Px)
                } else {
                    ("SETEX", Unit::Ex)
                };
                let n = i64::from(n) * if ms { 250 } else { 1 };
                let mut args = words(&[name]);
                args.extend([k.clone(), n.to_string().into_bytes(), v.clone()]);
                let Some(d) = set_deadline(unit, n, now) else {
                    let lower = name.to_ascii_lowercase();
                    return (
                        args,
                        Some(err(&format!("invalid expire time in '{lower}' command"))),
                    );
                };
                self.put(&k, v, Some(d));
                (args, Some(Reply::ok()))
            }
            Op::GetEx(k, expiry, persist) => {
                let k = key(k);
                let mut args = vec![b"GETEX".to_vec(), k.clone()];
                let mut change = None;
                if let Some((unit, n)) = expiry {
                    let (n, word) = expiry_arg(unit, n, now);
                    args.extend(words(&[word, &n.to_string()]));
                    match set_deadline(unit, n, now) {
                        Some(d) => change = Some(Some(d)),
                        None => return (args, Some(err("invalid expire time in 'getex' command"))),
                    }
                } else if persist {
                    args.push(b"PERSIST".to_vec());
                    change = Some(None);
                }
                let Some((v, d)) = self.alive(&k) else {
                    return (args, Some(Reply::Nil));
                };
                if let Some(new) = change {
                    if new != d {
                        self.put(&k, v.clone(), new);
                    }
                }
                (args, Some(bulk(&v)))
            }
            Op::Expire(k, unit, n, cond) => {
                let k = key(k);
                let (name, n) = match unit {
                    Unit::Ex => ("EXPIRE", i64::from(n)),
                    Unit::Px => ("PEXPIRE", i64::from(n) * 250),
                    Unit::ExAt => ("EXPIREAT", (now / 1000) as i64 + i64::from(n)),
                    Unit::PxAt => ("PEXPIREAT", now as i64 + i64::from(n) * 250),
                };
                let mut args = vec![
                    name.as_bytes().to_vec(),
                    k.clone(),
                    n.to_string().into_bytes(),
                ];
                match cond {
                    Cond::None => {}
                    Cond::Nx => args.push(b"NX".to_vec()),
                    Cond::Xx => args.push(b"XX".to_vec()),
                    Cond::Gt => args.push(b"GT".to_vec()),
                    Cond::Lt => args.push(b"LT".to_vec()),
                }
                let deadline = match unit {
                    Unit::Ex => now as i64 + n * 1000,
                    Unit::Px => now as i64 + n,
                    Unit::ExAt => n * 1000,
                    Unit::PxAt => n,
                };
                let Some((v, current)) = self.alive(&k) else {
                    return (args, Some(Reply::Integer(0)));
                };
                let current = current.map(|c| c as i64);
                let refused = match cond {
                    Cond::None => false,
                    Cond::Nx => current.is_some(),
                    Cond::Xx => current.is_none(),
                    Cond::Gt => current.is_none_or(|c| deadline <= c),
                    Cond::Lt => current.is_some_and(|c| deadline >= c),
                };
                if refused {
                    return (args, Some(Reply::Integer(0)));
                }
                if deadline <= now as i64 {
                    self.keys.remove(&k);
                } else {
                    self.put(&k, v, Some(deadline as u64));
                }
                (args, Some(Reply::Integer(1)))
            }
            Op::Ttl(k, report) => {
                let k = key(k);
                let name = match report {
                    Report::Ttl => "TTL",
                    Report::Pttl => "PTTL",
                    Report::ExpireTime => "EXPIRETIME",
                    Report::PexpireTime => "PEXPIRETIME",
                };
                let args = vec![name.as_bytes().to_vec(), k.clone()];
                let reply = match self.alive(&k) {
                    None => -2,
                    Some((_, None)) => -1,
                    Some((_, Some(d))) => {
                        let left = (d - now) as i64;
                        match report {
                            Report::Ttl => (left + 500) / 1000,
                            Report::Pttl => left,
                            Report::ExpireTime => (d as i64 + 500) / 1000,
                            Report::PexpireTime => d as i64,
                        }
                    }
                };
                (args, Some(Reply::Integer(reply)))
            }
            Op::Persist(k) => {
                let k = key(k);
                let args = vec![b"PERSIST".to_vec(), k.clone()];
                let reply = match self.alive(&k) {
                    Some((v, Some(_))) => {
                        self.put(&k, v, None);
                        1
                    }
                    _ => 0,
                };
                (args, Some(Reply::Integer(reply)))
            }
            Op::Get(k) => {
                let k = key(k);
                let reply = self.alive(&k).map_or(Reply::Nil, |(v, _)| bulk(&v));
                (vec![b"GET".to_vec(), k], Some(reply))
            }
            Op::Del(k) => {
                let k = key(k);
                let n = i64::from(self.alive(&k).is_some());
                self.keys.remove(&k);
                (vec![b"DEL".to_vec(), k], Some(Reply::Integer(n)))
            }
            Op::Exists(k) => {
                let k = key(k);
                let n = i64::from(self.alive(&k).is_some());
                (vec![b"EXISTS".to_vec(), k], Some(Reply::Integer(n)))
            }
            Op::Incr(k) => {
                let k = key(k);
                let args = vec![b"INCR".to_vec(), k.clone()];
                let (n, d) = match self.alive(&k) {
                    None => (0, None),
                    Some((v, d)) => match std::str::from_utf8(&v).unwrap().parse::<i64>() {
                        Ok(n) => (n, d),
                        Err(_) => {
                            return (args, Some(err("value is not an integer or out of range")))
                        }
                    },
                };
                self.put(&k, (n + 1).to_string().into_bytes(), d);
                (args, Some(Reply::Integer(n + 1)))
            }
            Op::Append(k, v) => {
                let k = key(k);
                let tail = VALUES[v as usize];
                let (mut old, d) = self.alive(&k).unwrap_or_default();
                old.extend_from_slice(tail);
                let len = old.len() as i64;
                self.put(&k, old, d);
                (
                    vec![b"APPEND".to_vec(), k, tail.to_vec()],
                    Some(Reply::Integer(len)),
                )
            }
            Op::Rename(a, b) => {
                let (a, b) = (key(a), key(b));
                let args = vec![b"RENAME".to_vec(), a.clone(), b.clone()];
                let Some((v, d)) = self.alive(&a) else {
                    return (args, Some(err("no such key")));
                };
                if a != b {
                    self.put(&b, v, d);
                    self.keys.remove(&a);
                }
                (args, Some(Reply::ok()))
            }
            Op::Copy(a, b, replace) => {
                let (a, b) = (key(a), key(b));
                let mut args = vec![b"COPY".to_vec(), a.clone(), b.clone()];
                if replace {
                    args.push(b"REPLACE".to_vec());
                }
                if a == b {
                    return (
                        args,
                        Some(err("source and destination objects are the same")),
                    );
                }
                let Some((v, d)) = self.alive(&a) else {
                    return (args, Some(Reply::Integer(0)));
                };
                if !replace && self.alive(&b).is_some() {
                    return (args, Some(Reply::Integer(0)));
                }
                self.put(&b, v, d);
                (args, Some(Reply::Integer(1)))
            }
            Op::DbSize => {
                let keys: Vec<Vec<u8>> = self.keys.keys().cloned().collect();
                let n = keys.iter().filter(|k| self.alive(k).is_some()).count();
                (vec![b"DBSIZE".to_vec()], Some(Reply::Integer(n as i64)))
            }
            Op::Keys => {
                let keys: Vec<Vec<u8>> = self.keys.keys().cloned().collect();
                let live = keys
                    .into_iter()
                    .filter(|k| self.alive(k).is_some())
                    .map(Reply::Bulk)
                    .collect();
                (
                    vec![b"KEYS".to_vec(), b"*".to_vec()],
                    Some(Reply::Array(live)),
                )
            }
        }
    }
}

/// The stored state's invariants at `now`: with `expirer_ran`, nothing past its deadline is
/// left in the table or the queue; always, every stored key with a deadline has its queue
/// entry; and INFO's `expires` is the model's count.
fn check_stored(sh: &Shared, model: &Model, expirer_ran: bool) {
    let now = model.now;
    let txn = sh.db.begin_read_only().unwrap();
    let (data, queue) = (&sh.tables[0], &sh.deadline_tables[0]);
    for (k, raw) in txn.range(data, ..).unwrap() {
        let v = Stored::decode(raw).expect("every stored value is framed");
        if let Some(d) = v.deadline {
            assert!(
                !(expirer_ran && d < now),
                "{k:?} is past its deadline {d} at {now} after the expirer ran"
            );
            let entry = stored::queue_key(d, k);
            assert!(
                txn.get(queue, &entry).unwrap().is_some(),
                "{k:?} has deadline {d} but no queue entry"
            );
        }
    }
    if expirer_ran {
        for (entry, _) in txn.range(queue, ..).unwrap() {
            let (d, _) = stored::split_queue_key(entry).unwrap();
            assert!(d >= now, "queue entry due at {d} left at {now}");
        }
    }
    let expected = model
        .keys
        .iter()
        .filter(|(k, (_, d))| d.is_some() && model.alive(k).is_some())
        .count();
    let s = sh.spaces().get(0).unwrap();
    assert_eq!(expiry::count_expiring(&txn, s).unwrap(), expected);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn expiry_commands_match_the_model(ops in proptest::collection::vec(op(), 1..60)) {
        let sh = shared_at(START_MS);
        let mut s = Session::new(&sh);
        let mut model = Model { now: START_MS, keys: BTreeMap::new() };
        for op in &ops {
            let (args, expected) = model.apply(op);
            match op {
                Op::Advance(_) => sh.clock.set_ms(model.now),
                Op::Expirer => {
                    expiry::expire_cycle(&sh.db, sh.spaces(), Duration::from_secs(60));
                    check_stored(&sh, &model, true);
                }
                _ => {
                    let got = run(&mut s, &args);
                    prop_assert_eq!(
                        &got,
                        expected.as_ref().unwrap(),
                        "{:?} at {}",
                        String::from_utf8_lossy(&args.join(&b' ')),
                        model.now
                    );
                }
            }
        }
        check_stored(&sh, &model, false);
    }
}

#[test]
fn documented_edge_cases() {
    let sh = shared_at(START_MS);
    let mut c = Session::new(&sh);
    assert_eq!(cmd(&mut c, "SET k v EX 100"), Reply::ok());
    assert_eq!(cmd(&mut c, "TTL k"), Reply::Integer(100));
    assert_eq!(cmd(&mut c, "PTTL k"), Reply::Integer(100_000));
    assert_eq!(
        cmd(&mut c, "EXPIRETIME k"),
        Reply::Integer((START_MS / 1000 + 100) as i64)
    );
    assert_eq!(cmd(&mut c, "TTL nokey"), Reply::Integer(-2));
    assert_eq!(cmd(&mut c, "SET p v"), Reply::ok());
    assert_eq!(cmd(&mut c, "TTL p"), Reply::Integer(-1));
    assert_eq!(cmd(&mut c, "EXPIRETIME p"), Reply::Integer(-1));
    // A new value drops the deadline unless KEEPTTL; INCR and APPEND keep it.
    assert_eq!(
        cmd(&mut c, "INCR k"),
        err("value is not an integer or out of range")
    );
    assert_eq!(cmd(&mut c, "APPEND k w"), Reply::Integer(2));
    assert_eq!(cmd(&mut c, "TTL k"), Reply::Integer(100));
    assert_eq!(cmd(&mut c, "SET k v2 KEEPTTL"), Reply::ok());
    assert_eq!(cmd(&mut c, "TTL k"), Reply::Integer(100));
    assert_eq!(cmd(&mut c, "SET k v3"), Reply::ok());
    assert_eq!(cmd(&mut c, "TTL k"), Reply::Integer(-1));
    // Option errors, as Redis words them.
    assert_eq!(
        cmd(&mut c, "EXPIRE k 10 NX XX"),
        err("NX and XX, GT or LT options at the same time are not compatible")
    );
    assert_eq!(
        cmd(&mut c, "EXPIRE k 10 GT LT"),
        err("GT and LT options at the same time are not compatible")
    );
    assert_eq!(cmd(&mut c, "EXPIRE k 10 YY"), err("Unsupported option YY"));
    assert_eq!(
        cmd(&mut c, "EXPIRE k 9223372036854775807"),
        err("invalid expire time in 'expire' command")
    );
    assert_eq!(
        cmd(&mut c, "SETEX k -1 v"),
        err("invalid expire time in 'setex' command")
    );
    assert_eq!(
        cmd(&mut c, "SET k v PX 9223372036854775807"),
        err("invalid expire time in 'set' command")
    );
    assert_eq!(
        cmd(&mut c, "SET k v EX x"),
        err("value is not an integer or out of range")
    );
    assert_eq!(cmd(&mut c, "GETEX k EX 1 PERSIST"), err("syntax error"));
    assert_eq!(cmd(&mut c, "GETEX k EX"), err("syntax error"));
    // GT on a key without a deadline refuses (no deadline is infinite), LT sets.
    assert_eq!(cmd(&mut c, "EXPIRE k 10 GT"), Reply::Integer(0));
    assert_eq!(cmd(&mut c, "EXPIRE k 10 LT"), Reply::Integer(1));
    assert_eq!(cmd(&mut c, "PERSIST k"), Reply::Integer(1));
    assert_eq!(cmd(&mut c, "PERSIST k"), Reply::Integer(0));
    // A deadline in the past deletes at once, and answers 1.
    assert_eq!(cmd(&mut c, "EXPIRE k -1"), Reply::Integer(1));
    assert_eq!(cmd(&mut c, "EXISTS k"), Reply::Integer(0));
    assert_eq!(cmd(&mut c, "SET k v EXAT 1"), Reply::ok());
    assert_eq!(cmd(&mut c, "EXISTS k"), Reply::Integer(0));
    // RENAME and COPY carry the deadline.
    assert_eq!(cmd(&mut c, "SET k v PX 5000"), Reply::ok());
    assert_eq!(cmd(&mut c, "RENAME k r"), Reply::ok());
    assert_eq!(cmd(&mut c, "PTTL r"), Reply::Integer(5000));
    assert_eq!(cmd(&mut c, "COPY r r2 DB 1"), Reply::Integer(1));
    assert_eq!(cmd(&mut c, "MOVE r 2"), Reply::Integer(1));
    assert_eq!(cmd(&mut c, "SELECT 2"), Reply::ok());
    assert_eq!(cmd(&mut c, "PTTL r"), Reply::Integer(5000));
    assert_eq!(cmd(&mut c, "SELECT 1"), Reply::ok());
    assert_eq!(cmd(&mut c, "PTTL r2"), Reply::Integer(5000));
    // At the deadline's millisecond the key is there; one later it is gone everywhere.
    sh.clock.set_ms(START_MS + 5000);
    assert_eq!(cmd(&mut c, "GET r2"), bulk(b"v"));
    assert_eq!(cmd(&mut c, "PTTL r2"), Reply::Integer(0));
    sh.clock.set_ms(START_MS + 5001);
    assert_eq!(cmd(&mut c, "GET r2"), Reply::Nil);
    assert_eq!(cmd(&mut c, "DBSIZE"), Reply::Integer(0));
    assert_eq!(
        cmd(&mut c, "SCAN 0"),
        Reply::Array(vec![bulk(b"0"), Reply::Array(vec![])])
    );
    assert_eq!(cmd(&mut c, "SET r2 new NX"), Reply::ok());
    assert_eq!(cmd(&mut c, "TTL r2"), Reply::Integer(-1));
}

/// A transaction that saw a key keeps seeing it though the clock passes its deadline and
/// the expirer deletes it meanwhile; if it also writes, it cannot commit after a read the
/// deletion invalidated (serializable).
#[test]
fn expiry_is_transactional() {
    let sh = shared_at(START_MS);
    let mut c = Session::new(&sh);
    assert_eq!(cmd(&mut c, "SET k v PX 10"), Reply::ok());
    let s_then = sh.spaces().get(0).unwrap();
    let mut t = sh.db.begin().unwrap();
    assert!(stored::read(&t, s_then, b"k").unwrap().is_some());

    sh.clock.set_ms(START_MS + 11);
    let round = expiry::expire_due(&sh.db, sh.spaces().get(0).unwrap(), 16).unwrap();
    assert_eq!((round.deleted, round.entries), (1, 1));
    assert_eq!(cmd(&mut c, "EXISTS k"), Reply::Integer(0));

    // Same snapshot, same clock reading: still there.
    assert!(stored::read(&t, s_then, b"k").unwrap().is_some());
    stored::write_string(&mut t, s_then, b"other", b"x").unwrap();
    let e = t
        .commit()
        .expect_err("the expirer's deletion invalidated the read");
    assert!(e.is_conflict(), "{e}");
}

/// The expirer's deletions are logged writes: a database recovered from its log with the
/// clock set back before the deadline agrees that the key is gone.
#[test]
fn expiry_deletions_are_durable_writes() {
    let dir = tempfile::tempdir().unwrap();
    let opts = || {
        Options::default()
            .concurrency(Concurrency::PrecisionLocking)
            .data_dir(dir.path())
            .durability(Durability::Sync)
    };
    {
        let sh = Shared::new(Db::open(opts()).unwrap(), None)
            .unwrap()
            .with_clock(Clock::manual(START_MS));
        let mut c = Session::new(&sh);
        assert_eq!(cmd(&mut c, "SET gone v PX 10"), Reply::ok());
        assert_eq!(cmd(&mut c, "SET kept v PX 100000"), Reply::ok());
        sh.clock.set_ms(START_MS + 11);
        assert_eq!(
            expiry::expire_cycle(&sh.db, sh.spaces(), Duration::from_secs(60)),
            1
        );
    }
    let sh = Shared::new(Db::open(opts()).unwrap(), None)
        .unwrap()
        .with_clock(Clock::manual(START_MS));
    let mut c = Session::new(&sh);
    assert_eq!(cmd(&mut c, "EXISTS gone"), Reply::Integer(0));
    assert_eq!(cmd(&mut c, "PTTL kept"), Reply::Integer(100_000));
}

struct DoneOnDrop<'a>(&'a std::sync::atomic::AtomicUsize);

impl Drop for DoneOnDrop<'_> {
    fn drop(&mut self) {
        self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
}

/// What a client thread knows of one of its own keys (only it writes them; the expirer may
/// only delete them once they are past their deadline).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Known {
    Absent,
    /// Value index and deadline.
    Present(u8, Option<u64>),
    /// A write raced the clock past its deadline: written or deleted, unknown until the
    /// next SET.
    Unknown,
}

/// Clients and the active expirer at once, the clock moving with every command: the
/// expirer never deletes a key before its deadline, and a key is always seen as present
/// when its deadline is after every clock reading the command could have taken, absent when
/// before every one. Each client owns its keys, so its model of them is exact.
#[test]
fn concurrent_expiry_never_takes_a_live_key() {
    const CLIENTS: usize = 2;
    const OPS: usize = 4000;
    const KEYS_PER_CLIENT: u64 = 8;
    let sh = shared_at(START_MS);
    let done = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|scope| {
        scope.spawn(|| {
            let mut rounds = 0u64;
            while done.load(std::sync::atomic::Ordering::Relaxed) < CLIENTS {
                expiry::expire_cycle(&sh.db, sh.spaces(), Duration::from_millis(5));
                rounds += 1;
            }
            assert!(rounds > 0);
        });
        for client in 0..CLIENTS {
            let (sh, done) = (&sh, &done);
            scope.spawn(move || {
                // Counted even if an assertion fails, so the expirer thread stops.
                let _done = DoneOnDrop(done);
                let mut c = Session::new(sh);
                let mut rng = 0x9e37_79b9_7f4a_7c15u64 ^ client as u64;
                let mut next = move || {
                    rng ^= rng << 13;
                    rng ^= rng >> 7;
                    rng ^= rng << 17;
                    rng
                };
                let mut known = vec![Known::Absent; KEYS_PER_CLIENT as usize];
                for _ in 0..OPS {
                    let j = (next() % KEYS_PER_CLIENT) as usize;
                    let key = format!("c{client}k{j}").into_bytes();
                    let before = sh.clock.now_ms();
                    let roll = next() % 10;
                    let (args, kind) = if roll < 4 {
                        let v = (next() % 3) as u8;
                        let d = before + 1 + next() % 40;
                        let args = vec![
                            b"SET".to_vec(),
                            key.clone(),
                            VALUES[v as usize].to_vec(),
                            b"PXAT".to_vec(),
                            d.to_string().into_bytes(),
                        ];
                        (args, Some((v, d)))
                    } else if roll < 5 {
                        (vec![b"PERSIST".to_vec(), key.clone()], None)
                    } else {
                        (vec![b"GET".to_vec(), key.clone()], None)
                    };
                    let reply = run(&mut c, &args);
                    let after = sh.clock.now_ms();
                    let state = known[j];
                    // Present at every reading in [before, after], or at none.
                    let (surely_alive, surely_gone) = match state {
                        Known::Present(_, None) => (true, false),
                        Known::Present(_, Some(d)) => (d >= after, d < before),
                        Known::Absent => (false, true),
                        Known::Unknown => (false, false),
                    };
                    match (&args[0][..], kind) {
                        (b"SET", Some((v, d))) => {
                            assert_eq!(reply, Reply::ok());
                            known[j] = if d > after {
                                Known::Present(v, Some(d))
                            } else {
                                Known::Unknown
                            };
                        }
                        (b"PERSIST", _) => {
                            let has_deadline = matches!(state, Known::Present(_, Some(_)));
                            if surely_alive {
                                assert_eq!(reply, Reply::Integer(i64::from(has_deadline)));
                            }
                            if surely_gone {
                                assert_eq!(reply, Reply::Integer(0), "{state:?}");
                            }
                            known[j] = match (reply, state) {
                                (Reply::Integer(1), Known::Present(v, _)) => {
                                    Known::Present(v, None)
                                }
                                (Reply::Integer(1), _) => Known::Unknown,
                                (_, Known::Present(_, None)) => state,
                                (_, Known::Unknown) => Known::Unknown,
                                _ => Known::Absent,
                            };
                        }
                        _ => {
                            if let Known::Present(v, _) = state {
                                if surely_alive {
                                    assert_eq!(reply, bulk(VALUES[v as usize]), "{state:?}");
                                }
                                if !surely_gone && reply == Reply::Nil {
                                    known[j] = Known::Absent;
                                }
                            }
                            if surely_gone {
                                assert_eq!(reply, Reply::Nil, "{state:?} at {before}..{after}");
                            }
                        }
                    }
                    sh.clock.advance_ms(1);
                }
            });
        }
    });
    // Everything has expired once the clock passes the last deadline; the expirer leaves
    // nothing behind.
    let model = Model {
        now: sh.clock.now_ms() + 100,
        keys: BTreeMap::new(),
    };
    sh.clock.set_ms(model.now);
    expiry::expire_cycle(&sh.db, sh.spaces(), Duration::from_secs(60));
    check_stored(&sh, &model, true);
    // Only keys whose last change was a PERSIST remain.
    let txn = sh.db.begin_read_only().unwrap();
    for (k, raw) in txn.range(&sh.tables[0], ..).unwrap() {
        let v = Stored::decode(raw).unwrap();
        assert_eq!(v.deadline, None, "{k:?} outlived its deadline");
    }
}

/// A data directory written before values were framed is refused with a clear error, not
/// misread; an empty one from then is taken over.
#[test]
fn a_data_directory_from_before_framing_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let opts = || {
        Options::default()
            .concurrency(Concurrency::PrecisionLocking)
            .data_dir(dir.path())
            .durability(Durability::Sync)
    };
    {
        let db = Db::open(opts()).unwrap();
        let t = db.table("db0").unwrap();
        let mut txn = db.begin().unwrap();
        txn.put(&t, b"k", b"a bare value").unwrap();
        txn.commit().unwrap();
    }
    let e = Shared::new(Db::open(opts()).unwrap(), None)
        .err()
        .expect("refused");
    assert!(e.to_string().contains("before expiry"), "{e}");

    let empty = tempfile::tempdir().unwrap();
    let opts = || {
        Options::default()
            .concurrency(Concurrency::PrecisionLocking)
            .data_dir(empty.path())
            .durability(Durability::Sync)
    };
    {
        Db::open(opts()).unwrap().table("db0").unwrap();
    }
    assert!(Shared::new(Db::open(opts()).unwrap(), None).is_ok());
}
