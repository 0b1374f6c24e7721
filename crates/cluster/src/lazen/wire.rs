//! Bytes for the move protocol's records (kept in each group's log) and messages (sent
//! between groups' primaries). Little-endian integers, `u32`-length-prefixed byte strings,
//! slot sets as runs (`u16` count, then first and last of each), one tag byte per variant.
//!
//! Decoding is total: any input gives a value or a [`DecodeError`], never a panic or an
//! allocation larger than the input (lengths are checked against what remains), since a
//! message arrives from the network.

use super::{ConfigRecord, Entries, GroupRecord, Message, Node};
use crate::slot::{SlotSet, SLOTS};

/// Why bytes are not a record or message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DecodeError(pub &'static str);

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "malformed move record or message: {}", self.0)
    }
}

impl std::error::Error for DecodeError {}

/// Appends to a byte vector.
struct Writer<'a>(&'a mut Vec<u8>);

impl Writer<'_> {
    fn u8(&mut self, v: u8) {
        self.0.push(v);
    }
    fn u16(&mut self, v: u16) {
        self.0.extend_from_slice(&v.to_le_bytes());
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
    fn bytes(&mut self, b: &[u8]) {
        // Keys and values are bounded far below 4 GiB by the server's limits.
        self.u32(u32::try_from(b.len()).expect("a key or value under 4 GiB"));
        self.0.extend_from_slice(b);
    }
    fn slots(&mut self, s: &SlotSet) {
        let runs: Vec<(u16, u16)> = s.ranges().collect();
        self.u16(runs.len() as u16); // at most 8,192 runs in 16,384 slots
        for (a, b) in runs {
            self.u16(a);
            self.u16(b);
        }
    }
    /// A move's id, slots and other group (BeginSend and BeginRecv, as message or record).
    fn move_of(&mut self, id: u64, slots: &SlotSet, group: u16) {
        self.u64(id);
        self.slots(slots);
        self.u16(group);
    }
    /// A chunk's fields (as message or record).
    fn chunk(&mut self, id: u64, attempt: u32, seq: u32, entries: &Entries, last: bool) {
        self.u64(id);
        self.u32(attempt);
        self.u32(seq);
        self.entries(entries);
        self.bool(last);
    }
    fn entries(&mut self, e: &Entries) {
        self.u32(e.len() as u32);
        for (k, v) in e {
            self.bytes(k);
            match v {
                Some(v) => {
                    self.u8(1);
                    self.bytes(v);
                }
                None => self.u8(0),
            }
        }
    }
}

/// A chunk's id, attempt, sequence number, entries and `last` flag.
type ChunkFields = (u64, u32, u32, Entries, bool);

/// Reads from a byte slice.
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
    fn u16(&mut self) -> Result<u16, DecodeError> {
        Ok(u16::from_le_bytes(
            self.take(2)?.try_into().expect("2 bytes"),
        ))
    }
    fn u32(&mut self) -> Result<u32, DecodeError> {
        Ok(u32::from_le_bytes(
            self.take(4)?.try_into().expect("4 bytes"),
        ))
    }
    fn u64(&mut self) -> Result<u64, DecodeError> {
        Ok(u64::from_le_bytes(
            self.take(8)?.try_into().expect("8 bytes"),
        ))
    }
    fn bool(&mut self) -> Result<bool, DecodeError> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(DecodeError("a flag other than 0 or 1")),
        }
    }
    fn bytes(&mut self) -> Result<Vec<u8>, DecodeError> {
        let n = self.u32()? as usize;
        Ok(self.take(n)?.to_vec())
    }
    fn slots(&mut self) -> Result<SlotSet, DecodeError> {
        let runs = self.u16()?;
        let mut s = SlotSet::default();
        // Runs as `SlotSet::ranges` gives them: ascending, maximal (so one encoding per set).
        let mut next_free = 0u32;
        for _ in 0..runs {
            let (a, b) = (self.u16()?, self.u16()?);
            if a > b || usize::from(b) >= SLOTS || u32::from(a) < next_free {
                return Err(DecodeError("slot runs out of range, order or not maximal"));
            }
            next_free = u32::from(b) + 2;
            for slot in a..=b {
                s.insert(slot);
            }
        }
        Ok(s)
    }
    fn entries(&mut self) -> Result<Entries, DecodeError> {
        let n = self.u32()? as usize;
        // Each entry takes at least 5 bytes: no count can ask for more than the input holds.
        if n > self.0.len() / 5 {
            return Err(DecodeError("more entries than bytes"));
        }
        let mut e = Vec::with_capacity(n);
        for _ in 0..n {
            let k = self.bytes()?;
            let v = if self.bool()? {
                Some(self.bytes()?)
            } else {
                None
            };
            e.push((k, v));
        }
        Ok(e)
    }
    fn move_of(&mut self) -> Result<(u64, SlotSet, u16), DecodeError> {
        Ok((self.u64()?, self.slots()?, self.u16()?))
    }
    fn chunk(&mut self) -> Result<ChunkFields, DecodeError> {
        Ok((
            self.u64()?,
            self.u32()?,
            self.u32()?,
            self.entries()?,
            self.bool()?,
        ))
    }
    fn end(self) -> Result<(), DecodeError> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(DecodeError("trailing bytes"))
        }
    }
}

impl Message {
    pub fn encode(&self, out: &mut Vec<u8>) {
        let mut w = Writer(out);
        match self {
            Message::BeginSend { id, slots, to } => {
                w.u8(0);
                w.move_of(*id, slots, *to);
            }
            Message::BeginRecv { id, slots, from } => {
                w.u8(1);
                w.move_of(*id, slots, *from);
            }
            Message::SendStatus { id, ended } => {
                w.u8(2);
                w.u64(*id);
                w.bool(*ended);
            }
            Message::RecvStatus { id, sealed } => {
                w.u8(3);
                w.u64(*id);
                w.bool(*sealed);
            }
            Message::Chunk {
                id,
                attempt,
                seq,
                entries,
                last,
            } => {
                w.u8(4);
                w.chunk(*id, *attempt, *seq, entries, *last);
            }
            Message::ChunkAck {
                id,
                attempt,
                next_seq,
                sealed,
            } => {
                w.u8(5);
                w.u64(*id);
                w.u32(*attempt);
                w.u32(*next_seq);
                w.bool(*sealed);
            }
        }
    }

    pub fn decode(bytes: &[u8]) -> Result<Message, DecodeError> {
        let mut r = Reader(bytes);
        let m = match r.u8()? {
            0 => {
                let (id, slots, to) = r.move_of()?;
                Message::BeginSend { id, slots, to }
            }
            1 => {
                let (id, slots, from) = r.move_of()?;
                Message::BeginRecv { id, slots, from }
            }
            2 => Message::SendStatus {
                id: r.u64()?,
                ended: r.bool()?,
            },
            3 => Message::RecvStatus {
                id: r.u64()?,
                sealed: r.bool()?,
            },
            4 => {
                let (id, attempt, seq, entries, last) = r.chunk()?;
                Message::Chunk {
                    id,
                    attempt,
                    seq,
                    entries,
                    last,
                }
            }
            5 => Message::ChunkAck {
                id: r.u64()?,
                attempt: r.u32()?,
                next_seq: r.u32()?,
                sealed: r.bool()?,
            },
            _ => return Err(DecodeError("unknown message")),
        };
        r.end()?;
        Ok(m)
    }
}

impl Node {
    /// As a message's sender: the configuration group, or a data group's id.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let mut w = Writer(out);
        match self {
            Node::Config => w.u8(0),
            Node::Group(g) => {
                w.u8(1);
                w.u16(*g);
            }
        }
    }

    pub fn decode(bytes: &[u8]) -> Result<Node, DecodeError> {
        let mut r = Reader(bytes);
        let n = match r.u8()? {
            0 => Node::Config,
            1 => Node::Group(r.u16()?),
            _ => return Err(DecodeError("unknown node")),
        };
        r.end()?;
        Ok(n)
    }
}

impl GroupRecord {
    pub fn encode(&self, out: &mut Vec<u8>) {
        let mut w = Writer(out);
        match self {
            GroupRecord::Put { key, value, tag } => {
                w.u8(0);
                w.bytes(key);
                match value {
                    Some(v) => {
                        w.u8(1);
                        w.bytes(v);
                    }
                    None => w.u8(0),
                }
                w.u64(*tag);
            }
            GroupRecord::Own { slots } => {
                w.u8(1);
                w.slots(slots);
            }
            GroupRecord::BeginSend { id, slots, to } => {
                w.u8(2);
                w.move_of(*id, slots, *to);
            }
            GroupRecord::Restream { id, attempt } => {
                w.u8(3);
                w.u64(*id);
                w.u32(*attempt);
            }
            GroupRecord::Freeze { id } => {
                w.u8(4);
                w.u64(*id);
            }
            GroupRecord::EndSend { id } => {
                w.u8(5);
                w.u64(*id);
            }
            GroupRecord::BeginRecv { id, slots, from } => {
                w.u8(6);
                w.move_of(*id, slots, *from);
            }
            GroupRecord::RecvReset { id, attempt } => {
                w.u8(7);
                w.u64(*id);
                w.u32(*attempt);
            }
            GroupRecord::Chunk {
                id,
                attempt,
                seq,
                entries,
                last,
            } => {
                w.u8(8);
                w.chunk(*id, *attempt, *seq, entries, *last);
            }
            GroupRecord::EndRecv { id } => {
                w.u8(9);
                w.u64(*id);
            }
        }
    }

    pub fn decode(bytes: &[u8]) -> Result<GroupRecord, DecodeError> {
        let mut r = Reader(bytes);
        let rec = match r.u8()? {
            0 => GroupRecord::Put {
                key: r.bytes()?,
                value: if r.bool()? { Some(r.bytes()?) } else { None },
                tag: r.u64()?,
            },
            1 => GroupRecord::Own { slots: r.slots()? },
            2 => {
                let (id, slots, to) = r.move_of()?;
                GroupRecord::BeginSend { id, slots, to }
            }
            3 => GroupRecord::Restream {
                id: r.u64()?,
                attempt: r.u32()?,
            },
            4 => GroupRecord::Freeze { id: r.u64()? },
            5 => GroupRecord::EndSend { id: r.u64()? },
            6 => {
                let (id, slots, from) = r.move_of()?;
                GroupRecord::BeginRecv { id, slots, from }
            }
            7 => GroupRecord::RecvReset {
                id: r.u64()?,
                attempt: r.u32()?,
            },
            8 => {
                let (id, attempt, seq, entries, last) = r.chunk()?;
                GroupRecord::Chunk {
                    id,
                    attempt,
                    seq,
                    entries,
                    last,
                }
            }
            9 => GroupRecord::EndRecv { id: r.u64()? },
            _ => return Err(DecodeError("unknown group record")),
        };
        r.end()?;
        Ok(rec)
    }
}

impl ConfigRecord {
    pub fn encode(&self, out: &mut Vec<u8>) {
        let mut w = Writer(out);
        match self {
            ConfigRecord::Assign { slots, group } => {
                w.u8(0);
                w.slots(slots);
                w.u16(*group);
            }
            ConfigRecord::Begin {
                id,
                slots,
                from,
                to,
            } => {
                w.u8(1);
                w.u64(*id);
                w.slots(slots);
                w.u16(*from);
                w.u16(*to);
            }
            ConfigRecord::End { id } => {
                w.u8(2);
                w.u64(*id);
            }
            ConfigRecord::Done { id } => {
                w.u8(3);
                w.u64(*id);
            }
        }
    }

    pub fn decode(bytes: &[u8]) -> Result<ConfigRecord, DecodeError> {
        let mut r = Reader(bytes);
        let rec = match r.u8()? {
            0 => ConfigRecord::Assign {
                slots: r.slots()?,
                group: r.u16()?,
            },
            1 => ConfigRecord::Begin {
                id: r.u64()?,
                slots: r.slots()?,
                from: r.u16()?,
                to: r.u16()?,
            },
            2 => ConfigRecord::End { id: r.u64()? },
            3 => ConfigRecord::Done { id: r.u64()? },
            _ => return Err(DecodeError("unknown configuration record")),
        };
        r.end()?;
        Ok(rec)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn slots() -> impl Strategy<Value = SlotSet> {
        proptest::collection::vec((0u16..16384, 0u16..64), 0..6).prop_map(|runs| {
            let mut s = SlotSet::default();
            for (a, n) in runs {
                for slot in a..=(a.saturating_add(n)).min(16383) {
                    s.insert(slot);
                }
            }
            s
        })
    }

    fn entries() -> impl Strategy<Value = Entries> {
        proptest::collection::vec(
            (
                proptest::collection::vec(any::<u8>(), 0..12),
                proptest::option::of(proptest::collection::vec(any::<u8>(), 0..12)),
            ),
            0..5,
        )
    }

    fn message() -> impl Strategy<Value = Message> {
        prop_oneof![
            (any::<u64>(), slots(), any::<u16>()).prop_map(|(id, slots, to)| Message::BeginSend {
                id,
                slots,
                to
            }),
            (any::<u64>(), slots(), any::<u16>())
                .prop_map(|(id, slots, from)| Message::BeginRecv { id, slots, from }),
            (any::<u64>(), any::<bool>()).prop_map(|(id, ended)| Message::SendStatus { id, ended }),
            (any::<u64>(), any::<bool>())
                .prop_map(|(id, sealed)| Message::RecvStatus { id, sealed }),
            (
                any::<u64>(),
                any::<u32>(),
                any::<u32>(),
                entries(),
                any::<bool>()
            )
                .prop_map(|(id, attempt, seq, entries, last)| Message::Chunk {
                    id,
                    attempt,
                    seq,
                    entries,
                    last
                }),
            (any::<u64>(), any::<u32>(), any::<u32>(), any::<bool>()).prop_map(
                |(id, attempt, next_seq, sealed)| Message::ChunkAck {
                    id,
                    attempt,
                    next_seq,
                    sealed
                }
            ),
        ]
    }

    fn group_record() -> impl Strategy<Value = GroupRecord> {
        prop_oneof![
            (
                proptest::collection::vec(any::<u8>(), 0..8),
                proptest::option::of(proptest::collection::vec(any::<u8>(), 0..8)),
                any::<u64>()
            )
                .prop_map(|(key, value, tag)| GroupRecord::Put { key, value, tag }),
            slots().prop_map(|slots| GroupRecord::Own { slots }),
            (any::<u64>(), slots(), any::<u16>())
                .prop_map(|(id, slots, to)| GroupRecord::BeginSend { id, slots, to }),
            (any::<u64>(), any::<u32>())
                .prop_map(|(id, attempt)| GroupRecord::Restream { id, attempt }),
            any::<u64>().prop_map(|id| GroupRecord::Freeze { id }),
            any::<u64>().prop_map(|id| GroupRecord::EndSend { id }),
            (any::<u64>(), slots(), any::<u16>())
                .prop_map(|(id, slots, from)| GroupRecord::BeginRecv { id, slots, from }),
            (any::<u64>(), any::<u32>())
                .prop_map(|(id, attempt)| GroupRecord::RecvReset { id, attempt }),
            (
                any::<u64>(),
                any::<u32>(),
                any::<u32>(),
                entries(),
                any::<bool>()
            )
                .prop_map(|(id, attempt, seq, entries, last)| GroupRecord::Chunk {
                    id,
                    attempt,
                    seq,
                    entries,
                    last
                }),
            any::<u64>().prop_map(|id| GroupRecord::EndRecv { id }),
        ]
    }

    fn config_record() -> impl Strategy<Value = ConfigRecord> {
        prop_oneof![
            (slots(), any::<u16>())
                .prop_map(|(slots, group)| ConfigRecord::Assign { slots, group }),
            (any::<u64>(), slots(), any::<u16>(), any::<u16>()).prop_map(
                |(id, slots, from, to)| ConfigRecord::Begin {
                    id,
                    slots,
                    from,
                    to
                }
            ),
            any::<u64>().prop_map(|id| ConfigRecord::End { id }),
            any::<u64>().prop_map(|id| ConfigRecord::Done { id }),
        ]
    }

    proptest! {
        #[test]
        fn messages_and_records_round_trip(
            m in message(),
            g in group_record(),
            c in config_record(),
            n in prop_oneof![Just(Node::Config), any::<u16>().prop_map(Node::Group)],
        ) {
            let mut b = Vec::new();
            m.encode(&mut b);
            prop_assert_eq!(Message::decode(&b), Ok(m));
            b.clear();
            g.encode(&mut b);
            prop_assert_eq!(GroupRecord::decode(&b), Ok(g));
            b.clear();
            c.encode(&mut b);
            prop_assert_eq!(ConfigRecord::decode(&b), Ok(c));
            b.clear();
            n.encode(&mut b);
            prop_assert_eq!(Node::decode(&b), Ok(n));
        }

        /// Any bytes decode to a value or an error, and a value re-encodes to exactly those
        /// bytes (so no two inputs mean one thing).
        #[test]
        fn any_bytes_decode_without_panicking(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let mut b = Vec::new();
            if let Ok(m) = Message::decode(&bytes) {
                m.encode(&mut b);
                prop_assert_eq!(&b, &bytes);
            }
            b.clear();
            if let Ok(r) = GroupRecord::decode(&bytes) {
                r.encode(&mut b);
                prop_assert_eq!(&b, &bytes);
            }
            b.clear();
            if let Ok(r) = ConfigRecord::decode(&bytes) {
                r.encode(&mut b);
                prop_assert_eq!(&b, &bytes);
            }
            b.clear();
            if let Ok(n) = Node::decode(&bytes) {
                n.encode(&mut b);
                prop_assert_eq!(&b, &bytes);
            }
        }

        /// A valid encoding cut short or extended is refused, never misread.
        #[test]
        fn truncated_or_padded_input_is_refused(m in message(), cut in any::<prop::sample::Index>()) {
            let mut b = Vec::new();
            m.encode(&mut b);
            let at = cut.index(b.len());
            prop_assert!(Message::decode(&b[..at]).is_err());
            b.push(0);
            prop_assert!(Message::decode(&b).is_err());
        }
    }
}
