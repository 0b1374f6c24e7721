//! A replicated commit that empties a table (`Txn::clear`, FLUSHALL) is logged as one clear
//! instead of a deletion per key, and each backup expands it against its own copy. Checked
//! against a model: a primary runs random transactions (writes to two tables, some with a
//! clear of one of them between writes); what its commit sink logs ([`ClearFilter`]) is
//! applied to a backup ([`Db::apply_replicated_with`]); after every commit both hold the
//! model's state, the log carries no deletion a clear covers, and undoing the newest
//! commits by their undo records (the logged writes and the keys each side says the clear
//! deleted) brings both back to the model's earlier state.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use proptest::prelude::*;
use verso_engine::{ClearFilter, CommitSink, Concurrency, Db, Options, ReplicatedWrite};

const TABLES: [&str; 2] = ["t", "u"];
const KEYS: u8 = 10;

type State = BTreeMap<(String, Vec<u8>), Vec<u8>>;
/// (table, key, value or deletion); a clear has the empty table name.
type Logged = Vec<(String, Vec<u8>, Option<Vec<u8>>)>;
/// (table, key): the deletions a clear covers.
type Covered = Vec<(String, Vec<u8>)>;
/// Undo records: (table, key, timestamp of the version to drop).
type Undo = Vec<(String, Vec<u8>, u64)>;

#[derive(Default)]
struct CaptureSink {
    next: Mutex<u64>,
    /// Per commit: its timestamp, what the log carries, and the deletions a clear covers.
    filled: Mutex<Vec<(u64, Logged, Covered)>>,
}

impl CommitSink for CaptureSink {
    fn reserve(&self, _cts: u64) -> Option<u64> {
        let mut n = self.next.lock().unwrap();
        *n += 1;
        Some(*n)
    }
    fn fill(&self, _slot: u64, cts: u64, writes: &mut dyn Iterator<Item = ReplicatedWrite<'_>>) {
        let mut filter = ClearFilter::default();
        let (mut logged, mut covered) = (Vec::new(), Vec::new());
        for w in writes {
            if filter.logged(&w) {
                logged.push((
                    w.table.to_owned(),
                    w.key.to_vec(),
                    w.value.map(<[u8]>::to_vec),
                ));
            } else {
                covered.push((w.table.to_owned(), w.key.to_vec()));
            }
        }
        self.filled.lock().unwrap().push((cts, logged, covered));
    }
    fn abandon(&self, _slot: u64) {}
}

#[derive(Clone, Debug)]
enum Op {
    Put(usize, u8, u8),
    Delete(usize, u8),
    Clear(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..TABLES.len(), 0..KEYS, any::<u8>()).prop_map(|(t, k, v)| Op::Put(t, k, v)),
        2 => (0..TABLES.len(), 0..KEYS).prop_map(|(t, k)| Op::Delete(t, k)),
        1 => (0..TABLES.len()).prop_map(Op::Clear),
    ]
}

fn state_of(db: &Db) -> State {
    let txn = db.begin_read_only().unwrap();
    let mut out = State::new();
    for name in TABLES {
        let t = db.table(name).unwrap();
        for (k, v) in txn.range(&t, ..).unwrap() {
            out.insert((name.to_owned(), k.to_vec()), v.to_vec());
        }
    }
    out
}

fn undo(db: &Db, keys: &[(String, Vec<u8>, u64)]) {
    db.rollback_versions(
        keys.iter()
            .rev()
            .map(|(t, k, ts)| (t.as_str(), k.as_slice(), *ts)),
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]
    #[test]
    fn a_clear_is_logged_once_and_expanded_alike_on_every_replica(
        txns in prop::collection::vec(prop::collection::vec(op(), 1..6), 1..12),
        undo_last in 0usize..4,
    ) {
        let options = || Options::default().concurrency(Concurrency::PrecisionLocking);
        let primary = Db::open(options()).unwrap();
        let sink = Arc::new(CaptureSink::default());
        primary.set_commit_sink(sink.clone()).unwrap();
        let backup = Db::open(options()).unwrap();
        primary.set_gc_floor(0);
        backup.set_gc_floor(0);
        let tables: Vec<_> = TABLES.iter().map(|n| primary.table(n).unwrap()).collect();
        for n in TABLES {
            backup.table(n).unwrap();
        }
        let mut model = State::new();
        // Per commit: the model before it, and each side's undo records.
        let mut history: Vec<(State, Undo, Undo)> = Vec::new();
        for ops in txns {
            let before = model.clone();
            let mut txn = primary.begin().unwrap();
            for op in &ops {
                match *op {
                    Op::Put(t, k, v) => {
                        txn.put(&tables[t], [k], [v]).unwrap();
                        model.insert((TABLES[t].to_owned(), vec![k]), vec![v]);
                    }
                    Op::Delete(t, k) => {
                        txn.delete(&tables[t], [k]).unwrap();
                        model.remove(&(TABLES[t].to_owned(), vec![k]));
                    }
                    Op::Clear(t) => {
                        let live = model.keys().filter(|(n, _)| n == TABLES[t]).count() as u64;
                        prop_assert_eq!(txn.clear(&tables[t]).unwrap(), live);
                        model.retain(|(n, _), _| n != TABLES[t]);
                    }
                }
            }
            txn.commit().unwrap();
            let filled = sink.filled.lock().unwrap().pop();
            let Some((cts, logged, covered)) = filled else {
                // Nothing written: nothing to replicate.
                prop_assert_eq!(&before, &model);
                continue;
            };
            // The log carries a clear only for a cleared table, and no deletion in one.
            let cleared: Vec<&str> = logged
                .iter()
                .filter(|(t, _, _)| t.is_empty())
                .map(|(_, k, _)| std::str::from_utf8(k).unwrap())
                .collect();
            for (t, _, v) in &logged {
                prop_assert!(t.is_empty() || v.is_some() || !cleared.contains(&t.as_str()));
            }
            let mut backup_undo = Vec::new();
            backup
                .apply_replicated_with(
                    cts,
                    logged.iter().map(|(t, k, v)| ReplicatedWrite {
                        table: t,
                        key: k,
                        value: v.as_deref(),
                    }),
                    |t, k| backup_undo.push((t.to_owned(), k.to_vec(), cts)),
                )
                .unwrap();
            let logged_keys = logged
                .iter()
                .filter(|(t, _, _)| !t.is_empty())
                .map(|(t, k, _)| (t.clone(), k.clone(), cts));
            let primary_undo: Vec<_> = logged_keys
                .clone()
                .chain(covered.iter().map(|(t, k)| (t.clone(), k.clone(), cts)))
                .collect();
            backup_undo.extend(logged_keys);
            prop_assert_eq!(&state_of(&primary), &model);
            prop_assert_eq!(&state_of(&backup), &model);
            history.push((before, primary_undo, backup_undo));
        }
        // Undo the newest commits on both sides (a view change discarding them).
        for _ in 0..undo_last.min(history.len()) {
            let (before, primary_undo, backup_undo) = history.pop().unwrap();
            undo(&primary, &primary_undo);
            undo(&backup, &backup_undo);
            prop_assert_eq!(&state_of(&primary), &before);
            prop_assert_eq!(&state_of(&backup), &before);
        }
    }
}

/// A clear rolled back to a savepoint (a MULTI command that failed after it) leaves no
/// clear in the log, and a clear kept after a rolled-back one is logged once.
#[test]
fn a_clear_undone_by_a_savepoint_is_not_logged() {
    let primary = Db::open(Options::default().concurrency(Concurrency::PrecisionLocking)).unwrap();
    let sink = Arc::new(CaptureSink::default());
    primary.set_commit_sink(sink.clone()).unwrap();
    let t = primary.table("t").unwrap();
    let mut txn = primary.begin().unwrap();
    txn.put(&t, b"a", b"1").unwrap();
    txn.put(&t, b"b", b"2").unwrap();
    txn.commit().unwrap();
    let clears = |logged: &Logged| logged.iter().filter(|(t, _, _)| t.is_empty()).count();

    let mut txn = primary.begin().unwrap();
    txn.put(&t, b"c", b"3").unwrap();
    let sp = txn.savepoint();
    assert_eq!(txn.clear(&t).unwrap(), 3);
    txn.rollback_to(sp);
    txn.commit().unwrap();
    let (_, logged, covered) = sink.filled.lock().unwrap().pop().unwrap();
    assert_eq!(clears(&logged), 0, "{logged:?}");
    assert!(covered.is_empty());
    assert_eq!(
        logged,
        vec![("t".to_owned(), b"c".to_vec(), Some(b"3".to_vec()))]
    );

    let mut txn = primary.begin().unwrap();
    let sp = txn.savepoint();
    txn.clear(&t).unwrap();
    txn.rollback_to(sp);
    assert_eq!(txn.clear(&t).unwrap(), 3);
    txn.put(&t, b"d", b"4").unwrap();
    txn.commit().unwrap();
    let (_, logged, covered) = sink.filled.lock().unwrap().pop().unwrap();
    assert_eq!(clears(&logged), 1, "{logged:?}");
    assert_eq!(
        covered.len(),
        3,
        "a, b and c go with the clear: {covered:?}"
    );
    assert_eq!(logged.len(), 2, "the clear and the put of d: {logged:?}");
}
