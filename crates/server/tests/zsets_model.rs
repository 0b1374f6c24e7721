//! Sorted sets against a model: random ZADD (with its flags), ZINCRBY, ZREM, the range
//! forms (by rank, by score with inclusive, exclusive and infinite bounds, by member, REV,
//! LIMIT, WITHSCORES), ZRANK, ZCOUNT, ZPOP*, ZREMRANGE*, and the combining commands with
//! weights and aggregates, over two sorted sets, a set and a string, every reply compared
//! with a map of member -> score per key. Then the documented error replies.

use std::collections::BTreeMap;

use proptest::prelude::*;
use verso_engine::{Concurrency, Db, Options};
use verso_server::resp::Reply;
use verso_server::session::{Session, Shared};

fn shared() -> Shared {
    let db = Db::open(Options::default().concurrency(Concurrency::PrecisionLocking)).unwrap();
    Shared::new(db, None).unwrap()
}

fn cmd(s: &mut Session<'_>, line: &str) -> Reply {
    s.execute(line.split(' ').map(|w| w.as_bytes().to_vec()).collect())
}

fn bulk(s: &[u8]) -> Reply {
    Reply::Bulk(s.to_vec())
}

const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
/// Keys: two sorted sets, a set (`s`, readable by the combining commands) and a string.
const KEYS: [&str; 4] = ["z1", "z2", "s", "str"];
const MEMBERS: [&str; 5] = ["a", "b", "c", "d", "e"];
const SCORES: [&str; 7] = ["-inf", "-1", "0", "1", "1.5", "2", "+inf"];

fn parse_score(s: &str) -> f64 {
    match s {
        "-inf" => f64::NEG_INFINITY,
        "+inf" => f64::INFINITY,
        s => s.parse().unwrap(),
    }
}

#[derive(Clone, Debug)]
enum Op {
    Add(u8, u8, Vec<(u8, u8)>),
    IncrBy(u8, u8, u8),
    Rem(u8, u8),
    Score(u8, u8),
    Card(u8),
    Rank(u8, u8, bool),
    RangeByRank(u8, i8, i8, bool, bool),
    RangeByScore(u8, (u8, bool), (u8, bool), bool, Option<(u8, i8)>, bool),
    RangeByLex(u8, Option<(u8, bool)>, Option<(u8, bool)>, bool),
    Count(u8, (u8, bool), (u8, bool)),
    Pop(u8, u8, bool),
    RemRangeByScore(u8, (u8, bool), (u8, bool)),
    RemRangeByRank(u8, i8, i8),
    Store(u8, u8, u8, u8, (u8, u8), u8),
    Union(u8, u8),
    SAdd(u8),
}

fn op() -> impl Strategy<Value = Op> {
    let k = || prop_oneof![4 => 0u8..2, 1 => 2u8..4];
    let m = || 0u8..5;
    let sc = || 0u8..7;
    let bound = || (sc(), any::<bool>());
    prop_oneof![
        6 => (0u8..7, k(), proptest::collection::vec((sc(), m()), 1..3))
            .prop_map(|(f, k, p)| Op::Add(f, k, p)),
        2 => (k(), sc(), m()).prop_map(|(k, s, m)| Op::IncrBy(k, s, m)),
        2 => (k(), m()).prop_map(|(k, m)| Op::Rem(k, m)),
        1 => (k(), m()).prop_map(|(k, m)| Op::Score(k, m)),
        1 => k().prop_map(Op::Card),
        2 => (k(), m(), any::<bool>()).prop_map(|(k, m, r)| Op::Rank(k, m, r)),
        3 => (k(), -6i8..6, -6i8..6, any::<bool>(), any::<bool>())
            .prop_map(|(k, a, b, r, w)| Op::RangeByRank(k, a, b, r, w)),
        4 => (k(), bound(), bound(), any::<bool>(), proptest::option::of((0u8..3, -1i8..3)), any::<bool>())
            .prop_map(|(k, a, b, r, l, w)| Op::RangeByScore(k, a, b, r, l, w)),
        2 => (k(), proptest::option::of((m(), any::<bool>())), proptest::option::of((m(), any::<bool>())), any::<bool>())
            .prop_map(|(k, a, b, r)| Op::RangeByLex(k, a, b, r)),
        2 => (k(), bound(), bound()).prop_map(|(k, a, b)| Op::Count(k, a, b)),
        2 => (k(), 0u8..3, any::<bool>()).prop_map(|(k, n, max)| Op::Pop(k, n, max)),
        1 => (k(), bound(), bound()).prop_map(|(k, a, b)| Op::RemRangeByScore(k, a, b)),
        1 => (k(), -4i8..4, -4i8..4).prop_map(|(k, a, b)| Op::RemRangeByRank(k, a, b)),
        2 => (0u8..3, k(), k(), k(), (0u8..3, 0u8..3), 0u8..3)
            .prop_map(|(o, d, a, b, w, agg)| Op::Store(o, d, a, b, w, agg)),
        1 => (k(), k()).prop_map(|(a, b)| Op::Union(a, b)),
        1 => m().prop_map(Op::SAdd),
    ]
}

#[derive(Clone, Debug, PartialEq)]
enum Val {
    Z(BTreeMap<String, f64>),
    S(Vec<String>),
    Str,
}

struct Model {
    keys: BTreeMap<String, Val>,
}

fn wrongtype() -> Reply {
    Reply::Error(WRONGTYPE.into())
}

/// Members sorted as Redis orders them: by score, then member.
fn ordered(z: &BTreeMap<String, f64>) -> Vec<(String, f64)> {
    let mut v: Vec<(String, f64)> = z.iter().map(|(m, s)| (m.clone(), *s)).collect();
    v.sort_by(|a, b| a.1.total_cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
    v
}

fn reply(items: Vec<(String, f64)>, scores: bool) -> Reply {
    if scores {
        Reply::Pairs(
            items
                .into_iter()
                .map(|(m, s)| (bulk(m.as_bytes()), Reply::Double(s)))
                .collect(),
        )
    } else {
        Reply::Array(items.into_iter().map(|(m, _)| bulk(m.as_bytes())).collect())
    }
}

fn bound_text((i, excl): (u8, bool)) -> String {
    format!("{}{}", if excl { "(" } else { "" }, SCORES[i as usize])
}

fn in_bounds(s: f64, lo: (u8, bool), hi: (u8, bool)) -> bool {
    let (l, h) = (
        parse_score(SCORES[lo.0 as usize]),
        parse_score(SCORES[hi.0 as usize]),
    );
    (if lo.1 { s > l } else { s >= l }) && (if hi.1 { s < h } else { s <= h })
}

/// Redis's rank normalization: the inclusive index range, or None if empty.
fn rank_range(len: i64, a: i64, b: i64) -> Option<(usize, usize)> {
    let a = if a < 0 { (len + a).max(0) } else { a };
    let b = if b < 0 { len + b } else { b.min(len - 1) };
    (a <= b && a < len).then_some((a as usize, b as usize))
}

impl Model {
    fn z(&self, k: &str) -> Result<BTreeMap<String, f64>, Reply> {
        match self.keys.get(k) {
            None => Ok(BTreeMap::new()),
            Some(Val::Z(z)) => Ok(z.clone()),
            Some(_) => Err(wrongtype()),
        }
    }

    /// For combining commands: a set counts with score 1.
    fn scored(&self, k: &str) -> Result<BTreeMap<String, f64>, Reply> {
        match self.keys.get(k) {
            Some(Val::S(s)) => Ok(s.iter().map(|m| (m.clone(), 1.0)).collect()),
            _ => self.z(k),
        }
    }

    fn put(&mut self, k: &str, z: BTreeMap<String, f64>) {
        if z.is_empty() {
            self.keys.remove(k);
        } else {
            self.keys.insert(k.into(), Val::Z(z));
        }
    }

    fn apply(&mut self, op: &Op) -> (String, Reply) {
        let key = |k: u8| KEYS[k as usize];
        match op {
            Op::Add(flag, k, pairs) => {
                let flags = ["", "NX", "XX", "GT", "LT", "CH", "INCR"];
                let f = flags[*flag as usize];
                let pairs: Vec<(u8, u8)> = if f == "INCR" {
                    pairs[..1].to_vec()
                } else {
                    pairs.clone()
                };
                let mut line = format!("ZADD {}", key(*k));
                if !f.is_empty() {
                    line += &format!(" {f}");
                }
                for (s, m) in &pairs {
                    line += &format!(" {} {}", SCORES[*s as usize], MEMBERS[*m as usize]);
                }
                let mut z = match self.z(key(*k)) {
                    Ok(z) => z,
                    Err(e) => return (line, e),
                };
                if f == "XX" && z.is_empty() {
                    return (line, Reply::Integer(0));
                }
                let (mut added, mut changed, mut last) = (0, 0, None);
                for (s, m) in &pairs {
                    let given = parse_score(SCORES[*s as usize]);
                    let m = MEMBERS[*m as usize].to_string();
                    let old = z.get(&m).copied();
                    if (f == "NX" && old.is_some()) || (f == "XX" && old.is_none()) {
                        continue;
                    }
                    let new = match (f, old) {
                        ("INCR", Some(o)) => o + given,
                        _ => given,
                    };
                    if new.is_nan() {
                        return (line, Reply::err("resulting score is not a number (NaN)"));
                    }
                    if let Some(o) = old {
                        if (f == "GT" && new <= o) || (f == "LT" && new >= o) {
                            continue;
                        }
                    }
                    let new = if new == 0.0 { 0.0 } else { new };
                    z.insert(m, new);
                    last = Some(new);
                    match old {
                        None => added += 1,
                        Some(o) if o != new => changed += 1,
                        _ => {}
                    }
                }
                self.put(key(*k), z);
                let r = if f == "INCR" {
                    last.map_or(Reply::Nil, Reply::Double)
                } else if f == "CH" {
                    Reply::Integer(added + changed)
                } else {
                    Reply::Integer(added)
                };
                (line, r)
            }
            Op::IncrBy(k, s, m) => {
                let line = format!(
                    "ZINCRBY {} {} {}",
                    key(*k),
                    SCORES[*s as usize],
                    MEMBERS[*m as usize]
                );
                let mut z = match self.z(key(*k)) {
                    Ok(z) => z,
                    Err(e) => return (line, e),
                };
                let m = MEMBERS[*m as usize].to_string();
                let new = z.get(&m).copied().unwrap_or(0.0) + parse_score(SCORES[*s as usize]);
                if new.is_nan() {
                    return (line, Reply::err("resulting score is not a number (NaN)"));
                }
                let new = if new == 0.0 { 0.0 } else { new };
                z.insert(m, new);
                self.put(key(*k), z);
                (line, Reply::Double(new))
            }
            Op::Rem(k, m) => {
                let line = format!("ZREM {} {}", key(*k), MEMBERS[*m as usize]);
                match self.z(key(*k)) {
                    Err(e) => (line, e),
                    Ok(mut z) => {
                        let n = i64::from(z.remove(MEMBERS[*m as usize]).is_some());
                        self.put(key(*k), z);
                        (line, Reply::Integer(n))
                    }
                }
            }
            Op::Score(k, m) => {
                let line = format!("ZSCORE {} {}", key(*k), MEMBERS[*m as usize]);
                match self.z(key(*k)) {
                    Err(e) => (line, e),
                    Ok(z) => (
                        line,
                        z.get(MEMBERS[*m as usize])
                            .map_or(Reply::Nil, |s| Reply::Double(*s)),
                    ),
                }
            }
            Op::Card(k) => {
                let line = format!("ZCARD {}", key(*k));
                match self.z(key(*k)) {
                    Err(e) => (line, e),
                    Ok(z) => (line, Reply::Integer(z.len() as i64)),
                }
            }
            Op::Rank(k, m, rev) => {
                let line = format!(
                    "{} {} {}",
                    if *rev { "ZREVRANK" } else { "ZRANK" },
                    key(*k),
                    MEMBERS[*m as usize]
                );
                match self.z(key(*k)) {
                    Err(e) => (line, e),
                    Ok(z) => {
                        let mut o = ordered(&z);
                        if *rev {
                            o.reverse();
                        }
                        let r = o.iter().position(|(x, _)| x == MEMBERS[*m as usize]);
                        (line, r.map_or(Reply::Nil, |r| Reply::Integer(r as i64)))
                    }
                }
            }
            Op::RangeByRank(k, a, b, rev, scores) => {
                let line = format!(
                    "ZRANGE {} {a} {b}{}{}",
                    key(*k),
                    if *rev { " REV" } else { "" },
                    if *scores { " WITHSCORES" } else { "" }
                );
                match self.z(key(*k)) {
                    Err(e) => (line, e),
                    Ok(z) => {
                        let mut o = ordered(&z);
                        if *rev {
                            o.reverse();
                        }
                        let items = match rank_range(o.len() as i64, i64::from(*a), i64::from(*b)) {
                            Some((x, y)) => o[x..=y].to_vec(),
                            None => Vec::new(),
                        };
                        (line, reply(items, *scores))
                    }
                }
            }
            Op::RangeByScore(k, lo, hi, rev, limit, scores) => {
                let (first, second) = if *rev { (hi, lo) } else { (lo, hi) };
                let mut line = format!(
                    "ZRANGE {} {} {} BYSCORE{}",
                    key(*k),
                    bound_text(*first),
                    bound_text(*second),
                    if *rev { " REV" } else { "" }
                );
                if let Some((off, n)) = limit {
                    line += &format!(" LIMIT {off} {n}");
                }
                if *scores {
                    line += " WITHSCORES";
                }
                match self.z(key(*k)) {
                    Err(e) => (line, e),
                    Ok(z) => {
                        let mut o: Vec<(String, f64)> = ordered(&z)
                            .into_iter()
                            .filter(|(_, s)| in_bounds(*s, *lo, *hi))
                            .collect();
                        if *rev {
                            o.reverse();
                        }
                        if let Some((off, n)) = limit {
                            let n = if *n < 0 { usize::MAX } else { *n as usize };
                            o = o.into_iter().skip(*off as usize).take(n).collect();
                        }
                        (line, reply(o, *scores))
                    }
                }
            }
            Op::RangeByLex(k, lo, hi, rev) => {
                let text = |b: &Option<(u8, bool)>, open: &str| match b {
                    None => open.to_string(),
                    Some((m, excl)) => {
                        format!("{}{}", if *excl { "(" } else { "[" }, MEMBERS[*m as usize])
                    }
                };
                let (lo_t, hi_t) = (text(lo, "-"), text(hi, "+"));
                let line = if *rev {
                    format!("ZREVRANGEBYLEX {} {hi_t} {lo_t}", key(*k))
                } else {
                    format!("ZRANGEBYLEX {} {lo_t} {hi_t}", key(*k))
                };
                match self.z(key(*k)) {
                    Err(e) => (line, e),
                    Ok(z) => {
                        let ok = |m: &str| {
                            let above = match lo {
                                None => true,
                                Some((b, excl)) => {
                                    if *excl {
                                        m > MEMBERS[*b as usize]
                                    } else {
                                        m >= MEMBERS[*b as usize]
                                    }
                                }
                            };
                            let below = match hi {
                                None => true,
                                Some((b, excl)) => {
                                    if *excl {
                                        m < MEMBERS[*b as usize]
                                    } else {
                                        m <= MEMBERS[*b as usize]
                                    }
                                }
                            };
                            above && below
                        };
                        // By member order (the server's order when scores differ).
                        let mut o: Vec<(String, f64)> = z
                            .iter()
                            .filter(|(m, _)| ok(m))
                            .map(|(m, s)| (m.clone(), *s))
                            .collect();
                        if *rev {
                            o.reverse();
                        }
                        (line, reply(o, false))
                    }
                }
            }
            Op::Count(k, lo, hi) => {
                let line = format!("ZCOUNT {} {} {}", key(*k), bound_text(*lo), bound_text(*hi));
                match self.z(key(*k)) {
                    Err(e) => (line, e),
                    Ok(z) => (
                        line,
                        Reply::Integer(
                            z.values().filter(|s| in_bounds(**s, *lo, *hi)).count() as i64
                        ),
                    ),
                }
            }
            Op::Pop(k, n, max) => {
                let line = format!(
                    "{} {} {n}",
                    if *max { "ZPOPMAX" } else { "ZPOPMIN" },
                    key(*k)
                );
                match self.z(key(*k)) {
                    Err(e) => (line, e),
                    Ok(mut z) => {
                        let mut o = ordered(&z);
                        if *max {
                            o.reverse();
                        }
                        o.truncate(*n as usize);
                        for (m, _) in &o {
                            z.remove(m);
                        }
                        self.put(key(*k), z);
                        (line, reply(o, true))
                    }
                }
            }
            Op::RemRangeByScore(k, lo, hi) => {
                let line = format!(
                    "ZREMRANGEBYSCORE {} {} {}",
                    key(*k),
                    bound_text(*lo),
                    bound_text(*hi)
                );
                match self.z(key(*k)) {
                    Err(e) => (line, e),
                    Ok(mut z) => {
                        let before = z.len();
                        z.retain(|_, s| !in_bounds(*s, *lo, *hi));
                        let n = (before - z.len()) as i64;
                        self.put(key(*k), z);
                        (line, Reply::Integer(n))
                    }
                }
            }
            Op::RemRangeByRank(k, a, b) => {
                let line = format!("ZREMRANGEBYRANK {} {a} {b}", key(*k));
                match self.z(key(*k)) {
                    Err(e) => (line, e),
                    Ok(mut z) => {
                        let o = ordered(&z);
                        let mut n = 0;
                        if let Some((x, y)) =
                            rank_range(o.len() as i64, i64::from(*a), i64::from(*b))
                        {
                            for (m, _) in &o[x..=y] {
                                z.remove(m);
                                n += 1;
                            }
                        }
                        self.put(key(*k), z);
                        (line, Reply::Integer(n))
                    }
                }
            }
            Op::Store(o, d, a, b, (wa, wb), agg) => {
                let names = ["ZUNIONSTORE", "ZINTERSTORE", "ZDIFFSTORE"];
                let aggs = ["SUM", "MIN", "MAX"];
                let weights = [1.0, 2.0, 0.5];
                let mut line = format!(
                    "{} {} 2 {} {}",
                    names[*o as usize],
                    key(*d),
                    key(*a),
                    key(*b)
                );
                if *o != 2 {
                    line += &format!(
                        " WEIGHTS {} {} AGGREGATE {}",
                        weights[*wa as usize], weights[*wb as usize], aggs[*agg as usize]
                    );
                }
                let (x, y) = match (self.scored(key(*a)), self.scored(key(*b))) {
                    (Err(e), _) | (_, Err(e)) => return (line, e),
                    (Ok(x), Ok(y)) => (x, y),
                };
                let (w1, w2) = if *o == 2 {
                    (1.0, 1.0)
                } else {
                    (weights[*wa as usize], weights[*wb as usize])
                };
                let fix = |v: f64| if v.is_nan() { 0.0 } else { v };
                let mix = |p: f64, q: f64| {
                    fix(match agg {
                        0 => p + q,
                        1 => p.min(q),
                        _ => p.max(q),
                    })
                };
                let xw: BTreeMap<String, f64> =
                    x.into_iter().map(|(m, s)| (m, fix(s * w1))).collect();
                let result: BTreeMap<String, f64> = match o {
                    0 => {
                        let mut r = xw;
                        for (m, s) in y {
                            let s = fix(s * w2);
                            r.entry(m).and_modify(|p| *p = mix(*p, s)).or_insert(s);
                        }
                        r
                    }
                    1 => xw
                        .into_iter()
                        .filter_map(|(m, p)| y.get(&m).map(|q| (m, mix(p, fix(q * w2)))))
                        .collect(),
                    _ => xw.into_iter().filter(|(m, _)| !y.contains_key(m)).collect(),
                };
                let n = result.len() as i64;
                let result = result
                    .into_iter()
                    .map(|(m, s)| (m, if s == 0.0 { 0.0 } else { s }))
                    .collect();
                self.keys.remove(key(*d));
                self.put(key(*d), result);
                (line, Reply::Integer(n))
            }
            Op::Union(a, b) => {
                let line = format!("ZUNION 2 {} {} WITHSCORES", key(*a), key(*b));
                match (self.scored(key(*a)), self.scored(key(*b))) {
                    (Err(e), _) | (_, Err(e)) => (line, e),
                    (Ok(mut x), Ok(y)) => {
                        for (m, s) in y {
                            x.entry(m)
                                .and_modify(|p| *p = if (*p + s).is_nan() { 0.0 } else { *p + s })
                                .or_insert(s);
                        }
                        (line, reply(ordered(&x), true))
                    }
                }
            }
            Op::SAdd(m) => {
                let line = format!("SADD s {}", MEMBERS[*m as usize]);
                let mut s = match self.keys.get("s") {
                    Some(Val::S(s)) => s.clone(),
                    None => Vec::new(),
                    Some(_) => return (line, wrongtype()),
                };
                let new = !s.contains(&MEMBERS[*m as usize].to_string());
                if new {
                    s.push(MEMBERS[*m as usize].into());
                }
                self.keys.insert("s".into(), Val::S(s));
                (line, Reply::Integer(i64::from(new)))
            }
        }
    }
}

/// Scores compared as Redis would print them (so 0 and -0, both printed "0", agree).
fn same(a: &Reply, b: &Reply) -> bool {
    match (a, b) {
        (Reply::Double(x), Reply::Double(y)) => x == y || (x.is_nan() && y.is_nan()),
        (Reply::Pairs(x), Reply::Pairs(y)) => {
            x.len() == y.len()
                && x.iter()
                    .zip(y)
                    .all(|((a1, a2), (b1, b2))| same(a1, b1) && same(a2, b2))
        }
        (Reply::Array(x), Reply::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same(a, b))
        }
        // Both are `*0` on the wire.
        (Reply::Array(x), Reply::Pairs(y)) | (Reply::Pairs(y), Reply::Array(x)) => {
            x.is_empty() && y.is_empty()
        }
        _ => a == b,
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn sorted_sets_match_the_model(ops in proptest::collection::vec(op(), 1..50)) {
        let sh = shared();
        let mut s = Session::new(&sh);
        assert_eq!(cmd(&mut s, "SET str v"), Reply::ok());
        let mut model = Model { keys: BTreeMap::new() };
        model.keys.insert("str".into(), Val::Str);
        for op in &ops {
            let (line, expected) = model.apply(op);
            let got = cmd(&mut s, &line);
            prop_assert!(same(&got, &expected), "{}: got {:?}, expected {:?}", line, got, expected);
        }
    }
}

#[test]
fn documented_edge_cases() {
    let sh = shared();
    let mut c = Session::new(&sh);
    let err = |m: &str| Reply::err(m);
    assert_eq!(
        cmd(&mut c, "ZADD z NX XX 1 a"),
        err("XX and NX options at the same time are not compatible")
    );
    assert_eq!(
        cmd(&mut c, "ZADD z GT LT 1 a"),
        err("GT, LT, and/or NX options at the same time are not compatible")
    );
    assert_eq!(
        cmd(&mut c, "ZADD z INCR 1 a 2 b"),
        err("INCR option supports a single increment-element pair")
    );
    assert_eq!(cmd(&mut c, "ZADD z x a"), err("value is not a valid float"));
    assert_eq!(cmd(&mut c, "ZADD z 1 a 2"), err("syntax error"));
    assert_eq!(cmd(&mut c, "ZADD z +inf a"), Reply::Integer(1));
    assert_eq!(
        cmd(&mut c, "ZINCRBY z -inf a"),
        err("resulting score is not a number (NaN)")
    );
    assert_eq!(
        cmd(&mut c, "ZRANGEBYSCORE z x 1"),
        err("min or max is not a float")
    );
    assert_eq!(
        cmd(&mut c, "ZRANGEBYLEX z a b"),
        err("min or max not valid string range item")
    );
    assert_eq!(
        cmd(&mut c, "ZRANGE z 0 1 LIMIT 0 1"),
        err("syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX")
    );
    assert_eq!(
        cmd(&mut c, "ZRANGE z - + BYLEX WITHSCORES"),
        err("syntax error, WITHSCORES not supported in combination with BYLEX")
    );
    assert_eq!(cmd(&mut c, "ZADD keep 1 a"), Reply::Integer(1));
    assert_eq!(
        cmd(&mut c, "ZRANGESTORE keep nosuch abc def BYSCORE"),
        err("min or max is not a float"),
        "bounds are checked before the source is looked up"
    );
    assert_eq!(cmd(&mut c, "ZCARD keep"), Reply::Integer(1));
    assert_eq!(
        cmd(&mut c, "ZRANGE nosuch x 1"),
        err("value is not an integer or out of range")
    );
    assert_eq!(
        cmd(&mut c, "ZUNIONSTORE d 0 z"),
        err("at least 1 input key is needed for this command")
    );
    assert_eq!(
        cmd(&mut c, "ZPOPMIN z -1"),
        err("value is out of range, must be positive")
    );
    assert_eq!(cmd(&mut c, "ZADD z 1 b 2 c"), Reply::Integer(2));
    assert_eq!(cmd(&mut c, "ZINTERCARD 1 z LIMIT 2"), Reply::Integer(2));
    assert_eq!(
        cmd(&mut c, "ZMSCORE z a nope"),
        Reply::Array(vec![Reply::Double(f64::INFINITY), Reply::Nil])
    );
    assert_eq!(
        cmd(&mut c, "ZMPOP 1 z MIN COUNT 1"),
        Reply::Array(vec![
            bulk(b"z"),
            Reply::Array(vec![Reply::Array(vec![bulk(b"b"), Reply::Double(1.0)])])
        ])
    );
    assert_eq!(cmd(&mut c, "ZMPOP 1 nokey MAX"), Reply::NilArray);
    assert_eq!(cmd(&mut c, "ZRANGESTORE d z 0 -1"), Reply::Integer(2));
    assert_eq!(
        cmd(&mut c, "ZRANGE d 0 -1"),
        Reply::Array(vec![bulk(b"c"), bulk(b"a")])
    );
    assert_eq!(cmd(&mut c, "TYPE d"), Reply::Simple("zset".into()));
    assert_eq!(cmd(&mut c, "OBJECT ENCODING d"), bulk(b"skiplist"));
    let Reply::Array(page) = cmd(&mut c, "ZSCAN d 0") else {
        panic!()
    };
    assert_eq!(
        page[1],
        Reply::Array(vec![bulk(b"a"), bulk(b"inf"), bulk(b"c"), bulk(b"2")])
    );
    match cmd(&mut c, "ZRANDMEMBER d -3 WITHSCORES") {
        Reply::Pairs(p) => assert_eq!(p.len(), 3),
        other => panic!("{other:?}"),
    }
    assert_eq!(cmd(&mut c, "ZREMRANGEBYLEX d - +"), Reply::Integer(2));
    assert_eq!(
        cmd(&mut c, "EXISTS d"),
        Reply::Integer(0),
        "an emptied sorted set is gone"
    );
}
