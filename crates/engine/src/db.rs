//! The database handle: tables, transactions, retries, statistics and teardown.

use std::cell::Cell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64 as StdAtomicU64, Ordering as StdOrdering};
use std::sync::{Mutex, OnceLock};

use crossbeam_utils::CachePadded;

use crate::gc::GcQueue;
use crate::index::{OrderedIndex, RecordPtr, TableIndex};
use crate::timestamp::Timestamps;
use crate::{Concurrency, Error, Isolation, Options, Txn};

/// Most tables one `Db` holds.
pub const TABLES_MAX: usize = 1024;
/// Longest table name, in bytes.
pub const TABLE_NAME_LEN_MAX: usize = 255;

/// A handle to a named table. Cheap to copy; valid only with the `Db` that made it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Table {
    pub(crate) id: u32,
    pub(crate) db: u64,
}

pub(crate) struct TableState {
    pub(crate) name: Box<str>,
    pub(crate) index: TableIndex,
    /// Two-phase locking's phantom lock (unused by the other protocols).
    pub(crate) lock2pl: crate::two_pl::TableLock,
}

/// Counters kept per site so commits on different threads do not share a cache line.
#[derive(Default)]
pub(crate) struct SiteStats {
    /// Commits that installed versions.
    pub(crate) write_commits: StdAtomicU64,
    /// Commits with nothing to install (read-only, or read-write that wrote nothing).
    pub(crate) read_only_commits: StdAtomicU64,
    pub(crate) aborts: StdAtomicU64,
    pub(crate) conflicts_read_by_younger: StdAtomicU64,
    pub(crate) conflicts_written_by_younger: StdAtomicU64,
    pub(crate) conflicts_write_write: StdAtomicU64,
    pub(crate) conflicts_read_changed: StdAtomicU64,
    pub(crate) conflicts_lock_busy: StdAtomicU64,
    pub(crate) versions_installed: StdAtomicU64,
    pub(crate) gc_runs: StdAtomicU64,
    pub(crate) gc_records_pruned: StdAtomicU64,
    pub(crate) gc_bytes_freed: StdAtomicU64,
    pub(crate) gc_moved_inline: StdAtomicU64,
    pub(crate) records_removed: StdAtomicU64,
    pub(crate) records_freed: StdAtomicU64,
    /// Commits that failed for a reason other than a conflict (the log refused them).
    pub(crate) commit_errors: StdAtomicU64,
}

/// A snapshot of the engine's counters (see [`Db::stats`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// Transactions committed, read-only ones included.
    pub commits: u64,
    /// Of which wrote nothing (read-only transactions, and read-write ones that did not write).
    pub read_only_commits: u64,
    /// Transactions aborted by the caller (explicitly or by drop).
    pub aborts: u64,
    /// Commits refused because a younger transaction had read a written key.
    pub conflicts_read_by_younger: u64,
    /// Commits refused because a younger transaction had written a written key.
    pub conflicts_written_by_younger: u64,
    /// Commits refused because another transaction held or had committed a newer write of a
    /// key they write (snapshot isolation and precision locking: first committer wins).
    pub conflicts_write_write: u64,
    /// Commits refused by precision locking's validation: a read predicate was written.
    pub conflicts_read_changed: u64,
    /// Two-phase locking: a lock another transaction held (no-wait).
    pub conflicts_lock_busy: u64,
    /// Versions installed by commits.
    pub versions_installed: u64,
    /// Garbage collections run.
    pub gc_runs: u64,
    /// Record chains pruned.
    pub gc_records_pruned: u64,
    /// Bytes of versions freed.
    pub gc_bytes_freed: u64,
    /// Newest versions moved from the heap back into their record's inline slot once the
    /// version that held the slot was freed.
    pub gc_moved_inline: u64,
    /// Entries waiting in GC queues: records to prune, versions in limbo, and removed
    /// records not freed yet (an upper bound on what GC still holds).
    pub gc_pending: u64,
    /// Records taken out of the index: deleted keys the watermark passed, and the empty
    /// records of inserts that aborted.
    pub records_removed: u64,
    /// Removed records freed (the rest wait for transactions that began before their
    /// removal).
    pub records_freed: u64,
    /// Commits that failed for another reason than a conflict (a durability error).
    pub commit_errors: u64,
}

/// An in-memory, multi-version, strictly serializable key-value store.
///
/// Share it between threads by reference (`std::thread::scope`) or in an `Arc`.
pub struct Db {
    uid: u64,
    pub(crate) options: Options,
    pub(crate) timestamps: Timestamps,
    tables: Box<[OnceLock<TableState>]>,
    table_ids: Mutex<HashMap<Box<str>, u32>>,
    pub(crate) gc: Box<[CachePadded<Mutex<GcQueue>>]>,
    pub(crate) stats: Box<[CachePadded<SiteStats>]>,
    /// Precision locking's recently-committed list (unused under MVTO).
    pub(crate) commit_log: crate::validation::CommitLog,
    next_site: StdAtomicU64,
    /// The redo log and data directory (`None` when memory-only).
    pub(crate) durable: Option<crate::durability::Durable>,
    /// Per bucket of keys (by hash), the newest tombstone timestamp whose record was removed:
    /// what [`Txn::version_of`] says for an absent key, so a key deleted, removed and
    /// re-created or not is still seen to have changed.
    removal_stamps: Box<[StdAtomicU64]>,
    /// Where a replicated primary's commits go (`replicated.rs`); unset otherwise.
    pub(crate) commit_sink: OnceLock<std::sync::Arc<dyn crate::replicated::CommitSink>>,
}

/// Buckets of [`Db::removal_stamps`]: a key shares its bucket with 1/4096 of the others.
const REMOVAL_BUCKETS: usize = 4096;

static NEXT_DB_UID: StdAtomicU64 = StdAtomicU64::new(1);

thread_local! {
    /// (db uid, site) of the last `Db` this thread used: the site it begins transactions on.
    static SITE: Cell<(u64, usize)> = const { Cell::new((0, 0)) };
}

impl Db {
    /// Opens a database. Memory-only (the default) starts empty; with a
    /// [`Durability`](crate::Durability) mode it locks `Options::data_dir`, recovers what
    /// is there (newest checkpoint, then the logs up to their consistent cut), and logs
    /// every commit from then on.
    pub fn open(options: Options) -> Result<Db, Error> {
        options.validate()?;
        let durable = options.durability != crate::Durability::None;
        let mut db = Db::open_in_memory(options)?;
        if durable {
            db.open_durable()?;
        }
        Ok(db)
    }

    fn open_in_memory(options: Options) -> Result<Db, Error> {
        let timestamps = Timestamps::new(options.timestamps)?;
        let sites = timestamps.site_count();
        Ok(Db {
            uid: NEXT_DB_UID.fetch_add(1, StdOrdering::Relaxed),
            timestamps,
            options,
            tables: (0..TABLES_MAX).map(|_| OnceLock::new()).collect(),
            table_ids: Mutex::new(HashMap::new()),
            gc: (0..sites)
                .map(|_| CachePadded::new(Mutex::new(GcQueue::default())))
                .collect(),
            stats: (0..sites)
                .map(|_| CachePadded::new(SiteStats::default()))
                .collect(),
            commit_log: crate::validation::CommitLog::default(),
            next_site: StdAtomicU64::new(0),
            durable: None,
            removal_stamps: (0..REMOVAL_BUCKETS).map(|_| StdAtomicU64::new(0)).collect(),
            commit_sink: OnceLock::new(),
        })
    }

    /// The table called `name`, created empty if it does not exist (and, when durable,
    /// recorded in the data directory's catalog before this returns).
    pub fn table(&self, name: &str) -> Result<Table, Error> {
        self.table_inner(name, true)
    }

    /// Recovery: recreates a catalog table without writing the catalog.
    pub(crate) fn create_table_in_memory(&self, name: &str) -> Result<Table, Error> {
        self.table_inner(name, false)
    }

    fn table_inner(&self, name: &str, log: bool) -> Result<Table, Error> {
        if name.is_empty() {
            return Err(Error::InvalidTableName { reason: "empty" });
        }
        if name.len() > TABLE_NAME_LEN_MAX {
            return Err(Error::InvalidTableName {
                reason: "longer than 255 bytes",
            });
        }
        let mut ids = self.table_ids.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(&id) = ids.get(name) {
            return Ok(Table { id, db: self.uid });
        }
        let id = ids.len();
        if id >= TABLES_MAX {
            return Err(Error::TooManyTables { max: TABLES_MAX });
        }
        if log {
            self.log_new_table(id as u32, name)?;
        }
        let state = TableState {
            name: name.into(),
            index: TableIndex::new(self.options.index),
            lock2pl: Default::default(),
        };
        assert!(
            self.tables[id].set(state).is_ok(),
            "table slot {id} filled twice"
        );
        ids.insert(name.into(), id as u32);
        Ok(Table {
            id: id as u32,
            db: self.uid,
        })
    }

    /// Names of all tables, in creation order.
    /// The longest key it takes (`Options::key_size_max`).
    pub fn key_size_max(&self) -> usize {
        self.options.key_size_max
    }

    /// The longest value it takes (`Options::value_size_max`).
    pub fn value_size_max(&self) -> usize {
        self.options.value_size_max
    }

    pub fn table_names(&self) -> Vec<String> {
        self.tables
            .iter()
            .map_while(|t| t.get())
            .map(|t| t.name.to_string())
            .collect()
    }

    /// Number of keys the table's index holds: live keys, and deleted ones until the GC
    /// removes them (once no active transaction can see what they held).
    pub fn table_index_len(&self, table: &Table) -> Result<usize, Error> {
        Ok(self.table_state(table)?.index.len())
    }

    pub(crate) fn table_state(&self, table: &Table) -> Result<&TableState, Error> {
        if table.db != self.uid {
            return Err(Error::ForeignTable);
        }
        self.tables
            .get(table.id as usize)
            .and_then(OnceLock::get)
            .ok_or(Error::ForeignTable)
    }

    /// The table with a known-valid id (one a transaction already checked).
    pub(crate) fn table_state_by_id(&self, id: u32) -> &TableState {
        self.tables[id as usize]
            .get()
            .expect("write set names a table that exists")
    }

    /// Begins a read-write transaction at the `Db`'s isolation level (`Options::isolation`,
    /// serializable by default).
    pub fn begin(&self) -> Result<Txn<'_>, Error> {
        self.begin_inner(false, self.options.isolation)
    }

    /// Begins a read-only transaction: it never fails to commit, and writes return
    /// [`Error::ReadOnly`].
    pub fn begin_read_only(&self) -> Result<Txn<'_>, Error> {
        self.begin_inner(true, Isolation::Serializable)
    }

    /// Begins a read-write transaction at `isolation` ([`Isolation::Snapshot`] trades
    /// serializability for never aborting on what it read).
    /// Snapshot isolation needs [`Concurrency::PrecisionLocking`]: MVTO orders versions by
    /// begin timestamp and cannot tell which were committed after a transaction began.
    pub fn begin_with(&self, isolation: Isolation) -> Result<Txn<'_>, Error> {
        if isolation == Isolation::Snapshot
            && self.options.concurrency != Concurrency::PrecisionLocking
        {
            return Err(Error::Unsupported {
                what:
                    "snapshot isolation under MVTO (open the Db with Concurrency::PrecisionLocking)",
            });
        }
        self.begin_inner(false, isolation)
    }

    fn begin_inner(&self, read_only: bool, isolation: Isolation) -> Result<Txn<'_>, Error> {
        let (ts, slot) = self.timestamps.begin(self.site_hint())?;
        Ok(Txn::new(self, ts, slot, read_only, isolation))
    }

    /// The concurrency-control protocol in force.
    pub fn concurrency(&self) -> Concurrency {
        self.options.concurrency
    }

    /// Runs `body` in a transaction and commits it, retrying with backoff (up to
    /// `Options::run_attempts` times) while it fails with a conflict. Other errors from
    /// `body` abort the transaction and are returned as they are.
    pub fn run<T>(
        &self,
        mut body: impl FnMut(&mut Txn<'_>) -> Result<T, Error>,
    ) -> Result<T, Error> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            let mut txn = self.begin()?;
            let error = match body(&mut txn) {
                Ok(value) => match txn.commit() {
                    Ok(_) => return Ok(value),
                    Err(e) => e,
                },
                Err(e) => {
                    txn.abort();
                    e
                }
            };
            if !error.is_conflict() || attempt >= self.options.run_attempts {
                return Err(error);
            }
            backoff(attempt);
        }
    }

    /// Current counters, summed over sites.
    pub fn stats(&self) -> Stats {
        let mut s = Stats::default();
        for site in self.stats.iter() {
            let get = |c: &StdAtomicU64| c.load(StdOrdering::Relaxed);
            s.commits += get(&site.write_commits) + get(&site.read_only_commits);
            s.read_only_commits += get(&site.read_only_commits);
            s.aborts += get(&site.aborts);
            s.conflicts_read_by_younger += get(&site.conflicts_read_by_younger);
            s.conflicts_written_by_younger += get(&site.conflicts_written_by_younger);
            s.conflicts_write_write += get(&site.conflicts_write_write);
            s.conflicts_read_changed += get(&site.conflicts_read_changed);
            s.conflicts_lock_busy += get(&site.conflicts_lock_busy);
            s.versions_installed += get(&site.versions_installed);
            s.gc_runs += get(&site.gc_runs);
            s.gc_records_pruned += get(&site.gc_records_pruned);
            s.gc_bytes_freed += get(&site.gc_bytes_freed);
            s.gc_moved_inline += get(&site.gc_moved_inline);
            s.records_removed += get(&site.records_removed);
            s.records_freed += get(&site.records_freed);
            s.commit_errors += get(&site.commit_errors);
        }
        for q in self.gc.iter() {
            s.gc_pending += q.lock().unwrap_or_else(|e| e.into_inner()).len() as u64;
        }
        s
    }

    /// Collects every queue now, as far as the oldest active transaction allows. Commits
    /// do this on their own as queues fill; this is for tests and quiet moments.
    pub fn collect_garbage(&self) {
        for site in 0..self.gc.len() {
            self.collect_site(site);
        }
    }

    pub(crate) fn collect_site(&self, site: usize) {
        let mut q = self.gc[site].lock().unwrap_or_else(|e| e.into_inner());
        if q.len() == 0 {
            return;
        }
        let done = q.collect(self, site);
        drop(q);
        let stats = &self.stats[site];
        stats
            .records_removed
            .fetch_add(done.removed as u64, StdOrdering::Relaxed);
        stats
            .records_freed
            .fetch_add(done.freed as u64, StdOrdering::Relaxed);
        stats.gc_runs.fetch_add(1, StdOrdering::Relaxed);
        stats
            .gc_records_pruned
            .fetch_add(done.records as u64, StdOrdering::Relaxed);
        stats
            .gc_bytes_freed
            .fetch_add(done.bytes as u64, StdOrdering::Relaxed);
        stats
            .gc_moved_inline
            .fetch_add(done.moved as u64, StdOrdering::Relaxed);
    }

    /// Takes a dead record's key out of its index, leaving `stamp` (its `tslast`) as the
    /// gap stamp where it was.
    pub(crate) fn remove_from_index(&self, record: RecordPtr, stamp: u64) {
        let r = record.get();
        if let Some(tombstone) = r.newest() {
            // Before the key leaves: a reader that no longer finds the record sees this.
            self.removal_stamps[removal_bucket(r.table(), record.key())]
                .fetch_max(tombstone.ts(), StdOrdering::SeqCst);
        }
        let removed =
            self.table_state_by_id(r.table())
                .index
                .remove_record(record.key(), record, stamp);
        // Only the thread that marked the record dead removes it, and nothing replaces a
        // key's record while it is in the index.
        assert!(removed, "a dead record was not in its index");
    }

    /// The record that holds `dead`'s key now (inserting one if there is none), for a commit
    /// that found `dead` before it left the index. Waits out a removal still in progress.
    pub(crate) fn record_again(&self, dead: RecordPtr) -> RecordPtr {
        let (table, key) = (dead.get().table(), dead.key());
        let index = &self.table_state_by_id(table).index;
        let mut step = 0;
        loop {
            let record = index.get_or_insert_with(key, |gap_stamp| {
                RecordPtr::alloc(table, key, gap_stamp, None)
            });
            if record != dead {
                return record;
            }
            crate::sync::spin_step(&mut step);
        }
    }

    /// Removes the empty records among `records` (inserts whose commit failed) that nobody
    /// holds, and retires them to `site`'s queue.
    pub(crate) fn remove_empty_records(
        &self,
        site: usize,
        records: impl Iterator<Item = RecordPtr>,
    ) {
        let mut removed = Vec::new();
        for record in records {
            if let Some(stamp) = record.get().remove_if_empty() {
                self.remove_from_index(record, stamp);
                removed.push(record);
            }
        }
        if removed.is_empty() {
            return;
        }
        let n = removed.len() as u64;
        let after = self.timestamps.fresh(site);
        let collect = {
            let mut q = self.gc[site].lock().unwrap_or_else(|e| e.into_inner());
            q.retire(removed.into_iter(), after);
            q.wants_collection()
        };
        self.stats[site]
            .records_removed
            .fetch_add(n, StdOrdering::Relaxed);
        if collect {
            self.collect_site(site);
        }
    }

    /// The newest removed tombstone in `key`'s bucket (0 if none).
    pub(crate) fn removal_stamp(&self, table: u32, key: &[u8]) -> u64 {
        self.removal_stamps[removal_bucket(table, key)].load(StdOrdering::SeqCst)
    }

    /// How long the oldest transaction still active has been running (`None` if none is).
    /// An active transaction holds back garbage collection: versions it may read, deleted
    /// keys it may see, and the records it may hold stay until it ends, so a transaction
    /// left open grows memory with every write elsewhere. Long transactions are the
    /// caller's choice in the embedded API; this shows their cost.
    pub fn oldest_transaction_age(&self) -> Option<std::time::Duration> {
        self.timestamps.oldest_active_age()
    }

    /// Which timestamp algorithm is in force ("rdtsc", "atomic" or "mutex").
    pub fn timestamp_algorithm(&self) -> &'static str {
        match self.timestamps.algorithm() {
            crate::timestamp::Algorithm::Rdtsc => "rdtsc",
            crate::timestamp::Algorithm::Atomic => "atomic",
            crate::timestamp::Algorithm::Mutex => "mutex",
        }
    }

    /// The site this thread begins transactions on: assigned round-robin on first use, so
    /// threads do not share a site's lock and slots.
    fn site_hint(&self) -> usize {
        SITE.with(|cell| {
            let (uid, site) = cell.get();
            if uid == self.uid {
                return site;
            }
            let site = (self.next_site.fetch_add(1, StdOrdering::Relaxed) as usize)
                % self.timestamps.site_count();
            cell.set((self.uid, site));
            site
        })
    }
}

fn removal_bucket(table: u32, key: &[u8]) -> usize {
    (crate::write_set::hash_of(table, key) >> 40) as usize % REMOVAL_BUCKETS
}

fn backoff(attempt: u32) {
    let spins = 1u32 << attempt.min(10);
    for _ in 0..spins {
        std::hint::spin_loop();
    }
    if attempt > 3 {
        std::thread::yield_now();
    }
    if attempt > 8 {
        std::thread::sleep(std::time::Duration::from_micros(u64::from(attempt) * 10));
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        // Stop the flusher first (it writes what is buffered): it reads no record.
        self.durable = None;
        // Every `Txn` borrows the `Db`, so none is alive: nothing can reach a record now.
        // Limbo first: an inline version there writes to its record when freed.
        for q in &self.gc {
            q.lock().unwrap_or_else(|e| e.into_inner()).free_all_limbo();
        }
        for table in self.tables.iter().filter_map(OnceLock::get) {
            // SAFETY: exclusive access (`&mut self`); the index holds each record once.
            table.index.for_each(|r| unsafe { r.destroy() });
        }
    }
}

impl std::fmt::Debug for Db {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Db")
            .field("tables", &self.table_names())
            .finish_non_exhaustive()
    }
}
