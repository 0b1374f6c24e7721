//! The server over real TCP: pipelining, RESP3, malformed input closing the connection,
//! protected mode, and clean shutdown.

use std::io::{Read, Write};
use std::net::{IpAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use verso_engine::{Concurrency, Db, Options};
use verso_server::server::{self, ServerConfig, StartError};
use verso_server::session::Shared;

fn with_server(cfg: ServerConfig, test: impl FnOnce(u16)) {
    let listener = server::bind(&cfg).expect("bind");
    let port = listener.local_addr().unwrap().port();
    let db = Db::open(Options::default().concurrency(Concurrency::PrecisionLocking)).unwrap();
    let shared = Shared::new(db, cfg.password.clone()).unwrap();
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| server::serve(listener, &shared, &cfg, &stop));
        test(port);
        stop.store(true, Ordering::Relaxed);
    });
}

fn local() -> ServerConfig {
    ServerConfig {
        port: 0,
        ..ServerConfig::default()
    }
}

/// Reads until `expected` bytes arrived (or the peer closed).
fn read_n(c: &mut TcpStream, expected: usize) -> String {
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    while buf.len() < expected {
        match c.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
    String::from_utf8_lossy(&buf).into_owned()
}

/// Reads until the text received ends with `suffix` (or 5 s pass).
fn read_until(c: &mut TcpStream, suffix: &str) -> String {
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    while !buf.ends_with(suffix.as_bytes()) {
        match c.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
    String::from_utf8_lossy(&buf).into_owned()
}

#[test]
fn pipelined_commands_are_answered_in_order() {
    with_server(local(), |port| {
        let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
        c.write_all(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nhello\r\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\nPING\r\n*2\r\n$4\r\nINCR\r\n$1\r\nk\r\n")
            .unwrap();
        let want =
            "+OK\r\n$5\r\nhello\r\n+PONG\r\n-ERR value is not an integer or out of range\r\n";
        assert_eq!(read_n(&mut c, want.len()), want);
        c.write_all(b"HELLO 3\r\nGET missing\r\n").unwrap();
        let got = read_until(&mut c, "_\r\n");
        assert!(
            got.starts_with("%7\r\n") && got.contains("proto"),
            "{got:?}"
        );
    });
}

#[test]
fn malformed_protocol_gets_an_error_and_the_connection_closes() {
    with_server(local(), |port| {
        let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
        c.write_all(b"*1\r\n$-7\r\n").unwrap();
        let got = read_n(&mut c, 1 << 20);
        assert!(got.starts_with("-ERR Protocol error"), "{got:?}");
        // Closed: a further read ends.
        let mut one = [0u8; 1];
        assert!(matches!(c.read(&mut one), Ok(0) | Err(_)));
    });
}

#[test]
fn non_loopback_without_a_password_is_refused() {
    let cfg = ServerConfig {
        bind: IpAddr::from([0, 0, 0, 0]),
        port: 0,
        ..ServerConfig::default()
    };
    match server::bind(&cfg) {
        Err(e @ StartError::Unprotected(_)) => assert!(e.to_string().contains("--requirepass")),
        other => panic!("{other:?}"),
    }
}

#[test]
fn quit_replies_then_closes() {
    with_server(local(), |port| {
        let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
        c.write_all(b"QUIT\r\nPING\r\n").unwrap();
        assert_eq!(read_n(&mut c, 1 << 10), "+OK\r\n");
    });
}

/// A read shorter than the buffer counts as draining the socket, except after the peer's
/// FIN: a request sent together with the close must be answered and the connection closed
/// (no further event would come to close it).
#[test]
fn a_request_sent_with_the_close_is_answered_then_the_connection_closes() {
    with_server(local(), |port| {
        let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
        c.write_all(b"PING\r\n*2\r\n$4\r\nECHO\r\n$2\r\nhi\r\n")
            .unwrap();
        c.shutdown(std::net::Shutdown::Write).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut got = Vec::new();
        c.read_to_end(&mut got)
            .expect("the server closes after answering");
        assert_eq!(String::from_utf8_lossy(&got), "+PONG\r\n$2\r\nhi\r\n");
    });
}

/// Requests cut anywhere across reads, and values larger than one read, come out whole:
/// the incomplete tail of a read waits for the next one.
#[test]
fn requests_split_across_reads_are_answered_whole() {
    with_server(local(), |port| {
        let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
        c.set_nodelay(true).unwrap();
        let value: Vec<u8> = (0..200_000u32).map(|i| b'a' + (i % 26) as u8).collect();
        let mut wire = format!("*3\r\n$3\r\nSET\r\n$3\r\nbig\r\n${}\r\n", value.len()).into_bytes();
        wire.extend_from_slice(&value);
        wire.extend_from_slice(b"\r\n*2\r\n$6\r\nSTRLEN\r\n$3\r\nbig\r\nPING\r\n");
        for piece in wire.chunks(7_919) {
            c.write_all(piece).unwrap();
            std::thread::sleep(Duration::from_micros(200));
        }
        let want = "+OK\r\n:200000\r\n+PONG\r\n";
        assert_eq!(read_n(&mut c, want.len()), want);
        // Byte by byte, with replies arriving in between.
        for &b in b"*2\r\n$3\r\nGET\r\n$5\r\nsmall\r\nECHO x\r\n" {
            c.write_all(&[b]).unwrap();
        }
        let want = "$-1\r\n$1\r\nx\r\n";
        assert_eq!(read_n(&mut c, want.len()), want);
        c.write_all(b"GET big\r\n").unwrap();
        let mut want = b"$200000\r\n".to_vec();
        want.extend_from_slice(&value);
        want.extend_from_slice(b"\r\n");
        assert!(read_n(&mut c, want.len()).as_bytes() == want.as_slice());
    });
}
