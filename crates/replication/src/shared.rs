//! What the server's threads share with the replication thread: the commit slots a
//! primary's commits fill ([`CommitSink`]), and the tickets replies wait on.
//!
//! Slots are numbered in commit-timestamp order (the engine reserves one inside the
//! critical section that draws the commit timestamp) and handed to VSR in that order, a
//! batch at a time. A reply waits for a [`Ticket`]: every slot below `end` committed by VSR
//! (and durable on a majority under `--durability sync`), in the generation the ticket was
//! taken in. A generation ends when this replica stops being primary: its tickets fail, and
//! the server closes those connections (the client cannot know whether its last command
//! took effect, exactly as after a lost connection).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

use verso_engine::{ClearFilter, CommitSink, ReplicatedWrite};

use crate::op::{TxnWrites, Write};

/// Bit of `Replication::word` set while commits are refused.
const CLOSED: u64 = 1 << 63;

/// A slot the node can take.
pub(crate) enum Slot {
    /// A commit's writes as the log carries them, and the deletions a clear among them
    /// covers (`verso_engine::ClearFilter`): installed here but not logged, they are undone
    /// by key like the others.
    Filled(TxnWrites, Vec<(String, Vec<u8>)>),
    /// Reserved by a commit that then failed validation.
    Abandoned,
}

impl Slot {
    fn bytes(&self) -> usize {
        match self {
            Slot::Filled(t, _) => t.bytes(),
            Slot::Abandoned => TxnWrites::barrier().bytes(),
        }
    }

    /// What the log carries for this slot (a barrier for an abandoned one), and appends to
    /// `undo` the versions this process installed for it.
    pub(crate) fn into_logged(self, undo: &mut crate::app::Keys) -> TxnWrites {
        match self {
            Slot::Filled(t, covered) => {
                undo.extend(crate::app::keys_of(std::slice::from_ref(&t)));
                undo.extend(covered.into_iter().map(|(table, key)| (table, key, t.cts)));
                t
            }
            Slot::Abandoned => TxnWrites::barrier(),
        }
    }
}

/// What a reply waits for (module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ticket {
    /// Every slot below this must be committed.
    pub end: u64,
    pub generation: u64,
}

impl Ticket {
    /// The later of two tickets of one connection (replies stay in order).
    pub fn max(self, other: Ticket) -> Ticket {
        if other.generation != self.generation {
            // A newer generation's ticket is taken after the older one failed.
            return if other.generation > self.generation {
                other
            } else {
                self
            };
        }
        Ticket {
            end: self.end.max(other.end),
            generation: self.generation,
        }
    }
}

/// A ticket's state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TicketState {
    Ready,
    Waiting,
    /// This replica stopped being primary before the slots committed.
    Failed,
}

type Waker = Box<dyn Fn() + Send + Sync>;

/// Shared between the server's threads and the replication thread (module docs).
pub struct Replication {
    /// Names this process's commits in the log (random per start).
    pub(crate) origin: u64,
    /// `CLOSED` while commits are refused; the low bits are the next slot to reserve.
    word: AtomicU64,
    /// Filled or abandoned slots the node has not taken yet.
    slots: Mutex<BTreeMap<u64, Slot>>,
    /// Every slot below this is committed.
    committed: AtomicU64,
    generation: AtomicU64,
    /// A read waits for a slot below this to be reserved and committed.
    barrier_wanted: AtomicU64,
    /// Set once the node was woken and until it looks (one wake per round, not per commit).
    node_signalled: AtomicBool,
    /// Called when tickets may have become ready or failed (the server's workers).
    wakers: Mutex<Vec<Waker>>,
    /// Called when a replica's disk holds more of this primary's slots (the server's
    /// workers, for `WAIT`). Apart from `wakers`: no ticket depends on the disks, and
    /// under load every replica's disk moves several times per round, so waking every
    /// worker that holds a reply on each of those cost several wake-ups per round for
    /// nothing.
    disk_wakers: Mutex<Vec<Waker>>,
    /// Wakes the replication thread.
    node_waker: Mutex<Option<Waker>>,
    pub(crate) status: Mutex<crate::status::Status>,
    /// Per replica id: every slot below this is on that replica's disk, as far as this
    /// primary learned (`WAIT`). Only grows (slots are numbered across generations).
    disk_slots: Box<[AtomicU64]>,
    me: u8,
    /// While above zero, every batch proposed is synchronous (durable on a majority's disks
    /// before VSR replies), whatever `--durability` says: [`Replication::hold_sync`].
    sync_holders: AtomicU64,
    /// The replication thread's clock: milliseconds since this, the time VSR runs on.
    clock: std::time::Instant,
    /// Until when (on `clock`, in ms) this primary holds its read lease (`verso_vsr`
    /// `replica::lease`); 0: it holds none. Published by the replication thread.
    lease_until: AtomicU64,
    /// Reads answered under the lease, and reads that waited for a barrier round.
    pub(crate) reads_leased: AtomicU64,
    pub(crate) reads_with_round: AtomicU64,
}

/// Makes the batches proposed while it lives synchronous ([`Replication::hold_sync`]).
pub struct SyncHold<'r>(&'r Replication);

impl Drop for SyncHold<'_> {
    fn drop(&mut self) {
        self.0.sync_holders.fetch_sub(1, Ordering::AcqRel);
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn call_all(wakers: &Mutex<Vec<Waker>>) {
    for f in lock(wakers).iter() {
        f();
    }
}

impl Replication {
    pub(crate) fn new(origin: u64, status: crate::status::Status) -> Replication {
        let replicas = usize::from(status.replicas).max(1);
        Replication {
            disk_slots: (0..replicas).map(|_| AtomicU64::new(0)).collect(),
            me: status.replica,
            sync_holders: AtomicU64::new(0),
            clock: std::time::Instant::now(),
            lease_until: AtomicU64::new(0),
            reads_leased: AtomicU64::new(0),
            reads_with_round: AtomicU64::new(0),
            origin,
            word: AtomicU64::new(CLOSED | 1),
            slots: Mutex::new(BTreeMap::new()),
            committed: AtomicU64::new(1),
            generation: AtomicU64::new(1),
            barrier_wanted: AtomicU64::new(0),
            node_signalled: AtomicBool::new(false),
            wakers: Mutex::new(Vec::new()),
            disk_wakers: Mutex::new(Vec::new()),
            node_waker: Mutex::new(None),
            status: Mutex::new(status),
        }
    }

    /// Whether this replica accepts commits now (it is the primary of a view in normal
    /// operation).
    pub fn is_primary(&self) -> bool {
        self.word.load(Ordering::Acquire) & CLOSED == 0
    }

    /// The generation now: take it before a command's transaction begins and pass it to
    /// [`Replication::write_ticket`] / [`Replication::read_ticket`].
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// The ticket for a command that committed writes (taken after its commit returned):
    /// its slot is below the next one. `began` is the generation before its transaction
    /// began: if this replica stopped being primary since, its slot may have been retracted
    /// (rolled back) even though the commit returned, and even if it leads again by now, so
    /// the ticket must fail rather than become ready in the new generation.
    pub fn write_ticket(&self, began: u64) -> Ticket {
        let end = self.word.load(Ordering::Acquire) & !CLOSED;
        Ticket {
            end,
            generation: began,
        }
    }

    /// The ticket for a command that only read (taken after it read), so that the read is
    /// linearizable. While this primary holds its read lease, no other replica can have
    /// been elected (`verso_vsr` `replica::lease`): the read waits only for the commits it
    /// may have seen, those reserved before now (none, usually: ready at once). Without
    /// the lease it waits for a slot reserved after the read to commit, which proves this
    /// replica was still primary after the read (a round to a majority), and asks the node
    /// for a barrier entry in case no commit comes.
    /// `began` as for [`Replication::write_ticket`]: a read may have seen commits a
    /// change of generation retracted.
    pub fn read_ticket(&self, began: u64) -> Ticket {
        if self.holds_lease() {
            self.reads_leased.fetch_add(1, Ordering::Relaxed);
            return Ticket {
                end: self.word.load(Ordering::Acquire) & !CLOSED,
                generation: began,
            };
        }
        self.reads_with_round.fetch_add(1, Ordering::Relaxed);
        self.barrier_ticket(began)
    }

    /// The ticket for a slot reserved after now, lease or not: once it is ready, every
    /// entry before it is committed (and, with [`Replication::majority_on_disk`], on a
    /// majority's disks). Asks the node for a barrier entry in case no commit comes. For
    /// a new primary's mover, which must read only what the group logged for good.
    pub fn barrier_ticket(&self, began: u64) -> Ticket {
        let generation = began;
        let end = (self.word.load(Ordering::Acquire) & !CLOSED) + 1;
        if self.barrier_wanted.fetch_max(end, Ordering::AcqRel) < end {
            self.wake_node();
        }
        Ticket { end, generation }
    }

    pub fn ticket_state(&self, t: Ticket) -> TicketState {
        let generation = self.generation.load(Ordering::Acquire);
        if generation != t.generation {
            return TicketState::Failed;
        }
        if self.committed.load(Ordering::Acquire) >= t.end {
            // Committed in this generation: the generation is read first, and the node bumps
            // it before it changes what `committed` means.
            if self.generation.load(Ordering::Acquire) == t.generation {
                return TicketState::Ready;
            }
            return TicketState::Failed;
        }
        TicketState::Waiting
    }

    /// How many other replicas hold every slot below `t.end` on disk (Redis's `WAIT`
    /// counts replicas, not the primary); `None` if the ticket's generation ended (this
    /// replica stopped being primary since).
    pub fn replicas_on_disk(&self, t: Ticket) -> Option<usize> {
        let n = (0..self.disk_slots.len())
            .filter(|&i| i != usize::from(self.me))
            .filter(|&i| self.disk_slots[i].load(Ordering::Acquire) >= t.end)
            .count();
        (self.generation.load(Ordering::Acquire) == t.generation).then_some(n)
    }

    /// Whether a majority of the group's replicas, this one included, hold every slot below
    /// `t.end` on disk; `None` if the ticket's generation ended.
    pub fn majority_on_disk(&self, t: Ticket) -> Option<bool> {
        let n = self
            .disk_slots
            .iter()
            .filter(|d| d.load(Ordering::Acquire) >= t.end)
            .count();
        (self.generation.load(Ordering::Acquire) == t.generation)
            .then_some(n > self.disk_slots.len() / 2)
    }

    /// Makes every batch proposed from now until the guard drops synchronous: take it
    /// before a commit whose record must survive any crash a majority survives (the slot
    /// moves' transfer records, issue 17). Batches of other commits proposed meanwhile wait
    /// for the disk too; the records that need it are few and short.
    pub fn hold_sync(&self) -> SyncHold<'_> {
        self.sync_holders.fetch_add(1, Ordering::AcqRel);
        SyncHold(self)
    }

    /// Whether batches proposed now must be synchronous.
    pub(crate) fn sync_held(&self) -> bool {
        self.sync_holders.load(Ordering::Acquire) > 0
    }

    /// The number of replicas besides this one.
    pub fn other_replicas(&self) -> usize {
        self.disk_slots.len() - 1
    }

    /// Calls `f` whenever tickets may have become ready or failed.
    pub fn on_progress(&self, f: impl Fn() + Send + Sync + 'static) {
        lock(&self.wakers).push(Box::new(f));
    }

    /// Calls `f` whenever [`Replication::replicas_on_disk`] may have grown. Not when the
    /// generation ends: that calls the [`Replication::on_progress`] callbacks, which a
    /// worker with a blocked `WAIT` listens to as well.
    pub fn on_disk_progress(&self, f: impl Fn() + Send + Sync + 'static) {
        lock(&self.disk_wakers).push(Box::new(f));
    }

    /// A snapshot of the replication state, for INFO and the metrics endpoint.
    pub fn status(&self) -> crate::status::Status {
        lock(&self.status).clone()
    }

    pub(crate) fn set_node_waker(&self, f: impl Fn() + Send + Sync + 'static) {
        *lock(&self.node_waker) = Some(Box::new(f));
    }

    fn wake_node(&self) {
        if self.node_signalled.swap(true, Ordering::AcqRel) {
            return;
        }
        if let Some(f) = lock(&self.node_waker).as_ref() {
            f();
        }
    }

    pub(crate) fn wake_workers(&self) {
        call_all(&self.wakers);
    }

    fn wake_disk_waiters(&self) {
        call_all(&self.disk_wakers);
    }

    /// The replication thread's clock's origin.
    pub(crate) fn clock(&self) -> std::time::Instant {
        self.clock
    }

    /// Milliseconds on the replication thread's clock.
    pub(crate) fn now_ms(&self) -> u64 {
        self.clock.elapsed().as_millis() as u64
    }

    /// Whether this primary holds its read lease now. Checked after the read: the lease
    /// held at some moment after the read began, so no later view had committed anything
    /// by then, and every write acknowledged before the read began was this primary's.
    fn holds_lease(&self) -> bool {
        let until = self.lease_until.load(Ordering::Acquire);
        until != 0 && self.now_ms() < until
    }

    // ---- the replication thread's side ----

    /// Publishes the read lease (`None`: none). Cleared before the commit slots close on
    /// stepping down; a read that saw a lease a moment too long still fails with its
    /// generation if what it read is retracted.
    pub(crate) fn set_lease(&self, until: Option<u64>) {
        self.lease_until
            .store(until.unwrap_or(0), Ordering::Release);
    }

    /// The next slot to reserve.
    pub(crate) fn next_slot(&self) -> u64 {
        self.word.load(Ordering::Acquire) & !CLOSED
    }

    /// Opens for commits from slot `from` on (becoming primary). Returns `from`.
    pub(crate) fn open(&self) -> u64 {
        let from = self.next_slot();
        self.committed.store(from, Ordering::Release);
        self.word.store(from, Ordering::Release);
        from
    }

    /// Refuses commits from now on and ends the generation. Returns the end of the slots
    /// reserved before (each will be filled or abandoned shortly).
    pub(crate) fn close(&self) -> u64 {
        let before = self.word.fetch_or(CLOSED, Ordering::AcqRel);
        if before & CLOSED == 0 {
            self.generation.fetch_add(1, Ordering::AcqRel);
            self.wake_workers();
        }
        before & !CLOSED
    }

    /// Called by the node before it looks at the slots: later fills wake it again.
    pub(crate) fn clear_signal(&self) {
        self.node_signalled.store(false, Ordering::SeqCst);
    }

    /// Whether a read waits for a slot nobody reserved yet.
    pub(crate) fn barrier_due(&self) -> bool {
        self.barrier_wanted.load(Ordering::Acquire) > self.next_slot()
    }

    /// Reserves a slot for a barrier; `None` if closed.
    pub(crate) fn reserve_barrier(&self) -> Option<u64> {
        let slot = self.reserve(0)?;
        lock(&self.slots).insert(slot, Slot::Filled(TxnWrites::barrier(), Vec::new()));
        Some(slot)
    }

    /// Takes the filled or abandoned slots from `*next` on that follow each other,
    /// stopping before `end` (exclusive) if given, and before the slots' bytes pass
    /// `bytes_max` (at least one slot is taken, whatever its size).
    pub(crate) fn take_ready(
        &self,
        next: &mut u64,
        end: Option<u64>,
        bytes_max: usize,
    ) -> Vec<Slot> {
        let mut slots = lock(&self.slots);
        let mut out = Vec::new();
        let mut bytes = 0usize;
        while end.is_none_or(|e| *next < e) {
            let Some(slot) = slots.get(next) else { break };
            bytes = bytes.saturating_add(slot.bytes());
            if !out.is_empty() && bytes > bytes_max {
                break;
            }
            out.push(slots.remove(next).expect("just seen"));
            *next += 1;
        }
        out
    }

    /// Drops slots below `end` that were never taken (refused commits leave no slot).
    pub(crate) fn discard_below(&self, end: u64) {
        let mut slots = lock(&self.slots);
        while slots.first_key_value().is_some_and(|(&k, _)| k < end) {
            slots.pop_first();
        }
    }

    /// Replica `replica` holds every slot below `end` on disk.
    pub(crate) fn set_disk_slots(&self, replica: usize, end: u64) {
        if self.disk_slots[replica].fetch_max(end, Ordering::AcqRel) < end {
            self.wake_disk_waiters();
        }
    }

    pub(crate) fn set_committed(&self, end: u64) {
        if self.committed.fetch_max(end, Ordering::AcqRel) < end {
            self.wake_workers();
        }
    }
}

impl CommitSink for Replication {
    fn reserve(&self, _cts: u64) -> Option<u64> {
        // Serialized by the engine's critical section, but not with `close`: one word holds
        // both, so a reserve either lands before the close (and `close` returns past it) or
        // sees it and takes nothing. Nothing at all: a number taken while closed is never
        // filled, and the next `close` (every retraction closes again, and a replica that
        // leads again retracts before it opens) would wait for it for ever. The partition
        // test found that: a commit racing a deposition left its number behind, and the
        // replica hung when it was elected again.
        let mut word = self.word.load(Ordering::Acquire);
        loop {
            if word & CLOSED != 0 {
                return None;
            }
            match self.word.compare_exchange_weak(
                word,
                word + 1,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return Some(word),
                Err(now) => word = now,
            }
        }
    }

    fn fill(&self, slot: u64, cts: u64, writes: &mut dyn Iterator<Item = ReplicatedWrite<'_>>) {
        let mut logged = ClearFilter::default();
        let (mut kept, mut covered) = (Vec::new(), Vec::new());
        for w in writes {
            if logged.logged(&w) {
                kept.push(Write {
                    table: w.table.to_owned(),
                    key: w.key.to_vec(),
                    value: w.value.map(<[u8]>::to_vec),
                });
            } else {
                covered.push((w.table.to_owned(), w.key.to_vec()));
            }
        }
        let txn = TxnWrites { cts, writes: kept };
        lock(&self.slots).insert(slot, Slot::Filled(txn, covered));
        self.wake_node();
    }

    fn abandon(&self, slot: u64) {
        lock(&self.slots).insert(slot, Slot::Abandoned);
        self.wake_node();
    }

    fn write_set_bytes_max(&self) -> usize {
        crate::op::WRITE_SET_BYTES_MAX
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn primary() -> Replication {
        let r = Replication::new(
            7,
            crate::status::Status {
                replica: 0,
                replicas: 3,
                ..Default::default()
            },
        );
        r.open();
        r
    }

    /// A replicated commit whose write set is over `WRITE_SET_BYTES_MAX` fails with a
    /// typed error and takes no slot (its message could never reach the backups); one at
    /// the limit commits. The node's batches stop at `BATCH_BYTES` unless one commit alone
    /// is larger, and every batch counts at least its encoded size.
    #[test]
    fn a_write_set_over_the_limit_is_refused_and_batches_are_bounded_by_bytes() {
        use crate::op::{Batch, BATCH_BYTES, WRITE_SET_BYTES_MAX};
        use std::sync::Arc;
        use verso_engine::{Concurrency, Db, Error, Options};
        let r = Arc::new(primary());
        let db = Db::open(Options::default().concurrency(Concurrency::PrecisionLocking)).unwrap();
        db.set_commit_sink(r.clone()).unwrap();
        let t = db.table("t").unwrap();
        let overhead = "t".len() + 16;
        let start = r.next_slot();
        // Two writes whose sum is one byte over the limit.
        let half = (WRITE_SET_BYTES_MAX - 2 * overhead) / 2;
        let mut txn = db.begin().unwrap();
        txn.put(&t, b"a", vec![1u8; half]).unwrap();
        txn.put(
            &t,
            b"b",
            vec![2u8; WRITE_SET_BYTES_MAX - 2 * overhead - half],
        )
        .unwrap();
        let err = txn.commit().unwrap_err();
        assert_eq!(
            err,
            Error::TransactionTooLarge {
                bytes: WRITE_SET_BYTES_MAX + 2,
                max: WRITE_SET_BYTES_MAX
            }
        );
        let mut next = start;
        assert!(
            r.take_ready(&mut next, None, usize::MAX).is_empty(),
            "a slot was taken"
        );
        assert_eq!(r.next_slot(), start);
        // One byte less in each value: exactly at the limit, it commits.
        let mut txn = db.begin().unwrap();
        txn.put(&t, b"a", vec![1u8; half - 1]).unwrap();
        txn.put(
            &t,
            b"b",
            vec![2u8; WRITE_SET_BYTES_MAX - 2 * overhead - half - 1],
        )
        .unwrap();
        txn.commit().unwrap();
        // Small commits after it; batches as the node takes them.
        for i in 0..300u32 {
            let mut txn = db.begin().unwrap();
            txn.put(&t, i.to_be_bytes(), vec![3u8; 10_000]).unwrap();
            txn.commit().unwrap();
        }
        let mut batches = Vec::new();
        loop {
            let first = next;
            let slots = r.take_ready(&mut next, None, BATCH_BYTES);
            if slots.is_empty() {
                break;
            }
            let mut undo = Vec::new();
            let txns = slots
                .into_iter()
                .map(|s| s.into_logged(&mut undo))
                .collect::<Vec<_>>();
            batches.push(Batch {
                origin: 7,
                first_slot: first,
                txns: txns.into(),
            });
        }
        assert_eq!(next, start + 301);
        assert_eq!(batches[0].txns.len(), 1, "the large commit goes alone");
        assert!(batches.len() >= 4, "{} batches", batches.len());
        for b in &batches[1..] {
            assert!(b.txns.iter().map(TxnWrites::bytes).sum::<usize>() <= BATCH_BYTES);
        }
        for b in &batches {
            let encoded = postcard::to_allocvec(b).unwrap().len();
            assert!(b.bytes() >= encoded, "{} < {encoded}", b.bytes());
        }
    }

    /// Under the read lease a read waits only for the commits reserved before it (none
    /// here: ready at once, no barrier asked for); without it, for a slot reserved after it.
    #[test]
    fn a_read_under_the_lease_waits_only_for_what_it_may_have_seen() {
        let r = primary();
        let began = r.generation();
        r.set_lease(Some(r.now_ms() + 60_000));
        let t = r.read_ticket(began);
        assert_eq!(r.ticket_state(t), TicketState::Ready);
        assert!(!r.barrier_due());
        // A commit in flight: the read may have seen it, so it waits for it.
        let slot = r.reserve(100).expect("open");
        let t = r.read_ticket(began);
        assert_eq!(t.end, slot + 1);
        assert_eq!(r.ticket_state(t), TicketState::Waiting);
        r.set_committed(slot + 1);
        assert_eq!(r.ticket_state(t), TicketState::Ready);
        // Lease over (or never held): a round that began after the read.
        r.set_lease(Some(r.now_ms()));
        let t = r.read_ticket(began);
        assert_eq!(t.end, slot + 2);
        assert!(r.barrier_due());
        assert_eq!(r.ticket_state(t), TicketState::Waiting);
        assert_eq!(r.reads_leased.load(Ordering::Relaxed), 2);
        assert_eq!(r.reads_with_round.load(Ordering::Relaxed), 1);
    }

    /// A commit that reserved its slot before this replica stopped being primary may have
    /// been retracted: its ticket must fail, even when the replica leads again by the time
    /// the ticket is taken and everything after the new start commits (found by the
    /// partition test: such a reply went out as a success for a write that was undone).
    #[test]
    fn a_commit_across_a_change_of_generation_is_never_acknowledged() {
        let r = primary();
        let began = r.generation();
        let slot = r.reserve(100).expect("open");
        // Deposed before the slot reached the log, then primary again.
        let end = r.close();
        assert_eq!(end, slot + 1);
        let from = r.open();
        // The commit returns now and its session takes the ticket: everything below it
        // counts as committed in the new generation (`open`).
        let t = r.write_ticket(began);
        assert_eq!(t.end, from);
        assert_eq!(r.ticket_state(t), TicketState::Failed);
        // A read that began before the change fails the same way.
        assert_eq!(r.ticket_state(r.read_ticket(began)), TicketState::Failed);
        // A command that began in the new generation is acknowledged once committed.
        let began = r.generation();
        let slot = r.reserve(200).expect("open");
        let t = r.write_ticket(began);
        assert_eq!(r.ticket_state(t), TicketState::Waiting);
        r.set_committed(slot + 1);
        assert_eq!(r.ticket_state(t), TicketState::Ready);
    }

    /// A reserve that comes after the close takes no number: a later close (a retraction
    /// before leading again) returns the same end, and waits for no slot nobody fills.
    #[test]
    fn a_refused_reserve_leaves_no_slot_to_wait_for() {
        let r = primary();
        let slot = r.reserve(100).expect("open");
        let end = r.close();
        assert_eq!(end, slot + 1);
        // A commit that drew its timestamp after the close is refused...
        assert_eq!(r.reserve(101), None);
        assert_eq!(r.reserve(102), None);
        // ...and the next close still ends where the first did.
        assert_eq!(r.close(), end, "refused reserves took slot numbers");
        assert_eq!(r.open(), end);
        assert_eq!(r.reserve(103), Some(end));
    }
}
