//! TPC-C end to end (population, the mix, the twelve consistency conditions of clause
//! 3.3.2, each shown to catch a corruption that breaks it) and the pieces the specification
//! pins down: order-preserving keys, NURand's ranges and the last-name generator.

use verso_bench::rng::Rng;
use verso_bench::tpcc::random::{self, Constants, A_C_ID, A_C_LAST, A_OL_I_ID, LAST_NAME_MAX};
use verso_bench::tpcc::schema::{self, customer, district, history, key, order, order_line};
use verso_bench::tpcc::{Tables, Tpcc, TpccConfig, TpccReport, TxnType, Violation};
use verso_bench::Progress;
use verso_engine::{Error, Txn};

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

/// One warehouse: two runs in a row pass (the second must not overwrite the first's
/// HISTORY rows, or conditions 8-10 break); then a corrupted D_YTD is caught as condition 1
/// (and 9, which it breaks too).
#[test]
fn one_warehouse_runs_twice_consistently_and_a_corrupt_d_ytd_is_caught() {
    let cfg = config(1, 1);
    let tpcc = Tpcc::load(&cfg).expect("load");
    assert_eq!(tpcc.consistency_violations(), [], "right after population");
    for _ in 0..2 {
        let report = tpcc.run(&cfg).expect("run");
        check_run(&report);
        assert_eq!(report.aborts, 0, "one thread has nobody to conflict with");
        assert!(report.per_type.delivery.count > 0);
        let summary = report.summary();
        assert!(
            summary.contains(" s: clause 3.3.2 conditions 1-12"),
            "{summary}"
        );
        assert!(report.consistency_check_s > 0.0);
    }

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
    assert_eq!(broken(&tpcc.consistency_violations()), [1, 9]);
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

// Corruption: for each condition of clause 3.3.2, a freshly populated warehouse (where all
// twelve hold, 11 included: no Delivery has run) gets one deliberate write, committed in one
// transaction through the engine, and the check must name that condition. Where the
// conditions are tied to each other no single write can break one alone (1 follows from 8
// and 9; on a fresh database any change to the NEW-ORDER rows moves condition 11's count),
// and the test pins the exact set that breaks instead. Condition 6 takes two writes: a
// single O_OL_CNT change also moves its district's sum(O_OL_CNT) (condition 4).

/// The distinct condition numbers among `violations`, in order.
fn broken(violations: &[Violation]) -> Vec<u8> {
    let mut c: Vec<u8> = violations.iter().map(|v| v.condition).collect();
    c.dedup();
    c
}

/// Loads one warehouse, commits `corrupt` in one transaction, and checks that exactly the
/// conditions `breaks` are broken, the first of them (the one the check reports) in
/// warehouse 1 and `district`. Returns the reported violation.
fn corrupt(
    breaks: &[u8],
    district: Option<u8>,
    mut corrupt: impl FnMut(&mut Txn<'_>, &Tables) -> Result<(), Error>,
) -> Violation {
    let tpcc = Tpcc::load(&config(1, 1)).expect("load");
    assert_eq!(tpcc.consistency_violations(), [], "right after population");
    let t = *tpcc.tables();
    tpcc.db()
        .run(|txn| corrupt(txn, &t))
        .expect("corrupting commit");
    let all = tpcc.consistency_violations();
    assert_eq!(broken(&all), breaks, "{all:#?}");
    let v = tpcc
        .check_consistency()
        .expect_err("the corruption is caught");
    assert_eq!(v, all[0]);
    assert_eq!(
        (v.condition, v.warehouse, v.district),
        (breaks[0], 1, district),
        "{v}"
    );
    assert!(
        v.to_string()
            .contains(&format!("condition {} violated", breaks[0])),
        "{v}"
    );
    v
}

/// Reads the row at `k`, lets `f` rewrite it, and puts it back.
fn update(
    txn: &mut Txn<'_>,
    table: &verso_engine::Table,
    k: &[u8],
    f: impl FnOnce(&mut [u8]),
) -> Result<(), Error> {
    let mut row = txn.get(table, k)?.expect("row to corrupt").to_vec();
    f(&mut row);
    txn.put(table, k, row)
}

/// A HISTORY key no loader or worker writes (writer ids stop at the thread count + 1).
fn stray_history_key() -> [u8; 8] {
    key::history(u16::MAX, 0)
}

/// 1: W_YTD one cent off. W_YTD = sum(H_AMOUNT) (8) breaks with it: 1 holds whenever 8
/// and 9 do, so no single write breaks 1 alone.
#[test]
fn corruption_breaks_condition_1_w_ytd_against_d_ytd() {
    let v = corrupt(&[1, 8], None, |txn, t| {
        update(txn, &t.warehouse, &key::warehouse(1), |r| {
            schema::warehouse::YTD.update(r, |v| v + 1)
        })
    });
    assert!(v.detail.contains("W_YTD 30000001"), "{v}");
}

/// 2: D_NEXT_O_ID moved past the last order.
#[test]
fn corruption_breaks_condition_2_next_order_id() {
    corrupt(&[2], Some(3), |txn, t| {
        update(txn, &t.district, &key::district(1, 3), |r| {
            district::NEXT_O_ID.update(r, |v| v + 1)
        })
    });
}

/// 3: a NEW-ORDER row for order 0, which does not exist, opens a gap below the district's
/// 900. Condition 11 counts it too.
#[test]
fn corruption_breaks_condition_3_new_order_gap() {
    let v = corrupt(&[3, 11], Some(4), |txn, t| {
        txn.put(&t.new_order, key::order(1, 4, 0), [])
    });
    assert!(
        v.detail.contains("= 3001 but NEW-ORDER has 901 rows"),
        "{v}"
    );
}

/// 4: an ORDER-LINE row (delivered, so not a condition-7 case) for order 3001, which was
/// never placed.
#[test]
fn corruption_breaks_condition_4_stray_order_line() {
    corrupt(&[4], Some(5), |txn, t| {
        let line = txn
            .get(&t.order_line, key::order_line(1, 5, 1, 1))?
            .expect("a delivered line")
            .to_vec();
        assert_ne!(order_line::DELIVERY_D.get(&line), 0);
        txn.put(&t.order_line, key::order_line(1, 5, 3001, 1), line)
    });
}

/// 5: the oldest NEW-ORDER row deleted, as a Delivery would, but its order left with a
/// null carrier. Condition 11 counts the missing row too.
#[test]
fn corruption_breaks_condition_5_new_order_without_carrier() {
    let v = corrupt(&[5, 11], Some(6), |txn, t| {
        txn.delete(&t.new_order, key::order(1, 6, schema::FIRST_NEW_ORDER))
    });
    assert!(
        v.detail
            .contains("order 2101: O_CARRIER_ID null and no NEW-ORDER row"),
        "{v}"
    );
}

/// 6: one order claims a line more and the next one a line fewer, so the district's
/// sum(O_OL_CNT) (condition 4) still matches.
#[test]
fn corruption_breaks_condition_6_order_line_count() {
    let v = corrupt(&[6], Some(7), |txn, t| {
        update(txn, &t.orders, &key::order(1, 7, 10), |r| {
            order::OL_CNT.update(r, |n| n + 1)
        })?;
        update(txn, &t.orders, &key::order(1, 7, 11), |r| {
            order::OL_CNT.update(r, |n| n - 1)
        })
    });
    assert!(v.detail.starts_with("order 10: O_OL_CNT"), "{v}");
    assert!(v.detail.ends_with("(and 1 more)"), "{v}");
}

/// 7: a line of a delivered order loses its delivery date (its OL_AMOUNT is 0.00, as
/// population sets it, so the balances of 10 and 12 do not move).
#[test]
fn corruption_breaks_condition_7_delivery_date() {
    corrupt(&[7], Some(8), |txn, t| {
        update(txn, &t.order_line, &key::order_line(1, 8, 1, 1), |r| {
            assert_eq!(order_line::AMOUNT.get(r), 0);
            order_line::DELIVERY_D.set(r, 0);
        })
    });
}

/// 8: a HISTORY row of warehouse 1 for a district and customer that do not exist: only the
/// warehouse's sum moves.
#[test]
fn corruption_breaks_condition_8_history_against_w_ytd() {
    corrupt(&[8], None, |txn, t| {
        let mut row = [0u8; history::LEN];
        history::W_ID.set(&mut row, 1);
        history::D_ID.set(&mut row, 0);
        history::C_W_ID.set(&mut row, 1);
        history::C_D_ID.set(&mut row, 0);
        history::C_ID.set(&mut row, 0);
        history::AMOUNT.set(&mut row, 1000);
        txn.put(&t.history, stray_history_key(), row)
    });
}

/// 9: an initial HISTORY row of district 9 re-filed under district 10 (its customer and
/// warehouse unchanged): both districts' sums move, the warehouse's does not.
#[test]
fn corruption_breaks_condition_9_history_against_d_ytd() {
    let v = corrupt(&[9], Some(9), |txn, t| {
        let k = txn
            .range(&t.history, ..)?
            .find(|(_, r)| history::D_ID.get(r) == 9)
            .map(|(k, _)| k.to_vec())
            .expect("an initial history row of district 9");
        update(txn, &t.history, &k, |r| history::D_ID.set(r, 10))
    });
    assert!(
        v.detail.contains("D_YTD 3000000 != sum(H_AMOUNT) 2999000"),
        "{v}"
    );
}

/// 10: a customer's C_BALANCE up a cent and C_YTD_PAYMENT down one, so their sum
/// (condition 12) holds.
#[test]
fn corruption_breaks_condition_10_balance() {
    let v = corrupt(&[10], Some(10), |txn, t| {
        update(txn, &t.customer, &key::customer(1, 10, 42), |r| {
            customer::BALANCE.update(r, |v| v + 1);
            customer::YTD_PAYMENT.update(r, |v| v - 1);
        })
    });
    assert!(v.detail.starts_with("customer 42: C_BALANCE -999"), "{v}");
}

/// 11: an extra delivered ORDER row (order 0, with no lines, so conditions 4 and 6 hold)
/// makes 2101 delivered orders.
#[test]
fn corruption_breaks_condition_11_delivered_count() {
    let v = corrupt(&[11], Some(2), |txn, t| {
        let mut row = [0u8; order::LEN];
        order::C_ID.set(&mut row, 1);
        order::CARRIER_ID.set(&mut row, 1);
        order::OL_CNT.set(&mut row, 0);
        txn.put(&t.orders, key::order(1, 2, 0), row)
    });
    assert!(
        v.detail
            .contains("count(ORDER) 3001 - count(NEW-ORDER) 900"),
        "{v}"
    );
}

/// 12: a customer's C_YTD_PAYMENT up a cent (condition 10 does not read it).
#[test]
fn corruption_breaks_condition_12_ytd_payment() {
    corrupt(&[12], Some(1), |txn, t| {
        update(txn, &t.customer, &key::customer(1, 1, 3000), |r| {
            customer::YTD_PAYMENT.update(r, |v| v + 1)
        })
    });
}
