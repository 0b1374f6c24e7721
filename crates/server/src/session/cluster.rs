//! CLUSTER and ASKING: a sharded node's answers about the slot map ([`crate::shards`]); a
//! server that is not sharded answers as Redis with cluster support disabled.

use verso_cluster::lazen::{Message, Node};
use verso_cluster::{key_slot, Slot, SlotSet, SLOTS};

use super::{engine_error, Session};
use crate::keyspace::parse_i64;
use crate::moves::{Request, View};
use crate::resp::Reply;
use crate::shards::ShardMap;
use crate::stored::Stored;

/// How long CLUSTER MOVESLOTS waits for the configuration machine to take the move.
const START_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

const DISABLED: &str = "ERR This instance has cluster support disabled";

impl Session<'_> {
    /// `CLUSTER subcommand [args]`.
    pub(super) fn cluster(&mut self, args: &[Vec<u8>]) -> Reply {
        let Some(map) = &self.shared.shards else {
            return Reply::Error(DISABLED.into());
        };
        let sub = args[1].to_ascii_uppercase();
        let wrong_args = || {
            Reply::Error(format!(
                "ERR wrong number of arguments for 'cluster|{}' command",
                String::from_utf8_lossy(&args[1]).to_ascii_lowercase()
            ))
        };
        match (sub.as_slice(), args.len()) {
            (b"SLOTS", 2) => map.slots_reply(),
            (b"SHARDS", 2) => map.shards_reply(),
            (b"NODES", 2) => Reply::Verbatim(map.nodes_text()),
            (b"INFO", 2) => {
                let mut text = map.info_text();
                if let Some(moves) = &self.shared.moves {
                    text += &moves.info_lines();
                }
                Reply::Verbatim(text)
            }
            (b"MYID", 2) => Reply::Bulk(map.my_id().into_bytes()),
            (b"KEYSLOT", 3) => Reply::Integer(key_slot(&args[2]).into()),
            (b"MOVESLOTS", 4) => self.move_slots(&args[2], &args[3]),
            (b"MOVES", 2) if self.backup_of().is_some() => Reply::Error(format!(
                "CONFIG this replica is a backup; moves run at its group's primary: {}",
                self.backup_of().unwrap_or_default()
            )),
            (b"MOVES", 2) => match self.shared.moves.as_ref().map(|m| m.status()) {
                Some(Some(lines)) => Reply::Array(
                    lines
                        .into_iter()
                        .map(|l| Reply::Bulk(l.into_bytes()))
                        .collect(),
                ),
                Some(None) => Reply::Error("LOADING the slot mover is reading its logs".into()),
                None => Reply::Array(Vec::new()),
            },
            // The map this node knows, for other nodes' probers: `epoch` then a line per
            // group, `id first-last,...`.
            (b"VERSO-MAP", 2) => {
                let mut text = format!("{}\n", map.epoch());
                for gi in 0..map.groups.len() {
                    let ranges: Vec<String> = map
                        .slots_of(gi)
                        .ranges()
                        .map(|(a, b)| format!("{a}-{b}"))
                        .collect();
                    text += &format!("{} {}\n", map.groups[gi].id, ranges.join(","));
                }
                Reply::Bulk(text.into_bytes())
            }
            (b"COUNTKEYSINSLOT", 3) => match slot_arg(&args[2]) {
                Some(slot) => match self.keys_in_slot(slot, usize::MAX) {
                    Ok(keys) => Reply::Integer(keys.len() as i64),
                    Err(r) => r,
                },
                None => Reply::err("Invalid slot"),
            },
            (b"GETKEYSINSLOT", 4) => {
                let count = parse_i64(&args[3]).filter(|&n| n >= 0);
                match (slot_arg(&args[2]), count) {
                    (Some(slot), Some(n)) => match self.keys_in_slot(slot, n as usize) {
                        Ok(keys) => Reply::Array(keys.into_iter().map(Reply::Bulk).collect()),
                        Err(r) => r,
                    },
                    _ => Reply::err("Invalid slot or number of keys"),
                }
            }
            (
                b"SLOTS" | b"SHARDS" | b"NODES" | b"INFO" | b"MYID" | b"KEYSLOT"
                | b"COUNTKEYSINSLOT" | b"GETKEYSINSLOT",
                _,
            ) => wrong_args(),
            _ => Reply::Error(format!(
                "ERR unknown subcommand '{}'. Try CLUSTER HELP.",
                String::from_utf8_lossy(&args[1])
            )),
        }
    }

    /// `ASKING`: accepted on a sharded node (no slot is ever importing while the map is
    /// fixed, so it changes nothing yet).
    pub(super) fn asking(&mut self) -> Reply {
        if self.shared.shards.is_none() {
            return Reply::Error(DISABLED.into());
        }
        self.asking = true;
        Reply::ok()
    }

    /// While this node's group moves slots (`view`): records the keys a write names in
    /// slots whose snapshot is streaming, and at EXEC routes the queued commands again (a
    /// slot may have frozen or moved since they were queued; the block is then discarded).
    /// Commands that touch every key (FLUSHALL, FLUSHDB, SWAPDB) wait until moves end.
    pub(super) fn moving_slots_check(
        &mut self,
        name: &[u8],
        args: &[Vec<u8>],
        view: &View,
        asking: bool,
    ) -> Option<Reply> {
        let shared = self.shared;
        let (shards, moves) = (shared.shards.as_ref()?, shared.moves.as_ref()?);
        if matches!(name, b"FLUSHALL" | b"FLUSHDB" | b"SWAPDB") {
            return Some(Reply::Error(
                "TRYAGAIN this group is moving slots; commands on the whole keyspace wait until it is done"
                    .into(),
            ));
        }
        if name == b"EXEC" {
            let queue = self.queue.as_ref()?;
            for q in queue {
                let route = shards.route_with(q, |slot| view.answer(slot, asking));
                if let Some(refused) = ShardMap::redirect_reply(route) {
                    let _ = self.discard();
                    return Some(refused);
                }
            }
            for q in queue {
                let keys = ShardMap::written_keys(q);
                if keys.iter().any(|k| view.tracks(key_slot(k))) {
                    moves.track(keys.into_iter());
                }
            }
            return None;
        }
        if self.queue.is_some() {
            return None; // queued, not run: EXEC looks again
        }
        let keys = ShardMap::written_keys(args);
        if keys.iter().any(|k| view.tracks(key_slot(k))) {
            moves.track(keys.into_iter());
        }
        None
    }

    /// `VERSO.LAZEN from message`: a slot-move message from another group's mover.
    pub(super) fn lazen_message(&self, args: &[Vec<u8>]) -> Reply {
        let Some(moves) = &self.shared.moves else {
            return Reply::Error(DISABLED.into());
        };
        if self.backup_of().is_some() {
            // The sender's map is behind: it learns the new primary and sends again.
            return Reply::Error("TRYAGAIN this replica is not its group's primary".into());
        }
        match (Node::decode(&args[1]), Message::decode(&args[2])) {
            (Ok(from), Ok(msg)) => {
                moves.post(Request::Message(from, msg));
                Reply::ok()
            }
            (Err(e), _) | (_, Err(e)) => Reply::err(e.to_string()),
        }
    }

    /// `CLUSTER MOVESLOTS slots group`: starts moving `slots` (`A-B,C,...`) to `group`; on
    /// any node but the configuration group's, an error naming that node.
    fn move_slots(&self, slots: &[u8], group: &[u8]) -> Reply {
        let (Some(map), Some(moves)) = (&self.shared.shards, &self.shared.moves) else {
            return Reply::Error(DISABLED.into());
        };
        let Ok(slots) = SlotSet::parse(&String::from_utf8_lossy(slots)) else {
            return Reply::err("invalid slots: give A-B,C,... within 0-16383");
        };
        if slots.is_empty() {
            return Reply::err("no slots to move");
        }
        let Some(to) = std::str::from_utf8(group).ok().and_then(|g| g.parse().ok()) else {
            return Reply::err("invalid group id");
        };
        let config = crate::moves::mover::config_group(map);
        if map.my_group_index() == config {
            if let Some(primary) = self.backup_of() {
                return Reply::Error(format!(
                    "CONFIG moves start at the configuration group's primary: {primary}"
                ));
            }
        } else {
            return Reply::Error(format!(
                "CONFIG moves start at the configuration group (group {}): {}",
                map.groups[config].id,
                map.leader(config)
            ));
        }
        let (tx, rx) = std::sync::mpsc::channel();
        moves.post(Request::Start {
            slots,
            to,
            reply: tx,
        });
        match rx.recv_timeout(START_TIMEOUT) {
            Ok(Ok(id)) => Reply::Integer(id as i64),
            Ok(Err(e)) => Reply::err(format!("cannot start the move: {e}")),
            Err(_) => Reply::err("the mover did not answer; is this node stopping?"),
        }
    }

    /// On a backup of a replicated group: its primary's client address, or what to say when
    /// none is elected. `None` on a primary or an unreplicated node.
    fn backup_of(&self) -> Option<String> {
        let r = self.shared.replication.as_ref()?;
        if r.is_primary() {
            return None;
        }
        Some(
            r.status()
                .primary_client_addr
                .unwrap_or_else(|| "none elected right now".into()),
        )
    }

    /// Up to `limit` keys of database 0 in `slot`, in key order. Verso keeps no index by
    /// slot: this walks every key of the database (O(keys), README "Sharding").
    fn keys_in_slot(&mut self, slot: Slot, limit: usize) -> Result<Vec<Vec<u8>>, Reply> {
        let txn = self.begin(true).map_err(|e| engine_error(&e))?;
        let s = self.shared.spaces().get(0).expect("database 0");
        let mut keys = Vec::new();
        let range = txn.range(s.data, ..).map_err(|e| engine_error(&e))?;
        for (k, v) in range {
            if keys.len() >= limit {
                break;
            }
            let live = Stored::decode(v).is_some_and(|v| !v.expired_at(s.now_ms));
            if live && key_slot(k) == slot {
                keys.push(k.to_vec());
            }
        }
        self.commit(txn).map_err(|e| engine_error(&e))?;
        Ok(keys)
    }
}

fn slot_arg(arg: &[u8]) -> Option<Slot> {
    parse_i64(arg)
        .filter(|&n| (0..SLOTS as i64).contains(&n))
        .map(|n| n as Slot)
}
