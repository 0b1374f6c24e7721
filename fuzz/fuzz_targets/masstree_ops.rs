//! Random operation sequences on a Masstree checked against a `BTreeMap` model
//! (`verso_index::fuzzing::run_ops` says how bytes become operations). Run from `fuzz/` with
//! `cargo +nightly fuzz run masstree_ops`; a crash leaves its input in `artifacts/`, to be
//! kept under `regressions/` (which `crates/index/tests/fuzz_corpus.rs` replays).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    verso_index::fuzzing::run_ops(data);
});
