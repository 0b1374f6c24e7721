//! What a redo log holds: a header, committed write sets, and epoch marks.
//!
//! Each record is one frame (`frame.rs`). A write set is self-contained (table id, key, value or
//! tombstone, commit timestamp, epoch): the same bytes can later feed a replica.

use crate::frame::{append_frame, put_bytes, put_u32, put_u64, Fields, Malformed};

/// First bytes of every log file's header record.
pub const LOG_MAGIC: [u8; 8] = *b"VERSOLOG";
/// Version of the log format this build writes and reads.
pub const LOG_FORMAT_VERSION: u32 = 1;

const KIND_HEADER: u8 = 1;
const KIND_TXN: u8 = 2;
const KIND_MARK: u8 = 3;
const KIND_PAD: u8 = 4;

const OP_PUT: u8 = 0;
const OP_DELETE: u8 = 1;

/// Identity of a log file, repeated in its first record so a renamed file is noticed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LogHeader {
    pub format_version: u32,
    /// The run of the database that wrote it (each open after a recovery starts a new one).
    pub generation: u64,
    /// Which worker log (0-based) within the generation.
    pub log: u32,
    /// Position in that log's sequence of files (a log rolls over to a new file).
    pub seq: u64,
}

/// One committed write: `value` is `None` for a delete.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Write<'a> {
    pub table: u32,
    pub key: &'a [u8],
    pub value: Option<&'a [u8]>,
}

/// A write as the write path hands it over: (table, key, value or `None` for a delete).
pub type WriteRef<'a> = (u32, &'a [u8], Option<&'a [u8]>);

/// A decoded record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LogRecord<'a> {
    Header(LogHeader),
    /// A committed transaction's writes, in the order they were logged.
    Txn {
        epoch: u64,
        ts: u64,
        writes: Vec<Write<'a>>,
    },
    /// Every transaction of this log with an epoch `<= epoch` precedes this mark.
    Mark {
        epoch: u64,
    },
    /// Filler up to a block boundary (direct I/O writes whole blocks).
    Pad,
}

/// Bytes a transaction record with these writes takes, frame header included.
pub fn txn_record_len<'a>(writes: impl Iterator<Item = (u32, &'a [u8], Option<&'a [u8]>)>) -> u64 {
    let fixed = crate::frame::FRAME_HEADER_LEN as u64 + 1 + 8 + 8 + 4;
    fixed
        + writes
            .map(|(_, k, v)| 4 + 1 + 4 + k.len() as u64 + v.map_or(0, |v| 4 + v.len() as u64))
            .sum::<u64>()
}

pub fn append_header(out: &mut Vec<u8>, h: &LogHeader) {
    append_frame(out, |o| {
        o.push(KIND_HEADER);
        o.extend_from_slice(&LOG_MAGIC);
        put_u32(o, h.format_version);
        put_u64(o, h.generation);
        put_u32(o, h.log);
        put_u64(o, h.seq);
    });
}

/// Appends a transaction record. `writes` must yield at most `u32::MAX` items.
pub fn append_txn<'a>(
    out: &mut Vec<u8>,
    epoch: u64,
    ts: u64,
    writes: impl ExactSizeIterator<Item = (u32, &'a [u8], Option<&'a [u8]>)>,
) {
    append_frame(out, |o| {
        o.push(KIND_TXN);
        put_u64(o, epoch);
        put_u64(o, ts);
        assert!(writes.len() <= u32::MAX as usize);
        put_u32(o, writes.len() as u32);
        for (table, key, value) in writes {
            put_u32(o, table);
            match value {
                Some(v) => {
                    o.push(OP_PUT);
                    put_bytes(o, key);
                    put_bytes(o, v);
                }
                None => {
                    o.push(OP_DELETE);
                    put_bytes(o, key);
                }
            }
        }
    });
}

pub fn append_mark(out: &mut Vec<u8>, epoch: u64) {
    append_frame(out, |o| {
        o.push(KIND_MARK);
        put_u64(o, epoch);
    });
}

/// Appends a padding record so `out.len()` becomes a multiple of `block` (a power of two).
pub fn append_pad_to(out: &mut Vec<u8>, block: usize) {
    assert!(block.is_power_of_two() && block >= 64);
    let rem = out.len() % block;
    if rem == 0 {
        return;
    }
    const PAD_MIN: usize = crate::frame::FRAME_HEADER_LEN + 1;
    let mut len = block - rem;
    if len < PAD_MIN {
        len += block;
    }
    append_frame(out, |o| {
        o.push(KIND_PAD);
        o.resize(o.len() + len - PAD_MIN, 0);
    });
    debug_assert_eq!(out.len() % block, 0);
}

/// Decodes one record's payload (its frame's checksum already matched).
pub fn decode(payload: &[u8]) -> Result<LogRecord<'_>, Malformed> {
    let mut f = Fields::new(payload);
    let record = match f.u8()? {
        KIND_HEADER => {
            if f.take(8)? != LOG_MAGIC {
                return Err(Malformed);
            }
            LogRecord::Header(LogHeader {
                format_version: f.u32()?,
                generation: f.u64()?,
                log: f.u32()?,
                seq: f.u64()?,
            })
        }
        KIND_TXN => {
            let epoch = f.u64()?;
            let ts = f.u64()?;
            let n = f.u32()? as usize;
            // Each write takes at least 9 bytes: a count larger than the payload allows is
            // damage, not a reason to reserve gigabytes.
            if n > payload.len() / 9 {
                return Err(Malformed);
            }
            let mut writes = Vec::with_capacity(n);
            for _ in 0..n {
                let table = f.u32()?;
                let op = f.u8()?;
                let key = f.bytes()?;
                let value = match op {
                    OP_PUT => Some(f.bytes()?),
                    OP_DELETE => None,
                    _ => return Err(Malformed),
                };
                writes.push(Write { table, key, value });
            }
            LogRecord::Txn { epoch, ts, writes }
        }
        KIND_MARK => LogRecord::Mark { epoch: f.u64()? },
        KIND_PAD => {
            f.take(payload.len() - 1)?;
            LogRecord::Pad
        }
        _ => return Err(Malformed),
    };
    if !f.is_empty() {
        return Err(Malformed);
    }
    Ok(record)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::read_frame;

    #[test]
    fn records_round_trip_and_sizes_are_exact() {
        let writes: Vec<WriteRef<'_>> = vec![
            (3, b"k1", Some(b"value")),
            (0, b"", None),
            (7, b"\0k", Some(b"")),
        ];
        let mut out = Vec::new();
        let h = LogHeader {
            format_version: LOG_FORMAT_VERSION,
            generation: 4,
            log: 1,
            seq: 9,
        };
        append_header(&mut out, &h);
        let before = out.len();
        append_txn(&mut out, 12, 99, writes.iter().copied());
        assert_eq!(
            (out.len() - before) as u64,
            txn_record_len(writes.iter().copied())
        );
        append_mark(&mut out, 12);
        let mut at = 0;
        let mut got = Vec::new();
        while at < out.len() {
            let (p, next) = read_frame(&out, at).unwrap();
            got.push(decode(p).unwrap());
            at = next;
        }
        assert_eq!(got[0], LogRecord::Header(h));
        let LogRecord::Txn {
            epoch,
            ts,
            writes: w,
        } = &got[1]
        else {
            panic!("{:?}", got[1])
        };
        assert_eq!((*epoch, *ts, w.len()), (12, 99, 3));
        assert_eq!(w[0].value, Some(&b"value"[..]));
        assert_eq!(w[1].value, None);
        assert_eq!(got[2], LogRecord::Mark { epoch: 12 });
    }
}
