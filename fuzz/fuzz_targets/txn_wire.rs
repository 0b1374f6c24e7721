//! Untrusted bytes into the distributed-transaction decoders: a frame from a client or
//! another server (`verso_txn_net::frame`, binary and RESP), and the NCC and baseline
//! messages inside it (`verso_ncc::wire`, both forms). They must never panic, and whatever
//! they decode must re-encode to exactly the input (no two byte strings mean one thing).
//! Run from `fuzz/` with `cargo +nightly fuzz run txn_wire`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use verso_ncc::baseline::BMsg;
use verso_ncc::wire::{Encoding, Wire};
use verso_ncc::Msg;
use verso_txn_net::frame::{read_frame, Frame};

fuzz_target!(|bytes: &[u8]| {
    let mut again = Vec::new();
    if let Ok(f) = Frame::decode(bytes) {
        f.encode(&mut again);
        assert_eq!(&again[4..], bytes);
    }
    for encoding in [Encoding::Binary, Encoding::Resp] {
        again.clear();
        if let Ok(m) = Msg::decode_as(encoding, bytes) {
            m.encode_as(encoding, &mut again);
            assert_eq!(again, bytes);
        }
        again.clear();
        if let Ok(m) = BMsg::decode_as(encoding, bytes) {
            m.encode_as(encoding, &mut again);
            assert_eq!(again, bytes);
        }
        // A stream of frames: reading stops at the first error, never panics.
        let mut r = bytes;
        let mut buf = Vec::new();
        for _ in 0..64 {
            match read_frame(&mut r, encoding, &mut buf) {
                Ok(Some(_)) => {}
                Ok(None) | Err(_) => break,
            }
        }
    }
});
