//! What the randomized workload tests share.

/// SplitMix64: tiny, fast, good enough to drive a workload, and seeded so every run can be
/// replayed.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// Skewed towards small values below `n` (a rough zipf): the square of a uniform fraction.
    pub fn skewed(&mut self, n: u64) -> u64 {
        let u = self.below(1 << 16) as f64 / f64::from(1 << 16);
        ((u * u) * n as f64) as u64
    }
}

/// The soak variant of a workload test (`#[ignore]`d; `scripts/soak.sh` runs it): for each
/// protocol, `round(cc, round number, seed)` again and again for `VERSO_SOAK_SECS` seconds
/// (default 60), with a fresh seed each round.
pub fn soak(mut round: impl FnMut(verso_engine::Concurrency, u64, u64)) {
    use verso_engine::Concurrency;
    let secs = std::env::var("VERSO_SOAK_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(60);
    let per_protocol = std::time::Duration::from_secs(secs);
    for (i, cc) in [
        Concurrency::Mvto,
        Concurrency::PrecisionLocking,
        Concurrency::TwoPhaseLocking,
    ]
    .into_iter()
    .enumerate()
    {
        let started = std::time::Instant::now();
        let mut n = 0u64;
        while started.elapsed() < per_protocol {
            n += 1;
            round(cc, n, 1_000_000 * (i as u64 + 1) + n);
        }
        eprintln!("soak: {cc} passed {n} rounds");
    }
}
