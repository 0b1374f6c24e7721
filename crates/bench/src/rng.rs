//! A small, fast, seedable random number generator for the benchmark's hot path.
//!
//! xoshiro256** (Blackman & Vigna) seeded through SplitMix64. We write it ourselves rather
//! than depend on `rand`: the harness needs only `u64`s, bounded integers and `f64`s in
//! [0, 1), it must be reproducible from `--seed` across versions, and each call must cost a
//! few cycles with no shared state (every worker thread owns one).

/// SplitMix64: turns one `u64` seed into a stream of well-mixed words. Used to seed
/// [`Rng`] (xoshiro's authors recommend it, so that nearby seeds give unrelated states).
#[derive(Clone, Debug)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// A generator starting from `seed`.
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    /// The next word.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

/// xoshiro256**: 256 bits of state, period 2^256 - 1, passes BigCrush; about 1 ns a word.
#[derive(Clone, Debug)]
pub struct Rng {
    s: [u64; 4],
}

impl Rng {
    /// A generator seeded from `seed`.
    pub fn new(seed: u64) -> Self {
        let mut sm = SplitMix64::new(seed);
        let s = [sm.next_u64(), sm.next_u64(), sm.next_u64(), sm.next_u64()];
        // The all-zero state is the one fixed point; SplitMix64 cannot produce four zeros in
        // a row from any seed, but keep the guard so the invariant is local.
        if s == [0; 4] {
            return Rng { s: [1, 0, 0, 0] };
        }
        Rng { s }
    }

    /// The generator for stream `stream` (a thread index) under a run's `seed`: distinct
    /// streams give unrelated sequences, and the same (seed, stream) always the same one.
    pub fn for_stream(seed: u64, stream: u64) -> Self {
        // Mix the stream id through SplitMix64 first so that seed ^ stream collisions
        // (seed 1 stream 0 vs seed 0 stream 1) do not give equal states.
        let mixed = SplitMix64::new(stream.wrapping_mul(0xd1b5_4a32_d192_ed03)).next_u64();
        Rng::new(seed ^ mixed)
    }

    /// The next 64 random bits.
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        let result = self.s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = self.s[1] << 17;
        self.s[2] ^= self.s[0];
        self.s[3] ^= self.s[1];
        self.s[1] ^= self.s[2];
        self.s[0] ^= self.s[3];
        self.s[2] ^= t;
        self.s[3] = self.s[3].rotate_left(45);
        result
    }

    /// A number in `0..n` (`n > 0`), by Lemire's multiply-shift: one multiplication, no
    /// division. The bias is at most n / 2^64, far below anything a benchmark can see.
    #[inline]
    pub fn below(&mut self, n: u64) -> u64 {
        debug_assert!(n > 0);
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// A uniform `f64` in [0, 1) with 53 random bits.
    #[inline]
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitmix_matches_the_reference_sequence() {
        // First outputs for seed 1234567 from the reference C implementation.
        let mut sm = SplitMix64::new(1234567);
        let want = [
            6457827717110365317u64,
            3203168211198807973,
            9817491932198370423,
        ];
        for w in want {
            assert_eq!(sm.next_u64(), w);
        }
    }

    #[test]
    fn xoshiro_matches_the_reference_sequence() {
        // State [1, 2, 3, 4] gives 11520, 0, 1509978240, 1215971899390074240 in the
        // reference xoshiro256starstar.c.
        let mut r = Rng { s: [1, 2, 3, 4] };
        for w in [11520u64, 0, 1509978240, 1215971899390074240] {
            assert_eq!(r.next_u64(), w);
        }
    }

    #[test]
    fn same_seed_same_stream_different_streams_differ() {
        let a: Vec<u64> = (0..4)
            .scan(Rng::for_stream(7, 0), |r, _| Some(r.next_u64()))
            .collect();
        let b: Vec<u64> = (0..4)
            .scan(Rng::for_stream(7, 0), |r, _| Some(r.next_u64()))
            .collect();
        let c: Vec<u64> = (0..4)
            .scan(Rng::for_stream(7, 1), |r, _| Some(r.next_u64()))
            .collect();
        assert_eq!(a, b);
        assert_ne!(a, c);
    }

    #[test]
    fn below_and_f64_stay_in_range() {
        let mut r = Rng::new(42);
        for n in [1u64, 2, 3, 10, 1000, u64::MAX] {
            for _ in 0..1000 {
                assert!(r.below(n) < n);
            }
        }
        let mut sum = 0.0;
        for _ in 0..100_000 {
            let x = r.next_f64();
            assert!((0.0..1.0).contains(&x));
            sum += x;
        }
        let mean = sum / 100_000.0;
        assert!((mean - 0.5).abs() < 0.01, "mean {mean}");
    }
}
