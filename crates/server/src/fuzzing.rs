//! The command dispatcher under untrusted bytes, shared by the fuzz target
//! (`fuzz/fuzz_targets/session_ops.rs`) and an ordinary test (`tests/dispatch_fuzz.rs`).
//!
//! The bytes go through [`Parser`] (small limits) into two [`Session`]s on one small database,
//! so MULTI, WATCH and SELECT interleave between connections as they would on a server. Every
//! reply is encoded in both protocol versions, and no transaction may be left open after a
//! request (nothing a connection keeps may hold one). Afterwards the database must work: a
//! fresh connection writes a key and reads it back. The only assertion that can fire on a
//! correct server is none at all: the input may do anything a client may.

use verso_engine::{Concurrency, Db, Options};

use crate::resp::{Limits, Parser, Reply};
use crate::session::{Session, SessionLimits, Shared};

/// Limits small enough that a fuzz input can reach them.
pub const LIMITS: Limits = Limits {
    bulk_len_max: 1 << 10,
    multibulk_len_max: 64,
    query_buffer_max: 1 << 12,
};
/// Requests run per input (bounds the work one input can cause).
pub const REQUESTS_MAX: usize = 256;
/// Per-connection limits small enough that a fuzz input reaches them too.
pub const SESSION_LIMITS: SessionLimits = SessionLimits {
    watched_keys_max: 4,
    multi_commands_max: 8,
    multi_bytes_max: 512,
};

/// A small database for [`run`]: short keys and values, precision locking as on the server.
pub fn shared() -> Shared {
    let opts = Options::default()
        .concurrency(Concurrency::PrecisionLocking)
        .key_size_max(256)
        .value_size_max(LIMITS.bulk_len_max * 4);
    let db = Db::open(opts).expect("opening a small database");
    Shared::new(db, None)
        .expect("making the server's tables")
        .with_limits(SESSION_LIMITS)
}

/// Feeds `data` to two sessions over `shared`: the first byte's bits choose which session
/// gets each request; a protocol error or QUIT ends that session's input, as it would close
/// the connection. Panics only if the server misbehaves.
pub fn run(shared: &Shared, data: &[u8]) {
    let Some((&selector, mut rest)) = data.split_first() else {
        return;
    };
    let parser = Parser::new(LIMITS);
    let mut sessions = [Session::new(shared), Session::new(shared)];
    let mut open = [true, true];
    let mut out = Vec::new();
    for i in 0..REQUESTS_MAX {
        let (args, used) = match parser.parse(rest) {
            Ok(Some(parsed)) => parsed,
            Ok(None) | Err(_) => break, // incomplete (the client went away) or malformed
        };
        assert!(
            used > 0 && used <= rest.len(),
            "used {used} of {}",
            rest.len()
        );
        rest = &rest[used..];
        let which = usize::from(selector >> (i % 8) & 1);
        if !open[which] || args.is_empty() {
            continue;
        }
        let session = &mut sessions[which];
        out.clear();
        session.execute_into(&args, &mut out);
        // Nothing a connection keeps between requests may hold a transaction (or GC), a
        // blocked one included.
        assert_eq!(
            shared.db.oldest_transaction_age(),
            None,
            "a transaction outlived its request"
        );
        if session.is_blocked() {
            // A blocking pop with nothing to pop: the client would wait; this one hangs up.
            open[which] = false;
            continue;
        }
        assert!(!out.is_empty(), "a request gets a reply");
        if session.closing {
            open[which] = false;
        }
    }
    drop(sessions); // ends MULTI blocks and forgets watched keys
    check_still_works(shared);
}

/// A fresh connection can write and read back a key, in database 0, outside any block.
fn check_still_works(shared: &Shared) {
    let mut probe = Session::new(shared);
    let key = b"\xffverso-fuzz-probe".to_vec();
    let set = probe.execute(vec![b"SET".to_vec(), key.clone(), b"alive".to_vec()]);
    assert_eq!(set, Reply::ok(), "SET after the input");
    let got = probe.execute(vec![b"GET".to_vec(), key.clone()]);
    assert_eq!(got, Reply::Bulk(b"alive".to_vec()), "GET after the input");
    let del = probe.execute(vec![b"DEL".to_vec(), key]);
    assert_eq!(del, Reply::Integer(1), "DEL after the input");
}
