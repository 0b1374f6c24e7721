//! Keys, the load phase, the timed worker loop (get, put, scan, ycsb-a, ycsb-c) and rw1.
//!
//! Key number `k` (in `0..keys`) becomes a key in one of three formats ([`KeyFormat`]); the
//! load inserts every key number once, in the order of a seeded pseudo-random permutation
//! ([`Permutation`]: a Feistel network with cycle walking, so the order costs no memory
//! and does not pollute the RSS growth the load measures).

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;

use super::indexes::BenchIndex;
use super::{IndexBenchConfig, KeyFormat, OpMix};
use crate::dist::KeyChooser;
use crate::rng::{Rng, SplitMix64};
use crate::runner::{Control, LongReader, Workload};
use crate::BenchError;

/// The shared prefix of `long-prefix` keys: 40 bytes, five full Masstree layers.
pub const LONG_PREFIX: &[u8; 40] = b"verso/bench/index/long-shared-prefix/40:";

/// The tail of `long-suffix` keys: 40 bytes after the number, so every key has its own
/// first slice and a 40-byte suffix stored out of line (the layout of long keys that
/// differ early, as a sorted-set member or hash field of a Redis key).
pub const LONG_SUFFIX: &[u8; 40] = b":verso/bench/index/long-distinct-tail/40";

/// Longest key any format produces.
pub const KEY_BYTES_MAX: usize = LONG_PREFIX.len() + 8;

const _: () = assert!(LONG_SUFFIX.len() + 8 <= KEY_BYTES_MAX);

const _: () = assert!(LONG_PREFIX.len() == 40);
// A decimal u64 or i64 (sign included) needs at most 20 bytes.
const _: () = assert!(KEY_BYTES_MAX >= 20);

/// Keys per call of the load closure (between two progress updates).
pub const LOAD_BATCH: u64 = 10_000;

/// The calling thread's time on a CPU so far, in nanoseconds (the first field of
/// `/proc/thread-self/schedstat`); `None` without `/proc`. On a shared machine the wall
/// clock also counts the time other processes ran, this does not: operations per CPU
/// second approximate what the thread would do alone (cache sharing aside).
pub fn thread_cpu_ns() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    stat.split_whitespace().next()?.parse().ok()
}

/// CPU nanoseconds from `start` to now on this thread.
fn cpu_ns_since(start: Option<u64>) -> Option<u64> {
    Some(thread_cpu_ns()?.saturating_sub(start?))
}

/// One thread's key encoder: a buffer the current key is written into (no allocation).
pub struct KeyBuf {
    format: KeyFormat,
    buf: [u8; KEY_BYTES_MAX],
}

impl KeyBuf {
    /// An encoder for `format`.
    pub fn new(format: KeyFormat) -> Self {
        let mut buf = [0u8; KEY_BYTES_MAX];
        if format == KeyFormat::LongSuffix {
            buf[8..8 + LONG_SUFFIX.len()].copy_from_slice(LONG_SUFFIX);
        } else {
            buf[..LONG_PREFIX.len()].copy_from_slice(LONG_PREFIX);
        }
        KeyBuf { format, buf }
    }

    /// The key of key number `k`.
    #[inline]
    pub fn key(&mut self, k: u64) -> &[u8] {
        match self.format {
            KeyFormat::Int64 => {
                self.buf[..8].copy_from_slice(&k.to_be_bytes());
                &self.buf[..8]
            }
            KeyFormat::Decimal => decimal(&mut self.buf, false, k),
            KeyFormat::LongPrefix => {
                self.buf[LONG_PREFIX.len()..].copy_from_slice(&k.to_be_bytes());
                &self.buf[..]
            }
            KeyFormat::LongSuffix => {
                self.buf[..8].copy_from_slice(&k.to_be_bytes());
                &self.buf[..8 + LONG_SUFFIX.len()]
            }
        }
    }

    /// The decimal string of a signed `x` (rw1's keys; leaves the buffer's prefix clobbered,
    /// so a `KeyBuf` used for this is used for nothing else).
    #[inline]
    pub fn signed_decimal(&mut self, x: i64) -> &[u8] {
        decimal(&mut self.buf, x < 0, x.unsigned_abs())
    }
}

/// Writes `-`(if `negative`) and the digits of `magnitude` at the end of `buf[..20]`.
#[inline]
fn decimal(buf: &mut [u8; KEY_BYTES_MAX], negative: bool, mut magnitude: u64) -> &[u8] {
    let mut at = 20;
    loop {
        at -= 1;
        buf[at] = b'0' + (magnitude % 10) as u8;
        magnitude /= 10;
        if magnitude == 0 {
            break;
        }
    }
    if negative {
        at -= 1;
        buf[at] = b'-';
    }
    &buf[at..20]
}

/// A seeded pseudo-random permutation of `0..n`: a 4-round Feistel network over the
/// smallest even bit width covering `n`, walked until it lands inside `0..n` (fewer than 4
/// steps on average, since that domain is under `4n`).
#[derive(Clone, Copy, Debug)]
pub struct Permutation {
    n: u64,
    half_bits: u32,
    keys: [u64; 4],
}

impl Permutation {
    /// A permutation of `0..n` (`1 <= n <= 2^62`).
    pub fn new(n: u64, seed: u64) -> Self {
        assert!(n >= 1, "empty permutation");
        assert!(n <= 1 << 62, "permutation domain too large");
        let bits = (64 - (n - 1).leading_zeros()).max(2);
        let mut sm = SplitMix64::new(seed);
        Permutation {
            n,
            half_bits: bits.div_ceil(2),
            keys: [sm.next_u64(), sm.next_u64(), sm.next_u64(), sm.next_u64()],
        }
    }

    /// The image of `i` (`i < n`).
    #[inline]
    pub fn apply(&self, i: u64) -> u64 {
        debug_assert!(i < self.n);
        let mut x = i;
        loop {
            x = self.feistel(x);
            if x < self.n {
                return x;
            }
        }
    }

    #[inline]
    fn feistel(&self, x: u64) -> u64 {
        let mask = (1u64 << self.half_bits) - 1;
        let (mut l, mut r) = (x >> self.half_bits, x & mask);
        for key in self.keys {
            let mut f = (r ^ key).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            f ^= f >> 29;
            (l, r) = (r, l ^ (f & mask));
        }
        (l << self.half_bits) | r
    }
}

/// Inserts key numbers `perm(lo..hi)` with value = the key number.
pub fn load_range<I: BenchIndex>(
    index: &I,
    format: KeyFormat,
    perm: &Permutation,
    lo: u64,
    hi: u64,
) {
    let mut key = KeyBuf::new(format);
    for i in lo..hi {
        let k = perm.apply(i);
        index.put(key.key(k), k);
    }
}

/// Operations one timed worker did, published when it is dropped (one cache line each).
#[derive(Default)]
pub struct OpCounts {
    pub(super) puts: AtomicU64,
    pub(super) gets: AtomicU64,
    pub(super) get_misses: AtomicU64,
    pub(super) scans: AtomicU64,
    pub(super) scan_entries: AtomicU64,
    /// The worker's time on a CPU, nanoseconds; meaningful when `cpu_known`.
    pub(super) cpu_ns: AtomicU64,
    pub(super) cpu_known: AtomicBool,
}

/// One thread of a timed workload: each `txn` is one index operation. With no warmup the
/// runner counts every operation a worker does, so the per-kind counts this worker
/// publishes add up to the runner's total (checked by the caller).
pub struct TimedWorker<'a, I> {
    index: &'a I,
    mix: OpMix,
    chooser: KeyChooser,
    rng: Rng,
    key: KeyBuf,
    scan_length: usize,
    /// Values written by this thread's puts: the thread id in the top bits, a counter below.
    next_value: u64,
    puts: u64,
    gets: u64,
    get_misses: u64,
    scans: u64,
    scan_entries: u64,
    sink: u64,
    /// This thread's CPU time when the worker was made (in its thread, just before the loop).
    cpu_start: Option<u64>,
    out: &'a OpCounts,
}

impl<'a, I: BenchIndex> TimedWorker<'a, I> {
    /// Worker `thread` of `cfg`'s workload over `index`.
    pub fn new(
        index: &'a I,
        cfg: &IndexBenchConfig,
        chooser: KeyChooser,
        thread: usize,
        out: &'a OpCounts,
    ) -> Self {
        TimedWorker {
            index,
            mix: cfg.workload.mix(),
            chooser,
            rng: Rng::for_stream(cfg.seed, thread as u64),
            key: KeyBuf::new(cfg.key_format),
            scan_length: cfg.scan_length,
            next_value: (thread as u64) << 40,
            puts: 0,
            gets: 0,
            get_misses: 0,
            scans: 0,
            scan_entries: 0,
            sink: 0,
            cpu_start: thread_cpu_ns(),
            out,
        }
    }

    /// Every key number was loaded and none is ever removed, so a get that finds nothing
    /// is counted as a miss: an index whose overwrite is not atomic (the skiplist unlinks
    /// the old entry before linking the new one) lets a concurrent get miss the key.
    #[inline]
    fn get(&mut self, k: u64) {
        match self.index.get(self.key.key(k)) {
            Some(v) => self.sink ^= v,
            None => self.get_misses += 1,
        }
        self.gets += 1;
    }

    #[inline]
    fn put(&mut self, k: u64) {
        self.next_value += 1;
        self.index.put(self.key.key(k), self.next_value);
        self.puts += 1;
    }
}

impl<I: BenchIndex> Workload for TimedWorker<'_, I> {
    #[inline]
    fn txn(&mut self, _: &Control) -> Result<Option<u64>, BenchError> {
        let k = self.chooser.next(&mut self.rng);
        match self.mix {
            OpMix::Gets => self.get(k),
            OpMix::Puts => self.put(k),
            OpMix::Scans => {
                let (n, xor) = self.index.scan(self.key.key(k), self.scan_length);
                self.sink ^= xor;
                self.scans += 1;
                self.scan_entries += n as u64;
            }
            OpMix::HalfGets => {
                if self.rng.next_u64() >> 63 == 0 {
                    self.get(k);
                } else {
                    self.put(k);
                }
            }
        }
        Ok(Some(0))
    }
}

impl<I> Drop for TimedWorker<'_, I> {
    fn drop(&mut self) {
        std::hint::black_box(self.sink);
        // Relaxed: the runner's join of this thread orders these before the caller's reads.
        self.out.puts.store(self.puts, Ordering::Relaxed);
        self.out.gets.store(self.gets, Ordering::Relaxed);
        self.out
            .get_misses
            .store(self.get_misses, Ordering::Relaxed);
        self.out.scans.store(self.scans, Ordering::Relaxed);
        self.out
            .scan_entries
            .store(self.scan_entries, Ordering::Relaxed);
        if let Some(cpu) = cpu_ns_since(self.cpu_start) {
            self.out.cpu_ns.store(cpu, Ordering::Relaxed);
            self.out.cpu_known.store(true, Ordering::Relaxed);
        }
    }
}

/// The runner wants a long-reader type; timed index workloads have none.
pub struct NoLongReader;

impl LongReader for NoLongReader {
    fn read(&mut self, _: &Control) -> Result<bool, BenchError> {
        Err(BenchError::Other(
            "index benchmarks run no long readers".into(),
        ))
    }
}

/// What one rw1 thread did.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct Rw1Thread {
    /// Puts in the put phase (random keys may repeat; a repeat overwrites the same value).
    pub puts: u64,
    /// Length of the put phase, seconds.
    pub put_seconds: f64,
    /// Keys read back and checked (all of them: equal to `puts`).
    pub gets: u64,
    /// Length of the get phase, seconds.
    pub get_seconds: f64,
    /// `puts / put_seconds`.
    pub puts_per_sec: f64,
    /// `gets / get_seconds`.
    pub gets_per_sec: f64,
    /// The thread's time on a CPU during the put phase, seconds (null without `/proc`).
    pub put_cpu_seconds: Option<f64>,
    /// The thread's time on a CPU during the get phase, seconds (null without `/proc`).
    pub get_cpu_seconds: Option<f64>,
    /// Whether the put phase stopped at the per-thread put cap rather than the clock.
    pub hit_put_cap: bool,
}

/// rw1's value for key `x`: `x + 1` as a word. masstree-beta's mttest stores the decimal
/// string of `x + 1`; we store the number so that every index holds the same word-sized
/// value, as in the other workloads.
#[inline]
pub fn rw1_value(x: i32) -> u64 {
    (i64::from(x) + 1) as u64
}

/// Marks a thread's arrival at the end of the put phase exactly once, even if it fails or
/// panics first, so that the main thread never waits for it forever.
struct Arrival<'a> {
    count: &'a AtomicUsize,
    done: bool,
}

impl Arrival<'_> {
    fn arrive(&mut self) {
        if !self.done {
            self.done = true;
            self.count.fetch_add(1, Ordering::Release);
        }
    }
}

impl Drop for Arrival<'_> {
    fn drop(&mut self) {
        self.arrive();
    }
}

/// Flags the main thread and the rw1 threads share.
struct Rw1Shared {
    /// Set once every thread is started (or a spawn failed, with `stop` also set).
    go: AtomicBool,
    /// The put phase is over.
    stop: AtomicBool,
    /// Threads that finished their put phase.
    arrived: AtomicUsize,
    /// The main thread took the post-put RSS sample; get phases may start.
    gets_go: AtomicBool,
}

fn wait_for(flag: &AtomicBool) {
    while !flag.load(Ordering::Acquire) {
        thread::sleep(Duration::from_micros(50));
    }
}

/// One rw1 thread (masstree-beta's `kvtest_rw1_seed`): put random keys until told to stop,
/// then regenerate the same keys from the saved generator, shuffle them, and get each one
/// back, checking its value. Unlike mttest, the get phase has no time limit of its own: it
/// checks every key (it is bounded by the puts, which the clock and `put_cap` bound).
fn rw1_thread<I: BenchIndex>(
    index: &I,
    shared: &Rw1Shared,
    mut rng: Rng,
    put_cap: u64,
) -> Result<Rw1Thread, BenchError> {
    let mut arrival = Arrival {
        count: &shared.arrived,
        done: false,
    };
    let mut key = KeyBuf::new(KeyFormat::Decimal);
    let mut out = Rw1Thread::default();
    wait_for(&shared.go);
    let seed_state = rng.clone();
    let cpu0 = thread_cpu_ns();
    let t0 = Instant::now();
    // Relaxed: the flag orders nothing; seeing it a few puts late only lengthens the phase
    // by those puts, which the clock read below includes.
    while !shared.stop.load(Ordering::Relaxed) {
        if out.puts == put_cap {
            out.hit_put_cap = true;
            break;
        }
        let x = rng.next_u64() as u32 as i32;
        index.put(key.signed_decimal(i64::from(x)), rw1_value(x));
        out.puts += 1;
    }
    out.put_seconds = t0.elapsed().as_secs_f64();
    out.put_cpu_seconds = cpu_ns_since(cpu0).map(|ns| ns as f64 / 1e9);
    arrival.arrive();
    wait_for(&shared.gets_go);

    // Outside the timed phases: the same keys again, in a shuffled order.
    let mut rng = seed_state;
    let n = usize::try_from(out.puts)
        .map_err(|_| BenchError::Other("rw1: too many puts to read back".into()))?;
    let mut keys: Vec<i32> = (0..n).map(|_| rng.next_u64() as u32 as i32).collect();
    for i in (1..n).rev() {
        keys.swap(i, rng.below(i as u64 + 1) as usize);
    }

    let cpu1 = thread_cpu_ns();
    let t1 = Instant::now();
    for &x in &keys {
        let want = rw1_value(x);
        match index.get(key.signed_decimal(i64::from(x))) {
            Some(v) if v == want => out.gets += 1,
            got => {
                return Err(BenchError::Other(format!(
                    "rw1: key \"{x}\" read back {got:?}, expected Some({want})"
                )))
            }
        }
    }
    out.get_seconds = t1.elapsed().as_secs_f64();
    out.get_cpu_seconds = cpu_ns_since(cpu1).map(|ns| ns as f64 / 1e9);
    let rate = |n: u64, secs: f64| if secs > 0.0 { n as f64 / secs } else { 0.0 };
    out.puts_per_sec = rate(out.puts, out.put_seconds);
    out.gets_per_sec = rate(out.gets, out.get_seconds);
    Ok(out)
}

/// rw1's raw results.
pub struct Rw1Outcome {
    /// One entry per thread.
    pub threads: Vec<Rw1Thread>,
    /// Resident set size when every thread had finished putting.
    pub rss_after_puts: Option<u64>,
}

/// Runs rw1 with `cfg.threads` threads: puts for half of `cfg.duration_s`, then gets every
/// key back (which takes about as long again).
pub fn rw1<I: BenchIndex>(index: &I, cfg: &IndexBenchConfig) -> Result<Rw1Outcome, BenchError> {
    let half = Duration::from_secs_f64(cfg.duration_s / 2.0);
    let put_cap = cfg.rw1_put_cap();
    let shared = Rw1Shared {
        go: AtomicBool::new(false),
        stop: AtomicBool::new(false),
        arrived: AtomicUsize::new(0),
        gets_go: AtomicBool::new(false),
    };
    let shared = CachePadded::new(shared);
    thread::scope(|s| {
        let mut handles = Vec::with_capacity(cfg.threads);
        let mut spawn_error = None;
        for i in 0..cfg.threads {
            let shared = &*shared;
            let rng = Rng::for_stream(cfg.seed, i as u64);
            let spawned = thread::Builder::new()
                .name(format!("rw1-{i}"))
                .spawn_scoped(s, move || rw1_thread(index, shared, rng, put_cap));
            match spawned {
                Ok(h) => handles.push(h),
                Err(e) => {
                    spawn_error = Some(BenchError::Other(format!("cannot start a thread: {e}")));
                    shared.stop.store(true, Ordering::Relaxed);
                    break;
                }
            }
        }
        shared.go.store(true, Ordering::Release);
        if spawn_error.is_none() {
            if !cfg.quiet() {
                eprintln!("rw1: putting for {:.1} s", half.as_secs_f64());
            }
            let deadline = Instant::now() + half;
            // Wake up early if every thread stopped by itself (put cap or failure).
            while Instant::now() < deadline
                && shared.arrived.load(Ordering::Acquire) < handles.len()
            {
                thread::sleep(
                    deadline
                        .saturating_duration_since(Instant::now())
                        .min(Duration::from_millis(10)),
                );
            }
        }
        shared.stop.store(true, Ordering::Relaxed);
        while shared.arrived.load(Ordering::Acquire) < handles.len() {
            thread::sleep(Duration::from_micros(50));
        }
        let rss_after_puts = crate::rss::current_rss_bytes();
        if !cfg.quiet() && spawn_error.is_none() {
            eprintln!("rw1: getting every key back");
        }
        shared.gets_go.store(true, Ordering::Release);
        let mut threads = Vec::with_capacity(handles.len());
        let mut first_error = spawn_error;
        for h in handles {
            match h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)) {
                Ok(t) => threads.push(t),
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        match first_error {
            Some(e) => Err(e),
            None => Ok(Rw1Outcome {
                threads,
                rss_after_puts,
            }),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permutation_is_a_bijection() {
        for n in [1u64, 2, 3, 5, 16, 17, 1000, 4097] {
            let p = Permutation::new(n, 99);
            let mut seen = vec![false; n as usize];
            for i in 0..n {
                let j = p.apply(i);
                assert!(j < n, "{i} -> {j} outside 0..{n}");
                assert!(!seen[j as usize], "{j} hit twice");
                seen[j as usize] = true;
            }
        }
        // Not the identity (the load order is meant to be random).
        let p = Permutation::new(1000, 1);
        assert!((0..1000).filter(|&i| p.apply(i) == i).count() < 20);
    }

    #[test]
    fn key_formats_encode_as_documented() {
        let mut k = KeyBuf::new(KeyFormat::Int64);
        assert_eq!(k.key(0x0102), &[0, 0, 0, 0, 0, 0, 1, 2]);
        let mut k = KeyBuf::new(KeyFormat::Decimal);
        assert_eq!(k.key(0), b"0");
        assert_eq!(k.key(1_234_567), b"1234567");
        assert_eq!(k.key(u64::MAX), u64::MAX.to_string().as_bytes());
        let mut k = KeyBuf::new(KeyFormat::LongPrefix);
        let key = k.key(7).to_vec();
        assert_eq!(key.len(), 48);
        assert_eq!(&key[..40], LONG_PREFIX);
        assert_eq!(&key[40..], &7u64.to_be_bytes());
        // int64 and long-prefix keys sort as their numbers do.
        let a = k.key(255).to_vec();
        assert!(a < k.key(256).to_vec());
        let mut k = KeyBuf::new(KeyFormat::LongSuffix);
        let key = k.key(7).to_vec();
        assert_eq!(key.len(), 48);
        assert_eq!(&key[..8], &7u64.to_be_bytes());
        assert_eq!(&key[8..], LONG_SUFFIX);
        let a = k.key(255).to_vec();
        assert!(a < k.key(256).to_vec());
    }

    #[test]
    fn rw1_keys_are_signed_decimals() {
        let mut k = KeyBuf::new(KeyFormat::Decimal);
        for x in [
            0i64,
            -1,
            42,
            i64::from(i32::MIN),
            i64::from(i32::MAX),
            i64::MIN,
        ] {
            assert_eq!(k.signed_decimal(x), x.to_string().as_bytes());
        }
        assert_eq!(rw1_value(-1), 0);
        assert_eq!(rw1_value(i32::MAX), 1 << 31);
    }
}
