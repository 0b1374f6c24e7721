//! List-append histories built by hand: each anomaly is reported with its specific kind
//! and a message naming the keys and elements involved; valid histories pass.

use std::collections::BTreeMap;
use std::sync::{Barrier, Mutex};
use std::time::Instant;

use verso_check::{
    check_append_serializable, check_append_snapshot_isolation, check_append_strict_serializable,
    check_serializable, check_strict_serializable, AnomalyKind, AppendHistory, AppendOp,
    AppendRecorder, AppendTxnRecord, EdgeKind, History, Observed, Op, Outcome, TxnRecord,
    VersionId,
};

fn app(key: &str, element: u64) -> AppendOp {
    AppendOp::append(key, element)
}

fn read(key: &str, list: &[u64]) -> AppendOp {
    AppendOp::read(key, list.to_vec())
}

/// A committed txn without an engine timestamp.
fn c(id: u64, begin: u64, end: u64, ops: Vec<AppendOp>) -> AppendTxnRecord {
    AppendTxnRecord::new(id, begin, end, None, Outcome::Committed, ops)
}

fn with(id: u64, outcome: Outcome, ops: Vec<AppendOp>) -> AppendTxnRecord {
    AppendTxnRecord::new(id, 0, 100, None, outcome, ops)
}

fn history(txns: Vec<AppendTxnRecord>) -> AppendHistory {
    AppendHistory::from_txns(txns)
}

/// Serializable and strict checks both report `kind`; returns the strict message.
fn assert_both(h: &AppendHistory, kind: AnomalyKind) -> String {
    let ser = check_append_serializable(h).expect_err("serializable check should fail");
    assert_eq!(ser.kind, kind, "serializable: {ser}");
    let strict = check_append_strict_serializable(h).expect_err("strict check should fail");
    assert_eq!(strict.kind, kind, "strict: {strict}");
    strict.to_string()
}

fn assert_valid(h: &AppendHistory) {
    for (name, result) in [
        ("strict", check_append_strict_serializable(h)),
        ("serializable", check_append_serializable(h)),
        ("snapshot isolation", check_append_snapshot_isolation(h)),
    ] {
        if let Err(e) = result {
            panic!("{name} check rejected a valid history: {e}");
        }
    }
}

fn assert_contains(msg: &str, parts: &[&str]) {
    for part in parts {
        assert!(msg.contains(part), "missing {part:?} in:\n{msg}");
    }
}

// ---------------------------------------------------------------- cycles

#[test]
fn lost_update_is_g_single() {
    // Both read x empty and append; a later read shows 1 went first, so T2's append
    // overwrote a state it did not see.
    let h = history(vec![
        c(1, 0, 10, vec![read("x", &[]), app("x", 1)]),
        c(2, 0, 10, vec![read("x", &[]), app("x", 2)]),
        c(3, 20, 30, vec![read("x", &[1, 2])]),
    ]);
    let msg = assert_both(&h, AnomalyKind::GSingle);
    assert_contains(
        &msg,
        &[
            "T1 --ww(key \"x\")--> T2 --rw(key \"x\")--> T1",
            "T1 --ww--> T2: T1 appended 1 right before T2 appended 2",
            "T2 --rw--> T1: T2 saw [], and T1 appended the next element, 1",
        ],
    );
    let si = check_append_snapshot_isolation(&h).unwrap_err();
    assert_eq!(si.kind, AnomalyKind::GSnapshot, "{si}");
}

#[test]
fn lost_update_with_an_unread_append_is_g_single() {
    // The final read shows only 2: T1's append 1, which no read saw, must come after it.
    let h = history(vec![
        c(1, 0, 10, vec![read("x", &[]), app("x", 1)]),
        c(2, 0, 10, vec![read("x", &[]), app("x", 2)]),
        c(3, 20, 30, vec![read("x", &[2])]),
    ]);
    let msg = assert_both(&h, AnomalyKind::GSingle);
    assert_contains(
        &msg,
        &[
            "T1 --rw(key \"x\")--> T2 --ww(key \"x\")--> T1",
            "T2 appended 2, the last element read, and T1 appended 1, which no read saw, so later",
        ],
    );
    let stats = check_append_serializable(&history(vec![
        c(1, 0, 10, vec![read("x", &[]), app("x", 1)]),
        c(2, 20, 30, vec![read("x", &[1])]),
        c(3, 40, 50, vec![app("x", 2)]),
    ]))
    .unwrap();
    assert_eq!(stats.keys_partial_order, 1, "{stats:?}");
}

#[test]
fn lost_update_nobody_read_after_is_an_anti_dependency_cycle() {
    // Without a later read the order of 1 and 2 is unknown, but each appender read the
    // whole list and the other's append comes after it: two anti-dependencies.
    let h = history(vec![
        c(1, 0, 10, vec![read("x", &[]), app("x", 1)]),
        c(2, 0, 10, vec![read("x", &[]), app("x", 2)]),
    ]);
    let msg = assert_both(&h, AnomalyKind::G2);
    assert_contains(
        &msg,
        &[
            "T1 --rw(key \"x\")--> T2 --rw(key \"x\")--> T1",
            "T1 saw [], the longest list read; T2 appended 2, which no read saw",
        ],
    );
}

#[test]
fn write_skew_is_g2_but_snapshot_isolation() {
    let h = history(vec![
        c(1, 0, 10, vec![read("x", &[]), read("y", &[]), app("x", 1)]),
        c(2, 0, 10, vec![read("x", &[]), read("y", &[]), app("y", 2)]),
    ]);
    let msg = assert_both(&h, AnomalyKind::G2);
    assert_contains(&msg, &["T1 --rw(key \"y\")--> T2 --rw(key \"x\")--> T1"]);
    check_append_snapshot_isolation(&h).expect("write skew is snapshot isolation");
}

#[test]
fn circular_information_flow_is_g1c() {
    let h = history(vec![
        c(1, 0, 10, vec![app("x", 1), read("y", &[2])]),
        c(2, 0, 10, vec![app("y", 2), read("x", &[1])]),
    ]);
    let msg = assert_both(&h, AnomalyKind::G1c);
    assert_contains(
        &msg,
        &[
            "T1 --wr(key \"x\")--> T2 --wr(key \"y\")--> T1",
            "T2 saw [1], ending with 1 that T1 appended",
        ],
    );
    assert_eq!(
        check_append_snapshot_isolation(&h).unwrap_err().kind,
        AnomalyKind::G1c
    );
}

#[test]
fn write_cycle_is_g0() {
    let h = history(vec![
        c(1, 0, 10, vec![app("x", 1), app("y", 1)]),
        c(2, 0, 10, vec![app("x", 2), app("y", 2)]),
        c(3, 20, 30, vec![read("x", &[1, 2]), read("y", &[2, 1])]),
    ]);
    let msg = assert_both(&h, AnomalyKind::G0);
    assert_contains(&msg, &["T1 --ww(key \"x\")--> T2 --ww(key \"y\")--> T1"]);
    // So is a txn whose appends to one key are split by another's.
    let split = history(vec![
        c(1, 0, 10, vec![app("x", 1), app("x", 3)]),
        c(2, 0, 10, vec![app("x", 2)]),
        c(3, 20, 30, vec![read("x", &[1, 2, 3])]),
    ]);
    assert_both(&split, AnomalyKind::G0);
}

#[test]
fn read_skew_is_g_single() {
    // T2 sees T1's append to y but not its append to x.
    let h = history(vec![
        c(1, 0, 10, vec![app("x", 1), app("y", 2)]),
        c(2, 0, 10, vec![read("x", &[]), read("y", &[2])]),
    ]);
    let msg = assert_both(&h, AnomalyKind::GSingle);
    assert_contains(&msg, &["T1 --wr(key \"y\")--> T2 --rw(key \"x\")--> T1"]);
    // Nobody read 1, so the anti-dependency runs through the relay for unread appends;
    // snapshot isolation's search must follow it too.
    let si = check_append_snapshot_isolation(&h).unwrap_err();
    assert_eq!(si.kind, AnomalyKind::GSnapshot, "{si}");
    assert_contains(
        &si.to_string(),
        &["T1 --wr(key \"y\")--> T2 --rw(key \"x\")--> T1"],
    );
}

#[test]
fn stale_read_is_a_real_time_violation() {
    let h = history(vec![
        c(1, 0, 10, vec![app("x", 1)]),
        c(2, 20, 30, vec![read("x", &[])]),
    ]);
    check_append_serializable(&h).expect("T2 may go first");
    let err = check_append_strict_serializable(&h).unwrap_err();
    assert_eq!(err.kind, AnomalyKind::RealTime);
    assert_contains(
        &err.to_string(),
        &[
            "T1 --rt--> T2 --rw(key \"x\")--> T1",
            "T2 saw [], the longest list read; T1 appended 1, which no read saw",
        ],
    );
}

// ---------------------------------------------------------------- direct anomalies

#[test]
fn incompatible_orders_are_reported() {
    let h = history(vec![
        c(1, 0, 10, vec![app("x", 1)]),
        c(2, 0, 10, vec![app("x", 2)]),
        c(3, 20, 30, vec![read("x", &[1, 2])]),
        c(4, 20, 30, vec![read("x", &[2, 1])]),
    ]);
    let msg = assert_both(&h, AnomalyKind::IncompatibleOrder);
    assert_contains(
        &msg,
        &["T4 read key \"x\" as [2, 1] and T3 read it as [1, 2]: they differ at position 0"],
    );
    // A shorter read must be a prefix too.
    let h = history(vec![
        c(1, 0, 10, vec![app("x", 1), app("x", 2)]),
        c(3, 0, 10, vec![app("x", 3)]),
        c(4, 20, 30, vec![read("x", &[1, 2, 3])]),
        c(5, 20, 30, vec![read("x", &[3])]),
    ]);
    assert_both(&h, AnomalyKind::IncompatibleOrder);
}

#[test]
fn aborted_read_is_g1a() {
    let h = history(vec![
        with(1, Outcome::Aborted, vec![app("x", 1)]),
        c(2, 0, 10, vec![read("x", &[1])]),
    ]);
    let msg = assert_both(&h, AnomalyKind::G1a);
    assert_contains(
        &msg,
        &["T2 read key \"x\" as [1], which contains 1, appended by aborted T1"],
    );
}

#[test]
fn intermediate_read_is_g1b() {
    let h = history(vec![
        c(1, 0, 10, vec![app("x", 1), app("x", 2)]),
        c(2, 0, 10, vec![read("x", &[1])]),
    ]);
    let msg = assert_both(&h, AnomalyKind::G1b);
    assert_contains(
        &msg,
        &["T2 read key \"x\" as [1], ending with 1 that T1 appended, but T1 appended 2 to it later"],
    );
    // The appender itself may see its own intermediate state.
    assert_valid(&history(vec![c(
        1,
        0,
        10,
        vec![
            app("x", 1),
            read("x", &[1]),
            app("x", 2),
            read("x", &[1, 2]),
        ],
    )]));
}

#[test]
fn garbage_and_duplicate_elements_are_reported() {
    let garbage = history(vec![c(1, 0, 10, vec![read("x", &[7])])]);
    let msg = assert_both(&garbage, AnomalyKind::GarbageRead);
    assert_contains(
        &msg,
        &["T1 read key \"x\" as [7], but no txn appended 7 to it"],
    );
    // An element appended to another key is still garbage here.
    let wrong_key = history(vec![
        c(1, 0, 10, vec![app("y", 7)]),
        c(2, 20, 30, vec![read("x", &[7])]),
    ]);
    assert_both(&wrong_key, AnomalyKind::GarbageRead);
    let dup = history(vec![
        c(1, 0, 10, vec![app("x", 1)]),
        c(2, 20, 30, vec![read("x", &[1, 1])]),
    ]);
    let msg = assert_both(&dup, AnomalyKind::DuplicateElements);
    assert_contains(&msg, &["with element 1 at positions 0 and 1"]);
    // Also inside a read that is incompatible with the longest one.
    let dup_short = history(vec![
        c(1, 0, 10, vec![app("x", 1), app("x", 2), app("x", 3)]),
        c(2, 20, 30, vec![read("x", &[1, 2, 3])]),
        c(3, 20, 30, vec![read("x", &[2, 2])]),
    ]);
    assert_both(&dup_short, AnomalyKind::DuplicateElements);
}

#[test]
fn ignoring_own_appends_is_internal_inconsistency() {
    let cases = [
        // The own append is missing.
        vec![read("x", &[]), app("x", 1), read("x", &[])],
        // Own appends out of order.
        vec![app("x", 1), app("x", 2), read("x", &[2, 1])],
        // Another's append after the own one.
        vec![app("x", 1), read("x", &[1, 9])],
    ];
    for ops in cases {
        let h = history(vec![c(1, 0, 10, ops), c(9, 0, 10, vec![app("x", 9)])]);
        let msg = assert_both(&h, AnomalyKind::InternalInconsistency);
        assert_contains(&msg, &["do not end it"]);
    }
    // Seeing an own append before making it.
    let h = history(vec![c(1, 0, 10, vec![read("x", &[5]), app("x", 5)])]);
    let msg = assert_both(&h, AnomalyKind::InternalInconsistency);
    assert_contains(
        &msg,
        &["already contains 5, an element it appends only later"],
    );
}

#[test]
fn malformed_histories_are_rejected() {
    let twice = history(vec![
        with(1, Outcome::Aborted, vec![app("x", 1)]),
        c(2, 0, 10, vec![app("x", 1)]),
    ]);
    let err = check_append_strict_serializable(&twice).unwrap_err();
    assert_eq!(err.kind, AnomalyKind::MalformedHistory);
    assert_contains(
        &err.to_string(),
        &["element 1 was appended to key \"x\" twice"],
    );
    let zero = history(vec![c(0, 0, 10, vec![])]);
    assert_eq!(
        check_append_serializable(&zero).unwrap_err().kind,
        AnomalyKind::MalformedHistory
    );
    let backwards = history(vec![c(1, 10, 0, vec![])]);
    assert_eq!(
        check_append_serializable(&backwards).unwrap_err().kind,
        AnomalyKind::MalformedHistory
    );
}

// ---------------------------------------------------------------- valid histories

#[test]
fn serial_history_is_valid() {
    let h = history(vec![
        c(1, 0, 10, vec![read("x", &[]), app("x", 1), app("y", 10)]),
        c(
            2,
            20,
            30,
            vec![read("x", &[1]), app("x", 2), read("x", &[1, 2])],
        ),
        c(3, 40, 50, vec![read("y", &[10]), app("x", 3), app("y", 11)]),
        c(4, 60, 70, vec![read("x", &[1, 2, 3]), read("y", &[10, 11])]),
        c(5, 80, 90, vec![app("x", 4)]),
    ]);
    assert_valid(&h);
    let stats = check_append_strict_serializable(&h).unwrap();
    assert_eq!((stats.txns, stats.committed, stats.keys), (5, 5, 2));
    assert!(stats.ww_edges > 0 && stats.wr_edges > 0 && stats.rw_edges > 0);
    assert_eq!(stats.keys_partial_order, 1, "4 was never read");
}

#[test]
fn concurrent_history_is_valid() {
    // Overlapping txns that a serial order T2, T1, T3 explains.
    let h = history(vec![
        c(1, 0, 50, vec![read("x", &[2]), app("x", 1)]),
        c(2, 10, 20, vec![read("x", &[]), app("x", 2), read("y", &[])]),
        c(3, 40, 60, vec![read("x", &[2, 1]), app("y", 3)]),
        c(4, 45, 55, vec![read("y", &[])]),
    ]);
    assert_valid(&h);
}

#[test]
fn unknown_outcomes_count_iff_read() {
    let read_it = history(vec![
        with(1, Outcome::Unknown, vec![app("x", 1)]),
        c(2, 200, 300, vec![read("x", &[1])]),
    ]);
    let stats = check_append_strict_serializable(&read_it).unwrap();
    assert_eq!((stats.unknown, stats.unknown_included), (1, 1));
    let unread = history(vec![
        with(1, Outcome::Unknown, vec![app("x", 1)]),
        with(2, Outcome::Aborted, vec![app("x", 2), read("y", &[99])]),
        c(3, 200, 300, vec![read("x", &[])]),
    ]);
    let stats = check_append_strict_serializable(&unread).unwrap();
    assert_eq!((stats.unknown_included, stats.aborted), (0, 1));
    // An included unknown's own reads are checked too (and can include others).
    let chain = history(vec![
        with(1, Outcome::Unknown, vec![app("y", 5)]),
        with(2, Outcome::Unknown, vec![read("y", &[5]), app("x", 1)]),
        c(3, 200, 300, vec![read("x", &[1])]),
    ]);
    assert_eq!(
        check_append_serializable(&chain).unwrap().unknown_included,
        2
    );
    let bad = history(vec![
        with(1, Outcome::Unknown, vec![read("y", &[42]), app("x", 1)]),
        c(2, 200, 300, vec![read("x", &[1])]),
    ]);
    assert_both(&bad, AnomalyKind::GarbageRead);
}

// ---------------------------------------------------------------- the point of it

/// An engine commits T2 (which began after T1 ended) but installs its append with a
/// stale timestamp, below T1's version, while reporting a later commit timestamp: readers
/// at later snapshots see 2 *before* 1. R1 read [1] before T2 ran; R2, concurrent with
/// T2, reads [2, 1].
///
/// The append checker infers the order from the data and reports the two reads as
/// incompatible (even for plain serializability). The same execution recorded for the
/// timestamp-based checker, with each value naming only its writer, passes it: the
/// reported timestamps say T1 then T2, and every read is consistent with that (R2 saw
/// T1's version, which is what the engine's chain had on top), so the bug is invisible.
#[test]
fn stale_timestamp_is_caught_by_inferred_order() {
    let appends = history(vec![
        AppendTxnRecord::new(1, 0, 10, Some(10), Outcome::Committed, vec![app("x", 1)]),
        AppendTxnRecord::new(
            2,
            15,
            20,
            Some(12),
            Outcome::Committed,
            vec![read("x", &[1])],
        ),
        AppendTxnRecord::new(3, 30, 40, Some(20), Outcome::Committed, vec![app("x", 2)]),
        AppendTxnRecord::new(
            4,
            35,
            45,
            Some(30),
            Outcome::Committed,
            vec![read("x", &[2, 1])],
        ),
    ]);
    let msg = assert_both(&appends, AnomalyKind::IncompatibleOrder);
    assert_contains(
        &msg,
        &["T4 read key \"x\" as [2, 1] and T2 read it as [1]: they differ at position 0 (2 vs 1)"],
    );

    let versions = History::from_txns(vec![
        TxnRecord::new(1, 0, 10, Some(10), Outcome::Committed, vec![Op::write("x")]),
        TxnRecord::new(
            2,
            15,
            20,
            Some(12),
            Outcome::Committed,
            vec![Op::read("x", Observed::Version(VersionId::new(1, 0)))],
        ),
        TxnRecord::new(
            3,
            30,
            40,
            Some(20),
            Outcome::Committed,
            vec![Op::write("x")],
        ),
        TxnRecord::new(
            4,
            35,
            45,
            Some(30),
            Outcome::Committed,
            vec![Op::read("x", Observed::Version(VersionId::new(1, 0)))],
        ),
    ]);
    check_strict_serializable(&versions).expect("the timestamp checker cannot see this bug");
    check_serializable(&versions).expect("nor can the serializable one");
}

// ---------------------------------------------------------------- recorder end to end

/// A store of encoded lists under one lock per transaction: strictly serializable.
#[derive(Default)]
struct LockedStore {
    map: Mutex<BTreeMap<Vec<u8>, Vec<u8>>>,
}

#[test]
fn locked_store_with_read_modify_write_appends_is_strictly_serializable() {
    let store = LockedStore::default();
    let rec = AppendRecorder::new();
    std::thread::scope(|s| {
        for thread in 0..4u64 {
            let (store, rec) = (&store, &rec);
            s.spawn(move || {
                for i in 0..250u64 {
                    let mut t = rec.begin_txn();
                    let mut map = store.map.lock().unwrap();
                    let a = format!("k{}", (i + thread) % 5).into_bytes();
                    let b = format!("k{}", (i * 3 + thread) % 5).into_bytes();
                    let old = map.get(&a).cloned();
                    let new = t.rmw_append(a.clone(), old.as_deref());
                    map.insert(a.clone(), new.expect("the store holds lists"));
                    let list = t.read_value(b.clone(), map.get(&b).map(Vec::as_slice));
                    assert!(list.is_some(), "the store holds lists");
                    // Every tenth txn aborts: its put is rolled back.
                    let outcome = if i % 10 == 0 {
                        match old {
                            Some(old) => map.insert(a, old),
                            None => map.remove(&a),
                        };
                        Outcome::Aborted
                    } else {
                        Outcome::Committed
                    };
                    drop(map);
                    t.finish(outcome, None);
                }
            });
        }
    });
    let h = rec.into_history();
    assert_eq!(h.len(), 1000);
    let stats = check_append_strict_serializable(&h).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!((stats.committed, stats.aborted), (900, 100));
    assert!(stats.rw_edges > 0 && stats.wr_edges > 0 && stats.ww_edges > 0);
}

#[test]
fn non_atomic_read_modify_write_loses_an_append() {
    // Both clients read the list, then (after both have read) write back their own
    // extension: the later put drops the earlier one's element.
    let store = LockedStore::default();
    let rec = AppendRecorder::new();
    let barrier = Barrier::new(2);
    std::thread::scope(|s| {
        for _ in 0..2 {
            let (store, rec, barrier) = (&store, &rec, &barrier);
            s.spawn(move || {
                let mut t = rec.begin_txn();
                let current = store.map.lock().unwrap().get(b"x".as_slice()).cloned();
                let new = t.rmw_append("x", current.as_deref()).unwrap();
                barrier.wait();
                store.map.lock().unwrap().insert(b"x".to_vec(), new);
                t.finish(Outcome::Committed, None);
            });
        }
    });
    let mut t = rec.begin_txn();
    let current = store.map.lock().unwrap().get(b"x".as_slice()).cloned();
    t.read_value("x", current.as_deref()).unwrap();
    t.finish(Outcome::Committed, None);
    let err = check_append_strict_serializable(&rec.into_history()).unwrap_err();
    assert_eq!(err.kind, AnomalyKind::GSingle, "{err}");
    let cycle = err.cycle.as_ref().unwrap();
    assert_eq!(
        (cycle.count(EdgeKind::Rw), cycle.count(EdgeKind::Ww)),
        (1, 1)
    );
    assert_contains(&err.to_string(), &["which no read saw, so later"]);
}

/// A key appended 10,000 times and read after every tenth append (50 MB of reads): the
/// prefix checks are slice compares, not per-element lookups, so this stays fast.
#[test]
fn long_lists_check_quickly() {
    let mut txns = Vec::new();
    let mut list = Vec::new();
    for i in 1..=10_000u64 {
        let at = 10 * i;
        list.push(i);
        txns.push(c(2 * i, at, at + 1, vec![app("x", i)]));
        if i % 10 == 0 {
            txns.push(c(2 * i + 1, at + 2, at + 3, vec![read("x", &list)]));
        }
    }
    let h = history(txns);
    let t0 = Instant::now();
    let stats = check_append_strict_serializable(&h).expect("valid");
    let elapsed = t0.elapsed();
    eprintln!(
        "checked {} txns with lists up to 10,000 long in {elapsed:?}",
        stats.txns
    );
    assert!(elapsed.as_secs() < 5, "took {elapsed:?}");

    // One stale read among them (it misses the last append before it began) is found.
    let mut stale = h.clone();
    let AppendOp::Read { list, .. } = &mut stale.txns.last_mut().unwrap().ops[0] else {
        unreachable!()
    };
    list.pop();
    let err = check_append_strict_serializable(&stale).unwrap_err();
    assert_eq!(err.kind, AnomalyKind::RealTime, "{err}");
    assert_contains(
        &err.to_string(),
        &["[1, 2, 3, 4, .., 9996, 9997, 9998, 9999] (9999 elements)"],
    );
}
