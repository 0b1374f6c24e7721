//! Learns which node of each replica group is its primary, for a sharded, replicated
//! cluster ([`crate::shards::ShardMap::set_leader`]): MOVED and CLUSTER then name primaries,
//! so clients reach them directly instead of through a backup's relay. Its own group's
//! primary comes from this node's replication state; another group's from `INFO
//! replication` (`vsr_primary`) asked of that group's nodes.
//!
//! It also learns the slot map as slots move: from the configuration group's primary
//! (`CLUSTER VERSO-MAP`), except for this group's own slots, which only its own log
//! decides (`crate::moves`). The only I/O is here: short blocking connections with
//! timeouts, from one background thread.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use verso_cluster::SlotSet;

use crate::session::Shared;

/// How often the primaries are looked up.
pub const PROBE_INTERVAL: Duration = Duration::from_millis(500);
/// Connect and read timeout of one question.
const PROBE_TIMEOUT: Duration = Duration::from_millis(300);
/// The largest INFO answer read.
const REPLY_MAX: usize = 1 << 16;

/// Runs until `stop`: every [`PROBE_INTERVAL`], refreshes each replicated group's primary.
pub fn run(shared: &Shared, stop: &AtomicBool) {
    let Some(map) = &shared.shards else { return };
    while !stop.load(Ordering::Relaxed) {
        if let Some(primary) = shared
            .replication
            .as_ref()
            .and_then(|r| r.status().primary_client_addr)
            .and_then(|a| a.parse().ok())
        {
            map.set_leader(map.my_group_index(), primary);
        }
        for gi in 0..map.groups.len() {
            if gi == map.my_group_index() || map.groups[gi].nodes.len() < 2 {
                continue;
            }
            // The believed primary first: usually it confirms itself in one question.
            let believed = map.leader(gi);
            let mut order = vec![believed];
            order.extend(map.groups[gi].nodes.iter().filter(|&&n| n != believed));
            for node in order {
                if stop.load(Ordering::Relaxed) {
                    return;
                }
                if let Some(p) = ask_primary(node, shared.password.as_deref()) {
                    map.set_leader(gi, p);
                    break;
                }
            }
        }
        learn_map(shared, map);
        std::thread::sleep(PROBE_INTERVAL);
    }
}

/// Asks the configuration group for the map, and takes what it says of other groups. A
/// backup, whose mover does not run, takes its own group's slots from it too (it serves
/// none of them; its map only says where to send clients).
fn learn_map(shared: &Shared, map: &crate::shards::ShardMap) {
    let config = crate::moves::mover::config_group(map);
    let backup = shared.replication.as_ref().is_some_and(|r| !r.is_primary());
    let owned = shared.moves.as_ref().and_then(|m| m.owned());
    let owned = match owned {
        Some(_) if config == map.my_group_index() => {
            return; // the mover keeps the configuration group's map
        }
        Some(owned) => owned,
        None if backup => SlotSet::default(),
        None => return, // the mover has not read this group's log yet
    };
    let request = b"*2\r\n$7\r\nCLUSTER\r\n$9\r\nVERSO-MAP\r\n";
    let Some(text) = ask(map.leader(config), shared.password.as_deref(), request) else {
        return;
    };
    let me = map.my_group_index();
    for line in text.lines().skip(1) {
        let Some((id, ranges)) = line.split_once(' ') else {
            continue;
        };
        let (Some(gi), Ok(slots)) = (
            id.parse().ok().and_then(|id| map.group_index(id)),
            SlotSet::parse(ranges),
        ) else {
            continue;
        };
        if gi == me && !backup {
            continue; // this group's log decides which slots are its own
        }
        let mut theirs = SlotSet::default();
        for s in slots.iter().filter(|&s| !owned.contains(s)) {
            theirs.insert(s);
        }
        map.set_owner(&theirs, gi);
    }
}

/// The primary `node` names in its `INFO replication`, if it answers and knows one.
fn ask_primary(node: SocketAddr, password: Option<&str>) -> Option<SocketAddr> {
    let text = ask(
        node,
        password,
        b"*2\r\n$4\r\nINFO\r\n$11\r\nreplication\r\n",
    )?;
    primary_in(&text)
}

/// Sends `request` (after AUTH) and reads its bulk string answer.
fn ask(node: SocketAddr, password: Option<&str>, command: &[u8]) -> Option<String> {
    let stream = TcpStream::connect_timeout(&node, PROBE_TIMEOUT).ok()?;
    stream.set_read_timeout(Some(PROBE_TIMEOUT)).ok()?;
    stream.set_write_timeout(Some(PROBE_TIMEOUT)).ok()?;
    let mut request = Vec::new();
    if let Some(p) = password {
        request
            .extend_from_slice(format!("*2\r\n$4\r\nAUTH\r\n${}\r\n{p}\r\n", p.len()).as_bytes());
    }
    request.extend_from_slice(command);
    (&stream).write_all(&request).ok()?;
    let mut reader = BufReader::new(&stream);
    let mut line = String::new();
    if password.is_some() {
        reader.read_line(&mut line).ok()?;
        if !line.starts_with('+') {
            return None;
        }
        line.clear();
    }
    reader.read_line(&mut line).ok()?;
    let len: usize = line.get(1..)?.trim_end().parse().ok()?;
    if !line.starts_with('$') || len > REPLY_MAX {
        return None;
    }
    let mut body = vec![0u8; len];
    reader.read_exact(&mut body).ok()?;
    Some(String::from_utf8_lossy(&body).into_owned())
}

/// The `vsr_primary` address in an INFO replication text.
fn primary_in(info: &str) -> Option<SocketAddr> {
    info.lines()
        .find_map(|l| l.strip_prefix("vsr_primary:"))
        .and_then(|a| a.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_primary_is_read_from_info() {
        let info = "# Replication\r\nrole:slave\r\nvsr_primary:127.0.0.1:7011\r\nvsr_view:3\r\n";
        assert_eq!(primary_in(info), "127.0.0.1:7011".parse().ok());
        assert_eq!(primary_in("vsr_primary:unknown\r\n"), None);
        assert_eq!(primary_in("role:master\r\n"), None);
    }
}
