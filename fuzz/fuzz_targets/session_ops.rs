//! Untrusted bytes through the RESP parser into the command dispatcher (two sessions on one
//! small database): no input may panic the server or leave the database unusable. The body is
//! `verso_server::fuzzing::run`, which `crates/server/tests/dispatch_fuzz.rs` also runs on
//! proptest inputs. Run from `fuzz/` with `cargo +nightly fuzz run session_ops`.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use verso_server::fuzzing;
use verso_server::session::Shared;

/// One database for the whole run (opening one per input would dominate the time); every
/// input starts from whatever the previous ones left, which only widens what is explored.
static SHARED: OnceLock<Shared> = OnceLock::new();

fuzz_target!(|data: &[u8]| {
    fuzzing::run(SHARED.get_or_init(fuzzing::shared), data);
});
