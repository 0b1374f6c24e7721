//! A group replica's connections out: each with a thread of its own that writes what the
//! protocol thread queues, so that a peer that stops reading (stopped, partitioned, or
//! slow) fills its own queue and loses messages, as a lossy network would, instead of
//! blocking the protocol thread: its heartbeats must go on, or the group fails over for
//! nothing, and a stuck host would block its group for good. Replicas and shards tolerate
//! lost messages (VSR resends, NCC's clients resend); a connection to a client whose queue
//! overflows is closed (its transactions' answers are lost, and it resends or reconnects).

use std::io::{self, BufWriter, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::thread;
use std::time::Duration;

use verso_ncc::wire::Encoding;

use crate::frame::{write_frame, Frame, Hello};

/// Frames a link holds for its peer; more are dropped.
const QUEUE_FRAMES: usize = 4096;

/// How long an outgoing connection rests after a failure before it is tried again; what
/// is queued meanwhile is dropped.
const RECONNECT_AFTER: Duration = Duration::from_millis(100);

/// How long a connect may take (a peer that drops packets).
const CONNECT_TIMEOUT: Duration = Duration::from_millis(200);

/// One connection's writer thread.
pub(crate) struct Link {
    tx: SyncSender<Vec<u8>>,
}

impl Link {
    /// A link to `addr`, which it connects to (introducing itself with `hello`) when it has
    /// something to send, and again after a failure.
    pub(crate) fn outgoing(addr: SocketAddr, hello: Hello) -> io::Result<Link> {
        let (tx, rx) = mpsc::sync_channel(QUEUE_FRAMES);
        thread::Builder::new()
            .name("txn-group-link".into())
            .spawn(move || outgoing_loop(addr, hello, rx))?;
        Ok(Link { tx })
    }

    /// A link over a connection a peer opened; it ends when a write fails (the socket is
    /// shut down, so its reader reports the connection closed).
    pub(crate) fn accepted(stream: TcpStream) -> io::Result<Link> {
        let (tx, rx) = mpsc::sync_channel(QUEUE_FRAMES);
        thread::Builder::new()
            .name("txn-group-link".into())
            .spawn(move || accepted_loop(stream, rx))?;
        Ok(Link { tx })
    }

    /// Queues one frame's bytes; false if the queue is full (the frame is dropped) or the
    /// link has ended.
    pub(crate) fn send(&self, frame: Vec<u8>) -> bool {
        match self.tx.try_send(frame) {
            Ok(()) => true,
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => false,
        }
    }

    /// Queues one frame's bytes, waiting for room: for a control connection's dump, whose
    /// frames must all arrive. False if the link has ended.
    pub(crate) fn send_waiting(&self, frame: Vec<u8>) -> bool {
        self.tx.send(frame).is_ok()
    }
}

/// One frame's bytes.
pub(crate) fn frame_bytes(frame: &Frame) -> io::Result<Vec<u8>> {
    let mut out = Vec::new();
    let mut scratch = Vec::new();
    write_frame(&mut out, Encoding::Binary, frame, &mut scratch)?;
    Ok(out)
}

/// Writes `first` and everything queued behind it, then flushes.
fn write_batch(
    w: &mut BufWriter<TcpStream>,
    first: Vec<u8>,
    rx: &Receiver<Vec<u8>>,
) -> io::Result<()> {
    w.write_all(&first)?;
    for more in rx.try_iter() {
        w.write_all(&more)?;
    }
    w.flush()
}

fn connect(addr: SocketAddr, hello: Hello) -> io::Result<BufWriter<TcpStream>> {
    let s = TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT)?;
    s.set_nodelay(true)?;
    let mut w = BufWriter::with_capacity(64 << 10, s);
    w.write_all(&frame_bytes(&Frame::Hello(hello))?)?;
    Ok(w)
}

fn outgoing_loop(addr: SocketAddr, hello: Hello, rx: Receiver<Vec<u8>>) {
    let mut conn: Option<BufWriter<TcpStream>> = None;
    while let Ok(first) = rx.recv() {
        if conn.is_none() {
            match connect(addr, hello) {
                Ok(w) => conn = Some(w),
                Err(_) => {
                    // Lost, as on a network that is down; the protocols send again.
                    thread::sleep(RECONNECT_AFTER);
                    rx.try_iter().for_each(drop);
                    continue;
                }
            }
        }
        let w = conn.as_mut().expect("connected above");
        if write_batch(w, first, &rx).is_err() {
            conn = None;
        }
    }
}

fn accepted_loop(stream: TcpStream, rx: Receiver<Vec<u8>>) {
    let Ok(shut) = stream.try_clone() else {
        return;
    };
    let mut w = BufWriter::with_capacity(64 << 10, stream);
    while let Ok(first) = rx.recv() {
        if write_batch(&mut w, first, &rx).is_err() {
            let _ = shut.shutdown(std::net::Shutdown::Both);
            return;
        }
    }
}
