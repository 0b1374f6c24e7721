//! Linearizability of single-key registers (get / put / remove), for testing indexes.
//!
//! Linearizability is compositional (Herlihy & Wing), so each key is checked on its own.
//! Per key this is the Wing & Gong search with Lowe's memoization, as in Porcupine:
//! walk the operations in real-time order, tentatively linearize any pending call whose
//! effect is consistent with the register, and backtrack when some operation's return
//! is reached before it was linearized. A `(set of linearized ops, register value)` pair
//! is explored at most once, and gets that can take effect are placed eagerly (they are
//! never a real choice), which keeps histories near linear time when a dozen or so
//! operations overlap at once. The search is exponential in the number of *concurrent
//! writes* in the worst case, so keep per-key concurrency to what threads produce
//! (tens, not hundreds).

use std::collections::{BTreeMap, HashMap, HashSet};

use serde::{Deserialize, Serialize};

use crate::history::{display_key, Key};
use crate::violation::{AnomalyKind, Violation};

/// One operation on a key-value map viewed as independent registers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RegisterOp {
    /// The key (register) operated on.
    pub key: Key,
    /// Real time just before the call.
    pub start: u64,
    /// Real time just after the return.
    pub end: u64,
    /// What was done and, for gets, what was seen.
    pub kind: RegisterOpKind,
}

/// The operation kinds. Every `Put` to one key must carry a distinct value (so a get's
/// result identifies the put it saw); every register starts absent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum RegisterOpKind {
    /// A read that returned this value (`None` = absent).
    Get {
        /// What the read returned.
        observed: Option<u64>,
    },
    /// A write of a value.
    Put {
        /// The value written.
        value: u64,
    },
    /// A removal (makes the register absent).
    Remove,
}

/// Checks that the register operations are linearizable, each key independently.
pub fn check_linearizable_registers(ops: &[RegisterOp]) -> Result<(), Violation> {
    let mut by_key: BTreeMap<&[u8], Vec<&RegisterOp>> = BTreeMap::new();
    for op in ops {
        if op.start > op.end {
            return Err(Violation::new(
                AnomalyKind::MalformedHistory,
                vec![],
                format!(
                    "register op on key {} has start {} > end {}",
                    display_key(&op.key),
                    op.start,
                    op.end
                ),
            ));
        }
        by_key.entry(&op.key).or_default().push(op);
    }
    for (key, ops) in by_key {
        check_key(key, &ops)?;
    }
    Ok(())
}

fn describe(op: &RegisterOp) -> String {
    let what = match op.kind {
        RegisterOpKind::Get { observed: Some(v) } => format!("get -> {v}"),
        RegisterOpKind::Get { observed: None } => "get -> absent".to_string(),
        RegisterOpKind::Put { value } => format!("put {value}"),
        RegisterOpKind::Remove => "remove".to_string(),
    };
    format!("{what} [{}, {}]", op.start, op.end)
}

fn show(state: Option<u64>) -> String {
    state.map_or("absent".to_string(), |v| v.to_string())
}

fn check_key(key: &[u8], ops: &[&RegisterOp]) -> Result<(), Violation> {
    let fail = |detail: String| {
        Violation::new(
            AnomalyKind::NotLinearizable,
            vec![],
            format!("key {}: {detail}", display_key(key)),
        )
    };
    // Cheap, precise diagnoses first; the search below would also reject these.
    let mut puts: HashMap<u64, &RegisterOp> = HashMap::new();
    for op in ops {
        if let RegisterOpKind::Put { value } = op.kind {
            if puts.insert(value, op).is_some() {
                return Err(Violation::new(
                    AnomalyKind::MalformedHistory,
                    vec![],
                    format!(
                        "key {}: value {value} is put more than once",
                        display_key(key)
                    ),
                ));
            }
        }
    }
    for op in ops {
        if let RegisterOpKind::Get { observed: Some(v) } = op.kind {
            match puts.get(&v) {
                None => {
                    return Err(fail(format!(
                        "{} returned a value that was never put",
                        describe(op)
                    )))
                }
                Some(put) if put.start > op.end => {
                    return Err(fail(format!(
                        "{} returned the value of {}, which began after the get ended",
                        describe(op),
                        describe(put)
                    )))
                }
                Some(_) => {}
            }
        }
    }
    Search::new(ops).run().map_err(|d| {
        fail(format!(
            "no linearization: at best {} of {} ops linearized, then {} could not be, \
             with the register at {}",
            d.depth,
            ops.len(),
            describe(ops[d.op]),
            show(d.state)
        ))
    })
}

/// The register's transition function: `None` if `op` cannot happen in `state`.
fn step(state: Option<u64>, kind: RegisterOpKind) -> Option<Option<u64>> {
    match kind {
        RegisterOpKind::Get { observed } => (observed == state).then_some(state),
        RegisterOpKind::Put { value } => Some(Some(value)),
        RegisterOpKind::Remove => Some(None),
    }
}

const NIL: u32 = u32::MAX;

/// Where the search got furthest before failing, for the error message.
struct Deepest {
    depth: usize,
    op: usize,
    state: Option<u64>,
}

/// Wing & Gong / Lowe search over a doubly linked list of call and return events.
struct Search<'a> {
    ops: &'a [&'a RegisterOp],
    /// Per event (`2 * op` = call, `2 * op + 1` = return): neighbours in the list.
    next: Vec<u32>,
    prev: Vec<u32>,
    /// Sentinel list head.
    head: u32,
    linearized: Vec<u64>,
}

impl<'a> Search<'a> {
    fn new(ops: &'a [&'a RegisterOp]) -> Self {
        let n_events = 2 * ops.len();
        let mut events: Vec<u32> = (0..n_events as u32).collect();
        // Real-time order; on equal times calls go first, so touching intervals count as
        // concurrent (only `a.end < b.start` orders `a` before `b`).
        events.sort_by_key(|&e| {
            let op = ops[e as usize / 2];
            let is_return = e % 2 == 1;
            (if is_return { op.end } else { op.start }, is_return)
        });
        let head = n_events as u32;
        let mut next = vec![NIL; n_events + 1];
        let mut prev = vec![NIL; n_events + 1];
        let mut last = head;
        for &e in &events {
            next[last as usize] = e;
            prev[e as usize] = last;
            last = e;
        }
        Search {
            ops,
            next,
            prev,
            head,
            linearized: vec![0; ops.len().div_ceil(64)],
        }
    }

    /// Removes an op's call and return events from the list.
    fn lift(&mut self, op: usize) {
        for e in [2 * op as u32, 2 * op as u32 + 1] {
            let (p, n) = (self.prev[e as usize], self.next[e as usize]);
            self.next[p as usize] = n;
            if n != NIL {
                self.prev[n as usize] = p;
            }
        }
    }

    /// Undoes [`lift`](Self::lift) (dancing links: reinsert in reverse order).
    fn unlift(&mut self, op: usize) {
        for e in [2 * op as u32 + 1, 2 * op as u32] {
            let (p, n) = (self.prev[e as usize], self.next[e as usize]);
            self.next[p as usize] = e;
            if n != NIL {
                self.prev[n as usize] = e;
            }
        }
    }

    fn toggle(&mut self, op: usize) {
        self.linearized[op / 64] ^= 1 << (op % 64);
    }

    /// Canonical, compact form of the linearized set: everything before the first
    /// non-full word is linearized, so only the window of words after it is stored.
    fn memo_key(&self, state: Option<u64>) -> (usize, Vec<u64>, Option<u64>) {
        let first = self
            .linearized
            .iter()
            .position(|&w| w != u64::MAX)
            .unwrap_or(self.linearized.len());
        let last = self
            .linearized
            .iter()
            .rposition(|&w| w != 0)
            .map_or(first, |l| l + 1);
        (
            first,
            self.linearized[first..last.max(first)].to_vec(),
            state,
        )
    }

    fn run(mut self) -> Result<(), Deepest> {
        let mut state: Option<u64> = None;
        // (op, register value before it, whether it was forced: see below).
        let mut stack: Vec<(usize, Option<u64>, bool)> = Vec::new();
        let mut seen: HashSet<(usize, Vec<u64>, Option<u64>)> = HashSet::new();
        let mut deepest = Deepest {
            depth: 0,
            op: 0,
            state: None,
        };
        let mut entry = self.next[self.head as usize];
        while self.next[self.head as usize] != NIL {
            let op = entry as usize / 2;
            if entry.is_multiple_of(2) {
                // A pending call: try to linearize it now.
                let Some(new_state) = step(state, self.ops[op].kind) else {
                    entry = self.next[entry as usize];
                    continue;
                };
                // A get that can take effect now may as well: every op that must
                // precede it is already linearized and it changes nothing, so if any
                // linearization exists, one with the get placed here does too. Such
                // "forced" steps are not branch points, which is what keeps many
                // concurrent readers from blowing up the search.
                let forced = matches!(self.ops[op].kind, RegisterOpKind::Get { .. });
                self.toggle(op);
                if seen.insert(self.memo_key(new_state)) {
                    stack.push((op, state, forced));
                    state = new_state;
                    self.lift(op);
                    entry = self.next[self.head as usize];
                    continue;
                }
                // Already explored (and failed) from here.
                self.toggle(op);
                if !forced {
                    entry = self.next[entry as usize];
                    continue;
                }
            } else if stack.len() >= deepest.depth {
                // Reached the return of an op not yet linearized: a dead end.
                deepest = Deepest {
                    depth: stack.len(),
                    op,
                    state,
                };
            }
            // Backtrack to the last real choice and try the next call after it.
            loop {
                let Some((undo, prev_state, forced)) = stack.pop() else {
                    return Err(deepest);
                };
                self.toggle(undo);
                state = prev_state;
                self.unlift(undo);
                if !forced {
                    entry = self.next[2 * undo];
                    break;
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(start: u64, end: u64, kind: RegisterOpKind) -> RegisterOp {
        RegisterOp {
            key: b"k".to_vec(),
            start,
            end,
            kind,
        }
    }

    #[test]
    fn needs_backtracking() {
        // put 1 and put 2 overlap; the reads force put 2 first, then put 1.
        let ops = [
            op(0, 10, RegisterOpKind::Put { value: 1 }),
            op(0, 10, RegisterOpKind::Put { value: 2 }),
            op(11, 12, RegisterOpKind::Get { observed: Some(1) }),
        ];
        check_linearizable_registers(&ops).unwrap();
        let ops = [
            op(0, 10, RegisterOpKind::Put { value: 1 }),
            op(0, 10, RegisterOpKind::Put { value: 2 }),
            op(5, 6, RegisterOpKind::Get { observed: Some(2) }),
            op(11, 12, RegisterOpKind::Get { observed: Some(1) }),
            op(13, 14, RegisterOpKind::Get { observed: Some(2) }),
        ];
        let err = check_linearizable_registers(&ops).unwrap_err();
        assert_eq!(err.kind, AnomalyKind::NotLinearizable);
    }

    #[test]
    fn duplicate_put_values_are_malformed() {
        let ops = [
            op(0, 1, RegisterOpKind::Put { value: 1 }),
            op(2, 3, RegisterOpKind::Put { value: 1 }),
        ];
        let err = check_linearizable_registers(&ops).unwrap_err();
        assert_eq!(err.kind, AnomalyKind::MalformedHistory);
    }
}
