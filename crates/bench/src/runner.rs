//! Threads, phases, timing and progress: the part of a benchmark that is not the workload.
//!
//! The main thread is the clock. It flips a shared phase word (warmup, measure, stop) at
//! the deadlines and samples per-thread counters for the progress display; workers only
//! read the phase every [`CHECK_EVERY`] transactions and publish their counters at the same
//! moments, each to its own cache line, so the hot loop shares nothing with other workers.
//!
//! A worker counts from the moment it notices the measure phase to the moment it notices
//! stop. Both lag the main thread's flips by at most a few transactions (microseconds), and
//! the window is the main thread's time between the flips, so the skew is negligible even
//! for sub-second runs.

use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;
use hdrhistogram::Histogram;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::ycsb::{YcsbConfig, LATENCY_SAMPLE_EVERY};
use crate::BenchError;

/// Transactions between two looks at the phase word (and two counter publications).
pub const CHECK_EVERY: u64 = 8;

/// Largest latency the histograms hold: an hour, in nanoseconds; longer ones saturate.
const LATENCY_MAX_NS: u64 = 3_600_000_000_000;

/// How to show progress on stderr.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Progress {
    /// A progress bar when stderr is a terminal, else a line per second.
    #[default]
    Auto,
    /// Always a line per second.
    Lines,
    /// Nothing (tests).
    Quiet,
}

const WARMUP: u8 = 0;
const MEASURE: u8 = 1;
const STOP: u8 = 2;

/// The run's shared phase, read by every worker.
pub struct Control {
    phase: CachePadded<AtomicU8>,
    failed: AtomicBool,
}

impl Control {
    fn new(phase: u8) -> Self {
        Control {
            phase: CachePadded::new(AtomicU8::new(phase)),
            failed: AtomicBool::new(false),
        }
    }

    #[inline]
    fn phase(&self) -> u8 {
        // Relaxed: the phase orders nothing else; a worker seeing it a little late only
        // shifts its window by a transaction or two.
        self.phase.load(Ordering::Relaxed)
    }

    /// Whether the run has ended (deadline passed or a thread failed).
    #[inline]
    pub fn stopped(&self) -> bool {
        self.phase() == STOP
    }

    fn set(&self, phase: u8) {
        self.phase.store(phase, Ordering::Relaxed);
    }

    /// Stops everyone after an error.
    fn fail(&self) {
        self.failed.store(true, Ordering::Relaxed);
        self.set(STOP);
    }

    fn failed(&self) -> bool {
        self.failed.load(Ordering::Relaxed)
    }
}

/// One worker's transaction: build the ops, run them, retry conflicts until commit.
pub(crate) trait Workload {
    /// Runs one transaction to commit: `Some(aborted attempts)`, or `None` if the run
    /// stopped while it was still retrying (it is then not counted).
    fn txn(&mut self, ctl: &Control) -> Result<Option<u64>, BenchError>;

    /// Called when this worker sees the measured window open, for workloads that keep
    /// their own counters (they restart them here).
    fn window_opened(&mut self) {}

    /// Called once when this worker's loop ends without an error.
    fn finished(&mut self) {}
}

/// What [`measure_shape`] needs to know about a run, whatever the benchmark.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RunShape {
    pub(crate) threads: usize,
    pub(crate) long_readers: usize,
    pub(crate) warmup_s: f64,
    pub(crate) duration_s: f64,
    pub(crate) progress: Progress,
}

impl From<&YcsbConfig> for RunShape {
    fn from(cfg: &YcsbConfig) -> Self {
        RunShape {
            threads: cfg.threads,
            long_readers: cfg.long_readers,
            warmup_s: cfg.warmup_s,
            duration_s: cfg.duration_s,
            progress: cfg.progress,
        }
    }
}

/// One long reader's transaction.
pub(crate) trait LongReader {
    /// Runs one long read-only transaction: `true` if it finished, `false` if the run
    /// stopped it midway (or, for a reader on a timer, if it only waited for its turn).
    fn read(&mut self, ctl: &Control) -> Result<bool, BenchError>;
}

/// Counters a worker publishes for the progress display.
#[derive(Default)]
struct Published {
    commits: AtomicU64,
    aborts: AtomicU64,
}

/// What a measured window produced, summed over threads.
#[derive(Debug)]
pub struct Measured {
    /// Transactions committed in the window.
    pub commits: u64,
    /// Aborted attempts in the window (conflicts retried).
    pub aborts: u64,
    /// Latency of sampled transactions, in nanoseconds, from first begin to commit.
    pub latency: Histogram<u64>,
    /// The window's real length.
    pub window: Duration,
    /// The warmup's real length.
    pub warmup: Duration,
    /// Long-reader transactions that began and finished within the window.
    pub long_reader_txns: u64,
    /// Their total duration.
    pub long_reader_time: Duration,
}

fn new_histogram() -> Histogram<u64> {
    // Three significant digits over 1 ns .. 1 h: about 250 KiB per thread, allocated once.
    Histogram::new_with_bounds(1, LATENCY_MAX_NS, 3).expect("static histogram bounds are valid")
}

struct WorkerOut {
    commits: u64,
    aborts: u64,
    latency: Histogram<u64>,
}

/// Commits waiting for their durability tickets (sync mode): the oldest first.
const UNACKED_MAX: usize = 1 << 16;

/// The hot loop. No allocation, no locks, no syscalls except the sampled clock reads.
///
/// With `acks` (sync durability), a transaction counts when its ticket is durable, not when
/// its commit returns; its latency runs to that moment. Up to [`UNACKED_MAX`] wait at once.
fn worker_loop<W: Workload>(
    w: &mut W,
    ctl: &Control,
    publ: &Published,
    acks: Option<&verso_engine::Db>,
) -> Result<WorkerOut, BenchError> {
    let mut unacked: std::collections::VecDeque<(
        verso_engine::DurabilityTicket,
        Option<Instant>,
        u64,
    )> = std::collections::VecDeque::new();
    let mut latency = new_histogram();
    let (mut commits, mut aborts) = (0u64, 0u64);
    let (mut base_commits, mut base_aborts) = (0u64, 0u64);
    let mut measuring = false;
    let mut i = 0u64;
    loop {
        if i.is_multiple_of(CHECK_EVERY) {
            publ.commits.store(commits, Ordering::Relaxed);
            publ.aborts.store(aborts, Ordering::Relaxed);
            match ctl.phase() {
                STOP => break,
                MEASURE if !measuring => {
                    measuring = true;
                    base_commits = commits;
                    base_aborts = aborts;
                    latency.reset();
                    w.window_opened();
                }
                _ => {}
            }
        }
        let started = i.is_multiple_of(LATENCY_SAMPLE_EVERY).then(Instant::now);
        match w.txn(ctl)? {
            Some(a) => match (acks, crate::persist::take_ticket()) {
                (Some(db), Some(ticket)) if !db.is_durable(ticket) => {
                    unacked.push_back((ticket, started, a));
                }
                _ => {
                    commits += 1;
                    aborts += a;
                    if let Some(t) = started {
                        latency.saturating_record(t.elapsed().as_nanos() as u64);
                    }
                }
            },
            None => break,
        }
        if let Some(db) = acks {
            if unacked.len() >= UNACKED_MAX {
                let (oldest, _, _) = unacked[0];
                db.wait_durable(oldest)?;
            }
            while let Some(&(ticket, started, a)) = unacked.front() {
                if !db.is_durable(ticket) {
                    break;
                }
                unacked.pop_front();
                commits += 1;
                aborts += a;
                if let Some(t) = started {
                    latency.saturating_record(t.elapsed().as_nanos() as u64);
                }
            }
        }
        i += 1;
    }
    w.finished();
    if !measuring {
        // Stopped (by a failure elsewhere) before the window opened.
        return Ok(WorkerOut {
            commits: 0,
            aborts: 0,
            latency: new_histogram(),
        });
    }
    Ok(WorkerOut {
        commits: commits - base_commits,
        aborts: aborts - base_aborts,
        latency,
    })
}

fn long_reader_loop<L: LongReader>(
    r: &mut L,
    ctl: &Control,
) -> Result<(u64, Duration), BenchError> {
    let (mut txns, mut time) = (0u64, Duration::ZERO);
    loop {
        let phase = ctl.phase();
        if phase == STOP {
            return Ok((txns, time));
        }
        let t = Instant::now();
        let finished = r.read(ctl)?;
        // Count only transactions wholly inside the window.
        if finished && phase == MEASURE && ctl.phase() == MEASURE {
            txns += 1;
            time += t.elapsed();
        }
    }
}

/// Runs a thread's body, stopping the whole run if it fails or panics: the other threads
/// must not go on measuring (or wait for a deadline) after one of them is gone. A panic is
/// passed on after the stop, to surface when the scope joins.
fn guarded<T>(
    ctl: &Control,
    body: impl FnOnce() -> Result<T, BenchError>,
) -> Result<T, BenchError> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(body)) {
        Ok(Ok(out)) => Ok(out),
        Ok(Err(e)) => {
            ctl.fail();
            Err(e)
        }
        Err(panic) => {
            ctl.fail();
            std::panic::resume_unwind(panic)
        }
    }
}

/// Runs `cfg.threads` workers and `cfg.long_readers` long readers through warmup and the
/// measured window. `on_phase(true)` is called right after the window opens and
/// `on_phase(false)` right after it closes (for engine counter snapshots).
pub(crate) fn measure<W: Workload, L: LongReader>(
    cfg: &YcsbConfig,
    acks: Option<&verso_engine::Db>,
    make_worker: &(dyn Fn(usize) -> W + Sync),
    make_reader: &(dyn Fn(usize) -> L + Sync),
    on_phase: &mut dyn FnMut(bool),
) -> Result<Measured, BenchError> {
    measure_shape(
        &RunShape::from(cfg),
        acks,
        make_worker,
        make_reader,
        on_phase,
    )
}

/// [`measure`] for any benchmark: the run's shape instead of a YCSB configuration.
/// `acks`: the database, when commits are acknowledged by the disk (sync durability).
pub(crate) fn measure_shape<W: Workload, L: LongReader>(
    cfg: &RunShape,
    acks: Option<&verso_engine::Db>,
    make_worker: &(dyn Fn(usize) -> W + Sync),
    make_reader: &(dyn Fn(usize) -> L + Sync),
    on_phase: &mut dyn FnMut(bool),
) -> Result<Measured, BenchError> {
    let warmup = Duration::from_secs_f64(cfg.warmup_s);
    let duration = Duration::from_secs_f64(cfg.duration_s);
    let ctl = Control::new(if warmup.is_zero() { MEASURE } else { WARMUP });
    let published: Vec<CachePadded<Published>> =
        (0..cfg.threads).map(|_| CachePadded::default()).collect();

    thread::scope(|s| {
        let mut workers = Vec::with_capacity(cfg.threads);
        let mut readers = Vec::with_capacity(cfg.long_readers);
        let mut spawn_error = None;
        for (i, publ) in published.iter().enumerate() {
            let ctl = &ctl;
            let spawned = thread::Builder::new()
                .name(format!("worker-{i}"))
                .spawn_scoped(s, move || {
                    guarded(ctl, || {
                        let mut w = make_worker(i);
                        worker_loop(&mut w, ctl, publ, acks)
                    })
                });
            match spawned {
                Ok(h) => workers.push(h),
                Err(e) => spawn_error = Some(e),
            }
        }
        for i in 0..cfg.long_readers {
            let ctl = &ctl;
            let spawned = thread::Builder::new()
                .name(format!("long-reader-{i}"))
                .spawn_scoped(s, move || {
                    guarded(ctl, || {
                        let mut r = make_reader(i);
                        long_reader_loop(&mut r, ctl)
                    })
                });
            match spawned {
                Ok(h) => readers.push(h),
                Err(e) => spawn_error = Some(e),
            }
        }
        let (window, warmup_real) = if spawn_error.is_some() {
            ctl.fail();
            (Duration::ZERO, Duration::ZERO)
        } else {
            monitor(&ctl, &published, cfg.progress, warmup, duration, on_phase)
        };

        let mut measured = Measured {
            commits: 0,
            aborts: 0,
            latency: new_histogram(),
            window,
            warmup: warmup_real,
            long_reader_txns: 0,
            long_reader_time: Duration::ZERO,
        };
        let mut first_error =
            spawn_error.map(|e| BenchError::Other(format!("cannot start a thread: {e}")));
        for h in workers {
            match h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)) {
                Ok(out) => {
                    measured.commits += out.commits;
                    measured.aborts += out.aborts;
                    // Same bounds on both sides, so adding cannot fail.
                    measured
                        .latency
                        .add(&out.latency)
                        .expect("histograms share bounds");
                }
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        for h in readers {
            match h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)) {
                Ok((txns, time)) => {
                    measured.long_reader_txns += txns;
                    measured.long_reader_time += time;
                }
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        match first_error {
            Some(e) => Err(e),
            None => Ok(measured),
        }
    })
}

/// The main thread's part of `measure`: flip phases at the deadlines and show progress.
/// Returns the real window and warmup lengths.
fn monitor(
    ctl: &Control,
    published: &[CachePadded<Published>],
    progress: Progress,
    warmup: Duration,
    duration: Duration,
    on_phase: &mut dyn FnMut(bool),
) -> (Duration, Duration) {
    let total = warmup + duration;
    let mut display = Display::new(progress, total.as_millis() as u64, "txn");
    let start = Instant::now();
    let mut opened = None;
    if warmup.is_zero() {
        on_phase(true);
        opened = Some(start);
    }
    let sum = || {
        published.iter().fold((0u64, 0u64), |(c, a), p| {
            (
                c + p.commits.load(Ordering::Relaxed),
                a + p.aborts.load(Ordering::Relaxed),
            )
        })
    };
    let mut last = (start, 0u64, 0u64);
    loop {
        let now = Instant::now();
        if ctl.failed() {
            display.finish();
            return (Duration::ZERO, now - start);
        }
        match opened {
            None if now >= start + warmup => {
                ctl.set(MEASURE);
                on_phase(true);
                opened = Some(now);
            }
            Some(at) if now >= at + duration => {
                ctl.set(STOP);
                on_phase(false);
                display.finish();
                return (now - at, at - start);
            }
            _ => {}
        }
        if now >= last.0 + display.interval() {
            let (commits, aborts) = sum();
            let dt = (now - last.0).as_secs_f64();
            let (dc, da) = (commits - last.1, aborts - last.2);
            let abort_rate = if dc + da == 0 {
                0.0
            } else {
                da as f64 / (dc + da) as f64
            };
            display.rate(now - start, dc as f64 / dt, abort_rate, opened.is_none());
            last = (now, commits, aborts);
        }
        let deadline = match opened {
            None => start + warmup,
            Some(at) => at + duration,
        };
        let wake = deadline.min(last.0 + display.interval());
        thread::sleep(
            wake.saturating_duration_since(Instant::now())
                .max(Duration::from_micros(100)),
        );
    }
}

/// Inserts keys `0..keys` with `threads` threads, each taking a contiguous share in batches
/// of `batch` keys (`load_batch(lo, hi)` inserts `lo..hi`). Returns the time from start to
/// the last thread's finish.
pub(crate) fn load(
    keys: u64,
    threads: usize,
    batch: u64,
    progress: Progress,
    load_batch: &(dyn Fn(u64, u64) -> Result<(), BenchError> + Sync),
) -> Result<Duration, BenchError> {
    load_units(keys, threads, batch, progress, "records", load_batch)
}

/// [`load`] of `keys` units of work that are not records: progress counts them as `noun`.
pub(crate) fn load_units(
    keys: u64,
    threads: usize,
    batch: u64,
    progress: Progress,
    noun: &str,
    load_batch: &(dyn Fn(u64, u64) -> Result<(), BenchError> + Sync),
) -> Result<Duration, BenchError> {
    let loaded = AtomicU64::new(0);
    let failed = AtomicBool::new(false);
    let start = Instant::now();
    let share = |i: usize| (u128::from(keys) * i as u128 / threads as u128) as u64;
    let result = thread::scope(|s| {
        let mut handles = Vec::with_capacity(threads);
        for i in 0..threads {
            let (lo, hi) = (share(i), share(i + 1));
            let (loaded, failed) = (&loaded, &failed);
            let spawned = thread::Builder::new()
                .name(format!("load-{i}"))
                .spawn_scoped(s, move || {
                    let body = || -> Result<Instant, BenchError> {
                        let mut k = lo;
                        while k < hi && !failed.load(Ordering::Relaxed) {
                            let end = hi.min(k + batch);
                            load_batch(k, end)?;
                            loaded.fetch_add(end - k, Ordering::Relaxed);
                            k = end;
                        }
                        Ok(Instant::now())
                    };
                    // As `guarded`: one loader failing stops the others.
                    let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(body));
                    if !matches!(out, Ok(Ok(_))) {
                        failed.store(true, Ordering::Relaxed);
                    }
                    out.unwrap_or_else(|p| std::panic::resume_unwind(p))
                });
            match spawned {
                Ok(h) => handles.push(h),
                Err(e) => {
                    failed.store(true, Ordering::Relaxed);
                    return Err(BenchError::Other(format!("cannot start a thread: {e}")));
                }
            }
        }
        let mut display = Display::new(progress, keys, noun);
        let mut next = start;
        while !handles.iter().all(|h| h.is_finished()) {
            let now = Instant::now();
            if now >= next {
                display.loaded(now - start, loaded.load(Ordering::Relaxed), keys, noun);
                next = now + display.interval();
            }
            // Short naps: the load is meant to take about a second, and this thread's
            // wakeups must not steal a core from the loaders for long.
            thread::sleep(Duration::from_millis(5));
        }
        display.finish();
        let mut end = start;
        for h in handles {
            end = end.max(h.join().unwrap_or_else(|p| std::panic::resume_unwind(p))?);
        }
        Ok(end - start)
    });
    if let Ok(took) = result {
        if progress != Progress::Quiet {
            eprintln!(
                "loaded {keys} {noun} in {:.2} s ({:.2} M {noun}/s)",
                took.as_secs_f64(),
                keys as f64 / took.as_secs_f64().max(1e-9) / 1e6
            );
        }
    }
    result
}

/// The progress display on stderr: a bar on a terminal, else a line per second.
pub(crate) enum Display {
    Bar(ProgressBar),
    Lines,
    Quiet,
}

impl Display {
    /// A display for the run (`what` = "txn") or for a load counting `what` (a noun).
    pub(crate) fn new(progress: Progress, len: u64, what: &str) -> Self {
        let tty = std::io::stderr().is_terminal();
        let load = what != "txn";
        match progress {
            Progress::Quiet => Display::Quiet,
            Progress::Auto if tty => {
                let bar = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr());
                // Kept under 80 columns: a wrapped bar redraws as a scrolling mess.
                let template = if load {
                    format!("{{prefix:>6}} [{{bar:30}}] {{pos}}/{{len}} {what}")
                } else {
                    "{prefix:>6} [{bar:24}] {msg}".to_string()
                };
                if let Ok(style) = ProgressStyle::with_template(&template) {
                    bar.set_style(style.progress_chars("=> "));
                }
                bar.set_prefix(if load { "load" } else { "start" });
                Display::Bar(bar)
            }
            Progress::Auto | Progress::Lines => Display::Lines,
        }
    }

    /// How often to refresh.
    fn interval(&self) -> Duration {
        match self {
            Display::Bar(_) => Duration::from_millis(200),
            _ => Duration::from_secs(1),
        }
    }

    fn rate(&mut self, elapsed: Duration, per_sec: f64, abort_rate: f64, warmup: bool) {
        let phase = if warmup { "  (warmup)" } else { "" };
        match self {
            Display::Bar(bar) => {
                bar.set_prefix(if warmup { "warmup" } else { "run" });
                bar.set_position(elapsed.as_millis() as u64);
                bar.set_message(format!(
                    "t={:.1}s  {}  aborts {:.2}%",
                    elapsed.as_secs_f64(),
                    format_rate(per_sec),
                    abort_rate * 100.0
                ));
            }
            Display::Lines => eprintln!(
                "t={}s  {}  aborts {:.2}%{phase}",
                elapsed.as_secs_f64().round(),
                format_rate(per_sec),
                abort_rate * 100.0
            ),
            Display::Quiet => {}
        }
    }

    /// A run's state in the benchmark's own words, for runs that show more than a rate
    /// (`len` of [`Display::new`] is then the run's length in milliseconds).
    pub(crate) fn status(&mut self, elapsed: Duration, message: &str) {
        match self {
            Display::Bar(bar) => {
                bar.set_prefix("run");
                bar.set_position(elapsed.as_millis() as u64);
                bar.set_message(message.to_string());
            }
            Display::Lines => eprintln!("t={}s  {message}", elapsed.as_secs_f64().round()),
            Display::Quiet => {}
        }
    }

    fn loaded(&mut self, elapsed: Duration, loaded: u64, keys: u64, noun: &str) {
        match self {
            Display::Bar(bar) => bar.set_position(loaded),
            // The first call comes at time zero; a line then says nothing.
            Display::Lines if elapsed >= Duration::from_millis(500) => {
                eprintln!(
                    "t={}s  loaded {loaded}/{keys} {noun}",
                    elapsed.as_secs_f64().round()
                )
            }
            _ => {}
        }
    }

    pub(crate) fn finish(&mut self) {
        if let Display::Bar(bar) = self {
            bar.finish_and_clear();
        }
    }
}

/// "2.71 M txn/s" style.
pub fn format_rate(per_sec: f64) -> String {
    if per_sec >= 1e6 {
        format!("{:.2} M txn/s", per_sec / 1e6)
    } else if per_sec >= 1e3 {
        format!("{:.1} K txn/s", per_sec / 1e3)
    } else {
        format!("{per_sec:.0} txn/s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dist::KeyChooser;
    use crate::ycsb::PointOps;

    /// The harness alone: draw the ops and do nothing with them.
    struct Noop(PointOps);

    impl Workload for Noop {
        fn txn(&mut self, _: &Control) -> Result<Option<u64>, BenchError> {
            self.0.fill();
            std::hint::black_box(self.0.get(0));
            Ok(Some(0))
        }
    }

    struct NoReader;

    impl LongReader for NoReader {
        fn read(&mut self, _: &Control) -> Result<bool, BenchError> {
            Ok(true)
        }
    }

    fn noop_run(cfg: &YcsbConfig) -> Measured {
        let chooser = KeyChooser::new(cfg.dist, cfg.keys, cfg.theta).unwrap();
        measure(
            cfg,
            None,
            &|i| Noop(PointOps::new(cfg, chooser, i as u64)),
            &|_| NoReader,
            &mut |_| {},
        )
        .unwrap()
    }

    #[test]
    fn phases_window_and_counts() {
        let cfg = YcsbConfig {
            duration_s: 0.2,
            warmup_s: 0.1,
            threads: 2,
            progress: Progress::Quiet,
            ..Default::default()
        };
        let m = noop_run(&cfg);
        assert!(m.commits > 0 && m.aborts == 0);
        assert!(
            m.window >= Duration::from_millis(200) && m.window < Duration::from_millis(400),
            "{:?}",
            m.window
        );
        assert!(m.warmup >= Duration::from_millis(100));
        // One sample per LATENCY_SAMPLE_EVERY transactions, give or take the window edges.
        let expect = m.commits / LATENCY_SAMPLE_EVERY;
        assert!(
            m.latency.len().abs_diff(expect) <= 2 * cfg.threads as u64 + 2,
            "{} samples",
            m.latency.len()
        );
    }

    /// How fast the harness itself goes (no engine): `cargo test --release -p verso-bench
    /// harness_ceiling -- --ignored --nocapture`. It should be far above what the engine does.
    #[test]
    #[ignore]
    fn harness_ceiling() {
        for dist in [crate::Dist::Uniform, crate::Dist::Zipf] {
            let cfg = YcsbConfig {
                duration_s: 1.0,
                warmup_s: 0.2,
                dist,
                progress: Progress::Quiet,
                ..Default::default()
            };
            let m = noop_run(&cfg);
            println!(
                "{dist}: {:.1} M txn/s",
                m.commits as f64 / m.window.as_secs_f64() / 1e6
            );
        }
    }
}
