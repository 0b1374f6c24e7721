//! The twelve consistency conditions of clause 3.3.2, checked in one read-only transaction
//! (a snapshot, so it may run while workers are still going):
//!
//! 1. W_YTD = sum(D_YTD), for each warehouse;
//! 2. D_NEXT_O_ID - 1 = max(O_ID) = max(NO_O_ID), for each district (the NEW-ORDER part only
//!    where the district has NEW-ORDER rows);
//! 3. max(NO_O_ID) - min(NO_O_ID) + 1 = the number of NEW-ORDER rows, for each district that
//!    has any;
//! 4. sum(O_OL_CNT) = the number of ORDER-LINE rows, for each district;
//! 5. for each ORDER row, O_CARRIER_ID is null if and only if a NEW-ORDER row has its key;
//! 6. for each ORDER row, O_OL_CNT = the number of its ORDER-LINE rows;
//! 7. for each ORDER-LINE row, OL_DELIVERY_D is null if and only if its order's O_CARRIER_ID
//!    is null;
//! 8. W_YTD = sum(H_AMOUNT) over the HISTORY rows with H_W_ID = W_ID;
//! 9. D_YTD = sum(H_AMOUNT) over the HISTORY rows with (H_W_ID, H_D_ID) = (D_W_ID, D_ID);
//! 10. C_BALANCE = sum(OL_AMOUNT) over the customer's orders' lines whose OL_DELIVERY_D is
//!     not null, minus sum(H_AMOUNT) over the HISTORY rows with (H_C_W_ID, H_C_D_ID, H_C_ID)
//!     = (C_W_ID, C_D_ID, C_ID);
//! 11. count(ORDER) - count(NEW-ORDER) = 2100, for each district;
//! 12. C_BALANCE + C_YTD_PAYMENT = the sum(OL_AMOUNT) of condition 10, for each customer.
//!
//! **Condition 11 holds only until the first Delivery.** The specification states it
//! without a proviso, but population delivers exactly 2100 orders per district and every
//! Delivery then deletes a NEW-ORDER row while keeping its ORDER row, so each delivered
//! order raises the difference by one (New-Order adds one row to each side). It is checked
//! as written while [`DeliveryMark`] says no Delivery has delivered an order since
//! population, and skipped after that: it would fail on every correct database. (Clause
//! 3.3.3's consistency test itself only rechecks conditions 1-4 after a run.)
//!
//! Population (clause 4.3.3.1) makes all twelve hold: W_YTD 300 000.00 and D_YTD 30 000.00
//! are what the warehouse's 30 000 and the district's 3 000 initial HISTORY rows of 10.00
//! add up to; each customer starts with C_BALANCE -10.00 = 0 - 10.00 and C_YTD_PAYMENT 10.00
//! (its one HISTORY row), and the lines of the 2100 delivered orders have OL_AMOUNT 0.00.
//!
//! Rows that a condition's join does not reach are read as the text reads: 5 speaks of
//! ORDER rows, so a NEW-ORDER row without an order is left to 2, 3 and 11; 7 speaks of
//! ORDER-LINE rows, so a line without an order must not have a null OL_DELIVERY_D (there is
//! no order whose carrier is null); 8 takes every HISTORY row of the warehouse, 9 and 10
//! only those naming an existing district or customer.
//!
//! Cost: every row of ORDER, NEW-ORDER, ORDER-LINE, CUSTOMER and HISTORY is read once, by
//! range scans. The first four are scanned district by district in key order and joined on
//! the order id, by which all of them are sorted; HISTORY, keyed by who wrote it, is summed
//! in one pass into totals per warehouse, district and customer. The only point reads are
//! the warehouse and district rows.
//!
//! Money is in cents (`i64`, `i32` for H_AMOUNT and OL_AMOUNT, summed as `i64`); a null
//! O_CARRIER_ID or OL_DELIVERY_D is stored as 0 (see [`super::schema`]).

mod district;
mod history;

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};

use verso_engine::Db;

use super::schema::{self, key, warehouse, DISTRICTS};
use super::Tables;

/// What the run report says was checked when it says "passed".
pub const CHECKED: &str =
    "clause 3.3.2 conditions 1-12 (11 holds, and is checked, only until the first Delivery)";

/// A broken condition, naming where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// The condition's number in clause 3.3.2 (1-12), or 0 when the check itself failed.
    pub condition: u8,
    /// The warehouse.
    pub warehouse: u16,
    /// The district (`None` for conditions 1 and 8, which are per warehouse).
    pub district: Option<u8>,
    /// What differed: for a per-row condition (5, 6, 7, 10, 12), the first row of the
    /// district that broke it and how many more did.
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

/// Whether a Delivery has delivered an order since population: once one has, condition 11
/// no longer holds (see the module comment) and is not checked.
///
/// A Delivery sets it before it commits, and the check reads it after its snapshot begins,
/// so a snapshot that holds a delivered order always sees the mark. An attempt that sets it
/// and then aborts only makes the check skip condition 11 early.
#[derive(Debug, Default)]
pub struct DeliveryMark(AtomicBool);

impl DeliveryMark {
    /// Unset: the database is as population left it, as far as condition 11 can tell.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records that a Delivery is about to commit a delivered order.
    pub fn set(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    /// Whether any Delivery has (or may have) delivered an order.
    pub fn is_set(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

/// Checks the conditions over warehouses `1..=warehouses`: the first of [`violations`]
/// (the lowest condition number, then warehouse and district), if any.
pub fn check(db: &Db, t: &Tables, warehouses: u16, mark: &DeliveryMark) -> Result<(), Violation> {
    match violations(db, t, warehouses, mark).into_iter().next() {
        Some(v) => Err(v),
        None => Ok(()),
    }
}

/// Every broken condition over warehouses `1..=warehouses`, at most one per condition and
/// warehouse (per district for the per-district and per-row ones), sorted by condition,
/// warehouse and district. If the check itself fails, that failure (condition 0) alone.
pub fn violations(db: &Db, t: &Tables, warehouses: u16, mark: &DeliveryMark) -> Vec<Violation> {
    match scan(db, t, warehouses, mark) {
        Ok(mut found) => {
            found.sort_by_key(|v| (v.condition, v.warehouse, v.district));
            found
        }
        Err(e) => vec![e],
    }
}

fn scan(
    db: &Db,
    t: &Tables,
    warehouses: u16,
    mark: &DeliveryMark,
) -> Result<Vec<Violation>, Violation> {
    let txn = db.begin_read_only().map_err(|e| unable(0, None, e))?;
    // Read after the snapshot began: see `DeliveryMark`.
    let condition_11 = !mark.is_set();
    let paid = history::Sums::read(&txn, t, warehouses)?;
    let mut scratch = district::Scratch::default();
    let mut found = Vec::new();
    for w in 1..=warehouses {
        let w_row = txn
            .get(&t.warehouse, key::warehouse(w))
            .map_err(|e| unable(w, None, e))?
            .and_then(|r| schema::check(r, warehouse::LEN))
            .ok_or_else(|| unable(w, None, "warehouse row missing"))?;
        let w_ytd = warehouse::YTD.get(w_row);
        let mut d_ytd_sum = 0i64;
        for d in 1..=DISTRICTS {
            let ytd = district::check(
                &txn,
                t,
                (w, d),
                &paid,
                condition_11,
                &mut scratch,
                &mut found,
            )?;
            d_ytd_sum += ytd;
        }
        if w_ytd != d_ytd_sum {
            found.push(broken(
                1,
                w,
                None,
                format!("W_YTD {w_ytd} != sum(D_YTD) {d_ytd_sum} (cents)"),
            ));
        }
        let h = paid.warehouse(w);
        if w_ytd != h {
            found.push(broken(
                8,
                w,
                None,
                format!("W_YTD {w_ytd} != sum(H_AMOUNT) {h} of its HISTORY rows (cents)"),
            ));
        }
    }
    txn.commit().map_err(|e| unable(0, None, e))?;
    Ok(found)
}

/// The first row that broke a per-row condition in one district, and how many did: a
/// broken district may have thousands, and one named row (with the count) is what helps.
#[derive(Default)]
struct Tally {
    first: Option<String>,
    count: u64,
}

impl Tally {
    fn note(&mut self, what: impl FnOnce() -> String) {
        if self.first.is_none() {
            self.first = Some(what());
        }
        self.count += 1;
    }

    fn report(self, found: &mut Vec<Violation>, condition: u8, w: u16, d: u8) {
        if let Some(first) = self.first {
            let detail = match self.count {
                1 => first,
                n => format!("{first} (and {} more)", n - 1),
            };
            found.push(broken(condition, w, Some(d), detail));
        }
    }
}
