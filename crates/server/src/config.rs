//! `verso serve`'s settings: a small TOML file (`--config FILE`) and the command-line flags,
//! which override it. Both spell every setting the same way (`max-clients = 100` in the file is
//! `--max-clients 100` on the command line); `verso.toml.example` at the repository root lists
//! them all with their defaults. An unknown key is an error that names it.

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::resp::Limits;
use crate::server::ServerConfig;
use crate::session::SessionLimits;

/// Most worker threads `threads` may ask for.
pub const THREADS_MAX: usize = 1024;

/// Every setting, each optional: a config file or a set of flags names only some.
/// Invariants: none until [`Settings::resolve`], which checks every value.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Settings {
    /// Address to listen on (default 127.0.0.1). A non-loopback address needs `requirepass`.
    pub bind: Option<IpAddr>,
    /// TCP port (default 6380).
    pub port: Option<u16>,
    /// Password clients must give with AUTH (default: none).
    pub requirepass: Option<String>,
    /// Worker threads serving connections (default: the number of cores).
    pub threads: Option<usize>,
    /// Most connected clients (default 10000).
    pub max_clients: Option<usize>,
    /// Seconds a silent client stays connected (default 0: forever).
    pub timeout: Option<u64>,
    /// Longest bulk string (one argument) in bytes (default: the engine's value limit, 64 MiB).
    pub max_bulk_len: Option<usize>,
    /// Most arguments in one request (default 1048576).
    pub max_multibulk_len: Option<usize>,
    /// Most bytes buffered for one incomplete request (default 1 GiB).
    pub max_query_buffer: Option<usize>,
    /// Bytes of replies a client may leave unread before it is disconnected (default 256 MiB).
    pub max_output_buffer: Option<usize>,
    /// Keys one connection may watch at once (default 10000).
    pub max_watched_keys: Option<usize>,
    /// Commands one MULTI block may queue (default 100000).
    pub max_multi_commands: Option<usize>,
    /// Bytes one MULTI block's queued commands may hold (default 256 MiB).
    pub max_multi_bytes: Option<usize>,
    /// Port of the Prometheus metrics endpoint (`GET /metrics`) on `bind` (default: off).
    pub metrics_port: Option<u16>,
    /// none, lazy or sync (default lazy: acknowledged at once, on disk within
    /// `fsync-interval`).
    pub durability: Option<String>,
    /// Where the redo logs and checkpoints live (default `verso-data`).
    pub data_dir: Option<PathBuf>,
    /// Lazy durability: most milliseconds a commit waits in memory (default 10).
    pub fsync_interval: Option<u64>,
    /// Seconds between automatic checkpoints while writes arrive (default 300; 0: off).
    pub checkpoint_interval: Option<u64>,
    /// Checkpoint once the log grew by this many MiB (default 256; 0: off).
    pub checkpoint_log_mb: Option<u64>,
    /// Read rate of background checkpoints in MiB/s (default 16; 0: full speed).
    pub checkpoint_rate: Option<u64>,
    /// Start even if a log is damaged in the middle, cutting it there (default false).
    pub recovery_truncate: Option<bool>,
    /// Run as a replica of the Lazy VSR group this cluster file describes (with `replica`).
    pub cluster: Option<PathBuf>,
    /// This server's id in the cluster file.
    pub replica: Option<u8>,
    /// Serve the slots this shards file gives `group` (with `group`).
    pub shards: Option<PathBuf>,
    /// This server's group in the shards file.
    pub group: Option<u16>,
}

/// A replica's place in its group.
#[derive(Clone, Debug)]
pub struct ClusterSettings {
    pub config: verso_replication::ClusterConfig,
    pub replica: u8,
}

/// Why the settings could not be used.
#[derive(Debug)]
pub enum ConfigError {
    /// The file could not be read.
    Read(String, std::io::Error),
    /// The file is not valid TOML, has a value of the wrong type, or an unknown key.
    Parse(String),
    /// A value out of range.
    Invalid(String),
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConfigError::Read(path, e) => write!(f, "cannot read config file {path}: {e}"),
            ConfigError::Parse(msg) => write!(f, "config file: {msg}"),
            ConfigError::Invalid(msg) => write!(f, "{msg}"),
        }
    }
}

impl std::error::Error for ConfigError {}

/// The number of cores (1 if unknown): the default for `threads`.
pub fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

impl Settings {
    /// Parses a config file's text.
    pub fn parse(text: &str) -> Result<Settings, ConfigError> {
        toml::from_str(text).map_err(|e| ConfigError::Parse(e.message().trim().to_string()))
    }

    /// Reads and parses a config file.
    pub fn load(path: &Path) -> Result<Settings, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ConfigError::Read(path.display().to_string(), e))?;
        Settings::parse(&text).map_err(|e| match e {
            ConfigError::Parse(msg) => ConfigError::Parse(format!("{}: {msg}", path.display())),
            other => other,
        })
    }

    /// These settings with every value `over` sets replacing ours (flags over the file).
    pub fn overridden_by(self, over: Settings) -> Settings {
        Settings {
            bind: over.bind.or(self.bind),
            port: over.port.or(self.port),
            requirepass: over.requirepass.or(self.requirepass),
            threads: over.threads.or(self.threads),
            max_clients: over.max_clients.or(self.max_clients),
            timeout: over.timeout.or(self.timeout),
            max_bulk_len: over.max_bulk_len.or(self.max_bulk_len),
            max_multibulk_len: over.max_multibulk_len.or(self.max_multibulk_len),
            max_query_buffer: over.max_query_buffer.or(self.max_query_buffer),
            max_output_buffer: over.max_output_buffer.or(self.max_output_buffer),
            max_watched_keys: over.max_watched_keys.or(self.max_watched_keys),
            max_multi_commands: over.max_multi_commands.or(self.max_multi_commands),
            max_multi_bytes: over.max_multi_bytes.or(self.max_multi_bytes),
            metrics_port: over.metrics_port.or(self.metrics_port),
            durability: over.durability.or(self.durability),
            data_dir: over.data_dir.or(self.data_dir),
            fsync_interval: over.fsync_interval.or(self.fsync_interval),
            checkpoint_interval: over.checkpoint_interval.or(self.checkpoint_interval),
            checkpoint_log_mb: over.checkpoint_log_mb.or(self.checkpoint_log_mb),
            checkpoint_rate: over.checkpoint_rate.or(self.checkpoint_rate),
            recovery_truncate: over.recovery_truncate.or(self.recovery_truncate),
            cluster: over.cluster.or(self.cluster),
            shards: over.shards.or(self.shards),
            group: over.group.or(self.group),
            replica: over.replica.or(self.replica),
        }
    }

    /// The server configuration: defaults for what is unset, every value checked.
    pub fn resolve(&self) -> Result<ServerConfig, ConfigError> {
        let d = ServerConfig::default();
        let positive = |name: &str, v: Option<usize>, default: usize| match v {
            Some(0) => Err(ConfigError::Invalid(format!("{name} must be at least 1"))),
            Some(n) => Ok(n),
            None => Ok(default),
        };
        let threads = positive("threads", self.threads, default_threads())?;
        if threads > THREADS_MAX {
            return Err(ConfigError::Invalid(format!(
                "threads must be at most {THREADS_MAX}, not {threads}"
            )));
        }
        let limits = Limits {
            bulk_len_max: positive("max-bulk-len", self.max_bulk_len, d.limits.bulk_len_max)?,
            multibulk_len_max: positive(
                "max-multibulk-len",
                self.max_multibulk_len,
                d.limits.multibulk_len_max,
            )?,
            query_buffer_max: positive(
                "max-query-buffer",
                self.max_query_buffer,
                d.limits.query_buffer_max,
            )?,
        };
        let session = SessionLimits {
            watched_keys_max: positive(
                "max-watched-keys",
                self.max_watched_keys,
                d.session.watched_keys_max,
            )?,
            multi_commands_max: positive(
                "max-multi-commands",
                self.max_multi_commands,
                d.session.multi_commands_max,
            )?,
            multi_bytes_max: positive(
                "max-multi-bytes",
                self.max_multi_bytes,
                d.session.multi_bytes_max,
            )?,
        };
        let port = self.port.unwrap_or(d.port);
        if port != 0 && self.metrics_port == Some(port) {
            return Err(ConfigError::Invalid(
                "metrics-port must differ from port".into(),
            ));
        }
        let durability = match &self.durability {
            Some(d) => d.parse().map_err(ConfigError::Invalid)?,
            None => d.durability,
        };
        let fsync_ms = self
            .fsync_interval
            .unwrap_or(d.fsync_interval.as_millis() as u64);
        if !(1..=10_000).contains(&fsync_ms) {
            return Err(ConfigError::Invalid(format!(
                "fsync-interval must be 1-10000 ms, not {fsync_ms}"
            )));
        }
        let checkpoints = crate::persistence::CheckpointPolicy {
            interval: match self.checkpoint_interval {
                Some(0) => None,
                Some(s) => Some(Duration::from_secs(s)),
                None => d.checkpoints.interval,
            },
            log_bytes: self
                .checkpoint_log_mb
                .map_or(d.checkpoints.log_bytes, |mb| mb.saturating_mul(1 << 20)),
            rate: match self.checkpoint_rate {
                Some(0) => None,
                Some(mb) => Some(mb.saturating_mul(1 << 20)),
                None => d.checkpoints.rate,
            },
        };
        if self.requirepass.as_deref() == Some("") {
            return Err(ConfigError::Invalid("requirepass must not be empty".into()));
        }
        let cluster = match (&self.cluster, self.replica) {
            (None, None) => None,
            (Some(path), Some(id)) => {
                let config =
                    verso_replication::ClusterConfig::load(path).map_err(ConfigError::Invalid)?;
                let Some(me) = config.replicas.iter().find(|r| r.id == id) else {
                    return Err(ConfigError::Invalid(format!(
                        "replica {id} is not in {} (it lists 0..{})",
                        path.display(),
                        config.replicas.len()
                    )));
                };
                if self.port.is_some_and(|p| p != me.client.port())
                    || self.bind.is_some_and(|b| b != me.client.ip())
                {
                    return Err(ConfigError::Invalid(format!(
                        "replica {id} listens on {} (its client address in the cluster file); drop bind and port",
                        me.client
                    )));
                }
                if durability == verso_engine::Durability::None {
                    return Err(ConfigError::Invalid(
                        "a replica keeps its log on disk: durability must be lazy (reply once a majority holds the write in memory) or sync (once a majority has it on disk)".into(),
                    ));
                }
                Some(ClusterSettings {
                    config,
                    replica: id,
                })
            }
            _ => {
                return Err(ConfigError::Invalid(
                    "cluster and replica go together: --cluster FILE --replica ID".into(),
                ))
            }
        };
        let (bind, port) = match &cluster {
            Some(c) => {
                let a = c.config.replicas[usize::from(c.replica)].client;
                (a.ip(), a.port())
            }
            None => (self.bind.unwrap_or(d.bind), port),
        };
        let shards = match (&self.shards, self.group) {
            (None, None) => None,
            (Some(path), Some(group)) => Some(
                crate::shards::ShardMap::load(path, group, std::net::SocketAddr::new(bind, port))
                    .map_err(ConfigError::Invalid)?,
            ),
            _ => {
                return Err(ConfigError::Invalid(
                    "shards and group go together: --shards FILE --group ID".into(),
                ))
            }
        };
        let cfg = ServerConfig {
            bind,
            port,
            password: self.requirepass.clone(),
            limits,
            threads,
            max_clients: positive("max-clients", self.max_clients, d.max_clients)?,
            output_buffer_max: positive(
                "max-output-buffer",
                self.max_output_buffer,
                d.output_buffer_max,
            )?,
            session,
            idle_timeout_s: self.timeout.unwrap_or(d.idle_timeout_s),
            metrics_port: self.metrics_port,
            durability,
            data_dir: self.data_dir.clone().unwrap_or(d.data_dir),
            fsync_interval: Duration::from_millis(fsync_ms),
            checkpoints,
            recovery_truncate: self.recovery_truncate.unwrap_or(false),
            cluster,
            shards,
        };
        assert!(cfg.threads >= 1 && cfg.threads <= THREADS_MAX);
        assert!(cfg.limits.bulk_len_max > 0 && cfg.output_buffer_max > 0);
        Ok(cfg)
    }
}
