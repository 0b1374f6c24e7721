//! The server through a real Redis client library (the `redis` crate, sync connections): what
//! a Rust application would see. Round trips, binary safety, pipelines, MULTI/EXEC, WATCH
//! races with the crate's optimistic-transaction helper, SCAN completeness, error kinds, AUTH
//! and RESP3.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};

use redis::{Commands, ErrorKind, ServerErrorKind, Value};
use verso_engine::{Concurrency, Db, Options};
use verso_server::server::{self, ServerConfig};
use verso_server::session::Shared;

/// Runs `test` against a fresh in-process server on a free loopback port.
fn with_server(password: Option<&str>, test: impl FnOnce(u16)) {
    let cfg = ServerConfig {
        port: 0,
        password: password.map(str::to_string),
        ..ServerConfig::default()
    };
    let listener = server::bind(&cfg).expect("bind");
    let port = listener.local_addr().unwrap().port();
    let db = Db::open(Options::default().concurrency(Concurrency::PrecisionLocking)).unwrap();
    let shared = Shared::new(db, cfg.password.clone()).unwrap();
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| server::serve(listener, &shared, &cfg, &stop));
        // Stop the server even if the test panics, so the scope can end and report it.
        struct StopOnDrop<'a>(&'a AtomicBool);
        impl Drop for StopOnDrop<'_> {
            fn drop(&mut self) {
                self.0.store(true, Ordering::Relaxed);
            }
        }
        let _stop = StopOnDrop(&stop);
        test(port);
    });
}

fn connect(port: u16) -> redis::Connection {
    redis::Client::open(format!("redis://127.0.0.1:{port}/"))
        .unwrap()
        .get_connection()
        .unwrap()
}

fn server_error(e: &redis::RedisError) -> (ErrorKind, String) {
    (
        e.kind(),
        format!("{} {}", e.code().unwrap_or("?"), e.detail().unwrap_or("")),
    )
}

#[test]
fn string_commands_round_trip() {
    with_server(None, |port| {
        let mut c = connect(port);
        let () = c.set("greeting", "hello").unwrap();
        let got: String = c.get("greeting").unwrap();
        assert_eq!(got, "hello");
        let missing: Option<String> = c.get("nothing-here").unwrap();
        assert_eq!(missing, None);

        assert_eq!(c.incr::<_, _, i64>("counter", 1).unwrap(), 1);
        assert_eq!(c.incr::<_, _, i64>("counter", 41).unwrap(), 42);
        assert_eq!(c.decr::<_, _, i64>("counter", 2).unwrap(), 40);
        let n: i64 = c.get("counter").unwrap();
        assert_eq!(n, 40);

        let () = c.mset(&[("a", "1"), ("b", "2"), ("c", "3")]).unwrap();
        let got: Vec<Option<String>> = c.mget(&["a", "zz", "c", "b"]).unwrap();
        assert_eq!(
            got,
            vec![Some("1".into()), None, Some("3".into()), Some("2".into())]
        );
        assert_eq!(c.exists::<_, i64>(&["a", "b", "zz", "a"]).unwrap(), 3);
        assert_eq!(c.del::<_, i64>(&["a", "b", "zz"]).unwrap(), 2);
        assert_eq!(c.exists::<_, i64>(&["a", "b", "c"]).unwrap(), 1);
        let got: Vec<Option<String>> = c.mget(&["a", "b", "c"]).unwrap();
        assert_eq!(got, vec![None, None, Some("3".into())]);

        // GETSET / APPEND / STRLEN / GETDEL through the generic command builder.
        let old: String = redis::cmd("GETSET")
            .arg("c")
            .arg("three")
            .query(&mut c)
            .unwrap();
        assert_eq!(old, "3");
        assert_eq!(c.append::<_, _, i64>("c", "!").unwrap(), 6);
        assert_eq!(c.strlen::<_, i64>("c").unwrap(), 6);
        let gone: String = redis::cmd("GETDEL").arg("c").query(&mut c).unwrap();
        assert_eq!(gone, "three!");
        assert!(!c.exists::<_, bool>("c").unwrap());

        // INCR on a non-integer is Redis's error, and leaves the value alone.
        let () = c.set("text", "abc").unwrap();
        let e = c.incr::<_, _, i64>("text", 1).unwrap_err();
        let (kind, msg) = server_error(&e);
        assert_eq!(kind, ErrorKind::Server(ServerErrorKind::ResponseError));
        assert_eq!(msg, "ERR value is not an integer or out of range");
        assert_eq!(c.get::<_, String>("text").unwrap(), "abc");
    });
}

#[test]
fn keys_and_values_are_binary_safe() {
    with_server(None, |port| {
        let mut c = connect(port);
        let all: Vec<u8> = (0..=255u8).collect();
        // Every byte value as a one-byte key, each holding all 256 byte values rotated.
        for b in 0..=255u8 {
            let mut v = all.clone();
            v.rotate_left(usize::from(b));
            let () = c.set(vec![b], v).unwrap();
        }
        for b in 0..=255u8 {
            let mut want = all.clone();
            want.rotate_left(usize::from(b));
            let got: Vec<u8> = c.get(vec![b]).unwrap();
            assert_eq!(got, want, "key {b:#04x}");
        }
        // A key holding every byte value (CR, LF and NUL included), and the empty key.
        let () = c.set(all.clone(), b"\r\n\0\r\n".to_vec()).unwrap();
        let () = c.set(b"".to_vec(), b"".to_vec()).unwrap();
        let () = c.set(b"empty-value".to_vec(), b"".to_vec()).unwrap();
        let got: Vec<Option<Vec<u8>>> = c
            .mget(&[
                all.clone(),
                Vec::new(),
                b"empty-value".to_vec(),
                b"no".to_vec(),
            ])
            .unwrap();
        assert_eq!(
            got,
            vec![
                Some(b"\r\n\0\r\n".to_vec()),
                Some(Vec::new()),
                Some(Vec::new()),
                None
            ]
        );
        assert!(c.exists::<_, bool>(b"".to_vec()).unwrap());
        assert_eq!(c.strlen::<_, i64>(all.clone()).unwrap(), 5);
        // 256 one-byte keys + the 256-byte key + "" + "empty-value".
        let n: i64 = redis::cmd("DBSIZE").query(&mut c).unwrap();
        assert_eq!(n, 259);
        assert_eq!(c.del::<_, i64>(b"".to_vec()).unwrap(), 1);
        assert!(!c.exists::<_, bool>(b"".to_vec()).unwrap());
    });
}

#[test]
fn pipelines_answer_in_order() {
    with_server(None, |port| {
        let mut c = connect(port);
        let mut p = redis::pipe();
        for i in 0..500 {
            p.set(format!("p{i}"), i).ignore();
        }
        for i in 0..500 {
            p.incr(format!("p{i}"), i);
        }
        p.get("p499").cmd("PING").mget(&["p0", "p1", "nope"]);
        type Tail = (i64, String, Vec<Option<i64>>);
        let mut out: Vec<Value> = p.query(&mut c).unwrap();
        assert_eq!(out.len(), 503);
        let tail: Tail = redis::from_redis_value(Value::Array(out.split_off(500))).unwrap();
        let incrs: Vec<i64> = out
            .into_iter()
            .map(|v| redis::from_redis_value(v).unwrap())
            .collect();
        assert_eq!(incrs, (0..500).map(|i| 2 * i).collect::<Vec<i64>>());
        assert_eq!(
            tail,
            (998, "PONG".to_string(), vec![Some(0), Some(2), None])
        );

        // An error in the middle of a (non-atomic) pipeline is that command's reply only.
        let mut p = redis::pipe();
        p.set("x", "notanumber").ignore().incr("x", 1).get("x");
        let e = p.query::<(i64, String)>(&mut c).unwrap_err();
        assert!(
            e.to_string().contains("not an integer"),
            "unexpected pipeline error {e}"
        );
        assert_eq!(c.get::<_, String>("x").unwrap(), "notanumber");
    });
}

#[test]
fn multi_exec_is_atomic_and_queued_errors_abort() {
    with_server(None, |port| {
        let mut c = connect(port);
        let (a, b, sum): (i64, i64, Vec<i64>) = redis::pipe()
            .atomic()
            .set("acct:a", 100)
            .ignore()
            .set("acct:b", 0)
            .ignore()
            .decr("acct:a", 30)
            .incr("acct:b", 30)
            .mget(&["acct:a", "acct:b"])
            .query(&mut c)
            .unwrap();
        assert_eq!((a, b, sum), (70, 30, vec![70, 30]));

        // A wrong-arity command queued in MULTI: EXEC is refused and nothing runs.
        let e = redis::pipe()
            .atomic()
            .incr("acct:a", 1000)
            .cmd("GET")
            .query::<Value>(&mut c)
            .unwrap_err();
        assert_eq!(
            e.kind(),
            ErrorKind::Server(ServerErrorKind::ExecAbort),
            "{e}"
        );
        assert_eq!(c.get::<_, i64>("acct:a").unwrap(), 70);

        // A runtime error inside EXEC is that command's reply; the rest commits.
        let mut p = redis::pipe();
        p.atomic()
            .set("s", "text")
            .ignore()
            .incr("s", 1)
            .set("after", "yes")
            .ignore();
        assert!(p.query::<Value>(&mut c).is_err());
        assert_eq!(c.get::<_, String>("after").unwrap(), "yes");
        assert_eq!(c.get::<_, String>("s").unwrap(), "text");
    });
}

#[test]
fn watch_conflict_makes_exec_nil_and_the_helper_retries() {
    with_server(None, |port| {
        let mut a = connect(port);
        let mut b = connect(port);
        let () = a.set("w", 10).unwrap();

        // By hand: A watches, B changes the key, A's EXEC returns nil and changes nothing.
        let () = redis::cmd("WATCH").arg("w").query(&mut a).unwrap();
        let seen: i64 = a.get("w").unwrap();
        let () = b.set("w", 500).unwrap();
        let r: Option<(i64,)> = redis::pipe()
            .atomic()
            .set("w", seen + 1)
            .ignore()
            .incr("w", 0)
            .query(&mut a)
            .unwrap();
        assert_eq!(r, None, "EXEC must fail after a watched key changed");
        assert_eq!(b.get::<_, i64>("w").unwrap(), 500);

        // The watch is gone after EXEC: the next transaction commits.
        let r: Option<(i64,)> = redis::pipe().atomic().incr("w", 1).query(&mut a).unwrap();
        assert_eq!(r, Some((501,)));

        // An unwatched key changing does not fail the EXEC, even one the block reads: only
        // watched keys matter, as in Redis, and the block reads at EXEC.
        let () = redis::cmd("WATCH").arg("w").query(&mut a).unwrap();
        let () = b.set("other", 1).unwrap();
        let r: Option<(i64, i64)> = redis::pipe()
            .atomic()
            .incr("w", 1)
            .get("other")
            .query(&mut a)
            .unwrap();
        assert_eq!(r, Some((502, 1)));

        // The crate's optimistic transaction helper: the first attempt loses a race (B
        // writes between the read and the EXEC) and is retried; the retry sees B's value.
        let mut attempts = 0;
        let v: i64 = redis::transaction(&mut a, &["w"], |con, pipe| {
            attempts += 1;
            let cur: i64 = con.get("w")?;
            if attempts == 1 {
                let () = b.incr("w", 1000)?;
            }
            pipe.set("w", cur * 2).ignore().get("w").query(con)
        })
        .map(|(v,): (i64,)| v)
        .unwrap();
        assert_eq!(attempts, 2);
        assert_eq!(v, 2 * 1502);
        assert_eq!(b.get::<_, i64>("w").unwrap(), 3004);

        // DISCARD drops the queue and the watch.
        let () = redis::cmd("WATCH").arg("w").query(&mut a).unwrap();
        let () = redis::cmd("MULTI").query(&mut a).unwrap();
        let q: String = redis::cmd("SET").arg("w").arg(0).query(&mut a).unwrap();
        assert_eq!(q, "QUEUED");
        let () = redis::cmd("DISCARD").query(&mut a).unwrap();
        assert_eq!(a.get::<_, i64>("w").unwrap(), 3004);
    });
}

#[test]
fn scan_returns_every_key_exactly_once() {
    with_server(None, |port| {
        let mut c = connect(port);
        let mut writer = connect(port);
        let keys: BTreeSet<String> = (0..1000)
            .map(|i| format!("key:{i:04}:{}", i * 7919 % 1000))
            .collect();
        let pairs: Vec<(String, i64)> = keys.iter().cloned().zip(0..).collect();
        for chunk in pairs.chunks(100) {
            let () = c.mset(chunk).unwrap();
        }

        // Default COUNT (10 per call: ~100 round trips).
        let got: Vec<String> = c
            .scan::<String>()
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(got.len(), 1000, "a key was returned twice or missed");
        assert_eq!(got.iter().cloned().collect::<BTreeSet<_>>(), keys);

        // MATCH and COUNT, while another connection inserts and deletes other keys: every
        // key present for the whole iteration still comes back exactly once.
        let opts = redis::ScanOptions::default()
            .with_pattern("key:*")
            .with_count(37);
        let mut seen: BTreeMap<String, usize> = BTreeMap::new();
        let mut i = 0;
        for k in c.scan_options::<String>(opts).unwrap() {
            let k = k.unwrap();
            *seen.entry(k).or_default() += 1;
            i += 1;
            if i % 50 == 0 {
                let () = writer.set(format!("key:{i:04}:new"), 1).unwrap();
                let () = writer.set(format!("other:{i}"), 1).unwrap();
            }
        }
        for k in &keys {
            assert_eq!(seen.get(k), Some(&1), "{k} seen {:?} times", seen.get(k));
        }
        assert!(seen.values().all(|&n| n == 1));
        assert!(seen.keys().all(|k| k.starts_with("key:")));

        // A pattern matching nothing ends cleanly.
        let none: Vec<String> = c
            .scan_match::<_, String>("nomatch*")
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert!(none.is_empty());
    });
}

#[test]
fn error_replies_map_to_the_crates_error_kinds() {
    with_server(None, |port| {
        let mut c = connect(port);
        let e = redis::cmd("GET").query::<Value>(&mut c).unwrap_err();
        assert_eq!(
            server_error(&e),
            (
                ErrorKind::Server(ServerErrorKind::ResponseError),
                "ERR wrong number of arguments for 'get' command".into()
            )
        );
        let e = redis::cmd("SET")
            .arg("k")
            .query::<Value>(&mut c)
            .unwrap_err();
        assert_eq!(
            server_error(&e).1,
            "ERR wrong number of arguments for 'set' command"
        );
        let e = redis::cmd("NOSUCHCMD")
            .arg("a")
            .arg("b")
            .query::<Value>(&mut c)
            .unwrap_err();
        let (kind, msg) = server_error(&e);
        assert_eq!(kind, ErrorKind::Server(ServerErrorKind::ResponseError));
        assert!(
            msg.starts_with("ERR unknown command 'NOSUCHCMD', with args beginning with: 'a' 'b'"),
            "{msg}"
        );
        let e = redis::cmd("EXEC").query::<Value>(&mut c).unwrap_err();
        assert_eq!(server_error(&e).1, "ERR EXEC without MULTI");
        // AUTH without a configured password.
        let e = redis::cmd("AUTH")
            .arg("pw")
            .query::<Value>(&mut c)
            .unwrap_err();
        assert!(server_error(&e)
            .1
            .starts_with("ERR AUTH <password> called without"));
        // The connection is still usable after errors.
        let pong: String = redis::cmd("PING").query(&mut c).unwrap();
        assert_eq!(pong, "PONG");
    });
}

#[test]
fn requirepass_needs_auth_and_rejects_wrong_passwords() {
    with_server(Some("s3cret"), |port| {
        // No password: the connection opens, commands get NOAUTH.
        let mut anon = connect(port);
        let e = anon.get::<_, Option<String>>("k").unwrap_err();
        let (kind, msg) = server_error(&e);
        assert_eq!(kind, ErrorKind::Extension);
        assert!(msg.starts_with("NOAUTH Authentication required"), "{msg}");
        // A wrong AUTH is WRONGPASS, and still not authenticated.
        let e = redis::cmd("AUTH")
            .arg("nope")
            .query::<Value>(&mut anon)
            .unwrap_err();
        assert_eq!(e.code(), Some("WRONGPASS"), "{e}");
        assert!(anon.get::<_, Option<String>>("k").is_err());
        // The right one works.
        let () = redis::cmd("AUTH").arg("s3cret").query(&mut anon).unwrap();
        let () = anon.set("k", "v").unwrap();

        // A client configured with the wrong password fails to connect.
        let e = redis::Client::open(format!("redis://:wrong@127.0.0.1:{port}/"))
            .unwrap()
            .get_connection()
            .err()
            .expect("a wrong password must fail");
        assert_eq!(e.kind(), ErrorKind::AuthenticationFailed, "{e}");
        // The right password (also as user "default").
        for url in [
            format!("redis://:s3cret@127.0.0.1:{port}/"),
            format!("redis://default:s3cret@127.0.0.1:{port}/"),
        ] {
            let mut c = redis::Client::open(url).unwrap().get_connection().unwrap();
            assert_eq!(c.get::<_, String>("k").unwrap(), "v");
        }
    });
}

#[test]
fn resp3_through_hello() {
    with_server(Some("pw"), |port| {
        let url = format!("redis://:pw@127.0.0.1:{port}/?protocol=resp3");
        let mut c = redis::Client::open(url).unwrap().get_connection().unwrap();
        let () = c.set("k", "v").unwrap();
        assert_eq!(c.get::<_, String>("k").unwrap(), "v");
        assert_eq!(c.get::<_, Option<String>>("missing").unwrap(), None);
        // RESP3 answers HELLO with a map naming the protocol.
        let hello: Value = redis::cmd("HELLO").arg(3).query(&mut c).unwrap();
        let Value::Map(pairs) = hello else {
            panic!("HELLO 3 did not answer a map: {hello:?}")
        };
        let proto = pairs
            .iter()
            .find(|(k, _)| matches!(k, Value::BulkString(b) if b == b"proto"))
            .map(|(_, v)| v.clone());
        assert_eq!(proto, Some(Value::Int(3)));
        // Nil in RESP3 is `_`, which the crate reads as Nil.
        let v: Value = redis::cmd("GET").arg("missing").query(&mut c).unwrap();
        assert_eq!(v, Value::Nil);
        let r: Option<(i64,)> = redis::pipe().atomic().incr("n", 5).query(&mut c).unwrap();
        assert_eq!(r, Some((5,)));
    });
}
