use proptest::prelude::*;

use super::*;
use crate::resp::{Reply, Version};

fn args(words: &[&str]) -> Vec<Vec<u8>> {
    words.iter().map(|w| w.as_bytes().to_vec()).collect()
}

fn keys_of(words: &[&str]) -> Result<Vec<String>, KeysError> {
    let request = args(words);
    let spec = table().lookup(&request).expect("a known command");
    Ok(spec
        .keys(&request)?
        .iter()
        .map(|k| words[k.index].to_owned())
        .collect())
}

#[test]
fn table_names_are_unique_and_subcommands_nest() {
    let t = table();
    let mut seen = std::collections::HashSet::new();
    for c in t.commands() {
        assert!(seen.insert(&c.name), "{} twice", c.name);
        assert!(!c.name.contains('|'), "{} at the top level", c.name);
        assert_eq!(c.name, c.name.to_ascii_lowercase());
        for s in &c.subcommands {
            let (parent, _) = s.name.split_once('|').expect("container|sub");
            assert_eq!(parent, c.name);
            assert!(seen.insert(&s.name), "{} twice", s.name);
        }
        for spec in &c.key_specs {
            assert!(
                !spec.flags.is_empty(),
                "{}: a key spec without flags",
                c.name
            );
        }
    }
    assert!(t.get(b"GET").is_some() && t.get(b"config|GET").is_some());
    assert!(t.get(b"config|set").is_none(), "CONFIG SET is not served");
    assert!(t.get(b"nosuch").is_none() && t.get(&[0xff]).is_none());
    assert!(t.get(&[b'a'; 100]).is_none());
    assert_eq!(
        t.lookup(&[b"Config".to_vec(), b"gEt".to_vec()])
            .map(|c| c.name.as_str()),
        Some("config|get")
    );
}

/// Every data command's arity in the dispatcher (`session::data::arity`) is the table's.
#[test]
fn the_dispatchers_arities_are_the_tables() {
    let mut checked = 0;
    for c in table().commands() {
        if let Some(a) = crate::session::data_arity(c.name.to_ascii_uppercase().as_bytes()) {
            assert_eq!(i64::from(a), c.arity, "{}", c.name);
            checked += 1;
        }
    }
    assert!(
        checked > 100,
        "only {checked} data commands found in the table"
    );
}

/// For commands whose keys do not move, the key specs find exactly the keys the legacy
/// (first, last, step) triple names (Redis derives the triple from the specs): a model.
#[test]
fn fixed_key_specs_agree_with_the_legacy_triple() {
    let mut checked = 0;
    for c in table().commands() {
        if c.flags.iter().any(|f| f == "movablekeys") || c.first_key == 0 {
            continue;
        }
        for extra in 0..7usize {
            let argc = (c.arity.unsigned_abs() as usize).max(1) + extra;
            if !c.arity_fits(argc) {
                continue;
            }
            let mut request = vec![c.name.clone().into_bytes()];
            request.extend((1..argc).map(|i| format!("a{i}").into_bytes()));
            let found: Vec<usize> = match c.keys(&request) {
                Ok(k) => k.iter().map(|k| k.index).collect(),
                // A legacy range that a negative last key cannot fit (too few arguments for
                // a step of 2: MSET k) is refused by both.
                Err(KeysError::InvalidArguments) => continue,
            };
            let last = if c.last_key < 0 {
                argc as i64 + c.last_key
            } else {
                c.last_key
            };
            let model: Vec<usize> = (c.first_key..=last)
                .step_by(c.step as usize)
                .map(|i| i as usize)
                .collect();
            assert_eq!(found, model, "{} with {argc} arguments", c.name);
            checked += 1;
        }
    }
    assert!(checked > 300, "only {checked} requests checked");
}

#[test]
fn movable_keys_follow_their_counts() {
    let ok = |w: &[&str], want: &[&str]| assert_eq!(keys_of(w).unwrap(), want, "{w:?}");
    ok(
        &["ZUNIONSTORE", "d", "2", "a", "b", "WEIGHTS", "1", "2"],
        &["d", "a", "b"],
    );
    ok(
        &["ZINTER", "3", "a", "b", "c", "WITHSCORES"],
        &["a", "b", "c"],
    );
    ok(&["ZDIFFSTORE", "d", "1", "a"], &["d", "a"]);
    ok(&["LMPOP", "2", "a", "b", "LEFT", "COUNT", "3"], &["a", "b"]);
    ok(&["BLMPOP", "0.5", "1", "a", "RIGHT"], &["a"]);
    ok(&["ZMPOP", "2", "a", "b", "MIN"], &["a", "b"]);
    ok(&["BZMPOP", "0", "1", "a", "MAX"], &["a"]);
    ok(&["SINTERCARD", "2", "a", "b", "LIMIT", "1"], &["a", "b"]);
    ok(&["ZINTERCARD", "1", "a"], &["a"]);
    // A count that is not a number, negative, zero or beyond the arguments.
    for bad in [
        &["ZUNION", "x", "a"][..],
        &["ZUNION", "-1", "a"],
        &["ZUNION", "0", "a"],
        &["ZUNION", "3", "a", "b"],
        &["LMPOP", "99999999999999999999", "a", "LEFT"],
    ] {
        assert_eq!(keys_of(bad), Err(KeysError::InvalidArguments), "{bad:?}");
    }
}

#[test]
fn keyword_search_is_redis_s() {
    let words = args(&["CMD", "a", "STORE", "k", "STORE"]);
    assert_eq!(find_keyword(&words, "store", 1), Some(2));
    // Backwards from the end, stopping short of index 1 and not starting past the end.
    assert_eq!(find_keyword(&words, "STORE", -1), Some(4));
    assert_eq!(find_keyword(&words, "STORE", -2), Some(2));
    assert_eq!(find_keyword(&words, "a", -1), None);
    assert_eq!(find_keyword(&words, "STORE", -9), None);
    // Forwards, the last argument cannot be the keyword (a key must follow it).
    assert_eq!(
        find_keyword(&args(&["CMD", "x", "STORE"]), "STORE", 1),
        None
    );
}

fn encoded(reply: &Reply, version: Version) -> Vec<u8> {
    let mut out = Vec::new();
    reply.encode(version, &mut out);
    out
}

/// Redis 7.0.15's exact bytes for `COMMAND INFO get`, in both protocols.
#[test]
fn info_is_laid_out_as_redis_lays_it_out() {
    let reply = Reply::Array(vec![info_entry(table().get(b"get").unwrap())]);
    let resp2 = "*1\r\n*10\r\n$3\r\nget\r\n:2\r\n*2\r\n+readonly\r\n+fast\r\n:1\r\n:1\r\n:1\r\n\
        *3\r\n+@read\r\n+@string\r\n+@fast\r\n*0\r\n*1\r\n*6\r\n$5\r\nflags\r\n*2\r\n+RO\r\n\
        +access\r\n$12\r\nbegin_search\r\n*4\r\n$4\r\ntype\r\n$5\r\nindex\r\n$4\r\nspec\r\n\
        *2\r\n$5\r\nindex\r\n:1\r\n$9\r\nfind_keys\r\n*4\r\n$4\r\ntype\r\n$5\r\nrange\r\n\
        $4\r\nspec\r\n*6\r\n$7\r\nlastkey\r\n:0\r\n$7\r\nkeystep\r\n:1\r\n$5\r\nlimit\r\n:0\r\n\
        *0\r\n";
    assert_eq!(
        String::from_utf8(encoded(&reply, Version::Resp2)).unwrap(),
        resp2
    );
    let resp3 = "*1\r\n*10\r\n$3\r\nget\r\n:2\r\n~2\r\n+readonly\r\n+fast\r\n:1\r\n:1\r\n:1\r\n\
        ~3\r\n+@read\r\n+@string\r\n+@fast\r\n~0\r\n~1\r\n%3\r\n$5\r\nflags\r\n~2\r\n+RO\r\n\
        +access\r\n$12\r\nbegin_search\r\n%2\r\n$4\r\ntype\r\n$5\r\nindex\r\n$4\r\nspec\r\n\
        %1\r\n$5\r\nindex\r\n:1\r\n$9\r\nfind_keys\r\n%2\r\n$4\r\ntype\r\n$5\r\nrange\r\n\
        $4\r\nspec\r\n%3\r\n$7\r\nlastkey\r\n:0\r\n$7\r\nkeystep\r\n:1\r\n$5\r\nlimit\r\n:0\r\n\
        ~0\r\n";
    assert_eq!(
        String::from_utf8(encoded(&reply, Version::Resp3)).unwrap(),
        resp3
    );
}

/// Redis 7.0.15's exact bytes for `COMMAND DOCS incr` (RESP3).
#[test]
fn docs_are_laid_out_as_redis_lays_them_out() {
    let reply = Reply::Map(vec![docs_entry(table().get(b"incr").unwrap())]);
    let want = "%1\r\n$4\r\nincr\r\n%5\r\n$7\r\nsummary\r\n$43\r\nIncrement the integer value \
        of a key by one\r\n$5\r\nsince\r\n$5\r\n1.0.0\r\n$5\r\ngroup\r\n$6\r\nstring\r\n$10\r\n\
        complexity\r\n$4\r\nO(1)\r\n$9\r\narguments\r\n*1\r\n%3\r\n$4\r\nname\r\n$3\r\nkey\r\n\
        $4\r\ntype\r\n$3\r\nkey\r\n$14\r\nkey_spec_index\r\n:0\r\n";
    assert_eq!(
        String::from_utf8(encoded(&reply, Version::Resp3)).unwrap(),
        want
    );
}

proptest! {
    /// Whatever the arguments, key extraction never panics, and every key it finds is an
    /// argument after the name.
    #[test]
    fn keys_never_panic(
        which in 0usize..200,
        words in proptest::collection::vec(
            prop_oneof![Just("1".to_owned()), Just("-1".to_owned()), Just("2".to_owned()),
                        Just("LEFT".to_owned()), "[a-z0-9]{0,3}"],
            0..8),
    ) {
        let t = table();
        let c = &t.commands()[which % t.commands().len()];
        let mut request = vec![c.name.clone().into_bytes()];
        request.extend(words.into_iter().map(String::into_bytes));
        if let Ok(keys) = c.keys(&request) {
            for k in keys {
                prop_assert!(k.index >= 1 && k.index < request.len());
            }
        }
    }
}
