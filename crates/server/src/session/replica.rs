//! A session on a replicated server (`verso serve --cluster`): a backup relays the
//! connection to its primary (`crate::forward` runs the relay), WAIT blocks until replicas
//! hold the connection's writes on disk, READONLY lets a backup serve reads, and a backup's
//! refusals name the primary.

use super::{upper, Version};
use super::{Blocked, Reply, Session, WaitFor, NAME_LEN_MAX};

/// The library name a backup's relay announces (`CLIENT SETINFO LIB-NAME`).
pub(crate) const RELAY_LIB_NAME: &[u8] = b"verso-relay";

/// Redis's error for a write sent to a replica (redis-py raises `ReadOnlyError`, which
/// Sentinel-aware pools answer by finding the primary again).
pub(super) const NOT_PRIMARY: &str = "READONLY You can't write against a read only replica.";

/// A reply held for VSR when this replica stopped being primary: its effect is unknown.
pub(super) fn not_primary_any_more() -> Reply {
    Reply::Error(format!(
        "{NOT_PRIMARY} This replica stopped being primary before the command was committed; it may or may not have taken effect."
    ))
}

impl Session<'_> {
    /// Where to relay this connection, from this request on (`crate::forward`): the
    /// primary's client address, when this replica is a backup that cannot serve `args`
    /// itself (anything but the connection's own commands, and reads after READONLY) and
    /// knows the primary. `None`: run it here (a backup then refuses, naming the primary or
    /// saying none is elected).
    pub fn forward_target(&self, args: &[Vec<u8>]) -> Option<std::net::SocketAddr> {
        let r = self.shared.replication.as_ref()?;
        if r.is_primary() || !self.authenticated || self.backup_reads || self.relayed {
            return None;
        }
        // A MULTI or WATCH begun here while this replica led ends here (EXEC refused): the
        // primary knows nothing of it.
        if self.queue.is_some() || !self.watched.is_empty() {
            return None;
        }
        let mut buf = [0u8; NAME_LEN_MAX];
        let served_here = matches!(
            upper(args.first()?, &mut buf),
            b"PING"
                | b"ECHO"
                | b"QUIT"
                | b"AUTH"
                | b"HELLO"
                | b"SELECT"
                | b"CLIENT"
                | b"INFO"
                | b"CONFIG"
                | b"COMMAND"
                | b"CLUSTER"
                | b"ASKING"
                | b"READONLY"
                | b"READWRITE"
                | b"SAVE"
                | b"BGSAVE"
                | b"LASTSAVE"
        );
        if served_here {
            return None;
        }
        r.status().primary_client_addr?.parse().ok()
    }

    /// Whether a relay opened to `primary` is stale: this replica leads now, or knows that
    /// another one does.
    pub fn relay_is_stale(&self, primary: std::net::SocketAddr) -> bool {
        let Some(r) = &self.shared.replication else {
            return false;
        };
        r.is_primary()
            || r.status()
                .primary_client_addr
                .and_then(|a| a.parse::<std::net::SocketAddr>().ok())
                .is_some_and(|a| a != primary)
    }

    /// The commands that give a relayed connection this one's state on the primary.
    pub fn relay_setup(&self) -> Vec<Vec<Vec<u8>>> {
        let mut setup = Vec::new();
        if let Some(p) = &self.shared.password {
            setup.push(vec![b"AUTH".to_vec(), p.as_bytes().to_vec()]);
        }
        setup.push(vec![
            b"CLIENT".to_vec(),
            b"SETINFO".to_vec(),
            b"LIB-NAME".to_vec(),
            RELAY_LIB_NAME.to_vec(),
        ]);
        if self.version == Version::Resp3 {
            setup.push(vec![b"HELLO".to_vec(), b"3".to_vec()]);
        }
        if self.db_index != 0 {
            setup.push(vec![
                b"SELECT".to_vec(),
                self.db_index.to_string().into_bytes(),
            ]);
        }
        if let Some(name) = &self.name {
            setup.push(vec![
                b"CLIENT".to_vec(),
                b"SETNAME".to_vec(),
                name.as_bytes().to_vec(),
            ]);
        }
        setup
    }

    /// The reply of a blocked `WAIT`, once enough replicas hold the connection's writes on
    /// disk or its timeout passed (`None`: still blocked).
    pub fn poll_wait(&mut self, now: std::time::Instant) -> Option<Reply> {
        let w = match self.blocked.take()? {
            Blocked::Wait(w) => {
                self.blocked = Some(Blocked::Wait(w));
                w
            }
            Blocked::Pop(p) => return self.poll_blocked_pop(p, now),
        };
        let r = self.shared.replication.as_ref()?;
        let reply = match r.replicas_on_disk(w.ticket) {
            None => Reply::err("this replica stopped being primary during WAIT"),
            Some(n) if n >= w.replicas || w.deadline.is_some_and(|d| now >= d) => {
                Reply::Integer(n as i64)
            }
            Some(_) => return None,
        };
        self.blocked = None;
        Some(reply)
    }

    /// The earliest deadline of a blocked `WAIT`, if it has one.
    pub fn wait_deadline(&self) -> Option<std::time::Instant> {
        match &self.blocked {
            Some(Blocked::Wait(w)) => w.deadline,
            Some(Blocked::Pop(p)) => p.deadline(),
            None => None,
        }
    }

    /// `WAIT numreplicas timeout`: blocks until `numreplicas` other replicas hold this
    /// connection's writes on disk (Lazy VSR's synchronous put), or `timeout` ms passed (0:
    /// no limit), and answers how many do. Without replication there are no replicas: 0 at
    /// once.
    pub(super) fn wait(&mut self, args: &[Vec<u8>]) -> Reply {
        let parse = |a: &[u8]| std::str::from_utf8(a).ok()?.parse::<i64>().ok();
        let (Some(replicas), Some(timeout)) = (parse(&args[1]), parse(&args[2])) else {
            return Reply::err("value is not an integer or out of range");
        };
        if timeout < 0 {
            return Reply::err("timeout is negative");
        }
        let Some(r) = &self.shared.replication else {
            return Reply::Integer(0);
        };
        if !r.is_primary() {
            return Reply::err("WAIT cannot be used with replica instances");
        }
        let now = r.write_ticket(r.generation());
        let ticket = match self.last_write {
            Some(t) if t.generation == now.generation => t,
            // No write here since this replica became primary: everything so far.
            _ => now,
        };
        let replicas = usize::try_from(replicas.max(0)).unwrap_or(usize::MAX);
        let deadline = (timeout > 0)
            .then(|| std::time::Instant::now() + std::time::Duration::from_millis(timeout as u64));
        self.blocked = Some(Blocked::Wait(WaitFor {
            ticket,
            replicas,
            deadline,
        }));
        self.poll_wait(std::time::Instant::now())
            .unwrap_or(Reply::Nil)
    }

    /// Adds the primary's address to a backup's refusal, when it knows it.
    pub(super) fn point_at_primary(&self, reply: Reply) -> Reply {
        match (&reply, &self.shared.replication) {
            (Reply::Error(e), Some(r)) if e.starts_with(NOT_PRIMARY) => {
                if r.is_primary() {
                    return Reply::Error(
                        "TRYAGAIN this replica became its group's primary during the request"
                            .into(),
                    );
                }
                match r.status().primary_client_addr {
                    Some(addr) => Reply::Error(format!("{e} The primary is {addr}.")),
                    // A cluster client knows CLUSTERDOWN: it refreshes its map and retries.
                    None if self.shared.shards.is_some() => Reply::Error(format!(
                        "CLUSTERDOWN The cluster is down: group {} has no primary elected right now",
                        self.shared.shards.as_ref().map_or(0, |m| m.my_group().id)
                    )),
                    None => {
                        Reply::Error(format!("{e} No primary is elected right now; try again."))
                    }
                }
            }
            _ => reply,
        }
    }

    /// READONLY / READWRITE, as on a Redis Cluster replica: whether this connection's reads
    /// may be served by a backup.
    pub(super) fn read_from_backups(&mut self, name: &[u8]) -> Reply {
        if self.shared.replication.is_none() {
            return Reply::err("This instance has cluster support disabled");
        }
        self.backup_reads = name == b"READONLY";
        Reply::ok()
    }
}
