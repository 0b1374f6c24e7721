//! One client connection's state machine, free of I/O: a request in, either an answer or a
//! transaction to run (`Plan`) out. MULTI queues data commands, EXEC runs them as one plan,
//! WATCH reads the watched keys in a transaction of its own and EXEC compares them.

use verso_server::resp::{Reply, Version};

use crate::command::{wrong_arity, Command};
use crate::plan::{Done, Plan, Shape, KEYS_MAX};
use crate::value::Seen;

/// What a request asks of the connection's thread.
#[derive(Debug)]
pub enum Step {
    /// Nothing to send (an empty inline line).
    Nothing,
    Reply(Reply),
    /// Run the plan as a transaction and pass its result to [`Conn::completed`].
    Run(Plan),
    /// Send the reply, then close the connection.
    Close(Reply),
}

/// A MULTI block being queued.
#[derive(Debug, Default)]
struct Multi {
    cmds: Vec<Command>,
    /// The queued commands' argument bytes (at most [`QUEUED_BYTES_MAX`]).
    bytes: usize,
    /// A command was refused while queueing: EXEC answers EXECABORT.
    refused: bool,
}

/// One connection's state between requests. Bounded: a block holds at most
/// [`QUEUED_MAX`] commands, and WATCH at most [`KEYS_MAX`] keys.
#[derive(Debug)]
pub struct Conn {
    id: u64,
    version: Version,
    multi: Option<Multi>,
    watched: Vec<(Vec<u8>, Seen)>,
    name: Option<Vec<u8>>,
}

/// The most commands one MULTI block may queue (each has at least one key, and one
/// transaction names at most [`KEYS_MAX`]).
pub const QUEUED_MAX: usize = KEYS_MAX;

/// The most argument bytes one MULTI block may queue: a few times what one transaction may
/// write ([`crate::plan::TXN_BYTES_MAX`]; a block may overwrite a key several times).
pub const QUEUED_BYTES_MAX: usize = 4 * crate::plan::TXN_BYTES_MAX;

impl Conn {
    pub fn new(id: u64) -> Conn {
        Conn {
            id,
            version: Version::Resp2,
            multi: None,
            watched: Vec::new(),
            name: None,
        }
    }

    /// The protocol version replies are encoded for.
    pub fn version(&self) -> Version {
        self.version
    }

    /// Takes one request (its arguments, the name first).
    pub fn request(&mut self, args: &[Vec<u8>]) -> Step {
        let Some(name) = args.first() else {
            return Step::Nothing;
        };
        let name = name.to_ascii_uppercase();
        if self.multi.is_some()
            && !matches!(
                name.as_slice(),
                b"EXEC" | b"DISCARD" | b"MULTI" | b"WATCH" | b"QUIT"
            )
        {
            return Step::Reply(self.queue(&name, args));
        }
        match name.as_slice() {
            b"MULTI" => Step::Reply(self.begin_multi()),
            b"EXEC" => self.exec(),
            b"DISCARD" => Step::Reply(self.discard()),
            b"WATCH" => self.watch(args),
            b"QUIT" => Step::Close(Reply::ok()),
            _ => match Command::parse(args) {
                Some(Ok(cmd)) => run(Plan::single(cmd)),
                Some(Err(e)) => Step::Reply(e),
                None => Step::Reply(self.connection_command(&name, args)),
            },
        }
    }

    /// The answer to a plan's transaction.
    pub fn completed(&mut self, done: Done) -> Reply {
        if let Some(seen) = done.watched {
            for (k, v) in seen {
                if !self.watched.iter().any(|(w, _)| *w == k) {
                    self.watched.push((k, v));
                }
            }
        }
        done.reply
    }

    fn queue(&mut self, name: &[u8], args: &[Vec<u8>]) -> Reply {
        let arity = wrong_arity(&String::from_utf8_lossy(name).to_lowercase());
        let cmd = match Command::parse(args) {
            Some(Ok(cmd)) => Ok(cmd),
            // As Redis: a wrong number of arguments fails the block now; any other bad
            // argument is the command's answer in EXEC's array.
            Some(Err(e)) if e == arity => Err(e),
            Some(Err(e)) => Ok(Command::Echo(e)),
            // Connection commands answer in EXEC's array too; their effect (SELECT,
            // CLIENT SETNAME) happens now, which no command of the block can observe.
            // EXEC checks its watches before the block runs: UNWATCH in it changes nothing.
            None if name == b"UNWATCH" => Ok(Command::Echo(Reply::ok())),
            None if QUEUEABLE.contains(&name) => match self.connection_command(name, args) {
                e @ Reply::Error(_) if e == arity => Err(e),
                r => Ok(Command::Echo(r)),
            },
            None => Err(unknown_command(args)),
        };
        let multi = self.multi.as_mut().expect("queueing inside MULTI");
        let bytes: usize = args.iter().map(Vec::len).sum();
        match cmd {
            Ok(_) if multi.cmds.len() >= QUEUED_MAX || multi.bytes + bytes > QUEUED_BYTES_MAX => {
                multi.refused = true;
                Reply::err(format_args!(
                    "a MULTI block of more than {QUEUED_MAX} commands or {QUEUED_BYTES_MAX} bytes"
                ))
            }
            Ok(cmd) => {
                multi.cmds.push(cmd);
                multi.bytes += bytes;
                Reply::Simple("QUEUED".into())
            }
            Err(e) => {
                multi.refused = true;
                e
            }
        }
    }

    fn begin_multi(&mut self) -> Reply {
        if self.multi.is_some() {
            return Reply::err("MULTI calls can not be nested");
        }
        self.multi = Some(Multi::default());
        Reply::ok()
    }

    fn exec(&mut self) -> Step {
        let Some(multi) = self.multi.take() else {
            return Step::Reply(Reply::err("EXEC without MULTI"));
        };
        let watched = std::mem::take(&mut self.watched);
        if multi.refused {
            return Step::Reply(Reply::Error(
                "EXECABORT Transaction discarded because of previous errors.".into(),
            ));
        }
        run(Plan::exec(multi.cmds, watched))
    }

    fn discard(&mut self) -> Reply {
        if self.multi.take().is_none() {
            return Reply::err("DISCARD without MULTI");
        }
        self.watched.clear();
        Reply::ok()
    }

    fn watch(&mut self, args: &[Vec<u8>]) -> Step {
        if self.multi.is_some() {
            // Redis refuses it without failing the block.
            return Step::Reply(Reply::err("WATCH inside MULTI is not allowed"));
        }
        if args.len() < 2 {
            return Step::Reply(wrong_arity("watch"));
        }
        if self.watched.len() + args.len() - 1 > KEYS_MAX {
            return Step::Reply(Reply::err(format_args!(
                "more than {KEYS_MAX} watched keys"
            )));
        }
        run(Plan::watch(args[1..].to_vec()))
    }

    fn connection_command(&mut self, name: &[u8], args: &[Vec<u8>]) -> Reply {
        match name {
            b"HELLO" => self.hello(args),
            b"SELECT" if args.len() != 2 => wrong_arity("select"),
            b"SELECT" => match crate::command::parse_i64(&args[1]) {
                Some(0) => Reply::ok(),
                Some(_) => Reply::err("DB index is out of range"),
                None => crate::command::not_an_integer(),
            },
            b"UNWATCH" => {
                self.watched.clear();
                Reply::ok()
            }
            b"CLIENT" => self.client(args),
            b"DBSIZE" | b"KEYS" | b"SCAN" | b"FLUSHALL" | b"FLUSHDB" | b"RANDOMKEY" => Reply::err(
                "the transaction gateway cannot list or clear the keys of its groups yet",
            ),
            _ => connection_reply(name, args),
        }
    }

    fn hello(&mut self, args: &[Vec<u8>]) -> Reply {
        if let Some(v) = args.get(1) {
            match v.as_slice() {
                b"2" => self.version = Version::Resp2,
                b"3" => self.version = Version::Resp3,
                v if crate::command::parse_i64(v).is_none() => {
                    return Reply::err("Protocol version is not an integer or out of range")
                }
                _ => return Reply::Error("NOPROTO unsupported protocol version".into()),
            }
        }
        let mut rest = args.iter().skip(2);
        while let Some(opt) = rest.next() {
            match opt.to_ascii_uppercase().as_slice() {
                b"SETNAME" => self.name = rest.next().cloned(),
                // No ACL here: any credentials are taken, as by a Redis without a password.
                b"AUTH" => {
                    rest.next();
                    rest.next();
                }
                _ => return Reply::err("syntax error"),
            }
        }
        let text = |s: &str| Reply::Bulk(s.as_bytes().to_vec());
        Reply::Map(vec![
            (text("server"), text("verso-gateway")),
            (text("version"), text(env!("CARGO_PKG_VERSION"))),
            (
                text("proto"),
                Reply::Integer(if self.version == Version::Resp3 { 3 } else { 2 }),
            ),
            (text("id"), Reply::Integer(self.id as i64)),
            (text("mode"), text("standalone")),
            (text("role"), text("master")),
            (text("modules"), Reply::Array(Vec::new())),
        ])
    }

    fn client(&mut self, args: &[Vec<u8>]) -> Reply {
        let sub = args.get(1).map(|s| s.to_ascii_uppercase());
        match (sub.as_deref(), args.len()) {
            (Some(b"SETNAME"), 3) => {
                self.name = Some(args[2].clone());
                Reply::ok()
            }
            (Some(b"GETNAME"), 2) => self.name.clone().map_or(Reply::Nil, Reply::Bulk),
            (Some(b"SETINFO"), 4) => Reply::ok(),
            (Some(b"ID"), 2) => Reply::Integer(self.id as i64),
            (Some(_), _) => Reply::err("unknown or malformed CLIENT subcommand"),
            (None, _) => wrong_arity("client"),
        }
    }
}

/// The connection commands a MULTI block may queue.
const QUEUEABLE: [&[u8]; 6] = [b"PING", b"ECHO", b"SELECT", b"CLIENT", b"INFO", b"COMMAND"];

/// A plan's step: run it, or answer at once when it needs no transaction.
fn run(plan: Result<Plan, Reply>) -> Step {
    match plan {
        Err(e) => Step::Reply(e),
        Ok(p) if p.shape() == Shape::Local => {
            let done = p.local_answer().expect("a local plan is decided").clone();
            Step::Reply(done.reply)
        }
        Ok(p) => Step::Run(p),
    }
}

/// PING, ECHO, COMMAND, INFO and anything unknown: answers that need no state.
fn connection_reply(name: &[u8], args: &[Vec<u8>]) -> Reply {
    match (name, args.len()) {
        (b"PING", 1) => Reply::Simple("PONG".into()),
        (b"PING", 2) => Reply::Bulk(args[1].clone()),
        (b"PING", _) => wrong_arity("ping"),
        (b"ECHO", 2) => Reply::Bulk(args[1].clone()),
        (b"ECHO", _) => wrong_arity("echo"),
        // Clients ask at connect (redis-cli: COMMAND DOCS); the gateway has no command
        // table yet, and an empty answer makes them carry on without hints.
        (b"COMMAND", _) => match args.get(1).map(|s| s.to_ascii_uppercase()).as_deref() {
            Some(b"COUNT") => Reply::Integer(0),
            _ => Reply::Array(Vec::new()),
        },
        (b"INFO", _) => Reply::Bulk(
            format!(
                "# Server\r\nredis_version:7.0.15\r\nverso_version:{}\r\nverso_role:transaction-gateway\r\n",
                env!("CARGO_PKG_VERSION")
            )
            .into_bytes(),
        ),
        _ => unknown_command(args),
    }
}

/// Redis's answer to an unknown command.
fn unknown_command(args: &[Vec<u8>]) -> Reply {
    let name = String::from_utf8_lossy(&args[0]);
    let shown: String = args[1..]
        .iter()
        .take(4)
        .map(|a| format!("'{}' ", String::from_utf8_lossy(a)))
        .collect();
    Reply::err(format_args!(
        "unknown command '{name}', with args beginning with: {shown}"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(words: &[&str]) -> Vec<Vec<u8>> {
        words.iter().map(|w| w.as_bytes().to_vec()).collect()
    }

    fn reply(c: &mut Conn, words: &[&str]) -> Reply {
        match c.request(&args(words)) {
            Step::Reply(r) => r,
            other => panic!("{words:?}: {other:?}"),
        }
    }

    /// As Redis 7 answers them (checked against redis-server 7.0): connection commands
    /// inside MULTI are queued and answer in EXEC's array; unknown ones and wrong arities
    /// fail the block.
    #[test]
    fn multi_queues_connection_commands_as_redis_does() {
        let mut c = Conn::new(1);
        assert_eq!(reply(&mut c, &["MULTI"]), Reply::ok());
        for w in [
            &["UNWATCH"][..],
            &["SELECT", "0"],
            &["CLIENT", "SETNAME", "x"],
            &["PING"],
        ] {
            assert_eq!(reply(&mut c, w), Reply::Simple("QUEUED".into()), "{w:?}");
        }
        match c.request(&args(&["EXEC"])) {
            Step::Reply(Reply::Array(r)) => assert_eq!(
                r,
                vec![
                    Reply::ok(),
                    Reply::ok(),
                    Reply::ok(),
                    Reply::Simple("PONG".into())
                ]
            ),
            other => panic!("EXEC: {other:?}"),
        }
        assert_eq!(reply(&mut c, &["MULTI"]), Reply::ok());
        assert_eq!(reply(&mut c, &["SELECT"]), wrong_arity("select"));
        assert!(matches!(reply(&mut c, &["NOSUCH"]), Reply::Error(_)));
        assert_eq!(
            reply(&mut c, &["EXEC"]),
            Reply::Error("EXECABORT Transaction discarded because of previous errors.".into())
        );
        assert_eq!(reply(&mut c, &["EXEC"]), Reply::err("EXEC without MULTI"));
        assert_eq!(
            reply(&mut c, &["SELECT", "x"]),
            crate::command::not_an_integer()
        );
        assert_eq!(
            reply(&mut c, &["SELECT", "1"]),
            Reply::err("DB index is out of range")
        );
    }
}
