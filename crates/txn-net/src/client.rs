//! A pool of protocol clients in one thread, sharing one connection per server.
//!
//! Each protocol client coordinates its own transactions (the paper co-locates the
//! coordinator with the client, digest pitfall 14); the pool only carries their messages
//! and runs their timers. A reader thread per server connection decodes what arrives and
//! hands it over a channel, so the pool's thread waits on one channel for every server.

use std::io::{self, BufWriter, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::thread;
use std::time::Duration;

use verso_ncc::wire::{Encoding, Wire};
use verso_ncc::{ClientEvent, ClientId, ServerId, TxnClient};

use crate::frame::{msg_frame_len, read_frame, write_frame, write_msg, Frame, Hello};
use crate::now_us;

/// What a reader thread hands over.
enum Incoming<M> {
    /// A message and the bytes its frame took.
    Msg(ServerId, ClientId, M, usize),
    /// The server closed the connection or sent something unreadable.
    Lost(ServerId, String),
}

/// Protocol clients `first..first + n` and their connections.
pub struct Pool<C: TxnClient> {
    clients: Vec<C>,
    first: ClientId,
    /// Per client: when its timers are next due.
    next_tick: Vec<u64>,
    writers: Vec<BufWriter<TcpStream>>,
    rx: Receiver<Incoming<C::Msg>>,
    encoding: Encoding,
    scratch: Vec<u8>,
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
        let count = u32::try_from(clients.len())
            .ok()
            .filter(|&n| (1..=crate::frame::MAX_CLIENTS_PER_CONNECTION).contains(&n))
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "1 to 65536 clients"))?;
        let (tx, rx) = mpsc::channel();
        let mut writers = Vec::new();
        let mut scratch = Vec::new();
        for (s, &addr) in servers.iter().enumerate() {
            let stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
            stream.set_nodelay(true)?;
            let reader = stream.try_clone()?;
            let mut w = BufWriter::new(stream);
            write_frame(
                &mut w,
                encoding,
                &Frame::Hello(Hello::Clients { first, count }),
                &mut scratch,
            )?;
            w.flush()?;
            writers.push(w);
            let tx = tx.clone();
            thread::Builder::new()
                .name("txn-client-read".into())
                .spawn(move || read_loop::<C::Msg>(s as ServerId, encoding, reader, tx))?;
        }
        let n = clients.len();
        Ok(Pool {
            clients,
            first,
            next_tick: vec![0; n],
            writers,
            rx,
            encoding,
            scratch,
            sent: 0,
            received: 0,
            bytes_sent: 0,
            bytes_received: 0,
        })
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

    /// Begins a transaction on client `i` (which must not be busy) and sends its requests.
    pub fn begin(&mut self, i: usize, ops: Vec<verso_ncc::Op>, last: bool) -> io::Result<()> {
        let now = now_us();
        self.clients[i].begin(now, ops, last);
        self.next_tick[i] = now + self.clients[i].tick_every();
        self.send_from(i)
    }

    /// Sends client `i`'s next shot.
    pub fn next_shot(&mut self, i: usize, ops: Vec<verso_ncc::Op>, last: bool) -> io::Result<()> {
        self.clients[i].next_shot(now_us(), ops, last);
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
        let first = match self.rx.recv_timeout(timeout) {
            Ok(m) => Some(m),
            Err(RecvTimeoutError::Timeout) => None,
            Err(RecvTimeoutError::Disconnected) => {
                return Err(io::Error::other("every server connection is gone"));
            }
        };
        let mut touched = Vec::new();
        for incoming in first.into_iter().chain(self.rx.try_iter().take(4096)) {
            match incoming {
                Incoming::Msg(s, c, msg, len) => {
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
                Incoming::Lost(s, why) => {
                    return Err(io::Error::other(format!("server {s}: {why}")));
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
        for w in &mut self.writers {
            w.flush()?;
        }
        Ok(())
    }

    /// Encodes what client `i` has to send into the server buffers (flushed by `poll`,
    /// or at once after `begin` and `next_shot`).
    fn send_from(&mut self, i: usize) -> io::Result<()> {
        let party = self.first + i as u32;
        let out = self.clients[i].drain();
        let mut used = Vec::new();
        for (s, msg) in out {
            let w = self
                .writers
                .get_mut(s as usize)
                .ok_or_else(|| io::Error::other(format!("no server {s}")))?;
            write_msg(w, self.encoding, party, &msg, &mut self.scratch)?;
            self.bytes_sent += self.scratch.len() as u64;
            used.push(s as usize);
            self.sent += 1;
        }
        for s in used {
            self.writers[s].flush()?;
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
    encoding: Encoding,
    stream: TcpStream,
    tx: Sender<Incoming<M>>,
) {
    let mut reader = io::BufReader::new(stream);
    let mut buf = Vec::new();
    loop {
        let lost = match read_frame(&mut reader, encoding, &mut buf) {
            Ok(Some(Frame::Msg { party, bytes })) => match M::decode_as(encoding, &bytes) {
                Ok(msg) => {
                    let len = msg_frame_len(encoding, party, bytes.len());
                    if tx.send(Incoming::Msg(server, party, msg, len)).is_err() {
                        return;
                    }
                    continue;
                }
                Err(e) => e.to_string(),
            },
            Ok(Some(other)) => format!("unexpected frame {other:?}"),
            Ok(None) => "closed the connection".to_string(),
            Err(e) => e.to_string(),
        };
        let _ = tx.send(Incoming::Lost(server, lost));
        return;
    }
}
