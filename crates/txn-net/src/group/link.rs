//! A group replica's connections out. The protocol thread gathers a turn's frames for each
//! connection and, at the end of the turn, writes them itself in one non-blocking send:
//! no other thread is woken on the common path, and a burst of answers costs one system
//! call per connection. What the socket does not take at once goes to the connection's
//! writer thread, which finishes it with blocking writes while later turns queue behind
//! it (so the bytes on the wire stay in order). The queue is bounded: a peer that stops
//! reading (stopped, partitioned, or slow) fills its own queue and then loses whole turns,
//! as a lossy network would, instead of blocking the protocol thread, whose heartbeats
//! must go on (or the group fails over for nothing, and a stuck host blocks its group for
//! good). Replicas and shards tolerate lost messages (VSR resends, NCC's clients resend);
//! a connection to a client whose queue overflows is closed (its transactions' answers are
//! lost, and it resends or reconnects).

use std::io::{self, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread;
use std::time::Duration;

use verso_ncc::wire::Encoding;

use crate::frame::{write_frame, Frame, Hello};

/// Bytes a link holds for a peer that does not take them: once more are queued, further
/// turns are dropped whole (a frame is never cut). So a link holds at most this and one
/// turn, besides what its writer thread is writing.
const QUEUE_BYTES: usize = 16 << 20;

/// How long an outgoing connection rests after a failure before it is tried again; what
/// is queued meanwhile is dropped.
const RECONNECT_AFTER: Duration = Duration::from_millis(100);

/// How long a connect may take (a peer that drops packets).
const CONNECT_TIMEOUT: Duration = Duration::from_millis(200);

/// One connection out: this turn's frames, and the state shared with its writer thread.
pub(crate) struct Link {
    turn: Vec<u8>,
    /// Whether this turn holds frames that must arrive whatever the queue holds (a dump's).
    turn_must_arrive: bool,
    shared: Arc<Shared>,
}

struct Shared {
    state: Mutex<State>,
    /// Wakes the writer thread: it has a queue to write, or the link was dropped.
    wake: Condvar,
}

struct State {
    /// The connection, while there is one (the writer thread holds a clone).
    stream: Option<TcpStream>,
    /// Bytes the writer thread owes the socket, in order after what it is writing.
    queue: Vec<u8>,
    /// Whether the writer thread is writing (or connecting): while it is, new turns queue
    /// behind it rather than go straight to the socket.
    writing: bool,
    /// The connection failed for good (an accepted one).
    ended: bool,
    /// The link was dropped: the writer thread finishes what is queued, then stops.
    dropped: bool,
    /// Whether the link connects (and reconnects) to its peer itself.
    outgoing: Option<(SocketAddr, Hello)>,
}

impl Link {
    /// A link to `addr`, which it connects to (introducing itself with `hello`) when it has
    /// something to send, and again after a failure.
    pub(crate) fn outgoing(addr: SocketAddr, hello: Hello) -> io::Result<Link> {
        Link::start(None, Some((addr, hello)))
    }

    /// A link over a connection a peer opened; it ends when a write fails (the socket is
    /// shut down, so its reader reports the connection closed).
    pub(crate) fn accepted(stream: TcpStream) -> io::Result<Link> {
        Link::start(Some(stream), None)
    }

    fn start(stream: Option<TcpStream>, outgoing: Option<(SocketAddr, Hello)>) -> io::Result<Link> {
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                stream,
                queue: Vec::new(),
                writing: false,
                ended: false,
                dropped: false,
                outgoing,
            }),
            wake: Condvar::new(),
        });
        let for_writer = Arc::clone(&shared);
        thread::Builder::new()
            .name("txn-group-link".into())
            .spawn(move || writer_loop(&for_writer))?;
        Ok(Link {
            turn: Vec::new(),
            turn_must_arrive: false,
            shared,
        })
    }

    /// This turn's frames, to append to ([`Link::flush`] sends them).
    pub(crate) fn turn(&mut self) -> &mut Vec<u8> {
        &mut self.turn
    }

    /// Adds one frame's bytes to this turn.
    pub(crate) fn send(&mut self, frame: &[u8]) {
        self.turn.extend_from_slice(frame);
    }

    /// Adds one frame's bytes to this turn, to arrive whatever the queue holds: a control
    /// connection's dump, whose frames must all arrive.
    pub(crate) fn send_must_arrive(&mut self, frame: &[u8]) {
        self.turn.extend_from_slice(frame);
        self.turn_must_arrive = true;
    }

    /// Sends this turn's frames: straight to the socket when the writer thread is idle,
    /// else (and for what the socket does not take) through the writer thread. False if
    /// the turn was dropped (the queue is full) or the link has ended.
    pub(crate) fn flush(&mut self) -> bool {
        if self.turn.is_empty() {
            return true;
        }
        let must_arrive = std::mem::take(&mut self.turn_must_arrive);
        let mut st = self.shared.lock();
        if st.ended {
            self.turn.clear();
            return false;
        }
        if st.writing || st.stream.is_none() {
            // The bound stops a backlog from growing: a turn goes, whatever its size (a
            // released batch of large answers), while what is queued is within it.
            if !must_arrive && st.queue.len() > QUEUE_BYTES {
                self.turn.clear();
                return false;
            }
            st.queue.append(&mut self.turn);
            if !st.writing {
                st.writing = true;
                self.shared.wake.notify_one();
            }
            return true;
        }
        let stream = st.stream.as_ref().expect("checked above");
        match send_now(stream, &self.turn) {
            Ok(n) if n == self.turn.len() => {
                self.turn.clear();
                true
            }
            Ok(n) => {
                // The rest goes through the writer thread, in order, before anything later.
                st.queue.extend_from_slice(&self.turn[n..]);
                self.turn.clear();
                st.writing = true;
                self.shared.wake.notify_one();
                true
            }
            Err(_) => {
                self.turn.clear();
                st.fail();
                false
            }
        }
    }
}

#[cfg(test)]
impl Link {
    /// Waits until the writer thread has nothing left to write (tests).
    fn wait_idle(&self) {
        while self.shared.lock().writing {
            thread::sleep(Duration::from_millis(1));
        }
    }
}

/// Dropped, a link ends: its writer thread finishes what it has queued (unless the
/// connection fails; a peer dropped for falling behind has its socket shut down first),
/// then stops. This turn's frames not flushed are lost.
impl Drop for Link {
    fn drop(&mut self) {
        let mut st = self.shared.lock();
        st.dropped = true;
        self.shared.wake.notify_one();
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A writer thread never panics while holding it; if one did, the state is still a
        // queue of whole bytes to write.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl State {
    /// A write failed: an accepted connection ends (shut down, so its reader reports it
    /// closed); an outgoing one is dropped, and made again for the next turn.
    fn fail(&mut self) {
        if let Some(s) = self.stream.take() {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
        self.queue.clear();
        if self.outgoing.is_none() {
            self.ended = true;
        }
    }
}

/// Writes what `bytes` the socket takes without waiting.
fn send_now(stream: &TcpStream, bytes: &[u8]) -> io::Result<usize> {
    // SAFETY: the pointer and length name `bytes`, which outlives the call; the fd is
    // `stream`'s, open while `stream` is borrowed. MSG_DONTWAIT makes this one call
    // non-blocking without changing the socket's mode, which its writer thread shares.
    let n = unsafe {
        libc::send(
            stream.as_raw_fd(),
            bytes.as_ptr().cast(),
            bytes.len(),
            libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
        )
    };
    if n >= 0 {
        return Ok(n as usize);
    }
    let e = io::Error::last_os_error();
    match e.kind() {
        io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(0),
        _ => Err(e),
    }
}

fn connect(addr: SocketAddr, hello: Hello) -> io::Result<TcpStream> {
    let mut s = TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT)?;
    s.set_nodelay(true)?;
    s.write_all(&frame_bytes(&Frame::Hello(hello))?)?;
    Ok(s)
}

/// The writer thread: connects when it must, and writes the queue with blocking writes
/// until it is empty, while the protocol thread queues behind it.
fn writer_loop(shared: &Shared) {
    let mut st = shared.lock();
    loop {
        while !st.writing && !st.ended && !st.dropped {
            st = shared.wake.wait(st).unwrap_or_else(|e| e.into_inner());
        }
        if st.ended || (st.dropped && !st.writing) {
            return;
        }
        if st.stream.is_none() {
            let Some((addr, hello)) = st.outgoing.filter(|_| !st.dropped) else {
                st.ended = true;
                return;
            };
            drop(st);
            let made = connect(addr, hello);
            if made.is_err() {
                // Lost, as on a network that is down; the protocols send again.
                thread::sleep(RECONNECT_AFTER);
            }
            st = shared.lock();
            match made {
                Ok(s) => st.stream = Some(s),
                Err(_) => {
                    st.queue.clear();
                    st.writing = false;
                    continue;
                }
            }
        }
        if st.queue.is_empty() {
            st.writing = false;
            continue;
        }
        let bytes = std::mem::take(&mut st.queue);
        let Some(Ok(mut stream)) = st.stream.as_ref().map(TcpStream::try_clone) else {
            st.fail();
            st.writing = false;
            continue;
        };
        drop(st);
        let written = stream.write_all(&bytes);
        st = shared.lock();
        if written.is_err() {
            st.fail();
            st.writing = false;
        }
    }
}

/// One frame's bytes.
pub(crate) fn frame_bytes(frame: &Frame) -> io::Result<Vec<u8>> {
    let mut out = Vec::new();
    let mut scratch = Vec::new();
    write_frame(&mut out, Encoding::Binary, frame, &mut scratch)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::net::TcpListener;

    /// A turn of `len` bytes (at least 12) naming itself: its length, its number, then its
    /// number's low byte repeated.
    fn turn(id: u64, len: usize) -> Vec<u8> {
        let mut t = Vec::with_capacity(len);
        t.extend_from_slice(&(len as u32).to_le_bytes());
        t.extend_from_slice(&id.to_le_bytes());
        t.resize(len, id as u8);
        t
    }

    /// Reads turns until the peer closes, checking each is whole; returns their numbers.
    fn read_turns(mut r: impl Read) -> Vec<u64> {
        let mut bytes = Vec::new();
        r.read_to_end(&mut bytes).expect("read");
        let mut ids = Vec::new();
        let mut at = 0;
        while at < bytes.len() {
            let len = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
            let id = u64::from_le_bytes(bytes[at + 4..at + 12].try_into().unwrap());
            assert!(
                bytes[at + 12..at + len].iter().all(|&b| b == id as u8),
                "turn {id} arrived cut or mixed with another"
            );
            ids.push(id);
            at += len;
        }
        ids
    }

    fn pair() -> (TcpStream, TcpStream) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let client = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (server, _) = l.accept().unwrap();
        (server, client)
    }

    /// Turns of every size, some larger than the socket takes at once (so their rest goes
    /// through the writer thread while later turns queue behind): the peer receives
    /// exactly the turns `flush` accepted, whole and in order.
    #[test]
    fn turns_arrive_whole_and_in_order_through_both_paths() {
        let (server, client) = pair();
        let reader = thread::spawn(move || read_turns(client));
        let mut link = Link::accepted(server).unwrap();
        let mut accepted = Vec::new();
        let mut seed = 7u64;
        for id in 0..3_000u64 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let large = id % 50 == 0;
            if large {
                // One large turn in the queue at a time, so that it never overflows.
                link.wait_idle();
            }
            let len = 12 + (seed % if large { 3 << 20 } else { 2_000 }) as usize;
            link.send(&turn(id, len));
            if link.flush() {
                accepted.push(id);
            }
        }
        link.wait_idle();
        drop(link); // closes the connection
        let got = reader.join().unwrap();
        assert_eq!(accepted.len(), 3_000, "a reading peer lost turns");
        assert_eq!(got, accepted);
    }

    /// A peer that reads nothing never blocks the sender: its queue fills, further turns
    /// are dropped whole, and once it reads it gets exactly the accepted turns, in order.
    #[test]
    fn a_peer_that_stops_reading_loses_whole_turns_and_blocks_nothing() {
        let (server, client) = pair();
        let mut link = Link::accepted(server).unwrap();
        let mut accepted = Vec::new();
        for id in 0..64u64 {
            link.send(&turn(id, 1 << 20));
            if link.flush() {
                accepted.push(id);
            }
        }
        assert!(
            accepted.len() < 64,
            "64 MiB queued for a peer that reads nothing"
        );
        assert!(
            accepted.len() >= 16,
            "only {} turns of 1 MiB queued",
            accepted.len()
        );
        let reader = thread::spawn(move || read_turns(client));
        link.wait_idle();
        drop(link);
        assert_eq!(reader.join().unwrap(), accepted);
    }

    /// A turn larger than the queue's bound goes when nothing is queued before it (a
    /// released batch of large answers), and a dropped link still delivers what it took.
    #[test]
    fn a_large_turn_behind_an_empty_queue_goes_and_a_dropped_link_delivers_it() {
        let (server, client) = pair();
        let mut link = Link::accepted(server).unwrap();
        link.send(&turn(1, 20 << 20));
        assert!(link.flush(), "a 20 MiB turn behind an empty queue");
        drop(link);
        assert_eq!(read_turns(client), [1]);
    }

    /// An outgoing link connects when it first has something to send, introduces itself,
    /// and reconnects after its peer goes away.
    #[test]
    fn an_outgoing_link_introduces_itself_and_reconnects() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let hello = Hello::Replica {
            group: 1,
            replica: 2,
        };
        let hello_bytes = frame_bytes(&Frame::Hello(hello)).unwrap();
        let mut link = Link::outgoing(l.local_addr().unwrap(), hello).unwrap();
        for round in 0..2u64 {
            link.send(&turn(round, 100));
            assert!(link.flush());
            let (mut s, _) = l.accept().unwrap();
            let mut got = vec![0; hello_bytes.len() + 100];
            s.read_exact(&mut got).unwrap();
            assert_eq!(got[..hello_bytes.len()], hello_bytes[..]);
            assert_eq!(got[hello_bytes.len()..], turn(round, 100)[..]);
            drop(s);
            // Sends until the link notices the closed connection (a write fails), after
            // which the next turn goes over a new one.
            let mut failed = false;
            for _ in 0..1_000 {
                link.send(&turn(99, 100));
                if !link.flush() {
                    failed = true;
                    break;
                }
                thread::sleep(Duration::from_millis(1));
            }
            assert!(failed, "writes to a closed connection kept succeeding");
        }
    }
}
