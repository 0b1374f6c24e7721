//! The nine TPC-C tables (clause 1.3) and the two secondary indexes, as engine tables: keys
//! and row layouts.
//!
//! **Keys** are big-endian composites, so byte order is the order of the tuple: a range over
//! a key prefix is a range over the rows of one warehouse, district, customer or order. Ids
//! take the narrowest width the specification's ranges allow (warehouse `u16`, district
//! `u8`, customer `u16`, order `u32`, item `u32`), which keeps every primary key within 8
//! bytes: one Masstree layer.
//!
//! **Rows** have one fixed layout per table: every column the specification lists (the key
//! columns live in the key only), numbers little-endian at fixed offsets, fixed text
//! (`CHAR(n)`) as `n` bytes, variable text (`VARCHAR(n)`) as a length then `n` bytes. A field
//! is a typed offset ([`I64`], [`Text`], ...), so a transaction reads or rewrites exactly the
//! columns it needs in a copied row, without decoding the rest. Money is in cents, rates
//! (`W_TAX`, `C_DISCOUNT`, ...) in units of 1/10000, dates in microseconds since the Unix
//! epoch with 0 for null.

/// Districts per warehouse.
pub const DISTRICTS: u8 = 10;
/// Customers per district.
pub const CUSTOMERS: u16 = 3000;
/// Rows of ITEM, and of STOCK per warehouse.
pub const ITEMS: u32 = 100_000;
/// Orders per district at population.
pub const ORDERS: u32 = 3000;
/// The first undelivered order at population: orders 2101..=3000 have NEW-ORDER rows.
pub const FIRST_NEW_ORDER: u32 = 2101;
/// Most warehouses: ids are 16 bits wide in keys.
pub const WAREHOUSES_MAX: u32 = u16::MAX as u32;
/// Most order lines per order (`O_OL_CNT` is 5..=15).
pub const ORDER_LINES_MAX: usize = 15;

/// The engine table names, in creation order.
pub const TABLE_NAMES: [&str; 11] = [
    "warehouse",
    "district",
    "customer",
    "customer_by_name",
    "history",
    "new_order",
    "orders",
    "orders_by_customer",
    "order_line",
    "item",
    "stock",
];

/// Order-preserving keys. Each returns a fixed-size array, so building a key never allocates.
pub mod key {
    /// WAREHOUSE: (W_ID).
    #[inline]
    pub fn warehouse(w: u16) -> [u8; 2] {
        w.to_be_bytes()
    }

    /// DISTRICT: (D_W_ID, D_ID).
    #[inline]
    pub fn district(w: u16, d: u8) -> [u8; 3] {
        let w = w.to_be_bytes();
        [w[0], w[1], d]
    }

    /// CUSTOMER: (C_W_ID, C_D_ID, C_ID).
    #[inline]
    pub fn customer(w: u16, d: u8, c: u16) -> [u8; 5] {
        let mut k = [0; 5];
        k[..3].copy_from_slice(&district(w, d));
        k[3..].copy_from_slice(&c.to_be_bytes());
        k
    }

    /// The C_ID of a [`customer`] key.
    #[inline]
    pub fn customer_id(k: &[u8]) -> Option<u16> {
        Some(u16::from_be_bytes(k.get(3..5)?.try_into().ok()?))
    }

    /// Length of a [`customer_by_name`] key.
    pub const CUSTOMER_BY_NAME_LEN: usize = 3 + 2 * NAME_LEN + 2;
    const NAME_LEN: usize = 16;

    /// The secondary index of customers by name: (C_W_ID, C_D_ID, C_LAST, C_FIRST, C_ID),
    /// names zero-padded to 16 bytes so that a shorter name sorts before its extensions.
    /// The row is empty: the key holds everything.
    #[inline]
    pub fn customer_by_name(
        w: u16,
        d: u8,
        last: &[u8],
        first: &[u8],
        c: u16,
    ) -> [u8; CUSTOMER_BY_NAME_LEN] {
        debug_assert!(last.len() <= NAME_LEN && first.len() <= NAME_LEN);
        let mut k = [0; CUSTOMER_BY_NAME_LEN];
        k[..3].copy_from_slice(&district(w, d));
        let last = &last[..last.len().min(NAME_LEN)];
        let first = &first[..first.len().min(NAME_LEN)];
        k[3..3 + last.len()].copy_from_slice(last);
        k[3 + NAME_LEN..3 + NAME_LEN + first.len()].copy_from_slice(first);
        k[CUSTOMER_BY_NAME_LEN - 2..].copy_from_slice(&c.to_be_bytes());
        k
    }

    /// The inclusive bounds of every [`customer_by_name`] key with this last name.
    #[inline]
    pub fn customer_by_name_bounds(
        w: u16,
        d: u8,
        last: &[u8],
    ) -> ([u8; CUSTOMER_BY_NAME_LEN], [u8; CUSTOMER_BY_NAME_LEN]) {
        let lo = customer_by_name(w, d, last, &[], 0);
        let mut hi = lo;
        hi[3 + NAME_LEN..].fill(0xff);
        (lo, hi)
    }

    /// The C_ID at the end of a [`customer_by_name`] key.
    #[inline]
    pub fn customer_by_name_id(k: &[u8]) -> Option<u16> {
        let tail: [u8; 2] = k.get(CUSTOMER_BY_NAME_LEN - 2..)?.try_into().ok()?;
        Some(u16::from_be_bytes(tail))
    }

    /// ORDER and NEW-ORDER: (W_ID, D_ID, O_ID).
    #[inline]
    pub fn order(w: u16, d: u8, o: u32) -> [u8; 7] {
        let mut k = [0; 7];
        k[..3].copy_from_slice(&district(w, d));
        k[3..].copy_from_slice(&o.to_be_bytes());
        k
    }

    /// The O_ID of an [`order`] key.
    #[inline]
    pub fn order_id(k: &[u8]) -> Option<u32> {
        Some(u32::from_be_bytes(k.get(3..7)?.try_into().ok()?))
    }

    /// The secondary index of orders by customer: (O_W_ID, O_D_ID, O_C_ID, O_ID); the row
    /// is empty.
    #[inline]
    pub fn order_by_customer(w: u16, d: u8, c: u16, o: u32) -> [u8; 9] {
        let mut k = [0; 9];
        k[..5].copy_from_slice(&customer(w, d, c));
        k[5..].copy_from_slice(&o.to_be_bytes());
        k
    }

    /// The O_ID of an [`order_by_customer`] key.
    #[inline]
    pub fn order_by_customer_id(k: &[u8]) -> Option<u32> {
        Some(u32::from_be_bytes(k.get(5..9)?.try_into().ok()?))
    }

    /// ORDER-LINE: (OL_W_ID, OL_D_ID, OL_O_ID, OL_NUMBER).
    #[inline]
    pub fn order_line(w: u16, d: u8, o: u32, number: u8) -> [u8; 8] {
        let mut k = [0; 8];
        k[..7].copy_from_slice(&order(w, d, o));
        k[7] = number;
        k
    }

    /// The OL_O_ID of an [`order_line`] key.
    #[inline]
    pub fn order_line_order(k: &[u8]) -> Option<u32> {
        order_id(k)
    }

    /// ITEM: (I_ID).
    #[inline]
    pub fn item(i: u32) -> [u8; 4] {
        i.to_be_bytes()
    }

    /// STOCK: (S_W_ID, S_I_ID).
    #[inline]
    pub fn stock(w: u16, i: u32) -> [u8; 6] {
        let mut k = [0; 6];
        k[..2].copy_from_slice(&w.to_be_bytes());
        k[2..].copy_from_slice(&i.to_be_bytes());
        k
    }

    /// HISTORY has no primary key in the specification; rows are keyed by who wrote them
    /// (0 for the loader, worker index + 1 for workers) and that writer's sequence number
    /// (which a worker starts past every earlier run's on the same database).
    #[inline]
    pub fn history(writer: u16, seq: u64) -> [u8; 8] {
        debug_assert!(seq < 1 << 48);
        let mut k = seq.to_be_bytes();
        k[..2].copy_from_slice(&writer.to_be_bytes());
        k
    }
}

macro_rules! number_field {
    ($name:ident, $ty:ty, $doc:literal) => {
        #[doc = $doc]
        #[derive(Clone, Copy, Debug)]
        pub struct $name(pub usize);

        impl $name {
            /// The offset just past this field.
            pub const fn end(self) -> usize {
                self.0 + std::mem::size_of::<$ty>()
            }

            /// Reads the field; the row must be at least `end()` bytes (see [`check`]).
            #[inline]
            pub fn get(self, row: &[u8]) -> $ty {
                let mut b = [0u8; std::mem::size_of::<$ty>()];
                b.copy_from_slice(&row[self.0..self.end()]);
                <$ty>::from_le_bytes(b)
            }

            /// Writes the field.
            #[inline]
            pub fn set(self, row: &mut [u8], v: $ty) {
                row[self.0..self.end()].copy_from_slice(&v.to_le_bytes());
            }

            /// Rewrites the field with `f` of its value.
            #[inline]
            pub fn update(self, row: &mut [u8], f: impl FnOnce($ty) -> $ty) {
                self.set(row, f(self.get(row)));
            }
        }
    };
}

number_field!(U8, u8, "A `u8` column at an offset.");
number_field!(U16, u16, "A `u16` column at an offset.");
number_field!(I16, i16, "An `i16` column at an offset.");
number_field!(U32, u32, "A `u32` column at an offset.");
number_field!(I32, i32, "An `i32` column at an offset.");
number_field!(U64, u64, "A `u64` column at an offset.");
number_field!(I64, i64, "An `i64` column at an offset.");

/// A fixed-length text column (`CHAR(n)`).
#[derive(Clone, Copy, Debug)]
pub struct Fixed {
    /// Offset in the row.
    pub off: usize,
    /// Length in bytes.
    pub len: usize,
}

impl Fixed {
    /// The column at `off`, `len` bytes long.
    pub const fn at(off: usize, len: usize) -> Self {
        Fixed { off, len }
    }

    /// The offset just past this field.
    pub const fn end(self) -> usize {
        self.off + self.len
    }

    /// The column's bytes.
    #[inline]
    pub fn get(self, row: &[u8]) -> &[u8] {
        &row[self.off..self.end()]
    }

    /// Writes `s` (truncated or zero-padded to the column's length).
    #[inline]
    pub fn set(self, row: &mut [u8], s: &[u8]) {
        let n = s.len().min(self.len);
        row[self.off..self.off + n].copy_from_slice(&s[..n]);
        row[self.off + n..self.end()].fill(0);
    }
}

/// A variable-length text column (`VARCHAR(max)`): a length (one byte, two past 255) then
/// `max` bytes.
#[derive(Clone, Copy, Debug)]
pub struct Text {
    /// Offset in the row.
    pub off: usize,
    /// Most bytes it holds.
    pub max: usize,
}

impl Text {
    /// The column at `off`, up to `max` bytes.
    pub const fn at(off: usize, max: usize) -> Self {
        Text { off, max }
    }

    const fn prefix(self) -> usize {
        if self.max > 255 {
            2
        } else {
            1
        }
    }

    /// The offset just past this field.
    pub const fn end(self) -> usize {
        self.off + self.prefix() + self.max
    }

    /// The column's text (a stored length beyond `max` is clamped).
    #[inline]
    pub fn get(self, row: &[u8]) -> &[u8] {
        let len = if self.prefix() == 1 {
            usize::from(row[self.off])
        } else {
            usize::from(u16::from_le_bytes([row[self.off], row[self.off + 1]]))
        };
        let start = self.off + self.prefix();
        &row[start..start + len.min(self.max)]
    }

    /// Writes `s`, truncated to `max` bytes; the unused tail is zeroed.
    #[inline]
    pub fn set(self, row: &mut [u8], s: &[u8]) {
        let n = s.len().min(self.max);
        if self.prefix() == 1 {
            row[self.off] = n as u8;
        } else {
            row[self.off..self.off + 2].copy_from_slice(&(n as u16).to_le_bytes());
        }
        let start = self.off + self.prefix();
        row[start..start + n].copy_from_slice(&s[..n]);
        row[start + n..self.end()].fill(0);
    }
}

/// `row` if it has a table's exact length, so that the field accessors cannot go out of
/// bounds; `None` for a row that is not of this table.
#[inline]
pub fn check(row: &[u8], len: usize) -> Option<&[u8]> {
    (row.len() == len).then_some(row)
}

/// WAREHOUSE: W_NAME, W_STREET_1, W_STREET_2, W_CITY, W_STATE, W_ZIP, W_TAX, W_YTD.
pub mod warehouse {
    use super::*;
    pub const NAME: Text = Text::at(0, 10);
    pub const STREET_1: Text = Text::at(NAME.end(), 20);
    pub const STREET_2: Text = Text::at(STREET_1.end(), 20);
    pub const CITY: Text = Text::at(STREET_2.end(), 20);
    pub const STATE: Fixed = Fixed::at(CITY.end(), 2);
    pub const ZIP: Fixed = Fixed::at(STATE.end(), 9);
    /// 1/10000.
    pub const TAX: U16 = U16(ZIP.end());
    /// Cents.
    pub const YTD: I64 = I64(TAX.end());
    pub const LEN: usize = YTD.end();
}

/// DISTRICT: D_NAME, D_STREET_1, D_STREET_2, D_CITY, D_STATE, D_ZIP, D_TAX, D_YTD,
/// D_NEXT_O_ID.
pub mod district {
    use super::*;
    pub const NAME: Text = Text::at(0, 10);
    pub const STREET_1: Text = Text::at(NAME.end(), 20);
    pub const STREET_2: Text = Text::at(STREET_1.end(), 20);
    pub const CITY: Text = Text::at(STREET_2.end(), 20);
    pub const STATE: Fixed = Fixed::at(CITY.end(), 2);
    pub const ZIP: Fixed = Fixed::at(STATE.end(), 9);
    /// 1/10000.
    pub const TAX: U16 = U16(ZIP.end());
    /// Cents.
    pub const YTD: I64 = I64(TAX.end());
    pub const NEXT_O_ID: U32 = U32(YTD.end());
    pub const LEN: usize = NEXT_O_ID.end();
}

/// CUSTOMER: C_FIRST, C_MIDDLE, C_LAST, C_STREET_1, C_STREET_2, C_CITY, C_STATE, C_ZIP,
/// C_PHONE, C_SINCE, C_CREDIT, C_CREDIT_LIM, C_DISCOUNT, C_BALANCE, C_YTD_PAYMENT,
/// C_PAYMENT_CNT, C_DELIVERY_CNT, C_DATA.
pub mod customer {
    use super::*;
    pub const FIRST: Text = Text::at(0, 16);
    pub const MIDDLE: Fixed = Fixed::at(FIRST.end(), 2);
    pub const LAST: Text = Text::at(MIDDLE.end(), 16);
    pub const STREET_1: Text = Text::at(LAST.end(), 20);
    pub const STREET_2: Text = Text::at(STREET_1.end(), 20);
    pub const CITY: Text = Text::at(STREET_2.end(), 20);
    pub const STATE: Fixed = Fixed::at(CITY.end(), 2);
    pub const ZIP: Fixed = Fixed::at(STATE.end(), 9);
    pub const PHONE: Fixed = Fixed::at(ZIP.end(), 16);
    pub const SINCE: U64 = U64(PHONE.end());
    /// "GC" or "BC".
    pub const CREDIT: Fixed = Fixed::at(SINCE.end(), 2);
    /// Cents.
    pub const CREDIT_LIM: I64 = I64(CREDIT.end());
    /// 1/10000.
    pub const DISCOUNT: U16 = U16(CREDIT_LIM.end());
    /// Cents.
    pub const BALANCE: I64 = I64(DISCOUNT.end());
    /// Cents.
    pub const YTD_PAYMENT: I64 = I64(BALANCE.end());
    pub const PAYMENT_CNT: U16 = U16(YTD_PAYMENT.end());
    pub const DELIVERY_CNT: U16 = U16(PAYMENT_CNT.end());
    pub const DATA: Text = Text::at(DELIVERY_CNT.end(), 500);
    pub const LEN: usize = DATA.end();
}

/// HISTORY: H_C_ID, H_C_D_ID, H_C_W_ID, H_D_ID, H_W_ID, H_DATE, H_AMOUNT, H_DATA.
pub mod history {
    use super::*;
    pub const C_ID: U16 = U16(0);
    pub const C_D_ID: U8 = U8(C_ID.end());
    pub const C_W_ID: U16 = U16(C_D_ID.end());
    pub const D_ID: U8 = U8(C_W_ID.end());
    pub const W_ID: U16 = U16(D_ID.end());
    pub const DATE: U64 = U64(W_ID.end());
    /// Cents.
    pub const AMOUNT: I32 = I32(DATE.end());
    pub const DATA: Text = Text::at(AMOUNT.end(), 24);
    pub const LEN: usize = DATA.end();
}

/// ORDER: O_C_ID, O_ENTRY_D, O_CARRIER_ID (0 for null), O_OL_CNT, O_ALL_LOCAL.
pub mod order {
    use super::*;
    pub const C_ID: U16 = U16(0);
    pub const ENTRY_D: U64 = U64(C_ID.end());
    pub const CARRIER_ID: U8 = U8(ENTRY_D.end());
    pub const OL_CNT: U8 = U8(CARRIER_ID.end());
    pub const ALL_LOCAL: U8 = U8(OL_CNT.end());
    pub const LEN: usize = ALL_LOCAL.end();
}

/// NEW-ORDER has only key columns: its row is empty.
pub mod new_order {
    pub const LEN: usize = 0;
}

/// ORDER-LINE: OL_I_ID, OL_SUPPLY_W_ID, OL_DELIVERY_D (0 for null), OL_QUANTITY,
/// OL_AMOUNT, OL_DIST_INFO.
pub mod order_line {
    use super::*;
    pub const I_ID: U32 = U32(0);
    pub const SUPPLY_W_ID: U16 = U16(I_ID.end());
    pub const DELIVERY_D: U64 = U64(SUPPLY_W_ID.end());
    pub const QUANTITY: U8 = U8(DELIVERY_D.end());
    /// Cents.
    pub const AMOUNT: I32 = I32(QUANTITY.end());
    pub const DIST_INFO: Fixed = Fixed::at(AMOUNT.end(), 24);
    pub const LEN: usize = DIST_INFO.end();
}

/// ITEM: I_IM_ID, I_NAME, I_PRICE, I_DATA.
pub mod item {
    use super::*;
    pub const IM_ID: U32 = U32(0);
    pub const NAME: Text = Text::at(IM_ID.end(), 24);
    /// Cents.
    pub const PRICE: U32 = U32(NAME.end());
    pub const DATA: Text = Text::at(PRICE.end(), 50);
    pub const LEN: usize = DATA.end();
}

/// STOCK: S_QUANTITY, S_DIST_01..S_DIST_10, S_YTD, S_ORDER_CNT, S_REMOTE_CNT, S_DATA.
pub mod stock {
    use super::*;
    pub const QUANTITY: I16 = I16(0);
    /// S_DIST_01 .. S_DIST_10, 24 bytes each: see [`dist`].
    pub const DIST_01: Fixed = Fixed::at(QUANTITY.end(), 24);
    pub const YTD: U32 = U32(DIST_01.off + 10 * 24);
    pub const ORDER_CNT: U16 = U16(YTD.end());
    pub const REMOTE_CNT: U16 = U16(ORDER_CNT.end());
    pub const DATA: Text = Text::at(REMOTE_CNT.end(), 50);
    pub const LEN: usize = DATA.end();

    /// S_DIST_xx for district `d` (1..=10).
    #[inline]
    pub const fn dist(d: u8) -> Fixed {
        Fixed::at(DIST_01.off + (d as usize - 1) * 24, 24)
    }
}

// The layouts fit the widths they are read with, and the fixed parts do not overlap.
const _: () = assert!(stock::dist(DISTRICTS).end() == stock::YTD.0);
const _: () = assert!(customer::LEN < 700 && stock::LEN < 320 && order_line::LEN < 48);
const _: () = assert!(ORDER_LINES_MAX < u8::MAX as usize);
const _: () = assert!(FIRST_NEW_ORDER <= ORDERS);

/// Whether `haystack` contains "ORIGINAL" (the brand-generic test of New-Order, and what
/// population plants in 10 % of I_DATA and S_DATA).
#[inline]
pub fn has_original(haystack: &[u8]) -> bool {
    haystack.windows(8).any(|w| w == b"ORIGINAL")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_round_trip_without_touching_neighbours() {
        let mut row = vec![0u8; customer::LEN];
        customer::FIRST.set(&mut row, b"Alice");
        customer::BALANCE.set(&mut row, -1234);
        customer::DATA.set(&mut row, &[b'x'; 600]);
        customer::DELIVERY_CNT.set(&mut row, 7);
        assert_eq!(customer::FIRST.get(&row), b"Alice");
        assert_eq!(customer::BALANCE.get(&row), -1234);
        assert_eq!(customer::DATA.get(&row).len(), 500);
        assert_eq!(customer::DELIVERY_CNT.get(&row), 7);
        customer::DATA.set(&mut row, b"short");
        assert_eq!(customer::DATA.get(&row), b"short");
        assert_eq!(customer::DELIVERY_CNT.get(&row), 7);
    }

    #[test]
    fn history_keys_are_unique_per_writer() {
        assert_ne!(key::history(0, 5), key::history(1, 5));
        assert!(key::history(1, 5) < key::history(1, 6));
    }
}
