//! Bytes for the protocols' messages, so that real processes can carry them (issue 19: the
//! state machines stay free of I/O; the encoding is pure and lives beside the types it
//! encodes). Little-endian integers, one tag byte per variant, `u32` counts before lists.
//!
//! Decoding is total: any input gives a message or a [`DecodeError`], never a panic nor an
//! allocation larger than the input allows (a count is checked against the bytes left
//! before anything is reserved), since a message arrives from the network; and it is exact:
//! trailing bytes are refused, so no two byte strings decode to one message (the fuzz
//! target `ncc_wire` checks that whatever decodes re-encodes to its input).

use crate::baseline::BMsg;
use crate::types::{ExecResult, Msg, Op, OpReply, RecordState, Ts, TxnId};

/// Why bytes are not a message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DecodeError(pub &'static str);

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "malformed transaction message: {}", self.0)
    }
}

impl std::error::Error for DecodeError {}

/// A message that has a byte form.
pub trait Wire: Sized {
    fn encode(&self, out: &mut Vec<u8>);
    fn decode(bytes: &[u8]) -> Result<Self, DecodeError>;
}

struct Writer<'a>(&'a mut Vec<u8>);

impl Writer<'_> {
    fn u8(&mut self, v: u8) {
        self.0.push(v);
    }
    fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn bool(&mut self, v: bool) {
        self.u8(u8::from(v));
    }
    fn len(&mut self, n: usize) {
        // Messages carry one transaction's requests: far below 4 G entries.
        self.u32(u32::try_from(n).expect("fewer than 2^32 entries in one message"));
    }
    fn ts(&mut self, t: Ts) {
        self.u64(t.clk);
        self.u32(t.cid);
    }
    fn txn(&mut self, t: TxnId) {
        self.u32(t.client);
        self.u64(t.seq);
    }
    fn op(&mut self, op: &Op) {
        match *op {
            Op::Read(k) => {
                self.u8(0);
                self.u64(k);
            }
            Op::Write(k, v) => {
                self.u8(1);
                self.u64(k);
                self.u64(v);
            }
            Op::ReadWrite(k, v) => {
                self.u8(2);
                self.u64(k);
                self.u64(v);
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
    fn reads(&mut self, reads: &[(u64, u64, u64)]) {
        self.len(reads.len());
        for &(k, v, version) in reads {
            self.u64(k);
            self.u64(v);
            self.u64(version);
        }
    }
}

/// The smallest encodings, for the count checks: a list of `n` items needs at least
/// `n * min` bytes, so a forged count cannot reserve more than the input could fill.
const MIN_OP: usize = 9;
const MIN_RESULT: usize = 5;
const PAIR: usize = 24;
const READ: usize = 24;

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        if self.0.len() < n {
            return Err(DecodeError("truncated"));
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }
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
    fn bool(&mut self) -> Result<bool, DecodeError> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(DecodeError("a boolean is neither 0 nor 1")),
        }
    }
    /// A count of items of at least `min` bytes each.
    fn len(&mut self, min: usize) -> Result<usize, DecodeError> {
        let n = self.u32()? as usize;
        if n.saturating_mul(min) > self.0.len() {
            return Err(DecodeError("a count larger than the message"));
        }
        Ok(n)
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
    fn op(&mut self) -> Result<Op, DecodeError> {
        Ok(match self.u8()? {
            0 => Op::Read(self.u64()?),
            1 => Op::Write(self.u64()?, self.u64()?),
            2 => Op::ReadWrite(self.u64()?, self.u64()?),
            _ => return Err(DecodeError("unknown request kind")),
        })
    }
    fn ops(&mut self) -> Result<Vec<Op>, DecodeError> {
        let n = self.len(MIN_OP)?;
        (0..n).map(|_| self.op()).collect()
    }
    fn opt_u64(&mut self) -> Result<Option<u64>, DecodeError> {
        Ok(match self.u8()? {
            0 => None,
            1 => Some(self.u64()?),
            _ => return Err(DecodeError("an option is neither 0 nor 1")),
        })
    }
    fn reads(&mut self) -> Result<Vec<(u64, u64, u64)>, DecodeError> {
        let n = self.len(READ)?;
        (0..n)
            .map(|_| Ok((self.u64()?, self.u64()?, self.u64()?)))
            .collect()
    }
    fn end(self) -> Result<(), DecodeError> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(DecodeError("bytes after the end"))
        }
    }
}

impl Wire for Msg {
    fn encode(&self, out: &mut Vec<u8>) {
        let mut w = Writer(out);
        match self {
            Msg::Execute {
                txn,
                ts,
                shot,
                ops,
                t_ro,
                coord,
                cohorts,
                done_below,
            } => {
                w.u8(0);
                w.txn(*txn);
                w.ts(*ts);
                w.u32(*shot);
                w.ops(ops);
                w.opt_u64(*t_ro);
                w.u32(*coord);
                w.u64(*done_below);
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
                            w.opt_u64(reply.value);
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
        }
    }

    fn decode(bytes: &[u8]) -> Result<Msg, DecodeError> {
        let mut r = Reader(bytes);
        let msg = match r.u8()? {
            0 => {
                let txn = r.txn()?;
                let ts = r.ts()?;
                let shot = r.u32()?;
                let ops = r.ops()?;
                let t_ro = r.opt_u64()?;
                let coord = r.u32()?;
                let done_below = r.u64()?;
                let cohorts = match r.u8()? {
                    0 => None,
                    1 => {
                        let n = r.len(4)?;
                        Some((0..n).map(|_| r.u32()).collect::<Result<_, _>>()?)
                    }
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
                    done_below,
                }
            }
            1 => Msg::LastShotAck {
                txn: r.txn()?,
                ok: r.bool()?,
            },
            2 => {
                let txn = r.txn()?;
                let n = r.len(MIN_RESULT)?;
                let mut results = Vec::with_capacity(n);
                for _ in 0..n {
                    let i = r.u32()?;
                    let result = match r.u8()? {
                        0 => ExecResult::Done(OpReply {
                            value: r.opt_u64()?,
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
            _ => return Err(DecodeError("unknown message kind")),
        };
        r.end()?;
        Ok(msg)
    }
}

impl Wire for BMsg {
    fn encode(&self, out: &mut Vec<u8>) {
        let mut w = Writer(out);
        match self {
            BMsg::Execute {
                txn,
                ts,
                shot,
                ops,
                done_below,
            } => {
                w.u8(0);
                w.txn(*txn);
                w.ts(*ts);
                w.u32(*shot);
                w.ops(ops);
                w.u64(*done_below);
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
                done_below,
            } => {
                w.u8(2);
                w.txn(*txn);
                w.ts(*ts);
                w.u64(*done_below);
                w.len(reads.len());
                for &(k, version) in reads {
                    w.u64(k);
                    w.u64(version);
                }
                w.len(writes.len());
                for &(k, v) in writes {
                    w.u64(k);
                    w.u64(v);
                }
                w.len(execute.len());
                execute.iter().for_each(|&k| w.u64(k));
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

    fn decode(bytes: &[u8]) -> Result<BMsg, DecodeError> {
        let mut r = Reader(bytes);
        let pairs = |r: &mut Reader| -> Result<Vec<(u64, u64)>, DecodeError> {
            let n = r.len(16)?;
            (0..n).map(|_| Ok((r.u64()?, r.u64()?))).collect()
        };
        let msg = match r.u8()? {
            0 => BMsg::Execute {
                txn: r.txn()?,
                ts: r.ts()?,
                shot: r.u32()?,
                ops: r.ops()?,
                done_below: r.u64()?,
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
                let done_below = r.u64()?;
                let reads = pairs(&mut r)?;
                let writes = pairs(&mut r)?;
                let n = r.len(8)?;
                let execute = (0..n).map(|_| r.u64()).collect::<Result<_, _>>()?;
                BMsg::Prepare {
                    txn,
                    ts,
                    reads,
                    writes,
                    execute,
                    done_below,
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
        r.end()?;
        Ok(msg)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ts() -> impl Strategy<Value = Ts> {
        (any::<u64>(), any::<u32>()).prop_map(|(clk, cid)| Ts { clk, cid })
    }
    fn txn() -> impl Strategy<Value = TxnId> {
        (any::<u32>(), any::<u64>()).prop_map(|(client, seq)| TxnId { client, seq })
    }
    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            any::<u64>().prop_map(Op::Read),
            (any::<u64>(), any::<u64>()).prop_map(|(k, v)| Op::Write(k, v)),
            (any::<u64>(), any::<u64>()).prop_map(|(k, v)| Op::ReadWrite(k, v)),
        ]
    }
    fn result() -> impl Strategy<Value = ExecResult> {
        prop_oneof![
            (proptest::option::of(any::<u64>()), ts(), ts())
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
                any::<u64>(),
            )
                .prop_map(|(txn, ts, shot, ops, t_ro, coord, cohorts, done_below)| {
                    Msg::Execute {
                        txn,
                        ts,
                        shot,
                        ops,
                        t_ro,
                        coord,
                        cohorts,
                        done_below,
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
        ]
    }
    fn reads() -> impl Strategy<Value = Vec<(u64, u64, u64)>> {
        proptest::collection::vec((any::<u64>(), any::<u64>(), any::<u64>()), 0..4)
    }
    fn bmsg() -> impl Strategy<Value = BMsg> {
        let pairs = || proptest::collection::vec((any::<u64>(), any::<u64>()), 0..4);
        prop_oneof![
            (
                txn(),
                ts(),
                any::<u32>(),
                proptest::collection::vec(op(), 0..6),
                any::<u64>(),
            )
                .prop_map(|(txn, ts, shot, ops, done_below)| BMsg::Execute {
                    txn,
                    ts,
                    shot,
                    ops,
                    done_below
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
                pairs(),
                pairs(),
                proptest::collection::vec(any::<u64>(), 0..4),
                any::<u64>(),
            )
                .prop_map(|(txn, ts, reads, writes, execute, done_below)| {
                    BMsg::Prepare {
                        txn,
                        ts,
                        reads,
                        writes,
                        execute,
                        done_below,
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
        let mut bytes = Vec::new();
        m.encode(&mut bytes);
        prop_assert_eq!(&M::decode(&bytes).unwrap(), m);
        // Every strict prefix and every padded form is refused: the encoding is exact.
        for cut in 0..bytes.len() {
            prop_assert!(M::decode(&bytes[..cut]).is_err(), "prefix of {} bytes", cut);
        }
        bytes.push(0);
        prop_assert!(M::decode(&bytes).is_err());
        Ok(())
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
            let mut again = Vec::new();
            if let Ok(m) = Msg::decode(&bytes) {
                m.encode(&mut again);
                prop_assert_eq!(&again, &bytes);
            }
            again.clear();
            if let Ok(m) = BMsg::decode(&bytes) {
                m.encode(&mut again);
                prop_assert_eq!(&again, &bytes);
            }
        }
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
