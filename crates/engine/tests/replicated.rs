//! The replicated engine's primitives against a model: a backup installs write sets at their
//! timestamps in log order, a rollback undoes the newest operations by their undo records
//! (the exact versions they wrote), and
//! the GC floor keeps what any rollback to or above it may uncover, while the GC runs; a
//! backup's readers (the read horizon) see the durable prefix and nothing freed under them.

use std::collections::BTreeMap;

use proptest::prelude::*;
use verso_engine::{Concurrency, Db, Options, ReplicatedWrite};

type State = BTreeMap<Vec<u8>, Vec<u8>>;

#[derive(Clone, Debug)]
enum Step {
    /// Apply a transaction writing these (key, value or delete).
    Apply(Vec<(u8, Option<u8>)>),
    /// Roll back to just after the n-th applied operation from the end (never below the
    /// durable point).
    Rollback(usize),
    /// Mark the operations so far durable: no rollback goes below them again.
    Durable,
    Gc,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        6 => prop::collection::vec((0u8..12, prop::option::of(any::<u8>())), 1..4).prop_map(Step::Apply),
        1 => (0usize..4).prop_map(Step::Rollback),
        1 => Just(Step::Durable),
        2 => Just(Step::Gc),
    ]
}

fn state_of(db: &Db) -> State {
    let t = db.table("t").unwrap();
    let txn = db.begin_read_only().unwrap();
    let mut out = State::new();
    for k in 0u8..12 {
        if let Some(v) = txn.get(&t, [k]).unwrap() {
            out.insert(vec![k], v.to_vec());
        }
    }
    out
}

/// Reads every key in `txn`, as often as asked.
fn read_all<'a>(txn: verso_engine::Txn<'a>, t: verso_engine::Table) -> Box<dyn Fn() -> State + 'a> {
    Box::new(move || {
        let mut out = State::new();
        for k in 0u8..12 {
            if let Some(v) = txn.get(&t, [k]).unwrap() {
                out.insert(vec![k], v.to_vec());
            }
        }
        out
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]
    #[test]
    fn rollback_and_gc_floor_agree_with_a_model(steps in prop::collection::vec(step(), 1..60)) {
        let db = Db::open(Options::default().concurrency(Concurrency::PrecisionLocking)).unwrap();
        db.set_gc_floor(0);
        // (timestamp, state after, keys written) of each applied operation above the
        // durable point, and the durable one.
        let mut applied: Vec<(u64, State, Vec<Vec<u8>>)> = Vec::new();
        let mut durable: (u64, State) = (0, State::new());
        let mut ts = 1000u64;
        let mut held: Vec<(Box<dyn Fn() -> State + '_>, State)> = Vec::new();
        for s in steps {
            match s {
                Step::Apply(writes) => {
                    ts += 7;
                    let mut state = applied.last().map_or(durable.1.clone(), |a| a.1.clone());
                    let writes: Vec<(Vec<u8>, Option<Vec<u8>>)> = writes
                        .into_iter()
                        .map(|(k, v)| (vec![k], v.map(|v| vec![v, k])))
                        .collect();
                    // The engine's write sets hold one write per key: keep the last.
                    let mut dedup: BTreeMap<Vec<u8>, Option<Vec<u8>>> = BTreeMap::new();
                    for (k, v) in writes {
                        dedup.insert(k, v);
                    }
                    for (k, v) in &dedup {
                        match v {
                            Some(v) => { state.insert(k.clone(), v.clone()); }
                            None => { state.remove(k); }
                        }
                    }
                    db.apply_replicated(ts, dedup.iter().map(|(k, v)| ReplicatedWrite {
                        table: "t",
                        key: k,
                        value: v.as_deref(),
                    })).unwrap();
                    applied.push((ts, state, dedup.keys().cloned().collect()));
                }
                Step::Rollback(n) => {
                    // Newest first, each by its own undo records.
                    for _ in 0..n.min(applied.len()) {
                        let (ts, _, keys) = applied.pop().expect("counted");
                        db.rollback_versions(keys.iter().map(|k| ("t", k.as_slice(), ts)));
                    }
                }
                Step::Durable => {
                    if let Some((ts, state, _)) = applied.pop() {
                        durable = (ts, state);
                        applied.clear();
                        db.set_gc_floor(durable.0);
                    }
                }
                Step::Gc => db.collect_garbage(),
            }
            let want = applied.last().map_or(&durable.1, |a| &a.1);
            prop_assert_eq!(&state_of(&db), want);
            // A backup's reader sees exactly the durable prefix (`set_read_horizon`), and
            // one begun earlier keeps seeing its prefix while the GC, later operations
            // and rollbacks run.
            db.set_read_horizon(Some(durable.0 + 1));
            prop_assert_eq!(&state_of(&db), &durable.1);
            if held.len() < 3 {
                let t = db.table("t").unwrap();
                held.push((read_all(db.begin_read_only().unwrap(), t), durable.1.clone()));
            }
            db.set_read_horizon(None);
            for (reader, seen) in &held {
                prop_assert_eq!(&reader(), seen);
            }
        }
    }
}

/// A replica's database with a GC floor (`None`: none).
fn replica(floor: Option<u64>) -> Db {
    let db = Db::open(Options::default().concurrency(Concurrency::PrecisionLocking)).unwrap();
    if let Some(f) = floor {
        db.set_gc_floor(f);
    }
    db
}

/// Applies one replicated write of `key` at `ts`.
fn put(db: &Db, ts: u64, key: u8, value: &[u8]) {
    let write = ReplicatedWrite {
        table: "t",
        key: &[key],
        value: Some(value),
    };
    db.apply_replicated(ts, std::iter::once(write)).unwrap();
}

/// Undoes the write of `key` at `ts`.
fn undo(db: &Db, ts: u64, key: u8) {
    db.rollback_versions(std::iter::once(("t", &[key][..], ts)));
}

/// What `key` holds now.
fn value_of(db: &Db, key: u8) -> Option<Vec<u8>> {
    state_of(db).remove(&[key][..])
}

/// Without the floor the GC frees the version a rollback needs: the check above can fail.
#[test]
fn without_the_floor_a_rollback_uncovers_nothing() {
    let db = replica(None);
    put(&db, 10, 5, b"old");
    put(&db, 20, 5, b"new");
    db.collect_garbage();
    assert_eq!(value_of(&db, 5).as_deref(), Some(&b"new"[..]));
    undo(&db, 20, 5);
    // The old version was collected (no reader, no floor): the key is gone, not "old".
    assert_eq!(value_of(&db, 5), None);
}

/// NCC's timestamps do not grow along the log: an operation may write below one logged
/// before it (on another key). Undoing it drops its own version only; "everything above
/// the last kept operation's timestamp" would keep it.
#[test]
fn an_undo_drops_its_own_versions_whatever_the_timestamps_before_it() {
    let db = replica(Some(0));
    put(&db, 50, 1, b"a"); // op 1
    put(&db, 20, 2, b"b"); // op 2, lower
    undo(&db, 20, 2); // undo op 2
    assert_eq!(value_of(&db, 1).as_deref(), Some(&b"a"[..]));
    assert_eq!(value_of(&db, 2), None, "op 2's write survived its undo");
}

/// A version below the newest is dropped from the middle of the chain; readers then see
/// the chain without it, and a key whose versions are all dropped is gone.
#[test]
fn an_undo_unlinks_a_version_from_the_middle_of_a_chain() {
    let db = replica(Some(0));
    for (ts, v) in [(10, &b"one"[..]), (20, b"two"), (30, b"three")] {
        put(&db, ts, 5, v);
    }
    let t = db.table("t").unwrap();
    let held = db.begin_read_only().unwrap(); // reads at the newest
    undo(&db, 20, 5);
    assert_eq!(held.get(&t, [5u8]).unwrap(), Some(&b"three"[..]));
    undo(&db, 30, 5);
    assert_eq!(value_of(&db, 5).as_deref(), Some(&b"one"[..]));
    // Nothing at 25: nothing changes.
    undo(&db, 25, 5);
    assert_eq!(value_of(&db, 5).as_deref(), Some(&b"one"[..]));
    undo(&db, 10, 5);
    assert_eq!(value_of(&db, 5), None);
    drop(held);
    db.collect_garbage();
}

/// A reader may hold a version an undo drops (it read it before the undo), not only walk
/// past it: the version is freed only once that reader has ended.
#[test]
fn a_rolled_back_version_outlives_the_readers_that_saw_it() {
    // The floor keeps "old", which the undo uncovers.
    let db = replica(Some(15));
    put(&db, 10, 5, b"old");
    put(&db, 20, 5, b"new");
    let t = db.table("t").unwrap();
    let reader = db.begin_read_only().unwrap();
    let got = reader.get(&t, [5u8]).unwrap();
    assert_eq!(got, Some(&b"new"[..]));
    db.collect_garbage();
    let before = db.stats().gc_pending;
    undo(&db, 20, 5);
    db.collect_garbage();
    db.collect_garbage();
    assert!(
        db.stats().gc_pending > before,
        "the dropped version was freed under a reader that holds it"
    );
    assert_eq!(got, Some(&b"new"[..]));
    reader.abort();
    db.set_gc_floor(u64::MAX);
    db.collect_garbage();
    assert!(
        db.stats().gc_pending <= before,
        "not freed once the reader ended"
    );
    assert_eq!(value_of(&db, 5).as_deref(), Some(&b"old"[..]));
}
