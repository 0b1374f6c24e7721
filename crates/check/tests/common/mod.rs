//! Scaffolding shared by the model-based tests (`model.rs` for versioned registers,
//! `append_model.rs` for lists): random plans of transactions and their fates, real-time
//! intervals consistent with a serial order, a generator for large deterministic plans,
//! and the driver that injects one anomaly per generated history.

// Each test binary uses its own subset.
#![allow(dead_code)]

use std::cell::RefCell;
use std::collections::HashMap;
use std::fmt::Debug;
use std::hash::Hash;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use verso_check::Outcome;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fate {
    Commit,
    Abort,
    /// Committed, but the client does not know.
    UnknownCommitted,
    /// Did not commit, and the client does not know.
    UnknownAborted,
}

impl Fate {
    /// Whether the txn's effects take place.
    pub fn commits(self) -> bool {
        matches!(self, Fate::Commit | Fate::UnknownCommitted)
    }

    /// What the client records.
    pub fn outcome(self) -> Outcome {
        match self {
            Fate::Commit => Outcome::Committed,
            Fate::Abort => Outcome::Aborted,
            Fate::UnknownCommitted | Fate::UnknownAborted => Outcome::Unknown,
        }
    }
}

#[derive(Clone, Debug)]
pub struct PlanTxn<Op> {
    pub ops: Vec<Op>,
    pub fate: Fate,
    /// Duration, for overlapping real-time intervals.
    pub dur: u64,
}

/// Up to 40 txns of 1 to 6 ops each, mostly committing.
pub fn plan<Op: Debug>(op: impl Strategy<Value = Op>) -> impl Strategy<Value = Vec<PlanTxn<Op>>> {
    let fate = prop_oneof![
        8 => Just(Fate::Commit),
        1 => Just(Fate::Abort),
        1 => Just(Fate::UnknownCommitted),
        1 => Just(Fate::UnknownAborted),
    ];
    let txn = (prop::collection::vec(op, 1..7), fate, 1..40u64)
        .prop_map(|(ops, fate, dur)| PlanTxn { ops, fate, dur });
    prop::collection::vec(txn, 1..40)
}

/// The real-time interval of the txn with the given (1-based, serial-order) id. Serial:
/// disjoint intervals. Overlapping: begin 10 id, end 10 id + dur (< 10 id + 40), so
/// `a.end < b.begin` still implies a ran before b.
pub fn interval(id: u64, dur: u64, overlap: bool) -> (u64, u64) {
    if overlap {
        (10 * id, 10 * id + dur)
    } else {
        (100 * id, 100 * id + 50)
    }
}

/// Xorshift: deterministic pseudo-random numbers for large plans, without proptest.
pub struct Rng(pub u64);

impl Rng {
    pub fn below(&mut self, m: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % m as u64) as usize
    }
}

/// Runs `cases` random cases: `generate` builds a valid history from the input (failing
/// the case if it is not accepted), one change of some mutation kind is applied (the
/// randomly chosen kind first, then the others, so few cases are wasted) and `verify`
/// judges the result. Every kind must have been applied at least once.
pub fn run_mutations<I: Debug, G, M, C: Debug>(
    cases: u32,
    input: impl Strategy<Value = I>,
    kinds: &[M],
    generate: impl Fn(I) -> Result<G, TestCaseError>,
    candidates: impl Fn(&G, M) -> Vec<C>,
    verify: impl Fn(&G, M, &C) -> Result<(), TestCaseError>,
) where
    M: Copy + Debug + Eq + Hash,
{
    let applied = RefCell::new(HashMap::<M, usize>::new());
    let mut runner = TestRunner::new(Config {
        cases,
        ..Config::default()
    });
    let strategy = (input, 0..kinds.len(), any::<prop::sample::Index>());
    let result = runner.run(&strategy, |(input, first, pick)| {
        let g = generate(input)?;
        let Some((m, changes)) = (0..kinds.len())
            .map(|i| kinds[(first + i) % kinds.len()])
            .map(|m| (m, candidates(&g, m)))
            .find(|(_, c)| !c.is_empty())
        else {
            return Ok(());
        };
        *applied.borrow_mut().entry(m).or_default() += 1;
        verify(&g, m, pick.get(&changes))
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    let applied = applied.into_inner();
    eprintln!("mutations applied: {applied:?}");
    for &m in kinds {
        assert!(
            applied.get(&m).copied().unwrap_or(0) > 0,
            "{m:?} never applied: {applied:?}"
        );
    }
}
