//! `verso serve --config`: the TOML settings, flags over the file, unknown keys, the example.

use verso_server::config::{ConfigError, Settings};
use verso_server::server::ServerConfig;

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
         bind = \"127.0.0.2\"\nrequirepass = \"pw\"\n",
    )
    .unwrap();
    let flags = Settings {
        port: Some(7001),
        max_bulk_len: Some(200),
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
        "requirepass = \"\"",
    ] {
        let s = Settings::parse(text).unwrap();
        assert!(s.resolve().is_err(), "{text}");
    }
}
