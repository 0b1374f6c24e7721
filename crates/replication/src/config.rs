//! The cluster file: who the replicas are, the shared secret, and the protocol's settings.
//!
//! ```toml
//! secret = "a long random string shared by the replicas"   # or secret_file = "path"
//! mode = "lazy"                  # or "sync": VSR-Sync, every entry on disk before it is acknowledged
//! heartbeat_ms = 50              # an idle primary's heartbeat
//! view_change_timeout_ms = 500   # a backup that hears nothing for this long starts a view change
//!
//! [[replica]]
//! id = 0
//! client = "127.0.0.1:7001"      # where Redis clients connect
//! peer = "127.0.0.1:7101"        # where the other replicas connect
//! ```

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde::Deserialize;

/// One replica's addresses. The file may give `ip:port` or `host:port`; a host name is
/// resolved once, when the file is read (an IPv4 address preferred).
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct ReplicaAddr {
    pub id: u8,
    #[serde(deserialize_with = "resolved")]
    pub client: SocketAddr,
    #[serde(deserialize_with = "resolved")]
    pub peer: SocketAddr,
}

/// `ip:port`, or `host:port` resolved now (IPv4 first).
pub fn resolve(text: &str) -> Result<SocketAddr, String> {
    if let Ok(a) = text.parse() {
        return Ok(a);
    }
    use std::net::ToSocketAddrs;
    let all: Vec<SocketAddr> = text
        .to_socket_addrs()
        .map_err(|e| format!("'{text}' is not an ip:port or a host:port that resolves: {e}"))?
        .collect();
    all.iter()
        .find(|a| a.is_ipv4())
        .or(all.first())
        .copied()
        .ok_or_else(|| format!("'{text}' resolves to no address"))
}

fn resolved<'de, D: serde::Deserializer<'de>>(d: D) -> Result<SocketAddr, D::Error> {
    let text = String::deserialize(d)?;
    resolve(&text).map_err(serde::de::Error::custom)
}

#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum ModeName {
    #[default]
    Lazy,
    Sync,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    secret: Option<String>,
    secret_file: Option<PathBuf>,
    #[serde(default)]
    mode: ModeName,
    heartbeat_ms: Option<u64>,
    view_change_timeout_ms: Option<u64>,
    view_change_jitter_ms: Option<u64>,
    election_timeout_ms: Option<u64>,
    lease_ms: Option<u64>,
    batches_in_flight: Option<usize>,
    lazy_sync_gap_us: Option<u64>,
    checkpoint_entries: Option<u64>,
    checkpoint_log_mb: Option<u64>,
    replica: Vec<ReplicaAddr>,
}

/// A parsed and checked cluster file.
#[derive(Clone, Debug)]
pub struct ClusterConfig {
    pub replicas: Vec<ReplicaAddr>,
    pub secret: Vec<u8>,
    pub mode: ModeName,
    pub heartbeat_ms: u64,
    pub view_change_timeout_ms: u64,
    pub view_change_jitter_ms: u64,
    pub election_timeout_ms: u64,
    /// Read leases (`verso_vsr` `replica::lease`; 0: off): a replica that hears its
    /// primary promises to elect nobody else for this long, and the primary answers reads
    /// without a round to the others while a majority's promises last. Assumes clocks that
    /// run at rates within 4 % of each other (no synchronization). Default: 4/5 of
    /// `view_change_timeout_ms`, so a failed primary is replaced no later than without
    /// (off if that is not above twice `heartbeat_ms`, the least accepted).
    pub lease_ms: u64,
    /// The primary's batches proposed and not yet committed, at most. Commits that arrive
    /// while this many are in flight wait for the next batch, so under load a round carries
    /// more commits (fewer messages and wake-ups per commit); see BENCHMARKS.md.
    pub batches_in_flight: usize,
    /// Lazy VSR only: the disk thread leaves at least this long between the end of one
    /// `fdatasync` and the start of the next (writes keep going to the file meanwhile).
    /// Nothing waits for a Lazy replica's disk to acknowledge a write, so syncing back to
    /// back only spends CPU (each sync is a device round trip and two context switches);
    /// the price is up to this much more time before `WAIT`, `--durability sync` replies
    /// and a vote see the disk, and as much more acknowledged work a total crash can lose.
    /// VSR-Sync always syncs at once.
    pub lazy_sync_gap: std::time::Duration,
    /// A checkpoint once the log took this many bytes of writes since the last one began,
    /// and at least as many as the last checkpoint's data holds (so a checkpoint costs no
    /// more than the log it lets go, as Redis's `auto-aof-rewrite-min-size` with a growth of
    /// 100 %); 0: never by size. Each writes the engine's state through the durable point to
    /// a file beside the replica log and lets the log drop what every replica holds on its
    /// disk (`checkpoint.rs`, `disk.rs`). It scans every key, on a thread of its own: the
    /// replica log goes on appending and syncing meanwhile (`disk.rs`).
    pub checkpoint_log_bytes: u64,
    /// Also a checkpoint every this many log entries (0: not by count). For tests: under
    /// load an entry carries hundreds of commits, and when idle one, so a count says little
    /// about the log's size.
    pub checkpoint_entries: u64,
}

/// The default of [`ClusterConfig::checkpoint_log_bytes`], in MiB.
pub const CHECKPOINT_LOG_MB_DEFAULT: u64 = 64;
/// The largest accepted, in MiB.
pub const CHECKPOINT_LOG_MB_MAX: u64 = 1 << 20;
/// The fewest entries between checkpoints accepted (besides 0, off).
pub const CHECKPOINT_ENTRIES_MIN: u64 = 100;

/// The default of [`ClusterConfig::batches_in_flight`] (chosen by measurement).
pub const BATCHES_IN_FLIGHT_DEFAULT: usize = 2;
/// The most batches a primary may keep in flight (the VSR pipeline it feeds is this deep).
pub const BATCHES_IN_FLIGHT_MAX: usize = 64;

/// The default of [`ClusterConfig::lazy_sync_gap`], in microseconds (chosen by measurement).
pub const LAZY_SYNC_GAP_US_DEFAULT: u64 = 2_000;
/// The longest gap accepted, in microseconds.
pub const LAZY_SYNC_GAP_US_MAX: u64 = 100_000;

/// The shortest secret accepted.
pub const SECRET_LEN_MIN: usize = 16;

impl ClusterConfig {
    /// Reads and checks `path`; relative `secret_file`s are relative to it.
    pub fn load(path: &Path) -> Result<ClusterConfig, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read cluster file {}: {e}", path.display()))?;
        Self::parse(&text, path.parent().unwrap_or(Path::new(".")))
            .map_err(|e| format!("cluster file {}: {e}", path.display()))
    }

    pub fn parse(text: &str, base: &Path) -> Result<ClusterConfig, String> {
        let f: File = toml::from_str(text).map_err(|e| e.to_string())?;
        let secret = match (f.secret, f.secret_file) {
            (Some(s), None) => s.into_bytes(),
            (None, Some(p)) => {
                let p = base.join(p);
                let mut s = std::fs::read(&p)
                    .map_err(|e| format!("cannot read secret_file {}: {e}", p.display()))?;
                while s.last().is_some_and(|b| b.is_ascii_whitespace()) {
                    s.pop();
                }
                s
            }
            (Some(_), Some(_)) => return Err("give secret or secret_file, not both".into()),
            (None, None) => {
                return Err("a cluster needs a shared secret (secret or secret_file): \
                            replicas authenticate each other with it"
                    .into())
            }
        };
        if secret.len() < SECRET_LEN_MIN {
            return Err(format!(
                "the secret must be at least {SECRET_LEN_MIN} bytes, got {}",
                secret.len()
            ));
        }
        let mut replicas = f.replica;
        replicas.sort_by_key(|r| r.id);
        let n = replicas.len();
        if n == 0 || n.is_multiple_of(2) || n > verso_vsr::REPLICAS_MAX {
            return Err(format!(
                "a group has an odd number of replicas, 1 to {} (2f+1); this file lists {n}",
                verso_vsr::REPLICAS_MAX
            ));
        }
        for (i, r) in replicas.iter().enumerate() {
            if usize::from(r.id) != i {
                return Err(format!(
                    "replica ids must be 0..{n}, each once; found id {} where {i} was expected",
                    r.id
                ));
            }
        }
        let mut addrs: Vec<SocketAddr> = replicas.iter().flat_map(|r| [r.client, r.peer]).collect();
        addrs.sort();
        if let Some(w) = addrs.windows(2).find(|w| w[0] == w[1]) {
            return Err(format!("address {} is listed twice", w[0]));
        }
        let batches_in_flight = f.batches_in_flight.unwrap_or(BATCHES_IN_FLIGHT_DEFAULT);
        if !(1..=BATCHES_IN_FLIGHT_MAX).contains(&batches_in_flight) {
            return Err(format!(
                "batches_in_flight must be 1 to {BATCHES_IN_FLIGHT_MAX}, got {batches_in_flight}"
            ));
        }
        let checkpoint_entries = f.checkpoint_entries.unwrap_or(0);
        let checkpoint_log_mb = f.checkpoint_log_mb.unwrap_or(CHECKPOINT_LOG_MB_DEFAULT);
        if checkpoint_log_mb > CHECKPOINT_LOG_MB_MAX {
            return Err(format!(
                "checkpoint_log_mb must be at most {CHECKPOINT_LOG_MB_MAX}, got {checkpoint_log_mb}"
            ));
        }
        if checkpoint_entries != 0 && checkpoint_entries < CHECKPOINT_ENTRIES_MIN {
            return Err(format!(
                "checkpoint_entries must be 0 (off) or at least {CHECKPOINT_ENTRIES_MIN}, got {checkpoint_entries}"
            ));
        }
        let gap_us = f.lazy_sync_gap_us.unwrap_or(LAZY_SYNC_GAP_US_DEFAULT);
        if gap_us > LAZY_SYNC_GAP_US_MAX {
            return Err(format!(
                "lazy_sync_gap_us must be at most {LAZY_SYNC_GAP_US_MAX}, got {gap_us}"
            ));
        }
        let c = ClusterConfig {
            replicas,
            secret,
            mode: f.mode,
            heartbeat_ms: f.heartbeat_ms.unwrap_or(50),
            view_change_timeout_ms: f.view_change_timeout_ms.unwrap_or(500),
            view_change_jitter_ms: f.view_change_jitter_ms.unwrap_or(200),
            election_timeout_ms: f.election_timeout_ms.unwrap_or(500),
            lease_ms: f.lease_ms.unwrap_or_else(|| {
                let lease = f.view_change_timeout_ms.unwrap_or(500) * 4 / 5;
                // Too short to outlast a heartbeat round: off rather than refused.
                if lease > 2 * f.heartbeat_ms.unwrap_or(50) {
                    lease
                } else {
                    0
                }
            }),
            batches_in_flight,
            lazy_sync_gap: std::time::Duration::from_micros(gap_us),
            checkpoint_entries,
            checkpoint_log_bytes: checkpoint_log_mb << 20,
        };
        c.vsr_config(0, 0).validate()?;
        Ok(c)
    }

    /// The protocol's settings for replica `me`.
    pub fn vsr_config(&self, me: u8, seed: u64) -> verso_vsr::Config {
        let mut c = verso_vsr::Config::new(self.replicas.len() as u8);
        c.mode = match self.mode {
            ModeName::Lazy => verso_vsr::Mode::Lazy,
            ModeName::Sync => verso_vsr::Mode::Sync,
        };
        c.heartbeat_interval = self.heartbeat_ms;
        c.view_change_timeout = self.view_change_timeout_ms;
        c.view_change_jitter = self.view_change_jitter_ms;
        c.election_timeout = self.election_timeout_ms;
        c.lease = self.lease_ms;
        c.catch_up_timeout = 100;
        c.batch_requests_max = 64;
        c.message_bytes_max = crate::op::MESSAGE_OPS_BYTES;
        c.pipeline_max = BATCHES_IN_FLIGHT_MAX as u64;
        // Our batches are taken once per round of the replication thread, so the queue stays
        // short; it must never overflow (a dropped batch would leave its commits waiting).
        c.request_queue_max = 1 << 20;
        c.checkpoint_interval = self.checkpoint_entries;
        c.seed = seed ^ u64::from(me);
        c
    }

    /// An example file for `n` replicas on loopback from `base_port` (clients) and
    /// `base_port + 100` (peers).
    pub fn example(n: u8, base_port: u16, secret: &str) -> String {
        let mut s = format!(
            "# A Verso replica group: start each replica with\n\
             #   verso serve --cluster THIS_FILE --replica ID --data-dir DATA_DIR_OF_ID\n\
             secret = \"{secret}\"\nmode = \"lazy\"\n"
        );
        for id in 0..n {
            s.push_str(&format!(
                "\n[[replica]]\nid = {id}\nclient = \"127.0.0.1:{}\"\npeer = \"127.0.0.1:{}\"\n",
                base_port + u16::from(id),
                base_port + 100 + u16::from(id)
            ));
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_example_parses() {
        let c = ClusterConfig::parse(
            &ClusterConfig::example(3, 7001, "0123456789abcdef"),
            Path::new("."),
        )
        .unwrap();
        assert_eq!(c.replicas.len(), 3);
        assert_eq!(c.replicas[2].peer, "127.0.0.1:7103".parse().unwrap());
    }

    #[test]
    fn host_names_resolve_when_the_file_is_read() {
        let text = ClusterConfig::example(3, 7001, "0123456789abcdef")
            .replace("127.0.0.1:7002", "localhost:7002");
        let c = ClusterConfig::parse(&text, Path::new(".")).unwrap();
        assert_eq!(c.replicas[1].client, "127.0.0.1:7002".parse().unwrap());
        let bad = ClusterConfig::example(3, 7001, "0123456789abcdef")
            .replace("127.0.0.1:7002", "no-such-host.invalid:7002");
        assert!(ClusterConfig::parse(&bad, Path::new("."))
            .unwrap_err()
            .contains("no-such-host.invalid:7002"));
    }

    #[test]
    fn the_documented_example_file_parses() {
        let text = include_str!("../../../cluster.toml.example");
        let c = ClusterConfig::parse(text, Path::new(".")).unwrap();
        assert_eq!(c.replicas.len(), 3);
        assert_eq!(c.view_change_timeout_ms, 500);
        assert_eq!(c.lease_ms, 400);
    }

    /// The lease defaults to 4/5 of the view-change timeout, and to off where that would
    /// not outlast two heartbeats (which `validate` would refuse).
    #[test]
    fn the_lease_defaults_to_most_of_the_view_change_timeout() {
        let base = ClusterConfig::example(3, 7001, "0123456789abcdef");
        let lease = |extra: &str| {
            let text = base.replace("mode = \"lazy\"", extra);
            ClusterConfig::parse(&text, Path::new(".")).map(|c| c.lease_ms)
        };
        assert_eq!(lease("mode = \"lazy\""), Ok(400));
        assert_eq!(lease("view_change_timeout_ms = 1000"), Ok(800));
        assert_eq!(lease("view_change_timeout_ms = 100"), Ok(0));
        assert_eq!(lease("lease_ms = 0"), Ok(0));
        assert_eq!(lease("lease_ms = 250"), Ok(250));
    }

    #[test]
    fn bad_files_are_refused_with_the_reason() {
        let base = ClusterConfig::example(3, 7001, "0123456789abcdef");
        let cases = [
            (base.replace("0123456789abcdef", "short"), "at least 16"),
            (base.replace("id = 2", "id = 5"), "ids must be 0..3"),
            (base.replace("7103", "7102"), "listed twice"),
            (base.replace("secret = ", "sekret = "), "unknown field"),
            (
                ClusterConfig::example(2, 7001, "0123456789abcdef"),
                "odd number",
            ),
            (
                base.replace("mode = \"lazy\"", "heartbeat_ms = 900"),
                "heartbeat_interval must be below",
            ),
            (
                base.replace("mode = \"lazy\"", "lease_ms = 60"),
                "lease must be 0 (off) or above twice heartbeat_interval",
            ),
            (
                base.replace("mode = \"lazy\"", "batches_in_flight = 0"),
                "batches_in_flight must be 1 to 64",
            ),
            (
                base.replace("mode = \"lazy\"", "lazy_sync_gap_us = 100001"),
                "lazy_sync_gap_us must be at most 100000",
            ),
            (
                base.replace("mode = \"lazy\"", "checkpoint_entries = 99"),
                "checkpoint_entries must be 0 (off) or at least 100",
            ),
            (
                base.replace("mode = \"lazy\"", "checkpoint_log_mb = 1048577"),
                "checkpoint_log_mb must be at most 1048576",
            ),
        ];
        for (text, want) in cases {
            let e = ClusterConfig::parse(&text, Path::new(".")).unwrap_err();
            assert!(e.contains(want), "{e:?} should mention {want:?}");
        }
    }
}
