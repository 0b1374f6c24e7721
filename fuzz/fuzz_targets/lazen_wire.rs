//! Untrusted bytes into the slot-move protocol's decoders (`verso_cluster::lazen::wire`): a
//! message from another group's primary, or a record read back from a group's log. They must
//! never panic, and whatever they decode must re-encode to exactly the input (no two byte
//! strings mean one thing). Run from `fuzz/` with `cargo +nightly fuzz run lazen_wire`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use verso_cluster::lazen::{ConfigRecord, GroupRecord, Message, Node};

fuzz_target!(|bytes: &[u8]| {
    let mut again = Vec::new();
    if let Ok(m) = Message::decode(bytes) {
        m.encode(&mut again);
        assert_eq!(again, bytes);
    }
    again.clear();
    if let Ok(r) = GroupRecord::decode(bytes) {
        r.encode(&mut again);
        assert_eq!(again, bytes);
    }
    again.clear();
    if let Ok(r) = ConfigRecord::decode(bytes) {
        r.encode(&mut again);
        assert_eq!(again, bytes);
    }
    again.clear();
    if let Ok(n) = Node::decode(bytes) {
        n.encode(&mut again);
        assert_eq!(again, bytes);
    }
});
