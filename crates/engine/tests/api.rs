//! The embedded API as a user sees it: limits, typed errors, read-your-own-writes, ranges in
//! both directions, read-only transactions, and the conflicts MVTO must raise.

use std::ops::Bound;

use verso_engine::{ConflictReason, Db, Error, Options};

fn db() -> Db {
    Db::open(Options::default()).unwrap()
}

#[test]
fn put_get_delete_and_empty_key() {
    let db = db();
    let t = db.table("t").unwrap();
    let mut txn = db.begin().unwrap();
    txn.put(&t, b"", b"empty key").unwrap();
    txn.put(&t, b"a\0b", b"").unwrap();
    assert_eq!(txn.get(&t, b"").unwrap(), Some(&b"empty key"[..]));
    txn.commit().unwrap();

    let mut txn = db.begin().unwrap();
    assert_eq!(txn.get(&t, b"a\0b").unwrap(), Some(&b""[..]));
    assert_eq!(txn.get(&t, b"a").unwrap(), None);
    txn.delete(&t, b"").unwrap();
    assert_eq!(txn.get(&t, b"").unwrap(), None, "own delete is visible");
    txn.commit().unwrap();
    assert_eq!(db.begin().unwrap().get(&t, b"").unwrap(), None);
}

/// `put_parts` stores the concatenation, in every protocol, with the value limit applied to
/// the whole, and replaces an earlier write of the key like `put`.
#[test]
fn put_parts_stores_the_concatenation() {
    for concurrency in [
        verso_engine::Concurrency::Mvto,
        verso_engine::Concurrency::PrecisionLocking,
        verso_engine::Concurrency::TwoPhaseLocking,
    ] {
        let db = Db::open(
            Options::default()
                .concurrency(concurrency)
                .value_size_max(8),
        )
        .unwrap();
        let t = db.table("t").unwrap();
        let mut txn = db.begin().unwrap();
        txn.put(&t, b"k", b"old").unwrap();
        txn.put_parts(&t, b"k", &[b"ab", b"", b"cd"]).unwrap();
        assert_eq!(txn.get(&t, b"k").unwrap(), Some(&b"abcd"[..]));
        txn.put_parts(&t, b"e", &[]).unwrap();
        assert!(matches!(
            txn.put_parts(&t, b"big", &[b"12345", b"6789"]),
            Err(Error::ValueTooLarge { len: 9, max: 8 })
        ));
        txn.commit().unwrap();
        let r = db.begin_read_only().unwrap();
        assert_eq!(
            r.get(&t, b"k").unwrap(),
            Some(&b"abcd"[..]),
            "{concurrency:?}"
        );
        assert_eq!(r.get(&t, b"e").unwrap(), Some(&b""[..]));
        assert_eq!(r.get(&t, b"big").unwrap(), None);
    }
}

#[test]
fn limits_are_typed_errors_and_the_transaction_stays_usable() {
    let db = Db::open(Options::default().key_size_max(4).value_size_max(8)).unwrap();
    let t = db.table("t").unwrap();
    let mut txn = db.begin().unwrap();
    assert_eq!(
        txn.put(&t, b"12345", b"v"),
        Err(Error::KeyTooLarge { len: 5, max: 4 })
    );
    assert_eq!(
        txn.put(&t, b"k", [0u8; 9]),
        Err(Error::ValueTooLarge { len: 9, max: 8 })
    );
    assert_eq!(
        txn.get(&t, b"12345"),
        Err(Error::KeyTooLarge { len: 5, max: 4 })
    );
    assert!(matches!(
        txn.range(&t, &b"12345"[..]..),
        Err(Error::KeyTooLarge { .. })
    ));
    txn.put(&t, b"1234", [7u8; 8]).unwrap();
    txn.commit().unwrap();
    assert_eq!(
        db.begin().unwrap().get(&t, b"1234").unwrap(),
        Some(&[7u8; 8][..])
    );
    assert!(matches!(
        Db::open(Options::default().run_attempts(0)),
        Err(Error::InvalidOptions { .. })
    ));
}

#[test]
fn default_limits_are_64k_keys_and_64m_values() {
    let db = db();
    let t = db.table("t").unwrap();
    let mut txn = db.begin().unwrap();
    txn.put(&t, vec![1u8; 64 << 10], b"ok").unwrap();
    assert!(matches!(
        txn.put(&t, vec![1u8; (64 << 10) + 1], b"x"),
        Err(Error::KeyTooLarge { .. })
    ));
    txn.commit().unwrap();
}

#[test]
fn tables_are_separate_and_handles_are_checked() {
    let db = db();
    let (a, b) = (db.table("a").unwrap(), db.table("b").unwrap());
    assert_eq!(db.table("a").unwrap(), a);
    assert!(matches!(db.table(""), Err(Error::InvalidTableName { .. })));
    db.run(|txn| txn.put(&a, b"k", b"in a")).unwrap();
    let txn = db.begin().unwrap();
    assert_eq!(txn.get(&b, b"k").unwrap(), None);
    let other = Db::open(Options::default()).unwrap();
    let foreign = other.table("a").unwrap();
    assert_eq!(txn.get(&foreign, b"k"), Err(Error::ForeignTable));
    assert_eq!(db.table_names(), ["a", "b"]);
}

#[test]
fn read_only_transactions_refuse_writes() {
    let db = db();
    let t = db.table("t").unwrap();
    let mut txn = db.begin_read_only().unwrap();
    assert_eq!(txn.put(&t, b"k", b"v"), Err(Error::ReadOnly));
    assert_eq!(txn.delete(&t, b"k"), Err(Error::ReadOnly));
    txn.commit().unwrap();
}

#[test]
fn ranges_merge_own_writes_in_both_directions() {
    let db = db();
    let t = db.table("t").unwrap();
    db.run(|txn| {
        for k in [&b"b"[..], b"d", b"f", b"h"] {
            txn.put(&t, k, b"old")?;
        }
        Ok(())
    })
    .unwrap();
    let mut txn = db.begin().unwrap();
    txn.put(&t, b"a", b"new").unwrap();
    txn.put(&t, b"e", b"new").unwrap();
    txn.delete(&t, b"f").unwrap();
    txn.put(&t, b"d", b"new").unwrap();
    let collect = |it: verso_engine::Range<'_>| {
        it.map(|(k, v)| (k.to_vec(), v.to_vec()))
            .collect::<Vec<_>>()
    };
    let fwd = collect(txn.range(&t, ..).unwrap());
    let want: Vec<(Vec<u8>, Vec<u8>)> = [
        ("a", "new"),
        ("b", "old"),
        ("d", "new"),
        ("e", "new"),
        ("h", "old"),
    ]
    .iter()
    .map(|(k, v)| (k.as_bytes().to_vec(), v.as_bytes().to_vec()))
    .collect();
    assert_eq!(fwd, want);
    let mut rev = collect(txn.range_rev(&t, ..).unwrap());
    rev.reverse();
    assert_eq!(rev, want);
    let bounded: Vec<Vec<u8>> = txn
        .range(&t, (Bound::Excluded(&b"b"[..]), Bound::Included(&b"h"[..])))
        .unwrap()
        .map(|(k, _)| k.to_vec())
        .collect();
    assert_eq!(bounded, [b"d".to_vec(), b"e".to_vec(), b"h".to_vec()]);
    let inverted = txn.range(&t, &b"z"[..]..&b"a"[..]).unwrap().count();
    assert_eq!(inverted, 0);
}

#[test]
fn long_ranges_cross_chunk_boundaries() {
    let db = db();
    let t = db.table("t").unwrap();
    db.run(|txn| {
        for i in 0u32..1000 {
            txn.put(&t, i.to_be_bytes(), i.to_le_bytes())?;
        }
        Ok(())
    })
    .unwrap();
    let txn = db.begin_read_only().unwrap();
    let got: Vec<u32> = txn
        .range(&t, ..)
        .unwrap()
        .map(|(k, _)| u32::from_be_bytes(k.try_into().unwrap()))
        .collect();
    assert_eq!(got, (0..1000).collect::<Vec<_>>());
    let got: Vec<u32> = txn
        .range_rev(&t, &100u32.to_be_bytes()[..]..=&900u32.to_be_bytes()[..])
        .unwrap()
        .map(|(k, _)| u32::from_be_bytes(k.try_into().unwrap()))
        .collect();
    assert_eq!(got, (100..=900).rev().collect::<Vec<_>>());
}

/// vMVCC Figure 2(b): a younger reader makes an older writer abort.
#[test]
fn older_writer_aborts_after_younger_read() {
    let db = db();
    let t = db.table("t").unwrap();
    let mut old = db.begin().unwrap();
    let young = db.begin().unwrap();
    assert_eq!(young.get(&t, b"x").unwrap(), None);
    old.put(&t, b"x", b"1").unwrap();
    assert_eq!(
        old.commit(),
        Err(Error::Conflict {
            reason: ConflictReason::ReadByYounger
        })
    );
    young.commit().unwrap();
}

/// vMVCC Figure 2(a): an older reader still sees its snapshot after a younger write commits.
#[test]
fn older_reader_keeps_its_snapshot() {
    let db = db();
    let t = db.table("t").unwrap();
    db.run(|txn| txn.put(&t, b"k", b"u")).unwrap();
    let reader = db.begin_read_only().unwrap();
    db.run(|txn| txn.put(&t, b"k", b"v")).unwrap();
    assert_eq!(reader.get(&t, b"k").unwrap(), Some(&b"u"[..]));
    assert_eq!(db.begin().unwrap().get(&t, b"k").unwrap(), Some(&b"v"[..]));
}

#[test]
fn older_writer_aborts_after_younger_write() {
    let db = db();
    let t = db.table("t").unwrap();
    let mut old = db.begin().unwrap();
    let mut young = db.begin().unwrap();
    young.put(&t, b"x", b"young").unwrap();
    young.commit().unwrap();
    old.put(&t, b"x", b"old").unwrap();
    assert!(matches!(old.commit(), Err(Error::Conflict { .. })));
    assert_eq!(
        db.begin().unwrap().get(&t, b"x").unwrap(),
        Some(&b"young"[..])
    );
}

#[test]
fn dropping_a_transaction_aborts_it() {
    let db = db();
    let t = db.table("t").unwrap();
    {
        let mut txn = db.begin().unwrap();
        txn.put(&t, b"k", b"v").unwrap();
    }
    assert_eq!(db.stats().aborts, 1);
    let check = db.begin_read_only().unwrap();
    assert_eq!(check.get(&t, b"k").unwrap(), None);
    check.commit().unwrap();
    assert_eq!((db.stats().aborts, db.stats().read_only_commits), (1, 1));
}

#[test]
fn run_retries_conflicts_and_returns_other_errors() {
    let db = db();
    let t = db.table("t").unwrap();
    let mut calls = 0;
    let r: Result<(), Error> = db.run(|txn| {
        calls += 1;
        txn.put(&t, b"k", b"v")?;
        Err(Error::ReadOnly)
    });
    assert_eq!(r, Err(Error::ReadOnly));
    assert_eq!(calls, 1, "non-conflict errors are not retried");

    let mut calls = 0;
    let r: Result<(), Error> = db.run(|_| {
        calls += 1;
        Err(Error::Conflict {
            reason: ConflictReason::ReadByYounger,
        })
    });
    assert!(r.unwrap_err().is_conflict());
    assert_eq!(
        calls,
        verso_engine::RUN_ATTEMPTS_DEFAULT,
        "conflicts are retried a bounded number of times"
    );
}

/// `version_of` (what WATCH rests on): equal exactly when no commit wrote the key in
/// between, including a key deleted and collected, and a key created and deleted again.
#[test]
fn key_versions_change_exactly_when_the_key_is_written() {
    use verso_engine::Concurrency;
    for cc in [
        Concurrency::Mvto,
        Concurrency::PrecisionLocking,
        Concurrency::TwoPhaseLocking,
    ] {
        let db = Db::open(Options::default().concurrency(cc)).unwrap();
        let t = db.table("t").unwrap();
        let version = |key: &[u8]| {
            let txn = db.begin_read_only().unwrap();
            let v = txn.version_of(&t, key).unwrap();
            txn.commit().unwrap();
            v
        };
        let absent = version(b"k");
        assert_eq!(version(b"k"), absent, "{cc:?}: nothing happened");
        db.run(|txn| txn.put(&t, b"other", b"x")).unwrap();
        assert_eq!(version(b"k"), absent, "{cc:?}: another key was written");
        db.run(|txn| txn.put(&t, b"k", b"1")).unwrap();
        let one = version(b"k");
        assert_ne!(one, absent, "{cc:?}: created");
        db.run(|txn| txn.put(&t, b"k", b"1")).unwrap();
        let again = version(b"k");
        assert_ne!(again, one, "{cc:?}: rewritten with the same value");
        db.run(|txn| txn.delete(&t, b"k")).unwrap();
        let deleted = version(b"k");
        assert_ne!(deleted, again, "{cc:?}: deleted");
        db.collect_garbage();
        db.collect_garbage();
        assert_eq!(db.table_index_len(&t).unwrap(), 1, "{cc:?}: k was removed");
        assert_eq!(version(b"k"), deleted, "{cc:?}: a removal is not a write");
        // Created and deleted again, and collected: still a change since `absent`.
        let before = version(b"k");
        db.run(|txn| txn.put(&t, b"k", b"2")).unwrap();
        db.run(|txn| txn.delete(&t, b"k")).unwrap();
        db.collect_garbage();
        db.collect_garbage();
        assert_eq!(db.table_index_len(&t).unwrap(), 1);
        assert_ne!(
            version(b"k"),
            before,
            "{cc:?}: created, deleted and collected"
        );
        // Own uncommitted writes do not count.
        let mut txn = db.begin().unwrap();
        let seen = txn.version_of(&t, b"other").unwrap();
        txn.put(&t, b"other", b"y").unwrap();
        assert_eq!(txn.version_of(&t, b"other").unwrap(), seen);
        txn.commit().unwrap();
    }
}

/// The age of the oldest active transaction, for every timestamp algorithm.
#[test]
fn the_oldest_transaction_age_is_reported() {
    use std::time::Duration;
    use verso_engine::TimestampSource;
    for source in [
        TimestampSource::Auto,
        TimestampSource::Atomic,
        TimestampSource::Mutex,
    ] {
        let db = Db::open(Options::default().timestamps(source)).unwrap();
        assert_eq!(db.oldest_transaction_age(), None, "{source:?}");
        let old = db.begin_read_only().unwrap();
        std::thread::sleep(Duration::from_millis(60));
        let young = db.begin().unwrap();
        let age = db.oldest_transaction_age().expect("two are active");
        assert!(age >= Duration::from_millis(50), "{source:?}: {age:?}");
        drop(old);
        assert!(
            db.oldest_transaction_age().is_some(),
            "{source:?}: one is active"
        );
        drop(young);
        assert_eq!(db.oldest_transaction_age(), None, "{source:?}");
    }
}

/// Savepoints against a model: random puts and deletes (enough keys that the write set's
/// hash index is used), savepoints taken, released and rolled back (nested), and after
/// each step the transaction's view of every key equals the model's; the committed result
/// is the model's too.
#[test]
fn savepoints_undo_exactly_the_writes_since() {
    use std::collections::BTreeMap;
    /// Each key's value as the transaction sees it (`None`: deleted by it).
    type Model = BTreeMap<u8, Option<Vec<u8>>>;
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for round in 0..200 {
        let db =
            Db::open(Options::default().concurrency(verso_engine::Concurrency::PrecisionLocking))
                .unwrap();
        let t = db.table("t").unwrap();
        let mut txn = db.begin().unwrap();
        // The model: the key's value as the transaction sees it; a stack of saved models.
        let mut model: Model = BTreeMap::new();
        let mut stack: Vec<(verso_engine::Savepoint, Model)> = Vec::new();
        for step in 0..60 {
            match next() % 8 {
                0..=3 => {
                    let k = (next() % 24) as u8;
                    let v = format!("{round}-{step}").into_bytes();
                    txn.put(&t, [k], &v).unwrap();
                    model.insert(k, Some(v));
                }
                4 => {
                    let k = (next() % 24) as u8;
                    txn.delete(&t, [k]).unwrap();
                    model.insert(k, None);
                }
                5 => stack.push((txn.savepoint(), model.clone())),
                6 => {
                    if let Some((sp, saved)) = stack.pop() {
                        txn.rollback_to(sp);
                        model = saved;
                    }
                }
                _ => {
                    if let Some((sp, _)) = stack.pop() {
                        txn.release(sp);
                    }
                }
            }
            for k in 0..24u8 {
                let want = model.get(&k).cloned().flatten();
                assert_eq!(
                    txn.get(&t, [k]).unwrap().map(<[u8]>::to_vec),
                    want,
                    "round {round} step {step} key {k}"
                );
            }
        }
        while let Some((sp, _)) = stack.pop() {
            txn.release(sp);
        }
        txn.commit().unwrap();
        let r = db.begin_read_only().unwrap();
        for k in 0..24u8 {
            let want = model.get(&k).cloned().flatten();
            assert_eq!(r.get(&t, [k]).unwrap().map(<[u8]>::to_vec), want);
        }
    }
}
