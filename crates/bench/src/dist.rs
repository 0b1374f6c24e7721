//! Key distributions: uniform, and YCSB's zipfian (Gray et al.) scrambled by FNV-1a.
//!
//! The zipfian generator is the one from Gray et al., "Quickly Generating Billion-Record
//! Synthetic Databases" (SIGMOD'94), exactly as YCSB's `ZipfianGenerator` implements it:
//! zeta(n, theta) is computed once, and each draw costs one `powf`. YCSB's
//! `ScrambledZipfianGenerator` then hashes the drawn rank with 64-bit FNV-1a and reduces it
//! modulo the key count, so the popular keys are spread over the key space instead of
//! clustered at its start (which would make range scans and B-tree leaves unrealistically hot).
//!
//! One deliberate difference from YCSB: YCSB draws ranks from a fixed space of 10^10 items
//! (so that its precomputed zeta survives inserts growing the table) and folds them into the
//! key count with the modulo. Our table never grows during a run, so we draw ranks from
//! exactly `n` items: the hottest key then gets 1/zeta(n, theta) of the accesses, as theta
//! says, instead of the flatter 1/zeta(10^10, theta).

use std::fmt;
use std::str::FromStr;

use crate::rng::Rng;

/// Which key distribution a workload draws from (the `--dist` flag).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Dist {
    /// Every key equally likely.
    Uniform,
    /// YCSB's scrambled zipfian with parameter theta.
    Zipf,
}

impl FromStr for Dist {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "uniform" => Ok(Dist::Uniform),
            "zipf" | "zipfian" => Ok(Dist::Zipf),
            other => Err(format!("unknown distribution {other:?} (uniform|zipf)")),
        }
    }
}

impl fmt::Display for Dist {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Dist::Uniform => "uniform",
            Dist::Zipf => "zipf",
        })
    }
}

/// Checks a zipfian theta: YCSB's generator divides by (1 - theta), so theta = 1 is out,
/// and theta must be a positive finite number.
pub fn check_theta(theta: f64) -> Result<(), String> {
    if !theta.is_finite() || theta <= 0.0 || theta == 1.0 {
        return Err(format!(
            "zipf theta must be in (0, 1) or (1, inf) (theta = 1 is undefined), got {theta}"
        ));
    }
    Ok(())
}

/// zeta(n, theta) = sum over i in 1..=n of 1 / i^theta. O(n): computed once per run.
pub fn zeta(n: u64, theta: f64) -> f64 {
    // Sum from the small terms up so the large ones do not swallow them.
    (1..=n).rev().map(|i| 1.0 / (i as f64).powf(theta)).sum()
}

/// The Gray et al. zipfian generator over ranks `0..items`: rank r is drawn with probability
/// close to (1 / (r+1)^theta) / zeta(items, theta). Ranks 0 and 1 are exact; the rest come
/// from a continuous approximation, as in YCSB.
#[derive(Clone, Copy, Debug)]
pub struct Zipfian {
    items: u64,
    theta: f64,
    zetan: f64,
    alpha: f64,
    eta: f64,
    /// 1 + 0.5^theta: the cumulative weight (times zetan) of ranks 0 and 1.
    two_ranks: f64,
}

impl Zipfian {
    /// A generator over `items` ranks (`items >= 1`), computing zeta(items, theta).
    pub fn new(items: u64, theta: f64) -> Result<Self, String> {
        check_theta(theta)?;
        if items == 0 {
            return Err("zipfian needs at least one item".into());
        }
        Ok(Self::with_zeta(items, theta, zeta(items, theta)))
    }

    /// As [`Zipfian::new`] with zeta(items, theta) already known (`zetan`).
    pub fn with_zeta(items: u64, theta: f64, zetan: f64) -> Self {
        let zeta2 = zeta(2, theta);
        let n = items as f64;
        Zipfian {
            items,
            theta,
            zetan,
            alpha: 1.0 / (1.0 - theta),
            eta: (1.0 - (2.0 / n).powf(1.0 - theta)) / (1.0 - zeta2 / zetan),
            two_ranks: 1.0 + 0.5f64.powf(theta),
        }
    }

    /// Number of ranks.
    pub fn items(&self) -> u64 {
        self.items
    }

    /// The theta it was built with.
    pub fn theta(&self) -> f64 {
        self.theta
    }

    /// zeta(items, theta).
    pub fn zetan(&self) -> f64 {
        self.zetan
    }

    /// The next rank, in `0..items`.
    #[inline]
    pub fn next(&self, rng: &mut Rng) -> u64 {
        let u = rng.next_f64();
        let uz = u * self.zetan;
        if uz < 1.0 {
            return 0;
        }
        if uz < self.two_ranks {
            return 1.min(self.items - 1);
        }
        let r = (self.items as f64 * (self.eta * u - self.eta + 1.0).powf(self.alpha)) as u64;
        // The float formula can land on `items` itself at the far tail (and theta > 1 bends
        // it); YCSB would return an out-of-range key there. Clamp.
        r.min(self.items - 1)
    }
}

/// 64-bit FNV-1a over `bytes`.
pub fn fnv1a_64(bytes: &[u8]) -> u64 {
    const OFFSET_BASIS: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    bytes
        .iter()
        .fold(OFFSET_BASIS, |h, &b| (h ^ u64::from(b)).wrapping_mul(PRIME))
}

/// YCSB's `Utils.fnvhash64`: FNV-1a over the 8 little-endian bytes of `v`, then Java's
/// `Math.abs` of the result as a signed long (we take the unsigned magnitude, which is the
/// same except for `i64::MIN`, where Java would go on to produce a negative key).
#[inline]
pub fn fnv_hash64(v: u64) -> u64 {
    (fnv1a_64(&v.to_le_bytes()) as i64).unsigned_abs()
}

/// YCSB's scrambled zipfian over keys `0..n`: a zipfian rank, hashed, modulo n.
#[derive(Clone, Copy, Debug)]
pub struct ScrambledZipfian {
    zipf: Zipfian,
}

impl ScrambledZipfian {
    /// Over keys `0..n`, computing zeta(n, theta) (O(n), about 10 ms per million keys).
    pub fn new(n: u64, theta: f64) -> Result<Self, String> {
        Ok(ScrambledZipfian {
            zipf: Zipfian::new(n, theta)?,
        })
    }

    /// The underlying (unscrambled) generator.
    pub fn zipfian(&self) -> &Zipfian {
        &self.zipf
    }

    /// The next key, in `0..n`.
    #[inline]
    pub fn next(&self, rng: &mut Rng) -> u64 {
        fnv_hash64(self.zipf.next(rng)) % self.zipf.items
    }
}

/// A ready-to-draw key chooser: the hot path's per-op call.
#[derive(Clone, Copy, Debug)]
pub enum KeyChooser {
    /// Uniform over `0..n`.
    Uniform {
        /// Number of keys.
        n: u64,
    },
    /// Scrambled zipfian over `0..n`.
    Zipf(ScrambledZipfian),
}

impl KeyChooser {
    /// The chooser for `dist` over keys `0..n` (`n >= 1`); `theta` only matters for zipf.
    pub fn new(dist: Dist, n: u64, theta: f64) -> Result<Self, String> {
        if n == 0 {
            return Err("key space is empty".into());
        }
        Ok(match dist {
            Dist::Uniform => KeyChooser::Uniform { n },
            Dist::Zipf => KeyChooser::Zipf(ScrambledZipfian::new(n, theta)?),
        })
    }

    /// The next key, in `0..n`.
    #[inline]
    pub fn next(&self, rng: &mut Rng) -> u64 {
        match self {
            KeyChooser::Uniform { n } => rng.below(*n),
            KeyChooser::Zipf(z) => z.next(rng),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLES: usize = 2_000_000;

    fn histogram(n: u64, mut draw: impl FnMut() -> u64) -> Vec<u64> {
        let mut counts = vec![0u64; n as usize];
        for _ in 0..SAMPLES {
            let k = draw();
            assert!(k < n, "draw {k} out of 0..{n}");
            counts[k as usize] += 1;
        }
        counts
    }

    fn freq(c: u64) -> f64 {
        c as f64 / SAMPLES as f64
    }

    #[test]
    fn theta_is_validated() {
        for bad in [0.0, -0.5, 1.0, f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            assert!(check_theta(bad).is_err(), "{bad} accepted");
            assert!(Zipfian::new(10, bad).is_err());
        }
        for good in [0.01, 0.5, 0.99, 1.01, 2.0] {
            assert!(check_theta(good).is_ok(), "{good} rejected");
        }
        assert!(Zipfian::new(0, 0.99).is_err());
        assert!(KeyChooser::new(Dist::Uniform, 0, 0.99).is_err());
    }

    #[test]
    fn zeta_matches_hand_sums() {
        assert!((zeta(1, 0.99) - 1.0).abs() < 1e-12);
        assert!((zeta(2, 1.5) - (1.0 + 1.0 / 2f64.powf(1.5))).abs() < 1e-12);
        // zeta(n, 2) tends to pi^2/6, with a tail of about 1/n.
        assert!((zeta(1_000_000, 2.0) - std::f64::consts::PI.powi(2) / 6.0).abs() < 2e-6);
    }

    #[test]
    fn uniform_is_in_range_and_flat() {
        let n = 1000;
        let chooser = KeyChooser::new(Dist::Uniform, n, 0.99).unwrap();
        let mut rng = Rng::new(1);
        let counts = histogram(n, || chooser.next(&mut rng));
        // Ten buckets of 100 keys: each should get 10% of draws; the binomial standard
        // deviation is about 0.02%, so 0.5% is a wide but meaningful margin.
        for bucket in counts.chunks(100) {
            let f = freq(bucket.iter().sum());
            assert!((f - 0.1).abs() < 0.005, "bucket frequency {f}");
        }
        assert!(counts.iter().all(|&c| c > 0), "some key never drawn");
    }

    /// Expected probability of each rank under an exact zipf law.
    fn zipf_law(n: u64, theta: f64) -> Vec<f64> {
        let z = zeta(n, theta);
        (1..=n).map(|r| 1.0 / (r as f64).powf(theta) / z).collect()
    }

    fn check_zipf_follows_law(n: u64, theta: f64) {
        let zipf = Zipfian::new(n, theta).unwrap();
        let mut rng = Rng::new(7);
        let counts = histogram(n, || zipf.next(&mut rng));
        let law = zipf_law(n, theta);
        // Ranks 0 and 1 are exact in Gray's generator.
        for r in 0..2 {
            let (got, want) = (freq(counts[r]), law[r]);
            assert!(
                (got - want).abs() / want < 0.03,
                "theta {theta} rank {r}: got {got}, want {want}"
            );
        }
        // The rest is a continuous approximation of the law: compare doubling rank bands
        // ([2,4), [4,8), ...), each within 15% of the law's mass.
        let mut lo = 2;
        while lo < n as usize {
            let hi = (lo * 2).min(n as usize);
            let got: f64 = counts[lo..hi].iter().map(|&c| freq(c)).sum();
            let want: f64 = law[lo..hi].iter().sum();
            assert!(
                (got - want).abs() / want < 0.15,
                "theta {theta} ranks {lo}..{hi}: got {got}, want {want}"
            );
            lo = hi;
        }
        // And popularity falls with rank.
        assert!(counts[0] > counts[1] && counts[1] > counts[4] && counts[4] > counts[40]);
    }

    #[test]
    fn zipf_frequencies_follow_one_over_rank_to_the_theta() {
        check_zipf_follows_law(100, 0.99);
        check_zipf_follows_law(100, 0.5);
        check_zipf_follows_law(100, 1.5);
    }

    #[test]
    fn fnv1a_matches_published_vectors() {
        assert_eq!(fnv1a_64(b""), 0xcbf29ce484222325);
        assert_eq!(fnv1a_64(b"a"), 0xaf63dc4c8601ec8c);
        assert_eq!(fnv1a_64(b"foobar"), 0x85944171f73967e8);
        assert_eq!(
            fnv_hash64(0x6a),
            (fnv1a_64(&[0x6a, 0, 0, 0, 0, 0, 0, 0]) as i64).unsigned_abs()
        );
    }

    #[test]
    fn scrambled_zipf_covers_the_whole_range_and_keeps_the_skew() {
        let n = 1000;
        let chooser = KeyChooser::new(Dist::Zipf, n, 0.99).unwrap();
        let mut rng = Rng::new(3);
        let counts = histogram(n, || chooser.next(&mut rng));
        // Spread: every tenth of the key space gets a share, far from the unscrambled
        // generator, which would put about 40% of draws in the first tenth.
        for bucket in counts.chunks(100) {
            let f = freq(bucket.iter().sum());
            assert!((0.02..0.30).contains(&f), "tenth of the key space got {f}");
        }
        // The hottest key is where rank 0 hashes to, and keeps rank 0's probability (plus
        // whatever other ranks collide into the same key).
        let hottest = (0..n as usize).max_by_key(|&k| counts[k]).unwrap() as u64;
        assert_eq!(hottest, fnv_hash64(0) % n);
        let p0 = 1.0 / zeta(n, 0.99);
        assert!(
            freq(counts[hottest as usize]) >= p0 * 0.97,
            "hottest key lost its skew"
        );
        // Hashing modulo n is not a permutation, so some keys are never drawn, but most are.
        let touched = counts.iter().filter(|&&c| c > 0).count();
        assert!(touched > n as usize / 2, "only {touched} keys drawn");
    }

    #[test]
    fn zipf_is_deterministic_per_seed() {
        let chooser = KeyChooser::new(Dist::Zipf, 1 << 20, 0.99).unwrap();
        let draw = |seed| {
            let mut rng = Rng::new(seed);
            (0..100).map(|_| chooser.next(&mut rng)).collect::<Vec<_>>()
        };
        assert_eq!(draw(5), draw(5));
        assert_ne!(draw(5), draw(6));
    }

    #[test]
    fn single_key_spaces_work() {
        let mut rng = Rng::new(9);
        for dist in [Dist::Uniform, Dist::Zipf] {
            let c = KeyChooser::new(dist, 1, 0.99).unwrap();
            assert!((0..1000).all(|_| c.next(&mut rng) == 0));
        }
        let z = Zipfian::new(2, 0.99).unwrap();
        assert!((0..1000).all(|_| z.next(&mut rng) < 2));
    }
}
