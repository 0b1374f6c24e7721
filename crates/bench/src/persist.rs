//! `--durability`, `--data-dir`, `--fsync-interval`: benchmarks with the redo log on.
//!
//! Under `sync`, a worker does not wait for the disk after each commit: it commits with a
//! durability ticket ([`commit`]) and goes on; the runner counts the transaction, and takes
//! its latency, when the ticket becomes durable (Silo's "persist throughput"). Under `lazy`
//! and `none` a commit is acknowledged when it returns.

use std::cell::Cell;
use std::path::PathBuf;
use std::time::Duration;

use verso_engine::{CommitTs, Durability, DurabilityTicket, Error, Options, Txn};

/// Durability settings of a benchmark run.
#[derive(Clone, Debug)]
pub struct Persist {
    pub durability: Durability,
    /// `None`: a fresh directory under the system's temp dir, removed after the run.
    pub data_dir: Option<PathBuf>,
    pub fsync_interval: Duration,
}

impl Default for Persist {
    fn default() -> Self {
        Persist {
            durability: Durability::None,
            data_dir: None,
            fsync_interval: verso_engine::FSYNC_INTERVAL_DEFAULT,
        }
    }
}

/// The directory a durable run writes, removed on drop if the harness made it.
pub struct RunDir {
    path: Option<PathBuf>,
    remove: bool,
}

impl Drop for RunDir {
    fn drop(&mut self) {
        if let (true, Some(p)) = (self.remove, &self.path) {
            let _ = std::fs::remove_dir_all(p);
        }
    }
}

impl Persist {
    /// `options` with these settings, and the directory guard to keep alive for the run.
    /// A given `--data-dir` must be empty or absent: a benchmark starts from nothing.
    pub fn apply(&self, options: Options) -> Result<(Options, RunDir), crate::BenchError> {
        if self.durability == Durability::None {
            return Ok((
                options,
                RunDir {
                    path: None,
                    remove: false,
                },
            ));
        }
        let (path, remove) = match &self.data_dir {
            Some(p) => {
                let busy = std::fs::read_dir(p).is_ok_and(|mut d| d.next().is_some());
                if busy {
                    return Err(crate::BenchError::Config(format!(
                        "--data-dir {} is not empty: a benchmark needs a fresh directory",
                        p.display()
                    )));
                }
                (p.clone(), false)
            }
            None => {
                let p = std::env::temp_dir().join(format!(
                    "verso-bench-{}-{}",
                    std::process::id(),
                    std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .map_or(0, |d| d.as_nanos())
                ));
                (p, true)
            }
        };
        let options = options
            .durability(self.durability)
            .data_dir(&path)
            .fsync_interval(self.fsync_interval);
        Ok((
            options,
            RunDir {
                path: Some(path),
                remove,
            },
        ))
    }
}

thread_local! {
    /// The newest ticket this thread's commits produced since the runner last looked.
    static TICKET: Cell<Option<DurabilityTicket>> = const { Cell::new(None) };
}

/// Commits without waiting for the disk, leaving the ticket for the runner.
pub(crate) fn commit(txn: Txn<'_>) -> Result<CommitTs, Error> {
    let (ts, ticket) = txn.commit_with_ticket()?;
    TICKET.with(|t| t.set(t.get().max(Some(ticket))));
    Ok(ts)
}

/// The ticket of the transaction the worker just finished (`None` if it wrote nothing).
pub(crate) fn take_ticket() -> Option<DurabilityTicket> {
    TICKET.with(|t| t.take())
}

/// The database to ask about tickets when commits wait for the disk (sync), else `None`.
pub(crate) fn acks(db: &verso_engine::Db) -> Option<&verso_engine::Db> {
    (db.durability() == Durability::Sync).then_some(db)
}
