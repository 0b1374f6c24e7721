//! TPC-C's random inputs (clauses 2.1.5, 2.1.6, 4.3.2): uniform ranges, NURand with its
//! run-time constants, customer last names from syllables, and random text.

use crate::rng::{Rng, SplitMix64};

/// NURand's A for C_LAST.
pub const A_C_LAST: u32 = 255;
/// NURand's A for C_ID.
pub const A_C_ID: u32 = 1023;
/// NURand's A for OL_I_ID.
pub const A_OL_I_ID: u32 = 8191;

/// The syllables of a customer last name (clause 4.3.2.3).
pub const SYLLABLES: [&[u8]; 10] = [
    b"BAR", b"OUGHT", b"ABLE", b"PRI", b"PRES", b"ESE", b"ANTI", b"CALLY", b"ATION", b"EING",
];

/// Longest last name: three five-letter syllables.
pub const LAST_NAME_MAX: usize = 15;

/// A uniform integer in `lo..=hi`.
#[inline]
pub fn uniform(rng: &mut Rng, lo: u32, hi: u32) -> u32 {
    debug_assert!(lo <= hi);
    lo + rng.below(u64::from(hi - lo) + 1) as u32
}

/// NURand(A, x, y) = (((random(0, A) | random(x, y)) + C) % (y - x + 1)) + x.
#[inline]
pub fn nurand(rng: &mut Rng, a: u32, c: u32, x: u32, y: u32) -> u32 {
    debug_assert!(x <= y && c <= a);
    (((uniform(rng, 0, a) | uniform(rng, x, y)) + c) % (y - x + 1)) + x
}

/// The C constants of NURand (clause 2.1.6): one set for population and one for the run,
/// chosen per run from the seed. For C_LAST the run's value differs from the load's by a
/// delta in 65..=119 other than 96 and 112 (clause 2.1.6.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Constants {
    /// C for C_LAST during population.
    pub c_last_load: u32,
    /// C for C_LAST during the run.
    pub c_last: u32,
    /// C for C_ID.
    pub c_id: u32,
    /// C for OL_I_ID.
    pub ol_i_id: u32,
}

impl Constants {
    /// Constants drawn from `seed`.
    pub fn from_seed(seed: u64) -> Self {
        let mut rng = Rng::new(SplitMix64::new(seed ^ 0x7bcc_0c0c).next_u64());
        let c_last_load = uniform(&mut rng, 0, A_C_LAST);
        let c_last = loop {
            let run = uniform(&mut rng, 0, A_C_LAST);
            if Self::valid_c_last_delta(c_last_load, run) {
                break run;
            }
        };
        let c = Constants {
            c_last_load,
            c_last,
            c_id: uniform(&mut rng, 0, A_C_ID),
            ol_i_id: uniform(&mut rng, 0, A_OL_I_ID),
        };
        assert!(Self::valid_c_last_delta(c.c_last_load, c.c_last));
        assert!(c.c_id <= A_C_ID && c.ol_i_id <= A_OL_I_ID);
        c
    }

    /// Whether a run's C for C_LAST may follow the load's (clause 2.1.6.1).
    pub fn valid_c_last_delta(load: u32, run: u32) -> bool {
        let delta = load.abs_diff(run);
        (65..=119).contains(&delta) && delta != 96 && delta != 112
    }
}

/// Writes the last name of `n` (0..=999: three digits, one syllable each) into `out` and
/// returns its length.
#[inline]
pub fn last_name(n: u32, out: &mut [u8; LAST_NAME_MAX]) -> usize {
    debug_assert!(n <= 999);
    let mut len = 0;
    for digit in [n / 100, n / 10 % 10, n % 10] {
        let s = SYLLABLES[digit as usize];
        out[len..len + s.len()].copy_from_slice(s);
        len += s.len();
    }
    len
}

const ALPHANUMERIC: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// Fills `out[..len]` with a random a-string of length in `lo..=hi` (letters and digits) and
/// returns the length. `out` must hold `hi` bytes.
#[inline]
pub fn a_string(rng: &mut Rng, lo: u32, hi: u32, out: &mut [u8]) -> usize {
    let len = uniform(rng, lo, hi) as usize;
    for b in &mut out[..len] {
        *b = ALPHANUMERIC[rng.below(ALPHANUMERIC.len() as u64) as usize];
    }
    len
}

/// Fills `out` with random digits (an n-string).
#[inline]
pub fn n_string(rng: &mut Rng, out: &mut [u8]) {
    for b in out {
        *b = b'0' + rng.below(10) as u8;
    }
}

/// A data string (I_DATA, S_DATA: a-string of 26..=50) into `out`, with "ORIGINAL" at a
/// random position in 10 % of them (clause 4.3.3.1). Returns the length.
pub fn data_string(rng: &mut Rng, out: &mut [u8; 50]) -> usize {
    let len = a_string(rng, 26, 50, out);
    if rng.below(10) == 0 {
        let at = rng.below((len - 8 + 1) as u64) as usize;
        out[at..at + 8].copy_from_slice(b"ORIGINAL");
    }
    len
}

/// A zip code: four random digits and "11111" (clause 4.3.2.7).
pub fn zip(rng: &mut Rng) -> [u8; 9] {
    let mut z = *b"000011111";
    n_string(rng, &mut z[..4]);
    z
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn last_names_follow_the_syllable_table() {
        let mut buf = [0u8; LAST_NAME_MAX];
        let n = last_name(371, &mut buf);
        assert_eq!(&buf[..n], b"PRICALLYOUGHT");
        let n = last_name(0, &mut buf);
        assert_eq!(&buf[..n], b"BARBARBAR");
        let n = last_name(999, &mut buf);
        assert_eq!(&buf[..n], b"EINGEINGEING");
    }

    #[test]
    fn constants_respect_the_delta_rule() {
        for seed in 0..200 {
            let c = Constants::from_seed(seed);
            assert!(Constants::valid_c_last_delta(c.c_last_load, c.c_last));
        }
        assert!(!Constants::valid_c_last_delta(0, 96));
        assert!(!Constants::valid_c_last_delta(200, 88));
        assert!(Constants::valid_c_last_delta(10, 75));
    }
}
