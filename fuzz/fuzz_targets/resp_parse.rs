//! Untrusted bytes into the RESP request parser (`verso_server::resp`): it must never panic,
//! never claim more bytes than it was given, and always make progress on a complete request.
//! Run from `fuzz/` with `cargo +nightly fuzz run resp_parse`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use verso_server::resp::{Limits, Parser};

fuzz_target!(|data: &[u8]| {
    let parser = Parser::new(Limits {
        bulk_len_max: 1 << 10,
        multibulk_len_max: 64,
        query_buffer_max: 1 << 12,
    });
    let mut rest = data;
    while let Ok(Some((_, used))) = parser.parse(rest) {
        assert!(used > 0 && used <= rest.len(), "used {used} of {}", rest.len());
        rest = &rest[used..];
    }
});
