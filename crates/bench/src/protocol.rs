//! `--cc`: which concurrency control a benchmark's engine runs, as one flag value.

use std::fmt;
use std::str::FromStr;

use verso_engine::{Concurrency, Isolation, Options};

/// A protocol and isolation level for every transaction of a run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Protocol {
    /// MVTO (vMVCC), serializable.
    #[default]
    Mvto,
    /// HyPer's precision locking, serializable.
    PrecisionLocking,
    /// Precision locking's machinery at snapshot isolation (no read validation).
    Snapshot,
    /// Strict two-phase locking, no-wait: the comparison baseline.
    TwoPhaseLocking,
}

impl Protocol {
    /// `options` set up for this protocol.
    pub fn apply(self, options: Options) -> Options {
        match self {
            Protocol::Mvto => options.concurrency(Concurrency::Mvto),
            Protocol::PrecisionLocking => options
                .concurrency(Concurrency::PrecisionLocking)
                .isolation(Isolation::Serializable),
            Protocol::Snapshot => options
                .concurrency(Concurrency::PrecisionLocking)
                .isolation(Isolation::Snapshot),
            Protocol::TwoPhaseLocking => options.concurrency(Concurrency::TwoPhaseLocking),
        }
    }
}

impl FromStr for Protocol {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "mvto" => Ok(Protocol::Mvto),
            "precision-locking" | "pl" => Ok(Protocol::PrecisionLocking),
            "snapshot" | "si" => Ok(Protocol::Snapshot),
            "2pl" => Ok(Protocol::TwoPhaseLocking),
            other => Err(format!(
                "unknown --cc {other:?} (mvto|precision-locking|snapshot|2pl)"
            )),
        }
    }
}

impl fmt::Display for Protocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Protocol::Mvto => "mvto",
            Protocol::PrecisionLocking => "precision-locking",
            Protocol::Snapshot => "snapshot",
            Protocol::TwoPhaseLocking => "2pl",
        })
    }
}

impl serde::Serialize for Protocol {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}
