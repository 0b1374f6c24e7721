//! A blocking transaction API for an application's thread (issue 19 item 2): one protocol
//! client whose coordinator runs in the application's process, as the paper puts it, over
//! one connection per shard server.
//!
//! ```no_run
//! # use verso_txn_net::{session::Session, Protocol};
//! # use verso_ncc::{wire::Encoding, Key, Op, Value};
//! # fn main() -> std::io::Result<()> {
//! # let servers = vec!["127.0.0.1:7000".parse().unwrap(), "127.0.0.1:7001".parse().unwrap()];
//! let mut s = Session::connect(&servers, Protocol::parse("ncc").unwrap(), 7, Encoding::Binary)?;
//! s.put(&[("alice".into(), "100".into()), ("bob".into(), "100".into())])?;
//! // Balances as decimal text (an empty value is a key never written).
//! let balance = |v: &Value| -> u64 {
//!     std::str::from_utf8(v.as_bytes()).ok().and_then(|t| t.parse().ok()).unwrap_or(0)
//! };
//! // Move 10 from alice to bob: a read shot, then the writes it decides.
//! s.transact(vec![Op::read("alice"), Op::read("bob")], |reads| {
//!     let (a, b) = (balance(&reads[0].1), balance(&reads[1].1));
//!     let writes = vec![
//!         Op::write("alice", (a - 10).to_string()),
//!         Op::write("bob", (b + 10).to_string()),
//!     ];
//!     (writes, true)
//! })?;
//! let both = s.get(&[Key::from("alice"), Key::from("bob")])?;
//! assert_eq!(both.iter().map(|(_, v)| balance(v)).sum::<u64>(), 200);
//! # Ok(())
//! # }
//! ```
//!
//! Keys and values are byte strings. A key belongs to the server its `Placement` names: by
//! default `verso_ncc::client::shard_of` (a key made from a number `k` to `k % servers`,
//! any other by its hash: the servers' own partition), or with
//! [`Session::connect_placed`] Redis's hash slots split evenly over the groups, as `verso
//! gateway` places them. A transaction that gets no answer
//! within the session's timeout ends in a `TimedOut` error and its outcome is unknown: it
//! may still commit. The session refuses further work after that, since its protocol client
//! is still busy with it; open a new session.
//!
//! Client ids: a new session numbers its transactions above any its id's previous holder
//! used (from its clock), and its requests speak only for its own numbers
//! (`verso_ncc::Finished`), so an id may be taken over even from a process that died inside
//! a transaction: the servers' backup coordinator still decides that one. Two live
//! sessions must not share an id. A new holder's timestamps `(clock, id)` start again from
//! its own clock; they could equal one of the previous holder's only if it starts within
//! the previous holder's clock lead over it (`t_Δ`, §5.3: microseconds on one machine, the
//! clock skew between machines), so on different machines wait out the skew before taking
//! an id over.

use std::io;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use verso_ncc::client::Placement;
use verso_ncc::wire::{Encoding, Wire};
use verso_ncc::{ClientEvent, ClientId, Key, Op, Outcome, TxnClient, Value};

use crate::client::Pool;
use crate::{now_us, Protocol};

/// What a [`Session`] needs of a pool of one protocol client, whichever protocol it runs.
trait Driver: Send {
    fn begin(&mut self, ops: Vec<Op>, last: bool) -> io::Result<()>;
    fn next_shot(&mut self, ops: Vec<Op>, last: bool) -> io::Result<()>;
    fn poll(&mut self, timeout: Duration, events: &mut Vec<(usize, ClientEvent)>)
        -> io::Result<()>;
}

impl<C> Driver for Pool<C>
where
    C: TxnClient + Send,
    C::Msg: Wire + Send + 'static,
{
    fn begin(&mut self, ops: Vec<Op>, last: bool) -> io::Result<()> {
        Pool::begin(self, 0, ops, last)
    }
    fn next_shot(&mut self, ops: Vec<Op>, last: bool) -> io::Result<()> {
        Pool::next_shot(self, 0, ops, last)
    }
    fn poll(
        &mut self,
        timeout: Duration,
        events: &mut Vec<(usize, ClientEvent)>,
    ) -> io::Result<()> {
        Pool::poll(self, timeout, events)
    }
}

/// A multi-shot transaction's next shot, from every value its attempt has read so far:
/// the requests, and whether the shot is the last.
type NextShot<'a> = dyn FnMut(&[(Key, Value)]) -> (Vec<Op>, bool) + 'a;

/// One application thread's connection to a cluster of shard servers.
pub struct Session {
    driver: Box<dyn Driver>,
    timeout: Duration,
    /// Set when a transaction's outcome is unknown: the protocol client is still in it.
    broken: Option<String>,
}

/// How long a transaction may take before [`Session`] gives up on it, by default.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

impl Session {
    /// Connects to every server (indexed by server id) as protocol client `client`, which
    /// no other session of the cluster may use at the same time: servers route answers by
    /// it.
    pub fn connect(
        servers: &[SocketAddr],
        protocol: Protocol,
        client: ClientId,
        encoding: Encoding,
    ) -> io::Result<Session> {
        let groups: Vec<Vec<SocketAddr>> = servers.iter().map(|&a| vec![a]).collect();
        Session::connect_groups(&groups, protocol, client, encoding)
    }

    /// As [`Session::connect`], each server a replication group (`crate::group`): every
    /// message goes to each of its replicas, and a transaction carries on across a
    /// failover by resending.
    pub fn connect_groups(
        servers: &[Vec<SocketAddr>],
        protocol: Protocol,
        client: ClientId,
        encoding: Encoding,
    ) -> io::Result<Session> {
        Session::connect_placed(servers, Placement::Hash, protocol, client, encoding)
    }

    /// As [`Session::connect_groups`], with the keys placed on the groups by `placement`,
    /// which every client of the groups must share: [`Placement::Slots`] is the Redis
    /// hash-slot map that `verso gateway` uses, so an application's session and the
    /// gateway's clients run transactions on the same keys.
    pub fn connect_placed(
        servers: &[Vec<SocketAddr>],
        placement: Placement,
        protocol: Protocol,
        client: ClientId,
        encoding: Encoding,
    ) -> io::Result<Session> {
        if servers.is_empty() {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "no servers"));
        }
        let n = servers.len() as u32;
        let resend_after_us = 200_000;
        // The id may have been another process's before (a client that restarts): its
        // transaction numbers begin at the clock in microseconds, above any that process
        // could have used, since none begins more than one transaction per microsecond.
        let first_seq = now_us();
        let driver: Box<dyn Driver> = match protocol {
            Protocol::Ncc { read_only } => {
                let c = Protocol::ncc_client(client, n, read_only, resend_after_us)
                    .with_first_seq(first_seq)
                    .with_placement(placement);
                Box::new(Pool::connect_groups(servers, encoding, client, vec![c])?)
            }
            Protocol::Baseline(flavor) => {
                let mut c = Protocol::baseline_client(client, n, flavor)
                    .with_first_seq(first_seq)
                    .with_placement(placement);
                c.resend_after = resend_after_us;
                Box::new(Pool::connect_groups(servers, encoding, client, vec![c])?)
            }
        };
        Ok(Session {
            driver,
            timeout: DEFAULT_TIMEOUT,
            broken: None,
        })
    }

    /// How long a transaction may take, retries included, before it ends in `TimedOut`.
    pub fn set_timeout(&mut self, timeout: Duration) {
        self.timeout = timeout;
    }

    /// Reads `keys` in one read-only transaction (NCC: one round, no commit message) and
    /// returns their values in order (the empty value for a key never written).
    pub fn get(&mut self, keys: &[Key]) -> io::Result<Vec<(Key, Value)>> {
        Ok(self.read(keys)?.reads)
    }

    /// Reads `keys` in one read-only transaction, with its outcome (which attempt
    /// committed, and where).
    pub fn read(&mut self, keys: &[Key]) -> io::Result<Outcome> {
        let ops = keys.iter().map(|k| Op::Read(k.clone())).collect();
        self.run(ops, true, &mut |_| unreachable_shot())
    }

    /// Writes every pair in one transaction.
    pub fn put(&mut self, writes: &[(Key, Value)]) -> io::Result<Outcome> {
        let ops = writes
            .iter()
            .map(|(k, v)| Op::Write(k.clone(), v.clone()))
            .collect();
        self.run(ops, true, &mut |_| unreachable_shot())
    }

    /// Runs a transaction of several shots: `first` goes first; after each shot `next` gets
    /// every value this attempt has read so far, in order, and returns the next shot's
    /// requests and whether that shot is the last. When an attempt aborts the protocol
    /// begins again with `first`, and `next` is asked again with the new reads: it must
    /// decide from its argument alone.
    pub fn transact(
        &mut self,
        first: Vec<Op>,
        mut next: impl FnMut(&[(Key, Value)]) -> (Vec<Op>, bool),
    ) -> io::Result<Outcome> {
        self.run(first, false, &mut next)
    }

    fn run(&mut self, first: Vec<Op>, last: bool, next: &mut NextShot) -> io::Result<Outcome> {
        if let Some(why) = &self.broken {
            return Err(io::Error::other(why.clone()));
        }
        if first.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "a shot needs at least one request",
            ));
        }
        shot_fits(&first)?;
        let deadline = Instant::now() + self.timeout;
        self.driver.begin(first, last)?;
        let mut reads: Vec<(Key, Value)> = Vec::new();
        let mut events = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                let why = "a transaction timed out; its outcome is unknown";
                self.broken = Some(why.into());
                return Err(io::Error::new(io::ErrorKind::TimedOut, why));
            }
            if let Err(e) = self
                .driver
                .poll(left.min(Duration::from_millis(5)), &mut events)
            {
                self.broken = Some(format!("a server connection failed: {e}"));
                return Err(e);
            }
            for (_, event) in events.drain(..) {
                match event {
                    ClientEvent::ShotDone { reads: shot } => {
                        reads.extend(shot);
                        let (ops, last) = next(&reads);
                        if ops.is_empty() {
                            // Nothing left to ask: the shot that was the last is past.
                            self.broken = Some("a transaction ended without its last shot".into());
                            return Err(io::Error::new(
                                io::ErrorKind::InvalidInput,
                                "a shot needs at least one request (mark the last shot as last)",
                            ));
                        }
                        if let Err(e) = shot_fits(&ops) {
                            // Its earlier shots stay undecided at the servers until their
                            // backup coordinator aborts them (no last shot arrives).
                            self.broken = Some(format!("a transaction's shot was refused: {e}"));
                            return Err(e);
                        }
                        self.driver.next_shot(ops, last)?;
                    }
                    ClientEvent::Restarted => reads.clear(),
                    ClientEvent::Committed(outcome) => return Ok(outcome),
                }
            }
        }
    }
}

/// Refuses a shot the servers would refuse (and drop the connection for): more requests
/// than a message carries, or a key and value over [`crate::frame::REQUEST_BYTES_MAX`].
fn shot_fits(ops: &[Op]) -> io::Result<()> {
    let refuse = |why: String| Err(io::Error::new(io::ErrorKind::InvalidInput, why));
    if ops.len() > verso_ncc::wire::OPS_MAX {
        return refuse(format!(
            "a shot of {} requests; at most {}",
            ops.len(),
            verso_ncc::wire::OPS_MAX
        ));
    }
    for op in ops {
        let bytes = op.bytes();
        if bytes > crate::frame::REQUEST_BYTES_MAX {
            return refuse(format!(
                "a request of {bytes} bytes of key and value; at most {}",
                crate::frame::REQUEST_BYTES_MAX
            ));
        }
    }
    Ok(())
}

/// A one-shot transaction's shot is its last: the protocol never asks for another.
fn unreachable_shot() -> (Vec<Op>, bool) {
    (Vec::new(), true)
}
