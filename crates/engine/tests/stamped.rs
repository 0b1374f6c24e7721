//! Versions at timestamps chosen outside the engine (an NCC server's): installs at given
//! timestamps, read stamps raised for reads the engine did not see, and both read back,
//! against a model; and the engine's own transactions ordered by those stamps.

use std::collections::BTreeMap;
use std::iter::once;

use proptest::prelude::*;
use verso_engine::{Concurrency, ConflictReason, Db, Error, IndexKind, Options, ReplicatedWrite};

const TABLE: &str = "ncc";

fn db() -> Db {
    db_on(IndexKind::Masstree)
}

fn db_on(index: IndexKind) -> Db {
    Db::open(
        Options::default()
            .concurrency(Concurrency::Mvto)
            .index(index),
    )
    .unwrap()
}

fn install(db: &Db, key: &[u8], ts: u64, value: &[u8]) {
    let w = ReplicatedWrite {
        table: TABLE,
        key,
        value: Some(value),
    };
    db.apply_replicated(ts, once(w)).unwrap();
}

#[derive(Clone, Debug)]
enum Step {
    /// Install a new version of the key, this far above its newest timestamp and stamp.
    Install(u8, u64, u8),
    /// Raise the key's read stamp by this much above its newest timestamp.
    Read(u8, u64),
    Load(u8),
    Gc,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        3 => (0u8..8, 1u64..50, any::<u8>()).prop_map(|(k, d, v)| Step::Install(k, d, v)),
        3 => (0u8..8, 0u64..50).prop_map(|(k, d)| Step::Read(k, d)),
        3 => (0u8..8).prop_map(Step::Load),
        1 => Just(Step::Gc),
    ]
}

#[derive(Clone, Copy, Debug, Default)]
struct Model {
    /// Newest version: (timestamp, value).
    newest: Option<(u64, u8)>,
    /// Highest read raised or version installed.
    stamp: u64,
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// What `newest_stamped` reads back is the newest installed version exactly, and a read
    /// stamp at least the model's (a key without a record reports its gap's stamp, which
    /// may be a neighbour's) and at most the highest stamp given to any key. Loading a key
    /// never written leaves no record behind.
    #[test]
    fn installs_and_read_stamps_read_back(
        steps in prop::collection::vec(step(), 1..60),
        btree in any::<bool>(),
    ) {
        let db = db_on(if btree { IndexKind::LockedBTree } else { IndexKind::Masstree });
        db.table(TABLE).unwrap();
        let mut model: BTreeMap<u8, Model> = BTreeMap::new();
        let mut highest = 0u64;
        for s in steps {
            match s {
                Step::Install(k, d, v) => {
                    let m = model.entry(k).or_default();
                    let ts = m.stamp.max(m.newest.map_or(0, |n| n.0)) + d;
                    install(&db, &[k], ts, &[v]);
                    m.newest = Some((ts, v));
                    m.stamp = m.stamp.max(ts);
                    highest = highest.max(ts);
                }
                Step::Read(k, d) => {
                    let m = model.entry(k).or_default();
                    let ts = m.newest.map_or(0, |n| n.0) + d + 1;
                    db.raise_read_stamp(TABLE, &[k], ts).unwrap();
                    m.stamp = m.stamp.max(ts);
                    highest = highest.max(ts);
                }
                Step::Load(k) => {
                    let got = db.newest_stamped(TABLE, &[k]).unwrap();
                    let m = model.get(&k).copied().unwrap_or_default();
                    let want = m.newest.map(|(ts, v)| (ts, Some(vec![v])));
                    prop_assert_eq!(&got.version, &want, "key {}", k);
                    prop_assert!(got.read_stamp >= m.stamp, "key {}: {:?} vs {:?}", k, got, m);
                    prop_assert!(got.read_stamp <= highest, "key {}: {:?} above {}", k, got, highest);
                }
                Step::Gc => db.collect_garbage(),
            }
        }
        let t = db.table(TABLE).unwrap();
        let written = model.values().filter(|m| m.newest.is_some()).count();
        prop_assert_eq!(db.table_index_len(&t).unwrap(), written, "records of keys only read");
    }
}

/// A read answered outside the engine orders the engine's own writers: one whose
/// timestamp is below the read stamp aborts, as under a read it made itself.
#[test]
fn a_raised_read_stamp_aborts_an_older_engine_writer() {
    let db = db();
    let t = db.table(TABLE).unwrap();
    install(&db, b"k", 5, b"v");
    db.raise_read_stamp(TABLE, b"k", 1 << 62).unwrap();
    let mut txn = db.begin().unwrap();
    txn.put(&t, b"k", b"w").unwrap();
    match txn.commit() {
        Err(Error::Conflict {
            reason: ConflictReason::ReadByYounger,
            ..
        }) => {}
        other => panic!("expected a conflict with the younger read, got {other:?}"),
    }
    // And a key without a record: the gap's stamp does the same.
    db.raise_read_stamp(TABLE, b"absent", 1 << 62).unwrap();
    let mut txn = db.begin().unwrap();
    txn.put(&t, b"absent", b"w").unwrap();
    assert!(
        txn.commit().is_err(),
        "an insert under a younger read commits"
    );
    let got = db.newest_stamped(TABLE, b"absent").unwrap();
    assert_eq!(got.version, None);
    assert!(got.read_stamp >= 1 << 62);
}

#[test]
fn bad_input_is_an_error() {
    let db = db();
    assert!(matches!(
        db.newest_stamped("", b"k"),
        Err(Error::InvalidTableName { .. })
    ));
    let long = vec![0u8; 1 << 20];
    db.table(TABLE).unwrap();
    assert!(matches!(
        db.raise_read_stamp(TABLE, &long, 7),
        Err(Error::KeyTooLarge { .. })
    ));
    assert!(matches!(
        db.newest_stamped(TABLE, &long),
        Err(Error::KeyTooLarge { .. })
    ));
}
