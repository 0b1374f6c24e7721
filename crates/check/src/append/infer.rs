//! Inferring each key's order of appends from the lists read, and the anomalies visible
//! without a dependency graph.
//!
//! The order of a key is its longest list read by a counted txn. Every other read must
//! be a prefix of it, which is checked by comparing slices (a `memcmp`) against the
//! longest list known so far; when a longer read comes along, the old longest must be its
//! prefix (so everything compared before stays a prefix, by transitivity) and only its
//! new tail is looked up element by element. So the cost is one `memcmp` per read plus
//! one hash lookup per element of the final longest list: a key appended 10,000 times
//! and read 10,000 times costs 10,000 compares of at most 80 KB, not 10^8 lookups.
//! Garbage, aborted (G1a) and duplicate elements are found on those lookups; a read that
//! is *not* a prefix is examined element by element once (it is an anomaly anyway).
//!
//! Deciding which `Unknown` txns count happens on the same pass, since what counts as
//! read depends on which readers count: [`include_observed`] feeds it one txn at a time.

use std::collections::{HashMap, HashSet};
use std::ops::Range;

use super::{show_list, AppendHistory, AppendOp, AppendTxnRecord};
use crate::history::{display_key, Outcome};
use crate::index::{include_observed, index_ids, intern, KeyId, TxnIdx};
use crate::violation::{AnomalyKind, Violation};

/// `Elem::pos` of an element no counted read contained.
pub(super) const UNREAD: u32 = u32::MAX;

/// One append of the history (by any txn).
pub(super) struct Elem {
    pub element: u64,
    pub key: KeyId,
    pub writer: TxnIdx,
    /// Whether this is the writer's last append to the key: a read that ends at any of
    /// its other appends saw an intermediate state (G1b).
    pub last: bool,
    /// Position in the key's longest list, or [`UNREAD`].
    pub pos: u32,
}

/// What is known of one key.
pub(super) struct KeyState<'h> {
    /// The longest list read by a counted txn: the inferred order of appends.
    pub longest: &'h [u64],
    /// Who read `longest` (meaningless while it is empty).
    longest_reader: TxnIdx,
    /// `order[i]`: the [`Elem`] index of `longest[i]`.
    pub order: Vec<u32>,
    /// Element -> [`Elem`] index.
    ids: HashMap<u64, u32>,
    /// This key's [`Elem`] indices, in history order.
    pub elems: Vec<u32>,
}

/// An external read: `len` elements of the key's order, the txn's own appends excluded.
#[derive(Clone, Copy)]
pub(super) struct Obs {
    pub reader: TxnIdx,
    pub key: KeyId,
    pub len: u32,
}

pub(super) struct AppendIndex<'h> {
    pub txns: &'h [AppendTxnRecord],
    pub included: Vec<bool>,
    pub unknown_included: usize,
    pub keys: Vec<&'h [u8]>,
    key_ids: HashMap<&'h [u8], KeyId>,
    /// Every append, grouped by txn in history order and by op order within a txn.
    pub elems: Vec<Elem>,
    /// `elems[elem_start[t]..elem_start[t + 1]]` are txn `t`'s appends.
    elem_start: Vec<u32>,
    pub per_key: Vec<KeyState<'h>>,
    /// Reads (txn, op) that are not a prefix of their key's longest list.
    incompatible_reads: HashSet<(TxnIdx, usize)>,
    /// The first of them, reported once nothing more direct is found.
    incompatible: Option<Violation>,
}

/// Indexes `h`, reports direct anomalies, and returns the external observations.
pub(super) fn build(h: &AppendHistory) -> Result<(AppendIndex<'_>, Vec<Obs>), Violation> {
    let txns = h.txns.as_slice();
    index_ids(txns.iter().map(|t| (t.id, t.begin, t.end)))?;
    let mut ix = AppendIndex {
        txns,
        included: Vec::new(),
        unknown_included: 0,
        keys: Vec::new(),
        key_ids: HashMap::new(),
        elems: Vec::new(),
        elem_start: Vec::with_capacity(txns.len() + 1),
        per_key: Vec::new(),
        incompatible_reads: HashSet::new(),
        incompatible: None,
    };
    ix.index_appends()?;
    let (included, unknown_included) =
        include_observed(txns.iter().map(|t| t.outcome), |t, out| {
            ix.observe_txn(t, out)
        })?;
    ix.included = included;
    ix.unknown_included = unknown_included;
    let (obs, intermediate) = ix.walk()?;
    if let Some(v) = ix.incompatible.take().or(intermediate) {
        return Err(v);
    }
    Ok((ix, obs))
}

impl<'h> AppendIndex<'h> {
    pub fn txn(&self, t: TxnIdx) -> &'h AppendTxnRecord {
        &self.txns[t as usize]
    }

    pub fn id(&self, t: TxnIdx) -> u64 {
        self.txns[t as usize].id
    }

    pub fn key_name(&self, k: KeyId) -> String {
        display_key(self.keys[k as usize])
    }

    fn own_elems(&self, t: TxnIdx) -> Range<usize> {
        self.elem_start[t as usize] as usize..self.elem_start[t as usize + 1] as usize
    }

    fn intern(&mut self, key: &'h [u8]) -> KeyId {
        let (k, new) = intern(&mut self.keys, &mut self.key_ids, key);
        if new {
            self.per_key.push(KeyState {
                longest: &[],
                longest_reader: 0,
                order: Vec::new(),
                ids: HashMap::new(),
                elems: Vec::new(),
            });
        }
        k
    }

    /// Interns every key and records every append, rejecting an element appended to a
    /// key twice (the order could not be inferred).
    fn index_appends(&mut self) -> Result<(), Violation> {
        let txns = self.txns;
        let mut last_of_key: HashMap<KeyId, u32> = HashMap::new();
        for (t, txn) in txns.iter().enumerate() {
            self.elem_start.push(self.elems.len() as u32);
            last_of_key.clear();
            for op in &txn.ops {
                let (key, element) = match op {
                    AppendOp::Read { key, .. } => {
                        self.intern(key);
                        continue;
                    }
                    AppendOp::Append { key, element } => (key, *element),
                };
                let k = self.intern(key);
                let e = self.elems.len() as u32;
                if let Some(&other) = self.per_key[k as usize].ids.get(&element) {
                    let first = self.id(self.elems[other as usize].writer);
                    return Err(Violation::new(
                        AnomalyKind::MalformedHistory,
                        vec![first, txn.id],
                        format!(
                            "element {element} was appended to key {} twice (by T{first} and T{}): \
                             elements must be unique per key",
                            display_key(key),
                            txn.id
                        ),
                    ));
                }
                if let Some(prev) = last_of_key.insert(k, e) {
                    self.elems[prev as usize].last = false;
                }
                let state = &mut self.per_key[k as usize];
                state.ids.insert(element, e);
                state.elems.push(e);
                self.elems.push(Elem {
                    element,
                    key: k,
                    writer: t as TxnIdx,
                    last: true,
                    pos: UNREAD,
                });
            }
        }
        self.elem_start.push(self.elems.len() as u32);
        Ok(())
    }

    /// Folds every read of counted txn `t` into its key's longest list, pushing the
    /// appenders of newly seen elements to `out`.
    fn observe_txn(&mut self, t: TxnIdx, out: &mut Vec<TxnIdx>) -> Result<(), Violation> {
        let txn = self.txn(t);
        for (op, read) in txn.ops.iter().enumerate() {
            if let AppendOp::Read { key, list } = read {
                let k = self.key_ids[key.as_slice()];
                self.observe_read(t, op, k, list, out)?;
            }
        }
        Ok(())
    }

    fn observe_read(
        &mut self,
        t: TxnIdx,
        op: usize,
        k: KeyId,
        list: &'h [u64],
        out: &mut Vec<TxnIdx>,
    ) -> Result<(), Violation> {
        let state = &self.per_key[k as usize];
        let known = state.longest;
        let common = list.len().min(known.len());
        if list[..common] != known[..common] {
            return self.incompatible_read(t, op, k, list);
        }
        if list.len() <= known.len() {
            return Ok(());
        }
        let state = &mut self.per_key[k as usize];
        for (i, &element) in list.iter().enumerate().skip(known.len()) {
            let Some(&e) = state.ids.get(&element) else {
                return Err(garbage(self.txns, t, self.keys[k as usize], list, element));
            };
            let elem = &mut self.elems[e as usize];
            if elem.pos != UNREAD {
                let first = elem.pos as usize;
                return Err(self.duplicate(t, k, list, element, first, i));
            }
            let writer = self.txns[elem.writer as usize].id;
            if self.txns[elem.writer as usize].outcome == Outcome::Aborted {
                return Err(aborted_read(
                    self.txns,
                    t,
                    self.keys[k as usize],
                    list,
                    element,
                    writer,
                ));
            }
            elem.pos = i as u32;
            state.order.push(e);
            out.push(elem.writer);
        }
        state.longest = list;
        state.longest_reader = t;
        Ok(())
    }

    /// A read that is not a prefix of the longest list so far (nor the other way round):
    /// reports what is wrong with its elements if anything, else remembers it as an
    /// incompatible order.
    fn incompatible_read(
        &mut self,
        t: TxnIdx,
        op: usize,
        k: KeyId,
        list: &'h [u64],
    ) -> Result<(), Violation> {
        let state = &self.per_key[k as usize];
        let key = self.keys[k as usize];
        let mut first_at: HashMap<u64, usize> = HashMap::with_capacity(list.len());
        for (i, &element) in list.iter().enumerate() {
            let Some(&e) = state.ids.get(&element) else {
                return Err(garbage(self.txns, t, key, list, element));
            };
            let writer = &self.txns[self.elems[e as usize].writer as usize];
            if writer.outcome == Outcome::Aborted {
                return Err(aborted_read(self.txns, t, key, list, element, writer.id));
            }
            if let Some(&first) = first_at.get(&element) {
                return Err(self.duplicate(t, k, list, element, first, i));
            }
            first_at.insert(element, i);
        }
        self.incompatible_reads.insert((t, op));
        if self.incompatible.is_none() {
            let other = state.longest;
            let at = list
                .iter()
                .zip(other)
                .position(|(a, b)| a != b)
                .unwrap_or(0);
            let (me, them) = (self.id(t), self.id(state.longest_reader));
            self.incompatible = Some(Violation::new(
                AnomalyKind::IncompatibleOrder,
                vec![me, them],
                format!(
                    "T{me} read key {} as {} and T{them} read it as {}: they differ at \
                     position {at} ({} vs {}), so no order of appends explains both",
                    display_key(key),
                    show_list(list),
                    show_list(other),
                    list[at],
                    other[at]
                ),
            ));
        }
        Ok(())
    }

    fn duplicate(
        &self,
        t: TxnIdx,
        k: KeyId,
        list: &[u64],
        element: u64,
        first: usize,
        again: usize,
    ) -> Violation {
        let me = self.id(t);
        Violation::new(
            AnomalyKind::DuplicateElements,
            vec![me],
            format!(
                "T{me} read key {} as {}, with element {element} at positions {first} and {again}",
                self.key_name(k),
                show_list(list)
            ),
        )
    }

    /// Walks every counted txn's ops in program order: its own appends must end each of
    /// its later reads of the key (and none it makes later may appear early). Returns the
    /// external observations and the first intermediate read (G1b), which is reported
    /// only after incompatible orders.
    fn walk(&self) -> Result<(Vec<Obs>, Option<Violation>), Violation> {
        let mut obs = Vec::new();
        let mut intermediate = None;
        for t in (0..self.txns.len() as TxnIdx).filter(|&t| self.included[t as usize]) {
            let mine = &self.elems[self.own_elems(t)];
            let mut made = 0;
            for (op, read) in self.txn(t).ops.iter().enumerate() {
                let (key, list) = match read {
                    AppendOp::Append { .. } => {
                        made += 1;
                        continue;
                    }
                    AppendOp::Read { key, list } => (key, list),
                };
                let k = self.key_ids[key.as_slice()];
                let compatible = !self.incompatible_reads.contains(&(t, op));
                let len = self.check_own(t, k, list, &mine[..made], &mine[made..], compatible)?;
                obs.push(Obs {
                    reader: t,
                    key: k,
                    len: len as u32,
                });
                if compatible && intermediate.is_none() && len > 0 {
                    intermediate = self.intermediate(t, k, len);
                }
            }
        }
        Ok((obs, intermediate))
    }

    /// Checks a read of key `k` by `t` against `t`'s appends made before it (`before`)
    /// and after it (`after`), all keys mixed; returns how many elements it read from
    /// others.
    fn check_own(
        &self,
        t: TxnIdx,
        k: KeyId,
        list: &[u64],
        before: &[Elem],
        after: &[Elem],
        compatible: bool,
    ) -> Result<usize, Violation> {
        let made = || before.iter().filter(|e| e.key == k).map(|e| e.element);
        let m = made().count();
        let n = list.len();
        let me = self.id(t);
        let internal = |why: String| {
            Violation::new(
                AnomalyKind::InternalInconsistency,
                vec![me],
                format!(
                    "T{me} read key {} as {}, {why}",
                    self.key_name(k),
                    show_list(list)
                ),
            )
        };
        if m > n || !list[n - m..].iter().copied().eq(made()) {
            let own: Vec<u64> = made().collect();
            return Err(internal(format!(
                "but its own appends to it so far, {}, do not end it",
                show_list(&own)
            )));
        }
        // Positions are those in the longest list, valid for reads that are a prefix.
        if compatible {
            if let Some(e) = after
                .iter()
                .find(|e| e.key == k && e.pos != UNREAD && (e.pos as usize) < n)
            {
                return Err(internal(format!(
                    "which already contains {}, an element it appends only later",
                    e.element
                )));
            }
        }
        Ok(n - m)
    }

    /// G1b: reader `t` saw `len` elements of key `k`, the last of which is not its
    /// appender's last append to the key.
    fn intermediate(&self, t: TxnIdx, k: KeyId, len: usize) -> Option<Violation> {
        let state = &self.per_key[k as usize];
        let elem = &self.elems[state.order[len - 1] as usize];
        if elem.writer == t || elem.last {
            return None;
        }
        let later = self.elems[self.own_elems(elem.writer)]
            .iter()
            .filter(|e| e.key == k)
            .skip_while(|e| e.element != elem.element)
            .nth(1)
            .map_or(0, |e| e.element);
        let (me, w) = (self.id(t), self.id(elem.writer));
        Some(Violation::new(
            AnomalyKind::G1b,
            vec![me, w],
            format!(
                "T{me} read key {} as {}, ending with {} that T{w} appended, but T{w} \
                 appended {later} to it later in the same txn",
                self.key_name(k),
                show_list(&state.longest[..len]),
                elem.element
            ),
        ))
    }
}

fn garbage(
    txns: &[AppendTxnRecord],
    t: TxnIdx,
    key: &[u8],
    list: &[u64],
    element: u64,
) -> Violation {
    let me = txns[t as usize].id;
    Violation::new(
        AnomalyKind::GarbageRead,
        vec![me],
        format!(
            "T{me} read key {} as {}, but no txn appended {element} to it",
            display_key(key),
            show_list(list)
        ),
    )
}

fn aborted_read(
    txns: &[AppendTxnRecord],
    t: TxnIdx,
    key: &[u8],
    list: &[u64],
    element: u64,
    writer: u64,
) -> Violation {
    let me = txns[t as usize].id;
    Violation::new(
        AnomalyKind::G1a,
        vec![me, writer],
        format!(
            "T{me} read key {} as {}, which contains {element}, appended by aborted T{writer}",
            display_key(key),
            show_list(list)
        ),
    )
}
