//! HISTORY summed for conditions 8, 9 and 10: it is keyed by who wrote a row, not by the
//! warehouse, district or customer the conditions group it by, so it is read in one pass
//! and added up per group.

use std::collections::HashMap;

use verso_engine::Txn;

use super::super::schema::{self, history, CUSTOMERS, DISTRICTS};
use super::super::Tables;
use super::unable;

/// sum(H_AMOUNT) in cents, by H_W_ID, by (H_W_ID, H_D_ID) and by (H_C_W_ID, H_C_D_ID,
/// H_C_ID), for the warehouses checked.
pub(super) struct Sums {
    warehouses: u16,
    by_warehouse: Vec<i64>,
    by_district: Vec<i64>,
    /// Indexed by customer for the ids population creates (dense, so a `Vec`).
    by_customer: Vec<i64>,
    /// Customer ids outside 1..=CUSTOMERS: no valid database has them, but a customer row
    /// with such an id still has its HISTORY rows summed.
    by_other_customer: HashMap<(u16, u8, u16), i64>,
}

const D: usize = DISTRICTS as usize;
const C: usize = CUSTOMERS as usize;

impl Sums {
    pub(super) fn read(
        txn: &Txn<'_>,
        t: &Tables,
        warehouses: u16,
    ) -> Result<Self, super::Violation> {
        let n = usize::from(warehouses);
        let mut s = Sums {
            warehouses,
            by_warehouse: vec![0; n],
            by_district: vec![0; n * D],
            by_customer: vec![0; n * D * C],
            by_other_customer: HashMap::new(),
        };
        for (_, row) in txn.range(&t.history, ..).map_err(|e| unable(0, None, e))? {
            let row = schema::check(row, history::LEN)
                .ok_or_else(|| unable(0, None, "malformed HISTORY row"))?;
            let amount = i64::from(history::AMOUNT.get(row));
            let (w, d) = (history::W_ID.get(row), history::D_ID.get(row));
            if let Some(wi) = s.warehouse_index(w) {
                s.by_warehouse[wi] += amount;
                if let Some(di) = district_index(d) {
                    s.by_district[wi * D + di] += amount;
                }
            }
            let (cw, cd, c) = (
                history::C_W_ID.get(row),
                history::C_D_ID.get(row),
                history::C_ID.get(row),
            );
            match s.customer_index(cw, cd, c) {
                Some(i) => s.by_customer[i] += amount,
                None => *s.by_other_customer.entry((cw, cd, c)).or_default() += amount,
            }
        }
        Ok(s)
    }

    fn warehouse_index(&self, w: u16) -> Option<usize> {
        (1..=self.warehouses)
            .contains(&w)
            .then(|| usize::from(w - 1))
    }

    fn customer_index(&self, w: u16, d: u8, c: u16) -> Option<usize> {
        let (wi, di) = (self.warehouse_index(w)?, district_index(d)?);
        (1..=CUSTOMERS)
            .contains(&c)
            .then(|| (wi * D + di) * C + usize::from(c - 1))
    }

    /// sum(H_AMOUNT) where H_W_ID = `w`.
    pub(super) fn warehouse(&self, w: u16) -> i64 {
        self.warehouse_index(w).map_or(0, |i| self.by_warehouse[i])
    }

    /// sum(H_AMOUNT) where (H_W_ID, H_D_ID) = (`w`, `d`).
    pub(super) fn district(&self, w: u16, d: u8) -> i64 {
        match (self.warehouse_index(w), district_index(d)) {
            (Some(wi), Some(di)) => self.by_district[wi * D + di],
            _ => 0,
        }
    }

    /// sum(H_AMOUNT) where (H_C_W_ID, H_C_D_ID, H_C_ID) = (`w`, `d`, `c`).
    pub(super) fn customer(&self, w: u16, d: u8, c: u16) -> i64 {
        match self.customer_index(w, d, c) {
            Some(i) => self.by_customer[i],
            None => self.by_other_customer.get(&(w, d, c)).copied().unwrap_or(0),
        }
    }
}

fn district_index(d: u8) -> Option<usize> {
    (1..=DISTRICTS).contains(&d).then(|| usize::from(d - 1))
}
