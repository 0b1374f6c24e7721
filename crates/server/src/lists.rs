//! List commands. A list is a run of dense positions between two end records
//! ([`crate::collections`] for the root and ids):
//!
//! ```text
//! elements  id ‖ 0x04 ‖ 0x00           -> head position (i64 little-endian)
//!           id ‖ 0x04 ‖ 0x01           -> tail position (one past the last element)
//!           id ‖ 0x05 ‖ position (u64 big-endian, sign bit flipped) -> element
//! ```
//!
//! LPUSH moves the head down and RPUSH the tail up, so pushes at the two ends touch
//! different records and do not conflict. LINDEX and LSET address `head + i` directly.
//! A pop reads its end, the element there, and the next one (to know whether it took the
//! last element, when the list goes); so a pop conflicts with a push at the other end only
//! while the list holds two elements or fewer. LINSERT and LREM shift elements (O(n), as in
//! Redis).

use std::ops::Bound;

use verso_engine::Txn;

use crate::collections::{self as coll, Coll, KIND_LIST};
use crate::keyspace::{parse_i64, CmdError, CmdResult, NOT_INTEGER};
use crate::resp::{BulkArray, Reply};
use crate::stored::Space;

const TAG_ENDS: u8 = 4;
const TAG_ITEM: u8 = 5;
const HEAD: u8 = 0;
const TAIL: u8 = 1;

fn err(msg: &str) -> CmdError {
    CmdError::Reply(Reply::err(msg))
}

fn open(txn: &Txn<'_>, s: Space<'_>, key: &[u8]) -> Result<Option<Coll>, CmdError> {
    coll::open(txn, s, key, KIND_LIST)
}

fn pos_bytes(p: i64) -> [u8; 8] {
    ((p as u64) ^ (1 << 63)).to_be_bytes()
}

fn item_key(c: Coll, p: i64) -> Vec<u8> {
    coll::element_key(c.id, TAG_ITEM, &pos_bytes(p))
}

fn end(txn: &Txn<'_>, s: Space<'_>, c: Coll, which: u8) -> Result<i64, CmdError> {
    Ok(txn
        .get(
            &s.collections.elements,
            coll::element_key(c.id, TAG_ENDS, &[which]),
        )?
        .and_then(|v| v.try_into().ok())
        .map_or(0, i64::from_le_bytes))
}

fn set_end(txn: &mut Txn<'_>, s: Space<'_>, c: Coll, which: u8, p: i64) -> Result<(), CmdError> {
    txn.put(
        &s.collections.elements,
        coll::element_key(c.id, TAG_ENDS, &[which]),
        p.to_le_bytes(),
    )?;
    Ok(())
}

fn item<'t>(txn: &'t Txn<'_>, s: Space<'_>, c: Coll, p: i64) -> Result<Option<&'t [u8]>, CmdError> {
    Ok(txn.get(&s.collections.elements, item_key(c, p))?)
}

/// [head, tail) of a list.
fn bounds(txn: &Txn<'_>, s: Space<'_>, c: Coll) -> Result<(i64, i64), CmdError> {
    Ok((end(txn, s, c, HEAD)?, end(txn, s, c, TAIL)?))
}

/// The elements at positions [from, to), in order (or reversed).
fn items(
    txn: &Txn<'_>,
    s: Space<'_>,
    c: Coll,
    from: i64,
    to: i64,
    rev: bool,
) -> Result<Vec<Vec<u8>>, CmdError> {
    if from >= to {
        return Ok(Vec::new());
    }
    let (lo, hi) = (pos_bytes(from), pos_bytes(to));
    let it = coll::tagged_range(
        txn,
        s,
        c,
        TAG_ITEM,
        Bound::Included(&lo),
        Bound::Excluded(&hi),
        rev,
    )?;
    Ok(it.map(|(_, v)| v.to_vec()).collect())
}

/// Deletes the list's records when it is empty (the root, its ends, its registry entry).
fn drop_list(txn: &mut Txn<'_>, s: Space<'_>, key: &[u8], c: Coll) -> Result<(), CmdError> {
    txn.delete(s.data, key)?;
    txn.delete(&s.collections.registry, c.id.to_be_bytes())?;
    for which in [HEAD, TAIL] {
        txn.delete(
            &s.collections.elements,
            coll::element_key(c.id, TAG_ENDS, &[which]),
        )?;
    }
    Ok(())
}

/// Which end of a list.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Side {
    Left,
    Right,
}

impl Side {
    pub fn parse(w: &[u8]) -> Option<Side> {
        if w.eq_ignore_ascii_case(b"LEFT") {
            Some(Side::Left)
        } else if w.eq_ignore_ascii_case(b"RIGHT") {
            Some(Side::Right)
        } else {
            None
        }
    }
}

/// Pushes `values` at `side` of the list `c` (one by one, as Redis: LPUSH a b c leaves
/// c b a at the head). Returns the new length.
fn push(
    txn: &mut Txn<'_>,
    s: Space<'_>,
    c: Coll,
    side: Side,
    values: &[Vec<u8>],
) -> Result<i64, CmdError> {
    let which = if side == Side::Left { HEAD } else { TAIL };
    let mut at = end(txn, s, c, which)?;
    for v in values {
        if side == Side::Left {
            at -= 1;
            txn.put(&s.collections.elements, item_key(c, at), v)?;
        } else {
            txn.put(&s.collections.elements, item_key(c, at), v)?;
            at += 1;
        }
    }
    set_end(txn, s, c, which, at)?;
    let other = end(txn, s, c, which ^ 1)?;
    Ok((at - other).abs())
}

/// LPUSH/RPUSH key element... (and LPUSHX/RPUSHX with `only_existing`): the new length.
pub fn lpush(
    txn: &mut Txn<'_>,
    s: Space<'_>,
    args: &[Vec<u8>],
    side: Side,
    only_existing: bool,
) -> CmdResult {
    let c = if only_existing {
        match open(txn, s, &args[0])? {
            Some(c) => c,
            None => return Ok(Reply::Integer(0)),
        }
    } else {
        coll::open_or_create(txn, s, &args[0], KIND_LIST)?
    };
    Ok(Reply::Integer(push(txn, s, c, side, &args[1..])?))
}

/// Pops up to `n` elements from `side`, dropping the list when it empties.
fn pop(
    txn: &mut Txn<'_>,
    s: Space<'_>,
    key: &[u8],
    c: Coll,
    side: Side,
    n: usize,
) -> Result<Vec<Vec<u8>>, CmdError> {
    let which = if side == Side::Left { HEAD } else { TAIL };
    let mut at = end(txn, s, c, which)?;
    let step = |p: i64| if side == Side::Left { p + 1 } else { p - 1 };
    let mut out = Vec::new();
    while out.len() < n {
        let p = if side == Side::Left { at } else { at - 1 };
        let Some(v) = item(txn, s, c, p)?.map(<[u8]>::to_vec) else {
            break;
        };
        txn.delete(&s.collections.elements, item_key(c, p))?;
        out.push(v);
        at = step(at);
    }
    // Whether anything is left: the next element from this end.
    let next = if side == Side::Left { at } else { at - 1 };
    if item(txn, s, c, next)?.is_none() {
        drop_list(txn, s, key, c)?;
    } else {
        set_end(txn, s, c, which, at)?;
    }
    Ok(out)
}

fn count_arg(arg: Option<&Vec<u8>>) -> Result<Option<usize>, CmdError> {
    match arg {
        None => Ok(None),
        Some(n) => match parse_i64(n) {
            Some(n) if n >= 0 => Ok(Some(n as usize)),
            _ => Err(err("value is out of range, must be positive")),
        },
    }
}

/// LPOP/RPOP key [count].
pub fn lpop(txn: &mut Txn<'_>, s: Space<'_>, args: &[Vec<u8>], side: Side) -> CmdResult {
    if args.len() > 2 {
        return Err(err("syntax error"));
    }
    let count = count_arg(args.get(1))?;
    let Some(c) = open(txn, s, &args[0])? else {
        return Ok(if count.is_some() {
            Reply::NilArray
        } else {
            Reply::Nil
        });
    };
    let popped = pop(txn, s, &args[0], c, side, count.unwrap_or(1))?;
    Ok(match count {
        None => popped.into_iter().next().map_or(Reply::Nil, Reply::Bulk),
        Some(_) => Reply::Array(popped.into_iter().map(Reply::Bulk).collect()),
    })
}

pub fn llen(txn: &Txn<'_>, s: Space<'_>, key: &[u8]) -> CmdResult {
    Ok(Reply::Integer(match open(txn, s, key)? {
        Some(c) => {
            let (h, t) = bounds(txn, s, c)?;
            t - h
        }
        None => 0,
    }))
}

/// Redis's index normalization for LRANGE/LTRIM: the inclusive range, or None if empty.
fn index_range(len: i64, start: i64, stop: i64) -> Option<(i64, i64)> {
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
    (start <= stop && start < len).then_some((start, stop))
}

fn ints(a: &[u8], b: &[u8]) -> Result<(i64, i64), CmdError> {
    match (parse_i64(a), parse_i64(b)) {
        (Some(a), Some(b)) => Ok((a, b)),
        _ => Err(err(NOT_INTEGER)),
    }
}

/// LRANGE key start stop.
pub fn lrange(txn: &Txn<'_>, s: Space<'_>, args: &[Vec<u8>]) -> CmdResult {
    let (start, stop) = ints(&args[1], &args[2])?;
    let Some(c) = open(txn, s, &args[0])? else {
        return Ok(Reply::Array(Vec::new()));
    };
    let (h, t) = bounds(txn, s, c)?;
    let Some((a, b)) = index_range(t - h, start, stop) else {
        return Ok(Reply::Array(Vec::new()));
    };
    // Encoded straight into the reply: positions are dense, so the count is known.
    let (lo, hi) = (pos_bytes(h + a), pos_bytes(h + b + 1));
    let mut out = BulkArray::with_len((b - a + 1) as usize);
    let range = Bound::Included(&lo[..]);
    for (_, v) in coll::tagged_range(txn, s, c, TAG_ITEM, range, Bound::Excluded(&hi), false)? {
        out.push(v);
    }
    Ok(out.finish())
}

/// The position of index `i` (negative from the end), if in the list.
fn position(txn: &Txn<'_>, s: Space<'_>, c: Coll, i: i64) -> Result<Option<i64>, CmdError> {
    let p = if i >= 0 {
        end(txn, s, c, HEAD)?.checked_add(i)
    } else {
        end(txn, s, c, TAIL)?.checked_add(i)
    };
    Ok(match p {
        Some(p) if item(txn, s, c, p)?.is_some() => Some(p),
        _ => None,
    })
}

/// LINDEX key index.
pub fn lindex(txn: &Txn<'_>, s: Space<'_>, key: &[u8], index: &[u8]) -> CmdResult {
    let i = parse_i64(index).ok_or_else(|| err(NOT_INTEGER))?;
    let Some(c) = open(txn, s, key)? else {
        return Ok(Reply::Nil);
    };
    Ok(match position(txn, s, c, i)? {
        Some(p) => item(txn, s, c, p)?.map_or(Reply::Nil, |v| Reply::Bulk(v.to_vec())),
        None => Reply::Nil,
    })
}

/// LSET key index element.
pub fn lset(txn: &mut Txn<'_>, s: Space<'_>, args: &[Vec<u8>]) -> CmdResult {
    let i = parse_i64(&args[1]).ok_or_else(|| err(NOT_INTEGER))?;
    let Some(c) = open(txn, s, &args[0])? else {
        return Err(err("no such key"));
    };
    let Some(p) = position(txn, s, c, i)? else {
        return Err(err("index out of range"));
    };
    txn.put(&s.collections.elements, item_key(c, p), &args[2])?;
    Ok(Reply::ok())
}

/// Rewrites the whole list as `values` from its head (for LINSERT, LREM, LTRIM): O(n).
fn rewrite(
    txn: &mut Txn<'_>,
    s: Space<'_>,
    key: &[u8],
    c: Coll,
    old: (i64, i64),
    values: &[Vec<u8>],
) -> Result<(), CmdError> {
    let (h, t) = old;
    if values.is_empty() {
        for p in h..t {
            txn.delete(&s.collections.elements, item_key(c, p))?;
        }
        return drop_list(txn, s, key, c);
    }
    for (i, v) in values.iter().enumerate() {
        txn.put(&s.collections.elements, item_key(c, h + i as i64), v)?;
    }
    let new_tail = h + values.len() as i64;
    for p in new_tail..t {
        txn.delete(&s.collections.elements, item_key(c, p))?;
    }
    set_end(txn, s, c, TAIL, new_tail)
}

/// LINSERT key BEFORE|AFTER pivot element: the new length, -1 without the pivot, 0
/// without the key.
pub fn linsert(txn: &mut Txn<'_>, s: Space<'_>, args: &[Vec<u8>]) -> CmdResult {
    let after = match args[1].to_ascii_uppercase().as_slice() {
        b"BEFORE" => false,
        b"AFTER" => true,
        _ => return Err(err("syntax error")),
    };
    let Some(c) = open(txn, s, &args[0])? else {
        return Ok(Reply::Integer(0));
    };
    let (h, t) = bounds(txn, s, c)?;
    let mut values = items(txn, s, c, h, t, false)?;
    let Some(i) = values.iter().position(|v| *v == args[2]) else {
        return Ok(Reply::Integer(-1));
    };
    values.insert(if after { i + 1 } else { i }, args[3].clone());
    rewrite(txn, s, &args[0], c, (h, t), &values)?;
    Ok(Reply::Integer(values.len() as i64))
}

/// LREM key count element: removes `count` occurrences from the head (negative: from the
/// tail; 0: all). The number removed.
pub fn lrem(txn: &mut Txn<'_>, s: Space<'_>, args: &[Vec<u8>]) -> CmdResult {
    let count = parse_i64(&args[1]).ok_or_else(|| err(NOT_INTEGER))?;
    let Some(c) = open(txn, s, &args[0])? else {
        return Ok(Reply::Integer(0));
    };
    let (h, t) = bounds(txn, s, c)?;
    let values = items(txn, s, c, h, t, false)?;
    let limit = if count == 0 {
        usize::MAX
    } else {
        count.unsigned_abs() as usize
    };
    let mut drop = vec![false; values.len()];
    let mut n = 0;
    let order: Box<dyn Iterator<Item = usize>> = if count < 0 {
        Box::new((0..values.len()).rev())
    } else {
        Box::new(0..values.len())
    };
    for i in order {
        if n == limit {
            break;
        }
        if values[i] == args[2] {
            drop[i] = true;
            n += 1;
        }
    }
    if n > 0 {
        let kept: Vec<Vec<u8>> = values
            .into_iter()
            .zip(drop)
            .filter(|(_, d)| !d)
            .map(|(v, _)| v)
            .collect();
        rewrite(txn, s, &args[0], c, (h, t), &kept)?;
    }
    Ok(Reply::Integer(n as i64))
}

/// LTRIM key start stop.
pub fn ltrim(txn: &mut Txn<'_>, s: Space<'_>, args: &[Vec<u8>]) -> CmdResult {
    let (start, stop) = ints(&args[1], &args[2])?;
    let Some(c) = open(txn, s, &args[0])? else {
        return Ok(Reply::ok());
    };
    let (h, t) = bounds(txn, s, c)?;
    match index_range(t - h, start, stop) {
        None => {
            for p in h..t {
                txn.delete(&s.collections.elements, item_key(c, p))?;
            }
            drop_list(txn, s, &args[0], c)?;
        }
        Some((a, b)) => {
            for p in (h..h + a).chain(h + b + 1..t) {
                txn.delete(&s.collections.elements, item_key(c, p))?;
            }
            set_end(txn, s, c, HEAD, h + a)?;
            set_end(txn, s, c, TAIL, h + b + 1)?;
        }
    }
    Ok(Reply::ok())
}

/// LPOS key element [RANK rank] [COUNT num] [MAXLEN len].
pub fn lpos(txn: &Txn<'_>, s: Space<'_>, args: &[Vec<u8>]) -> CmdResult {
    let (mut rank, mut count, mut maxlen) = (1i64, None, 0usize);
    let mut i = 2;
    while i < args.len() {
        let val = args.get(i + 1).ok_or_else(|| err("syntax error"))?;
        let n = parse_i64(val).ok_or_else(|| err(NOT_INTEGER))?;
        match args[i].to_ascii_uppercase().as_slice() {
            b"RANK" => {
                if n == 0 || n == i64::MIN {
                    return Err(err(
                        "RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list",
                    ));
                }
                rank = n;
            }
            b"COUNT" if n >= 0 => count = Some(n as usize),
            b"COUNT" => return Err(err("COUNT can't be negative")),
            b"MAXLEN" if n >= 0 => maxlen = n as usize,
            b"MAXLEN" => return Err(err("MAXLEN can't be negative")),
            _ => return Err(err("syntax error")),
        }
        i += 2;
    }
    let none = || {
        if count.is_some() {
            Reply::Array(Vec::new())
        } else {
            Reply::Nil
        }
    };
    let Some(c) = open(txn, s, &args[0])? else {
        return Ok(none());
    };
    let (h, t) = bounds(txn, s, c)?;
    let len = (t - h) as usize;
    let want = match count {
        Some(0) => usize::MAX,
        Some(n) => n,
        None => 1,
    };
    let mut skip = rank.unsigned_abs() - 1;
    let mut found = Vec::new();
    // Walked in place (no copy of the list), stopping at MAXLEN or the last match wanted.
    let (lo, hi) = (pos_bytes(h), pos_bytes(t));
    let walk = coll::tagged_range(
        txn,
        s,
        c,
        TAG_ITEM,
        Bound::Included(&lo),
        Bound::Excluded(&hi),
        rank < 0,
    )?;
    for (j, (_, v)) in walk.enumerate() {
        if maxlen > 0 && j >= maxlen {
            break;
        }
        if *v == *args[1] {
            if skip > 0 {
                skip -= 1;
                continue;
            }
            let index = if rank < 0 { len - 1 - j } else { j };
            found.push(Reply::Integer(index as i64));
            if found.len() == want {
                break;
            }
        }
    }
    Ok(match count {
        Some(_) => Reply::Array(found),
        None => found.into_iter().next().unwrap_or(Reply::Nil),
    })
}

/// LMOVE source destination LEFT|RIGHT LEFT|RIGHT (RPOPLPUSH is RIGHT LEFT): the element
/// moved, nil if the source is empty.
pub fn lmove(
    txn: &mut Txn<'_>,
    s: Space<'_>,
    src: &[u8],
    dst: &[u8],
    from: Side,
    to: Side,
) -> CmdResult {
    let Some(c) = open(txn, s, src)? else {
        return Ok(Reply::Nil);
    };
    // The destination's type is checked before anything moves.
    open(txn, s, dst)?;
    let Some(v) = pop(txn, s, src, c, from, 1)?.into_iter().next() else {
        return Ok(Reply::Nil);
    };
    let d = coll::open_or_create(txn, s, dst, KIND_LIST)?;
    push(txn, s, d, to, std::slice::from_ref(&v))?;
    Ok(Reply::Bulk(v))
}

/// LMOVE's argument form.
pub fn lmove_args(txn: &mut Txn<'_>, s: Space<'_>, args: &[Vec<u8>]) -> CmdResult {
    let (Some(from), Some(to)) = (Side::parse(&args[2]), Side::parse(&args[3])) else {
        return Err(err("syntax error"));
    };
    lmove(txn, s, &args[0], &args[1], from, to)
}

/// LMPOP numkeys key... LEFT|RIGHT [COUNT count]: pops from the first non-empty list.
pub fn lmpop(txn: &mut Txn<'_>, s: Space<'_>, args: &[Vec<u8>]) -> CmdResult {
    let (keys, which, count) = coll::mpop_args(args)?;
    let side = Side::parse(which).ok_or_else(|| err("syntax error"))?;
    for k in keys {
        if let Some(c) = open(txn, s, k)? {
            let popped = pop(txn, s, k, c, side, count)?;
            return Ok(Reply::Array(vec![
                Reply::Bulk(k.clone()),
                Reply::Array(popped.into_iter().map(Reply::Bulk).collect()),
            ]));
        }
    }
    Ok(Reply::NilArray)
}
