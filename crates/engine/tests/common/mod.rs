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

/// `VERSO_SOAK_SECS`: how long the soak variants of the workload tests run (they are
/// `#[ignore]`d; `scripts/soak.sh` runs them).
pub fn soak_duration() -> std::time::Duration {
    let secs = std::env::var("VERSO_SOAK_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(60);
    std::time::Duration::from_secs(secs)
}
