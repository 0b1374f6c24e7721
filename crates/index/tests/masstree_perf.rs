//! Single-threaded get throughput on 1 M big-endian `u64` keys loaded in random order,
//! Masstree and `LockedBTree` in the same run. A measurement, never an assertion:
//! `cargo test -p verso-index --release --test masstree_perf -- --ignored --nocapture`.

use std::time::Instant;

use verso_index::{LockedBTree, Masstree};

fn shuffled(n: u64, mut seed: u64) -> Vec<u64> {
    let mut v: Vec<u64> = (0..n).collect();
    for i in (1..v.len()).rev() {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        v.swap(i, (seed % (i as u64 + 1)) as usize);
    }
    v
}

fn rate(ops: usize, f: impl FnOnce() -> u64) -> (f64, u64) {
    let t = Instant::now();
    let check = f();
    (ops as f64 / t.elapsed().as_secs_f64() / 1e6, check)
}

#[test]
#[ignore = "a measurement; run in release with --ignored --nocapture"]
fn gets_on_1m_int_keys() {
    const N: u64 = 1_000_000;
    let load = shuffled(N, 0x1234_5678_9abc_def1);
    let probe = shuffled(N, 0x0fed_cba9_8765_4321);
    let mt = Masstree::<u64>::new();
    let (put_rate, _) = rate(N as usize, || {
        for &k in &load {
            mt.insert(&k.to_be_bytes(), k);
        }
        0
    });
    let bt = LockedBTree::<u64>::new();
    for &k in &load {
        bt.get_or_insert_with(&k.to_be_bytes(), |_| k);
    }
    for round in 0..3 {
        let (m, cm) = rate(N as usize, || {
            probe
                .iter()
                .map(|&k| mt.get(&k.to_be_bytes()).unwrap())
                .sum()
        });
        let (b, cb) = rate(N as usize, || {
            probe
                .iter()
                .map(|&k| bt.get(&k.to_be_bytes()).unwrap())
                .sum()
        });
        assert_eq!(cm, cb);
        println!(
            "round {round}: Masstree {m:.2} M gets/s, LockedBTree {b:.2} M gets/s (ratio {:.2})",
            m / b
        );
    }
    println!("Masstree load (random order): {put_rate:.2} M puts/s");
}
