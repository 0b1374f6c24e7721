//! Population (clause 4.3.3.1): ITEM once, then per warehouse its row, its STOCK, and per
//! district the district row, 3000 customers (each with a HISTORY row and a name-index
//! entry) and 3000 orders (each with its order lines, its customer-index entry and, for the
//! last 900, a NEW-ORDER row).
//!
//! The work is cut into *units* numbered `0..units()`: one item, one warehouse row, one
//! stock row, one district row, one customer or one order each, laid out item first and
//! then warehouse by warehouse. `runner::load_units` hands contiguous ranges of units to
//! the load threads (at most one per warehouse), so each thread fills about one warehouse.
//! A range is loaded in one transaction, with a generator seeded by the range's start, so
//! population depends only on the seed and the thread count.

use std::sync::atomic::{AtomicU64, Ordering};

use verso_engine::{Db, Txn};

use super::random::{self, Constants, A_C_LAST};
use super::schema::{
    self, customer, district, history, item, key, order, order_line, stock, warehouse, CUSTOMERS,
    DISTRICTS, FIRST_NEW_ORDER, ITEMS, ORDERS,
};
use super::Tables;
use crate::rng::Rng;
use crate::ycsb::Spin;
use crate::BenchError;

/// Units per load transaction: an order unit writes about 13 rows, so a batch is about
/// 10 000 rows, enough that begin and commit vanish in the cost.
pub const UNITS_PER_BATCH: u64 = 800;

/// Units of one district: its row, its customers, its orders.
const DISTRICT_UNITS: u64 = 1 + CUSTOMERS as u64 + ORDERS as u64;
/// Units of one warehouse: its row, its stock, its districts.
const WAREHOUSE_UNITS: u64 = 1 + ITEMS as u64 + DISTRICTS as u64 * DISTRICT_UNITS;

const STREAM_LOAD: u64 = 0x10ad_0000_0000_0000;
const STREAM_PERMUTATION: u64 = 0x9e12_0000_0000_0000;

/// C_CREDIT_LIM at population: 50 000.00.
const CREDIT_LIM_CENTS: i64 = 5_000_000;
/// W_YTD at population: 300 000.00; D_YTD is a tenth of it.
pub const W_YTD_CENTS: i64 = 30_000_000;

/// One unit of population work.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Unit {
    Item(u32),
    Warehouse(u16),
    Stock(u16, u32),
    District(u16, u8),
    Customer(u16, u8, u16),
    Order(u16, u8, u32),
}

/// Unit `u` of the layout described in the module comment.
fn unit(u: u64) -> Unit {
    let items = u64::from(ITEMS);
    if u < items {
        return Unit::Item(u as u32 + 1);
    }
    let u = u - items;
    let w = (u / WAREHOUSE_UNITS) as u16 + 1;
    let r = u % WAREHOUSE_UNITS;
    if r == 0 {
        return Unit::Warehouse(w);
    }
    if r <= items {
        return Unit::Stock(w, r as u32);
    }
    let r = r - 1 - items;
    let d = (r / DISTRICT_UNITS) as u8 + 1;
    let r = r % DISTRICT_UNITS;
    if r == 0 {
        Unit::District(w, d)
    } else if r <= u64::from(CUSTOMERS) {
        Unit::Customer(w, d, r as u16)
    } else {
        Unit::Order(w, d, (r - u64::from(CUSTOMERS)) as u32)
    }
}

/// Loads ranges of units into a database; shared by the load threads.
pub struct Loader<'db> {
    db: &'db Db,
    t: Tables,
    warehouses: u16,
    constants: Constants,
    seed: u64,
    /// Population's "current date and time", the same for every row.
    now: u64,
    rows: AtomicU64,
}

impl<'db> Loader<'db> {
    /// A loader for `warehouses` warehouses into the (empty) tables `t`.
    pub fn new(db: &'db Db, t: Tables, warehouses: u16, constants: Constants, seed: u64) -> Self {
        Loader {
            db,
            t,
            warehouses,
            constants,
            seed,
            now: super::txns::now_micros(),
            rows: AtomicU64::new(0),
        }
    }

    /// The number of units to load.
    pub fn units(&self) -> u64 {
        u64::from(ITEMS) + u64::from(self.warehouses) * WAREHOUSE_UNITS
    }

    /// Rows written so far (index entries included).
    pub fn rows(&self) -> u64 {
        self.rows.load(Ordering::Relaxed)
    }

    /// Loads units `lo..hi` in one transaction.
    pub fn load(&self, lo: u64, hi: u64) -> Result<(), BenchError> {
        assert!(lo <= hi && hi <= self.units(), "unit range {lo}..{hi}");
        let mut batch = Batch {
            l: self,
            rng: Rng::new(0),
            row: Vec::with_capacity(customer::LEN),
            permutation: None,
            rows: 0,
        };
        let mut spin = Spin::default();
        loop {
            batch.rng = Rng::for_stream(self.seed ^ STREAM_LOAD, lo);
            batch.rows = 0;
            let mut txn = self.db.begin()?;
            for u in lo..hi {
                batch.unit(&mut txn, unit(u))?;
            }
            match crate::persist::commit(txn) {
                Ok(_) => {
                    self.rows.fetch_add(batch.rows, Ordering::Relaxed);
                    return Ok(());
                }
                // Loads write disjoint keys and read nothing, so this should not happen;
                // retrying is still right.
                Err(e) if e.is_conflict() => spin.spin(),
                Err(e) => return Err(e.into()),
            }
        }
    }
}

/// One load transaction's state: its generator and reusable buffers.
struct Batch<'l, 'db> {
    l: &'l Loader<'db>,
    rng: Rng,
    row: Vec<u8>,
    /// The O_C_ID permutation of the district whose orders are being loaded.
    permutation: Option<((u16, u8), Vec<u16>)>,
    rows: u64,
}

impl Batch<'_, '_> {
    fn unit(&mut self, txn: &mut Txn<'_>, u: Unit) -> Result<(), verso_engine::Error> {
        match u {
            Unit::Item(i) => self.item(txn, i),
            Unit::Warehouse(w) => self.warehouse(txn, w),
            Unit::Stock(w, i) => self.stock(txn, w, i),
            Unit::District(w, d) => self.district(txn, w, d),
            Unit::Customer(w, d, c) => self.customer(txn, w, d, c),
            Unit::Order(w, d, o) => self.order(txn, w, d, o),
        }
    }

    /// Clears the row buffer to `len` zero bytes.
    fn fresh_row(&mut self, len: usize) -> &mut [u8] {
        self.row.clear();
        self.row.resize(len, 0);
        &mut self.row
    }

    fn put(
        &mut self,
        txn: &mut Txn<'_>,
        table: &verso_engine::Table,
        key: &[u8],
    ) -> Result<(), verso_engine::Error> {
        self.rows += 1;
        txn.put(table, key, &self.row)
    }

    fn text(&mut self, field: schema::Text, lo: u32, hi: u32) {
        let mut buf = [0u8; 500];
        let n = random::a_string(&mut self.rng, lo, hi, &mut buf[..field.max]);
        field.set(&mut self.row, &buf[..n]);
    }

    fn fixed_text(&mut self, field: schema::Fixed) {
        let mut buf = [0u8; 24];
        let n = random::a_string(&mut self.rng, field.len as u32, field.len as u32, &mut buf);
        field.set(&mut self.row, &buf[..n]);
    }

    /// NAME, STREET_1, STREET_2, CITY, STATE, ZIP: the address block warehouse and district
    /// share (clause 4.3.3.1).
    fn address(&mut self, fields: [schema::Text; 4], state: schema::Fixed, zip: schema::Fixed) {
        self.text(fields[0], 6, 10);
        for f in &fields[1..] {
            self.text(*f, 10, 20);
        }
        self.fixed_text(state);
        let z = random::zip(&mut self.rng);
        zip.set(&mut self.row, &z);
    }

    fn item(&mut self, txn: &mut Txn<'_>, i: u32) -> Result<(), verso_engine::Error> {
        self.fresh_row(item::LEN);
        item::IM_ID.set(&mut self.row, random::uniform(&mut self.rng, 1, 10_000));
        self.text(item::NAME, 14, 24);
        item::PRICE.set(&mut self.row, random::uniform(&mut self.rng, 100, 10_000));
        let mut data = [0u8; 50];
        let n = random::data_string(&mut self.rng, &mut data);
        item::DATA.set(&mut self.row, &data[..n]);
        let t = self.l.t;
        self.put(txn, &t.item, &key::item(i))
    }

    fn warehouse(&mut self, txn: &mut Txn<'_>, w: u16) -> Result<(), verso_engine::Error> {
        use warehouse::*;
        self.fresh_row(LEN);
        self.address([NAME, STREET_1, STREET_2, CITY], STATE, ZIP);
        TAX.set(
            &mut self.row,
            random::uniform(&mut self.rng, 0, 2000) as u16,
        );
        YTD.set(&mut self.row, W_YTD_CENTS);
        let t = self.l.t;
        self.put(txn, &t.warehouse, &key::warehouse(w))
    }

    fn stock(&mut self, txn: &mut Txn<'_>, w: u16, i: u32) -> Result<(), verso_engine::Error> {
        self.fresh_row(stock::LEN);
        let q = random::uniform(&mut self.rng, 10, 100) as i16;
        stock::QUANTITY.set(&mut self.row, q);
        for d in 1..=DISTRICTS {
            self.fixed_text(stock::dist(d));
        }
        let mut data = [0u8; 50];
        let n = random::data_string(&mut self.rng, &mut data);
        stock::DATA.set(&mut self.row, &data[..n]);
        let t = self.l.t;
        self.put(txn, &t.stock, &key::stock(w, i))
    }

    fn district(&mut self, txn: &mut Txn<'_>, w: u16, d: u8) -> Result<(), verso_engine::Error> {
        use district::*;
        self.fresh_row(LEN);
        self.address([NAME, STREET_1, STREET_2, CITY], STATE, ZIP);
        TAX.set(
            &mut self.row,
            random::uniform(&mut self.rng, 0, 2000) as u16,
        );
        YTD.set(&mut self.row, W_YTD_CENTS / i64::from(DISTRICTS));
        NEXT_O_ID.set(&mut self.row, ORDERS + 1);
        let t = self.l.t;
        self.put(txn, &t.district, &key::district(w, d))
    }

    /// A customer, its HISTORY row and its name-index entry.
    fn customer(
        &mut self,
        txn: &mut Txn<'_>,
        w: u16,
        d: u8,
        c: u16,
    ) -> Result<(), verso_engine::Error> {
        use customer::*;
        let t = self.l.t;
        self.fresh_row(LEN);
        // The first 1000 customers take the 1000 names in turn, so every name exists in
        // every district; the rest are NURand-distributed (clause 4.3.3.1).
        let n = if c <= 1000 {
            u32::from(c) - 1
        } else {
            random::nurand(
                &mut self.rng,
                A_C_LAST,
                self.l.constants.c_last_load,
                0,
                999,
            )
        };
        let mut last = [0u8; random::LAST_NAME_MAX];
        let last_len = random::last_name(n, &mut last);
        LAST.set(&mut self.row, &last[..last_len]);
        MIDDLE.set(&mut self.row, b"OE");
        self.text(FIRST, 8, 16);
        self.text(STREET_1, 10, 20);
        self.text(STREET_2, 10, 20);
        self.text(CITY, 10, 20);
        self.fixed_text(STATE);
        let z = random::zip(&mut self.rng);
        ZIP.set(&mut self.row, &z);
        let mut phone = [0u8; 16];
        random::n_string(&mut self.rng, &mut phone);
        PHONE.set(&mut self.row, &phone);
        SINCE.set(&mut self.row, self.l.now);
        let bad = self.rng.below(10) == 0;
        CREDIT.set(&mut self.row, if bad { b"BC" } else { b"GC" });
        CREDIT_LIM.set(&mut self.row, CREDIT_LIM_CENTS);
        DISCOUNT.set(
            &mut self.row,
            random::uniform(&mut self.rng, 0, 5000) as u16,
        );
        BALANCE.set(&mut self.row, -1000);
        YTD_PAYMENT.set(&mut self.row, 1000);
        PAYMENT_CNT.set(&mut self.row, 1);
        DELIVERY_CNT.set(&mut self.row, 0);
        self.text(DATA, 300, 500);
        let name_key = key::customer_by_name(w, d, &last[..last_len], FIRST.get(&self.row), c);
        self.put(txn, &t.customer, &key::customer(w, d, c))?;
        self.row.clear();
        self.put(txn, &t.customer_by_name, &name_key)?;

        self.fresh_row(history::LEN);
        history::C_ID.set(&mut self.row, c);
        history::C_D_ID.set(&mut self.row, d);
        history::C_W_ID.set(&mut self.row, w);
        history::D_ID.set(&mut self.row, d);
        history::W_ID.set(&mut self.row, w);
        history::DATE.set(&mut self.row, self.l.now);
        history::AMOUNT.set(&mut self.row, 1000);
        self.text(history::DATA, 12, 24);
        let seq = (u64::from(w - 1) * u64::from(DISTRICTS) + u64::from(d - 1))
            * u64::from(CUSTOMERS)
            + u64::from(c - 1);
        self.put(txn, &t.history, &key::history(0, seq))
    }

    /// O_C_ID of order `o` in (w, d): a random permutation of the customers per district.
    fn order_customer(&mut self, w: u16, d: u8, o: u32) -> u16 {
        let stale = match &self.permutation {
            Some((wd, _)) => *wd != (w, d),
            None => true,
        };
        if stale {
            let stream = (u64::from(w) << 8) | u64::from(d);
            let mut rng = Rng::for_stream(self.l.seed ^ STREAM_PERMUTATION, stream);
            let mut p: Vec<u16> = (1..=CUSTOMERS).collect();
            for i in (1..p.len()).rev() {
                p.swap(i, rng.below(i as u64 + 1) as usize);
            }
            self.permutation = Some(((w, d), p));
        }
        let (_, p) = self.permutation.as_ref().expect("filled above");
        p[o as usize - 1]
    }

    /// An order with its lines, its customer-index entry and, if undelivered, NEW-ORDER row.
    fn order(
        &mut self,
        txn: &mut Txn<'_>,
        w: u16,
        d: u8,
        o: u32,
    ) -> Result<(), verso_engine::Error> {
        let t = self.l.t;
        let c = self.order_customer(w, d, o);
        let delivered = o < FIRST_NEW_ORDER;
        let ol_cnt = random::uniform(&mut self.rng, 5, 15) as u8;
        self.fresh_row(order::LEN);
        order::C_ID.set(&mut self.row, c);
        order::ENTRY_D.set(&mut self.row, self.l.now);
        let carrier = if delivered {
            random::uniform(&mut self.rng, 1, 10) as u8
        } else {
            0
        };
        order::CARRIER_ID.set(&mut self.row, carrier);
        order::OL_CNT.set(&mut self.row, ol_cnt);
        order::ALL_LOCAL.set(&mut self.row, 1);
        self.put(txn, &t.orders, &key::order(w, d, o))?;
        self.row.clear();
        self.put(
            txn,
            &t.orders_by_customer,
            &key::order_by_customer(w, d, c, o),
        )?;
        if !delivered {
            self.put(txn, &t.new_order, &key::order(w, d, o))?;
        }
        for number in 1..=ol_cnt {
            self.fresh_row(order_line::LEN);
            let i = random::uniform(&mut self.rng, 1, ITEMS);
            order_line::I_ID.set(&mut self.row, i);
            order_line::SUPPLY_W_ID.set(&mut self.row, w);
            let (delivery_d, amount) = if delivered {
                (self.l.now, 0)
            } else {
                (0, random::uniform(&mut self.rng, 1, 999_999) as i32)
            };
            order_line::DELIVERY_D.set(&mut self.row, delivery_d);
            order_line::QUANTITY.set(&mut self.row, 5);
            order_line::AMOUNT.set(&mut self.row, amount);
            self.fixed_text(order_line::DIST_INFO);
            self.put(txn, &t.order_line, &key::order_line(w, d, o, number))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_cover_the_layout_in_order() {
        assert_eq!(unit(0), Unit::Item(1));
        assert_eq!(unit(u64::from(ITEMS) - 1), Unit::Item(ITEMS));
        let base = u64::from(ITEMS);
        assert_eq!(unit(base), Unit::Warehouse(1));
        assert_eq!(unit(base + 1), Unit::Stock(1, 1));
        assert_eq!(unit(base + u64::from(ITEMS)), Unit::Stock(1, ITEMS));
        assert_eq!(unit(base + u64::from(ITEMS) + 1), Unit::District(1, 1));
        assert_eq!(unit(base + u64::from(ITEMS) + 2), Unit::Customer(1, 1, 1));
        assert_eq!(
            unit(base + u64::from(ITEMS) + 1 + u64::from(CUSTOMERS) + 1),
            Unit::Order(1, 1, 1)
        );
        assert_eq!(
            unit(base + WAREHOUSE_UNITS - 1),
            Unit::Order(1, DISTRICTS, ORDERS)
        );
        assert_eq!(unit(base + WAREHOUSE_UNITS), Unit::Warehouse(2));
    }
}
