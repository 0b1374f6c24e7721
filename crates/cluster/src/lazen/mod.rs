//! Online slot moves (the thesis's Lazen, §4.4), as state machines free of I/O.
//!
//! Three parties: the configuration group ([`Config`]), which owns the slot map and the log
//! of moves; the source group and the target group ([`Group`], one type for both roles).
//! Every record below is *synchronous* in its group's log (on a majority's disks before it
//! counts): a lazily written transfer record lost in a total crash could lose a slot.
//!
//! A move of `slots` from S to T:
//! 1. Config logs `Begin`, then asks S (`BeginSend`) and T (`BeginRecv`) until both have
//!    logged theirs. From then on it keeps asking, and their answers report progress.
//! 2. S logs `BeginSend` and **keeps serving** the slots while it streams a snapshot of them
//!    to T in chunks (the thesis refuses every operation from BEGINSEND on; this is the
//!    issue's "do better"). T logs each chunk (`Chunk`) before acknowledging it.
//! 3. When T has acknowledged the whole snapshot, S appends `Freeze` and from then on
//!    answers TRYAGAIN for the slots; once it commits, S sends the last chunk, the keys
//!    written since the snapshot (with their deletions), flagged `last`.
//! 4. T logs that chunk and then `EndRecv`; from `EndRecv`'s commit T serves the slots.
//! 5. T's answer tells Config the data is sealed: Config logs `End` and remaps the slots to T
//!    (the thesis commits END before the data moves; here the map flips once T serves, so
//!    clients that refresh the map are never sent to a group that cannot serve yet).
//! 6. T's seal reaches S (a chunk acknowledgement): S answers ASK to T while it logs
//!    `EndSend`, then deletes the slots' data and answers MOVED to T; Config, told so, logs
//!    `Done`. So a client sees the slots served, then TRYAGAIN, then ASK, then MOVED.
//!
//! Redo after a failover or a total crash: each party rebuilds from its log. Config asks
//! again. A source that had not frozen starts a new *attempt* (a fresh snapshot): T logs
//! `RecvReset` and drops what the earlier attempt sent. A source that had frozen lost its
//! record of what changed since the snapshot, so its new attempt sends everything (nothing
//! changes while frozen). A target waits for chunks.
//!
//! **Invariant (exclusive service):** at any moment at most one group serves a slot: S
//! stops at `Freeze` before it sends the chunk that lets T log `EndRecv`. **Invariant (no
//! loss):** S deletes only after `EndSend`, which follows T's synchronous `EndRecv`.

mod config;
mod group;
pub mod wire;

pub use config::{Config, MoveRefused};
pub use group::{Answer, Group, MapData, SlotData};

use crate::slot::SlotSet;

pub type GroupId = u16;
pub type MoveId = u64;
pub type Key = Vec<u8>;
pub type Value = Vec<u8>;
/// A chunk's entries: a key and its value, `None` for a key deleted since the snapshot.
pub type Entries = Vec<(Key, Option<Value>)>;

/// Entries per chunk (a real transport bounds bytes; the model bounds entries).
pub const CHUNK_ENTRIES: usize = 8;

/// A record in the configuration group's log (all synchronous).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ConfigRecord {
    /// Bootstrap: `slots` belong to `group`.
    Assign { slots: SlotSet, group: GroupId },
    Begin {
        id: MoveId,
        slots: SlotSet,
        from: GroupId,
        to: GroupId,
    },
    /// The slots now map to the target (the map's epoch moves on).
    End { id: MoveId },
    /// The source has deleted its copy.
    Done { id: MoveId },
}

/// A record in a data group's log.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum GroupRecord {
    /// A client's write (lazy: acknowledged once committed, lost in a total crash unless a
    /// synchronous record follows). `None` deletes. `tag` identifies the write for checkers.
    Put {
        key: Key,
        value: Option<Value>,
        tag: u64,
    },
    /// Bootstrap ownership.
    Own {
        slots: SlotSet,
    },
    BeginSend {
        id: MoveId,
        slots: SlotSet,
        to: GroupId,
    },
    /// A source restarted streaming as `attempt` (after a failover or a total crash): attempts
    /// only grow, so the target can tell the new snapshot from the old one's chunks.
    Restream {
        id: MoveId,
        attempt: u32,
    },
    Freeze {
        id: MoveId,
    },
    EndSend {
        id: MoveId,
    },
    BeginRecv {
        id: MoveId,
        slots: SlotSet,
        from: GroupId,
    },
    RecvReset {
        id: MoveId,
        attempt: u32,
    },
    Chunk {
        id: MoveId,
        attempt: u32,
        seq: u32,
        entries: Entries,
        last: bool,
    },
    EndRecv {
        id: MoveId,
    },
}

impl GroupRecord {
    /// Whether the record must be on a majority's disks before it counts. `lazy_transfers`
    /// is the mistake the simulator must catch (transfer records written lazily).
    pub fn synchronous(&self, lazy_transfers: bool) -> bool {
        match self {
            GroupRecord::Put { .. } => false,
            GroupRecord::Own { .. } => true,
            _ => !lazy_transfers,
        }
    }
}

/// Messages between the configuration group and data groups, and between data groups.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Message {
    BeginSend {
        id: MoveId,
        slots: SlotSet,
        to: GroupId,
    },
    BeginRecv {
        id: MoveId,
        slots: SlotSet,
        from: GroupId,
    },
    /// The source's progress: logged `BeginSend`; `ended` once it logged `EndSend`.
    SendStatus { id: MoveId, ended: bool },
    /// The target's progress: logged `BeginRecv`; `sealed` once it logged `EndRecv`.
    RecvStatus { id: MoveId, sealed: bool },
    Chunk {
        id: MoveId,
        attempt: u32,
        seq: u32,
        entries: Entries,
        last: bool,
    },
    /// The target has logged chunks `0..next_seq` of `attempt`; `sealed`: and `EndRecv`.
    ChunkAck {
        id: MoveId,
        attempt: u32,
        next_seq: u32,
        sealed: bool,
    },
}

/// Where a message goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Node {
    Config,
    Group(GroupId),
}

/// What a state machine asks its host to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action<R> {
    /// Append to the own group's log; the host calls `committed` once it commits (or never,
    /// if the group fails first).
    Append(R),
    Send(Node, Message),
}

/// A client request at a data group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request {
    Get(Key),
    Put {
        key: Key,
        value: Option<Value>,
        tag: u64,
    },
}

/// A data group's answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    Value(Option<Value>),
    /// The write is appended; it is acknowledged when the record commits.
    Appended,
    Moved(GroupId),
    Ask(GroupId),
    TryAgain,
}

/// Deliberate mistakes, for showing that the simulator catches each.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Mistakes {
    /// The source keeps serving after `Freeze`.
    pub source_serves_when_frozen: bool,
    /// The target serves (and tells the source it is sealed) once it *appends* `EndRecv`,
    /// before the record commits.
    pub target_serves_before_endrecv: bool,
    /// Transfer records are written lazily.
    pub lazy_transfers: bool,
}

#[cfg(test)]
mod tests;
