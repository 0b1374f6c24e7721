//! CLUSTER and ASKING: a sharded node's answers about the slot map ([`crate::shards`]); a
//! server that is not sharded answers as Redis with cluster support disabled.

use verso_cluster::{key_slot, Slot, SLOTS};

use super::{engine_error, Session};
use crate::keyspace::parse_i64;
use crate::resp::Reply;
use crate::stored::Stored;

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
            (b"INFO", 2) => Reply::Verbatim(map.info_text()),
            (b"MYID", 2) => Reply::Bulk(map.my_id().into_bytes()),
            (b"KEYSLOT", 3) => Reply::Integer(key_slot(&args[2]).into()),
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
    pub(super) fn asking(&self) -> Reply {
        if self.shared.shards.is_none() {
            return Reply::Error(DISABLED.into());
        }
        Reply::ok()
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
        Ok(keys)
    }
}

fn slot_arg(arg: &[u8]) -> Option<Slot> {
    parse_i64(arg)
        .filter(|&n| (0..SLOTS as i64).contains(&n))
        .map(|n| n as Slot)
}
