//! A deterministic simulator for `verso-vsr` (TigerBeetle's VOPR in spirit): N replicas and
//! M clients in virtual time, driven by one seed through dropped, duplicated, reordered and
//! delayed messages, partitions (asymmetric ones too), crashes and restarts of any replica
//! and of all at once, and disks that lose unsynced writes, tear the last one and stall.
//! After the faults stop it checks that the group makes progress within a bound, then
//! checks the run (`checks.rs`): linearizability of the acknowledged operations that
//! survived, that what was lost is a suffix and was never durable, that no two entries
//! share a viewstamp, that every announced durable point is in the final log, and that
//! every replica's state is the final log's.
//!
//! One seed reproduces one run exactly: `verso sim vsr --seed N --trace`.

mod checks;
mod rng;
mod world;

use verso_vsr::{Mistake, Mode};

pub use world::Outcome;

/// Which faults a run injects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Faults {
    /// A perfect network and no crashes.
    None,
    /// Network faults, partitions, disk stalls, and crashes of at most f replicas at a time
    /// (counting a restarted replica until it caught up): nothing acknowledged may be lost.
    Minority,
    /// As `Minority`, but a replica may crash while the others lag behind (only at most f
    /// down or restarted-and-not-recovered at a time, recovered as the protocol's amnesia
    /// ends): the thesis's property 3 as stated, which needs a restarted replica to stay
    /// out of elections until it has caught up from a primary.
    Lagging,
    /// Everything, including crashes of every replica at once: acknowledged operations may
    /// be lost, but only a suffix, and never a durable one.
    Total,
}

impl std::str::FromStr for Faults {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "none" => Ok(Faults::None),
            "minority" => Ok(Faults::Minority),
            "lagging" => Ok(Faults::Lagging),
            "total" => Ok(Faults::Total),
            _ => Err(format!(
                "unknown fault profile {s:?} (none, minority, lagging, total)"
            )),
        }
    }
}

/// One run's settings. Everything random is drawn from `seed`.
#[derive(Clone, Debug)]
pub struct SimConfig {
    pub seed: u64,
    pub replicas: u8,
    pub clients: usize,
    pub ops_per_client: usize,
    /// Keys the clients use (few keys: more conflicts for the checker to order).
    pub keys: u64,
    pub mode: Mode,
    pub faults: Faults,
    /// Virtual milliseconds of faults before they stop.
    pub fault_ms: u64,
    /// Virtual milliseconds allowed, once faults stop, for every client to finish and every
    /// replica to converge.
    pub liveness_ms: u64,
    /// Every checkpoint takes 200-1500 virtual ms to write aside (a large database), not
    /// only when the disk stalls: view changes then meet checkpoints still being written.
    pub slow_checkpoints: bool,
    /// Print every event.
    pub trace: bool,
    #[doc(hidden)]
    pub mistake: Option<Mistake>,
}

impl SimConfig {
    pub fn new(seed: u64) -> SimConfig {
        SimConfig {
            seed,
            replicas: 3,
            clients: 3,
            ops_per_client: 30,
            keys: 4,
            mode: Mode::Lazy,
            faults: Faults::Total,
            fault_ms: 10_000,
            liveness_ms: 60_000,
            slow_checkpoints: false,
            trace: false,
            mistake: None,
        }
    }
}

/// A run that broke a property, with what reproduces it.
#[derive(Clone, Debug)]
pub struct Failure {
    pub seed: u64,
    pub message: String,
    /// The last events before the failure.
    pub trace: Vec<String>,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "seed {}: {}", self.seed, self.message)?;
        if !self.trace.is_empty() {
            writeln!(f, "last events:")?;
            for line in &self.trace {
                writeln!(f, "  {line}")?;
            }
        }
        write!(
            f,
            "reproduce with `verso sim vsr --seed {} --trace`",
            self.seed
        )
    }
}

/// Runs one seed. A panic inside the replica code (its invariants, or the application's
/// refusal to undo below the durable point) is a failure too.
pub fn run(config: &SimConfig) -> Result<Outcome, Failure> {
    let cfg = config.clone();
    let result = std::panic::catch_unwind(move || world::World::new(cfg).run());
    match result {
        Ok(r) => r,
        Err(p) => {
            let message = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "panic".to_string());
            Err(Failure {
                seed: config.seed,
                message: format!("panicked: {message}"),
                trace: Vec::new(),
            })
        }
    }
}
