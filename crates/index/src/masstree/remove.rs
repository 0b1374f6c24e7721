//! Removes (thesis §3.1.6 "Removes"): drop the entry from the permutation under the lock,
//! never clearing slot memory a reader may still read; the `INSERTING` mark bumps `vinsert`
//! so a reader that read the slot retries, and a later reuse of the slot bumps it again.
//!
//! Not yet done: unlinking empty border nodes and removing empty layers (see `mod.rs`).

use crossbeam_epoch as epoch;

use super::key::{Key, KSUF, LAYER};
use super::node::Header;
use super::sync::Ordering;
use super::{retire_suffix, IndexValue, Masstree};

impl<V: IndexValue> Masstree<V> {
    /// Removes `key`, returning its value.
    pub fn remove(&self, key: &[u8]) -> Option<V> {
        let g = epoch::pin();
        let mut root = self.root.load(Ordering::Acquire);
        let mut k = Key::new(key);
        loop {
            let n = Self::lock_border(root, &k, &g);
            let perm = n.perm();
            let Ok(pos) = n.search(perm, k.slice(), k.ilen()) else {
                n.header.version.unlock();
                return None;
            };
            let s = perm.slot(pos);
            let e = n.read_slot(s);
            if e.keylenx == LAYER {
                root = e.value as usize as *mut Header;
                n.header.version.unlock();
                k.shift();
                continue;
            }
            // SAFETY: a live KSUF slot owns a published suffix; we hold the lock.
            if e.keylenx == KSUF && *unsafe { &*e.suffix }.0 != *k.suffix() {
                n.header.version.unlock();
                return None;
            }
            n.header.version.mark_insert();
            let np = perm.remove(pos);
            assert!(np.is_valid() && np.count() + 1 == perm.count());
            n.permutation.store(np.0, Ordering::Release);
            if e.has_suffix() {
                // The slot keeps pointing at the suffix (never cleared); it no longer owns it.
                retire_suffix(&g, e.suffix);
            }
            n.header.version.unlock();
            // SAFETY: a non-LAYER slot holds `V::into_bits` words.
            return Some(unsafe { V::from_bits(e.value) });
        }
    }
}
