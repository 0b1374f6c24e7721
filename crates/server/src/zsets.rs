//! Sorted sets: each member a record `id ‖ 0x02 ‖ member -> score`, plus a score index
//! record `id ‖ 0x03 ‖ score ‖ member` ([`crate::collections`]), so ranges by score are
//! index range reads and ranges by member (BYLEX) read the member records in order. Ranks
//! are counted by walking the index: ZRANK and a ZRANGE starting at rank r cost O(r) (Redis's
//! skip list does O(log n)); ranges by score cost O(log n + returned).

use std::collections::BTreeMap;
use std::ops::Bound;

use verso_engine::Txn;

use crate::collections::{self as coll, Coll, KIND_SET, KIND_ZSET, TAG_MEMBER, TAG_SCORE};
use crate::keyspace::{parse_i64, CmdError, CmdResult, NOT_INTEGER};
use crate::resp::Reply;
use crate::stored::{self, Space, WRONGTYPE};
use crate::strings::parse_f64;

fn err(msg: &str) -> CmdError {
    CmdError::Reply(Reply::err(msg))
}

const NOT_FLOAT: &str = "value is not a valid float";
const RANGE_NOT_FLOAT: &str = "min or max is not a float";
const RANGE_NOT_LEX: &str = "min or max not valid string range item";

fn open(txn: &Txn<'_>, s: Space<'_>, key: &[u8]) -> Result<Option<Coll>, CmdError> {
    coll::open(txn, s, key, KIND_ZSET)
}

/// A score's 8 bytes in an order that sorts like the numbers (-inf first); -0 is stored as
/// 0, so the two compare equal as in Redis.
fn sortable(score: f64) -> [u8; 8] {
    let bits = if score == 0.0 { 0 } else { score.to_bits() };
    let ordered = if bits >> 63 == 1 {
        !bits
    } else {
        bits | 1 << 63
    };
    ordered.to_be_bytes()
}

/// A stored score as the text Redis sends in bulk strings (ZSCAN).
pub fn score_text(v: &[u8]) -> Vec<u8> {
    crate::resp::format_double(score_of(v)).into_bytes()
}

fn score_of(v: &[u8]) -> f64 {
    f64::from_le_bytes(v.try_into().expect("a score is 8 bytes"))
}

fn score_key(score: f64, member: &[u8]) -> Vec<u8> {
    let mut k = sortable(score).to_vec();
    k.extend_from_slice(member);
    k
}

/// A score as Redis replies with it: a double in RESP3, a bulk string in RESP2.
fn score_reply(score: f64) -> Reply {
    Reply::Double(score)
}

pub fn score(txn: &Txn<'_>, s: Space<'_>, c: Coll, member: &[u8]) -> Result<Option<f64>, CmdError> {
    Ok(coll::get(txn, s, c, member)?.map(score_of))
}

/// Sets `member`'s score; true if the member is new.
fn put(
    txn: &mut Txn<'_>,
    s: Space<'_>,
    c: Coll,
    member: &[u8],
    new: f64,
) -> Result<bool, CmdError> {
    let new = if new == 0.0 { 0.0 } else { new };
    let old = score(txn, s, c, member)?;
    if old == Some(new) {
        return Ok(false);
    }
    if let Some(old) = old {
        txn.delete(
            &s.collections.elements,
            coll::element_key(c.id, TAG_SCORE, &score_key(old, member)),
        )?;
    }
    coll::put(txn, s, c, member, &new.to_le_bytes())?;
    txn.put(
        &s.collections.elements,
        coll::element_key(c.id, TAG_SCORE, &score_key(new, member)),
        b"",
    )?;
    Ok(old.is_none())
}

/// Removes `member`; true if it was there.
fn remove(txn: &mut Txn<'_>, s: Space<'_>, c: Coll, member: &[u8]) -> Result<bool, CmdError> {
    let Some(old) = score(txn, s, c, member)? else {
        return Ok(false);
    };
    coll::remove(txn, s, c, member)?;
    txn.delete(
        &s.collections.elements,
        coll::element_key(c.id, TAG_SCORE, &score_key(old, member)),
    )?;
    Ok(true)
}

/// ZADD key [NX|XX] [GT|LT] [CH] [INCR] score member [score member ...].
pub fn zadd(txn: &mut Txn<'_>, s: Space<'_>, args: &[Vec<u8>]) -> CmdResult {
    let (mut nx, mut xx, mut gt, mut lt, mut ch, mut incr) =
        (false, false, false, false, false, false);
    let mut i = 1;
    while i < args.len() {
        match args[i].to_ascii_uppercase().as_slice() {
            b"NX" => nx = true,
            b"XX" => xx = true,
            b"GT" => gt = true,
            b"LT" => lt = true,
            b"CH" => ch = true,
            b"INCR" => incr = true,
            _ => break,
        }
        i += 1;
    }
    let pairs = &args[i..];
    if pairs.is_empty() || !pairs.len().is_multiple_of(2) {
        return Err(err("syntax error"));
    }
    if nx && xx {
        return Err(err("XX and NX options at the same time are not compatible"));
    }
    if (nx && (gt || lt)) || (gt && lt) {
        return Err(err(
            "GT, LT, and/or NX options at the same time are not compatible",
        ));
    }
    if incr && pairs.len() > 2 {
        return Err(err("INCR option supports a single increment-element pair"));
    }
    let mut scores = Vec::with_capacity(pairs.len() / 2);
    for p in pairs.chunks(2) {
        scores.push(parse_f64(&p[0]).ok_or_else(|| err(NOT_FLOAT))?);
    }
    // XX never creates the key.
    let c = if xx {
        match open(txn, s, &args[0])? {
            Some(c) => c,
            None => return Ok(if incr { Reply::Nil } else { Reply::Integer(0) }),
        }
    } else {
        coll::open_or_create(txn, s, &args[0], KIND_ZSET)?
    };
    let (mut added, mut changed) = (0, 0);
    let mut incr_result = None;
    for (p, &given) in pairs.chunks(2).zip(&scores) {
        let member = &p[1];
        let old = score(txn, s, c, member)?;
        if (nx && old.is_some()) || (xx && old.is_none()) {
            continue;
        }
        let new = match (incr, old) {
            (true, Some(o)) => o + given,
            _ => given,
        };
        if new.is_nan() {
            return Err(err("resulting score is not a number (NaN)"));
        }
        if let Some(o) = old {
            if (gt && new <= o) || (lt && new >= o) {
                continue;
            }
        }
        put(txn, s, c, member, new)?;
        incr_result = Some(new);
        match old {
            None => added += 1,
            Some(o) if o != new => changed += 1,
            Some(_) => {}
        }
    }
    Ok(if incr {
        incr_result.map_or(Reply::Nil, score_reply)
    } else {
        Reply::Integer(if ch { added + changed } else { added })
    })
}

/// ZINCRBY key increment member.
pub fn zincrby(txn: &mut Txn<'_>, s: Space<'_>, args: &[Vec<u8>]) -> CmdResult {
    let by = parse_f64(&args[1]).ok_or_else(|| err(NOT_FLOAT))?;
    let c = coll::open_or_create(txn, s, &args[0], KIND_ZSET)?;
    let new = score(txn, s, c, &args[2])?.unwrap_or(0.0) + by;
    if new.is_nan() {
        return Err(err("resulting score is not a number (NaN)"));
    }
    put(txn, s, c, &args[2], new)?;
    Ok(score_reply(new))
}

pub fn zscore(txn: &Txn<'_>, s: Space<'_>, key: &[u8], member: &[u8]) -> CmdResult {
    Ok(match open(txn, s, key)? {
        Some(c) => score(txn, s, c, member)?.map_or(Reply::Nil, score_reply),
        None => Reply::Nil,
    })
}

pub fn zmscore(txn: &Txn<'_>, s: Space<'_>, args: &[Vec<u8>]) -> CmdResult {
    let c = open(txn, s, &args[0])?;
    let mut out = Vec::with_capacity(args.len() - 1);
    for m in &args[1..] {
        out.push(match c {
            Some(c) => score(txn, s, c, m)?.map_or(Reply::Nil, score_reply),
            None => Reply::Nil,
        });
    }
    Ok(Reply::Array(out))
}

pub fn zcard(txn: &Txn<'_>, s: Space<'_>, key: &[u8]) -> CmdResult {
    Ok(Reply::Integer(match open(txn, s, key)? {
        Some(c) => coll::len(txn, s, c)?,
        None => 0,
    }))
}

/// ZREM key member...
pub fn zrem(txn: &mut Txn<'_>, s: Space<'_>, args: &[Vec<u8>]) -> CmdResult {
    let Some(c) = open(txn, s, &args[0])? else {
        return Ok(Reply::Integer(0));
    };
    let mut n = 0;
    for m in &args[1..] {
        n += i64::from(remove(txn, s, c, m)?);
    }
    // Only a removal can empty it; reading the length otherwise would make a ZREM of an
    // absent member conflict with inserts.
    if n > 0 {
        coll::drop_if_empty(txn, s, &args[0], c)?;
    }
    Ok(Reply::Integer(n))
}

/// A score bound: `(x` exclusive, `x` inclusive, `-inf`/`+inf`.
#[derive(Clone, Copy, Debug)]
struct ScoreBound {
    value: f64,
    exclusive: bool,
}

fn parse_score_bound(b: &[u8]) -> Result<ScoreBound, CmdError> {
    let (exclusive, num) = match b.split_first() {
        Some((b'(', rest)) => (true, rest),
        _ => (false, b),
    };
    let value = parse_f64(num).ok_or_else(|| err(RANGE_NOT_FLOAT))?;
    Ok(ScoreBound { value, exclusive })
}

/// Index bounds (after id and tag) for scores in [min, max].
fn score_bounds(min: ScoreBound, max: ScoreBound) -> (Bound<Vec<u8>>, Bound<Vec<u8>>) {
    let lo = match (min.value, min.exclusive) {
        (v, _) if v == f64::NEG_INFINITY && !min.exclusive => Bound::Unbounded,
        (v, false) => Bound::Included(sortable(v).to_vec()),
        (v, true) if v == f64::INFINITY => Bound::Excluded(vec![0xff; 9]),
        (v, true) => Bound::Included(sortable(v.next_up()).to_vec()),
    };
    let hi = match (max.value, max.exclusive) {
        (v, false) if v == f64::INFINITY => Bound::Unbounded,
        (v, false) => Bound::Excluded(sortable(v.next_up()).to_vec()),
        (v, true) => Bound::Excluded(sortable(v).to_vec()),
    };
    (lo, hi)
}

/// A lex bound: `[m` inclusive, `(m` exclusive, `-` and `+` the ends.
fn parse_lex_bound(b: &[u8]) -> Result<Bound<Vec<u8>>, CmdError> {
    match b {
        // `+` as a lower bound and `-` as an upper bound admit nothing: `select` answers
        // those before asking for bounds.
        b"-" | b"+" => Ok(Bound::Unbounded),
        [b'[', m @ ..] => Ok(Bound::Included(m.to_vec())),
        [b'(', m @ ..] => Ok(Bound::Excluded(m.to_vec())),
        _ => Err(err(RANGE_NOT_LEX)),
    }
}

fn as_ref(b: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    b.as_ref().map(Vec::as_slice)
}

/// How a range names its ends.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum By {
    Rank,
    Score,
    Lex,
}

/// A parsed range request (ZRANGE and its older forms, ZRANGESTORE, ZREMRANGE*, ZCOUNT).
struct Range {
    by: By,
    rev: bool,
    min: Vec<u8>,
    max: Vec<u8>,
    offset: i64,
    count: i64,
}

/// Checks a range's bounds (before the key is looked up: Redis refuses a bad bound even
/// for an absent key).
fn check_bounds(r: &Range) -> Result<(), CmdError> {
    match r.by {
        By::Rank => {
            ints_or_err(&r.min, &r.max)?;
        }
        By::Score => {
            parse_score_bound(&r.min)?;
            parse_score_bound(&r.max)?;
        }
        By::Lex => {
            parse_lex_bound(&r.min)?;
            parse_lex_bound(&r.max)?;
        }
    }
    Ok(())
}

fn ints_or_err(a: &[u8], b: &[u8]) -> Result<(i64, i64), CmdError> {
    match (parse_i64(a), parse_i64(b)) {
        (Some(a), Some(b)) => Ok((a, b)),
        _ => Err(err(NOT_INTEGER)),
    }
}

/// The (member, score) pairs `r` selects.
fn select(
    txn: &Txn<'_>,
    s: Space<'_>,
    c: Coll,
    r: &Range,
) -> Result<Vec<(Vec<u8>, f64)>, CmdError> {
    let take = |n: i64| if n < 0 { usize::MAX } else { n as usize };
    let skip = r.offset.max(0) as usize;
    if r.offset < 0 && r.by != By::Rank {
        return Ok(Vec::new());
    }
    match r.by {
        By::Rank => {
            let (Some(start), Some(stop)) = (parse_i64(&r.min), parse_i64(&r.max)) else {
                return Err(err(NOT_INTEGER));
            };
            let len = coll::len(txn, s, c)?;
            let start = if start < 0 {
                (len + start).max(0)
            } else {
                start
            };
            let stop = if stop < 0 {
                len + stop
            } else {
                stop.min(len - 1)
            };
            if start > stop || start >= len {
                return Ok(Vec::new());
            }
            let it = coll::tagged_range(
                txn,
                s,
                c,
                TAG_SCORE,
                Bound::Unbounded,
                Bound::Unbounded,
                r.rev,
            )?;
            Ok(it
                .skip(start as usize)
                .take((stop - start + 1) as usize)
                .map(|(k, _)| split_score_key(k))
                .collect())
        }
        By::Score => {
            let (lo, hi) = if r.rev {
                (&r.max, &r.min)
            } else {
                (&r.min, &r.max)
            };
            let (lo, hi) = score_bounds(parse_score_bound(lo)?, parse_score_bound(hi)?);
            if empty_range(&lo, &hi) {
                return Ok(Vec::new());
            }
            let it = coll::tagged_range(txn, s, c, TAG_SCORE, as_ref(&lo), as_ref(&hi), r.rev)?;
            Ok(it
                .skip(skip)
                .take(take(r.count))
                .map(|(k, _)| split_score_key(k))
                .collect())
        }
        By::Lex => {
            let (lo, hi) = if r.rev {
                (&r.max, &r.min)
            } else {
                (&r.min, &r.max)
            };
            let (lo_arg, hi_arg) = (lo.clone(), hi.clone());
            let (lo, hi) = (parse_lex_bound(lo)?, parse_lex_bound(hi)?);
            if lo_arg == b"+" || hi_arg == b"-" || empty_range(&lo, &hi) {
                return Ok(Vec::new());
            }
            let it = coll::tagged_range(txn, s, c, TAG_MEMBER, as_ref(&lo), as_ref(&hi), r.rev)?;
            Ok(it
                .skip(skip)
                .take(take(r.count))
                .map(|(m, v)| (m.to_vec(), score_of(v)))
                .collect())
        }
    }
}

/// Whether bounds admit nothing (the engine wants lo <= hi).
fn empty_range(lo: &Bound<Vec<u8>>, hi: &Bound<Vec<u8>>) -> bool {
    match (lo, hi) {
        (Bound::Included(a), Bound::Included(b)) => a > b,
        (Bound::Included(a) | Bound::Excluded(a), Bound::Excluded(b))
        | (Bound::Excluded(a), Bound::Included(b)) => a >= b,
        _ => false,
    }
}

fn split_score_key(k: &[u8]) -> (Vec<u8>, f64) {
    let (sortable_score, member) = k.split_at(8);
    let ordered = u64::from_be_bytes(sortable_score.try_into().expect("8 bytes"));
    let bits = if ordered >> 63 == 1 {
        ordered & !(1 << 63)
    } else {
        !ordered
    };
    (member.to_vec(), f64::from_bits(bits))
}

fn with_scores(items: Vec<(Vec<u8>, f64)>, scores: bool) -> Reply {
    if scores {
        Reply::Pairs(
            items
                .into_iter()
                .map(|(m, sc)| (Reply::Bulk(m), score_reply(sc)))
                .collect(),
        )
    } else {
        Reply::Array(items.into_iter().map(|(m, _)| Reply::Bulk(m)).collect())
    }
}

/// Parses `min max [BYSCORE|BYLEX] [REV] [LIMIT offset count] [WITHSCORES]` (ZRANGE's
/// syntax); `fixed` sets BY and REV for the old commands (ZRANGEBYSCORE...).
fn parse_range(
    args: &[Vec<u8>],
    fixed: Option<(By, bool)>,
    scores_allowed: bool,
) -> Result<(Range, bool), CmdError> {
    let (mut by, mut rev) = fixed.unwrap_or((By::Rank, false));
    let (mut offset, mut count, mut limit, mut scores) = (0, -1, false, false);
    let mut i = 2;
    while i < args.len() {
        match args[i].to_ascii_uppercase().as_slice() {
            b"BYSCORE" if fixed.is_none() => by = By::Score,
            b"BYLEX" if fixed.is_none() => by = By::Lex,
            b"REV" if fixed.is_none() => rev = true,
            b"WITHSCORES" if scores_allowed => scores = true,
            b"LIMIT" if i + 2 < args.len() => {
                offset = parse_i64(&args[i + 1]).ok_or_else(|| err(NOT_INTEGER))?;
                count = parse_i64(&args[i + 2]).ok_or_else(|| err(NOT_INTEGER))?;
                limit = true;
                i += 2;
            }
            _ => return Err(err("syntax error")),
        }
        i += 1;
    }
    if limit && by == By::Rank {
        return Err(err(
            "syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX",
        ));
    }
    if scores && by == By::Lex {
        return Err(err(
            "syntax error, WITHSCORES not supported in combination with BYLEX",
        ));
    }
    let range = Range {
        by,
        rev,
        min: args[0].clone(),
        max: args[1].clone(),
        offset,
        count,
    };
    Ok((range, scores))
}

/// ZRANGE key min max [BYSCORE|BYLEX] [REV] [LIMIT offset count] [WITHSCORES], and with
/// `fixed` the older ZREVRANGE, ZRANGEBYSCORE, ZREVRANGEBYSCORE, ZRANGEBYLEX,
/// ZREVRANGEBYLEX.
pub fn zrange(
    txn: &Txn<'_>,
    s: Space<'_>,
    args: &[Vec<u8>],
    fixed: Option<(By, bool)>,
) -> CmdResult {
    let scores_allowed = !matches!(fixed, Some((By::Lex, _)));
    let (r, scores) = parse_range(&args[1..], fixed, scores_allowed)?;
    check_bounds(&r)?;
    let Some(c) = open(txn, s, &args[0])? else {
        return Ok(Reply::Array(Vec::new()));
    };
    Ok(with_scores(select(txn, s, c, &r)?, scores))
}

/// Replaces `dst` with a sorted set of `items` (deleted when empty): the new cardinality.
fn store(txn: &mut Txn<'_>, s: Space<'_>, dst: &[u8], items: &BTreeMap<Vec<u8>, f64>) -> CmdResult {
    coll::delete_key(txn, s, dst)?;
    if !items.is_empty() {
        let c = coll::open_or_create(txn, s, dst, KIND_ZSET)?;
        for (m, &sc) in items {
            put(txn, s, c, m, sc)?;
        }
    }
    Ok(Reply::Integer(items.len() as i64))
}

/// ZRANGESTORE dst src min max [BYSCORE|BYLEX] [REV] [LIMIT offset count].
pub fn zrangestore(txn: &mut Txn<'_>, s: Space<'_>, args: &[Vec<u8>]) -> CmdResult {
    let (r, _) = parse_range(&args[2..], None, false)?;
    check_bounds(&r)?;
    let items = match open(txn, s, &args[1])? {
        Some(c) => select(txn, s, c, &r)?,
        None => Vec::new(),
    };
    store(txn, s, &args[0], &items.into_iter().collect())
}

/// ZCOUNT key min max, ZLEXCOUNT key min max.
pub fn zcount(txn: &Txn<'_>, s: Space<'_>, args: &[Vec<u8>], by: By) -> CmdResult {
    let r = Range {
        by,
        rev: false,
        min: args[1].clone(),
        max: args[2].clone(),
        offset: 0,
        count: -1,
    };
    // Bounds are checked even for an absent key, as Redis does.
    if by == By::Score {
        parse_score_bound(&r.min)?;
        parse_score_bound(&r.max)?;
    } else {
        parse_lex_bound(&r.min)?;
        parse_lex_bound(&r.max)?;
    }
    Ok(Reply::Integer(match open(txn, s, &args[0])? {
        Some(c) => select(txn, s, c, &r)?.len() as i64,
        None => 0,
    }))
}

/// ZREMRANGEBYRANK/BYSCORE/BYLEX key min max: the number removed.
pub fn zremrange(txn: &mut Txn<'_>, s: Space<'_>, args: &[Vec<u8>], by: By) -> CmdResult {
    let r = Range {
        by,
        rev: false,
        min: args[1].clone(),
        max: args[2].clone(),
        offset: 0,
        count: -1,
    };
    check_bounds(&r)?;
    let Some(c) = open(txn, s, &args[0])? else {
        return Ok(Reply::Integer(0));
    };
    let doomed = select(txn, s, c, &r)?;
    for (m, _) in &doomed {
        remove(txn, s, c, m)?;
    }
    if !doomed.is_empty() {
        coll::drop_if_empty(txn, s, &args[0], c)?;
    }
    Ok(Reply::Integer(doomed.len() as i64))
}

/// ZRANK / ZREVRANK key member: O(rank).
pub fn zrank(txn: &Txn<'_>, s: Space<'_>, key: &[u8], member: &[u8], rev: bool) -> CmdResult {
    let Some(c) = open(txn, s, key)? else {
        return Ok(Reply::Nil);
    };
    let Some(sc) = score(txn, s, c, member)? else {
        return Ok(Reply::Nil);
    };
    let own = score_key(sc, member);
    let before = if rev {
        coll::tagged_range(
            txn,
            s,
            c,
            TAG_SCORE,
            Bound::Excluded(&own),
            Bound::Unbounded,
            false,
        )?
        .count()
    } else {
        coll::tagged_range(
            txn,
            s,
            c,
            TAG_SCORE,
            Bound::Unbounded,
            Bound::Excluded(&own),
            false,
        )?
        .count()
    };
    Ok(Reply::Integer(before as i64))
}

/// ZPOPMIN / ZPOPMAX key [count].
pub fn zpop(txn: &mut Txn<'_>, s: Space<'_>, args: &[Vec<u8>], max: bool) -> CmdResult {
    let count = match args.get(1) {
        None => None,
        Some(_) if args.len() > 2 => return Err(err("syntax error")),
        Some(n) => match parse_i64(n) {
            Some(n) if n >= 0 => Some(n),
            _ => return Err(err("value is out of range, must be positive")),
        },
    };
    let Some(c) = open(txn, s, &args[0])? else {
        return Ok(Reply::Array(Vec::new()));
    };
    let popped = pop(txn, s, &args[0], c, count.unwrap_or(1), max)?;
    Ok(match count {
        None => Reply::Array(
            popped
                .into_iter()
                .flat_map(|(m, sc)| [Reply::Bulk(m), score_reply(sc)])
                .collect(),
        ),
        Some(_) => with_scores(popped, true),
    })
}

fn pop(
    txn: &mut Txn<'_>,
    s: Space<'_>,
    key: &[u8],
    c: Coll,
    n: i64,
    max: bool,
) -> Result<Vec<(Vec<u8>, f64)>, CmdError> {
    let items: Vec<(Vec<u8>, f64)> = coll::tagged_range(
        txn,
        s,
        c,
        TAG_SCORE,
        Bound::Unbounded,
        Bound::Unbounded,
        max,
    )?
    .take(n as usize)
    .map(|(k, _)| split_score_key(k))
    .collect();
    for (m, _) in &items {
        remove(txn, s, c, m)?;
    }
    if !items.is_empty() {
        coll::drop_if_empty(txn, s, key, c)?;
    }
    Ok(items)
}

/// ZMPOP numkeys key... MIN|MAX [COUNT count]: pops from the first non-empty key.
pub fn zmpop(txn: &mut Txn<'_>, s: Space<'_>, args: &[Vec<u8>]) -> CmdResult {
    let (keys, which, count) = coll::mpop_args(args)?;
    let max = match which.to_ascii_uppercase().as_slice() {
        b"MIN" => false,
        b"MAX" => true,
        _ => return Err(err("syntax error")),
    };
    let count = count as i64;
    for k in keys {
        if let Some(c) = open(txn, s, k)? {
            let popped = pop(txn, s, k, c, count, max)?;
            let pairs = popped
                .into_iter()
                .map(|(m, sc)| Reply::Array(vec![Reply::Bulk(m), score_reply(sc)]))
                .collect();
            return Ok(Reply::Array(vec![
                Reply::Bulk(k.clone()),
                Reply::Array(pairs),
            ]));
        }
    }
    Ok(Reply::NilArray)
}

/// ZRANDMEMBER key [count [WITHSCORES]].
pub fn zrandmember(txn: &Txn<'_>, s: Space<'_>, args: &[Vec<u8>]) -> CmdResult {
    let count = match args.get(1) {
        Some(n) => Some(parse_i64(n).ok_or_else(|| err(NOT_INTEGER))?),
        None => None,
    };
    let scores = match args.get(2) {
        Some(w) if w.eq_ignore_ascii_case(b"WITHSCORES") && args.len() == 3 => true,
        Some(_) => return Err(err("syntax error")),
        None => false,
    };
    let c = open(txn, s, &args[0])?;
    let seed = txn.timestamp();
    let Some(count) = count else {
        return Ok(match c {
            Some(c) => coll::random_member(txn, s, c, seed)?
                .map_or(Reply::Nil, |(m, _)| Reply::Bulk(m.to_vec())),
            None => Reply::Nil,
        });
    };
    let Some(c) = c else {
        return Ok(Reply::Array(Vec::new()));
    };
    let picked = crate::hashes::random_run(txn, s, c, count, seed, true)?
        .into_iter()
        .map(|(m, v)| (m, score_of(&v)))
        .collect();
    Ok(with_scores(picked, scores))
}

/// How ZUNION/ZINTER combine the scores of one member.
#[derive(Clone, Copy)]
enum Aggregate {
    Sum,
    Min,
    Max,
}

/// The operation of ZUNION, ZINTER, ZDIFF and their STORE forms.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum ZOp {
    Union,
    Inter,
    Diff,
}

/// A sorted set or a set (members score 1) as a map; WRONGTYPE for anything else.
fn as_scored(txn: &Txn<'_>, s: Space<'_>, key: &[u8]) -> Result<BTreeMap<Vec<u8>, f64>, CmdError> {
    let Some(v) = stored::read(txn, s, key)? else {
        return Ok(BTreeMap::new());
    };
    let (kind, c) = match v.kind {
        KIND_ZSET => (KIND_ZSET, coll::open(txn, s, key, KIND_ZSET)?),
        KIND_SET => (KIND_SET, coll::open(txn, s, key, KIND_SET)?),
        _ => return Err(CmdError::Reply(Reply::Error(WRONGTYPE.into()))),
    };
    let Some(c) = c else {
        return Ok(BTreeMap::new());
    };
    Ok(coll::members(txn, s, c, None)?
        .map(|(m, v)| {
            (
                m.to_vec(),
                if kind == KIND_ZSET { score_of(v) } else { 1.0 },
            )
        })
        .collect())
}

/// Parses `numkeys key... [WEIGHTS w...] [AGGREGATE SUM|MIN|MAX] [WITHSCORES]` and combines.
fn combine(
    txn: &Txn<'_>,
    s: Space<'_>,
    args: &[Vec<u8>],
    op: ZOp,
    scores_allowed: bool,
) -> Result<(BTreeMap<Vec<u8>, f64>, bool), CmdError> {
    let n = parse_i64(&args[0]).ok_or_else(|| err(NOT_INTEGER))?;
    if n <= 0 {
        return Err(err("at least 1 input key is needed for this command"));
    }
    let n = n as usize;
    let Some(keys) = args.get(1..1 + n) else {
        return Err(err("syntax error"));
    };
    let mut weights = vec![1.0; n];
    let mut agg = Aggregate::Sum;
    let mut scores = false;
    let rest = &args[1 + n..];
    let mut i = 0;
    while i < rest.len() {
        match rest[i].to_ascii_uppercase().as_slice() {
            b"WEIGHTS" if op != ZOp::Diff && rest.len() >= i + 1 + n => {
                for (j, w) in weights.iter_mut().enumerate() {
                    *w = parse_f64(&rest[i + 1 + j])
                        .ok_or_else(|| err("weight value is not a float"))?;
                }
                i += n;
            }
            b"AGGREGATE" if op != ZOp::Diff && i + 1 < rest.len() => {
                agg = match rest[i + 1].to_ascii_uppercase().as_slice() {
                    b"SUM" => Aggregate::Sum,
                    b"MIN" => Aggregate::Min,
                    b"MAX" => Aggregate::Max,
                    _ => return Err(err("syntax error")),
                };
                i += 1;
            }
            b"WITHSCORES" if scores_allowed => scores = true,
            _ => return Err(err("syntax error")),
        }
        i += 1;
    }
    let mut inputs = Vec::with_capacity(n);
    for k in keys {
        inputs.push(as_scored(txn, s, k)?);
    }
    let mix = |a: f64, b: f64| {
        let r = match agg {
            Aggregate::Sum => a + b,
            Aggregate::Min => a.min(b),
            Aggregate::Max => a.max(b),
        };
        // inf + -inf: Redis makes it 0.
        if r.is_nan() {
            0.0
        } else {
            r
        }
    };
    let weigh = |sc: f64, w: f64| {
        let r = sc * w;
        if r.is_nan() {
            0.0
        } else {
            r
        }
    };
    let mut it = inputs.into_iter().zip(weights);
    let (first, w0) = it.next().expect("n >= 1");
    let mut acc: BTreeMap<Vec<u8>, f64> = first
        .into_iter()
        .map(|(m, sc)| (m, weigh(sc, w0)))
        .collect();
    for (next, w) in it {
        match op {
            ZOp::Union => {
                for (m, sc) in next {
                    let sc = weigh(sc, w);
                    acc.entry(m).and_modify(|a| *a = mix(*a, sc)).or_insert(sc);
                }
            }
            ZOp::Inter => {
                acc = acc
                    .into_iter()
                    .filter_map(|(m, a)| next.get(&m).map(|&sc| (m, mix(a, weigh(sc, w)))))
                    .collect();
            }
            ZOp::Diff => acc.retain(|m, _| !next.contains_key(m)),
        }
    }
    Ok((acc, scores))
}

/// Orders combined members as Redis replies with them: by score, then member.
fn by_score(items: BTreeMap<Vec<u8>, f64>) -> Vec<(Vec<u8>, f64)> {
    let mut v: Vec<(Vec<u8>, f64)> = items.into_iter().collect();
    v.sort_by(|a, b| a.1.total_cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
    v
}

/// ZUNION, ZINTER, ZDIFF numkeys key... [WEIGHTS ...] [AGGREGATE ...] [WITHSCORES].
pub fn zcombine(txn: &Txn<'_>, s: Space<'_>, args: &[Vec<u8>], op: ZOp) -> CmdResult {
    let (items, scores) = combine(txn, s, args, op, true)?;
    Ok(with_scores(by_score(items), scores))
}

/// ZUNIONSTORE, ZINTERSTORE, ZDIFFSTORE destination numkeys key...
pub fn zcombine_store(txn: &mut Txn<'_>, s: Space<'_>, args: &[Vec<u8>], op: ZOp) -> CmdResult {
    let (items, _) = combine(txn, s, &args[1..], op, false)?;
    store(txn, s, &args[0], &items)
}

/// ZINTERCARD numkeys key... [LIMIT limit].
pub fn zintercard(txn: &Txn<'_>, s: Space<'_>, args: &[Vec<u8>]) -> CmdResult {
    let n = parse_i64(&args[0]).ok_or_else(|| err(NOT_INTEGER))?;
    if n <= 0 {
        return Err(err("numkeys should be greater than 0"));
    }
    let n = n as usize;
    if args.len() < 1 + n {
        return Err(err("Number of keys can't be greater than number of args"));
    }
    let limit = match &args[1 + n..] {
        [] => 0,
        [w, l] if w.eq_ignore_ascii_case(b"LIMIT") => match parse_i64(l) {
            Some(l) if l >= 0 => l as usize,
            _ => return Err(err("LIMIT can't be negative")),
        },
        _ => return Err(err("syntax error")),
    };
    let mut head = vec![args[0].clone()];
    head.extend_from_slice(&args[1..1 + n]);
    let (items, _) = combine(txn, s, &head, ZOp::Inter, false)?;
    let card = items.len();
    Ok(Reply::Integer(
        if limit > 0 { card.min(limit) } else { card } as i64,
    ))
}
