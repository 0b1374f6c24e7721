//! What every run checks: reads against the writes that committed (`KeyModel`), exclusive
//! service after every event, and the final state once everything settled.

use std::collections::{BTreeMap, BTreeSet};

use verso_check::{check_linearizable_registers, RegisterOp, RegisterOpKind};

use super::Sim;
use crate::lazen::{Group, GroupId};
use crate::slot::key_slot;

/// Per key: the writes (tag → acknowledged?) and which acknowledged ones a total crash may
/// have dropped.
#[derive(Default)]
pub(super) struct KeyModel {
    pub(super) issued: BTreeSet<u64>,
    /// Writes committed (at some group), whether or not their client heard so.
    pub(super) acked: BTreeSet<u64>,
    /// Committed writes a total crash dropped from the lazy suffix of a group's log.
    pub(super) lost: BTreeSet<u64>,
    /// The writes that delete the key.
    pub(super) deletes: BTreeSet<u64>,
    /// The newest value a read returned (0: none yet).
    pub(super) seen_max: u64,
}

impl KeyModel {
    /// The newest write a read must see (0: none).
    fn floor(&self) -> u64 {
        self.acked
            .iter()
            .rev()
            .find(|t| !self.lost.contains(t))
            .copied()
            .unwrap_or(0)
    }
}

impl Sim {
    pub(super) fn check_read(&mut self, key: &[u8], value: Option<&[u8]>, group: GroupId) {
        let seen: u64 = match value {
            None => 0,
            Some(v) => match tag_of(v) {
                Some(t) => t,
                None => {
                    self.fail(format!("key {:?} holds a value never written", lossy(key)));
                    return;
                }
            },
        };
        let m = self.keys.get_mut(key).expect("a known key");
        let floor = m.floor();
        let why = if seen == 0 {
            // Absent: nothing committed and kept, or the newest such write deletes it.
            (floor != 0 && !m.deletes.contains(&floor)).then(|| {
                format!("nothing, where the newest write it must see ({floor}) is a value")
            })
        } else if !m.acked.contains(&seen) || m.deletes.contains(&seen) {
            Some(format!("{seen}, a value no commit wrote"))
        } else if seen < floor {
            Some(format!(
                "{seen}, older than its newest write it must see ({floor})"
            ))
        } else if seen < m.seen_max && !m.lost.contains(&m.seen_max) {
            // Reads never go back, unless a total crash dropped what an earlier one saw.
            Some(format!(
                "{seen}, older than {} which an earlier read saw",
                m.seen_max
            ))
        } else {
            m.seen_max = m.seen_max.max(seen);
            None
        };
        if let Some(why) = why {
            self.fail(format!(
                "group {group} answered {why}, for key {:?}",
                lossy(key)
            ));
        }
    }

    pub(super) fn check_exclusive(&mut self) {
        // Each group's serving state once per check (a replicated group's lease holder takes
        // some work to find).
        let nodes: Vec<Option<&Group>> = (0..self.opts.groups)
            .map(|g| self.serving_node(g))
            .collect();
        let mut twice = None;
        for &slot in &self.slots {
            let serving: Vec<GroupId> = (0..self.opts.groups)
                .filter(|&g| nodes[usize::from(g)].is_some_and(|n| n.serves(slot)))
                .collect();
            if serving.len() > 1 {
                twice = Some((slot, serving));
                break;
            }
        }
        if let Some((slot, serving)) = twice {
            self.fail(format!("slot {slot} served by groups {serving:?} at once"));
        }
    }

    /// The Lazen state that answers for group `g` now.
    pub(super) fn serving_node(&self, g: GroupId) -> Option<&Group> {
        let sg = &self.groups[usize::from(g)];
        match &sg.vsr {
            Some(v) => v.serving_node(self.now),
            None => Some(&sg.node),
        }
    }

    /// Once settled: every key is served by the group the map names, with a value a read
    /// may return.
    pub(super) fn check_final(&mut self) {
        let keys: Vec<Vec<u8>> = self.keys.keys().cloned().collect();
        for key in keys {
            let slot = key_slot(&key);
            let Some(owner) = self.slot_map().and_then(|c| c.owner(slot)) else {
                self.fail(format!("slot {slot} has no owner"));
                return;
            };
            let Some(g) = self.serving_node(owner) else {
                self.fail(format!("group {owner} has no primary holding its lease"));
                return;
            };
            if !g.serves(slot) {
                self.fail(format!("slot {slot}'s owner {owner} does not serve it"));
                return;
            }
            let v = g.peek(&key).cloned();
            self.check_read(&key, v.as_deref(), owner);
        }
    }
}

/// The write a value names (values are their writes' tags).
pub(super) fn tag_of(value: &[u8]) -> Option<u64> {
    std::str::from_utf8(value).ok().and_then(|t| t.parse().ok())
}

/// Once the run is over: the clients' operations are linearizable, per key
/// (`verso-check`), leaving out writes a total crash lost and the reads that saw them
/// (as the replication simulator does: what was lost is not in the history that stands).
pub(super) fn check_linearizable(sim: &mut Sim) {
    let lost = |key: &[u8], tag: u64| sim.keys.get(key).is_some_and(|m| m.lost.contains(&tag));
    // A read that found the key absent names no write: it is left out if a lost deletion
    // of the key had begun by the time it returned.
    let mut lost_delete_from: BTreeMap<&[u8], u64> = BTreeMap::new();
    for (op, tag) in &sim.history {
        if let (RegisterOpKind::Remove, Some(t)) = (op.kind, tag) {
            if lost(&op.key, *t) {
                let from = lost_delete_from.entry(&op.key).or_insert(op.start);
                *from = (*from).min(op.start);
            }
        }
    }
    let ops: Vec<RegisterOp> = sim
        .history
        .iter()
        .filter(|(op, tag)| match (op.kind, tag) {
            (_, Some(t)) => !lost(&op.key, *t),
            (RegisterOpKind::Get { observed: Some(t) }, None) => !lost(&op.key, t),
            (RegisterOpKind::Get { observed: None }, None) => lost_delete_from
                .get(op.key.as_slice())
                .is_none_or(|&from| from > op.end),
            _ => true,
        })
        .map(|(op, _)| op.clone())
        .collect();
    if let Err(v) = check_linearizable_registers(&ops) {
        sim.fail(format!("the clients' history is not linearizable: {v}"));
    }
}

fn lossy(key: &[u8]) -> String {
    String::from_utf8_lossy(key).into_owned()
}
