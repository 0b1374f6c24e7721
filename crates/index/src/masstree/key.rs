//! Slicing keys: layer `h` sees bytes `8h..8h+8` of a key as a big-endian `u64` (zero-padded,
//! so integer order is byte order among slices) plus a length class `ilen`: the number of key
//! bytes in the slice (0..=8), or 9 for "longer than 8 bytes" (a suffix or a deeper layer).
//! Entries of one layer are ordered by `(slice, ilen)`, which is byte order: a shorter key
//! that zero-pads to the same slice is a prefix of the longer one, and `keylenx` tells them
//! apart even when keys hold zero bytes.

/// `keylenx` of an entry whose key continues past this slice by more than 8 bytes: the
/// remainder is stored out of line ([`super::node::Suffix`]).
pub(crate) const KSUF: u8 = 64;
/// `keylenx` of an entry whose key continues past this slice by `n` = 1..=8 bytes:
/// `KSUF + n`, the remainder packed into one word of the node's suffix block (no
/// allocation, and one miss fewer to compare it than an out-of-line suffix).
pub(crate) const KSUF_SHORT_MAX: u8 = KSUF + 8;
/// `keylenx` of an entry whose key continues past this slice by more than 8 bytes, when the
/// value holds the whole key ([`super::IndexValue::HOLDS_KEY`]): the index keeps no copy of
/// the remainder and compares against the value's key.
pub(crate) const KSUF_IN_VALUE: u8 = KSUF_SHORT_MAX + 1;

/// Whether `keylenx` says the entry has a suffix (short, long, or in the value).
#[inline]
pub(crate) fn has_suffix(keylenx: u8) -> bool {
    (KSUF..=KSUF_IN_VALUE).contains(&keylenx)
}
/// `keylenx` of an entry whose value is the root of the next layer.
pub(crate) const LAYER: u8 = 128;
/// `keylenx` while a new layer is being installed in the slot; readers retry.
pub(crate) const UNSTABLE: u8 = 129;

/// The length class used for ordering: `0..=8`, or 9 for suffix and layer entries.
#[inline]
pub(crate) fn ilen_of(keylenx: u8) -> u8 {
    if keylenx <= 8 {
        keylenx
    } else {
        9
    }
}

/// A key being walked down the layers.
#[derive(Clone, Copy)]
pub(crate) struct Key<'a> {
    full: &'a [u8],
    off: usize,
}

/// The big-endian slice of up to 8 leading bytes of `b`, zero-padded.
#[inline]
pub(crate) fn slice_of(b: &[u8]) -> u64 {
    let mut buf = [0u8; 8];
    let n = b.len().min(8);
    buf[..n].copy_from_slice(&b[..n]);
    u64::from_be_bytes(buf)
}

impl<'a> Key<'a> {
    pub(crate) fn new(full: &'a [u8]) -> Self {
        Key { full, off: 0 }
    }

    /// The bytes this layer and deeper ones see.
    #[inline]
    pub(crate) fn rest(&self) -> &'a [u8] {
        &self.full[self.off..]
    }

    #[inline]
    pub(crate) fn slice(&self) -> u64 {
        slice_of(self.rest())
    }

    /// Bytes of the key inside this layer's slice (0..=8).
    #[inline]
    pub(crate) fn len_in_slice(&self) -> u8 {
        self.rest().len().min(8) as u8
    }

    /// `true` when the key continues past this layer's slice.
    #[inline]
    pub(crate) fn has_suffix(&self) -> bool {
        self.rest().len() > 8
    }

    /// The ordering length class (see the module docs).
    #[inline]
    pub(crate) fn ilen(&self) -> u8 {
        if self.has_suffix() {
            9
        } else {
            self.len_in_slice()
        }
    }

    /// The bytes after this layer's slice.
    #[inline]
    pub(crate) fn suffix(&self) -> &'a [u8] {
        let r = self.rest();
        if r.len() > 8 {
            &r[8..]
        } else {
            &[]
        }
    }

    /// Moves to the next layer.
    #[inline]
    pub(crate) fn shift(&mut self) {
        assert!(self.has_suffix());
        self.off += 8;
    }

    /// The keylenx a new entry for this key gets.
    /// Where the suffix starts in the whole key (past this layer's slice).
    #[inline]
    pub(crate) fn suffix_offset(&self) -> usize {
        self.off + 8
    }

    /// The `keylenx` of an entry for this key; `held` when values of the tree hold their
    /// key, so a long suffix is left in the value.
    #[inline]
    pub(crate) fn keylenx(&self, held: bool) -> u8 {
        let n = self.suffix().len();
        match n {
            0 => self.len_in_slice(),
            1..=8 => KSUF + n as u8,
            _ if held => KSUF_IN_VALUE,
            _ => KSUF,
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn slices_order_like_bytes() {
        let keys: [&[u8]; 7] = [b"", b"\0", b"\0\0", b"a", b"a\0", b"ab", b"abcdefgh"];
        for w in keys.windows(2) {
            let (a, b) = (Key::new(w[0]), Key::new(w[1]));
            assert!((a.slice(), a.ilen()) < (b.slice(), b.ilen()), "{:?}", w);
        }
        let mut k = Key::new(b"0123456789");
        assert_eq!(k.ilen(), 9);
        assert_eq!(k.suffix(), b"89");
        k.shift();
        assert_eq!((k.slice(), k.ilen()), (slice_of(b"89"), 2));
    }
}
