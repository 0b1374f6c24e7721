//! A worker thread's side of a run: the transaction mix, the inputs of clause 2 drawn once
//! per transaction, retries of conflicted attempts, and counters and latencies per
//! transaction type. Also the StockScan reader on its timer.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use verso_engine::Db;

use super::consistency::DeliveryMark;
use super::random::{self, Constants, A_C_ID, A_C_LAST, A_OL_I_ID};
use super::schema::{CUSTOMERS, DISTRICTS, ITEMS};
use super::txns::{
    self, Ctx, CustomerSel, LineInput, NewOrderInput, Outcome, PaymentInput, TxnError,
};
use super::Tables;
use crate::rng::Rng;
use crate::runner::{Control, LongReader, Workload};
use crate::ycsb::Spin;
use crate::BenchError;

/// The five transaction types, in the order of clause 2.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TxnType {
    NewOrder,
    Payment,
    OrderStatus,
    Delivery,
    StockLevel,
}

impl TxnType {
    /// All of them, in order.
    pub const ALL: [TxnType; 5] = [
        TxnType::NewOrder,
        TxnType::Payment,
        TxnType::OrderStatus,
        TxnType::Delivery,
        TxnType::StockLevel,
    ];

    /// The standard mix in percent (clause 5.2.3 minimums, New-Order taking the rest).
    pub const fn percent(self) -> u32 {
        match self {
            TxnType::NewOrder => 45,
            TxnType::Payment => 43,
            TxnType::OrderStatus | TxnType::Delivery | TxnType::StockLevel => 4,
        }
    }

    /// Its name in reports ("new_order", ...).
    pub const fn name(self) -> &'static str {
        match self {
            TxnType::NewOrder => "new_order",
            TxnType::Payment => "payment",
            TxnType::OrderStatus => "order_status",
            TxnType::Delivery => "delivery",
            TxnType::StockLevel => "stock_level",
        }
    }

    /// The type whose slice of 0..100 holds `roll`.
    #[inline]
    fn from_roll(roll: u32) -> Self {
        let mut acc = 0;
        for ty in Self::ALL {
            acc += ty.percent();
            if roll < acc {
                return ty;
            }
        }
        TxnType::StockLevel
    }
}

// The mix covers every roll of 0..100.
const _: () = {
    let (mut sum, mut i) = (0, 0);
    while i < TxnType::ALL.len() {
        sum += TxnType::ALL[i].percent();
        i += 1;
    }
    assert!(sum == 100);
};

/// Largest latency the histograms hold: a minute, in nanoseconds.
const LATENCY_MAX_NS: u64 = 60_000_000_000;

/// One transaction type's counters over the measured window.
#[derive(Clone, Debug)]
pub struct TypeStats {
    /// Transactions completed (committed, or rolled back by the specification's design).
    pub count: u64,
    /// Attempts aborted by conflicts (each retried).
    pub aborts: u64,
    /// New-Orders rolled back for their unused item (counted in `count` too).
    pub rollbacks: u64,
    /// Latency of every completed transaction, first begin to the end, in nanoseconds.
    pub latency: Histogram<u64>,
}

impl Default for TypeStats {
    fn default() -> Self {
        TypeStats {
            count: 0,
            aborts: 0,
            rollbacks: 0,
            latency: Histogram::new_with_bounds(1, LATENCY_MAX_NS, 3)
                .expect("static histogram bounds are valid"),
        }
    }
}

impl TypeStats {
    fn add(&mut self, other: &TypeStats) {
        self.count += other.count;
        self.aborts += other.aborts;
        self.rollbacks += other.rollbacks;
        // Same bounds on both sides, so adding cannot fail.
        self.latency
            .add(&other.latency)
            .expect("histograms share bounds");
    }
}

/// Counters of all workers over the measured window.
#[derive(Clone, Debug, Default)]
pub struct Totals {
    /// Per type, indexed like [`TxnType::ALL`].
    pub types: [TypeStats; 5],
    /// Districts Delivery found nothing to deliver in.
    pub delivery_skipped: u64,
}

impl Totals {
    fn add(&mut self, other: &Totals) {
        for (a, b) in self.types.iter_mut().zip(&other.types) {
            a.add(b);
        }
        self.delivery_skipped += other.delivery_skipped;
    }
}

/// Each run's HISTORY sequence numbers start at `run << RUN_SHIFT`, so that a run never
/// overwrites the HISTORY rows of an earlier one (conditions 8-10 would break). `key::history`
/// holds 48 bits of sequence: 2^40 Payments per worker and run (over a year at 20 K/s, far
/// past the longest run, a week) leaves 8 bits of runs.
const RUN_SHIFT: u32 = 40;
/// Runs one database takes.
pub(crate) const RUNS_MAX: u64 = 1 << (48 - RUN_SHIFT);

/// What every worker of a run shares.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Params {
    pub(crate) warehouses: u16,
    pub(crate) constants: Constants,
    pub(crate) seed: u64,
    /// The run's number on this database (0 for the first).
    pub(crate) run: u64,
}

/// One transaction's inputs.
enum Input {
    NewOrder(NewOrderInput),
    Payment(PaymentInput),
    OrderStatus(u8, CustomerSel),
    Delivery(u8),
    StockLevel(u8, i16),
}

/// One worker thread: its home warehouse, generator, buffers and counters.
pub(crate) struct Worker<'a> {
    ctx: Ctx<'a>,
    p: Params,
    rng: Rng,
    stats: Totals,
    skipped_at_open: u64,
    measuring: bool,
    out: &'a Mutex<Totals>,
}

impl<'a> Worker<'a> {
    pub(crate) fn new(
        db: &'a Db,
        t: Tables,
        p: Params,
        index: usize,
        out: &'a Mutex<Totals>,
        delivered: &'a DeliveryMark,
    ) -> Self {
        let w = (index % usize::from(p.warehouses)) as u16 + 1;
        Worker {
            ctx: Ctx::new(db, t, w, index, p.run << RUN_SHIFT, delivered),
            p,
            rng: Rng::for_stream(p.seed, index as u64),
            stats: Totals::default(),
            skipped_at_open: 0,
            measuring: false,
            out,
        }
    }

    fn district(&mut self) -> u8 {
        random::uniform(&mut self.rng, 1, u32::from(DISTRICTS)) as u8
    }

    /// A warehouse other than the home one (only called with more than one).
    fn remote_warehouse(&mut self) -> u16 {
        debug_assert!(self.p.warehouses > 1);
        let r = random::uniform(&mut self.rng, 1, u32::from(self.p.warehouses) - 1) as u16;
        if r >= self.ctx.w {
            r + 1
        } else {
            r
        }
    }

    fn customer_id(&mut self) -> u16 {
        let c = self.p.constants.c_id;
        random::nurand(&mut self.rng, A_C_ID, c, 1, u32::from(CUSTOMERS)) as u16
    }

    /// 60 % by last name, 40 % by id (clauses 2.5.1.2, 2.6.1.2).
    fn customer_sel(&mut self) -> CustomerSel {
        if self.rng.below(100) < 60 {
            let c = self.p.constants.c_last;
            CustomerSel::LastName(random::nurand(&mut self.rng, A_C_LAST, c, 0, 999))
        } else {
            CustomerSel::Id(self.customer_id())
        }
    }

    /// New-Order's inputs (clause 2.4.1): 1 % end with an unused item id; with more than one
    /// warehouse, 1 % of lines are supplied by another warehouse.
    fn new_order_input(&mut self) -> NewOrderInput {
        let d = self.district();
        let c = self.customer_id();
        let line_count = random::uniform(&mut self.rng, 5, 15) as u8;
        let rollback = self.rng.below(100) == 0;
        let mut lines = [LineInput::default(); 15];
        for (n, line) in lines[..usize::from(line_count)].iter_mut().enumerate() {
            let last = n + 1 == usize::from(line_count);
            line.item = if rollback && last {
                ITEMS + 1
            } else {
                let c = self.p.constants.ol_i_id;
                random::nurand(&mut self.rng, A_OL_I_ID, c, 1, ITEMS)
            };
            line.supply_w = if self.p.warehouses > 1 && self.rng.below(100) == 0 {
                self.remote_warehouse()
            } else {
                self.ctx.w
            };
            line.quantity = random::uniform(&mut self.rng, 1, 10) as u8;
        }
        NewOrderInput {
            d,
            c,
            lines,
            line_count,
        }
    }

    /// Payment's inputs (clause 2.5.1): 15 % pay through another warehouse's customer.
    fn payment_input(&mut self) -> PaymentInput {
        let d = self.district();
        let (c_w, c_d) = if self.p.warehouses > 1 && self.rng.below(100) < 15 {
            (self.remote_warehouse(), self.district())
        } else {
            (self.ctx.w, d)
        };
        PaymentInput {
            d,
            c_w,
            c_d,
            customer: self.customer_sel(),
            amount_cents: i64::from(random::uniform(&mut self.rng, 100, 500_000)),
        }
    }

    fn input(&mut self, ty: TxnType) -> Input {
        match ty {
            TxnType::NewOrder => Input::NewOrder(self.new_order_input()),
            TxnType::Payment => Input::Payment(self.payment_input()),
            TxnType::OrderStatus => {
                let d = self.district();
                Input::OrderStatus(d, self.customer_sel())
            }
            TxnType::Delivery => Input::Delivery(random::uniform(&mut self.rng, 1, 10) as u8),
            TxnType::StockLevel => {
                let d = self.district();
                Input::StockLevel(d, random::uniform(&mut self.rng, 10, 20) as i16)
            }
        }
    }

    fn attempt(&mut self, input: &Input) -> Result<Outcome, TxnError> {
        match *input {
            Input::NewOrder(ref i) => self.ctx.new_order(i),
            Input::Payment(ref i) => self.ctx.payment(i),
            Input::OrderStatus(d, sel) => self.ctx.order_status(d, sel),
            Input::Delivery(carrier) => self.ctx.delivery(carrier),
            Input::StockLevel(d, threshold) => self.ctx.stock_level(d, threshold),
        }
    }
}

impl Workload for Worker<'_> {
    fn txn(&mut self, ctl: &Control) -> Result<Option<u64>, BenchError> {
        let ty = TxnType::from_roll(self.rng.below(100) as u32);
        let input = self.input(ty);
        let start = Instant::now();
        let mut aborts = 0u64;
        let mut spin = Spin::default();
        let outcome = loop {
            match self.attempt(&input) {
                Ok(outcome) => break outcome,
                Err(TxnError::Engine(e)) if e.is_conflict() => {
                    aborts += 1;
                    // After the run ends, stop retrying: nothing counts any more.
                    if aborts & 63 == 0 && ctl.stopped() {
                        return Ok(None);
                    }
                    spin.spin();
                }
                Err(TxnError::Engine(e)) => return Err(e.into()),
                Err(TxnError::Missing(what)) => {
                    return Err(BenchError::Other(format!(
                        "tpcc {}: {what} not found: the database is inconsistent",
                        ty.name()
                    )))
                }
            }
        };
        let s = &mut self.stats.types[ty as usize];
        s.count += 1;
        s.aborts += aborts;
        s.rollbacks += u64::from(outcome == Outcome::RolledBack);
        s.latency
            .saturating_record(start.elapsed().as_nanos() as u64);
        Ok(Some(aborts))
    }

    fn window_opened(&mut self) {
        self.stats = Totals::default();
        self.skipped_at_open = self.ctx.delivery_skipped;
        self.measuring = true;
    }

    fn finished(&mut self) {
        std::hint::black_box(self.ctx.sink);
        if !self.measuring {
            return;
        }
        self.stats.delivery_skipped = self.ctx.delivery_skipped - self.skipped_at_open;
        let mut out = self.out.lock().unwrap_or_else(|e| e.into_inner());
        out.add(&self.stats);
    }
}

/// The StockScan thread: a scan every `every`, timed from the start of the previous one
/// (back to back if a scan takes longer).
pub(crate) struct StockScanner<'a> {
    db: &'a Db,
    t: Tables,
    every: Duration,
    next: Option<Instant>,
    sink: i64,
}

impl<'a> StockScanner<'a> {
    pub(crate) fn new(db: &'a Db, t: Tables, every: Duration) -> Self {
        StockScanner {
            db,
            t,
            every,
            next: None,
            sink: 0,
        }
    }
}

/// Longest nap between two looks at the run's phase.
const NAP_MAX: Duration = Duration::from_millis(5);

impl LongReader for StockScanner<'_> {
    fn read(&mut self, ctl: &Control) -> Result<bool, BenchError> {
        let now = Instant::now();
        if let Some(next) = self.next.filter(|&n| n > now) {
            // Not our turn: nap (briefly, so the end of the run is noticed) and report that
            // no transaction ran.
            std::thread::sleep((next - now).min(NAP_MAX));
            return Ok(false);
        }
        self.next = Some(now + self.every);
        match txns::stock_scan(self.db, &self.t, || ctl.stopped()) {
            Ok(Some(sum)) => {
                self.sink ^= std::hint::black_box(sum);
                Ok(true)
            }
            Ok(None) => Ok(false),
            Err(TxnError::Engine(e)) => Err(e.into()),
            Err(TxnError::Missing(what)) => Err(BenchError::Other(format!(
                "tpcc stock scan: {what} malformed"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mix_splits_the_rolls() {
        let mut count = [0u32; 5];
        for roll in 0..100 {
            count[TxnType::from_roll(roll) as usize] += 1;
        }
        assert_eq!(count, [45, 43, 4, 4, 4]);
    }
}
