//! RESP2/RESP3 framing (the Redis protocol), free of I/O: [`Parser`] turns bytes a client sent
//! into commands, [`Reply`] turns results into bytes. The network lives elsewhere, so the
//! parser can be fuzzed and tested on byte strings alone.
//!
//! Requests are either *multibulk* (`*<n>\r\n` then `n` bulk strings `$<len>\r\n<bytes>\r\n`,
//! what every client library sends) or *inline* (one line of space-separated words, what a
//! person types into `telnet`). Every length is checked against [`Limits`] before anything is
//! allocated, so a hostile length costs nothing.

use std::fmt;

/// Bounds on what one request may claim or hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Longest bulk string (one argument), in bytes.
    pub bulk_len_max: usize,
    /// Most arguments in one multibulk request.
    pub multibulk_len_max: usize,
    /// Longest inline request line, and the most bytes buffered for one incomplete request.
    pub query_buffer_max: usize,
}

impl Default for Limits {
    /// Redis's defaults: 512 MiB bulk strings (capped here at the engine's 64 MiB value
    /// limit by the server's configuration), 1 M arguments... scaled to this server:
    /// 64 MiB bulk, 1 Mi arguments, 1 GiB query buffer.
    fn default() -> Self {
        Limits {
            bulk_len_max: 64 << 20,
            multibulk_len_max: 1 << 20,
            query_buffer_max: 1 << 30,
        }
    }
}

/// Why a request could not be parsed. The server replies with the message (Redis's wording
/// where Redis has one) and closes the connection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProtocolError {
    /// A length field that is not a number, or is negative where that is not allowed.
    InvalidLength(&'static str),
    /// A bulk string longer than [`Limits::bulk_len_max`].
    BulkTooLong { len: usize, max: usize },
    /// More arguments than [`Limits::multibulk_len_max`].
    TooManyArguments { count: usize, max: usize },
    /// A request line (or an incomplete request) longer than [`Limits::query_buffer_max`].
    QueryTooLong { max: usize },
    /// Bytes where `\r\n` must be.
    MissingCrlf,
    /// A multibulk element that is not a bulk string.
    ExpectedBulk(u8),
    /// Unbalanced quotes in an inline request.
    UnbalancedQuotes,
}

impl fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProtocolError::InvalidLength(what) => write!(f, "Protocol error: invalid {what}"),
            ProtocolError::BulkTooLong { len, max } => {
                write!(f, "Protocol error: invalid bulk length ({len} > {max})")
            }
            ProtocolError::TooManyArguments { count, max } => {
                write!(
                    f,
                    "Protocol error: invalid multibulk length ({count} > {max})"
                )
            }
            ProtocolError::QueryTooLong { max } => {
                write!(
                    f,
                    "Protocol error: too big request (query buffer over {max} bytes)"
                )
            }
            ProtocolError::MissingCrlf => f.write_str("Protocol error: expected '\\r\\n'"),
            ProtocolError::ExpectedBulk(b) => {
                write!(
                    f,
                    "Protocol error: expected '$', got '{}'",
                    char::from(*b).escape_default()
                )
            }
            ProtocolError::UnbalancedQuotes => {
                f.write_str("Protocol error: unbalanced quotes in request")
            }
        }
    }
}

impl std::error::Error for ProtocolError {}

/// Parses requests out of a client's byte stream.
#[derive(Clone, Debug, Default)]
pub struct Parser {
    limits: Limits,
}

/// One parsed request: its arguments (the command name first), and how many bytes it used.
pub type Parsed = (Vec<Vec<u8>>, usize);

/// Arguments kept past this many are freed, not reused, by the next request.
const ARGS_RETAINED_MAX: usize = 64;
/// An argument buffer that grew past this is freed, not reused, by the next request (one large
/// value must not pin its memory for the connection's lifetime).
const ARG_RETAINED_BYTES_MAX: usize = 16 << 10;

/// One request's arguments (the command name first), in buffers reused from request to request,
/// so parsing a request no larger than earlier ones allocates nothing.
/// Invariants: `len <= bufs.len()`; only `bufs[..len]` belong to the current request.
#[derive(Clone, Debug, Default)]
pub struct Args {
    bufs: Vec<Vec<u8>>,
    len: usize,
}

impl Args {
    /// The current request's arguments.
    pub fn as_slice(&self) -> &[Vec<u8>] {
        assert!(self.len <= self.bufs.len());
        &self.bufs[..self.len]
    }

    /// Whether the current request has no arguments.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Forgets the current request, freeing buffers that grew past the retention bounds.
    fn clear(&mut self) {
        assert!(self.len <= self.bufs.len());
        for b in &mut self.bufs[..self.len] {
            if b.capacity() > ARG_RETAINED_BYTES_MAX {
                *b = Vec::new();
            }
        }
        self.bufs.truncate(ARGS_RETAINED_MAX);
        self.len = 0;
    }

    /// Appends an argument, reusing a buffer when one is left from an earlier request.
    fn push(&mut self, bytes: &[u8]) {
        if let Some(b) = self.bufs.get_mut(self.len) {
            b.clear();
            b.extend_from_slice(bytes);
        } else {
            self.bufs.push(bytes.to_vec());
        }
        self.len += 1;
        assert!(self.len <= self.bufs.len());
    }

    /// The current request's arguments, owned (the reused buffers are given up).
    fn into_vec(mut self) -> Vec<Vec<u8>> {
        self.bufs.truncate(self.len);
        self.bufs
    }
}

impl Parser {
    /// A parser enforcing `limits`.
    pub fn new(limits: Limits) -> Self {
        Parser { limits }
    }

    /// The first complete request in `buf`: `Ok(None)` if more bytes are needed (and the
    /// buffer is still within limits). An empty inline line yields an empty argument list.
    pub fn parse(&self, buf: &[u8]) -> Result<Option<Parsed>, ProtocolError> {
        let mut args = Args::default();
        Ok(self
            .parse_into(buf, &mut args)?
            .map(|used| (args.into_vec(), used)))
    }

    /// [`Parser::parse`] into reused buffers: on `Ok(Some(used))` the request's arguments
    /// are in `args` (on anything else `args` holds nothing meaningful).
    pub fn parse_into(&self, buf: &[u8], args: &mut Args) -> Result<Option<usize>, ProtocolError> {
        args.clear();
        match buf.first() {
            None => Ok(None),
            Some(b'*') => self.multibulk(buf, args),
            Some(_) => self.inline(buf, args),
        }
    }

    fn too_long<T>(&self, buf: &[u8]) -> Result<Option<T>, ProtocolError> {
        if buf.len() > self.limits.query_buffer_max {
            Err(ProtocolError::QueryTooLong {
                max: self.limits.query_buffer_max,
            })
        } else {
            Ok(None)
        }
    }

    fn multibulk(&self, buf: &[u8], args: &mut Args) -> Result<Option<usize>, ProtocolError> {
        let Some((count, mut at)) = line_number(buf, 1, "multibulk length")? else {
            return self.too_long(buf);
        };
        if count <= 0 {
            // `*0` and `*-1` are empty requests: skipped, as Redis does.
            return Ok(Some(at));
        }
        let count = count as usize;
        if count > self.limits.multibulk_len_max {
            return Err(ProtocolError::TooManyArguments {
                count,
                max: self.limits.multibulk_len_max,
            });
        }
        // Never trust `count` for an allocation: arguments are stored as they actually arrive.
        for _ in 0..count {
            let Some(&first) = buf.get(at) else {
                return self.too_long(buf);
            };
            if first != b'$' {
                return Err(ProtocolError::ExpectedBulk(first));
            }
            let Some((len, start)) = line_number(buf, at + 1, "bulk length")? else {
                return self.too_long(buf);
            };
            if len < 0 {
                return Err(ProtocolError::InvalidLength("bulk length"));
            }
            let len = len as usize;
            if len > self.limits.bulk_len_max {
                return Err(ProtocolError::BulkTooLong {
                    len,
                    max: self.limits.bulk_len_max,
                });
            }
            let end = start + len;
            if buf.len() < end + 2 {
                return self.too_long(buf);
            }
            if &buf[end..end + 2] != b"\r\n" {
                return Err(ProtocolError::MissingCrlf);
            }
            args.push(&buf[start..end]);
            at = end + 2;
        }
        assert!(args.len == count);
        Ok(Some(at))
    }

    fn inline(&self, buf: &[u8], args: &mut Args) -> Result<Option<usize>, ProtocolError> {
        let Some(nl) = buf.iter().position(|&b| b == b'\n') else {
            return self.too_long(buf);
        };
        if nl > self.limits.query_buffer_max {
            return Err(ProtocolError::QueryTooLong {
                max: self.limits.query_buffer_max,
            });
        }
        let line = buf[..nl].strip_suffix(b"\r").unwrap_or(&buf[..nl]);
        let words = split_inline(line)?;
        if words.len() > self.limits.multibulk_len_max {
            return Err(ProtocolError::TooManyArguments {
                count: words.len(),
                max: self.limits.multibulk_len_max,
            });
        }
        for w in &words {
            args.push(w);
        }
        Ok(Some(nl + 1))
    }
}

/// Reads a decimal line starting at `at` (after the type byte): the number and the index
/// after its `\r\n`, or `None` if the line is not complete yet.
fn line_number(
    buf: &[u8],
    at: usize,
    what: &'static str,
) -> Result<Option<(i64, usize)>, ProtocolError> {
    let rest = buf.get(at..).unwrap_or_default();
    let Some(cr) = rest.iter().position(|&b| b == b'\r') else {
        // A length line is short; a long one without `\r` is garbage, not a slow client.
        return if rest.len() > 32 {
            Err(ProtocolError::InvalidLength(what))
        } else {
            Ok(None)
        };
    };
    if rest.get(cr + 1).is_none() {
        return Ok(None);
    }
    if rest[cr + 1] != b'\n' {
        return Err(ProtocolError::MissingCrlf);
    }
    let digits = &rest[..cr];
    let n = std::str::from_utf8(digits)
        .ok()
        .and_then(|s| s.parse::<i64>().ok())
        .ok_or(ProtocolError::InvalidLength(what))?;
    Ok(Some((n, at + cr + 2)))
}

/// Splits an inline request like Redis's `sdssplitargs`: spaces separate words; double
/// quotes allow spaces and `\n`, `\r`, `\t`, `\\`, `\"`, `\xHH` escapes; single quotes
/// allow spaces and `\'`.
fn split_inline(line: &[u8]) -> Result<Vec<Vec<u8>>, ProtocolError> {
    let mut args = Vec::new();
    let mut i = 0;
    while i < line.len() {
        while i < line.len() && line[i].is_ascii_whitespace() {
            i += 1;
        }
        if i == line.len() {
            break;
        }
        let mut word = Vec::new();
        match line[i] {
            b'"' => {
                i += 1;
                loop {
                    let Some(&c) = line.get(i) else {
                        return Err(ProtocolError::UnbalancedQuotes);
                    };
                    i += 1;
                    match c {
                        b'"' => break,
                        b'\\' => {
                            let Some(&e) = line.get(i) else {
                                return Err(ProtocolError::UnbalancedQuotes);
                            };
                            i += 1;
                            match e {
                                b'n' => word.push(b'\n'),
                                b'r' => word.push(b'\r'),
                                b't' => word.push(b'\t'),
                                b'b' => word.push(8),
                                b'a' => word.push(7),
                                b'x' => {
                                    let hex = line.get(i..i + 2).and_then(|h| {
                                        std::str::from_utf8(h)
                                            .ok()
                                            .and_then(|h| u8::from_str_radix(h, 16).ok())
                                    });
                                    match hex {
                                        Some(b) => {
                                            word.push(b);
                                            i += 2;
                                        }
                                        None => word.push(b'x'),
                                    }
                                }
                                other => word.push(other),
                            }
                        }
                        other => word.push(other),
                    }
                }
                // A closing quote must end the word.
                if line.get(i).is_some_and(|c| !c.is_ascii_whitespace()) {
                    return Err(ProtocolError::UnbalancedQuotes);
                }
            }
            b'\'' => {
                i += 1;
                loop {
                    let Some(&c) = line.get(i) else {
                        return Err(ProtocolError::UnbalancedQuotes);
                    };
                    i += 1;
                    match c {
                        b'\'' => break,
                        b'\\' if line.get(i) == Some(&b'\'') => {
                            word.push(b'\'');
                            i += 1;
                        }
                        other => word.push(other),
                    }
                }
                if line.get(i).is_some_and(|c| !c.is_ascii_whitespace()) {
                    return Err(ProtocolError::UnbalancedQuotes);
                }
            }
            _ => {
                while i < line.len() && !line[i].is_ascii_whitespace() {
                    word.push(line[i]);
                    i += 1;
                }
            }
        }
        args.push(word);
    }
    Ok(args)
}

/// Which protocol version a connection speaks (`HELLO 3` switches to RESP3).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Version {
    /// RESP2, every connection's start.
    #[default]
    Resp2,
    /// RESP3.
    Resp3,
}

/// A reply, encoded for the connection's protocol version.
#[derive(Clone, Debug, PartialEq)]
pub enum Reply {
    /// `+OK`.
    Simple(String),
    /// `-ERR ...` (the text includes its code: "ERR", "WRONGTYPE", ...).
    Error(String),
    /// `:<n>`.
    Integer(i64),
    /// A bulk string.
    Bulk(Vec<u8>),
    /// The null reply (`$-1` in RESP2, `_` in RESP3).
    Nil,
    /// An array (`*-1` in RESP2 for `NilArray`).
    Array(Vec<Reply>),
    /// A null array (`*-1` in RESP2, `_` in RESP3): EXEC after a failed WATCH.
    NilArray,
    /// A map (RESP3), sent as a flat array of pairs under RESP2.
    Map(Vec<(Reply, Reply)>),
    /// A set (RESP3 `~`), sent as an array under RESP2.
    Set(Vec<Reply>),
    /// An array of bulk strings already encoded (the same bytes in RESP2 and RESP3), built
    /// by [`BulkArray`] for replies of many elements (LRANGE) without a `Reply` per element.
    Encoded(Vec<u8>),
    /// Pairs (HRANDFIELD ... WITHVALUES, ZRANGE ... WITHSCORES): an array of two-element
    /// arrays in RESP3, one flat array in RESP2, as Redis 7 sends them.
    Pairs(Vec<(Reply, Reply)>),
    /// A double (RESP3 `,`), sent as a bulk string under RESP2.
    Double(f64),
    /// A boolean (RESP3 `#`), sent as 1/0 under RESP2.
    Boolean(bool),
    /// A verbatim string (RESP3 `=`, format "txt"), a bulk string under RESP2.
    Verbatim(String),
}

impl Reply {
    /// `+OK`.
    pub fn ok() -> Reply {
        Reply::Simple("OK".into())
    }

    /// `-ERR <msg>`.
    pub fn err(msg: impl fmt::Display) -> Reply {
        Reply::Error(format!("ERR {msg}"))
    }

    /// Appends the encoding of `self` for `version` to `out`.
    pub fn encode(&self, version: Version, out: &mut Vec<u8>) {
        let v3 = version == Version::Resp3;
        match self {
            Reply::Simple(s) => line(out, b'+', s.as_bytes()),
            Reply::Error(s) => line(out, b'-', s.as_bytes()),
            Reply::Integer(n) => header(out, b':', *n),
            Reply::Bulk(b) => bulk(out, b),
            Reply::Nil if v3 => out.extend_from_slice(b"_\r\n"),
            Reply::Nil => out.extend_from_slice(b"$-1\r\n"),
            Reply::NilArray if v3 => out.extend_from_slice(b"_\r\n"),
            Reply::NilArray => out.extend_from_slice(b"*-1\r\n"),
            Reply::Array(items) => {
                header(out, b'*', items.len() as i64);
                for item in items {
                    item.encode(version, out);
                }
            }
            Reply::Pairs(pairs) if v3 => {
                header(out, b'*', pairs.len() as i64);
                for (a, b) in pairs {
                    header(out, b'*', 2);
                    a.encode(version, out);
                    b.encode(version, out);
                }
            }
            Reply::Pairs(pairs) => {
                header(out, b'*', 2 * pairs.len() as i64);
                for (a, b) in pairs {
                    a.encode(version, out);
                    b.encode(version, out);
                }
            }
            Reply::Encoded(bytes) => out.extend_from_slice(bytes),
            Reply::Set(items) => {
                header(out, if v3 { b'~' } else { b'*' }, items.len() as i64);
                for item in items {
                    item.encode(version, out);
                }
            }
            Reply::Map(pairs) => {
                if v3 {
                    header(out, b'%', pairs.len() as i64);
                } else {
                    header(out, b'*', 2 * pairs.len() as i64);
                }
                for (k, v) in pairs {
                    k.encode(version, out);
                    v.encode(version, out);
                }
            }
            Reply::Double(d) if v3 => line(out, b',', format_double(*d).as_bytes()),
            Reply::Double(d) => bulk(out, format_double(*d).as_bytes()),
            Reply::Boolean(b) if v3 => line(out, b'#', if *b { b"t" } else { b"f" }),
            Reply::Boolean(b) => line(out, b':', if *b { b"1" } else { b"0" }),
            Reply::Verbatim(s) if v3 => {
                header(out, b'=', s.len() as i64 + 4);
                out.extend_from_slice(b"txt:");
                out.extend_from_slice(s.as_bytes());
                out.extend_from_slice(b"\r\n");
            }
            Reply::Verbatim(s) => bulk(out, s.as_bytes()),
        }
    }
}

/// Builds [`Reply::Encoded`]: an array of `len` bulk strings, pushed one by one.
pub struct BulkArray {
    bytes: Vec<u8>,
    len: usize,
    pushed: usize,
}

impl BulkArray {
    /// An array that will hold exactly `len` elements.
    pub fn with_len(len: usize) -> BulkArray {
        let mut bytes = Vec::with_capacity(16 + len * 16);
        header(&mut bytes, b'*', len as i64);
        BulkArray {
            bytes,
            len,
            pushed: 0,
        }
    }

    pub fn push(&mut self, b: &[u8]) {
        self.pushed += 1;
        bulk(&mut self.bytes, b);
    }

    /// The reply. If the count pushed differs from the one announced, the header is
    /// rewritten to match (a slower path no caller should take).
    pub fn finish(self) -> Reply {
        if self.pushed == self.len {
            return Reply::Encoded(self.bytes);
        }
        let mut old_header = Vec::new();
        header(&mut old_header, b'*', self.len as i64);
        let mut bytes = Vec::with_capacity(self.bytes.len());
        header(&mut bytes, b'*', self.pushed as i64);
        bytes.extend_from_slice(&self.bytes[old_header.len()..]);
        Reply::Encoded(bytes)
    }
}

/// A double as Redis prints it (`%.17g`, shortest form): fixed notation between 1e-4 and
/// 1e17, otherwise `1.5e+20` style, and `inf`, `-inf`, `nan`.
pub fn format_double(d: f64) -> String {
    if d.is_infinite() {
        if d > 0.0 { "inf" } else { "-inf" }.to_string()
    } else if d.is_nan() {
        "nan".to_string()
    } else if d != 0.0 && (d.abs() >= 1e17 || d.abs() < 1e-4) {
        let e = format!("{d:e}");
        let (mantissa, exp) = e.split_once('e').expect("`{:e}` has an exponent");
        let exp: i32 = exp.parse().expect("an integer exponent");
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{mantissa}e{sign}{:02}", exp.abs())
    } else {
        format!("{d}")
    }
}

fn line(out: &mut Vec<u8>, kind: u8, body: &[u8]) {
    out.push(kind);
    // Simple strings and errors must not contain line breaks: a reply never injects one.
    out.extend(
        body.iter()
            .map(|&b| if b == b'\r' || b == b'\n' { b' ' } else { b }),
    );
    out.extend_from_slice(b"\r\n");
}

/// Appends a bulk string (`$<len>\r\n<bytes>\r\n`).
pub fn bulk(out: &mut Vec<u8>, b: &[u8]) {
    out.reserve(b.len() + 16);
    header(out, b'$', b.len() as i64);
    out.extend_from_slice(b);
    out.extend_from_slice(b"\r\n");
}

/// Appends `<kind><n>\r\n` (a length or an integer reply), formatting `n` without allocating.
fn header(out: &mut Vec<u8>, kind: u8, n: i64) {
    // 20 digits hold any u64, and a sign makes 21.
    let mut digits = [0u8; 24];
    let mut at = digits.len();
    let mut rest = n.unsigned_abs();
    loop {
        at -= 1;
        digits[at] = b'0' + (rest % 10) as u8;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    if n < 0 {
        at -= 1;
        digits[at] = b'-';
    }
    assert!(at >= 2, "an i64 has at most 20 characters");
    out.push(kind);
    out.extend_from_slice(&digits[at..]);
    out.extend_from_slice(b"\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn encode_request(args: &[Vec<u8>]) -> Vec<u8> {
        let mut out = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            bulk(&mut out, a);
        }
        out
    }

    proptest! {
        /// Any request a client library would send parses back to its arguments, however
        /// the stream is cut: a prefix is "need more", the whole is the request.
        #[test]
        fn multibulk_round_trips_at_every_cut(
            args in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..40), 1..6),
        ) {
            let wire = encode_request(&args);
            let p = Parser::default();
            for cut in 0..wire.len() {
                prop_assert_eq!(p.parse(&wire[..cut]), Ok(None), "cut at {}", cut);
            }
            let mut two = wire.clone();
            two.extend_from_slice(&wire);
            prop_assert_eq!(p.parse(&two), Ok(Some((args.clone(), wire.len()))));
        }

        /// Parsing request after request into one reused [`Args`] gives what fresh parses
        /// give, whatever sizes came before (buffers are reused, never leaked between requests).
        #[test]
        fn reused_args_parse_like_fresh_ones(
            requests in proptest::collection::vec(
                proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..40), 1..6),
                1..8,
            ),
        ) {
            let p = Parser::default();
            let mut args = Args::default();
            for req in &requests {
                let wire = encode_request(req);
                prop_assert_eq!(p.parse_into(&wire, &mut args), Ok(Some(wire.len())));
                prop_assert_eq!(args.as_slice(), req.as_slice());
                prop_assert!(!args.is_empty());
            }
            prop_assert_eq!(p.parse_into(b"*0\r\n", &mut args), Ok(Some(4)));
            prop_assert!(args.is_empty());
        }

        /// No input panics, and what parses consumed no more than it was given.
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let p = Parser::new(Limits { bulk_len_max: 64, multibulk_len_max: 8, query_buffer_max: 128 });
            if let Ok(Some((_, used))) = p.parse(&bytes) {
                prop_assert!(used <= bytes.len());
            }
        }
    }

    #[test]
    fn inline_requests_split_like_redis() {
        let p = Parser::default();
        let (args, used) = p
            .parse(b"SET k \"a b\\x41\\n\" 'it\\'s'\r\nrest")
            .unwrap()
            .unwrap();
        assert_eq!(used, 27);
        assert_eq!(
            args,
            [
                b"SET".to_vec(),
                b"k".to_vec(),
                b"a bA\n".to_vec(),
                b"it's".to_vec()
            ]
        );
        assert_eq!(p.parse(b"PING\n").unwrap().unwrap().0, [b"PING".to_vec()]);
        assert_eq!(p.parse(b"\r\n").unwrap().unwrap(), (vec![], 2));
        assert_eq!(p.parse(b"GET \"k\n"), Err(ProtocolError::UnbalancedQuotes));
        assert_eq!(
            p.parse(b"GET \"k\"x\n"),
            Err(ProtocolError::UnbalancedQuotes)
        );
    }

    #[test]
    fn hostile_lengths_are_refused_before_allocating() {
        let p = Parser::new(Limits {
            bulk_len_max: 10,
            multibulk_len_max: 3,
            query_buffer_max: 100,
        });
        assert_eq!(
            p.parse(b"*4\r\n"),
            Err(ProtocolError::TooManyArguments { count: 4, max: 3 })
        );
        assert_eq!(
            p.parse(b"*1\r\n$11\r\n"),
            Err(ProtocolError::BulkTooLong { len: 11, max: 10 })
        );
        assert_eq!(
            p.parse(b"*1\r\n$-5\r\n"),
            Err(ProtocolError::InvalidLength("bulk length"))
        );
        assert_eq!(
            p.parse(b"*x\r\n"),
            Err(ProtocolError::InvalidLength("multibulk length"))
        );
        assert_eq!(
            p.parse(b"*1\r\n+OK\r\n"),
            Err(ProtocolError::ExpectedBulk(b'+'))
        );
        assert_eq!(
            p.parse(b"*1\r\n$2\r\nabXY"),
            Err(ProtocolError::MissingCrlf)
        );
        assert_eq!(
            p.parse(&[b'A'; 101]),
            Err(ProtocolError::QueryTooLong { max: 100 })
        );
        assert_eq!(
            p.parse(b"*99999999999999999999999999999999999999"),
            Err(ProtocolError::InvalidLength("multibulk length"))
        );
    }

    #[test]
    fn replies_encode_for_each_version() {
        let enc = |r: &Reply, v| {
            let mut out = Vec::new();
            r.encode(v, &mut out);
            String::from_utf8(out).unwrap()
        };
        use Version::{Resp2, Resp3};
        assert_eq!(enc(&Reply::Nil, Resp2), "$-1\r\n");
        assert_eq!(enc(&Reply::Nil, Resp3), "_\r\n");
        assert_eq!(enc(&Reply::NilArray, Resp2), "*-1\r\n");
        let m = Reply::Map(vec![(Reply::Bulk(b"a".to_vec()), Reply::Integer(1))]);
        assert_eq!(enc(&m, Resp2), "*2\r\n$1\r\na\r\n:1\r\n");
        assert_eq!(enc(&m, Resp3), "%1\r\n$1\r\na\r\n:1\r\n");
        let mut arr = BulkArray::with_len(2);
        arr.push(b"ab");
        arr.push(b"");
        assert_eq!(enc(&arr.finish(), Resp3), "*2\r\n$2\r\nab\r\n$0\r\n\r\n");
        let mut short = BulkArray::with_len(3);
        short.push(b"x");
        assert_eq!(enc(&short.finish(), Resp2), "*1\r\n$1\r\nx\r\n");
        let set = Reply::Set(vec![Reply::Bulk(b"a".to_vec())]);
        assert_eq!(enc(&set, Resp2), "*1\r\n$1\r\na\r\n");
        assert_eq!(enc(&set, Resp3), "~1\r\n$1\r\na\r\n");
        let pairs = Reply::Pairs(vec![(Reply::Bulk(b"a".to_vec()), Reply::Integer(1))]);
        assert_eq!(enc(&pairs, Resp2), "*2\r\n$1\r\na\r\n:1\r\n");
        assert_eq!(enc(&pairs, Resp3), "*1\r\n*2\r\n$1\r\na\r\n:1\r\n");
        assert_eq!(enc(&Reply::Boolean(true), Resp2), ":1\r\n");
        assert_eq!(enc(&Reply::Integer(0), Resp2), ":0\r\n");
        assert_eq!(enc(&Reply::Integer(-42), Resp2), ":-42\r\n");
        assert_eq!(
            enc(&Reply::Integer(i64::MIN), Resp2),
            format!(":{}\r\n", i64::MIN)
        );
        assert_eq!(
            enc(&Reply::Integer(i64::MAX), Resp3),
            format!(":{}\r\n", i64::MAX)
        );
        assert_eq!(enc(&Reply::Bulk(Vec::new()), Resp2), "$0\r\n\r\n");
        assert_eq!(enc(&Reply::Double(1.5), Resp3), ",1.5\r\n");
        assert_eq!(format_double(1e20), "1e+20");
        assert_eq!(format_double(1.5e-5), "1.5e-05");
        assert_eq!(format_double(-0.0001), "-0.0001");
        assert_eq!(format_double(123456.0), "123456");
        assert_eq!(
            enc(&Reply::err("bad\r\nthing"), Resp2),
            "-ERR bad  thing\r\n"
        );
        assert_eq!(
            enc(&Reply::Verbatim("hi".into()), Resp3),
            "=6\r\ntxt:hi\r\n"
        );
    }
}
