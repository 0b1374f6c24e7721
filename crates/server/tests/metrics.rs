//! Observability: INFO's sections and filtering, connected clients, aborts by reason, the age
//! of the oldest transaction, GC's record counts, and the Prometheus endpoint over HTTP.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::AtomicBool;

use verso_engine::{Concurrency, Db, Options};
use verso_server::resp::Reply;
use verso_server::server::ServerConfig;
use verso_server::session::{Session, Shared};
use verso_server::{info, metrics};

fn shared() -> Shared {
    let db = Db::open(Options::default().concurrency(Concurrency::PrecisionLocking)).unwrap();
    Shared::new(db, None).unwrap()
}

fn info_text(s: &mut Session<'_>, args: &str) -> String {
    let mut req = vec![b"INFO".to_vec()];
    req.extend(args.split_whitespace().map(|w| w.as_bytes().to_vec()));
    match s.execute(req) {
        Reply::Verbatim(text) => text,
        other => panic!("INFO replied {other:?}"),
    }
}

#[test]
fn info_has_every_section_and_filters_by_name() {
    let sh = shared();
    let mut c = Session::new(&sh);
    c.execute(vec![b"SET".to_vec(), b"k".to_vec(), b"v".to_vec()]);
    let all = info_text(&mut c, "");
    for header in ["# Server", "# Clients", "# Stats", "# Memory", "# Keyspace"] {
        assert!(all.contains(header), "{header} missing from {all}");
    }
    for key in [
        "connected_clients:1",
        "total_commands_processed:",
        "commits:",
        "aborts:",
        "conflicts_read_by_younger:",
        "conflicts_written_by_younger:",
        "conflicts_write_write:",
        "conflicts_read_changed:",
        "retries:",
        "records_removed:",
        "records_freed:",
        "oldest_transaction_age_seconds:0.000\r\n",
        "used_memory:",
        "db0:keys=1",
    ] {
        assert!(all.contains(key), "{key} missing from {all}");
    }
    let clients = info_text(&mut c, "CLIENTS");
    assert!(
        clients.starts_with("# Clients") && !clients.contains("# Stats"),
        "{clients}"
    );
    let two = info_text(&mut c, "memory keyspace");
    assert!(two.contains("# Memory") && two.contains("# Keyspace") && !two.contains("# Server"));
    assert_eq!(info_text(&mut c, "nosuchsection"), "");
    let everything = info_text(&mut c, "everything");
    assert!(everything.starts_with("# Server") && everything.contains("# Keyspace"));
}

#[test]
fn connected_clients_follows_sessions() {
    let sh = shared();
    let mut a = Session::new(&sh);
    {
        let _b = Session::new(&sh);
        assert!(info_text(&mut a, "clients").contains("connected_clients:2"));
    }
    assert!(info_text(&mut a, "clients").contains("connected_clients:1"));
}

#[test]
fn memory_is_the_resident_set_size() {
    let rss = metrics::rss_bytes().expect("/proc/self/status");
    assert!(rss > 1 << 20, "{rss}");
    let sh = shared();
    metrics::refresh_memory(&sh);
    let mut c = Session::new(&sh);
    assert!(!info_text(&mut c, "memory").contains("used_memory:0\r"));
}

fn http_get(port: u16, path: &str) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(s, "GET {path} HTTP/1.0\r\nHost: x\r\n\r\n").unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

#[test]
fn the_metrics_endpoint_serves_prometheus_text() {
    let sh = shared();
    let cfg = ServerConfig::default();
    let listener = metrics::bind(&cfg, 0).unwrap();
    let port = listener.local_addr().unwrap().port();
    let stop = AtomicBool::new(false);
    let mut c = Session::new(&sh);
    c.execute(vec![b"INCR".to_vec(), b"n".to_vec()]);
    std::thread::scope(|s| {
        s.spawn(|| metrics::serve(listener, &sh, &stop));
        let ok = http_get(port, "/metrics");
        assert!(ok.starts_with("HTTP/1.0 200 OK\r\n"), "{ok}");
        assert!(ok.contains("# TYPE verso_commits_total counter\n"), "{ok}");
        assert!(ok.contains("verso_connected_clients 1\n"), "{ok}");
        assert!(ok.contains("verso_keys{db=\"0\"} 1\n"), "{ok}");
        assert!(
            ok.contains("verso_conflicts_read_changed_total 0\n"),
            "{ok}"
        );
        for counter in ["verso_records_removed_total", "verso_records_freed_total"] {
            assert!(ok.contains(&format!("# TYPE {counter} counter\n")), "{ok}");
        }
        assert!(
            ok.contains("# TYPE verso_oldest_transaction_age_seconds gauge\n")
                && ok.contains("verso_oldest_transaction_age_seconds 0.000\n"),
            "{ok}"
        );
        let missing = http_get(port, "/other");
        assert!(missing.starts_with("HTTP/1.0 404"), "{missing}");
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
    });
    // Every sample line is `name value` or `name{labels} value` with a numeric value.
    for line in info::prometheus(&sh)
        .lines()
        .filter(|l| !l.starts_with('#'))
    {
        let value = line.rsplit(' ').next().unwrap();
        assert!(value.parse::<f64>().is_ok_and(f64::is_finite), "{line}");
    }
}

/// A transaction left open shows in INFO and the metrics as the age of the oldest one (only an
/// embedding caller can do that: no client state holds one), and GC's record counts move.
#[test]
fn the_oldest_transaction_age_and_record_removal_are_reported() {
    let sh = shared();
    let mut c = Session::new(&sh);
    let field = |text: &str, key: &str| -> f64 {
        let line = text.lines().find(|l| l.starts_with(key)).expect(key);
        line[key.len() + 1..].trim().parse().expect(key)
    };
    let open = sh.db.begin().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));
    let stats = info_text(&mut c, "stats");
    assert!(
        field(&stats, "oldest_transaction_age_seconds") >= 0.02,
        "{stats}"
    );
    let prom = info::prometheus(&sh);
    assert!(
        field(&prom, "verso_oldest_transaction_age_seconds") >= 0.02,
        "{prom}"
    );
    drop(open);
    let stats = info_text(&mut c, "stats");
    assert_eq!(field(&stats, "oldest_transaction_age_seconds"), 0.0);

    for line in ["SET gone v", "DEL gone"] {
        c.execute(line.split(' ').map(|w| w.as_bytes().to_vec()).collect());
    }
    // One pass takes the deleted key out of the index, the next frees its record.
    sh.db.collect_garbage();
    sh.db.collect_garbage();
    let stats = info_text(&mut c, "stats");
    assert!(field(&stats, "records_removed") >= 1.0, "{stats}");
    assert!(field(&stats, "records_freed") >= 1.0, "{stats}");
    assert!(field(&info::prometheus(&sh), "verso_records_removed_total") >= 1.0);
}
