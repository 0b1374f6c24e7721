//! Untrusted bytes into the distributed-transaction decoders: a frame from a client or
//! another server (`verso_txn_net::frame`), and the NCC and baseline messages inside it
//! (`verso_ncc::wire`). They must never panic, and whatever they decode must re-encode to
//! exactly the input (no two byte strings mean one thing). Run from `fuzz/` with
//! `cargo +nightly fuzz run txn_wire`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use verso_ncc::baseline::BMsg;
use verso_ncc::wire::Wire;
use verso_ncc::Msg;
use verso_txn_net::frame::Frame;

fuzz_target!(|bytes: &[u8]| {
    let mut again = Vec::new();
    if let Ok(f) = Frame::decode(bytes) {
        f.encode(&mut again);
        assert_eq!(&again[4..], bytes);
    }
    again.clear();
    if let Ok(m) = Msg::decode(bytes) {
        m.encode(&mut again);
        assert_eq!(again, bytes);
    }
    again.clear();
    if let Ok(m) = BMsg::decode(bytes) {
        m.encode(&mut again);
        assert_eq!(again, bytes);
    }
});
