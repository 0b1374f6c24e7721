//! State transfer (thesis §4.2.3, `CatchUpState`): a replica whose log does not reach the
//! leader's trimmed log base (it lost its disk: the primary trims only below what every
//! replica reported on its disk) gets the leader's state. The protocol's message carries
//! the small part (`verso_vsr::Snapshot`: the client table, the operations after the durable
//! point, a data file's name); the engine's data follows the file's format
//! (`checkpoint.rs`), written while the leader keeps committing, in [`StateData`] chunks
//! on the same connection, just before the message. Payloads from one replica to another
//! arrive in order or not at all (`transport.rs`), so the receiver has the whole file when
//! the message arrives, or it drops the message and asks again.
//!
//! Every payload between replicas is a [`Payload`]: a VSR message, a chunk, or a part of a
//! message too large for one payload. The message itself can be large: it carries the
//! writes of every operation after the durable point, which under a stream of large values
//! can pass the transport's 64 MiB; the stream thread then sends it in [`MessagePart`]s of
//! 1 MiB, which the receiver puts back together (at most [`MESSAGE_BYTES_MAX`]).

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use verso_engine::Db;
use verso_vsr::Message;

use crate::checkpoint::{self, GcPin};
use crate::op::{Batch, EngineSnapshot};
use crate::transport::TransportHandle;

pub(crate) type Msg = Message<Batch, (), EngineSnapshot>;

/// Bytes of checkpoint data per chunk.
const CHUNK_BYTES: usize = 1 << 20;
/// A stream waits while this much is queued for its peer (the transport drops the oldest
/// payloads of a full queue, which would cut the file).
const QUEUED_MAX: u64 = 16 << 20;
/// A stream that cannot hand a chunk to a peer for this long gives up (the peer asks again).
const STALL_MAX: Duration = Duration::from_secs(10);
/// A message larger than this goes in [`MessagePart`]s of this size.
const PART_BYTES: usize = CHUNK_BYTES;
/// The largest message a receiver puts back together from parts: what one frame of the
/// replica log takes (`disk.rs`), where the receiver writes the snapshot it installs.
pub(crate) const MESSAGE_BYTES_MAX: usize = 1 << 30;

/// One piece of a state transfer's data file.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct StateData {
    pub(crate) file: String,
    /// 0, 1, 2, ... within the file.
    pub(crate) seq: u32,
    #[serde(with = "serde_bytes")]
    pub(crate) bytes: Vec<u8>,
    pub(crate) last: bool,
}

/// One piece of an encoded [`Payload::Vsr`] too large for one payload. Pieces of one
/// message follow each other on one connection, numbered from 0; `id` tells one message's
/// pieces from another's (the transport may drop the end of one and the start of the next,
/// which must not splice), and `len` is the whole message's, checked at the end.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct MessagePart {
    pub(crate) id: u64,
    pub(crate) len: u64,
    pub(crate) seq: u32,
    #[serde(with = "serde_bytes")]
    pub(crate) bytes: Vec<u8>,
    pub(crate) last: bool,
}

/// What one replica sends another, decoded.
// Decoded once per payload and taken apart at once: boxing the message would only add an
// allocation per message.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Deserialize)]
pub(crate) enum Payload {
    Vsr(Msg),
    StateData(StateData),
    MessagePart(MessagePart),
}

/// [`Payload`], encoded without copying what it carries (the same encoding).
#[derive(Serialize)]
enum PayloadRef<'a> {
    Vsr(&'a Msg),
    StateData(&'a StateData),
    MessagePart(&'a MessagePart),
}

pub(crate) fn encode_message(m: &Msg) -> Vec<u8> {
    postcard::to_allocvec(&PayloadRef::Vsr(m)).expect("serializing to memory")
}

fn encode_data(d: &StateData) -> Vec<u8> {
    postcard::to_allocvec(&PayloadRef::StateData(d)).expect("serializing to memory")
}

/// A number for a message sent in parts, unique within this process and unlikely to
/// repeat one an earlier run of it sent (it starts from the clock).
fn next_message_id() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let _ = NEXT.compare_exchange(
        0,
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64 | 1),
        Relaxed,
        Relaxed,
    );
    NEXT.fetch_add(1, Relaxed)
}

/// Encodes `m` and hands it to `send` as one payload if it is at most `part_bytes` long,
/// otherwise as [`MessagePart`]s of `part_bytes` (the last shorter).
fn send_message(
    m: &Msg,
    part_bytes: usize,
    mut send: impl FnMut(Vec<u8>) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let whole = encode_message(m);
    if whole.len() <= part_bytes {
        return send(whole);
    }
    if whole.len() > MESSAGE_BYTES_MAX {
        // The receiver would drop it, and the protocol ask again for ever.
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!(
                "a {} message of {} bytes; a replica takes at most {MESSAGE_BYTES_MAX}",
                m.kind(),
                whole.len()
            ),
        ));
    }
    let id = next_message_id();
    let n = whole.len().div_ceil(part_bytes);
    for (seq, bytes) in whole.chunks(part_bytes).enumerate() {
        let part = MessagePart {
            id,
            len: whole.len() as u64,
            seq: u32::try_from(seq).map_err(|_| {
                std::io::Error::new(std::io::ErrorKind::InvalidInput, "a message of 4 G parts")
            })?,
            bytes: bytes.to_vec(),
            last: seq + 1 == n,
        };
        send(
            postcard::to_allocvec(&PayloadRef::MessagePart(&part)).expect("serializing to memory"),
        )?;
    }
    Ok(())
}

/// The data file a state transfer message names, if it is one.
pub(crate) fn transfer_file(m: &Msg) -> Option<&str> {
    match m {
        Message::CatchUpState { snapshot, .. } => match &snapshot.app {
            EngineSnapshot::Taken { file, .. } => Some(file),
            EngineSnapshot::Empty => None,
        },
        _ => None,
    }
}

/// Chunks written bytes into [`StateData`] payloads of [`CHUNK_BYTES`] (the last one
/// shorter) and hands each to `send`.
struct ChunkStream<'a, F: FnMut(StateData) -> std::io::Result<()>> {
    file: &'a str,
    seq: u32,
    buf: Vec<u8>,
    send: F,
}

impl<'a, F: FnMut(StateData) -> std::io::Result<()>> ChunkStream<'a, F> {
    fn new(file: &'a str, send: F) -> Self {
        ChunkStream {
            file,
            seq: 0,
            buf: Vec::with_capacity(CHUNK_BYTES),
            send,
        }
    }

    fn send(&mut self, last: bool) -> std::io::Result<()> {
        let data = StateData {
            file: self.file.to_string(),
            seq: self.seq,
            bytes: std::mem::replace(&mut self.buf, Vec::with_capacity(CHUNK_BYTES)),
            last,
        };
        (self.send)(data)?;
        self.seq = self.seq.checked_add(1).ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "a state transfer of 4 Pi chunks",
            )
        })?;
        Ok(())
    }

    /// Sends what is left as the last chunk.
    fn finish(mut self) -> std::io::Result<()> {
        self.send(true)
    }
}

impl<F: FnMut(StateData) -> std::io::Result<()>> Write for ChunkStream<'_, F> {
    /// Sends whole chunks; the rest waits for more bytes, or for [`ChunkStream::finish`].
    fn write(&mut self, mut bytes: &[u8]) -> std::io::Result<usize> {
        let n = bytes.len();
        while !bytes.is_empty() {
            let take = (CHUNK_BYTES - self.buf.len()).min(bytes.len());
            self.buf.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
            if self.buf.len() == CHUNK_BYTES {
                self.send(false)?;
            }
        }
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Hands `payload` to the transport for `to`, first waiting while the peer's queue is long.
fn send_waiting(transport: &TransportHandle, to: u8, payload: Vec<u8>) -> std::io::Result<()> {
    let started = Instant::now();
    while transport.queued_bytes(to) > QUEUED_MAX {
        if started.elapsed() > STALL_MAX {
            return Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "the peer stopped taking the state transfer",
            ));
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    transport.send(to, payload);
    Ok(())
}

/// The leader's side: at most one stream per peer, each on its own thread.
#[derive(Default)]
pub(crate) struct Outgoing {
    running: BTreeMap<u8, std::thread::JoinHandle<()>>,
    /// Streams started (a request while one runs to the same peer starts none).
    pub(crate) started: u64,
}

impl Outgoing {
    /// Streams the data `message` names to `to`, then `message`; the GC pin the snapshot
    /// took is released once the data is read. A stream already running to `to` makes this
    /// one redundant: it is dropped (the peer asks again if that one fails).
    pub(crate) fn start(
        &mut self,
        to: u8,
        message: Msg,
        db: Arc<Db>,
        transport: TransportHandle,
        pin: GcPin,
    ) {
        let Message::CatchUpState { snapshot, .. } = &message else {
            return;
        };
        let EngineSnapshot::Taken {
            file, durable_cts, ..
        } = &snapshot.app
        else {
            transport.send(to, encode_message(&message));
            return;
        };
        let (file, cts) = (file.clone(), *durable_cts);
        self.running.retain(|_, t| !t.is_finished());
        if self.running.contains_key(&to) {
            pin.release(&file);
            return;
        }
        // Released as soon as the data is read, or when the closure is dropped unrun (the
        // thread could not start) or unwinds.
        let pinned = pin.release_on_drop(&file);
        let thread = std::thread::Builder::new()
            .name(format!("vsr-state-{to}"))
            .spawn(move || {
                let started = Instant::now();
                let mut stream =
                    ChunkStream::new(&file, |d| send_waiting(&transport, to, encode_data(&d)));
                let streamed = checkpoint::write_to(&mut stream, &db, cts);
                drop(pinned);
                let sent = streamed.and_then(|stats| {
                    stream.finish()?;
                    send_message(&message, PART_BYTES, |p| send_waiting(&transport, to, p))?;
                    Ok(stats)
                });
                match sent {
                    Ok(stats) => {
                        tracing::info!(
                            peer = to,
                            keys = stats.entries,
                            bytes = stats.bytes,
                            ms = started.elapsed().as_millis() as u64,
                            "sent a state transfer"
                        );
                    }
                    Err(e) => tracing::warn!(peer = to, error = %e, "a state transfer stopped"),
                }
            });
        match thread {
            Ok(t) => {
                self.running.insert(to, t);
                self.started += 1;
            }
            Err(e) => {
                tracing::warn!(error = %e, "could not start a state transfer");
            }
        }
    }
}

/// The receiving side: the file being received, written as `incoming-<name>` and renamed
/// to its name once whole and synced.
pub(crate) struct Incoming {
    dir: PathBuf,
    current: Option<Receiving>,
    /// Per peer, the message being put back together from parts: its id, the next part's
    /// number and the bytes so far. One whose end never comes is dropped at the peer's
    /// next first part.
    parts: BTreeMap<u8, (u64, u32, Vec<u8>)>,
    /// [`MESSAGE_BYTES_MAX`]; smaller in tests.
    message_bytes_max: usize,
}

struct Receiving {
    from: u8,
    file: String,
    next: u32,
    out: BufWriter<File>,
}

impl Incoming {
    pub(crate) fn new(dir: &Path) -> Incoming {
        Incoming {
            dir: dir.to_path_buf(),
            current: None,
            parts: BTreeMap::new(),
            message_bytes_max: MESSAGE_BYTES_MAX,
        }
    }

    /// Takes one chunk. A first chunk starts over (dropping what was being received). A
    /// chunk out of order in the stream being received (its connection broke) drops that
    /// stream; one from any other stream (an old leader's, still running after a view
    /// change) is ignored, so it cannot cancel the transfer in progress.
    pub(crate) fn on_data(&mut self, from: u8, d: StateData) {
        if !checkpoint::valid_name(&d.file) {
            tracing::warn!(from, "a state transfer chunk with a bad file name, dropped");
            return;
        }
        let same_stream = self
            .current
            .as_ref()
            .is_some_and(|r| r.from == from && r.file == d.file);
        let continues = same_stream && self.current.as_ref().is_some_and(|r| r.next == d.seq);
        if !continues {
            if d.seq != 0 {
                // The middle of a stream whose start was lost: if it is ours, it has a gap.
                if same_stream {
                    self.abandon();
                }
                return;
            }
            if self.dir.join(&d.file).exists() {
                // A whole file of that name is here already: this replica's own
                // checkpoint, or a transfer received before. Never overwrite either.
                tracing::warn!(from, file = %d.file, "a state transfer names a file this replica has; dropped");
                return;
            }
            self.abandon();
            let path = self.dir.join(format!("incoming-{}", d.file));
            match File::create(&path) {
                Ok(f) => {
                    self.current = Some(Receiving {
                        from,
                        file: d.file.clone(),
                        next: 0,
                        out: BufWriter::with_capacity(1 << 20, f),
                    });
                }
                Err(e) => {
                    tracing::warn!(error = %e, "cannot receive a state transfer");
                    return;
                }
            }
        }
        let Some(r) = self.current.as_mut() else {
            return;
        };
        r.next = r.next.wrapping_add(1);
        if let Err(e) = r.out.write_all(&d.bytes) {
            tracing::warn!(error = %e, "cannot receive a state transfer");
            self.abandon();
            return;
        }
        if d.last {
            let r = self.current.take().expect("checked");
            let done = (|| -> std::io::Result<()> {
                let f = r.out.into_inner().map_err(|e| e.into_error())?;
                f.sync_data()?;
                std::fs::rename(
                    self.dir.join(format!("incoming-{}", r.file)),
                    self.dir.join(&r.file),
                )?;
                File::open(&self.dir)?.sync_all()
            })();
            match done {
                Ok(()) => tracing::info!(from, file = %r.file, "received a state transfer's data"),
                Err(e) => tracing::warn!(error = %e, "cannot receive a state transfer"),
            }
        }
    }

    fn abandon(&mut self) {
        if let Some(r) = self.current.take() {
            drop(r.out);
            let _ = std::fs::remove_file(self.dir.join(format!("incoming-{}", r.file)));
        }
    }

    /// Takes one part of a large message from `from`; returns the message's encoding once
    /// its last part is in. A part out of order (its connection broke, or the sender gave
    /// up) drops what was gathered, as does passing [`MESSAGE_BYTES_MAX`]: the message is
    /// lost, and the protocol asks again.
    pub(crate) fn on_part(&mut self, from: u8, p: MessagePart) -> Option<Vec<u8>> {
        if p.seq == 0 {
            if p.len > self.message_bytes_max as u64 {
                tracing::warn!(from, len = p.len, "a message too large to take; dropped");
                self.parts.remove(&from);
                return None;
            }
            self.parts.insert(from, (p.id, 0, Vec::new()));
        }
        let Some((id, next, bytes)) = self.parts.get_mut(&from) else {
            return None; // the middle of a message whose start was lost
        };
        let len = (bytes.len() + p.bytes.len()) as u64;
        if *id != p.id || *next != p.seq || len > p.len || (p.last && len != p.len) {
            tracing::warn!(
                from,
                seq = p.seq,
                "a large message arrived incomplete; dropped"
            );
            self.parts.remove(&from);
            return None;
        }
        *next = next.wrapping_add(1);
        bytes.extend_from_slice(&p.bytes);
        if p.last {
            return self.parts.remove(&from).map(|(_, _, bytes)| bytes);
        }
        None
    }

    /// Whether the data `message` names (if any) is here, whole: a state transfer whose data
    /// did not all arrive is dropped, as a lost message.
    pub(crate) fn ready(&self, message: &Msg) -> bool {
        match transfer_file(message) {
            None => true,
            Some(file) => checkpoint::valid_name(file) && self.dir.join(file).is_file(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(file: &str, seq: u32, bytes: &[u8], last: bool) -> StateData {
        StateData {
            file: file.to_string(),
            seq,
            bytes: bytes.to_vec(),
            last,
        }
    }

    /// Whatever sizes the writer hands it, the stream sends chunks of exactly `CHUNK_BYTES`
    /// (the last shorter, and marked last), numbered from 0, that the receiver puts back
    /// together byte for byte.
    #[test]
    fn chunks_are_bounded_numbered_and_reassemble_to_the_bytes_written() {
        let dir = tempfile::tempdir().unwrap();
        let file = "checkpoint-ab-1.data";
        let mut sent = Vec::new();
        let mut written = Vec::new();
        let mut stream = ChunkStream::new(file, |d| {
            sent.push(d);
            Ok(())
        });
        let mut x = 7u64;
        for len in [
            10,
            2 * CHUNK_BYTES + 5,
            0,
            CHUNK_BYTES - 15,
            5,
            3 * CHUNK_BYTES,
            1,
        ] {
            let piece: Vec<u8> = (0..len)
                .map(|_| {
                    x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
                    (x >> 56) as u8
                })
                .collect();
            stream.write_all(&piece).unwrap();
            written.extend_from_slice(&piece);
        }
        stream.finish().unwrap();
        let n = sent.len();
        assert_eq!(n, written.len() / CHUNK_BYTES + 1);
        for (i, d) in sent.iter().enumerate() {
            assert_eq!(d.seq, i as u32);
            assert_eq!(d.last, i == n - 1);
            assert!(
                d.bytes.len() == CHUNK_BYTES || d.last,
                "chunk {i}: {}",
                d.bytes.len()
            );
        }
        let mut inc = Incoming::new(dir.path());
        for d in sent {
            inc.on_data(1, d);
        }
        assert_eq!(std::fs::read(dir.path().join(file)).unwrap(), written);
    }

    #[test]
    fn a_transfer_never_overwrites_a_file_the_replica_has() {
        let dir = tempfile::tempdir().unwrap();
        let own = "checkpoint-5-2.data";
        std::fs::write(dir.path().join(own), b"live").unwrap();
        let mut inc = Incoming::new(dir.path());
        inc.on_data(1, chunk(own, 0, b"forged", true));
        assert_eq!(std::fs::read(dir.path().join(own)).unwrap(), b"live");
        assert!(!dir.path().join(format!("incoming-{own}")).exists());
    }

    #[test]
    fn a_chunk_of_another_stream_does_not_cancel_the_transfer_in_progress() {
        let dir = tempfile::tempdir().unwrap();
        let mut inc = Incoming::new(dir.path());
        let (a, old) = ("checkpoint-1-7.data", "checkpoint-0-3.data");
        inc.on_data(1, chunk(a, 0, b"ab", false));
        // An old leader's stream, still running: its middle chunks are ignored.
        inc.on_data(0, chunk(old, 5, b"zz", false));
        inc.on_data(0, chunk(old, 6, b"zz", true));
        inc.on_data(1, chunk(a, 1, b"cd", true));
        assert_eq!(std::fs::read(dir.path().join(a)).unwrap(), b"abcd");
        assert!(!dir.path().join(old).exists());
    }

    #[test]
    fn a_gap_in_the_stream_being_received_drops_it_and_a_new_start_replaces_it() {
        let dir = tempfile::tempdir().unwrap();
        let mut inc = Incoming::new(dir.path());
        let (a, b) = ("checkpoint-1-7.data", "checkpoint-2-9.data");
        inc.on_data(1, chunk(a, 0, b"ab", false));
        inc.on_data(1, chunk(a, 2, b"ef", true)); // chunk 1 was lost
        assert!(!dir.path().join(a).exists());
        assert!(!dir.path().join(format!("incoming-{a}")).exists());
        inc.on_data(1, chunk(a, 0, b"ab", false));
        inc.on_data(2, chunk(b, 0, b"xy", true)); // a new leader's stream starts over
        assert_eq!(std::fs::read(dir.path().join(b)).unwrap(), b"xy");
        assert!(!dir.path().join(format!("incoming-{a}")).exists());
    }

    /// A state transfer whose operations after the durable point carry 3 MiB of values.
    fn large_state_transfer() -> Msg {
        use crate::op::{TxnWrites, Write};
        use verso_vsr::client_table::ClientTable;
        use verso_vsr::{Snapshot, ViewNum, Viewstamp};
        let tail = (1..=3u64)
            .map(|op| {
                let writes = vec![Write {
                    table: "kv".into(),
                    key: format!("key{op}").into_bytes(),
                    value: Some(vec![op as u8; 1 << 20]),
                }];
                (op, vec![TxnWrites { cts: op, writes }])
            })
            .collect();
        Message::CatchUpState {
            view: ViewNum::ZERO,
            op_max: Viewstamp::ZERO,
            snapshot: Snapshot {
                ap: Viewstamp::ZERO,
                tail: Vec::new(),
                undo_base: Viewstamp::ZERO,
                app: EngineSnapshot::Taken {
                    file: "checkpoint-1-1.data".into(),
                    durable_cts: 0,
                    tail,
                },
                clients: ClientTable::new(8),
            },
            dp: Viewstamp::ZERO,
            dp_min: Viewstamp::ZERO,
        }
    }

    fn parts_of(m: &Msg, part_bytes: usize) -> Vec<MessagePart> {
        let mut parts = Vec::new();
        send_message(m, part_bytes, |bytes| {
            match postcard::from_bytes::<Payload>(&bytes).unwrap() {
                Payload::MessagePart(p) => parts.push(p),
                other => panic!("expected a part: {other:?}"),
            }
            Ok(())
        })
        .unwrap();
        parts
    }

    fn decode(bytes: &[u8]) -> Msg {
        match postcard::from_bytes::<Payload>(bytes).unwrap() {
            Payload::Vsr(m) => m,
            other => panic!("expected a message: {other:?}"),
        }
    }

    /// A message larger than a part goes in parts no larger than one (numbered, the last
    /// marked), and comes back equal; a small one goes whole.
    #[test]
    fn a_large_message_goes_in_parts_and_comes_back_whole() {
        let m = large_state_transfer();
        let whole = encode_message(&m);
        let parts = parts_of(&m, PART_BYTES);
        assert_eq!(parts.len(), whole.len().div_ceil(PART_BYTES));
        let dir = tempfile::tempdir().unwrap();
        let mut inc = Incoming::new(dir.path());
        let n = parts.len();
        for (i, p) in parts.into_iter().enumerate() {
            assert_eq!(p.seq as usize, i);
            assert_eq!(p.last, i + 1 == n);
            assert!(p.bytes.len() <= PART_BYTES);
            let got = inc.on_part(1, p);
            assert_eq!(got.is_some(), i + 1 == n, "part {i}");
            if let Some(bytes) = got {
                assert_eq!(bytes, whole);
                assert_eq!(decode(&bytes), m);
            }
        }
        let mut sent = Vec::new();
        send_message(&m, whole.len(), |b| {
            sent.push(b);
            Ok(())
        })
        .unwrap();
        assert_eq!(sent.len(), 1);
        assert_eq!(decode(&sent[0]), m);
    }

    /// A lost part loses the message and nothing after it until the next message starts;
    /// parts from two peers do not mix; a message past the limit is dropped.
    #[test]
    fn a_gap_or_an_oversized_message_loses_the_message_only() {
        let m = large_state_transfer();
        let dir = tempfile::tempdir().unwrap();
        let mut inc = Incoming::new(dir.path());
        let mut parts = parts_of(&m, PART_BYTES);
        let n = parts.len();
        assert!(n >= 3);
        parts.remove(1);
        for p in parts {
            assert!(inc.on_part(1, p).is_none());
        }
        // Two peers' messages interleaved, each whole.
        let (a, b) = (parts_of(&m, PART_BYTES), parts_of(&m, PART_BYTES));
        let mut done = 0;
        for (pa, pb) in a.into_iter().zip(b) {
            for (from, p) in [(1, pa), (2, pb)] {
                if let Some(bytes) = inc.on_part(from, p) {
                    assert_eq!(decode(&bytes), m);
                    done += 1;
                }
            }
        }
        assert_eq!(done, 2);
        // The end of one message and the start of the next lost: they do not splice.
        let (a, b) = (parts_of(&m, PART_BYTES), parts_of(&m, PART_BYTES));
        let k = a.len() / 2;
        let spliced = a.into_iter().take(k).chain(b.into_iter().skip(k));
        assert!(spliced.into_iter().all(|p| inc.on_part(1, p).is_none()));
        inc.message_bytes_max = 2 * PART_BYTES;
        assert!(parts_of(&m, PART_BYTES)
            .into_iter()
            .all(|p| inc.on_part(1, p).is_none()));
        assert!(inc.parts.is_empty(), "nothing is kept of a dropped message");
    }
}
