//! Hash slots as Redis Cluster computes them: CRC16 (XMODEM) of the key, or of its hash tag,
//! modulo 16,384, so that a key lands in the same slot in Verso as in Redis and cluster
//! clients (which compute slots themselves) route to the right group.

/// The number of hash slots.
pub const SLOTS: usize = 16_384;

/// A slot number, `0..SLOTS`.
pub type Slot = u16;

/// CRC16-CCITT (XMODEM: polynomial 0x1021, initial 0, no reflection), Redis's `crc16`.
pub fn crc16(bytes: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &b in bytes {
        crc ^= u16::from(b) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

/// The part of `key` that decides its slot: the bytes between the first `{` and the first
/// `}` after it, when that is not empty (a "hash tag", so related keys can share a slot),
/// and otherwise the whole key, exactly as Redis's `keyHashSlot`.
pub fn hash_tag(key: &[u8]) -> &[u8] {
    if let Some(open) = key.iter().position(|&b| b == b'{') {
        if let Some(len) = key[open + 1..].iter().position(|&b| b == b'}') {
            if len > 0 {
                return &key[open + 1..open + 1 + len];
            }
        }
    }
    key
}

/// The slot of `key`.
pub fn key_slot(key: &[u8]) -> Slot {
    // 16,384 is a power of two: the mask is the modulo.
    crc16(hash_tag(key)) & (SLOTS as u16 - 1)
}

/// A set of slots (2 KiB bitmap).
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SlotSet {
    words: Box<[u64; SLOTS / 64]>,
}

impl Default for SlotSet {
    fn default() -> Self {
        SlotSet {
            words: Box::new([0; SLOTS / 64]),
        }
    }
}

impl std::fmt::Debug for SlotSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SlotSet[")?;
        for (i, (a, b)) in self.ranges().enumerate() {
            if i > 0 {
                write!(f, ",")?;
            }
            if a == b {
                write!(f, "{a}")?;
            } else {
                write!(f, "{a}-{b}")?;
            }
        }
        write!(f, "]")
    }
}

impl SlotSet {
    /// The slots `lo..=hi`.
    pub fn range(lo: Slot, hi: Slot) -> SlotSet {
        let mut s = SlotSet::default();
        for slot in lo..=hi {
            s.insert(slot);
        }
        s
    }

    pub fn insert(&mut self, slot: Slot) {
        self.words[usize::from(slot) / 64] |= 1 << (slot % 64);
    }

    pub fn remove(&mut self, slot: Slot) {
        self.words[usize::from(slot) / 64] &= !(1 << (slot % 64));
    }

    pub fn contains(&self, slot: Slot) -> bool {
        self.words[usize::from(slot) / 64] & (1 << (slot % 64)) != 0
    }

    pub fn len(&self) -> usize {
        self.words.iter().map(|w| w.count_ones() as usize).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.words.iter().all(|&w| w == 0)
    }

    pub fn iter(&self) -> impl Iterator<Item = Slot> + '_ {
        (0..SLOTS as Slot).filter(|&s| self.contains(s))
    }

    /// Maximal runs `(first, last)`, ascending (CLUSTER SLOTS answers in runs).
    pub fn ranges(&self) -> impl Iterator<Item = (Slot, Slot)> + '_ {
        let mut next = 0usize;
        std::iter::from_fn(move || {
            while next < SLOTS && !self.contains(next as Slot) {
                next += 1;
            }
            if next >= SLOTS {
                return None;
            }
            let first = next;
            while next < SLOTS && self.contains(next as Slot) {
                next += 1;
            }
            Some((first as Slot, (next - 1) as Slot))
        })
    }

    pub fn intersects(&self, other: &SlotSet) -> bool {
        self.words
            .iter()
            .zip(other.words.iter())
            .any(|(a, b)| a & b != 0)
    }

    /// Parses `A-B,C,...` (as `verso cluster move --slots` takes it).
    pub fn parse(text: &str) -> Result<SlotSet, String> {
        let mut s = SlotSet::default();
        for part in text.split(',') {
            let part = part.trim();
            let (a, b) = part.split_once('-').unwrap_or((part, part));
            let slot = |t: &str| -> Result<Slot, String> {
                let n: usize = t
                    .trim()
                    .parse()
                    .map_err(|_| format!("'{t}' is not a slot number"))?;
                if n >= SLOTS {
                    return Err(format!("slot {n} is out of range (0-{})", SLOTS - 1));
                }
                Ok(n as Slot)
            };
            let (a, b) = (slot(a)?, slot(b)?);
            if a > b {
                return Err(format!("empty slot range {a}-{b}"));
            }
            for x in a..=b {
                s.insert(x);
            }
        }
        Ok(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn crc16_matches_the_xmodem_check_value() {
        // The standard check value of CRC-16/XMODEM, which Redis's cluster spec quotes.
        assert_eq!(crc16(b"123456789"), 0x31C3);
        assert_eq!(crc16(b""), 0);
    }

    #[test]
    fn slots_match_redis_cluster() {
        // Redis's own answers (CLUSTER KEYSLOT on redis-server 7.0, cluster-enabled).
        assert_eq!(key_slot(b"foo"), 12182);
        assert_eq!(key_slot(b"bar"), 5061);
        assert_eq!(key_slot(b"somekey"), 11058);
        assert_eq!(key_slot(b"{user1000}.following"), key_slot(b"user1000"));
        assert_eq!(key_slot(b"{user1000}.followers"), key_slot(b"user1000"));
        // An empty tag, or a brace never closed, hashes the whole key.
        assert_eq!(hash_tag(b"foo{}{bar}"), b"foo{}{bar}");
        assert_eq!(hash_tag(b"foo{{bar}}zap"), b"{bar");
        assert_eq!(hash_tag(b"foo{bar}{zap}"), b"bar");
        assert_eq!(hash_tag(b"{never"), b"{never");
    }

    /// Redis 7.0.15's `CLUSTER KEYSLOT` for keys with braces in every position, NUL and 0xff
    /// bytes (generated once from a cluster-enabled redis-server).
    const REDIS_SLOTS: &[(&[u8], u16)] = &[
        (b"{z:ab\x00", 6215),
        (b"y\xff", 11313),
        (b"\x00", 0),
        (b"abzz", 8738),
        (b"}b", 13025),
        (b"za\xffb}::\xffa", 15011),
        (b"\xffza}a\x00{xz{", 4690),
        (b"b\xffx\x00:{b\xff\xff", 1007),
        (b"}yb\x00b\xffa\xff}0:", 9058),
        (b"zy0\xff0yx}{", 7624),
        (b"}b\xffx\x000y0x\xffbb", 481),
        (b"z{y{0za:b", 10146),
        (b"\xffyyy\xff0\xff0b", 14271),
        (b"x0", 14243),
        (b":bax:\xff:0xz:y", 9974),
        (b"0", 13907),
        (b"{\xffb0a}", 1978),
        (b"{}zz0", 1154),
        (b"{0", 8944),
        (b"\x00x{z\x00xz", 3412),
        (b":z}{b{", 792),
        (b"}:}", 7997),
        (b"0", 13907),
        (b"{xxa{z\x00y\xff\xff", 1292),
        (b"{\x00\xff::a", 6432),
        (b":\x00zzzzb0", 8474),
        (b"za}b}0{by\xffa", 6094),
        (b"a\xff", 9963),
        (b"\x00by", 758),
        (b"ab}\xffz{:xy\xff", 12852),
        (b"0bb000", 12298),
        (b"xb{byx0{", 11404),
        (b"a}\x00y{\x00a\x00x", 6829),
        (b"bx\x00y{y}\x00\x00\x00y", 12222),
        (b"}\xff}}z}}\x000ya", 9593),
        (b"x", 16287),
        (b"x}\xffy0yyb", 13741),
        (b"b}0}", 1100),
        (b"}0\xff\xffa0", 3513),
        (b"y:b:bz}0{z:", 2541),
        (b"bz0zb{", 7908),
        (b"{a{", 7966),
        (b"0:{\xff\xff0:y{\x00", 15354),
        (b"{aa:b\x00{z}", 9287),
        (b"ax}x", 8021),
        (b"}\xffyx\x00z{ay", 4950),
        (b":\xff\x00z\x00{\x00{", 3836),
        (b"\x00a0{\xffa{{{", 5047),
    ];

    #[test]
    fn binary_and_brace_keys_match_redis_cluster() {
        for &(key, slot) in REDIS_SLOTS {
            assert_eq!(key_slot(key), slot, "{:?}", String::from_utf8_lossy(key));
        }
    }

    #[test]
    fn slot_sets_parse_and_list_runs() {
        let s = SlotSet::parse("0-5, 7,100-101").unwrap();
        assert_eq!(s.len(), 9);
        assert_eq!(s.ranges().collect::<Vec<_>>(), [(0, 5), (7, 7), (100, 101)]);
        assert!(SlotSet::parse("16384").is_err());
        assert!(SlotSet::parse("5-3").is_err());
        assert!(SlotSet::parse("x").is_err());
        assert_eq!(SlotSet::range(0, 16383).len(), SLOTS);
    }

    proptest! {
        /// The set against a model (a sorted vector of slots).
        #[test]
        fn slot_set_is_a_set(ops in proptest::collection::vec((any::<bool>(), 0u16..16384), 0..200)) {
            let mut s = SlotSet::default();
            let mut model = std::collections::BTreeSet::new();
            for (add, slot) in ops {
                if add { s.insert(slot); model.insert(slot); } else { s.remove(slot); model.remove(&slot); }
            }
            prop_assert_eq!(s.len(), model.len());
            prop_assert_eq!(s.iter().collect::<Vec<_>>(), model.iter().copied().collect::<Vec<_>>());
            let from_runs: Vec<Slot> = s.ranges().flat_map(|(a, b)| a..=b).collect();
            prop_assert_eq!(from_runs, model.into_iter().collect::<Vec<_>>());
        }

        #[test]
        fn slots_are_in_range_and_follow_the_tag(key in proptest::collection::vec(any::<u8>(), 0..40)) {
            prop_assert!(usize::from(key_slot(&key)) < SLOTS);
            let mut tagged = b"x{".to_vec();
            tagged.extend_from_slice(&key);
            tagged.extend_from_slice(b"}y");
            if !key.is_empty() && !key.contains(&b'}') {
                prop_assert_eq!(key_slot(&tagged), key_slot(&key));
            }
        }
    }
}
