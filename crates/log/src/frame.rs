//! Frames: the checksummed unit of every file Verso writes (logs, checkpoints, catalog).
//!
//! ```text
//! | payload_len: u32 LE | crc32c: u32 LE (over payload_len's 4 bytes + payload) | payload |
//! ```
//!
//! Integers on disk are little-endian `u32`/`u64`, never `usize`. A reader that finds a frame it
//! cannot use reports *where* ([`Damage`]); whether that is a torn tail or corruption is decided
//! by the caller, which knows what should follow.

/// Bytes of a frame header.
pub const FRAME_HEADER_LEN: usize = 8;
/// Largest payload a frame may carry (1 GiB). A transaction whose encoded write set would be
/// larger is refused before it commits.
pub const FRAME_PAYLOAD_MAX: usize = 1 << 30;

const _: () = assert!(FRAME_PAYLOAD_MAX <= u32::MAX as usize);

/// Why bytes at an offset are not a valid frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DamageKind {
    /// The file ends inside the header or the payload.
    Truncated,
    /// The length field is larger than [`FRAME_PAYLOAD_MAX`].
    BadLength,
    /// The checksum does not match.
    BadChecksum,
    /// The checksum matched but the payload is not a well-formed record.
    BadRecord,
}

impl std::fmt::Display for DamageKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            DamageKind::Truncated => "file ends inside a frame",
            DamageKind::BadLength => "impossible frame length",
            DamageKind::BadChecksum => "checksum mismatch",
            DamageKind::BadRecord => "malformed record",
        })
    }
}

/// A place where a file stops making sense.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Damage {
    /// Byte offset of the frame that is not valid.
    pub offset: u64,
    pub kind: DamageKind,
}

/// CRC-32C (Castagnoli): the SSE 4.2 `crc32` instruction computes it, which matters for the
/// small records every commit writes.
fn checksum(len: [u8; 4], payload: &[u8]) -> u32 {
    crc32c::crc32c_append(crc32c::crc32c(&len), payload)
}

/// Appends one frame holding whatever `fill` writes to `out`.
///
/// `fill` appends the payload; the header is patched afterwards, so the payload is written once.
/// Panics if the payload exceeds [`FRAME_PAYLOAD_MAX`]: callers check sizes first.
pub fn append_frame(out: &mut Vec<u8>, fill: impl FnOnce(&mut Vec<u8>)) {
    let start = out.len();
    out.extend_from_slice(&[0; FRAME_HEADER_LEN]);
    fill(out);
    let len = out.len() - start - FRAME_HEADER_LEN;
    assert!(len <= FRAME_PAYLOAD_MAX, "frame payload of {len} bytes");
    let len_bytes = (len as u32).to_le_bytes();
    let crc = checksum(len_bytes, &out[start + FRAME_HEADER_LEN..]);
    out[start..start + 4].copy_from_slice(&len_bytes);
    out[start + 4..start + 8].copy_from_slice(&crc.to_le_bytes());
}

/// Reads the frame at `offset` of `bytes`: its payload and the offset after it.
pub fn read_frame(bytes: &[u8], offset: usize) -> Result<(&[u8], usize), Damage> {
    let damage = |kind| Damage {
        offset: offset as u64,
        kind,
    };
    let header = bytes
        .get(offset..offset + FRAME_HEADER_LEN)
        .ok_or(damage(DamageKind::Truncated))?;
    let len_bytes: [u8; 4] = header[..4].try_into().expect("4 bytes");
    let len = u32::from_le_bytes(len_bytes) as usize;
    if len > FRAME_PAYLOAD_MAX {
        return Err(damage(DamageKind::BadLength));
    }
    let crc = u32::from_le_bytes(header[4..].try_into().expect("4 bytes"));
    let start = offset + FRAME_HEADER_LEN;
    let payload = bytes
        .get(start..start + len)
        .ok_or(damage(DamageKind::Truncated))?;
    if checksum(len_bytes, payload) != crc {
        return Err(damage(DamageKind::BadChecksum));
    }
    Ok((payload, start + len))
}

/// A cursor over a payload's fields; every read is bounds-checked (payloads are untrusted).
pub(crate) struct Fields<'a> {
    bytes: &'a [u8],
}

/// The payload ran out or held an impossible value.
#[derive(Debug)]
pub(crate) struct Malformed;

impl<'a> Fields<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        Fields { bytes }
    }

    pub(crate) fn take(&mut self, n: usize) -> Result<&'a [u8], Malformed> {
        if n > self.bytes.len() {
            return Err(Malformed);
        }
        let (head, rest) = self.bytes.split_at(n);
        self.bytes = rest;
        Ok(head)
    }

    pub(crate) fn u8(&mut self) -> Result<u8, Malformed> {
        Ok(self.take(1)?[0])
    }

    pub(crate) fn u32(&mut self) -> Result<u32, Malformed> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().expect("4")))
    }

    pub(crate) fn u64(&mut self) -> Result<u64, Malformed> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().expect("8")))
    }

    /// A `u32` length followed by that many bytes.
    pub(crate) fn bytes(&mut self) -> Result<&'a [u8], Malformed> {
        let n = self.u32()? as usize;
        self.take(n)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }
}

pub(crate) fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

pub(crate) fn put_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_le_bytes());
}

/// A `u32` length and the bytes. Callers have checked `b.len()` fits (engine limits are < 2^31).
pub(crate) fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    assert!(b.len() <= u32::MAX as usize);
    put_u32(out, b.len() as u32);
    out.extend_from_slice(b);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_detects_every_single_byte_flip() {
        let mut out = Vec::new();
        append_frame(&mut out, |o| o.extend_from_slice(b"hello frames"));
        append_frame(&mut out, |_| {});
        let (p, next) = read_frame(&out, 0).unwrap();
        assert_eq!(p, b"hello frames");
        let (p2, end) = read_frame(&out, next).unwrap();
        assert!(p2.is_empty());
        assert_eq!(end, out.len());
        for i in 0..next {
            let mut bad = out.clone();
            bad[i] ^= 0x40;
            assert!(read_frame(&bad, 0).is_err(), "flip at {i} not caught");
        }
        for cut in 0..next {
            assert_eq!(
                read_frame(&out[..cut], 0).unwrap_err().kind,
                DamageKind::Truncated
            );
        }
    }
}
