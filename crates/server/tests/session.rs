//! The command layer driven directly, as a client would over the wire: replies, errors,
//! MULTI/EXEC, WATCH races between two connections (Redis's semantics, and that a watch holds
//! no transaction), the per-connection limits, AUTH, SELECT, SCAN.

use std::collections::BTreeSet;

use verso_engine::{Concurrency, Db, Options};
use verso_server::resp::Reply;
use verso_server::session::{Session, SessionLimits, Shared};

fn shared(password: Option<&str>) -> Shared {
    let db = Db::open(Options::default().concurrency(Concurrency::PrecisionLocking)).unwrap();
    Shared::new(db, password.map(str::to_string)).unwrap()
}

fn cmd(s: &mut Session<'_>, line: &str) -> Reply {
    s.execute(line.split(' ').map(|w| w.as_bytes().to_vec()).collect())
}

fn bulk(s: &str) -> Reply {
    Reply::Bulk(s.as_bytes().to_vec())
}

fn is_err(r: &Reply, prefix: &str) -> bool {
    matches!(r, Reply::Error(e) if e.starts_with(prefix))
}

#[test]
fn strings_behave_like_redis() {
    let sh = shared(None);
    let mut c = Session::new(&sh);
    assert_eq!(cmd(&mut c, "PING"), Reply::Simple("PONG".into()));
    assert_eq!(cmd(&mut c, "SET k v"), Reply::ok());
    assert_eq!(cmd(&mut c, "GET k"), bulk("v"));
    assert_eq!(cmd(&mut c, "SET k w NX"), Reply::Nil);
    assert_eq!(cmd(&mut c, "SET k w XX GET"), bulk("v"));
    assert_eq!(cmd(&mut c, "SET nokey w XX"), Reply::Nil);
    assert!(is_err(
        &cmd(&mut c, "SET k v EX 0"),
        "ERR invalid expire time in 'set' command"
    ));
    assert!(is_err(
        &cmd(&mut c, "SET k v EX 10 PX 5"),
        "ERR syntax error"
    ));
    assert!(is_err(
        &cmd(&mut c, "SET k v KEEPTTL EX 5"),
        "ERR syntax error"
    ));
    assert_eq!(cmd(&mut c, "APPEND k 12"), Reply::Integer(3));
    assert_eq!(cmd(&mut c, "GETRANGE k 1 -1"), bulk("12"));
    assert_eq!(cmd(&mut c, "STRLEN k"), Reply::Integer(3));
    assert_eq!(cmd(&mut c, "INCR n"), Reply::Integer(1));
    assert_eq!(cmd(&mut c, "INCRBY n 41"), Reply::Integer(42));
    assert_eq!(cmd(&mut c, "DECRBY n 2"), Reply::Integer(40));
    assert!(is_err(
        &cmd(&mut c, "INCR k"),
        "ERR value is not an integer"
    ));
    assert_eq!(cmd(&mut c, "MSET a 1 b 2"), Reply::ok());
    assert_eq!(
        cmd(&mut c, "MGET a b zz"),
        Reply::Array(vec![bulk("1"), bulk("2"), Reply::Nil])
    );
    assert_eq!(cmd(&mut c, "MSETNX a 9 c 3"), Reply::Integer(0));
    assert_eq!(cmd(&mut c, "EXISTS a a zz"), Reply::Integer(2));
    assert_eq!(cmd(&mut c, "TYPE a"), Reply::Simple("string".into()));
    assert_eq!(cmd(&mut c, "DEL a zz"), Reply::Integer(1));
    assert_eq!(cmd(&mut c, "GETDEL b"), bulk("2"));
    assert_eq!(cmd(&mut c, "DBSIZE"), Reply::Integer(2));
    assert_eq!(
        cmd(&mut c, "VRANGE - + LIMIT 1 REV"),
        Reply::Array(vec![bulk("n"), bulk("40")])
    );
    assert!(is_err(
        &cmd(&mut c, "GET"),
        "ERR wrong number of arguments for 'get'"
    ));
    assert!(is_err(&cmd(&mut c, "FROB x"), "ERR unknown command 'FROB'"));
}

#[test]
fn multi_exec_runs_as_one_transaction_and_watch_detects_changes() {
    let sh = shared(None);
    let (mut a, mut b) = (Session::new(&sh), Session::new(&sh));
    assert_eq!(cmd(&mut a, "MULTI"), Reply::ok());
    assert_eq!(cmd(&mut a, "SET x 1"), Reply::Simple("QUEUED".into()));
    assert_eq!(cmd(&mut a, "INCR x"), Reply::Simple("QUEUED".into()));
    assert_eq!(
        cmd(&mut b, "GET x"),
        Reply::Nil,
        "nothing visible before EXEC"
    );
    assert_eq!(
        cmd(&mut a, "EXEC"),
        Reply::Array(vec![Reply::ok(), Reply::Integer(2)])
    );
    // A queued error aborts the whole block.
    cmd(&mut a, "MULTI");
    assert!(is_err(&cmd(&mut a, "GET"), "ERR wrong number"));
    assert!(is_err(&cmd(&mut a, "EXEC"), "EXECABORT"));
    // WATCH: another connection's write in between makes EXEC return nil.
    assert_eq!(cmd(&mut a, "WATCH x"), Reply::ok());
    assert_eq!(cmd(&mut b, "SET x changed"), Reply::ok());
    cmd(&mut a, "MULTI");
    cmd(&mut a, "SET y 1");
    assert_eq!(cmd(&mut a, "EXEC"), Reply::NilArray);
    assert_eq!(cmd(&mut b, "GET y"), Reply::Nil);
    // Without a change, the watched block commits.
    assert_eq!(cmd(&mut a, "WATCH x"), Reply::ok());
    cmd(&mut a, "MULTI");
    cmd(&mut a, "SET y 2");
    assert_eq!(cmd(&mut a, "EXEC"), Reply::Array(vec![Reply::ok()]));
    assert_eq!(cmd(&mut b, "GET y"), bulk("2"));
    assert!(is_err(&cmd(&mut a, "EXEC"), "ERR EXEC without MULTI"));
    assert!(is_err(&cmd(&mut a, "DISCARD"), "ERR DISCARD without MULTI"));
}

#[test]
fn ping_and_echo_are_queued_in_multi_and_answered_by_exec() {
    let sh = shared(None);
    let mut c = Session::new(&sh);
    let queued = Reply::Simple("QUEUED".into());
    assert_eq!(cmd(&mut c, "MULTI"), Reply::ok());
    assert_eq!(cmd(&mut c, "PING"), queued);
    assert_eq!(cmd(&mut c, "SET k v"), queued);
    assert_eq!(cmd(&mut c, "ECHO hi"), queued);
    assert_eq!(cmd(&mut c, "PING there"), queued);
    assert_eq!(cmd(&mut c, "GET k"), queued);
    assert_eq!(
        cmd(&mut c, "EXEC"),
        Reply::Array(vec![
            Reply::Simple("PONG".into()),
            Reply::ok(),
            bulk("hi"),
            bulk("there"),
            bulk("v"),
        ])
    );
    // As in Redis: ECHO's arity is checked when queued (the block aborts); PING's extra
    // arguments are an error in EXEC's array, and the rest of the block still runs.
    cmd(&mut c, "MULTI");
    assert!(is_err(&cmd(&mut c, "ECHO"), "ERR wrong number"));
    assert!(is_err(&cmd(&mut c, "EXEC"), "EXECABORT"));
    cmd(&mut c, "MULTI");
    assert_eq!(cmd(&mut c, "ping a b"), queued);
    assert_eq!(cmd(&mut c, "SET k w"), queued);
    match cmd(&mut c, "EXEC") {
        Reply::Array(r) => {
            assert_eq!(r.len(), 2);
            assert!(is_err(&r[0], "ERR wrong number of arguments for 'ping'"));
            assert_eq!(r[1], Reply::ok());
        }
        other => panic!("EXEC replied {other:?}"),
    }
    assert_eq!(cmd(&mut c, "GET k"), bulk("w"));
}

/// As in redis-server 7.0 (checked by hand against it): MULTI queues the connection's own
/// commands, and EXEC runs them at their place in the block. A SELECT moves the commands
/// after it, and the connection after EXEC, to its database; SCAN sees the block's own
/// writes; commands that would wait inside the block are refused and fail it.
#[test]
fn connection_commands_are_queued_in_multi_and_run_in_place() {
    let sh = shared(None);
    let mut c = Session::new(&sh);
    let queued = Reply::Simple("QUEUED".into());
    assert_eq!(cmd(&mut c, "SET k zero"), Reply::ok());
    // Both of EXEC's paths: without a watch (retried on conflict), and after WATCH.
    for watch in [false, true] {
        if watch {
            assert_eq!(cmd(&mut c, "SELECT 0"), Reply::ok());
            assert_eq!(cmd(&mut c, "CLIENT SETNAME before"), Reply::ok());
            assert_eq!(cmd(&mut c, "WATCH w"), Reply::ok());
        }
        assert_eq!(cmd(&mut c, "MULTI"), Reply::ok());
        for line in [
            "SELECT 1",
            "SET k one",
            "UNWATCH",
            "CLIENT SETNAME blocky",
            "CLIENT GETNAME",
            "SCAN 0",
            "SELECT 2",
            "GET k",
            "SELECT 0",
            "GET k",
            "SELECT 1",
            "LASTSAVE",
            "SELECT 99",
            "CONFIG GET databases",
            "CLIENT INFO",
        ] {
            assert_eq!(cmd(&mut c, line), queued, "{line}");
        }
        let Reply::Array(r) = cmd(&mut c, "EXEC") else {
            panic!("EXEC did not run the block (watch: {watch})")
        };
        assert_eq!(r.len(), 15);
        assert_eq!(r[..4], [Reply::ok(), Reply::ok(), Reply::ok(), Reply::ok()]);
        assert_eq!(r[4], bulk("blocky"));
        assert_eq!(
            r[5],
            Reply::Array(vec![bulk("0"), Reply::Array(vec![bulk("k")])]),
            "SCAN in the block sees the block's write in database 1"
        );
        assert_eq!(r[7], Reply::Nil, "database 2 is empty");
        assert_eq!(r[9], bulk("zero"), "database 0 kept its value");
        assert!(matches!(r[11], Reply::Integer(_)), "{:?}", r[11]);
        assert!(
            is_err(&r[12], "ERR DB index is out of range"),
            "{:?}",
            r[12]
        );
        assert_eq!(r[13], Reply::Map(vec![(bulk("databases"), bulk("16"))]));
        // CLIENT INFO in the block shows the block's database, as Redis's does.
        assert!(
            matches!(&r[14], Reply::Verbatim(i) if i.contains(" db=1 ")),
            "{:?}",
            r[14]
        );
        // The connection is left in the last database the block selected.
        assert_eq!(cmd(&mut c, "GET k"), bulk("one"));
        assert_eq!(cmd(&mut c, "CLIENT GETNAME"), bulk("blocky"));
    }

    // A watched EXEC that fails runs nothing: the SELECT in it does not move the connection.
    let mut other = Session::new(&sh);
    assert_eq!(cmd(&mut c, "WATCH k"), Reply::ok());
    assert_eq!(cmd(&mut other, "SELECT 1"), Reply::ok());
    assert_eq!(cmd(&mut other, "SET k changed"), Reply::ok());
    assert_eq!(cmd(&mut c, "MULTI"), Reply::ok());
    assert_eq!(cmd(&mut c, "SELECT 0"), queued);
    assert_eq!(cmd(&mut c, "EXEC"), Reply::NilArray);
    assert_eq!(cmd(&mut c, "GET k"), bulk("changed"), "still in database 1");

    // Commands that would wait with the block's transaction open fail the block, as SAVE
    // does in Redis; a wrong arity fails it too.
    for refused in ["SAVE", "WAIT 1 0", "CLUSTER INFO"] {
        assert_eq!(cmd(&mut c, "MULTI"), Reply::ok());
        assert_eq!(cmd(&mut c, "SET k never"), queued);
        assert!(
            is_err(
                &cmd(&mut c, refused),
                "ERR Command not allowed inside a transaction"
            ),
            "{refused}"
        );
        assert!(is_err(&cmd(&mut c, "EXEC"), "EXECABORT"), "{refused}");
    }
    // Arity first, as in Redis: a refused command with the wrong arity says so.
    for wrong in ["SELECT", "SAVE now"] {
        assert_eq!(cmd(&mut c, "MULTI"), Reply::ok());
        assert!(is_err(&cmd(&mut c, wrong), "ERR wrong number"), "{wrong}");
        assert!(is_err(&cmd(&mut c, "EXEC"), "EXECABORT"), "{wrong}");
    }
    assert_eq!(cmd(&mut c, "GET k"), bulk("changed"));
}

#[test]
fn auth_select_and_hello() {
    let sh = shared(Some("s3cret"));
    let mut c = Session::new(&sh);
    assert!(is_err(&cmd(&mut c, "GET k"), "NOAUTH"));
    assert!(is_err(&cmd(&mut c, "AUTH wrong"), "WRONGPASS"));
    assert_eq!(cmd(&mut c, "AUTH s3cret"), Reply::ok());
    assert_eq!(cmd(&mut c, "SET k zero"), Reply::ok());
    assert_eq!(cmd(&mut c, "SELECT 1"), Reply::ok());
    assert_eq!(cmd(&mut c, "GET k"), Reply::Nil, "databases are separate");
    assert!(is_err(
        &cmd(&mut c, "SELECT 16"),
        "ERR DB index is out of range"
    ));
    match cmd(&mut c, "HELLO 3") {
        Reply::Map(m) => assert!(m.contains(&(bulk("proto"), Reply::Integer(3)))),
        other => panic!("{other:?}"),
    }
    assert!(is_err(&cmd(&mut c, "HELLO 4"), "NOPROTO"));
    let open = shared(None);
    let mut d = Session::new(&open);
    assert!(is_err(
        &cmd(&mut d, "AUTH x"),
        "ERR AUTH <password> called without"
    ));
}

#[test]
fn scan_returns_every_key_once_across_cursors() {
    let sh = shared(None);
    let mut c = Session::new(&sh);
    for i in 0..57 {
        cmd(&mut c, &format!("SET key:{i:03} v"));
    }
    cmd(&mut c, "SET other x");
    let mut seen = BTreeSet::new();
    let mut cursor = "0".to_string();
    let mut rounds = 0;
    loop {
        let r = cmd(&mut c, &format!("SCAN {cursor} MATCH key:* COUNT 5"));
        let Reply::Array(parts) = r else {
            panic!("{r:?}")
        };
        let (Reply::Bulk(next), Reply::Array(keys)) = (&parts[0], &parts[1]) else {
            panic!("{parts:?}")
        };
        for k in keys {
            let Reply::Bulk(k) = k else { panic!() };
            assert!(seen.insert(k.clone()), "duplicate {k:?}");
        }
        cursor = String::from_utf8(next.clone()).unwrap();
        rounds += 1;
        if cursor == "0" {
            break;
        }
        assert!(rounds < 100);
    }
    assert_eq!(seen.len(), 57);
    assert!(rounds >= 11, "COUNT was not honoured ({rounds} rounds)");
    assert!(is_err(&cmd(&mut c, "SCAN 999"), "ERR invalid cursor"));
    assert_eq!(cmd(&mut c, "KEYS oth*"), Reply::Array(vec![bulk("other")]));
}

/// Under `sync` a write leaves a durability ticket for the network loop to hold its reply
/// on; a read of what is already durable leaves none, and under `lazy` nothing is held. SAVE, BGSAVE and LASTSAVE work on
/// a durable server and are refused on a memory-only one.
#[test]
fn durability_tickets_and_save_commands() {
    use verso_engine::Durability;
    let args =
        |line: &str| -> Vec<Vec<u8>> { line.split(' ').map(|w| w.as_bytes().to_vec()).collect() };
    for (mode, held) in [(Durability::Sync, true), (Durability::Lazy, false)] {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(
            Options::default()
                .concurrency(Concurrency::PrecisionLocking)
                .durability(mode)
                .data_dir(dir.path()),
        )
        .unwrap();
        let shared = Shared::new(db, None).unwrap();
        let mut s = Session::new(&shared);
        let mut out = Vec::new();
        s.execute_into(&args("SET k v"), &mut out);
        let ticket = s.take_ticket();
        assert_eq!(ticket.is_some(), held, "{mode}");
        if let Some(verso_server::session::Hold::Durable(t)) = ticket {
            shared.db.wait_durable(t).unwrap();
            assert!(shared.db.is_durable(t));
        }
        s.execute_into(&args("GET k"), &mut out);
        assert!(
            s.take_ticket().is_none(),
            "a read of durable data holds nothing"
        );
        assert_eq!(cmd(&mut s, "LASTSAVE"), Reply::Integer(0));
        assert_eq!(cmd(&mut s, "SAVE"), Reply::ok());
        assert!(matches!(cmd(&mut s, "LASTSAVE"), Reply::Integer(t) if t > 0));
        let bg = cmd(&mut s, "BGSAVE");
        assert_eq!(bg, Reply::Simple("Background saving started".into()));
    }
    let mem = shared(None);
    let mut s = Session::new(&mem);
    assert!(is_err(
        &cmd(&mut s, "SAVE"),
        "ERR SAVE needs a durable server"
    ));
}

/// Under `sync` a write is visible before it is on disk, so a read that sees it must not
/// answer before it is (a crash would take back what the client was told): GET, MGET, SCAN
/// and an error reply built from a read (WRONGTYPE) on another connection hold their
/// replies on a ticket while the disk is slow, and hold nothing once it has caught up.
#[test]
fn under_sync_a_read_of_an_undurable_write_is_held() {
    use verso_engine::log::FaultyStorage;
    use verso_engine::Durability;
    use verso_server::session::Hold;
    let args =
        |line: &str| -> Vec<Vec<u8>> { line.split(' ').map(|w| w.as_bytes().to_vec()).collect() };
    let dir = tempfile::tempdir().unwrap();
    let faulty = FaultyStorage::default();
    let db = Db::open(
        Options::default()
            .concurrency(Concurrency::PrecisionLocking)
            .durability(Durability::Sync)
            .data_dir(dir.path())
            .storage(std::sync::Arc::new(faulty.clone())),
    )
    .unwrap();
    let shared = Shared::new(db, None).unwrap();
    let (mut writer, mut reader) = (Session::new(&shared), Session::new(&shared));
    let mut out = Vec::new();
    let held = faulty.plan.hold_syncs();
    writer.execute_into(&args("SET k v"), &mut out);
    writer.execute_into(&args("RPUSH l x"), &mut out);
    let Some(Hold::Durable(written)) = writer.take_ticket() else {
        panic!("a write under sync holds its reply");
    };
    assert!(!shared.db.is_durable(written));
    // GET l answers WRONGTYPE: an error reply tells what it read, too.
    for read in ["GET k", "MGET k other", "SCAN 0", "GET l"] {
        reader.execute_into(&args(read), &mut out);
        match reader.take_ticket() {
            Some(Hold::Durable(t)) => assert!(!shared.db.is_durable(t), "{read}"),
            other => panic!("{read} saw an undurable write and held nothing: {other:?}"),
        }
    }
    drop(held);
    shared.db.wait_durable(written).unwrap();
    reader.execute_into(&args("GET k"), &mut out);
    assert!(
        reader.take_ticket().is_none(),
        "nothing in flight: nothing held"
    );
}

/// `a` watches `key` (in its current database), `change` runs on `b`, and `a` runs a block
/// that sets `key`: the EXEC reply.
fn exec_after(sh: &Shared, setup: &[&str], key: &str, change: &[&str], gc: bool) -> Reply {
    let (mut a, mut b) = (Session::new(sh), Session::new(sh));
    for line in setup {
        cmd(&mut b, line);
    }
    assert_eq!(cmd(&mut a, &format!("WATCH {key}")), Reply::ok());
    for line in change {
        cmd(&mut b, line);
    }
    if gc {
        sh.db.collect_garbage();
    }
    assert_eq!(cmd(&mut a, "MULTI"), Reply::ok());
    assert_eq!(cmd(&mut a, &format!("SET {key} mine")), queued());
    cmd(&mut a, "EXEC")
}

fn queued() -> Reply {
    Reply::Simple("QUEUED".into())
}

#[test]
fn exec_fails_when_a_watched_key_was_written_in_any_way() {
    let sh = shared(None);
    let nil = Reply::NilArray;
    assert_eq!(
        exec_after(&sh, &["SET k1 v"], "k1", &["SET k1 w"], false),
        nil
    );
    // The same value written again is still a write, as in Redis.
    assert_eq!(
        exec_after(&sh, &["SET k2 v"], "k2", &["SET k2 v"], false),
        nil
    );
    assert_eq!(
        exec_after(&sh, &["SET k3 v"], "k3", &["DEL k3"], false),
        nil
    );
    assert_eq!(exec_after(&sh, &[], "k4", &["SET k4 v"], false), nil);
    // Absent at WATCH, created and deleted again: absent at EXEC, but written.
    assert_eq!(
        exec_after(&sh, &[], "k5", &["SET k5 v", "DEL k5"], false),
        nil
    );
    // The same once the deleted record left the index: its removal is remembered.
    let removed = sh.db.stats().records_removed;
    assert_eq!(
        exec_after(&sh, &[], "k6", &["SET k6 v", "DEL k6"], true),
        nil
    );
    assert_eq!(exec_after(&sh, &["SET k7 v"], "k7", &["DEL k7"], true), nil);
    assert!(
        sh.db.stats().records_removed >= removed + 2,
        "the deleted keys were not collected, so this tested nothing"
    );
    assert_eq!(
        cmd(&mut Session::new(&sh), "EXISTS k5 k6 k7"),
        Reply::Integer(0)
    );
    let exec_aborts = sh
        .stats
        .exec_aborts
        .load(std::sync::atomic::Ordering::Relaxed);
    assert_eq!(exec_aborts, 7);
}

#[test]
fn exec_succeeds_when_no_watched_key_was_written() {
    let sh = shared(None);
    let ok = Reply::Array(vec![Reply::ok()]);
    assert_eq!(exec_after(&sh, &[], "n1", &[], false), ok);
    // DEL or GETDEL of an absent key, SET NX of a present one: nothing is written, so the
    // watch is undisturbed (as in Redis, which does not touch a key it did not change).
    assert_eq!(
        exec_after(&sh, &[], "n2", &["DEL n2", "GETDEL n2"], false),
        ok
    );
    assert_eq!(
        exec_after(&sh, &["SET n3 v"], "n3", &["SET n3 w NX"], false),
        ok
    );
    assert_eq!(exec_after(&sh, &[], "n4", &["SET other v"], true), ok);
}

/// The change from running the block in WATCH's transaction: only watched keys matter now,
/// and what the block reads is read at EXEC.
#[test]
fn a_changed_unwatched_key_the_block_reads_does_not_fail_exec() {
    let sh = shared(None);
    let (mut a, mut b) = (Session::new(&sh), Session::new(&sh));
    cmd(&mut b, "SET unwatched old");
    assert_eq!(cmd(&mut a, "WATCH w"), Reply::ok());
    assert_eq!(cmd(&mut a, "GET unwatched"), bulk("old"));
    cmd(&mut b, "SET unwatched new");
    cmd(&mut a, "MULTI");
    cmd(&mut a, "GET unwatched");
    cmd(&mut a, "SET w done");
    assert_eq!(
        cmd(&mut a, "EXEC"),
        Reply::Array(vec![bulk("new"), Reply::ok()])
    );
}

#[test]
fn a_watched_key_written_by_the_same_client_fails_exec() {
    let sh = shared(None);
    let mut a = Session::new(&sh);
    assert_eq!(cmd(&mut a, "WATCH k"), Reply::ok());
    assert_eq!(cmd(&mut a, "SET k mine"), Reply::ok());
    cmd(&mut a, "MULTI");
    cmd(&mut a, "SET other 1");
    assert_eq!(cmd(&mut a, "EXEC"), Reply::NilArray);
    assert_eq!(cmd(&mut a, "GET other"), Reply::Nil);
}

#[test]
fn keys_stay_watched_in_their_database_and_keep_their_first_version() {
    let sh = shared(None);
    let (mut a, mut b) = (Session::new(&sh), Session::new(&sh));
    // Watched in db 0, then SELECT 1: a write to db 1's key of the same name is no change.
    cmd(&mut a, "WATCH k");
    cmd(&mut a, "SELECT 1");
    cmd(&mut b, "SELECT 1");
    cmd(&mut b, "SET k other-db");
    cmd(&mut a, "MULTI");
    cmd(&mut a, "SET x 1");
    assert_eq!(cmd(&mut a, "EXEC"), Reply::Array(vec![Reply::ok()]));
    // ...but a write to db 0's is, though `a` is in db 1 now.
    cmd(&mut a, "SELECT 0");
    cmd(&mut a, "WATCH k");
    cmd(&mut a, "SELECT 1");
    cmd(&mut b, "SELECT 0");
    cmd(&mut b, "SET k db0");
    cmd(&mut a, "MULTI");
    cmd(&mut a, "SET x 2");
    assert_eq!(cmd(&mut a, "EXEC"), Reply::NilArray);
    // Watching a key again keeps the version first seen: the write in between still counts.
    cmd(&mut a, "WATCH k");
    cmd(&mut b, "SELECT 1");
    cmd(&mut b, "SET k again");
    cmd(&mut a, "WATCH k");
    cmd(&mut a, "MULTI");
    assert_eq!(cmd(&mut a, "EXEC"), Reply::NilArray);
}

#[test]
fn unwatch_discard_and_exec_forget_the_watch() {
    let sh = shared(None);
    let (mut a, mut b) = (Session::new(&sh), Session::new(&sh));
    let ok = Reply::Array(vec![Reply::ok()]);
    let then_exec = |a: &mut Session<'_>, b: &mut Session<'_>| {
        cmd(b, "INCR k");
        cmd(a, "MULTI");
        cmd(a, "SET x 1");
        cmd(a, "EXEC")
    };
    cmd(&mut a, "WATCH k");
    assert_eq!(cmd(&mut a, "UNWATCH"), Reply::ok());
    assert_eq!(then_exec(&mut a, &mut b), ok);
    cmd(&mut a, "WATCH k");
    cmd(&mut a, "MULTI");
    assert_eq!(cmd(&mut a, "DISCARD"), Reply::ok());
    assert_eq!(then_exec(&mut a, &mut b), ok);
    // A failed EXEC (nil, or EXECABORT) forgets it too.
    cmd(&mut a, "WATCH k");
    assert_eq!(then_exec(&mut a, &mut b), Reply::NilArray);
    assert_eq!(then_exec(&mut a, &mut b), ok);
    cmd(&mut a, "WATCH k");
    cmd(&mut a, "MULTI");
    assert!(is_err(&cmd(&mut a, "NOSUCH"), "ERR unknown command"));
    assert!(is_err(&cmd(&mut a, "EXEC"), "EXECABORT"));
    assert_eq!(then_exec(&mut a, &mut b), ok);
    // WATCH inside MULTI is refused.
    cmd(&mut a, "MULTI");
    assert!(is_err(
        &cmd(&mut a, "WATCH k"),
        "ERR WATCH inside MULTI is not allowed"
    ));
    assert_eq!(cmd(&mut a, "EXEC"), Reply::Array(Vec::new()));
}

/// The denial of service WATCH used to be: a transaction held open per watching client.
#[test]
fn an_idle_watch_holds_no_transaction() {
    let sh = shared(None);
    let mut a = Session::new(&sh);
    assert_eq!(cmd(&mut a, "WATCH k"), Reply::ok());
    assert_eq!(sh.db.oldest_transaction_age(), None);
    // More watching clients than the engine has transaction slots (1024).
    let mut idle: Vec<Session<'_>> = (0..2000).map(|_| Session::new(&sh)).collect();
    for (i, s) in idle.iter_mut().enumerate() {
        assert_eq!(cmd(s, &format!("WATCH k key{i}")), Reply::ok());
    }
    assert_eq!(sh.db.oldest_transaction_age(), None);
    let txn = sh.db.begin().expect("a transaction slot is free");
    drop(txn);
    assert_eq!(cmd(&mut a, "SET k v"), Reply::ok());
    cmd(&mut idle[0], "MULTI");
    assert_eq!(cmd(&mut idle[0], "EXEC"), Reply::NilArray);
}

fn limited(limits: SessionLimits) -> Shared {
    shared(None).with_limits(limits)
}

#[test]
fn watching_too_many_keys_is_refused_and_watches_none_of_them() {
    let sh = limited(SessionLimits {
        watched_keys_max: 3,
        ..SessionLimits::default()
    });
    let (mut a, mut b) = (Session::new(&sh), Session::new(&sh));
    let too_many = "ERR too many watched keys (max 3); raise --max-watched-keys";
    assert_eq!(cmd(&mut a, "WATCH a b"), Reply::ok());
    assert_eq!(cmd(&mut a, "WATCH c d"), Reply::Error(too_many.into()));
    // c was not watched: its change does not fail EXEC.
    cmd(&mut b, "SET c 1");
    cmd(&mut a, "MULTI");
    assert_eq!(cmd(&mut a, "EXEC"), Reply::Array(Vec::new()));
    // Distinct keys count (per database): a repeated or already watched key is free.
    assert_eq!(cmd(&mut a, "WATCH a a b"), Reply::ok());
    assert_eq!(cmd(&mut a, "WATCH b c c"), Reply::ok());
    assert_eq!(cmd(&mut a, "WATCH a"), Reply::ok());
    cmd(&mut a, "SELECT 1");
    assert_eq!(cmd(&mut a, "WATCH a"), Reply::Error(too_many.into()));
    cmd(&mut a, "UNWATCH");
    assert_eq!(cmd(&mut a, "WATCH a b c"), Reply::ok());
}

#[test]
fn a_multi_queue_over_its_limits_fails_the_exec() {
    let sh = limited(SessionLimits {
        multi_commands_max: 3,
        multi_bytes_max: 300,
        ..SessionLimits::default()
    });
    let mut a = Session::new(&sh);
    cmd(&mut a, "MULTI");
    for i in 0..3 {
        assert_eq!(cmd(&mut a, &format!("SET k{i} v")), queued());
    }
    assert_eq!(
        cmd(&mut a, "SET k3 v"),
        Reply::Error(
            "ERR too many commands queued in MULTI (max 3); raise --max-multi-commands".into()
        )
    );
    assert_eq!(
        cmd(&mut a, "PING"),
        queued(),
        "queueing goes on, as in Redis"
    );
    assert!(is_err(&cmd(&mut a, "EXEC"), "EXECABORT"));
    assert_eq!(cmd(&mut a, "DBSIZE"), Reply::Integer(0), "nothing ran");
    // Bytes: each argument counts with its 24-byte header.
    cmd(&mut a, "MULTI");
    assert_eq!(cmd(&mut a, &format!("SET k {}", "v".repeat(100))), queued());
    assert_eq!(
        cmd(&mut a, &format!("SET k {}", "v".repeat(100))),
        Reply::Error("ERR MULTI queue too large (max 300 bytes); raise --max-multi-bytes".into())
    );
    assert!(is_err(&cmd(&mut a, "EXEC"), "EXECABORT"));
    // A new block starts from nothing.
    cmd(&mut a, "MULTI");
    assert_eq!(cmd(&mut a, &format!("SET k {}", "v".repeat(100))), queued());
    assert_eq!(cmd(&mut a, "EXEC"), Reply::Array(vec![Reply::ok()]));
}
