//! The replica transport over real loopback sockets: delivery and order, authentication,
//! strangers, restarts, bounded queues and prompt shutdown.
//!
//! Every listener is bound to port 0 before the configs are written, so tests never collide,
//! and every wait is for a condition with a deadline.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::mpsc::{channel, Receiver};
use std::time::{Duration, Instant};

use hmac::{Hmac, Mac};
use sha2::Sha256;
use verso_replication::transport::{
    decode_frame, encode_frame, FrameKind, PeerState, ReplicaId, Transport, TransportConfig,
    TransportError, PROTOCOL_VERSION,
};

const SECRET: &[u8] = b"verso test secret, 32 bytes long";
const DEADLINE: Duration = Duration::from_secs(10);

type Inbox = Receiver<(ReplicaId, Vec<u8>)>;

fn bind() -> (TcpListener, SocketAddr) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    (listener, addr)
}

/// An address nothing listens on (bound, then released).
fn dead_addr() -> SocketAddr {
    bind().1
}

fn config(me: ReplicaId, addrs: &[(ReplicaId, SocketAddr)], secret: &[u8]) -> TransportConfig {
    let listen = addrs.iter().find(|a| a.0 == me).unwrap().1;
    let peers = addrs.iter().copied().filter(|a| a.0 != me).collect();
    let mut config = TransportConfig::new(me, listen, peers, secret.to_vec());
    config.backoff_max = Duration::from_millis(100);
    config
}

fn start(config: TransportConfig, listener: Option<TcpListener>) -> (Transport, Inbox) {
    let (tx, rx) = channel();
    let deliver = move |from, payload| {
        let _ = tx.send((from, payload));
    };
    let transport = match listener {
        Some(listener) => Transport::start_with_listener(config, listener, deliver),
        None => Transport::start(config, deliver),
    };
    (transport.unwrap(), rx)
}

/// Polls `condition` until it holds or [`DEADLINE`] passes.
fn eventually(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + DEADLINE;
    while !condition() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn recv(inbox: &Inbox) -> (ReplicaId, Vec<u8>) {
    inbox
        .recv_timeout(DEADLINE)
        .expect("a delivery before the deadline")
}

fn payload(from: ReplicaId, to: ReplicaId, seq: u32) -> Vec<u8> {
    // Every 500th payload is larger than the sender's write buffer, to take the direct path.
    let filler = if seq % 500 == 499 {
        300_000
    } else {
        seq as usize % 50
    };
    let mut p = vec![from, to];
    p.extend_from_slice(&seq.to_le_bytes());
    p.extend((0..filler).map(|i| (i as u32 ^ seq) as u8));
    p
}

#[test]
fn three_replicas_exchange_all_to_all_in_order() {
    const N: u32 = 3000;
    let bound: Vec<_> = (1..=3).map(|id| (id, bind())).collect();
    let addrs: Vec<_> = bound.iter().map(|(id, (_, addr))| (*id, *addr)).collect();
    let nodes: Vec<_> = bound
        .into_iter()
        .map(|(id, (listener, _))| start(config(id, &addrs, SECRET), Some(listener)))
        .collect();
    for seq in 0..N {
        for (i, (node, _)) in nodes.iter().enumerate() {
            let me = i as ReplicaId + 1;
            for to in (1..=3).filter(|&to| to != me) {
                node.send(to, payload(me, to, seq));
            }
        }
    }
    for (i, (_, inbox)) in nodes.iter().enumerate() {
        let me = i as ReplicaId + 1;
        let mut next = [0u32; 4];
        for _ in 0..2 * N {
            let (from, got) = recv(inbox);
            let seq = next[from as usize];
            assert_eq!(
                got,
                payload(from, me, seq),
                "replica {me}: from {from} #{seq}"
            );
            next[from as usize] += 1;
        }
    }
    for (node, inbox) in &nodes {
        assert!(inbox.try_recv().is_err(), "nothing beyond what was sent");
        // A sender counts a batch after its write returns, which may be after the delivery.
        let sent = |p: &PeerState| p.frames_sent == N as u64;
        eventually("sent counts", || node.peer_states().iter().all(sent));
        for peer in node.peer_states() {
            assert_eq!(peer.frames_received, N as u64);
            assert_eq!((peer.frames_dropped, peer.reconnects), (0, 0));
            assert!(peer.connected_out && peer.connected_in, "{peer:?}");
            assert!(peer.last_received.is_some());
        }
        assert_eq!(node.stats().handshakes_rejected, 0);
    }
}

/// Once connected, an idle sender's frames go straight into the socket from the caller's
/// thread; frames larger than the socket takes at once are written in part there and
/// finished by the sender thread, ahead of anything queued after them. Every frame arrives,
/// whole and in order, and each is counted once.
#[test]
fn direct_sends_and_frames_written_in_part_arrive_whole_and_in_order() {
    const N: u32 = 400;
    let (la, a) = bind();
    let (lb, b) = bind();
    let addrs = [(1, a), (2, b)];
    let mut ca = config(1, &addrs, SECRET);
    ca.max_payload = 4 << 20;
    ca.queue_bytes = 1 << 30;
    ca.queue_frames = 1 << 16;
    let mut cb = config(2, &addrs, SECRET);
    cb.max_payload = 4 << 20;
    let (ta, _ia) = start(ca, Some(la));
    let (_tb, ib) = start(cb, Some(lb));
    eventually("connected", || ta.peer_states()[0].connected_out);
    // Small frames one at a time (each sent once the last arrived: the sender is idle, so
    // they go direct), then a burst of large ones (most written in part or queued).
    let big = |seq: u32| -> Vec<u8> {
        let mut p = seq.to_le_bytes().to_vec();
        p.extend((0..(1usize << 20) + seq as usize).map(|i| (i as u32 ^ seq) as u8));
        p
    };
    for seq in 0..N {
        ta.send(2, payload(1, 2, seq % 499));
        assert_eq!(recv(&ib), (1, payload(1, 2, seq % 499)));
    }
    let direct = ta.peer_states()[0].frames_sent_direct;
    assert!(
        direct > N as u64 / 2,
        "{direct} of {N} idle sends went direct"
    );
    for seq in 0..40 {
        ta.send(2, big(seq));
    }
    for seq in 0..40 {
        let (from, got) = recv(&ib);
        assert_eq!(from, 1);
        assert!(
            got == big(seq),
            "large frame #{seq} arrived intact and in order"
        );
    }
    eventually("sent counts", || {
        ta.peer_states()[0].frames_sent == N as u64 + 40
    });
    let peer = &ta.peer_states()[0];
    assert_eq!((peer.frames_dropped, peer.reconnects), (0, 0), "{peer:?}");
    assert!(ib.try_recv().is_err(), "nothing beyond what was sent");
}

#[test]
fn a_wrong_secret_is_refused_in_both_directions() {
    let (la, a_addr) = bind();
    let (lb, b_addr) = bind();
    let addrs = [(1, a_addr), (2, b_addr)];
    let (a, a_inbox) = start(config(1, &addrs, SECRET), Some(la));
    let (b, b_inbox) = start(config(2, &addrs, b"another cluster's secret"), Some(lb));
    a.send(2, b"for b".to_vec());
    b.send(1, b"for a".to_vec());
    // Each side refuses the other's Challenge (bad MAC) and sees its own Challenge go
    // unanswered (incomplete), at least twice.
    eventually("rejections on both sides", || {
        let (sa, sb) = (a.stats(), b.stats());
        sa.handshakes_bad_mac >= 2
            && sb.handshakes_bad_mac >= 2
            && sa.handshakes_incomplete >= 2
            && sb.handshakes_incomplete >= 2
    });
    assert!(a_inbox.try_recv().is_err() && b_inbox.try_recv().is_err());
    for node in [&a, &b] {
        let peer = &node.peer_states()[0];
        assert!(!peer.connected_out && !peer.connected_in, "{peer:?}");
        assert_eq!((peer.frames_sent, peer.frames_received), (0, 0));
        assert!(
            peer.last_error.as_deref().unwrap().contains("secret"),
            "{peer:?}"
        );
        assert_eq!(
            node.stats().handshakes_rejected,
            node.stats().handshakes_bad_mac
        );
    }
}

/// Writes `bytes` as a stranger and asserts the transport hangs up on it promptly.
fn hung_up_on(addr: SocketAddr, bytes: &[u8]) {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.write_all(bytes).unwrap();
    assert_closed(&mut stream);
}

/// The other end closes (EOF or reset) well before the 30 s handshake timeout these tests use.
fn assert_closed(stream: &mut TcpStream) {
    let started = Instant::now();
    stream.set_read_timeout(Some(DEADLINE)).unwrap();
    let mut sink = [0; 256];
    loop {
        match stream.read(&mut sink) {
            Ok(0) => break,
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
            Err(e) => panic!("connection not closed: {e}"),
        }
    }
    assert!(started.elapsed() < DEADLINE);
}

fn hello(version: u16, from: ReplicaId, to: ReplicaId, nonce: &[u8; 32]) -> Vec<u8> {
    let mut payload = version.to_le_bytes().to_vec();
    payload.extend_from_slice(&[from, to]);
    payload.extend_from_slice(nonce);
    let mut frame = Vec::new();
    encode_frame(FrameKind::Hello, &payload, &mut frame);
    frame
}

fn frame(kind: FrameKind, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    encode_frame(kind, payload, &mut out);
    out
}

/// One transport (replica 1, peer 2) for strangers to poke at, with a handshake timeout long
/// enough that a prompt hang-up can only come from the transport noticing the bad bytes.
fn target() -> (Transport, Inbox, SocketAddr) {
    let (listener, addr) = bind();
    let addrs = [(1, addr), (2, dead_addr())];
    let mut config = config(1, &addrs, SECRET);
    config.handshake_timeout = Duration::from_secs(30);
    let (t, inbox) = start(config, Some(listener));
    (t, inbox, addr)
}

#[test]
fn strangers_are_hung_up_on_without_delivery() {
    let (t, inbox, addr) = target();
    hung_up_on(addr, b"PING\r\n");
    hung_up_on(
        addr,
        &[0xde, 0xad, 0xbe, 0xef, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9],
    );
    // A header announcing ~4 GiB: refused from the header, nothing sized for it.
    let mut huge = frame(FrameKind::Hello, b"")[..9].to_vec();
    huge[5..9].copy_from_slice(&0xffff_fff0u32.to_le_bytes());
    hung_up_on(addr, &huge);
    huge[4] = FrameKind::Data as u8;
    hung_up_on(addr, &huge);
    // A well-formed Data frame before any handshake.
    hung_up_on(addr, &frame(FrameKind::Data, b"SET k v"));
    eventually("five malformed handshakes", || {
        t.stats().handshakes_malformed == 5
    });

    hung_up_on(addr, &hello(PROTOCOL_VERSION + 1, 2, 1, &[1; 32]));
    hung_up_on(addr, &hello(PROTOCOL_VERSION, 9, 1, &[1; 32]));
    hung_up_on(addr, &hello(PROTOCOL_VERSION, 2, 3, &[1; 32]));
    // Knows the format but not the secret: gets a Challenge, cannot answer it.
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .write_all(&hello(PROTOCOL_VERSION, 2, 1, &[1; 32]))
        .unwrap();
    let (kind, challenge) = read_frame(&mut stream);
    assert_eq!((kind, challenge.len()), (FrameKind::Challenge, 64));
    stream
        .write_all(&frame(FrameKind::Proof, &challenge[32..]))
        .unwrap();
    stream
        .write_all(&frame(FrameKind::Data, b"SET k v"))
        .unwrap();
    assert_closed(&mut stream);

    eventually("every rejection counted", || {
        let s = t.stats();
        s.handshakes_bad_version == 1
            && s.handshakes_unknown_replica == 2
            && s.handshakes_bad_mac == 1
            && s.handshakes_rejected == 9
    });
    assert!(inbox.try_recv().is_err());
    assert_eq!(t.peer_states()[0].frames_received, 0);
}

#[test]
fn a_silent_connection_is_closed_at_the_handshake_timeout() {
    let (listener, addr) = bind();
    let mut config = config(1, &[(1, addr), (2, dead_addr())], SECRET);
    config.handshake_timeout = Duration::from_millis(300);
    let (t, _inbox) = start(config, Some(listener));
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .write_all(&hello(PROTOCOL_VERSION, 2, 1, &[1; 32]))
        .unwrap();
    assert_closed(&mut stream);
    eventually("an incomplete handshake", || {
        t.stats().handshakes_incomplete == 1
    });
}

/// Reads one frame (with a deadline) from a raw socket.
fn read_frame(stream: &mut TcpStream) -> (FrameKind, Vec<u8>) {
    stream.set_read_timeout(Some(DEADLINE)).unwrap();
    let mut buf = Vec::new();
    loop {
        if let Some((frame, used)) = decode_frame(&buf, 1 << 20).unwrap() {
            assert_eq!(
                used,
                buf.len(),
                "the acceptor sends nothing after its Challenge"
            );
            return (frame.kind, frame.payload);
        }
        let mut chunk = [0; 128];
        let n = stream.read(&mut chunk).unwrap();
        assert!(n > 0, "closed mid-frame");
        buf.extend_from_slice(&chunk[..n]);
    }
}

fn mac(label: &[u8], from: ReplicaId, to: ReplicaId, n1: &[u8], n2: &[u8]) -> Vec<u8> {
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(SECRET).unwrap();
    for part in [label, &PROTOCOL_VERSION.to_le_bytes(), &[from, to], n1, n2] {
        mac.update(part);
    }
    mac.finalize().into_bytes().to_vec()
}

/// Connects to `addr` as replica 2 calling replica 1, following the handshake as documented.
fn connect_by_the_book(addr: SocketAddr) -> TcpStream {
    let mut stream = TcpStream::connect(addr).unwrap();
    let nonce_c = [0x5a; 32];
    stream
        .write_all(&hello(PROTOCOL_VERSION, 2, 1, &nonce_c))
        .unwrap();
    let (kind, challenge) = read_frame(&mut stream);
    assert_eq!(kind, FrameKind::Challenge);
    let (nonce_s, mac_s) = challenge.split_at(32);
    assert_eq!(mac_s, mac(b"verso-vsr acceptor", 2, 1, &nonce_c, nonce_s));
    let proof = mac(b"verso-vsr connector", 2, 1, nonce_s, &nonce_c);
    stream.write_all(&frame(FrameKind::Proof, &proof)).unwrap();
    stream
}

#[test]
fn the_documented_handshake_works_and_a_newer_connection_replaces_the_older() {
    let (t, inbox, addr) = target();
    let mut first = connect_by_the_book(addr);
    first.write_all(&frame(FrameKind::Data, b"one")).unwrap();
    assert_eq!(recv(&inbox), (2, b"one".to_vec()));
    assert!(t.peer_states()[0].connected_in);

    let mut second = connect_by_the_book(addr);
    second.write_all(&frame(FrameKind::Data, b"two")).unwrap();
    assert_eq!(recv(&inbox), (2, b"two".to_vec()));
    assert_closed(&mut first);
    assert!(t.peer_states()[0].connected_in);

    // A handshake frame on an authenticated connection is a protocol error.
    second
        .write_all(&frame(FrameKind::Proof, &[0; 32]))
        .unwrap();
    assert_closed(&mut second);
    eventually("the connection gone", || !t.peer_states()[0].connected_in);
    assert_eq!(t.stats().frames_rejected, 1);
    assert_eq!(t.stats().handshakes_rejected, 0);
    assert!(inbox.try_recv().is_err());
}

#[test]
fn a_restarted_peer_is_reconnected_and_traffic_resumes() {
    let (la, a_addr) = bind();
    let (lb, b_addr) = bind();
    let addrs = [(1, a_addr), (2, b_addr)];
    let (a, a_inbox) = start(config(1, &addrs, SECRET), Some(la));
    let (b, b_inbox) = start(config(2, &addrs, SECRET), Some(lb));
    a.send(2, b"before".to_vec());
    b.send(1, b"before".to_vec());
    assert_eq!(recv(&b_inbox), (1, b"before".to_vec()));
    assert_eq!(recv(&a_inbox), (2, b"before".to_vec()));

    b.shutdown();
    eventually("a notices b is gone", || {
        let peer = &a.peer_states()[0];
        !peer.connected_out && !peer.connected_in
    });
    // The same address again, bound by `start` this time.
    let (b, b_inbox) = start(config(2, &addrs, SECRET), None);
    // Payloads sent while the link was down may be lost; keep sending until one arrives.
    let mut seq = 0u32;
    eventually("traffic both ways after the restart", || {
        seq += 1;
        a.send(2, seq.to_le_bytes().to_vec());
        b.send(1, seq.to_le_bytes().to_vec());
        std::thread::sleep(Duration::from_millis(20));
        b_inbox.try_recv().is_ok() && a_inbox.try_recv().is_ok()
    });
    let peer = &a.peer_states()[0];
    assert!(peer.connected_out && peer.connected_in, "{peer:?}");
    assert_eq!(peer.reconnects, 1, "{peer:?}");
}

#[test]
fn full_queues_drop_the_oldest_and_every_drop_is_counted() {
    let (listener, addr) = bind();
    let mut config = config(1, &[(1, addr), (2, dead_addr())], SECRET);
    config.queue_frames = 4;
    config.max_payload = 100;
    config.queue_bytes = 1000;
    let (t, _inbox) = start(config, Some(listener));
    for i in 0..10u8 {
        t.send(2, vec![i; 10]);
    }
    t.send(2, vec![0; 101]);
    t.send(7, b"nobody".to_vec());
    let peer = &t.peer_states()[0];
    assert_eq!((peer.frames_dropped, peer.frames_sent), (6 + 1, 0));
    assert!(peer.last_error.is_some() || !peer.connected_out);
    assert_eq!(t.stats().sends_unknown_peer, 1);
}

#[test]
fn shutdown_is_prompt_with_connections_stuck_mid_handshake() {
    // A "peer" that accepts connections (the kernel does) but never answers a Hello.
    let (mute, mute_addr) = bind();
    let (listener, addr) = bind();
    let (t, _inbox) = start(
        config(1, &[(1, addr), (2, mute_addr)], SECRET),
        Some(listener),
    );
    let mut stranger = TcpStream::connect(addr).unwrap();
    stranger
        .write_all(&hello(PROTOCOL_VERSION, 2, 1, &[1; 32]))
        .unwrap();
    t.send(2, b"queued".to_vec());
    let (mut to_mute, _) = mute.accept().unwrap();
    assert_eq!(read_frame(&mut to_mute).0, FrameKind::Hello);

    let started = Instant::now();
    drop(t);
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );
    assert_closed(&mut stranger);
    assert_closed(&mut to_mute);
    let _ = stranger.shutdown(Shutdown::Both);
    // The listener is closed too: the address can be bound again.
    TcpListener::bind(addr).unwrap();
}

#[test]
fn bad_configs_are_refused_with_typed_errors() {
    let (held, addr) = bind();
    let other = dead_addr();
    let refuse = |config: TransportConfig| Transport::start(config, |_, _| {}).err().unwrap();
    let short = TransportConfig::new(1, addr, vec![(2, other)], b"fifteen bytes!!".to_vec());
    assert!(matches!(
        refuse(short),
        TransportError::SecretTooShort { len: 15 }
    ));
    let me = TransportConfig::new(1, addr, vec![(1, other)], SECRET.to_vec());
    assert!(matches!(refuse(me), TransportError::PeerIsSelf(1)));
    let twice = TransportConfig::new(1, addr, vec![(2, other), (2, other)], SECRET.to_vec());
    assert!(matches!(refuse(twice), TransportError::DuplicatePeer(2)));
    let mut backoff = TransportConfig::new(1, addr, vec![(2, other)], SECRET.to_vec());
    backoff.backoff_min = Duration::from_secs(2);
    assert!(matches!(refuse(backoff), TransportError::InvalidConfig(_)));
    let taken = TransportConfig::new(1, addr, vec![(2, other)], SECRET.to_vec());
    let error = refuse(taken);
    assert!(matches!(error, TransportError::Bind { .. }), "{error}");
    assert!(error.to_string().contains(&addr.to_string()));
    drop(held);
}
