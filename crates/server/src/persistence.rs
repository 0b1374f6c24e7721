//! Checkpoints for the server: automatic ones (by time and by log growth), `BGSAVE` on a
//! background thread, `SAVE` on the caller's, and the status `INFO persistence` and
//! `LASTSAVE` report. The log itself is the engine's (`verso_engine::Durability`).
//!
//! Background checkpoints are throttled (`checkpoint-rate`): on a 2-core machine a
//! checkpoint at full speed takes about half of the CPU from the workers, while a throttled
//! one costs them almost nothing and only takes longer.

use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use verso_engine::{CheckpointReport, Db, Error};

/// When the background thread checkpoints.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckpointPolicy {
    /// At least this often while anything was logged (`None`: not by time).
    pub interval: Option<Duration>,
    /// As soon as the log grew by this many bytes since the last checkpoint (0: never).
    pub log_bytes: u64,
    /// Read rate of background checkpoints, bytes per second (`None`: full speed).
    pub rate: Option<u64>,
}

impl Default for CheckpointPolicy {
    fn default() -> Self {
        CheckpointPolicy {
            interval: Some(Duration::from_secs(300)),
            log_bytes: 256 << 20,
            rate: Some(16 << 20),
        }
    }
}

#[derive(Default)]
struct State {
    /// A BGSAVE asked for a checkpoint.
    requested: bool,
    running: bool,
    stop: bool,
    /// Unix seconds of the last successful checkpoint (0: none yet in this run).
    last_save_unix: u64,
    last_save_at: Option<Instant>,
    last_report: Option<CheckpointReport>,
    last_error: Option<String>,
    saves: u64,
}

/// The server's checkpoint scheduler and status.
pub struct Persistence {
    policy: CheckpointPolicy,
    state: Mutex<State>,
    wake: Condvar,
}

/// A checkpoint is already running (`BGSAVE` twice).
#[derive(Debug, PartialEq, Eq)]
pub struct AlreadyRunning;

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl Persistence {
    pub fn new(policy: CheckpointPolicy) -> Self {
        Persistence {
            policy,
            state: Mutex::new(State::default()),
            wake: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `BGSAVE`: asks the background thread for a checkpoint now.
    pub fn request(&self) -> Result<(), AlreadyRunning> {
        let mut s = self.lock();
        if s.running || s.requested {
            return Err(AlreadyRunning);
        }
        s.requested = true;
        self.wake.notify_all();
        Ok(())
    }

    /// `SAVE`: a checkpoint at full speed on this thread (waits for a running one first).
    pub fn save(&self, db: &Db) -> Result<CheckpointReport, Error> {
        {
            let mut s = self.lock();
            while s.running {
                s = self.wake.wait(s).unwrap_or_else(|e| e.into_inner());
            }
            s.running = true;
        }
        let result = db.checkpoint();
        self.finish(&result);
        result
    }

    fn finish(&self, result: &Result<CheckpointReport, Error>) {
        let mut s = self.lock();
        s.running = false;
        match result {
            Ok(r) => {
                s.last_save_unix = unix_now();
                s.last_save_at = Some(Instant::now());
                s.last_report = Some(r.clone());
                s.last_error = None;
                s.saves += 1;
            }
            Err(e) => {
                tracing::error!(error = %e, "checkpoint failed");
                s.last_error = Some(e.to_string());
            }
        }
        self.wake.notify_all();
    }

    /// The background thread's loop: checkpoints when asked or when the policy says, until
    /// [`stop`](Self::stop). Does nothing for a memory-only database.
    pub fn run(&self, db: &Db) {
        if db.durability() == verso_engine::Durability::None {
            return;
        }
        let started = Instant::now();
        loop {
            {
                let mut s = self.lock();
                loop {
                    if s.stop {
                        return;
                    }
                    let since = s.last_save_at.unwrap_or(started).elapsed();
                    let logged = db.log_bytes_since_checkpoint();
                    let by_time = self
                        .policy
                        .interval
                        .is_some_and(|i| since >= i && logged > 0);
                    let by_size = self.policy.log_bytes > 0 && logged >= self.policy.log_bytes;
                    if !s.running && (s.requested || by_time || by_size) {
                        s.requested = false;
                        s.running = true;
                        break;
                    }
                    s = self
                        .wake
                        .wait_timeout(s, Duration::from_millis(500))
                        .unwrap_or_else(|e| e.into_inner())
                        .0;
                }
            }
            let result = match self.policy.rate {
                Some(rate) => db.checkpoint_throttled(rate),
                None => db.checkpoint(),
            };
            self.finish(&result);
        }
    }

    /// Ends [`run`](Self::run) (after the checkpoint in progress, if any).
    pub fn stop(&self) {
        self.lock().stop = true;
        self.wake.notify_all();
    }

    /// `LASTSAVE`: Unix time of the last successful checkpoint of this run (0: none).
    pub fn last_save_unix(&self) -> u64 {
        self.lock().last_save_unix
    }

    /// `INFO persistence` lines (after the durability mode, which the caller knows).
    pub fn info_lines(&self, db: &Db) -> Vec<(String, String)> {
        let s = self.lock();
        let mut v = vec![
            ("durability".into(), db.durability().to_string()),
            (
                "checkpoint_in_progress".into(),
                u8::from(s.running).to_string(),
            ),
            ("checkpoints".into(), s.saves.to_string()),
            ("last_checkpoint_time".into(), s.last_save_unix.to_string()),
            (
                "log_bytes_since_checkpoint".into(),
                db.log_bytes_since_checkpoint().to_string(),
            ),
            (
                "last_checkpoint_status".into(),
                if s.last_error.is_some() { "err" } else { "ok" }.into(),
            ),
        ];
        if let Some(r) = &s.last_report {
            v.push(("last_checkpoint_keys".into(), r.entries.to_string()));
            v.push((
                "last_checkpoint_ms".into(),
                r.duration.as_millis().to_string(),
            ));
        }
        if let Some(rec) = db.recovery_report() {
            v.push((
                "recovered_checkpoint_keys".into(),
                rec.checkpoint_entries.to_string(),
            ));
            v.push((
                "recovered_log_txns".into(),
                rec.logs.txns_replayed.to_string(),
            ));
            v.push(("recovery_ms".into(), rec.duration.as_millis().to_string()));
        }
        v
    }
}
