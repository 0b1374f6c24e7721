//! Sharding by Redis Cluster's hash slots over a fixed slot map (`--shards FILE --group N`):
//! each replica group owns the slots the file gives it, and a node answers a request for
//! another group's slots with `MOVED slot host:port`, as a Redis Cluster node does, so
//! `redis-cli -c` and cluster clients (redis-py's `RedisCluster`) find their way.
//!
//! The file gives the map at start; online slot moves (`crate::moves`) change it while the
//! servers run: a group's own log is the authority over its slots (the mover sets this
//! node's table as its group sends and receives them), and other groups' changes are
//! learned from their primaries (`crate::shard_prober`).
//!
//! Which keys a request names comes from the command table's key specifications
//! (`crate::commands`), as clients compute it. A request whose keys live in more than one
//! group is refused with `CROSSSLOT`; keys in several slots of *one* group are fine, since
//! the group runs the whole request as one transaction (Redis refuses any two slots).

use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicU16, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use serde::Deserialize;
use verso_cluster::lazen::Answer;
use verso_cluster::{key_slot, Slot, SlotSet, SLOTS};

use crate::commands;
use crate::resp::Reply;

/// The shards file: every group with its slots and its nodes' client addresses.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ShardsFile {
    group: Vec<GroupEntry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct GroupEntry {
    id: u16,
    /// `A-B,C,...`
    slots: String,
    /// Client addresses (`ip:port`, or `host:port` resolved at start), in replica-id order.
    nodes: Vec<String>,
}

/// One replica group in the map.
#[derive(Clone, Debug)]
pub struct ShardGroup {
    pub id: u16,
    /// Its slots in the file: where the cluster started (moves change the map since).
    pub initial_slots: SlotSet,
    pub nodes: Vec<SocketAddr>,
}

/// The slot map and this node's place in it.
#[derive(Clone, Debug)]
pub struct ShardMap {
    pub groups: Vec<ShardGroup>,
    /// For each slot, the index in `groups` of its owner as this node knows it (shared by
    /// clones: the mover and the prober keep it current).
    owner: Arc<Vec<AtomicU16>>,
    /// Bumped at every change of `owner`.
    epoch: Arc<AtomicU64>,
    /// This node's group (index in `groups`) and its index among the group's nodes.
    me: usize,
    my_node: usize,
    /// For each group, the index among its nodes of the one believed to be its primary
    /// (0 until learned; `server.rs`'s prober keeps it current). MOVED and CLUSTER name
    /// it, so clients go straight to the primary rather than through a backup's relay.
    leaders: Arc<Vec<AtomicUsize>>,
}

/// Where a request goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Route {
    /// This group owns every key the request names (or it names none).
    Local,
    /// Another group owns them: `MOVED`.
    Moved { slot: Slot, to: SocketAddr },
    /// They span groups.
    CrossSlot,
    /// A slot is frozen for a move: `TRYAGAIN`.
    TryAgain,
    /// A slot's move has sealed at its target, which serves it: `ASK`.
    Ask { slot: Slot, to: SocketAddr },
}

/// A node's id in cluster answers: 40 hex digits, stable for (group, replica).
pub fn node_id(group: u16, node: usize) -> String {
    format!("{:08x}{:032x}", 0x7665_7273u32 ^ u32::from(group), node)
}

impl ShardMap {
    /// Reads the shards file; `group` is this node's group and `me` its client address.
    pub fn load(path: &Path, group: u16, me: SocketAddr) -> Result<ShardMap, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read shards file {}: {e}", path.display()))?;
        ShardMap::parse(&text, group, me).map_err(|e| format!("{}: {e}", path.display()))
    }

    pub fn parse(text: &str, group: u16, me: SocketAddr) -> Result<ShardMap, String> {
        let file: ShardsFile = toml::from_str(text).map_err(|e| e.message().trim().to_string())?;
        let mut groups = Vec::new();
        let mut owner: Vec<Option<u16>> = vec![None; SLOTS];
        for (i, g) in file.group.iter().enumerate() {
            if file.group[..i].iter().any(|o| o.id == g.id) {
                return Err(format!("group {} is listed twice", g.id));
            }
            let slots = SlotSet::parse(&g.slots).map_err(|e| format!("group {}: {e}", g.id))?;
            for s in slots.iter() {
                if let Some(o) = owner[usize::from(s)] {
                    return Err(format!(
                        "slot {s} belongs to group {} and group {}",
                        file.group[usize::from(o)].id,
                        g.id
                    ));
                }
                owner[usize::from(s)] = Some(i as u16);
            }
            if g.nodes.is_empty() {
                return Err(format!("group {} lists no nodes", g.id));
            }
            let nodes = g
                .nodes
                .iter()
                .map(|n| {
                    verso_replication::config::resolve(n)
                        .map_err(|e| format!("group {}: {e}", g.id))
                })
                .collect::<Result<Vec<_>, _>>()?;
            groups.push(ShardGroup {
                id: g.id,
                initial_slots: slots,
                nodes,
            });
        }
        let unowned = owner.iter().filter(|o| o.is_none()).count();
        if unowned > 0 {
            let first = owner.iter().position(Option::is_none).unwrap_or(0);
            return Err(format!(
                "{unowned} slots belong to no group (the first is {first}); all 16384 must be assigned"
            ));
        }
        let Some(me_group) = groups.iter().position(|g| g.id == group) else {
            return Err(format!("group {group} is not in the file"));
        };
        let Some(my_node) = groups[me_group].nodes.iter().position(|&n| n == me) else {
            return Err(format!(
                "this server's address {me} is not among group {group}'s nodes"
            ));
        };
        let leaders = Arc::new((0..groups.len()).map(|_| AtomicUsize::new(0)).collect());
        Ok(ShardMap {
            leaders,
            groups,
            owner: Arc::new(
                owner
                    .into_iter()
                    .map(|o| AtomicU16::new(o.unwrap_or(0)))
                    .collect(),
            ),
            epoch: Arc::new(AtomicU64::new(1)),
            me: me_group,
            my_node,
        })
    }

    /// This node's group.
    pub fn my_group(&self) -> &ShardGroup {
        &self.groups[self.me]
    }

    pub fn my_id(&self) -> String {
        node_id(self.my_group().id, self.my_node)
    }

    /// Group `gi`'s node believed to be its primary.
    pub fn leader(&self, gi: usize) -> SocketAddr {
        let g = &self.groups[gi];
        g.nodes[self.leader_index(gi)]
    }

    fn leader_index(&self, gi: usize) -> usize {
        self.leaders[gi].load(Ordering::Relaxed) % self.groups[gi].nodes.len()
    }

    /// Records that group `gi`'s primary answers at `addr` (ignored unless it is one of the
    /// group's nodes). Returns whether it changed.
    pub fn set_leader(&self, gi: usize, addr: SocketAddr) -> bool {
        match self.groups[gi].nodes.iter().position(|&n| n == addr) {
            Some(i) => self.leaders[gi].swap(i, Ordering::Relaxed) != i,
            None => false,
        }
    }

    /// The index of this node's group in `groups`.
    pub fn my_group_index(&self) -> usize {
        self.me
    }

    /// A group's nodes with the believed primary first (the order CLUSTER answers use).
    fn nodes_leader_first(&self, gi: usize) -> Vec<(usize, SocketAddr)> {
        let g = &self.groups[gi];
        let l = self.leader_index(gi);
        std::iter::once((l, g.nodes[l]))
            .chain(g.nodes.iter().copied().enumerate().filter(|&(i, _)| i != l))
            .collect()
    }

    /// The index in `groups` of the group that owns `slot`, as this node knows it.
    pub fn owner_index(&self, slot: Slot) -> usize {
        usize::from(self.owner[usize::from(slot)].load(Ordering::Relaxed))
    }

    /// The group that owns `slot`.
    pub fn owner(&self, slot: Slot) -> &ShardGroup {
        &self.groups[self.owner_index(slot)]
    }

    /// The index in `groups` of group `id`.
    pub fn group_index(&self, id: u16) -> Option<usize> {
        self.groups.iter().position(|g| g.id == id)
    }

    /// The slots group `gi` owns, as this node knows it.
    pub fn slots_of(&self, gi: usize) -> SlotSet {
        let mut s = SlotSet::default();
        for (slot, o) in self.owner.iter().enumerate() {
            if usize::from(o.load(Ordering::Relaxed)) == gi {
                s.insert(slot as Slot);
            }
        }
        s
    }

    /// Records that group `gi` owns `slots`. Returns whether anything changed.
    pub fn set_owner(&self, slots: &SlotSet, gi: usize) -> bool {
        let mut changed = false;
        for slot in slots.iter() {
            let o = &self.owner[usize::from(slot)];
            changed |= o.swap(gi as u16, Ordering::Relaxed) != gi as u16;
        }
        if changed {
            self.epoch.fetch_add(1, Ordering::Relaxed);
        }
        changed
    }

    /// Counts the changes of the map this node has seen (CLUSTER INFO's epochs).
    pub fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::Relaxed)
    }

    /// Where `args` (a whole request) goes. Requests that name no keys, or whose keys cannot
    /// be found (wrong arguments: the command itself reports that), stay here.
    pub fn route(&self, args: &[Vec<u8>]) -> Route {
        self.route_with(args, |_| None)
    }

    /// As [`ShardMap::route`], where `moving` overrides the map for the slots in a move this
    /// group takes part in (its own log decides those: `crate::moves`).
    pub fn route_with(&self, args: &[Vec<u8>], moving: impl Fn(Slot) -> Option<Answer>) -> Route {
        let Some(spec) = commands::table().lookup(args) else {
            return Route::Local;
        };
        if spec.key_specs.is_empty() {
            return Route::Local;
        }
        let Ok(keys) = spec.keys(args) else {
            return Route::Local;
        };
        // Each key's group (`usize::MAX`: served here), and the first slot of any redirect.
        let mut first: Option<(Slot, usize)> = None;
        let mut retry = false;
        let mut ask: Option<(Slot, usize)> = None;
        for k in keys {
            let slot = key_slot(&args[k.index]);
            let group = match moving(slot) {
                None => self.owner_index(slot),
                Some(Answer::Serve) => self.me,
                Some(Answer::TryAgain) => {
                    retry = true;
                    self.me
                }
                Some(Answer::Ask(g)) => {
                    let gi = self.group_index(g).unwrap_or(self.me);
                    ask.get_or_insert((slot, gi));
                    gi
                }
                Some(Answer::Moved(g)) => self.group_index(g).unwrap_or(self.me),
            };
            match first {
                None => first = Some((slot, group)),
                Some((_, o)) if o != group => return Route::CrossSlot,
                Some(_) => {}
            }
        }
        if retry {
            return Route::TryAgain;
        }
        if let Some((slot, gi)) = ask {
            return Route::Ask {
                slot,
                to: self.leader(gi),
            };
        }
        match first {
            Some((slot, owner)) if owner != self.me => Route::Moved {
                slot,
                to: self.leader(owner),
            },
            _ => Route::Local,
        }
    }

    /// Whether a request names keys (by its command's key specifications).
    pub fn names_keys(args: &[Vec<u8>]) -> bool {
        commands::table()
            .lookup(args)
            .is_some_and(|spec| !spec.key_specs.is_empty())
    }

    /// The keys a write command names (all of them: over-approximating costs a resent key
    /// at most); none for other commands.
    pub fn written_keys(args: &[Vec<u8>]) -> Vec<&[u8]> {
        let Some(spec) = commands::table().lookup(args) else {
            return Vec::new();
        };
        if !spec.flags.iter().any(|f| f == "write") {
            return Vec::new();
        }
        spec.keys(args)
            .map(|ks| ks.iter().map(|k| args[k.index].as_slice()).collect())
            .unwrap_or_default()
    }

    /// The error reply for a request that is not this group's, if it is not.
    pub fn redirect(&self, args: &[Vec<u8>]) -> Option<Reply> {
        Self::redirect_reply(self.route(args))
    }

    /// The reply a route calls for, if it is not [`Route::Local`].
    pub fn redirect_reply(route: Route) -> Option<Reply> {
        match route {
            Route::Local => None,
            Route::Moved { slot, to } => Some(Reply::Error(format!("MOVED {slot} {to}"))),
            Route::Ask { slot, to } => Some(Reply::Error(format!("ASK {slot} {to}"))),
            Route::TryAgain => Some(Reply::Error(
                "TRYAGAIN A slot of this request is moving between groups; try again shortly"
                    .into(),
            )),
            Route::CrossSlot => Some(Reply::Error(
                "CROSSSLOT Keys in request don't hash to slots of one group".into(),
            )),
        }
    }

    /// CLUSTER SLOTS: each run of slots with its group's nodes, the believed primary first
    /// (named master; any node of a group serves, a backup by relaying to its primary).
    pub fn slots_reply(&self) -> Reply {
        let mut runs: Vec<(Slot, Slot, usize)> = Vec::new();
        for gi in 0..self.groups.len() {
            runs.extend(self.slots_of(gi).ranges().map(|(a, b)| (a, b, gi)));
        }
        runs.sort_unstable();
        Reply::Array(
            runs.into_iter()
                .map(|(a, b, gi)| {
                    let g = &self.groups[gi];
                    let mut entry = vec![Reply::Integer(a.into()), Reply::Integer(b.into())];
                    for (i, n) in self.nodes_leader_first(gi) {
                        entry.push(Reply::Array(vec![
                            Reply::Bulk(n.ip().to_string().into_bytes()),
                            Reply::Integer(n.port().into()),
                            Reply::Bulk(node_id(g.id, i).into_bytes()),
                            Reply::Map(Vec::new()),
                        ]));
                    }
                    Reply::Array(entry)
                })
                .collect(),
        )
    }

    /// CLUSTER SHARDS (Redis 7's form).
    pub fn shards_reply(&self) -> Reply {
        let s = |t: &str| Reply::Bulk(t.as_bytes().to_vec());
        Reply::Array(
            self.groups
                .iter()
                .enumerate()
                .map(|(gi, g)| {
                    let leader = self.leader_index(gi);
                    let slots = self
                        .slots_of(gi)
                        .ranges()
                        .flat_map(|(a, b)| [Reply::Integer(a.into()), Reply::Integer(b.into())])
                        .collect();
                    let nodes = self
                        .nodes_leader_first(gi)
                        .into_iter()
                        .map(|(i, n)| {
                            Reply::Map(vec![
                                (s("id"), s(&node_id(g.id, i))),
                                (s("port"), Reply::Integer(n.port().into())),
                                (s("ip"), s(&n.ip().to_string())),
                                (s("endpoint"), s(&n.ip().to_string())),
                                (s("role"), s(if i == leader { "master" } else { "replica" })),
                                (s("replication-offset"), Reply::Integer(0)),
                                (s("health"), s("online")),
                            ])
                        })
                        .collect();
                    Reply::Map(vec![
                        (s("slots"), Reply::Array(slots)),
                        (s("nodes"), Reply::Array(nodes)),
                    ])
                })
                .collect(),
        )
    }

    /// CLUSTER NODES: one line per node, Redis's format.
    pub fn nodes_text(&self) -> String {
        let mut out = String::new();
        for (gi, g) in self.groups.iter().enumerate() {
            let ranges: Vec<String> = self
                .slots_of(gi)
                .ranges()
                .map(|(a, b)| {
                    if a == b {
                        a.to_string()
                    } else {
                        format!("{a}-{b}")
                    }
                })
                .collect();
            let leader = self.leader_index(gi);
            for (i, n) in self.nodes_leader_first(gi) {
                let myself = gi == self.me && i == self.my_node;
                let flags = match (myself, i == leader) {
                    (true, true) => "myself,master",
                    (true, false) => "myself,slave",
                    (false, true) => "master",
                    (false, false) => "slave",
                };
                let master = if i == leader {
                    "-".to_string()
                } else {
                    node_id(g.id, leader)
                };
                out += &format!(
                    "{} {}:{}@{} {flags} {master} 0 0 1 connected",
                    node_id(g.id, i),
                    n.ip(),
                    n.port(),
                    n.port()
                );
                if i == leader {
                    for r in &ranges {
                        out += " ";
                        out += r;
                    }
                }
                out += "\n";
            }
        }
        out
    }

    /// CLUSTER INFO's text.
    pub fn info_text(&self) -> String {
        let nodes: usize = self.groups.iter().map(|g| g.nodes.len()).sum();
        format!(
            "cluster_state:ok\r\ncluster_slots_assigned:{SLOTS}\r\ncluster_slots_ok:{SLOTS}\r\n\
             cluster_slots_pfail:0\r\ncluster_slots_fail:0\r\ncluster_known_nodes:{nodes}\r\n\
             cluster_size:{}\r\ncluster_current_epoch:{epoch}\r\ncluster_my_epoch:{epoch}\r\n\
             cluster_stats_messages_sent:0\r\ncluster_stats_messages_received:0\r\n\
             total_cluster_links_buffer_limit_exceeded:0\r\n",
            self.groups.len(),
            epoch = self.epoch()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = r#"
[[group]]
id = 0
slots = "0-8191"
nodes = ["127.0.0.1:7000", "127.0.0.1:7001"]

[[group]]
id = 1
slots = "8192-16383"
nodes = ["127.0.0.1:7100"]
"#;

    fn map() -> ShardMap {
        ShardMap::parse(FILE, 0, "127.0.0.1:7001".parse().unwrap()).unwrap()
    }

    fn req(words: &[&str]) -> Vec<Vec<u8>> {
        words.iter().map(|w| w.as_bytes().to_vec()).collect()
    }

    #[test]
    fn requests_go_to_the_group_of_their_keys() {
        let m = map();
        assert_eq!(key_slot(b"foo"), 12182);
        assert_eq!(key_slot(b"bar"), 5061);
        assert_eq!(
            m.route(&req(&["GET", "foo"])),
            Route::Moved {
                slot: 12182,
                to: "127.0.0.1:7100".parse().unwrap()
            }
        );
        assert_eq!(m.route(&req(&["SET", "bar", "1"])), Route::Local);
        // Two slots of one group: one transaction here, no CROSSSLOT.
        assert_eq!(key_slot(b"a"), 15495);
        assert_eq!(key_slot(b"{foo}x"), 12182);
        assert_eq!(m.route(&req(&["MGET", "bar", "{bar}x"])), Route::Local);
        assert_eq!(
            m.route(&req(&["MSET", "bar", "1", "foo", "2"])),
            Route::CrossSlot
        );
        assert_eq!(
            m.route(&req(&["ZUNIONSTORE", "bar", "2", "{bar}1", "foo"])),
            Route::CrossSlot
        );
        // No keys, or arguments the command will refuse: answered here.
        assert_eq!(m.route(&req(&["PING"])), Route::Local);
        assert_eq!(m.route(&req(&["DBSIZE"])), Route::Local);
        assert_eq!(m.route(&req(&["ZUNION", "x", "foo"])), Route::Local);
        assert_eq!(m.route(&req(&["NOSUCH", "foo"])), Route::Local);
        assert_eq!(
            m.redirect(&req(&["GET", "foo"])),
            Some(Reply::Error("MOVED 12182 127.0.0.1:7100".into()))
        );
    }

    #[test]
    fn a_bad_file_says_what_is_wrong() {
        let me: SocketAddr = "127.0.0.1:7001".parse().unwrap();
        let err = |t: &str| ShardMap::parse(t, 0, me).unwrap_err();
        assert!(
            err("[[group]]\nid = 0\nslots = \"0-100\"\nnodes = [\"127.0.0.1:7001\"]")
                .contains("belong to no group")
        );
        assert!(err(&FILE.replace("8192-16383", "8000-16383")).contains("slot 8000 belongs"));
        assert!(err(&FILE.replace("\"127.0.0.1:7100\"", "\"nohost\"")).contains("ip:port"));
        // Host names resolve when the file is read.
        let named = ShardMap::parse(&FILE.replace("127.0.0.1:7100", "localhost:7100"), 0, me);
        assert_eq!(named.unwrap().leader(1).port(), 7100);
        assert!(err(&FILE.replace("id = 1", "id = 0")).contains("twice"));
        assert!(ShardMap::parse(FILE, 5, me)
            .unwrap_err()
            .contains("group 5"));
        assert!(ShardMap::parse(FILE, 1, me)
            .unwrap_err()
            .contains("not among"));
        assert!(err("nonsense = 1").contains("unknown field"));
    }

    #[test]
    fn cluster_answers_describe_the_map() {
        let m = map();
        assert_eq!(m.my_id().len(), 40);
        assert_ne!(node_id(0, 0), node_id(1, 0));
        let nodes = m.nodes_text();
        assert_eq!(nodes.lines().count(), 3);
        assert!(nodes.contains("myself,slave"));
        assert!(nodes.lines().next().unwrap().ends_with("connected 0-8191"));
        let Reply::Array(runs) = m.slots_reply() else {
            panic!()
        };
        assert_eq!(runs.len(), 2);
        assert!(m.info_text().contains("cluster_size:2"));
    }

    #[test]
    fn answers_name_the_learned_primary() {
        let m = map();
        assert_eq!(m.leader(0), "127.0.0.1:7000".parse().unwrap());
        assert!(
            !m.set_leader(0, "127.0.0.1:9999".parse().unwrap()),
            "not a node"
        );
        assert!(m.set_leader(0, "127.0.0.1:7001".parse().unwrap()));
        assert!(
            !m.set_leader(0, "127.0.0.1:7001".parse().unwrap()),
            "no change"
        );
        let nodes = m.nodes_text();
        let first = nodes.lines().next().unwrap();
        assert!(
            first.contains("127.0.0.1:7001@7001 myself,master - "),
            "{first}"
        );
        assert!(first.ends_with("connected 0-8191"), "{first}");
        assert!(nodes.lines().nth(1).unwrap().contains(" slave "));
        let Reply::Array(runs) = m.slots_reply() else {
            panic!()
        };
        let Reply::Array(run) = &runs[0] else {
            panic!()
        };
        let Reply::Array(master) = &run[2] else {
            panic!()
        };
        assert_eq!(master[1], Reply::Integer(7001));
        // A clone (a session's view) sees what the prober learned.
        let seen_by_clone = m.clone();
        m.set_leader(0, "127.0.0.1:7000".parse().unwrap());
        assert_eq!(seen_by_clone.leader(0), "127.0.0.1:7000".parse().unwrap());
    }
}
