//! The read-only freshness check (§5.5) is part of correctness, not an optimization (digest
//! pitfall 8): a scripted run where a read-only transaction, without it, sees the second of
//! two real-time-ordered writes and misses the first, which the checker rejects.

use verso_ncc::check::{strictly_serializable, TxnRecord};
use verso_ncc::{ExecResult, Key, Mistakes, Msg, Op, Server, Ts, TxnId, Value};

const A: u64 = 0;
const B: u64 = 1;

fn reply(s: &mut Server) -> ExecResult {
    let answers: Vec<ExecResult> = s
        .drain()
        .into_iter()
        .flat_map(|(_, m)| match m {
            Msg::ExecReply { results, .. } => results.into_iter().map(|(_, r)| r).collect(),
            _ => Vec::new(), // acknowledgements of decisions
        })
        .collect();
    match &answers[..] {
        [result] => result.clone(),
        _ => panic!("expected one answer, got {answers:?}"),
    }
}

fn execute(s: &mut Server, txn: TxnId, ts: Ts, op: Op, t_ro: Option<u64>) -> ExecResult {
    s.on_message(
        0,
        Msg::Execute {
            txn,
            ts,
            shot: 1,
            ops: vec![op],
            t_ro,
            coord: 0,
            cohorts: None,
            done: verso_ncc::Finished::default(),
        },
    );
    reply(s)
}

/// What the read-only transaction's read of B answers, the history, and the keys' versions.
type Run = (ExecResult, Vec<TxnRecord>, Vec<(Key, Vec<Value>)>);

fn run(mistakes: Mistakes) -> Run {
    // A on server 0, B on server 1.
    let (mut s0, mut s1) = (Server::new(mistakes), Server::new(mistakes));
    let ro = TxnId { client: 9, seq: 1 };
    let ro_ts = Ts { clk: 100, cid: 9 };
    // The read-only transaction (its client knows of no version yet) reads A first...
    let a = execute(&mut s0, ro, ro_ts, Op::read(A), Some(0));
    assert!(matches!(a, ExecResult::Done(r) if r.value == Some(Value::from(0))));
    // ...then T1 writes A and commits; only after that, T2 writes B and commits (its client's
    // clock is behind: timestamp 60).
    let t1 = TxnId { client: 1, seq: 1 };
    execute(&mut s0, t1, Ts { clk: 50, cid: 1 }, Op::write(A, 5), None);
    s0.on_message(
        0,
        Msg::Decide {
            txn: t1,
            commit: true,
        },
    );
    let t2 = TxnId { client: 2, seq: 1 };
    execute(&mut s1, t2, Ts { clk: 60, cid: 2 }, Op::write(B, 7), None);
    s1.on_message(
        0,
        Msg::Decide {
            txn: t2,
            commit: true,
        },
    );
    // The read of B arrives last.
    let b = execute(&mut s1, ro, ro_ts, Op::read(B), Some(0));
    let record = |client, invoked, completed, reads: Vec<(u64, u64)>, writes: Vec<(u64, u64)>| {
        let kv = |(k, v): (u64, u64)| (Key::from(k), Value::from(v));
        TxnRecord {
            client,
            invoked,
            completed,
            reads: reads.into_iter().map(kv).collect(),
            writes: writes.into_iter().map(kv).collect(),
            commit_ts: Ts::default(),
        }
    };
    let mut history = vec![
        record(1, 10, 20, vec![], vec![(A, 5)]),
        record(2, 30, 40, vec![], vec![(B, 7)]),
    ];
    if let ExecResult::Done(r) = &b {
        // Both pairs overlap at B's t_w: the client would commit.
        let tw_max = r.tw.max(Ts::default());
        assert!(tw_max <= ro_ts.min(r.tr));
        history.push(record(
            9,
            0,
            50,
            vec![
                (A, 0),
                (
                    B,
                    r.value.as_ref().and_then(Value::to_u64).expect("a number"),
                ),
            ],
            vec![],
        ));
    }
    let mut versions = s0.committed_versions();
    versions.extend(s1.committed_versions());
    (b, history, versions)
}

#[test]
fn a_read_only_transaction_never_sees_a_later_write_without_an_earlier_one() {
    let (b, history, versions) = run(Mistakes::default());
    assert_eq!(
        b,
        ExecResult::RoAbort,
        "B's newest version is newer than the client knew"
    );
    assert_eq!(strictly_serializable(&history, &versions), Ok(()));

    let (b, history, versions) = run(Mistakes {
        no_read_only_check: true,
        ..Mistakes::default()
    });
    assert!(matches!(b, ExecResult::Done(r) if r.value == Some(Value::from(7))));
    let e = strictly_serializable(&history, &versions).unwrap_err();
    assert!(e.contains("rt"), "{e}");
}
