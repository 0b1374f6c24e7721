//! The conditions checked district by district: 2-7 and 11 over its orders, 9 over its
//! D_YTD, 10 and 12 over its customers.
//!
//! ORDER, NEW-ORDER and ORDER-LINE keys all start with (W_ID, D_ID, O_ID), so one range scan
//! of each, in key order, lines up with the district's orders read first: a merge join on
//! the order id, with no lookup per row.

use verso_engine::Txn;

use super::super::schema::{self, customer, district, key, order, order_line, FIRST_NEW_ORDER};
use super::super::Tables;
use super::history::Sums;
use super::{broken, unable, Tally, Violation};

/// count(ORDER) - count(NEW-ORDER) of condition 11: the orders population delivers in a
/// district.
const DELIVERED_AT_POPULATION: u64 = 2100;
const _: () = assert!(DELIVERED_AT_POPULATION == FIRST_NEW_ORDER as u64 - 1);

/// One ORDER row as the joins need it.
struct Seen {
    o: u32,
    c: u16,
    carrier_null: bool,
    ol_cnt: u8,
    /// ORDER-LINE rows found for it.
    lines: u32,
    /// Whether a NEW-ORDER row has its key.
    new_order: bool,
}

/// Buffers reused from district to district.
#[derive(Default)]
pub(super) struct Scratch {
    orders: Vec<Seen>,
    /// sum(OL_AMOUNT) of delivered lines, by O_C_ID.
    delivered: Vec<i64>,
}

/// The index in `orders` (sorted by id) of order `o`, moving `at` forward: the rows joined
/// against it come in id order too.
fn join(orders: &[Seen], at: &mut usize, o: u32) -> Option<usize> {
    while *at < orders.len() && orders[*at].o < o {
        *at += 1;
    }
    (*at < orders.len() && orders[*at].o == o).then_some(*at)
}

/// Checks district `(w, d)`, adding what it breaks to `found`; returns its D_YTD for
/// condition 1.
pub(super) fn check(
    txn: &Txn<'_>,
    t: &Tables,
    (w, d): (u16, u8),
    paid: &Sums,
    condition_11: bool,
    s: &mut Scratch,
    found: &mut Vec<Violation>,
) -> Result<i64, Violation> {
    let fail = |what: &str| unable(w, Some(d), what);
    let engine = |e: verso_engine::Error| unable(w, Some(d), e);
    let d_row = txn
        .get(&t.district, key::district(w, d))
        .map_err(engine)?
        .and_then(|r| schema::check(r, district::LEN))
        .ok_or_else(|| fail("district row missing"))?;
    let d_ytd = district::YTD.get(d_row);
    let next_o_id = district::NEXT_O_ID.get(d_row);

    let h = paid.district(w, d);
    if d_ytd != h {
        found.push(broken(
            9,
            w,
            Some(d),
            format!("D_YTD {d_ytd} != sum(H_AMOUNT) {h} of its HISTORY rows (cents)"),
        ));
    }

    // ORDER, into `s.orders` (in id order, as the keys sort).
    let lo = key::order(w, d, 0);
    let hi = key::order(w, d, u32::MAX);
    s.orders.clear();
    let mut ol_cnt_sum = 0u64;
    for (k, v) in txn.range(&t.orders, &lo[..]..=&hi[..]).map_err(engine)? {
        let o = key::order_id(k).ok_or_else(|| fail("order key"))?;
        let v = schema::check(v, order::LEN).ok_or_else(|| fail("order row"))?;
        ol_cnt_sum += u64::from(order::OL_CNT.get(v));
        s.orders.push(Seen {
            o,
            c: order::C_ID.get(v),
            carrier_null: order::CARRIER_ID.get(v) == 0,
            ol_cnt: order::OL_CNT.get(v),
            lines: 0,
            new_order: false,
        });
    }
    let max_o = s.orders.last().map_or(0, |x| x.o);

    // NEW-ORDER: min, max, count, and which orders have one.
    let (mut min_no, mut max_no, mut no_count) = (u32::MAX, 0u32, 0u64);
    let mut at = 0;
    for (k, _) in txn.range(&t.new_order, &lo[..]..=&hi[..]).map_err(engine)? {
        let o = key::order_id(k).ok_or_else(|| fail("new-order key"))?;
        min_no = min_no.min(o);
        max_no = max_no.max(o);
        no_count += 1;
        if let Some(i) = join(&s.orders, &mut at, o) {
            s.orders[i].new_order = true;
        }
    }

    // ORDER-LINE: the count, lines per order, delivery dates against carriers, and the
    // delivered amounts per customer.
    let lo_ol = key::order_line(w, d, 0, 0);
    let hi_ol = key::order_line(w, d, u32::MAX, u8::MAX);
    s.delivered.clear();
    let mut ol_count = 0u64;
    let mut c7 = Tally::default();
    let mut at = 0;
    for (k, v) in txn
        .range(&t.order_line, &lo_ol[..]..=&hi_ol[..])
        .map_err(engine)?
    {
        let o = key::order_line_order(k).ok_or_else(|| fail("order-line key"))?;
        let n = k[k.len() - 1];
        let v = schema::check(v, order_line::LEN).ok_or_else(|| fail("order-line row"))?;
        ol_count += 1;
        let delivery_null = order_line::DELIVERY_D.get(v) == 0;
        let Some(i) = join(&s.orders, &mut at, o) else {
            if delivery_null {
                c7.note(|| format!("line {n} of order {o}: null OL_DELIVERY_D, no ORDER row"));
            }
            continue;
        };
        let x = &mut s.orders[i];
        x.lines += 1;
        if delivery_null != x.carrier_null {
            let (ol, carrier) = (null_or_set(delivery_null), null_or_set(x.carrier_null));
            c7.note(|| {
                format!("line {n} of order {o}: OL_DELIVERY_D {ol}, O_CARRIER_ID {carrier}")
            });
        }
        if !delivery_null {
            let c = usize::from(x.c);
            if s.delivered.len() <= c {
                s.delivered.resize(c + 1, 0);
            }
            s.delivered[c] += i64::from(order_line::AMOUNT.get(v));
        }
    }

    let (mut c5, mut c6) = (Tally::default(), Tally::default());
    for x in &s.orders {
        if x.carrier_null != x.new_order {
            let (carrier, no) = (
                null_or_set(x.carrier_null),
                if x.new_order { "a" } else { "no" },
            );
            c5.note(|| {
                format!(
                    "order {}: O_CARRIER_ID {carrier} and {no} NEW-ORDER row",
                    x.o
                )
            });
        }
        if x.lines != u32::from(x.ol_cnt) {
            c6.note(|| {
                format!(
                    "order {}: O_OL_CNT {} but {} ORDER-LINE rows",
                    x.o, x.ol_cnt, x.lines
                )
            });
        }
    }

    let last = next_o_id.wrapping_sub(1);
    if last != max_o || (no_count > 0 && last != max_no) {
        let no = if no_count > 0 {
            max_no.to_string()
        } else {
            "none".into()
        };
        found.push(broken(
            2,
            w,
            Some(d),
            format!("D_NEXT_O_ID - 1 = {last}, max(O_ID) = {max_o}, max(NO_O_ID) = {no}"),
        ));
    }
    if no_count > 0 && u64::from(max_no - min_no) + 1 != no_count {
        found.push(broken(
            3,
            w,
            Some(d),
            format!(
                "max(NO_O_ID) - min(NO_O_ID) + 1 = {} but NEW-ORDER has {no_count} rows",
                u64::from(max_no - min_no) + 1
            ),
        ));
    }
    if ol_cnt_sum != ol_count {
        found.push(broken(
            4,
            w,
            Some(d),
            format!("sum(O_OL_CNT) = {ol_cnt_sum} but ORDER-LINE has {ol_count} rows"),
        ));
    }
    c5.report(found, 5, w, d);
    c6.report(found, 6, w, d);
    c7.report(found, 7, w, d);
    let orders = s.orders.len() as u64;
    if condition_11 && i128::from(orders) - i128::from(no_count) != DELIVERED_AT_POPULATION.into() {
        found.push(broken(
            11,
            w,
            Some(d),
            format!(
                "count(ORDER) {orders} - count(NEW-ORDER) {no_count} != {DELIVERED_AT_POPULATION}"
            ),
        ));
    }
    customers(txn, t, (w, d), paid, &s.delivered, found)?;
    Ok(d_ytd)
}

/// Conditions 10 and 12 for every customer of `(w, d)`, given what its delivered order
/// lines add up to (`delivered`, by C_ID).
fn customers(
    txn: &Txn<'_>,
    t: &Tables,
    (w, d): (u16, u8),
    paid: &Sums,
    delivered: &[i64],
    found: &mut Vec<Violation>,
) -> Result<(), Violation> {
    let lo = key::customer(w, d, 0);
    let hi = key::customer(w, d, u16::MAX);
    let (mut c10, mut c12) = (Tally::default(), Tally::default());
    for (k, v) in txn
        .range(&t.customer, &lo[..]..=&hi[..])
        .map_err(|e| unable(w, Some(d), e))?
    {
        let c = key::customer_id(k).ok_or_else(|| unable(w, Some(d), "customer key"))?;
        let v =
            schema::check(v, customer::LEN).ok_or_else(|| unable(w, Some(d), "customer row"))?;
        let balance = customer::BALANCE.get(v);
        let ytd = customer::YTD_PAYMENT.get(v);
        let ol = delivered.get(usize::from(c)).copied().unwrap_or(0);
        let h = paid.customer(w, d, c);
        if balance != ol - h {
            c10.note(|| {
                format!("customer {c}: C_BALANCE {balance} != delivered sum(OL_AMOUNT) {ol} - sum(H_AMOUNT) {h} (cents)")
            });
        }
        if balance + ytd != ol {
            c12.note(|| {
                format!("customer {c}: C_BALANCE {balance} + C_YTD_PAYMENT {ytd} != delivered sum(OL_AMOUNT) {ol} (cents)")
            });
        }
    }
    c10.report(found, 10, w, d);
    c12.report(found, 12, w, d);
    Ok(())
}

fn null_or_set(null: bool) -> &'static str {
    if null {
        "null"
    } else {
        "set"
    }
}
