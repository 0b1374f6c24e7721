//! The replication state INFO and the metrics endpoint show.

/// One peer, as this replica sees it.
#[derive(Clone, Debug, Default)]
pub struct PeerStatus {
    pub id: u8,
    pub peer_addr: String,
    pub client_addr: String,
    /// An authenticated connection to it is up.
    pub connected_out: bool,
    /// An authenticated connection from it is up.
    pub connected_in: bool,
    /// Milliseconds since a frame came from it (`None`: never).
    pub last_heard_ms: Option<u64>,
    pub reconnects: u64,
    /// Payloads to it dropped: its queue was full, or its connection broke with them.
    pub dropped: u64,
}

/// A copy of the replication state, refreshed by the replication thread after each round.
#[derive(Clone, Debug, Default)]
pub struct Status {
    pub replica: u8,
    pub replicas: u8,
    /// `primary`, `backup`, `candidate` or `elected`.
    pub role: &'static str,
    pub mode: &'static str,
    /// The view, as `counter.leader`.
    pub view: String,
    pub view_counter: u64,
    /// Restarted and not yet caught up from a primary: it neither votes nor campaigns
    /// (`verso_vsr` `replica::recovery`).
    pub recovering: bool,
    /// The primary's client address, when this replica knows which replica leads its view.
    pub primary_client_addr: Option<String>,
    pub op_max: u64,
    pub commit: u64,
    pub dp: u64,
    pub dp_min: u64,
    pub disk_op_max: u64,
    /// The op just before the first one kept in the log (the rest are in a checkpoint).
    pub log_base: u64,
    pub checkpoints: u64,
    pub state_transfers_sent: u64,
    /// Catch-up requests this replica sent (a lagging or diverging backup asks the leader).
    pub catch_ups: u64,
    pub state_transfers_installed: u64,
    pub entries_applied: u64,
    pub entries_undone: u64,
    pub view_changes: u64,
    /// Times this process became primary.
    pub became_primary: u64,
    /// Commits handed to VSR as a primary, and batches.
    pub slots_proposed: u64,
    pub batches_proposed: u64,
    /// Commits installed here and rolled back because they never reached the log.
    pub slots_retracted: u64,
    /// Reads answered as a primary under its read lease, and reads that waited for a round
    /// (no lease held: just elected, or `lease_ms = 0`).
    pub reads_leased: u64,
    pub reads_with_round: u64,
    pub handshakes_rejected: u64,
    pub peers: Vec<PeerStatus>,
    /// What recovery found on disk at start.
    pub recovered_entries: u64,
}
