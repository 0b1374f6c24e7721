//! Hand-made histories: each anomaly is reported with its specific kind, and valid
//! histories (including tricky ones) are accepted.

use std::ops::Bound;

use verso_check::{
    check_serializable, check_strict_serializable, AnomalyKind, EdgeKind, History, Key, Observed,
    Op, Outcome, TxnRecord, VersionId,
};

fn k(s: &str) -> Key {
    s.as_bytes().to_vec()
}

fn v(txn: u64, seq: u32) -> Observed {
    Observed::Version(VersionId::new(txn, seq))
}

fn read(key: &str, observed: Observed) -> Op {
    Op::read(key, observed)
}

fn write(key: &str) -> Op {
    Op::write(key)
}

fn range(lo: &str, hi: &str, observed: &[(&str, u64, u32)]) -> Op {
    Op::range(
        Bound::Included(k(lo)),
        Bound::Excluded(k(hi)),
        false,
        observed
            .iter()
            .map(|&(key, t, s)| (k(key), VersionId::new(t, s)))
            .collect(),
    )
}

/// A committed txn.
fn c(id: u64, begin: u64, end: u64, ts: Option<u64>, ops: Vec<Op>) -> TxnRecord {
    TxnRecord::new(id, begin, end, ts, Outcome::Committed, ops)
}

fn history(txns: Vec<TxnRecord>) -> History {
    History::from_txns(txns)
}

/// Both checkers report `kind`; returns the strict checker's message.
fn assert_both(h: &History, kind: AnomalyKind) -> String {
    let ser = check_serializable(h).expect_err("serializable check should fail");
    assert_eq!(ser.kind, kind, "serializable: {ser}");
    let strict = check_strict_serializable(h).expect_err("strict check should fail");
    assert_eq!(strict.kind, kind, "strict: {strict}");
    strict.to_string()
}

fn assert_valid(h: &History) {
    if let Err(e) = check_serializable(h) {
        panic!("serializable check rejected a valid history: {e}");
    }
    if let Err(e) = check_strict_serializable(h) {
        panic!("strict check rejected a valid history: {e}");
    }
}

// ---------------------------------------------------------------- anomalies

#[test]
fn lost_update_is_g_single() {
    // Both read x absent, both write it: T2's write overwrites T1's without seeing it.
    let h = history(vec![
        c(
            1,
            0,
            10,
            Some(1),
            vec![read("x", Observed::Absent), write("x")],
        ),
        c(
            2,
            0,
            10,
            Some(2),
            vec![read("x", Observed::Absent), write("x")],
        ),
    ]);
    let msg = assert_both(&h, AnomalyKind::GSingle);
    let err = check_strict_serializable(&h).unwrap_err();
    let cycle = err.cycle.as_ref().unwrap();
    assert_eq!(cycle.steps.len(), 2);
    assert_eq!(cycle.count(EdgeKind::Rw), 1);
    assert_eq!(cycle.count(EdgeKind::Ww), 1);
    assert!(msg.contains("T2 --rw(key \"x\")--> T1"), "{msg}");
    assert!(msg.contains("T1 --ww(key \"x\")--> T2"), "{msg}");
}

#[test]
fn write_skew_is_g2() {
    let h = history(vec![
        c(
            1,
            0,
            10,
            Some(1),
            vec![
                read("x", Observed::Absent),
                read("y", Observed::Absent),
                write("x"),
            ],
        ),
        c(
            2,
            0,
            10,
            Some(2),
            vec![
                read("x", Observed::Absent),
                read("y", Observed::Absent),
                write("y"),
            ],
        ),
    ]);
    let msg = assert_both(&h, AnomalyKind::G2);
    assert!(msg.contains("T1 --rw(key \"y\")--> T2"), "{msg}");
    assert!(msg.contains("T2 --rw(key \"x\")--> T1"), "{msg}");
}

#[test]
fn range_phantom_is_g2() {
    // Each txn scans [a, z), finds it empty, and inserts into it.
    let h = history(vec![
        c(1, 0, 10, Some(1), vec![range("a", "z", &[]), write("b")]),
        c(2, 0, 10, Some(2), vec![range("a", "z", &[]), write("c")]),
    ]);
    let msg = assert_both(&h, AnomalyKind::G2);
    assert!(msg.contains("T1 --rw(key \"c\")--> T2"), "{msg}");
    assert!(msg.contains("T2 --rw(key \"b\")--> T1"), "{msg}");
}

#[test]
fn stale_read_is_real_time_violation() {
    // T3 starts after T2 finished overwriting x, yet reads T1's version.
    let h = history(vec![
        c(1, 0, 10, Some(1), vec![write("x")]),
        c(2, 20, 30, Some(2), vec![write("x")]),
        c(3, 40, 50, Some(3), vec![read("x", v(1, 0))]),
    ]);
    // Serializable: T1, T3, T2.
    assert!(check_serializable(&h).is_ok());
    let err = check_strict_serializable(&h).unwrap_err();
    assert_eq!(err.kind, AnomalyKind::RealTime, "{err}");
    let msg = err.to_string();
    assert!(
        msg.starts_with("real-time violation (stale read): "),
        "{msg}"
    );
    assert!(msg.contains("T2 --rt--> T3 --rw(key \"x\")--> T2"), "{msg}");
}

#[test]
fn old_snapshot_is_serializable_but_not_strict() {
    // A read-only txn that starts after T1 finished but reads from an older snapshot.
    let h = history(vec![
        c(1, 0, 10, Some(5), vec![write("x"), write("y")]),
        c(
            2,
            20,
            30,
            Some(4),
            vec![read("x", Observed::Absent), read("y", Observed::Absent)],
        ),
    ]);
    let stats = check_serializable(&h).unwrap();
    assert_eq!(stats.rt_edges, 0);
    let err = check_strict_serializable(&h).unwrap_err();
    assert_eq!(err.kind, AnomalyKind::RealTime, "{err}");
}

#[test]
fn aborted_read_is_g1a() {
    let h = history(vec![
        TxnRecord::new(1, 0, 10, None, Outcome::Aborted, vec![write("x")]),
        c(2, 20, 30, Some(2), vec![read("x", v(1, 0))]),
    ]);
    let msg = assert_both(&h, AnomalyKind::G1a);
    assert!(msg.contains("aborted T1"), "{msg}");
}

#[test]
fn intermediate_read_is_g1b() {
    let h = history(vec![
        c(1, 0, 10, Some(1), vec![write("x"), write("x")]),
        c(2, 5, 30, Some(2), vec![read("x", v(1, 0))]),
    ]);
    assert_both(&h, AnomalyKind::G1b);
    // Reading the final write is fine.
    let ok = history(vec![
        c(1, 0, 10, Some(1), vec![write("x"), write("x")]),
        c(2, 5, 30, Some(2), vec![read("x", v(1, 1))]),
    ]);
    assert_valid(&ok);
}

#[test]
fn circular_information_flow_is_g1c() {
    // Each txn reads the other's write.
    let h = history(vec![
        c(1, 0, 10, Some(1), vec![write("x"), read("y", v(2, 0))]),
        c(2, 0, 10, Some(2), vec![write("y"), read("x", v(1, 0))]),
    ]);
    let msg = assert_both(&h, AnomalyKind::G1c);
    assert!(msg.contains("T1 --wr(key \"x\")--> T2"), "{msg}");
    assert!(msg.contains("T2 --wr(key \"y\")--> T1"), "{msg}");
}

#[test]
fn write_cycle_is_g0() {
    // Without timestamps the version order comes from read-modify-write chains:
    // x: init -> T1 -> T2 and y: init -> T2 -> T1, a write cycle.
    let h = history(vec![
        c(
            1,
            0,
            10,
            None,
            vec![
                read("x", Observed::Absent),
                write("x"),
                read("y", v(2, 0)),
                write("y"),
            ],
        ),
        c(
            2,
            0,
            10,
            None,
            vec![
                read("y", Observed::Absent),
                write("y"),
                read("x", v(1, 0)),
                write("x"),
            ],
        ),
    ]);
    let msg = assert_both(&h, AnomalyKind::G0);
    assert!(msg.contains("--ww(key"), "{msg}");
    assert!(
        !msg.contains("--wr("),
        "a G0 cycle has only ww edges: {msg}"
    );
}

#[test]
fn partial_order_without_ts_still_finds_lost_update() {
    let h = history(vec![
        c(
            1,
            0,
            10,
            None,
            vec![read("x", Observed::Absent), write("x")],
        ),
        c(
            2,
            0,
            10,
            None,
            vec![read("x", Observed::Absent), write("x")],
        ),
    ]);
    let err = check_serializable(&h).unwrap_err();
    assert!(
        err.kind.is_cycle() && err.cycle.as_ref().unwrap().count(EdgeKind::Rw) >= 1,
        "{err}"
    );
}

#[test]
fn garbage_reads_are_reported() {
    let never = history(vec![c(1, 0, 10, Some(1), vec![read("x", v(9, 0))])]);
    assert_both(&never, AnomalyKind::GarbageRead);
    let wrong_key = history(vec![
        c(1, 0, 10, Some(1), vec![write("y")]),
        c(2, 20, 30, Some(2), vec![read("x", v(1, 0))]),
    ]);
    assert_both(&wrong_key, AnomalyKind::GarbageRead);
    let tombstone = history(vec![
        c(1, 0, 10, Some(1), vec![Op::delete("x")]),
        c(2, 20, 30, Some(2), vec![read("x", v(1, 0))]),
    ]);
    assert_both(&tombstone, AnomalyKind::GarbageRead);
    let txn0 = history(vec![c(1, 0, 10, Some(1), vec![read("x", v(0, 0))])]);
    assert_both(&txn0, AnomalyKind::GarbageRead);
}

#[test]
fn ignoring_own_writes_is_internal_inconsistency() {
    let h = history(vec![c(
        1,
        0,
        10,
        Some(1),
        vec![write("x"), read("x", Observed::Absent)],
    )]);
    assert_both(&h, AnomalyKind::InternalInconsistency);
    let deleted = history(vec![c(
        1,
        0,
        10,
        Some(1),
        vec![write("x"), Op::delete("x"), read("x", v(1, 0))],
    )]);
    assert_both(&deleted, AnomalyKind::InternalInconsistency);
    let range_missing_own = history(vec![c(
        1,
        0,
        10,
        Some(1),
        vec![write("b"), range("a", "c", &[])],
    )]);
    assert_both(&range_missing_own, AnomalyKind::InternalInconsistency);
    let ok = history(vec![c(
        1,
        0,
        10,
        Some(1),
        vec![
            write("x"),
            read("x", v(1, 0)),
            write("x"),
            range("a", "z", &[("x", 1, 1)]),
            Op::delete("x"),
            read("x", Observed::Absent),
        ],
    )]);
    assert_valid(&ok);
}

#[test]
fn malformed_range_results_are_reported() {
    let base = c(1, 0, 10, Some(1), vec![write("a"), write("b")]);
    let unsorted = history(vec![
        base.clone(),
        c(
            2,
            20,
            30,
            Some(2),
            vec![range("a", "z", &[("b", 1, 0), ("a", 1, 0)])],
        ),
    ]);
    let msg = assert_both(&unsorted, AnomalyKind::InvalidRangeResult);
    assert!(msg.contains("out of order"), "{msg}");
    let dup = history(vec![
        base.clone(),
        c(
            2,
            20,
            30,
            Some(2),
            vec![range("a", "z", &[("a", 1, 0), ("a", 1, 0)])],
        ),
    ]);
    assert!(assert_both(&dup, AnomalyKind::InvalidRangeResult).contains("twice"));
    let out = history(vec![
        base.clone(),
        c(
            2,
            20,
            30,
            Some(2),
            vec![range("a", "b", &[("a", 1, 0), ("b", 1, 0)])],
        ),
    ]);
    assert!(assert_both(&out, AnomalyKind::InvalidRangeResult).contains("outside"));
    // Reverse scans must be descending.
    let rev = |entries: &[(&str, u64, u32)]| {
        Op::range(
            Bound::Unbounded,
            Bound::Unbounded,
            true,
            entries
                .iter()
                .map(|&(key, t, s)| (k(key), VersionId::new(t, s)))
                .collect(),
        )
    };
    let ok = history(vec![
        base.clone(),
        c(2, 20, 30, Some(2), vec![rev(&[("b", 1, 0), ("a", 1, 0)])]),
    ]);
    assert_valid(&ok);
    let bad = history(vec![
        base,
        c(2, 20, 30, Some(2), vec![rev(&[("a", 1, 0), ("b", 1, 0)])]),
    ]);
    assert_both(&bad, AnomalyKind::InvalidRangeResult);
}

#[test]
fn range_missing_a_committed_key_is_reported() {
    // T2 runs strictly after T1 and claims [a, z) holds only "a".
    let h = history(vec![
        c(1, 0, 10, Some(1), vec![write("a"), write("b")]),
        c(2, 20, 30, Some(2), vec![range("a", "z", &[("a", 1, 0)])]),
    ]);
    // T2 saw T1's write of a but not its write of b: read skew.
    let msg = assert_both(&h, AnomalyKind::GSingle);
    assert!(
        msg.contains("T1 --wr(key \"a\")--> T2 --rw(key \"b\")--> T1"),
        "{msg}"
    );
}

#[test]
fn absent_but_visible_by_timestamp() {
    // Concurrent, so no cycle; but the reader's ts 5 is after the writer's ts 1.
    let h = history(vec![
        c(1, 0, 10, Some(1), vec![write("x")]),
        c(2, 5, 15, Some(5), vec![read("x", Observed::Absent)]),
    ]);
    let msg = assert_both(&h, AnomalyKind::AbsentButVisible);
    assert!(msg.contains("T2 (ts 5) read key \"x\" as absent"), "{msg}");
    // Same history without the reader's ts: T2 can simply go first.
    let no_ts = history(vec![
        c(1, 0, 10, Some(1), vec![write("x")]),
        c(2, 5, 15, None, vec![read("x", Observed::Absent)]),
    ]);
    assert_valid(&no_ts);
}

#[test]
fn equal_timestamps_on_one_key_are_ambiguous() {
    let h = history(vec![
        c(1, 0, 10, Some(3), vec![write("x")]),
        c(2, 0, 10, Some(3), vec![write("x")]),
    ]);
    assert_both(&h, AnomalyKind::AmbiguousVersionOrder);
}

#[test]
fn malformed_histories_are_rejected() {
    let dup = history(vec![
        c(1, 0, 10, Some(1), vec![]),
        c(1, 0, 10, Some(2), vec![]),
    ]);
    assert_both(&dup, AnomalyKind::MalformedHistory);
    let zero = history(vec![c(0, 0, 10, Some(1), vec![])]);
    assert_both(&zero, AnomalyKind::MalformedHistory);
    let backwards = history(vec![c(1, 10, 0, Some(1), vec![])]);
    assert_both(&backwards, AnomalyKind::MalformedHistory);
}

// ---------------------------------------------------------------- valid histories

#[test]
fn serial_history_is_valid() {
    let h = history(vec![
        c(
            1,
            0,
            10,
            Some(1),
            vec![read("x", Observed::Absent), write("x"), write("y")],
        ),
        c(
            2,
            20,
            30,
            Some(2),
            vec![read("x", v(1, 0)), write("x"), Op::delete("y")],
        ),
        c(
            3,
            40,
            50,
            Some(3),
            vec![read("x", v(2, 0)), read("y", Observed::Absent)],
        ),
        c(
            4,
            60,
            70,
            Some(4),
            vec![
                read("y", Observed::Absent),
                write("y"),
                range("a", "z", &[("x", 2, 0), ("y", 4, 0)]),
            ],
        ),
        c(
            5,
            80,
            90,
            Some(5),
            vec![range("a", "z", &[("x", 2, 0), ("y", 4, 0)])],
        ),
    ]);
    assert_valid(&h);
    let stats = check_strict_serializable(&h).unwrap();
    assert_eq!(stats.txns, 5);
    assert_eq!(stats.committed, 5);
    assert_eq!(stats.keys_partial_order, 0);
    assert!(
        stats.ww_edges >= 3 && stats.wr_edges >= 4 && stats.rw_edges >= 1,
        "{stats:?}"
    );
    assert!(stats.rt_edges > 0);
}

#[test]
fn concurrent_non_conflicting_history_is_valid() {
    let h = history(vec![
        c(
            1,
            0,
            100,
            Some(3),
            vec![read("a", Observed::Absent), write("a")],
        ),
        c(
            2,
            10,
            90,
            Some(1),
            vec![read("b", Observed::Absent), write("b")],
        ),
        c(
            3,
            20,
            80,
            Some(2),
            vec![read("c", Observed::Absent), write("c"), read("c", v(3, 0))],
        ),
        c(
            4,
            110,
            120,
            Some(4),
            vec![read("a", v(1, 0)), read("b", v(2, 0)), read("c", v(3, 0))],
        ),
    ]);
    assert_valid(&h);
}

#[test]
fn valid_range_reads() {
    let h = history(vec![
        c(1, 0, 10, Some(1), vec![write("a"), write("c"), write("q")]),
        c(
            2,
            20,
            30,
            Some(2),
            vec![range("a", "d", &[("a", 1, 0), ("c", 1, 0)])],
        ),
        c(3, 40, 50, Some(3), vec![Op::delete("a")]),
        c(
            4,
            60,
            70,
            Some(4),
            vec![range("a", "d", &[("c", 1, 0)]), read("a", Observed::Absent)],
        ),
        // Concurrent with T3 and serialized before it: still sees a.
        c(
            5,
            35,
            55,
            Some(2),
            vec![range("a", "d", &[("a", 1, 0), ("c", 1, 0)])],
        ),
    ]);
    assert_valid(&h);
}

#[test]
fn unknown_outcomes() {
    // T1's outcome is unknown but T2 read its write: treated as committed.
    let observed = history(vec![
        TxnRecord::new(1, 0, 10, Some(1), Outcome::Unknown, vec![write("x")]),
        c(2, 20, 30, Some(2), vec![read("x", v(1, 0))]),
    ]);
    let stats = check_strict_serializable(&observed).unwrap();
    assert_eq!(stats.unknown_included, 1);
    // Unobserved unknown and aborted writes are ignored.
    let ignored = history(vec![
        TxnRecord::new(1, 0, 10, None, Outcome::Unknown, vec![write("x")]),
        TxnRecord::new(2, 0, 10, None, Outcome::Aborted, vec![write("x")]),
        c(3, 20, 30, Some(3), vec![read("x", Observed::Absent)]),
    ]);
    let stats = check_strict_serializable(&ignored).unwrap();
    assert_eq!(
        (stats.unknown, stats.unknown_included, stats.aborted),
        (1, 0, 1)
    );
    // An included unknown's own reads are checked too.
    let bad_reader = history(vec![
        c(1, 0, 10, Some(1), vec![write("y")]),
        TxnRecord::new(
            2,
            20,
            30,
            Some(2),
            Outcome::Unknown,
            vec![read("y", v(1, 7)), write("x")],
        ),
        c(3, 40, 50, Some(3), vec![read("x", v(2, 0))]),
    ]);
    assert_both(&bad_reader, AnomalyKind::GarbageRead);
}

#[test]
fn aborted_txns_reads_are_not_checked() {
    // An aborted optimistic txn may have seen an inconsistent snapshot; that is allowed.
    let h = history(vec![
        c(1, 0, 10, Some(1), vec![write("x")]),
        TxnRecord::new(
            2,
            20,
            30,
            None,
            Outcome::Aborted,
            vec![read("x", Observed::Absent), read("y", v(1, 0))],
        ),
    ]);
    assert_valid(&h);
}

#[test]
fn violation_display_lists_involved_txns() {
    let h = history(vec![
        c(
            1,
            0,
            10,
            Some(1),
            vec![read("x", Observed::Absent), write("x")],
        ),
        c(
            2,
            0,
            10,
            Some(2),
            vec![read("x", Observed::Absent), write("x")],
        ),
    ]);
    let msg = check_strict_serializable(&h).unwrap_err().to_string();
    assert!(
        msg.contains("\n  T1: Committed, begin 0 end 10, ts 1"),
        "{msg}"
    );
    assert!(
        msg.contains("\n  T2: Committed, begin 0 end 10, ts 2"),
        "{msg}"
    );
}

#[test]
fn non_utf8_keys_print_as_hex() {
    let h = History::from_txns(vec![
        c(
            1,
            0,
            10,
            Some(1),
            vec![
                Op::read(vec![0xff, 0x01], Observed::Absent),
                Op::write(vec![0xff, 0x01]),
            ],
        ),
        c(
            2,
            0,
            10,
            Some(2),
            vec![
                Op::read(vec![0xff, 0x01], Observed::Absent),
                Op::write(vec![0xff, 0x01]),
            ],
        ),
    ]);
    let msg = check_serializable(&h).unwrap_err().to_string();
    assert!(msg.contains("key 0xff01"), "{msg}");
}

/// Snapshot isolation allows write skew and phantoms through disjoint writes (two adjacent
/// anti-dependencies), but not lost updates or reads that miss an earlier snapshot.
#[test]
fn snapshot_isolation_allows_write_skew_but_not_lost_updates() {
    use verso_check::check_snapshot_isolation;
    // Both read at snapshot 1 and commit at 3 and 4.
    let at = |mut t: TxnRecord, snap: u64| {
        t.snapshot_ts = Some(snap);
        t
    };
    let skew = history(vec![
        at(
            c(
                1,
                0,
                10,
                Some(3),
                vec![
                    read("x", Observed::Absent),
                    read("y", Observed::Absent),
                    write("x"),
                ],
            ),
            1,
        ),
        at(
            c(
                2,
                0,
                10,
                Some(4),
                vec![
                    read("x", Observed::Absent),
                    read("y", Observed::Absent),
                    write("y"),
                ],
            ),
            1,
        ),
    ]);
    assert!(check_serializable(&skew).is_err());
    check_snapshot_isolation(&skew).expect("write skew is snapshot isolation");
    let phantom = history(vec![
        at(
            c(1, 0, 10, Some(3), vec![range("a", "z", &[]), write("b")]),
            1,
        ),
        at(
            c(2, 0, 10, Some(4), vec![range("a", "z", &[]), write("c")]),
            1,
        ),
    ]);
    check_snapshot_isolation(&phantom).expect("disjoint phantom inserts are SI");
    let lost = history(vec![
        c(
            1,
            0,
            10,
            Some(1),
            vec![read("x", Observed::Absent), write("x")],
        ),
        c(
            2,
            0,
            10,
            Some(2),
            vec![read("x", Observed::Absent), write("x")],
        ),
    ]);
    let err = check_snapshot_isolation(&lost).unwrap_err();
    assert_eq!(err.kind, AnomalyKind::GSnapshot, "{err}");
    // Read skew: T2 sees T1's y but not its x. One anti-dependency: not SI.
    let read_skew = history(vec![
        c(1, 0, 10, Some(1), vec![write("x"), write("y")]),
        c(
            2,
            0,
            10,
            Some(2),
            vec![read("x", Observed::Absent), read("y", v(1, 0))],
        ),
    ]);
    assert!(check_snapshot_isolation(&read_skew).is_err());
}

/// A snapshot transaction's absent reads are judged at its snapshot, not its commit.
#[test]
fn snapshot_reads_are_resolved_at_the_snapshot_timestamp() {
    use verso_check::check_snapshot_isolation;
    // T1 commits x at 5; T2 read at snapshot 3 (x absent) and committed y at 8.
    let mut t2 = c(
        2,
        0,
        10,
        Some(8),
        vec![read("x", Observed::Absent), write("y")],
    );
    t2.snapshot_ts = Some(3);
    let h = history(vec![c(1, 0, 10, Some(5), vec![write("x")]), t2]);
    check_snapshot_isolation(&h).expect("absent at the snapshot");
    let mut late = h.clone();
    late.txns[1].snapshot_ts = Some(6);
    assert!(
        check_snapshot_isolation(&late).is_err(),
        "x was visible at 6"
    );
}
