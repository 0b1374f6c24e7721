//! The five transactions of clause 2, one engine transaction each, as profiles 2.4.2, 2.5.2,
//! 2.6.2, 2.7.4 and 2.8.2 describe them, plus the StockScan long reader.
//!
//! Each function makes one attempt with inputs drawn beforehand (`worker` retries an
//! attempt that conflicts). Rows are read as borrowed slices; a row that changes is copied
//! into a reusable buffer, its fields rewritten in place and put back, so the hot path
//! allocates nothing. Values the specification sends to the terminal are folded into a sink
//! so that reading them is not optimized away.

use std::io::Write as _;
use std::time::{SystemTime, UNIX_EPOCH};

use verso_engine::{Db, Table, Txn};

use super::consistency::DeliveryMark;
use super::schema::{
    self, customer, district, history, item, key, order, order_line, stock, warehouse, DISTRICTS,
    ORDER_LINES_MAX,
};
use super::Tables;

/// Why an attempt did not commit.
#[derive(Debug)]
pub(crate) enum TxnError {
    /// The engine refused (a conflict: retry; anything else: fail the run).
    Engine(verso_engine::Error),
    /// A row the data model guarantees is absent or malformed: the database is broken.
    Missing(&'static str),
}

impl From<verso_engine::Error> for TxnError {
    fn from(e: verso_engine::Error) -> Self {
        TxnError::Engine(e)
    }
}

/// How an attempt ended when it did not fail.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    Committed,
    /// The New-Order with an unused item id, rolled back as clause 2.4.2.3 asks.
    RolledBack,
}

/// Microseconds since the Unix epoch: the "current date and time" of clause 2.
pub(crate) fn now_micros() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

/// A row of `len` bytes at `key`, or the reason it is not there.
#[inline]
fn row<'t>(
    txn: &'t Txn<'_>,
    table: &Table,
    key: &[u8],
    len: usize,
    what: &'static str,
) -> Result<&'t [u8], TxnError> {
    let r = txn.get(table, key)?.ok_or(TxnError::Missing(what))?;
    schema::check(r, len).ok_or(TxnError::Missing(what))
}

/// How a transaction picks its customer (clause 2.5.1.2, 2.6.1.2).
#[derive(Clone, Copy, Debug)]
pub(crate) enum CustomerSel {
    Id(u16),
    /// By C_LAST, given as the name's number (0..=999; see `random::last_name`).
    LastName(u32),
}

/// One order line's input (clause 2.4.1.5).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct LineInput {
    pub(crate) item: u32,
    pub(crate) supply_w: u16,
    pub(crate) quantity: u8,
}

/// New-Order's inputs (clause 2.4.1).
#[derive(Clone, Copy, Debug)]
pub(crate) struct NewOrderInput {
    pub(crate) d: u8,
    pub(crate) c: u16,
    pub(crate) lines: [LineInput; ORDER_LINES_MAX],
    pub(crate) line_count: u8,
}

/// Payment's inputs (clause 2.5.1).
#[derive(Clone, Copy, Debug)]
pub(crate) struct PaymentInput {
    pub(crate) d: u8,
    pub(crate) c_w: u16,
    pub(crate) c_d: u8,
    pub(crate) customer: CustomerSel,
    pub(crate) amount_cents: i64,
}

/// One worker's transaction context: where it works and the buffers it reuses.
pub(crate) struct Ctx<'db> {
    pub(crate) db: &'db Db,
    pub(crate) t: Tables,
    /// The home warehouse.
    pub(crate) w: u16,
    /// HISTORY key writer id (worker index + 1) and next sequence number.
    history_writer: u16,
    history_seq: u64,
    /// Marked before a Delivery that delivers an order commits (condition 11).
    delivered: &'db DeliveryMark,
    /// Per district of the home warehouse: every NEW-ORDER row below this O_ID was deleted
    /// by this worker's own committed Deliveries, so its scans may start here (as Silo's
    /// `last_no_o_ids`). Only this thread's commits move it, and its later transactions
    /// are younger than those commits, so the rows below are gone for them too.
    delivered_below: [u32; DISTRICTS as usize],
    /// Districts a Delivery attempt delivered in, with the order: moved into
    /// `delivered_below` once it commits.
    delivering: [u32; DISTRICTS as usize],
    /// A row being rewritten.
    buf: Vec<u8>,
    /// C_DATA being rebuilt.
    data: Vec<u8>,
    /// Customer ids sharing a last name; item ids of Stock-Level.
    c_ids: Vec<u16>,
    i_ids: Vec<u32>,
    /// Order lines read by a Delivery before their rewrite: (OL_NUMBER, row) back to back.
    lines: Vec<u8>,
    /// Customer rows staged by a Delivery, back to back.
    customers: Vec<u8>,
    /// Stock rows staged by a New-Order, back to back.
    stocks: Vec<u8>,
    /// Terminal output, folded so that reads are not optimized away.
    pub(crate) sink: u64,
    /// Districts Delivery found with no undelivered order (clause 2.7.4.2).
    pub(crate) delivery_skipped: u64,
}

impl<'db> Ctx<'db> {
    /// `history_seq`: the first HISTORY sequence number, past every earlier run's.
    pub(crate) fn new(
        db: &'db Db,
        t: Tables,
        w: u16,
        worker: usize,
        history_seq: u64,
        delivered: &'db DeliveryMark,
    ) -> Self {
        Ctx {
            db,
            t,
            w,
            history_writer: worker as u16 + 1,
            history_seq,
            delivered,
            delivered_below: [0; DISTRICTS as usize],
            delivering: [0; DISTRICTS as usize],
            buf: Vec::with_capacity(customer::LEN),
            data: Vec::with_capacity(customer::DATA.max + 64),
            c_ids: Vec::with_capacity(16),
            i_ids: Vec::with_capacity(20 * ORDER_LINES_MAX),
            lines: Vec::with_capacity(
                usize::from(DISTRICTS) * ORDER_LINES_MAX * (order_line::LEN + 1),
            ),
            customers: Vec::with_capacity(usize::from(DISTRICTS) * customer::LEN),
            stocks: Vec::with_capacity(ORDER_LINES_MAX * stock::LEN),
            sink: 0,
            delivery_skipped: 0,
        }
    }

    /// Copies `src` into the rewrite buffer and returns it.
    #[inline]
    fn stage<'b>(buf: &'b mut Vec<u8>, src: &[u8]) -> &'b mut Vec<u8> {
        buf.clear();
        buf.extend_from_slice(src);
        buf
    }

    /// The customer `sel` names in (w, d): by id, or the one at position ceil(n / 2) of
    /// those with the last name, sorted by C_FIRST (clause 2.5.2.2).
    fn select_customer(
        &mut self,
        txn: &Txn<'_>,
        w: u16,
        d: u8,
        sel: CustomerSel,
    ) -> Result<u16, TxnError> {
        let n = match sel {
            CustomerSel::Id(c) => return Ok(c),
            CustomerSel::LastName(n) => n,
        };
        let mut last = [0u8; super::random::LAST_NAME_MAX];
        let len = super::random::last_name(n, &mut last);
        let (lo, hi) = key::customer_by_name_bounds(w, d, &last[..len]);
        self.c_ids.clear();
        for (k, _) in txn.range(&self.t.customer_by_name, &lo[..]..=&hi[..])? {
            let c = key::customer_by_name_id(k).ok_or(TxnError::Missing("customer name key"))?;
            self.c_ids.push(c);
        }
        if self.c_ids.is_empty() {
            return Err(TxnError::Missing("customer with the last name"));
        }
        Ok(self.c_ids[self.c_ids.len().div_ceil(2) - 1])
    }

    /// New-Order (clause 2.4.2).
    ///
    /// Every read comes before the first write (the order of the profile's reads is kept),
    /// so no read has to look through the transaction's own writes; an item ordered twice
    /// updates the stock copy its first line staged.
    pub(crate) fn new_order(&mut self, input: &NewOrderInput) -> Result<Outcome, TxnError> {
        let (t, w, d) = (self.t, self.w, input.d);
        let lines = &input.lines[..usize::from(input.line_count)];
        let mut txn = self.db.begin()?;
        let wk = key::warehouse(w);
        let w_row = row(&txn, &t.warehouse, &wk, warehouse::LEN, "warehouse")?;
        let w_tax = i64::from(warehouse::TAX.get(w_row));

        let dk = key::district(w, d);
        let d_row = row(&txn, &t.district, &dk, district::LEN, "district")?;
        let d_tax = i64::from(district::TAX.get(d_row));
        let o = district::NEXT_O_ID.get(d_row);
        let mut d_new = [0u8; district::LEN];
        d_new.copy_from_slice(d_row);
        district::NEXT_O_ID.set(&mut d_new, o + 1);

        let ck = key::customer(w, d, input.c);
        let c_row = row(&txn, &t.customer, &ck, customer::LEN, "customer")?;
        let discount = i64::from(customer::DISCOUNT.get(c_row));
        self.sink ^=
            u64::from(customer::LAST.get(c_row)[0]) ^ u64::from(customer::CREDIT.get(c_row)[0]);

        let mut ol_rows = [[0u8; order_line::LEN]; ORDER_LINES_MAX];
        let mut stock_keys = [[0u8; 6]; ORDER_LINES_MAX];
        let mut staged = 0;
        self.stocks.clear();
        let mut total = 0i64;
        for (line, ol_row) in lines.iter().zip(&mut ol_rows) {
            let Some(i_row) = txn.get(&t.item, key::item(line.item))? else {
                // The unused item id of clause 2.4.1.4: the whole order rolls back.
                txn.abort();
                return Ok(Outcome::RolledBack);
            };
            let i_row = schema::check(i_row, item::LEN).ok_or(TxnError::Missing("item"))?;
            let price = i64::from(item::PRICE.get(i_row));
            let item_original = schema::has_original(item::DATA.get(i_row));
            self.sink ^= u64::from(item::NAME.get(i_row).len() as u8);

            let sk = key::stock(line.supply_w, line.item);
            let slot = match stock_keys[..staged].iter().position(|k| *k == sk) {
                Some(slot) => slot,
                None => {
                    let s_row = row(&txn, &t.stock, &sk, stock::LEN, "stock")?;
                    self.stocks.extend_from_slice(s_row);
                    stock_keys[staged] = sk;
                    staged += 1;
                    staged - 1
                }
            };
            let s = &mut self.stocks[slot * stock::LEN..(slot + 1) * stock::LEN];
            order_line::DIST_INFO.set(ol_row, stock::dist(d).get(s));
            let brand_generic = item_original && schema::has_original(stock::DATA.get(s));
            self.sink ^= u64::from(brand_generic);
            let qty = i16::from(line.quantity);
            stock::QUANTITY.update(s, |q| if q >= qty + 10 { q - qty } else { q - qty + 91 });
            stock::YTD.update(s, |v| v + u32::from(line.quantity));
            stock::ORDER_CNT.update(s, |v| v.wrapping_add(1));
            if line.supply_w != w {
                stock::REMOTE_CNT.update(s, |v| v.wrapping_add(1));
            }

            let amount = i64::from(line.quantity) * price;
            total += amount;
            order_line::I_ID.set(ol_row, line.item);
            order_line::SUPPLY_W_ID.set(ol_row, line.supply_w);
            order_line::DELIVERY_D.set(ol_row, 0);
            order_line::QUANTITY.set(ol_row, line.quantity);
            order_line::AMOUNT.set(ol_row, amount as i32);
        }
        // total * (1 - C_DISCOUNT) * (1 + W_TAX + D_TAX), rates in 1/10000.
        let total = total * (10_000 - discount) / 10_000 * (10_000 + w_tax + d_tax) / 10_000;
        self.sink ^= total as u64;

        txn.put(&t.district, dk, d_new)?;
        let all_local = lines.iter().all(|l| l.supply_w == w);
        let mut o_row = [0u8; order::LEN];
        order::C_ID.set(&mut o_row, input.c);
        order::ENTRY_D.set(&mut o_row, now_micros());
        order::CARRIER_ID.set(&mut o_row, 0);
        order::OL_CNT.set(&mut o_row, input.line_count);
        order::ALL_LOCAL.set(&mut o_row, u8::from(all_local));
        let ok = key::order(w, d, o);
        txn.put(&t.orders, ok, o_row)?;
        txn.put(&t.new_order, ok, [])?;
        let by_customer = key::order_by_customer(w, d, input.c, o);
        txn.put(&t.orders_by_customer, by_customer, [])?;
        for (sk, s) in stock_keys[..staged]
            .iter()
            .zip(self.stocks.chunks_exact(stock::LEN))
        {
            txn.put(&t.stock, sk, s)?;
        }
        for (n, ol_row) in ol_rows[..lines.len()].iter().enumerate() {
            txn.put(&t.order_line, key::order_line(w, d, o, n as u8 + 1), ol_row)?;
        }
        crate::persist::commit(txn)?;
        Ok(Outcome::Committed)
    }

    /// Payment (clause 2.5.2), reads first as New-Order.
    pub(crate) fn payment(&mut self, input: &PaymentInput) -> Result<Outcome, TxnError> {
        let (t, w, d) = (self.t, self.w, input.d);
        let amount = input.amount_cents;
        let mut txn = self.db.begin()?;
        let mut h_data = [b' '; 24];

        let wk = key::warehouse(w);
        let w_row = row(&txn, &t.warehouse, &wk, warehouse::LEN, "warehouse")?;
        let w_name = warehouse::NAME.get(w_row);
        h_data[..w_name.len()].copy_from_slice(w_name);
        let h_len = w_name.len() + 4;
        self.sink ^= u64::from(warehouse::ZIP.get(w_row)[0]);
        let mut w_new = [0u8; warehouse::LEN];
        w_new.copy_from_slice(w_row);
        warehouse::YTD.update(&mut w_new, |v| v + amount);

        let dk = key::district(w, d);
        let d_row = row(&txn, &t.district, &dk, district::LEN, "district")?;
        let d_name = district::NAME.get(d_row);
        h_data[h_len..h_len + d_name.len()].copy_from_slice(d_name);
        let h_len = h_len + d_name.len();
        self.sink ^= u64::from(district::ZIP.get(d_row)[0]);
        let mut d_new = [0u8; district::LEN];
        d_new.copy_from_slice(d_row);
        district::YTD.update(&mut d_new, |v| v + amount);

        let (c_w, c_d) = (input.c_w, input.c_d);
        let c = self.select_customer(&txn, c_w, c_d, input.customer)?;
        let ck = key::customer(c_w, c_d, c);
        let c_row = row(&txn, &t.customer, &ck, customer::LEN, "customer")?;
        let bad_credit = customer::CREDIT.get(c_row) == b"BC";
        if bad_credit {
            // C_DATA = "C_ID C_D_ID C_W_ID D_ID W_ID H_AMOUNT|" + old C_DATA, cut at 500.
            self.data.clear();
            let _ = write!(
                self.data,
                "{c} {c_d} {c_w} {d} {w} {}.{:02}|",
                amount / 100,
                amount % 100
            );
            self.data.extend_from_slice(customer::DATA.get(c_row));
        }
        let buf = Self::stage(&mut self.buf, c_row);
        customer::BALANCE.update(buf, |v| v - amount);
        customer::YTD_PAYMENT.update(buf, |v| v + amount);
        customer::PAYMENT_CNT.update(buf, |v| v.wrapping_add(1));
        if bad_credit {
            customer::DATA.set(buf, &self.data);
        }

        let mut h_row = [0u8; history::LEN];
        history::C_ID.set(&mut h_row, c);
        history::C_D_ID.set(&mut h_row, c_d);
        history::C_W_ID.set(&mut h_row, c_w);
        history::D_ID.set(&mut h_row, d);
        history::W_ID.set(&mut h_row, w);
        history::DATE.set(&mut h_row, now_micros());
        history::AMOUNT.set(&mut h_row, amount as i32);
        history::DATA.set(&mut h_row, &h_data[..h_len]);

        txn.put(&t.warehouse, wk, w_new)?;
        txn.put(&t.district, dk, d_new)?;
        txn.put(&t.customer, ck, &self.buf)?;
        let hk = key::history(self.history_writer, self.history_seq);
        txn.put(&t.history, hk, h_row)?;
        crate::persist::commit(txn)?;
        self.history_seq += 1;
        Ok(Outcome::Committed)
    }

    /// Order-Status (clause 2.6.2), read-only.
    pub(crate) fn order_status(&mut self, d: u8, sel: CustomerSel) -> Result<Outcome, TxnError> {
        let (t, w) = (self.t, self.w);
        let txn = self.db.begin_read_only()?;
        let c = self.select_customer(&txn, w, d, sel)?;
        let c_row = row(
            &txn,
            &t.customer,
            &key::customer(w, d, c),
            customer::LEN,
            "customer",
        )?;
        self.sink ^= customer::BALANCE.get(c_row) as u64
            ^ u64::from(customer::FIRST.get(c_row)[0])
            ^ u64::from(customer::MIDDLE.get(c_row)[0])
            ^ u64::from(customer::LAST.get(c_row)[0]);

        // The customer's latest order: the last key of (w, d, c, *) in the index.
        let lo = key::order_by_customer(w, d, c, 0);
        let hi = key::order_by_customer(w, d, c, u32::MAX);
        let (k, _) = txn
            .range_rev(&t.orders_by_customer, &lo[..]..=&hi[..])?
            .next()
            .ok_or(TxnError::Missing("an order of the customer"))?;
        let o = key::order_by_customer_id(k).ok_or(TxnError::Missing("order index key"))?;
        let o_row = row(&txn, &t.orders, &key::order(w, d, o), order::LEN, "order")?;
        self.sink ^= order::ENTRY_D.get(o_row) ^ u64::from(order::CARRIER_ID.get(o_row));

        let lo = key::order_line(w, d, o, 0);
        let hi = key::order_line(w, d, o, u8::MAX);
        for (_, ol) in txn.range(&t.order_line, &lo[..]..=&hi[..])? {
            let ol = schema::check(ol, order_line::LEN).ok_or(TxnError::Missing("order line"))?;
            self.sink ^= u64::from(order_line::I_ID.get(ol))
                ^ u64::from(order_line::SUPPLY_W_ID.get(ol))
                ^ u64::from(order_line::QUANTITY.get(ol))
                ^ order_line::AMOUNT.get(ol) as u64
                ^ order_line::DELIVERY_D.get(ol);
        }
        crate::persist::commit(txn)?;
        Ok(Outcome::Committed)
    }

    /// Delivery (clause 2.7.4): the oldest undelivered order of each of the ten districts,
    /// in one transaction. The ten districts' reads come first and their writes after
    /// (districts share no rows), so no read looks through the transaction's own writes.
    pub(crate) fn delivery(&mut self, carrier: u8) -> Result<Outcome, TxnError> {
        let (t, w) = (self.t, self.w);
        let now = now_micros();
        let mut txn = self.db.begin()?;
        // Per district delivered: the order, its staged row, its customer and line count.
        let mut found = [(0u32, 0u16, 0u8); DISTRICTS as usize];
        let mut o_rows = [[0u8; order::LEN]; DISTRICTS as usize];
        self.lines.clear();
        self.customers.clear();
        let mut skipped = 0;
        for d in 1..=DISTRICTS {
            let di = usize::from(d - 1);
            self.delivering[di] = 0;
            let Some(o) = oldest_new_order(&txn, &t, w, d, self.delivered_below[di])? else {
                skipped += 1;
                continue;
            };
            let o_row = row(&txn, &t.orders, &key::order(w, d, o), order::LEN, "order")?;
            let c = order::C_ID.get(o_row);
            o_rows[di].copy_from_slice(o_row);
            order::CARRIER_ID.set(&mut o_rows[di], carrier);

            let lo = key::order_line(w, d, o, 0);
            let hi = key::order_line(w, d, o, u8::MAX);
            let mut sum = 0i64;
            let mut count = 0u8;
            for (k, ol) in txn.range(&t.order_line, &lo[..]..=&hi[..])? {
                let ol = schema::check(ol, order_line::LEN).ok_or(TxnError::Missing("line"))?;
                sum += i64::from(order_line::AMOUNT.get(ol));
                self.lines.push(k[k.len() - 1]);
                self.lines.extend_from_slice(ol);
                let at = self.lines.len() - order_line::LEN;
                order_line::DELIVERY_D.set(&mut self.lines[at..], now);
                count += 1;
            }

            let ck = key::customer(w, d, c);
            let c_row = row(&txn, &t.customer, &ck, customer::LEN, "customer")?;
            let at = self.customers.len();
            self.customers.extend_from_slice(c_row);
            let c_new = &mut self.customers[at..];
            customer::BALANCE.update(c_new, |v| v + sum);
            customer::DELIVERY_CNT.update(c_new, |v| v.wrapping_add(1));
            found[di] = (o, c, count);
            self.delivering[di] = o + 1;
        }

        let mut lines = self.lines.chunks_exact(order_line::LEN + 1);
        let mut customers = self.customers.chunks_exact(customer::LEN);
        for (di, &(o, c, count)) in found.iter().enumerate() {
            if self.delivering[di] == 0 {
                continue;
            }
            let d = di as u8 + 1;
            let ok = key::order(w, d, o);
            txn.delete(&t.new_order, ok)?;
            txn.put(&t.orders, ok, o_rows[di])?;
            for rec in lines.by_ref().take(usize::from(count)) {
                txn.put(&t.order_line, key::order_line(w, d, o, rec[0]), &rec[1..])?;
            }
            let c_row = customers
                .next()
                .ok_or(TxnError::Missing("staged customer"))?;
            txn.put(&t.customer, key::customer(w, d, c), c_row)?;
        }
        // Before the commit: a consistency check whose snapshot holds this delivery must
        // see the mark, or it would hold condition 11 against a delivered order.
        if skipped < u64::from(DISTRICTS) {
            self.delivered.set();
        }
        crate::persist::commit(txn)?;
        for (below, &next) in self.delivered_below.iter_mut().zip(&self.delivering) {
            *below = (*below).max(next);
        }
        self.delivery_skipped += skipped;
        Ok(Outcome::Committed)
    }

    /// Stock-Level (clause 2.8.2), read-only: distinct items of the district's last 20
    /// orders whose stock is below `threshold`.
    pub(crate) fn stock_level(&mut self, d: u8, threshold: i16) -> Result<Outcome, TxnError> {
        let (t, w) = (self.t, self.w);
        let txn = self.db.begin_read_only()?;
        let d_row = row(
            &txn,
            &t.district,
            &key::district(w, d),
            district::LEN,
            "district",
        )?;
        let next = district::NEXT_O_ID.get(d_row);
        let lo = key::order_line(w, d, next.saturating_sub(20), 0);
        let hi = key::order_line(w, d, next, 0);
        self.i_ids.clear();
        for (_, ol) in txn.range(&t.order_line, &lo[..]..&hi[..])? {
            let ol = schema::check(ol, order_line::LEN).ok_or(TxnError::Missing("order line"))?;
            self.i_ids.push(order_line::I_ID.get(ol));
        }
        self.i_ids.sort_unstable();
        self.i_ids.dedup();
        let mut low = 0u64;
        for &i in &self.i_ids {
            let s_row = row(&txn, &t.stock, &key::stock(w, i), stock::LEN, "stock")?;
            low += u64::from(stock::QUANTITY.get(s_row) < threshold);
        }
        self.sink ^= low;
        crate::persist::commit(txn)?;
        Ok(Outcome::Committed)
    }
}

/// NEW-ORDER rows a Delivery's first range read covers: the oldest undelivered order is
/// almost always the first one past `delivered_below`, and the engine reads a range in
/// chunks of 64 records, so a bounded first look saves reading (and stamping) 63 of them.
const DELIVERY_WINDOW: u32 = 4;

/// The smallest NO_O_ID of (w, d) at or above `from` (no rows are below it; see
/// `Ctx::delivered_below`): a forward range read, in a small window first.
fn oldest_new_order(
    txn: &Txn<'_>,
    t: &Tables,
    w: u16,
    d: u8,
    from: u32,
) -> Result<Option<u32>, TxnError> {
    let lo = key::order(w, d, from);
    let mid = key::order(w, d, from.saturating_add(DELIVERY_WINDOW));
    let hi = key::order(w, d, u32::MAX);
    let first = match txn.range(&t.new_order, &lo[..]..&mid[..])?.next() {
        Some((k, _)) => Some(k),
        None => txn
            .range(&t.new_order, &mid[..]..=&hi[..])?
            .next()
            .map(|(k, _)| k),
    };
    match first {
        Some(k) => Ok(Some(
            key::order_id(k).ok_or(TxnError::Missing("new-order key"))?,
        )),
        None => Ok(None),
    }
}

/// StockScan (issue 4's long reader): sums S_QUANTITY over every stock row of every
/// warehouse in one read-only transaction. `Ok(None)` if `stop` said to give up midway.
pub(crate) fn stock_scan(
    db: &Db,
    t: &Tables,
    stop: impl Fn() -> bool,
) -> Result<Option<i64>, TxnError> {
    let txn = db.begin_read_only()?;
    let mut sum = 0i64;
    for (n, (_, s)) in txn.range(&t.stock, ..)?.enumerate() {
        if n % 4096 == 4095 && stop() {
            return Ok(None);
        }
        let s = schema::check(s, stock::LEN).ok_or(TxnError::Missing("stock"))?;
        sum += i64::from(stock::QUANTITY.get(s));
    }
    crate::persist::commit(txn)?;
    Ok(Some(sum))
}
