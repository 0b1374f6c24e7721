//! What the simulator's clients run: seeded random transactions, in two mixes.
//!
//! - [`Workload::Mixed`]: every shape the protocols must handle, over a small contended key
//!   space: read-only, one-shot read-write, and two shots whose second writes keys chosen by
//!   what the first read, or writes back the keys it read (read-modify-write).
//! - [`Workload::Tpcc`]: TPC-C's five transactions in the paper's mix and shapes (§6.1;
//!   Payment and Order-Status in two shots), one warehouse per server ([`tpcc`]).
//! - [`Workload::F1`]: the paper's Google-F1 mix (§6.1, digest §4): one shot of 1-10 keys
//!   drawn from 1 M keys by a Zipf 0.8 law, the popular keys spread at random; 0.3 % of
//!   transactions write (the paper's write fraction; which of a read-write transaction's
//!   keys it writes the paper does not say: here every other one, at least one).
//! - [`Workload::Tao`]: the paper's Facebook-TAO mix (Figure 5): read-only transactions of
//!   1-1,000 keys over the same 1 M Zipf 0.8 keys, and 0.2 % one-key writes (TAO's writes
//!   are not transactional; here each is a one-key transaction). The paper gives only the
//!   range of a read's size; here it is log-uniform (as many of 1-10 keys as of 100-1,000),
//!   so most reads are small and a few fan out to every server.

pub mod tpcc;

use crate::sim::SimOptions;
use crate::types::{Key, Op, Value};
pub(crate) use tpcc::TpccSecond;

/// Which mix (module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Workload {
    Mixed,
    F1,
    Tao,
    Tpcc,
}

impl Workload {
    /// The key sampler the mix draws from, if it has one.
    pub(crate) fn zipf(self) -> Option<Zipf> {
        matches!(self, Workload::F1 | Workload::Tao).then(|| Zipf::new(F1_KEYS, F1_ZIPF))
    }

    pub fn parse(s: &str) -> Option<Workload> {
        match s {
            "mixed" => Some(Workload::Mixed),
            "f1" => Some(Workload::F1),
            "tao" => Some(Workload::Tao),
            "tpcc" => Some(Workload::Tpcc),
            _ => None,
        }
    }
}

/// The F1 mix's parameters.
pub const F1_KEYS: u64 = 1_000_000;
pub const F1_ZIPF: f64 = 0.8;
/// Read-write transactions per 100,000.
pub const F1_WRITES_PER_100K: u64 = 300;
/// TAO's writes per 100,000 transactions, and the largest read.
pub const TAO_WRITES_PER_100K: u64 = 200;
pub const TAO_READ_KEYS_MAX: u64 = 1_000;

/// A small, fast, seeded generator (splitmix64): the run depends on the seed alone.
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    pub(crate) fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }

    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Zipf-distributed ranks 1..=n with exponent `s`, by rejection-inversion (Hörmann and
/// Derflinger 1996): constant time per sample and no table, so a run over 1 M keys costs
/// nothing to set up.
pub(crate) struct Zipf {
    n: f64,
    s: f64,
    h_x1: f64,
    h_n: f64,
    cut: f64,
}

impl Zipf {
    pub(crate) fn new(n: u64, s: f64) -> Zipf {
        assert!(n >= 1 && s > 0.0 && s != 1.0);
        let mut z = Zipf {
            n: n as f64,
            s,
            h_x1: 0.0,
            h_n: 0.0,
            cut: 0.0,
        };
        z.h_x1 = z.h_integral(1.5) - 1.0;
        z.h_n = z.h_integral(z.n + 0.5);
        z.cut = 2.0 - z.h_integral_inverse(z.h_integral(2.5) - z.h(2.0));
        z
    }

    fn h(&self, x: f64) -> f64 {
        (-self.s * x.ln()).exp()
    }

    fn h_integral(&self, x: f64) -> f64 {
        let log_x = x.ln();
        ((1.0 - self.s) * log_x).exp_m1() / (1.0 - self.s)
    }

    fn h_integral_inverse(&self, x: f64) -> f64 {
        let t = (x * (1.0 - self.s)).max(-1.0);
        (t.ln_1p() / (1.0 - self.s)).exp()
    }

    /// A rank, 1 the most popular.
    pub(crate) fn sample(&self, rng: &mut Rng) -> u64 {
        loop {
            let u = self.h_n + rng.unit() * (self.h_x1 - self.h_n);
            let x = self.h_integral_inverse(u);
            let k = (x + 0.5).floor().clamp(1.0, self.n);
            if k - x <= self.cut || u >= self.h_integral(k + 0.5) - self.h(k) {
                return k as u64;
            }
        }
    }
}

/// A transaction the simulator (or a real client, [`Generator`]) runs.
pub struct Program {
    pub(crate) first: Vec<Op>,
    pub(crate) second: Option<SecondShot>,
    /// What kind of transaction it is, for reports ("new-order", ..., or the mix's name).
    pub(crate) kind: &'static str,
}

/// The second shot of a two-shot transaction: it writes `values.len()` of `candidates`,
/// chosen by the values the first shot read (so an attempt that read differently writes
/// different keys), or, for a read-modify-write, the keys the first shot read.
pub(crate) enum SecondShot {
    Mixed(MixedSecond),
    Tpcc(TpccSecond),
}

impl SecondShot {
    pub(crate) fn ops(&self, reads: &[(Key, Value)]) -> Vec<Op> {
        match self {
            SecondShot::Mixed(m) => m.ops(reads),
            SecondShot::Tpcc(t) => t.ops(reads),
        }
    }
}

pub(crate) struct MixedSecond {
    candidates: Vec<Key>,
    values: Vec<Value>,
    /// Read-modify-write: write back every key the first shot read instead.
    rmw: bool,
    /// Read-after-write: read back these keys, which the first shot wrote.
    read_back: Vec<Key>,
}

impl MixedSecond {
    fn ops(&self, reads: &[(Key, Value)]) -> Vec<Op> {
        let back = self.read_back.iter().map(|k| Op::Read(k.clone()));
        if self.rmw {
            return reads
                .iter()
                .zip(&self.values)
                .map(|((k, _), v)| Op::Write(k.clone(), v.clone()))
                .collect();
        }
        // Which keys it writes depends on what it read (the point of a second shot).
        let seen: u64 = reads.iter().filter_map(|(_, v)| v.to_u64()).sum();
        let n = self.candidates.len();
        let writes = self.values.iter().enumerate().map(|(i, v)| {
            let k = &self.candidates[(seen as usize + i) % n];
            Op::Write(k.clone(), v.clone())
        });
        back.chain(writes).collect()
    }
}

/// A value no other write uses: a read names the write it saw.
pub(crate) fn fresh_value(next_value: &mut u64) -> Value {
    *next_value += 1;
    Value::from(*next_value)
}

impl Program {
    /// The first shot's requests.
    pub fn first(&self) -> &[Op] {
        &self.first
    }

    /// What kind of transaction it is: TPC-C's type ("new-order", "payment", "delivery",
    /// "order-status", "stock-level"), else the mix's name.
    pub fn kind(&self) -> &'static str {
        self.kind
    }

    /// Whether a second shot follows the first.
    pub fn two_shots(&self) -> bool {
        self.second.is_some()
    }

    /// The second shot's requests, given what the first read (in the first shot's
    /// order, as [`crate::ClientEvent::ShotDone`] reports it); `None` for one shot.
    pub fn second(&self, reads: &[(Key, Value)]) -> Option<Vec<Op>> {
        self.second.as_ref().map(|s| s.ops(reads))
    }
}

/// Seeded programs of one mix for a client outside the simulator (issue 19's real
/// processes): the same shapes, with values unique across generators, so one history of
/// many client processes can still be checked (a read names the write it saw).
pub struct Generator {
    opts: SimOptions,
    rng: Rng,
    next_value: u64,
    zipf: Option<Zipf>,
}

impl Generator {
    /// `stream` tells generators apart: its values start at `stream << 40`, room for
    /// 2^40 writes each.
    pub fn new(opts: &SimOptions, stream: u32) -> Generator {
        Generator {
            opts: opts.clone(),
            rng: Rng(opts.seed ^ u64::from(stream).wrapping_mul(0x9E37_79B9_7F4A_7C15)),
            next_value: u64::from(stream) << 40,
            zipf: opts.workload.zipf(),
        }
    }

    /// The next transaction of the mix.
    pub fn next_program(&mut self) -> Program {
        random_program(
            &mut self.rng,
            &self.opts,
            &mut self.next_value,
            self.zipf.as_ref(),
        )
    }
}

/// The next transaction of `opts.workload`.
pub(crate) fn random_program(
    rng: &mut Rng,
    opts: &SimOptions,
    next_value: &mut u64,
    zipf: Option<&Zipf>,
) -> Program {
    match opts.workload {
        Workload::Mixed => mixed_program(rng, opts, next_value),
        Workload::F1 => f1_program(
            rng,
            next_value,
            zipf.expect("made for F1"),
            opts.f1_writes_per_100k,
        ),
        Workload::Tao => tao_program(rng, next_value, zipf.expect("made for TAO")),
        Workload::Tpcc => tpcc::program(
            rng,
            opts.servers,
            opts.tpcc_warehouses_per_server,
            next_value,
        ),
    }
}

fn mixed_program(rng: &mut Rng, opts: &SimOptions, next_value: &mut u64) -> Program {
    let n = rng.range(1, opts.ops_max as u64) as usize;
    let kind = rng.below(100);
    let read_only = kind < opts.read_only_percent;
    let two_shots = !read_only && kind < opts.read_only_percent + 25;
    let mut numbers: Vec<u64> = (0..opts.keys).collect();
    for i in (1..numbers.len()).rev() {
        numbers.swap(i, rng.below(i as u64 + 1) as usize);
    }
    let n = n.min(numbers.len());
    // Only the keys a program can use become byte strings: at most `n`, plus the second
    // shot's candidates.
    let used = if two_shots { numbers.len() } else { n };
    let key = |n: u64| {
        if opts.text_keys {
            Key::from(format!("user:{n}"))
        } else {
            Key::from(n)
        }
    };
    let keys: Vec<Key> = numbers[..used].iter().map(|&n| key(n)).collect();
    if two_shots && keys.len() >= 2 {
        let reads = n.min(keys.len() - 1).max(1);
        let mut first: Vec<Op> = keys[..reads].iter().map(|k| Op::Read(k.clone())).collect();
        let candidates = keys[reads..].to_vec();
        let shape = rng.below(3);
        let rmw = shape == 0;
        // Read-after-write: the first shot writes its last key instead of reading it, and
        // the second reads it back.
        let mut read_back = Vec::new();
        if shape == 1 && reads >= 2 {
            let k = keys[reads - 1].clone();
            first[reads - 1] = Op::Write(k.clone(), fresh_value(next_value));
            read_back.push(k);
        }
        let writes = if rmw {
            reads
        } else {
            rng.range(1, candidates.len().min(2) as u64) as usize
        };
        let values = (0..writes).map(|_| fresh_value(next_value)).collect();
        return Program {
            first,
            second: Some(SecondShot::Mixed(MixedSecond {
                candidates,
                values,
                rmw,
                read_back,
            })),
            kind: "mixed",
        };
    }
    let write_at = rng.below(n as u64) as usize;
    let first = keys[..n]
        .iter()
        .enumerate()
        .map(|(i, k)| {
            let k = k.clone();
            if !read_only && (i == write_at || rng.below(2) == 0) {
                // A third of the writes read what they replace (server-side read-modify-write).
                if rng.below(3) == 0 {
                    Op::ReadWrite(k, fresh_value(next_value))
                } else {
                    Op::Write(k, fresh_value(next_value))
                }
            } else {
                Op::Read(k)
            }
        })
        .collect();
    Program {
        first,
        second: None,
        kind: "mixed",
    }
}

/// A popular rank spread over the key space: a multiplier coprime with 1 M permutes the
/// ranks (the paper spreads popular keys at random).
fn spread(rank: u64) -> Key {
    Key::from((rank - 1) * 999_983 % F1_KEYS)
}

fn tao_program(rng: &mut Rng, next_value: &mut u64, zipf: &Zipf) -> Program {
    let first = if rng.below(100_000) < TAO_WRITES_PER_100K {
        vec![Op::Write(spread(zipf.sample(rng)), fresh_value(next_value))]
    } else {
        let n = (TAO_READ_KEYS_MAX as f64).powf(rng.unit()) as usize;
        let mut keys: Vec<Key> = Vec::with_capacity(n);
        while keys.len() < n.max(1) {
            let k = spread(zipf.sample(rng));
            if !keys.contains(&k) {
                keys.push(k);
            }
        }
        keys.into_iter().map(Op::Read).collect()
    };
    Program {
        first,
        second: None,
        kind: "tao",
    }
}

fn f1_program(rng: &mut Rng, next_value: &mut u64, zipf: &Zipf, writes_per_100k: u64) -> Program {
    let n = rng.range(1, 10) as usize;
    let writes = rng.below(100_000) < writes_per_100k;
    let mut keys: Vec<Key> = Vec::with_capacity(n);
    while keys.len() < n {
        let k = spread(zipf.sample(rng));
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    let first = keys
        .into_iter()
        .enumerate()
        .map(|(i, k)| {
            if writes && i % 2 == 0 {
                Op::Write(k, fresh_value(next_value))
            } else {
                Op::Read(k)
            }
        })
        .collect();
    Program {
        first,
        second: None,
        kind: "f1",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sampler follows Zipf's law: rank 1 about as often as `1 / H(n, s)`, and ranks
    /// k and 2k in the ratio 2^s.
    #[test]
    fn zipf_frequencies_follow_the_law() {
        let n = 1_000u64;
        let s = 0.8;
        let z = Zipf::new(n, s);
        let mut rng = Rng(42);
        let mut counts = vec![0u64; n as usize + 1];
        let draws = 400_000;
        for _ in 0..draws {
            let k = z.sample(&mut rng);
            assert!((1..=n).contains(&k));
            counts[k as usize] += 1;
        }
        let harmonic: f64 = (1..=n).map(|k| (k as f64).powf(-s)).sum();
        let expected_first = draws as f64 / harmonic;
        let first = counts[1] as f64;
        assert!(
            (first / expected_first - 1.0).abs() < 0.05,
            "{first} vs {expected_first}"
        );
        let ratio = counts[1] as f64 / counts[2] as f64;
        assert!((ratio - 2f64.powf(s)).abs() < 0.1, "{ratio}");
    }
}
