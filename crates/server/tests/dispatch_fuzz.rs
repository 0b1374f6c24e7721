//! The dispatcher fuzz body (`verso_server::fuzzing::run`, also `fuzz/fuzz_targets/session_ops.rs`)
//! on proptest inputs: arbitrary bytes, and byte strings built from real command words so the
//! inputs reach deep into the commands instead of stopping at the parser.

use proptest::prelude::*;
use verso_server::fuzzing;

/// Words that make up plausible requests: commands, options, keys, numbers.
const WORDS: &[&str] = &[
    "SET",
    "GET",
    "DEL",
    "INCR",
    "INCRBY",
    "DECRBY",
    "APPEND",
    "GETRANGE",
    "MSET",
    "MGET",
    "MSETNX",
    "SETNX",
    "GETSET",
    "GETDEL",
    "EXISTS",
    "STRLEN",
    "TYPE",
    "KEYS",
    "SCAN",
    "DBSIZE",
    "FLUSHDB",
    "FLUSHALL",
    "MULTI",
    "EXEC",
    "DISCARD",
    "WATCH",
    "UNWATCH",
    "SELECT",
    "HELLO",
    "AUTH",
    "PING",
    "ECHO",
    "INFO",
    "CONFIG",
    "CLIENT",
    "COMMAND",
    "VRANGE",
    "QUIT",
    "SETRANGE",
    "SUBSTR",
    "INCRBYFLOAT",
    "LCS",
    "IDX",
    "WITHMATCHLEN",
    "MINMATCHLEN",
    "RENAME",
    "RENAMENX",
    "COPY",
    "REPLACE",
    "DB",
    "MOVE",
    "TOUCH",
    "RANDOMKEY",
    "OBJECT",
    "ENCODING",
    "FUNCTION",
    "SCRIPT",
    "FLUSH",
    "EVAL",
    "1.5",
    "inf",
    "NX",
    "XX",
    "EX",
    "KEEPTTL",
    "PX",
    "EXAT",
    "PXAT",
    "GT",
    "LT",
    "PERSIST",
    "SETEX",
    "PSETEX",
    "GETEX",
    "EXPIRE",
    "PEXPIRE",
    "EXPIREAT",
    "PEXPIREAT",
    "TTL",
    "PTTL",
    "EXPIRETIME",
    "PEXPIRETIME",
    "HSET",
    "HSETNX",
    "HMSET",
    "HGET",
    "HMGET",
    "HDEL",
    "HLEN",
    "HEXISTS",
    "HSTRLEN",
    "HKEYS",
    "HVALS",
    "HGETALL",
    "HINCRBY",
    "HINCRBYFLOAT",
    "HRANDFIELD",
    "HSCAN",
    "WITHVALUES",
    "SADD",
    "SREM",
    "SISMEMBER",
    "SMISMEMBER",
    "SMEMBERS",
    "SCARD",
    "SINTER",
    "SUNION",
    "SDIFF",
    "SINTERSTORE",
    "SUNIONSTORE",
    "SDIFFSTORE",
    "SINTERCARD",
    "SMOVE",
    "SRANDMEMBER",
    "SPOP",
    "SSCAN",
    "TYPE",
    "hash",
    "set",
    "zset",
    "list",
    "LPUSH",
    "RPUSH",
    "LPUSHX",
    "RPUSHX",
    "LPOP",
    "RPOP",
    "LLEN",
    "LRANGE",
    "LINDEX",
    "LSET",
    "LINSERT",
    "LREM",
    "LTRIM",
    "LPOS",
    "LMOVE",
    "RPOPLPUSH",
    "LMPOP",
    "LEFT",
    "RIGHT",
    "BEFORE",
    "AFTER",
    "RANK",
    "MAXLEN",
    "ZADD",
    "ZINCRBY",
    "ZSCORE",
    "ZMSCORE",
    "ZCARD",
    "ZREM",
    "ZRANGE",
    "ZREVRANGE",
    "ZRANGEBYSCORE",
    "ZREVRANGEBYSCORE",
    "ZRANGEBYLEX",
    "ZREVRANGEBYLEX",
    "ZRANGESTORE",
    "ZCOUNT",
    "ZLEXCOUNT",
    "ZREMRANGEBYRANK",
    "ZREMRANGEBYSCORE",
    "ZREMRANGEBYLEX",
    "ZRANK",
    "ZREVRANK",
    "ZPOPMIN",
    "ZPOPMAX",
    "ZMPOP",
    "ZRANDMEMBER",
    "ZUNION",
    "ZINTER",
    "ZDIFF",
    "ZUNIONSTORE",
    "ZINTERSTORE",
    "ZDIFFSTORE",
    "ZINTERCARD",
    "ZSCAN",
    "BYSCORE",
    "BYLEX",
    "WITHSCORES",
    "WEIGHTS",
    "AGGREGATE",
    "MIN",
    "MAX",
    "CH",
    "INCR",
    "(1",
    "[a",
    "-inf",
    "+inf",
    "-",
    "+",
    "MATCH",
    "COUNT",
    "LIMIT",
    "REV",
    "SETNAME",
    "GETNAME",
    "ID",
    "DOCS",
    "a",
    "b",
    "k*",
    "*",
    "0",
    "1",
    "-1",
    "2",
    "3",
    "15",
    "16",
    "9223372036854775807",
    "-9223372036854775808",
    "x\"y",
    "",
];

fn request() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(prop::sample::select(WORDS), 1..6).prop_map(|words| {
        let mut out = format!("*{}\r\n", words.len()).into_bytes();
        for w in words {
            out.extend_from_slice(format!("${}\r\n{w}\r\n", w.len()).as_bytes());
        }
        out
    })
}

fn input() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..256),
        (any::<u8>(), prop::collection::vec(request(), 0..40)).prop_map(|(sel, reqs)| {
            let mut out = vec![sel];
            out.extend(reqs.concat());
            out
        }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, ..ProptestConfig::default() })]

    #[test]
    fn the_dispatcher_survives_any_input(data in input()) {
        thread_local! {
            static SHARED: verso_server::session::Shared = fuzzing::shared();
        }
        SHARED.with(|shared| fuzzing::run(shared, &data));
    }
}

#[test]
fn known_inputs() {
    let shared = fuzzing::shared();
    for data in [
        &b""[..],
        b"\x01",
        b"\x00MULTI\r\nSET a 1\r\nWATCH a\r\nEXEC\r\n",
        b"\x55WATCH a\r\nWATCH a\r\nSET a 2\r\nMULTI\r\nMULTI\r\nINCR a\r\nGET a\r\nEXEC\r\nEXEC\r\n",
        b"\x00SET a 1\r\nAPPEND a xxxxxxxxxxxxxxxx\r\nGETRANGE a -100 100\r\nVRANGE a z LIMIT 0 REV\r\n",
        b"\x00SELECT 15\r\nFLUSHALL\r\nSCAN 0 MATCH [ COUNT 0\r\nKEYS [\\\r\nQUIT\r\nPING\r\n",
    ] {
        fuzzing::run(&shared, data);
    }
    // Past `fuzzing::SESSION_LIMITS`: too many watched keys, queued commands, queued bytes.
    let big = "x".repeat(fuzzing::SESSION_LIMITS.multi_bytes_max);
    for data in [
        "\x00WATCH a b c d e\r\nWATCH a b\r\nSELECT 1\r\nWATCH a b c\r\nSET a 1\r\nMULTI\r\nEXEC\r\n"
            .to_string(),
        format!("\x00MULTI\r\n{}GET a\r\nEXEC\r\n", "PING\r\n".repeat(9)),
        format!("\x00MULTI\r\nSET a {big}\r\nSET b 1\r\nEXEC\r\nEXEC\r\n"),
    ] {
        fuzzing::run(&shared, data.as_bytes());
    }
}
