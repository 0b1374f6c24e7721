//! Register linearizability checker: valid concurrent histories are accepted, stale and
//! impossible reads are rejected.

use std::time::Instant;

use proptest::prelude::*;
use verso_check::{check_linearizable_registers, AnomalyKind, Key, RegisterOp, RegisterOpKind};

fn op(key: &str, start: u64, end: u64, kind: RegisterOpKind) -> RegisterOp {
    RegisterOp {
        key: key.as_bytes().to_vec(),
        start,
        end,
        kind,
    }
}

fn get(key: &str, start: u64, end: u64, observed: Option<u64>) -> RegisterOp {
    op(key, start, end, RegisterOpKind::Get { observed })
}

fn put(key: &str, start: u64, end: u64, value: u64) -> RegisterOp {
    op(key, start, end, RegisterOpKind::Put { value })
}

fn remove(key: &str, start: u64, end: u64) -> RegisterOp {
    op(key, start, end, RegisterOpKind::Remove)
}

fn assert_not_linearizable(ops: &[RegisterOp]) -> String {
    let err = check_linearizable_registers(ops).expect_err("should not be linearizable");
    assert_eq!(err.kind, AnomalyKind::NotLinearizable, "{err}");
    err.to_string()
}

#[test]
fn read_of_overwritten_value_is_rejected() {
    let ops = [
        put("k", 0, 10, 1),
        put("k", 20, 30, 2),
        get("k", 40, 50, Some(1)),
    ];
    let msg = assert_not_linearizable(&ops);
    assert!(msg.starts_with("not linearizable: key \"k\""), "{msg}");
    // Had the get overlapped the second put, it would be fine.
    let ok = [
        put("k", 0, 10, 1),
        put("k", 20, 30, 2),
        get("k", 25, 50, Some(1)),
    ];
    check_linearizable_registers(&ok).unwrap();
}

#[test]
fn read_after_remove_and_read_of_unwritten_value_are_rejected() {
    assert_not_linearizable(&[
        put("k", 0, 10, 1),
        remove("k", 20, 30),
        get("k", 40, 50, Some(1)),
    ]);
    assert_not_linearizable(&[put("k", 0, 10, 1), get("k", 20, 30, None)]);
    assert_not_linearizable(&[get("k", 0, 10, Some(7))]);
    // A value read before its put even started.
    assert_not_linearizable(&[get("k", 0, 10, Some(1)), put("k", 20, 30, 1)]);
}

#[test]
fn valid_concurrent_histories_are_accepted() {
    let ops = [
        get("k", 0, 5, None),
        put("k", 1, 10, 1),
        get("k", 2, 3, None),
        get("k", 4, 12, Some(1)),
        put("k", 11, 20, 2),
        remove("k", 12, 22),
        get("k", 13, 14, Some(1)),
        get("k", 21, 25, None),
        get("k", 23, 24, None),
        // Another key is independent.
        put("j", 0, 100, 1),
        get("j", 50, 60, None),
        get("j", 61, 62, Some(1)),
    ];
    check_linearizable_registers(&ops).unwrap();
    assert!(check_linearizable_registers(&[]).is_ok());
}

#[test]
fn non_monotonic_reads_are_rejected() {
    // Concurrent with the put, but once a reader saw 1 a later reader cannot see absent.
    let ops = [
        put("k", 0, 100, 1),
        get("k", 10, 20, Some(1)),
        get("k", 30, 40, None),
    ];
    assert_not_linearizable(&ops);
}

/// Simulates a correct register: each op takes effect at a random point inside its
/// interval. `gap` spaces starts, `max_len` bounds op length (so concurrency ~ max_len/gap).
fn simulate(keys: usize, n: usize, gap: u64, max_len: u64, seed: u64) -> Vec<RegisterOp> {
    let mut s = seed | 1;
    let mut rand = move |m: u64| {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s % m
    };
    let mut planned: Vec<(u64, RegisterOp)> = (0..n as u64)
        .map(|i| {
            let start = i * gap + rand(gap);
            let point = start + rand(max_len);
            let end = point + rand(max_len);
            let key: Key = format!("k{}", rand(keys as u64)).into_bytes();
            let kind = match rand(4) {
                0 | 1 => RegisterOpKind::Get { observed: None },
                2 => RegisterOpKind::Put { value: i + 1 },
                _ => RegisterOpKind::Remove,
            };
            (
                point,
                RegisterOp {
                    key,
                    start,
                    end,
                    kind,
                },
            )
        })
        .collect();
    planned.sort_by_key(|(point, _)| *point);
    let mut state: std::collections::HashMap<Key, Option<u64>> = Default::default();
    planned
        .into_iter()
        .map(|(_, mut op)| {
            let cur = state.entry(op.key.clone()).or_default();
            match op.kind {
                RegisterOpKind::Get { .. } => op.kind = RegisterOpKind::Get { observed: *cur },
                RegisterOpKind::Put { value } => *cur = Some(value),
                RegisterOpKind::Remove => *cur = None,
            }
            op
        })
        .collect()
}

proptest! {
    #[test]
    fn simulated_registers_are_linearizable(seed: u64, keys in 1usize..4, n in 1usize..200, len in 1u64..60) {
        let ops = simulate(keys, n, 10, len, seed);
        let res = check_linearizable_registers(&ops);
        prop_assert!(res.is_ok(), "{}", res.unwrap_err());
    }

    /// A get made to return the value of a put that a later write (which itself ended
    /// before the get began) overwrote can never be linearized.
    #[test]
    fn stale_gets_are_rejected(seed: u64, n in 2usize..200, len in 1u64..60, pick: prop::sample::Index) {
        let mut ops = simulate(1, n, 10, len, seed);
        let candidates: Vec<(usize, u64)> = ops
            .iter()
            .enumerate()
            .filter(|(_, g)| matches!(g.kind, RegisterOpKind::Get { .. }))
            .flat_map(|(gi, g)| {
                let ops = &ops;
                ops.iter().filter_map(move |p| match p.kind {
                    RegisterOpKind::Put { value } => {
                        let overwritten = ops.iter().any(|w| {
                            !std::ptr::eq(w, p)
                                && !matches!(w.kind, RegisterOpKind::Get { .. })
                                && p.end < w.start
                                && w.end < g.start
                        });
                        overwritten.then_some((gi, value))
                    }
                    _ => None,
                })
            })
            .collect();
        prop_assume!(!candidates.is_empty());
        let (gi, value) = *pick.get(&candidates);
        ops[gi].kind = RegisterOpKind::Get { observed: Some(value) };
        let res = check_linearizable_registers(&ops);
        prop_assert!(res.as_ref().is_err_and(|e| e.kind == AnomalyKind::NotLinearizable), "{:?}", res);
    }
}

#[test]
fn ten_thousand_ops_on_one_key_check_quickly() {
    // Up to ~12 overlapping ops at a time, like a test with a dozen threads.
    let ops = simulate(1, 10_000, 10, 60, 42);
    let t0 = Instant::now();
    check_linearizable_registers(&ops).unwrap();
    let elapsed = t0.elapsed();
    eprintln!("checked {} register ops in {elapsed:?}", ops.len());
    assert!(elapsed.as_secs() < 30, "took {elapsed:?}");
}
