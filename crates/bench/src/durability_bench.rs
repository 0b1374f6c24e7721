//! `verso bench durability`: what the redo log and checkpoints cost, and how fast recovery is.
//!
//! One run: load `keys` keys (values of `value_size` bytes) into a durable database, then
//! 1. updates for `duration_s` with no checkpoint (after a warm-up), then
//! 2. the same updates while checkpoints run back to back on one more thread: the
//!    throughput during checkpoints, and each checkpoint's time, then 1 again: the base
//!    throughput is the mean of the runs before and after;
//! 3. a last checkpoint and `extra_updates` more updates, so recovery loads a checkpoint
//!    and replays a log of known length;
//! 4. close and reopen: recovery time, checkpoint entries loaded, transactions replayed,
//!    and a check that every key is back.
//!
//! Updates here commit with `Db::run`, which under `sync` waits for each commit's disk
//! write: this benchmark is about checkpoints and recovery; persist throughput under `sync`
//! is what `bench ycsb`/`tpcc --durability sync` measure.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use verso_engine::{Db, Durability, Options, Table};

use crate::rng::Rng;
use crate::BenchError;

/// Settings of a durability run.
#[derive(Clone, Debug)]
pub struct DurabilityConfig {
    pub keys: u64,
    pub value_size: usize,
    pub threads: usize,
    pub duration_s: f64,
    pub extra_updates: u64,
    pub persist: crate::Persist,
    pub cc: crate::Protocol,
    pub seed: u64,
    /// Checkpoint read rate limit in bytes per second (`None`: full speed).
    pub checkpoint_rate: Option<u64>,
}

impl Default for DurabilityConfig {
    fn default() -> Self {
        DurabilityConfig {
            keys: 1_000_000,
            value_size: 100,
            threads: 2,
            duration_s: 5.0,
            extra_updates: 200_000,
            persist: crate::Persist {
                durability: Durability::Lazy,
                ..crate::Persist::default()
            },
            cc: crate::Protocol::Mvto,
            seed: 42,
            checkpoint_rate: None,
        }
    }
}

/// What the run measured.
#[derive(Clone, Debug, serde::Serialize)]
pub struct DurabilityReport {
    pub benchmark: &'static str,
    pub durability: String,
    pub cc: crate::Protocol,
    pub keys: u64,
    pub value_size: usize,
    pub threads: usize,
    /// Checkpoint read rate limit, bytes per second (0: full speed).
    pub checkpoint_rate: u64,
    pub load_seconds: f64,
    /// Update transactions per second without a checkpoint.
    pub txn_per_sec: f64,
    /// The same while checkpoints ran back to back.
    pub txn_per_sec_during_checkpoint: f64,
    pub checkpoint_throughput_ratio: f64,
    pub checkpoints: usize,
    /// Median checkpoint time, and its size.
    pub checkpoint_seconds: f64,
    pub checkpoint_bytes: u64,
    pub recovery_seconds: f64,
    pub recovered_checkpoint_entries: u64,
    pub recovered_log_txns: u64,
    pub recovered_keys: u64,
    pub machine: crate::rss::Machine,
}

const TABLE: &str = "usertable";

fn value_for(n: u64, size: usize) -> Vec<u8> {
    let mut v = vec![b'v'; size];
    crate::ycsb::stamp_value(&mut v, n);
    v
}

/// Update transactions (one random key each) on `threads` threads until `stop`; returns
/// the commits acknowledged (under sync, a commit waits for its ticket).
fn updates(db: &Db, t: Table, cfg: &DurabilityConfig, stop: &AtomicBool, salt: u64) -> u64 {
    let done = AtomicU64::new(0);
    std::thread::scope(|s| {
        for i in 0..cfg.threads {
            let done = &done;
            s.spawn(move || {
                let mut rng = Rng::for_stream(cfg.seed ^ salt, i as u64);
                let mut value = value_for(0, cfg.value_size);
                let mut n = 0;
                while !stop.load(Ordering::Relaxed) {
                    let k = rng.next_u64() % cfg.keys;
                    crate::ycsb::stamp_value(&mut value, n);
                    if db.run(|txn| txn.put(&t, k.to_be_bytes(), &value)).is_ok() {
                        n += 1;
                    }
                }
                done.fetch_add(n, Ordering::Relaxed);
            });
        }
    });
    done.load(Ordering::Relaxed)
}

fn timed_updates(db: &Db, t: Table, cfg: &DurabilityConfig, salt: u64) -> f64 {
    let stop = AtomicBool::new(false);
    let started = Instant::now();
    let n = std::thread::scope(|s| {
        let h = s.spawn(|| updates(db, t, cfg, &stop, salt));
        std::thread::sleep(Duration::from_secs_f64(cfg.duration_s));
        stop.store(true, Ordering::Relaxed);
        h.join().expect("update threads")
    });
    n as f64 / started.elapsed().as_secs_f64()
}

/// Runs the four phases (module docs).
pub fn run(cfg: &DurabilityConfig) -> Result<DurabilityReport, BenchError> {
    if cfg.persist.durability == Durability::None {
        return Err(BenchError::Config(
            "bench durability needs --durability lazy or sync".into(),
        ));
    }
    let (options, dir) = cfg.persist.apply(cfg.cc.apply(Options::default()))?;
    let (load_seconds, base, during, ckpts) = {
        let db = Db::open(options.clone())?;
        let t = db.table(TABLE)?;
        let started = Instant::now();
        let chunk = cfg.keys.div_ceil(cfg.threads as u64);
        std::thread::scope(|s| -> Result<(), BenchError> {
            let hs: Vec<_> = (0..cfg.threads as u64)
                .map(|i| {
                    let db = &db;
                    s.spawn(move || -> Result<(), BenchError> {
                        let (lo, hi) = (i * chunk, ((i + 1) * chunk).min(cfg.keys));
                        for batch in (lo..hi).step_by(1000) {
                            db.run(|txn| {
                                for k in batch..(batch + 1000).min(hi) {
                                    txn.put(&t, k.to_be_bytes(), value_for(k, cfg.value_size))?;
                                }
                                Ok(())
                            })?;
                        }
                        Ok(())
                    })
                })
                .collect();
            for h in hs {
                h.join().expect("loader")?;
            }
            Ok(())
        })?;
        db.flush()?;
        let load_seconds = started.elapsed().as_secs_f64();
        // Warm up (the first updates allocate versions on fresh pages), then measure the
        // base before and after the checkpoint phase and average: drift cancels out.
        let warm = DurabilityConfig {
            duration_s: (cfg.duration_s / 2.0).min(2.0),
            ..cfg.clone()
        };
        timed_updates(&db, t, &warm, 0);
        let base_before = timed_updates(&db, t, cfg, 1);
        let stop = AtomicBool::new(false);
        let (during, ckpts) = std::thread::scope(|s| -> Result<_, BenchError> {
            let ck = s.spawn(
                || -> Result<Vec<verso_engine::CheckpointReport>, BenchError> {
                    let mut v = Vec::new();
                    while !stop.load(Ordering::Relaxed) {
                        v.push(match cfg.checkpoint_rate {
                            Some(r) => db.checkpoint_throttled(r)?,
                            None => db.checkpoint()?,
                        });
                    }
                    Ok(v)
                },
            );
            let during = timed_updates(&db, t, cfg, 2);
            stop.store(true, Ordering::Relaxed);
            Ok((during, ck.join().expect("checkpointer")?))
        })?;
        let base = (base_before + timed_updates(&db, t, cfg, 3)) / 2.0;
        // One more checkpoint, then a log tail of known length for recovery to replay.
        db.checkpoint()?;
        let mut rng = Rng::for_stream(cfg.seed, 99);
        for n in 0..cfg.extra_updates {
            let k = rng.next_u64() % cfg.keys;
            db.run(|txn| txn.put(&t, k.to_be_bytes(), value_for(n, cfg.value_size)))?;
        }
        (load_seconds, base, during, ckpts)
    };
    let started = Instant::now();
    let db = Db::open(options)?;
    let recovery_seconds = started.elapsed().as_secs_f64();
    let report = db.recovery_report().cloned().unwrap_or_default();
    let t = db.table(TABLE)?;
    let recovered_keys = db.begin_read_only()?.range(&t, ..)?.count() as u64;
    if recovered_keys != cfg.keys {
        return Err(BenchError::Other(format!(
            "recovery lost keys: {recovered_keys} of {}",
            cfg.keys
        )));
    }
    drop(db);
    drop(dir);
    let mut secs: Vec<f64> = ckpts.iter().map(|c| c.duration.as_secs_f64()).collect();
    secs.sort_by(f64::total_cmp);
    Ok(DurabilityReport {
        benchmark: "durability",
        durability: cfg.persist.durability.to_string(),
        cc: cfg.cc,
        keys: cfg.keys,
        value_size: cfg.value_size,
        threads: cfg.threads,
        checkpoint_rate: cfg.checkpoint_rate.unwrap_or(0),
        load_seconds,
        txn_per_sec: base,
        txn_per_sec_during_checkpoint: during,
        checkpoint_throughput_ratio: during / base,
        checkpoints: ckpts.len(),
        checkpoint_seconds: secs.get(secs.len() / 2).copied().unwrap_or(0.0),
        checkpoint_bytes: ckpts.last().map_or(0, |c| c.bytes),
        recovery_seconds,
        recovered_checkpoint_entries: report.checkpoint_entries,
        recovered_log_txns: report.logs.txns_replayed,
        recovered_keys,
        machine: crate::rss::Machine::detect(),
    })
}

impl DurabilityReport {
    pub fn summary(&self) -> String {
        format!(
            "verso bench durability: {} keys x {} B, {} threads, durability {}, cc {}\n\
             load                 {:>10.2} s\n\
             updates              {:>10.0} txn/s\n\
             during checkpoints   {:>10.0} txn/s ({:.0}% of the above; {} checkpoints)\n\
             checkpoint           {:>10.2} s (median), {} MiB\n\
             recovery             {:>10.2} s ({} checkpoint entries, {} log txns replayed)\n",
            self.keys,
            self.value_size,
            self.threads,
            self.durability,
            self.cc,
            self.load_seconds,
            self.txn_per_sec,
            self.txn_per_sec_during_checkpoint,
            self.checkpoint_throughput_ratio * 100.0,
            self.checkpoints,
            self.checkpoint_seconds,
            self.checkpoint_bytes >> 20,
            self.recovery_seconds,
            self.recovered_checkpoint_entries,
            self.recovered_log_txns,
        )
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("report serializes")
    }
}
