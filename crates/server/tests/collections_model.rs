//! Hashes and sets against a model: random command sequences mixing strings, hashes and
//! sets over a few keys (WRONGTYPE included), whole-key commands moving collections around,
//! expiry and the reclaimer, every reply compared with a map of typed values. After each
//! step, the stored layout's invariants (`check_layout`): every collection root is
//! registered under its own key, its length stripes sum to its member count, no collection
//! is empty; once the reclaimer has run to the end, no element or registry entry outlives
//! its collection.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use proptest::prelude::*;
use verso_engine::{Concurrency, Db, Options};
use verso_server::collections;
use verso_server::expiry::{self, Clock};
use verso_server::resp::Reply;
use verso_server::session::{Session, Shared};
use verso_server::stored::Stored;

const START_MS: u64 = 1_700_000_000_000;
const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

fn shared() -> Shared {
    let db = Db::open(Options::default().concurrency(Concurrency::PrecisionLocking)).unwrap();
    Shared::new(db, None)
        .unwrap()
        .with_clock(Clock::manual(START_MS))
}

fn bulk(s: &[u8]) -> Reply {
    Reply::Bulk(s.to_vec())
}

fn cmd(s: &mut Session<'_>, line: &str) -> Reply {
    s.execute(line.split(' ').map(|w| w.as_bytes().to_vec()).collect())
}

type Hash = BTreeMap<Vec<u8>, Vec<u8>>;

#[derive(Clone, Debug, PartialEq)]
enum Val {
    Str(Vec<u8>),
    Hash(Hash),
    Set(BTreeSet<Vec<u8>>),
}

#[derive(Clone, Debug)]
enum Op {
    Set(u8, u8),
    Get(u8),
    Del(u8),
    Type(u8),
    HSet(u8, Vec<(u8, u8)>),
    HSetNx(u8, u8, u8),
    HGet(u8, u8),
    HDel(u8, Vec<u8>),
    HLen(u8),
    HGetAll(u8),
    HIncrBy(u8, u8, i8),
    SAdd(u8, Vec<u8>),
    SRem(u8, Vec<u8>),
    SIsMember(u8, u8),
    SCard(u8),
    SMembers(u8),
    Combine(u8, u8, u8),
    CombineStore(u8, u8, u8, u8),
    SMove(u8, u8, u8),
    SPop(u8),
    Rename(u8, u8),
    Copy(u8, u8),
    Expire(u8, u8),
    Advance(u16),
    Reclaim,
}

const KEYS: [&[u8]; 4] = [b"a", b"b", b"c", b"d"];
const ITEMS: [&[u8]; 4] = [b"f", b"g", b"7", b"h"];

fn op() -> impl Strategy<Value = Op> {
    let k = || 0u8..4;
    let i = || 0u8..4;
    prop_oneof![
        2 => (k(), i()).prop_map(|(k, v)| Op::Set(k, v)),
        1 => k().prop_map(Op::Get),
        1 => k().prop_map(Op::Del),
        1 => k().prop_map(Op::Type),
        4 => (k(), proptest::collection::vec((i(), i()), 1..3)).prop_map(|(k, p)| Op::HSet(k, p)),
        1 => (k(), i(), i()).prop_map(|(k, f, v)| Op::HSetNx(k, f, v)),
        2 => (k(), i()).prop_map(|(k, f)| Op::HGet(k, f)),
        2 => (k(), proptest::collection::vec(i(), 1..3)).prop_map(|(k, f)| Op::HDel(k, f)),
        1 => k().prop_map(Op::HLen),
        2 => k().prop_map(Op::HGetAll),
        1 => (k(), i(), -3i8..4).prop_map(|(k, f, n)| Op::HIncrBy(k, f, n)),
        4 => (k(), proptest::collection::vec(i(), 1..3)).prop_map(|(k, m)| Op::SAdd(k, m)),
        2 => (k(), proptest::collection::vec(i(), 1..3)).prop_map(|(k, m)| Op::SRem(k, m)),
        1 => (k(), i()).prop_map(|(k, m)| Op::SIsMember(k, m)),
        1 => k().prop_map(Op::SCard),
        2 => k().prop_map(Op::SMembers),
        2 => (0u8..3, k(), k()).prop_map(|(o, a, b)| Op::Combine(o, a, b)),
        2 => (0u8..3, k(), k(), k()).prop_map(|(o, d, a, b)| Op::CombineStore(o, d, a, b)),
        1 => (k(), k(), i()).prop_map(|(a, b, m)| Op::SMove(a, b, m)),
        1 => k().prop_map(Op::SPop),
        2 => (k(), k()).prop_map(|(a, b)| Op::Rename(a, b)),
        2 => (k(), k()).prop_map(|(a, b)| Op::Copy(a, b)),
        1 => (k(), 1u8..4).prop_map(|(k, s)| Op::Expire(k, s)),
        1 => (0u16..5000).prop_map(Op::Advance),
        2 => Just(Op::Reclaim),
    ]
}

struct Model {
    now: u64,
    keys: BTreeMap<Vec<u8>, (Val, Option<u64>)>,
}

fn words(parts: &[&[u8]]) -> Vec<Vec<u8>> {
    parts.iter().map(|p| p.to_vec()).collect()
}

fn wrongtype() -> Reply {
    Reply::Error(WRONGTYPE.into())
}

impl Model {
    fn live(&self, k: &[u8]) -> Option<&Val> {
        self.keys
            .get(k)
            .filter(|(_, d)| d.is_none_or(|d| self.now <= d))
            .map(|(v, _)| v)
    }

    fn deadline(&self, k: &[u8]) -> Option<u64> {
        self.live(k).and(self.keys.get(k)).and_then(|(_, d)| *d)
    }

    fn hash(&self, k: &[u8]) -> Result<Option<Hash>, Reply> {
        match self.live(k) {
            None => Ok(None),
            Some(Val::Hash(h)) => Ok(Some(h.clone())),
            Some(_) => Err(wrongtype()),
        }
    }

    fn set(&self, k: &[u8]) -> Result<Option<BTreeSet<Vec<u8>>>, Reply> {
        match self.live(k) {
            None => Ok(None),
            Some(Val::Set(s)) => Ok(Some(s.clone())),
            Some(_) => Err(wrongtype()),
        }
    }

    /// Stores a collection, keeping its deadline; an empty one deletes the key.
    fn put_coll(&mut self, k: &[u8], v: Val) {
        let empty = match &v {
            Val::Hash(h) => h.is_empty(),
            Val::Set(s) => s.is_empty(),
            Val::Str(_) => false,
        };
        if empty {
            self.keys.remove(k);
        } else {
            let d = self.deadline(k);
            self.keys.insert(k.to_vec(), (v, d));
        }
    }

    /// The request for `op` and the reply the model expects (`None` for a step that is not
    /// a command). `spop` is the member a SPOP took, which the model cannot choose.
    fn apply(&mut self, op: &Op, spop: Option<&Reply>) -> (Vec<Vec<u8>>, Option<Reply>) {
        let key = |k: u8| KEYS[k as usize].to_vec();
        let item = |i: u8| ITEMS[i as usize].to_vec();
        let sorted = |s: BTreeSet<Vec<u8>>| Reply::Set(s.into_iter().map(Reply::Bulk).collect());
        match op {
            Op::Advance(ms) => {
                self.now += u64::from(*ms);
                (Vec::new(), None)
            }
            Op::Reclaim => (Vec::new(), None),
            Op::Set(k, v) => {
                self.keys.insert(key(*k), (Val::Str(item(*v)), None));
                (
                    words(&[b"SET", KEYS[*k as usize], ITEMS[*v as usize]]),
                    Some(Reply::ok()),
                )
            }
            Op::Get(k) => {
                let r = match self.live(&key(*k)) {
                    None => Reply::Nil,
                    Some(Val::Str(v)) => bulk(v),
                    Some(_) => wrongtype(),
                };
                (words(&[b"GET", KEYS[*k as usize]]), Some(r))
            }
            Op::Del(k) => {
                let n = i64::from(self.live(&key(*k)).is_some());
                self.keys.remove(&key(*k));
                (words(&[b"DEL", KEYS[*k as usize]]), Some(Reply::Integer(n)))
            }
            Op::Type(k) => {
                let t = match self.live(&key(*k)) {
                    None => "none",
                    Some(Val::Str(_)) => "string",
                    Some(Val::Hash(_)) => "hash",
                    Some(Val::Set(_)) => "set",
                };
                (
                    words(&[b"TYPE", KEYS[*k as usize]]),
                    Some(Reply::Simple(t.into())),
                )
            }
            Op::HSet(k, pairs) => {
                let mut args = words(&[b"HSET", KEYS[*k as usize]]);
                for (f, v) in pairs {
                    args.push(item(*f));
                    args.push(item(*v));
                }
                let r = match self.hash(&key(*k)) {
                    Err(e) => e,
                    Ok(h) => {
                        let mut h = h.unwrap_or_default();
                        let mut added = 0;
                        for (f, v) in pairs {
                            added += i64::from(h.insert(item(*f), item(*v)).is_none());
                        }
                        self.put_coll(&key(*k), Val::Hash(h));
                        Reply::Integer(added)
                    }
                };
                (args, Some(r))
            }
            Op::HSetNx(k, f, v) => {
                let args = words(&[
                    b"HSETNX",
                    KEYS[*k as usize],
                    ITEMS[*f as usize],
                    ITEMS[*v as usize],
                ]);
                let r = match self.hash(&key(*k)) {
                    Err(e) => e,
                    Ok(h) => {
                        let mut h = h.unwrap_or_default();
                        match h.entry(item(*f)) {
                            std::collections::btree_map::Entry::Occupied(_) => Reply::Integer(0),
                            std::collections::btree_map::Entry::Vacant(e) => {
                                e.insert(item(*v));
                                self.put_coll(&key(*k), Val::Hash(h));
                                Reply::Integer(1)
                            }
                        }
                    }
                };
                (args, Some(r))
            }
            Op::HGet(k, f) => {
                let r = match self.hash(&key(*k)) {
                    Err(e) => e,
                    Ok(h) => h
                        .and_then(|h| h.get(&item(*f)).cloned())
                        .map_or(Reply::Nil, Reply::Bulk),
                };
                (
                    words(&[b"HGET", KEYS[*k as usize], ITEMS[*f as usize]]),
                    Some(r),
                )
            }
            Op::HDel(k, fields) => {
                let mut args = words(&[b"HDEL", KEYS[*k as usize]]);
                args.extend(fields.iter().map(|f| item(*f)));
                let r = match self.hash(&key(*k)) {
                    Err(e) => e,
                    Ok(None) => Reply::Integer(0),
                    Ok(Some(mut h)) => {
                        let n = fields
                            .iter()
                            .filter(|f| h.remove(&item(**f)).is_some())
                            .count();
                        self.put_coll(&key(*k), Val::Hash(h));
                        Reply::Integer(n as i64)
                    }
                };
                (args, Some(r))
            }
            Op::HLen(k) => {
                let r = match self.hash(&key(*k)) {
                    Err(e) => e,
                    Ok(h) => Reply::Integer(h.map_or(0, |h| h.len() as i64)),
                };
                (words(&[b"HLEN", KEYS[*k as usize]]), Some(r))
            }
            Op::HGetAll(k) => {
                let r = match self.hash(&key(*k)) {
                    Err(e) => e,
                    Ok(h) => Reply::Map(
                        h.unwrap_or_default()
                            .into_iter()
                            .map(|(f, v)| (Reply::Bulk(f), Reply::Bulk(v)))
                            .collect(),
                    ),
                };
                (words(&[b"HGETALL", KEYS[*k as usize]]), Some(r))
            }
            Op::HIncrBy(k, f, n) => {
                let args = vec![
                    b"HINCRBY".to_vec(),
                    key(*k),
                    item(*f),
                    n.to_string().into_bytes(),
                ];
                let r = match self.hash(&key(*k)) {
                    Err(e) => e,
                    Ok(h) => {
                        let mut h = h.unwrap_or_default();
                        let old = h
                            .get(&item(*f))
                            .map(|v| std::str::from_utf8(v).unwrap().parse::<i64>());
                        match old {
                            Some(Err(_)) => Reply::err("hash value is not an integer"),
                            old => {
                                let new = old.map_or(0, Result::unwrap) + i64::from(*n);
                                h.insert(item(*f), new.to_string().into_bytes());
                                self.put_coll(&key(*k), Val::Hash(h));
                                Reply::Integer(new)
                            }
                        }
                    }
                };
                (args, Some(r))
            }
            Op::SAdd(k, members) => {
                let mut args = words(&[b"SADD", KEYS[*k as usize]]);
                args.extend(members.iter().map(|m| item(*m)));
                let r = match self.set(&key(*k)) {
                    Err(e) => e,
                    Ok(s) => {
                        let mut s = s.unwrap_or_default();
                        let n = members.iter().filter(|m| s.insert(item(**m))).count();
                        self.put_coll(&key(*k), Val::Set(s));
                        Reply::Integer(n as i64)
                    }
                };
                (args, Some(r))
            }
            Op::SRem(k, members) => {
                let mut args = words(&[b"SREM", KEYS[*k as usize]]);
                args.extend(members.iter().map(|m| item(*m)));
                let r = match self.set(&key(*k)) {
                    Err(e) => e,
                    Ok(None) => Reply::Integer(0),
                    Ok(Some(mut s)) => {
                        let n = members.iter().filter(|m| s.remove(&item(**m))).count();
                        self.put_coll(&key(*k), Val::Set(s));
                        Reply::Integer(n as i64)
                    }
                };
                (args, Some(r))
            }
            Op::SIsMember(k, m) => {
                let r = match self.set(&key(*k)) {
                    Err(e) => e,
                    Ok(s) => Reply::Integer(i64::from(s.is_some_and(|s| s.contains(&item(*m))))),
                };
                (
                    words(&[b"SISMEMBER", KEYS[*k as usize], ITEMS[*m as usize]]),
                    Some(r),
                )
            }
            Op::SCard(k) => {
                let r = match self.set(&key(*k)) {
                    Err(e) => e,
                    Ok(s) => Reply::Integer(s.map_or(0, |s| s.len() as i64)),
                };
                (words(&[b"SCARD", KEYS[*k as usize]]), Some(r))
            }
            Op::SMembers(k) => {
                let r = match self.set(&key(*k)) {
                    Err(e) => e,
                    Ok(s) => sorted(s.unwrap_or_default()),
                };
                (words(&[b"SMEMBERS", KEYS[*k as usize]]), Some(r))
            }
            Op::Combine(o, a, b) | Op::CombineStore(o, _, a, b) => {
                let names: [&[u8]; 3] = [b"SINTER", b"SUNION", b"SDIFF"];
                let store_names: [&[u8]; 3] = [b"SINTERSTORE", b"SUNIONSTORE", b"SDIFFSTORE"];
                let (sa, sb) = (self.set(&key(*a)), self.set(&key(*b)));
                let result = match (sa, sb) {
                    (Err(e), _) | (_, Err(e)) => Err(e),
                    (Ok(x), Ok(y)) => {
                        let (x, y) = (x.unwrap_or_default(), y.unwrap_or_default());
                        Ok(match o {
                            0 => x.intersection(&y).cloned().collect::<BTreeSet<_>>(),
                            1 => x.union(&y).cloned().collect(),
                            _ => x.difference(&y).cloned().collect(),
                        })
                    }
                };
                match op {
                    Op::CombineStore(_, d, ..) => {
                        let args = words(&[
                            store_names[*o as usize],
                            KEYS[*d as usize],
                            KEYS[*a as usize],
                            KEYS[*b as usize],
                        ]);
                        let r = match result {
                            Err(e) => e,
                            Ok(s) => {
                                let n = s.len() as i64;
                                self.keys.remove(&key(*d));
                                self.put_coll(&key(*d), Val::Set(s));
                                Reply::Integer(n)
                            }
                        };
                        (args, Some(r))
                    }
                    _ => (
                        words(&[names[*o as usize], KEYS[*a as usize], KEYS[*b as usize]]),
                        Some(result.map_or_else(|e| e, sorted)),
                    ),
                }
            }
            Op::SMove(a, b, m) => {
                let args = words(&[
                    b"SMOVE",
                    KEYS[*a as usize],
                    KEYS[*b as usize],
                    ITEMS[*m as usize],
                ]);
                let r = match self.set(&key(*a)) {
                    Err(e) => e,
                    Ok(None) => Reply::Integer(0),
                    Ok(Some(mut src)) => match self.set(&key(*b)) {
                        Err(e) => e,
                        Ok(_) if !src.contains(&item(*m)) => Reply::Integer(0),
                        Ok(_) if a == b => Reply::Integer(1),
                        Ok(dst) => {
                            src.remove(&item(*m));
                            self.put_coll(&key(*a), Val::Set(src));
                            let mut dst = dst.unwrap_or_default();
                            dst.insert(item(*m));
                            self.put_coll(&key(*b), Val::Set(dst));
                            Reply::Integer(1)
                        }
                    },
                };
                (args, Some(r))
            }
            Op::SPop(k) => {
                let args = words(&[b"SPOP", KEYS[*k as usize]]);
                let r = match self.set(&key(*k)) {
                    Err(e) => e,
                    Ok(None) => Reply::Nil,
                    Ok(Some(mut s)) => match spop {
                        Some(Reply::Bulk(m)) if s.remove(m) => {
                            self.put_coll(&key(*k), Val::Set(s));
                            bulk(m)
                        }
                        // Not a member: the expected reply names the problem.
                        _ => Reply::Error(format!("SPOP should take one of {s:?}")),
                    },
                };
                (args, Some(r))
            }
            Op::Rename(a, b) => {
                let args = words(&[b"RENAME", KEYS[*a as usize], KEYS[*b as usize]]);
                let r = match self.live(&key(*a)).cloned() {
                    None => Reply::err("no such key"),
                    Some(v) => {
                        if a != b {
                            let d = self.deadline(&key(*a));
                            self.keys.remove(&key(*a));
                            self.keys.insert(key(*b), (v, d));
                        }
                        Reply::ok()
                    }
                };
                (args, Some(r))
            }
            Op::Copy(a, b) => {
                let args = words(&[b"COPY", KEYS[*a as usize], KEYS[*b as usize]]);
                let r = if a == b {
                    Reply::err("source and destination objects are the same")
                } else {
                    match (self.live(&key(*a)).cloned(), self.live(&key(*b))) {
                        (None, _) | (_, Some(_)) => Reply::Integer(0),
                        (Some(v), None) => {
                            let d = self.deadline(&key(*a));
                            self.keys.insert(key(*b), (v, d));
                            Reply::Integer(1)
                        }
                    }
                };
                (args, Some(r))
            }
            Op::Expire(k, secs) => {
                let args = vec![b"EXPIRE".to_vec(), key(*k), secs.to_string().into_bytes()];
                let r = match self.live(&key(*k)).cloned() {
                    None => 0,
                    Some(v) => {
                        let d = self.now + u64::from(*secs) * 1000;
                        self.keys.insert(key(*k), (v, Some(d)));
                        1
                    }
                };
                (args, Some(Reply::Integer(r)))
            }
        }
    }
}

/// The layout's invariants (module docs). `drained`: the reclaimer ran to the end since the
/// last command, so nothing dead may remain.
fn check_layout(sh: &Shared, drained: bool) {
    let txn = sh.db.begin_read_only().unwrap();
    let c = &sh.collections;
    let mut live_ids = BTreeSet::new();
    for (i, table) in sh.tables.iter().enumerate() {
        for (key, raw) in txn.range(table, ..).unwrap() {
            let v = Stored::decode(raw).unwrap();
            let Some(id) = collections::id_of(&v) else {
                continue;
            };
            live_ids.insert(id);
            let mut want = vec![i as u8];
            want.extend_from_slice(key);
            assert_eq!(
                txn.get(&c.registry, id.to_be_bytes()).unwrap(),
                Some(&want[..]),
                "root {key:?} in db{i} is registered under its key"
            );
            let coll = collections::Coll {
                id,
                kind: v.kind,
                deadline: v.deadline,
            };
            let s = sh.spaces().get(i).unwrap();
            let len = collections::len(&txn, s, coll).unwrap();
            let members = collections::members(&txn, s, coll, None).unwrap().count();
            assert_eq!(
                len, members as i64,
                "{key:?}: stripes sum to the member count"
            );
            // An expired collection may wait for the expirer; a live one is never empty.
            assert!(
                members > 0 || v.expired_at(s.now_ms),
                "{key:?} is an empty collection"
            );
        }
    }
    if drained {
        assert_eq!(txn.range(&c.graveyard, ..).unwrap().count(), 0);
        for (k, _) in txn.range(&c.elements, ..).unwrap() {
            let id = u64::from_be_bytes(k[..8].try_into().unwrap());
            assert!(
                live_ids.contains(&id),
                "an element of dead collection {id:x} remains"
            );
        }
        for (k, _) in txn.range(&c.registry, ..).unwrap() {
            let id = u64::from_be_bytes(k.try_into().unwrap());
            assert!(live_ids.contains(&id), "registry entry {id:x} has no root");
        }
    }
}

/// Runs the expirer and the reclaimer until nothing is left to do.
fn drain(sh: &Shared) {
    expiry::expire_cycle(&sh.db, sh.spaces(), Duration::from_secs(60));
    let mut cursor = None;
    for _ in 0..100 {
        let done = collections::reclaim(&sh.db, sh.spaces(), &mut cursor, 1000);
        if done == collections::Reclaimed::default() && cursor.is_none() {
            return;
        }
    }
    panic!("the reclaimer did not finish");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn hashes_and_sets_match_the_model(ops in proptest::collection::vec(op(), 1..60)) {
        let sh = shared();
        let mut s = Session::new(&sh);
        let mut model = Model { now: START_MS, keys: BTreeMap::new() };
        for op in &ops {
            match op {
                Op::Advance(_) => {
                    model.apply(op, None);
                    sh.clock.set_ms(model.now);
                    continue;
                }
                Op::Reclaim => {
                    drain(&sh);
                    check_layout(&sh, true);
                    continue;
                }
                _ => {}
            }
            // SPOP's choice is the server's: run it first, then let the model check it.
            let (args, _) = Model { now: model.now, keys: model.keys.clone() }.apply(op, None);
            let got = s.execute(args.clone());
            let (_, expected) = model.apply(op, Some(&got));
            prop_assert_eq!(
                &got,
                expected.as_ref().unwrap(),
                "{:?}",
                String::from_utf8_lossy(&args.join(&b' '))
            );
            check_layout(&sh, false);
        }
        drain(&sh);
        check_layout(&sh, true);
    }
}

#[test]
fn documented_edge_cases() {
    let sh = shared();
    let mut c = Session::new(&sh);
    assert_eq!(
        cmd(&mut c, "HSET h a 1 b"),
        Reply::err("wrong number of arguments for 'hset' command")
    );
    assert_eq!(cmd(&mut c, "HMSET h a 1 b 2"), Reply::ok());
    assert_eq!(cmd(&mut c, "HINCRBYFLOAT h a 0.5"), bulk(b"1.5"));
    assert_eq!(
        cmd(&mut c, "HINCRBY h a 1"),
        Reply::err("hash value is not an integer")
    );
    assert_eq!(
        cmd(&mut c, "HINCRBYFLOAT h a inf"),
        Reply::err("increment would produce NaN or Infinity")
    );
    assert_eq!(
        cmd(&mut c, "HSET h n 9223372036854775807"),
        Reply::Integer(1)
    );
    assert_eq!(
        cmd(&mut c, "HINCRBY h n 1"),
        Reply::err("increment or decrement would overflow")
    );
    assert_eq!(cmd(&mut c, "HSTRLEN h a"), Reply::Integer(3));
    assert_eq!(
        cmd(&mut c, "HMGET h a zz"),
        Reply::Array(vec![bulk(b"1.5"), Reply::Nil])
    );
    match cmd(&mut c, "HRANDFIELD h -5") {
        Reply::Array(v) => assert_eq!(v.len(), 5, "a negative count draws with repeats"),
        other => panic!("{other:?}"),
    }
    match cmd(&mut c, "HRANDFIELD h 2 WITHVALUES") {
        Reply::Pairs(p) => {
            assert_eq!(p.len(), 2);
            assert_ne!(p[0].0, p[1].0, "a positive count gives distinct fields");
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        cmd(&mut c, "HRANDFIELD h -2000000"),
        Reply::Error(e) if e.starts_with("ERR count is out of range")
    ));
    match cmd(&mut c, "HRANDFIELD h 10") {
        Reply::Array(v) => assert_eq!(v.len(), 3, "all fields when count exceeds the length"),
        other => panic!("{other:?}"),
    }
    assert_eq!(cmd(&mut c, "OBJECT ENCODING h"), bulk(b"hashtable"));
    assert_eq!(cmd(&mut c, "GET h"), Reply::Error(WRONGTYPE.into()));
    assert_eq!(cmd(&mut c, "SADD h x"), Reply::Error(WRONGTYPE.into()));
    // SET replaces any kind.
    assert_eq!(cmd(&mut c, "SET h s"), Reply::ok());
    assert_eq!(cmd(&mut c, "TYPE h"), Reply::Simple("string".into()));
    assert_eq!(cmd(&mut c, "HGET h a"), Reply::Error(WRONGTYPE.into()));
    // Sets.
    assert_eq!(cmd(&mut c, "SADD s1 a b c"), Reply::Integer(3));
    assert_eq!(cmd(&mut c, "SADD s2 b c d"), Reply::Integer(3));
    assert_eq!(
        cmd(&mut c, "SMISMEMBER s1 a d"),
        Reply::Array(vec![Reply::Integer(1), Reply::Integer(0)])
    );
    assert_eq!(cmd(&mut c, "SINTERCARD 2 s1 s2"), Reply::Integer(2));
    assert_eq!(cmd(&mut c, "SINTERCARD 2 s1 s2 LIMIT 1"), Reply::Integer(1));
    assert_eq!(
        cmd(&mut c, "SINTERCARD 0 s1"),
        Reply::err("numkeys should be greater than 0")
    );
    assert_eq!(
        cmd(&mut c, "SINTERCARD 3 s1 s2"),
        Reply::err("Number of keys can't be greater than number of args")
    );
    assert_eq!(
        cmd(&mut c, "SPOP s1 -1"),
        Reply::err("value is out of range, must be positive")
    );
    match cmd(&mut c, "SPOP s1 2") {
        Reply::Set(v) => assert_eq!(v.len(), 2),
        other => panic!("{other:?}"),
    }
    assert_eq!(cmd(&mut c, "SCARD s1"), Reply::Integer(1));
    assert_eq!(
        cmd(&mut c, "SMOVE nokey h x"),
        Reply::Integer(0),
        "absent source first"
    );
    assert_eq!(cmd(&mut c, "SMOVE s2 h b"), Reply::Error(WRONGTYPE.into()));
    // SCAN TYPE and HSCAN/SSCAN walk everything with cursors.
    assert_eq!(
        cmd(&mut c, "HSET big f1 1 f2 2 f3 3 f4 4 f5 5"),
        Reply::Integer(5)
    );
    let mut cursor = "0".to_string();
    let mut seen = Vec::new();
    loop {
        let Reply::Array(page) = cmd(&mut c, &format!("HSCAN big {cursor} COUNT 2")) else {
            panic!()
        };
        let Reply::Bulk(next) = &page[0] else {
            panic!()
        };
        let Reply::Array(items) = &page[1] else {
            panic!()
        };
        seen.extend(items.iter().cloned());
        cursor = String::from_utf8(next.clone()).unwrap();
        if cursor == "0" {
            break;
        }
    }
    assert_eq!(seen.len(), 10, "five fields with their values");
    let Reply::Array(page) = cmd(&mut c, "SCAN 0 TYPE set COUNT 100") else {
        panic!()
    };
    assert_eq!(page[1], Reply::Array(vec![bulk(b"s1"), bulk(b"s2")]));
    // Expiry, RENAME and MOVE keep a collection whole.
    assert_eq!(cmd(&mut c, "EXPIRE s2 10"), Reply::Integer(1));
    assert_eq!(cmd(&mut c, "RENAME s2 s3"), Reply::ok());
    assert_eq!(cmd(&mut c, "TTL s3"), Reply::Integer(10));
    assert_eq!(cmd(&mut c, "MOVE s3 1"), Reply::Integer(1));
    assert_eq!(cmd(&mut c, "SELECT 1"), Reply::ok());
    assert_eq!(cmd(&mut c, "SCARD s3"), Reply::Integer(3));
    check_layout(&sh, false);
    sh.clock.set_ms(START_MS + 10_001);
    assert_eq!(cmd(&mut c, "EXISTS s3"), Reply::Integer(0));
    drain(&sh);
    check_layout(&sh, true);
    assert_eq!(cmd(&mut c, "FLUSHALL"), Reply::ok());
    drain(&sh);
    check_layout(&sh, true);
    let txn = sh.db.begin_read_only().unwrap();
    assert_eq!(txn.range(&sh.collections.elements, ..).unwrap().count(), 0);
}

/// Two transactions that write different fields of one hash both commit (no conflict),
/// unless both add a field to the same length stripe; updates of existing fields never
/// conflict with each other.
#[test]
fn different_fields_do_not_conflict() {
    let sh = shared();
    let mut c = Session::new(&sh);
    assert_eq!(cmd(&mut c, "HSET h a 1 b 2"), Reply::Integer(2));
    let s = sh.spaces().get(0).unwrap();
    let mut t1 = sh.db.begin().unwrap();
    let mut t2 = sh.db.begin().unwrap();
    let h1 = collections::open(&t1, s, b"h", collections::KIND_HASH)
        .unwrap()
        .unwrap();
    let h2 = collections::open(&t2, s, b"h", collections::KIND_HASH)
        .unwrap()
        .unwrap();
    assert!(!collections::put(&mut t1, s, h1, b"a", b"10").unwrap());
    assert!(!collections::put(&mut t2, s, h2, b"b", b"20").unwrap());
    t1.commit().unwrap();
    t2.commit().expect("updates of different fields commute");
    assert_eq!(
        cmd(&mut c, "HGETALL h"),
        Reply::Map(vec![(bulk(b"a"), bulk(b"10")), (bulk(b"b"), bulk(b"20"))])
    );
}

/// Hashes and sets survive a restart, recovered from a checkpoint plus the log after it
/// (the engine logs and checkpoints every table alike), with their layout intact.
#[test]
fn collections_survive_checkpoint_and_recovery() {
    let dir = tempfile::tempdir().unwrap();
    let opts = || {
        Options::default()
            .concurrency(Concurrency::PrecisionLocking)
            .data_dir(dir.path())
            .durability(verso_engine::Durability::Sync)
    };
    {
        let sh = Shared::new(Db::open(opts()).unwrap(), None)
            .unwrap()
            .with_clock(Clock::manual(START_MS));
        let mut c = Session::new(&sh);
        assert_eq!(cmd(&mut c, "HSET h a 1 b 2"), Reply::Integer(2));
        assert_eq!(cmd(&mut c, "SADD s x y"), Reply::Integer(2));
        assert_eq!(cmd(&mut c, "SAVE"), Reply::ok());
        // After the checkpoint: only in the log.
        assert_eq!(cmd(&mut c, "HDEL h a"), Reply::Integer(1));
        assert_eq!(cmd(&mut c, "SADD s z"), Reply::Integer(1));
        assert_eq!(cmd(&mut c, "RENAME s s2"), Reply::ok());
        assert_eq!(cmd(&mut c, "SADD gone q"), Reply::Integer(1));
        assert_eq!(cmd(&mut c, "DEL gone"), Reply::Integer(1));
    }
    let sh = Shared::new(Db::open(opts()).unwrap(), None)
        .unwrap()
        .with_clock(Clock::manual(START_MS));
    let mut c = Session::new(&sh);
    assert_eq!(
        cmd(&mut c, "HGETALL h"),
        Reply::Map(vec![(bulk(b"b"), bulk(b"2"))])
    );
    assert_eq!(
        cmd(&mut c, "SMEMBERS s2"),
        Reply::Set(vec![bulk(b"x"), bulk(b"y"), bulk(b"z")])
    );
    assert_eq!(cmd(&mut c, "EXISTS s gone"), Reply::Integer(0));
    check_layout(&sh, false);
    drain(&sh);
    check_layout(&sh, true);
}

/// WATCH on a collection fails EXEC after any change to any of its elements (the root
/// record alone does not change when a field is set), and only then.
#[test]
fn watch_sees_every_change_to_a_collection() {
    let sh = shared();
    let (mut c1, mut c2) = (Session::new(&sh), Session::new(&sh));
    assert_eq!(cmd(&mut c1, "HSET h a 1 b 2"), Reply::Integer(2));
    let changes = [
        ("HSET h b 3", Reply::Integer(0)),
        ("HDEL h a", Reply::Integer(1)),
        ("HSET h new 1", Reply::Integer(1)),
        ("HINCRBY h b 1", Reply::Integer(4)),
        ("EXPIRE h 100", Reply::Integer(1)),
        ("DEL h", Reply::Integer(1)),
    ];
    for (change, reply) in changes {
        assert_eq!(cmd(&mut c1, "WATCH h"), Reply::ok());
        assert_eq!(cmd(&mut c2, change), reply, "{change}");
        assert_eq!(cmd(&mut c1, "MULTI"), Reply::ok());
        assert_eq!(cmd(&mut c1, "HLEN h"), Reply::Simple("QUEUED".into()));
        assert_eq!(cmd(&mut c1, "EXEC"), Reply::NilArray, "after {change}");
    }
    assert_eq!(cmd(&mut c1, "HSET h a 1 b 2"), Reply::Integer(2));
    // Reads, and writes to other keys, leave the watch intact.
    assert_eq!(cmd(&mut c1, "WATCH h"), Reply::ok());
    assert_eq!(
        cmd(&mut c2, "HGETALL h"),
        Reply::Map(vec![(bulk(b"a"), bulk(b"1")), (bulk(b"b"), bulk(b"2"))])
    );
    assert_eq!(cmd(&mut c2, "SADD other x"), Reply::Integer(1));
    assert_eq!(cmd(&mut c1, "MULTI"), Reply::ok());
    assert_eq!(cmd(&mut c1, "HLEN h"), Reply::Simple("QUEUED".into()));
    assert_eq!(cmd(&mut c1, "EXEC"), Reply::Array(vec![Reply::Integer(2)]));
    // Lists and sorted sets too.
    assert_eq!(cmd(&mut c1, "RPUSH l x"), Reply::Integer(1));
    assert_eq!(cmd(&mut c1, "WATCH l"), Reply::ok());
    assert_eq!(cmd(&mut c2, "LSET l 0 y"), Reply::ok());
    assert_eq!(cmd(&mut c1, "MULTI"), Reply::ok());
    assert_eq!(cmd(&mut c1, "LLEN l"), Reply::Simple("QUEUED".into()));
    assert_eq!(cmd(&mut c1, "EXEC"), Reply::NilArray);
}

/// A command that fails inside MULTI leaves no write behind (it would otherwise commit
/// with the block): a collection it created, a collection it buried.
#[test]
fn a_failed_command_in_multi_leaves_nothing() {
    let sh = shared();
    let mut c = Session::new(&sh);
    let run =
        |c: &mut Session<'_>, args: &[&[u8]]| c.execute(args.iter().map(|a| a.to_vec()).collect());
    assert_eq!(cmd(&mut c, "MULTI"), Reply::ok());
    assert_eq!(
        cmd(&mut c, "HINCRBYFLOAT newh f inf"),
        Reply::Simple("QUEUED".into())
    );
    assert_eq!(cmd(&mut c, "SET after 1"), Reply::Simple("QUEUED".into()));
    assert_eq!(
        cmd(&mut c, "EXEC"),
        Reply::Array(vec![
            Reply::err("increment would produce NaN or Infinity"),
            Reply::ok()
        ])
    );
    assert_eq!(cmd(&mut c, "EXISTS newh after"), Reply::Integer(1));
    // RENAME onto a hash whose key is too long for a deadline: the bury of the hash must
    // not survive the failed write.
    let long = vec![b'k'; 65_530];
    assert_eq!(
        run(&mut c, &[b"HSET", &long, b"f", b"v"]),
        Reply::Integer(1)
    );
    assert_eq!(cmd(&mut c, "SET src x EX 100"), Reply::ok());
    assert_eq!(cmd(&mut c, "MULTI"), Reply::ok());
    assert_eq!(
        run(&mut c, &[b"RENAME", b"src", &long]),
        Reply::Simple("QUEUED".into())
    );
    match cmd(&mut c, "EXEC") {
        Reply::Array(r) => assert!(matches!(&r[0], Reply::Error(_)), "{r:?}"),
        other => panic!("{other:?}"),
    }
    drain(&sh);
    check_layout(&sh, true);
    assert_eq!(run(&mut c, &[b"HLEN", &long]), Reply::Integer(1));
    assert_eq!(cmd(&mut c, "GET src"), bulk(b"x"));
}

/// Random picks spread over members and keys that share a long prefix (a point drawn over
/// the whole key space would land before or after all of them and pick the first nearly
/// every time).
#[test]
fn random_picks_spread_over_shared_prefixes() {
    let sh = shared();
    let mut c = Session::new(&sh);
    let members: Vec<String> = (0..100).map(|i| format!("member:{i}")).collect();
    let mut sadd = vec![b"SADD".to_vec(), b"s".to_vec()];
    sadd.extend(members.iter().map(|m| m.as_bytes().to_vec()));
    assert_eq!(c.execute(sadd), Reply::Integer(100));
    let mut seen = BTreeSet::new();
    for _ in 0..1000 {
        let Reply::Bulk(m) = cmd(&mut c, "SRANDMEMBER s") else {
            panic!()
        };
        seen.insert(m);
    }
    assert!(
        seen.len() >= 20,
        "only {} distinct members in 1000 draws",
        seen.len()
    );
    // A database of its own: keys that all share a prefix (RANDOMKEY is not uniform across a
    // wide gap in the key space, README "Server").
    assert_eq!(cmd(&mut c, "SELECT 1"), Reply::ok());
    for i in 0..100 {
        assert_eq!(cmd(&mut c, &format!("SET key:{i} v")), Reply::ok());
    }
    let mut keys = BTreeSet::new();
    for _ in 0..1000 {
        let Reply::Bulk(k) = cmd(&mut c, "RANDOMKEY") else {
            panic!()
        };
        keys.insert(k);
    }
    assert!(
        keys.len() >= 20,
        "only {} distinct keys in 1000 draws",
        keys.len()
    );
}

/// A watched key that expires before EXEC fails it, deleted by the expirer or not.
#[test]
fn an_expired_watched_key_fails_exec() {
    let sh = shared();
    let mut c = Session::new(&sh);
    assert_eq!(cmd(&mut c, "SET k v PX 100"), Reply::ok());
    assert_eq!(cmd(&mut c, "WATCH k"), Reply::ok());
    sh.clock.set_ms(START_MS + 200);
    assert_eq!(cmd(&mut c, "MULTI"), Reply::ok());
    assert_eq!(cmd(&mut c, "SET x 1"), Reply::Simple("QUEUED".into()));
    assert_eq!(cmd(&mut c, "EXEC"), Reply::NilArray);
    // Watching a key that is already gone, then EXEC: nothing changed.
    assert_eq!(cmd(&mut c, "WATCH k"), Reply::ok());
    assert_eq!(cmd(&mut c, "MULTI"), Reply::ok());
    assert_eq!(cmd(&mut c, "SET x 2"), Reply::Simple("QUEUED".into()));
    assert_eq!(cmd(&mut c, "EXEC"), Reply::Array(vec![Reply::ok()]));
}
