//! Where an NCC server keeps what is decided: each key's committed versions, and the `t_r`
//! of its newest one once nothing on the key is in flight (issue 18 item 3: "versions are
//! engine versions").
//!
//! The server ([`crate::Server`]) keeps a key's state in memory only while something on
//! the key is undecided or waiting: its response queue, its undecided versions, and the
//! version just below them. The rest lives in a [`Store`]:
//! - a version is **installed** once it is committed and every version below it on its key
//!   is decided, so the store sees each key's committed versions exactly once, in `t_w`
//!   order, and never an undecided or aborted one (NCC lets nothing read those);
//! - a key whose requests are all decided is **evicted**: the `t_r` its newest version
//!   reached is raised in the store ([`Store::raise_read`]), and the in-memory state goes.
//!   The next request on the key loads the newest version back ([`Store::load`]), so a
//!   write is still refined above every read already answered.
//!
//! [`MemStore`] is a map, for the simulator and the model checker; `verso-txn-net` keeps
//! the versions in the engine instead (`EngineStore`), at their `t_w` as the commit
//! timestamp, with `t_r` as the engine record's read stamp.

use std::collections::BTreeMap;

use crate::types::{Key, Op, Ts, Value};

/// A key's newest decided version, as a server reloads it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Stored {
    /// The server's number for the version (`Server::decided_through` counts in these);
    /// 0 for the initial version, which no transaction wrote.
    pub id: u64,
    pub value: Value,
    pub tw: Ts,
    /// At least `tw`: the highest timestamp that read it, as far as the store was told.
    pub tr: Ts,
}

/// What a server needs of the place that keeps its decided versions (module docs).
///
/// Calls come in an order a store may rely on: a key's versions are installed with
/// increasing `t_w` and `id`; `raise_read` names the key's newest installed version (or the
/// initial one).
pub trait Store {
    /// `key`'s newest installed version with the highest `t_r` raised on it; for a key never
    /// written, the initial version (id 0, the empty value, `t_w` 0) with its `t_r`.
    fn load(&mut self, key: &Key) -> Stored;
    /// `version` of `key` committed, and every version below it is decided: it is now the
    /// key's newest decided version (`version.tr` is its `t_r` so far).
    fn install(&mut self, key: &Key, version: Stored);
    /// Reads up to `tr` have been answered from `key`'s newest installed version.
    fn raise_read(&mut self, key: &Key, tr: Ts);
    /// Whether it can hold versions and reads at `ts` (a store with a narrower timestamp
    /// encoding says no, and the server refuses the message: [`crate::Server::admits`]).
    fn admits(&self, ts: Ts) -> bool {
        let _ = ts;
        true
    }
    /// Whether it can keep `op`'s key and the value it writes (a store with size limits
    /// says no, and the server refuses the message as for [`Store::admits`]).
    fn fits(&self, op: &Op) -> bool {
        let _ = op;
        true
    }
}

/// A [`Store`] in a map: what the simulator and the model checker run on. `Hash` and `Eq`
/// so that a server's state stays one value for the explorer.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct MemStore {
    newest: BTreeMap<Key, Stored>,
}

impl MemStore {
    pub fn new() -> MemStore {
        MemStore::default()
    }

    /// `key`'s newest installed version, if it was ever installed or read.
    pub fn get(&self, key: &Key) -> Option<Stored> {
        self.newest.get(key).cloned()
    }

    /// How many keys it holds a version for.
    pub fn len(&self) -> usize {
        self.newest.len()
    }

    pub fn is_empty(&self) -> bool {
        self.newest.is_empty()
    }
}

impl Store for MemStore {
    fn load(&mut self, key: &Key) -> Stored {
        self.newest.get(key).cloned().unwrap_or_default()
    }

    fn install(&mut self, key: &Key, version: Stored) {
        match self.newest.get_mut(key) {
            Some(prev) => {
                debug_assert!(
                    prev.tw < version.tw && prev.id < version.id,
                    "key {key}: {version:?} installed over {prev:?}"
                );
                *prev = version;
            }
            None => {
                self.newest.insert(key.clone(), version);
            }
        }
    }

    fn raise_read(&mut self, key: &Key, tr: Ts) {
        if let Some(v) = self.newest.get_mut(key) {
            v.tr = v.tr.max(tr);
            return;
        }
        let v = self.newest.entry(key.clone()).or_default();
        v.tr = v.tr.max(tr);
    }
}

impl<S: Store + ?Sized> Store for Box<S> {
    fn load(&mut self, key: &Key) -> Stored {
        (**self).load(key)
    }
    fn install(&mut self, key: &Key, version: Stored) {
        (**self).install(key, version)
    }
    fn raise_read(&mut self, key: &Key, tr: Ts) {
        (**self).raise_read(key, tr)
    }
    fn admits(&self, ts: Ts) -> bool {
        (**self).admits(ts)
    }
    fn fits(&self, op: &Op) -> bool {
        (**self).fits(op)
    }
}
