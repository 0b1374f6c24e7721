//! Untrusted bytes into a shard group's decoders (`verso_txn_net::group`): a Lazy VSR
//! message from another replica (postcard, inside a `Frame::Replica`), and a replica's log
//! file after a crash (frames of disk writes). Neither may panic; the log decoder keeps a
//! prefix, and decoding that prefix again gives the same writes.
//! Run from `fuzz/` with `cargo +nightly fuzz run group_log`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use verso_txn_net::group::{disk, log};

fuzz_target!(|bytes: &[u8]| {
    let _ = log::decode_msg(bytes);
    let (writes, valid) = disk::decode_all(bytes);
    assert!(valid <= bytes.len());
    let (again, same) = disk::decode_all(&bytes[..valid]);
    assert_eq!(same, valid);
    assert_eq!(again, writes);
});
