//! COMMAND INFO's and COMMAND DOCS's replies, laid out as Redis 7 lays them out (the types
//! matter: flags are sets of status strings, tips sets of bulk strings, key specifications
//! maps), so that RESP2 and RESP3 clients parse them as they parse Redis's.

use serde_json::Value;

use super::{BeginSearch, CommandSpec, FindKeys, KeySpec};
use crate::resp::Reply;

fn bulk(s: &str) -> Reply {
    Reply::Bulk(s.as_bytes().to_vec())
}

fn status_set(items: &[String]) -> Reply {
    Reply::Set(items.iter().map(|s| Reply::Simple(s.clone())).collect())
}

/// COMMAND INFO's ten-element array for one command (subcommands nested).
pub fn info_entry(c: &CommandSpec) -> Reply {
    Reply::Array(vec![
        bulk(&c.name),
        Reply::Integer(c.arity),
        status_set(&c.flags),
        Reply::Integer(c.first_key),
        Reply::Integer(c.last_key),
        Reply::Integer(c.step),
        status_set(&c.acl_categories),
        Reply::Set(c.tips.iter().map(|t| bulk(t)).collect()),
        Reply::Set(c.key_specs.iter().map(key_spec).collect()),
        Reply::Set(c.subcommands.iter().map(info_entry).collect()),
    ])
}

fn key_spec(k: &KeySpec) -> Reply {
    let mut fields = Vec::with_capacity(4);
    if let Some(notes) = &k.notes {
        fields.push((bulk("notes"), bulk(notes)));
    }
    fields.push((bulk("flags"), status_set(&k.flags)));
    let int = |name: &str, v: i64| (bulk(name), Reply::Integer(v));
    let (kind, spec) = match &k.begin_search {
        BeginSearch::Index { index } => ("index", vec![int("index", *index)]),
        BeginSearch::Keyword { keyword, startfrom } => (
            "keyword",
            vec![
                (bulk("keyword"), bulk(keyword)),
                int("startfrom", *startfrom),
            ],
        ),
        BeginSearch::Unknown {} => ("unknown", Vec::new()),
    };
    fields.push((bulk("begin_search"), typed(kind, spec)));
    let (kind, spec) = match &k.find_keys {
        FindKeys::Range {
            lastkey,
            keystep,
            limit,
        } => (
            "range",
            vec![
                int("lastkey", *lastkey),
                int("keystep", *keystep),
                int("limit", *limit),
            ],
        ),
        FindKeys::Keynum {
            keynumidx,
            firstkey,
            keystep,
        } => (
            "keynum",
            vec![
                int("keynumidx", *keynumidx),
                int("firstkey", *firstkey),
                int("keystep", *keystep),
            ],
        ),
        FindKeys::Unknown {} => ("unknown", Vec::new()),
    };
    fields.push((bulk("find_keys"), typed(kind, spec)));
    Reply::Map(fields)
}

fn typed(kind: &str, spec: Vec<(Reply, Reply)>) -> Reply {
    Reply::Map(vec![
        (bulk("type"), bulk(kind)),
        (bulk("spec"), Reply::Map(spec)),
    ])
}

/// COMMAND DOCS's `name => docs` pair for one command, its subcommands' docs nested under
/// `subcommands` as Redis nests them.
pub fn docs_entry(c: &CommandSpec) -> (Reply, Reply) {
    let mut fields: Vec<(Reply, Reply)> = c
        .docs
        .iter()
        .map(|(k, v)| (bulk(k), docs_value(k, v)))
        .collect();
    if !c.subcommands.is_empty() {
        fields.push((
            bulk("subcommands"),
            Reply::Map(c.subcommands.iter().map(docs_entry).collect()),
        ));
    }
    (bulk(&c.name), Reply::Map(fields))
}

/// A docs field in Redis's types: `flags` and `doc_flags` are sets of status strings,
/// `history` a set of (version, change) pairs, `arguments` an array of maps, other strings
/// bulk strings.
fn docs_value(key: &str, v: &Value) -> Reply {
    match v {
        Value::String(s) => bulk(s),
        Value::Number(n) => Reply::Integer(n.as_i64().unwrap_or(0)),
        Value::Bool(b) => Reply::Integer(i64::from(*b)),
        Value::Null => Reply::Nil,
        Value::Array(items) => match key {
            "flags" | "doc_flags" => Reply::Set(
                items
                    .iter()
                    .map(|i| Reply::Simple(i.as_str().unwrap_or_default().to_owned()))
                    .collect(),
            ),
            "history" => Reply::Set(items.iter().map(|i| docs_value("", i)).collect()),
            _ => Reply::Array(items.iter().map(|i| docs_value("", i)).collect()),
        },
        Value::Object(map) => Reply::Map(
            map.iter()
                .map(|(k, v)| (bulk(k), docs_value(k, v)))
                .collect(),
        ),
    }
}
