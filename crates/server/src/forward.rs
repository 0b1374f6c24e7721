//! A backup relays a client's connection to the primary, so clients need not know which
//! replica leads (ARCHITECTURE.md, "Replication").
//!
//! From the first command a backup cannot serve itself (a data command, MULTI, WATCH...;
//! [`Session::forward_target`](crate::session::Session::forward_target)), the connection is
//! a relay: the worker opens one connection to the primary's client address, replays what
//! the client set on this one (AUTH, HELLO, SELECT, CLIENT SETNAME) and swallows those
//! replies, then sends that command and every later one as they come, and copies the
//! primary's replies back byte for byte. The primary runs them exactly as if the client had
//! connected to it (transactions, WATCH, WAIT, blocking included). If the primary's
//! connection fails or closes, so does the client's: like any lost connection, its last
//! commands may or may not have taken effect; it reconnects (to any replica) and goes on.
//!
//! Free of the event loop: [`Upstream`] holds bytes both ways and a mio stream the worker
//! registers; [`reply_len`] frames the replies to swallow.

use std::io::{ErrorKind, Read, Write};
use std::net::SocketAddr;

use mio::net::TcpStream;

/// Bytes read from the primary at once.
const READ_CHUNK_BYTES: usize = 64 << 10;

/// The primary's side of a relayed connection.
pub(crate) struct Upstream {
    pub(crate) stream: TcpStream,
    /// The primary it was opened to: once another replica leads, the relay is stale.
    pub(crate) primary: SocketAddr,
    /// Requests not yet written to the primary, from `out[written..]`.
    out: Vec<u8>,
    written: usize,
    /// Replies of the replayed set-up commands still to swallow.
    skip: usize,
    /// Bytes of a reply being swallowed that arrived so far (replies may come in pieces).
    pending: Vec<u8>,
    /// The primary closed its side.
    pub(crate) closed: bool,
}

/// What an [`Upstream`] event produced.
pub(crate) enum Relay {
    /// Bytes to pass to the client (possibly none).
    Replies,
    /// The primary's connection failed or closed: close the client's.
    Gone,
}

impl Upstream {
    /// Starts connecting to `primary` (non-blocking); `setup` are the commands that give
    /// the new connection this one's state, their replies swallowed.
    pub(crate) fn connect(primary: SocketAddr, setup: &[Vec<Vec<u8>>]) -> std::io::Result<Self> {
        let stream = TcpStream::connect(primary)?;
        let _ = stream.set_nodelay(true);
        let mut out = Vec::new();
        for args in setup {
            encode_request(args, &mut out);
        }
        Ok(Upstream {
            stream,
            primary,
            out,
            written: 0,
            skip: setup.len(),
            pending: Vec::new(),
            closed: false,
        })
    }

    /// Queues one request for the primary.
    pub(crate) fn push(&mut self, args: &[Vec<u8>]) {
        encode_request(args, &mut self.out);
    }

    /// Bytes queued and not yet written.
    pub(crate) fn queued(&self) -> usize {
        self.out.len() - self.written
    }

    /// Writes what the socket takes. `Err` when the connection failed.
    pub(crate) fn flush(&mut self) -> std::io::Result<()> {
        while self.written < self.out.len() {
            match self.stream.write(&self.out[self.written..]) {
                Ok(0) => return Err(ErrorKind::WriteZero.into()),
                Ok(n) => self.written += n,
                // Not connected yet, or the socket is full: the writable event comes back.
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::NotConnected => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
        if self.written == self.out.len() {
            self.out.clear();
            self.written = 0;
        }
        Ok(())
    }

    /// Reads what the primary sent until the socket is drained, appending the replies for
    /// the client to `to_client` (after swallowing the set-up replies).
    pub(crate) fn read_into(&mut self, to_client: &mut Vec<u8>) -> Relay {
        let mut chunk = vec![0u8; READ_CHUNK_BYTES];
        loop {
            match self.stream.read(&mut chunk) {
                Ok(0) => {
                    self.closed = true;
                    return Relay::Gone;
                }
                Ok(n) => self.take(&chunk[..n], to_client),
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Relay::Replies,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(_) => return Relay::Gone,
            }
        }
    }

    fn take(&mut self, bytes: &[u8], to_client: &mut Vec<u8>) {
        if self.skip == 0 {
            to_client.extend_from_slice(bytes);
            return;
        }
        self.pending.extend_from_slice(bytes);
        let mut at = 0;
        while self.skip > 0 {
            let Some(len) = reply_len(&self.pending[at..]) else {
                break; // incomplete: wait for more
            };
            at += len;
            self.skip -= 1;
        }
        if self.skip == 0 {
            to_client.extend_from_slice(&self.pending[at..]);
            self.pending = Vec::new();
        } else {
            self.pending.drain(..at);
        }
    }
}

/// A request as a RESP multibulk array.
fn encode_request(args: &[Vec<u8>], out: &mut Vec<u8>) {
    out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
}

/// The length of the first complete RESP2/RESP3 reply in `buf`, or `None` if it is not
/// all there yet (or is not a reply this server sends: then the relay never completes the
/// swallow, and the client's read times out, rather than mis-framing).
pub(crate) fn reply_len(buf: &[u8]) -> Option<usize> {
    let line_end = buf.windows(2).position(|w| w == b"\r\n")?;
    let head = *buf.first()?;
    let number = || -> Option<i64> { std::str::from_utf8(&buf[1..line_end]).ok()?.parse().ok() };
    let after_line = line_end + 2;
    match head {
        b'+' | b'-' | b':' | b'_' | b',' | b'#' | b'(' => Some(after_line),
        b'$' | b'!' | b'=' => {
            let n = number()?;
            if n < 0 {
                return Some(after_line); // a null bulk string
            }
            let end = after_line.checked_add(n as usize)?.checked_add(2)?;
            (buf.len() >= end).then_some(end)
        }
        b'*' | b'~' | b'>' | b'%' | b'|' => {
            let n = number()?;
            if n < 0 {
                return Some(after_line); // a null array
            }
            let items = if matches!(head, b'%' | b'|') {
                2 * n
            } else {
                n
            };
            let mut at = after_line;
            for _ in 0..items {
                at += reply_len(&buf[at..])?;
            }
            Some(at)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resp::{Reply, Version};

    fn encoded(r: &Reply, v: Version) -> Vec<u8> {
        let mut out = Vec::new();
        r.encode(v, &mut out);
        out
    }

    /// Every reply the server can encode is framed exactly, whole or cut anywhere.
    #[test]
    fn reply_len_frames_what_the_server_encodes() {
        let replies = [
            Reply::ok(),
            Reply::err("x"),
            Reply::Integer(-42),
            Reply::Nil,
            Reply::Bulk(b"a\r\nb".to_vec()),
            Reply::Array(vec![
                Reply::Bulk(b"k".to_vec()),
                Reply::Nil,
                Reply::Array(vec![Reply::Integer(1), Reply::ok()]),
                Reply::Array(Vec::new()),
            ]),
            Reply::Verbatim("line one\r\nline two".into()),
        ];
        for v in [Version::Resp2, Version::Resp3] {
            for r in &replies {
                let bytes = encoded(r, v);
                assert_eq!(reply_len(&bytes), Some(bytes.len()), "{r:?} in {v:?}");
                for cut in 0..bytes.len() {
                    assert_eq!(reply_len(&bytes[..cut]), None, "{r:?} cut at {cut}");
                }
                let mut two = bytes.clone();
                two.extend_from_slice(b"+NEXT\r\n");
                assert_eq!(reply_len(&two), Some(bytes.len()));
            }
        }
    }

    /// Set-up replies are swallowed however the bytes arrive; everything after passes.
    #[test]
    fn setup_replies_are_swallowed_across_reads() {
        let stream_bytes = b"+OK\r\n$3\r\nabc\r\n:7\r\n*1\r\n$1\r\nx\r\n".to_vec();
        for cut in 0..=stream_bytes.len() {
            let mut u = Upstream {
                stream: dummy_stream(),
                primary: "127.0.0.1:1".parse().expect("an address"),
                out: Vec::new(),
                written: 0,
                skip: 2,
                pending: Vec::new(),
                closed: false,
            };
            let mut client = Vec::new();
            u.take(&stream_bytes[..cut], &mut client);
            u.take(&stream_bytes[cut..], &mut client);
            assert_eq!(client, b":7\r\n*1\r\n$1\r\nx\r\n", "cut at {cut}");
            assert_eq!(u.skip, 0);
        }
    }

    fn dummy_stream() -> TcpStream {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let s = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        TcpStream::from_std(s)
    }
}
