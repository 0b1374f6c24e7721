//! One shard server process: the protocol's server state machine behind TCP.
//!
//! Threads: the caller's thread accepts; each connection has a reader thread that decodes
//! frames and hands them over a channel; one protocol thread owns the state machine and
//! every socket's write half. So the state machine sees one input at a time, as in the
//! simulator, and what it answers to a burst of inputs leaves in one write per connection
//! (the inputs waiting in the channel are taken together before the writers flush).

use std::collections::{BTreeMap, HashMap};
use std::io::{self, BufWriter, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::thread;
use std::time::Duration;

use verso_ncc::wire::{Encoding, Wire};
use verso_ncc::TxnServer;

use crate::engine_store::{EngineStore, WALL_EPOCH_US};
use crate::frame::{
    detect, dump_chunks, effects_chunks, read_frame, write_frame, write_msg, Frame, Hello,
};
use crate::{now_us, Protocol, StoreKind};

/// How a server is started.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    pub id: u32,
    pub protocol: Protocol,
    /// Every server's address, this one's included, indexed by server id: where a backup
    /// coordinator's messages go.
    pub peers: Vec<SocketAddr>,
    /// NCC's recovery timer (App. D): how long a transaction may stay undecided before
    /// its cohorts ask the backup coordinator.
    pub recovery_after_us: u64,
    /// Keep every committed value, so that [`Frame::DumpRequest`] can answer the whole
    /// version order a history check needs. Off (a long-running server), a server keeps
    /// only the versions in use and a dump says it cannot be checked.
    pub keep_history: bool,
    /// Where NCC keeps its decided versions (the baselines keep theirs in memory).
    pub store: StoreKind,
}

/// Inputs to a protocol thread (this module's, and a group replica's).
pub(crate) enum Input {
    Open(u64, Hello, Encoding, TcpStream),
    /// A frame, and the encoding its connection speaks (its messages' form).
    Frame(u64, Encoding, Frame),
    Closed(u64),
    /// A group replica's disk thread reports (`crate::group`).
    Disk(crate::group::disk::DiskDone),
}

/// Starts the thread that accepts connections on `listener`, each read by a thread of its
/// own that hands its frames to `tx`.
pub(crate) fn spawn_acceptor(listener: &TcpListener, tx: Sender<Input>) -> io::Result<()> {
    let accept = listener.try_clone()?;
    thread::Builder::new()
        .name("txn-accept".into())
        .spawn(move || accept_loop(accept, tx))?;
    Ok(())
}

/// Serves on `listener` until a control connection sends [`Frame::Shutdown`].
pub fn serve(listener: TcpListener, cfg: ServerConfig) -> io::Result<()> {
    let (tx, rx) = mpsc::channel();
    spawn_acceptor(&listener, tx)?;
    let (id, after, keep) = (cfg.id, cfg.recovery_after_us, cfg.keep_history);
    match (cfg.protocol, cfg.store) {
        (Protocol::Ncc { .. }, StoreKind::Memory) => run(
            Protocol::ncc_server(verso_ncc::MemStore::new(), id, after, keep),
            &cfg,
            rx,
        ),
        (Protocol::Ncc { .. }, StoreKind::Engine) => {
            let store = EngineStore::new(WALL_EPOCH_US).map_err(io::Error::other)?;
            run(Protocol::ncc_server(store, id, after, keep), &cfg, rx)
        }
        (Protocol::Baseline(_), StoreKind::Engine) => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "--store engine is for NCC's servers (the baselines keep their versions in memory)",
        )),
        (Protocol::Baseline(flavor), StoreKind::Memory) => run(
            Protocol::baseline_server(flavor, cfg.keep_history),
            &cfg,
            rx,
        ),
    }
}

fn accept_loop(listener: TcpListener, tx: Sender<Input>) {
    for (conn, stream) in (0u64..).zip(listener.incoming()) {
        let Ok(stream) = stream else { continue };
        let tx = tx.clone();
        let spawned = thread::Builder::new()
            .name("txn-conn".into())
            .spawn(move || read_loop(conn, stream, tx));
        if spawned.is_err() {
            // Out of threads: the connection is dropped and its peer sees it closed.
            continue;
        }
    }
}

fn read_loop(conn: u64, stream: TcpStream, tx: Sender<Input>) {
    let _ = stream.set_nodelay(true);
    let Ok(writer) = stream.try_clone() else {
        return;
    };
    let mut reader = io::BufReader::new(stream);
    let mut buf = Vec::new();
    // The first byte says which encoding the connection speaks, the first frame who is
    // there; anything else first is a protocol error.
    let Ok(Some(encoding)) = detect(&mut reader) else {
        return;
    };
    let Ok(Some(Frame::Hello(hello))) = read_frame(&mut reader, encoding, &mut buf) else {
        return;
    };
    if tx.send(Input::Open(conn, hello, encoding, writer)).is_err() {
        return;
    }
    // A malformed frame or a reset ends the connection; the protocol tolerates lost
    // messages (clients send again), so nothing else is owed.
    while let Ok(Some(frame)) = read_frame(&mut reader, encoding, &mut buf) {
        if tx.send(Input::Frame(conn, encoding, frame)).is_err() {
            return;
        }
    }
    let _ = tx.send(Input::Closed(conn));
}

/// The protocol thread's state.
struct Host<S> {
    server: S,
    id: u32,
    peers: Vec<SocketAddr>,
    /// Open connections' write halves, and the encoding each speaks (a server's own
    /// connections to its peers speak binary).
    writers: HashMap<u64, (BufWriter<TcpStream>, Encoding)>,
    /// Client connections by the first protocol client they speak for: (count, conn).
    clients: BTreeMap<u32, (u32, u64)>,
    /// Connections to the other servers, opened on first use.
    peer_out: Vec<Option<BufWriter<TcpStream>>>,
    scratch: Vec<u8>,
    shutdown: bool,
    /// Whether a dump holds every committed version.
    history_kept: bool,
}

fn run<S>(server: S, cfg: &ServerConfig, rx: Receiver<Input>) -> io::Result<()>
where
    S: TxnServer,
    S::Msg: Wire,
{
    let mut h = Host {
        server,
        id: cfg.id,
        peers: cfg.peers.clone(),
        writers: HashMap::new(),
        clients: BTreeMap::new(),
        peer_out: (0..cfg.peers.len()).map(|_| None).collect(),
        scratch: Vec::new(),
        shutdown: false,
        history_kept: cfg.keep_history,
    };
    let mut next_tick = 0u64;
    while !h.shutdown {
        let now = now_us();
        let wait = match h.server.tick_every() {
            Some(_) if next_tick > now => Duration::from_micros((next_tick - now).min(10_000)),
            Some(_) => Duration::ZERO,
            None => Duration::from_millis(10),
        };
        match rx.recv_timeout(wait) {
            Ok(input) => {
                h.handle(input);
                // Take what else is waiting before answering: one write per burst.
                for input in rx.try_iter().take(1024) {
                    h.handle(input);
                }
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => break,
        }
        let now = now_us();
        if let Some(every) = h.server.tick_every() {
            if now >= next_tick {
                h.server.tick(now);
                next_tick = now + every;
            }
        }
        h.send_outputs();
    }
    Ok(())
}

impl<S> Host<S>
where
    S: TxnServer,
    S::Msg: Wire,
{
    fn handle(&mut self, input: Input) {
        match input {
            Input::Open(conn, hello, encoding, stream) => {
                if let Hello::Clients { first, count } = hello {
                    self.clients.insert(first, (count, conn));
                }
                if !matches!(hello, Hello::Server { .. }) {
                    self.writers
                        .insert(conn, (BufWriter::new(stream), encoding));
                }
            }
            Input::Frame(conn, encoding, frame) => self.on_frame(conn, encoding, frame),
            Input::Closed(conn) => {
                self.writers.remove(&conn);
                self.clients.retain(|_, &mut (_, c)| c != conn);
            }
            Input::Disk(_) => {}
        }
    }

    fn on_frame(&mut self, conn: u64, encoding: Encoding, frame: Frame) {
        match frame {
            Frame::Msg { bytes, .. } => match S::Msg::decode_as(encoding, &bytes) {
                Ok(msg) if !self.server.admits(&msg) => {
                    eprintln!("txn-server: dropping a connection: a message with a timestamp, key or value this server's store cannot hold");
                    self.drop_conn(conn)
                }
                Ok(msg) => self.server.on_message(now_us(), msg),
                // A message this protocol cannot read: drop the sender, as for a bad frame.
                Err(_) => self.drop_conn(conn),
            },
            Frame::DumpRequest => self.dump(conn),
            Frame::Shutdown => self.shutdown = true,
            Frame::Hello(_)
            | Frame::Dump(_)
            | Frame::Effects(_)
            | Frame::DumpEnd { .. }
            | Frame::Replica(_) => self.drop_conn(conn),
        }
    }

    fn drop_conn(&mut self, conn: u64) {
        if let Some((w, _)) = self.writers.remove(&conn) {
            let _ = w.get_ref().shutdown(std::net::Shutdown::Both);
        }
        self.clients.retain(|_, &mut (_, c)| c != conn);
    }

    fn dump(&mut self, conn: u64) {
        let Some((w, encoding)) = self.writers.get_mut(&conn) else {
            return;
        };
        if write_dump(
            &self.server,
            self.history_kept,
            w,
            *encoding,
            &mut self.scratch,
        )
        .is_err()
        {
            self.drop_conn(conn);
        }
    }

    fn client_conn(&self, client: u32) -> Option<u64> {
        let (&first, &(count, conn)) = self.clients.range(..=client).next_back()?;
        (client - first < count).then_some(conn)
    }

    fn send_outputs(&mut self) {
        for (client, msg) in self.server.drain() {
            let Some(conn) = self.client_conn(client) else {
                // Its client is gone; a client that returns sends again.
                continue;
            };
            let ok = match self.writers.get_mut(&conn) {
                Some((w, encoding)) => {
                    write_msg(w, *encoding, client, &msg, &mut self.scratch).is_ok()
                }
                None => true,
            };
            if !ok {
                self.drop_conn(conn);
            }
        }
        for (to, msg) in self.server.drain_peers() {
            self.send_peer(to, &msg);
        }
        let mut failed = Vec::new();
        for (&conn, (w, _)) in &mut self.writers {
            if w.flush().is_err() {
                failed.push(conn);
            }
        }
        for slot in &mut self.peer_out {
            // A peer that cannot take the bytes is reconnected on next use.
            if slot.as_mut().is_some_and(|w| w.flush().is_err()) {
                *slot = None;
            }
        }
        failed.into_iter().for_each(|c| self.drop_conn(c));
    }

    fn send_peer(&mut self, to: u32, msg: &S::Msg) {
        let Some(&addr) = self.peers.get(to as usize) else {
            return;
        };
        let slot = &mut self.peer_out[to as usize];
        if slot.is_none() {
            // A peer that does not answer within a second is skipped this time; the
            // recovery timer asks again.
            let Ok(stream) = TcpStream::connect_timeout(&addr, Duration::from_secs(1)) else {
                return;
            };
            let _ = stream.set_nodelay(true);
            let mut w = BufWriter::new(stream);
            let hello = Frame::Hello(Hello::Server { id: self.id });
            if write_frame(&mut w, Encoding::Binary, &hello, &mut self.scratch).is_err() {
                return;
            }
            *slot = Some(w);
        }
        let w = slot.as_mut().expect("connected above");
        if write_msg(w, Encoding::Binary, self.id, msg, &mut self.scratch).is_err() {
            *slot = None;
        }
    }
}

/// Writes `server`'s dump (its committed versions, the effects it still holds while the
/// history is kept, and its state) as frames to `w`.
pub(crate) fn write_dump<S: TxnServer>(
    server: &S,
    history_kept: bool,
    w: &mut impl Write,
    encoding: Encoding,
    scratch: &mut Vec<u8>,
) -> io::Result<()> {
    let versions = server.committed_versions();
    let effects = if history_kept {
        server.committed_effects()
    } else {
        Vec::new()
    };
    let frames = dump_chunks(&versions)
        .map(Frame::Dump)
        .chain(effects_chunks(&effects).map(Frame::Effects))
        .chain(std::iter::once(Frame::DumpEnd {
            undecided: server.undecided().len() as u32,
            broken: server.check_invariants().err().or_else(|| {
                (!history_kept).then(|| {
                    "no history kept (start the server with --keep-history to check it)".to_string()
                })
            }),
        }));
    for f in frames {
        write_frame(w, encoding, &f, scratch)?;
    }
    Ok(())
}
