//! Strictly increasing transaction timestamps and the set of active transactions.
//!
//! vMVCC §2: a timestamp is the CPU timestamp counter with a *site* id in its low bits. To
//! take one, hold the site's lock, read the counter `t`, round up to the next `t' >= t` whose
//! low bits are the site id, and spin until the counter passes `t'`. Because the site is held
//! while the counter passes `t'`, no other thread can hand out `t'`, and any timestamp taken
//! after this one returns is larger: timestamps are unique and follow real time.
//!
//! Each site also holds a few *slots*, one per active transaction it began. The GC watermark
//! (a lower bound on the timestamp of every active and every future transaction) is the
//! minimum over slots and, per site, a fresh timestamp taken *under that site's lock*. That
//! is the fix for the bug vMVCC §5.1 describes: taking the fresh bound from an arbitrary
//! site after the scan lets a transaction that begins on an already-scanned site slip under
//! it.

use crossbeam_utils::CachePadded;

use crate::sync::{spin_step, AtomicBool, AtomicU64, Ordering};
use crate::{Error, TimestampSource};

/// Most low bits of an RDTSC timestamp that hold the site id (256 sites).
const SITE_BITS_MAX: u32 = 8;
/// Slot value meaning "no transaction here". Larger than every timestamp.
pub(crate) const IDLE: u64 = u64::MAX;

/// Upper bound on concurrently active transactions per `Db` (the slots of all sites).
pub const TRANSACTIONS_ACTIVE_MAX: usize = 1024;

const _: () = assert!(TRANSACTIONS_ACTIVE_MAX >> SITE_BITS_MAX >= 4);
const _: () = assert!(TRANSACTIONS_ACTIVE_MAX <= u16::MAX as usize);

/// Site id bits for a machine with `cores` hardware threads: enough sites that every core's
/// thread has its own (twice as many, for slack), and no more. Each timestamp waits for the
/// counter to reach the next value carrying its site id, about `2^bits / 2` ticks on average,
/// so vMVCC's 64 sites (sized for 32 cores) would make a 2-core machine wait ~32 ticks each.
fn site_bits_for(cores: usize) -> u32 {
    let sites = (2 * cores.max(1)).next_power_of_two();
    sites.trailing_zeros().clamp(1, SITE_BITS_MAX)
}

/// Which timestamp algorithm is in force (after resolving [`TimestampSource::Auto`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Algorithm {
    Rdtsc,
    Atomic,
    Mutex,
}

/// Where a transaction's timestamp is recorded while it runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SlotId {
    pub(crate) site: u16,
    pub(crate) slot: u16,
}

/// One site: a lock held while generating a timestamp or scanning, and the slots of the
/// transactions begun here.
struct Site {
    lock: AtomicBool,
    /// Invariant: each is [`IDLE`] or the timestamp of a transaction that has begun and not
    /// ended. Written only under `lock` when filled; emptied without it (ending only raises
    /// the watermark).
    slots: Box<[AtomicU64]>,
    /// Per slot, a counter that is odd while the slot's transaction walks a version chain.
    /// Pruning frees a version unlinked from the middle of a chain only after every walk
    /// that was in progress at the unlink has finished (see `gc.rs`).
    walks: Box<[AtomicU64]>,
    /// Per slot, when its transaction began, in microseconds since the generator was made:
    /// kept only where timestamps are not clock ticks (atomic and mutex counters), for
    /// [`Timestamps::oldest_active_age`]. RDTSC timestamps tell their age themselves.
    begun_us: Box<[AtomicU64]>,
}

impl Site {
    fn new(slots: usize) -> Self {
        Site {
            lock: AtomicBool::new(false),
            slots: (0..slots).map(|_| AtomicU64::new(IDLE)).collect(),
            walks: (0..slots).map(|_| AtomicU64::new(0)).collect(),
            begun_us: (0..slots).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    fn lock(&self) {
        let mut step = 0;
        while self
            .lock
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            spin_step(&mut step);
        }
    }

    fn unlock(&self) {
        debug_assert!(self.lock.load(Ordering::Relaxed));
        self.lock.store(false, Ordering::Release);
    }
}

/// What the garbage collector may assume about the timestamps of readers, now and later.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct GcSnapshot {
    /// Every active transaction, and every one that begins later, is at or above this.
    pub(crate) low: u64,
    /// Every transaction that begins later, or was not seen active, is above this.
    pub(crate) future: u64,
    /// The active timestamps seen, sorted.
    pub(crate) active: Vec<u64>,
}

impl GcSnapshot {
    /// Whether some reader can see a version written at `ts` and superseded at `newer`: a
    /// reader at `t` sees it iff `ts < t < newer`.
    pub(crate) fn visible_to_someone(&self, ts: u64, newer: u64) -> bool {
        debug_assert!(ts < newer);
        if newer > self.future + 1 {
            return true;
        }
        let first_above = self.active.partition_point(|&t| t <= ts);
        self.active.get(first_above).is_some_and(|&t| t < newer)
    }
}

/// The timestamp generator and active-transaction registry of one `Db`.
pub(crate) struct Timestamps {
    algorithm: Algorithm,
    /// Low timestamp bits holding the site id; `sites.len() == 1 << site_bits`.
    site_bits: u32,
    sites: Box<[CachePadded<Site>]>,
    /// Highest site index ever filled, plus one: the watermark scans only these.
    sites_used: CachePadded<AtomicU64>,
    counter: CachePadded<AtomicU64>,
    mutex: std::sync::Mutex<u64>,
    /// Added to every counter reading: after a recovery, timestamps continue above those
    /// recovered even if the machine's counter restarted (a reboot resets the TSC).
    /// Only raised (a replica becoming primary raises it while transactions run, which
    /// keeps every timestamp unique and increasing: readings only grow).
    tsc_offset: std::sync::atomic::AtomicU64,
    /// A replicated database's GC floor (`Db::set_gc_floor`): a bound on future readers
    /// the GC must assume, so it keeps what a rollback of the replicated log may uncover.
    /// `IDLE` when none. Not modelled under loom (no loom test sets it).
    gc_floor: std::sync::atomic::AtomicU64,
    /// A backup's read horizon (`Db::set_read_horizon`): transactions begin at no later
    /// timestamp than this, so they see only what the replicated log made final. `IDLE`
    /// when none. Read under a site's lock, both by `begin` and by the GC's `snapshot`: a
    /// reader that begins after a scan passed its site reads a horizon at least as late
    /// (coherence through the lock), which only grows while it is set.
    read_horizon: AtomicU64,
    /// When the generator was made, and the counter then: the clock the ages of active
    /// transactions are measured against (and, for RDTSC, the counter's rate).
    made: (std::time::Instant, u64),
    /// Under loom the hardware counter is modelled by an atomic that ticks on every read.
    #[cfg(loom)]
    fake_tsc: AtomicU64,
}

impl Timestamps {
    pub(crate) fn new(source: TimestampSource) -> Result<Self, Error> {
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        let site_bits = site_bits_for(cores);
        Self::with_layout(source, site_bits, TRANSACTIONS_ACTIVE_MAX >> site_bits)
    }

    /// As `new`, with `2^site_bits` sites of `slots` slots each (tests use small layouts).
    pub(crate) fn with_layout(
        source: TimestampSource,
        site_bits: u32,
        slots: usize,
    ) -> Result<Self, Error> {
        assert!((1..=SITE_BITS_MAX).contains(&site_bits));
        assert!(slots >= 1 && slots << site_bits <= TRANSACTIONS_ACTIVE_MAX);
        let sites = 1usize << site_bits;
        let algorithm = match source {
            TimestampSource::Auto if tsc_is_invariant() => Algorithm::Rdtsc,
            TimestampSource::Auto | TimestampSource::Atomic => Algorithm::Atomic,
            TimestampSource::Rdtsc if tsc_is_invariant() => Algorithm::Rdtsc,
            TimestampSource::Rdtsc => {
                return Err(Error::InvalidOptions {
                    reason: "timestamps=rdtsc needs an x86-64 CPU with an invariant TSC \
                             (constant_tsc and nonstop_tsc); use atomic"
                        .into(),
                })
            }
            TimestampSource::Mutex => Algorithm::Mutex,
        };
        let mut timestamps = Timestamps {
            algorithm,
            site_bits,
            sites: (0..sites)
                .map(|_| CachePadded::new(Site::new(slots)))
                .collect(),
            sites_used: CachePadded::new(AtomicU64::new(0)),
            counter: CachePadded::new(AtomicU64::new(0)),
            mutex: std::sync::Mutex::new(0),
            tsc_offset: std::sync::atomic::AtomicU64::new(0),
            gc_floor: std::sync::atomic::AtomicU64::new(IDLE),
            read_horizon: AtomicU64::new(IDLE),
            made: (std::time::Instant::now(), 0),
            #[cfg(loom)]
            fake_tsc: AtomicU64::new(1 << site_bits),
        };
        if algorithm == Algorithm::Rdtsc {
            timestamps.made.1 = timestamps.tsc();
        }
        Ok(timestamps)
    }

    /// Makes every later timestamp at least `floor`. Called by recovery before any
    /// transaction begins (`&mut`: nobody else holds the generator).
    pub(crate) fn raise_floor(&mut self, floor: u64) {
        match self.algorithm {
            Algorithm::Rdtsc => {
                let now = self.tsc();
                if now < floor {
                    *self.tsc_offset.get_mut() += floor - now;
                    self.made.1 += floor - now; // the rate is measured on the same scale
                }
            }
            Algorithm::Atomic => {
                self.counter.fetch_max(floor, Ordering::SeqCst);
            }
            Algorithm::Mutex => {
                let n = self.mutex.get_mut().unwrap_or_else(|e| e.into_inner());
                *n = (*n).max(floor);
            }
        }
    }

    /// As `raise_floor`, while transactions run. The counter's rate, measured from `made`,
    /// is left as it was: ages of transactions read slightly high after a raise.
    pub(crate) fn raise_floor_live(&self, floor: u64) {
        match self.algorithm {
            Algorithm::Rdtsc => {
                let now = self.tsc();
                if now < floor {
                    self.tsc_offset
                        .fetch_add(floor - now, std::sync::atomic::Ordering::SeqCst);
                }
            }
            Algorithm::Atomic => {
                self.counter.fetch_max(floor, Ordering::SeqCst);
            }
            Algorithm::Mutex => {
                let mut n = self.mutex.lock().unwrap_or_else(|e| e.into_inner());
                *n = (*n).max(floor);
            }
        }
    }

    /// Sets the GC floor (`IDLE` for none).
    pub(crate) fn set_gc_floor(&self, floor: u64) {
        self.gc_floor
            .store(floor, std::sync::atomic::Ordering::SeqCst);
    }

    /// Sets the read horizon (`IDLE` for none); at least 1.
    pub(crate) fn set_read_horizon(&self, horizon: u64) {
        assert!(horizon >= 1, "a timestamp is never 0");
        self.read_horizon.store(horizon, Ordering::Release);
    }

    /// Number of sites (a power of two).
    pub(crate) fn site_count(&self) -> usize {
        self.sites.len()
    }

    pub(crate) fn algorithm(&self) -> Algorithm {
        self.algorithm
    }

    /// Registers a new transaction, preferring `site_hint`, and returns its timestamp.
    pub(crate) fn begin(&self, site_hint: usize) -> Result<(u64, SlotId), Error> {
        let sites = self.sites.len();
        for i in 0..sites {
            let site_index = (site_hint + i) % sites;
            let site = &self.sites[site_index];
            site.lock();
            let free = site
                .slots
                .iter()
                .position(|s| s.load(Ordering::Relaxed) == IDLE);
            let Some(slot) = free else {
                site.unlock();
                continue;
            };
            // Read before writing: this word is shared by every thread, and after warm-up it
            // never changes, so the common case must not take its cache line exclusively.
            if self.sites_used.load(Ordering::Relaxed) <= site_index as u64 {
                self.sites_used
                    .fetch_max(site_index as u64 + 1, Ordering::AcqRel);
            }
            let ts = self
                .generate_locked(site_index)
                .min(self.read_horizon.load(Ordering::Acquire));
            if self.algorithm != Algorithm::Rdtsc {
                let us = self.made.0.elapsed().as_micros() as u64;
                site.begun_us[slot].store(us, Ordering::Relaxed);
            }
            // Filled under the site lock: a watermark scan of this site either comes before
            // (and its fresh bound is below `ts`) or after (and sees `ts` here).
            site.slots[slot].store(ts, Ordering::Release);
            site.unlock();
            assert!(ts != 0 && ts != IDLE);
            return Ok((
                ts,
                SlotId {
                    site: site_index as u16,
                    slot: slot as u16,
                },
            ));
        }
        Err(Error::TooManyTransactions {
            max: TRANSACTIONS_ACTIVE_MAX,
        })
    }

    /// A fresh timestamp drawn at site `site` (a commit timestamp), above every timestamp
    /// handed out before this call began.
    pub(crate) fn fresh(&self, site: usize) -> u64 {
        let s = &self.sites[site];
        s.lock();
        let ts = self.generate_locked(site);
        s.unlock();
        ts
    }

    /// Unregisters the transaction in `slot`.
    pub(crate) fn end(&self, slot: SlotId) {
        let cell = &self.sites[slot.site as usize].slots[slot.slot as usize];
        debug_assert_ne!(cell.load(Ordering::Relaxed), IDLE, "slot ended twice");
        cell.store(IDLE, Ordering::Release);
    }

    /// A lower bound on the timestamp of every active transaction and every transaction that
    /// begins after this call returns. Never larger than the oldest active timestamp.
    #[cfg(test)]
    pub(crate) fn watermark(&self) -> u64 {
        self.snapshot().low
    }

    /// The active timestamps, and bounds on all present and future ones, for the GC.
    pub(crate) fn snapshot(&self) -> GcSnapshot {
        let used = (self.sites_used.load(Ordering::Acquire) as usize).min(self.sites.len());
        let mut snap = GcSnapshot {
            low: IDLE,
            future: IDLE,
            active: Vec::new(),
        };
        for site_index in 0..used.max(1) {
            let site = &self.sites[site_index];
            site.lock();
            // vMVCC §5.1: the fresh bound must come from *this* site, under its lock, so every
            // later timestamp of this site is above it.
            snap.future = snap.future.min(self.generate_locked(site_index));
            // A reader may begin at the horizon itself, so only what is below it is past.
            let horizon = self.read_horizon.load(Ordering::Acquire);
            if horizon != IDLE {
                snap.future = snap.future.min(horizon - 1);
            }
            for s in &site.slots {
                let t = s.load(Ordering::Acquire);
                if t != IDLE {
                    snap.active.push(t);
                }
            }
            site.unlock();
        }
        // Read after the sites: a floor raised meanwhile was already safe to raise.
        let floor = self.gc_floor.load(std::sync::atomic::Ordering::SeqCst);
        snap.future = snap.future.min(floor);
        snap.active.sort_unstable();
        snap.low = snap
            .active
            .first()
            .map_or(snap.future, |&t| t.min(snap.future));
        snap
    }

    /// How long the oldest active transaction has been running (`None` when none is), as
    /// far as a racy look at the slots tells: for statistics, never for correctness.
    pub(crate) fn oldest_active_age(&self) -> Option<std::time::Duration> {
        let used = (self.sites_used.load(Ordering::Acquire) as usize).min(self.sites.len());
        let mut oldest: Option<(u64, u64)> = None; // (timestamp, begun_us)
        for site in &self.sites[..used] {
            for (slot, begun) in site.slots.iter().zip(site.begun_us.iter()) {
                let t = slot.load(Ordering::Acquire);
                if t != IDLE && oldest.is_none_or(|(o, _)| t < o) {
                    oldest = Some((t, begun.load(Ordering::Relaxed)));
                }
            }
        }
        let (ts, begun_us) = oldest?;
        let elapsed = self.made.0.elapsed();
        if self.algorithm != Algorithm::Rdtsc {
            let now_us = elapsed.as_micros() as u64;
            return Some(std::time::Duration::from_micros(
                now_us.saturating_sub(begun_us),
            ));
        }
        // The counter's rate, measured over the generator's life so far.
        let (now, ticks) = (self.tsc(), self.tsc().saturating_sub(self.made.1));
        if ticks == 0 || elapsed.is_zero() {
            return Some(std::time::Duration::ZERO);
        }
        let secs = now.saturating_sub(ts) as f64 * elapsed.as_secs_f64() / ticks as f64;
        Some(std::time::Duration::from_secs_f64(secs))
    }

    /// The walk counter of a transaction's slot.
    pub(crate) fn walk_word(&self, slot: SlotId) -> &AtomicU64 {
        &self.sites[slot.site as usize].walks[slot.slot as usize]
    }

    /// Every walk counter that is odd now (a chain walk in progress), with its value.
    /// The caller has unlinked versions and issued a `SeqCst` fence before calling.
    pub(crate) fn walks_in_progress(&self) -> Vec<(SlotId, u64)> {
        let used = (self.sites_used.load(Ordering::Acquire) as usize).min(self.sites.len());
        let mut out = Vec::new();
        for (site_index, site) in self.sites[..used].iter().enumerate() {
            for (slot, w) in site.walks.iter().enumerate() {
                let v = w.load(Ordering::SeqCst);
                if v % 2 == 1 {
                    out.push((
                        SlotId {
                            site: site_index as u16,
                            slot: slot as u16,
                        },
                        v,
                    ));
                }
            }
        }
        out
    }

    /// A fresh timestamp. Caller holds the lock of `site_index`.
    fn generate_locked(&self, site_index: usize) -> u64 {
        match self.algorithm {
            Algorithm::Rdtsc => {
                let mask = (1u64 << self.site_bits) - 1;
                // Only this first reading is fenced: it must not run before the operation
                // began (or a timestamp could lag one already handed out). Readings in the
                // spin can only lag the real counter, which only makes the spin longer.
                let t = self.tsc_fenced();
                let mut t1 = (t & !mask) | site_index as u64;
                if t1 < t {
                    t1 += 1 << self.site_bits;
                }
                // Spin until the counter passes `t1`: from then on no reading of the counter,
                // on any core, can produce a value at or below `t1` (vMVCC §2).
                let mut step = 0;
                while self.tsc() <= t1 {
                    spin_step(&mut step);
                }
                t1
            }
            Algorithm::Atomic => self.counter.fetch_add(1, Ordering::AcqRel) + 1,
            Algorithm::Mutex => {
                let mut n = self.mutex.lock().unwrap_or_else(|e| e.into_inner());
                *n += 1;
                *n
            }
        }
    }

    #[cfg(not(loom))]
    #[inline]
    fn tsc(&self) -> u64 {
        read_tsc() + self.tsc_offset.load(std::sync::atomic::Ordering::Relaxed)
    }

    #[cfg(not(loom))]
    #[inline]
    fn tsc_fenced(&self) -> u64 {
        read_tsc_fenced() + self.tsc_offset.load(std::sync::atomic::Ordering::Relaxed)
    }

    #[cfg(loom)]
    fn tsc_fenced(&self) -> u64 {
        self.tsc()
    }

    #[cfg(loom)]
    fn tsc(&self) -> u64 {
        // Ticks a whole site-width per read so a generation spins at most once: loom explores
        // every interleaving of every iteration.
        self.fake_tsc
            .fetch_add(1 << self.site_bits, Ordering::SeqCst)
    }
}

/// The counter, after an `lfence`: earlier instructions (the site lock, whatever established
/// that this operation began after another ended) complete before it is read.
#[cfg(all(not(loom), target_arch = "x86_64"))]
#[inline]
fn read_tsc_fenced() -> u64 {
    // SAFETY: `_mm_lfence` has no preconditions (SSE2 is baseline on x86-64); see `read_tsc`.
    unsafe { core::arch::x86_64::_mm_lfence() };
    read_tsc()
}

/// The counter, unfenced.
#[cfg(all(not(loom), target_arch = "x86_64"))]
#[inline]
fn read_tsc() -> u64 {
    // SAFETY: `_rdtsc` has no memory-safety preconditions; RDTSC is only selected when
    // `tsc_is_invariant` saw the CPU flags.
    unsafe { core::arch::x86_64::_rdtsc() }
}

#[cfg(all(not(loom), not(target_arch = "x86_64")))]
fn read_tsc() -> u64 {
    unreachable!("the RDTSC algorithm is never selected off x86-64")
}

#[cfg(all(not(loom), not(target_arch = "x86_64")))]
fn read_tsc_fenced() -> u64 {
    read_tsc()
}

/// Whether the TSC ticks at a constant rate and keeps ticking in deep sleep, so it can order
/// events across cores: Linux reports this as the `constant_tsc` and `nonstop_tsc` flags.
pub fn tsc_is_invariant() -> bool {
    if cfg!(loom) {
        return true;
    }
    if !cfg!(target_arch = "x86_64") {
        return false;
    }
    let Ok(cpuinfo) = std::fs::read_to_string("/proc/cpuinfo") else {
        return false;
    };
    let flags = cpuinfo
        .lines()
        .find(|l| l.starts_with("flags"))
        .unwrap_or("");
    let has = |f: &str| flags.split_whitespace().any(|x| x == f);
    has("constant_tsc") && has("nonstop_tsc")
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use loom::sync::Arc;

    fn timestamps() -> Arc<Timestamps> {
        Arc::new(Timestamps::with_layout(TimestampSource::Rdtsc, 1, 2).unwrap())
    }

    /// Timestamps are unique and follow real time, across sites.
    #[test]
    fn strictly_increasing_across_threads() {
        loom::model(|| {
            let ts = timestamps();
            let done = Arc::new(AtomicU64::new(0));
            let (ts2, done2) = (ts.clone(), done.clone());
            let t = loom::thread::spawn(move || {
                let (a, slot) = ts2.begin(1).unwrap();
                ts2.end(slot);
                done2.store(a, Ordering::SeqCst);
                a
            });
            let seen = done.load(Ordering::SeqCst);
            let (b, slot) = ts.begin(0).unwrap();
            ts.end(slot);
            let a = t.join().unwrap();
            assert_ne!(a, b);
            if seen != 0 {
                assert!(b > seen, "began after {seen} finished, got {b}");
            }
        });
    }

    /// The §5.1 property: a transaction that is active (whenever it began relative to the
    /// scan) is never below the watermark.
    #[test]
    fn watermark_never_passes_an_active_transaction() {
        loom::model(|| {
            let ts = timestamps();
            // Make two sites "used" so the scan visits both.
            let (_, s) = ts.begin(0).unwrap();
            ts.end(s);
            let (_, s) = ts.begin(1).unwrap();
            ts.end(s);
            let ts2 = ts.clone();
            let t = loom::thread::spawn(move || ts2.begin(0).unwrap().0);
            let w = ts.watermark();
            let a = t.join().unwrap();
            assert!(w <= a, "watermark {w} passed active transaction {a}");
        });
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn every_algorithm_is_unique_and_increasing_per_thread() {
        for source in [
            TimestampSource::Auto,
            TimestampSource::Atomic,
            TimestampSource::Mutex,
        ] {
            let ts = std::sync::Arc::new(Timestamps::new(source).unwrap());
            let handles: Vec<_> = (0..4)
                .map(|i| {
                    let ts = ts.clone();
                    std::thread::spawn(move || {
                        let mut out = Vec::new();
                        for _ in 0..2000 {
                            let (t, slot) = ts.begin(i).unwrap();
                            ts.end(slot);
                            out.push(t);
                        }
                        out
                    })
                })
                .collect();
            let mut all = Vec::new();
            for h in handles {
                let v = h.join().unwrap();
                assert!(
                    v.windows(2).all(|w| w[0] < w[1]),
                    "{source:?} not increasing"
                );
                all.extend(v);
            }
            let n = all.len();
            all.sort_unstable();
            all.dedup();
            assert_eq!(all.len(), n, "{source:?} produced duplicates");
        }
    }

    #[test]
    fn watermark_tracks_the_oldest_active_transaction() {
        let ts = Timestamps::new(TimestampSource::Auto).unwrap();
        let (old, old_slot) = ts.begin(3).unwrap();
        let (young, young_slot) = ts.begin(5).unwrap();
        assert!(old < young);
        assert_eq!(ts.watermark(), old);
        ts.end(old_slot);
        assert_eq!(ts.watermark(), young);
        ts.end(young_slot);
        let w = ts.watermark();
        assert!(w > young);
        let (next, slot) = ts.begin(3).unwrap();
        assert!(next > w);
        ts.end(slot);
    }

    #[test]
    fn site_bits_follow_the_core_count() {
        assert_eq!(site_bits_for(1), 1);
        assert_eq!(site_bits_for(2), 2);
        assert_eq!(site_bits_for(3), 3);
        assert_eq!(site_bits_for(32), 6, "vMVCC's 64 sites for its 32 cores");
        assert_eq!(site_bits_for(10_000), SITE_BITS_MAX);
    }

    #[test]
    fn slots_run_out_with_a_typed_error_and_come_back() {
        let ts = Timestamps::new(TimestampSource::Atomic).unwrap();
        let held: Vec<_> = (0..TRANSACTIONS_ACTIVE_MAX)
            .map(|_| ts.begin(0).unwrap().1)
            .collect();
        assert!(matches!(
            ts.begin(0),
            Err(Error::TooManyTransactions { .. })
        ));
        ts.end(held[7]);
        assert!(ts.begin(0).is_ok());
    }
}
