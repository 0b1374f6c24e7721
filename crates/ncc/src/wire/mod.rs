//! Bytes for the protocols' messages, so that real processes can carry them (issue 19: the
//! state machines stay free of I/O; the encoding is pure and lives beside the types it
//! encodes). Two forms of the same fields ([`Encoding`]): a compact binary one and RESP, the
//! Redis protocol's arrays, measured against each other in BENCHMARKS.md ("Binary or RESP
//! between client and server"); `codec.rs` has the primitives of both.
//!
//! Decoding is total: any input gives a message or a [`DecodeError`], never a panic nor an
//! allocation larger than the input allows (a count is checked against the bytes left
//! before anything is reserved), since a message arrives from the network; and it is exact:
//! trailing bytes are refused, so no two byte strings decode to one message (the fuzz
//! target `txn_wire` checks that whatever decodes re-encodes to its input, in both forms).

mod codec;

pub use codec::{parse_decimal, push_decimal};

use crate::baseline::BMsg;
use crate::types::{ExecResult, GroupNote, Msg, OpReply, RecordState};
use codec::{
    FieldCount, Reader, RespReader, RespWriter, Sink, Source, Writer, MIN_KEYED, MIN_RESULT, PAIR,
};

/// The most requests one message carries (an `Execute`: one transaction's requests at one
/// server, in one shot); a decoder refuses more. A decoded request takes some 70 bytes of
/// memory against 5 on the wire, so this bounds what a forged message can make a server
/// allocate (1.2 MB).
pub const OPS_MAX: usize = 16_384;

/// The most bytes one result of an answer takes in either form, besides its value's own
/// (binary 34, RESP at most 132): a server keeping its answers within a frame counts this
/// much per result (`crate::MessageLimits`).
pub const RESULT_OVERHEAD_MAX: usize = 160;

/// Why bytes are not a message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DecodeError(pub &'static str);

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "malformed transaction message: {}", self.0)
    }
}

impl std::error::Error for DecodeError {}

/// A message's byte form.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Encoding {
    /// Little-endian integers, a tag byte per variant, `u32` counts before lists.
    #[default]
    Binary,
    /// One RESP array of bulk strings, a number's field in decimal and a key or a value as
    /// its bytes: a Redis command's shape.
    Resp,
}

impl std::str::FromStr for Encoding {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "binary" => Ok(Encoding::Binary),
            "resp" => Ok(Encoding::Resp),
            _ => Err(format!("unknown wire encoding {s:?} (binary or resp)")),
        }
    }
}

/// A message that has a byte form.
pub trait Wire: Sized {
    /// Appends the message in `encoding`.
    fn encode_as(&self, encoding: Encoding, out: &mut Vec<u8>);
    /// Reads exactly one message in `encoding`.
    fn decode_as(encoding: Encoding, bytes: &[u8]) -> Result<Self, DecodeError>;

    /// Appends the binary form.
    fn encode(&self, out: &mut Vec<u8>) {
        self.encode_as(Encoding::Binary, out);
    }
    /// Reads the binary form.
    fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        Self::decode_as(Encoding::Binary, bytes)
    }
}

/// `Wire` for a message type from its generic field writer and reader: the two forms can
/// differ only in how a field is spelled, never in which fields there are.
macro_rules! wire_from_fields {
    ($ty:ty, $put:ident, $get:ident) => {
        impl Wire for $ty {
            fn encode_as(&self, encoding: Encoding, out: &mut Vec<u8>) {
                match encoding {
                    Encoding::Binary => $put(self, &mut Writer(out)),
                    Encoding::Resp => {
                        let mut count = FieldCount(0);
                        $put(self, &mut count);
                        $put(self, &mut RespWriter::new(out, count.0));
                    }
                }
            }
            fn decode_as(encoding: Encoding, bytes: &[u8]) -> Result<Self, DecodeError> {
                match encoding {
                    Encoding::Binary => {
                        let mut r = Reader(bytes);
                        let msg = $get(&mut r)?;
                        r.end()?;
                        Ok(msg)
                    }
                    Encoding::Resp => {
                        let mut r = RespReader::new(bytes)?;
                        let msg = $get(&mut r)?;
                        r.end()?;
                        Ok(msg)
                    }
                }
            }
        }
    };
}

wire_from_fields!(Msg, put_msg, get_msg);
wire_from_fields!(BMsg, put_bmsg, get_bmsg);

fn put_msg<S: Sink>(msg: &Msg, w: &mut S) {
    match msg {
        Msg::Execute {
            txn,
            ts,
            shot,
            ops,
            t_ro,
            coord,
            cohorts,
            done,
        } => {
            w.u8(0);
            w.txn(*txn);
            w.ts(*ts);
            w.u32(*shot);
            w.ops(ops);
            w.opt_u64(*t_ro);
            w.u32(*coord);
            w.finished(*done);
            match cohorts {
                None => w.u8(0),
                Some(c) => {
                    w.u8(1);
                    w.len(c.len());
                    c.iter().for_each(|&s| w.u32(s));
                }
            }
        }
        Msg::LastShotAck { txn, ok } => {
            w.u8(1);
            w.txn(*txn);
            w.bool(*ok);
        }
        Msg::ExecReply {
            txn,
            results,
            ts_server,
            latest,
        } => {
            w.u8(2);
            w.txn(*txn);
            w.len(results.len());
            for (i, r) in results {
                w.u32(*i);
                match r {
                    ExecResult::Done(reply) => {
                        w.u8(0);
                        w.opt_value(reply.value.as_ref());
                        w.ts(reply.tw);
                        w.ts(reply.tr);
                    }
                    ExecResult::EarlyAbort => w.u8(1),
                    ExecResult::RoAbort => w.u8(2),
                }
            }
            w.u64(*ts_server);
            w.u64(*latest);
        }
        Msg::SmartRetry { txn, to } => {
            w.u8(3);
            w.txn(*txn);
            w.ts(*to);
        }
        Msg::SmartRetryReply { txn, ok } => {
            w.u8(4);
            w.txn(*txn);
            w.bool(*ok);
        }
        Msg::Decide { txn, commit } => {
            w.u8(5);
            w.txn(*txn);
            w.bool(*commit);
        }
        Msg::DecideAck { txn } => {
            w.u8(6);
            w.txn(*txn);
        }
        Msg::Resolve { txn, from } => {
            w.u8(7);
            w.txn(*txn);
            w.u32(*from);
        }
        Msg::GetRecord { txn, from } => {
            w.u8(8);
            w.txn(*txn);
            w.u32(*from);
        }
        Msg::Record { txn, from, record } => {
            w.u8(9);
            w.txn(*txn);
            w.u32(*from);
            match record {
                RecordState::Uncleared => w.u8(0),
                RecordState::Cleared(pairs) => {
                    w.u8(1);
                    w.len(pairs.len());
                    for &(tw, tr) in pairs {
                        w.ts(tw);
                        w.ts(tr);
                    }
                }
                RecordState::Committed => w.u8(2),
                RecordState::Aborted => w.u8(3),
            }
        }
        Msg::RecoverRetry { txn, to, from } => {
            w.u8(10);
            w.txn(*txn);
            w.ts(*to);
            w.u32(*from);
        }
        Msg::RecoverRetryReply { txn, from, ok } => {
            w.u8(11);
            w.txn(*txn);
            w.u32(*from);
            w.bool(*ok);
        }
        Msg::Group(note) => {
            w.u8(12);
            match note {
                GroupNote::ReadsRaised(raised) => {
                    w.u8(0);
                    w.len(raised.len());
                    for (k, tr) in raised {
                        w.bytes(k.as_bytes());
                        w.ts(*tr);
                    }
                }
                GroupNote::FloorPromised(clk) => {
                    w.u8(1);
                    w.u64(*clk);
                }
                GroupNote::FloorApplied => w.u8(2),
            }
        }
    }
}

fn get_msg<R: Source>(r: &mut R) -> Result<Msg, DecodeError> {
    let msg = match r.u8()? {
        0 => {
            let txn = r.txn()?;
            let ts = r.ts()?;
            let shot = r.u32()?;
            let ops = r.ops()?;
            let t_ro = r.opt_u64()?;
            let coord = r.u32()?;
            let done = r.finished()?;
            let cohorts = match r.u8()? {
                0 => None,
                1 => Some(r.u32s()?),
                _ => return Err(DecodeError("an option is neither 0 nor 1")),
            };
            Msg::Execute {
                txn,
                ts,
                shot,
                ops,
                t_ro,
                coord,
                cohorts,
                done,
            }
        }
        1 => Msg::LastShotAck {
            txn: r.txn()?,
            ok: r.bool()?,
        },
        2 => {
            let txn = r.txn()?;
            let n = r.len(MIN_RESULT)?;
            if n > OPS_MAX {
                return Err(DecodeError("more results than a message may carry"));
            }
            let mut results = Vec::with_capacity(n);
            for _ in 0..n {
                let i = r.u32()?;
                let result = match r.u8()? {
                    0 => ExecResult::Done(OpReply {
                        value: r.opt_value()?,
                        tw: r.ts()?,
                        tr: r.ts()?,
                    }),
                    1 => ExecResult::EarlyAbort,
                    2 => ExecResult::RoAbort,
                    _ => return Err(DecodeError("unknown result kind")),
                };
                results.push((i, result));
            }
            Msg::ExecReply {
                txn,
                results,
                ts_server: r.u64()?,
                latest: r.u64()?,
            }
        }
        3 => Msg::SmartRetry {
            txn: r.txn()?,
            to: r.ts()?,
        },
        4 => Msg::SmartRetryReply {
            txn: r.txn()?,
            ok: r.bool()?,
        },
        5 => Msg::Decide {
            txn: r.txn()?,
            commit: r.bool()?,
        },
        6 => Msg::DecideAck { txn: r.txn()? },
        7 => Msg::Resolve {
            txn: r.txn()?,
            from: r.u32()?,
        },
        8 => Msg::GetRecord {
            txn: r.txn()?,
            from: r.u32()?,
        },
        9 => {
            let txn = r.txn()?;
            let from = r.u32()?;
            let record = match r.u8()? {
                0 => RecordState::Uncleared,
                1 => {
                    let n = r.len(PAIR)?;
                    let pairs = (0..n)
                        .map(|_| Ok((r.ts()?, r.ts()?)))
                        .collect::<Result<_, DecodeError>>()?;
                    RecordState::Cleared(pairs)
                }
                2 => RecordState::Committed,
                3 => RecordState::Aborted,
                _ => return Err(DecodeError("unknown record state")),
            };
            Msg::Record { txn, from, record }
        }
        10 => Msg::RecoverRetry {
            txn: r.txn()?,
            to: r.ts()?,
            from: r.u32()?,
        },
        11 => Msg::RecoverRetryReply {
            txn: r.txn()?,
            from: r.u32()?,
            ok: r.bool()?,
        },
        12 => Msg::Group(match r.u8()? {
            0 => {
                let n = r.len(MIN_KEYED)?;
                let raised = (0..n)
                    .map(|_| Ok((r.key()?, r.ts()?)))
                    .collect::<Result<_, DecodeError>>()?;
                GroupNote::ReadsRaised(raised)
            }
            1 => GroupNote::FloorPromised(r.u64()?),
            2 => GroupNote::FloorApplied,
            _ => return Err(DecodeError("unknown group note")),
        }),
        _ => return Err(DecodeError("unknown message kind")),
    };
    Ok(msg)
}

fn put_bmsg<S: Sink>(msg: &BMsg, w: &mut S) {
    match msg {
        BMsg::Execute {
            txn,
            ts,
            shot,
            ops,
            done,
        } => {
            w.u8(0);
            w.txn(*txn);
            w.ts(*ts);
            w.u32(*shot);
            w.ops(ops);
            w.finished(*done);
        }
        BMsg::ExecReply {
            txn,
            shot,
            ok,
            reads,
        } => {
            w.u8(1);
            w.txn(*txn);
            w.u32(*shot);
            w.bool(*ok);
            w.reads(reads);
        }
        BMsg::Prepare {
            txn,
            ts,
            reads,
            writes,
            execute,
            done,
        } => {
            w.u8(2);
            w.txn(*txn);
            w.ts(*ts);
            w.finished(*done);
            w.versions(reads);
            w.writes(writes);
            w.keys(execute);
        }
        BMsg::PrepareReply {
            txn,
            ok,
            reads,
            retry_above,
        } => {
            w.u8(3);
            w.txn(*txn);
            w.bool(*ok);
            w.reads(reads);
            match retry_above {
                None => w.u8(0),
                Some(t) => {
                    w.u8(1);
                    w.ts(*t);
                }
            }
        }
        BMsg::Decide { txn, commit } => {
            w.u8(4);
            w.txn(*txn);
            w.bool(*commit);
        }
        BMsg::DecideAck { txn } => {
            w.u8(5);
            w.txn(*txn);
        }
    }
}

fn get_bmsg<R: Source>(r: &mut R) -> Result<BMsg, DecodeError> {
    let msg = match r.u8()? {
        0 => BMsg::Execute {
            txn: r.txn()?,
            ts: r.ts()?,
            shot: r.u32()?,
            ops: r.ops()?,
            done: r.finished()?,
        },
        1 => BMsg::ExecReply {
            txn: r.txn()?,
            shot: r.u32()?,
            ok: r.bool()?,
            reads: r.reads()?,
        },
        2 => {
            let txn = r.txn()?;
            let ts = r.ts()?;
            let done = r.finished()?;
            let reads = r.versions()?;
            let writes = r.writes()?;
            let execute = r.keys()?;
            BMsg::Prepare {
                txn,
                ts,
                reads,
                writes,
                execute,
                done,
            }
        }
        3 => BMsg::PrepareReply {
            txn: r.txn()?,
            ok: r.bool()?,
            reads: r.reads()?,
            retry_above: match r.u8()? {
                0 => None,
                1 => Some(r.ts()?),
                _ => return Err(DecodeError("an option is neither 0 nor 1")),
            },
        },
        4 => BMsg::Decide {
            txn: r.txn()?,
            commit: r.bool()?,
        },
        5 => BMsg::DecideAck { txn: r.txn()? },
        _ => return Err(DecodeError("unknown message kind")),
    };
    Ok(msg)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{Finished, Key, Op, Ts, TxnId, Value};
    use proptest::prelude::*;

    fn ts() -> impl Strategy<Value = Ts> {
        (any::<u64>(), any::<u32>()).prop_map(|(clk, cid)| Ts { clk, cid })
    }
    fn finished() -> impl Strategy<Value = Finished> {
        (any::<u64>(), any::<u64>()).prop_map(|(from, below)| Finished { from, below })
    }
    fn txn() -> impl Strategy<Value = TxnId> {
        (any::<u32>(), any::<u64>()).prop_map(|(client, seq)| TxnId { client, seq })
    }
    /// Any bytes, empty included (RESP's shortest field), and numbers' 8.
    fn bytes() -> impl Strategy<Value = Vec<u8>> {
        proptest::collection::vec(any::<u8>(), 0..12)
    }
    fn key() -> impl Strategy<Value = Key> {
        bytes().prop_map(Key::from)
    }
    fn value() -> impl Strategy<Value = Value> {
        bytes().prop_map(Value::from)
    }
    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            key().prop_map(Op::Read),
            (key(), value()).prop_map(|(k, v)| Op::Write(k, v)),
            (key(), value()).prop_map(|(k, v)| Op::ReadWrite(k, v)),
        ]
    }
    fn result() -> impl Strategy<Value = ExecResult> {
        prop_oneof![
            (proptest::option::of(value()), ts(), ts())
                .prop_map(|(value, tw, tr)| ExecResult::Done(OpReply { value, tw, tr })),
            Just(ExecResult::EarlyAbort),
            Just(ExecResult::RoAbort),
        ]
    }
    fn record() -> impl Strategy<Value = RecordState> {
        prop_oneof![
            Just(RecordState::Uncleared),
            proptest::collection::vec((ts(), ts()), 0..4).prop_map(RecordState::Cleared),
            Just(RecordState::Committed),
            Just(RecordState::Aborted),
        ]
    }
    fn msg() -> impl Strategy<Value = Msg> {
        prop_oneof![
            (
                txn(),
                ts(),
                any::<u32>(),
                proptest::collection::vec(op(), 0..6),
                proptest::option::of(any::<u64>()),
                any::<u32>(),
                proptest::option::of(proptest::collection::vec(any::<u32>(), 0..4)),
                finished(),
            )
                .prop_map(|(txn, ts, shot, ops, t_ro, coord, cohorts, done)| {
                    Msg::Execute {
                        txn,
                        ts,
                        shot,
                        ops,
                        t_ro,
                        coord,
                        cohorts,
                        done,
                    }
                }),
            (txn(), any::<bool>()).prop_map(|(txn, ok)| Msg::LastShotAck { txn, ok }),
            (
                txn(),
                proptest::collection::vec((any::<u32>(), result()), 0..5),
                any::<u64>(),
                any::<u64>()
            )
                .prop_map(|(txn, results, ts_server, latest)| Msg::ExecReply {
                    txn,
                    results,
                    ts_server,
                    latest
                }),
            (txn(), ts()).prop_map(|(txn, to)| Msg::SmartRetry { txn, to }),
            (txn(), any::<bool>()).prop_map(|(txn, ok)| Msg::SmartRetryReply { txn, ok }),
            (txn(), any::<bool>()).prop_map(|(txn, commit)| Msg::Decide { txn, commit }),
            txn().prop_map(|txn| Msg::DecideAck { txn }),
            (txn(), any::<u32>()).prop_map(|(txn, from)| Msg::Resolve { txn, from }),
            (txn(), any::<u32>()).prop_map(|(txn, from)| Msg::GetRecord { txn, from }),
            (txn(), any::<u32>(), record()).prop_map(|(txn, from, record)| Msg::Record {
                txn,
                from,
                record
            }),
            (txn(), ts(), any::<u32>()).prop_map(|(txn, to, from)| Msg::RecoverRetry {
                txn,
                to,
                from
            }),
            (txn(), any::<u32>(), any::<bool>())
                .prop_map(|(txn, from, ok)| { Msg::RecoverRetryReply { txn, from, ok } }),
            proptest::collection::vec((key(), ts()), 0..4)
                .prop_map(|raised| Msg::Group(GroupNote::ReadsRaised(raised))),
            any::<u64>().prop_map(|clk| Msg::Group(GroupNote::FloorPromised(clk))),
            Just(Msg::Group(GroupNote::FloorApplied)),
        ]
    }
    fn reads() -> impl Strategy<Value = Vec<(Key, Value, u64)>> {
        proptest::collection::vec((key(), value(), any::<u64>()), 0..4)
    }
    fn bmsg() -> impl Strategy<Value = BMsg> {
        prop_oneof![
            (
                txn(),
                ts(),
                any::<u32>(),
                proptest::collection::vec(op(), 0..6),
                finished(),
            )
                .prop_map(|(txn, ts, shot, ops, done)| BMsg::Execute {
                    txn,
                    ts,
                    shot,
                    ops,
                    done
                }),
            (txn(), any::<u32>(), any::<bool>(), reads()).prop_map(|(txn, shot, ok, reads)| {
                BMsg::ExecReply {
                    txn,
                    shot,
                    ok,
                    reads,
                }
            }),
            (
                txn(),
                ts(),
                proptest::collection::vec((key(), any::<u64>()), 0..4),
                proptest::collection::vec((key(), value()), 0..4),
                proptest::collection::vec(key(), 0..4),
                finished(),
            )
                .prop_map(|(txn, ts, reads, writes, execute, done)| {
                    BMsg::Prepare {
                        txn,
                        ts,
                        reads,
                        writes,
                        execute,
                        done,
                    }
                }),
            (txn(), any::<bool>(), reads(), proptest::option::of(ts())).prop_map(
                |(txn, ok, reads, retry_above)| BMsg::PrepareReply {
                    txn,
                    ok,
                    reads,
                    retry_above
                }
            ),
            (txn(), any::<bool>()).prop_map(|(txn, commit)| BMsg::Decide { txn, commit }),
            txn().prop_map(|txn| BMsg::DecideAck { txn }),
        ]
    }

    fn round_trip<M: Wire + PartialEq + std::fmt::Debug>(m: &M) -> Result<(), TestCaseError> {
        for encoding in [Encoding::Binary, Encoding::Resp] {
            let mut bytes = Vec::new();
            m.encode_as(encoding, &mut bytes);
            prop_assert_eq!(&M::decode_as(encoding, &bytes).unwrap(), m);
            // Every strict prefix and every padded form is refused: the encoding is exact.
            for cut in 0..bytes.len() {
                prop_assert!(
                    M::decode_as(encoding, &bytes[..cut]).is_err(),
                    "prefix of {} bytes",
                    cut
                );
            }
            bytes.push(0);
            prop_assert!(M::decode_as(encoding, &bytes).is_err());
        }
        Ok(())
    }

    /// RESP arrays of small decimal fields, some of them spelled wrong: inputs that get
    /// past the framing, which random bytes seldom do.
    fn resp_like() -> impl Strategy<Value = Vec<u8>> {
        let field = prop_oneof![
            8 => (0u64..20).prop_map(|v| format!("${}\r\n{v}\r\n", v.to_string().len())),
            1 => Just("$2\r\n07\r\n".to_string()),
            1 => Just("$1\r\n-\r\n".to_string()),
            1 => Just(":1\r\n".to_string()),
            1 => Just("$3\r\n1\r\n".to_string()),
        ];
        (proptest::collection::vec(field, 0..24), 0usize..3).prop_map(|(fields, skew)| {
            let mut s = format!("*{}\r\n", fields.len().saturating_sub(skew));
            fields.iter().for_each(|f| s.push_str(f));
            s.into_bytes()
        })
    }

    fn decodes_to_what_it_encodes(encoding: Encoding, bytes: &[u8]) -> Result<(), TestCaseError> {
        let mut again = Vec::new();
        if let Ok(m) = Msg::decode_as(encoding, bytes) {
            m.encode_as(encoding, &mut again);
            prop_assert_eq!(&again, bytes);
        }
        again.clear();
        if let Ok(m) = BMsg::decode_as(encoding, bytes) {
            m.encode_as(encoding, &mut again);
            prop_assert_eq!(&again, bytes);
        }
        Ok(())
    }

    proptest! {
        /// One more result in an answer takes at most `RESULT_OVERHEAD_MAX` bytes beyond its
        /// value's, in either form, whatever its numbers (what servers budget by).
        #[test]
        fn a_result_costs_at_most_its_value_and_the_overhead(
            index in any::<u32>(),
            r in result(),
            txn in txn(),
            ts_server in any::<u64>(),
            latest in any::<u64>(),
        ) {
            let value = match &r {
                ExecResult::Done(reply) => reply.value.as_ref().map_or(0, Value::len),
                _ => 0,
            };
            for encoding in [Encoding::Binary, Encoding::Resp] {
                let reply = |results| Msg::ExecReply { txn, results, ts_server, latest };
                let (mut none, mut one) = (Vec::new(), Vec::new());
                reply(vec![]).encode_as(encoding, &mut none);
                reply(vec![(index, r.clone())]).encode_as(encoding, &mut one);
                prop_assert!(one.len() - none.len() <= RESULT_OVERHEAD_MAX + value);
            }
        }
    }

    proptest! {
        #[test]
        fn ncc_messages_round_trip(m in msg()) {
            round_trip(&m)?;
        }

        #[test]
        fn baseline_messages_round_trip(m in bmsg()) {
            round_trip(&m)?;
        }

        #[test]
        fn any_bytes_decode_to_what_they_encode(bytes in proptest::collection::vec(any::<u8>(), 0..80)) {
            decodes_to_what_it_encodes(Encoding::Binary, &bytes)?;
            decodes_to_what_it_encodes(Encoding::Resp, &bytes)?;
        }

        #[test]
        fn resp_like_bytes_decode_to_what_they_encode(bytes in resp_like()) {
            decodes_to_what_it_encodes(Encoding::Resp, &bytes)?;
        }

        #[test]
        fn decimal_round_trips(v in any::<u64>()) {
            let mut s = Vec::new();
            push_decimal(&mut s, v);
            prop_assert_eq!(s.clone(), v.to_string().into_bytes());
            prop_assert_eq!(parse_decimal(&s), Some(v));
        }
    }

    #[test]
    fn non_canonical_decimals_are_refused() {
        for bad in ["", "01", "-1", "+1", "1a", "18446744073709551616", "000"] {
            assert_eq!(parse_decimal(bad.as_bytes()), None, "{bad:?}");
        }
        assert_eq!(parse_decimal(b"18446744073709551615"), Some(u64::MAX));
    }

    #[test]
    fn a_resp_message_is_a_redis_command_of_decimal_fields() {
        let msg = Msg::DecideAck {
            txn: TxnId { client: 3, seq: 12 },
        };
        let mut bytes = Vec::new();
        msg.encode_as(Encoding::Resp, &mut bytes);
        assert_eq!(bytes, b"*3\r\n$1\r\n6\r\n$1\r\n3\r\n$2\r\n12\r\n");
    }

    #[test]
    fn a_forged_resp_count_is_refused_before_allocating() {
        // An ExecReply claiming 2^32-1 results in a short message.
        let bytes = b"*5\r\n$1\r\n2\r\n$1\r\n0\r\n$1\r\n0\r\n$10\r\n4294967295\r\n$1\r\n0\r\n";
        assert_eq!(
            Msg::decode_as(Encoding::Resp, bytes),
            Err(DecodeError("a count larger than the message"))
        );
    }

    #[test]
    fn a_forged_count_is_refused_before_allocating() {
        // An ExecReply claiming 2^32-1 results in a 40-byte message.
        let mut bytes = vec![2];
        bytes.extend_from_slice(&[0; 12]);
        bytes.extend_from_slice(&u32::MAX.to_le_bytes());
        bytes.extend_from_slice(&[0; 20]);
        assert_eq!(
            Msg::decode(&bytes),
            Err(DecodeError("a count larger than the message"))
        );
    }
}
