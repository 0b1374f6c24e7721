//! A pool of protocol clients in one thread, sharing one connection per server.
//!
//! Each protocol client coordinates its own transactions (the paper co-locates the
//! coordinator with the client, digest pitfall 14); the pool only carries their messages
//! and runs their timers. A reader thread per server connection decodes what arrives and
//! hands it over a channel, so the pool's thread waits on one channel for every server.
//!
//! A shard served by a replication group (`crate::group`) is a list of addresses: the pool
//! sends to the replica that last answered (the group's host) while it answered within
//! [`LEADER_TRUST`], and otherwise to every replica it is connected to (the host takes the
//! message, the others drop it), so that a failover costs the clients one resend. It
//! tolerates a replica's connection being lost, and connects again, at most every
//! [`RECONNECT_AFTER`], when it next sends there.

use std::io::{self, BufWriter, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

use verso_ncc::wire::{Encoding, Wire};
use verso_ncc::{ClientEvent, ClientId, ServerId, TxnClient};

use crate::frame::{msg_frame_len, read_frame, write_frame, write_msg, Frame, Hello};
use crate::now_us;

/// What a reader thread hands over.
enum Incoming<M> {
    /// A message (from the server, and which replica of its group) and the bytes its
    /// frame took.
    Msg(ServerId, usize, ClientId, M, usize),
    /// The server (replica) closed the connection (the `u64`-th opened to it) or sent
    /// something unreadable.
    Lost(ServerId, usize, u64, String),
}

/// What [`Pool::set_notify`] takes.
pub type Notify = Box<dyn Fn() + Send + Sync>;

/// How long a lost replica connection rests before the pool connects again.
pub const RECONNECT_AFTER: Duration = Duration::from_millis(100);

/// How long a connect to a group's replica may take.
const REPLICA_CONNECT_TIMEOUT: Duration = Duration::from_millis(200);

/// A group's replica that answered within this long is taken for its host: messages go to
/// it alone. Below the clients' resend interval (200 ms in the load driver and sessions),
/// so a resend after a failover goes to every replica.
pub const LEADER_TRUST: Duration = Duration::from_millis(100);

/// One connection to a server, or to one replica of its group.
struct Conn {
    addr: SocketAddr,
    w: Option<BufWriter<TcpStream>>,
    retry_at: Option<Instant>,
    /// Connections opened so far: a reader's report of a connection replaced since is
    /// stale.
    opened: u64,
}

/// Protocol clients `first..first + n` and their connections.
pub struct Pool<C: TxnClient> {
    clients: Vec<C>,
    first: ClientId,
    /// Per client: when its timers are next due.
    next_tick: Vec<u64>,
    /// By server, then replica.
    conns: Vec<Vec<Conn>>,
    /// By server: the replica that last answered, and when.
    leader: Vec<Option<(usize, Instant)>>,
    tx: Sender<Incoming<C::Msg>>,
    rx: Receiver<Incoming<C::Msg>>,
    count: u32,
    encoding: Encoding,
    scratch: Vec<u8>,
    /// Clients given work since the last `poll` (`begin`, `next_shot`): a protocol may
    /// finish inside the call (d2PL-no-wait commits a transaction whose last shot is empty
    /// at once), so the next `poll` collects their events without waiting.
    stirred: Vec<usize>,
    /// Called by the reader threads after each message they hand over, once set
    /// ([`Pool::set_notify`]): an owner that waits on something else than `poll` (an event
    /// loop over other sockets) learns that the pool has input.
    notify: Arc<OnceLock<Notify>>,
    /// Protocol messages sent and received (the paper's messages per transaction).
    pub sent: u64,
    pub received: u64,
    /// Bytes of those messages' frames, both ways.
    pub bytes_sent: u64,
    pub bytes_received: u64,
}

impl<C> Pool<C>
where
    C: TxnClient,
    C::Msg: Wire + Send + 'static,
{
    /// Connects to every server (indexed by server id) for `clients`, whose ids are
    /// `first..first + clients.len()`, speaking `encoding`.
    pub fn connect(
        servers: &[SocketAddr],
        encoding: Encoding,
        first: ClientId,
        clients: Vec<C>,
    ) -> io::Result<Self> {
        let groups: Vec<Vec<SocketAddr>> = servers.iter().map(|&a| vec![a]).collect();
        Pool::connect_groups(&groups, encoding, first, clients)
    }

    /// As [`Pool::connect`], each server a group of replicas (module docs). A group of
    /// one is a plain server, whose lost connection is an error; in a larger group, a
    /// replica that cannot be reached now is connected to later.
    pub fn connect_groups(
        groups: &[Vec<SocketAddr>],
        encoding: Encoding,
        first: ClientId,
        clients: Vec<C>,
    ) -> io::Result<Self> {
        let count = u32::try_from(clients.len())
            .ok()
            .filter(|&n| (1..=crate::frame::MAX_CLIENTS_PER_CONNECTION).contains(&n))
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "1 to 65536 clients"))?;
        if groups.iter().any(Vec::is_empty) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "a server with no address",
            ));
        }
        let (tx, rx) = mpsc::channel();
        let n = clients.len();
        let mut pool = Pool {
            clients,
            first,
            next_tick: vec![0; n],
            conns: groups
                .iter()
                .map(|g| {
                    g.iter()
                        .map(|&addr| Conn {
                            addr,
                            w: None,
                            retry_at: None,
                            opened: 0,
                        })
                        .collect()
                })
                .collect(),
            leader: vec![None; groups.len()],
            tx,
            rx,
            count,
            encoding,
            scratch: Vec::new(),
            stirred: Vec::new(),
            notify: Arc::new(OnceLock::new()),
            sent: 0,
            received: 0,
            bytes_sent: 0,
            bytes_received: 0,
        };
        for s in 0..pool.conns.len() {
            let alone = pool.conns[s].len() == 1;
            for r in 0..pool.conns[s].len() {
                match pool.open(s, r) {
                    Ok(()) => {}
                    Err(e) if alone => return Err(e),
                    Err(_) => pool.conns[s][r].retry_at = Some(Instant::now() + RECONNECT_AFTER),
                }
            }
        }
        Ok(pool)
    }

    /// Opens the connection to replica `r` of server `s`, and its reader thread.
    fn open(&mut self, s: usize, r: usize) -> io::Result<()> {
        // A replica that drops packets must not hold up the pool's thread (its other
        // replicas carry on); a plain server is worth waiting for.
        let timeout = if self.conns[s].len() > 1 {
            REPLICA_CONNECT_TIMEOUT
        } else {
            Duration::from_secs(5)
        };
        let conn = &mut self.conns[s][r];
        let stream = TcpStream::connect_timeout(&conn.addr, timeout)?;
        stream.set_nodelay(true)?;
        let reader = stream.try_clone()?;
        let mut w = BufWriter::new(stream);
        let hello = Hello::Clients {
            first: self.first,
            count: self.count,
        };
        write_frame(
            &mut w,
            self.encoding,
            &Frame::Hello(hello),
            &mut self.scratch,
        )?;
        w.flush()?;
        let (tx, notify) = (self.tx.clone(), Arc::clone(&self.notify));
        let encoding = self.encoding;
        conn.opened += 1;
        let nth = conn.opened;
        thread::Builder::new()
            .name("txn-client-read".into())
            .spawn(move || {
                read_loop::<C::Msg>(s as ServerId, (r, nth), encoding, reader, (tx, notify))
            })?;
        conn.w = Some(w);
        conn.retry_at = None;
        Ok(())
    }

    /// Drops replica `r` of server `s`'s connection: an error for a plain server, a
    /// reconnection later for a replica.
    fn lost(&mut self, s: usize, r: usize, why: String) -> io::Result<()> {
        let group = &mut self.conns[s];
        if group.len() == 1 {
            return Err(io::Error::other(format!("server {s}: {why}")));
        }
        if let Some(w) = group[r].w.take() {
            let _ = w.get_ref().shutdown(std::net::Shutdown::Both);
        }
        group[r].retry_at = Some(Instant::now() + RECONNECT_AFTER);
        Ok(())
    }

    /// Has the reader threads call `notify` after each message they hand over (once: a
    /// later call is ignored). `poll` with a zero timeout then takes the input.
    pub fn set_notify(&self, notify: Notify) {
        let _ = self.notify.set(notify);
    }

    pub fn len(&self) -> usize {
        self.clients.len()
    }

    pub fn is_empty(&self) -> bool {
        self.clients.is_empty()
    }

    pub fn client(&self, i: usize) -> &C {
        &self.clients[i]
    }

    /// Begins a transaction on client `i` (which must not be busy). Its requests go out
    /// with the next `poll`, which then does not wait: the begins of one turn share one
    /// write per connection.
    pub fn begin(&mut self, i: usize, ops: Vec<verso_ncc::Op>, last: bool) -> io::Result<()> {
        let now = now_us();
        self.clients[i].begin(now, ops, last);
        self.next_tick[i] = now + self.clients[i].tick_every();
        self.stirred.push(i);
        self.send_from(i)
    }

    /// Client `i`'s next shot, sent as `begin`'s requests are.
    pub fn next_shot(&mut self, i: usize, ops: Vec<verso_ncc::Op>, last: bool) -> io::Result<()> {
        self.clients[i].next_shot(now_us(), ops, last);
        self.stirred.push(i);
        self.send_from(i)
    }

    /// Waits up to `timeout` for messages, feeds them (and the ones behind them) to their
    /// clients, runs due timers, sends what the clients answer, and appends their events
    /// as (client index, event). An error: a server connection was lost.
    pub fn poll(
        &mut self,
        timeout: Duration,
        events: &mut Vec<(usize, ClientEvent)>,
    ) -> io::Result<()> {
        let timeout = if self.stirred.is_empty() {
            timeout
        } else {
            Duration::ZERO
        };
        let first = match self.rx.recv_timeout(timeout) {
            Ok(m) => Some(m),
            Err(RecvTimeoutError::Timeout) => None,
            Err(RecvTimeoutError::Disconnected) => {
                return Err(io::Error::other("every server connection is gone"));
            }
        };
        let mut touched = std::mem::take(&mut self.stirred);
        let incoming: Vec<_> = first
            .into_iter()
            .chain(self.rx.try_iter().take(4096))
            .collect();
        for incoming in incoming {
            match incoming {
                Incoming::Msg(s, r, c, msg, len) => {
                    if self.conns[s as usize].len() > 1 {
                        self.leader[s as usize] = Some((r, Instant::now()));
                    }
                    self.received += 1;
                    self.bytes_received += len as u64;
                    let Some(i) = c.checked_sub(self.first).map(|i| i as usize) else {
                        continue;
                    };
                    if i < self.clients.len() {
                        self.clients[i].on_message(now_us(), s, msg);
                        touched.push(i);
                    }
                }
                Incoming::Lost(s, r, nth, why) => {
                    if self.conns[s as usize][r].opened == nth {
                        self.lost(s as usize, r, why)?;
                    }
                }
            }
        }
        let now = now_us();
        // A message may have set a timer sooner than the next tick (a baseline's back-off
        // before it restarts): without this the restart waited for the resend tick.
        for &i in &touched {
            self.next_tick[i] = self.next_tick[i].min(now + self.clients[i].tick_every());
        }
        for i in 0..self.clients.len() {
            if now >= self.next_tick[i] && !self.clients[i].idle() {
                self.clients[i].tick(now);
                self.next_tick[i] = now + self.clients[i].tick_every();
                touched.push(i);
            }
        }
        touched.sort_unstable();
        touched.dedup();
        for i in touched {
            self.send_from(i)?;
            events.extend(self.clients[i].events().into_iter().map(|e| (i, e)));
        }
        self.flush_all()
    }

    /// Flushes every connection (a lost replica connection is dropped, to be made again).
    fn flush_all(&mut self) -> io::Result<()> {
        for s in 0..self.conns.len() {
            for r in 0..self.conns[s].len() {
                let failed = match self.conns[s][r].w.as_mut().map(Write::flush) {
                    Some(Err(e)) => e.to_string(),
                    _ => continue,
                };
                self.lost(s, r, failed)?;
            }
        }
        Ok(())
    }

    /// Encodes what client `i` has to send into the server buffers (flushed at the end of
    /// `poll`), to every replica of a group.
    fn send_from(&mut self, i: usize) -> io::Result<()> {
        let party = self.first + i as u32;
        let out = self.clients[i].drain();
        for (s, msg) in out {
            let s = s as usize;
            if s >= self.conns.len() {
                return Err(io::Error::other(format!("no server {s}")));
            }
            let leader = self.leader[s]
                .filter(|&(r, at)| at.elapsed() < LEADER_TRUST && self.conns[s][r].w.is_some())
                .map(|(r, _)| r);
            for r in 0..self.conns[s].len() {
                if leader.is_some_and(|l| l != r) {
                    continue;
                }
                let conn = &self.conns[s][r];
                if conn.w.is_none() && conn.retry_at.is_some_and(|t| Instant::now() >= t) {
                    if let Err(e) = self.open(s, r) {
                        self.lost(s, r, e.to_string())?;
                    }
                }
                let Some(w) = self.conns[s][r].w.as_mut() else {
                    continue;
                };
                if let Err(e) = write_msg(w, self.encoding, party, &msg, &mut self.scratch) {
                    self.lost(s, r, e.to_string())?;
                    continue;
                }
                self.bytes_sent += self.scratch.len() as u64;
                self.sent += 1;
            }
        }
        Ok(())
    }

    /// Every client's counters, summed.
    pub fn stats(&self) -> verso_ncc::ClientStats {
        let mut sum = verso_ncc::ClientStats::default();
        for c in &self.clients {
            sum.add(&c.stats());
        }
        sum
    }
}

fn read_loop<M: Wire>(
    server: ServerId,
    (replica, nth): (usize, u64),
    encoding: Encoding,
    stream: TcpStream,
    (tx, notify): (Sender<Incoming<M>>, Arc<OnceLock<Notify>>),
) {
    let handed = |_: ()| {
        if let Some(f) = notify.get() {
            f();
        }
    };
    let mut reader = io::BufReader::new(stream);
    let mut buf = Vec::new();
    loop {
        let lost = match read_frame(&mut reader, encoding, &mut buf) {
            Ok(Some(Frame::Msg { party, bytes })) => match M::decode_as(encoding, &bytes) {
                Ok(msg) => {
                    let len = msg_frame_len(encoding, party, bytes.len());
                    match tx.send(Incoming::Msg(server, replica, party, msg, len)) {
                        Ok(()) => handed(()),
                        Err(_) => return,
                    }
                    continue;
                }
                Err(e) => e.to_string(),
            },
            Ok(Some(other)) => format!("unexpected frame {other:?}"),
            Ok(None) => "closed the connection".to_string(),
            Err(e) => e.to_string(),
        };
        if tx.send(Incoming::Lost(server, replica, nth, lost)).is_ok() {
            handed(());
        }
        return;
    }
}
