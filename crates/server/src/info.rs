//! What the server reports about itself, free of I/O: INFO's sections and the Prometheus text
//! the metrics endpoint serves. Memory is whatever the network side last stored in
//! [`Stats::used_memory`] (it reads `/proc`, in [`crate::metrics`]; this module does not).

use std::fmt::Write as _;
use std::sync::atomic::Ordering;

use crate::session::{Shared, Stats};

/// INFO's sections in the order INFO prints them.
pub const SECTIONS: &[&str] = &[
    "server",
    "clients",
    "stats",
    "memory",
    "persistence",
    "replication",
    "cluster",
    "keyspace",
];

/// Every counter both INFO stats and the metrics endpoint report: (name, help, value).
fn counters(shared: &Shared) -> Vec<(&'static str, &'static str, u64)> {
    let s: &Stats = &shared.stats;
    let e = shared.db.stats();
    let load = |c: &std::sync::atomic::AtomicU64| c.load(Ordering::Relaxed);
    vec![
        (
            "total_connections_received",
            "Connections accepted.",
            load(&s.connections),
        ),
        (
            "total_commands_processed",
            "Commands executed.",
            load(&s.commands),
        ),
        ("commits", "Engine transactions committed.", e.commits),
        ("aborts", "Engine transactions aborted.", e.aborts),
        (
            "conflicts_read_by_younger",
            "Commits refused: a younger transaction had read a written key.",
            e.conflicts_read_by_younger,
        ),
        (
            "conflicts_written_by_younger",
            "Commits refused: a younger transaction had written a written key.",
            e.conflicts_written_by_younger,
        ),
        (
            "conflicts_write_write",
            "Commits refused: a newer write of a written key (first committer wins).",
            e.conflicts_write_write,
        ),
        (
            "conflicts_read_changed",
            "Commits refused by validation: a read predicate was written.",
            e.conflicts_read_changed,
        ),
        (
            "retries",
            "Commands retried after a conflict.",
            load(&s.retries),
        ),
        (
            "exec_aborts",
            "EXEC blocks that failed (WATCH).",
            load(&s.exec_aborts),
        ),
        (
            "records_removed",
            "Records taken out of the index (deleted keys, aborted inserts).",
            e.records_removed,
        ),
        (
            "records_freed",
            "Removed records freed (the rest wait for older transactions).",
            e.records_freed,
        ),
    ]
}

/// How long the oldest active engine transaction has run, in seconds (0 if none): one left
/// open holds back garbage collection, so memory grows with every write while this does.
/// Nothing a connection keeps between commands holds one, so this stays within the longest
/// single command (KEYS or FLUSHALL over a large database); more means something is stuck.
fn oldest_transaction_age_s(shared: &Shared) -> f64 {
    shared
        .db
        .oldest_transaction_age()
        .map_or(0.0, |age| age.as_secs_f64())
}

/// INFO's text: every section, or only the `sections` named (case-insensitive; `all`,
/// `everything` and `default` mean every one). Unknown sections are ignored, as in Redis.
pub fn render(shared: &Shared, sections: &[Vec<u8>]) -> String {
    let wanted: Vec<String> = sections
        .iter()
        .map(|s| String::from_utf8_lossy(s).to_ascii_lowercase())
        .collect();
    let all = wanted.is_empty()
        || wanted
            .iter()
            .any(|w| matches!(w.as_str(), "all" | "everything" | "default"));
    let mut out = String::new();
    for &name in SECTIONS {
        if !all && !wanted.iter().any(|w| w == name) {
            continue;
        }
        if !out.is_empty() {
            out.push_str("\r\n");
        }
        section_text(shared, name, &mut out);
    }
    out
}

fn section_text(shared: &Shared, name: &str, out: &mut String) {
    let s = &shared.stats;
    match name {
        "server" => {
            let _ = write!(
                out,
                "# Server\r\nredis_version:7.0.0\r\nverso_version:{}\r\nredis_mode:{}\r\nprocess_id:{}\r\nconcurrency:{}\r\n",
                env!("CARGO_PKG_VERSION"),
                if shared.shards.is_some() { "cluster" } else { "standalone" },
                std::process::id(),
                shared.db.concurrency()
            );
        }
        "clients" => {
            let _ = write!(
                out,
                "# Clients\r\nconnected_clients:{}\r\n",
                s.clients.load(Ordering::Relaxed)
            );
        }
        "stats" => {
            out.push_str("# Stats\r\n");
            for (key, _, value) in counters(shared) {
                let _ = write!(out, "{key}:{value}\r\n");
            }
            let _ = write!(
                out,
                "oldest_transaction_age_seconds:{:.3}\r\n",
                oldest_transaction_age_s(shared)
            );
        }
        "memory" => {
            let _ = write!(
                out,
                "# Memory\r\nused_memory:{}\r\n",
                s.used_memory.load(Ordering::Relaxed)
            );
        }
        "persistence" => {
            out.push_str("# Persistence\r\n");
            for (key, value) in shared.persistence.info_lines(&shared.db) {
                let _ = write!(out, "{key}:{value}\r\n");
            }
        }
        "replication" => {
            out.push_str("# Replication\r\n");
            for (key, value) in replication_lines(shared) {
                let _ = write!(out, "{key}:{value}\r\n");
            }
        }
        "cluster" => {
            out.push_str("# Cluster\r\n");
            let _ = write!(
                out,
                "cluster_enabled:{}\r\n",
                u8::from(shared.shards.is_some())
            );
            if let Some(m) = &shared.shards {
                let _ = write!(
                    out,
                    "verso_group:{}\r\nverso_slots_owned:{}\r\n",
                    m.my_group().id,
                    m.slots_of(m.my_group_index()).len()
                );
            }
            if let Some(moves) = &shared.moves {
                out.push_str(&moves.info_lines());
            }
        }
        "keyspace" => {
            out.push_str("# Keyspace\r\n");
            // `keys` counts the index (expired keys until the expirer deletes them, as in
            // Redis); `expires` reads the deadline queue, one read per entry.
            let all = shared.spaces();
            for (i, t) in shared.tables.iter().enumerate() {
                if let Ok(n) = shared.db.table_index_len(t) {
                    if n > 0 {
                        let expires = shared
                            .db
                            .begin_read_only()
                            .and_then(|txn| {
                                crate::expiry::count_expiring(&txn, all.get(i).expect("in range"))
                            })
                            .unwrap_or(0);
                        let _ = write!(out, "db{i}:keys={n},expires={expires}\r\n");
                    }
                }
            }
        }
        _ => unreachable!("not a section: {name}"),
    }
}

/// INFO replication: Redis's `role` (`master` for the primary, `slave` otherwise, so
/// tools that look for the master find it) and Verso's VSR state, one line per peer.
fn replication_lines(shared: &Shared) -> Vec<(String, String)> {
    let Some(r) = &shared.replication else {
        return vec![
            ("role".into(), "master".into()),
            ("verso_replication".into(), "off".into()),
            ("connected_slaves".into(), "0".into()),
        ];
    };
    let s = r.status();
    let mut lines: Vec<(String, String)> = vec![
        (
            "role".into(),
            if s.role == "primary" {
                "master"
            } else {
                "slave"
            }
            .into(),
        ),
        ("verso_replication".into(), "lazy-vsr".into()),
        ("vsr_mode".into(), s.mode.into()),
        ("vsr_replica".into(), s.replica.to_string()),
        ("vsr_replicas".into(), s.replicas.to_string()),
        ("vsr_role".into(), s.role.into()),
        ("vsr_view".into(), s.view.clone()),
        ("vsr_recovering".into(), u8::from(s.recovering).to_string()),
        (
            "vsr_primary".into(),
            s.primary_client_addr
                .clone()
                .unwrap_or_else(|| "unknown".into()),
        ),
        ("vsr_op_max".into(), s.op_max.to_string()),
        ("vsr_commit".into(), s.commit.to_string()),
        ("vsr_dp".into(), s.dp.to_string()),
        ("vsr_dp_min".into(), s.dp_min.to_string()),
        ("vsr_disk_op_max".into(), s.disk_op_max.to_string()),
        ("vsr_log_base".into(), s.log_base.to_string()),
        ("vsr_checkpoints".into(), s.checkpoints.to_string()),
        (
            "vsr_state_transfers_sent".into(),
            s.state_transfers_sent.to_string(),
        ),
        ("vsr_catch_ups".into(), s.catch_ups.to_string()),
        (
            "vsr_state_transfers_installed".into(),
            s.state_transfers_installed.to_string(),
        ),
        ("vsr_entries_applied".into(), s.entries_applied.to_string()),
        ("vsr_entries_undone".into(), s.entries_undone.to_string()),
        ("vsr_view_changes".into(), s.view_changes.to_string()),
        ("vsr_became_primary".into(), s.became_primary.to_string()),
        (
            "vsr_commits_replicated".into(),
            s.slots_proposed.to_string(),
        ),
        ("vsr_batches".into(), s.batches_proposed.to_string()),
        ("vsr_reads_leased".into(), s.reads_leased.to_string()),
        (
            "vsr_reads_with_round".into(),
            s.reads_with_round.to_string(),
        ),
        (
            "vsr_commits_retracted".into(),
            s.slots_retracted.to_string(),
        ),
        (
            "vsr_recovered_entries".into(),
            s.recovered_entries.to_string(),
        ),
        (
            "vsr_handshakes_rejected".into(),
            s.handshakes_rejected.to_string(),
        ),
        ("connected_slaves".into(), {
            let up = s
                .peers
                .iter()
                .filter(|p| p.connected_out && p.connected_in)
                .count();
            if s.role == "primary" { up } else { 0 }.to_string()
        }),
    ];
    for p in &s.peers {
        lines.push((
            format!("vsr_peer{}", p.id),
            format!(
                "client={},peer={},link_out={},link_in={},last_heard_ms={},reconnects={},dropped={}",
                p.client_addr,
                p.peer_addr,
                if p.connected_out { "up" } else { "down" },
                if p.connected_in { "up" } else { "down" },
                p.last_heard_ms.map_or("-1".into(), |m| m.to_string()),
                p.reconnects,
                p.dropped
            ),
        ));
    }
    lines
}

/// The Prometheus text exposition (format 0.0.4) of the counters and gauges.
pub fn prometheus(shared: &Shared) -> String {
    let mut out = String::new();
    for (key, help, value) in counters(shared) {
        let key = key.trim_start_matches("total_");
        let _ = write!(
            out,
            "# HELP verso_{key}_total {help}\n# TYPE verso_{key}_total counter\nverso_{key}_total {value}\n"
        );
    }
    let s = &shared.stats;
    let gauges = [
        (
            "connected_clients",
            "Clients connected now.",
            s.clients.load(Ordering::Relaxed),
        ),
        (
            "used_memory_bytes",
            "Resident set size of the server process.",
            s.used_memory.load(Ordering::Relaxed),
        ),
    ];
    for (key, help, value) in gauges {
        let _ = write!(
            out,
            "# HELP verso_{key} {help}\n# TYPE verso_{key} gauge\nverso_{key} {value}\n"
        );
    }
    let _ = write!(
        out,
        "# HELP verso_oldest_transaction_age_seconds Age of the oldest active transaction (0: none).\n\
         # TYPE verso_oldest_transaction_age_seconds gauge\n\
         verso_oldest_transaction_age_seconds {:.3}\n",
        oldest_transaction_age_s(shared)
    );
    if let Some(r) = &shared.replication {
        let st = r.status();
        let roles = ["primary", "backup", "candidate", "elected"];
        out.push_str("# HELP verso_vsr_role 1 for this replica's current role.\n# TYPE verso_vsr_role gauge\n");
        for role in roles {
            let _ = writeln!(
                out,
                "verso_vsr_role{{role=\"{role}\"}} {}",
                u8::from(st.role == role)
            );
        }
        let gauges = [
            ("vsr_view", "The view's counter.", st.view_counter),
            (
                "vsr_recovering",
                "1 while restarted and not caught up from a primary (no votes).",
                u64::from(st.recovering),
            ),
            (
                "vsr_op_max",
                "The last op in this replica's log.",
                st.op_max,
            ),
            ("vsr_commit", "The commit point.", st.commit),
            (
                "vsr_dp",
                "The durable point (on a majority's disks).",
                st.dp,
            ),
            ("vsr_dp_min", "On every replica's disk.", st.dp_min),
            (
                "vsr_disk_op_max",
                "The last op on this replica's disk.",
                st.disk_op_max,
            ),
            (
                "vsr_log_base",
                "The op before the first one the log keeps (the rest are in a checkpoint).",
                st.log_base,
            ),
        ];
        for (key, help, value) in gauges {
            let _ = write!(
                out,
                "# HELP verso_{key} {help}\n# TYPE verso_{key} gauge\nverso_{key} {value}\n"
            );
        }
        let counters = [
            ("vsr_view_changes", "View changes started.", st.view_changes),
            ("vsr_checkpoints", "Checkpoints written.", st.checkpoints),
            (
                "vsr_state_transfers_sent",
                "State transfers started to replicas that lost their disk.",
                st.state_transfers_sent,
            ),
            (
                "vsr_state_transfers_installed",
                "State transfers this replica installed.",
                st.state_transfers_installed,
            ),
            (
                "vsr_entries_undone",
                "Log entries rolled back.",
                st.entries_undone,
            ),
            (
                "vsr_commits_replicated",
                "Commits this replica proposed as primary.",
                st.slots_proposed,
            ),
            (
                "vsr_commits_retracted",
                "Commits rolled back because they never reached the log.",
                st.slots_retracted,
            ),
            (
                "vsr_handshakes_rejected",
                "Peer connections refused (bad secret, unknown id).",
                st.handshakes_rejected,
            ),
            (
                "vsr_reads_leased",
                "Reads answered as primary under the read lease, without a round.",
                st.reads_leased,
            ),
            (
                "vsr_reads_with_round",
                "Reads that waited for a round to a majority (no lease held).",
                st.reads_with_round,
            ),
        ];
        for (key, help, value) in counters {
            let _ = write!(
                out,
                "# HELP verso_{key}_total {help}\n# TYPE verso_{key}_total counter\nverso_{key}_total {value}\n"
            );
        }
        out.push_str("# HELP verso_vsr_peer_up 1 if both links with the peer are up.\n# TYPE verso_vsr_peer_up gauge\n");
        for p in &st.peers {
            let _ = writeln!(
                out,
                "verso_vsr_peer_up{{peer=\"{}\"}} {}",
                p.id,
                u8::from(p.connected_in && p.connected_out)
            );
        }
    }
    if let Some(m) = &shared.shards {
        let _ = write!(
            out,
            "# HELP verso_cluster_slots_owned Hash slots this node's group serves.\n\
             # TYPE verso_cluster_slots_owned gauge\n\
             verso_cluster_slots_owned{{group=\"{}\"}} {}\n",
            m.my_group().id,
            m.slots_of(m.my_group_index()).len()
        );
    }
    if let Some(moves) = &shared.moves {
        let (n, acked, total) = moves.progress();
        let _ = write!(
            out,
            "# HELP verso_cluster_moves_in_flight Slot moves this node's group takes part in now.\n\
             # TYPE verso_cluster_moves_in_flight gauge\n\
             verso_cluster_moves_in_flight {n}\n\
             # HELP verso_cluster_move_chunks Chunks of this group's outgoing moves, sent and logged by their target.\n\
             # TYPE verso_cluster_move_chunks gauge\n\
             verso_cluster_move_chunks{{state=\"logged\"}} {acked}\n\
             verso_cluster_move_chunks{{state=\"total\"}} {total}\n"
        );
    }
    for (i, t) in shared.tables.iter().enumerate() {
        if let Ok(n) = shared.db.table_index_len(t) {
            if i == 0 {
                out.push_str("# HELP verso_keys Keys per database (deleted ones included until collected).\n# TYPE verso_keys gauge\n");
            }
            let _ = writeln!(out, "verso_keys{{db=\"{i}\"}} {n}");
        }
    }
    out
}
