//! Untrusted bytes into the replica transport's frame decoder
//! (`verso_replication::transport::decode_frame`), as a stranger or a corrupted link would send
//! them. It must never panic, never decode a frame longer than the limit, and every frame it
//! decodes must re-encode to exactly the bytes it consumed. The streaming reader, fed the same
//! bytes in uneven pieces, must decode the same frames and stop at the same error.
//! Run from `fuzz/` with `cargo +nightly fuzz run vsr_frame`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use verso_replication::transport::{decode_frame, encode_frame, Frame, FrameReader};

/// Decodes back-to-back frames: those decoded, and whether decoding ended in an error.
fn decode_all(mut bytes: &[u8], max: u32) -> (Vec<Frame>, bool) {
    let mut frames = Vec::new();
    loop {
        match decode_frame(bytes, max) {
            Ok(Some((frame, used))) => {
                assert!(frame.payload.len() as u64 <= u64::from(max));
                let mut again = Vec::new();
                encode_frame(frame.kind, &frame.payload, &mut again);
                assert_eq!(again, bytes[..used]);
                bytes = &bytes[used..];
                frames.push(frame);
            }
            Ok(None) => return (frames, false),
            Err(_) => return (frames, true),
        }
    }
}

/// The same through `FrameReader`, reading pieces of 1 to 16 bytes.
fn stream_all(bytes: &[u8], max: u32, piece: usize) -> (Vec<Frame>, bool) {
    let mut src = bytes.chunks(piece).peekable();
    let mut reader = FrameReader::new();
    let mut frames = Vec::new();
    loop {
        loop {
            match reader.next_frame(max) {
                Ok(Some(frame)) => frames.push(frame),
                Ok(None) => break,
                Err(_) => return (frames, true),
            }
        }
        let Some(mut chunk) = src.next() else {
            return (frames, false);
        };
        let n = reader.fill(&mut chunk, max).unwrap();
        assert!(n > 0 || src.peek().is_none());
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&selector, bytes)) = data.split_first() else {
        return;
    };
    let max = [0, 1, 64, 4096, u32::MAX][usize::from(selector % 5)];
    let whole = decode_all(bytes, max);
    let piece = usize::from(selector / 5 % 16) + 1;
    assert_eq!(stream_all(bytes, max, piece), whole);
});
