//! The bounds on what one connection may make the server keep between its commands, and the
//! errors that say which was exceeded. Every piece of per-connection state a client can grow
//! is bounded here (the request-size limits are the parser's, `resp::Limits`; the output
//! buffer's is the worker's): a new kind (subscriptions, say) adds its field, its default,
//! its setting in `config.rs` and its error below.
//!
//! No client state holds an engine transaction, a slot or the GC watermark between commands
//! (WATCH keeps key versions, SCAN keeps a key), so these bound memory only.

use crate::resp::Reply;

/// Default for [`SessionLimits::watched_keys_max`].
pub const WATCHED_KEYS_MAX_DEFAULT: usize = 10_000;
/// Default for [`SessionLimits::multi_commands_max`].
pub const MULTI_COMMANDS_MAX_DEFAULT: usize = 100_000;
/// Default for [`SessionLimits::multi_bytes_max`]: four values of the largest size the
/// engine stores by default (64 MiB), so a block may carry a few big SETs.
pub const MULTI_BYTES_MAX_DEFAULT: usize = 256 << 20;

/// Per-connection bounds (`verso serve --max-watched-keys`, `--max-multi-commands`,
/// `--max-multi-bytes`). Invariant: every field is at least 1 (`config` checks).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SessionLimits {
    /// Distinct keys one connection watches at once (over all its databases).
    pub watched_keys_max: usize,
    /// Commands queued in one MULTI block.
    pub multi_commands_max: usize,
    /// Bytes a MULTI block's queued commands hold: their arguments, each counted with the
    /// size of its header, so a block of many empty arguments is bounded too.
    pub multi_bytes_max: usize,
}

impl Default for SessionLimits {
    fn default() -> Self {
        SessionLimits {
            watched_keys_max: WATCHED_KEYS_MAX_DEFAULT,
            multi_commands_max: MULTI_COMMANDS_MAX_DEFAULT,
            multi_bytes_max: MULTI_BYTES_MAX_DEFAULT,
        }
    }
}

/// The bytes a queued command is charged against [`SessionLimits::multi_bytes_max`].
pub(super) fn queued_bytes(args: &[Vec<u8>]) -> usize {
    args.iter()
        .map(|a| a.len().saturating_add(std::mem::size_of::<Vec<u8>>()))
        .fold(0, usize::saturating_add)
}

pub(super) fn too_many_watched(max: usize) -> Reply {
    Reply::err(format!(
        "too many watched keys (max {max}); raise --max-watched-keys"
    ))
}

pub(super) fn too_many_queued(max: usize) -> Reply {
    Reply::err(format!(
        "too many commands queued in MULTI (max {max}); raise --max-multi-commands"
    ))
}

pub(super) fn queue_too_large(max: usize) -> Reply {
    Reply::err(format!(
        "MULTI queue too large (max {max} bytes); raise --max-multi-bytes"
    ))
}
