//! The `log_decode` fuzz target's body on inputs CI can afford: proptest byte strings, valid
//! logs with random damage, and any stored inputs under `fuzz/regressions/log_decode/` and a
//! local `fuzz/corpus/log_decode/`.

use proptest::prelude::*;
use verso_log::encode::{append_header, append_mark, append_txn, LogHeader};
use verso_log::fuzzing::decode_everything;

fn stored(dir: &str) -> usize {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(dir);
    let Ok(entries) = std::fs::read_dir(root) else {
        return 0;
    };
    let mut n = 0;
    for e in entries.flatten() {
        if e.path().is_file() {
            decode_everything(&std::fs::read(e.path()).unwrap());
            n += 1;
        }
    }
    n
}

#[test]
fn stored_inputs() {
    let n = stored("fuzz/regressions/log_decode") + stored("fuzz/corpus/log_decode");
    eprintln!("{n} stored inputs");
}

/// (table, key, value or `None` for a delete).
type OwnedWrite = (u32, Vec<u8>, Option<Vec<u8>>);

fn valid_log(writes: &[OwnedWrite]) -> Vec<u8> {
    let mut out = Vec::new();
    append_header(
        &mut out,
        &LogHeader {
            format_version: 1,
            generation: 1,
            log: 0,
            seq: 0,
        },
    );
    append_txn(
        &mut out,
        3,
        9,
        writes.iter().map(|(t, k, v)| (*t, &k[..], v.as_deref())),
    );
    append_mark(&mut out, 3);
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]
    #[test]
    fn random_bytes(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        decode_everything(&bytes);
    }

    #[test]
    fn damaged_logs(
        writes in prop::collection::vec(
            (0u32..4, prop::collection::vec(any::<u8>(), 0..20),
             prop::option::of(prop::collection::vec(any::<u8>(), 0..20))), 0..6),
        flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..4),
        cut in any::<prop::sample::Index>(),
    ) {
        let mut bytes = valid_log(&writes);
        decode_everything(&bytes);
        for (at, x) in flips {
            let i = at.index(bytes.len());
            bytes[i] ^= x;
        }
        decode_everything(&bytes);
        let keep = cut.index(bytes.len() + 1);
        decode_everything(&bytes[..keep]);
    }
}
