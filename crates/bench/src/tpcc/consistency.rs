//! Consistency conditions 1-4 of clause 3.3.2, checked in one read-only transaction (a
//! snapshot, so it may run while workers are still going):
//!
//! 1. W_YTD = sum(D_YTD) for each warehouse;
//! 2. D_NEXT_O_ID - 1 = max(O_ID) = max(NO_O_ID) for each district;
//! 3. max(NO_O_ID) - min(NO_O_ID) + 1 = the number of NEW-ORDER rows, for each district;
//! 4. sum(O_OL_CNT) = the number of ORDER-LINE rows, for each district.

use std::fmt;

use verso_engine::{Db, Txn};

use super::schema::{self, district, key, order, warehouse, DISTRICTS};
use super::Tables;

/// A broken condition, naming where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// The condition's number in clause 3.3.2 (1-4), or 0 when the check itself failed.
    pub condition: u8,
    /// The warehouse.
    pub warehouse: u16,
    /// The district (`None` for condition 1, which is per warehouse).
    pub district: Option<u8>,
    /// What differed.
    pub detail: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.condition == 0 {
            return write!(f, "consistency check failed: {}", self.detail);
        }
        write!(
            f,
            "consistency condition {} violated in warehouse {}",
            self.condition, self.warehouse
        )?;
        if let Some(d) = self.district {
            write!(f, " district {d}")?;
        }
        write!(f, ": {}", self.detail)
    }
}

impl std::error::Error for Violation {}

fn broken(condition: u8, w: u16, d: Option<u8>, detail: String) -> Violation {
    Violation {
        condition,
        warehouse: w,
        district: d,
        detail,
    }
}

/// A failure of the check itself (the engine refused, or a row is malformed).
fn unable(w: u16, d: Option<u8>, what: impl fmt::Display) -> Violation {
    broken(0, w, d, format!("{what} (warehouse {w}, district {d:?})"))
}

/// Checks conditions 1-4 over warehouses `1..=warehouses`; the first violation found wins.
pub fn check(db: &Db, t: &Tables, warehouses: u16) -> Result<(), Violation> {
    let txn = db.begin_read_only().map_err(|e| unable(0, None, e))?;
    for w in 1..=warehouses {
        let w_row = txn
            .get(&t.warehouse, key::warehouse(w))
            .map_err(|e| unable(w, None, e))?
            .and_then(|r| schema::check(r, warehouse::LEN))
            .ok_or_else(|| unable(w, None, "warehouse row missing"))?;
        let w_ytd = warehouse::YTD.get(w_row);
        let mut d_ytd_sum = 0i64;
        for d in 1..=DISTRICTS {
            let d_row = txn
                .get(&t.district, key::district(w, d))
                .map_err(|e| unable(w, Some(d), e))?
                .and_then(|r| schema::check(r, district::LEN))
                .ok_or_else(|| unable(w, Some(d), "district row missing"))?;
            d_ytd_sum += district::YTD.get(d_row);
            let next_o_id = district::NEXT_O_ID.get(d_row);
            check_district(&txn, t, w, d, next_o_id)?;
        }
        if w_ytd != d_ytd_sum {
            return Err(broken(
                1,
                w,
                None,
                format!("W_YTD {w_ytd} != sum(D_YTD) {d_ytd_sum} (cents)"),
            ));
        }
    }
    txn.commit().map_err(|e| unable(0, None, e))?;
    Ok(())
}

/// Conditions 2-4 for one district.
fn check_district(
    txn: &Txn<'_>,
    t: &Tables,
    w: u16,
    d: u8,
    next_o_id: u32,
) -> Result<(), Violation> {
    let fail = |e: verso_engine::Error| unable(w, Some(d), e);
    let lo = key::order(w, d, 0);
    let hi = key::order(w, d, u32::MAX);

    // ORDER: max(O_ID) and sum(O_OL_CNT).
    let (mut max_o, mut ol_cnt_sum) = (0u32, 0u64);
    for (k, v) in txn.range(&t.orders, &lo[..]..=&hi[..]).map_err(fail)? {
        let o = key::order_id(k).ok_or_else(|| unable(w, Some(d), "order key"))?;
        let v = schema::check(v, order::LEN).ok_or_else(|| unable(w, Some(d), "order row"))?;
        max_o = max_o.max(o);
        ol_cnt_sum += u64::from(order::OL_CNT.get(v));
    }
    // NEW-ORDER: min, max and count.
    let (mut min_no, mut max_no, mut no_count) = (u32::MAX, 0u32, 0u64);
    for (k, _) in txn.range(&t.new_order, &lo[..]..=&hi[..]).map_err(fail)? {
        let o = key::order_id(k).ok_or_else(|| unable(w, Some(d), "new-order key"))?;
        min_no = min_no.min(o);
        max_no = max_no.max(o);
        no_count += 1;
    }
    // ORDER-LINE: count.
    let lo_ol = key::order_line(w, d, 0, 0);
    let hi_ol = key::order_line(w, d, u32::MAX, u8::MAX);
    let ol_count = txn
        .range(&t.order_line, &lo_ol[..]..=&hi_ol[..])
        .map_err(fail)?
        .count() as u64;

    let last = next_o_id.wrapping_sub(1);
    if last != max_o || (no_count > 0 && last != max_no) {
        let no = if no_count > 0 {
            max_no.to_string()
        } else {
            "none".into()
        };
        return Err(broken(
            2,
            w,
            Some(d),
            format!("D_NEXT_O_ID - 1 = {last}, max(O_ID) = {max_o}, max(NO_O_ID) = {no}"),
        ));
    }
    if no_count > 0 && u64::from(max_no - min_no) + 1 != no_count {
        return Err(broken(
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
        return Err(broken(
            4,
            w,
            Some(d),
            format!("sum(O_OL_CNT) = {ol_cnt_sum} but ORDER-LINE has {ol_count} rows"),
        ));
    }
    Ok(())
}
