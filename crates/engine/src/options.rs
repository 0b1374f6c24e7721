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

/// Whether and how commits reach the disk (see `verso_log` for the log's design).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Durability {
    /// Memory only: everything is lost when the process ends.
    #[default]
    None,
    /// Commits are acknowledged at once and written to the redo log in the background,
    /// made durable at least every `Options::fsync_interval`: a crash loses at most that
    /// window, and what survives is a prefix of the commit order.
    Lazy,
    /// `commit` returns only once the transaction is on disk (group commit: one
    /// `fdatasync` per log covers every commit that arrived meanwhile). A transaction that
    /// only read returns once every write it could have seen is on disk too (at once,
    /// unless writes are in flight): a crash never takes back what a commit returned.
    Sync,
}

impl FromStr for Durability {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "none" => Ok(Durability::None),
            "lazy" => Ok(Durability::Lazy),
            "sync" => Ok(Durability::Sync),
            other => Err(format!("unknown durability {other:?} (none|lazy|sync)")),
        }
    }
}

impl std::fmt::Display for Durability {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Durability::None => "none",
            Durability::Lazy => "lazy",
            Durability::Sync => "sync",
        })
    }
}

/// Default data directory, relative to the working directory.
pub const DATA_DIR_DEFAULT: &str = "verso-data";
/// Default longest wait before a `lazy` commit reaches the disk.
pub const FSYNC_INTERVAL_DEFAULT: std::time::Duration = std::time::Duration::from_millis(10);

/// A deliberate bug to inject, so tests can show that the history checkers catch what it
/// breaks. Not for use outside tests.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Fault {
    /// No bug (the default).
    #[default]
    None,
    /// MVTO commits ignore younger readers and writers of the keys they write and install
    /// their versions below the newer ones: versions installed with a stale timestamp.
    StaleInstall,
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
    pub(crate) durability: Durability,
    pub(crate) data_dir: std::path::PathBuf,
    pub(crate) fsync_interval: std::time::Duration,
    pub(crate) logs: usize,
    pub(crate) recovery_truncate: bool,
    pub(crate) storage: std::sync::Arc<dyn verso_log::Storage>,
    pub(crate) fault: Fault,
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
            durability: Durability::None,
            data_dir: DATA_DIR_DEFAULT.into(),
            fsync_interval: FSYNC_INTERVAL_DEFAULT,
            logs: std::thread::available_parallelism().map_or(1, usize::from),
            recovery_truncate: false,
            storage: std::sync::Arc::new(verso_log::OsStorage),
            fault: Fault::None,
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

    /// Whether commits reach the disk (default [`Durability::None`]: memory only).
    pub fn durability(mut self, durability: Durability) -> Self {
        self.durability = durability;
        self
    }

    /// Where logs and checkpoints live when durable (default `./verso-data`). One process
    /// at a time: a second `Db::open` of the same directory fails.
    pub fn data_dir(mut self, dir: impl Into<std::path::PathBuf>) -> Self {
        self.data_dir = dir.into();
        self
    }

    /// `lazy` durability: the longest a commit waits in memory (default 10 ms, 1 ms-10 s).
    pub fn fsync_interval(mut self, interval: std::time::Duration) -> Self {
        self.fsync_interval = interval;
        self
    }

    /// Number of redo log files written in parallel (default: one per core, 1-64).
    pub fn logs(mut self, logs: usize) -> Self {
        self.logs = logs;
        self
    }

    /// At recovery, cut a damaged log at the damage instead of refusing to open (what
    /// follows the damage in that log is lost). Torn tails from a crash are always cut.
    pub fn recovery_truncate(mut self, truncate: bool) -> Self {
        self.recovery_truncate = truncate;
        self
    }

    /// The file system the write path uses (tests inject faults with
    /// `verso_log::FaultyStorage`).
    pub fn storage(mut self, storage: std::sync::Arc<dyn verso_log::Storage>) -> Self {
        self.storage = storage;
        self
    }

    /// Injects a deliberate bug (tests of the checkers only).
    #[doc(hidden)]
    pub fn inject_fault(mut self, fault: Fault) -> Self {
        self.fault = fault;
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
        let ms = self.fsync_interval.as_millis();
        if !(1..=10_000).contains(&ms) {
            return bad(format!("fsync_interval {ms} ms is outside 1 ms-10 s"));
        }
        if !(1..=64).contains(&self.logs) {
            return bad(format!("logs = {} is outside 1-64", self.logs));
        }
        if self.run_attempts == 0 {
            return bad("run_attempts must be at least 1".into());
        }
        Ok(())
    }
}
