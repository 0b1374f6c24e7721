//! COMMAND and its subcommands (COUNT, INFO, DOCS, LIST, GETKEYS, GETKEYSANDFLAGS), answered
//! from the command table (`crate::commands`) as Redis 7 answers them.

use crate::commands::{self, docs_entry, info_entry, CommandSpec, KeysError};
use crate::glob;
use crate::resp::Reply;

/// `COMMAND [subcommand [arg ...]]`.
pub(super) fn command(args: &[Vec<u8>]) -> Reply {
    let table = commands::table();
    let Some(sub) = args.get(1) else {
        return Reply::Array(table.commands().iter().map(info_entry).collect());
    };
    let sub_upper = sub.to_ascii_uppercase();
    // Arity as the table states it for `command|<sub>`.
    let mut full = b"command|".to_vec();
    full.extend_from_slice(&sub_upper);
    let Some(spec) = table.get(&full) else {
        return Reply::Error(format!(
            "ERR unknown subcommand '{}'. Try COMMAND HELP.",
            String::from_utf8_lossy(sub)
        ));
    };
    if !spec.arity_fits(args.len()) {
        return Reply::Error(format!(
            "ERR wrong number of arguments for '{}' command",
            spec.name
        ));
    }
    match sub_upper.as_slice() {
        b"COUNT" => Reply::Integer(table.commands().len() as i64),
        b"INFO" if args.len() == 2 => {
            Reply::Array(table.commands().iter().map(info_entry).collect())
        }
        b"INFO" => Reply::Array(
            args[2..]
                .iter()
                .map(|name| table.get(name).map_or(Reply::Nil, info_entry))
                .collect(),
        ),
        b"DOCS" if args.len() == 2 => Reply::Map(table.commands().iter().map(docs_entry).collect()),
        b"DOCS" => Reply::Map(
            args[2..]
                .iter()
                .filter_map(|name| table.get(name).map(docs_entry))
                .collect(),
        ),
        b"LIST" => list(table.commands(), &args[2..]),
        b"GETKEYS" => getkeys(&args[2..], false),
        b"GETKEYSANDFLAGS" => getkeys(&args[2..], true),
        _ => unreachable!("the table names COMMAND's subcommands"),
    }
}

/// `COMMAND LIST [FILTERBY MODULE name | ACLCAT category | PATTERN pattern]`: every command
/// and subcommand name (`config|get`).
fn list(commands: &[CommandSpec], filter: &[Vec<u8>]) -> Reply {
    enum Filter<'a> {
        All,
        Module,
        AclCategory(String),
        Pattern(&'a [u8]),
    }
    let filter = match filter {
        [] => Filter::All,
        [by, kind, value] if by.eq_ignore_ascii_case(b"FILTERBY") => {
            match kind.to_ascii_uppercase().as_slice() {
                b"MODULE" => Filter::Module,
                b"ACLCAT" => Filter::AclCategory(format!(
                    "@{}",
                    String::from_utf8_lossy(value).to_ascii_lowercase()
                )),
                b"PATTERN" => Filter::Pattern(value),
                _ => return Reply::err("syntax error"),
            }
        }
        _ => return Reply::err("syntax error"),
    };
    let keep = |c: &CommandSpec| match &filter {
        Filter::All => true,
        Filter::Module => false, // Verso loads no modules
        Filter::AclCategory(cat) => c.acl_categories.iter().any(|a| a == cat),
        Filter::Pattern(p) => glob::matches(&p.to_ascii_lowercase(), c.name.as_bytes()),
    };
    let mut names = Vec::new();
    for c in commands {
        for c in std::iter::once(c).chain(&c.subcommands) {
            if keep(c) {
                names.push(Reply::Bulk(c.name.as_bytes().to_vec()));
            }
        }
    }
    Reply::Array(names)
}

/// `COMMAND GETKEYS command [arg ...]` (and `GETKEYSANDFLAGS`, which pairs each key with its
/// key spec's flags), with Redis's error replies.
fn getkeys(request: &[Vec<u8>], with_flags: bool) -> Reply {
    let table = commands::table();
    let Some(spec) = table.lookup(request) else {
        return Reply::err("Invalid command specified");
    };
    if !spec.has_keys() {
        return Reply::err("The command has no key arguments");
    }
    if !spec.arity_fits(request.len()) {
        return Reply::err("Invalid number of arguments specified for command");
    }
    let keys = match spec.keys(request) {
        Ok(keys) if !keys.is_empty() => keys,
        Ok(_) | Err(KeysError::InvalidArguments) => {
            return Reply::err("Invalid arguments specified for command")
        }
    };
    Reply::Array(
        keys.iter()
            .map(|k| {
                let key = Reply::Bulk(request[k.index].clone());
                if with_flags {
                    let flags = variable_flags(spec, request).unwrap_or(k.flags);
                    Reply::Array(vec![
                        key,
                        Reply::Set(flags.iter().map(|f| Reply::Simple(f.clone())).collect()),
                    ])
                } else {
                    key
                }
            })
            .collect(),
    )
}

/// The flags of a key whose spec says `variable_flags`: they depend on the arguments. SET
/// is the only such command Verso serves: with `GET` it reads the old value (Redis's
/// `setGetKeys`), without it only overwrites.
fn variable_flags(spec: &CommandSpec, request: &[Vec<u8>]) -> Option<&'static [String]> {
    use std::sync::OnceLock;
    static WITH_GET: OnceLock<Vec<String>> = OnceLock::new();
    static WITHOUT_GET: OnceLock<Vec<String>> = OnceLock::new();
    if spec.name != "set" {
        return None;
    }
    let owned = |fs: &[&str]| fs.iter().map(|f| (*f).to_owned()).collect::<Vec<_>>();
    let get = request[3..].iter().any(|a| a.eq_ignore_ascii_case(b"GET"));
    Some(if get {
        WITH_GET.get_or_init(|| owned(&["RW", "access", "update"]))
    } else {
        WITHOUT_GET.get_or_init(|| owned(&["OW", "update"]))
    })
}
