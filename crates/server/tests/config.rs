//! `verso serve --config`: the TOML settings, flags over the file, unknown keys, the example.

use verso_server::config::{ConfigError, Settings};
use verso_server::server::ServerConfig;
use verso_server::session::SessionLimits;

#[test]
fn the_example_file_parses_to_the_defaults() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../verso.toml.example"
    ))
    .unwrap();
    let cfg = Settings::parse(&text).unwrap().resolve().unwrap();
    let d = ServerConfig::default();
    assert_eq!(cfg.bind, d.bind);
    assert_eq!(cfg.port, d.port);
    assert_eq!(cfg.password, None);
    assert_eq!(cfg.limits, d.limits);
    assert_eq!(cfg.max_clients, d.max_clients);
    assert_eq!(cfg.output_buffer_max, d.output_buffer_max);
    assert_eq!(cfg.session, d.session);
    assert_eq!(cfg.session, SessionLimits::default());
    assert_eq!(cfg.idle_timeout_s, d.idle_timeout_s);
    assert_eq!(cfg.threads, d.threads);
    // Every key in the example (commented or not) is a real setting.
    for line in text.lines() {
        let line = line.trim_start_matches("# ");
        if let Some((key, value)) = line.split_once(" = ") {
            if !key.contains(' ') {
                Settings::parse(&format!("{key} = {value}"))
                    .unwrap_or_else(|e| panic!("example key {key}: {e}"));
            }
        }
    }
}

#[test]
fn flags_override_the_file() {
    let file = Settings::parse(
        "port = 7000\nthreads = 3\nmax-clients = 5\ntimeout = 9\nmax-bulk-len = 100\n\
         max-multibulk-len = 10\nmax-query-buffer = 1000\nmax-output-buffer = 2000\n\
         bind = \"127.0.0.2\"\nrequirepass = \"pw\"\nmax-watched-keys = 7\n\
         max-multi-commands = 8\nmax-multi-bytes = 9\n",
    )
    .unwrap();
    let flags = Settings {
        port: Some(7001),
        max_bulk_len: Some(200),
        max_multi_bytes: Some(90),
        ..Settings::default()
    };
    let cfg = file.overridden_by(flags).resolve().unwrap();
    assert_eq!(cfg.port, 7001);
    assert_eq!(cfg.limits.bulk_len_max, 200);
    assert_eq!(cfg.limits.multibulk_len_max, 10);
    assert_eq!(cfg.limits.query_buffer_max, 1000);
    assert_eq!(cfg.output_buffer_max, 2000);
    assert_eq!(cfg.threads, 3);
    assert_eq!(cfg.max_clients, 5);
    assert_eq!(cfg.idle_timeout_s, 9);
    assert_eq!(cfg.bind.to_string(), "127.0.0.2");
    assert_eq!(cfg.password.as_deref(), Some("pw"));
    let session = SessionLimits {
        watched_keys_max: 7,
        multi_commands_max: 8,
        multi_bytes_max: 90,
    };
    assert_eq!(cfg.session, session);
}

#[test]
fn an_unknown_key_is_an_error_naming_it() {
    let err = Settings::parse("port = 1\nmaxclients = 3\n").unwrap_err();
    assert!(matches!(err, ConfigError::Parse(_)));
    assert!(err.to_string().contains("maxclients"), "{err}");
}

#[test]
fn bad_values_are_refused() {
    assert!(Settings::parse("port = \"x\"").is_err());
    assert!(Settings::parse("port = 70000").is_err());
    assert!(Settings::parse("bind = \"not an ip\"").is_err());
    for text in [
        "threads = 0",
        "max-clients = 0",
        "max-bulk-len = 0",
        "max-watched-keys = 0",
        "max-multi-commands = 0",
        "max-multi-bytes = 0",
        "requirepass = \"\"",
    ] {
        let s = Settings::parse(text).unwrap();
        assert!(s.resolve().is_err(), "{text}");
    }
}

// The settings in effect on a real server: a small worker pool serving more clients than it
// has threads, and each limit closing or refusing a client.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use verso_engine::{Concurrency, Db, Options};
use verso_server::server;
use verso_server::session::Shared;

fn with_server(settings: &str, test: impl FnOnce(u16)) {
    let cfg = Settings::parse(settings).unwrap().resolve().unwrap();
    let listener = server::bind(&cfg).expect("bind");
    let port = listener.local_addr().unwrap().port();
    let db = Db::open(Options::default().concurrency(Concurrency::PrecisionLocking)).unwrap();
    let shared = Shared::new(db, cfg.password.clone())
        .unwrap()
        .with_limits(cfg.session);
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| server::serve(listener, &shared, &cfg, &stop));
        test(port);
        stop.store(true, Ordering::Relaxed);
    });
}

fn connect(port: u16) -> TcpStream {
    let c = TcpStream::connect(("127.0.0.1", port)).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    c
}

/// Reads until the peer closes (or the timeout), returning what arrived.
fn read_to_close(c: &mut TcpStream) -> Vec<u8> {
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match c.read(&mut buf) {
            Ok(0) | Err(_) => return out,
            Ok(n) => out.extend_from_slice(&buf[..n]),
        }
    }
}

fn read_exact_len(c: &mut TcpStream, len: usize) -> Vec<u8> {
    let mut out = vec![0u8; len];
    c.read_exact(&mut out).unwrap();
    out
}

#[test]
fn two_workers_serve_many_pipelining_clients() {
    with_server("port = 0\nthreads = 2", |port| {
        std::thread::scope(|s| {
            for client in 0..16 {
                s.spawn(move || {
                    let mut c = connect(port);
                    let mut req = Vec::new();
                    for _ in 0..500 {
                        req.extend_from_slice(format!("INCR c{client}\r\n").as_bytes());
                    }
                    c.write_all(&req).unwrap();
                    let expected: String = (1..=500).map(|i| format!(":{i}\r\n")).collect();
                    let got = read_exact_len(&mut c, expected.len());
                    assert_eq!(String::from_utf8(got).unwrap(), expected);
                });
            }
        });
    });
}

#[test]
fn max_clients_refuses_the_one_too_many() {
    with_server("port = 0\nmax-clients = 2", |port| {
        let mut a = connect(port);
        let mut b = connect(port);
        for c in [&mut a, &mut b] {
            c.write_all(b"PING\r\n").unwrap();
            assert_eq!(read_exact_len(c, 7), b"+PONG\r\n");
        }
        let mut third = connect(port);
        let refused = read_to_close(&mut third);
        assert_eq!(refused, b"-ERR max number of clients reached\r\n");
        drop(a);
        // The freed slot is taken again once the server notices the close.
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let mut c = connect(port);
            c.write_all(b"PING\r\n").unwrap();
            let mut reply = [0u8; 7];
            if c.read_exact(&mut reply).is_ok() && &reply == b"+PONG\r\n" {
                break;
            }
            assert!(Instant::now() < deadline, "the slot never came back");
            std::thread::sleep(Duration::from_millis(50));
        }
    });
}

#[test]
fn an_idle_client_is_closed_after_the_timeout() {
    with_server("port = 0\ntimeout = 1", |port| {
        let mut c = connect(port);
        let start = Instant::now();
        assert_eq!(read_to_close(&mut c), b"");
        let waited = start.elapsed();
        assert!(waited >= Duration::from_millis(900), "{waited:?}");
        assert!(waited < Duration::from_secs(8), "{waited:?}");
    });
}

#[test]
fn request_limits_close_the_connection_with_an_error() {
    let settings = "port = 0\nmax-bulk-len = 10\nmax-multibulk-len = 3\nmax-query-buffer = 64";
    with_server(settings, |port| {
        for req in [
            &b"*2\r\n$3\r\nGET\r\n$11\r\n"[..],
            b"*4\r\n",
            &[b'A'; 100][..],
        ] {
            let mut c = connect(port);
            c.write_all(b"PING\r\n").unwrap();
            c.write_all(req).unwrap();
            let got = String::from_utf8(read_to_close(&mut c)).unwrap();
            assert!(got.starts_with("+PONG\r\n-ERR "), "{got:?}");
        }
    });
}

#[test]
fn a_client_that_never_reads_is_dropped_at_the_output_limit() {
    with_server("port = 0\nmax-output-buffer = 65536", |port| {
        let mut c = connect(port);
        c.write_all(b"SET big ").unwrap();
        c.write_all(&[b'x'; 60_000]).unwrap();
        c.write_all(b"\r\n").unwrap();
        assert_eq!(read_exact_len(&mut c, 5), b"+OK\r\n");
        // Ask for far more than the socket buffers can hold, and read nothing.
        let many = b"GET big\r\n".repeat(2000);
        let _ = c.write_all(&many);
        std::thread::sleep(Duration::from_millis(500));
        let got = read_to_close(&mut c);
        assert!(
            got.len() < 60_000 * 2000,
            "the server kept a client that never read"
        );
    });
}

#[test]
fn session_limits_from_the_settings_apply_on_a_real_server() {
    with_server(
        "port = 0\nmax-watched-keys = 2\nmax-multi-commands = 2",
        |port| {
            let mut c = connect(port);
            c.write_all(b"WATCH a b c\r\nWATCH a b\r\nMULTI\r\nPING\r\nPING\r\nPING\r\nEXEC\r\n")
                .unwrap();
            let expected = "-ERR too many watched keys (max 2); raise --max-watched-keys\r\n\
                            +OK\r\n+OK\r\n+QUEUED\r\n+QUEUED\r\n\
                            -ERR too many commands queued in MULTI (max 2); raise --max-multi-commands\r\n\
                            -EXECABORT Transaction discarded because of previous errors.\r\n";
            let got = read_exact_len(&mut c, expected.len());
            assert_eq!(String::from_utf8(got).unwrap(), expected);
        },
    );
}
