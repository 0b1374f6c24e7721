//! The commands about the connection and the server rather than the data: AUTH, HELLO,
//! SELECT, CLIENT and CONFIG GET.

use super::{arity_error, Session, DATABASES, RELAY_LIB_NAME};
use crate::keyspace;
use crate::resp::{Reply, Version};

/// The connection's and the server's commands that run anywhere, MULTI blocks included
/// (`Session::connection_command`), with their arities (Redis's convention: negative means
/// at least).
pub(super) fn arity(name: &[u8]) -> Option<i32> {
    Some(match name {
        b"HELLO" | b"INFO" | b"COMMAND" | b"BGSAVE" => -1,
        b"LASTSAVE" | b"READONLY" | b"READWRITE" | b"ASKING" => 1,
        b"AUTH" | b"CLIENT" | b"FUNCTION" | b"SCRIPT" => -2,
        b"CONFIG" | b"EVAL" | b"EVALSHA" | b"EVAL_RO" | b"EVALSHA_RO" | b"FCALL" | b"FCALL_RO" => {
            -3
        }
        _ => return None,
    })
}

impl<'s> Session<'s> {
    /// One of the commands [`arity`] lists, its arity checked.
    pub(super) fn connection_command(&mut self, name: &[u8], args: &[Vec<u8>]) -> Reply {
        match name {
            b"AUTH" => self.auth(args),
            b"HELLO" => self.hello(args),
            b"CLIENT" => self.client(args),
            b"READONLY" | b"READWRITE" => self.read_from_backups(name),
            b"COMMAND" => super::command::command(args),
            b"ASKING" => self.asking(),
            b"CONFIG" => self.config(args),
            b"BGSAVE" => self.bgsave(),
            b"LASTSAVE" => Reply::Integer(self.shared.persistence.last_save_unix() as i64),
            b"INFO" => {
                self.flush_stats(); // this request and those before it count
                Reply::Verbatim(crate::info::render(self.shared, &args[1..]))
            }
            _ => super::scripting(name, args),
        }
    }

    pub(super) fn auth(&mut self, args: &[Vec<u8>]) -> Reply {
        let given = match args.len() {
            2 => &args[1],
            3 => &args[2], // AUTH username password: only "default" exists
            _ => return arity_error(&args[0]),
        };
        let Some(expected) = &self.shared.password else {
            return Reply::err("AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?");
        };
        if args.len() == 3 && args[1] != b"default" || !constant_time_eq(given, expected.as_bytes())
        {
            return Reply::Error(
                "WRONGPASS invalid username-password pair or user is disabled.".into(),
            );
        }
        self.authenticated = true;
        Reply::ok()
    }

    pub(super) fn hello(&mut self, args: &[Vec<u8>]) -> Reply {
        let mut i = 1;
        let mut version = self.version;
        if let Some(v) = args.get(1) {
            version = match v.as_slice() {
                b"2" => Version::Resp2,
                b"3" => Version::Resp3,
                _ => {
                    return Reply::Error("NOPROTO unsupported protocol version".into());
                }
            };
            i = 2;
        }
        while i < args.len() {
            match args[i].to_ascii_uppercase().as_slice() {
                b"AUTH" if args.len() >= i + 3 => {
                    let r =
                        self.auth(&[b"AUTH".to_vec(), args[i + 1].clone(), args[i + 2].clone()]);
                    if matches!(r, Reply::Error(_)) {
                        return r;
                    }
                    i += 3;
                }
                b"SETNAME" if args.len() > i + 1 => {
                    self.name = Some(String::from_utf8_lossy(&args[i + 1]).into_owned());
                    i += 2;
                }
                _ => return Reply::err("syntax error in HELLO option"),
            }
        }
        if !self.authenticated {
            return Reply::Error("NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time".into());
        }
        self.version = version;
        let proto = if version == Version::Resp3 { 3 } else { 2 };
        let s = |x: &str| Reply::Bulk(x.as_bytes().to_vec());
        Reply::Map(vec![
            (s("server"), s("verso")),
            (s("version"), s(env!("CARGO_PKG_VERSION"))),
            (s("proto"), Reply::Integer(proto)),
            (s("id"), Reply::Integer(self.id as i64)),
            (
                s("mode"),
                s(if self.shared.shards.is_some() {
                    "cluster"
                } else {
                    "standalone"
                }),
            ),
            (s("role"), s("master")),
            (s("modules"), Reply::Array(Vec::new())),
        ])
    }

    pub(super) fn select(&mut self, index: &[u8]) -> Reply {
        match self.database(index) {
            // Keys watched before stay watched (in their database), as in Redis.
            Ok(i) => {
                self.db_index = i;
                Reply::ok()
            }
            Err(r) => r,
        }
    }

    /// The database SELECT names, or its error reply.
    pub(super) fn database(&self, index: &[u8]) -> Result<usize, Reply> {
        if self.shared.shards.is_some() && index != b"0" {
            return Err(Reply::err("SELECT is not allowed in cluster mode"));
        }
        match keyspace::parse_i64(index) {
            Some(i) if (0..DATABASES as i64).contains(&i) => Ok(i as usize),
            Some(_) => Err(Reply::err("DB index is out of range")),
            None => Err(Reply::err("value is not an integer or out of range")),
        }
    }

    pub(super) fn client(&mut self, args: &[Vec<u8>]) -> Reply {
        match (args[1].to_ascii_uppercase().as_slice(), args.len()) {
            (b"SETNAME", 3) => {
                if args[2].iter().any(|&b| b <= b' ' || b > b'~') {
                    return Reply::err(
                        "Client names cannot contain spaces, newlines or special characters.",
                    );
                }
                self.name = Some(String::from_utf8_lossy(&args[2]).into_owned());
                Reply::ok()
            }
            (b"GETNAME", 2) => self
                .name
                .as_ref()
                .map_or(Reply::Nil, |n| Reply::Bulk(n.as_bytes().to_vec())),
            (b"ID", 2) => Reply::Integer(self.id as i64),
            (b"INFO", 2) => Reply::Verbatim(format!(
                "id={} name={} db={} resp={}\n",
                self.id,
                self.name.as_deref().unwrap_or(""),
                self.db_index,
                if self.version == Version::Resp3 { 3 } else { 2 }
            )),
            (b"SETINFO", 4) => {
                // A backup's relay says so: such a connection is never relayed again, so two
                // replicas that each think the other leads (mid view change) cannot bounce
                // a client between them.
                if args[2].eq_ignore_ascii_case(b"LIB-NAME") && args[3] == RELAY_LIB_NAME {
                    self.relayed = true;
                }
                Reply::ok()
            }
            _ => Reply::err("unknown subcommand or wrong number of arguments for 'client' command"),
        }
    }

    pub(super) fn config(&self, args: &[Vec<u8>]) -> Reply {
        if !args[1].eq_ignore_ascii_case(b"GET") {
            return Reply::err("CONFIG subcommands other than GET are not supported");
        }
        let mut pairs = Vec::new();
        for pat in &args[2..] {
            for (k, v) in [
                ("databases", DATABASES.to_string()),
                ("maxmemory", "0".into()),
                ("appendonly", "no".into()),
                ("save", String::new()),
            ] {
                if crate::glob::matches(&pat.to_ascii_lowercase(), k.as_bytes()) {
                    pairs.push((
                        Reply::Bulk(k.as_bytes().to_vec()),
                        Reply::Bulk(v.into_bytes()),
                    ));
                }
            }
        }
        Reply::Map(pairs)
    }
}

/// Compares secrets in time independent of where they differ.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let mut diff = a.len() ^ b.len();
    for i in 0..a.len().max(b.len()) {
        let x = a.get(i).copied().unwrap_or(0);
        let y = b.get(i).copied().unwrap_or(0);
        diff |= usize::from(x ^ y);
    }
    diff == 0
}

impl Session<'_> {
    /// `SAVE`: a checkpoint now, on this connection's worker (as Redis's SAVE blocks).
    pub(super) fn save(&mut self) -> Reply {
        if self.shared.db.durability() == verso_engine::Durability::None {
            return Reply::err("SAVE needs a durable server (--durability lazy or sync)");
        }
        match self.shared.persistence.save(&self.shared.db) {
            Ok(_) => Reply::ok(),
            Err(e) => super::engine_error(&e),
        }
    }

    /// `BGSAVE [SCHEDULE]`: a checkpoint on the background thread.
    pub(super) fn bgsave(&mut self) -> Reply {
        if self.shared.db.durability() == verso_engine::Durability::None {
            return Reply::err("BGSAVE needs a durable server (--durability lazy or sync)");
        }
        match self.shared.persistence.request() {
            Ok(()) => Reply::Simple("Background saving started".into()),
            Err(crate::persistence::AlreadyRunning) => {
                Reply::err("Background save already in progress")
            }
        }
    }
}
