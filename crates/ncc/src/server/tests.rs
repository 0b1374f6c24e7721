use super::*;

const A: u64 = 1;
const B: u64 = 2;

/// A server's committed versions as numbers (keys and values `From<u64>`).
fn numbers(versions: Vec<(Key, Vec<Value>)>) -> Vec<(u64, Vec<u64>)> {
    let number = |v: &Value| v.to_u64().expect("a number");
    versions
        .into_iter()
        .map(|(k, vs)| {
            (
                k.to_u64().expect("a number"),
                vs.iter().map(number).collect(),
            )
        })
        .collect()
}

fn stored(s: &Server, key: u64) -> Option<(u64, u64)> {
    let v = s.store().get(&Key::from(key))?;
    Some((v.id, v.value.to_u64().expect("a number")))
}

fn ts(clk: u64, cid: ClientId) -> Ts {
    Ts { clk, cid }
}

fn txn(client: ClientId, seq: u64) -> TxnId {
    TxnId { client, seq }
}

fn exec(s: &mut Server, t: TxnId, at: Ts, ops: &[Op]) -> Vec<(u32, ExecResult)> {
    s.on_message(
        0,
        Msg::Execute {
            txn: t,
            ts: at,
            shot: 1,
            ops: ops.to_vec(),
            t_ro: None,
            coord: 0,
            cohorts: None,
            done: Finished::default(),
        },
    );
    replies(s)
}

fn replies(s: &mut Server) -> Vec<(u32, ExecResult)> {
    s.drain()
        .into_iter()
        .flat_map(|(_, m)| match m {
            Msg::ExecReply { results, .. } => results,
            _ => Vec::new(),
        })
        .collect()
}

fn done(r: &[(u32, ExecResult)]) -> OpReply {
    match r {
        [(_, ExecResult::Done(reply))] => reply.clone(),
        other => panic!("expected one answer, got {other:?}"),
    }
}

/// A write after a read at a higher timestamp is refined past it, keeping the writer's
/// client id (digest pitfall 2); a read raises `t_r` only upward (Fig 1b).
#[test]
fn refinement_orders_a_write_after_the_newest_read() {
    let mut s = Server::new(Mistakes::default());
    let r = done(&exec(&mut s, txn(1, 1), ts(10, 1), &[Op::read(A)]));
    assert_eq!((r.value, r.tr), (Some(Value::from(0)), ts(10, 1)));
    s.on_message(
        0,
        Msg::Decide {
            txn: txn(1, 1),
            commit: true,
        },
    );
    let w = done(&exec(&mut s, txn(2, 1), ts(5, 2), &[Op::write(A, 7)]));
    assert_eq!((w.tw, w.tr), (ts(11, 2), ts(11, 2)));
    s.check_invariants().unwrap();
}

/// Response timing control (D1): a read of an undecided write is answered only once
/// the write commits, and with its value; if the write aborts, the read runs again.
#[test]
fn a_read_of_an_undecided_write_waits_for_its_decision() {
    let mut s = Server::new(Mistakes::default());
    done(&exec(&mut s, txn(1, 1), ts(10, 1), &[Op::write(A, 7)]));
    assert!(exec(&mut s, txn(2, 1), ts(20, 2), &[Op::read(A)]).is_empty());
    s.on_message(
        0,
        Msg::Decide {
            txn: txn(1, 1),
            commit: true,
        },
    );
    assert_eq!(done(&replies(&mut s)).value, Some(Value::from(7)));
    // Aborted instead: the held read runs again and sees what is left.
    done(&exec(&mut s, txn(3, 1), ts(30, 3), &[Op::write(B, 8)]));
    assert!(exec(&mut s, txn(4, 1), ts(40, 4), &[Op::read(B)]).is_empty());
    s.on_message(
        0,
        Msg::Decide {
            txn: txn(3, 1),
            commit: false,
        },
    );
    assert_eq!(done(&replies(&mut s)).value, Some(Value::from(0)));
    s.check_invariants().unwrap();
}

/// Early abort (Lemma 3): a request that would wait behind an undecided one with a
/// higher timestamp is refused, not executed; one with a higher timestamp waits.
#[test]
fn a_lower_timestamp_behind_an_undecided_higher_one_aborts_early() {
    let mut s = Server::new(Mistakes::default());
    done(&exec(&mut s, txn(1, 1), ts(20, 1), &[Op::write(A, 7)]));
    let r = exec(
        &mut s,
        txn(2, 1),
        ts(10, 2),
        &[Op::read(A), Op::write(B, 3)],
    );
    assert_eq!(
        r,
        vec![(0, ExecResult::EarlyAbort), (1, ExecResult::EarlyAbort)]
    );
    // Nothing of it ran: B has no version of it.
    assert!(s
        .committed_versions()
        .iter()
        .all(|(k, _)| *k != Key::from(B)));
    assert!(exec(&mut s, txn(3, 1), ts(30, 3), &[Op::write(A, 9)]).is_empty());
}

/// Smart retry moves an unread write and raises a read's `t_r`, all or nothing; it
/// never moves a version that a read at a lower timestamp saw (`Version::read`), which
/// the paper's test alone (`t_w != t_r`) would.
#[test]
fn smart_retry_moves_only_unread_versions() {
    smart_retry_case(Mistakes::default());
}

fn smart_retry_case(mistakes: Mistakes) {
    let mut s = Server::new(mistakes);
    let t = txn(1, 1);
    exec(&mut s, t, ts(10, 1), &[Op::write(A, 7), Op::read(B)]);
    s.on_message(
        0,
        Msg::SmartRetry {
            txn: t,
            to: ts(15, 9),
        },
    );
    assert!(matches!(
        s.drain()[..],
        [(1, Msg::SmartRetryReply { ok: true, .. })]
    ));
    // A write refined past an earlier read (`t_w` 30 for timestamp 20)...
    done(&exec(&mut s, txn(4, 1), ts(29, 4), &[Op::read(B)]));
    s.on_message(
        0,
        Msg::Decide {
            txn: txn(4, 1),
            commit: true,
        },
    );
    s.on_message(
        0,
        Msg::Decide {
            txn: t,
            commit: true,
        },
    );
    s.drain();
    let u = txn(2, 1);
    assert_eq!(
        done(&exec(&mut s, u, ts(20, 2), &[Op::write(B, 8)])).tw,
        ts(30, 2)
    );
    // ...then read at 25, above the writer's timestamp (so not aborted early) and below
    // `t_w` (so `t_r` stays 30):
    assert!(exec(&mut s, txn(3, 1), ts(25, 3), &[Op::read(B)]).is_empty());
    // ...but the write was read: it may not move (`t_w == t_r` here: the paper's test
    // alone would move it).
    s.on_message(
        0,
        Msg::SmartRetry {
            txn: u,
            to: ts(35, 9),
        },
    );
    let moved = matches!(s.drain()[..], [(2, Msg::SmartRetryReply { ok: true, .. })]);
    assert!(!moved, "moved a version that was read");
    s.check_invariants().unwrap();
}

/// Read-modify-write (§5.1): the write waits for another's read of the version it
/// overwrites (D2), and aborts if another write came after its read.
#[test]
fn a_read_modify_write_waits_for_readers_and_aborts_after_another_write() {
    let mut s = Server::new(Mistakes::default());
    let (t, u) = (txn(1, 1), txn(2, 1));
    done(&exec(&mut s, t, ts(10, 1), &[Op::read(A)]));
    done(&exec(&mut s, u, ts(8, 2), &[Op::read(A)]));
    // t's second shot writes A back: held behind u's undecided read (a lower
    // timestamp: no early abort).
    let shot_2 = |ops: Vec<Op>, txn: TxnId, clk: u64, cid: ClientId| Msg::Execute {
        txn,
        ts: ts(clk, cid),
        shot: 2,
        ops,
        t_ro: None,
        coord: 0,
        cohorts: None,
        done: Finished::default(),
    };
    s.on_message(0, shot_2(vec![Op::write(A, 5)], t, 10, 1));
    assert!(replies(&mut s).is_empty());
    s.on_message(
        0,
        Msg::Decide {
            txn: u,
            commit: true,
        },
    );
    assert_eq!(done(&replies(&mut s)).tw, ts(11, 1));
    s.on_message(
        0,
        Msg::Decide {
            txn: t,
            commit: true,
        },
    );
    // Another write between the read and the write back: the write back aborts.
    let (x, y) = (txn(3, 1), txn(4, 1));
    done(&exec(&mut s, x, ts(30, 3), &[Op::read(B)]));
    assert!(exec(&mut s, y, ts(40, 4), &[Op::write(B, 8)]).is_empty());
    s.on_message(0, shot_2(vec![Op::write(B, 9)], x, 30, 3));
    let r = replies(&mut s);
    // x's write back (its second request here) is refused, and x gone, y's write leaves.
    assert!(r.contains(&(1, ExecResult::EarlyAbort)), "{r:?}");
    assert!(
        r.iter()
            .any(|(i, e)| *i == 0 && matches!(e, ExecResult::Done(_))),
        "{r:?}"
    );
    s.check_invariants().unwrap();
}

/// An abort that overtakes the requests it aborts: they arrive to find it decided, are
/// refused (a client paused while its backup coordinator aborted it learns so), and
/// leave nothing undecided behind.
#[test]
fn requests_after_their_abort_are_refused() {
    let mut s = Server::new(Mistakes::default());
    s.on_message(
        0,
        Msg::Decide {
            txn: txn(1, 1),
            commit: false,
        },
    );
    assert_eq!(
        exec(&mut s, txn(1, 1), ts(10, 1), &[Op::write(A, 7)]),
        vec![(0, ExecResult::EarlyAbort)]
    );
    assert!(s.undecided().is_empty());
    assert_eq!(
        done(&exec(&mut s, txn(2, 1), ts(5, 2), &[Op::read(A)])).value,
        Some(Value::from(0))
    );
}

/// A read-write returns the value it replaced; if that value's writer aborts, its
/// held answer reads the version below instead, and a commit then installs it on top.
#[test]
fn a_read_write_rereads_when_the_version_it_read_aborts() {
    let mut s = Server::new(Mistakes::default());
    done(&exec(&mut s, txn(1, 1), ts(10, 1), &[Op::write(A, 7)]));
    // Above the undecided write: its answer waits for it (D3).
    assert!(exec(&mut s, txn(2, 1), ts(20, 2), &[Op::read_write(A, 8)]).is_empty());
    s.on_message(
        0,
        Msg::Decide {
            txn: txn(1, 1),
            commit: false,
        },
    );
    let r = done(&replies(&mut s));
    assert_eq!(
        (r.value, r.tw),
        (Some(Value::from(0)), ts(20, 2)),
        "reads the initial value now"
    );
    s.on_message(
        0,
        Msg::Decide {
            txn: txn(2, 1),
            commit: true,
        },
    );
    assert_eq!(numbers(s.committed_versions()), vec![(A, vec![0, 8])]);
    s.check_invariants().expect("invariants");
}

/// A one-shot execute from a client whose one incarnation numbers from 1.
fn execute_msg(txn: TxnId, at: Ts, ops: Vec<Op>, done_below: u64) -> Msg {
    let done = Finished {
        from: 1,
        below: done_below,
    };
    execute_from(txn, at, ops, done)
}

fn execute_from(txn: TxnId, at: Ts, ops: Vec<Op>, done: Finished) -> Msg {
    Msg::Execute {
        txn,
        ts: at,
        shot: 1,
        ops,
        t_ro: None,
        coord: 0,
        cohorts: Some(vec![0]),
        done,
    }
}

/// A process that takes over the id of one that died inside a transaction speaks
/// only for its own numbers: the dead one's transaction stays a question this server
/// answers for its backup coordinator (before, the new process's first request said
/// "everything below is finished", and the question was ignored for good).
#[test]
fn a_new_incarnation_leaves_the_dead_ones_transaction_to_its_backup() {
    let mut s = Server::new(Mistakes::default()).with_recovery(0, 1_000);
    let (dead, fresh) = (txn(1, 5), txn(1, 9_000));
    let first = Finished { from: 1, below: 5 };
    s.on_message(
        0,
        execute_from(dead, ts(10, 1), vec![Op::write(A, 5)], first),
    );
    done(&replies(&mut s));
    let second = Finished {
        from: 9_000,
        below: 9_000,
    };
    s.on_message(0, execute_from(fresh, ts(20, 1), vec![Op::read(B)], second));
    done(&replies(&mut s));
    assert_eq!(s.undecided(), vec![dead, fresh]);
    // The new incarnation finishes its first transaction and says so.
    s.on_message(
        0,
        Msg::Decide {
            txn: fresh,
            commit: true,
        },
    );
    s.drain();
    let third = Finished {
        from: 9_000,
        below: 9_001,
    };
    s.on_message(
        0,
        execute_from(txn(1, 9_001), ts(30, 1), vec![Op::read(B)], third),
    );
    done(&replies(&mut s));
    assert_eq!(s.undecided(), vec![dead, txn(1, 9_001)]);
    // Another cohort's backup coordinator asks about the dead one's transaction, and
    // about one of its numbers this server never saw: both are answered.
    for asked in [dead, txn(1, 6)] {
        s.on_message(
            0,
            Msg::GetRecord {
                txn: asked,
                from: 1,
            },
        );
        let answers = s.drain_peers();
        assert!(
            matches!(answers.as_slice(), [(1, Msg::Record { txn, .. })] if *txn == asked),
            "{asked:?}: {answers:?}"
        );
    }
    s.on_message(
        0,
        Msg::GetRecord {
            txn: fresh,
            from: 1,
        },
    );
    assert!(
        s.drain_peers().is_empty(),
        "a finished one is a late duplicate"
    );
    s.check_invariants().unwrap();
}

/// Once the client says a transaction is finished, its record goes and a late
/// duplicate of its request is ignored; before, the same duplicate is answered again
/// from the record (and never runs twice either way).
#[test]
fn a_finished_transaction_is_forgotten_and_its_late_duplicate_ignored() {
    let mut s = Server::new(Mistakes::default());
    let (t1, t2) = (txn(1, 1), txn(1, 2));
    let first = execute_msg(t1, ts(10, 1), vec![Op::write(A, 5)], 1);
    s.on_message(0, first.clone());
    done(&replies(&mut s));
    s.on_message(
        0,
        Msg::Decide {
            txn: t1,
            commit: true,
        },
    );
    s.drain();
    s.on_message(0, first.clone());
    assert_eq!(
        replies(&mut s).len(),
        1,
        "a duplicate gets its answer again"
    );
    assert_eq!(s.footprint().records, 1);
    s.on_message(0, execute_msg(t2, ts(20, 1), vec![Op::read(B)], 2));
    done(&replies(&mut s));
    assert_eq!(s.footprint().records, 1, "t1 is forgotten, t2 is kept");
    for late in [
        first,
        Msg::Decide {
            txn: t1,
            commit: false,
        },
    ] {
        s.on_message(0, late);
        assert!(s.drain().is_empty());
    }
    assert_eq!(s.footprint().records, 1);
    assert_eq!(s.undecided(), vec![t2]);
    assert_eq!(
        numbers(s.committed_versions()),
        vec![(A, vec![0, 5]), (B, vec![0])]
    );
    s.check_invariants().unwrap();
}

/// Superseded committed versions are pruned as transactions decide; with the history
/// kept their values stay for the checker, without it they are gone.
#[test]
fn superseded_versions_are_pruned_and_kept_only_as_history() {
    for keep in [true, false] {
        let mut s = Server::new(Mistakes::default());
        if !keep {
            s = s.without_history();
        }
        for seq in 1..=10 {
            let t = txn(1, seq);
            s.on_message(
                0,
                execute_msg(t, ts(seq * 10, 1), vec![Op::write(A, seq)], seq),
            );
            done(&replies(&mut s));
            s.on_message(
                0,
                Msg::Decide {
                    txn: t,
                    commit: true,
                },
            );
            s.drain();
            s.check_invariants().unwrap();
        }
        // Nothing in flight: the key lives only in the store, with its newest version.
        assert_eq!(s.footprint().keys, 0, "{:?}", s.footprint());
        assert_eq!(stored(&s, A), Some((10, 10)));
        if keep {
            let values = &numbers(s.committed_versions())[0].1;
            assert_eq!(values, &(0..=10).collect::<Vec<u64>>());
        } else {
            assert_eq!(s.committed_versions(), vec![]);
        }
    }
}

/// A version an undecided read refers to stays (smart retry may move its `t_r`), and so
/// does the one below an undecided write (an abort makes it the newest again).
#[test]
fn versions_in_use_are_not_pruned() {
    let mut s = Server::new(Mistakes::default()).without_history();
    let reader = txn(2, 1);
    let write = |s: &mut Server, seq: u64, v: u64| {
        let t = txn(1, seq);
        s.on_message(
            0,
            execute_msg(t, ts(seq * 10, 1), vec![Op::write(A, v)], seq),
        );
        t
    };
    let t1 = write(&mut s, 1, 1);
    s.on_message(
        0,
        Msg::Decide {
            txn: t1,
            commit: true,
        },
    );
    s.drain();
    s.on_message(0, execute_msg(reader, ts(15, 2), vec![Op::read(A)], 1));
    assert_eq!(done(&replies(&mut s)).value, Some(Value::from(1)));
    for seq in 2..6 {
        let t = write(&mut s, seq, seq);
        s.on_message(
            0,
            Msg::Decide {
                txn: t,
                commit: true,
            },
        );
        s.drain();
    }
    // The reader's version (value 1) is still there for a smart retry to move.
    s.on_message(
        0,
        Msg::SmartRetry {
            txn: reader,
            to: ts(18, 2),
        },
    );
    assert!(s
        .drain()
        .iter()
        .any(|(_, m)| matches!(m, Msg::SmartRetryReply { ok: true, .. })));
    s.on_message(
        0,
        Msg::Decide {
            txn: reader,
            commit: true,
        },
    );
    let t6 = write(&mut s, 6, 6);
    s.on_message(
        0,
        Msg::Decide {
            txn: t6,
            commit: false,
        },
    );
    s.drain();
    s.check_invariants().unwrap();
    assert_eq!(s.footprint().keys, 0, "{:?}", s.footprint());
    assert_eq!(
        stored(&s, A).map(|(_, v)| v),
        Some(5),
        "the abort left the version below it newest"
    );
}

/// With message limits, the answers a read-only transaction gets at once leave in several
/// messages, none over the budget (unless a single answer is), all of them in; and a
/// request over the limit is not admitted.
#[test]
fn answers_are_split_to_stay_within_the_message_limits() {
    let limits = MessageLimits {
        request_bytes_max: 1_000,
        reply_bytes_max: 2_000,
    };
    let mut s = Server::new(Mistakes::default()).with_message_limits(limits);
    let value = |i: u64| Value::from(vec![i as u8; 600]);
    for i in 0..8u64 {
        let t = txn(1, i + 1);
        done(&exec(&mut s, t, ts(10 + i, 1), &[Op::write(i, value(i))]));
        s.on_message(
            0,
            Msg::Decide {
                txn: t,
                commit: true,
            },
        );
        s.drain();
    }
    let reads: Vec<Op> = (0..8u64).map(Op::read).collect();
    let ro = Msg::Execute {
        txn: txn(2, 1),
        ts: ts(100, 2),
        shot: 1,
        ops: reads,
        t_ro: Some(u64::MAX),
        coord: 0,
        cohorts: None,
        done: Finished::default(),
    };
    assert!(s.admits(&ro));
    s.on_message(0, ro);
    let out = s.drain();
    assert!(
        out.len() >= 3,
        "8 answers of 600 bytes within 2,000: {}",
        out.len()
    );
    let mut seen = Vec::new();
    for (_, m) in out {
        let Msg::ExecReply { results, .. } = m else {
            panic!("{m:?}");
        };
        assert!(reply_bytes(&results) <= 2_000 || results.len() == 1);
        seen.extend(results);
    }
    seen.sort_by_key(|(i, _)| *i);
    assert_eq!(seen.len(), 8);
    for (i, r) in seen {
        let ExecResult::Done(reply) = r else {
            panic!("{r:?}");
        };
        assert_eq!(reply.value, Some(value(u64::from(i))));
    }
    let too_big = Msg::Execute {
        txn: txn(3, 1),
        ts: ts(200, 3),
        shot: 1,
        ops: vec![Op::write(1, vec![0u8; 993])],
        t_ro: None,
        coord: 0,
        cohorts: None,
        done: Finished::default(),
    };
    assert!(!s.admits(&too_big), "8 bytes of key and 993 of value");
}

/// What a server that sheds load refuses (`starts_work`): an execution that would begin a
/// transaction; never a resend or a later message of one it holds, a decision, or a late
/// duplicate of one its client has finished.
#[test]
fn only_an_execution_of_an_unknown_transaction_starts_work() {
    let mut s = Server::new(Mistakes::default());
    let execute = |t: TxnId, done: Finished| Msg::Execute {
        txn: t,
        ts: ts(10, 1),
        shot: 1,
        ops: vec![Op::Write(Key::from(A), Value::from(5))],
        t_ro: None,
        coord: 0,
        cohorts: None,
        done,
    };
    let first = execute(txn(1, 1), Finished::default());
    assert!(s.starts_work(&first));
    s.on_message(0, first.clone());
    replies(&mut s);
    assert!(!s.starts_work(&first), "a resend of a transaction it holds");
    let decide = Msg::Decide {
        txn: txn(1, 1),
        commit: true,
    };
    assert!(!s.starts_work(&decide));
    s.on_message(0, decide);
    // The client's next transaction says it has finished the first: the first's record
    // goes, and a late duplicate of it begins nothing.
    let next = execute(txn(1, 2), Finished { from: 1, below: 2 });
    assert!(s.starts_work(&next));
    s.on_message(0, next);
    replies(&mut s);
    assert!(
        !s.starts_work(&first),
        "a late duplicate of a finished transaction"
    );
    assert!(s.starts_work(&execute(txn(2, 1), Finished::default())));
}
