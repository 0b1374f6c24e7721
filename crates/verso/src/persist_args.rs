//! `--durability`, `--data-dir`, `--fsync-interval`, shared by the `bench` commands.

use std::path::PathBuf;
use std::time::Duration;

use verso_bench::{BenchError, Persist};

#[derive(clap::Args, Debug, Clone)]
pub struct PersistArgs {
    /// Redo logging: none (memory only), lazy (acknowledge at once, fsync in the
    /// background every --fsync-interval), or sync (a transaction counts when it is on
    /// disk; workers keep committing meanwhile).
    #[arg(long, default_value = "none", value_name = "MODE", value_parser = ["none", "lazy", "sync"])]
    pub durability: String,

    /// Where a durable run writes its logs and checkpoints; must be empty or absent.
    /// Default: a fresh directory under the system temp dir, removed afterwards.
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,

    /// Lazy durability: the longest a commit waits in memory, in milliseconds.
    #[arg(long, default_value_t = 10, value_name = "MS")]
    pub fsync_interval: u64,
}

impl PersistArgs {
    pub fn to_persist(&self) -> Result<Persist, BenchError> {
        Ok(Persist {
            durability: self.durability.parse().map_err(BenchError::Config)?,
            data_dir: self.data_dir.clone(),
            fsync_interval: Duration::from_millis(self.fsync_interval),
        })
    }
}
