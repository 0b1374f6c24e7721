//! The gateway's I/O: a listener and a thread per client connection, blocking on its
//! socket and on its plans' answers. A connection's requests run in order, pipelined ones
//! included; at most `max_clients` connections are served at once.

use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;

use verso_server::resp::{Args, Limits, Parser, Reply};
use verso_txn_net::frame::REQUEST_BYTES_MAX;

use crate::conn::{Conn, Step};
use crate::coordinator::Handle;
use crate::plan::KEYS_MAX;

/// What one request may hold: a value up to what an NCC request carries, and MSET's
/// arguments for as many keys as a transaction may name.
pub fn limits() -> Limits {
    Limits {
        bulk_len_max: REQUEST_BYTES_MAX,
        multibulk_len_max: 2 * KEYS_MAX + 8,
        query_buffer_max: 64 << 20,
    }
}

/// Replies buffered past this many bytes are written before the next request runs.
const OUT_FLUSH_BYTES: usize = 1 << 20;

/// Serves clients on `listener` until it fails.
pub fn serve(listener: TcpListener, handle: Handle, max_clients: usize) -> io::Result<()> {
    let open = Arc::new(AtomicUsize::new(0));
    let ids = AtomicU64::new(1);
    for stream in listener.incoming() {
        let mut stream = match stream {
            Ok(s) => s,
            // A connection that failed before it was accepted is the client's problem.
            Err(e) if e.kind() == io::ErrorKind::ConnectionAborted => continue,
            Err(e) => return Err(e),
        };
        if open.fetch_add(1, Ordering::SeqCst) >= max_clients {
            open.fetch_sub(1, Ordering::SeqCst);
            let _ = stream.write_all(b"-ERR max number of clients reached\r\n");
            continue;
        }
        let (handle, mine) = (handle.clone(), Arc::clone(&open));
        let id = ids.fetch_add(1, Ordering::Relaxed);
        let spawned = thread::Builder::new()
            .name("gateway-conn".into())
            .spawn(move || {
                // A connection's I/O errors end only that connection.
                let _ = connection(stream, &handle, id);
                mine.fetch_sub(1, Ordering::SeqCst);
            });
        if spawned.is_err() {
            open.fetch_sub(1, Ordering::SeqCst);
        }
    }
    Ok(())
}

/// Reads requests, runs them in order, writes the replies of each batch of pipelined
/// requests together.
fn connection(mut stream: TcpStream, handle: &Handle, id: u64) -> io::Result<()> {
    stream.set_nodelay(true)?;
    let parser = Parser::new(limits());
    let mut conn = Conn::new(id);
    let mut args = Args::default();
    let mut buf: Vec<u8> = Vec::with_capacity(16 << 10);
    let mut out: Vec<u8> = Vec::with_capacity(16 << 10);
    let mut chunk = vec![0u8; 64 << 10];
    loop {
        let mut used = 0;
        let mut close = false;
        while !close {
            match parser.parse_into(&buf[used..], &mut args) {
                Ok(Some(n)) => used += n,
                Ok(None) => break,
                Err(e) => {
                    Reply::err(e).encode(conn.version(), &mut out);
                    stream.write_all(&out)?;
                    return Ok(());
                }
            }
            let reply = match conn.request(args.as_slice()) {
                Step::Nothing => continue,
                Step::Reply(r) => r,
                Step::Close(r) => {
                    close = true;
                    r
                }
                Step::Run(plan) => match handle.run(plan) {
                    Ok(done) => conn.completed(done),
                    Err(e) => e,
                },
            };
            reply.encode(conn.version(), &mut out);
            // Replies to a long pipeline go out as they pile up, not all at its end.
            if out.len() >= OUT_FLUSH_BYTES {
                stream.write_all(&out)?;
                out.clear();
            }
        }
        buf.drain(..used);
        if !out.is_empty() {
            stream.write_all(&out)?;
            out.clear();
        }
        if close {
            return Ok(());
        }
        let n = stream.read(&mut chunk)?;
        if n == 0 {
            return Ok(());
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}
