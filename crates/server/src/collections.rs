//! Collections (hashes and sets so far): every field or member is its own record in the
//! engine, so two transactions that touch different fields of one hash do not conflict.
//!
//! Layout (ARCHITECTURE.md, "Collections", says why):
//!
//! ```text
//! db{i}        key                          -> header(kind, deadline) ‖ id (u64 big-endian)
//! collections  id                           -> db index (u8) ‖ key      (the registry)
//! elements     id ‖ 0x01 ‖ stripe (u8)      -> count (i64 little-endian), absent at 0
//!              id ‖ 0x02 ‖ field/member     -> value (hashes) or empty (sets)
//! collections.graveyard  id                 -> empty  (ids whose elements are to be freed)
//! ```
//!
//! The root record in the database's table holds only the kind, the deadline and a random
//! id; elements hang off the id, not the key. So dropping a collection (DEL, expiry, a SET
//! over it, RENAME over it) writes only its root and registry entry, RENAME and MOVE move
//! only the root, and elements a dropped collection leaves behind are unreachable at once
//! (no root names their id) and freed later by [`reclaim`], from the graveyard. A plain SET
//! over a collection is a blind write that cannot know an id was dropped: the registry sweep
//! in [`reclaim`] finds such ids (registry entry whose key no longer names it).
//!
//! The length is kept in eight stripe counters chosen by a hash of the member, so adding
//! two new fields conflicts only when both land in one stripe (1 in 8), where one counter
//! would make every pair of inserts conflict. A length read sums the stripes (one short
//! range read); the removal that empties a collection sees all stripes at zero and drops
//! the root.

use std::cell::Cell;
use std::ops::Bound;

use verso_engine::{Db, Error, Txn};

use crate::keyspace::CmdError;
use crate::resp::Reply;
use crate::stored::{self, CollectionTables, Space, Spaces, Stored, KIND_STRING, WRONGTYPE};

/// LMPOP's and ZMPOP's keys, `WHERE` word and count.
pub type MpopArgs<'a> = (&'a [Vec<u8>], &'a [u8], usize);

/// The arguments of LMPOP and ZMPOP (`numkeys key... WHERE [COUNT count]`): the keys, the
/// `WHERE` word (LEFT/RIGHT, MIN/MAX: the caller parses it) and the count.
pub fn mpop_args(args: &[Vec<u8>]) -> Result<MpopArgs<'_>, CmdError> {
    let syntax = || CmdError::Reply(Reply::err("syntax error"));
    let n = crate::keyspace::parse_i64(&args[0])
        .ok_or_else(|| CmdError::Reply(Reply::err(crate::keyspace::NOT_INTEGER)))?;
    if n <= 0 {
        return Err(CmdError::Reply(Reply::err(
            "numkeys should be greater than 0",
        )));
    }
    let n = usize::try_from(n).map_err(|_| syntax())?;
    let keys = args.get(1..n.saturating_add(1)).ok_or_else(syntax)?;
    let rest = &args[1 + n..];
    let which = rest.first().ok_or_else(syntax)?;
    let count = match &rest[1..] {
        [] => 1,
        [w, c] if w.eq_ignore_ascii_case(b"COUNT") => match crate::keyspace::parse_i64(c) {
            Some(c) if c > 0 => c as usize,
            _ => {
                return Err(CmdError::Reply(Reply::err(
                    "count should be greater than 0",
                )))
            }
        },
        _ => return Err(syntax()),
    };
    Ok((keys, which, count))
}

/// Kinds stored in the root's header byte.
pub const KIND_HASH: u8 = 1;
pub const KIND_SET: u8 = 2;
pub const KIND_ZSET: u8 = 3;
pub const KIND_LIST: u8 = 4;

const TAG_STRIPE: u8 = 1;
/// Members (and hash fields): `id ‖ 0x02 ‖ member -> value`.
pub const TAG_MEMBER: u8 = 2;
/// Sorted sets' score index: `id ‖ 0x03 ‖ score (order-preserving) ‖ member`.
pub const TAG_SCORE: u8 = 3;
const STRIPES: u64 = 8;
pub(crate) const ID_LEN: usize = 8;

fn wrongtype() -> CmdError {
    CmdError::Reply(Reply::Error(WRONGTYPE.into()))
}

/// A member and its value (empty for a set member), borrowed from the transaction.
pub type Member<'t> = (&'t [u8], &'t [u8]);
/// The same, owned.
pub type OwnedMember = (Vec<u8>, Vec<u8>);

/// A live collection as a command sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Coll {
    pub id: u64,
    pub kind: u8,
    pub deadline: Option<u64>,
}

/// The collection id a root value names, if it is a collection's.
pub fn id_of(v: &Stored<'_>) -> Option<u64> {
    if v.kind == KIND_STRING {
        return None;
    }
    Some(u64::from_be_bytes(v.payload.try_into().ok()?))
}

/// The collection at `key` of `kind`: `None` if absent or expired, WRONGTYPE if the key
/// holds another kind.
pub fn open(txn: &Txn<'_>, s: Space<'_>, key: &[u8], kind: u8) -> Result<Option<Coll>, CmdError> {
    let Some(v) = stored::read(txn, s, key)? else {
        return Ok(None);
    };
    if v.kind != kind {
        return Err(wrongtype());
    }
    let id = id_of(&v).ok_or_else(|| CmdError::Reply(Reply::err("damaged collection root")))?;
    Ok(Some(Coll {
        id,
        kind,
        deadline: v.deadline,
    }))
}

thread_local! {
    static ID_SEQ: Cell<u64> = const { Cell::new(0) };
}

fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A fresh id: random (the transaction's timestamp, a per-thread sequence and the thread's
/// stack address mixed), and checked absent from the registry inside the transaction, so
/// two transactions that drew the same id cannot both commit.
pub(crate) fn new_id(txn: &Txn<'_>, s: Space<'_>) -> Result<u64, CmdError> {
    let local = 0u8;
    let salt = std::ptr::addr_of!(local) as u64;
    loop {
        let seq = ID_SEQ.with(|c| {
            c.set(c.get().wrapping_add(1));
            c.get()
        });
        let id = splitmix64(txn.timestamp() ^ seq.rotate_left(32) ^ salt);
        // Not registered, and not waiting in the graveyard (whose elements would be
        // inherited, then freed under the new collection).
        let key = id.to_be_bytes();
        if txn.get(&s.collections.registry, key)?.is_none()
            && txn.get(&s.collections.graveyard, key)?.is_none()
        {
            return Ok(id);
        }
    }
}

fn registry_value(s: Space<'_>, key: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(1 + key.len());
    v.push(s.index);
    v.extend_from_slice(key);
    v
}

/// The collection at `key` of `kind`, created empty if absent or expired (WRONGTYPE if the
/// key holds another kind). An expired collection it replaces goes to the graveyard.
pub fn open_or_create(
    txn: &mut Txn<'_>,
    s: Space<'_>,
    key: &[u8],
    kind: u8,
) -> Result<Coll, CmdError> {
    let old = match txn.get(s.data, key)? {
        None => None,
        Some(raw) => {
            Some(Stored::decode(raw).ok_or_else(|| CmdError::Reply(Reply::err("damaged value")))?)
        }
    };
    let mut dead = None;
    if let Some(v) = old {
        if !v.expired_at(s.now_ms) {
            if v.kind != kind {
                return Err(wrongtype());
            }
            let id =
                id_of(&v).ok_or_else(|| CmdError::Reply(Reply::err("damaged collection root")))?;
            return Ok(Coll {
                id,
                kind,
                deadline: v.deadline,
            });
        }
        dead = id_of(&v);
    }
    if let Some(id) = dead {
        bury(txn, s.collections, id)?;
    }
    let id = new_id(txn, s)?;
    txn.put(
        &s.collections.registry,
        id.to_be_bytes(),
        registry_value(s, key),
    )?;
    stored::write(txn, s, key, kind, None, &id.to_be_bytes())?;
    Ok(Coll {
        id,
        kind,
        deadline: None,
    })
}

/// Drops collection `id` whose root the caller deletes or overwrites: its registry entry
/// goes, and its elements are left for [`reclaim`].
pub fn bury(txn: &mut Txn<'_>, t: &CollectionTables, id: u64) -> Result<(), Error> {
    txn.delete(&t.registry, id.to_be_bytes())?;
    txn.put(&t.graveyard, id.to_be_bytes(), b"")
}

/// If `key`'s current root (live or expired) is a collection, buries it: for commands that
/// are about to overwrite or delete the key.
pub fn bury_root(txn: &mut Txn<'_>, s: Space<'_>, key: &[u8]) -> Result<(), Error> {
    let id = txn
        .get(s.data, key)?
        .and_then(Stored::decode)
        .and_then(|v| id_of(&v));
    match id {
        Some(id) => bury(txn, s.collections, id),
        None => Ok(()),
    }
}

/// Deletes `key` whatever it holds (burying a collection): true if it existed (live).
pub fn delete_key(txn: &mut Txn<'_>, s: Space<'_>, key: &[u8]) -> Result<bool, CmdError> {
    let Some(raw) = txn.get(s.data, key)? else {
        return Ok(false);
    };
    let v = Stored::decode(raw);
    let live = v.is_some_and(|v| !v.expired_at(s.now_ms));
    if let Some(id) = v.and_then(|v| id_of(&v)) {
        bury(txn, s.collections, id)?;
    }
    txn.delete(s.data, key)?;
    Ok(live)
}

/// After RENAME or MOVE moved a collection's root: the registry names its new place.
pub fn rehome(txn: &mut Txn<'_>, s: Space<'_>, id: u64, key: &[u8]) -> Result<(), Error> {
    txn.put(
        &s.collections.registry,
        id.to_be_bytes(),
        registry_value(s, key),
    )
}

/// The element record `id ‖ tag ‖ rest`.
pub fn element_key(id: u64, tag: u8, rest: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(ID_LEN + 1 + rest.len());
    k.extend_from_slice(&id.to_be_bytes());
    k.push(tag);
    k.extend_from_slice(rest);
    k
}

fn stripe_of(member: &[u8]) -> u8 {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for &b in member {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    (splitmix64(h) % STRIPES) as u8
}

fn add_count(
    txn: &mut Txn<'_>,
    s: Space<'_>,
    c: Coll,
    member: &[u8],
    delta: i64,
) -> Result<(), Error> {
    let k = element_key(c.id, TAG_STRIPE, &[stripe_of(member)]);
    let now = txn
        .get(&s.collections.elements, &k)?
        .and_then(|v| v.try_into().ok())
        .map_or(0, i64::from_le_bytes);
    match now + delta {
        0 => txn.delete(&s.collections.elements, &k),
        n => txn.put(&s.collections.elements, &k, n.to_le_bytes()),
    }
}

/// The number of members (one range read over the stripes).
pub fn len(txn: &Txn<'_>, s: Space<'_>, c: Coll) -> Result<i64, Error> {
    let lo = element_key(c.id, TAG_STRIPE, &[]);
    let hi = element_key(c.id, TAG_STRIPE + 1, &[]);
    let mut n = 0;
    for (_, v) in txn.range(&s.collections.elements, &lo[..]..&hi[..])? {
        n += v.try_into().map_or(0, i64::from_le_bytes);
    }
    Ok(n)
}

/// A member's value (`Some(b"")` for a set member).
pub fn get<'t>(
    txn: &'t Txn<'_>,
    s: Space<'_>,
    c: Coll,
    member: &[u8],
) -> Result<Option<&'t [u8]>, Error> {
    txn.get(
        &s.collections.elements,
        element_key(c.id, TAG_MEMBER, member),
    )
}

/// Sets a member's value; true if the member is new.
pub fn put(
    txn: &mut Txn<'_>,
    s: Space<'_>,
    c: Coll,
    member: &[u8],
    value: &[u8],
) -> Result<bool, Error> {
    let k = element_key(c.id, TAG_MEMBER, member);
    let new = txn.get(&s.collections.elements, &k)?.is_none();
    txn.put(&s.collections.elements, &k, value)?;
    if new {
        add_count(txn, s, c, member, 1)?;
    }
    Ok(new)
}

/// Removes a member; true if it was there. The caller runs [`drop_if_empty`] after its
/// removals.
pub fn remove(txn: &mut Txn<'_>, s: Space<'_>, c: Coll, member: &[u8]) -> Result<bool, Error> {
    let k = element_key(c.id, TAG_MEMBER, member);
    if txn.get(&s.collections.elements, &k)?.is_none() {
        return Ok(false);
    }
    txn.delete(&s.collections.elements, &k)?;
    add_count(txn, s, c, member, -1)?;
    Ok(true)
}

/// Deletes the key if its collection is now empty (Redis never keeps an empty one).
pub fn drop_if_empty(txn: &mut Txn<'_>, s: Space<'_>, key: &[u8], c: Coll) -> Result<(), Error> {
    if len(txn, s, c)? == 0 {
        txn.delete(s.data, key)?;
        txn.delete(&s.collections.registry, c.id.to_be_bytes())?;
    }
    Ok(())
}

/// The members in order, with their values, from `after` (excluded) on.
pub fn members<'t>(
    txn: &'t Txn<'_>,
    s: Space<'_>,
    c: Coll,
    after: Option<&[u8]>,
) -> Result<impl Iterator<Item = Member<'t>> + 't, Error> {
    let lo = match after {
        Some(m) => Bound::Excluded(element_key(c.id, TAG_MEMBER, m)),
        None => Bound::Included(element_key(c.id, TAG_MEMBER, &[])),
    };
    let hi = element_key(c.id, TAG_MEMBER + 1, &[]);
    let bounds = (
        lo.as_ref().map(Vec::as_slice),
        Bound::Excluded(hi.as_slice()),
    );
    Ok(txn
        .range(&s.collections.elements, bounds)?
        .map(|(k, v)| (&k[ID_LEN + 1..], v)))
}

/// The element records of `c` with `tag` whose remainder (after id and tag) is in
/// `[lo, hi]` as bounds say, ascending or (`rev`) descending, as (remainder, value).
pub fn tagged_range<'t>(
    txn: &'t Txn<'_>,
    s: Space<'_>,
    c: Coll,
    tag: u8,
    lo: Bound<&[u8]>,
    hi: Bound<&[u8]>,
    rev: bool,
) -> Result<impl Iterator<Item = Member<'t>> + 't, Error> {
    let with = |b: Bound<&[u8]>, open_end: u8| match b {
        Bound::Included(r) => Bound::Included(element_key(c.id, tag, r)),
        Bound::Excluded(r) => Bound::Excluded(element_key(c.id, tag, r)),
        Bound::Unbounded if open_end == tag => Bound::Included(element_key(c.id, tag, &[])),
        Bound::Unbounded => Bound::Excluded(element_key(c.id, open_end, &[])),
    };
    let lo = with(lo, tag);
    let hi = with(hi, tag + 1);
    let bounds = (
        lo.as_ref().map(Vec::as_slice),
        hi.as_ref().map(Vec::as_slice),
    );
    let it = if rev {
        txn.range_rev(&s.collections.elements, bounds)?
    } else {
        txn.range(&s.collections.elements, bounds)?
    };
    Ok(it.map(|(k, v)| (&k[ID_LEN + 1..], v)))
}

/// A random point between `first` and `last` (inclusive, `first <= last`): their common
/// prefix, then the next eight bytes drawn uniformly between theirs. The first key at or
/// after it is a random pick that is not uniform (a key after a wide gap of the key space
/// is likelier) but spreads over keys that share a long prefix, which a point drawn over
/// all of the key space would not (it would nearly always land before or after them all).
pub fn random_point(first: &[u8], last: &[u8], seed: u64) -> Vec<u8> {
    let p = first.iter().zip(last).take_while(|(a, b)| a == b).count();
    let word = |k: &[u8]| {
        let mut b = [0u8; 8];
        let tail = &k[p.min(k.len())..];
        let n = tail.len().min(8);
        b[..n].copy_from_slice(&tail[..n]);
        u64::from_be_bytes(b)
    };
    let (lo, hi) = (word(first), word(last));
    let span = hi.wrapping_sub(lo);
    let x = match span.checked_add(1) {
        Some(n) if hi >= lo => lo + splitmix64(seed) % n,
        _ => splitmix64(seed),
    };
    let mut point = first[..p].to_vec();
    point.extend_from_slice(&x.to_be_bytes());
    point
}

/// A member picked at random ([`random_point`] between the first and last member): O(log n).
pub fn random_member<'t>(
    txn: &'t Txn<'_>,
    s: Space<'_>,
    c: Coll,
    seed: u64,
) -> Result<Option<Member<'t>>, Error> {
    let Some((first, first_value)) = members(txn, s, c, None)?.next() else {
        return Ok(None);
    };
    let last = tagged_range(
        txn,
        s,
        c,
        TAG_MEMBER,
        Bound::Unbounded,
        Bound::Unbounded,
        true,
    )?
    .next()
    .map_or(first, |(m, _)| m);
    let point = random_point(first, last, seed);
    let hit = tagged_range(
        txn,
        s,
        c,
        TAG_MEMBER,
        Bound::Included(&point),
        Bound::Unbounded,
        false,
    )?
    .next();
    Ok(Some(hit.unwrap_or((first, first_value))))
}

/// Every element key of collection `id`: `[id, id + 1)`.
fn id_bounds(id: u64) -> (Bound<Vec<u8>>, Bound<Vec<u8>>) {
    let hi = match id.checked_add(1) {
        Some(next) => Bound::Excluded(next.to_be_bytes().to_vec()),
        None => Bound::Unbounded,
    };
    (Bound::Included(id.to_be_bytes().to_vec()), hi)
}

fn as_slices(b: &(Bound<Vec<u8>>, Bound<Vec<u8>>)) -> (Bound<&[u8]>, Bound<&[u8]>) {
    (
        b.0.as_ref().map(Vec::as_slice),
        b.1.as_ref().map(Vec::as_slice),
    )
}

/// Copies every element of `from` under `to` (COPY): O(members).
fn copy_elements(txn: &mut Txn<'_>, s: Space<'_>, from: u64, to: u64) -> Result<(), Error> {
    let bounds = id_bounds(from);
    let all: Vec<(Vec<u8>, Vec<u8>)> = txn
        .range(&s.collections.elements, as_slices(&bounds))?
        .map(|(k, v)| (k[ID_LEN..].to_vec(), v.to_vec()))
        .collect();
    for (rest, v) in all {
        let mut k = to.to_be_bytes().to_vec();
        k.extend_from_slice(&rest);
        txn.put(&s.collections.elements, k, v)?;
    }
    Ok(())
}

/// A fresh collection of `kind` at `key` in `s` holding a copy of `c`'s elements (COPY);
/// the caller has cleared `key`.
pub fn clone_to(txn: &mut Txn<'_>, s: Space<'_>, key: &[u8], c: Coll) -> Result<(), CmdError> {
    let id = new_id(txn, s)?;
    copy_elements(txn, s, c.id, id)?;
    txn.put(
        &s.collections.registry,
        id.to_be_bytes(),
        registry_value(s, key),
    )?;
    stored::write(txn, s, key, c.kind, c.deadline, &id.to_be_bytes())
}

/// What WATCH remembers of a key: its root's version and, for a collection, the number of
/// element records and the newest commit among them. Any write to an element after the
/// WATCH commits with a newer timestamp, and a removal lowers the count, so the stamp
/// changes whenever the collection does (the root alone does not change when a field is
/// set). Costs one read per element: WATCH on a collection is O(elements) at WATCH and at
/// EXEC.
///
/// Whether the key was live (not past its deadline) counts too: a watched key that expires
/// before EXEC fails it, as in Redis, whether or not the expirer has deleted it yet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WatchStamp {
    root: verso_engine::KeyVersion,
    live: bool,
    elements: Option<(u64, u64)>,
}

pub fn watch_stamp(txn: &Txn<'_>, s: Space<'_>, key: &[u8]) -> Result<WatchStamp, Error> {
    let root = txn.version_of(s.data, key)?;
    let live = txn
        .get(s.data, key)?
        .and_then(Stored::decode)
        .is_some_and(|v| !v.expired_at(s.now_ms));
    let id = txn
        .get(s.data, key)?
        .and_then(Stored::decode)
        .and_then(|v| id_of(&v));
    let elements = match id {
        None => None,
        Some(id) => {
            let bounds = id_bounds(id);
            let keys: Vec<Vec<u8>> = txn
                .range(&s.collections.elements, as_slices(&bounds))?
                .map(|(k, _)| k.to_vec())
                .collect();
            let mut newest = 0;
            for k in &keys {
                newest = newest.max(txn.version_of(&s.collections.elements, k)?.get());
            }
            Some((keys.len() as u64, newest))
        }
    };
    Ok(WatchStamp {
        root,
        live,
        elements,
    })
}

/// Elements one reclaim transaction deletes.
const RECLAIM_BATCH: usize = 512;
/// Registry entries one sweep step checks.
const SWEEP_BATCH: usize = 256;

/// What one [`reclaim`] call did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Reclaimed {
    /// Element records deleted.
    pub elements: usize,
    /// Orphaned ids the registry sweep found.
    pub orphans: usize,
}

/// Frees the elements of buried collections (up to `batches` transactions of them), then
/// checks the next [`SWEEP_BATCH`] registry entries after `cursor` for collections whose
/// root no longer names them (a blind SET over a hash), burying those. Errors (conflicts
/// with clients, a lost leadership) end the call; the next one continues.
pub fn reclaim(
    db: &Db,
    all: Spaces<'_>,
    cursor: &mut Option<Vec<u8>>,
    batches: usize,
) -> Reclaimed {
    let mut done = Reclaimed::default();
    let t = all.collections;
    for _ in 0..batches {
        match free_some(db, t) {
            Ok(0) | Err(_) => break,
            Ok(n) => done.elements += n,
        }
    }
    if let Ok(n) = sweep(db, all, cursor) {
        done.orphans = n;
    }
    done
}

/// One transaction: deletes up to [`RECLAIM_BATCH`] elements of the first buried id, and
/// its graveyard entry once none are left. The number of records deleted.
fn free_some(db: &Db, t: &CollectionTables) -> Result<usize, Error> {
    let mut txn = db.begin()?;
    let Some(id) = txn
        .range(&t.graveyard, ..)?
        .next()
        .and_then(|(k, _)| k.try_into().ok())
        .map(u64::from_be_bytes)
    else {
        txn.abort();
        return Ok(0);
    };
    let bounds = id_bounds(id);
    let doomed: Vec<Vec<u8>> = txn
        .range(&t.elements, as_slices(&bounds))?
        .take(RECLAIM_BATCH)
        .map(|(k, _)| k.to_vec())
        .collect();
    for k in &doomed {
        txn.delete(&t.elements, k)?;
    }
    if doomed.len() < RECLAIM_BATCH {
        txn.delete(&t.graveyard, id.to_be_bytes())?;
    }
    txn.commit()?;
    Ok(doomed.len().max(1))
}

/// One transaction over the registry from `cursor`: buries ids whose registered key no
/// longer holds a root naming them. Wraps to the start at the end.
fn sweep(db: &Db, all: Spaces<'_>, cursor: &mut Option<Vec<u8>>) -> Result<usize, Error> {
    let mut txn = db.begin()?;
    let lo = match cursor.as_deref() {
        Some(c) => Bound::Excluded(c),
        None => Bound::Unbounded,
    };
    let entries: Vec<(Vec<u8>, Vec<u8>)> = txn
        .range(&all.collections.registry, (lo, Bound::Unbounded))?
        .take(SWEEP_BATCH)
        .map(|(k, v)| (k.to_vec(), v.to_vec()))
        .collect();
    *cursor = if entries.len() < SWEEP_BATCH {
        None
    } else {
        entries.last().map(|(k, _)| k.clone())
    };
    let mut orphans = Vec::new();
    for (k, v) in &entries {
        let Ok(id) = <[u8; ID_LEN]>::try_from(k.as_slice()).map(u64::from_be_bytes) else {
            continue;
        };
        let Some((&db_index, key)) = v.split_first() else {
            continue;
        };
        let Some(s) = all.get(usize::from(db_index)) else {
            orphans.push(id);
            continue;
        };
        // An expired root still names its id: the expirer buries it when it deletes it.
        let named = txn
            .get(s.data, key)?
            .and_then(Stored::decode)
            .and_then(|v| id_of(&v));
        if named != Some(id) {
            orphans.push(id);
        }
    }
    let n = orphans.len();
    for id in orphans {
        bury(&mut txn, all.collections, id)?;
    }
    txn.commit()?;
    Ok(n)
}
