//! Dependency edges from the inferred orders of appends, and the check that ties the
//! passes together.
//!
//! For each key with order `L` (its longest list read) and `U` (the counted txns with an
//! append no read saw, which must come after all of `L`, since every read is a prefix of
//! the final list and `L` is one of them):
//! * ww: the appenders of consecutive elements of `L`, and `L`'s last appender -> each of
//!   `U`;
//! * wr: the appender of the last element of a read -> the reader;
//! * rw: a reader of `n < |L|` elements -> the appender of `L[n]`; a reader of all of `L`
//!   -> each of `U` (through relay nodes, see [`Deps::relay_unread`]).
//!
//! Reads exclude the reader's own appends (checked in [`super::infer`]), so a txn that
//! read `[1]` and appended 2 depends on 1's appender and anti-depends on nobody.

use std::collections::HashMap;

use super::infer::{self, AppendIndex, Obs, UNREAD};
use super::{show_list, AppendHistory};
use crate::check::{search_cycles, CheckStats, Level, TxnMeta, TxnView};
use crate::graph::Edge;
use crate::index::{KeyId, TxnIdx};
use crate::violation::{EdgeKind, Violation};

pub(super) fn check(h: &AppendHistory, level: Level) -> Result<CheckStats, Violation> {
    let (ix, obs) = infer::build(h)?;
    let n_txn = ix.txns.len();
    let mut deps = Deps::build(&ix, &obs);
    let mut stats = CheckStats::tally(h.txns.iter().map(|t| t.outcome), n_txn, &deps.edges);
    stats.unknown_included = ix.unknown_included;
    stats.keys = ix.keys.len();
    stats.keys_partial_order = deps.keys_with_unread;
    stats.observations = obs.len();
    let intervals: Option<Vec<(u32, u64, u64)>> = (level == Level::StrictSerializable).then(|| {
        (0..n_txn as TxnIdx)
            .filter(|&t| ix.included[t as usize])
            .map(|t| (t, ix.txn(t).begin, ix.txn(t).end))
            .collect()
    });
    let view = View {
        ix: &ix,
        notes: &deps.notes,
    };
    stats.rt_edges = search_cycles(
        &view,
        level,
        n_txn,
        deps.n_aux,
        &mut deps.edges,
        intervals.as_deref(),
    )?;
    Ok(stats)
}

/// Why an edge exists, to explain a reported cycle in terms of list elements. Element
/// arguments are [`infer::Elem`] indices.
#[derive(Clone, Copy)]
enum Note {
    /// Between relay nodes: the step's other edges say it all.
    Relay,
    /// `a` and `b` are adjacent in the key's order.
    Next { a: u32, b: u32 },
    /// `a` ends the key's order and no read saw `b`.
    AfterAll { a: u32, b: u32 },
    /// `reader` saw the first `len` elements of `key`'s order; the source appended the
    /// last one.
    Saw {
        reader: TxnIdx,
        key: KeyId,
        len: u32,
    },
    /// `reader` saw the first `len` elements; the target appended the next one.
    Missed {
        reader: TxnIdx,
        key: KeyId,
        len: u32,
    },
    /// `reader` saw all of the key's order (towards the appends no read saw).
    SawAll {
        reader: TxnIdx,
        key: KeyId,
        len: u32,
    },
    /// The target appended `e`, which no read saw.
    Unread { e: u32 },
}

#[derive(Default)]
struct Deps {
    edges: Vec<Edge>,
    /// `notes[i]` explains `edges[i]` (real-time edges, added later, have none).
    notes: Vec<Note>,
    /// Relay nodes, numbered from the txn count up.
    n_aux: usize,
    keys_with_unread: usize,
}

impl Deps {
    fn build(ix: &AppendIndex<'_>, obs: &[Obs]) -> Self {
        let n_txn = ix.txns.len() as u32;
        let writer = |e: u32| ix.elems[e as usize].writer;
        let mut d = Deps::default();
        let mut unread: Vec<Vec<(TxnIdx, u32)>> = Vec::with_capacity(ix.per_key.len());
        for (k, state) in ix.per_key.iter().enumerate() {
            let k = k as KeyId;
            for pair in state.order.windows(2) {
                let (a, b) = (pair[0], pair[1]);
                d.add(writer(a), writer(b), EdgeKind::Ww, k, Note::Next { a, b });
            }
            // A txn's appends are adjacent in `state.elems`, so deduplicating against the
            // previous entry keeps each txn once.
            let mut u: Vec<(TxnIdx, u32)> = Vec::new();
            for &e in &state.elems {
                let elem = &ix.elems[e as usize];
                if elem.pos == UNREAD
                    && ix.included[elem.writer as usize]
                    && u.last().is_none_or(|&(w, _)| w != elem.writer)
                {
                    u.push((elem.writer, e));
                }
            }
            if let Some(&a) = state.order.last() {
                for &(w, b) in &u {
                    d.add(writer(a), w, EdgeKind::Ww, k, Note::AfterAll { a, b });
                }
            }
            d.keys_with_unread += usize::from(!u.is_empty());
            unread.push(u);
        }

        let mut full_readers: Vec<Vec<TxnIdx>> = vec![Vec::new(); ix.per_key.len()];
        for o in obs {
            let order = &ix.per_key[o.key as usize].order;
            let (reader, key, len) = (o.reader, o.key, o.len);
            if len > 0 {
                let last = writer(order[len as usize - 1]);
                d.add(
                    last,
                    reader,
                    EdgeKind::Wr,
                    key,
                    Note::Saw { reader, key, len },
                );
            }
            if let Some(&next) = order.get(len as usize) {
                let note = Note::Missed { reader, key, len };
                d.add(reader, writer(next), EdgeKind::Rw, key, note);
            } else if !unread[key as usize].is_empty() {
                full_readers[key as usize].push(reader);
            }
        }
        for (k, readers) in full_readers.iter().enumerate() {
            let len = ix.per_key[k].order.len() as u32;
            d.relay_unread(n_txn, k as KeyId, &unread[k], readers, len);
        }
        d
    }

    fn add(&mut self, from: u32, to: u32, kind: EdgeKind, key: KeyId, note: Note) {
        if from != to {
            self.edges.push(Edge {
                from,
                to,
                kind,
                key,
            });
            self.notes.push(note);
        }
    }

    /// Readers of a key's whole order anti-depend on every txn in `unread`. Rather than
    /// readers x appenders edges, the appenders `u_0..u_m` hang off two chains of relay
    /// nodes: suffix node `S_j` reaches `u_j..`, prefix node `P_j` reaches `..=u_j`. A
    /// reader outside `unread` enters `S_0`; reader `u_i` (it read everything, then
    /// appended) enters `P_{i-1}` and `S_{i+1}`, since an edge to itself would close a
    /// spurious cycle through the relay. Every edge on these paths is an rw edge of the
    /// key, so a cycle through them prints as one rw step.
    fn relay_unread(
        &mut self,
        n_txn: u32,
        k: KeyId,
        unread: &[(TxnIdx, u32)],
        readers: &[TxnIdx],
        len: u32,
    ) {
        if readers.is_empty() {
            return;
        }
        let m = unread.len() as u32;
        let base = n_txn + self.n_aux as u32;
        self.n_aux += 2 * m as usize;
        let suffix = |j: u32| base + j;
        let prefix = |j: u32| base + m + j;
        for (j, &(w, e)) in (0u32..).zip(unread) {
            self.add(suffix(j), w, EdgeKind::Rw, k, Note::Unread { e });
            self.add(prefix(j), w, EdgeKind::Rw, k, Note::Unread { e });
            if j + 1 < m {
                self.add(suffix(j), suffix(j + 1), EdgeKind::Rw, k, Note::Relay);
            }
            if j > 0 {
                self.add(prefix(j), prefix(j - 1), EdgeKind::Rw, k, Note::Relay);
            }
        }
        let index: HashMap<TxnIdx, u32> = (0u32..).zip(unread).map(|(j, &(w, _))| (w, j)).collect();
        for &reader in readers {
            let note = Note::SawAll {
                reader,
                key: k,
                len,
            };
            match index.get(&reader) {
                None => self.add(reader, suffix(0), EdgeKind::Rw, k, note),
                Some(&i) => {
                    if i > 0 {
                        self.add(reader, prefix(i - 1), EdgeKind::Rw, k, note);
                    }
                    if i + 1 < m {
                        self.add(reader, suffix(i + 1), EdgeKind::Rw, k, note);
                    }
                }
            }
        }
    }
}

struct View<'a, 'h> {
    ix: &'a AppendIndex<'h>,
    notes: &'a [Note],
}

impl TxnView for View<'_, '_> {
    fn meta(&self, t: TxnIdx) -> TxnMeta {
        let txn = self.ix.txn(t);
        TxnMeta::new(
            txn.id,
            txn.outcome,
            (txn.begin, txn.end),
            txn.ts,
            txn.ops.len(),
        )
    }

    fn key(&self, k: KeyId) -> &[u8] {
        self.ix.keys[k as usize]
    }

    fn explain(&self, edge: u32) -> Option<String> {
        let ix = self.ix;
        let elem = |e: u32| &ix.elems[e as usize];
        let who = |e: u32| ix.id(elem(e).writer);
        let at = |key: KeyId, i: u32| ix.per_key[key as usize].order[i as usize];
        let saw = |reader: TxnIdx, key: KeyId, len: u32| {
            let list = &ix.per_key[key as usize].longest[..len as usize];
            format!("T{} saw {}", ix.id(reader), show_list(list))
        };
        Some(match *self.notes.get(edge as usize)? {
            Note::Relay => return None,
            Note::Next { a, b } => format!(
                "T{} appended {} right before T{} appended {}",
                who(a),
                elem(a).element,
                who(b),
                elem(b).element
            ),
            Note::AfterAll { a, b } => format!(
                "T{} appended {}, the last element read, and T{} appended {}, which no read saw, so later",
                who(a),
                elem(a).element,
                who(b),
                elem(b).element
            ),
            Note::Saw { reader, key, len } => {
                let last = at(key, len - 1);
                format!(
                    "{}, ending with {} that T{} appended",
                    saw(reader, key, len),
                    elem(last).element,
                    who(last)
                )
            }
            Note::Missed { reader, key, len } => {
                let next = at(key, len);
                format!(
                    "{}, and T{} appended the next element, {}",
                    saw(reader, key, len),
                    who(next),
                    elem(next).element
                )
            }
            Note::SawAll { reader, key, len } => {
                format!("{}, the longest list read", saw(reader, key, len))
            }
            Note::Unread { e } => format!(
                "T{} appended {}, which no read saw, so after every element read",
                who(e),
                elem(e).element
            ),
        })
    }
}
