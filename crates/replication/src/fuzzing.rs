//! Untrusted bytes into the decoders of what a peer sends, shared by the fuzz target
//! (`fuzz/fuzz_targets/replica_payload.rs`) and the tests below: a replica payload
//! (`state_transfer::Payload`: a VSR message or a chunk of state) and the checkpoint data a
//! state transfer streams (`checkpoint::load_from`). Neither may panic or allocate more than
//! the input holds; a message that decodes re-encodes to one that decodes equal; and the
//! database a checkpoint was loaded into keeps working.

use verso_engine::{Db, Options, ReplicatedWrite};

use crate::checkpoint;
use crate::state_transfer::{encode_message, Incoming, MessagePart, Payload};

/// Runs every peer-facing decoder on `bytes`.
pub fn decode_everything(bytes: &[u8]) {
    decode_payload(bytes);
    // The same bytes as the parts of one message, cut where the input says.
    let dir = std::env::temp_dir();
    let mut incoming = Incoming::new(&dir);
    let cut = bytes.first().map_or(1, |b| usize::from(*b).max(1));
    let n = bytes.len().div_ceil(cut);
    for (seq, piece) in bytes.chunks(cut).enumerate() {
        let part = MessagePart {
            id: 7,
            len: bytes.len() as u64,
            seq: seq as u32,
            bytes: piece.to_vec(),
            last: seq + 1 == n,
        };
        if let Some(whole) = incoming.on_part(1, part) {
            assert_eq!(whole, bytes, "parts put back together are the bytes cut");
            decode_payload(&whole);
        }
    }
    load_checkpoint(bytes);
}

/// A payload decodes without panicking, and a message in it re-encodes to itself.
fn decode_payload(bytes: &[u8]) {
    if let Ok(Payload::Vsr(m)) = postcard::from_bytes::<Payload>(bytes) {
        let again = encode_message(&m);
        match postcard::from_bytes::<Payload>(&again) {
            Ok(Payload::Vsr(back)) => assert_eq!(back, m, "a message re-encodes to itself"),
            other => panic!("a re-encoded message decodes as {other:?}"),
        }
    }
}

/// Loads `bytes` as checkpoint data into a fresh database, which keeps working.
fn load_checkpoint(bytes: &[u8]) {
    let db = Db::open(Options::default()).expect("a memory-only database opens");
    let _ = checkpoint::load_from(&mut &bytes[..], &db, "fuzz input");
    // Whatever was loaded, the database still takes a write above it and reads it back.
    let w = ReplicatedWrite {
        table: "fuzz-probe",
        key: b"k",
        value: Some(b"v"),
    };
    db.apply_replicated(u64::MAX - 2, std::iter::once(w))
        .expect("a write to a fresh table applies");
    let mut seen = 0;
    db.scan_versions_at(u64::MAX - 2, |t, k, _, v| -> Result<(), ()> {
        if t == "fuzz-probe" {
            assert_eq!((k, v), (&b"k"[..], &b"v"[..]));
            seen += 1;
        }
        Ok(())
    })
    .expect("the scan's callback never fails");
    assert_eq!(seen, 1);
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A valid checkpoint's bytes, for mutation.
    fn valid_checkpoint() -> Vec<u8> {
        let db = Db::open(Options::default()).unwrap();
        for i in 0..40u64 {
            let w = ReplicatedWrite {
                table: if i % 2 == 0 { "a" } else { "b" },
                key: &i.to_be_bytes(),
                value: Some(&[i as u8; 20]),
            };
            db.apply_replicated(i + 1, std::iter::once(w)).unwrap();
        }
        let mut out = Vec::new();
        checkpoint::write_to(&mut out, &db, u64::MAX - 1).unwrap();
        out
    }

    #[test]
    fn a_valid_checkpoint_loads_whole() {
        let bytes = valid_checkpoint();
        let db = Db::open(Options::default()).unwrap();
        let stats = checkpoint::load_from(&mut &bytes[..], &db, "t").unwrap();
        assert_eq!(stats.entries, 40);
        decode_everything(&bytes);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]
        #[test]
        fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
            decode_everything(&bytes);
        }

        #[test]
        fn damaged_checkpoints_never_panic(
            at in any::<prop::sample::Index>(),
            flip in 1u8..=255,
            cut in any::<prop::sample::Index>(),
        ) {
            let mut bytes = valid_checkpoint();
            let i = at.index(bytes.len());
            bytes[i] ^= flip;
            decode_everything(&bytes);
            bytes.truncate(cut.index(bytes.len()));
            decode_everything(&bytes);
        }
    }
}
