//! Strict serializability of a recorded history, checked the way Adya defines it (the
//! paper's App. E.3): committed transactions, with the dependency edges their reads and
//! the servers' version orders give (write-write, write-read, read-write) and the
//! real-time edges (one committed before the other began), must form no cycle.
//!
//! The version order of each key is the servers' own (their committed versions, oldest
//! first); writes carry values unique per transaction, so a read names the write it saw.

use std::collections::HashMap;

use crate::types::{Key, Ts, Value};

/// A committed transaction as its client saw it.
#[derive(Clone, Debug)]
pub struct TxnRecord {
    pub client: u32,
    /// When its client began it (first attempt) and got its result, in real time.
    pub invoked: u64,
    pub completed: u64,
    pub reads: Vec<(Key, Value)>,
    pub writes: Vec<(Key, Value)>,
    pub commit_ts: Ts,
}

/// Checks `txns` against the keys' version orders (`(key, values oldest first)`, the
/// initial, empty value first). The error describes the first problem found: a read of a value
/// no committed transaction wrote, a write missing from its key's order, or a cycle.
pub fn strictly_serializable(
    txns: &[TxnRecord],
    versions: &[(Key, Vec<Value>)],
) -> Result<(), String> {
    let mut edges = dependency_edges(txns, versions)?;
    // Real time through a chain of completion points instead of an edge per pair (a
    // history of a real run has 10^5 transactions; the pairs would be 10^10): point k is
    // the k-th completion, its transaction leads to it, each point to the next, and the
    // last point before a transaction's invocation leads to that transaction. A path from
    // `i` to `j` through the chain exists exactly when `i` completed before `j` began.
    let n = txns.len();
    let mut by_end: Vec<usize> = (0..n).collect();
    by_end.sort_by_key(|&i| txns[i].completed);
    edges.resize(2 * n, Vec::new());
    for (k, &i) in by_end.iter().enumerate() {
        edges[i].push((n + k, "rt"));
        if k + 1 < n {
            edges[n + k].push((n + k + 1, "rt"));
        }
    }
    for (j, t) in txns.iter().enumerate() {
        let before = by_end.partition_point(|&i| txns[i].completed < t.invoked);
        if before > 0 {
            edges[n + before - 1].push((j, "rt"));
        }
    }
    cycle_report(txns, &edges)
}

/// The same, with the real-time order given as pairs `(a, b)`: `txns[a]` returned before
/// `txns[b]` began (the times in the records are then not used).
pub fn serializable_with(
    txns: &[TxnRecord],
    versions: &[(Key, Vec<Value>)],
    real_time: &[(usize, usize)],
) -> Result<(), String> {
    let mut edges = dependency_edges(txns, versions)?;
    for &(i, j) in real_time {
        edges[i].push((j, "rt"));
    }
    cycle_report(txns, &edges)
}

/// Per transaction, the dependency edges (write-write, write-read, read-write) leaving it.
fn dependency_edges(
    txns: &[TxnRecord],
    versions: &[(Key, Vec<Value>)],
) -> Result<Vec<Vec<(usize, &'static str)>>, String> {
    // Keyed by reference: a history's keys and values are shared bytes, and the maps only
    // ever point into `txns` and `versions`.
    let mut writer: HashMap<(&Key, &Value), usize> = HashMap::new();
    for (i, t) in txns.iter().enumerate() {
        for (k, v) in &t.writes {
            if v.is_empty() || writer.insert((k, v), i).is_some() {
                return Err(format!("value {v} of key {k} is not unique to one write"));
            }
        }
    }
    let mut position: HashMap<(&Key, &Value), usize> = HashMap::new();
    let mut order: HashMap<&Key, &[Value]> = HashMap::new();
    for (k, values) in versions {
        if !values.first().is_some_and(Value::is_empty) {
            return Err(format!(
                "key {k}: its versions do not start at the initial one"
            ));
        }
        for (p, v) in values.iter().enumerate() {
            if p > 0 && !writer.contains_key(&(k, v)) {
                return Err(format!(
                    "key {k}: committed version {v} has no committed writer"
                ));
            }
            if position.insert((k, v), p).is_some() {
                return Err(format!("key {k}: version {v} twice"));
            }
        }
        order.insert(k, values);
    }
    for &(k, v) in writer.keys() {
        if !position.contains_key(&(k, v)) {
            return Err(format!(
                "key {k}: committed write {v} is missing from its versions"
            ));
        }
    }
    let n = txns.len();
    let mut edges: Vec<Vec<(usize, &'static str)>> = vec![Vec::new(); n];
    for (k, values) in &order {
        for w in values.windows(2) {
            if let (Some(&a), Some(&b)) = (writer.get(&(*k, &w[0])), writer.get(&(*k, &w[1]))) {
                edges[a].push((b, "ww"));
            }
        }
    }
    for (i, t) in txns.iter().enumerate() {
        for (k, v) in &t.reads {
            if v.is_empty() && !order.contains_key(k) {
                // The initial version of a key no committed transaction wrote (a server
                // lists only keys it loaded: a group's new host never loaded those its
                // predecessor read outside the log). Nothing comes after it.
                continue;
            }
            let Some(&p) = position.get(&(k, v)) else {
                return Err(format!(
                    "transaction {i} read {v} from key {k}, which no committed transaction wrote"
                ));
            };
            if let Some(&w) = writer.get(&(k, v)) {
                if w != i {
                    edges[w].push((i, "wr"));
                }
            }
            let next = order.get(k).and_then(|vs| vs.get(p + 1));
            if let Some(&w) = next.and_then(|nv| writer.get(&(k, nv))) {
                if w != i {
                    edges[i].push((w, "rw"));
                }
            }
        }
    }
    Ok(edges)
}

/// `Ok` without a cycle, else the cycle's transactions (nodes past `txns` are the
/// real-time chain's points, left out of the account).
fn cycle_report(txns: &[TxnRecord], edges: &[Vec<(usize, &'static str)>]) -> Result<(), String> {
    match find_cycle(edges) {
        None => Ok(()),
        Some(cycle) => {
            let steps: Vec<String> = cycle
                .iter()
                .filter(|&&(i, _)| i < txns.len())
                .map(|&(i, how)| {
                    let t = &txns[i];
                    format!(
                        "txn {i} (client {}, ts {:?}, {}..{} reads {:?} writes {:?}) -{how}->",
                        t.client, t.commit_ts, t.invoked, t.completed, t.reads, t.writes
                    )
                })
                .collect();
            Err(format!("not strictly serializable: {}", steps.join(" ")))
        }
    }
}

/// A cycle as (node, label of the edge leaving it), if the graph has one.
fn find_cycle(edges: &[Vec<(usize, &'static str)>]) -> Option<Vec<(usize, &'static str)>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        New,
        OnPath,
        Done,
    }
    let mut mark = vec![Mark::New; edges.len()];
    for root in 0..edges.len() {
        if mark[root] != Mark::New {
            continue;
        }
        // Iterative depth-first search: (node, next edge to look at, label taken to it).
        let mut path: Vec<(usize, usize)> = vec![(root, 0)];
        mark[root] = Mark::OnPath;
        while let Some(&mut (node, ref mut next)) = path.last_mut() {
            if let Some(&(to, _)) = edges[node].get(*next) {
                *next += 1;
                match mark[to] {
                    Mark::New => {
                        mark[to] = Mark::OnPath;
                        path.push((to, 0));
                    }
                    Mark::OnPath => {
                        let start = path.iter().position(|&(n, _)| n == to).expect("on path");
                        return Some(
                            path[start..]
                                .iter()
                                .map(|&(n, e)| (n, edges[n][e - 1].1))
                                .collect(),
                        );
                    }
                    Mark::Done => {}
                }
            } else {
                mark[node] = Mark::Done;
                path.pop();
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Keys and values as numbers (`Key::from`, `Value::from`: 0 is the initial value).
    fn txn(invoked: u64, completed: u64, reads: &[(u64, u64)], writes: &[(u64, u64)]) -> TxnRecord {
        let kv = |&(k, v): &(u64, u64)| (Key::from(k), Value::from(v));
        TxnRecord {
            client: 0,
            invoked,
            completed,
            reads: reads.iter().map(kv).collect(),
            writes: writes.iter().map(kv).collect(),
            commit_ts: Ts::default(),
        }
    }

    fn versions(numbers: &[(u64, Vec<u64>)]) -> Vec<(Key, Vec<Value>)> {
        let values = |vs: &Vec<u64>| vs.iter().map(|&v| Value::from(v)).collect();
        numbers
            .iter()
            .map(|(k, vs)| (Key::from(*k), values(vs)))
            .collect()
    }

    #[test]
    fn a_serial_history_passes() {
        let h = [
            txn(0, 1, &[], &[(1, 10)]),
            txn(2, 3, &[(1, 10)], &[(2, 20)]),
        ];
        assert_eq!(
            strictly_serializable(&h, &versions(&[(1, vec![0, 10]), (2, vec![0, 20])])),
            Ok(())
        );
    }

    /// Serializable but not strict: the second transaction began after the first had
    /// committed, yet it read the value from before the first's write.
    #[test]
    fn a_real_time_inversion_is_caught() {
        let h = [txn(0, 1, &[], &[(1, 10)]), txn(2, 3, &[(1, 0)], &[])];
        let e = strictly_serializable(&h, &versions(&[(1, vec![0, 10])])).unwrap_err();
        assert!(e.contains("rt") && e.contains("rw"), "{e}");
    }

    /// A key no server listed (a group's new host never loaded a key its predecessor
    /// only read outside the log) may be read at its initial value, and at nothing else.
    #[test]
    fn an_unlisted_key_is_read_only_at_its_initial_value() {
        let listed = versions(&[(1, vec![0, 10])]);
        let initial = [
            txn(0, 1, &[], &[(1, 10)]),
            txn(2, 3, &[(1, 10), (7, 0)], &[]),
        ];
        assert_eq!(strictly_serializable(&initial, &listed), Ok(()));
        let written = [txn(0, 1, &[], &[(1, 10)]), txn(2, 3, &[(7, 70)], &[])];
        let e = strictly_serializable(&written, &listed).unwrap_err();
        assert!(e.contains("no committed transaction wrote"), "{e}");
    }

    /// Write skew: each read the other's key before the other wrote it.
    #[test]
    fn a_dependency_cycle_is_caught() {
        let h = [
            txn(0, 5, &[(2, 0)], &[(1, 10)]),
            txn(0, 5, &[(1, 0)], &[(2, 20)]),
        ];
        let e = strictly_serializable(&h, &versions(&[(1, vec![0, 10]), (2, vec![0, 20])]))
            .unwrap_err();
        assert!(e.contains("not strictly serializable"), "{e}");
    }

    proptest::proptest! {
        /// The chain of completion points decides exactly as an edge per real-time pair.
        #[test]
        fn the_real_time_chain_agrees_with_every_pair(
            shapes in proptest::collection::vec(
                (0u64..20, 0u64..20, proptest::option::of(0u64..2), proptest::collection::vec((0u64..2, 0usize..8), 0..3)),
                1..7,
            )
        ) {
            // Transaction i writes value i + 1 to its key (if any); versions in index order.
            let mut numbers: Vec<(u64, Vec<u64>)> = vec![(0, vec![0]), (1, vec![0])];
            let mut h = Vec::new();
            for (i, (a, b, write, _)) in shapes.iter().enumerate() {
                let writes: Vec<(u64, u64)> = write.iter().map(|&k| (k, i as u64 + 1)).collect();
                for &(k, v) in &writes {
                    numbers[k as usize].1.push(v);
                }
                h.push(txn((*a).min(*b), (*a).max(*b), &[], &writes));
            }
            for (i, (.., reads)) in shapes.iter().enumerate() {
                h[i].reads = reads
                    .iter()
                    .map(|&(k, pick)| {
                        let vs = &numbers[k as usize].1;
                        (Key::from(k), Value::from(vs[pick % vs.len()]))
                    })
                    .collect();
            }
            let versions = versions(&numbers);
            let mut pairs = Vec::new();
            for (i, a) in h.iter().enumerate() {
                for (j, b) in h.iter().enumerate() {
                    if a.completed < b.invoked {
                        pairs.push((i, j));
                    }
                }
            }
            proptest::prop_assert_eq!(
                strictly_serializable(&h, &versions).is_ok(),
                serializable_with(&h, &versions, &pairs).is_ok()
            );
        }
    }

    #[test]
    fn a_read_of_a_value_nobody_committed_is_caught() {
        let h = [txn(0, 1, &[(1, 99)], &[])];
        assert!(strictly_serializable(&h, &versions(&[(1, vec![0])])).is_err());
        let h = [txn(0, 1, &[], &[(1, 10)])];
        assert!(strictly_serializable(&h, &versions(&[(1, vec![0])])).is_err());
    }
}
