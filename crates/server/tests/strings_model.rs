//! The string and whole-key commands against a model: random command sequences over a few
//! keys in two databases, run on a session and on a map per database, every reply compared
//! (LCS by its invariants: a common subsequence of the model's length; INCRBYFLOAT by the
//! number it prints). Then the commands' documented edge cases one by one.

use std::collections::HashMap;

use proptest::prelude::*;
use verso_engine::{Concurrency, Db, Options};
use verso_server::resp::Reply;
use verso_server::session::{Session, Shared};

fn shared() -> Shared {
    let db = Db::open(Options::default().concurrency(Concurrency::PrecisionLocking)).unwrap();
    Shared::new(db, None).unwrap()
}

fn run(s: &mut Session<'_>, args: &[&[u8]]) -> Reply {
    s.execute(args.iter().map(|a| a.to_vec()).collect())
}

fn cmd(s: &mut Session<'_>, line: &str) -> Reply {
    s.execute(line.split(' ').map(|w| w.as_bytes().to_vec()).collect())
}

fn bulk(s: &[u8]) -> Reply {
    Reply::Bulk(s.to_vec())
}

fn is_err(r: &Reply, prefix: &str) -> bool {
    matches!(r, Reply::Error(e) if e.starts_with(prefix))
}

#[derive(Clone, Debug)]
enum Op {
    Select(u8),
    Set(u8, Vec<u8>),
    Get(u8),
    Del(u8),
    Append(u8, Vec<u8>),
    SetRange(u8, u8, Vec<u8>),
    Substr(u8, i8, i8),
    Rename(u8, u8, bool),
    Copy(u8, u8, Option<u8>, bool),
    Move(u8, u8),
    Touch(Vec<u8>),
    GetDel(u8),
    MsetNx(Vec<(u8, Vec<u8>)>),
    Lcs(u8, u8),
    IncrByFloat(u8, i16),
}

const KEYS: [&[u8]; 3] = [b"a", b"b", b"c"];

fn key(k: u8) -> &'static [u8] {
    KEYS[k as usize % KEYS.len()]
}

fn op() -> impl Strategy<Value = Op> {
    let k = 0u8..3;
    let v = proptest::collection::vec(prop_oneof![Just(b'x'), Just(b'y'), Just(b'1')], 0..6);
    prop_oneof![
        (0u8..2).prop_map(Op::Select),
        (k.clone(), v.clone()).prop_map(|(k, v)| Op::Set(k, v)),
        k.clone().prop_map(Op::Get),
        k.clone().prop_map(Op::Del),
        (k.clone(), v.clone()).prop_map(|(k, v)| Op::Append(k, v)),
        (k.clone(), 0u8..8, v.clone()).prop_map(|(k, o, v)| Op::SetRange(k, o, v)),
        (k.clone(), -6i8..6, -6i8..6).prop_map(|(k, s, e)| Op::Substr(k, s, e)),
        (k.clone(), k.clone(), any::<bool>()).prop_map(|(a, b, nx)| Op::Rename(a, b, nx)),
        (
            k.clone(),
            k.clone(),
            proptest::option::of(0u8..2),
            any::<bool>()
        )
            .prop_map(|(a, b, db, r)| Op::Copy(a, b, db, r)),
        (k.clone(), 0u8..2).prop_map(|(a, db)| Op::Move(a, db)),
        proptest::collection::vec(k.clone(), 1..4).prop_map(Op::Touch),
        k.clone().prop_map(Op::GetDel),
        proptest::collection::vec((k.clone(), v.clone()), 1..3).prop_map(Op::MsetNx),
        (k.clone(), k.clone()).prop_map(|(a, b)| Op::Lcs(a, b)),
        (k, -50i16..50).prop_map(|(k, by)| Op::IncrByFloat(k, by)),
    ]
}

/// The model: one map per database, and the selected one.
struct Model {
    dbs: [HashMap<Vec<u8>, Vec<u8>>; 2],
    db: usize,
}

/// The LCS length, by recursion on suffixes (a different formulation from the server's
/// prefix table).
fn lcs_len(a: &[u8], b: &[u8]) -> usize {
    let mut memo = HashMap::new();
    fn go(
        a: &[u8],
        b: &[u8],
        i: usize,
        j: usize,
        memo: &mut HashMap<(usize, usize), usize>,
    ) -> usize {
        if i == a.len() || j == b.len() {
            return 0;
        }
        if let Some(&n) = memo.get(&(i, j)) {
            return n;
        }
        let n = if a[i] == b[j] {
            1 + go(a, b, i + 1, j + 1, memo)
        } else {
            go(a, b, i + 1, j, memo).max(go(a, b, i, j + 1, memo))
        };
        memo.insert((i, j), n);
        n
    }
    go(a, b, 0, 0, &mut memo)
}

fn is_subsequence(s: &[u8], of: &[u8]) -> bool {
    let mut it = of.iter();
    s.iter().all(|c| it.any(|d| d == c))
}

impl Model {
    fn cur(&mut self) -> &mut HashMap<Vec<u8>, Vec<u8>> {
        &mut self.dbs[self.db]
    }

    /// The reply Redis gives, or `None` where the test checks an invariant instead.
    fn apply(&mut self, op: &Op) -> Option<Reply> {
        Some(match op {
            Op::Select(d) => {
                self.db = *d as usize;
                Reply::ok()
            }
            Op::Set(k, v) => {
                self.cur().insert(key(*k).to_vec(), v.clone());
                Reply::ok()
            }
            Op::Get(k) => self.cur().get(key(*k)).map_or(Reply::Nil, |v| bulk(v)),
            Op::Del(k) => Reply::Integer(i64::from(self.cur().remove(key(*k)).is_some())),
            Op::Append(k, v) => {
                let e = self.cur().entry(key(*k).to_vec()).or_default();
                e.extend_from_slice(v);
                Reply::Integer(e.len() as i64)
            }
            Op::SetRange(k, o, v) => {
                let (o, kk) = (*o as usize, key(*k).to_vec());
                if v.is_empty() {
                    return Some(Reply::Integer(
                        self.cur().get(&kk).map_or(0, Vec::len) as i64
                    ));
                }
                let e = self.cur().entry(kk).or_default();
                if e.len() < o + v.len() {
                    e.resize(o + v.len(), 0);
                }
                e[o..o + v.len()].copy_from_slice(v);
                Reply::Integer(e.len() as i64)
            }
            Op::Substr(k, s, e) => {
                let v = self.cur().get(key(*k)).cloned().unwrap_or_default();
                let len = v.len() as i64;
                let (mut s, mut e) = (i64::from(*s), i64::from(*e));
                if s < 0 && e < 0 && s > e {
                    return Some(bulk(b""));
                }
                if s < 0 {
                    s = (len + s).max(0);
                }
                if e < 0 {
                    e = (len + e).max(0);
                }
                e = e.min(len - 1);
                if len == 0 || s > e {
                    bulk(b"")
                } else {
                    bulk(&v[s as usize..=e as usize])
                }
            }
            Op::Rename(a, b, nx) => {
                let (a, b) = (key(*a).to_vec(), key(*b).to_vec());
                let Some(v) = self.cur().get(&a).cloned() else {
                    return Some(Reply::err("no such key"));
                };
                if a == b {
                    return Some(if *nx { Reply::Integer(0) } else { Reply::ok() });
                }
                if *nx && self.cur().contains_key(&b) {
                    return Some(Reply::Integer(0));
                }
                self.cur().remove(&a);
                self.cur().insert(b, v);
                if *nx {
                    Reply::Integer(1)
                } else {
                    Reply::ok()
                }
            }
            Op::Copy(a, b, db, replace) => {
                let dst = db.map_or(self.db, |d| d as usize);
                let (a, b) = (key(*a).to_vec(), key(*b).to_vec());
                if dst == self.db && a == b {
                    return Some(Reply::err("source and destination objects are the same"));
                }
                let Some(v) = self.cur().get(&a).cloned() else {
                    return Some(Reply::Integer(0));
                };
                if !replace && self.dbs[dst].contains_key(&b) {
                    return Some(Reply::Integer(0));
                }
                self.dbs[dst].insert(b, v);
                Reply::Integer(1)
            }
            Op::Move(a, db) => {
                let (dst, a) = (*db as usize, key(*a).to_vec());
                if dst == self.db {
                    return Some(Reply::err("source and destination objects are the same"));
                }
                let Some(v) = self.cur().get(&a).cloned() else {
                    return Some(Reply::Integer(0));
                };
                if self.dbs[dst].contains_key(&a) {
                    return Some(Reply::Integer(0));
                }
                self.cur().remove(&a);
                self.dbs[dst].insert(a, v);
                Reply::Integer(1)
            }
            Op::Touch(ks) => Reply::Integer(
                ks.iter()
                    .filter(|k| self.dbs[self.db].contains_key(key(**k)))
                    .count() as i64,
            ),
            Op::GetDel(k) => self.cur().remove(key(*k)).map_or(Reply::Nil, |v| bulk(&v)),
            Op::MsetNx(pairs) => {
                if pairs
                    .iter()
                    .any(|(k, _)| self.dbs[self.db].contains_key(key(*k)))
                {
                    return Some(Reply::Integer(0));
                }
                for (k, v) in pairs {
                    self.cur().insert(key(*k).to_vec(), v.clone());
                }
                Reply::Integer(1)
            }
            Op::Lcs(..) | Op::IncrByFloat(..) => return None,
        })
    }
}

fn args(op: &Op) -> Vec<Vec<u8>> {
    let s = |x: &[u8]| x.to_vec();
    let n = |x: i64| x.to_string().into_bytes();
    match op {
        Op::Select(d) => vec![s(b"SELECT"), n(i64::from(*d))],
        Op::Set(k, v) => vec![s(b"SET"), s(key(*k)), v.clone()],
        Op::Get(k) => vec![s(b"GET"), s(key(*k))],
        Op::Del(k) => vec![s(b"DEL"), s(key(*k))],
        Op::Append(k, v) => vec![s(b"APPEND"), s(key(*k)), v.clone()],
        Op::SetRange(k, o, v) => vec![s(b"SETRANGE"), s(key(*k)), n(i64::from(*o)), v.clone()],
        Op::Substr(k, a, b) => vec![s(b"SUBSTR"), s(key(*k)), n(i64::from(*a)), n(i64::from(*b))],
        Op::Rename(a, b, nx) => vec![
            s(if *nx { b"RENAMENX" } else { b"RENAME" }),
            s(key(*a)),
            s(key(*b)),
        ],
        Op::Copy(a, b, db, replace) => {
            let mut v = vec![s(b"COPY"), s(key(*a)), s(key(*b))];
            if let Some(d) = db {
                v.extend([s(b"DB"), n(i64::from(*d))]);
            }
            if *replace {
                v.push(s(b"REPLACE"));
            }
            v
        }
        Op::Move(a, db) => vec![s(b"MOVE"), s(key(*a)), n(i64::from(*db))],
        Op::Touch(ks) => std::iter::once(s(b"TOUCH"))
            .chain(ks.iter().map(|k| s(key(*k))))
            .collect(),
        Op::GetDel(k) => vec![s(b"GETDEL"), s(key(*k))],
        Op::MsetNx(pairs) => std::iter::once(s(b"MSETNX"))
            .chain(pairs.iter().flat_map(|(k, v)| [s(key(*k)), v.clone()]))
            .collect(),
        Op::Lcs(a, b) => vec![s(b"LCS"), s(key(*a)), s(key(*b))],
        Op::IncrByFloat(k, by) => vec![s(b"INCRBYFLOAT"), s(key(*k)), n(i64::from(*by))],
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]
    #[test]
    fn string_and_key_commands_match_the_model(ops in proptest::collection::vec(op(), 1..40)) {
        let sh = shared();
        let mut s = Session::new(&sh);
        let mut m = Model { dbs: [HashMap::new(), HashMap::new()], db: 0 };
        for op in &ops {
            let got = s.execute(args(op));
            match op {
                Op::Lcs(a, b) => {
                    let x = m.dbs[m.db].get(key(*a)).cloned().unwrap_or_default();
                    let y = m.dbs[m.db].get(key(*b)).cloned().unwrap_or_default();
                    let Reply::Bulk(common) = got else { panic!("LCS replied {got:?}") };
                    prop_assert!(is_subsequence(&common, &x) && is_subsequence(&common, &y));
                    prop_assert_eq!(common.len(), lcs_len(&x, &y));
                    let len = s.execute(vec![b"LCS".to_vec(), key(*a).to_vec(), key(*b).to_vec(), b"LEN".to_vec()]);
                    prop_assert_eq!(len, Reply::Integer(common.len() as i64));
                }
                Op::IncrByFloat(k, by) => {
                    let old = m.dbs[m.db].get(key(*k)).cloned();
                    let parsed = match &old {
                        None => Some(0.0),
                        Some(v) => std::str::from_utf8(v).ok().and_then(|t| t.parse::<f64>().ok()).filter(|x| !x.is_nan() && !v.is_empty()),
                    };
                    match parsed {
                        Some(x) => {
                            let Reply::Bulk(text) = got else { panic!("INCRBYFLOAT replied {got:?}") };
                            let y: f64 = std::str::from_utf8(&text).unwrap().parse().unwrap();
                            prop_assert_eq!(y, x + f64::from(*by));
                            m.dbs[m.db].insert(key(*k).to_vec(), text);
                        }
                        None => prop_assert!(is_err(&got, "ERR value is not a valid float"), "{:?}", got),
                    }
                }
                _ => {
                    let want = m.apply(op).expect("modelled");
                    prop_assert_eq!(got, want, "{:?}", op);
                }
            }
        }
    }
}

#[test]
fn documented_edge_cases() {
    let sh = shared();
    let mut c = Session::new(&sh);
    // INCRBYFLOAT, Redis's examples.
    assert_eq!(cmd(&mut c, "SET mykey 10.50"), Reply::ok());
    assert_eq!(cmd(&mut c, "INCRBYFLOAT mykey 0.1"), bulk(b"10.6"));
    assert_eq!(cmd(&mut c, "INCRBYFLOAT mykey -5"), bulk(b"5.6"));
    assert_eq!(cmd(&mut c, "SET mykey 5.0e3"), Reply::ok());
    assert_eq!(cmd(&mut c, "INCRBYFLOAT mykey 2.0e2"), bulk(b"5200"));
    assert!(is_err(
        &cmd(&mut c, "INCRBYFLOAT mykey inf"),
        "ERR increment would produce NaN or Infinity"
    ));
    assert!(is_err(
        &cmd(&mut c, "INCRBYFLOAT mykey abc"),
        "ERR value is not a valid float"
    ));
    assert_eq!(cmd(&mut c, "GET mykey"), bulk(b"5200"));
    // SETRANGE, Redis's examples, and the limits checked before allocating.
    assert_eq!(cmd(&mut c, "SET key1 Hello_World"), Reply::ok());
    assert_eq!(cmd(&mut c, "SETRANGE key1 6 Redis"), Reply::Integer(11));
    assert_eq!(cmd(&mut c, "GET key1"), bulk(b"Hello_Redis"));
    assert_eq!(cmd(&mut c, "SETRANGE key2 6 Redis"), Reply::Integer(11));
    assert_eq!(cmd(&mut c, "GET key2"), bulk(b"\0\0\0\0\0\0Redis"));
    assert!(is_err(
        &cmd(&mut c, "SETRANGE key2 -1 x"),
        "ERR offset is out of range"
    ));
    assert!(is_err(
        &cmd(&mut c, "SETRANGE key2 9223372036854775000 x"),
        "ERR string exceeds maximum allowed size"
    ));
    assert!(is_err(
        &cmd(&mut c, "SETRANGE key2 x x"),
        "ERR value is not an integer"
    ));
    assert_eq!(
        run(&mut c, &[b"SETRANGE", b"nokey", b"5", b""]),
        Reply::Integer(0)
    );
    assert_eq!(cmd(&mut c, "EXISTS nokey"), Reply::Integer(0));
    // LCS, Redis's examples.
    assert_eq!(
        cmd(&mut c, "MSET key1 ohmytext key2 mynewtext"),
        Reply::ok()
    );
    assert_eq!(cmd(&mut c, "LCS key1 key2"), bulk(b"mytext"));
    assert_eq!(cmd(&mut c, "LCS key1 key2 LEN"), Reply::Integer(6));
    let range = |a: i64, b: i64| Reply::Array(vec![Reply::Integer(a), Reply::Integer(b)]);
    assert_eq!(
        cmd(&mut c, "LCS key1 key2 IDX MINMATCHLEN 4 WITHMATCHLEN"),
        Reply::Map(vec![
            (
                bulk(b"matches"),
                Reply::Array(vec![Reply::Array(vec![
                    range(4, 7),
                    range(5, 8),
                    Reply::Integer(4)
                ])])
            ),
            (bulk(b"len"), Reply::Integer(6)),
        ])
    );
    assert!(is_err(
        &cmd(&mut c, "LCS key1 key2 LEN IDX"),
        "ERR If you want both"
    ));
    // Whole keys.
    assert!(is_err(&cmd(&mut c, "RENAME nokey x"), "ERR no such key"));
    assert!(is_err(
        &cmd(&mut c, "COPY key1 key1"),
        "ERR source and destination objects are the same"
    ));
    assert!(is_err(
        &cmd(&mut c, "COPY key1 x DB 16"),
        "ERR DB index is out of range"
    ));
    assert!(is_err(
        &cmd(&mut c, "MOVE key1 0"),
        "ERR source and destination objects are the same"
    ));
    assert!(is_err(
        &cmd(&mut c, "MOVE key1 -1"),
        "ERR DB index is out of range"
    ));
    assert_eq!(cmd(&mut c, "OBJECT ENCODING mykey"), bulk(b"int"));
    assert_eq!(cmd(&mut c, "OBJECT ENCODING key1"), bulk(b"embstr"));
    assert_eq!(cmd(&mut c, "OBJECT ENCODING nokey"), Reply::Nil);
    assert_eq!(cmd(&mut c, "OBJECT REFCOUNT key1"), Reply::Integer(1));
    assert!(is_err(
        &cmd(&mut c, "OBJECT FREQ key1"),
        "ERR An LFU maxmemory policy"
    ));
    assert!(is_err(
        &cmd(&mut c, "OBJECT FOO key1"),
        "ERR unknown subcommand"
    ));
    assert!(is_err(
        &cmd(&mut c, "MSETNX a"),
        "ERR wrong number of arguments for 'msetnx'"
    ));
    // RANDOMKEY: a key that exists, and nil in an empty database.
    for _ in 0..20 {
        let Reply::Bulk(k) = cmd(&mut c, "RANDOMKEY") else {
            panic!("RANDOMKEY")
        };
        assert_eq!(run(&mut c, &[b"EXISTS", &k]), Reply::Integer(1));
    }
    assert_eq!(cmd(&mut c, "SELECT 3"), Reply::ok());
    assert_eq!(cmd(&mut c, "RANDOMKEY"), Reply::Nil);
    // Scripting: the flushes test harnesses send succeed; the rest says why not.
    assert_eq!(cmd(&mut c, "FUNCTION FLUSH"), Reply::ok());
    assert_eq!(cmd(&mut c, "SCRIPT FLUSH SYNC"), Reply::ok());
    assert!(is_err(
        &cmd(&mut c, "FUNCTION FLUSH NOW"),
        "ERR syntax error"
    ));
    assert!(is_err(&cmd(&mut c, "EVAL return 1 0"), "ERR scripting"));
    assert!(is_err(&cmd(&mut c, "FUNCTION LIST"), "ERR scripting"));
}

/// RENAME, COPY and MOVE inside MULTI are part of the block's one transaction.
#[test]
fn key_commands_in_multi_are_atomic() {
    let sh = shared();
    let mut c = Session::new(&sh);
    assert_eq!(cmd(&mut c, "SET a 1"), Reply::ok());
    assert_eq!(cmd(&mut c, "MULTI"), Reply::Simple("OK".into()));
    for line in ["RENAME a b", "COPY b c", "MOVE c 1", "INCRBYFLOAT b 1.5"] {
        assert_eq!(cmd(&mut c, line), Reply::Simple("QUEUED".into()));
    }
    assert_eq!(
        cmd(&mut c, "EXEC"),
        Reply::Array(vec![
            Reply::ok(),
            Reply::Integer(1),
            Reply::Integer(1),
            bulk(b"2.5")
        ])
    );
    assert_eq!(
        cmd(&mut c, "MGET a b c"),
        Reply::Array(vec![Reply::Nil, bulk(b"2.5"), Reply::Nil])
    );
    assert_eq!(cmd(&mut c, "SELECT 1"), Reply::ok());
    assert_eq!(cmd(&mut c, "GET c"), bulk(b"1"));
}
