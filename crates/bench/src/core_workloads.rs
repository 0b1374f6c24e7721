//! YCSB's core workloads A-F (Cooper et al., "Benchmarking Cloud Serving Systems with
//! YCSB", and the `workloads/workload[a-f]` files of the YCSB distribution), as operation
//! mixes over the transaction API. Each operation is one transaction unless
//! `--ops-per-txn` groups several.
//!
//! | workload | mix                                  | key choice                    |
//! |----------|--------------------------------------|-------------------------------|
//! | A        | 50% read, 50% update                 | zipfian                       |
//! | B        | 95% read, 5% update                  | zipfian                       |
//! | C        | 100% read                            | zipfian                       |
//! | D        | 95% read, 5% insert                  | latest (zipfian from newest)  |
//! | E        | 95% scan (1..=100 keys), 5% insert   | zipfian start                 |
//! | F        | 50% read, 50% read-modify-write      | zipfian                       |
//!
//! "Zipfian" is `--dist` (YCSB's scrambled zipfian, theta 0.99, by default; `--dist uniform`
//! swaps it). Updates write a whole fresh value (YCSB writes one field of ten; Verso values
//! are opaque). Inserts take the next key after every key so far (YCSB's `orderedinserts`),
//! shared by all threads, so D's "latest" and E's scans see them.

use std::fmt;
use std::str::FromStr;

/// Longest scan of workload E: lengths are uniform in `1..=SCAN_LENGTH_MAX` (YCSB's
/// `maxscanlength=100`, `scanlengthdistribution=uniform`).
pub const SCAN_LENGTH_MAX: u64 = 100;

/// One of YCSB's core workloads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CoreWorkload {
    /// Update heavy: 50/50 reads and updates.
    A,
    /// Read mostly: 95/5 reads and updates.
    B,
    /// Read only.
    C,
    /// Read latest: 95% reads skewed to the newest keys, 5% inserts.
    D,
    /// Short ranges: 95% scans, 5% inserts.
    E,
    /// Read-modify-write: 50% reads, 50% read-then-write of one key.
    F,
}

/// An operation's share of a mix, in percent.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Mix {
    /// Point reads.
    pub read: u32,
    /// Blind writes of a fresh value to an existing key.
    pub update: u32,
    /// Writes of a new key.
    pub insert: u32,
    /// Short forward range reads.
    pub scan: u32,
    /// Read a key, then write it, in one transaction.
    pub read_modify_write: u32,
}

impl CoreWorkload {
    /// Every core workload, in order.
    pub const ALL: [CoreWorkload; 6] = [
        CoreWorkload::A,
        CoreWorkload::B,
        CoreWorkload::C,
        CoreWorkload::D,
        CoreWorkload::E,
        CoreWorkload::F,
    ];

    /// The operation mix (percentages summing to 100).
    pub fn mix(self) -> Mix {
        let m = Mix::default();
        match self {
            CoreWorkload::A => Mix {
                read: 50,
                update: 50,
                ..m
            },
            CoreWorkload::B => Mix {
                read: 95,
                update: 5,
                ..m
            },
            CoreWorkload::C => Mix { read: 100, ..m },
            CoreWorkload::D => Mix {
                read: 95,
                insert: 5,
                ..m
            },
            CoreWorkload::E => Mix {
                scan: 95,
                insert: 5,
                ..m
            },
            CoreWorkload::F => Mix {
                read: 50,
                read_modify_write: 50,
                ..m
            },
        }
    }

    /// Whether reads favour the newest keys (D) rather than follow `--dist`.
    pub fn reads_latest(self) -> bool {
        self == CoreWorkload::D
    }

    /// Whether the workload inserts keys.
    pub fn inserts(self) -> bool {
        self.mix().insert > 0
    }

    /// A short description for summaries.
    pub fn describe(self) -> &'static str {
        match self {
            CoreWorkload::A => "YCSB A: 50% read, 50% update",
            CoreWorkload::B => "YCSB B: 95% read, 5% update",
            CoreWorkload::C => "YCSB C: 100% read",
            CoreWorkload::D => "YCSB D: 95% read latest, 5% insert",
            CoreWorkload::E => "YCSB E: 95% scan of 1-100 keys, 5% insert",
            CoreWorkload::F => "YCSB F: 50% read, 50% read-modify-write",
        }
    }
}

impl Mix {
    /// Sum of the shares (100 for a valid mix).
    pub fn total(&self) -> u32 {
        self.read + self.update + self.insert + self.scan + self.read_modify_write
    }
}

impl FromStr for CoreWorkload {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "a" => Ok(CoreWorkload::A),
            "b" => Ok(CoreWorkload::B),
            "c" => Ok(CoreWorkload::C),
            "d" => Ok(CoreWorkload::D),
            "e" => Ok(CoreWorkload::E),
            "f" => Ok(CoreWorkload::F),
            _ => Err(format!(
                "unknown YCSB workload {s:?}: expected one of a, b, c, d, e, f"
            )),
        }
    }
}

impl fmt::Display for CoreWorkload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let c = match self {
            CoreWorkload::A => "a",
            CoreWorkload::B => "b",
            CoreWorkload::C => "c",
            CoreWorkload::D => "d",
            CoreWorkload::E => "e",
            CoreWorkload::F => "f",
        };
        f.write_str(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mixes_are_ycsbs() {
        for w in CoreWorkload::ALL {
            assert_eq!(w.mix().total(), 100, "{w}");
            assert_eq!(w.to_string().parse::<CoreWorkload>(), Ok(w));
        }
        assert_eq!(CoreWorkload::A.mix().update, 50);
        assert_eq!(CoreWorkload::E.mix().scan, 95);
        assert!(CoreWorkload::D.reads_latest() && CoreWorkload::D.inserts());
        assert!("g".parse::<CoreWorkload>().is_err());
    }
}
