//! Durability through the engine: what commits survives a reopen (lazy and sync, with and
//! without checkpoints), the data directory refuses a second opener and newer formats,
//! damage is reported with file and offset, and write-path faults turn into errors.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use verso_engine::log::FaultyStorage;
use verso_engine::{Concurrency, Db, Durability, Error, Options};

type Model = BTreeMap<(String, Vec<u8>), Vec<u8>>;

fn options(dir: &Path, durability: Durability) -> Options {
    Options::default()
        .durability(durability)
        .data_dir(dir)
        .logs(2)
}

/// Every table's contents, read in one transaction.
fn contents(db: &Db) -> Model {
    let txn = db.begin_read_only().unwrap();
    let mut out = Model::new();
    for name in db.table_names() {
        let t = db.table(&name).unwrap();
        for (k, v) in txn.range(&t, ..).unwrap() {
            out.insert((name.clone(), k.to_vec()), v.to_vec());
        }
    }
    out
}

/// Deterministic mixed writes on two tables, mirrored in `model`.
fn write_some(db: &Db, model: &mut Model, seed: u64, txns: usize) {
    let tables = [db.table("a").unwrap(), db.table("b").unwrap()];
    let mut x = seed | 1;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for _ in 0..txns {
        let mut txn = db.begin().unwrap();
        let mut staged = Vec::new();
        for _ in 0..(next() % 4 + 1) {
            let t = (next() % 2) as usize;
            let key = format!("k{:03}", next() % 200).into_bytes();
            let name = ["a", "b"][t].to_string();
            if next() % 5 == 0 {
                txn.delete(&tables[t], &key).unwrap();
                staged.push((name, key, None));
            } else {
                let value = format!("v{}", next()).into_bytes();
                txn.put(&tables[t], &key, &value).unwrap();
                staged.push((name, key, Some(value)));
            }
        }
        txn.commit().unwrap();
        for (name, key, value) in staged {
            match value {
                Some(v) => model.insert((name, key), v),
                None => model.remove(&(name, key)),
            };
        }
    }
}

#[test]
fn commits_survive_reopen_in_every_mode_and_protocol() {
    for durability in [Durability::Lazy, Durability::Sync] {
        for cc in [Concurrency::Mvto, Concurrency::PrecisionLocking] {
            let dir = tempfile::tempdir().unwrap();
            let mut model = Model::new();
            for round in 0..3u64 {
                let db = Db::open(options(dir.path(), durability).concurrency(cc)).unwrap();
                assert_eq!(contents(&db), model, "{durability} {cc} round {round}");
                write_some(&db, &mut model, round + 1, 300);
                assert_eq!(contents(&db), model);
                // A clean close flushes the lazy log.
            }
            let db = Db::open(options(dir.path(), durability).concurrency(cc)).unwrap();
            assert_eq!(contents(&db), model, "{durability} {cc} final");
        }
    }
}

#[test]
fn checkpoints_cover_the_logs_they_delete() {
    let dir = tempfile::tempdir().unwrap();
    let mut model = Model::new();
    {
        let db = Db::open(options(dir.path(), Durability::Lazy)).unwrap();
        write_some(&db, &mut model, 7, 500);
        let report = db.checkpoint().unwrap();
        let live = model.len() as u64;
        assert_eq!(report.entries, live, "a checkpoint holds every live key");
        write_some(&db, &mut model, 8, 200);
        db.checkpoint().unwrap();
        write_some(&db, &mut model, 9, 200);
    }
    let checkpoints = std::fs::read_dir(dir.path())
        .unwrap()
        .filter(|e| {
            let name = e.as_ref().unwrap().file_name();
            name.to_str().unwrap().starts_with("checkpoint-")
        })
        .count();
    assert_eq!(checkpoints, 2, "the newest and the one before it are kept");
    let db = Db::open(options(dir.path(), Durability::Lazy)).unwrap();
    let report = db.recovery_report().unwrap();
    assert!(report.checkpoint_ts.is_some());
    assert_eq!(contents(&db), model);
    // New commits after recovery get timestamps above every recovered one.
    write_some(&db, &mut model, 10, 50);
    assert_eq!(contents(&db), model);
}

#[test]
fn a_second_open_of_the_directory_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let _db = Db::open(options(dir.path(), Durability::Lazy)).unwrap();
    let err = Db::open(options(dir.path(), Durability::Lazy)).unwrap_err();
    assert!(
        matches!(&err, Error::Durability { reason } if reason.contains("in use")),
        "{err}"
    );
}

#[test]
fn a_newer_format_is_refused_with_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("FORMAT"), "verso-data 99\n").unwrap();
    let err = Db::open(options(dir.path(), Durability::Lazy)).unwrap_err();
    assert!(err.to_string().contains("newer Verso"), "{err}");
}

fn log_files(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "vlog"))
        .collect();
    v.sort();
    v
}

#[test]
fn a_torn_tail_is_cut_and_damage_elsewhere_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let mut model = Model::new();
    {
        let db = Db::open(options(dir.path(), Durability::Sync)).unwrap();
        write_some(&db, &mut model, 3, 100);
    }
    // A torn tail: half a frame of garbage at the end of one log.
    let logs = log_files(dir.path());
    let biggest = logs
        .iter()
        .max_by_key(|p| std::fs::metadata(p).unwrap().len())
        .unwrap()
        .clone();
    let mut bytes = std::fs::read(&biggest).unwrap();
    let good_len = bytes.len();
    bytes.extend_from_slice(&[0x40, 0, 0, 0, 1, 2, 3]);
    std::fs::write(&biggest, &bytes).unwrap();
    {
        let db = Db::open(options(dir.path(), Durability::Sync)).unwrap();
        assert_eq!(contents(&db), model);
        let report = db.recovery_report().unwrap();
        assert_eq!(
            report.logs.truncated,
            vec![(biggest.clone(), good_len as u64)]
        );
    }
    assert_eq!(std::fs::metadata(&biggest).unwrap().len(), good_len as u64);
    // Damage in the middle (valid marks follow it): refused, naming the file and offset.
    let mut bytes = std::fs::read(&biggest).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0xff;
    std::fs::write(&biggest, &bytes).unwrap();
    let err = Db::open(options(dir.path(), Durability::Sync)).unwrap_err();
    let text = err.to_string();
    assert!(text.contains(biggest.to_str().unwrap()), "{text}");
    assert!(text.contains("damaged at byte"), "{text}");
    // The operator may choose to cut there: the result is still a consistent prefix.
    let db = Db::open(options(dir.path(), Durability::Sync).recovery_truncate(true)).unwrap();
    let report = db.recovery_report().unwrap();
    let (path, offset) = &report.logs.truncated[0];
    assert_eq!(path, &biggest);
    assert!(*offset <= middle as u64, "cut at or before the damage");
}

#[test]
fn a_full_disk_turns_into_errors_and_loses_nothing_acknowledged() {
    for durability in [Durability::Sync, Durability::Lazy] {
        let dir = tempfile::tempdir().unwrap();
        let faulty = FaultyStorage::default();
        let mut acked = Model::new();
        {
            let db = Db::open(options(dir.path(), durability).storage(Arc::new(faulty.clone())))
                .unwrap();
            let t = db.table("a").unwrap();
            faulty.plan.bytes_left.store(20_000, Ordering::SeqCst);
            let mut refused = 0;
            for i in 0..2000u32 {
                let key = format!("k{i}").into_bytes();
                let value = vec![b'x'; 64];
                let mut txn = db.begin().unwrap();
                txn.put(&t, &key, &value).unwrap();
                match txn.commit() {
                    Ok(_) => {
                        if durability == Durability::Sync {
                            acked.insert(("a".into(), key), value);
                        }
                    }
                    Err(Error::Durability { reason }) => {
                        assert!(
                            reason.contains("No space") || reason.contains("refused"),
                            "{reason}"
                        );
                        refused += 1;
                    }
                    Err(e) => panic!("{e}"),
                }
                if durability == Durability::Lazy && i % 100 == 99 {
                    let _ = db.flush();
                }
            }
            assert!(
                refused > 0,
                "{durability}: the full disk was never reported"
            );
            // Once failed, writes stay refused.
            let mut txn = db.begin().unwrap();
            txn.put(&t, b"after", b"1").unwrap();
            assert!(matches!(txn.commit(), Err(Error::Durability { .. })));
        }
        let db = Db::open(options(dir.path(), durability)).unwrap();
        let got = contents(&db);
        for (k, v) in &acked {
            assert_eq!(got.get(k), Some(v), "{durability}: acknowledged {k:?} lost");
        }
    }
}

#[test]
fn an_fsync_failure_refuses_the_waiting_commit() {
    let dir = tempfile::tempdir().unwrap();
    let faulty = FaultyStorage::default();
    let db =
        Db::open(options(dir.path(), Durability::Sync).storage(Arc::new(faulty.clone()))).unwrap();
    let t = db.table("a").unwrap();
    faulty.plan.syncs_left.store(0, Ordering::SeqCst);
    let mut txn = db.begin().unwrap();
    txn.put(&t, b"k", b"v").unwrap();
    let err = txn.commit().unwrap_err();
    assert!(err.to_string().contains("fdatasync"), "{err}");
    let mut txn = db.begin().unwrap();
    txn.put(&t, b"k2", b"v").unwrap();
    assert!(matches!(txn.commit(), Err(Error::Durability { .. })));
}

#[test]
fn tickets_let_one_thread_keep_committing() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(options(dir.path(), Durability::Sync)).unwrap();
    let t = db.table("a").unwrap();
    let mut tickets = Vec::new();
    for i in 0..100u32 {
        let mut txn = db.begin().unwrap();
        txn.put(&t, i.to_be_bytes(), b"v").unwrap();
        tickets.push(txn.commit_with_ticket().unwrap().1);
    }
    for w in tickets.windows(2) {
        assert!(w[0] <= w[1], "tickets follow commit order");
    }
    db.wait_durable(*tickets.last().unwrap()).unwrap();
    assert!(tickets.iter().all(|t| db.is_durable(*t)));
}

#[test]
fn the_catalog_cuts_a_torn_tail_and_names_damage() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = Db::open(options(dir.path(), Durability::Lazy)).unwrap();
        for name in ["one", "two", "three"] {
            db.table(name).unwrap();
        }
    }
    let catalog = dir.path().join("catalog.vcat");
    let good = std::fs::read(&catalog).unwrap();
    // A torn last entry: cut, and the tables before it are back.
    let mut torn = good.clone();
    torn.extend_from_slice(&[9, 0, 0, 0, 1, 2]);
    std::fs::write(&catalog, &torn).unwrap();
    {
        let db = Db::open(options(dir.path(), Durability::Lazy)).unwrap();
        assert_eq!(db.table_names(), ["one", "two", "three"]);
    }
    assert_eq!(std::fs::read(&catalog).unwrap(), good);
    // A flipped byte in the first entry, with intact ones after it: refused.
    let mut bad = good.clone();
    // Entries: an 8-byte frame header, the id, the name length and the name.
    let first_entry = bad.len() - [3, 3, 5].iter().map(|n| 16 + n).sum::<usize>();
    bad[first_entry + 9] ^= 0x20;
    std::fs::write(&catalog, &bad).unwrap();
    let err = Db::open(options(dir.path(), Durability::Lazy)).unwrap_err();
    assert!(err.to_string().contains("damaged at byte"), "{err}");
}

fn checkpoint_dirs(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_str()
                .unwrap()
                .starts_with("checkpoint-")
        })
        .collect();
    v.sort();
    v
}

#[test]
fn a_damaged_checkpoint_falls_back_to_the_one_before() {
    let dir = tempfile::tempdir().unwrap();
    let mut model = Model::new();
    {
        let db = Db::open(options(dir.path(), Durability::Lazy)).unwrap();
        write_some(&db, &mut model, 21, 300);
        db.checkpoint().unwrap();
        write_some(&db, &mut model, 22, 300);
        db.checkpoint().unwrap();
        write_some(&db, &mut model, 23, 300);
        db.checkpoint().unwrap();
        write_some(&db, &mut model, 24, 100);
    }
    let ckpts = checkpoint_dirs(dir.path());
    assert_eq!(ckpts.len(), 2);
    let part = ckpts[1].join("part-0000.vckp");
    let mut bytes = std::fs::read(&part).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x10;
    std::fs::write(&part, &bytes).unwrap();
    {
        let db = Db::open(options(dir.path(), Durability::Lazy)).unwrap();
        assert_eq!(
            contents(&db),
            model,
            "the older checkpoint and the logs after it"
        );
        let older: u64 = ckpts[0].file_name().unwrap().to_str().unwrap()["checkpoint-".len()..]
            .parse()
            .unwrap();
        assert_eq!(db.recovery_report().unwrap().checkpoint_ts, Some(older));
    }
    // Both damaged: refused, naming the newest's damage.
    let part = ckpts[0].join("part-0001.vckp");
    let mut bytes = std::fs::read(&part).unwrap();
    let last = bytes.len() - 3;
    bytes[last] ^= 0x10;
    std::fs::write(&part, &bytes).unwrap();
    let err = Db::open(options(dir.path(), Durability::Lazy)).unwrap_err();
    assert!(err.to_string().contains("part-0000.vckp"), "{err}");
}

#[test]
fn a_read_of_an_undurable_write_is_not_durable_before_it() {
    let dir = tempfile::tempdir().unwrap();
    let faulty = FaultyStorage::default();
    let db =
        Db::open(options(dir.path(), Durability::Sync).storage(Arc::new(faulty.clone()))).unwrap();
    let t = db.table("a").unwrap();
    let mut txn = db.begin().unwrap();
    txn.put(&t, b"k", b"1").unwrap();
    txn.commit().unwrap();
    let read = |db: &Db| {
        let txn = db.begin_read_only().unwrap();
        let v = txn.get(&t, b"k").unwrap().map(<[u8]>::to_vec);
        (v, txn.commit_with_ticket().unwrap().1)
    };
    // Everything it saw is on disk: nothing to wait for.
    let (v, ticket) = read(&db);
    assert_eq!(v.as_deref(), Some(&b"1"[..]));
    assert!(db.is_durable(ticket));
    // A write visible but not yet on disk (the disk is slow)...
    let held = faulty.plan.hold_syncs();
    let mut txn = db.begin().unwrap();
    txn.put(&t, b"k", b"2").unwrap();
    let (_, written) = txn.commit_with_ticket().unwrap();
    assert!(!db.is_durable(written));
    // ...and a read that saw it: its answer must wait as long (a crash now loses the write).
    let (v, ticket) = read(&db);
    assert_eq!(v.as_deref(), Some(&b"2"[..]));
    assert!(
        !db.is_durable(ticket),
        "a read of an undurable write was durable at once"
    );
    assert!(ticket >= written);
    // So does a read-write transaction that wrote nothing.
    let txn = db.begin().unwrap();
    assert_eq!(txn.get(&t, b"k").unwrap(), Some(&b"2"[..]));
    let (_, rw_ticket) = txn.commit_with_ticket().unwrap();
    assert!(!db.is_durable(rw_ticket));
    drop(held);
    db.wait_durable(ticket).unwrap();
    db.wait_durable(rw_ticket).unwrap();
    assert!(db.is_durable(written));
}
