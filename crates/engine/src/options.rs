//! How a `Db` is configured.

use std::str::FromStr;

/// Default limit on key length: 64 KiB.
pub const KEY_SIZE_MAX_DEFAULT: usize = 64 << 10;
/// Default limit on value length: 64 MiB.
pub const VALUE_SIZE_MAX_DEFAULT: usize = 64 << 20;
/// Hard ceiling for either limit: lengths are stored in 32 bits.
pub const SIZE_LIMIT_CEILING: usize = (u32::MAX >> 1) as usize;
/// Default number of attempts `Db::run` makes before returning the conflict.
pub const RUN_ATTEMPTS_DEFAULT: u32 = 16;

/// Where transaction timestamps come from (vMVCC §2, §6.4).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum TimestampSource {
    /// RDTSC when the CPU has an invariant TSC, else `Atomic`.
    #[default]
    Auto,
    /// The CPU timestamp counter with a site id in the low bits (no shared-memory writes).
    Rdtsc,
    /// A shared atomic counter (fetch-and-add).
    Atomic,
    /// A counter behind a mutex: the slowest, kept for measurement.
    Mutex,
}

impl FromStr for TimestampSource {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(TimestampSource::Auto),
            "rdtsc" => Ok(TimestampSource::Rdtsc),
            "atomic" => Ok(TimestampSource::Atomic),
            "mutex" => Ok(TimestampSource::Mutex),
            other => Err(format!(
                "unknown timestamp source {other:?} (auto|rdtsc|atomic|mutex)"
            )),
        }
    }
}

/// The concurrency-control protocol of a `Db` (every transaction on it uses it).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Concurrency {
    /// Multi-version timestamp ordering (vMVCC §2): serialized at the begin timestamp;
    /// every read records itself (`tslast`, gap stamps), and a writer aborts if a younger
    /// transaction read or wrote what it writes.
    #[default]
    Mvto,
    /// HyPer's precision locking (§2.3): reads leave no trace; a writer takes a commit
    /// timestamp and validates its logged read predicates against the writes of
    /// transactions that committed since it began. Read-only transactions never abort.
    PrecisionLocking,
    /// Strict two-phase locking, no-wait (`two_pl.rs`): **a baseline for comparison only**.
    /// Readers lock what they read; a writer that finds a lock held aborts.
    TwoPhaseLocking,
}

impl FromStr for Concurrency {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "mvto" => Ok(Concurrency::Mvto),
            "precision-locking" | "pl" => Ok(Concurrency::PrecisionLocking),
            "2pl" => Ok(Concurrency::TwoPhaseLocking),
            other => Err(format!(
                "unknown concurrency control {other:?} (mvto|precision-locking|2pl)"
            )),
        }
    }
}

impl std::fmt::Display for Concurrency {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Concurrency::Mvto => "mvto",
            Concurrency::PrecisionLocking => "precision-locking",
            Concurrency::TwoPhaseLocking => "2pl",
        })
    }
}

/// A transaction's isolation level (see [`Db::begin_with`](crate::Db::begin_with)).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Isolation {
    /// Serializable (strictly, under both protocols): the default.
    #[default]
    Serializable,
    /// Snapshot isolation (under [`Concurrency::PrecisionLocking`] only): reads see the
    /// snapshot at begin and are not validated; of two concurrent writers of one key the
    /// first to commit wins. Allows *write skew*: two
    /// transactions that each read what the other writes can both commit, which no serial
    /// order explains.
    Snapshot,
}

/// Configuration for [`Db::open`](crate::Db::open). Build it with `Options::default()` and
/// the setters.
#[derive(Clone, Debug)]
pub struct Options {
    pub(crate) key_size_max: usize,
    pub(crate) value_size_max: usize,
    pub(crate) timestamps: TimestampSource,
    pub(crate) run_attempts: u32,
    pub(crate) index: crate::IndexKind,
    pub(crate) concurrency: Concurrency,
    pub(crate) isolation: Isolation,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            key_size_max: KEY_SIZE_MAX_DEFAULT,
            value_size_max: VALUE_SIZE_MAX_DEFAULT,
            timestamps: TimestampSource::Auto,
            run_attempts: RUN_ATTEMPTS_DEFAULT,
            index: crate::IndexKind::Masstree,
            concurrency: Concurrency::Mvto,
            isolation: Isolation::Serializable,
        }
    }
}

impl Options {
    /// Longest key accepted, in bytes (default 64 KiB, at most [`SIZE_LIMIT_CEILING`]).
    pub fn key_size_max(mut self, bytes: usize) -> Self {
        self.key_size_max = bytes;
        self
    }

    /// Longest value accepted, in bytes (default 64 MiB, at most [`SIZE_LIMIT_CEILING`]).
    pub fn value_size_max(mut self, bytes: usize) -> Self {
        self.value_size_max = bytes;
        self
    }

    /// Where timestamps come from (default [`TimestampSource::Auto`]).
    pub fn timestamps(mut self, source: TimestampSource) -> Self {
        self.timestamps = source;
        self
    }

    /// How many times `Db::run` tries a transaction that keeps conflicting (default 16, >= 1).
    pub fn run_attempts(mut self, attempts: u32) -> Self {
        self.run_attempts = attempts;
        self
    }

    /// Which ordered index tables use (default [`IndexKind::Masstree`](crate::IndexKind)).
    pub fn index(mut self, kind: crate::IndexKind) -> Self {
        self.index = kind;
        self
    }

    /// The concurrency-control protocol (default [`Concurrency::Mvto`]).
    pub fn concurrency(mut self, cc: Concurrency) -> Self {
        self.concurrency = cc;
        self
    }

    /// The isolation level of transactions begun with `Db::begin` (default
    /// [`Isolation::Serializable`]; [`Isolation::Snapshot`] needs precision locking).
    pub fn isolation(mut self, isolation: Isolation) -> Self {
        self.isolation = isolation;
        self
    }

    pub(crate) fn validate(&self) -> Result<(), crate::Error> {
        let bad = |reason: String| Err(crate::Error::InvalidOptions { reason });
        if self.isolation == Isolation::Snapshot
            && self.concurrency != Concurrency::PrecisionLocking
        {
            return bad("snapshot isolation needs Concurrency::PrecisionLocking".into());
        }
        if self.key_size_max > SIZE_LIMIT_CEILING {
            return bad(format!(
                "key_size_max {} > {SIZE_LIMIT_CEILING}",
                self.key_size_max
            ));
        }
        if self.value_size_max > SIZE_LIMIT_CEILING {
            return bad(format!(
                "value_size_max {} > {SIZE_LIMIT_CEILING}",
                self.value_size_max
            ));
        }
        if self.run_attempts == 0 {
            return bad("run_attempts must be at least 1".into());
        }
        Ok(())
    }
}
