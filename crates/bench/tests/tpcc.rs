//! TPC-C end to end (population, the mix, consistency conditions 1-4 of clause 3.3.2) and
//! the pieces the specification pins down: order-preserving keys, NURand's ranges and the
//! last-name generator.

use verso_bench::rng::Rng;
use verso_bench::tpcc::random::{self, Constants, A_C_ID, A_C_LAST, A_OL_I_ID, LAST_NAME_MAX};
use verso_bench::tpcc::schema::{self, district, key};
use verso_bench::tpcc::{Tpcc, TpccConfig, TpccReport, TxnType};
use verso_bench::Progress;

fn config(warehouses: u32, threads: usize) -> TpccConfig {
    TpccConfig {
        warehouses: Some(warehouses),
        threads,
        duration_s: 1.0,
        warmup_s: 0.2,
        progress: Progress::Quiet,
        ..TpccConfig::default()
    }
}

/// What every run must show: consistency, the standard mix, rollbacks, sane numbers.
fn check_run(report: &TpccReport) {
    assert!(report.consistency_passed(), "{}", report.consistency);
    let total: u64 = TxnType::ALL
        .iter()
        .map(|&t| report.per_type.get(t).count)
        .sum();
    assert_eq!(total, report.commits, "per-type counts add up to the total");
    assert!(total > 500, "only {total} transactions ran");
    for ty in TxnType::ALL {
        let share = report.per_type.get(ty).share * 100.0;
        let want = f64::from(ty.percent());
        // A binomial share over >= 500 draws: 4 standard deviations is under 4.5 points.
        let tolerance = 4.0 * (want * (100.0 - want) / total as f64).sqrt() + 0.5;
        assert!(
            (share - want).abs() <= tolerance,
            "{}: {share:.2}% of the mix, want {want}% +- {tolerance:.2}",
            ty.name()
        );
        assert!(report.per_type.get(ty).count > 0, "no {}", ty.name());
    }
    // About 1 % of New-Orders roll back; with a few hundred New-Orders some must have.
    let new_orders = report.per_type.new_order.count;
    assert!(
        report.rollbacks > 0,
        "no rollback among {new_orders} New-Orders"
    );
    assert!(
        (report.rollbacks as f64) < 0.05 * new_orders as f64,
        "{} rollbacks of {new_orders}",
        report.rollbacks
    );
    assert!((0.0..1.0).contains(&report.abort_rate));
    assert!(report.txn_per_sec > 0.0 && report.new_order_per_sec > 0.0);
    assert!(report.load_seconds > 0.0);

    let json: serde_json::Value = serde_json::from_str(&report.to_json()).expect("JSON parses");
    for field in [
        "txn_per_sec",
        "new_order_per_sec",
        "abort_rate",
        "consistency",
        "load_seconds",
        "peak_rss_bytes",
        "machine",
    ] {
        assert!(json.get(field).is_some(), "JSON lacks {field}");
    }
    for ty in TxnType::ALL {
        let t = &json["per_type"][ty.name()];
        assert!(
            t["p50_us"].is_number() && t["p99_us"].is_number(),
            "{}",
            ty.name()
        );
    }
    assert_eq!(json["consistency"], "passed");
    assert!(report.summary().contains("stock_level"));
}

/// One warehouse: a run passes; then a corrupted D_YTD is caught as condition 1.
#[test]
fn one_warehouse_runs_consistently_and_a_corrupt_d_ytd_is_caught() {
    let cfg = config(1, 1);
    let tpcc = Tpcc::load(&cfg).expect("load");
    assert_eq!(tpcc.check_consistency(), Ok(()), "right after population");
    let report = tpcc.run(&cfg).expect("run");
    check_run(&report);
    assert_eq!(report.aborts, 0, "one thread has nobody to conflict with");

    let (db, t) = (tpcc.db(), tpcc.tables());
    db.run(|txn| {
        let k = key::district(1, 7);
        let mut row = txn.get(&t.district, k)?.expect("district 7").to_vec();
        district::YTD.update(&mut row, |v| v + 1);
        txn.put(&t.district, k, row)
    })
    .expect("corrupt");
    let v = tpcc
        .check_consistency()
        .expect_err("D_YTD no longer adds up");
    assert_eq!(v.condition, 1, "{v}");
    assert_eq!(v.warehouse, 1);
    assert!(v.to_string().contains("condition 1"), "{v}");
}

/// Two warehouses, two threads: remote New-Order lines and Payments cross warehouses, and
/// a StockScan thread reads everything meanwhile.
#[test]
fn two_warehouses_run_consistently() {
    let cfg = TpccConfig {
        stock_scan_ms: Some(200),
        ..config(2, 2)
    };
    let tpcc = Tpcc::load(&cfg).expect("load");
    let report = tpcc.run(&cfg).expect("run");
    check_run(&report);
    assert_eq!(report.warehouses, 2);
    assert!(report.stock_scans > 0, "no StockScan finished");
    // Remote lines moved S_REMOTE_CNT somewhere.
    let txn = tpcc.db().begin_read_only().unwrap();
    let remote: u64 = txn
        .range(&tpcc.tables().stock, ..)
        .unwrap()
        .map(|(_, v)| u64::from(schema::stock::REMOTE_CNT.get(v)))
        .sum();
    assert!(remote > 0, "no remote order line was supplied");
}

#[test]
fn bad_flags_are_config_errors() {
    for cfg in [
        TpccConfig {
            threads: 0,
            ..config(1, 1)
        },
        config(0, 1),
        TpccConfig {
            duration_s: -1.0,
            ..config(1, 1)
        },
        TpccConfig {
            stock_scan_ms: Some(0),
            ..config(1, 1)
        },
    ] {
        match verso_bench::tpcc::run(&cfg) {
            Err(verso_bench::BenchError::Config(_)) => {}
            other => panic!("{cfg:?}: {:?}", other.map(|r| r.consistency)),
        }
    }
}

#[test]
fn keys_preserve_tuple_order() {
    let mut rng = Rng::new(7);
    for _ in 0..10_000 {
        let a = (
            rng.below(3) as u16 + 1,
            rng.below(10) as u8 + 1,
            rng.below(70_000) as u32,
            rng.below(16) as u8,
        );
        let b = (
            rng.below(3) as u16 + 1,
            rng.below(10) as u8 + 1,
            rng.below(70_000) as u32,
            rng.below(16) as u8,
        );
        let ka = key::order_line(a.0, a.1, a.2, a.3);
        let kb = key::order_line(b.0, b.1, b.2, b.3);
        assert_eq!(a.cmp(&b), ka.cmp(&kb), "{a:?} vs {b:?}");
        let (sa, sb) = (key::stock(a.0, a.2), key::stock(b.0, b.2));
        assert_eq!((a.0, a.2).cmp(&(b.0, b.2)), sa.cmp(&sb));
        let (oa, ob) = (key::order(a.0, a.1, a.2), key::order(b.0, b.1, b.2));
        assert_eq!((a.0, a.1, a.2).cmp(&(b.0, b.1, b.2)), oa.cmp(&ob));
        let ca = key::order_by_customer(a.0, a.1, a.2 as u16, u32::from(a.3));
        let cb = key::order_by_customer(b.0, b.1, b.2 as u16, u32::from(b.3));
        assert_eq!(
            (a.0, a.1, a.2 as u16, a.3).cmp(&(b.0, b.1, b.2 as u16, b.3)),
            ca.cmp(&cb)
        );
    }
    // Names: by last name, then first name (a prefix first), then id.
    let k = |last: &[u8], first: &[u8], c| key::customer_by_name(1, 1, last, first, c);
    assert!(k(b"BAR", b"Zed", 9) < k(b"BARBAR", b"Abe", 1));
    assert!(k(b"ABLE", b"Al", 9) < k(b"ABLE", b"Alan", 1));
    assert!(k(b"ABLE", b"Al", 1) < k(b"ABLE", b"Al", 2));
    let (lo, hi) = key::customer_by_name_bounds(1, 1, b"ABLE");
    assert!(lo <= k(b"ABLE", b"", 0) && k(b"ABLE", b"zzzzzzzzzzzzzzzz", 3000) <= hi);
    assert!(k(b"ABLEABLE", b"", 0) > hi && k(b"ABL", b"zz", 1) < lo);
    assert_eq!(
        key::customer_by_name_id(&k(b"ESE", b"Bo", 2999)),
        Some(2999)
    );
}

#[test]
fn nurand_stays_in_range_and_is_skewed() {
    let c = Constants::from_seed(11);
    let mut rng = Rng::new(3);
    let mut hits = vec![0u32; 100_001];
    for (a, cc, x, y) in [
        (A_C_LAST, c.c_last, 0, 999),
        (A_C_ID, c.c_id, 1, 3000),
        (A_OL_I_ID, c.ol_i_id, 1, 100_000),
    ] {
        hits.iter_mut().for_each(|h| *h = 0);
        let (mut lo, mut hi) = (u32::MAX, 0);
        let draws = 200_000;
        for _ in 0..draws {
            let v = random::nurand(&mut rng, a, cc, x, y);
            assert!((x..=y).contains(&v), "NURand({a}) gave {v}");
            lo = lo.min(v);
            hi = hi.max(v);
            hits[v as usize] += 1;
        }
        // The whole range is reachable; OR-ing makes it non-uniform.
        assert!(
            lo <= x + (y - x) / 50 && hi >= y - (y - x) / 50,
            "{lo}..{hi}"
        );
        let uniform = draws as f64 / f64::from(y - x + 1);
        let top = f64::from(*hits.iter().max().unwrap());
        assert!(
            top > 3.0 * uniform,
            "NURand({a}) looks uniform: max {top} vs {uniform}"
        );
    }
}

#[test]
fn last_names_come_from_the_syllables() {
    let mut buf = [0u8; LAST_NAME_MAX];
    let mut name = |n| {
        let len = random::last_name(n, &mut buf);
        String::from_utf8(buf[..len].to_vec()).unwrap()
    };
    assert_eq!(name(0), "BARBARBAR");
    assert_eq!(name(371), "PRICALLYOUGHT");
    assert_eq!(name(999), "EINGEINGEING");
    assert_eq!(name(258), "ABLEESEATION");
    let mut seen = std::collections::HashSet::new();
    for n in 0..1000 {
        let s = name(n);
        assert!(s.len() <= LAST_NAME_MAX);
        assert!(seen.insert(s), "names of distinct numbers differ");
    }
}
