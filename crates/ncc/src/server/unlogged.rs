//! Read-only reads a replication group's host answers without logging them (issue 19
//! item 3's per-view `t_r` floor; ARCHITECTURE.md "Reads outside the log").
//!
//! A group logs its server's inputs, and a new host rebuilds the server by replaying them
//! (`replicated/`). Google-F1 and TAO are nearly all read-only transactions, and logging
//! each read made every read wait for a replication round and a majority's disks. A
//! read-only read changes one thing a later response can depend on: the `t_r` of the
//! key's newest version, which it raises (a read-only read here only ever reads a decided
//! version: `Server::execute_read_only`). Two consumers of that `t_r` must still see it:
//!
//! - **the host's later logged inputs, when replayed.** A write is refined above the `t_r`
//!   (Alg 5.2), and a replay that missed an unlogged read would refine it lower than the
//!   host did, and answer differently. So before each logged input the host logs a
//!   [`GroupNote::ReadsRaised`] with the `t_r` every key the input may touch had on the
//!   host: the keys in memory that an unlogged read raised since the last note (only keys
//!   in memory can be touched without being named by the input), and each key the input
//!   loads from the store (the store keeps the `t_r` of evicted keys). Replaying the note
//!   first makes the replay refine exactly as the host did.
//! - **the next host.** It never hears of the unlogged reads whose keys no later input
//!   touched. The host answers an unlogged read at `ts` only once a
//!   [`GroupNote::FloorPromised`] at or above `ts.clk` is logged (and committed with the
//!   answer: the read's answer waits for the batch holding the promise); a new host's
//!   first input is [`GroupNote::FloorApplied`], after which every write is refined above
//!   every clock promised before (`Server::floor`). CockroachDB's timestamp cache keeps a
//!   low-water mark the same way. The promise runs ahead of the reads
//!   ([`FLOOR_AHEAD`]), so one small input covers many reads.
//!
//! What the wrapper must add (the real group's host, `verso-txn-net`'s `group/host.rs`,
//! and the simulator's model, `replicated/mod.rs`): it answers an unlogged read only while
//! nobody else can be host (Lazy VSR's read lease), and only after every input it executed
//! before the read has committed, since a read may see a version whose decision is one of
//! them.

use super::Server;
use crate::store::Store;
use crate::types::{GroupNote, Key, Msg, Ts};

use std::collections::{BTreeMap, BTreeSet};

/// How far ahead of a read's clock (µs) a host promises its unlogged reads will stay
/// ([`GroupNote::FloorPromised`]): one logged promise covers the reads of the next
/// this long, and after a failover writes go at least this far above the last read's
/// timestamp. CockroachDB's timestamp cache keeps its low-water mark a few seconds back;
/// here a failover takes half a second, and a write refined above the floor costs its
/// transaction a smart retry at most.
pub const FLOOR_AHEAD: u64 = 10_000;

/// The host's own record of what its unlogged reads changed (not replicated: a replay
/// never makes unlogged reads, so this stays empty there).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub(super) struct UnloggedReads {
    /// Whether this server has answered an unlogged read: until then a logged input needs
    /// no note.
    pub(super) used: bool,
    /// Executing an unlogged read now.
    pub(super) active: bool,
    /// Keys in memory whose newest version an unlogged read raised since the last note.
    pub(super) raised: BTreeSet<Key>,
    /// While a logged input runs: the `t_r` of each key it loaded, as loaded.
    pub(super) loaded: Option<BTreeMap<Key, Ts>>,
}

impl<S: Store> Server<S> {
    /// `Some(ts.clk)` if `msg` is a read-only transaction's execution that a host may
    /// answer without logging it: a first execution (no record here, not finished), with
    /// requests, on a server without deliberate mistakes in the read-only protocol.
    pub fn unlogged_read(&self, msg: &Msg) -> Option<u64> {
        let Msg::Execute {
            txn,
            ts,
            ops,
            t_ro: Some(_),
            ..
        } = msg
        else {
            return None;
        };
        let plain = !self.mistakes.no_read_only_check && !self.mistakes.no_timing_control;
        let fresh = !self.txns.contains_key(txn) && !self.finished.finished(*txn);
        // A key whose newest version is undecided would refuse the read (`t_ro`), or, if
        // the client's `t_ro` is ahead of this group (a plain Lazy VSR group's total crash
        // lost what it heard), make it wait for a logged decision: logged, it stays
        // deterministic either way.
        let decided = |op: &crate::types::Op| {
            self.keys
                .get(op.key())
                .is_none_or(|ks| ks.versions.last().is_some_and(|v| v.committed))
        };
        // The promise covering it, and the writes a later host refines above it, must fit
        // the clock and the store.
        let room = ts
            .clk
            .checked_add(FLOOR_AHEAD + 1)
            .is_some_and(|clk| self.store.admits(Ts { clk, cid: ts.cid }));
        let reads = !ops.is_empty() && ops.iter().all(|op| !op.is_write() && decided(op));
        (plain && fresh && room && reads).then_some(ts.clk)
    }

    /// Executes a message [`Server::unlogged_read`] accepted, remembering what it raised
    /// for the next note. Its client's finished mark is not taken from it (a replay would
    /// not see it): the next logged message from that client carries it again.
    pub fn execute_unlogged(&mut self, now: u64, msg: Msg) {
        debug_assert!(self.unlogged_read(&msg).is_some(), "{msg:?}");
        self.unlogged.used = true;
        self.unlogged.active = true;
        self.dispatch(now, msg);
        self.unlogged.active = false;
    }

    /// Before a logged input runs on a host that has answered unlogged reads: takes the
    /// keys its reads raised, with their `t_r` now, and starts noting the keys the input
    /// loads. [`Server::end_logged`] returns the note to log ahead of the input.
    pub fn begin_logged(&mut self) {
        if !self.unlogged.used {
            return;
        }
        let mut notes = BTreeMap::new();
        for key in std::mem::take(&mut self.unlogged.raised) {
            if let Some(ks) = self.keys.get(&key) {
                let newest = ks.versions.last().expect("a key has a version");
                notes.insert(key, newest.tr);
            }
        }
        self.unlogged.loaded = Some(notes);
    }

    /// The note to log just ahead of the input run since [`Server::begin_logged`], if any
    /// key needs one.
    pub fn end_logged(&mut self) -> Option<Msg> {
        let notes = self.unlogged.loaded.take()?;
        (!notes.is_empty()).then(|| Msg::Group(GroupNote::ReadsRaised(notes.into_iter().collect())))
    }

    /// Called by `load_key` with what it loaded: a logged input's note records a `t_r` an
    /// unlogged read may have raised (one above its `t_w`; a replay has the rest).
    pub(super) fn note_load(&mut self, key: &Key, tw: Ts, tr: Ts) {
        if self.unlogged.active {
            return;
        }
        if let Some(notes) = self.unlogged.loaded.as_mut() {
            if tr > tw {
                notes.entry(key.clone()).or_insert(tr);
            }
        }
    }

    /// Called after an unlogged read raised `key`'s newest version.
    pub(super) fn note_unlogged_raise(&mut self, key: &Key) {
        if self.unlogged.active && self.keys.contains_key(key) {
            self.unlogged.raised.insert(key.clone());
        }
    }

    /// Called when `key` leaves memory: its `t_r` is in the store, and a later input
    /// that loads it notes it then.
    pub(super) fn forget_unlogged_raise(&mut self, key: &Key) {
        if !self.unlogged.raised.is_empty() {
            self.unlogged.raised.remove(key);
        }
    }

    /// Runs a note from the log (a replay; on the host that wrote it, a no-op).
    pub(super) fn on_group_note(&mut self, note: GroupNote) {
        match note {
            GroupNote::ReadsRaised(raised) => {
                for (key, tr) in raised {
                    self.load_key(&key);
                    let ks = self.keys.get_mut(&key).expect("loaded");
                    let newest = ks.versions.last_mut().expect("a key has a version");
                    // The host noted the newest version's `t_r` before the input that
                    // follows: a replay holds the same versions (only logged inputs make
                    // them), so this is that version. It is a decided one, except after
                    // a total crash of a plain Lazy VSR group lost answered inputs (a
                    // client's `t_ro` may then be above what the group still knows):
                    // raised here as the host raised it, the replay still agrees.
                    newest.tr = newest.tr.max(tr);
                    self.settle(&key);
                }
            }
            GroupNote::FloorPromised(clk) => self.floor_promised = self.floor_promised.max(clk),
            GroupNote::FloorApplied => self.floor = self.floor.max(self.floor_promised),
        }
    }

    /// The highest clock promised so far ([`GroupNote::FloorPromised`]).
    pub fn floor_promised(&self) -> u64 {
        self.floor_promised
    }

    /// The promise to log before answering an unlogged read at `clk`, unless the promises
    /// so far cover it: [`FLOOR_AHEAD`] past it, so that one covers the reads that follow.
    pub fn floor_promise_for(&self, clk: u64) -> Option<Msg> {
        (clk > self.floor_promised).then(|| {
            let promise = clk.saturating_add(FLOOR_AHEAD);
            Msg::Group(GroupNote::FloorPromised(promise))
        })
    }

    /// The clock every write here goes above ([`GroupNote::FloorApplied`]).
    pub fn floor(&self) -> u64 {
        self.floor
    }
}
