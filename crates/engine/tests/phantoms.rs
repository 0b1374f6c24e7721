//! Serializable range reads: each test interleaves two transactions by hand so that a
//! protocol without phantom protection would commit both and produce a non-serializable
//! result. Under Verso the older writer must abort.

use verso_engine::{ConflictReason, Db, Error, IndexKind, Options, Table};

/// Every test runs against each index: the gap-stamp contract is the index's job.
fn each_index(test: impl Fn(Db, Table)) {
    for kind in [IndexKind::Masstree, IndexKind::LockedBTree] {
        let db = Db::open(Options::default().index(kind)).unwrap();
        let t = db.table("t").unwrap();
        test(db, t);
    }
}

fn conflict(r: Result<verso_engine::CommitTs, Error>) -> bool {
    matches!(
        r,
        Err(Error::Conflict {
            reason: ConflictReason::ReadByYounger
        })
    )
}

/// Write skew through ranges: "at most one doctor on call". Each transaction counts the
/// on-call rows in a range and, seeing one, inserts a different row into the same range.
#[test]
fn write_skew_through_ranges_is_prevented() {
    each_index(|db, t| {
        db.run(|txn| txn.put(&t, b"oncall/alice", b"1")).unwrap();
        let mut a = db.begin().unwrap();
        let mut b = db.begin().unwrap();
        let count = |txn: &verso_engine::Txn<'_>| {
            txn.range(&t, &b"oncall/"[..]..&b"oncall0"[..])
                .unwrap()
                .count()
        };
        assert_eq!(count(&a), 1);
        assert_eq!(count(&b), 1);
        a.delete(&t, b"oncall/alice").unwrap();
        a.put(&t, b"oncall/bob", b"1").unwrap();
        b.delete(&t, b"oncall/alice").unwrap();
        b.put(&t, b"oncall/carol", b"1").unwrap();
        // `a` is older than `b`, and `b` read the range `a` inserts into: `a` must abort.
        assert!(conflict(a.commit()));
        b.commit().unwrap();
        let check = db.begin_read_only().unwrap();
        assert_eq!(count(&check), 1);
    });
}

/// The empty-range case: both see an empty range and insert into it.
#[test]
fn insert_into_a_range_read_empty_by_a_younger_transaction_aborts() {
    each_index(|db, t| {
        db.run(|txn| {
            txn.put(&t, b"a", b"")?;
            txn.put(&t, b"z", b"")
        })
        .unwrap();
        let mut old = db.begin().unwrap();
        let young = db.begin().unwrap();
        assert_eq!(young.range(&t, &b"m"[..]..&b"p"[..]).unwrap().count(), 0);
        old.put(&t, b"n", b"phantom").unwrap();
        assert!(conflict(old.commit()));
        young.commit().unwrap();
    });
}

/// Empty table, unbounded range: the whole key space is one gap.
#[test]
fn unbounded_range_over_an_empty_table_protects_everything() {
    each_index(|db, t| {
        let mut old = db.begin().unwrap();
        let young = db.begin_read_only().unwrap();
        assert_eq!(young.range_rev(&t, ..).unwrap().count(), 0);
        old.put(&t, b"", b"even the empty key").unwrap();
        assert!(conflict(old.commit()));
    });
}

/// The absent-key case: a point read of a missing key is a one-key range.
#[test]
fn insert_of_a_key_read_absent_by_a_younger_transaction_aborts() {
    each_index(|db, t| {
        let mut old = db.begin().unwrap();
        let young = db.begin().unwrap();
        assert_eq!(young.get(&t, b"ghost").unwrap(), None);
        old.put(&t, b"ghost", b"boo").unwrap();
        assert!(conflict(old.commit()));
    });
}

/// Absent-key write skew: each reads the other's key as absent, then writes its own.
#[test]
fn absent_key_write_skew_is_prevented() {
    each_index(|db, t| {
        let mut a = db.begin().unwrap();
        let mut b = db.begin().unwrap();
        assert_eq!(a.get(&t, b"y").unwrap(), None);
        assert_eq!(b.get(&t, b"x").unwrap(), None);
        a.put(&t, b"x", b"a").unwrap();
        b.put(&t, b"y", b"b").unwrap();
        let (ra, rb) = (a.commit(), b.commit());
        assert!(
            conflict(ra),
            "older `a` wrote x after younger `b` read it absent"
        );
        rb.unwrap();
    });
}

/// Reverse ranges protect the same gaps, including the one below the lowest key seen.
#[test]
fn reverse_range_protects_the_gap_below_its_last_key() {
    each_index(|db, t| {
        db.run(|txn| {
            txn.put(&t, b"c", b"")?;
            txn.put(&t, b"e", b"")
        })
        .unwrap();
        let mut old = db.begin().unwrap();
        let young = db.begin().unwrap();
        let seen: Vec<Vec<u8>> = young
            .range_rev(&t, &b"b"[..]..=&b"f"[..])
            .unwrap()
            .map(|(k, _)| k.to_vec())
            .collect();
        assert_eq!(seen, [b"e".to_vec(), b"c".to_vec()]);
        old.put(&t, b"b", b"just inside the bottom bound").unwrap();
        assert!(conflict(old.commit()));
    });
}

/// Not over-eager: inserting outside every range read commits, and an older transaction
/// may insert into a range read by an even older one. (Masstree keeps one stamp per border
/// node of up to 15 keys, so the ranges here are far apart, in different nodes.)
#[test]
fn inserts_outside_read_ranges_commit() {
    each_index(|db, t| {
        let key = |i: u32| format!("k{i:05}").into_bytes();
        db.run(|txn| {
            for i in (0..2000).step_by(2) {
                txn.put(&t, key(i), b"")?;
            }
            Ok(())
        })
        .unwrap();
        let oldest = db.begin().unwrap();
        let mut old = db.begin().unwrap();
        let young = db.begin().unwrap();
        assert_eq!(
            oldest
                .range(&t, &key(101)[..]..&key(102)[..])
                .unwrap()
                .count(),
            0
        );
        assert_eq!(
            young
                .range(&t, &key(1801)[..]..&key(1802)[..])
                .unwrap()
                .count(),
            0
        );
        old.put(&t, key(101), b"after an older reader: fine")
            .unwrap();
        old.put(&t, key(901), b"outside every range").unwrap();
        old.commit().unwrap();
        drop((oldest, young));
    });
}

/// A range read sees a deleted key as absent, and still protects it.
#[test]
fn deleted_keys_in_a_range_are_protected_like_gaps() {
    each_index(|db, t| {
        db.run(|txn| txn.put(&t, b"k", b"v")).unwrap();
        db.run(|txn| txn.delete(&t, b"k")).unwrap();
        let mut old = db.begin().unwrap();
        let young = db.begin().unwrap();
        assert_eq!(young.range(&t, ..).unwrap().count(), 0);
        old.put(&t, b"k", b"back").unwrap();
        assert!(conflict(old.commit()));
    });
}

/// Phantom protection survives the removal of a deleted key's record: a younger reader's
/// read of the deleted key lives in the record's `tslast`, which the GC folds into the
/// index's gap stamp as it removes the key; an older transaction that inserts the key
/// afterwards (into a fresh record) must still abort.
#[test]
fn a_read_of_a_deleted_key_outlives_the_removal_of_its_record() {
    each_index(|db, t| {
        db.run(|txn| txn.put(&t, b"k", b"v")).unwrap();
        db.run(|txn| txn.delete(&t, b"k")).unwrap();
        let mut old = db.begin().unwrap();
        let young = db.begin().unwrap();
        assert_eq!(young.get(&t, b"k").unwrap(), None, "reads the tombstone");
        // The tombstone is below every active timestamp: the GC removes the record.
        let removed = db.stats().records_removed;
        db.collect_garbage();
        assert_eq!(
            db.stats().records_removed,
            removed + 1,
            "the record was not removed"
        );
        assert_eq!(db.table_index_len(&t).unwrap(), 0);
        old.put(&t, b"k", b"phantom").unwrap();
        assert!(conflict(old.commit()), "the older insert must abort");
        young.commit().unwrap();
        assert_eq!(db.begin_read_only().unwrap().get(&t, b"k").unwrap(), None);
    });
}

/// The same through a range read that covered the deleted key.
#[test]
fn a_range_read_over_a_deleted_key_outlives_the_removal_of_its_record() {
    each_index(|db, t| {
        db.run(|txn| {
            txn.put(&t, b"a", b"")?;
            txn.put(&t, b"m", b"")?;
            txn.put(&t, b"z", b"")
        })
        .unwrap();
        db.run(|txn| txn.delete(&t, b"m")).unwrap();
        let mut old = db.begin().unwrap();
        let young = db.begin().unwrap();
        assert_eq!(young.range(&t, &b"b"[..]..&b"y"[..]).unwrap().count(), 0);
        db.collect_garbage();
        assert_eq!(
            db.table_index_len(&t).unwrap(),
            2,
            "m's record was not removed"
        );
        old.put(&t, b"m", b"phantom").unwrap();
        assert!(conflict(old.commit()));
        young.commit().unwrap();
    });
}

/// An older writer whose read found the record before it was removed commits into the
/// key's new record (the dead one is refused at lock time, not written into).
#[test]
fn a_commit_that_found_a_removed_record_writes_the_key_again() {
    each_index(|db, t| {
        db.run(|txn| txn.put(&t, b"k", b"v")).unwrap();
        db.run(|txn| txn.delete(&t, b"k")).unwrap();
        let mut txn = db.begin().unwrap();
        assert_eq!(txn.get(&t, b"k").unwrap(), None); // remembers the record for its commit
        db.collect_garbage();
        assert_eq!(db.table_index_len(&t).unwrap(), 0);
        txn.put(&t, b"k", b"again").unwrap();
        txn.commit().unwrap();
        assert_eq!(
            db.begin_read_only().unwrap().get(&t, b"k").unwrap(),
            Some(&b"again"[..])
        );
        assert_eq!(db.table_index_len(&t).unwrap(), 1);
    });
}
