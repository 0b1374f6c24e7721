//! The operation-sequence fuzz target's decoder and checker, kept in the crate so the
//! fuzzer (`fuzz/fuzz_targets/masstree_ops.rs`, cargo-fuzz) and an ordinary test
//! (`tests/fuzz_corpus.rs`) run the same code. Not part of the API.
//!
//! [`run_ops`] reads a byte string as a sequence of operations on a [`Masstree<u64>`] and a
//! `BTreeMap` model, asserting after each one that they agree. Every byte string is a valid
//! input: reads past the end yield zeros and the loop ends with the input (or at
//! [`OPS_MAX`]), so the only panics are real divergences.
//!
//! Keys are built to stress layers: a prefix of 0, 8, 16 or 24 bytes from a small pool
//! (shared prefixes make keys meet in one slot, then in deeper layers) plus a tail, often from
//! a four-letter alphabet with zero bytes in it (so keys collide, and some are prefixes of
//! others), lengths 0..=[`KEY_LEN_MAX`]. Keys already used are picked again often, so gets,
//! removes and updates hit.

use std::collections::BTreeMap;
use std::ops::Bound;

use crate::{Direction, Masstree};

/// Operations decoded from one input at most (bounds the work per input).
pub const OPS_MAX: usize = 4096;
/// The longest key built.
pub const KEY_LEN_MAX: usize = 300;
/// Keys remembered for reuse.
const HISTORY_MAX: usize = 64;

/// The prefix pool: keys sharing 8-, 16- and 24-byte prefixes, some of them zero bytes.
const PREFIXES: [&[u8]; 8] = [
    b"",
    b"\0\0\0\0\0\0\0\0",
    b"prefix-A",
    b"prefix-B",
    b"prefix-Asecond-A",
    b"prefix-Asecond-B",
    b"prefix-Asecond-Athird-AA",
    b"\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0",
];

/// Tail bytes in "alphabet" mode: zero (the padding byte of a short slice), its neighbours
/// and the top byte.
const ALPHABET: [u8; 4] = [0, 1, b'a', 0xff];

const _: () = assert!(PREFIXES.len().is_power_of_two() && HISTORY_MAX <= 256);
const _: () = assert!(KEY_LEN_MAX >= 24 + 255);

/// The input as a stream of bytes, zeros once exhausted.
struct Input<'a> {
    data: &'a [u8],
    at: usize,
}

impl Input<'_> {
    fn byte(&mut self) -> u8 {
        let b = self.data.get(self.at).copied().unwrap_or(0);
        self.at += 1;
        b
    }

    fn done(&self) -> bool {
        self.at >= self.data.len()
    }
}

/// One decoded operation.
#[derive(Debug)]
enum Op {
    Insert(Vec<u8>),
    Get(Vec<u8>),
    Remove(Vec<u8>),
    GetOrInsert(Vec<u8>),
    Scan {
        lo: Bound<Vec<u8>>,
        hi: Bound<Vec<u8>>,
        direction: Direction,
        /// Entries to take before stopping the walk; 0 for no limit.
        limit: usize,
        /// Through a [`crate::Cursor`] instead of the `scan` callback.
        cursor: bool,
    },
    Len,
}

struct Decoder<'a> {
    input: Input<'a>,
    history: Vec<Vec<u8>>,
}

impl Decoder<'_> {
    fn key(&mut self) -> Vec<u8> {
        let b = self.input.byte();
        if b & 0xc0 == 0xc0 && !self.history.is_empty() {
            let i = usize::from(self.input.byte()) % self.history.len();
            return self.history[i].clone();
        }
        let prefix = PREFIXES[usize::from(b) % PREFIXES.len()];
        let sel = self.input.byte();
        let tail_len = match sel >> 6 {
            0 | 1 => usize::from(sel % 10),
            2 => usize::from(sel % 26),
            _ => usize::from(self.input.byte()),
        };
        let tail_len = tail_len.min(KEY_LEN_MAX - prefix.len());
        let raw = b & 0x20 != 0;
        let mut k = Vec::with_capacity(prefix.len() + tail_len);
        k.extend_from_slice(prefix);
        let mut bits = 0u8;
        for i in 0..tail_len {
            if raw {
                k.push(self.input.byte());
            } else {
                if i % 4 == 0 {
                    bits = self.input.byte();
                }
                k.push(ALPHABET[usize::from(bits & 3)]);
                bits >>= 2;
            }
        }
        assert!(k.len() <= KEY_LEN_MAX);
        if self.history.len() < HISTORY_MAX {
            self.history.push(k.clone());
        } else {
            let i = usize::from(b) % HISTORY_MAX;
            self.history[i] = k.clone();
        }
        k
    }

    fn bound(&mut self) -> Bound<Vec<u8>> {
        match self.input.byte() % 3 {
            0 => Bound::Unbounded,
            1 => Bound::Included(self.key()),
            _ => Bound::Excluded(self.key()),
        }
    }

    fn op(&mut self) -> Op {
        let b = self.input.byte();
        match b % 8 {
            0 | 1 => Op::Insert(self.key()),
            2 => Op::Get(self.key()),
            3 => Op::Remove(self.key()),
            4 => Op::GetOrInsert(self.key()),
            5 | 6 => {
                let lo = self.bound();
                let hi = self.bound();
                let limit = usize::from(self.input.byte() % 8);
                Op::Scan {
                    lo,
                    hi,
                    direction: if b & 8 == 0 {
                        Direction::Forward
                    } else {
                        Direction::Reverse
                    },
                    limit,
                    cursor: b & 16 != 0,
                }
            }
            _ => Op::Len,
        }
    }
}

fn as_ref(b: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    match b {
        Bound::Unbounded => Bound::Unbounded,
        Bound::Included(k) => Bound::Included(k),
        Bound::Excluded(k) => Bound::Excluded(k),
    }
}

fn in_range(k: &[u8], lo: Bound<&[u8]>, hi: Bound<&[u8]>) -> bool {
    let above = match lo {
        Bound::Unbounded => true,
        Bound::Included(l) => k >= l,
        Bound::Excluded(l) => k > l,
    };
    let below = match hi {
        Bound::Unbounded => true,
        Bound::Included(h) => k <= h,
        Bound::Excluded(h) => k < h,
    };
    above && below
}

/// The model's answer to a scan: its entries within the bounds (a filter, since
/// `BTreeMap::range` panics on inverted bounds), in `direction`.
fn model_scan(
    model: &BTreeMap<Vec<u8>, u64>,
    lo: Bound<&[u8]>,
    hi: Bound<&[u8]>,
    direction: Direction,
) -> Vec<(Vec<u8>, u64)> {
    let mut v: Vec<_> = model
        .iter()
        .filter(|(k, _)| in_range(k, lo, hi))
        .map(|(k, v)| (k.clone(), *v))
        .collect();
    if direction == Direction::Reverse {
        v.reverse();
    }
    v
}

/// Runs `op` on both; `value` is the value a write stores (unique per operation).
fn apply(t: &Masstree<u64>, model: &mut BTreeMap<Vec<u8>, u64>, op: &Op, value: u64) {
    match op {
        Op::Insert(k) => assert_eq!(t.insert(k, value), model.insert(k.clone(), value)),
        Op::Get(k) => assert_eq!(t.get(k), model.get(k).copied()),
        Op::Remove(k) => assert_eq!(t.remove(k), model.remove(k)),
        Op::GetOrInsert(k) => {
            let expect = match model.get(k) {
                Some(&v) => (v, false),
                None => {
                    model.insert(k.clone(), value);
                    (value, true)
                }
            };
            assert_eq!(t.get_or_insert_with(k, |_| value), expect);
        }
        Op::Scan {
            lo,
            hi,
            direction,
            limit,
            cursor,
        } => {
            let (lo, hi) = (as_ref(lo), as_ref(hi));
            let mut expect = model_scan(model, lo, hi, *direction);
            let complete = *limit == 0 || expect.len() < *limit;
            if *limit != 0 {
                expect.truncate(*limit);
            }
            let got: Vec<(Vec<u8>, u64)> = if *cursor {
                let c = t.range(lo, hi, *direction);
                if *limit == 0 {
                    c.collect()
                } else {
                    c.take(*limit).collect()
                }
            } else {
                let mut got = Vec::new();
                let reached_end = t.scan(lo, hi, *direction, 0, |k, v| {
                    got.push((k.to_vec(), v));
                    *limit == 0 || got.len() < *limit
                });
                assert_eq!(reached_end, complete, "scan's return value");
                got
            };
            assert_eq!(got, expect);
        }
        Op::Len => {
            assert_eq!(t.len(), model.len());
            assert_eq!(t.is_empty(), model.is_empty());
        }
    }
}

/// Decodes `data` into operations, applies them to a [`Masstree<u64>`] and a `BTreeMap`, and
/// panics at the first disagreement (with the operation printed). Any input is valid.
pub fn run_ops(data: &[u8]) {
    let t = Masstree::<u64>::new();
    let mut model = BTreeMap::new();
    let mut d = Decoder {
        input: Input { data, at: 0 },
        history: Vec::new(),
    };
    let mut i = 0;
    while !d.input.done() && i < OPS_MAX {
        let op = d.op();
        let value = i as u64 + 1;
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            apply(&t, &mut model, &op, value)
        }));
        if let Err(e) = r {
            eprintln!("masstree_ops: operation {i} diverged: {op:?}");
            std::panic::resume_unwind(e);
        }
        i += 1;
    }
    let all: Vec<(Vec<u8>, u64)> = model.iter().map(|(k, v)| (k.clone(), *v)).collect();
    let mut got = Vec::with_capacity(all.len());
    t.for_each(|k, v| got.push((k.to_vec(), v)));
    assert_eq!(got, all, "final contents");
}

#[cfg(all(test, not(any(loom, shuttle))))]
mod tests {
    use super::*;

    #[test]
    fn any_bytes_decode() {
        run_ops(&[]);
        run_ops(&[0]);
        run_ops(&[0xff; 64]);
        let ramp: Vec<u8> = (0..=255u8).cycle().take(4000).collect();
        run_ops(&ramp);
    }

    #[test]
    fn keys_reach_every_prefix_depth_and_length_class() {
        let data: Vec<u8> = (0..20_000u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        let mut d = Decoder {
            input: Input { data: &data, at: 0 },
            history: Vec::new(),
        };
        let mut lens = [false; 4];
        let mut long = false;
        while !d.input.done() {
            let k = d.key();
            for (i, seen) in lens.iter_mut().enumerate() {
                *seen |= k.starts_with(PREFIXES[6]) && k.len() > 8 * i;
            }
            long |= k.len() > 200;
        }
        assert!(lens.iter().all(|&s| s), "{lens:?}");
        assert!(long);
    }
}
