//! Keys and values: byte strings, shared when cloned (a key travels in a request, its
//! response queue entry, its versions and the history, and each of those is a clone).
//!
//! NCC gives values no meaning beyond their bytes, with one exception: the **empty value**
//! is every key's initial value, the one no transaction wrote, and it is what a deletion
//! writes. A layer above that must tell an empty string from an absent key adds a byte of
//! its own. The simulator and the tests write numbers: [`Value::from`] a `u64` is its 8
//! big-endian bytes, except 0, which is the empty value, so "0" still names the initial
//! version; keys from numbers are always 8 bytes, so they sort as the numbers do.

use std::borrow::Borrow;
use std::fmt;

use bytes::Bytes;

/// A key: any byte string.
#[derive(Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Key(Bytes);

/// A value: any byte string; empty is the initial value (module docs).
#[derive(Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Value(Bytes);

macro_rules! byte_string {
    ($t:ident) => {
        impl $t {
            pub fn new(bytes: impl Into<Bytes>) -> $t {
                $t(bytes.into())
            }

            pub fn as_bytes(&self) -> &[u8] {
                &self.0
            }

            pub fn len(&self) -> usize {
                self.0.len()
            }

            pub fn is_empty(&self) -> bool {
                self.0.is_empty()
            }

            /// The shared bytes (a clone costs a reference count).
            pub fn bytes(&self) -> &Bytes {
                &self.0
            }
        }

        impl From<&[u8]> for $t {
            fn from(b: &[u8]) -> $t {
                $t(Bytes::copy_from_slice(b))
            }
        }

        impl From<Vec<u8>> for $t {
            fn from(b: Vec<u8>) -> $t {
                $t(Bytes::from(b))
            }
        }

        impl From<&str> for $t {
            fn from(s: &str) -> $t {
                $t(Bytes::copy_from_slice(s.as_bytes()))
            }
        }

        impl From<String> for $t {
            fn from(s: String) -> $t {
                $t(Bytes::from(s))
            }
        }

        impl AsRef<[u8]> for $t {
            fn as_ref(&self) -> &[u8] {
                &self.0
            }
        }

        // `Bytes` compares and hashes as its slice, so maps keyed by this type can be
        // searched with a `&[u8]`.
        impl Borrow<[u8]> for $t {
            fn borrow(&self) -> &[u8] {
                &self.0
            }
        }

        impl fmt::Debug for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(self, f)
            }
        }

        impl fmt::Display for $t {
            /// A number for what [`From<u64>`] made, the text for printable ASCII, and hex
            /// otherwise: what a failing simulator run or a test needs to show.
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                if let Some(n) = self.to_u64() {
                    write!(f, "{n}")
                } else if self.0.iter().all(|b| b.is_ascii_graphic() || *b == b' ') {
                    write!(f, "{:?}", String::from_utf8_lossy(&self.0))
                } else {
                    f.write_str("0x")?;
                    self.0.iter().try_for_each(|b| write!(f, "{b:02x}"))
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
        Some(u64::from_be_bytes(self.0.as_ref().try_into().ok()?))
    }
}

impl From<u64> for Key {
    fn from(n: u64) -> Key {
        Key(Bytes::copy_from_slice(&n.to_be_bytes()))
    }
}

impl Value {
    /// The number a value [`From<u64>`] holds, if it is one: 0 for the empty value.
    pub fn to_u64(&self) -> Option<u64> {
        if self.0.is_empty() {
            return Some(0);
        }
        let n = u64::from_be_bytes(self.0.as_ref().try_into().ok()?);
        // 8 zero bytes are not what `From<u64>` makes of 0.
        (n != 0).then_some(n)
    }
}

impl From<u64> for Value {
    fn from(n: u64) -> Value {
        if n == 0 {
            Value::default()
        } else {
            Value(Bytes::copy_from_slice(&n.to_be_bytes()))
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

    #[test]
    fn display_names_what_a_person_reads() {
        assert_eq!(Key::from(7).to_string(), "7");
        assert_eq!(Value::default().to_string(), "0");
        assert_eq!(Key::from("user:1").to_string(), "\"user:1\"");
        assert_eq!(Key::from(&[0u8, 255][..]).to_string(), "0x00ff");
    }
}
