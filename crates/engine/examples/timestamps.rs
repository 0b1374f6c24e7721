//! Timestamp-source scalability (the vMVCC §6.4 comparison), isolated from the index: threads
//! run empty read-only transactions (begin + commit, which is exactly one timestamp and one
//! slot registration each) for a fixed time, per source, interleaved over several rounds.
//!
//! ```sh
//! cargo run --release -p verso-engine --example timestamps -- [THREADS] [SECONDS] [ROUNDS]
//! ```

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use verso_engine::{Db, Options, TimestampSource};

fn rate(source: TimestampSource, threads: usize, seconds: f64) -> f64 {
    let db = Db::open(Options::default().timestamps(source)).expect("open");
    let stop = AtomicBool::new(false);
    let done = AtomicU64::new(0);
    let start = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    for _ in 0..256 {
                        db.begin_read_only()
                            .expect("begin")
                            .commit()
                            .expect("commit");
                    }
                    n += 256;
                }
                done.fetch_add(n, Ordering::Relaxed);
            });
        }
        std::thread::sleep(Duration::from_secs_f64(seconds));
        stop.store(true, Ordering::Relaxed);
    });
    done.load(Ordering::Relaxed) as f64 / start.elapsed().as_secs_f64()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let threads = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(2);
    let seconds = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(2.0);
    let rounds = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(3);
    let sources = [
        ("rdtsc", TimestampSource::Rdtsc),
        ("atomic", TimestampSource::Atomic),
        ("mutex", TimestampSource::Mutex),
    ];
    let mut results: Vec<Vec<f64>> = vec![Vec::new(); sources.len()];
    for _ in 0..rounds {
        for (i, &(_, source)) in sources.iter().enumerate() {
            results[i].push(rate(source, threads, seconds));
        }
    }
    println!("empty transactions/s, {threads} threads, {seconds} s x {rounds} rounds");
    for (i, (name, _)) in sources.iter().enumerate() {
        let mut r = results[i].clone();
        r.sort_by(f64::total_cmp);
        let runs: Vec<String> = results[i]
            .iter()
            .map(|x| format!("{:.2}", x / 1e6))
            .collect();
        println!(
            "{name:>7}: median {:.2} M  [{}]",
            r[r.len() / 2] / 1e6,
            runs.join(", ")
        );
    }
}
