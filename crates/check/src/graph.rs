//! The dependency graph: edge list, sparse real-time edges, iterative Tarjan SCC and
//! shortest-cycle extraction.
//!
//! Nodes `0..n_txn` are transactions (by position in the history). Real-time order is
//! encoded with `n_txn` extra auxiliary nodes (see [`realtime_edges`]) so it costs O(n)
//! edges instead of O(n²); cycles through auxiliary nodes are collapsed back into single
//! `rt` steps by the caller.

use std::collections::VecDeque;

use crate::violation::EdgeKind;

/// `Edge::key` for edges that are not about a key (real-time edges).
pub(crate) const NO_KEY: u32 = u32::MAX;

#[derive(Clone, Copy, Debug)]
pub(crate) struct Edge {
    pub from: u32,
    pub to: u32,
    pub kind: EdgeKind,
    pub key: u32,
}

/// Compressed adjacency of the edges whose kind is selected.
struct Csr {
    offsets: Vec<u32>,
    /// `(target, edge index)`.
    out: Vec<(u32, u32)>,
}

impl Csr {
    fn build(n: usize, edges: &[Edge], kinds: &[EdgeKind]) -> Self {
        let selected = |e: &Edge| kinds.contains(&e.kind);
        let mut offsets = vec![0u32; n + 1];
        for e in edges.iter().filter(|e| selected(e)) {
            offsets[e.from as usize + 1] += 1;
        }
        for i in 0..n {
            offsets[i + 1] += offsets[i];
        }
        let mut fill = offsets.clone();
        let mut out = vec![(0, 0); offsets[n] as usize];
        for (i, e) in edges.iter().enumerate() {
            if selected(e) {
                let slot = &mut fill[e.from as usize];
                out[*slot as usize] = (e.to, i as u32);
                *slot += 1;
            }
        }
        Csr { offsets, out }
    }

    fn n(&self) -> usize {
        self.offsets.len() - 1
    }

    fn out(&self, v: u32) -> &[(u32, u32)] {
        &self.out[self.offsets[v as usize] as usize..self.offsets[v as usize + 1] as usize]
    }
}

/// Finds a cycle among the edges of the given kinds, returned as edge indices in order,
/// starting at a transaction node (`< n_txn`). Tries a few starting nodes of the first
/// non-trivial strongly connected component and keeps the shortest cycle.
pub(crate) fn find_cycle(
    n_nodes: usize,
    n_txn: usize,
    edges: &[Edge],
    kinds: &[EdgeKind],
) -> Option<Vec<u32>> {
    let csr = Csr::build(n_nodes, edges, kinds);
    let comp = first_nontrivial_scc(&csr)?;
    let mut in_comp = vec![false; n_nodes];
    for &v in &comp {
        in_comp[v as usize] = true;
    }
    let mut starts: Vec<u32> = comp.into_iter().filter(|&v| (v as usize) < n_txn).collect();
    starts.sort_unstable();
    // A handful of starts is enough to get a short cycle; each BFS is O(component).
    starts
        .iter()
        .take(4)
        .filter_map(|&s| shortest_cycle_through(&csr, &in_comp, edges, s))
        .min_by_key(Vec::len)
}

/// Finds a cycle of ww/wr/rw edges among transactions `0..n_txn` with no two consecutive
/// rw edges (the wrap-around pair included), as edge indices in order: the snapshot
/// isolation violation. Searches the product graph of (transaction, "arrived by rw"): an
/// rw edge may leave only a node not arrived by rw; a cycle there is such a DSG cycle.
///
/// Auxiliary nodes `n_txn..n_nodes` may only relay rw edges (a path txn -> aux.. -> txn
/// made of rw edges is one anti-dependency), so each gets a single product node: it is
/// entered from a txn not arrived by rw and leads to txns arrived by rw.
pub(crate) fn find_cycle_without_adjacent_rw(
    n_txn: usize,
    n_nodes: usize,
    edges: &[Edge],
) -> Option<Vec<u32>> {
    let mut product: Vec<Edge> = Vec::new();
    // `origin[i]`: the original edge of product edge `i`.
    let mut origin: Vec<u32> = Vec::new();
    let n_txn32 = n_txn as u32;
    let node = |t: u32, by_rw: bool| {
        if t < n_txn32 {
            2 * t + u32::from(by_rw)
        } else {
            n_txn32 + t
        }
    };
    for (i, e) in edges.iter().enumerate() {
        let mut add = |from: u32, to: u32| {
            product.push(Edge {
                from,
                to,
                kind: e.kind,
                key: e.key,
            });
            origin.push(i as u32);
        };
        match e.kind {
            EdgeKind::Rw => add(node(e.from, false), node(e.to, true)),
            EdgeKind::Ww | EdgeKind::Wr => {
                add(node(e.from, false), node(e.to, false));
                add(node(e.from, true), node(e.to, false));
            }
            EdgeKind::Rt => {}
        }
    }
    let kinds = [EdgeKind::Ww, EdgeKind::Wr, EdgeKind::Rw];
    let path = find_cycle(n_txn + n_nodes, 2 * n_txn, &product, &kinds)?;
    Some(path.into_iter().map(|p| origin[p as usize]).collect())
}

/// Iterative Tarjan: returns the first strongly connected component with more than one
/// node (the graphs never have self-loops), or `None` if the graph is acyclic.
fn first_nontrivial_scc(g: &Csr) -> Option<Vec<u32>> {
    let n = g.n();
    let mut t = Tarjan {
        g,
        index: vec![UNVISITED; n],
        low: vec![0; n],
        on_stack: vec![false; n],
        stack: Vec::new(),
        calls: Vec::new(),
        counter: 0,
    };
    (0..n as u32).find_map(|root| {
        if t.index[root as usize] == UNVISITED {
            t.search(root)
        } else {
            None
        }
    })
}

const UNVISITED: u32 = u32::MAX;

struct Tarjan<'g> {
    g: &'g Csr,
    index: Vec<u32>,
    low: Vec<u32>,
    on_stack: Vec<bool>,
    stack: Vec<u32>,
    /// Explicit call stack of (node, next out-edge position): no recursion, since
    /// dependency chains in real histories are hundreds of thousands deep.
    calls: Vec<(u32, u32)>,
    counter: u32,
}

impl Tarjan<'_> {
    fn visit(&mut self, v: u32) {
        self.index[v as usize] = self.counter;
        self.low[v as usize] = self.counter;
        self.counter += 1;
        self.stack.push(v);
        self.on_stack[v as usize] = true;
        self.calls.push((v, self.g.offsets[v as usize]));
    }

    /// Depth-first search from an unvisited root; stops at the first non-trivial SCC.
    fn search(&mut self, root: u32) -> Option<Vec<u32>> {
        self.visit(root);
        while let Some(&(v, pos)) = self.calls.last() {
            if pos < self.g.offsets[v as usize + 1] {
                self.calls.last_mut().expect("non-empty").1 += 1;
                let w = self.g.out[pos as usize].0;
                if self.index[w as usize] == UNVISITED {
                    self.visit(w);
                } else if self.on_stack[w as usize] {
                    self.low[v as usize] = self.low[v as usize].min(self.index[w as usize]);
                }
                continue;
            }
            self.calls.pop();
            if let Some(&(parent, _)) = self.calls.last() {
                self.low[parent as usize] = self.low[parent as usize].min(self.low[v as usize]);
            }
            if self.low[v as usize] == self.index[v as usize] {
                let mut comp = Vec::new();
                loop {
                    let w = self.stack.pop().expect("v is on the stack");
                    self.on_stack[w as usize] = false;
                    comp.push(w);
                    if w == v {
                        break;
                    }
                }
                if comp.len() > 1 {
                    return Some(comp);
                }
            }
        }
        None
    }
}

/// BFS from `s` within the component; the first edge found back into `s` closes a
/// shortest cycle through `s`.
fn shortest_cycle_through(g: &Csr, in_comp: &[bool], edges: &[Edge], s: u32) -> Option<Vec<u32>> {
    const NONE: u32 = u32::MAX;
    let mut parent_edge = vec![NONE; g.n()];
    let mut queue = VecDeque::from([s]);
    while let Some(u) = queue.pop_front() {
        for &(v, e) in g.out(u) {
            if !in_comp[v as usize] {
                continue;
            }
            if v == s {
                let mut path = vec![e];
                let mut x = u;
                while x != s {
                    let pe = parent_edge[x as usize];
                    path.push(pe);
                    x = edges[pe as usize].from;
                }
                path.reverse();
                return Some(path);
            }
            if parent_edge[v as usize] == NONE {
                parent_edge[v as usize] = e;
                queue.push_back(v);
            }
        }
    }
    None
}

/// Sparse real-time order: `a -> b` reachable via these edges iff `a.end < b.begin`.
///
/// `intervals` holds `(node, begin, end)`. Sorting by end time gives auxiliary nodes
/// `first_aux + i` for the i-th end event, chained `aux_i -> aux_{i+1}`; each txn points
/// at its own end event, and each txn is entered from the last end event strictly
/// before its begin. That is 3 edges per txn regardless of concurrency, and exact: a
/// path from `a` to `b` exists iff `a`'s end event is at or before the last end event
/// preceding `b.begin`. Returns the edges and the number of auxiliary nodes.
pub(crate) fn realtime_edges(first_aux: u32, intervals: &[(u32, u64, u64)]) -> (Vec<Edge>, usize) {
    let mut by_end: Vec<(u64, u32)> = intervals.iter().map(|&(v, _, end)| (end, v)).collect();
    by_end.sort_unstable();
    let rt = |from: u32, to: u32| Edge {
        from,
        to,
        kind: EdgeKind::Rt,
        key: NO_KEY,
    };
    let mut edges = Vec::with_capacity(3 * by_end.len());
    for (i, &(_, v)) in by_end.iter().enumerate() {
        let aux = first_aux + i as u32;
        edges.push(rt(v, aux));
        if i + 1 < by_end.len() {
            edges.push(rt(aux, aux + 1));
        }
    }
    for &(v, begin, _) in intervals {
        let j = by_end.partition_point(|&(end, _)| end < begin);
        if j > 0 {
            edges.push(rt(first_aux + j as u32 - 1, v));
        }
    }
    (edges, by_end.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(from: u32, to: u32) -> Edge {
        Edge {
            from,
            to,
            kind: EdgeKind::Ww,
            key: 0,
        }
    }

    #[test]
    fn acyclic_graph_has_no_cycle() {
        let edges = [e(0, 1), e(1, 2), e(0, 2), e(2, 3)];
        assert!(find_cycle(4, 4, &edges, &[EdgeKind::Ww]).is_none());
    }

    #[test]
    fn finds_shortest_cycle() {
        // Long cycle 0->1->2->3->4->0 plus a short one 2->3->2.
        let edges = [e(0, 1), e(1, 2), e(2, 3), e(3, 4), e(4, 0), e(3, 2)];
        let cyc = find_cycle(5, 5, &edges, &[EdgeKind::Ww]).unwrap();
        assert_eq!(cyc.len(), 2);
        let nodes: Vec<u32> = cyc.iter().map(|&i| edges[i as usize].from).collect();
        assert!(nodes.contains(&2) && nodes.contains(&3));
    }

    #[test]
    fn edge_kind_filter_is_respected() {
        let mut back = e(1, 0);
        back.kind = EdgeKind::Rw;
        let edges = [e(0, 1), back];
        assert!(find_cycle(2, 2, &edges, &[EdgeKind::Ww]).is_none());
        assert!(find_cycle(2, 2, &edges, &[EdgeKind::Ww, EdgeKind::Rw]).is_some());
    }

    #[test]
    fn deep_chain_does_not_overflow() {
        let n = 500_000u32;
        let mut edges: Vec<Edge> = (0..n - 1).map(|i| e(i, i + 1)).collect();
        assert!(find_cycle(n as usize, n as usize, &edges, &[EdgeKind::Ww]).is_none());
        edges.push(e(n - 1, 0));
        let cyc = find_cycle(n as usize, n as usize, &edges, &[EdgeKind::Ww]).unwrap();
        assert_eq!(cyc.len(), n as usize);
    }

    /// Reachability through the sparse construction equals the O(n²) definition.
    #[test]
    fn realtime_edges_match_brute_force() {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut rand = |m: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % m
        };
        for _ in 0..50 {
            let n = 1 + rand(30) as u32;
            let intervals: Vec<(u32, u64, u64)> = (0..n)
                .map(|v| {
                    let b = rand(100);
                    (v, b, b + rand(20))
                })
                .collect();
            let (edges, n_aux) = realtime_edges(n, &intervals);
            let total = n as usize + n_aux;
            let csr = Csr::build(total, &edges, &[EdgeKind::Rt]);
            for &(a, _, a_end) in &intervals {
                let mut seen = vec![false; total];
                let mut stack = vec![a];
                while let Some(u) = stack.pop() {
                    for &(v, _) in csr.out(u) {
                        if !seen[v as usize] {
                            seen[v as usize] = true;
                            stack.push(v);
                        }
                    }
                }
                for &(b, b_begin, _) in &intervals {
                    assert_eq!(
                        seen[b as usize],
                        a_end < b_begin,
                        "{a} -> {b} in {intervals:?}"
                    );
                }
            }
        }
    }
}
