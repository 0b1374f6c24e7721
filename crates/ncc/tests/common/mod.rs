//! What the simulator tests share.

use verso_ncc::sim::{run, SimOptions, SimStats};

/// Runs every seed of `range` with the options `tweak` sets, returning the summed stats of
/// the runs that passed and each failure with its seed.
pub fn seeds(
    range: std::ops::Range<u64>,
    tweak: impl Fn(&mut SimOptions),
) -> (SimStats, Vec<(u64, String)>) {
    let mut total = SimStats::default();
    let mut failed = Vec::new();
    for seed in range {
        let mut o = SimOptions::new(seed);
        tweak(&mut o);
        match run(&o) {
            Ok(s) => total.add(&s),
            Err(e) => failed.push((seed, e)),
        }
    }
    (total, failed)
}

/// Fails with the count and the first failure if any seed failed.
pub fn assert_passed(failed: &[(u64, String)]) {
    assert!(
        failed.is_empty(),
        "{} seeds failed, first: {:?}",
        failed.len(),
        failed.first()
    );
}
