//! One worker thread: a poll loop over many connections (edge-triggered, so every readable
//! socket is read until it is drained). Each read is parsed at once and every complete request
//! in it answered in order (pipelining); the replies to one read go out in one write, as far
//! as the socket takes them, and the rest when it becomes writable. The protocol itself is
//! [`Session`], free of I/O.
//!
//! System calls per request are most of a request's cost, so a read shorter than the buffer
//! counts as draining the socket (no second read to see `WouldBlock`): with edge-triggered
//! polling, bytes arriving after it raise a new event. The exception is a peer that already
//! closed (its FIN came with the event, and no new edge will follow): that socket is read to
//! the end.
//!
//! Durability: a reply whose commit is not on disk yet is *held*, with every later reply of
//! its connection (replies stay in order), until the log reports the commit durable; the
//! worker serves other connections meanwhile and is woken by the log ([`Wake`]). If the log
//! fails instead, a connection with held replies is closed: those writes were never
//! acknowledged. A replicated server holds replies the same way until VSR commits them
//! (`verso_replication::Ticket`), and closes the connection if this replica stops being
//! primary first.
//!
//! Relays: on a backup, a connection whose command only the primary can run becomes a relay
//! to the primary ([`crate::forward`]); its requests go up as they are parsed, the primary's
//! replies come back into its output, and the primary's connection is polled here too (its
//! token is the client's with [`UPSTREAM`] set).

use std::collections::HashMap;
use std::io::{ErrorKind, Read, Write};
use std::sync::atomic::{fence, AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Token, Waker};
use verso_replication::TicketState;

use crate::forward::{Relay, Upstream};
use crate::resp::{Args, Parser, Reply};
use crate::server::ServerConfig;
use crate::session::{Hold, Session, Shared};

/// The token of the waker the accepting thread uses to announce new connections.
pub(crate) const WAKER: Token = Token(0);
/// Set in the token of a relayed connection's link to the primary (the rest is the client's).
const UPSTREAM: usize = 1 << (usize::BITS - 2);
/// How long a poll sleeps before looking at `stop` and idle clients again.
const POLL_INTERVAL: Duration = Duration::from_millis(100);
/// Bytes read from a socket at once.
const READ_CHUNK_BYTES: usize = 64 << 10;
/// Events taken from one poll.
const EVENTS_MAX: usize = 1024;
/// Reads from one connection before the worker turns to the others (fairness: a client that
/// keeps its socket full cannot starve the rest). It is read again in the next round.
const READS_PER_TURN_MAX: usize = 16;

/// How the log wakes a worker that holds replies for the disk.
pub(crate) struct Wake {
    pub(crate) waker: Waker,
    /// Set while the worker holds replies. Store-buffer pattern with the log's durable
    /// epoch: the worker sets this, fences, then checks durability; the log publishes
    /// durability, fences, then reads this. One of them sees the other.
    waiting: AtomicBool,
    /// Set while a connection is blocked (`WAIT`, whose answer follows the replicas'
    /// disks), with the same pattern against [`Wake::disk_progress`]. Held replies never
    /// wait for the disks, so the disks' progress wakes only a worker with this set.
    waiting_disk: AtomicBool,
}

impl Wake {
    pub(crate) fn new(waker: Waker) -> Self {
        Wake {
            waker,
            waiting: AtomicBool::new(false),
            waiting_disk: AtomicBool::new(false),
        }
    }

    /// Called by the log's flusher after each round.
    pub(crate) fn durable_progress(&self) {
        fence(Ordering::SeqCst);
        if self.waiting.load(Ordering::Relaxed) {
            let _ = self.waker.wake();
        }
    }

    /// Called by the replication thread when a replica's disk holds more slots.
    pub(crate) fn disk_progress(&self) {
        fence(Ordering::SeqCst);
        if self.waiting_disk.load(Ordering::Relaxed) {
            let _ = self.waker.wake();
        }
    }
}

/// Replies held until a commit is durable.
#[derive(Clone, Copy, Debug)]
struct Held {
    /// Offset in `output` where the held replies begin (everything after is held too).
    from: usize,
    /// The newest ticket among them.
    ticket: Hold,
}

/// One client connection on a worker.
struct Conn<'s> {
    stream: TcpStream,
    session: Session<'s>,
    /// Bytes received and not yet parsed (at most one incomplete request after parsing).
    input: Vec<u8>,
    /// Replies not yet written, from `output[written..]`.
    /// Invariants: `written <= output.len()`; both are 0 once everything is written.
    output: Vec<u8>,
    written: usize,
    /// The arguments of the request being run, reused from request to request.
    args: Args,
    /// Close once the output is written (QUIT, or a protocol error).
    closing: bool,
    /// Invariant: `held.from >= written` and `<= output.len()`.
    held: Option<Held>,
    /// On a backup, the primary's connection this one is relayed to (module docs); and
    /// whether it is registered with the poll yet.
    upstream: Option<Upstream>,
    upstream_registered: bool,
    /// The peer shut down its side (an event said so): read until the end, not until a short
    /// read, since no further event will come.
    peer_closed: bool,
    last_active: Instant,
}

/// What to do with a connection after an event.
#[derive(PartialEq, Eq)]
enum Next {
    Keep,
    /// Input may remain unread (the read budget ran out): read again without waiting for an
    /// event, which edge-triggered polling would not deliver.
    ReadAgain,
    Close,
}

impl<'s> Conn<'s> {
    /// Reads until the socket is drained (or the turn's budget is spent), answering requests
    /// as they complete; `now` is the time of the poll that reported the event.
    fn on_readable(
        &mut self,
        chunk: &mut [u8],
        parser: &Parser,
        cfg: &ServerConfig,
        now: Instant,
        db: &Shared,
    ) -> Next {
        let mut reads = 0;
        while !self.closing {
            if reads == READS_PER_TURN_MAX {
                return Next::ReadAgain;
            }
            reads += 1;
            match self.stream.read(chunk) {
                Ok(0) => return Next::Close, // the client closed
                Ok(n) => {
                    assert!(n <= chunk.len());
                    self.last_active = now;
                    self.execute_input(parser, &chunk[..n], db, cfg);
                    self.session.flush_stats();
                    if self.flush_upstream() == Next::Close {
                        return Next::Close;
                    }
                    if self.flush(cfg, db) == Next::Close {
                        return Next::Close;
                    }
                    if n < chunk.len() && !self.peer_closed {
                        break; // drained: later bytes raise a new edge (module docs)
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(_) => return Next::Close,
            }
        }
        self.after_flush()
    }

    /// Answers every complete request in the unparsed input followed by `fresh` (just read),
    /// in order, and keeps what remains of an incomplete request. Parses `fresh` in place
    /// when nothing was pending (the common case), copying only an incomplete tail.
    fn execute_input(&mut self, parser: &Parser, fresh: &[u8], db: &Shared, cfg: &ServerConfig) {
        if self.input.is_empty() {
            let used = self.execute_buffer(parser, fresh, db, cfg);
            assert!(used <= fresh.len());
            if !self.closing {
                self.input.extend_from_slice(&fresh[used..]);
            }
        } else {
            self.input.extend_from_slice(fresh);
            let input = std::mem::take(&mut self.input);
            let used = self.execute_buffer(parser, &input, db, cfg);
            assert!(used <= input.len());
            self.input = input;
            self.input.drain(..used);
        }
    }

    /// Answers the complete requests at the start of `buf`; returns the bytes they used.
    fn execute_buffer(
        &mut self,
        parser: &Parser,
        buf: &[u8],
        db: &Shared,
        cfg: &ServerConfig,
    ) -> usize {
        let mut used = 0;
        // A blocked `WAIT` stops the connection's requests until it is answered.
        while !self.closing && !self.session.is_blocked() {
            match parser.parse_into(&buf[used..], &mut self.args) {
                Ok(Some(len)) => {
                    assert!(len > 0 && used + len <= buf.len());
                    used += len;
                    if self.args.is_empty() {
                        continue; // an empty request gets no reply
                    }
                    if self.relay(cfg) {
                        continue;
                    }
                    let before = self.output.len();
                    self.session
                        .execute_into(self.args.as_slice(), &mut self.output);
                    if let Some(ticket) = self.session.take_ticket() {
                        self.hold(before, ticket, db);
                    }
                    self.closing = self.session.closing;
                }
                Ok(None) => break,
                Err(e) => {
                    // Malformed input: say why, then close (as Redis does).
                    tracing::warn!(client = self.session.id, error = %e, "protocol error, closing");
                    Reply::Error(format!("ERR {e}")).encode(self.session.version, &mut self.output);
                    self.closing = true;
                }
            }
        }
        used
    }

    /// Sends the request in `args` to the primary if this connection is a relay, or becomes
    /// one now (`Session::forward_target`). Returns whether it went.
    fn relay(&mut self, cfg: &ServerConfig) -> bool {
        if let Some(u) = &self.upstream {
            // Its primary was deposed (this replica or another leads now): a MULTI or WATCH
            // it held there is gone, and replies may still be on their way, so the
            // connection closes, as when a ticket's generation ends; the client's next one
            // goes where it should. Found by a test that kills a primary and restarts it
            // at once: the relay stayed on it while it was a backup, refusing every write.
            if self.session.relay_is_stale(u.primary) {
                self.closing = true;
                return true;
            }
        }
        if self.upstream.is_none() {
            let Some(primary) = self.session.forward_target(self.args.as_slice()) else {
                return false;
            };
            match Upstream::connect(primary, &self.session.relay_setup()) {
                Ok(u) => self.upstream = Some(u),
                Err(e) => {
                    // Run it here: the backup's refusal names the primary.
                    tracing::debug!(client = self.session.id, error = %e, "cannot reach the primary");
                    return false;
                }
            }
        }
        let u = self.upstream.as_mut().expect("set above");
        u.push(self.args.as_slice());
        if u.queued() > cfg.output_buffer_max {
            // The client sends faster than the primary takes: as with unread replies.
            self.closing = true;
        }
        true
    }

    /// Writes queued requests to the primary. `Close` if its connection failed.
    fn flush_upstream(&mut self) -> Next {
        match self.upstream.as_mut().map(Upstream::flush) {
            Some(Err(_)) => Next::Close,
            _ => Next::Keep,
        }
    }

    /// The primary's connection is readable or writable: pass its replies to the client.
    fn on_upstream(&mut self, cfg: &ServerConfig, db: &Shared, readable: bool) -> Next {
        if self.flush_upstream() == Next::Close {
            return Next::Close;
        }
        if readable {
            let u = self.upstream.as_mut().expect("an upstream event");
            if let Relay::Gone = u.read_into(&mut self.output) {
                // Pass on what came, then close: like a lost connection (module docs).
                self.closing = true;
            }
        }
        if self.flush(cfg, db) == Next::Close {
            return Next::Close;
        }
        self.after_flush()
    }

    /// Holds the replies from `from` on until `ticket` is durable (module docs).
    fn hold(&mut self, from: usize, ticket: Hold, db: &Shared) {
        match &mut self.held {
            Some(h) => h.ticket = later(h.ticket, ticket),
            None if hold_state(db, ticket) == TicketState::Ready => {}
            None => self.held = Some(Held { from, ticket }),
        }
    }

    /// Releases held replies whose commit became durable.
    fn release_durable(&mut self, db: &Shared) {
        if self
            .held
            .is_some_and(|h| hold_state(db, h.ticket) == TicketState::Ready)
        {
            self.held = None;
        }
    }

    /// Writes as much output as the socket takes, up to the held replies. Closes a client
    /// that leaves more than `output_buffer_max` bytes unread (it pipelines faster than it
    /// reads, as Redis does).
    fn flush(&mut self, cfg: &ServerConfig, db: &Shared) -> Next {
        assert!(self.written <= self.output.len());
        self.release_durable(db);
        let limit = self.held.map_or(self.output.len(), |h| h.from);
        assert!(self.written <= limit && limit <= self.output.len());
        while self.written < limit {
            match self.stream.write(&self.output[self.written..limit]) {
                Ok(0) => return Next::Close,
                Ok(n) => self.written += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(_) => return Next::Close,
            }
        }
        if self.written == self.output.len() {
            self.output.clear();
            self.written = 0;
        } else if let Some(h) = &mut self.held {
            if self.written == h.from && self.written > 0 {
                // Everything before the held replies is out: keep only them.
                self.output.drain(..self.written);
                h.from = 0;
                self.written = 0;
            }
        }
        if self.output.len() - self.written > cfg.output_buffer_max {
            return Next::Close;
        }
        Next::Keep
    }

    /// Answers a blocked `WAIT` or pop when it is due, then runs the requests that queued
    /// behind it. Returns `None` while still blocked.
    fn unblock(
        &mut self,
        parser: &Parser,
        cfg: &ServerConfig,
        now: Instant,
        db: &Shared,
    ) -> Option<Next> {
        let reply = self.session.poll_wait(now)?;
        let before = self.output.len();
        reply.encode(self.session.version, &mut self.output);
        // A blocked pop that found something committed a write: its reply waits for it.
        if let Some(ticket) = self.session.take_ticket() {
            self.hold(before, ticket, db);
        }
        self.execute_input(parser, &[], db, cfg);
        self.session.flush_stats();
        if self.flush(cfg, db) == Next::Close {
            return Some(Next::Close);
        }
        // Bytes may have arrived while blocked with no edge left to announce them.
        Some(if self.closing {
            self.after_flush()
        } else {
            Next::ReadAgain
        })
    }

    /// A closing connection goes once its last reply is written.
    fn after_flush(&self) -> Next {
        if self.closing && self.output.is_empty() {
            Next::Close
        } else {
            Next::Keep
        }
    }
}

/// Serves connections arriving on `inbox` until `stop` is set; `clients` counts the open ones
/// server-wide (the acceptor adds, this subtracts).
pub(crate) fn run(
    mut poll: Poll,
    inbox: Receiver<TcpStream>,
    shared: &Shared,
    cfg: &ServerConfig,
    stop: &AtomicBool,
    clients: &AtomicUsize,
    wake: &Wake,
) {
    let db = shared;
    // Connections holding replies until a commit is durable.
    let mut holding: Vec<Token> = Vec::new();
    let parser = Parser::new(cfg.limits);
    let mut conns: HashMap<usize, Conn<'_>> = HashMap::new();
    let mut next_token = WAKER.0 + 1;
    let mut events = Events::with_capacity(EVENTS_MAX);
    let mut chunk = vec![0u8; READ_CHUNK_BYTES];
    let mut last_sweep = Instant::now();
    // Connections whose read budget ran out, to be read again this round.
    let mut again: Vec<Token> = Vec::new();
    // Connections blocked in `WAIT`.
    let mut blocked: Vec<Token> = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        wake.waiting_disk
            .store(!blocked.is_empty(), Ordering::Relaxed);
        if !blocked.is_empty() {
            // Announce, then look (the store-buffer pattern in `Wake`): progress after the
            // look wakes the poll below. `release_held` may clear `waiting` later in the
            // round; this runs again before the next poll.
            wake.waiting.store(true, Ordering::Relaxed);
            fence(Ordering::SeqCst);
            let now = Instant::now();
            answer_waits(
                &mut blocked,
                &mut again,
                &mut conns,
                &parser,
                cfg,
                now,
                db,
                &poll,
                clients,
            );
        }
        let timeout = if !again.is_empty() {
            Duration::ZERO
        } else if blocked.is_empty() {
            POLL_INTERVAL
        } else {
            // A WAIT's timeout is honoured to the millisecond, not to the poll interval.
            blocked
                .iter()
                .filter_map(|t| conns.get(&t.0)?.session.wait_deadline())
                .min()
                .map_or(POLL_INTERVAL, |d| {
                    d.saturating_duration_since(Instant::now())
                        .min(POLL_INTERVAL)
                })
        };
        if let Err(e) = poll.poll(&mut events, Some(timeout)) {
            if e.kind() != ErrorKind::Interrupted {
                break;
            }
        }
        // One clock read per round: a connection's activity time need not be finer.
        let now = Instant::now();
        for event in events.iter() {
            let token = event.token();
            if token == WAKER {
                continue; // new connections are taken below
            }
            if token.0 & UPSTREAM != 0 {
                let client = Token(token.0 & !UPSTREAM);
                let Some(conn) = conns.get_mut(&client.0) else {
                    continue;
                };
                let readable = event.is_readable() || event.is_read_closed();
                if conn.on_upstream(cfg, db, readable) == Next::Close {
                    close(&poll, &mut conns, client, clients);
                }
                continue;
            }
            let Some(conn) = conns.get_mut(&token.0) else {
                continue;
            };
            let mut next = Next::Keep;
            if event.is_writable() || event.is_write_closed() {
                next = match conn.flush(cfg, db) {
                    Next::Close => Next::Close,
                    Next::Keep | Next::ReadAgain => conn.after_flush(),
                };
            }
            conn.peer_closed |= event.is_read_closed();
            if next == Next::Keep && (event.is_readable() || event.is_read_closed()) {
                next = conn.on_readable(&mut chunk, &parser, cfg, now, db);
            }
            if next != Next::Close && conn.held.is_some() {
                holding.push(token);
            }
            if next != Next::Close && conn.session.is_blocked() {
                blocked.push(token);
            }
            let next = register_upstream(&poll, token, conn, next);
            match next {
                Next::Keep => {}
                Next::ReadAgain => again.push(token),
                Next::Close => close(&poll, &mut conns, token, clients),
            }
        }
        let mut round = std::mem::take(&mut again);
        round.sort_unstable();
        round.dedup(); // a connection both left over and readable again is read once

        for token in round {
            let Some(conn) = conns.get_mut(&token.0) else {
                continue; // closed meanwhile
            };
            let next = conn.on_readable(&mut chunk, &parser, cfg, now, db);
            if next != Next::Close && conn.held.is_some() {
                holding.push(token);
            }
            if next != Next::Close && conn.session.is_blocked() {
                blocked.push(token);
            }
            let next = register_upstream(&poll, token, conn, next);
            match next {
                Next::Keep => {}
                Next::ReadAgain => again.push(token),
                Next::Close => close(&poll, &mut conns, token, clients),
            }
        }
        release_held(&mut holding, &mut conns, wake, &poll, cfg, clients, db);

        while let Ok(mut stream) = inbox.try_recv() {
            let token = Token(next_token);
            next_token += 1;
            assert!(
                token.0 & UPSTREAM == 0,
                "client tokens stay below the upstream bit"
            );
            let _ = stream.set_nodelay(true);
            let registered = poll.registry().register(
                &mut stream,
                token,
                Interest::READABLE | Interest::WRITABLE,
            );
            if registered.is_err() {
                clients.fetch_sub(1, Ordering::Relaxed);
                continue;
            }
            let peer = stream.peer_addr().ok();
            let conn = Conn {
                stream,
                session: Session::new(shared),
                input: Vec::new(),
                output: Vec::new(),
                written: 0,
                args: Args::default(),
                closing: false,
                held: None,
                upstream: None,
                upstream_registered: false,
                peer_closed: false,
                last_active: now,
            };
            tracing::debug!(client = conn.session.id, ?peer, "client connected");
            assert!(conns.insert(token.0, conn).is_none());
        }
        if cfg.idle_timeout_s > 0 && last_sweep.elapsed() >= Duration::from_secs(1) {
            last_sweep = Instant::now();
            let limit = Duration::from_secs(cfg.idle_timeout_s);
            let idle: Vec<usize> = conns
                .iter()
                .filter(|(_, c)| c.last_active.elapsed() >= limit)
                .map(|(&t, _)| t)
                .collect();
            for t in idle {
                close(&poll, &mut conns, Token(t), clients);
            }
        }
    }
    for (t, _) in std::mem::take(&mut conns) {
        assert!(t != WAKER.0);
        clients.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Sends the held replies of connections whose commits became durable; closes those whose
/// commits never will (the log failed). Leaves `wake` set while anything is still held.
fn release_held(
    holding: &mut Vec<Token>,
    conns: &mut HashMap<usize, Conn<'_>>,
    wake: &Wake,
    poll: &Poll,
    cfg: &ServerConfig,
    clients: &AtomicUsize,
    db: &Shared,
) {
    if holding.is_empty() {
        return;
    }
    holding.sort_unstable();
    holding.dedup();
    // Announce first, then look (the store-buffer pattern in `Wake`).
    wake.waiting.store(true, Ordering::Relaxed);
    fence(Ordering::SeqCst);
    let mut closed = Vec::new();
    holding.retain(|&token| {
        let Some(conn) = conns.get_mut(&token.0) else {
            return false;
        };
        let Some(held) = conn.held else { return false };
        let state = hold_state(db, held.ticket);
        if state == TicketState::Ready {
            let next = match conn.flush(cfg, db) {
                Next::Close => Next::Close,
                _ => conn.after_flush(),
            };
            if next == Next::Close {
                closed.push(token);
            }
            return conn.held.is_some();
        }
        if state == TicketState::Failed {
            closed.push(token);
            return false;
        }
        true
    });
    for token in closed {
        close(poll, conns, token, clients);
    }
    if holding.is_empty() {
        wake.waiting.store(false, Ordering::Relaxed);
    }
}

/// Registers a connection's new link to the primary with the poll (`Close` if that fails).
fn register_upstream(poll: &Poll, token: Token, conn: &mut Conn<'_>, next: Next) -> Next {
    if next == Next::Close || conn.upstream_registered {
        return next;
    }
    let Some(u) = conn.upstream.as_mut() else {
        return next;
    };
    conn.upstream_registered = true;
    let registered = poll.registry().register(
        &mut u.stream,
        Token(token.0 | UPSTREAM),
        Interest::READABLE | Interest::WRITABLE,
    );
    if registered.is_err() {
        return Next::Close;
    }
    next
}

/// Answers the blocked `WAIT`s that are due; their connections read again.
#[allow(clippy::too_many_arguments)]
fn answer_waits(
    blocked: &mut Vec<Token>,
    again: &mut Vec<Token>,
    conns: &mut HashMap<usize, Conn<'_>>,
    parser: &Parser,
    cfg: &ServerConfig,
    now: Instant,
    db: &Shared,
    poll: &Poll,
    clients: &AtomicUsize,
) {
    if blocked.is_empty() {
        return;
    }
    blocked.sort_unstable();
    blocked.dedup();
    let mut closed = Vec::new();
    blocked.retain(|&token| {
        let Some(conn) = conns.get_mut(&token.0) else {
            return false;
        };
        match conn.unblock(parser, cfg, now, db) {
            None => true,
            Some(Next::Close) => {
                closed.push(token);
                false
            }
            Some(next) => {
                if next == Next::ReadAgain {
                    again.push(token);
                }
                conn.session.is_blocked() // a second WAIT in the queued requests
            }
        }
    });
    for token in closed {
        close(poll, conns, token, clients);
    }
}

/// Whether held replies may go (`Failed`: they never will; the connection is closed, as
/// after a lost connection the client cannot know whether its last commands took effect).
fn hold_state(shared: &Shared, hold: Hold) -> TicketState {
    match hold {
        Hold::Durable(t) if shared.db.is_durable(t) => TicketState::Ready,
        Hold::Durable(_) if shared.db.durability_failure().is_some() => TicketState::Failed,
        Hold::Durable(_) => TicketState::Waiting,
        Hold::Replicated(t) => shared
            .replication
            .as_ref()
            .map_or(TicketState::Failed, |r| r.ticket_state(t)),
    }
}

/// The later of two holds of one connection.
fn later(a: Hold, b: Hold) -> Hold {
    match (a, b) {
        (Hold::Durable(a), Hold::Durable(b)) => Hold::Durable(a.max(b)),
        (Hold::Replicated(a), Hold::Replicated(b)) => Hold::Replicated(a.max(b)),
        (_, b) => b,
    }
}

fn close(poll: &Poll, conns: &mut HashMap<usize, Conn<'_>>, token: Token, clients: &AtomicUsize) {
    if let Some(mut conn) = conns.remove(&token.0) {
        let _ = poll.registry().deregister(&mut conn.stream);
        if let Some(u) = conn.upstream.as_mut() {
            let _ = poll.registry().deregister(&mut u.stream);
        }
        tracing::debug!(client = conn.session.id, "client disconnected");
        clients.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether the poll has an event for the waker now.
    fn woken(poll: &mut Poll, events: &mut Events) -> bool {
        poll.poll(events, Some(Duration::ZERO)).unwrap();
        events.iter().any(|e| e.token() == WAKER)
    }

    /// Commit progress wakes a worker that holds replies or a blocked connection; the
    /// disks' progress wakes only one with a blocked connection (`WAIT`), not one that
    /// merely holds replies, whose tickets never wait for the disks.
    #[test]
    fn only_blocked_connections_are_woken_by_the_disks() {
        let mut poll = Poll::new().unwrap();
        let mut events = Events::with_capacity(8);
        let wake = Wake::new(Waker::new(poll.registry(), WAKER).unwrap());

        wake.disk_progress();
        wake.durable_progress();
        assert!(!woken(&mut poll, &mut events), "nothing waits: no wake-up");

        wake.waiting.store(true, Ordering::Relaxed);
        wake.disk_progress();
        assert!(
            !woken(&mut poll, &mut events),
            "held replies ignore the disks"
        );
        wake.durable_progress();
        assert!(woken(&mut poll, &mut events), "held replies follow commits");

        wake.waiting_disk.store(true, Ordering::Relaxed);
        wake.disk_progress();
        assert!(woken(&mut poll, &mut events), "a WAIT follows the disks");
    }
}
