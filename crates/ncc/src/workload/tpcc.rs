//! TPC-C as the paper runs it against NCC (§6.1, digest §4; the paper builds on Janus's
//! TPC-C, whose transactions are pieces run at the servers): New-Order 44 %, Payment 44 %,
//! Delivery 4 %, Order-Status 4 %, Stock-Level 4 %. Payment and Order-Status take two shots
//! (their customer is found by a first read), the others one. Each update of a row is one
//! server-side read-modify-write ([`Op::ReadWrite`]: the district's next order number, the
//! year-to-date totals, stock quantities, balances), as Janus's pieces are; a write back in
//! a later shot of what an earlier one read (Appendix C's read-modify-write) would leave
//! the hot rows open between the shots. Order-Status and Stock-Level only read.
//!
//! The rows are the ones whose conflicts make TPC-C contended: the warehouse's and the
//! district's year-to-date totals (Payment), the district's next order number (New-Order),
//! stock quantities, customers' balances, and each district's oldest undelivered order
//! (Delivery), and the customers-by-name index the two-shot transactions read first.
//! Item rows are read-only, and an order's rows are written once under a fresh number and
//! read by nothing modelled here: neither is modelled. Scaled down for the simulator: one
//! warehouse per server by default (`SimOptions::tpcc_warehouses_per_server`; the paper has 8), 10 districts, 300 customers per district and 1,000 items (the
//! specification has 3,000 and 100,000): contention comes from warehouses and districts,
//! which keep their specified counts. 1 % of New-Order's stock lines and 15 % of Payment's
//! customers are at another warehouse, as the specification says, so those span servers.
//!
//! Keys: the table, the warehouse and two ids packed, times the number of servers, plus
//! the warehouse's server: `key % servers` is the warehouse's server, as
//! [`crate::client::shard_of`] computes it.

use super::{fresh_value, Program, Rng, SecondShot};
use crate::types::{Key, Op, Value};

pub const DISTRICTS: u64 = 10;
pub const CUSTOMERS: u64 = 300;
pub const ITEMS: u64 = 1_000;

#[derive(Clone, Copy)]
enum Table {
    Warehouse = 1,
    District = 2,
    Customer = 3,
    Stock = 4,
    /// Per district: its oldest undelivered order (Delivery's cursor).
    NewOrder = 5,
    /// The customers by last name (read-only: how Payment and Order-Status find theirs).
    CustomerName = 6,
}

fn key(servers: u32, table: Table, w: u64, a: u64, b: u64) -> Key {
    let servers = u64::from(servers);
    debug_assert!(w < 256 && a < 1 << 16);
    let packed = ((table as u64) << 48) | (w << 40) | (a << 24) | (b & 0xFF_FFFF);
    Key::from(packed * servers + w % servers)
}

/// The second shot of a TPC-C transaction, once the first found its rows.
pub(crate) struct TpccSecond {
    ops: Vec<Op>,
}

impl TpccSecond {
    pub(super) fn ops(&self, _reads: &[(Key, Value)]) -> Vec<Op> {
        self.ops.clone()
    }
}

/// The most warehouses (8 bits of a key).
pub const WAREHOUSES_MAX: u64 = 256;

/// The next TPC-C transaction for a client of a cluster of `servers` with `per_server`
/// warehouses each (warehouse `w` on server `w % servers`).
pub(crate) fn program(
    rng: &mut Rng,
    servers: u32,
    per_server: u32,
    next_value: &mut u64,
) -> Program {
    let warehouses = (u64::from(servers) * u64::from(per_server.max(1))).min(WAREHOUSES_MAX);
    let w = rng.below(warehouses);
    let d = rng.below(DISTRICTS);
    let other_warehouse = |rng: &mut Rng| {
        if warehouses > 1 {
            (w + 1 + rng.below(warehouses - 1)) % warehouses
        } else {
            w
        }
    };
    let k = |t: Table, w: u64, a: u64, b: u64| key(servers, t, w, a, b);
    let two = |first: Vec<Op>, second: TpccSecond, kind| Program {
        first,
        second: Some(SecondShot::Tpcc(second)),
        kind,
    };
    let roll = rng.below(100);
    let rw = |k: Key, next_value: &mut u64| Op::ReadWrite(k, fresh_value(next_value));
    if roll < 44 {
        // New-Order, one shot: the warehouse's tax, the district's next order number
        // (taken and advanced), the customer, and 5-15 stock rows (taken and decreased).
        let mut ops = vec![
            Op::Read(k(Table::Warehouse, w, 0, 0)),
            rw(k(Table::District, w, d, 0), next_value),
            Op::Read(k(Table::Customer, w, d, rng.below(CUSTOMERS))),
        ];
        let lines = rng.range(5, 15);
        let mut stock: Vec<Key> = Vec::new();
        while (stock.len() as u64) < lines {
            let sw = if rng.below(100) == 0 {
                other_warehouse(rng)
            } else {
                w
            };
            let s = k(Table::Stock, sw, 0, rng.below(ITEMS));
            if !stock.contains(&s) {
                stock.push(s);
            }
        }
        ops.extend(stock.iter().map(|s| rw(s.clone(), next_value)));
        return Program {
            first: ops,
            second: None,
            kind: "new-order",
        };
    }
    if roll < 88 {
        // Payment: find the customer (15 % at another warehouse), then add the amount to
        // the warehouse, the district and the customer.
        let cw = if rng.below(100) < 15 {
            other_warehouse(rng)
        } else {
            w
        };
        let (cd, c) = (rng.below(DISTRICTS), rng.below(CUSTOMERS));
        let customer = k(Table::Customer, cw, cd, c);
        let rows = [
            k(Table::Warehouse, w, 0, 0),
            k(Table::District, w, d, 0),
            customer,
        ];
        return two(
            vec![Op::Read(k(Table::CustomerName, cw, cd, c))],
            TpccSecond {
                ops: rows.iter().map(|r| rw(r.clone(), next_value)).collect(),
            },
            "payment",
        );
    }
    if roll < 92 {
        // Delivery: take and advance each district's oldest undelivered order, one shot.
        let first = (0..DISTRICTS)
            .map(|d| rw(k(Table::NewOrder, w, d, 0), next_value))
            .collect();
        return Program {
            first,
            second: None,
            kind: "delivery",
        };
    }
    if roll < 96 {
        // Order-Status: find the customer, then read it and its district's latest order
        // number (standing in for the customer's last order).
        let c = rng.below(CUSTOMERS);
        return two(
            vec![Op::Read(k(Table::CustomerName, w, d, c))],
            TpccSecond {
                ops: vec![
                    Op::Read(k(Table::Customer, w, d, c)),
                    Op::Read(k(Table::District, w, d, 0)),
                ],
            },
            "order-status",
        );
    }
    // Stock-Level: the district's next order number and 10 stock rows, in one shot.
    let mut first = vec![Op::Read(k(Table::District, w, d, 0))];
    let mut seen = Vec::new();
    while seen.len() < 10 {
        let s = k(Table::Stock, w, 0, rng.below(ITEMS));
        if !seen.contains(&s) {
            seen.push(s.clone());
            first.push(Op::Read(s));
        }
    }
    Program {
        first,
        second: None,
        kind: "stock-level",
    }
}
