//! The error type the checkers return: an anomaly name plus either a dependency cycle or
//! a one-line explanation, printed so a failing test says what went wrong without a
//! debugger.

use std::fmt;

use crate::history::{display_key, Key, TxnId};

/// The kind of a dependency edge between two transactions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EdgeKind {
    /// Write-write: the source installed the version right before the target's.
    Ww,
    /// Write-read: the target read a version the source installed.
    Wr,
    /// Read-write (anti-dependency): the source read a version the target overwrote.
    Rw,
    /// Real time: the source ended before the target began.
    Rt,
}

impl fmt::Display for EdgeKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            EdgeKind::Ww => "ww",
            EdgeKind::Wr => "wr",
            EdgeKind::Rw => "rw",
            EdgeKind::Rt => "rt",
        })
    }
}

/// One edge of a reported cycle.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CycleStep {
    /// Source transaction.
    pub from: TxnId,
    /// Target transaction.
    pub to: TxnId,
    /// Why `from` must precede `to`.
    pub kind: EdgeKind,
    /// The key the dependency is about (`None` for real-time edges).
    pub key: Option<Key>,
}

/// A dependency cycle: `steps[i].to == steps[i + 1].from`, and the last step returns to
/// the first step's source.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cycle {
    /// The edges, in order.
    pub steps: Vec<CycleStep>,
}

impl Cycle {
    /// The transactions on the cycle, in order, each once.
    pub fn txns(&self) -> Vec<TxnId> {
        self.steps.iter().map(|s| s.from).collect()
    }

    /// How many edges of the given kind the cycle has.
    pub fn count(&self, kind: EdgeKind) -> usize {
        self.steps.iter().filter(|s| s.kind == kind).count()
    }

    /// The Adya-style classification of this cycle.
    pub fn classify(&self) -> AnomalyKind {
        if self.count(EdgeKind::Rt) > 0 {
            return AnomalyKind::RealTime;
        }
        match self.count(EdgeKind::Rw) {
            0 if self.count(EdgeKind::Wr) == 0 => AnomalyKind::G0,
            0 => AnomalyKind::G1c,
            1 => AnomalyKind::GSingle,
            _ => AnomalyKind::G2,
        }
    }
}

impl fmt::Display for Cycle {
    /// `T12 --rw(key "x")--> T15 --ww(key "x")--> T12`
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Some(first) = self.steps.first() else {
            return f.write_str("(empty cycle)");
        };
        for step in &self.steps {
            match &step.key {
                Some(k) => write!(
                    f,
                    "T{} --{}(key {})--> ",
                    step.from,
                    step.kind,
                    display_key(k)
                )?,
                None => write!(f, "T{} --{}--> ", step.from, step.kind)?,
            }
        }
        write!(f, "T{}", first.from)
    }
}

/// What kind of anomaly (or problem) a [`Violation`] reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum AnomalyKind {
    /// A cycle of write-write dependencies only.
    G0,
    /// A committed txn read a version written by an aborted txn.
    G1a,
    /// A committed txn read a version that was not its writer's final write of the key.
    G1b,
    /// A cycle of ww/wr dependencies with at least one wr.
    G1c,
    /// A cycle with exactly one anti-dependency (e.g. lost update, read skew).
    GSingle,
    /// A cycle with two or more anti-dependencies (e.g. write skew, phantom).
    G2,
    /// A cycle that needs a real-time edge: serializable, but not in real-time order.
    RealTime,
    /// Snapshot isolation: a dependency cycle without two adjacent anti-dependencies
    /// (e.g. a lost update, or a read that missed a write committed before its snapshot).
    GSnapshot,
    /// A read returned a version that was never written (or a deletion, as present).
    GarbageRead,
    /// A read inside a txn did not reflect the txn's own earlier write/delete (for
    /// list-append: its own appends do not end the list, or it saw a later one early).
    InternalInconsistency,
    /// List-append: two reads of a key are not prefixes of one list, so no order of the
    /// appends explains both.
    IncompatibleOrder,
    /// List-append: a read returned the same element twice.
    DuplicateElements,
    /// A range read's result was unsorted, duplicated or out of bounds.
    InvalidRangeResult,
    /// A reader with a timestamp saw a key absent although a committed version with a
    /// smaller timestamp exists.
    AbsentButVisible,
    /// Two committed writers of one key have the same timestamp.
    AmbiguousVersionOrder,
    /// The history itself is malformed (duplicate or zero ids, `begin > end`, ...).
    MalformedHistory,
    /// A register history has no linearization.
    NotLinearizable,
}

impl AnomalyKind {
    /// Human-readable name, used as the first words of a violation's `Display`.
    pub fn name(self) -> &'static str {
        match self {
            AnomalyKind::G0 => "G0 write cycle",
            AnomalyKind::G1a => "G1a aborted read",
            AnomalyKind::G1b => "G1b intermediate read",
            AnomalyKind::G1c => "G1c circular information flow",
            AnomalyKind::GSingle => "G-single anti-dependency cycle (read skew / lost update)",
            AnomalyKind::G2 => "G2 anti-dependency cycle (write skew / phantom)",
            AnomalyKind::RealTime => "real-time violation (stale read)",
            AnomalyKind::GSnapshot => {
                "G-SI cycle without two adjacent anti-dependencies (not snapshot isolation)"
            }
            AnomalyKind::GarbageRead => "garbage read (version never written)",
            AnomalyKind::InternalInconsistency => "internal inconsistency (own write not seen)",
            AnomalyKind::IncompatibleOrder => "incompatible order (reads of a list disagree)",
            AnomalyKind::DuplicateElements => "duplicate elements in a list read",
            AnomalyKind::InvalidRangeResult => "invalid range result",
            AnomalyKind::AbsentButVisible => "read absent but a visible version exists",
            AnomalyKind::AmbiguousVersionOrder => {
                "ambiguous version order (equal commit timestamps)"
            }
            AnomalyKind::MalformedHistory => "malformed history",
            AnomalyKind::NotLinearizable => "not linearizable",
        }
    }

    /// Whether this kind is reported as a dependency cycle.
    pub fn is_cycle(self) -> bool {
        matches!(
            self,
            AnomalyKind::G0
                | AnomalyKind::G1c
                | AnomalyKind::GSingle
                | AnomalyKind::G2
                | AnomalyKind::RealTime
        )
    }
}

impl fmt::Display for AnomalyKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A consistency violation (or a reason the history could not be checked).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// What went wrong.
    pub kind: AnomalyKind,
    /// The transactions involved.
    pub txns: Vec<TxnId>,
    /// For cycle anomalies, the cycle found.
    pub cycle: Option<Cycle>,
    /// Explanation (for cycles: one line per involved txn with its interval and ts).
    pub detail: String,
}

impl Violation {
    /// A non-cycle violation.
    pub(crate) fn new(kind: AnomalyKind, txns: Vec<TxnId>, detail: impl Into<String>) -> Self {
        Violation {
            kind,
            txns,
            cycle: None,
            detail: detail.into(),
        }
    }

    /// A cycle violation, classified from its edges.
    pub(crate) fn from_cycle(cycle: Cycle, detail: String) -> Self {
        Violation {
            kind: cycle.classify(),
            txns: cycle.txns(),
            cycle: Some(cycle),
            detail,
        }
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.kind.name())?;
        match &self.cycle {
            Some(c) => {
                write!(f, ": {c}")?;
                if !self.detail.is_empty() {
                    write!(f, "\n{}", self.detail)?;
                }
                Ok(())
            }
            None => write!(f, ": {}", self.detail),
        }
    }
}

impl std::error::Error for Violation {}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(from: TxnId, to: TxnId, kind: EdgeKind, key: Option<&str>) -> CycleStep {
        CycleStep {
            from,
            to,
            kind,
            key: key.map(|k| k.as_bytes().to_vec()),
        }
    }

    #[test]
    fn cycle_display_and_classification() {
        let c = Cycle {
            steps: vec![
                step(12, 15, EdgeKind::Rw, Some("x")),
                step(15, 12, EdgeKind::Ww, Some("x")),
            ],
        };
        assert_eq!(
            c.to_string(),
            "T12 --rw(key \"x\")--> T15 --ww(key \"x\")--> T12"
        );
        assert_eq!(c.classify(), AnomalyKind::GSingle);
        let v = Violation::from_cycle(c, String::new());
        assert_eq!(
            v.to_string(),
            "G-single anti-dependency cycle (read skew / lost update): \
             T12 --rw(key \"x\")--> T15 --ww(key \"x\")--> T12"
        );

        let rt = Cycle {
            steps: vec![
                step(1, 2, EdgeKind::Rw, Some("x")),
                step(2, 1, EdgeKind::Rt, None),
            ],
        };
        assert_eq!(rt.to_string(), "T1 --rw(key \"x\")--> T2 --rt--> T1");
        assert_eq!(rt.classify(), AnomalyKind::RealTime);

        let g0 = Cycle {
            steps: vec![
                step(1, 2, EdgeKind::Ww, Some("x")),
                step(2, 1, EdgeKind::Ww, Some("y")),
            ],
        };
        assert_eq!(g0.classify(), AnomalyKind::G0);
        let g1c = Cycle {
            steps: vec![
                step(1, 2, EdgeKind::Wr, Some("x")),
                step(2, 1, EdgeKind::Ww, Some("y")),
            ],
        };
        assert_eq!(g1c.classify(), AnomalyKind::G1c);
        let g2 = Cycle {
            steps: vec![
                step(1, 2, EdgeKind::Rw, Some("x")),
                step(2, 1, EdgeKind::Rw, Some("y")),
            ],
        };
        assert_eq!(g2.classify(), AnomalyKind::G2);
    }
}
