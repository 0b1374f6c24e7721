//! Frames on a connection between a client process and a shard server, or between two
//! servers: `u32` length (little-endian, of what follows), one kind byte, the payload.
//!
//! A connection begins with [`Frame::Hello`], saying who is at the other end; then
//! protocol messages ([`Frame::Msg`], the message's own bytes from `verso_ncc::wire`), and
//! the load driver's control frames (a dump of the committed versions for the history
//! check, and shutdown). Decoding is total and exact, like the messages' (fuzz target
//! `txn_frame`): bytes from the network never panic the server.

use std::io::{self, Read, Write};

/// The largest frame accepted: far above one transaction's messages (a few hundred bytes)
/// and a dump chunk ([`DUMP_CHUNK_KEYS`]), far below what would hurt to buffer.
pub const MAX_FRAME: usize = 4 << 20;

/// Keys per [`Frame::Dump`] chunk.
pub const DUMP_CHUNK_KEYS: usize = 4096;

/// The most protocol clients one client connection may speak for.
pub const MAX_CLIENTS_PER_CONNECTION: u32 = 1 << 16;

/// Who opened a connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hello {
    /// A client process speaking for protocol clients `first..first + count`: the server
    /// sends their answers back on this connection.
    Clients { first: u32, count: u32 },
    /// Another shard server (a backup coordinator's messages, App. D); it only sends.
    Server { id: u32 },
    /// The load driver's control connection (dumps, shutdown).
    Control,
}

/// One frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Frame {
    Hello(Hello),
    /// A protocol message. From a client: `party` is the sending client; from a server to
    /// a client: the client it is for; between servers: the sending server.
    Msg {
        party: u32,
        bytes: Vec<u8>,
    },
    /// Control → server: send every key's committed versions.
    DumpRequest,
    /// Server → control: some keys with their committed values, oldest first.
    Dump(Vec<(u64, Vec<u64>)>),
    /// Server → control: the dump is complete; transactions still undecided there, and
    /// the protocol's invariants (`None`: they hold).
    DumpEnd {
        undecided: u32,
        broken: Option<String>,
    },
    /// Control → server: exit.
    Shutdown,
}

/// Why bytes are not a frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FrameError(pub &'static str);

impl std::fmt::Display for FrameError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "malformed frame: {}", self.0)
    }
}

impl std::error::Error for FrameError {}

impl Frame {
    /// Appends the frame, length prefix included.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let start = out.len();
        out.extend_from_slice(&[0; 4]);
        let u32_ = |out: &mut Vec<u8>, v: u32| out.extend_from_slice(&v.to_le_bytes());
        let u64_ = |out: &mut Vec<u8>, v: u64| out.extend_from_slice(&v.to_le_bytes());
        match self {
            Frame::Hello(h) => {
                out.push(0);
                match *h {
                    Hello::Clients { first, count } => {
                        out.push(0);
                        u32_(out, first);
                        u32_(out, count);
                    }
                    Hello::Server { id } => {
                        out.push(1);
                        u32_(out, id);
                    }
                    Hello::Control => out.push(2),
                }
            }
            Frame::Msg { party, bytes } => {
                out.push(1);
                u32_(out, *party);
                out.extend_from_slice(bytes);
            }
            Frame::DumpRequest => out.push(2),
            Frame::Dump(keys) => {
                out.push(3);
                u32_(out, keys.len() as u32);
                for (k, values) in keys {
                    u64_(out, *k);
                    u32_(out, values.len() as u32);
                    values.iter().for_each(|&v| u64_(out, v));
                }
            }
            Frame::DumpEnd { undecided, broken } => {
                out.push(4);
                u32_(out, *undecided);
                match broken {
                    None => out.push(0),
                    Some(why) => {
                        out.push(1);
                        out.extend_from_slice(why.as_bytes());
                    }
                }
            }
            Frame::Shutdown => out.push(5),
        }
        let len = (out.len() - start - 4) as u32;
        out[start..start + 4].copy_from_slice(&len.to_le_bytes());
    }

    /// Decodes one frame's body (what follows the length prefix).
    pub fn decode(body: &[u8]) -> Result<Frame, FrameError> {
        let mut r = body;
        let take = |r: &mut &[u8], n: usize| -> Result<Vec<u8>, FrameError> {
            if r.len() < n {
                return Err(FrameError("truncated"));
            }
            let (head, rest) = r.split_at(n);
            *r = rest;
            Ok(head.to_vec())
        };
        let u8_ = |r: &mut &[u8]| -> Result<u8, FrameError> { Ok(take(r, 1)?[0]) };
        let u32_ = |r: &mut &[u8]| -> Result<u32, FrameError> {
            Ok(u32::from_le_bytes(take(r, 4)?.try_into().expect("4 bytes")))
        };
        let u64_ = |r: &mut &[u8]| -> Result<u64, FrameError> {
            Ok(u64::from_le_bytes(take(r, 8)?.try_into().expect("8 bytes")))
        };
        let frame = match u8_(&mut r)? {
            0 => Frame::Hello(match u8_(&mut r)? {
                0 => {
                    let (first, count) = (u32_(&mut r)?, u32_(&mut r)?);
                    if count == 0 || count > MAX_CLIENTS_PER_CONNECTION {
                        return Err(FrameError("a client count outside 1..=65536"));
                    }
                    Hello::Clients { first, count }
                }
                1 => Hello::Server { id: u32_(&mut r)? },
                2 => Hello::Control,
                _ => return Err(FrameError("unknown hello")),
            }),
            1 => {
                let party = u32_(&mut r)?;
                let bytes = std::mem::take(&mut r).to_vec();
                Frame::Msg { party, bytes }
            }
            2 => Frame::DumpRequest,
            3 => {
                let n = u32_(&mut r)? as usize;
                // Each key takes at least 12 bytes: a forged count allocates nothing.
                if n.saturating_mul(12) > r.len() {
                    return Err(FrameError("a key count larger than the frame"));
                }
                let mut keys = Vec::with_capacity(n);
                for _ in 0..n {
                    let k = u64_(&mut r)?;
                    let m = u32_(&mut r)? as usize;
                    if m.saturating_mul(8) > r.len() {
                        return Err(FrameError("a version count larger than the frame"));
                    }
                    let values = (0..m).map(|_| u64_(&mut r)).collect::<Result<_, _>>()?;
                    keys.push((k, values));
                }
                Frame::Dump(keys)
            }
            4 => {
                let undecided = u32_(&mut r)?;
                let broken = match u8_(&mut r)? {
                    0 => None,
                    1 => {
                        let why = std::mem::take(&mut r);
                        Some(
                            String::from_utf8(why.to_vec())
                                .map_err(|_| FrameError("a reason that is not UTF-8"))?,
                        )
                    }
                    _ => return Err(FrameError("an option is neither 0 nor 1")),
                };
                Frame::DumpEnd { undecided, broken }
            }
            5 => Frame::Shutdown,
            _ => return Err(FrameError("unknown frame kind")),
        };
        if !r.is_empty() {
            return Err(FrameError("bytes after the end"));
        }
        Ok(frame)
    }
}

/// Reads one frame; `Ok(None)` at a clean end of stream. A malformed or oversized frame is
/// an `InvalidData` error: the caller drops the connection.
pub fn read_frame(r: &mut impl Read, buf: &mut Vec<u8>) -> io::Result<Option<Frame>> {
    let mut len = [0u8; 4];
    match r.read_exact(&mut len) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let len = u32::from_le_bytes(len) as usize;
    if len > MAX_FRAME {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            FrameError("a frame over 4 MiB"),
        ));
    }
    buf.resize(len, 0);
    r.read_exact(buf)?;
    Frame::decode(buf)
        .map(Some)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

/// Appends `frame` to `w` (buffered by the caller).
pub fn write_frame(w: &mut impl Write, frame: &Frame, scratch: &mut Vec<u8>) -> io::Result<()> {
    scratch.clear();
    frame.encode(scratch);
    w.write_all(scratch)
}

/// Appends a [`Frame::Msg`] carrying `msg`, encoded in place (no intermediate frame).
pub fn write_msg<M: verso_ncc::wire::Wire>(
    w: &mut impl Write,
    party: u32,
    msg: &M,
    scratch: &mut Vec<u8>,
) -> io::Result<()> {
    scratch.clear();
    scratch.extend_from_slice(&[0; 4]);
    scratch.push(1);
    scratch.extend_from_slice(&party.to_le_bytes());
    msg.encode(scratch);
    let len = (scratch.len() - 4) as u32;
    scratch[..4].copy_from_slice(&len.to_le_bytes());
    w.write_all(scratch)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn frame() -> impl Strategy<Value = Frame> {
        prop_oneof![
            (any::<u32>(), 1u32..=MAX_CLIENTS_PER_CONNECTION)
                .prop_map(|(first, count)| Frame::Hello(Hello::Clients { first, count })),
            any::<u32>().prop_map(|id| Frame::Hello(Hello::Server { id })),
            Just(Frame::Hello(Hello::Control)),
            (any::<u32>(), proptest::collection::vec(any::<u8>(), 0..40))
                .prop_map(|(party, bytes)| Frame::Msg { party, bytes }),
            Just(Frame::DumpRequest),
            proptest::collection::vec(
                (any::<u64>(), proptest::collection::vec(any::<u64>(), 0..4)),
                0..4
            )
            .prop_map(Frame::Dump),
            (any::<u32>(), proptest::option::of(".{0,20}"))
                .prop_map(|(undecided, broken)| Frame::DumpEnd { undecided, broken }),
            Just(Frame::Shutdown),
        ]
    }

    proptest! {
        #[test]
        fn frames_round_trip_through_a_stream(frames in proptest::collection::vec(frame(), 0..6)) {
            let mut stream = Vec::new();
            for f in &frames {
                f.encode(&mut stream);
            }
            let mut r = &stream[..];
            let mut buf = Vec::new();
            for f in &frames {
                let got = read_frame(&mut r, &mut buf).unwrap();
                prop_assert_eq!(got.as_ref(), Some(f));
            }
            prop_assert!(read_frame(&mut r, &mut buf).unwrap().is_none());
        }

        #[test]
        fn any_bytes_decode_to_what_they_encode(body in proptest::collection::vec(any::<u8>(), 0..64)) {
            if let Ok(f) = Frame::decode(&body) {
                let mut again = Vec::new();
                f.encode(&mut again);
                prop_assert_eq!(&again[4..], &body[..]);
            }
        }
    }

    #[test]
    fn a_message_written_in_place_reads_back_as_its_frame() {
        let msg = verso_ncc::Msg::DecideAck {
            txn: verso_ncc::TxnId { client: 3, seq: 9 },
        };
        let mut stream = Vec::new();
        write_msg(&mut stream, 3, &msg, &mut Vec::new()).unwrap();
        let mut bytes = Vec::new();
        verso_ncc::wire::Wire::encode(&msg, &mut bytes);
        let got = read_frame(&mut &stream[..], &mut Vec::new()).unwrap();
        assert_eq!(got, Some(Frame::Msg { party: 3, bytes }));
    }

    #[test]
    fn an_oversized_frame_is_refused_before_reading_it() {
        let bytes = (MAX_FRAME as u32 + 1).to_le_bytes();
        let err = read_frame(&mut &bytes[..], &mut Vec::new()).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
    }
}
