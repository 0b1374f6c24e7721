//! Keys and values: byte strings. A request's key is copied into its queue entry, its
//! versions and the history, so copies must be cheap: a short string (at most
//! [`INLINE_MAX`] bytes: most keys, and numbers) lives in place, and a copy is a copy of
//! 32 bytes with no allocation and no shared counter; a longer one is shared
//! (`bytes::Bytes`), and a copy costs a reference count. (Shared-only cost the simulator a
//! fifth of its speed: an allocation per key, and an atomic per copy and per drop.)
//!
//! NCC gives values no meaning beyond their bytes, with one exception: the **empty value**
//! is every key's initial value, the one no transaction wrote, and it is what a deletion
//! writes. A layer above that must tell an empty string from an absent key adds a byte of
//! its own. The simulator and the tests write numbers: [`Value::from`] a `u64` is its 8
//! big-endian bytes, except 0, which is the empty value, so "0" still names the initial
//! version; keys from numbers are always 8 bytes, so they sort as the numbers do.

use std::borrow::Borrow;
use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};

use bytes::Bytes;

/// The longest byte string kept in place: with its length, 24 bytes, which leaves the
/// shared form's vtable pointer free to tell the two apart, so either takes 32 bytes.
pub const INLINE_MAX: usize = 23;

#[derive(Clone)]
enum Repr {
    Inline { len: u8, buf: [u8; INLINE_MAX] },
    Shared(Bytes),
}

impl Repr {
    fn new(bytes: &[u8]) -> Repr {
        if bytes.len() <= INLINE_MAX {
            let mut buf = [0; INLINE_MAX];
            buf[..bytes.len()].copy_from_slice(bytes);
            Repr::Inline {
                len: bytes.len() as u8,
                buf,
            }
        } else {
            Repr::Shared(Bytes::copy_from_slice(bytes))
        }
    }

    fn from_bytes(bytes: Bytes) -> Repr {
        if bytes.len() <= INLINE_MAX {
            Repr::new(&bytes)
        } else {
            Repr::Shared(bytes)
        }
    }

    fn as_slice(&self) -> &[u8] {
        match self {
            Repr::Inline { len, buf } => &buf[..usize::from(*len)],
            Repr::Shared(b) => b,
        }
    }
}

/// A key: any byte string.
#[derive(Clone)]
pub struct Key(Repr);

/// A value: any byte string; empty is the initial value (module docs).
#[derive(Clone)]
pub struct Value(Repr);

/// Byte order, as `<[u8]>::cmp`, but a first difference within 8 bytes (every numeric key,
/// most others) is found by one compare of words instead of a call to `memcmp`: an index
/// search makes some twenty of these per request.
fn compare(a: &[u8], b: &[u8]) -> Ordering {
    if let (Some(x), Some(y)) = (a.first_chunk::<8>(), b.first_chunk::<8>()) {
        match u64::from_be_bytes(*x).cmp(&u64::from_be_bytes(*y)) {
            Ordering::Equal => a[8..].cmp(&b[8..]),
            unequal => unequal,
        }
    } else {
        a.cmp(b)
    }
}

macro_rules! byte_string {
    ($t:ident) => {
        impl $t {
            /// From shared bytes: kept shared if long, copied in place if short.
            pub fn new(bytes: impl Into<Bytes>) -> $t {
                $t(Repr::from_bytes(bytes.into()))
            }

            pub fn as_bytes(&self) -> &[u8] {
                self.0.as_slice()
            }

            pub fn len(&self) -> usize {
                self.as_bytes().len()
            }

            pub fn is_empty(&self) -> bool {
                self.as_bytes().is_empty()
            }
        }

        impl Default for $t {
            fn default() -> $t {
                $t(Repr::new(&[]))
            }
        }

        // Equality, order and hash are the bytes' (whichever the representation), so maps
        // keyed by this type can be searched with a `&[u8]`.
        impl PartialEq for $t {
            fn eq(&self, other: &$t) -> bool {
                match (&self.0, &other.0) {
                    // Padded with zeros: a few word compares, no call.
                    (Repr::Inline { len: a, buf: x }, Repr::Inline { len: b, buf: y }) => {
                        a == b && x == y
                    }
                    _ => self.as_bytes() == other.as_bytes(),
                }
            }
        }

        impl Eq for $t {}

        impl PartialOrd for $t {
            fn partial_cmp(&self, other: &$t) -> Option<Ordering> {
                Some(self.cmp(other))
            }
        }

        impl Ord for $t {
            fn cmp(&self, other: &$t) -> Ordering {
                compare(self.as_bytes(), other.as_bytes())
            }
        }

        impl Hash for $t {
            fn hash<H: Hasher>(&self, state: &mut H) {
                self.as_bytes().hash(state)
            }
        }

        impl From<&[u8]> for $t {
            fn from(b: &[u8]) -> $t {
                $t(Repr::new(b))
            }
        }

        impl From<Vec<u8>> for $t {
            fn from(b: Vec<u8>) -> $t {
                $t::new(b)
            }
        }

        impl From<&str> for $t {
            fn from(s: &str) -> $t {
                $t(Repr::new(s.as_bytes()))
            }
        }

        impl From<String> for $t {
            fn from(s: String) -> $t {
                $t::new(s)
            }
        }

        impl AsRef<[u8]> for $t {
            fn as_ref(&self) -> &[u8] {
                self.as_bytes()
            }
        }

        impl Borrow<[u8]> for $t {
            fn borrow(&self) -> &[u8] {
                self.as_bytes()
            }
        }

        impl fmt::Debug for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(self, f)
            }
        }

        impl fmt::Display for $t {
            /// Printable ASCII as quoted text, then a number for 8 bytes (what [`From<u64>`]
            /// made; a value's empty initial one shows as 0), and hex otherwise: what a
            /// failing simulator run or a test needs to show.
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                let bytes = self.as_bytes();
                let text = bytes.iter().all(|b| b.is_ascii_graphic() || *b == b' ');
                if text && (!bytes.is_empty() || self.to_u64().is_none()) {
                    write!(f, "{:?}", String::from_utf8_lossy(bytes))
                } else if let Some(n) = self.to_u64() {
                    write!(f, "{n}")
                } else {
                    f.write_str("0x")?;
                    bytes.iter().try_for_each(|b| write!(f, "{b:02x}"))
                }
            }
        }
    };
}

byte_string!(Key);
byte_string!(Value);

impl Key {
    /// The number a key [`From<u64>`] holds, if it is one (8 bytes).
    pub fn to_u64(&self) -> Option<u64> {
        Some(u64::from_be_bytes(self.as_bytes().try_into().ok()?))
    }
}

impl From<u64> for Key {
    fn from(n: u64) -> Key {
        Key(Repr::new(&n.to_be_bytes()))
    }
}

impl Value {
    /// The number a value [`From<u64>`] holds, if it is one: 0 for the empty value.
    pub fn to_u64(&self) -> Option<u64> {
        if self.is_empty() {
            return Some(0);
        }
        let n = u64::from_be_bytes(self.as_bytes().try_into().ok()?);
        // 8 zero bytes are not what `From<u64>` makes of 0.
        (n != 0).then_some(n)
    }
}

impl From<u64> for Value {
    fn from(n: u64) -> Value {
        if n == 0 {
            Value::default()
        } else {
            Value(Repr::new(&n.to_be_bytes()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn numbers_round_trip_and_keep_their_order(a: u64, b: u64) {
            prop_assert_eq!(Key::from(a).to_u64(), Some(a));
            prop_assert_eq!(Value::from(a).to_u64(), Some(a));
            prop_assert_eq!(Key::from(a).cmp(&Key::from(b)), a.cmp(&b));
            prop_assert_eq!(Value::from(a).is_empty(), a == 0);
        }

        #[test]
        fn other_bytes_are_not_numbers(bytes in proptest::collection::vec(any::<u8>(), 0..20)) {
            let k = Key::from(bytes.clone());
            prop_assert_eq!(k.to_u64().is_some(), bytes.len() == 8);
            let v = Value::from(bytes.clone());
            let number = bytes.is_empty() || (bytes.len() == 8 && bytes.iter().any(|&b| b != 0));
            prop_assert_eq!(v.to_u64().is_some(), number);
            prop_assert_eq!(k.as_bytes(), &bytes[..]);
        }
    }

    proptest! {
        /// Short and long strings (both sides of [`INLINE_MAX`]) compare, order and hash
        /// as their bytes, however they were made.
        #[test]
        fn either_representation_behaves_as_its_bytes(
            a in proptest::collection::vec(any::<u8>(), 0..40),
            b in proptest::collection::vec(any::<u8>(), 0..40),
        ) {
            use std::collections::hash_map::DefaultHasher;
            let hash = |x: &dyn Fn(&mut DefaultHasher)| {
                let mut h = DefaultHasher::new();
                x(&mut h);
                h.finish()
            };
            let (ka, kb) = (Key::from(&a[..]), Key::new(b.clone()));
            prop_assert_eq!(ka.as_bytes(), &a[..]);
            prop_assert_eq!(kb.as_bytes(), &b[..]);
            let copy = ka.clone();
            prop_assert_eq!(copy.as_bytes(), &a[..]);
            prop_assert_eq!(ka.cmp(&kb), a.cmp(&b));
            prop_assert_eq!(ka == kb, a == b);
            prop_assert_eq!(hash(&|h| ka.hash(h)), hash(&|h| a[..].hash(h)));
            prop_assert_eq!(Key::new(a.clone()), ka);
        }
    }

    proptest! {
        /// Strings sharing a prefix (of any length, around the 8 bytes `compare` takes as a
        /// word) order as their bytes.
        #[test]
        fn strings_with_a_common_prefix_order_as_their_bytes(
            prefix in proptest::collection::vec(0u8..3, 0..12),
            a_tail in proptest::collection::vec(0u8..3, 0..3),
            b_tail in proptest::collection::vec(0u8..3, 0..3),
        ) {
            let a = [&prefix[..], &a_tail[..]].concat();
            let b = [&prefix[..], &b_tail[..]].concat();
            prop_assert_eq!(Key::from(&a[..]).cmp(&Key::from(&b[..])), a.cmp(&b));
            prop_assert_eq!(Value::from(&a[..]) == Value::from(&b[..]), a == b);
        }
    }

    #[test]
    fn short_strings_live_in_place() {
        assert_eq!(std::mem::size_of::<Key>(), 32);
        assert!(matches!(Key::from(7).0, Repr::Inline { .. }));
        assert!(matches!(
            Value::from(&[1u8; INLINE_MAX][..]).0,
            Repr::Inline { .. }
        ));
        assert!(matches!(
            Value::from(vec![1u8; INLINE_MAX + 1]).0,
            Repr::Shared(_)
        ));
    }

    #[test]
    fn display_names_what_a_person_reads() {
        assert_eq!(Key::from(7).to_string(), "7");
        assert_eq!(Value::default().to_string(), "0");
        assert_eq!(Key::from("user:1").to_string(), "\"user:1\"");
        assert_eq!(
            Key::from("user:123").to_string(),
            "\"user:123\"",
            "8 bytes of text"
        );
        assert_eq!(Key::from(&b""[..]).to_string(), "\"\"");
        assert_eq!(Key::from(&[0u8, 255][..]).to_string(), "0x00ff");
    }
}
