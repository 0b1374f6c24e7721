//! What the simulator tests share.

/// Every seed of a range with the options a closure sets: the summed stats and the
/// failures (`verso_ncc::sim::run_seeds`).
pub use verso_ncc::sim::run_seeds as seeds;

/// Fails with the count and the first failure if any seed failed.
pub fn assert_passed(failed: &[(u64, String)]) {
    assert!(
        failed.is_empty(),
        "{} seeds failed, first: {:?}",
        failed.len(),
        failed.first()
    );
}
