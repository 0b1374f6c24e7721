//! The gateway's commands against Verso's Redis server as the model: random requests, MULTI
//! blocks with WATCH and a second client's writes, run on two gateway connections over an
//! in-memory store (each plan run as its transaction would: the first shot's reads, the
//! writes `decide` returns) and on two sessions of the engine-backed server, which is
//! tested against Redis's documented behaviour. Every reply and, after every step, every
//! key's value must agree.
//!
//! WATCH compares values here (a watched key rewritten with its old value passes), where
//! the server, as Redis, aborts on any write: the second client's writes are always of a
//! fresh value, and a watching client writes nothing between WATCH and EXEC, so the two
//! rules agree on every generated history.

use std::collections::HashMap;

use proptest::prelude::*;
use verso_engine::{Concurrency, Db, Options};
use verso_gateway::conn::{Conn, Step};
use verso_gateway::plan::{Done, Plan, Shape};
use verso_gateway::value::{decode, Stored};
use verso_ncc::{Key, Op, Value};
use verso_server::resp::Reply;
use verso_server::session::{Session, Shared};

const KEYS: [&str; 4] = ["a", "b", "{c}", "d"];

/// Stored values by key, as NCC's groups would hold them.
type Store = HashMap<Vec<u8>, Vec<u8>>;

/// Runs `plan` as the coordinator does, against `store`.
fn run_plan(store: &mut Store, mut plan: Plan) -> Done {
    let read = |store: &Store, ops: &[Op]| -> Vec<(Key, Value)> {
        ops.iter()
            .map(|op| {
                assert!(!op.is_write(), "a first shot of reads");
                let k = op.key().clone();
                let v = store.get(k.as_bytes()).cloned().unwrap_or_default();
                (k, Value::from(v))
            })
            .collect()
    };
    let write = |store: &mut Store, ops: Vec<Op>| {
        for op in ops {
            let Op::Write(k, v) = op else {
                panic!("a read among the decided writes: {op:?}")
            };
            if v.is_empty() {
                store.remove(k.as_bytes());
            } else {
                store.insert(k.as_bytes().to_vec(), v.as_bytes().to_vec());
            }
        }
    };
    let (ops, last) = plan.first_shot();
    assert!(!ops.is_empty());
    match plan.shape() {
        Shape::Blind => {
            assert!(last && ops.iter().all(Op::is_write));
            write(store, ops);
            plan.finish(&[])
        }
        Shape::ReadOnly => {
            assert!(last);
            let reads = read(store, &ops);
            plan.finish(&reads)
        }
        Shape::ReadWrite => {
            assert!(!last);
            let reads = read(store, &ops);
            let writes = plan.decide(&reads);
            write(store, writes);
            plan.finish(&[])
        }
        Shape::Local => unreachable!("answered by the connection"),
    }
}

fn gateway(conn: &mut Conn, store: &mut Store, args: &[Vec<u8>]) -> Reply {
    match conn.request(args) {
        Step::Reply(r) | Step::Close(r) => r,
        Step::Run(plan) => {
            let done = run_plan(store, plan);
            conn.completed(done)
        }
        Step::Nothing => panic!("no empty requests are generated"),
    }
}

/// One generated data command.
fn command() -> impl Strategy<Value = Vec<Vec<u8>>> {
    let key = proptest::sample::select(KEYS.to_vec());
    let value = proptest::sample::select(vec!["1", "7", "-3", "x", "", "12345678901234567890"]);
    let keys = proptest::collection::vec(key.clone(), 1..4);
    let pairs = proptest::collection::vec((key.clone(), value.clone()), 1..3);
    let set_opts = proptest::sample::select(vec![
        "",
        "NX",
        "XX",
        "GET",
        "NX GET",
        "XX GET",
        "KEEPTTL",
        "NX XX",
        "XX NX GET",
        "NX NX",
        "GET GET XX",
    ]);
    prop_oneof![
        key.clone().prop_map(|k| vec!["GET".to_string(), k.into()]),
        (key.clone(), value.clone(), set_opts).prop_map(|(k, v, o)| {
            let mut a = vec!["SET".to_string(), k.into(), v.into()];
            a.extend(o.split_whitespace().map(String::from));
            a
        }),
        (key.clone(), value.clone()).prop_map(|(k, v)| vec!["SETNX".into(), k.into(), v.into()]),
        (key.clone(), value.clone()).prop_map(|(k, v)| vec!["GETSET".into(), k.into(), v.into()]),
        key.clone()
            .prop_map(|k| vec!["GETDEL".to_string(), k.into()]),
        keys.clone().prop_map(|ks| words("MGET", &ks)),
        pairs.clone().prop_map(|ps| pair_words("MSET", &ps)),
        pairs.prop_map(|ps| pair_words("MSETNX", &ps)),
        (key.clone(), value.clone()).prop_map(|(k, v)| vec!["APPEND".into(), k.into(), v.into()]),
        key.clone()
            .prop_map(|k| vec!["STRLEN".to_string(), k.into()]),
        key.clone().prop_map(|k| vec!["INCR".to_string(), k.into()]),
        key.clone().prop_map(|k| vec!["DECR".to_string(), k.into()]),
        (key.clone(), value.clone()).prop_map(|(k, v)| vec!["INCRBY".into(), k.into(), v.into()]),
        (key.clone(), value).prop_map(|(k, v)| vec!["DECRBY".into(), k.into(), v.into()]),
        keys.clone().prop_map(|ks| words("DEL", &ks)),
        keys.clone().prop_map(|ks| words("UNLINK", &ks)),
        keys.prop_map(|ks| words("EXISTS", &ks)),
        (key.clone(), key.clone(), proptest::bool::ANY).prop_map(|(a, b, nx)| {
            vec![
                if nx { "RENAMENX" } else { "RENAME" }.into(),
                a.into(),
                b.into(),
            ]
        }),
        (
            key.clone(),
            key.clone(),
            proptest::sample::select(vec!["", "REPLACE", "DB 0", "DB 0 REPLACE", "BAD"])
        )
            .prop_map(|(a, b, o)| {
                let mut v = vec!["COPY".to_string(), a.into(), b.into()];
                v.extend(o.split_whitespace().map(String::from));
                v
            }),
        (key.clone(), -4i64..6, -4i64..6, proptest::bool::ANY).prop_map(|(k, a, b, sub)| {
            vec![
                if sub { "SUBSTR" } else { "GETRANGE" }.into(),
                k.into(),
                a.to_string(),
                b.to_string(),
            ]
        }),
        (
            key.clone(),
            proptest::sample::select(vec!["0", "2", "-1", "x"]),
            proptest::sample::select(vec!["ab", "", "Z"])
        )
            .prop_map(|(k, o, v)| vec!["SETRANGE".into(), k.into(), o.into(), v.into()]),
        (
            key.clone(),
            proptest::sample::select(vec!["1.5", "-3", "x", "0.1", "1e3"])
        )
            .prop_map(|(k, by)| vec!["INCRBYFLOAT".into(), k.into(), by.into()]),
        (
            key.clone(),
            proptest::sample::select(vec!["", "PERSIST", "PERSIST PERSIST", "BAD"])
        )
            .prop_map(|(k, o)| {
                let mut v = vec!["GETEX".to_string(), k.into()];
                v.extend(o.split_whitespace().map(String::from));
                v
            }),
        key.clone().prop_map(|k| vec!["TYPE".to_string(), k.into()]),
        proptest::collection::vec(key.clone(), 1..3).prop_map(|ks| words("TOUCH", &ks)),
        Just(vec!["RENAME".to_string(), "a".into()]), // wrong arity
        Just(vec!["PING".to_string()]),
        Just(vec!["ECHO".to_string(), "hi".into()]),
        Just(vec!["GET".to_string()]), // wrong arity
    ]
    .prop_map(|a| a.into_iter().map(String::into_bytes).collect())
}

fn words(name: &str, ks: &[&str]) -> Vec<String> {
    std::iter::once(name.to_string())
        .chain(ks.iter().map(|k| k.to_string()))
        .collect()
}

fn pair_words(name: &str, ps: &[(&str, &str)]) -> Vec<String> {
    let mut a = vec![name.to_string()];
    for (k, v) in ps {
        a.push(k.to_string());
        a.push(v.to_string());
    }
    a
}

/// A step of the history.
#[derive(Clone, Debug)]
enum Step2 {
    Single(Vec<Vec<u8>>),
    /// WATCH (if any keys), the other client's write of a fresh value (if any), MULTI, the
    /// commands (an unknown one fails the block), EXEC or DISCARD.
    Block {
        watch: Vec<&'static str>,
        other_writes: Option<&'static str>,
        cmds: Vec<Vec<Vec<u8>>>,
        unknown: bool,
        discard: bool,
    },
}

fn step() -> impl Strategy<Value = Step2> {
    let key = proptest::sample::select(KEYS.to_vec());
    prop_oneof![
        3 => command().prop_map(Step2::Single),
        1 => (
            proptest::collection::vec(key.clone(), 0..3),
            proptest::option::of(key),
            proptest::collection::vec(command(), 0..5),
            proptest::bool::weighted(0.1),
            proptest::bool::weighted(0.1),
        )
            .prop_map(|(watch, other_writes, cmds, unknown, discard)| Step2::Block {
                watch,
                other_writes,
                cmds,
                unknown,
                discard,
            }),
    ]
}

fn args(words: &[&str]) -> Vec<Vec<u8>> {
    words.iter().map(|w| w.as_bytes().to_vec()).collect()
}

/// Both sides: two gateway connections over one store, two server sessions over one Db.
struct Pair<'s> {
    store: Store,
    gw: [Conn; 2],
    server: [Session<'s>; 2],
    fresh: u64,
}

impl Pair<'_> {
    /// Sends `a` from client `c` to both sides and compares the replies.
    fn both(&mut self, c: usize, a: &[Vec<u8>]) -> Result<(), TestCaseError> {
        let got = gateway(&mut self.gw[c], &mut self.store, a);
        let want = self.server[c].execute(a.to_vec());
        let shown: Vec<String> = a
            .iter()
            .map(|w| String::from_utf8_lossy(w).into())
            .collect();
        prop_assert_eq!(got, want, "request {:?} from client {}", shown, c);
        Ok(())
    }

    fn same_values(&mut self) -> Result<(), TestCaseError> {
        for k in KEYS {
            let want = self.server[1].execute(args(&["GET", k]));
            let got = match decode(self.store.get(k.as_bytes()).map_or(&[][..], |v| v)) {
                Stored::Absent => Reply::Nil,
                Stored::String(s) => Reply::Bulk(s),
                Stored::Other(_) => Reply::Error("other".into()),
            };
            prop_assert_eq!(got, want, "the value of {}", k);
        }
        Ok(())
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn the_gateway_answers_as_the_server(steps in proptest::collection::vec(step(), 1..40)) {
        let db = Db::open(Options::default().concurrency(Concurrency::PrecisionLocking)).unwrap();
        let shared = Shared::new(db, None).unwrap();
        let mut p = Pair {
            store: Store::new(),
            gw: [Conn::new(1), Conn::new(2)],
            server: [Session::new(&shared), Session::new(&shared)],
            fresh: 0,
        };
        for step in steps {
            match step {
                Step2::Single(a) => p.both(0, &a)?,
                Step2::Block { watch, other_writes, cmds, unknown, discard } => {
                    if !watch.is_empty() {
                        p.both(0, &words("WATCH", &watch).into_iter().map(String::into_bytes).collect::<Vec<_>>())?;
                    }
                    if let Some(k) = other_writes {
                        p.fresh += 1;
                        let v = format!("fresh{}", p.fresh);
                        p.both(1, &args(&["SET", k, &v]))?;
                    }
                    p.both(0, &args(&["MULTI"]))?;
                    for (i, c) in cmds.iter().enumerate() {
                        if unknown && i == cmds.len() / 2 {
                            p.both(0, &args(&["NOSUCHCOMMAND", "a"]))?;
                        }
                        p.both(0, c)?;
                    }
                    p.both(0, &args(&[if discard { "DISCARD" } else { "EXEC" }]))?;
                }
            }
            p.same_values()?;
        }
    }
}
