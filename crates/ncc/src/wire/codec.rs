//! The primitive fields of a message in its two byte forms. A message's encoder and decoder
//! are written once against [`Sink`] and [`Source`]; the form is the implementation:
//!
//! - binary ([`Writer`], [`Reader`]): little-endian integers, a tag byte per variant, `u32`
//!   counts before lists, a `u32` length before a key's or a value's bytes;
//! - RESP ([`RespWriter`], [`RespReader`]): the same fields in the same order, each a RESP
//!   bulk string holding the decimal number (a key or a value: its bytes), the whole
//!   message one RESP array: what a Redis client library sends as a command
//!   (`*N\r\n$2\r\n42\r\n...`).
//!
//! Both are exact (one byte string per message: decimal without leading zeros or signs,
//! no trailing bytes) and total (errors, never panics), and a count read from the input is
//! checked against the bytes left before anything is reserved.

use super::DecodeError;
use crate::types::{Finished, Key, Op, Ts, TxnId, Value};

/// The smallest binary encodings, for the count checks: a list of `n` items needs at least
/// `n * min` bytes, so a forged count cannot reserve more than the input could fill.
pub(super) const MIN_OP: usize = 5;
pub(super) const MIN_RESULT: usize = 5;
pub(super) const PAIR: usize = 24;
/// A baseline's read: key, value and version.
pub(super) const MIN_READ: usize = 16;
/// A key with a version or a value.
pub(super) const MIN_KEYED: usize = 8;

/// Where a message's fields go.
pub(super) trait Sink {
    fn u8(&mut self, v: u8);
    fn u32(&mut self, v: u32);
    fn u64(&mut self, v: u64);
    /// A byte string: a key's or a value's.
    fn bytes(&mut self, v: &[u8]);

    fn len(&mut self, n: usize) {
        // Messages carry one transaction's requests: far below 4 G entries.
        self.u32(u32::try_from(n).expect("fewer than 2^32 entries in one message"));
    }
    fn bool(&mut self, v: bool) {
        self.u8(u8::from(v));
    }
    fn ts(&mut self, t: Ts) {
        self.u64(t.clk);
        self.u32(t.cid);
    }
    fn txn(&mut self, t: TxnId) {
        self.u32(t.client);
        self.u64(t.seq);
    }
    fn finished(&mut self, f: Finished) {
        self.u64(f.from);
        self.u64(f.below);
    }
    fn op(&mut self, op: &Op) {
        match op {
            Op::Read(k) => {
                self.u8(0);
                self.bytes(k.as_bytes());
            }
            Op::Write(k, v) => {
                self.u8(1);
                self.bytes(k.as_bytes());
                self.bytes(v.as_bytes());
            }
            Op::ReadWrite(k, v) => {
                self.u8(2);
                self.bytes(k.as_bytes());
                self.bytes(v.as_bytes());
            }
        }
    }
    fn ops(&mut self, ops: &[Op]) {
        self.len(ops.len());
        ops.iter().for_each(|op| self.op(op));
    }
    fn opt_u64(&mut self, v: Option<u64>) {
        match v {
            None => self.u8(0),
            Some(v) => {
                self.u8(1);
                self.u64(v);
            }
        }
    }
    fn opt_value(&mut self, v: Option<&Value>) {
        match v {
            None => self.u8(0),
            Some(v) => {
                self.u8(1);
                self.bytes(v.as_bytes());
            }
        }
    }
    fn reads(&mut self, reads: &[(Key, Value, u64)]) {
        self.len(reads.len());
        for (k, v, version) in reads {
            self.bytes(k.as_bytes());
            self.bytes(v.as_bytes());
            self.u64(*version);
        }
    }
    fn versions(&mut self, reads: &[(Key, u64)]) {
        self.len(reads.len());
        for (k, version) in reads {
            self.bytes(k.as_bytes());
            self.u64(*version);
        }
    }
    fn writes(&mut self, writes: &[(Key, Value)]) {
        self.len(writes.len());
        for (k, v) in writes {
            self.bytes(k.as_bytes());
            self.bytes(v.as_bytes());
        }
    }
    fn keys(&mut self, keys: &[Key]) {
        self.len(keys.len());
        keys.iter().for_each(|k| self.bytes(k.as_bytes()));
    }
}

/// Where a message's fields come from.
pub(super) trait Source {
    fn u8(&mut self) -> Result<u8, DecodeError>;
    fn u32(&mut self) -> Result<u32, DecodeError>;
    fn u64(&mut self) -> Result<u64, DecodeError>;
    /// A key's or a value's bytes (copied out by the caller: short ones live in place).
    fn bytes(&mut self) -> Result<&[u8], DecodeError>;
    /// A count of items whose binary form takes at least `min` bytes each.
    fn len(&mut self, min: usize) -> Result<usize, DecodeError>;
    /// Succeeds only if every field was read.
    fn end(self) -> Result<(), DecodeError>;

    fn bool(&mut self) -> Result<bool, DecodeError> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(DecodeError("a boolean is neither 0 nor 1")),
        }
    }
    fn ts(&mut self) -> Result<Ts, DecodeError> {
        Ok(Ts {
            clk: self.u64()?,
            cid: self.u32()?,
        })
    }
    fn txn(&mut self) -> Result<TxnId, DecodeError> {
        Ok(TxnId {
            client: self.u32()?,
            seq: self.u64()?,
        })
    }
    fn finished(&mut self) -> Result<Finished, DecodeError> {
        Ok(Finished {
            from: self.u64()?,
            below: self.u64()?,
        })
    }
    fn key(&mut self) -> Result<Key, DecodeError> {
        Ok(Key::from(self.bytes()?))
    }
    fn value(&mut self) -> Result<Value, DecodeError> {
        Ok(Value::from(self.bytes()?))
    }
    fn op(&mut self) -> Result<Op, DecodeError> {
        Ok(match self.u8()? {
            0 => Op::Read(self.key()?),
            1 => Op::Write(self.key()?, self.value()?),
            2 => Op::ReadWrite(self.key()?, self.value()?),
            _ => return Err(DecodeError("unknown request kind")),
        })
    }
    fn ops(&mut self) -> Result<Vec<Op>, DecodeError> {
        let n = self.len(MIN_OP)?;
        if n > super::OPS_MAX {
            return Err(DecodeError("more requests than a message may carry"));
        }
        (0..n).map(|_| self.op()).collect()
    }
    fn opt_u64(&mut self) -> Result<Option<u64>, DecodeError> {
        Ok(match self.u8()? {
            0 => None,
            1 => Some(self.u64()?),
            _ => return Err(DecodeError("an option is neither 0 nor 1")),
        })
    }
    fn opt_value(&mut self) -> Result<Option<Value>, DecodeError> {
        Ok(match self.u8()? {
            0 => None,
            1 => Some(self.value()?),
            _ => return Err(DecodeError("an option is neither 0 nor 1")),
        })
    }
    fn reads(&mut self) -> Result<Vec<(Key, Value, u64)>, DecodeError> {
        let n = self.len(MIN_READ)?;
        (0..n)
            .map(|_| Ok((self.key()?, self.value()?, self.u64()?)))
            .collect()
    }
    fn versions(&mut self) -> Result<Vec<(Key, u64)>, DecodeError> {
        let n = self.len(MIN_KEYED + 4)?;
        (0..n).map(|_| Ok((self.key()?, self.u64()?))).collect()
    }
    fn writes(&mut self) -> Result<Vec<(Key, Value)>, DecodeError> {
        let n = self.len(MIN_KEYED)?;
        (0..n).map(|_| Ok((self.key()?, self.value()?))).collect()
    }
    fn keys(&mut self) -> Result<Vec<Key>, DecodeError> {
        let n = self.len(4)?;
        (0..n).map(|_| self.key()).collect()
    }
    fn u32s(&mut self) -> Result<Vec<u32>, DecodeError> {
        let n = self.len(4)?;
        (0..n).map(|_| self.u32()).collect()
    }
}

/// The binary form's writer.
pub(super) struct Writer<'a>(pub(super) &'a mut Vec<u8>);

impl Sink for Writer<'_> {
    fn u8(&mut self, v: u8) {
        self.0.push(v);
    }
    fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn bytes(&mut self, v: &[u8]) {
        self.len(v.len());
        self.0.extend_from_slice(v);
    }
}

/// The binary form's reader.
pub(super) struct Reader<'a>(pub(super) &'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        if self.0.len() < n {
            return Err(DecodeError("truncated"));
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }
}

impl Source for Reader<'_> {
    fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.take(1)?[0])
    }
    fn u32(&mut self) -> Result<u32, DecodeError> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes(b.try_into().expect("4 bytes")))
    }
    fn u64(&mut self) -> Result<u64, DecodeError> {
        let b = self.take(8)?;
        Ok(u64::from_le_bytes(b.try_into().expect("8 bytes")))
    }
    fn bytes(&mut self) -> Result<&[u8], DecodeError> {
        let n = self.len(1)?;
        self.take(n)
    }
    fn len(&mut self, min: usize) -> Result<usize, DecodeError> {
        let n = self.u32()? as usize;
        if n.saturating_mul(min) > self.0.len() {
            return Err(DecodeError("a count larger than the message"));
        }
        Ok(n)
    }
    fn end(self) -> Result<(), DecodeError> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(DecodeError("bytes after the end"))
        }
    }
}

/// `v`'s decimal digits: the array and where they begin in it.
fn decimal(mut v: u64) -> ([u8; 20], usize) {
    // Two digits per division, as itoa and Redis's ull2string do: a fair RESP, so that
    // the measured choice between the forms is not decided by a slow formatter.
    const PAIRS: &[u8; 200] = b"0001020304050607080910111213141516171819\
        2021222324252627282930313233343536373839\
        4041424344454647484950515253545556575859\
        6061626364656667686970717273747576777879\
        8081828384858687888990919293949596979899";
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    while v >= 100 {
        let pair = (v % 100) as usize * 2;
        v /= 100;
        at -= 2;
        digits[at..at + 2].copy_from_slice(&PAIRS[pair..pair + 2]);
    }
    if v >= 10 {
        let pair = v as usize * 2;
        at -= 2;
        digits[at..at + 2].copy_from_slice(&PAIRS[pair..pair + 2]);
    } else {
        at -= 1;
        digits[at] = b'0' + v as u8;
    }
    (digits, at)
}

/// Appends `v` in decimal, as RESP writes numbers.
pub fn push_decimal(out: &mut Vec<u8>, v: u64) {
    let (digits, at) = decimal(v);
    out.extend_from_slice(&digits[at..]);
}

/// Parses canonical decimal (what [`push_decimal`] writes: no sign, no leading zero but
/// in "0" itself, at most `u64::MAX`).
pub fn parse_decimal(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() || digits.len() > 20 || (digits[0] == b'0' && digits.len() > 1) {
        return None;
    }
    digits.iter().try_fold(0u64, |acc, &d| {
        if !d.is_ascii_digit() {
            return None;
        }
        acc.checked_mul(10)?.checked_add(u64::from(d - b'0'))
    })
}

/// The smallest RESP field: an empty key or value, `$0\r\n\r\n`.
const MIN_RESP_FIELD: usize = 6;

/// Counts a message's fields, for the RESP array header that precedes them.
pub(super) struct FieldCount(pub(super) u64);

impl Sink for FieldCount {
    fn u8(&mut self, _: u8) {
        self.0 += 1;
    }
    fn u32(&mut self, _: u32) {
        self.0 += 1;
    }
    fn u64(&mut self, _: u64) {
        self.0 += 1;
    }
    fn bytes(&mut self, _: &[u8]) {
        self.0 += 1;
    }
}

/// The RESP form's writer: the array header with the count from [`FieldCount`] (a first,
/// cheap pass over the message), then each field as a bulk string.
pub(super) struct RespWriter<'a> {
    out: &'a mut Vec<u8>,
}

impl<'a> RespWriter<'a> {
    pub(super) fn new(out: &'a mut Vec<u8>, fields: u64) -> Self {
        out.push(b'*');
        push_decimal(out, fields);
        out.extend_from_slice(b"\r\n");
        RespWriter { out }
    }

    fn field(&mut self, v: u64) {
        let (digits, at) = decimal(v);
        let n = digits.len() - at;
        self.out.reserve(n + 7);
        self.out.push(b'$');
        if n >= 10 {
            self.out.push(b'0' + (n / 10) as u8);
        }
        self.out.push(b'0' + (n % 10) as u8);
        self.out.extend_from_slice(b"\r\n");
        self.out.extend_from_slice(&digits[at..]);
        self.out.extend_from_slice(b"\r\n");
    }
}

impl Sink for RespWriter<'_> {
    fn u8(&mut self, v: u8) {
        self.field(u64::from(v));
    }
    fn u32(&mut self, v: u32) {
        self.field(u64::from(v));
    }
    fn u64(&mut self, v: u64) {
        self.field(v);
    }
    fn bytes(&mut self, v: &[u8]) {
        self.out.push(b'$');
        push_decimal(self.out, v.len() as u64);
        self.out.extend_from_slice(b"\r\n");
        self.out.extend_from_slice(v);
        self.out.extend_from_slice(b"\r\n");
    }
}

/// The RESP form's reader.
pub(super) struct RespReader<'a> {
    rest: &'a [u8],
    fields_left: usize,
}

/// Splits `bytes` after the first `\r\n`, returning what came before it; at most `max`
/// bytes are looked at.
fn line(bytes: &[u8], max: usize) -> Result<(&[u8], &[u8]), DecodeError> {
    let window = &bytes[..bytes.len().min(max + 2)];
    let end = window
        .windows(2)
        .position(|w| w == b"\r\n")
        .ok_or(DecodeError("a RESP line without its end"))?;
    Ok((&bytes[..end], &bytes[end + 2..]))
}

impl<'a> RespReader<'a> {
    /// Reads the array header; the fields follow.
    pub(super) fn new(bytes: &'a [u8]) -> Result<Self, DecodeError> {
        let Some(rest) = bytes.strip_prefix(b"*") else {
            return Err(DecodeError("not a RESP array"));
        };
        let (count, rest) = line(rest, 20)?;
        let count = parse_decimal(count).ok_or(DecodeError("a malformed RESP count"))?;
        if count.saturating_mul(MIN_RESP_FIELD as u64) > rest.len() as u64 {
            return Err(DecodeError("a count larger than the message"));
        }
        Ok(RespReader {
            rest,
            fields_left: count as usize,
        })
    }

    /// The next bulk string's bytes. A number's field is at most 20 digits, so its length
    /// has at most 2; a key or a value may be as long as the message.
    fn raw_field(&mut self, len_digits_max: usize) -> Result<&'a [u8], DecodeError> {
        if self.fields_left == 0 {
            return Err(DecodeError("truncated"));
        }
        let Some(rest) = self.rest.strip_prefix(b"$") else {
            return Err(DecodeError("a RESP field that is not a bulk string"));
        };
        let (len, rest) = line(rest, len_digits_max)?;
        let len = parse_decimal(len).ok_or(DecodeError("a malformed RESP length"))?;
        let len = usize::try_from(len).map_err(|_| DecodeError("truncated"))?;
        if rest.len() < len.saturating_add(2) || &rest[len..len + 2] != b"\r\n" {
            return Err(DecodeError("truncated"));
        }
        self.rest = &rest[len + 2..];
        self.fields_left -= 1;
        Ok(&rest[..len])
    }

    fn field(&mut self) -> Result<u64, DecodeError> {
        let digits = self.raw_field(2)?;
        parse_decimal(digits).ok_or(DecodeError("a field that is not a number"))
    }
}

impl Source for RespReader<'_> {
    fn u8(&mut self) -> Result<u8, DecodeError> {
        u8::try_from(self.field()?).map_err(|_| DecodeError("a field out of range"))
    }
    fn u32(&mut self) -> Result<u32, DecodeError> {
        u32::try_from(self.field()?).map_err(|_| DecodeError("a field out of range"))
    }
    fn u64(&mut self) -> Result<u64, DecodeError> {
        self.field()
    }
    fn bytes(&mut self) -> Result<&[u8], DecodeError> {
        self.raw_field(20)
    }
    fn len(&mut self, _min: usize) -> Result<usize, DecodeError> {
        // Every item is at least one field: the header's count, itself bounded by the
        // bytes, bounds what a forged count can reserve.
        let n = self.u32()? as usize;
        if n > self.fields_left {
            return Err(DecodeError("a count larger than the message"));
        }
        Ok(n)
    }
    fn end(self) -> Result<(), DecodeError> {
        if self.fields_left == 0 && self.rest.is_empty() {
            Ok(())
        } else {
            Err(DecodeError("bytes after the end"))
        }
    }
}
