//! The data commands the gateway runs, parsed from a request's arguments: what each reads
//! and writes is known before anything runs, so a block of them becomes one NCC
//! transaction (`plan.rs`). Connection commands (PING, MULTI, ...) are `conn.rs`'s.

use verso_server::resp::Reply;
use verso_txn_net::frame::REQUEST_BYTES_MAX;

/// The longest key the gateway takes: the engine's default key limit, which an NCC server
/// over the engine (`txn-server --store engine`) enforces by dropping the connection.
pub const KEY_BYTES_MAX: usize = 64 << 10;

/// The longest string value with its key: what one NCC request may carry, less the type
/// byte (`value.rs`).
pub const fn value_bytes_max(key: usize) -> usize {
    REQUEST_BYTES_MAX.saturating_sub(key + 1)
}

/// SET's condition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cond {
    /// NX: only if absent.
    Absent,
    /// XX: only if present.
    Present,
}

/// A data command with its arguments checked.
#[derive(Clone, Debug, PartialEq)]
pub enum Command {
    Get(Vec<u8>),
    Set {
        key: Vec<u8>,
        value: Vec<u8>,
        cond: Option<Cond>,
        /// SET ... GET: answer the old value.
        get: bool,
    },
    SetNx(Vec<u8>, Vec<u8>),
    GetSet(Vec<u8>, Vec<u8>),
    GetDel(Vec<u8>),
    MGet(Vec<Vec<u8>>),
    MSet(Pairs),
    MSetNx(Pairs),
    Append(Vec<u8>, Vec<u8>),
    Strlen(Vec<u8>),
    /// INCR, DECR, INCRBY, DECRBY: the signed step.
    IncrBy(Vec<u8>, i64),
    /// DEL and UNLINK (there is no lazy freeing to tell them apart).
    Del(Vec<Vec<u8>>),
    /// Counts a key once per time it is named, as Redis does.
    Exists(Vec<Vec<u8>>),
    /// RENAME (`nx`: RENAMENX).
    Rename {
        from: Vec<u8>,
        to: Vec<u8>,
        nx: bool,
    },
    Copy {
        from: Vec<u8>,
        to: Vec<u8>,
        replace: bool,
    },
    /// GETRANGE and SUBSTR: inclusive, negative offsets count from the end.
    GetRange(Vec<u8>, i64, i64),
    SetRange(Vec<u8>, i64, Vec<u8>),
    IncrByFloat(Vec<u8>, f64),
    /// GETEX without a new deadline (no key has one here: PERSIST changes nothing).
    GetEx(Vec<u8>),
    Type(Vec<u8>),
    Touch(Vec<Vec<u8>>),
    /// PING and ECHO inside MULTI, and a bad argument found while queueing (Redis answers
    /// it in EXEC's array): they read nothing but answer in the EXEC's array.
    Echo(Reply),
}

impl Command {
    /// Parses `args` (the name first) as a data command. `None`: not a data command.
    /// `Some(Err(reply))`: a data command with bad arguments (Redis's error text).
    pub fn parse(args: &[Vec<u8>]) -> Option<Result<Command, Reply>> {
        let name = args.first()?.to_ascii_uppercase();
        let rest = &args[1..];
        let cmd = match name.as_slice() {
            b"GET" => exactly(rest, 1, "get").map(|a| Command::Get(a[0].clone())),
            b"SET" => set(rest),
            b"SETNX" => {
                exactly(rest, 2, "setnx").map(|a| Command::SetNx(a[0].clone(), a[1].clone()))
            }
            b"GETSET" => {
                exactly(rest, 2, "getset").map(|a| Command::GetSet(a[0].clone(), a[1].clone()))
            }
            b"GETDEL" => exactly(rest, 1, "getdel").map(|a| Command::GetDel(a[0].clone())),
            b"MGET" => at_least(rest, 1, "mget").map(|a| Command::MGet(a.to_vec())),
            b"MSET" => pairs(rest, "mset").map(Command::MSet),
            b"MSETNX" => pairs(rest, "msetnx").map(Command::MSetNx),
            b"APPEND" => {
                exactly(rest, 2, "append").map(|a| Command::Append(a[0].clone(), a[1].clone()))
            }
            b"STRLEN" => exactly(rest, 1, "strlen").map(|a| Command::Strlen(a[0].clone())),
            b"INCR" => exactly(rest, 1, "incr").map(|a| Command::IncrBy(a[0].clone(), 1)),
            b"DECR" => exactly(rest, 1, "decr").map(|a| Command::IncrBy(a[0].clone(), -1)),
            b"INCRBY" => exactly(rest, 2, "incrby")
                .and_then(|a| Ok(Command::IncrBy(a[0].clone(), integer(&a[1])?))),
            b"DECRBY" => exactly(rest, 2, "decrby").and_then(|a| {
                let by = integer(&a[1])?
                    .checked_neg()
                    .ok_or_else(|| Reply::err("decrement would overflow"))?;
                Ok(Command::IncrBy(a[0].clone(), by))
            }),
            b"DEL" => at_least(rest, 1, "del").map(|a| Command::Del(a.to_vec())),
            b"UNLINK" => at_least(rest, 1, "unlink").map(|a| Command::Del(a.to_vec())),
            b"EXISTS" => at_least(rest, 1, "exists").map(|a| Command::Exists(a.to_vec())),
            b"RENAME" | b"RENAMENX" => {
                let nx = name == b"RENAMENX";
                exactly(rest, 2, if nx { "renamenx" } else { "rename" }).map(|a| Command::Rename {
                    from: a[0].clone(),
                    to: a[1].clone(),
                    nx,
                })
            }
            b"COPY" => copy(rest),
            b"GETRANGE" | b"SUBSTR" => exactly(
                rest,
                3,
                if name == b"SUBSTR" {
                    "substr"
                } else {
                    "getrange"
                },
            )
            .and_then(|a| {
                Ok(Command::GetRange(
                    a[0].clone(),
                    integer(&a[1])?,
                    integer(&a[2])?,
                ))
            }),
            b"SETRANGE" => exactly(rest, 3, "setrange").and_then(|a| {
                let offset = integer(&a[1])?;
                if offset < 0 {
                    return Err(Reply::err("offset is out of range"));
                }
                Ok(Command::SetRange(a[0].clone(), offset, a[2].clone()))
            }),
            b"INCRBYFLOAT" => exactly(rest, 2, "incrbyfloat").and_then(|a| {
                let by = verso_server::strings::parse_f64(&a[1]).ok_or_else(not_a_float)?;
                Ok(Command::IncrByFloat(a[0].clone(), by))
            }),
            b"GETEX" => at_least(rest, 1, "getex").and_then(getex),
            b"TYPE" => exactly(rest, 1, "type").map(|a| Command::Type(a[0].clone())),
            b"TOUCH" => at_least(rest, 1, "touch").map(|a| Command::Touch(a.to_vec())),
            _ => return None,
        };
        Some(cmd.and_then(Command::check_sizes))
    }

    /// Every key the command names, in order (repeats kept).
    pub fn keys(&self) -> Vec<&[u8]> {
        match self {
            Command::Get(k)
            | Command::Set { key: k, .. }
            | Command::SetNx(k, _)
            | Command::GetSet(k, _)
            | Command::GetDel(k)
            | Command::Append(k, _)
            | Command::Strlen(k)
            | Command::IncrBy(k, _)
            | Command::GetRange(k, ..)
            | Command::SetRange(k, ..)
            | Command::IncrByFloat(k, _)
            | Command::GetEx(k)
            | Command::Type(k) => vec![k],
            Command::Rename { from, to, .. } | Command::Copy { from, to, .. } => vec![from, to],
            Command::MGet(ks) | Command::Del(ks) | Command::Exists(ks) | Command::Touch(ks) => {
                ks.iter().map(Vec::as_slice).collect()
            }
            Command::MSet(kvs) | Command::MSetNx(kvs) => {
                kvs.iter().map(|(k, _)| k.as_slice()).collect()
            }
            Command::Echo(_) => Vec::new(),
        }
    }

    /// Whether the command needs the current value of its keys (every one but a plain SET
    /// and MSET, which overwrite blindly and answer OK).
    pub fn reads(&self) -> bool {
        !matches!(
            self,
            Command::Set {
                cond: None,
                get: false,
                ..
            } | Command::MSet(_)
                | Command::Echo(_)
        )
    }

    /// Whether the command may write.
    pub fn writes(&self) -> bool {
        !matches!(
            self,
            Command::Get(_)
                | Command::MGet(_)
                | Command::Strlen(_)
                | Command::Exists(_)
                | Command::Echo(_)
                | Command::GetRange(..)
                | Command::GetEx(_)
                | Command::Type(_)
                | Command::Touch(_)
        )
    }

    /// Refuses a key or a value NCC's groups would refuse (and drop the connection for).
    fn check_sizes(self) -> Result<Command, Reply> {
        for k in self.keys() {
            if k.len() > KEY_BYTES_MAX {
                return Err(Reply::err(format_args!(
                    "a key of {} bytes; the gateway takes keys up to {KEY_BYTES_MAX} bytes",
                    k.len()
                )));
            }
        }
        let values: Vec<(&[u8], &[u8])> = match &self {
            Command::Set { key, value, .. }
            | Command::SetNx(key, value)
            | Command::GetSet(key, value)
            | Command::Append(key, value)
            | Command::SetRange(key, _, value) => vec![(key, value)],
            Command::MSet(kvs) | Command::MSetNx(kvs) => kvs
                .iter()
                .map(|(k, v)| (k.as_slice(), v.as_slice()))
                .collect(),
            _ => Vec::new(),
        };
        for (k, v) in values {
            if v.len() > value_bytes_max(k.len()) {
                return Err(too_large());
            }
        }
        Ok(self)
    }
}

/// Redis's answer to a string that would pass the size limit.
pub fn too_large() -> Reply {
    Reply::err(format_args!(
        "string exceeds maximum allowed size (a key and its value take at most {REQUEST_BYTES_MAX} bytes through the gateway)"
    ))
}

/// Redis's arity error.
pub fn wrong_arity(name: &str) -> Reply {
    Reply::err(format_args!(
        "wrong number of arguments for '{name}' command"
    ))
}

fn exactly<'a>(rest: &'a [Vec<u8>], n: usize, name: &str) -> Result<&'a [Vec<u8>], Reply> {
    if rest.len() == n {
        Ok(rest)
    } else {
        Err(wrong_arity(name))
    }
}

fn at_least<'a>(rest: &'a [Vec<u8>], n: usize, name: &str) -> Result<&'a [Vec<u8>], Reply> {
    if rest.len() >= n {
        Ok(rest)
    } else {
        Err(wrong_arity(name))
    }
}

/// Keys with their values (MSET's arguments).
pub type Pairs = Vec<(Vec<u8>, Vec<u8>)>;

fn pairs(rest: &[Vec<u8>], name: &str) -> Result<Pairs, Reply> {
    if rest.is_empty() || !rest.len().is_multiple_of(2) {
        return Err(wrong_arity(name));
    }
    Ok(rest
        .chunks_exact(2)
        .map(|kv| (kv[0].clone(), kv[1].clone()))
        .collect())
}

/// A decimal 64-bit integer as Redis reads one (no spaces, no `+`, no leading zeros).
pub fn parse_i64(b: &[u8]) -> Option<i64> {
    let s = std::str::from_utf8(b).ok()?;
    let digits = s.strip_prefix('-').unwrap_or(s);
    let canonical = !digits.is_empty()
        && digits.bytes().all(|c| c.is_ascii_digit())
        && (digits == "0" || !digits.starts_with('0'))
        && s != "-0";
    if !canonical {
        return None;
    }
    s.parse().ok()
}

fn integer(b: &[u8]) -> Result<i64, Reply> {
    parse_i64(b).ok_or_else(not_an_integer)
}

/// Redis's answer to a value that is not a float.
pub fn not_a_float() -> Reply {
    Reply::err("value is not a valid float")
}

fn copy(rest: &[Vec<u8>]) -> Result<Command, Reply> {
    if rest.len() < 2 {
        return Err(wrong_arity("copy"));
    }
    let mut replace = false;
    let mut opts = rest[2..].iter();
    while let Some(opt) = opts.next() {
        match opt.to_ascii_uppercase().as_slice() {
            b"REPLACE" => replace = true,
            // One database here, as in a Redis cluster.
            b"DB" => match opts.next().map(Vec::as_slice) {
                Some(b"0") => {}
                Some(_) => return Err(Reply::err("DB index is out of range")),
                None => return Err(Reply::err("syntax error")),
            },
            _ => return Err(Reply::err("syntax error")),
        }
    }
    if rest[0] == rest[1] {
        return Err(Reply::err("source and destination objects are the same"));
    }
    Ok(Command::Copy {
        from: rest[0].clone(),
        to: rest[1].clone(),
        replace,
    })
}

fn getex(rest: &[Vec<u8>]) -> Result<Command, Reply> {
    let mut opts = rest[1..].iter();
    let mut chosen = false;
    while let Some(opt) = opts.next() {
        match opt.to_ascii_uppercase().as_slice() {
            b"PERSIST" if !chosen => chosen = true,
            b"EX" | b"PX" | b"EXAT" | b"PXAT" if !chosen && opts.next().is_some() => {
                return Err(no_expiry())
            }
            _ => return Err(Reply::err("syntax error")),
        }
    }
    Ok(Command::GetEx(rest[0].clone()))
}

/// The answer to a command that would set a time to live.
pub fn no_expiry() -> Reply {
    Reply::err("the transaction gateway does not support expiry yet")
}

/// Redis's answer to a value that is not an integer.
pub fn not_an_integer() -> Reply {
    Reply::err("value is not an integer or out of range")
}

fn set(rest: &[Vec<u8>]) -> Result<Command, Reply> {
    if rest.len() < 2 {
        return Err(wrong_arity("set"));
    }
    // Repeats are allowed (Redis 7 takes `NX NX`); NX with XX is not.
    let (mut nx, mut xx, mut get) = (false, false, false);
    for opt in &rest[2..] {
        match opt.to_ascii_uppercase().as_slice() {
            b"NX" => nx = true,
            b"XX" => xx = true,
            b"GET" => get = true,
            // No key has a time to live here, so there is none to keep.
            b"KEEPTTL" => {}
            b"EX" | b"PX" | b"EXAT" | b"PXAT" => return Err(no_expiry()),
            _ => return Err(Reply::err("syntax error")),
        }
    }
    let cond = match (nx, xx) {
        (true, true) => return Err(Reply::err("syntax error")),
        (true, false) => Some(Cond::Absent),
        (false, true) => Some(Cond::Present),
        (false, false) => None,
    };
    Ok(Command::Set {
        key: rest[0].clone(),
        value: rest[1].clone(),
        cond,
        get,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(words: &[&str]) -> Vec<Vec<u8>> {
        words.iter().map(|w| w.as_bytes().to_vec()).collect()
    }

    #[test]
    fn integers_are_read_as_redis_reads_them() {
        assert_eq!(parse_i64(b"-12"), Some(-12));
        assert_eq!(parse_i64(b"0"), Some(0));
        assert_eq!(parse_i64(b"9223372036854775807"), Some(i64::MAX));
        for bad in [
            "",
            "-",
            "+1",
            "01",
            "-0",
            " 1",
            "1.0",
            "9223372036854775808",
        ] {
            assert_eq!(parse_i64(bad.as_bytes()), None, "{bad:?}");
        }
    }

    #[test]
    fn bad_arguments_get_redis_errors() {
        let err = |w: &[&str]| Command::parse(&args(w)).unwrap().unwrap_err();
        assert_eq!(
            err(&["get"]),
            Reply::Error("ERR wrong number of arguments for 'get' command".into())
        );
        assert_eq!(err(&["mset", "a"]), wrong_arity("mset"));
        assert_eq!(
            err(&["set", "a", "b", "nx", "xx"]),
            Reply::err("syntax error")
        );
        assert_eq!(err(&["incrby", "a", "x"]), not_an_integer());
        assert_eq!(
            err(&["decrby", "a", "-9223372036854775808"]),
            Reply::err("decrement would overflow")
        );
        assert!(Command::parse(&args(&["ping"])).is_none());
        let long_key = vec![b'k'; KEY_BYTES_MAX + 1];
        assert!(Command::parse(&[b"GET".to_vec(), long_key])
            .unwrap()
            .is_err());
        let big = vec![b'v'; REQUEST_BYTES_MAX];
        assert_eq!(
            Command::parse(&[b"SET".to_vec(), b"k".to_vec(), big]).unwrap(),
            Err(too_large())
        );
    }

    #[test]
    fn what_a_command_reads_and_writes() {
        let cmd = |w: &[&str]| Command::parse(&args(w)).unwrap().unwrap();
        assert!(!cmd(&["set", "a", "1"]).reads());
        assert!(cmd(&["set", "a", "1", "nx"]).reads());
        assert!(cmd(&["set", "a", "1", "get"]).reads());
        assert!(!cmd(&["mset", "a", "1", "b", "2"]).reads());
        assert!(!cmd(&["mget", "a", "b"]).writes());
        assert!(cmd(&["del", "a"]).writes());
        assert_eq!(cmd(&["exists", "a", "a"]).keys(), vec![b"a", b"a"]);
    }
}
