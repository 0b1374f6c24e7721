//! Lists against a model: random pushes and pops at both ends (with counts), LRANGE,
//! LINDEX, LSET, LINSERT, LREM, LTRIM, LPOS, LMOVE, RPOPLPUSH, LMPOP and the X forms over two
//! lists and a string, every reply compared with a `VecDeque` per key (negative indexes,
//! out-of-range ones and WRONGTYPE included). Then the documented error replies.

use std::collections::{BTreeMap, VecDeque};

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

/// A reply as it goes on the wire (RESP3): LRANGE answers with pre-encoded bytes, so replies
/// are compared by what the client receives.
fn wire(r: &Reply) -> String {
    let mut out = Vec::new();
    r.encode(verso_server::resp::Version::Resp3, &mut out);
    String::from_utf8_lossy(&out).into_owned()
}

fn bulk(s: &str) -> Reply {
    Reply::Bulk(s.as_bytes().to_vec())
}

const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
const KEYS: [&str; 3] = ["l1", "l2", "str"];
const VALUES: [&str; 3] = ["a", "b", "c"];

#[derive(Clone, Debug)]
enum Op {
    Push(u8, bool, Vec<u8>, bool),
    Pop(u8, bool, Option<u8>),
    Len(u8),
    Range(u8, i8, i8),
    Index(u8, i8),
    Set(u8, i8, u8),
    Insert(u8, bool, u8, u8),
    Rem(u8, i8, u8),
    Trim(u8, i8, i8),
    Pos(u8, u8, i8, Option<u8>, u8),
    Move(u8, u8, bool, bool),
    MPop(bool, u8),
}

fn op() -> impl Strategy<Value = Op> {
    let k = || prop_oneof![6 => 0u8..2, 1 => Just(2u8)];
    let v = || 0u8..3;
    prop_oneof![
        6 => (k(), any::<bool>(), proptest::collection::vec(v(), 1..4), prop::bool::weighted(0.15))
            .prop_map(|(k, l, vs, x)| Op::Push(k, l, vs, x)),
        3 => (k(), any::<bool>(), proptest::option::of(0u8..4)).prop_map(|(k, l, n)| Op::Pop(k, l, n)),
        1 => k().prop_map(Op::Len),
        3 => (k(), -5i8..5, -5i8..5).prop_map(|(k, a, b)| Op::Range(k, a, b)),
        2 => (k(), -5i8..5).prop_map(|(k, i)| Op::Index(k, i)),
        1 => (k(), -4i8..4, v()).prop_map(|(k, i, v)| Op::Set(k, i, v)),
        1 => (k(), any::<bool>(), v(), v()).prop_map(|(k, a, p, v)| Op::Insert(k, a, p, v)),
        1 => (k(), -2i8..3, v()).prop_map(|(k, n, v)| Op::Rem(k, n, v)),
        1 => (k(), -5i8..5, -5i8..5).prop_map(|(k, a, b)| Op::Trim(k, a, b)),
        2 => (k(), v(), prop_oneof![-2i8..0, 1i8..3], proptest::option::of(0u8..3), 0u8..4)
            .prop_map(|(k, v, r, c, m)| Op::Pos(k, v, r, c, m)),
        2 => (k(), k(), any::<bool>(), any::<bool>()).prop_map(|(a, b, f, t)| Op::Move(a, b, f, t)),
        1 => (any::<bool>(), 1u8..3).prop_map(|(l, n)| Op::MPop(l, n)),
    ]
}

struct Model {
    lists: BTreeMap<String, VecDeque<String>>,
}

fn arr(items: impl IntoIterator<Item = String>) -> Reply {
    Reply::Array(items.into_iter().map(|v| bulk(&v)).collect())
}

fn range(len: i64, a: i64, b: i64) -> Option<(usize, usize)> {
    let a = if a < 0 { (len + a).max(0) } else { a };
    let b = if b < 0 { len + b } else { b.min(len - 1) };
    (a <= b && a < len).then_some((a as usize, b as usize))
}

fn index(len: usize, i: i64) -> Option<usize> {
    let i = if i < 0 { len as i64 + i } else { i };
    (0..len as i64).contains(&i).then_some(i as usize)
}

impl Model {
    /// The list at `k`: Err(WRONGTYPE) for the string.
    fn get(&self, k: &str) -> Result<VecDeque<String>, Reply> {
        if k == "str" {
            return Err(Reply::Error(WRONGTYPE.into()));
        }
        Ok(self.lists.get(k).cloned().unwrap_or_default())
    }

    fn put(&mut self, k: &str, l: VecDeque<String>) {
        if l.is_empty() {
            self.lists.remove(k);
        } else {
            self.lists.insert(k.into(), l);
        }
    }

    fn apply(&mut self, op: &Op) -> (String, Reply) {
        let key = |k: u8| KEYS[k as usize];
        let val = |v: u8| VALUES[v as usize].to_string();
        let side = |left: bool| if left { "LEFT" } else { "RIGHT" };
        match op {
            Op::Push(k, left, vs, x) => {
                let name = match (left, x) {
                    (true, false) => "LPUSH",
                    (false, false) => "RPUSH",
                    (true, true) => "LPUSHX",
                    (false, true) => "RPUSHX",
                };
                let line = format!(
                    "{name} {} {}",
                    key(*k),
                    vs.iter().map(|v| val(*v)).collect::<Vec<_>>().join(" ")
                );
                match self.get(key(*k)) {
                    Err(e) => (line, e),
                    Ok(l) if *x && l.is_empty() => (line, Reply::Integer(0)),
                    Ok(mut l) => {
                        for v in vs {
                            if *left {
                                l.push_front(val(*v));
                            } else {
                                l.push_back(val(*v));
                            }
                        }
                        let n = l.len() as i64;
                        self.put(key(*k), l);
                        (line, Reply::Integer(n))
                    }
                }
            }
            Op::Pop(k, left, n) => {
                let name = if *left { "LPOP" } else { "RPOP" };
                let line = match n {
                    Some(n) => format!("{name} {} {n}", key(*k)),
                    None => format!("{name} {}", key(*k)),
                };
                match self.get(key(*k)) {
                    Err(e) => (line, e),
                    Ok(l) if l.is_empty() => (
                        line,
                        if n.is_some() {
                            Reply::NilArray
                        } else {
                            Reply::Nil
                        },
                    ),
                    Ok(mut l) => {
                        let mut out = Vec::new();
                        for _ in 0..n.unwrap_or(1) {
                            let v = if *left { l.pop_front() } else { l.pop_back() };
                            match v {
                                Some(v) => out.push(v),
                                None => break,
                            }
                        }
                        self.put(key(*k), l);
                        let r = match n {
                            Some(_) => arr(out),
                            None => bulk(&out[0]),
                        };
                        (line, r)
                    }
                }
            }
            Op::Len(k) => {
                let line = format!("LLEN {}", key(*k));
                match self.get(key(*k)) {
                    Err(e) => (line, e),
                    Ok(l) => (line, Reply::Integer(l.len() as i64)),
                }
            }
            Op::Range(k, a, b) => {
                let line = format!("LRANGE {} {a} {b}", key(*k));
                match self.get(key(*k)) {
                    Err(e) => (line, e),
                    Ok(l) => {
                        let r = match range(l.len() as i64, i64::from(*a), i64::from(*b)) {
                            Some((x, y)) => arr(l.range(x..=y).cloned()),
                            None => Reply::Array(Vec::new()),
                        };
                        (line, r)
                    }
                }
            }
            Op::Index(k, i) => {
                let line = format!("LINDEX {} {i}", key(*k));
                match self.get(key(*k)) {
                    Err(e) => (line, e),
                    Ok(l) => (
                        line,
                        index(l.len(), i64::from(*i)).map_or(Reply::Nil, |i| bulk(&l[i])),
                    ),
                }
            }
            Op::Set(k, i, v) => {
                let line = format!("LSET {} {i} {}", key(*k), val(*v));
                match self.get(key(*k)) {
                    Err(e) => (line, e),
                    Ok(l) if l.is_empty() => (line, Reply::err("no such key")),
                    Ok(mut l) => match index(l.len(), i64::from(*i)) {
                        None => (line, Reply::err("index out of range")),
                        Some(i) => {
                            l[i] = val(*v);
                            self.put(key(*k), l);
                            (line, Reply::ok())
                        }
                    },
                }
            }
            Op::Insert(k, after, p, v) => {
                let line = format!(
                    "LINSERT {} {} {} {}",
                    key(*k),
                    if *after { "AFTER" } else { "BEFORE" },
                    val(*p),
                    val(*v)
                );
                match self.get(key(*k)) {
                    Err(e) => (line, e),
                    Ok(l) if l.is_empty() => (line, Reply::Integer(0)),
                    Ok(mut l) => match l.iter().position(|x| *x == val(*p)) {
                        None => (line, Reply::Integer(-1)),
                        Some(i) => {
                            l.insert(if *after { i + 1 } else { i }, val(*v));
                            let n = l.len() as i64;
                            self.put(key(*k), l);
                            (line, Reply::Integer(n))
                        }
                    },
                }
            }
            Op::Rem(k, n, v) => {
                let line = format!("LREM {} {n} {}", key(*k), val(*v));
                match self.get(key(*k)) {
                    Err(e) => (line, e),
                    Ok(l) => {
                        let limit = if *n == 0 {
                            usize::MAX
                        } else {
                            n.unsigned_abs() as usize
                        };
                        let mut v_idx: Vec<usize> =
                            (0..l.len()).filter(|&i| l[i] == val(*v)).collect();
                        if *n < 0 {
                            v_idx.reverse();
                        }
                        v_idx.truncate(limit);
                        let removed = v_idx.len();
                        let kept = l
                            .iter()
                            .enumerate()
                            .filter(|(i, _)| !v_idx.contains(i))
                            .map(|(_, x)| x.clone())
                            .collect();
                        self.put(key(*k), kept);
                        (line, Reply::Integer(removed as i64))
                    }
                }
            }
            Op::Trim(k, a, b) => {
                let line = format!("LTRIM {} {a} {b}", key(*k));
                match self.get(key(*k)) {
                    Err(e) => (line, e),
                    Ok(l) => {
                        let kept = match range(l.len() as i64, i64::from(*a), i64::from(*b)) {
                            Some((x, y)) => l.range(x..=y).cloned().collect(),
                            None => VecDeque::new(),
                        };
                        self.put(key(*k), kept);
                        (line, Reply::ok())
                    }
                }
            }
            Op::Pos(k, v, rank, count, maxlen) => {
                let mut line = format!("LPOS {} {} RANK {rank}", key(*k), val(*v));
                if let Some(c) = count {
                    line += &format!(" COUNT {c}");
                }
                line += &format!(" MAXLEN {maxlen}");
                match self.get(key(*k)) {
                    Err(e) => (line, e),
                    Ok(l) => {
                        let order: Vec<usize> = if *rank < 0 {
                            (0..l.len()).rev().collect()
                        } else {
                            (0..l.len()).collect()
                        };
                        let scanned = if *maxlen == 0 {
                            order.len()
                        } else {
                            (*maxlen as usize).min(order.len())
                        };
                        let hits: Vec<usize> = order[..scanned]
                            .iter()
                            .copied()
                            .filter(|&i| l[i] == val(*v))
                            .skip(rank.unsigned_abs() as usize - 1)
                            .collect();
                        let r = match count {
                            None => hits
                                .first()
                                .map_or(Reply::Nil, |&i| Reply::Integer(i as i64)),
                            Some(c) => {
                                let n = if *c == 0 { usize::MAX } else { *c as usize };
                                Reply::Array(
                                    hits.into_iter()
                                        .take(n)
                                        .map(|i| Reply::Integer(i as i64))
                                        .collect(),
                                )
                            }
                        };
                        (line, r)
                    }
                }
            }
            Op::Move(a, b, from_left, to_left) => {
                let line = format!(
                    "LMOVE {} {} {} {}",
                    key(*a),
                    key(*b),
                    side(*from_left),
                    side(*to_left)
                );
                let src = match self.get(key(*a)) {
                    Err(e) => return (line, e),
                    Ok(l) => l,
                };
                if src.is_empty() {
                    return (line, Reply::Nil);
                }
                if let Err(e) = self.get(key(*b)) {
                    return (line, e);
                }
                let mut src = src;
                let v = if *from_left {
                    src.pop_front()
                } else {
                    src.pop_back()
                }
                .unwrap();
                self.put(key(*a), src);
                let mut dst = self.get(key(*b)).unwrap();
                if *to_left {
                    dst.push_front(v.clone());
                } else {
                    dst.push_back(v.clone());
                }
                self.put(key(*b), dst);
                (line, bulk(&v))
            }
            Op::MPop(left, n) => {
                let line = format!("LMPOP 2 l1 l2 {} COUNT {n}", side(*left));
                for k in ["l1", "l2"] {
                    let mut l = self.get(k).unwrap();
                    if l.is_empty() {
                        continue;
                    }
                    let mut out = Vec::new();
                    for _ in 0..*n {
                        match if *left { l.pop_front() } else { l.pop_back() } {
                            Some(v) => out.push(v),
                            None => break,
                        }
                    }
                    self.put(k, l);
                    return (line, Reply::Array(vec![bulk(k), arr(out)]));
                }
                (line, Reply::NilArray)
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn lists_match_the_model(ops in proptest::collection::vec(op(), 1..60)) {
        let sh = shared();
        let mut s = Session::new(&sh);
        assert_eq!(cmd(&mut s, "SET str v"), Reply::ok());
        let mut model = Model { lists: BTreeMap::new() };
        for op in &ops {
            let (line, expected) = model.apply(op);
            let got = cmd(&mut s, &line);
            prop_assert_eq!(wire(&got), wire(&expected), "{}", line);
        }
        for k in ["l1", "l2"] {
            let want = model.lists.get(k).map_or(0, VecDeque::len) as i64;
            prop_assert_eq!(cmd(&mut s, &format!("LLEN {k}")), Reply::Integer(want));
            prop_assert_eq!(cmd(&mut s, &format!("EXISTS {k}")), Reply::Integer(i64::from(want > 0)));
        }
    }
}

#[test]
fn documented_edge_cases() {
    let sh = shared();
    let mut c = Session::new(&sh);
    assert_eq!(cmd(&mut c, "RPUSH l a b a c a"), Reply::Integer(5));
    assert_eq!(
        cmd(&mut c, "LPOS l a RANK 0"),
        Reply::err("RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list")
    );
    assert_eq!(
        cmd(&mut c, "LPOS l a COUNT -1"),
        Reply::err("COUNT can't be negative")
    );
    assert_eq!(
        cmd(&mut c, "LPOS l a COUNT 0"),
        Reply::Array(vec![
            Reply::Integer(0),
            Reply::Integer(2),
            Reply::Integer(4)
        ])
    );
    assert_eq!(cmd(&mut c, "LPOS l a RANK -1"), Reply::Integer(4));
    assert_eq!(
        cmd(&mut c, "LPOP l -1"),
        Reply::err("value is out of range, must be positive")
    );
    assert_eq!(
        cmd(&mut c, "LINSERT l MIDDLE a x"),
        Reply::err("syntax error")
    );
    assert_eq!(cmd(&mut c, "LMOVE l l UP LEFT"), Reply::err("syntax error"));
    assert_eq!(
        cmd(&mut c, "LMPOP 0 l LEFT"),
        Reply::err("numkeys should be greater than 0")
    );
    assert_eq!(cmd(&mut c, "LSET nokey 0 x"), Reply::err("no such key"));
    assert_eq!(cmd(&mut c, "RPOPLPUSH l l"), bulk("a"), "rotation");
    assert_eq!(
        wire(&cmd(&mut c, "LRANGE l 0 -1")),
        wire(&Reply::Array(["a", "a", "b", "a", "c"].map(bulk).to_vec()))
    );
    assert_eq!(cmd(&mut c, "TYPE l"), Reply::Simple("list".into()));
    assert_eq!(cmd(&mut c, "OBJECT ENCODING l"), bulk("quicklist"));
    assert_eq!(cmd(&mut c, "COPY l l2"), Reply::Integer(1));
    assert_eq!(cmd(&mut c, "LTRIM l 5 10"), Reply::ok());
    assert_eq!(
        cmd(&mut c, "EXISTS l"),
        Reply::Integer(0),
        "a list trimmed empty is gone"
    );
    assert_eq!(cmd(&mut c, "LLEN l2"), Reply::Integer(5));
}

/// A blocking pop waits for a push by another connection (woken by its commit), answers
/// nil at its timeout, never blocks inside MULTI, and checks its timeout argument.
#[test]
fn blocking_pops_wake_on_push_and_time_out() {
    let sh = shared();
    std::thread::scope(|scope| {
        let waiter = scope.spawn(|| {
            let mut c = Session::new(&sh);
            (cmd(&mut c, "BLPOP q1 q2 5"), cmd(&mut c, "BZPOPMIN z 5"))
        });
        let mut p = Session::new(&sh);
        // Whether the waiter blocked first or not, it gets these.
        assert_eq!(cmd(&mut p, "RPUSH q2 x"), Reply::Integer(1));
        assert_eq!(cmd(&mut p, "ZADD z 3 m"), Reply::Integer(1));
        let (list, zset) = waiter.join().unwrap();
        assert_eq!(list, Reply::Array(vec![bulk("q2"), bulk("x")]));
        assert_eq!(
            zset,
            Reply::Array(vec![bulk("z"), bulk("m"), Reply::Double(3.0)])
        );
    });
    let mut c = Session::new(&sh);
    let start = std::time::Instant::now();
    assert_eq!(cmd(&mut c, "BLPOP empty 0.05"), Reply::NilArray);
    assert!(start.elapsed() >= std::time::Duration::from_millis(50));
    assert_eq!(cmd(&mut c, "BLMOVE empty dst LEFT RIGHT 0.01"), Reply::Nil);
    assert_eq!(
        cmd(&mut c, "BLPOP q 1.x"),
        Reply::err("timeout is not a float or out of range")
    );
    assert_eq!(cmd(&mut c, "BLPOP q -1"), Reply::err("timeout is negative"));
    assert_eq!(cmd(&mut c, "MULTI"), Reply::ok());
    assert_eq!(cmd(&mut c, "BLPOP empty 0"), Reply::Simple("QUEUED".into()));
    assert_eq!(cmd(&mut c, "EXEC"), Reply::Array(vec![Reply::NilArray]));
    assert_eq!(
        cmd(&mut c, "BLMPOP 0 -1 k LEFT"),
        Reply::err("numkeys should be greater than 0")
    );
    assert_eq!(cmd(&mut c, "MULTI"), Reply::ok());
    assert_eq!(
        cmd(&mut c, "BLMPOP -1 1 k LEFT"),
        Reply::Simple("QUEUED".into())
    );
    assert_eq!(
        cmd(&mut c, "EXEC"),
        Reply::Array(vec![Reply::err("timeout is negative")])
    );
    assert_eq!(cmd(&mut c, "RPUSH src a b"), Reply::Integer(2));
    assert_eq!(cmd(&mut c, "BLMOVE src dst RIGHT LEFT 0"), bulk("b"));
    assert_eq!(
        cmd(&mut c, "BLMPOP 0 2 none src LEFT COUNT 5"),
        Reply::Array(vec![bulk("src"), Reply::Array(vec![bulk("a")])])
    );
}
