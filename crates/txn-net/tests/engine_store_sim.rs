//! NCC's servers with their decided versions in Verso's engine (issue 18 item 3) under the
//! deterministic simulator: every history strictly serializable, with clients crashing and
//! pausing; and, driven by hand, the engine holds what was committed at `t_w`, and a write
//! after the key went quiet is refined above the reads the engine remembers (a store that
//! forgets them is caught).

use verso_ncc::sim::{run_seeds, SimOptions, SimStats};
use verso_ncc::workload::Workload;
use verso_ncc::{ExecResult, Key, Mistakes, Msg, Op, Server, Store, Stored, Ts, TxnId, Value};
use verso_txn_net::engine_store::{self, EngineStore};

fn seeds(
    range: std::ops::Range<u64>,
    tweak: impl Fn(&mut SimOptions),
) -> (SimStats, Vec<(u64, String)>) {
    run_seeds(range, |o| {
        o.store = Some(engine_store::sim_store);
        tweak(o)
    })
}

fn assert_passed(failed: &[(u64, String)]) {
    assert!(
        failed.is_empty(),
        "{} seeds failed, first: {:?}",
        failed.len(),
        failed.first()
    );
}

#[test]
fn a_thousand_seeds_on_the_engine_are_strictly_serializable() {
    let (total, failed) = seeds(0..1_000, |_| {});
    assert_passed(&failed);
    let c = total.clients;
    assert_eq!(total.committed, 1_000 * 4 * 30);
    assert!(
        c.smart_retries_ok > 0 && c.early_aborts > 0 && c.ro_aborts > 0,
        "{c:?}"
    );
    // Keys with nothing in flight live only in the engine.
    assert!(total.held.keys < 1_000 * 3 * 8 / 4, "{:?}", total.held);
}

/// Text keys of several lengths, some prefixes of others, as the engine's index orders
/// them, placed on servers by hash.
#[test]
fn text_keys_on_the_engine() {
    let (total, failed) = seeds(0..300, |o| o.text_keys = true);
    assert_passed(&failed);
    assert_eq!(total.committed, 300 * 4 * 30);
}

#[test]
fn crashed_and_paused_clients_on_the_engine() {
    let (total, failed) = seeds(0..300, |o| {
        o.crash_percent = 25;
        o.pause_percent = 25;
        o.restart_crashed = true;
        o.keys = 4;
    });
    assert_passed(&failed);
    assert!(total.crashed > 0 && total.paused > 0, "{total:?}");
}

#[test]
fn f1_and_tpcc_on_the_engine() {
    for workload in [Workload::F1, Workload::Tpcc] {
        let (_, failed) = seeds(0..40, |o| {
            o.workload = workload;
            o.txns_per_client = 20;
        });
        assert_passed(&failed);
    }
}

/// A store that drops every `t_r` it is told of: the mistake the test below catches.
struct ForgetsReads(EngineStore);

impl Store for ForgetsReads {
    fn load(&mut self, key: &Key) -> Stored {
        self.0.load(key)
    }
    fn install(&mut self, key: &Key, version: Stored) {
        let tr = version.tw;
        self.0.install(key, Stored { tr, ..version })
    }
    fn raise_read(&mut self, _: &Key, _: Ts) {}
}

fn ts(clk: u64, cid: u32) -> Ts {
    Ts { clk, cid }
}

/// Runs one transaction to commit on `s` and returns its replies.
fn commit<S: Store>(s: &mut Server<S>, seq: u64, at: Ts, ops: Vec<Op>) -> Vec<(u32, ExecResult)> {
    let txn = TxnId {
        client: at.cid,
        seq,
    };
    let execute = Msg::Execute {
        txn,
        ts: at,
        shot: 1,
        ops,
        t_ro: None,
        coord: 0,
        cohorts: Some(vec![0]),
        done: Default::default(),
    };
    s.on_message(0, execute);
    s.on_message(0, Msg::Decide { txn, commit: true });
    s.drain()
        .into_iter()
        .flat_map(|(_, m)| match m {
            Msg::ExecReply { results, .. } => results,
            _ => Vec::new(),
        })
        .collect()
}

/// Writes key 7 at 100, reads it at 500 (the key then goes quiet: its state leaves memory),
/// and writes it pre-stamped 200: returns the second write's refined `t_w`.
fn refined_after_a_quiet_read<S: Store>(s: &mut Server<S>) -> Ts {
    commit(s, 1, ts(100, 1), vec![Op::write(7, 42)]);
    commit(s, 1, ts(500, 2), vec![Op::read(7)]);
    assert_eq!(s.footprint().keys, 0, "the key went quiet");
    let replies = commit(s, 2, ts(200, 1), vec![Op::write(7, 43)]);
    s.check_invariants().unwrap();
    match replies.as_slice() {
        [(0, ExecResult::Done(r))] => r.tw,
        other => panic!("the write was not answered: {other:?}"),
    }
}

/// Committed writes are engine versions at their `t_w` (in the engine's encoding), a read's
/// `t_r` reaches the engine's read stamp once the key goes quiet, and a later write is
/// refined above it from what the engine says.
#[test]
fn committed_versions_are_engine_versions() {
    let mut s = Server::with_store(Mistakes::default(), EngineStore::new(0).unwrap());
    let tw = refined_after_a_quiet_read(&mut s);
    assert_eq!(
        tw,
        ts(501, 1),
        "refined above the read the engine remembered"
    );
    let got = s
        .store()
        .db()
        .newest_stamped(engine_store::TABLE, &7u64.to_be_bytes())
        .unwrap();
    let (at, value) = got.version.expect("installed");
    assert_eq!(engine_store::decode(at, 0), ts(501, 1));
    let value = value.expect("a value, not a deletion");
    assert_eq!(
        value[..8],
        2u64.to_le_bytes(),
        "the server's version number"
    );
    assert_eq!(value[8..], *Value::from(43).as_bytes(), "the value's bytes");
    // The engine's own transactions are ordered by the same stamps: an engine writer at a
    // timestamp below NCC's newest version cannot slip under it (RDTSC timestamps are far
    // above these small simulated ones, so it commits above).
    let db = s.store().db();
    let t = db.table(engine_store::TABLE).unwrap();
    let mut txn = db.begin().unwrap();
    txn.put(&t, 7u64.to_be_bytes(), b"engine").unwrap();
    txn.commit().unwrap();
    let got = db
        .newest_stamped(engine_store::TABLE, &7u64.to_be_bytes())
        .unwrap();
    assert!(got.version.unwrap().0 > at);
}

/// The same run over a store that forgets reads: the write lands below the read at 500
/// that was already answered, which the test above rules out.
#[test]
fn a_store_that_forgets_reads_refines_writes_below_answered_reads() {
    let mut s = Server::with_store(
        Mistakes::default(),
        ForgetsReads(EngineStore::new(0).unwrap()),
    );
    let tw = refined_after_a_quiet_read(&mut s);
    assert!(tw < ts(500, 2), "{tw:?}");
}
