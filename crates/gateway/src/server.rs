//! The gateway's I/O: one thread, one event loop (mio) over the listener and every client
//! connection, which also drives the coordinator. A request passes no thread on its way:
//! read, parsed, planned, begun on a protocol client, answered and written here; only the
//! groups' answers cross from the pool's reader threads, which wake the loop.
//!
//! A connection's requests run in order, pipelined ones included: while one waits for its
//! transaction, the bytes behind it stay in the connection's buffer. What a connection
//! holds is bounded: its unparsed input (reading stops past [`INPUT_PAUSE_BYTES`] while a
//! request waits; a single request is bounded by the parser's limits) and its unsent
//! replies (no request runs while more than [`OUTPUT_PAUSE_BYTES`] wait to be written).

use std::io::{self, Read, Write};
use std::sync::Arc;
use std::time::Instant;

use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token, Waker};
use verso_server::resp::{Args, Limits, Parser, Reply};
use verso_txn_net::frame::REQUEST_BYTES_MAX;

use crate::conn::{Conn, Step};
use crate::coordinator::{self, Answer, Asker, Coordination, Settings};
use crate::plan::KEYS_MAX;

/// What one request may hold: a value up to what an NCC request carries, and MSET's
/// arguments for as many keys as a transaction may name.
pub fn limits() -> Limits {
    Limits {
        bulk_len_max: REQUEST_BYTES_MAX,
        multibulk_len_max: 2 * KEYS_MAX + 8,
        query_buffer_max: 64 << 20,
    }
}

const LISTENER: Token = Token(0);
const WAKER: Token = Token(1);
/// Connection `i` has token `FIRST_CONN + i`.
const FIRST_CONN: usize = 2;

/// Unparsed input past which a connection whose request waits is not read further.
pub const INPUT_PAUSE_BYTES: usize = 1 << 20;
/// Unsent replies past which a connection's next request waits.
pub const OUTPUT_PAUSE_BYTES: usize = 1 << 20;
/// Bytes read from one connection per turn, so one busy client cannot starve the rest.
const READ_PER_TURN: usize = 256 << 10;

/// One client connection.
struct Client {
    stream: TcpStream,
    generation: u64,
    conn: Conn,
    input: Vec<u8>,
    output: Vec<u8>,
    /// The socket may have bytes to read (edge-triggered: set by an event, cleared by
    /// `WouldBlock`).
    readable: bool,
    /// The socket may take bytes (set by an event, cleared by `WouldBlock`).
    writable: bool,
    /// A request's transaction is under way: nothing behind it runs.
    waiting: bool,
    /// The peer sent its last byte: its complete requests still run and are answered.
    eof: bool,
    /// Run nothing more; close once the output is written (QUIT, a protocol error, a
    /// failed socket).
    closing: bool,
}

impl Client {
    /// Whether the connection is done: nothing to run, answer or send.
    fn finished(&self) -> bool {
        !self.waiting && (self.closing || self.eof) && self.output.is_empty()
    }
}

/// A gateway connected to its groups, listening, not yet serving.
pub struct Gateway {
    poll: Poll,
    listener: TcpListener,
    coordinator: Box<dyn Coordination>,
    lp: Loop,
}

impl Gateway {
    /// Connects to the groups of `settings` (failing if it cannot) and takes `listener`.
    pub fn new(
        settings: &Settings,
        listener: std::net::TcpListener,
        max_clients: usize,
    ) -> io::Result<Gateway> {
        let poll = Poll::new()?;
        let waker = Arc::new(Waker::new(poll.registry(), WAKER)?);
        let notify = Arc::new(move || {
            // A failed wake leaves the next turn to the loop's timer.
            let _ = waker.wake();
        });
        let coordinator = coordinator::connect(settings, notify)?;
        listener.set_nonblocking(true)?;
        let mut listener = TcpListener::from_std(listener);
        poll.registry()
            .register(&mut listener, LISTENER, Interest::READABLE)?;
        let lp = Loop {
            clients: Vec::new(),
            free: Vec::new(),
            open: 0,
            max_clients,
            generations: 0,
            parser: Parser::new(limits()),
            args: Args::default(),
            answers: Vec::new(),
            submitted: false,
        };
        Ok(Gateway {
            poll,
            listener,
            coordinator,
            lp,
        })
    }

    /// Serves clients until the listener or the event loop fails.
    pub fn run(self) -> io::Result<()> {
        let Gateway {
            mut poll,
            listener,
            mut coordinator,
            mut lp,
        } = self;
        let mut events = Events::with_capacity(1024);
        loop {
            let wait = if lp.submitted {
                std::time::Duration::ZERO
            } else {
                coordinator.next_turn_in(Instant::now())
            };
            if let Err(e) = poll.poll(&mut events, Some(wait)) {
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            for event in events.iter() {
                match event.token() {
                    LISTENER => lp.accept(&listener, &poll)?,
                    WAKER => {}
                    Token(t) => {
                        if let Some(Some(c)) = lp.clients.get_mut(t - FIRST_CONN) {
                            c.readable |= event.is_readable() || event.is_read_closed();
                            c.writable |= event.is_writable();
                        }
                    }
                }
            }
            lp.read_and_run(coordinator.as_mut());
            lp.submitted = false;
            if let Err(e) = coordinator.turn(&mut lp.answers) {
                eprintln!("gateway: the connections to the groups failed ({e}); connecting again");
                if let Err(e) = coordinator.reconnect(&mut lp.answers) {
                    eprintln!("gateway: cannot reach the groups ({e})");
                    std::thread::sleep(std::time::Duration::from_millis(500));
                }
            }
            lp.deliver(coordinator.as_mut());
            lp.write_and_close(&poll);
        }
    }
}

/// The event loop's state.
struct Loop {
    /// By token less `FIRST_CONN`; `None` where a connection closed.
    clients: Vec<Option<Client>>,
    /// Indices of `clients` that are `None`.
    free: Vec<usize>,
    open: usize,
    max_clients: usize,
    generations: u64,
    parser: Parser,
    args: Args,
    answers: Vec<Answer>,
    /// A plan was submitted after the last turn: the next turn must not wait.
    submitted: bool,
}

impl Loop {
    fn accept(&mut self, listener: &TcpListener, poll: &Poll) -> io::Result<()> {
        loop {
            let (mut stream, _) = match listener.accept() {
                Ok(s) => s,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                // A connection that failed before it was accepted is the client's problem.
                Err(e) if e.kind() == io::ErrorKind::ConnectionAborted => continue,
                Err(e) => return Err(e),
            };
            if self.open >= self.max_clients {
                let _ = stream.write(b"-ERR max number of clients reached\r\n");
                continue;
            }
            let _ = stream.set_nodelay(true);
            let i = self.free.pop().unwrap_or_else(|| {
                self.clients.push(None);
                self.clients.len() - 1
            });
            let token = Token(FIRST_CONN + i);
            poll.registry().register(
                &mut stream,
                token,
                Interest::READABLE | Interest::WRITABLE,
            )?;
            self.generations += 1;
            self.clients[i] = Some(Client {
                stream,
                generation: self.generations,
                conn: Conn::new(self.generations),
                input: Vec::new(),
                output: Vec::new(),
                readable: true,
                writable: true,
                waiting: false,
                eof: false,
                closing: false,
            });
            self.open += 1;
        }
    }

    /// Reads what every connection has, and runs its requests until one needs a
    /// transaction.
    fn read_and_run(&mut self, coordinator: &mut dyn Coordination) {
        for i in 0..self.clients.len() {
            let Some(c) = self.clients[i].as_mut() else {
                continue;
            };
            read(c);
            self.run(i, coordinator);
        }
    }

    /// Runs connection `i`'s buffered requests in order until one submits a plan.
    fn run(&mut self, i: usize, coordinator: &mut dyn Coordination) {
        let Some(c) = self.clients[i].as_mut() else {
            return;
        };
        let mut used = 0;
        while !c.waiting && !c.closing && c.output.len() < OUTPUT_PAUSE_BYTES {
            match self.parser.parse_into(&c.input[used..], &mut self.args) {
                Ok(Some(n)) => used += n,
                Ok(None) => break,
                Err(e) => {
                    Reply::err(e).encode(c.conn.version(), &mut c.output);
                    c.closing = true;
                    break;
                }
            }
            let reply = match c.conn.request(self.args.as_slice()) {
                Step::Nothing => continue,
                Step::Reply(r) => r,
                Step::Close(r) => {
                    c.closing = true;
                    r
                }
                Step::Run(plan) => {
                    let asker = Asker {
                        token: i,
                        generation: c.generation,
                    };
                    coordinator.submit(asker, plan);
                    c.waiting = true;
                    self.submitted = true;
                    break;
                }
            };
            reply.encode(c.conn.version(), &mut c.output);
        }
        c.input.drain(..used);
    }

    /// Hands each answer to its connection, and runs the requests behind it.
    fn deliver(&mut self, coordinator: &mut dyn Coordination) {
        // A connection's next request may be answered at once and submit another plan:
        // its answer comes at a later turn, so this loop ends.
        for (asker, result) in std::mem::take(&mut self.answers) {
            let Some(c) = self.clients[asker.token].as_mut() else {
                continue; // the connection closed meanwhile
            };
            if c.generation != asker.generation {
                continue;
            }
            if !c.waiting {
                debug_assert!(false, "an answer to a connection that waits for none");
                continue;
            }
            let reply = match result {
                Ok(done) => c.conn.completed(done),
                Err(e) => e,
            };
            reply.encode(c.conn.version(), &mut c.output);
            c.waiting = false;
            self.run(asker.token, coordinator);
        }
    }

    /// Writes what each connection has to send; closes those that are done.
    fn write_and_close(&mut self, poll: &Poll) {
        for i in 0..self.clients.len() {
            let Some(c) = self.clients[i].as_mut() else {
                continue;
            };
            write(c);
            if c.finished() {
                // A peer that stopped reading loses what it did not read.
                let mut c = self.clients[i].take().expect("some");
                let _ = poll.registry().deregister(&mut c.stream);
                self.free.push(i);
                self.open -= 1;
            }
        }
    }
}

/// Reads what the socket has (up to a turn's share), unless the connection's input is
/// already long while a request waits.
fn read(c: &mut Client) {
    let mut taken = 0;
    let mut chunk = [0u8; 16 << 10];
    while c.readable && !c.closing && !c.eof && taken < READ_PER_TURN {
        let stalled = c.waiting || c.output.len() >= OUTPUT_PAUSE_BYTES;
        if stalled && c.input.len() >= INPUT_PAUSE_BYTES {
            return; // resumed once the request is answered or the replies are sent
        }
        match c.stream.read(&mut chunk) {
            Ok(0) => {
                c.eof = true;
                c.readable = false;
            }
            Ok(n) => {
                c.input.extend_from_slice(&chunk[..n]);
                taken += n;
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => c.readable = false,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => {
                c.closing = true;
                c.readable = false;
            }
        }
    }
}

fn write(c: &mut Client) {
    let mut sent = 0;
    while c.writable && sent < c.output.len() {
        match c.stream.write(&c.output[sent..]) {
            Ok(0) => c.writable = false,
            Ok(n) => sent += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => c.writable = false,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => {
                // The peer is gone: what it did not read is dropped with it.
                c.writable = false;
                c.closing = true;
                c.output.clear();
                return;
            }
        }
    }
    c.output.drain(..sent);
}
