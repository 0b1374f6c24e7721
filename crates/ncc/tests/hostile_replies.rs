//! Replies that do not answer what the client asked (a server confused about who sent a
//! request, such as a client id taken over by a new process) arrive from the network: the
//! client drops them, never panics, and still finishes on the right answer.

use verso_ncc::baseline::{BMsg, BaselineClient, Flavor};
use verso_ncc::{Client, ClientEvent, ExecResult, Key, Msg, Op, OpReply, Ts, TxnClient, Value};

fn ts(clk: u64) -> Ts {
    Ts { clk, cid: 9 }
}

#[test]
fn ncc_drops_a_read_answered_without_a_value() {
    let mut c = Client::new(0, 1);
    c.read_only_protocol = false;
    c.begin(1_000, vec![Op::read(5)], true);
    let sent = c.drain();
    let Some((0, Msg::Execute { txn, .. })) = sent.first().cloned() else {
        panic!("an execute to server 0: {sent:?}");
    };
    let reply = |value| Msg::ExecReply {
        txn,
        results: vec![(
            0,
            ExecResult::Done(OpReply {
                value,
                tw: ts(10),
                tr: ts(2_000),
            }),
        )],
        ts_server: 1_000,
        latest: 1_000,
    };
    c.on_message(1_001, 0, reply(None));
    assert!(c.busy(), "a valueless read answers nothing");
    assert!(c.events().is_empty());
    c.on_message(1_002, 0, reply(Some(Value::from(77))));
    let events = c.events();
    let Some(ClientEvent::Committed(o)) = events.last() else {
        panic!("committed after the real answer: {events:?}");
    };
    assert_eq!(o.reads, vec![(Key::from(5), Value::from(77))]);
}

#[test]
fn a_baseline_drops_answers_to_reads_it_did_not_send() {
    for flavor in [Flavor::Docc, Flavor::D2plNoWait, Flavor::D2plWoundWait] {
        let mut c = BaselineClient::new(0, 1, flavor);
        c.begin(1_000, vec![Op::read(5), Op::read(6)], false);
        let sent = c.drain();
        let Some((0, BMsg::Execute { txn, shot, .. })) = sent.first().cloned() else {
            panic!("{flavor:?}: an execute to server 0: {sent:?}");
        };
        let reply = |reads: Vec<(u64, u64, u64)>| BMsg::ExecReply {
            txn,
            shot,
            ok: true,
            reads: reads
                .into_iter()
                .map(|(k, v, version)| (Key::from(k), Value::from(v), version))
                .collect(),
        };
        // Too few answers, the wrong keys, too many: each dropped.
        for wrong in [
            vec![(5, 1, 1)],
            vec![(6, 1, 1), (5, 2, 1)],
            vec![(5, 1, 1), (6, 2, 1), (7, 3, 1)],
        ] {
            c.on_message(1_001, 0, reply(wrong));
            assert!(c.events().is_empty(), "{flavor:?}");
        }
        c.on_message(1_002, 0, reply(vec![(5, 1, 1), (6, 2, 1)]));
        assert_eq!(
            c.events(),
            vec![ClientEvent::ShotDone {
                reads: vec![
                    (Key::from(5), Value::from(1)),
                    (Key::from(6), Value::from(2))
                ]
            }],
            "{flavor:?}"
        );
    }
}
