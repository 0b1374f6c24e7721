//! The engine as Lazy VSR's application (thesis §4.2: execute, undo, checkpoint).
//!
//! The log is in commit-timestamp order (`verso_engine::replicated`), so undoing the
//! operations above op `n` is dropping, on the keys they wrote, every version above the
//! commit timestamp of the last operation kept; and the GC floor at the durable point's
//! timestamp keeps everything such a rollback may uncover.
//!
//! A primary's own commits are installed by the committing threads before VSR sees them:
//! `apply` only records them. Commits installed here that never reach the log (this replica
//! stopped being primary first) are *retracted*: rolled back before anything else is
//! applied or undone.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, VecDeque};
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::Arc;

use verso_engine::{Db, ReplicatedWrite};
use verso_vsr::App;

use crate::checkpoint::GcPin;
use crate::op::{Batch, EngineSnapshot, TxnWrites};
use crate::shared::{Replication, Slot};

/// An applied operation that may still be undone.
struct Applied {
    op: u64,
    /// The largest commit timestamp applied up to and including this one.
    cts_through: u64,
    keys: Keys,
    /// Its writes' size (`Batch::bytes`): what a snapshot copies to carry it.
    bytes: usize,
}

/// A batch's undo records: each write as (table, key, commit timestamp of the version it
/// installed). Undoing drops exactly those versions, newest operation first
/// (`Db::rollback_versions`), not "everything above a timestamp": NCC's timestamps will not
/// grow along the log (issue 18).
pub(crate) type Keys = Vec<(String, Vec<u8>, u64)>;

/// State the replication thread and the application share (both on that thread).
#[derive(Default)]
pub(crate) struct Local {
    /// The next slot to take from the commit slots.
    pub(crate) next_slot: u64,
    /// Own batches handed to VSR and not applied yet (queued behind the pipeline): first
    /// slot → its undo records.
    pub(crate) handed: BTreeMap<u64, Keys>,
    pub(crate) slots_retracted: u64,
    /// Own batches in the log, in op order: (op number, the slot after the batch's last),
    /// until every replica reported them on disk (`WAIT`).
    pub(crate) own_ops: VecDeque<(u64, u64)>,
}

pub struct EngineApp {
    db: Arc<Db>,
    shared: Arc<Replication>,
    pub(crate) local: Rc<RefCell<Local>>,
    undo: VecDeque<Applied>,
    /// The sum of `undo`'s `bytes`.
    undo_bytes: usize,
    /// The commit timestamp through the last applied operation.
    applied_cts: u64,
    /// The commit timestamp through the last operation that can no longer be undone.
    durable_cts: u64,
    /// The replica's directory: checkpoint data files live beside its log.
    dir: PathBuf,
    /// Holds the GC floor while a checkpoint's data is written (`checkpoint.rs`).
    pin: GcPin,
    /// Checkpoints named so far (with `shared.origin`, names are unique across restarts).
    checkpoints: Cell<u64>,
}

/// The undo records of `txns`' logged writes (a clear is none: the keys it deleted are
/// listed where it was expanded, `EngineApp::install`).
pub(crate) fn keys_of(txns: &[TxnWrites]) -> Keys {
    txns.iter()
        .flat_map(|t| {
            t.writes
                .iter()
                .filter(|w| !w.table.is_empty())
                .map(|w| (w.table.clone(), w.key.clone(), t.cts))
        })
        .collect()
}

/// Drops the versions `undo` names, the last one first.
fn undo_writes(db: &Db, undo: &Keys) {
    db.rollback_versions(
        undo.iter()
            .rev()
            .map(|(t, k, ts)| (t.as_str(), k.as_slice(), *ts)),
    );
}

impl EngineApp {
    pub(crate) fn new(
        db: Arc<Db>,
        shared: Arc<Replication>,
        local: Rc<RefCell<Local>>,
        dir: PathBuf,
        pin: GcPin,
    ) -> Self {
        db.set_gc_floor(0);
        // A replica starts as a backup: its readers see nothing the log has not made durable.
        db.set_read_horizon(Some(1));
        EngineApp {
            db,
            shared,
            local,
            undo: VecDeque::new(),
            undo_bytes: 0,
            applied_cts: 0,
            durable_cts: 0,
            dir,
            pin,
            checkpoints: Cell::new(0),
        }
    }

    /// Installs one operation's writes (a foreign batch, a checkpoint's tail) and returns
    /// its undo records.
    fn install(&self, op_number: u64, txns: &[TxnWrites]) -> Keys {
        let mut undo = keys_of(txns);
        for t in txns.iter().filter(|t| !t.writes.is_empty()) {
            let writes = t.writes.iter().map(|w| ReplicatedWrite {
                table: &w.table,
                key: &w.key,
                value: w.value.as_deref(),
            });
            let cleared = |table: &str, key: &[u8]| {
                undo.push((table.to_owned(), key.to_vec(), t.cts));
            };
            if let Err(e) = self.db.apply_replicated_with(t.cts, writes, cleared) {
                // Cannot happen while the log is in timestamp order; say so loudly rather
                // than stop the replica.
                tracing::error!(op = op_number, error = %e, "applying a replicated commit failed");
            }
        }
        undo
    }

    /// The GC floor: the durable point's timestamp, or lower while a checkpoint's data is
    /// being written at a lower one.
    fn set_gc_floor(&self) {
        self.db.set_gc_floor(self.durable_cts.min(self.pin.get()));
    }

    /// The commit timestamp through the last applied operation: a new primary's commits
    /// must come after it.
    pub(crate) fn applied_cts(&self) -> u64 {
        self.applied_cts
    }

    /// The bytes of writes applied after the durable point, which may still be undone:
    /// what a snapshot copies out of the engine, on the replication thread.
    pub(crate) fn undo_bytes(&self) -> usize {
        self.undo_bytes
    }

    /// What a backup's readers may see: every operation through the durable point, which
    /// is applied and never undone (`Db::set_read_horizon`).
    pub(crate) fn read_horizon(&self) -> u64 {
        self.durable_cts + 1
    }
}

/// Rolls back this process's commits that were installed but never reached the log
/// (module docs): closes the commit slots, waits for the commits that reserved one to fill
/// it, and drops their versions.
pub(crate) fn retract_unlogged(db: &Db, shared: &Replication, local: &RefCell<Local>) {
    let end = shared.close();
    let mut local = local.borrow_mut();
    let mut filled: Keys = Vec::new();
    let mut slots_filled = 0u64;
    // Every reserved slot is filled or abandoned within its commit, which never waits for
    // anything but record locks held by other committers: this ends quickly.
    let mut step = 0u32;
    while local.next_slot < end {
        let next = &mut local.next_slot;
        for s in shared.take_ready(next, Some(end), usize::MAX) {
            if let Slot::Filled(..) = s {
                slots_filled += 1;
                s.into_logged(&mut filled);
            }
        }
        if local.next_slot < end {
            step += 1;
            if step < 64 {
                std::hint::spin_loop();
            } else {
                std::thread::sleep(std::time::Duration::from_micros(50));
            }
        }
    }
    // In commit order: the handed batches (by first slot), then the slots filled since.
    let mut undo: Keys = Vec::new();
    for (_, k) in std::mem::take(&mut local.handed) {
        undo.extend(k);
    }
    undo.extend(filled);
    local.slots_retracted += slots_filled;
    drop(local);
    if !undo.is_empty() {
        tracing::info!(
            commits = slots_filled,
            writes = undo.len(),
            "rolling back commits that never reached the replicated log"
        );
        undo_writes(db, &undo);
    }
}

impl App for EngineApp {
    type Op = Batch;
    type Reply = ();
    type Snapshot = EngineSnapshot;

    fn apply(&mut self, op_number: u64, batch: &Batch) {
        // An own batch's keys were listed when it was handed over: take them, not a copy.
        let handed = if batch.origin == self.shared.origin {
            self.local.borrow_mut().handed.remove(&batch.first_slot)
        } else {
            None
        };
        let keys = match handed {
            Some(keys) => {
                self.local
                    .borrow_mut()
                    .own_ops
                    .push_back((op_number, batch.end_slot()));
                keys
            }
            None => {
                // A foreign entry: this replica is not (or no longer) primary.
                retract_unlogged(&self.db, &self.shared, &self.local);
                self.install(op_number, &batch.txns)
            }
        };
        self.applied_cts = self.applied_cts.max(batch.cts_max());
        let bytes = batch.bytes();
        self.undo_bytes += bytes;
        self.undo.push_back(Applied {
            op: op_number,
            cts_through: self.applied_cts,
            keys,
            bytes,
        });
    }

    fn op_bytes(batch: &Batch) -> usize {
        batch.bytes()
    }

    fn undo_to(&mut self, op_number: u64) {
        retract_unlogged(&self.db, &self.shared, &self.local);
        // Newest operation first: each drops exactly the versions it installed.
        while self.undo.back().is_some_and(|a| a.op > op_number) {
            let a = self.undo.pop_back().expect("checked");
            self.undo_bytes -= a.bytes;
            undo_writes(&self.db, &a.keys);
        }
        self.applied_cts = self.undo.back().map_or(self.durable_cts, |a| a.cts_through);
    }

    fn forget_undo(&mut self, op_number: u64) {
        let mut moved = false;
        while self.undo.front().is_some_and(|a| a.op <= op_number) {
            let a = self.undo.pop_front().expect("checked");
            self.undo_bytes -= a.bytes;
            self.durable_cts = self.durable_cts.max(a.cts_through);
            moved = true;
        }
        if moved {
            self.set_gc_floor();
            // The floor first: the horizon must never pass below it.
            if !self.shared.is_primary() {
                self.db.set_read_horizon(Some(self.read_horizon()));
            }
        }
    }

    /// Names a data file and pins the GC at the durable point's timestamp: the disk thread
    /// writes the file (`disk.rs`, `checkpoint::write`) and releases the pin. The operations
    /// after the durable point travel in the snapshot itself, read back from the engine at
    /// their exact timestamps (the floor keeps them).
    fn snapshot(&self) -> EngineSnapshot {
        let n = self.checkpoints.get() + 1;
        self.checkpoints.set(n);
        let file = format!("checkpoint-{:016x}-{n}.data", self.shared.origin);
        self.pin.hold(&file, self.durable_cts);
        self.set_gc_floor();
        let mut tail = Vec::with_capacity(self.undo.len());
        for a in &self.undo {
            let mut txns: Vec<TxnWrites> = Vec::new();
            for (table, key, cts) in &a.keys {
                let value = match self.db.read_version_at(table, key, *cts) {
                    Some(v) => v,
                    None => {
                        // Every applied version above the floor is kept; a miss is a bug.
                        tracing::error!(op = a.op, cts, "a version to checkpoint is missing");
                        continue;
                    }
                };
                let write = crate::op::Write {
                    table: table.clone(),
                    key: key.clone(),
                    value,
                };
                match txns.last_mut() {
                    Some(t) if t.cts == *cts => t.writes.push(write),
                    _ => txns.push(TxnWrites {
                        cts: *cts,
                        writes: vec![write],
                    }),
                }
            }
            tail.push((a.op, txns));
        }
        EngineSnapshot::Taken {
            file,
            durable_cts: self.durable_cts,
            tail,
        }
    }

    /// Loads a checkpoint into the database, which must hold nothing yet: a replica
    /// starting from its disk, or an amnesiac one taking a state transfer before applying
    /// anything. A replica holding data cannot take one (the engine has no way to drop
    /// every version at once yet); it stops with an error saying so, rather than run on
    /// with a state the group does not have.
    fn restore(&mut self, snapshot: &EngineSnapshot) {
        let EngineSnapshot::Taken {
            file,
            durable_cts,
            tail,
        } = snapshot
        else {
            return; // an empty state: nothing to load
        };
        if self.applied_cts > 0 || !self.undo.is_empty() || self.durable_cts > 0 {
            fatal(&format!(
                "a state transfer reached replica data that is not empty; restart this \
                 replica with an empty --data-dir to take the group's state ({file})"
            ));
        }
        match crate::checkpoint::load(&self.dir, file, &self.db) {
            Ok(stats) => tracing::info!(
                file = %file,
                keys = stats.entries,
                bytes = stats.bytes,
                "loaded the replica's checkpoint"
            ),
            Err(e) => fatal(&format!("loading the replica's checkpoint {file}: {e}")),
        }
        self.durable_cts = *durable_cts;
        self.applied_cts = *durable_cts;
        for (op, txns) in tail {
            let keys = self.install(*op, txns);
            let cts = txns.iter().map(|t| t.cts).max().unwrap_or(0);
            self.applied_cts = self.applied_cts.max(cts);
            let bytes = 32 + txns.iter().map(TxnWrites::bytes).sum::<usize>();
            self.undo_bytes += bytes;
            self.undo.push_back(Applied {
                op: *op,
                cts_through: self.applied_cts,
                keys,
                bytes,
            });
        }
        self.set_gc_floor();
        if !self.shared.is_primary() {
            self.db.set_read_horizon(Some(self.read_horizon()));
        }
    }
}

/// Stops the process: the replica cannot go on without losing or inventing state, and a
/// restart recovers what its disk holds.
fn fatal(what: &str) -> ! {
    tracing::error!("{what}");
    eprintln!("verso: {what}");
    std::process::exit(70);
}
