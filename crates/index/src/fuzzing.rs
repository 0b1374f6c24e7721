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

use crate::{Direction, IndexValue, Masstree};

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

/// A value the fuzzed tree stores, built from the key it goes under and a unique id.
pub trait FuzzValue: IndexValue {
    fn make(key: &[u8], id: u64) -> Self;
    fn id(self) -> u64;
    /// Gives the value up once the tree no longer holds it.
    fn release(self);
}

impl FuzzValue for u64 {
    fn make(_: &[u8], id: u64) -> u64 {
        id
    }
    fn id(self) -> u64 {
        self
    }
    fn release(self) {}
}

/// A value that holds its entry's whole key, as the engine's records do
/// ([`IndexValue::HOLDS_KEY`]): the tree keeps no copy of a long suffix and reads it from
/// here. Freed through [`crate::retire_after_readers`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeyedValue(std::ptr::NonNull<(Vec<u8>, u64)>);

// SAFETY: the pointer names an immutable leaked box.
unsafe impl Send for KeyedValue {}
// SAFETY: as above.
unsafe impl Sync for KeyedValue {}

impl KeyedValue {
    /// The key and id.
    pub fn get(&self) -> &(Vec<u8>, u64) {
        // SAFETY: freed only by `release`, after the tree gave the value up and every index
        // operation that could read it has ended.
        unsafe { self.0.as_ref() }
    }
}

impl FuzzValue for KeyedValue {
    fn make(key: &[u8], id: u64) -> KeyedValue {
        KeyedValue(std::ptr::NonNull::from(Box::leak(Box::new((
            key.to_vec(),
            id,
        )))))
    }
    fn id(self) -> u64 {
        self.get().1
    }
    fn release(self) {
        let addr = self.0.as_ptr() as usize;
        crate::retire_after_readers(move || {
            // SAFETY: made by `Box::leak` in `make`, no longer in the tree, released once.
            drop(unsafe { Box::from_raw(addr as *mut (Vec<u8>, u64)) });
        });
    }
}

// SAFETY: the bits are the box's address, non-null.
unsafe impl IndexValue for KeyedValue {
    fn into_bits(self) -> u64 {
        self.0.as_ptr() as usize as u64
    }
    unsafe fn from_bits(bits: u64) -> Self {
        // SAFETY: `bits` came from `into_bits` of a non-null pointer.
        KeyedValue(unsafe { std::ptr::NonNull::new_unchecked(bits as usize as *mut _) })
    }
    const HOLDS_KEY: bool = true;
    unsafe fn key_of(bits: u64) -> *const [u8] {
        // SAFETY: by the trait's contract the box is alive (`release` frees it only through
        // `retire_after_readers`).
        unsafe { (*(bits as usize as *const (Vec<u8>, u64))).0.as_slice() }
    }
}

/// Runs `op` on both; `value` is the id a write stores (unique per operation).
fn apply<V: FuzzValue>(t: &Masstree<V>, model: &mut BTreeMap<Vec<u8>, u64>, op: &Op, value: u64) {
    let id = |v: Option<V>| v.map(V::id);
    match op {
        Op::Insert(k) => {
            let old = t.insert(k, V::make(k, value));
            assert_eq!(id(old), model.insert(k.clone(), value));
            if let Some(old) = old {
                old.release();
            }
        }
        Op::Get(k) => assert_eq!(id(t.get(k)), model.get(k).copied()),
        Op::Remove(k) => {
            let old = t.remove(k);
            assert_eq!(id(old), model.remove(k));
            if let Some(old) = old {
                old.release();
            }
        }
        Op::GetOrInsert(k) => {
            let expect = match model.get(k) {
                Some(&v) => (v, false),
                None => {
                    model.insert(k.clone(), value);
                    (value, true)
                }
            };
            let (got, inserted) = t.get_or_insert_with(k, |_| V::make(k, value));
            assert_eq!((got.id(), inserted), expect);
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
                let c = t.range(lo, hi, *direction).map(|(k, v)| (k, v.id()));
                if *limit == 0 {
                    c.collect()
                } else {
                    c.take(*limit).collect()
                }
            } else {
                let mut got = Vec::new();
                let reached_end = t.scan(lo, hi, *direction, 0, |k, v| {
                    got.push((k.to_vec(), v.id()));
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

/// Decodes `data` into operations, applies them to a Masstree and a `BTreeMap`, and panics at
/// the first disagreement (with the operation printed). Any input is valid. Runs twice: with
/// `u64` values (the tree keeps its keys' suffixes) and with [`KeyedValue`]s (it reads long
/// suffixes from the values).
pub fn run_ops(data: &[u8]) {
    run_ops_with::<u64>(data);
    run_ops_with::<KeyedValue>(data);
}

fn run_ops_with<V: FuzzValue>(data: &[u8]) {
    let t = Masstree::<V>::new();
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
            eprintln!(
                "masstree_ops ({}): operation {i} diverged: {op:?}",
                std::any::type_name::<V>()
            );
            std::panic::resume_unwind(e);
        }
        i += 1;
    }
    let all: Vec<(Vec<u8>, u64)> = model.iter().map(|(k, v)| (k.clone(), *v)).collect();
    let mut got = Vec::with_capacity(all.len());
    let mut held = Vec::with_capacity(all.len());
    t.for_each(|k, v| {
        got.push((k.to_vec(), v.id()));
        held.push(v);
    });
    drop(t);
    held.into_iter().for_each(V::release);
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
