//! Untrusted bytes into every durability decoder (`verso_log::fuzzing::decode_everything`):
//! log frames and records, checkpoint manifests and parts. None may panic, allocate without
//! bound, or decode a record that does not re-encode to the same bytes.
//! Run from `fuzz/` with `cargo +nightly fuzz run log_decode`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    verso_log::fuzzing::decode_everything(data);
});
