//! A value as the gateway stores it in NCC's groups. NCC gives the empty value one meaning,
//! "never written or deleted", so every stored value starts with a byte of its own: its
//! type. An empty Redis string is then one byte, not the absent key.

/// The type byte of a string.
pub const STRING: u8 = b's';

/// What a key holds, as the gateway reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Stored {
    Absent,
    String(Vec<u8>),
    /// A value of a type this gateway does not know (written by a later version), as
    /// stored: every command answers WRONGTYPE rather than overwrite what it cannot read.
    Other(Vec<u8>),
}

/// What WATCH keeps of a value, to tell at EXEC whether it changed: a short value itself,
/// a long one by its length and a 64-bit hash (a connection may watch thousands of keys
/// of a megabyte each; a change the hash misses has odds of 2^-64).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Seen {
    Value(Stored),
    Digest { len: usize, hash: u64 },
}

/// Values up to this long are kept whole by WATCH.
const SEEN_WHOLE_MAX: usize = 64;

impl Seen {
    pub fn of(v: &Stored) -> Seen {
        let raw = match v {
            Stored::String(s) if s.len() > SEEN_WHOLE_MAX => encode(Some(s)),
            Stored::Other(raw) if raw.len() > SEEN_WHOLE_MAX => raw.clone(),
            _ => return Seen::Value(v.clone()),
        };
        use std::hash::{Hash, Hasher};
        // Fixed keys: the same value hashes alike at WATCH and at EXEC.
        let mut h = std::collections::hash_map::DefaultHasher::new();
        raw.hash(&mut h);
        Seen::Digest {
            len: raw.len(),
            hash: h.finish(),
        }
    }
}

/// The stored form of the string `s`, or of the absent key (`None`: the empty value, which
/// is what NCC writes for a deletion).
pub fn encode(s: Option<&[u8]>) -> Vec<u8> {
    match s {
        None => Vec::new(),
        Some(s) => {
            let mut out = Vec::with_capacity(1 + s.len());
            out.push(STRING);
            out.extend_from_slice(s);
            out
        }
    }
}

/// What the stored bytes `raw` hold.
pub fn decode(raw: &[u8]) -> Stored {
    match raw.split_first() {
        None => Stored::Absent,
        Some((&STRING, s)) => Stored::String(s.to_vec()),
        Some(_) => Stored::Other(raw.to_vec()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn a_string_decodes_to_itself(s in proptest::collection::vec(any::<u8>(), 0..64)) {
            prop_assert_eq!(decode(&encode(Some(&s))), Stored::String(s));
        }
    }

    #[test]
    fn watch_tells_long_values_apart_by_digest() {
        let long = |c: u8| Stored::String(vec![c; 1000]);
        assert_eq!(Seen::of(&long(b'a')), Seen::of(&long(b'a')));
        assert_ne!(Seen::of(&long(b'a')), Seen::of(&long(b'b')));
        assert!(matches!(
            Seen::of(&long(b'a')),
            Seen::Digest { len: 1001, .. }
        ));
        assert_eq!(Seen::of(&Stored::Absent), Seen::Value(Stored::Absent));
    }

    #[test]
    fn the_empty_string_is_not_the_absent_key() {
        assert_eq!(encode(Some(b"")), vec![STRING]);
        assert_eq!(encode(None), Vec::<u8>::new());
        assert_eq!(decode(&[]), Stored::Absent);
        assert_eq!(decode(b"z1"), Stored::Other(b"z1".to_vec()));
    }
}
