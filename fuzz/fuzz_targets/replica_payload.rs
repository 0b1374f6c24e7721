//! Untrusted bytes into what a replica decodes from its peers
//! (`verso_replication::fuzzing::decode_everything`): protocol payloads (VSR messages and
//! state transfer chunks) and the checkpoint data a state transfer streams. None may panic,
//! allocate without bound, or decode a message that does not re-encode to itself.
//! Run from `fuzz/` with `cargo +nightly fuzz run replica_payload`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    verso_replication::fuzzing::decode_everything(data);
});
