//! Frames: the unit of everything one replica says to another over TCP.
//!
//! ```text
//! | magic "VSR1": 4 bytes | kind: u8 | payload_len: u32 LE | crc32c: u32 LE | payload |
//! ```
//!
//! - `crc32c` covers `kind`, the 4 bytes of `payload_len` and the payload. The magic is not
//!   summed: it is compared by value.
//! - `kind` is one of [`FrameKind`]: 1 Hello, 2 Challenge, 3 Proof (the handshake, see
//!   `handshake.rs`), 4 Data (an opaque payload for the caller). Any other value is an error.
//! - `payload_len` is at most the receiver's `max_payload`.
//!
//! Decoding checks each header field as soon as its bytes are present: a stranger is refused at
//! the first byte that cannot start a frame (`"PING\r\n"` fails on its `P`), and a huge length
//! is refused from the 9 header bytes that carry it, before any buffer is sized for it.
//!
//! Invariant: nothing here panics, whatever the bytes; every failure is a [`FrameError`].

use std::io::{self, Read};

/// The first 4 bytes of every frame.
pub const MAGIC: [u8; 4] = *b"VSR1";
/// Bytes of a frame header: magic, kind, payload length, checksum.
pub const FRAME_HEADER_LEN: usize = 13;
/// Bytes asked of the socket per read: enough for hundreds of small frames in one syscall.
const READ_CHUNK: usize = 64 * 1024;

/// What a frame carries. The discriminants are the wire values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum FrameKind {
    /// Handshake step 1, connector to acceptor.
    Hello = 1,
    /// Handshake step 2, acceptor to connector.
    Challenge = 2,
    /// Handshake step 3, connector to acceptor.
    Proof = 3,
    /// An opaque payload, accepted only after the handshake.
    Data = 4,
}

impl FrameKind {
    /// The kind with wire value `byte`, if any.
    pub fn from_u8(byte: u8) -> Option<FrameKind> {
        match byte {
            1 => Some(FrameKind::Hello),
            2 => Some(FrameKind::Challenge),
            3 => Some(FrameKind::Proof),
            4 => Some(FrameKind::Data),
            _ => None,
        }
    }
}

/// One decoded frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    pub kind: FrameKind,
    pub payload: Vec<u8>,
}

/// Why bytes are not a frame. Every one of them ends the connection that sent them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum FrameError {
    /// The bytes do not start with [`MAGIC`]: not a Verso replica (or not in step with one).
    BadMagic,
    /// The kind byte is not a [`FrameKind`].
    BadKind(u8),
    /// The length field exceeds what this receiver accepts.
    TooLong { len: u32, max: u32 },
    /// The checksum does not match the kind, length and payload.
    BadChecksum { stored: u32, computed: u32 },
}

impl std::fmt::Display for FrameError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FrameError::BadMagic => write!(f, "bytes do not start with the frame magic \"VSR1\""),
            FrameError::BadKind(kind) => write!(f, "unknown frame kind {kind}"),
            FrameError::TooLong { len, max } => {
                write!(f, "frame payload of {len} bytes exceeds the limit of {max}")
            }
            FrameError::BadChecksum { stored, computed } => write!(
                f,
                "frame checksum mismatch (stored {stored:#010x}, computed {computed:#010x})"
            ),
        }
    }
}

impl std::error::Error for FrameError {}

/// CRC-32C over kind, length and payload (hardware-accelerated on x86-64 and aarch64).
fn checksum(kind: FrameKind, len: [u8; 4], payload: &[u8]) -> u32 {
    let [a, b, c, d] = len;
    crc32c::crc32c_append(crc32c::crc32c(&[kind as u8, a, b, c, d]), payload)
}

/// The header of a frame carrying `payload`, so that a writer can send a large payload from
/// where it lies instead of copying it next to its header.
///
/// `payload.len()` must fit in a `u32`; the callers bound it by `max_payload` first.
pub fn encode_header(kind: FrameKind, payload: &[u8]) -> [u8; FRAME_HEADER_LEN] {
    let len = u32::try_from(payload.len()).expect("payload length checked against max_payload");
    let len = len.to_le_bytes();
    let crc = checksum(kind, len, payload).to_le_bytes();
    let mut header = [0; FRAME_HEADER_LEN];
    header[..4].copy_from_slice(&MAGIC);
    header[4] = kind as u8;
    header[5..9].copy_from_slice(&len);
    header[9..].copy_from_slice(&crc);
    header
}

/// Appends one frame carrying `payload` to `out`.
///
/// Panics if `payload` is 4 GiB or more: no frame can carry it, and callers check lengths
/// against `max_payload` (a `u32`) before they get here.
pub fn encode_frame(kind: FrameKind, payload: &[u8], out: &mut Vec<u8>) {
    let start = out.len();
    out.extend_from_slice(&encode_header(kind, payload));
    out.extend_from_slice(payload);
    assert_eq!(out.len() - start, FRAME_HEADER_LEN + payload.len());
    assert_eq!(out[start..start + 4], MAGIC);
}

/// Checks the part of a header present in `buf`; returns its kind and length once all
/// [`FRAME_HEADER_LEN`] bytes are there, `None` before.
fn check_header(buf: &[u8], max_payload: u32) -> Result<Option<(FrameKind, u32)>, FrameError> {
    let magic_seen = buf.len().min(MAGIC.len());
    if buf[..magic_seen] != MAGIC[..magic_seen] {
        return Err(FrameError::BadMagic);
    }
    let Some(&kind_byte) = buf.get(4) else {
        return Ok(None);
    };
    let kind = FrameKind::from_u8(kind_byte).ok_or(FrameError::BadKind(kind_byte))?;
    let Some(&[a, b, c, d]) = buf.get(5..9) else {
        return Ok(None);
    };
    let len = u32::from_le_bytes([a, b, c, d]);
    if len > max_payload {
        return Err(FrameError::TooLong {
            len,
            max: max_payload,
        });
    }
    if buf.len() < FRAME_HEADER_LEN {
        return Ok(None);
    }
    Ok(Some((kind, len)))
}

/// Decodes the frame at the start of `buf`: the frame and the bytes it took, `Ok(None)` if
/// `buf` ends before the frame does (read more and retry), or why `buf` cannot hold a frame.
///
/// The payload is copied out only once the whole frame is present and its length has been
/// checked against `max_payload`, so the allocation is bounded by the bytes actually received.
pub fn decode_frame(buf: &[u8], max_payload: u32) -> Result<Option<(Frame, usize)>, FrameError> {
    let Some((kind, len)) = check_header(buf, max_payload)? else {
        return Ok(None);
    };
    // u64 so that `header + len` cannot overflow a 32-bit usize.
    let available = (buf.len() - FRAME_HEADER_LEN) as u64;
    if available < u64::from(len) {
        return Ok(None);
    }
    let end = FRAME_HEADER_LEN + len as usize;
    let payload = &buf[FRAME_HEADER_LEN..end];
    let [a, b, c, d] = [buf[9], buf[10], buf[11], buf[12]];
    let stored = u32::from_le_bytes([a, b, c, d]);
    let computed = checksum(kind, len.to_le_bytes(), payload);
    if stored != computed {
        return Err(FrameError::BadChecksum { stored, computed });
    }
    let frame = Frame {
        kind,
        payload: payload.to_vec(),
    };
    Ok(Some((frame, end)))
}

/// [`decode_frame`] over a byte stream: a buffer that outlives read timeouts, so a frame split
/// across reads (or across a timeout the caller uses to check for shutdown) is never lost.
///
/// Invariant: `start <= buf.len()`, and the bytes `buf[start..]` never hold a complete frame
/// when [`FrameReader::fill`] runs, so the buffer stays below one frame plus one read chunk.
#[derive(Debug, Default)]
pub struct FrameReader {
    buf: Vec<u8>,
    /// Where the next undecoded byte is; bytes before it were consumed.
    start: usize,
}

impl FrameReader {
    pub fn new() -> FrameReader {
        FrameReader::default()
    }

    /// The next frame among the bytes already read, if a whole one is there.
    pub fn next_frame(&mut self, max_payload: u32) -> Result<Option<Frame>, FrameError> {
        assert!(self.start <= self.buf.len());
        let Some((frame, used)) = decode_frame(&self.buf[self.start..], max_payload)? else {
            return Ok(None);
        };
        self.start += used;
        assert!(self.start <= self.buf.len());
        if self.start == self.buf.len() {
            // The common case with small frames: everything read was consumed.
            self.buf.clear();
            self.start = 0;
        }
        Ok(Some(frame))
    }

    /// Reads once from `src` (blocking as `src` does) and returns how many bytes came; `Ok(0)`
    /// means the stream ended. Call it only after [`FrameReader::next_frame`] returned `None`.
    pub fn fill(&mut self, src: &mut impl Read, max_payload: u32) -> io::Result<usize> {
        assert!(self.start <= self.buf.len());
        if self.start > 0 {
            // Moves the (incomplete) rest once per consumed batch, not once per read.
            self.buf.drain(..self.start);
            self.start = 0;
        }
        // What remains is an incomplete frame whose length was checked against the limit.
        assert!(self.buf.len() < FRAME_HEADER_LEN + max_payload as usize);
        let old = self.buf.len();
        self.buf.resize(old + READ_CHUNK, 0);
        let result = src.read(&mut self.buf[old..]);
        let got = *result.as_ref().unwrap_or(&0);
        self.buf.truncate(old + got);
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const MAX: u32 = 1 << 20;

    fn frame(kind: FrameKind, payload: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        encode_frame(kind, payload, &mut out);
        out
    }

    #[test]
    fn stranger_bytes_are_refused_at_the_first_wrong_byte() {
        assert_eq!(decode_frame(b"P", MAX), Err(FrameError::BadMagic));
        assert_eq!(decode_frame(b"PING\r\n", MAX), Err(FrameError::BadMagic));
        assert_eq!(decode_frame(b"VS", MAX), Ok(None));
        assert_eq!(decode_frame(b"VSR1\x09", MAX), Err(FrameError::BadKind(9)));
    }

    #[test]
    fn huge_length_is_refused_from_the_header_alone() {
        let mut header = frame(FrameKind::Data, b"")[..9].to_vec();
        header[5..9].copy_from_slice(&u32::MAX.to_le_bytes());
        let err = FrameError::TooLong {
            len: u32::MAX,
            max: MAX,
        };
        assert_eq!(decode_frame(&header, MAX), Err(err));
        let mut reader = FrameReader::new();
        assert_eq!(reader.fill(&mut &header[..], MAX).unwrap(), 9);
        assert_eq!(reader.next_frame(MAX), Err(err));
    }

    #[test]
    fn empty_payload_and_exact_limit() {
        let bytes = frame(FrameKind::Proof, b"");
        let (f, used) = decode_frame(&bytes, 0).unwrap().unwrap();
        assert_eq!(
            (f.kind, f.payload.len(), used),
            (FrameKind::Proof, 0, FRAME_HEADER_LEN)
        );
        let bytes = frame(FrameKind::Data, &[7; 10]);
        assert!(decode_frame(&bytes, 10).unwrap().is_some());
        assert!(matches!(
            decode_frame(&bytes, 9),
            Err(FrameError::TooLong { len: 10, max: 9 })
        ));
    }

    /// A reader that hands out one byte per read, to split frames everywhere.
    struct Trickle<'a>(&'a [u8]);
    impl Read for Trickle<'_> {
        fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
            match (self.0.split_first(), out.first_mut()) {
                (Some((&b, rest)), Some(slot)) => {
                    *slot = b;
                    self.0 = rest;
                    Ok(1)
                }
                _ => Ok(0),
            }
        }
    }

    fn kind() -> impl Strategy<Value = FrameKind> {
        (1u8..=4).prop_map(|b| FrameKind::from_u8(b).unwrap())
    }

    fn frames() -> impl Strategy<Value = Vec<(FrameKind, Vec<u8>)>> {
        prop::collection::vec((kind(), prop::collection::vec(any::<u8>(), 0..300)), 1..8)
    }

    proptest! {
        #[test]
        fn roundtrip_and_every_truncation_asks_for_more(kind in kind(),
                payload in prop::collection::vec(any::<u8>(), 0..2000)) {
            let bytes = frame(kind, &payload);
            let (f, used) = decode_frame(&bytes, MAX).unwrap().unwrap();
            prop_assert_eq!(used, bytes.len());
            prop_assert_eq!(f, Frame { kind, payload });
            for cut in 0..bytes.len() {
                prop_assert_eq!(decode_frame(&bytes[..cut], MAX), Ok(None));
            }
        }

        #[test]
        fn any_corrupted_byte_is_detected(kind in kind(),
                payload in prop::collection::vec(any::<u8>(), 0..500),
                at in any::<prop::sample::Index>(), flip in 1u8..=255) {
            let mut bytes = frame(kind, &payload);
            let at = at.index(bytes.len());
            bytes[at] ^= flip;
            // A larger length asks for more bytes; anything else is an error. CRC-32C catches
            // every error burst of 32 bits or fewer, so no corrupted frame decodes.
            let result = decode_frame(&bytes, MAX);
            prop_assert!(!matches!(result, Ok(Some(_))), "decoded {:?}", result);
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..64),
                max in 0u32..100) {
            if let Ok(Some((f, used))) = decode_frame(&bytes, max) {
                prop_assert_eq!(used, FRAME_HEADER_LEN + f.payload.len());
                prop_assert_eq!(frame(f.kind, &f.payload), bytes[..used].to_vec());
            }
        }

        #[test]
        fn the_stream_reader_reassembles_frames_split_anywhere(frames in frames()) {
            let mut bytes = Vec::new();
            for (kind, payload) in &frames {
                encode_frame(*kind, payload, &mut bytes);
            }
            let mut src = Trickle(&bytes);
            let mut reader = FrameReader::new();
            let mut got = Vec::new();
            loop {
                while let Some(f) = reader.next_frame(MAX).unwrap() {
                    got.push((f.kind, f.payload));
                }
                if reader.fill(&mut src, MAX).unwrap() == 0 {
                    break;
                }
            }
            prop_assert_eq!(got, frames);
        }
    }
}
