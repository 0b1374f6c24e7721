//! The threads behind [`super::Transport`] and the state they share.
//!
//! - One sender per peer: connect, handshake, then drain the peer's queue into the socket in
//!   batches; on any error, back off and reconnect.
//! - One acceptor: polls the listener and starts a reader per accepted connection (at most
//!   `incoming_max` at once).
//! - One reader per accepted connection: handshake as acceptor, then deliver Data frames.
//!
//! Invariant: every blocking call is bounded, so shutdown is noticed within [`TICK`] (or
//! `connect_timeout` for a connect in flight): reads time out every [`TICK`], sockets are shut
//! down by [`Shared::begin_shutdown`], and waits are on condvars it notifies.

use std::collections::{HashMap, VecDeque};
use std::io::{self, BufWriter, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed, Ordering::SeqCst};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use super::frame::{encode_frame, encode_header, Frame, FrameError, FrameKind, FrameReader};
use super::handshake::{self, Authenticator};
use super::{ReplicaId, TransportConfig};

/// How often a blocked thread looks up to check for shutdown (and a sender for a closed peer).
pub(super) const TICK: Duration = Duration::from_millis(200);
/// How often the acceptor polls its non-blocking listener.
const ACCEPT_POLL: Duration = Duration::from_millis(20);
/// A sender's write buffer: small frames are gathered up to this, larger ones go out directly.
const WRITE_BUFFER_BYTES: usize = 256 * 1024;

/// A lock that survives a panicking holder: every value behind these locks is valid after any
/// partial update (queues, counters, optional sockets), so poisoning carries no meaning here.
pub(super) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Why one connection ended. Internal: it becomes a log line, a counter and `last_error`.
#[derive(Debug)]
pub(super) enum ConnError {
    Io(io::Error),
    Closed,
    Frame(FrameError),
    HandshakeTimeout,
    Shutdown,
    Unexpected {
        expected: FrameKind,
        got: FrameKind,
    },
    Malformed(&'static str),
    BadMac,
    Version {
        theirs: u16,
    },
    UnknownReplica {
        from: ReplicaId,
        to: ReplicaId,
    },
    Random(getrandom::Error),
    /// The peer wrote on a connection where only we write.
    Unsolicited,
}

impl std::fmt::Display for ConnError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConnError::Io(e) => write!(f, "{e}"),
            ConnError::Closed => f.write_str("connection closed by the other end"),
            ConnError::Frame(e) => write!(f, "{e}"),
            ConnError::HandshakeTimeout => f.write_str("handshake did not finish in time"),
            ConnError::Shutdown => f.write_str("transport shutting down"),
            ConnError::Unexpected { expected, got } => {
                write!(f, "expected a {expected:?} frame, got {got:?}")
            }
            ConnError::Malformed(what) => write!(f, "malformed {what}"),
            ConnError::BadMac => f.write_str(
                "handshake MAC does not verify: the other end does not hold this cluster's secret",
            ),
            ConnError::Version { theirs } => write!(
                f,
                "peer speaks replication protocol version {theirs}, this build speaks {}",
                handshake::PROTOCOL_VERSION
            ),
            ConnError::UnknownReplica { from, to } => write!(
                f,
                "connection claims to be replica {from} calling replica {to}, which this \
                 replica's configuration does not match"
            ),
            ConnError::Random(e) => write!(f, "no randomness for a nonce: {e}"),
            ConnError::Unsolicited => f.write_str("peer wrote on our outgoing connection"),
        }
    }
}

impl From<io::Error> for ConnError {
    fn from(e: io::Error) -> ConnError {
        ConnError::Io(e)
    }
}

impl From<FrameError> for ConnError {
    fn from(e: FrameError) -> ConnError {
        ConnError::Frame(e)
    }
}

/// Transport-wide counters (see [`super::TransportStats`]).
#[derive(Default)]
pub(super) struct Counters {
    pub rejected_mac: AtomicU64,
    pub rejected_version: AtomicU64,
    pub rejected_replica: AtomicU64,
    pub malformed: AtomicU64,
    pub incomplete: AtomicU64,
    pub frames_rejected: AtomicU64,
    pub incoming_refused: AtomicU64,
    pub sends_unknown_peer: AtomicU64,
}

/// Payloads waiting for a peer's sender.
///
/// Invariants: `frames.len() <= queue_frames`; `bytes` is the sum of their lengths and
/// `<= queue_bytes`.
#[derive(Default)]
pub(super) struct Queue {
    pub frames: VecDeque<Vec<u8>>,
    pub bytes: u64,
    /// The unwritten end of a frame a direct send wrote only in part ([`Peer::try_direct`]):
    /// the sender writes it before anything else, or the stream would be corrupt. Never
    /// evicted (it is not counted in `frames` or `bytes`).
    pub rest: Option<Vec<u8>>,
}

impl Queue {
    /// Whether the sender has nothing to write.
    pub fn is_idle(&self) -> bool {
        self.frames.is_empty() && self.rest.is_none()
    }
}

/// The socket of the sender's current connection, for sends made straight from the caller's
/// thread ([`Peer::try_direct`]). Whoever writes to the socket holds this lock, and takes it
/// while holding the queue's lock (queue, then wire), so frames leave in the order they were
/// sent.
#[derive(Default)]
pub(super) struct Wire {
    /// A clone of the connected, authenticated stream; `None` while there is none.
    pub stream: Option<TcpStream>,
}

/// The authenticated incoming connection from a peer, if any.
///
/// Invariant: `generation` grows by one per authenticated connection; only the reader of the
/// current generation delivers, and it delivers while holding this lock, so a replaced
/// connection's frames can never be delivered after its successor's.
#[derive(Default)]
pub(super) struct Incoming {
    pub generation: u64,
    pub stream: Option<TcpStream>,
}

pub(super) struct Peer {
    pub id: ReplicaId,
    pub addr: SocketAddr,
    pub queue: Mutex<Queue>,
    /// Signalled when `queue` goes from idle to not, and on shutdown.
    pub ready: Condvar,
    pub wire: Mutex<Wire>,
    pub incoming: Mutex<Incoming>,
    pub outgoing_up: AtomicBool,
    pub incoming_up: AtomicBool,
    pub sent: AtomicU64,
    pub sent_direct: AtomicU64,
    pub received: AtomicU64,
    pub dropped: AtomicU64,
    pub reconnects: AtomicU64,
    /// Nanoseconds after `Shared::epoch` of the last frame received, plus one; 0 for never.
    pub last_received: AtomicU64,
    pub last_error: Mutex<Option<String>>,
    /// Set when the peer connected to us: it is up again, so the sender stops backing off
    /// and connects at once (a restarted replica would otherwise wait up to `backoff_max`
    /// to hear anything, and stays out of elections until it does).
    pub retry_now: AtomicBool,
}

impl Peer {
    pub fn new(id: ReplicaId, addr: SocketAddr) -> Peer {
        Peer {
            id,
            addr,
            queue: Mutex::default(),
            ready: Condvar::new(),
            wire: Mutex::default(),
            incoming: Mutex::default(),
            outgoing_up: AtomicBool::new(false),
            incoming_up: AtomicBool::new(false),
            sent: AtomicU64::new(0),
            sent_direct: AtomicU64::new(0),
            received: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
            reconnects: AtomicU64::new(0),
            last_received: AtomicU64::new(0),
            retry_now: AtomicBool::new(false),
            last_error: Mutex::new(None),
        }
    }

    fn set_error(&self, error: &ConnError) {
        *lock(&self.last_error) = Some(error.to_string());
    }

    /// Writes `payload` as one frame straight into the socket, without waking the sender
    /// thread, if the sender is connected and idle (`queue` is the peer's queue, locked, and
    /// idle) and the socket takes the frame without blocking. Returns the payload back if not
    /// (the caller queues it). A frame written in part leaves its end in `queue.rest` for
    /// the sender. Under load a primary sends one PREPARE per peer per round, and a backup
    /// one PREPAREOK: each hand-off to a sender thread was a wake-up and a context switch.
    pub fn try_direct(&self, queue: &mut Queue, payload: Vec<u8>) -> Result<(), Vec<u8>> {
        debug_assert!(queue.is_idle());
        // The sender holds the wire only while it writes, and it takes it while holding the
        // queue: busy now means it is writing frames queued before this one.
        let Ok(wire) = self.wire.try_lock() else {
            return Err(payload);
        };
        let Some(stream) = wire.stream.as_ref() else {
            return Err(payload);
        };
        let mut frame = Vec::with_capacity(super::frame::FRAME_HEADER_LEN + payload.len());
        frame.extend_from_slice(&encode_header(FrameKind::Data, &payload));
        frame.extend_from_slice(&payload);
        match send_now(stream, &frame) {
            Ok(0) | Err(_) => Err(payload),
            Ok(n) => {
                if n < frame.len() {
                    frame.drain(..n);
                    queue.rest = Some(frame);
                    self.ready.notify_one();
                }
                self.sent.fetch_add(1, Relaxed);
                self.sent_direct.fetch_add(1, Relaxed);
                Ok(())
            }
        }
    }
}

/// Sends what the socket takes of `bytes` at once, never blocking (whatever the socket's own
/// mode, which the sender's `check_open` changes under it).
fn send_now(stream: &TcpStream, bytes: &[u8]) -> io::Result<usize> {
    use std::os::fd::AsRawFd;
    // SAFETY: `bytes` is a live slice of `bytes.len()` readable bytes for the whole call, and
    // the descriptor belongs to `stream`, borrowed (so open) for the whole call.
    let n = unsafe {
        libc::send(
            stream.as_raw_fd(),
            bytes.as_ptr().cast(),
            bytes.len(),
            libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
        )
    };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n as usize)
}

pub(super) type Deliver = Box<dyn Fn(ReplicaId, Vec<u8>) + Send + Sync>;

pub(super) struct Shared {
    pub config: TransportConfig,
    pub auth: Authenticator,
    pub peers: Vec<Peer>,
    pub counters: Counters,
    pub deliver: Deliver,
    pub epoch: Instant,
    stopping: AtomicBool,
    /// Mirrors `stopping`, for interruptible sleeps.
    stopped: Mutex<bool>,
    wake: Condvar,
    /// Every open socket (handshaking or not), so shutdown can unblock whoever uses it.
    live: Mutex<HashMap<u64, TcpStream>>,
    next_conn: AtomicU64,
}

impl Shared {
    pub fn new(config: TransportConfig, auth: Authenticator, deliver: Deliver) -> Shared {
        let peers = config
            .peers
            .iter()
            .map(|&(id, addr)| Peer::new(id, addr))
            .collect();
        Shared {
            config,
            auth,
            peers,
            counters: Counters::default(),
            deliver,
            epoch: Instant::now(),
            stopping: AtomicBool::new(false),
            stopped: Mutex::new(false),
            wake: Condvar::new(),
            live: Mutex::default(),
            next_conn: AtomicU64::new(0),
        }
    }

    pub fn peer(&self, id: ReplicaId) -> Option<&Peer> {
        self.peers.iter().find(|p| p.id == id)
    }

    pub fn stopping(&self) -> bool {
        self.stopping.load(SeqCst)
    }

    /// Sleeps for `d` unless shutdown comes first (then false) or `peer` connected to us
    /// meanwhile (`Peer::retry_now`).
    fn sleep(&self, d: Duration, peer: &Peer) -> bool {
        let stopped = lock(&self.stopped);
        let (stopped, _) = self
            .wake
            .wait_timeout_while(stopped, d, |stopped| {
                !*stopped && !peer.retry_now.load(SeqCst)
            })
            .unwrap_or_else(PoisonError::into_inner);
        !*stopped
    }

    /// `peer` connected to us: wakes its sender if it is backing off.
    fn peer_is_back(&self, peer: &Peer) {
        peer.retry_now.store(true, SeqCst);
        // Under the lock the sleeper checks its predicate with: the wake is not lost.
        let _stopped = lock(&self.stopped);
        self.wake.notify_all();
    }

    /// Makes every thread return soon: flags, wakes waiters, shuts every socket down.
    pub fn begin_shutdown(&self) {
        self.stopping.store(true, SeqCst);
        *lock(&self.stopped) = true;
        self.wake.notify_all();
        for peer in &self.peers {
            // Taking the lock orders this after a sender's check of `stopping`, so it waits on
            // the condvar already (and is woken) or sees the flag.
            let _queue = lock(&peer.queue);
            peer.ready.notify_all();
        }
        for stream in lock(&self.live).values() {
            let _ = stream.shutdown(Shutdown::Both);
        }
    }

    /// Records `stream` for shutdown; refused once shutdown began (checked under the same lock
    /// `begin_shutdown` sweeps, so no socket escapes the sweep).
    fn register(self: &Arc<Self>, stream: &TcpStream) -> Result<LiveGuard, ConnError> {
        let clone = stream.try_clone()?;
        let id = self.next_conn.fetch_add(1, Relaxed);
        let mut live = lock(&self.live);
        if self.stopping() {
            return Err(ConnError::Shutdown);
        }
        live.insert(id, clone);
        Ok(LiveGuard {
            shared: Arc::clone(self),
            id,
        })
    }

    fn since_epoch(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX - 1)
    }
}

/// Removes a socket from `Shared::live` when its connection ends.
struct LiveGuard {
    shared: Arc<Shared>,
    id: u64,
}

impl Drop for LiveGuard {
    fn drop(&mut self) {
        lock(&self.shared.live).remove(&self.id);
    }
}

/// One connection: the socket, its read buffer, and its place in the shutdown registry.
pub(super) struct Link {
    stream: TcpStream,
    reader: FrameReader,
    _live: LiveGuard,
}

impl Link {
    fn new(shared: &Arc<Shared>, stream: TcpStream) -> Result<Link, ConnError> {
        let live = shared.register(&stream)?;
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(TICK))?;
        stream.set_write_timeout(Some(shared.config.handshake_timeout))?;
        Ok(Link {
            stream,
            reader: FrameReader::new(),
            _live: live,
        })
    }

    pub fn write_frame(&mut self, kind: FrameKind, payload: &[u8]) -> Result<(), ConnError> {
        let mut out = Vec::with_capacity(super::frame::FRAME_HEADER_LEN + payload.len());
        encode_frame(kind, payload, &mut out);
        self.stream.write_all(&out)?;
        Ok(())
    }

    /// The next frame, waiting for bytes until `deadline` (if any) or shutdown.
    pub fn read_frame(
        &mut self,
        shared: &Shared,
        max_payload: u32,
        deadline: Option<Instant>,
    ) -> Result<Frame, ConnError> {
        loop {
            if let Some(frame) = self.reader.next_frame(max_payload)? {
                return Ok(frame);
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Err(ConnError::HandshakeTimeout);
            }
            self.fill(shared, max_payload)?;
        }
    }

    /// One read; a timeout is not an error (the caller loops), but shutdown is.
    fn fill(&mut self, shared: &Shared, max_payload: u32) -> Result<(), ConnError> {
        if shared.stopping() {
            return Err(ConnError::Shutdown);
        }
        let result = self.reader.fill(&mut self.stream, max_payload);
        if shared.stopping() {
            // Shutdown closed the socket under us: not the peer's doing.
            return Err(ConnError::Shutdown);
        }
        match result {
            Ok(0) => Err(ConnError::Closed),
            Ok(_) => Ok(()),
            Err(e) if is_timeout(&e) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}

fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
    )
}

/// The sender thread for `shared.peers[index]`.
pub(super) fn run_sender(shared: Arc<Shared>, index: usize) {
    let peer = &shared.peers[index];
    let mut backoff = shared.config.backoff_min;
    let mut connected_before = false;
    let mut was_failing = false;
    while !shared.stopping() {
        let result = connect(&shared, peer).and_then(|link| {
            backoff = shared.config.backoff_min;
            if connected_before {
                peer.reconnects.fetch_add(1, Relaxed);
            }
            connected_before = true;
            was_failing = false;
            tracing::info!(peer = peer.id, addr = %peer.addr, "replication link up");
            peer.outgoing_up.store(true, SeqCst);
            let result = link
                .stream
                .try_clone()
                .map_err(ConnError::from)
                .and_then(|clone| {
                    lock(&peer.wire).stream = Some(clone);
                    let result = pump(&shared, peer, link);
                    // Queue, then wire. The end of a frame written in part belongs to this
                    // connection: on the next it would corrupt the stream (lost instead).
                    let mut queue = lock(&peer.queue);
                    if queue.rest.take().is_some() {
                        peer.dropped.fetch_add(1, Relaxed);
                    }
                    lock(&peer.wire).stream = None;
                    result
                });
            peer.outgoing_up.store(false, SeqCst);
            result
        });
        let Err(error) = result else { continue };
        if shared.stopping() {
            break;
        }
        match &error {
            ConnError::BadMac => shared.counters.rejected_mac.fetch_add(1, Relaxed),
            ConnError::Frame(_) | ConnError::Unexpected { .. } | ConnError::Malformed(_) => {
                shared.counters.malformed.fetch_add(1, Relaxed)
            }
            _ => 0,
        };
        if was_failing {
            tracing::debug!(peer = peer.id, addr = %peer.addr, %error, "reconnect failed");
        } else {
            tracing::warn!(peer = peer.id, addr = %peer.addr, %error, "replication link down");
        }
        was_failing = true;
        peer.set_error(&error);
        if !shared.sleep(backoff, peer) {
            break;
        }
        backoff = if peer.retry_now.swap(false, SeqCst) {
            shared.config.backoff_min
        } else {
            (backoff * 2).min(shared.config.backoff_max)
        };
    }
}

fn connect(shared: &Arc<Shared>, peer: &Peer) -> Result<Link, ConnError> {
    let stream = TcpStream::connect_timeout(&peer.addr, shared.config.connect_timeout)?;
    let mut link = Link::new(shared, stream)?;
    handshake::connect(&mut link, shared, peer.id)?;
    link.stream
        .set_write_timeout(Some(shared.config.write_timeout))?;
    Ok(link)
}

/// Moves the peer's queue into the socket until an error or shutdown.
///
/// A batch that fails to write is lost (the protocol tolerates loss) and counted as dropped,
/// although the peer may have received part of it.
fn pump(shared: &Shared, peer: &Peer, link: Link) -> Result<(), ConnError> {
    let mut out = BufWriter::with_capacity(WRITE_BUFFER_BYTES, &link.stream);
    let mut batch = VecDeque::new();
    loop {
        assert!(batch.is_empty());
        let (_wire, rest) = {
            let mut queue = lock(&peer.queue);
            while queue.is_idle() {
                if shared.stopping() {
                    return Err(ConnError::Shutdown);
                }
                let (guard, timeout) = peer
                    .ready
                    .wait_timeout(queue, TICK)
                    .unwrap_or_else(PoisonError::into_inner);
                queue = guard;
                if timeout.timed_out() && queue.is_idle() {
                    drop(queue);
                    check_open(&link.stream)?;
                    queue = lock(&peer.queue);
                }
            }
            // Queue, then wire (`Wire`): no direct send can slip in ahead of this batch.
            let wire = lock(&peer.wire);
            std::mem::swap(&mut batch, &mut queue.frames);
            queue.bytes = 0;
            (wire, queue.rest.take())
        };
        let count = batch.len() as u64;
        let written = rest
            .map_or(Ok(()), |rest| out.write_all(&rest))
            .and_then(|()| {
                batch.drain(..).try_for_each(|payload| {
                    out.write_all(&encode_header(FrameKind::Data, &payload))?;
                    out.write_all(&payload)
                })
            });
        match written.and_then(|()| out.flush()) {
            Ok(()) => peer.sent.fetch_add(count, Relaxed),
            Err(e) => {
                peer.dropped.fetch_add(count, Relaxed);
                return Err(e.into());
            }
        };
    }
}

/// Whether the peer closed our outgoing connection while we had nothing to say: the acceptor
/// never writes after its Challenge, so readable means closed (or misbehaving).
fn check_open(stream: &TcpStream) -> Result<(), ConnError> {
    stream.set_nonblocking(true)?;
    let peeked = stream.peek(&mut [0; 1]);
    stream.set_nonblocking(false)?;
    match peeked {
        Ok(0) => Err(ConnError::Closed),
        Ok(_) => Err(ConnError::Unsolicited),
        Err(e) if is_timeout(&e) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// The acceptor thread: owns the listener (closed when it returns) and joins its readers.
pub(super) fn run_acceptor(shared: Arc<Shared>, listener: TcpListener) {
    let mut readers: Vec<JoinHandle<()>> = Vec::new();
    while !shared.stopping() {
        let stream = match listener.accept() {
            Ok((stream, _)) => stream,
            Err(e) => {
                if !is_timeout(&e) {
                    // E.g. out of file descriptors: wait rather than spin.
                    tracing::warn!(error = %e, "accepting a replication connection failed");
                }
                thread::sleep(ACCEPT_POLL);
                continue;
            }
        };
        readers.retain(|r| !r.is_finished());
        if readers.len() >= shared.config.incoming_max {
            shared.counters.incoming_refused.fetch_add(1, Relaxed);
            tracing::warn!(
                limit = shared.config.incoming_max,
                "too many replication connections; refusing one"
            );
            continue;
        }
        let reader_shared = Arc::clone(&shared);
        let spawned = thread::Builder::new()
            .name("vsr-recv".into())
            .spawn(move || run_reader(reader_shared, stream));
        match spawned {
            Ok(handle) => readers.push(handle),
            Err(e) => tracing::warn!(error = %e, "cannot start a replication reader thread"),
        }
    }
    for reader in readers {
        let _ = reader.join();
    }
}

fn run_reader(shared: Arc<Shared>, stream: TcpStream) {
    let peer_addr = stream.peer_addr().ok();
    let result = stream
        .set_nonblocking(false)
        .map_err(ConnError::from)
        .and_then(|()| Link::new(&shared, stream))
        .and_then(|mut link| {
            let from = handshake::accept(&mut link, &shared)
                .inspect_err(|e| count_rejection(&shared, e))?;
            receive(&shared, from, link)
        });
    match result {
        Err(ConnError::Shutdown) | Ok(()) => {}
        Err(error) => tracing::warn!(addr = ?peer_addr, %error, "replication connection closed"),
    }
}

fn count_rejection(shared: &Shared, error: &ConnError) {
    let counter = match error {
        ConnError::BadMac => &shared.counters.rejected_mac,
        ConnError::Version { .. } => &shared.counters.rejected_version,
        ConnError::UnknownReplica { .. } => &shared.counters.rejected_replica,
        ConnError::Frame(_) | ConnError::Unexpected { .. } | ConnError::Malformed(_) => {
            &shared.counters.malformed
        }
        ConnError::Shutdown => return,
        _ => &shared.counters.incomplete,
    };
    counter.fetch_add(1, Relaxed);
}

/// Delivers Data frames from the authenticated peer `from` until the connection ends or a newer
/// one from the same peer replaces it.
fn receive(shared: &Shared, from: ReplicaId, mut link: Link) -> Result<(), ConnError> {
    let peer = shared.peer(from).ok_or(ConnError::UnknownReplica {
        from,
        to: shared.config.me,
    })?;
    link.stream
        .set_write_timeout(Some(shared.config.write_timeout))?;
    let generation = {
        let mut incoming = lock(&peer.incoming);
        if let Some(old) = incoming.stream.take() {
            let _ = old.shutdown(Shutdown::Both);
        }
        incoming.generation += 1;
        incoming.stream = Some(link.stream.try_clone()?);
        peer.incoming_up.store(true, SeqCst);
        incoming.generation
    };
    if !peer.outgoing_up.load(SeqCst) {
        shared.peer_is_back(peer);
    }
    tracing::info!(peer = from, "replication peer connected");
    let result = deliver_loop(shared, peer, generation, &mut link);
    let mut incoming = lock(&peer.incoming);
    if incoming.generation != generation {
        tracing::debug!(
            peer = from,
            "replication connection replaced by a newer one"
        );
        return Ok(());
    }
    incoming.stream = None;
    peer.incoming_up.store(false, SeqCst);
    drop(incoming);
    if let Err(error @ (ConnError::Frame(_) | ConnError::Unexpected { .. })) = &result {
        shared.counters.frames_rejected.fetch_add(1, Relaxed);
        peer.set_error(error);
    }
    result
}

fn deliver_loop(
    shared: &Shared,
    peer: &Peer,
    generation: u64,
    link: &mut Link,
) -> Result<(), ConnError> {
    let max = shared.config.max_payload;
    let mut batch = Vec::new();
    loop {
        // Decode everything already read, deliver the good frames even if a bad one follows.
        let decoded = loop {
            match link.reader.next_frame(max) {
                Ok(Some(frame)) if frame.kind == FrameKind::Data => batch.push(frame.payload),
                Ok(Some(frame)) => {
                    break Err(ConnError::Unexpected {
                        expected: FrameKind::Data,
                        got: frame.kind,
                    })
                }
                Ok(None) => break Ok(()),
                Err(e) => break Err(ConnError::Frame(e)),
            }
        };
        if !batch.is_empty() {
            let incoming = lock(&peer.incoming);
            if incoming.generation != generation {
                return Err(ConnError::Closed);
            }
            peer.received.fetch_add(batch.len() as u64, Relaxed);
            peer.last_received.store(shared.since_epoch() + 1, Relaxed);
            for payload in batch.drain(..) {
                (shared.deliver)(peer.id, payload);
            }
            drop(incoming);
        }
        decoded?;
        link.fill(shared, max)?;
    }
}
