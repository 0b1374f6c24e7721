//! Anomalies visible in a single observation, detected before any graph is built:
//! G1a (aborted read), G1b (intermediate read), garbage reads, reads that ignore the
//! txn's own writes, and malformed range results.
//!
//! While walking every included transaction's operations this pass also produces the
//! *external* observations (reads not answered by the txn's own writes) that the
//! dependency graph is built from, including the implicit "absent" observations of
//! range reads, and remembers what each writer read of a key before writing it (the
//! read-modify-write predecessor, used to infer version order without timestamps).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::ops::Bound;

use crate::history::{
    bounds_empty, display_bounds, display_key, in_bounds, Key, Observed, Op, Outcome, TxnId,
    VersionId,
};
use crate::index::{Index, KeyId, TxnIdx};
use crate::violation::{AnomalyKind, Violation};

/// What an external read saw, after validation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ObsKind {
    /// The key was absent; which absent version is resolved later.
    Absent,
    /// The installed version of this (included) writer.
    Present(TxnIdx),
}

/// One external observation.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Obs {
    pub reader: TxnIdx,
    pub key: KeyId,
    pub kind: ObsKind,
}

pub(crate) struct Observations {
    pub obs: Vec<Obs>,
    /// `(writer, key) ->` the last thing the writer externally read of the key before
    /// its first write of it.
    pub rmw_pred: HashMap<(TxnIdx, KeyId), ObsKind>,
}

/// The txn's own writes so far: key -> (number of writes, whether the last was a delete).
type OwnWrites<'h> = BTreeMap<&'h [u8], (u32, bool)>;

/// Walks every included txn's ops, returning the first direct anomaly found, or the
/// external observations.
pub(crate) fn collect(ix: &Index<'_>) -> Result<Observations, Violation> {
    let mut out = Observations {
        obs: Vec::new(),
        rmw_pred: HashMap::new(),
    };
    let mut own: OwnWrites<'_> = BTreeMap::new();
    let mut last_ext: HashMap<KeyId, ObsKind> = HashMap::new();
    for t in 0..ix.txns.len() as TxnIdx {
        if !ix.included[t as usize] {
            // Aborted (and unobserved unknown) txns' reads carry no guarantee.
            continue;
        }
        own.clear();
        last_ext.clear();
        let mut w = Walker {
            ix,
            t,
            me: ix.id(t),
            own: &mut own,
            last_ext: &mut last_ext,
            out: &mut out,
        };
        for op in &ix.txn(t).ops {
            w.op(op)?;
        }
    }
    Ok(out)
}

struct Walker<'a, 'h> {
    ix: &'a Index<'h>,
    t: TxnIdx,
    me: TxnId,
    own: &'a mut OwnWrites<'h>,
    last_ext: &'a mut HashMap<KeyId, ObsKind>,
    out: &'a mut Observations,
}

impl<'h> Walker<'_, 'h> {
    fn op(&mut self, op: &'h Op) -> Result<(), Violation> {
        match op {
            Op::Read { key, observed } => {
                let seen = match observed {
                    Observed::Absent => None,
                    Observed::Version(v) => Some(*v),
                };
                self.read(key, seen, "read")
            }
            Op::Write { key } => {
                self.write(key, false);
                Ok(())
            }
            Op::Delete { key } => {
                self.write(key, true);
                Ok(())
            }
            Op::Range {
                start,
                end,
                reverse,
                observed,
            } => self.range(start, end, *reverse, observed),
        }
    }

    fn write(&mut self, key: &'h [u8], delete: bool) {
        let k = self.ix.key_id(key);
        let entry = self.own.entry(key).or_insert_with(|| {
            // First write of this key: what we last read of it is the RMW predecessor.
            if let Some(&pred) = self.last_ext.get(&k) {
                self.out.rmw_pred.insert((self.t, k), pred);
            }
            (0, false)
        });
        entry.0 += 1;
        entry.1 = delete;
    }

    /// A point read, or one entry of a range read (`what` names which, for messages).
    fn read(
        &mut self,
        key: &'h [u8],
        seen: Option<VersionId>,
        what: &str,
    ) -> Result<(), Violation> {
        if let Some(&(n, deleted)) = self.own.get(key) {
            return self.check_own(key, seen, n, deleted, what);
        }
        let k = self.ix.key_id(key);
        let kind = match seen {
            None => ObsKind::Absent,
            Some(v) if v.txn == self.me => {
                return Err(self.internal(format!(
                    "T{} {what} key {} and saw its own version {v} before writing the key",
                    self.me,
                    display_key(key)
                )))
            }
            Some(v) => ObsKind::Present(self.validate_version(key, k, v)?),
        };
        self.external(k, kind);
        Ok(())
    }

    fn external(&mut self, k: KeyId, kind: ObsKind) {
        self.out.obs.push(Obs {
            reader: self.t,
            key: k,
            kind,
        });
        self.last_ext.insert(k, kind);
    }

    /// A read of a key the txn already wrote must return its latest own write.
    fn check_own(
        &self,
        key: &[u8],
        seen: Option<VersionId>,
        n: u32,
        deleted: bool,
        what: &str,
    ) -> Result<(), Violation> {
        let latest = VersionId::new(self.me, n - 1);
        let expected = (!deleted).then_some(latest);
        if seen == expected {
            return Ok(());
        }
        let saw = seen.map_or("absent".to_string(), |v| v.to_string());
        let own = if deleted {
            format!("its own delete {latest}")
        } else {
            format!("its own write {latest}")
        };
        Err(self.internal(format!(
            "T{} {what} key {} and saw {saw}, but the latest write of it was {own}",
            self.me,
            display_key(key)
        )))
    }

    fn internal(&self, detail: String) -> Violation {
        Violation::new(AnomalyKind::InternalInconsistency, vec![self.me], detail)
    }

    /// Checks an externally observed version and returns its (included) writer.
    fn validate_version(&self, key: &[u8], k: KeyId, v: VersionId) -> Result<TxnIdx, Violation> {
        let me = self.me;
        let shown = display_key(key);
        let garbage = |why: String| {
            Violation::new(
                AnomalyKind::GarbageRead,
                vec![me, v.txn],
                format!("T{me} read key {shown} and saw version {v}, {why}"),
            )
        };
        if v.txn == 0 {
            return Err(garbage(
                "but T0 only installs the initial absent version".into(),
            ));
        }
        let Some(&w) = self.ix.by_id.get(&v.txn) else {
            return Err(garbage(format!(
                "but there is no txn T{} in the history",
                v.txn
            )));
        };
        let Some(kinds) = self.ix.writes.get(&(w, k)) else {
            return Err(garbage(format!("but T{} never wrote that key", v.txn)));
        };
        let Some(&is_delete) = kinds.get(v.seq as usize) else {
            return Err(garbage(format!(
                "but T{} wrote that key only {} time(s)",
                v.txn,
                kinds.len()
            )));
        };
        if self.ix.txn(w).outcome == Outcome::Aborted {
            return Err(Violation::new(
                AnomalyKind::G1a,
                vec![me, v.txn],
                format!(
                    "T{me} read key {shown} and saw version {v}, written by aborted T{}",
                    v.txn
                ),
            ));
        }
        let last = kinds.len() - 1;
        if v.seq as usize != last {
            return Err(Violation::new(
                AnomalyKind::G1b,
                vec![me, v.txn],
                format!(
                    "T{me} read key {shown} and saw version {v}, but T{} later overwrote it with T{}.{last}",
                    v.txn, v.txn
                ),
            ));
        }
        if is_delete {
            return Err(garbage(format!(
                "which is a delete, as if it were present (T{} deleted the key)",
                v.txn
            )));
        }
        debug_assert!(
            self.ix.included[w as usize],
            "observed writers are included"
        );
        Ok(w)
    }

    fn range(
        &mut self,
        start: &Bound<Key>,
        end: &Bound<Key>,
        reverse: bool,
        observed: &'h [(Key, VersionId)],
    ) -> Result<(), Violation> {
        self.check_range_shape(start, end, reverse, observed)?;
        for (key, v) in observed {
            self.read(key, Some(*v), "range-read")?;
        }
        let returned: HashSet<&[u8]> = observed.iter().map(|(k, _)| k.as_slice()).collect();
        if bounds_empty(start, end) {
            return Ok(());
        }
        let bounds = (as_slice_bound(start), as_slice_bound(end));
        // The txn's own live writes in range must show up in the result.
        if let Some((key, &(n, _))) = self
            .own
            .range::<[u8], _>(bounds)
            .find(|(key, &(_, deleted))| !deleted && !returned.contains(**key))
        {
            let detail = format!(
                "T{} range-read {} and did not return key {}, which it had written itself (T{}.{})",
                self.me,
                display_bounds(start, end),
                display_key(key),
                self.me,
                n - 1
            );
            return Err(self.internal(detail));
        }
        // Every committed key in range that was not returned was read as absent.
        let ix = self.ix;
        for (key, &k) in ix.written_keys.range::<[u8], _>(bounds) {
            if !returned.contains(*key) && !self.own.contains_key(*key) {
                self.external(k, ObsKind::Absent);
            }
        }
        Ok(())
    }

    /// Range results must be strictly sorted in scan direction and within bounds.
    fn check_range_shape(
        &self,
        start: &Bound<Key>,
        end: &Bound<Key>,
        reverse: bool,
        observed: &[(Key, VersionId)],
    ) -> Result<(), Violation> {
        let range = display_bounds(start, end);
        let bad = |why: String| {
            Violation::new(
                AnomalyKind::InvalidRangeResult,
                vec![self.me],
                format!(
                    "T{} range-read {range}{}: {why}",
                    self.me,
                    if reverse { " (reverse)" } else { "" }
                ),
            )
        };
        for (key, _) in observed {
            if !in_bounds(key, start, end) {
                return Err(bad(format!(
                    "returned key {} outside the bounds",
                    display_key(key)
                )));
            }
        }
        for pair in observed.windows(2) {
            let (a, b) = (&pair[0].0, &pair[1].0);
            if a == b {
                return Err(bad(format!("returned key {} twice", display_key(a))));
            }
            if (a < b) == reverse {
                return Err(bad(format!(
                    "returned key {} before key {}, out of order",
                    display_key(a),
                    display_key(b)
                )));
            }
        }
        Ok(())
    }
}

fn as_slice_bound(b: &Bound<Key>) -> Bound<&[u8]> {
    match b {
        Bound::Included(k) => Bound::Included(k.as_slice()),
        Bound::Excluded(k) => Bound::Excluded(k.as_slice()),
        Bound::Unbounded => Bound::Unbounded,
    }
}
