//! Frames on a connection between a client process and a shard server, or between two
//! servers: `u32` length (little-endian, of what follows), one kind byte, the payload.
//!
//! A connection begins with [`Frame::Hello`], saying who is at the other end; then
//! protocol messages ([`Frame::Msg`], the message's own bytes from `verso_ncc::wire`), and
//! the load driver's control frames (a dump of the committed versions for the history
//! check, and shutdown). Decoding is total and exact, like the messages' (fuzz target
//! `txn_wire`): bytes from the network never panic the server.
//!
//! A connection speaks one [`Encoding`], chosen by the side that opens it and recognised by
//! the other from the first byte (a binary frame's length is never `*`'s byte, 42, since a
//! `Hello` is shorter). In RESP, a frame is one RESP array, as a Redis client sends a
//! command: `MSG`, the party and the message's own array (`*3\r\n$3\r\nMSG\r\n...`), or
//! `CTL` and a control frame's binary body as one bulk string (control frames are rare; only
//! the messages' form is being measured).

use std::io::{self, BufRead, Read, Write};

use verso_ncc::wire::{parse_decimal, push_decimal, Encoding, Wire};
use verso_ncc::{Effects, Key, TxnId, Value};

/// The largest frame accepted (a frame's body, or a RESP message): above one transaction's
/// requests to a server with keys and values of [`REQUEST_BYTES_MAX`] and a dump chunk
/// ([`DUMP_CHUNK_BYTES`]), far below what would hurt to buffer. Neither side sends more
/// (an error for the sender).
pub const MAX_FRAME: usize = 4 << 20;

/// A request's key and value together, at most (NCC's servers refuse more,
/// `verso_ncc::MessageLimits`): a quarter of [`MAX_FRAME`], so that an answer carrying
/// such a value fits a frame in either form.
pub const REQUEST_BYTES_MAX: usize = MAX_FRAME / 4;

/// What an NCC server merges into one answer message, at most (values, plus
/// `verso_ncc::wire::RESULT_OVERHEAD_MAX` per result); with one more result of a value of
/// [`REQUEST_BYTES_MAX`], an answer stays within half of [`MAX_FRAME`].
pub const REPLY_BYTES_MAX: usize = MAX_FRAME / 4;

/// Keys per [`Frame::Dump`] chunk, at most.
pub const DUMP_CHUNK_KEYS: usize = 4096;

/// Transactions per [`Frame::Effects`] chunk, at most.
pub const DUMP_CHUNK_TXNS: usize = 1024;

/// Encoded bytes per [`Frame::Dump`] or [`Frame::Effects`] chunk, at most (a quarter of
/// [`MAX_FRAME`]), unless one key's versions or one transaction's effects alone are more:
/// such an item is a chunk of its own, and above [`MAX_FRAME`] it cannot be dumped (the
/// dump fails with an error; keep values of a checked history small).
pub const DUMP_CHUNK_BYTES: usize = MAX_FRAME / 4;

/// `items` in runs of at most `max_items`, each of at most [`DUMP_CHUNK_BYTES`] by `size`
/// unless a single item is larger.
fn chunks<'a, T: Clone>(
    items: &'a [T],
    max_items: usize,
    size: impl Fn(&T) -> usize + 'a,
) -> impl Iterator<Item = Vec<T>> + 'a {
    let mut rest = items;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let mut bytes = 0;
        let n = rest
            .iter()
            .take(max_items)
            .take_while(|item| {
                bytes += size(item);
                bytes <= DUMP_CHUNK_BYTES
            })
            .count()
            .max(1);
        let (chunk, tail) = rest.split_at(n);
        rest = tail;
        Some(chunk.to_vec())
    })
}

/// A server's committed versions in [`Frame::Dump`] chunks.
pub fn dump_chunks(
    versions: &[(Key, Vec<Value>)],
) -> impl Iterator<Item = Vec<(Key, Vec<Value>)>> + '_ {
    chunks(versions, DUMP_CHUNK_KEYS, |(k, vs)| {
        8 + k.len() + vs.iter().map(|v| 4 + v.len()).sum::<usize>()
    })
}

/// Committed transactions' effects in [`Frame::Effects`] chunks.
pub fn effects_chunks(
    effects: &[(TxnId, Effects)],
) -> impl Iterator<Item = Vec<(TxnId, Effects)>> + '_ {
    let pairs = |ps: &[(Key, Value)]| ps.iter().map(|(k, v)| 8 + k.len() + v.len()).sum::<usize>();
    chunks(effects, DUMP_CHUNK_TXNS, move |(_, e)| {
        20 + pairs(&e.reads) + pairs(&e.writes)
    })
}

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
    /// Another replica of this shard's replication group (`crate::group`): it sends
    /// [`Frame::Replica`] frames.
    Replica { group: u32, replica: u8 },
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
    Dump(Vec<(Key, Vec<Value>)>),
    /// Server → control: the dump is complete; transactions still undecided there, and
    /// the protocol's invariants (`None`: they hold).
    DumpEnd {
        undecided: u32,
        broken: Option<String>,
    },
    /// Control → server: exit.
    Shutdown,
    /// Server → control, within a dump while the history is kept: committed read-write
    /// transactions that still have a record here, with what they read and wrote here. A
    /// checker adds those no client reported (their client died) to the history.
    Effects(Vec<(TxnId, Effects)>),
    /// Replica → replica of one group: a Lazy VSR message (`crate::group::log`'s postcard
    /// form, decoded by the receiver).
    Replica(Vec<u8>),
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
        let bytes_ = |out: &mut Vec<u8>, v: &[u8]| {
            u32_(out, v.len() as u32);
            out.extend_from_slice(v);
        };
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
                    Hello::Replica { group, replica } => {
                        out.push(3);
                        u32_(out, group);
                        out.push(replica);
                    }
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
                    bytes_(out, k.as_bytes());
                    u32_(out, values.len() as u32);
                    values.iter().for_each(|v| bytes_(out, v.as_bytes()));
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
            Frame::Effects(txns) => {
                out.push(6);
                u32_(out, txns.len() as u32);
                for (txn, e) in txns {
                    u32_(out, txn.client);
                    u64_(out, txn.seq);
                    for pairs in [&e.reads, &e.writes] {
                        u32_(out, pairs.len() as u32);
                        for (k, v) in pairs {
                            bytes_(out, k.as_bytes());
                            bytes_(out, v.as_bytes());
                        }
                    }
                }
            }
            Frame::Replica(bytes) => {
                out.push(7);
                out.extend_from_slice(bytes);
            }
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
        // A key's or a value's bytes, after their length.
        let bytes_ = |r: &mut &[u8]| -> Result<Vec<u8>, FrameError> {
            let n = u32_(r)? as usize;
            take(r, n)
        };
        // A count of entries of at least `each` bytes, refused if the frame cannot hold
        // them: a forged count allocates nothing.
        let count = |r: &mut &[u8], each: usize, what: &'static str| {
            let n = u32_(r)? as usize;
            if n.saturating_mul(each) > r.len() {
                return Err(FrameError(what));
            }
            Ok(n)
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
                3 => Hello::Replica {
                    group: u32_(&mut r)?,
                    replica: u8_(&mut r)?,
                },
                _ => return Err(FrameError("unknown hello")),
            }),
            1 => {
                let party = u32_(&mut r)?;
                let bytes = std::mem::take(&mut r).to_vec();
                Frame::Msg { party, bytes }
            }
            2 => Frame::DumpRequest,
            3 => {
                let n = count(&mut r, 8, "a key count larger than the frame")?;
                let mut keys = Vec::with_capacity(n.min(1024));
                for _ in 0..n {
                    let k = Key::from(bytes_(&mut r)?);
                    let m = count(&mut r, 4, "a version count larger than the frame")?;
                    let values = (0..m)
                        .map(|_| Ok(Value::from(bytes_(&mut r)?)))
                        .collect::<Result<_, FrameError>>()?;
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
            6 => {
                let n = count(&mut r, 20, "a transaction count larger than the frame")?;
                let mut txns = Vec::with_capacity(n.min(1024));
                for _ in 0..n {
                    let client = u32_(&mut r)?;
                    let seq = u64_(&mut r)?;
                    let mut pairs = || -> Result<Vec<(Key, Value)>, FrameError> {
                        let m = count(&mut r, 8, "a pair count larger than the frame")?;
                        let pair = |r: &mut &[u8]| -> Result<(Key, Value), FrameError> {
                            Ok((Key::from(bytes_(r)?), Value::from(bytes_(r)?)))
                        };
                        (0..m).map(|_| pair(&mut r)).collect()
                    };
                    let (reads, writes) = (pairs()?, pairs()?);
                    txns.push((TxnId { client, seq }, Effects { reads, writes }));
                }
                Frame::Effects(txns)
            }
            7 => Frame::Replica(std::mem::take(&mut r).to_vec()),
            _ => return Err(FrameError("unknown frame kind")),
        };
        if !r.is_empty() {
            return Err(FrameError("bytes after the end"));
        }
        Ok(frame)
    }
}

/// The encoding a connection speaks, from its first byte (left unread); `Ok(None)` if the
/// stream ends first.
pub fn detect(r: &mut impl BufRead) -> io::Result<Option<Encoding>> {
    Ok(match r.fill_buf()?.first() {
        None => None,
        Some(b'*') => Some(Encoding::Resp),
        Some(_) => Some(Encoding::Binary),
    })
}

fn invalid(why: &'static str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, FrameError(why))
}

/// Reads one frame; `Ok(None)` at a clean end of stream. A malformed or oversized frame is
/// an `InvalidData` error: the caller drops the connection.
pub fn read_frame(
    r: &mut impl BufRead,
    encoding: Encoding,
    buf: &mut Vec<u8>,
) -> io::Result<Option<Frame>> {
    match encoding {
        Encoding::Binary => read_binary_frame(r, buf),
        Encoding::Resp => read_resp_frame(r, buf),
    }
}

fn read_binary_frame(r: &mut impl BufRead, buf: &mut Vec<u8>) -> io::Result<Option<Frame>> {
    // The stream may end between frames, not inside one (a cut length prefix included).
    if r.fill_buf()?.is_empty() {
        return Ok(None);
    }
    let mut len = [0u8; 4];
    r.read_exact(&mut len)?;
    let len = u32::from_le_bytes(len) as usize;
    if len > MAX_FRAME {
        return Err(invalid("a frame over 4 MiB"));
    }
    buf.resize(len, 0);
    r.read_exact(buf)?;
    Frame::decode(buf)
        .map(Some)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

/// Appends one RESP line (`\r\n` included) to `out`, refusing lines over `max` bytes.
fn resp_line(r: &mut impl BufRead, max: usize, out: &mut Vec<u8>) -> io::Result<()> {
    let start = out.len();
    r.take(max as u64 + 2).read_until(b'\n', out)?;
    if !out[start..].ends_with(b"\r\n") {
        return Err(if out.len() - start > max {
            invalid("a RESP line too long")
        } else {
            io::Error::from(io::ErrorKind::UnexpectedEof)
        });
    }
    Ok(())
}

/// The number in a RESP header line (`*3\r\n`, `$12\r\n`) of type `kind`, if it is one
/// and at most `max`.
fn header_value(line: &[u8], kind: u8, max: usize) -> Option<usize> {
    if line.first() != Some(&kind) || line.len() < 3 {
        return None;
    }
    parse_decimal(&line[1..line.len() - 2])
        .and_then(|n| usize::try_from(n).ok())
        .filter(|&n| n <= max)
}

/// Reads a RESP header line of type `kind` into `line`: its number.
fn resp_header(r: &mut impl BufRead, kind: u8, line: &mut Vec<u8>) -> io::Result<usize> {
    line.clear();
    resp_line(r, 21, line)?;
    header_value(line, kind, MAX_FRAME).ok_or(invalid("a malformed RESP header"))
}

/// A bulk string's contents, appended to `out`.
fn resp_bulk(r: &mut impl BufRead, max: usize, out: &mut Vec<u8>) -> io::Result<()> {
    let mut line = Vec::new();
    let len = resp_header(r, b'$', &mut line)?;
    if len > max {
        return Err(invalid("a RESP string too long"));
    }
    let start = out.len();
    out.resize(start + len + 2, 0);
    r.read_exact(&mut out[start..])?;
    if !out.ends_with(b"\r\n") {
        return Err(invalid("a RESP string without its end"));
    }
    out.truncate(start + len);
    Ok(())
}

fn read_resp_frame(r: &mut impl BufRead, buf: &mut Vec<u8>) -> io::Result<Option<Frame>> {
    if r.fill_buf()?.is_empty() {
        return Ok(None);
    }
    let mut line = Vec::new();
    let parts = resp_header(r, b'*', &mut line)?;
    let mut kind = Vec::new();
    resp_bulk(r, 3, &mut kind)?;
    buf.clear();
    match (parts, &kind[..]) {
        (3, b"MSG") => {
            let mut party = Vec::new();
            resp_bulk(r, 10, &mut party)?;
            let party = parse_decimal(&party)
                .and_then(|p| u32::try_from(p).ok())
                .ok_or(invalid("a malformed party"))?;
            // The message's own array, kept as it came: its decoder checks the fields.
            let fields = resp_header(r, b'*', &mut line)?;
            buf.extend_from_slice(&line);
            for _ in 0..fields {
                // A number's field, or a key's or a value's bytes: any length the frame
                // limit allows.
                let at = buf.len();
                resp_line(r, 21, buf)?;
                let len = header_value(&buf[at..], b'$', MAX_FRAME)
                    .ok_or(invalid("a message field that is not a bulk string"))?;
                let at = buf.len();
                if at + len + 2 > MAX_FRAME {
                    return Err(invalid("a frame over 4 MiB"));
                }
                buf.resize(at + len + 2, 0);
                r.read_exact(&mut buf[at..])?;
            }
            Ok(Some(Frame::Msg {
                party,
                bytes: std::mem::take(buf),
            }))
        }
        (2, b"CTL") => {
            resp_bulk(r, MAX_FRAME, buf)?;
            match Frame::decode(buf) {
                Ok(Frame::Msg { .. }) => Err(invalid("a message inside a control frame")),
                Ok(frame) => Ok(Some(frame)),
                Err(e) => Err(io::Error::new(io::ErrorKind::InvalidData, e)),
            }
        }
        _ => Err(invalid("neither MSG nor CTL")),
    }
}

/// Appends `frame` to `w` (buffered by the caller). In RESP, a [`Frame::Msg`]'s bytes must
/// be a message in RESP.
pub fn write_frame(
    w: &mut impl Write,
    encoding: Encoding,
    frame: &Frame,
    scratch: &mut Vec<u8>,
) -> io::Result<()> {
    scratch.clear();
    match (encoding, frame) {
        (Encoding::Binary, _) => {
            frame.encode(scratch);
            within_limit(scratch.len() - 4)?;
        }
        (Encoding::Resp, Frame::Msg { party, bytes }) => {
            within_limit(bytes.len())?;
            resp_msg_header(scratch, *party);
            scratch.extend_from_slice(bytes);
        }
        (Encoding::Resp, _) => {
            frame.encode(scratch);
            let body = scratch.split_off(4);
            within_limit(body.len())?;
            scratch.clear();
            scratch.extend_from_slice(b"*2\r\n$3\r\nCTL\r\n$");
            push_decimal(scratch, body.len() as u64);
            scratch.extend_from_slice(b"\r\n");
            scratch.extend_from_slice(&body);
            scratch.extend_from_slice(b"\r\n");
        }
    }
    w.write_all(scratch)
}

fn resp_msg_header(out: &mut Vec<u8>, party: u32) {
    out.extend_from_slice(b"*3\r\n$3\r\nMSG\r\n$");
    let mut digits = Vec::with_capacity(10);
    push_decimal(&mut digits, u64::from(party));
    push_decimal(out, digits.len() as u64);
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(&digits);
    out.extend_from_slice(b"\r\n");
}

/// The length on the wire of a [`Frame::Msg`] from `party` whose message takes `body`
/// bytes: what a connection carries per message, for the load driver's byte counts.
pub fn msg_frame_len(encoding: Encoding, party: u32, body: usize) -> usize {
    match encoding {
        Encoding::Binary => 4 + 1 + 4 + body,
        Encoding::Resp => {
            let digits = party.checked_ilog10().unwrap_or(0) as usize + 1;
            let digits_of_digits = if digits >= 10 { 2 } else { 1 };
            // *3\r\n $3\r\nMSG\r\n $N\r\n PARTY\r\n
            4 + 9 + 1 + digits_of_digits + 2 + digits + 2 + body
        }
    }
}

/// Appends a [`Frame::Msg`] carrying `msg`, encoded in place (no intermediate frame).
pub fn write_msg<M: Wire>(
    w: &mut impl Write,
    encoding: Encoding,
    party: u32,
    msg: &M,
    scratch: &mut Vec<u8>,
) -> io::Result<()> {
    scratch.clear();
    match encoding {
        Encoding::Binary => {
            scratch.extend_from_slice(&[0; 4]);
            scratch.push(1);
            scratch.extend_from_slice(&party.to_le_bytes());
            msg.encode(scratch);
            within_limit(scratch.len() - 4)?;
            let len = (scratch.len() - 4) as u32;
            scratch[..4].copy_from_slice(&len.to_le_bytes());
        }
        Encoding::Resp => {
            resp_msg_header(scratch, party);
            let header = scratch.len();
            msg.encode_as(Encoding::Resp, scratch);
            within_limit(scratch.len() - header)?;
        }
    }
    w.write_all(scratch)
}

/// Refuses to send what the peer would refuse to read (a frame's body, or a RESP
/// message, over [`MAX_FRAME`]): the sender gets an error instead of a dropped connection.
fn within_limit(bytes: usize) -> io::Result<()> {
    if bytes > MAX_FRAME {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("a message of {bytes} bytes, over the {MAX_FRAME}-byte frame limit"),
        ));
    }
    Ok(())
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
            (any::<u32>(), any::<u8>())
                .prop_map(|(group, replica)| Frame::Hello(Hello::Replica { group, replica })),
            proptest::collection::vec(any::<u8>(), 0..40).prop_map(Frame::Replica),
            (any::<u32>(), proptest::collection::vec(any::<u8>(), 0..40))
                .prop_map(|(party, bytes)| Frame::Msg { party, bytes }),
            Just(Frame::DumpRequest),
            proptest::collection::vec(
                (
                    any::<Vec<u8>>().prop_map(Key::from),
                    proptest::collection::vec(any::<Vec<u8>>().prop_map(Value::from), 0..4)
                ),
                0..4
            )
            .prop_map(Frame::Dump),
            (any::<u32>(), proptest::option::of(".{0,20}"))
                .prop_map(|(undecided, broken)| Frame::DumpEnd { undecided, broken }),
            Just(Frame::Shutdown),
            proptest::collection::vec(
                (
                    any::<u32>(),
                    any::<u64>(),
                    proptest::collection::vec(any::<(u64, u64)>(), 0..3),
                    proptest::collection::vec(any::<(u64, u64)>(), 0..3),
                ),
                0..3
            )
            .prop_map(|txns| Frame::Effects(
                txns.into_iter()
                    .map(|(client, seq, reads, writes)| {
                        let kv = |(k, v): (u64, u64)| (Key::from(k), Value::from(v));
                        let reads = reads.into_iter().map(kv).collect();
                        let writes = writes.into_iter().map(kv).collect();
                        (TxnId { client, seq }, Effects { reads, writes })
                    })
                    .collect()
            )),
        ]
    }

    proptest! {
        /// Chunks put back together are the input; each holds at most its count of items
        /// and, unless it is a single item, at most `DUMP_CHUNK_BYTES` encoded; and every
        /// chunk a dump can send decodes again (under `MAX_FRAME`).
        #[test]
        fn dump_chunks_cover_everything_within_the_limits(
            sizes in proptest::collection::vec((0usize..3, 0usize..(600 << 10)), 0..40),
        ) {
            let versions: Vec<(Key, Vec<Value>)> = sizes
                .iter()
                .enumerate()
                .map(|(i, &(n, len))| {
                    (Key::from(i as u64), vec![Value::from(vec![1u8; len]); n])
                })
                .collect();
            let chunks: Vec<_> = dump_chunks(&versions).collect();
            prop_assert_eq!(chunks.concat(), versions.clone());
            for c in &chunks {
                prop_assert!(c.len() <= DUMP_CHUNK_KEYS);
                let frame = Frame::Dump(c.clone());
                let mut bytes = Vec::new();
                frame.encode(&mut bytes);
                prop_assert!(c.len() == 1 || bytes.len() <= DUMP_CHUNK_BYTES + 9, "{}", bytes.len());
                if bytes.len() - 4 <= MAX_FRAME {
                    prop_assert_eq!(Frame::decode(&bytes[4..]), Ok(frame));
                }
            }
            let effects: Vec<(TxnId, Effects)> = sizes
                .iter()
                .enumerate()
                .map(|(i, &(n, len))| {
                    let pair = (Key::from(i as u64), Value::from(vec![2u8; len]));
                    let e = Effects { reads: vec![pair.clone(); n], writes: vec![pair] };
                    (TxnId { client: 1, seq: i as u64 }, e)
                })
                .collect();
            let chunks: Vec<_> = effects_chunks(&effects).collect();
            prop_assert_eq!(chunks.concat(), effects.clone());
            for c in &chunks {
                let mut bytes = Vec::new();
                Frame::Effects(c.clone()).encode(&mut bytes);
                prop_assert!(c.len() == 1 || bytes.len() <= DUMP_CHUNK_BYTES + 9, "{}", bytes.len());
            }
        }
    }

    /// In RESP a message frame must carry a RESP array: the arbitrary bytes become one.
    fn as_resp(frame: &Frame) -> Frame {
        match frame {
            Frame::Msg { party, bytes } => {
                let mut array = format!("*{}\r\n", bytes.len()).into_bytes();
                for b in bytes {
                    let digits = b.to_string();
                    array
                        .extend_from_slice(format!("${}\r\n{digits}\r\n", digits.len()).as_bytes());
                }
                Frame::Msg {
                    party: *party,
                    bytes: array,
                }
            }
            other => other.clone(),
        }
    }

    proptest! {
        #[test]
        fn frames_round_trip_through_a_stream(frames in proptest::collection::vec(frame(), 0..6)) {
            for encoding in [Encoding::Binary, Encoding::Resp] {
                let frames: Vec<Frame> = match encoding {
                    Encoding::Binary => frames.clone(),
                    Encoding::Resp => frames.iter().map(as_resp).collect(),
                };
                let mut stream = Vec::new();
                let mut scratch = Vec::new();
                for f in &frames {
                    write_frame(&mut stream, encoding, f, &mut scratch).unwrap();
                }
                let mut r = &stream[..];
                // A connection begins with a Hello, whose first byte tells the encoding
                // (a longer binary frame's length may well begin with '*').
                if matches!(frames.first(), Some(Frame::Hello(_))) {
                    prop_assert_eq!(detect(&mut r).unwrap(), Some(encoding));
                }
                let mut buf = Vec::new();
                for f in &frames {
                    let got = read_frame(&mut r, encoding, &mut buf).unwrap();
                    prop_assert_eq!(got.as_ref(), Some(f));
                }
                prop_assert!(read_frame(&mut r, encoding, &mut buf).unwrap().is_none());
                // A stream cut anywhere inside the last frame is an error, never a frame.
                if let Some(last) = frames.last() {
                    let mut one = Vec::new();
                    write_frame(&mut one, encoding, last, &mut scratch).unwrap();
                    for cut in 1..one.len() {
                        let got = read_frame(&mut &one[..cut], encoding, &mut buf);
                        prop_assert!(got.is_err(), "{:?} cut at {}", encoding, cut);
                    }
                }
            }
        }

        #[test]
        fn any_bytes_decode_to_what_they_encode(body in proptest::collection::vec(any::<u8>(), 0..64)) {
            if let Ok(f) = Frame::decode(&body) {
                let mut again = Vec::new();
                f.encode(&mut again);
                prop_assert_eq!(&again[4..], &body[..]);
            }
            // And no bytes panic the RESP reader.
            let _ = read_frame(&mut &body[..], Encoding::Resp, &mut Vec::new());
        }
    }

    #[test]
    fn a_message_written_in_place_reads_back_as_its_frame() {
        let msg = verso_ncc::Msg::DecideAck {
            txn: verso_ncc::TxnId { client: 3, seq: 9 },
        };
        for encoding in [Encoding::Binary, Encoding::Resp] {
            let mut stream = Vec::new();
            write_msg(&mut stream, encoding, 3, &msg, &mut Vec::new()).unwrap();
            let mut bytes = Vec::new();
            msg.encode_as(encoding, &mut bytes);
            let got = read_frame(&mut &stream[..], encoding, &mut Vec::new()).unwrap();
            assert_eq!(got, Some(Frame::Msg { party: 3, bytes }));
            for party in [0, 9, 10, 4_000_000_000, u32::MAX] {
                let mut stream = Vec::new();
                write_msg(&mut stream, encoding, party, &msg, &mut Vec::new()).unwrap();
                let mut body = Vec::new();
                msg.encode_as(encoding, &mut body);
                assert_eq!(msg_frame_len(encoding, party, body.len()), stream.len());
            }
        }
    }

    #[test]
    fn a_resp_frame_is_what_a_redis_client_sends() {
        let msg = verso_ncc::Msg::DecideAck {
            txn: verso_ncc::TxnId { client: 3, seq: 9 },
        };
        let mut stream = Vec::new();
        write_msg(&mut stream, Encoding::Resp, 3, &msg, &mut Vec::new()).unwrap();
        assert_eq!(
            stream,
            b"*3\r\n$3\r\nMSG\r\n$1\r\n3\r\n*3\r\n$1\r\n6\r\n$1\r\n3\r\n$1\r\n9\r\n"
        );
    }

    #[test]
    fn an_oversized_frame_is_refused_before_reading_it() {
        let bytes = (MAX_FRAME as u32 + 1).to_le_bytes();
        let err = read_frame(&mut &bytes[..], Encoding::Binary, &mut Vec::new()).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
        let huge = format!("*2\r\n$3\r\nCTL\r\n${}\r\n", MAX_FRAME + 1);
        let err = read_frame(&mut huge.as_bytes(), Encoding::Resp, &mut Vec::new()).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
    }

    #[test]
    fn a_message_hidden_in_a_resp_control_frame_is_refused() {
        let mut body = Vec::new();
        Frame::Msg {
            party: 1,
            bytes: vec![],
        }
        .encode(&mut body);
        let mut stream = format!("*2\r\n$3\r\nCTL\r\n${}\r\n", body.len() - 4).into_bytes();
        stream.extend_from_slice(&body[4..]);
        stream.extend_from_slice(b"\r\n");
        let err = read_frame(&mut &stream[..], Encoding::Resp, &mut Vec::new()).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
    }
}
