//! Authenticated, framed TCP between the replicas of one Lazy VSR group.
//!
//! Replicas exchange opaque payloads: the caller serializes protocol messages, the transport
//! never looks inside them. It runs on std threads and blocking sockets; a group has 3 to 7
//! replicas, so a few threads per peer cost nothing.
//!
//! - **Connections.** A replica sends only on its *outgoing* connection to a peer and receives
//!   only on *incoming* connections accepted from peers, so each ordered pair of replicas uses
//!   one TCP connection and payloads from one replica to another arrive in the order sent (or
//!   not at all). A newer authenticated incoming connection from a peer replaces the older one.
//! - **Frames** (`frame.rs`): `"VSR1" | kind | len | crc32c | payload`, checked field by field
//!   before a byte of payload is buffered.
//! - **Handshake** (`handshake.rs`): mutual HMAC-SHA256 proof of the shared secret over fresh
//!   nonces; until it completes, a connection may only send handshake frames of at most 64 bytes.
//! - **Threads** (`conn.rs`): a sender per peer, one acceptor, a reader per accepted connection.
//!
//! Loss is allowed (the protocol retransmits), blocking is not: [`Transport::send`] never
//! waits. A peer's queue holds at most `queue_frames` payloads and `queue_bytes` bytes; when it
//! is full the *oldest* payloads are dropped, so a peer that comes back after an outage gets the
//! most recent messages, which are the ones a view-stamped protocol has not superseded.
//! A batch being written when a connection breaks is lost too.

mod conn;
mod frame;
mod handshake;

use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::Ordering::{Relaxed, SeqCst};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::Duration;

pub use frame::{
    decode_frame, encode_frame, encode_header, Frame, FrameError, FrameKind, FrameReader,
    FRAME_HEADER_LEN, MAGIC,
};
pub use handshake::PROTOCOL_VERSION;

use conn::{lock, Shared};

pub type ReplicaId = u8;

/// Shortest shared secret accepted: 128 bits.
pub const SECRET_LEN_MIN: usize = 16;

#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct TransportConfig {
    pub me: ReplicaId,
    /// Where this replica accepts peer connections.
    pub listen: SocketAddr,
    /// Every other replica: id and its peer address.
    pub peers: Vec<(ReplicaId, SocketAddr)>,
    /// The cluster's shared secret (at least [`SECRET_LEN_MIN`] bytes). Clusters are told
    /// apart by their secrets: a replica of another cluster fails the handshake.
    pub secret: Vec<u8>,
    /// Largest payload accepted or sent (checked before allocating). Default 64 MiB.
    pub max_payload: u32,
    /// Payloads queued per peer before `send` drops the oldest. Default 4096.
    pub queue_frames: usize,
    /// Bytes queued per peer before `send` drops the oldest. Default 256 MiB.
    pub queue_bytes: u64,
    /// Reconnection backoff: starts at `backoff_min`, doubles to `backoff_max`; back to
    /// `backoff_min` after each successful handshake. Defaults 10 ms and 1 s.
    pub backoff_min: Duration,
    pub backoff_max: Duration,
    /// Handshake must finish within this. Default 2 s.
    pub handshake_timeout: Duration,
    /// A connect attempt gives up after this. Shutdown may wait for one in flight. Default
    /// 500 ms.
    pub connect_timeout: Duration,
    /// A write that makes no progress for this long drops the connection (the peer stopped
    /// reading). Default 5 s.
    pub write_timeout: Duration,
    /// Incoming connections (handshaking or authenticated) open at once; more are closed on
    /// accept. Default 64.
    pub incoming_max: usize,
}

impl TransportConfig {
    pub fn new(
        me: ReplicaId,
        listen: SocketAddr,
        peers: Vec<(ReplicaId, SocketAddr)>,
        secret: Vec<u8>,
    ) -> TransportConfig {
        TransportConfig {
            me,
            listen,
            peers,
            secret,
            max_payload: 64 << 20,
            queue_frames: 4096,
            queue_bytes: 256 << 20,
            backoff_min: Duration::from_millis(10),
            backoff_max: Duration::from_secs(1),
            handshake_timeout: Duration::from_secs(2),
            connect_timeout: Duration::from_millis(500),
            write_timeout: Duration::from_secs(5),
            incoming_max: 64,
        }
    }

    fn validate(&self) -> Result<(), TransportError> {
        if self.secret.len() < SECRET_LEN_MIN {
            return Err(TransportError::SecretTooShort {
                len: self.secret.len(),
            });
        }
        for (i, &(id, _)) in self.peers.iter().enumerate() {
            if id == self.me {
                return Err(TransportError::PeerIsSelf(id));
            }
            if self.peers[..i].iter().any(|&(other, _)| other == id) {
                return Err(TransportError::DuplicatePeer(id));
            }
        }
        let invalid = |what| Err(TransportError::InvalidConfig(what));
        if self.queue_frames == 0 || self.queue_bytes < u64::from(self.max_payload) {
            return invalid("queue_frames must be positive and queue_bytes at least max_payload");
        }
        if self.backoff_min.is_zero() || self.backoff_min > self.backoff_max {
            return invalid("backoff_min must be positive and at most backoff_max");
        }
        if [
            self.handshake_timeout,
            self.connect_timeout,
            self.write_timeout,
        ]
        .iter()
        .any(Duration::is_zero)
        {
            return invalid("timeouts must be positive");
        }
        if self.incoming_max == 0 {
            return invalid("incoming_max must be positive");
        }
        Ok(())
    }
}

/// Why a transport could not start.
#[derive(Debug)]
#[non_exhaustive]
pub enum TransportError {
    SecretTooShort {
        len: usize,
    },
    /// The peer list names this replica itself.
    PeerIsSelf(ReplicaId),
    /// The peer list names a replica twice.
    DuplicatePeer(ReplicaId),
    InvalidConfig(&'static str),
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    /// The listener could not be set up (made non-blocking).
    Listener(std::io::Error),
    /// A thread could not be started.
    Spawn(std::io::Error),
}

impl std::fmt::Display for TransportError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TransportError::SecretTooShort { len } => write!(
                f,
                "the cluster secret has {len} bytes; at least {SECRET_LEN_MIN} are required"
            ),
            TransportError::PeerIsSelf(id) => {
                write!(f, "replica {id} is listed as its own peer")
            }
            TransportError::DuplicatePeer(id) => write!(f, "peer {id} is listed twice"),
            TransportError::InvalidConfig(what) => write!(f, "invalid transport config: {what}"),
            TransportError::Bind { addr, source } => {
                write!(f, "cannot listen for replicas on {addr}: {source}")
            }
            TransportError::Listener(e) => write!(f, "cannot set up the replica listener: {e}"),
            TransportError::Spawn(e) => write!(f, "cannot start a transport thread: {e}"),
        }
    }
}

impl std::error::Error for TransportError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            TransportError::Bind { source: e, .. }
            | TransportError::Listener(e)
            | TransportError::Spawn(e) => Some(e),
            _ => None,
        }
    }
}

/// One peer as the transport sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct PeerState {
    pub id: ReplicaId,
    pub addr: SocketAddr,
    /// An authenticated outgoing connection (ours to them) is up.
    pub connected_out: bool,
    /// An authenticated incoming connection (theirs to us) is up.
    pub connected_in: bool,
    pub frames_sent: u64,
    /// Of `frames_sent`, those written straight from the caller's thread (the sender thread
    /// was idle and the socket took them without blocking).
    pub frames_sent_direct: u64,
    pub frames_received: u64,
    /// Payloads dropped: queue full, too large, or lost with a broken connection.
    pub frames_dropped: u64,
    /// Outgoing connections established after the first.
    pub reconnects: u64,
    /// The last error with this peer: why the outgoing connection failed, or the corrupt or
    /// unexpected frame that closed its incoming one.
    pub last_error: Option<String>,
    /// Time since the last frame from this peer arrived, if one ever did.
    pub last_received: Option<Duration>,
}

/// Connections turned away, for INFO.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct TransportStats {
    /// Handshakes refused for any reason below except `handshakes_incomplete`: the sum of
    /// `handshakes_bad_mac`, `handshakes_bad_version`, `handshakes_unknown_replica` and
    /// `handshakes_malformed`.
    pub handshakes_rejected: u64,
    /// Handshakes whose MAC did not verify (either side): another cluster or a wrong secret.
    pub handshakes_bad_mac: u64,
    /// Handshakes from a peer speaking another protocol version.
    pub handshakes_bad_version: u64,
    /// Handshakes from a replica id not configured as a peer, or addressed to another replica.
    pub handshakes_unknown_replica: u64,
    /// Connections that sent something other than the expected handshake frame (a stranger,
    /// garbage, a huge length, Data before authenticating).
    pub handshakes_malformed: u64,
    /// Incoming connections that closed or timed out before finishing the handshake.
    pub handshakes_incomplete: u64,
    /// Authenticated connections closed for a corrupt or unexpected frame.
    pub frames_rejected: u64,
    /// Incoming connections closed on accept because `incoming_max` were open.
    pub incoming_refused: u64,
    /// `send` calls naming a replica that is not a peer.
    pub sends_unknown_peer: u64,
}

/// The running transport. Dropping it shuts it down (see [`Transport::shutdown`]).
pub struct Transport {
    shared: Arc<Shared>,
    /// Invariant: empty once shut down (the acceptor joins the readers it started).
    threads: Vec<JoinHandle<()>>,
    local_addr: SocketAddr,
}

impl Transport {
    /// Binds `config.listen` and starts (see [`Transport::start_with_listener`]).
    pub fn start(
        config: TransportConfig,
        deliver: impl Fn(ReplicaId, Vec<u8>) + Send + Sync + 'static,
    ) -> Result<Transport, TransportError> {
        config.validate()?;
        let listener = TcpListener::bind(config.listen).map_err(|source| TransportError::Bind {
            addr: config.listen,
            source,
        })?;
        Transport::start_with_listener(config, listener, deliver)
    }

    /// Starts one sender thread per peer and an acceptor on `listener` (`config.listen` is not
    /// used). Every payload from an authenticated peer goes to `deliver(from, payload)`, called
    /// on transport threads, in order per peer; it should return quickly (push into a channel),
    /// and must not drop the `Transport`.
    pub fn start_with_listener(
        config: TransportConfig,
        listener: TcpListener,
        deliver: impl Fn(ReplicaId, Vec<u8>) + Send + Sync + 'static,
    ) -> Result<Transport, TransportError> {
        config.validate()?;
        let auth = handshake::Authenticator::new(&config.secret).ok_or(
            TransportError::InvalidConfig("secret not usable as an HMAC key"),
        )?;
        listener
            .set_nonblocking(true)
            .map_err(TransportError::Listener)?;
        let local_addr = listener.local_addr().map_err(TransportError::Listener)?;
        let shared = Arc::new(Shared::new(config, auth, Box::new(deliver)));
        // Threads started before a failure are stopped by `Drop`.
        let mut transport = Transport {
            shared: Arc::clone(&shared),
            threads: Vec::new(),
            local_addr,
        };
        let acceptor_shared = Arc::clone(&shared);
        transport.spawn("vsr-accept".into(), move || {
            conn::run_acceptor(acceptor_shared, listener)
        })?;
        for (index, peer) in shared.peers.iter().enumerate() {
            let sender_shared = Arc::clone(&shared);
            transport.spawn(format!("vsr-send-{}", peer.id), move || {
                conn::run_sender(sender_shared, index)
            })?;
        }
        Ok(transport)
    }

    fn spawn(
        &mut self,
        name: String,
        body: impl FnOnce() + Send + 'static,
    ) -> Result<(), TransportError> {
        let handle = thread::Builder::new()
            .name(name)
            .spawn(body)
            .map_err(TransportError::Spawn)?;
        self.threads.push(handle);
        Ok(())
    }

    /// The address the listener is bound to (useful with port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Queues `payload` for `to` and returns at once. Drops it (and counts) when `to` is not a
    /// peer or the payload exceeds `max_payload`; drops the oldest queued payloads (and counts)
    /// to make room when the queue is full.
    pub fn send(&self, to: ReplicaId, payload: Vec<u8>) {
        send_on(&self.shared, to, payload);
    }

    /// A handle that sends from another thread (a state transfer's stream).
    pub fn handle(&self) -> TransportHandle {
        TransportHandle {
            shared: Arc::clone(&self.shared),
        }
    }

    pub fn peer_states(&self) -> Vec<PeerState> {
        let shared = &*self.shared;
        let now = shared.epoch.elapsed();
        let peers = shared.peers.iter().map(|p| PeerState {
            id: p.id,
            addr: p.addr,
            connected_out: p.outgoing_up.load(SeqCst),
            connected_in: p.incoming_up.load(SeqCst),
            frames_sent: p.sent.load(Relaxed),
            frames_sent_direct: p.sent_direct.load(Relaxed),
            frames_received: p.received.load(Relaxed),
            frames_dropped: p.dropped.load(Relaxed),
            reconnects: p.reconnects.load(Relaxed),
            last_error: lock(&p.last_error).clone(),
            last_received: match p.last_received.load(Relaxed) {
                0 => None,
                at => Some(now.saturating_sub(Duration::from_nanos(at - 1))),
            },
        });
        peers.collect()
    }

    pub fn stats(&self) -> TransportStats {
        let c = &self.shared.counters;
        let mut stats = TransportStats {
            handshakes_rejected: 0,
            handshakes_bad_mac: c.rejected_mac.load(Relaxed),
            handshakes_bad_version: c.rejected_version.load(Relaxed),
            handshakes_unknown_replica: c.rejected_replica.load(Relaxed),
            handshakes_malformed: c.malformed.load(Relaxed),
            handshakes_incomplete: c.incomplete.load(Relaxed),
            frames_rejected: c.frames_rejected.load(Relaxed),
            incoming_refused: c.incoming_refused.load(Relaxed),
            sends_unknown_peer: c.sends_unknown_peer.load(Relaxed),
        };
        stats.handshakes_rejected = stats.handshakes_bad_mac
            + stats.handshakes_bad_version
            + stats.handshakes_unknown_replica
            + stats.handshakes_malformed;
        stats
    }

    /// Closes every connection and the listener, and joins every thread. Returns within about
    /// 200 ms (the tick on which every blocked thread checks for shutdown), or within
    /// `connect_timeout` if a connect is in flight. Queued payloads are dropped; `deliver` is
    /// not called after this returns.
    pub fn shutdown(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        if self.threads.is_empty() {
            return;
        }
        self.shared.begin_shutdown();
        for handle in self.threads.drain(..) {
            // A panicked thread has nothing left to clean up; its panic was already reported.
            let _ = handle.join();
        }
        assert!(self.threads.is_empty());
    }
}

impl Drop for Transport {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A cloneable sender of payloads: [`Transport::send`] from any thread.
#[derive(Clone)]
pub struct TransportHandle {
    shared: Arc<Shared>,
}

impl TransportHandle {
    /// As [`Transport::send`].
    pub fn send(&self, to: ReplicaId, payload: Vec<u8>) {
        send_on(&self.shared, to, payload);
    }

    /// Bytes queued for `to` and not yet handed to its socket (0 for an unknown peer).
    pub fn queued_bytes(&self, to: ReplicaId) -> u64 {
        self.shared.peer(to).map_or(0, |p| lock(&p.queue).bytes)
    }
}

fn send_on(shared: &Shared, to: ReplicaId, payload: Vec<u8>) {
    let Some(peer) = shared.peer(to) else {
        shared.counters.sends_unknown_peer.fetch_add(1, Relaxed);
        return;
    };
    let len = payload.len() as u64;
    if len > u64::from(shared.config.max_payload) {
        peer.dropped.fetch_add(1, Relaxed);
        tracing::warn!(peer = to, len, "payload exceeds max_payload; dropped");
        return;
    }
    let mut queue = lock(&peer.queue);
    let was_idle = queue.is_idle();
    let payload = if was_idle {
        match peer.try_direct(&mut queue, payload) {
            Ok(()) => return,
            Err(payload) => payload,
        }
    } else {
        payload
    };
    let mut evicted = 0;
    while queue.frames.len() >= shared.config.queue_frames
        || queue.bytes + len > shared.config.queue_bytes
    {
        // Terminates: `len <= max_payload <= queue_bytes` (validated), so an empty queue
        // has room.
        let Some(old) = queue.frames.pop_front() else {
            break;
        };
        queue.bytes -= old.len() as u64;
        evicted += 1;
    }
    queue.bytes += len;
    queue.frames.push_back(payload);
    assert!(queue.frames.len() <= shared.config.queue_frames);
    assert!(queue.bytes <= shared.config.queue_bytes);
    drop(queue);
    if evicted > 0 {
        peer.dropped.fetch_add(evicted, Relaxed);
    }
    // The sender waits only on an idle queue, so only that transition needs a wake-up.
    if was_idle {
        peer.ready.notify_one();
    }
}
