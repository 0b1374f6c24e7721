//! A request, or a MULTI block, as one NCC transaction. What each command reads and writes
//! is known before it runs (`command.rs`), so a plan takes one of four shapes:
//!
//! - *read-only* (GET, MGET, EXISTS, ...): one shot of reads, marked last, which NCC runs by
//!   its one-round read-only protocol;
//! - *blind* (SET, MSET without conditions): one shot of writes, answered `OK` before they
//!   run, since nothing they answer depends on a read;
//! - *read-write* (INCR, SETNX, DEL, a block with WATCH, ...): two shots, as the paper's
//!   multi-shot transactions: the reads, then the writes they decide (§5.1). The block is
//!   evaluated once per attempt from that attempt's reads alone, so a retry from scratch
//!   decides again from what it read;
//! - *local*: nothing to read or write (a block of PINGs).
//!
//! Evaluation runs the commands in order over the values read, each seeing its
//! predecessors' writes, and writes each changed key's last value once.

use std::collections::HashMap;

use verso_ncc::{Key, Op, Value};
use verso_server::resp::Reply;

use crate::command::{
    not_a_float, not_an_integer, parse_i64, too_large, value_bytes_max, Command, Cond,
};
use crate::value::{decode, encode, Seen, Stored};

/// The most keys one transaction may name: what one NCC shot carries.
pub const KEYS_MAX: usize = verso_ncc::wire::OPS_MAX;

/// The most bytes of keys and written values one transaction may carry: what one NCC
/// request may (a shot's message to a group holds its requests, and must stay within the
/// transport's frame, which a message past it would never cross).
pub const TXN_BYTES_MAX: usize = verso_txn_net::frame::REQUEST_BYTES_MAX;

/// The longest reply a plan may give (MGET of one large key named thousands of times would
/// otherwise build gigabytes): Redis's default output-buffer limit for a client is none,
/// but the gateway keeps each reply in memory whole.
pub const REPLY_BYTES_MAX: usize = 64 << 20;

/// Redis's kind of answer to a transaction past [`TXN_BYTES_MAX`].
fn too_many_bytes(bytes: usize) -> Reply {
    Reply::err(format_args!(
        "a transaction of {bytes} bytes of keys and values; at most {TXN_BYTES_MAX} through the gateway"
    ))
}

/// What the client gets back, and, for WATCH, the values it watches from now on.
#[derive(Clone, Debug, PartialEq)]
pub struct Done {
    pub reply: Reply,
    pub watched: Option<Vec<(Vec<u8>, Seen)>>,
}

/// How the plan's reply is shaped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Form {
    /// One command: its reply.
    Single,
    /// EXEC: an array of the block's replies, or the null array when a watched key changed.
    Exec,
    /// WATCH: OK, and the values seen.
    Watch,
}

/// The transaction's shape (module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    ReadOnly,
    Blind,
    ReadWrite,
    Local,
}

/// One request or block, ready to run as a transaction.
#[derive(Clone, Debug)]
pub struct Plan {
    cmds: Vec<Command>,
    /// Keys watched and the values seen then: EXEC runs its block only if each still
    /// holds its value (Redis aborts on any write to a watched key; a write of the same
    /// value passes here, which changes nothing the block can observe).
    watched: Vec<(Vec<u8>, Seen)>,
    /// Every key whose value the plan needs, each once, in the order first named.
    reads: Vec<Vec<u8>>,
    form: Form,
    shape: Shape,
    /// Decided without a read (blind, local), or by the last `decide`.
    done: Option<Done>,
    /// The writes the last evaluation decided.
    pending: Vec<Op>,
}

/// Redis's answer to a command on a value of another type.
pub fn wrong_type() -> Reply {
    Reply::Error("WRONGTYPE Operation against a key holding the wrong kind of value".into())
}

impl Plan {
    /// One data command.
    pub fn single(cmd: Command) -> Result<Plan, Reply> {
        Plan::new(vec![cmd], Vec::new(), Form::Single)
    }

    /// An EXEC of `cmds` under the WATCHes in `watched`.
    pub fn exec(cmds: Vec<Command>, watched: Vec<(Vec<u8>, Seen)>) -> Result<Plan, Reply> {
        Plan::new(cmds, watched, Form::Exec)
    }

    /// A WATCH of `keys`: reads them, to compare at EXEC.
    pub fn watch(keys: Vec<Vec<u8>>) -> Result<Plan, Reply> {
        let mut plan = Plan::new(vec![Command::MGet(keys)], Vec::new(), Form::Watch)?;
        plan.shape = Shape::ReadOnly;
        Ok(plan)
    }

    fn new(cmds: Vec<Command>, watched: Vec<(Vec<u8>, Seen)>, form: Form) -> Result<Plan, Reply> {
        let mut reads: Vec<Vec<u8>> = Vec::new();
        let mut named: HashMap<&[u8], bool> = HashMap::new();
        let watched_keys = watched.iter().map(|(k, _)| k.as_slice());
        for k in watched_keys.clone() {
            if named.insert(k, true).is_none() {
                reads.push(k.to_vec());
            }
        }
        for cmd in &cmds {
            for k in cmd.keys() {
                let read = cmd.reads();
                match named.get(k) {
                    Some(true) => {}
                    Some(false) | None if read => {
                        named.insert(k, true);
                        reads.push(k.to_vec());
                    }
                    _ => {
                        named.insert(k, false);
                    }
                }
            }
        }
        let key_bytes: usize = named.keys().map(|k| k.len()).sum();
        if key_bytes > TXN_BYTES_MAX {
            return Err(too_many_bytes(key_bytes));
        }
        if named.len() > KEYS_MAX {
            return Err(Reply::err(format_args!(
                "a transaction of {} keys; at most {KEYS_MAX}",
                named.len()
            )));
        }
        let writes = cmds.iter().any(Command::writes);
        let shape = match (reads.is_empty(), writes) {
            (true, true) => Shape::Blind,
            (true, false) => Shape::Local,
            (false, false) => Shape::ReadOnly,
            (false, true) => Shape::ReadWrite,
        };
        let mut plan = Plan {
            cmds,
            watched,
            reads,
            form,
            shape,
            done: None,
            pending: Vec::new(),
        };
        if matches!(shape, Shape::Blind | Shape::Local) {
            // A blind plan writes (SET, MSET): none only past the size bound.
            if plan.evaluate(&[]).is_empty() && shape == Shape::Blind {
                return Err(plan.done.expect("evaluated").reply);
            }
        }
        Ok(plan)
    }

    pub fn shape(&self) -> Shape {
        self.shape
    }

    /// The answer of a plan that needs no transaction (a block of PINGs).
    pub fn local_answer(&self) -> Option<&Done> {
        self.done.as_ref().filter(|_| self.shape == Shape::Local)
    }

    /// The first shot, and whether it is the last.
    pub fn first_shot(&self) -> (Vec<Op>, bool) {
        match self.shape {
            Shape::Blind => (self.writes_decided(), true),
            Shape::ReadOnly => (self.read_ops(), true),
            Shape::ReadWrite => (self.read_ops(), false),
            Shape::Local => (Vec::new(), true),
        }
    }

    fn read_ops(&self) -> Vec<Op> {
        self.reads
            .iter()
            .map(|k| Op::Read(Key::from(k.as_slice())))
            .collect()
    }

    /// The writes of a blind plan, decided at its creation.
    fn writes_decided(&self) -> Vec<Op> {
        self.pending.clone()
    }

    /// A read-write plan's last shot, from every value its attempt read: the writes the
    /// block decides, maybe none (a watched key changed, SETNX of a key that exists). An
    /// empty last shot still reaches every cohort, which then commits the reads (NCC's
    /// last shot names the cohorts); a key appears at most once in a transaction, so the
    /// shot could not read one again.
    pub fn decide(&mut self, reads: &[(Key, Value)]) -> Vec<Op> {
        assert_eq!(self.shape, Shape::ReadWrite);
        self.evaluate(reads)
    }

    /// The reply, once the transaction committed; `reads` are its values (for a
    /// read-only plan, whose answer they decide).
    pub fn finish(mut self, reads: &[(Key, Value)]) -> Done {
        if self.shape == Shape::ReadOnly {
            self.evaluate(reads);
        }
        self.done.expect("a committed plan has decided its answer")
    }

    /// Runs the block over `reads`, keeps its answer, and returns its writes.
    fn evaluate(&mut self, reads: &[(Key, Value)]) -> Vec<Op> {
        let mut state = State::default();
        for (k, v) in reads {
            state
                .values
                .insert(k.as_bytes().to_vec(), decode(v.as_bytes()));
        }
        for k in &self.reads {
            debug_assert!(state.values.contains_key(k), "every planned read was read");
        }
        let watch_holds = self
            .watched
            .iter()
            .all(|(k, seen)| Seen::of(state.get(k)) == *seen);
        let replies: Vec<Reply> = if watch_holds {
            self.cmds.iter().map(|c| apply(c, &mut state)).collect()
        } else {
            Vec::new()
        };
        let reply_bytes: usize = replies.iter().map(reply_bytes).sum();
        let reply = match self.form {
            Form::Single => replies.into_iter().next().expect("one command"),
            Form::Exec if watch_holds => Reply::Array(replies),
            Form::Exec => Reply::NilArray,
            Form::Watch => Reply::ok(),
        };
        let watched = (self.form == Form::Watch).then(|| {
            self.reads
                .iter()
                .map(|k| (k.clone(), Seen::of(state.get(k))))
                .collect()
        });
        let writes: Vec<Op> = state
            .dirty
            .iter()
            .map(|k| {
                let v = match state.get(k) {
                    Stored::String(s) => encode(Some(s)),
                    _ => encode(None),
                };
                Op::Write(Key::from(k.as_slice()), Value::from(v))
            })
            .collect();
        let bytes: usize = writes.iter().map(Op::bytes).sum();
        // Past a bound nothing of the block is written; its reads still commit (a last
        // shot goes).
        let (reply, writes) = if bytes > TXN_BYTES_MAX {
            (too_many_bytes(bytes), Vec::new())
        } else if reply_bytes > REPLY_BYTES_MAX {
            let e = Reply::err(format_args!(
                "a reply of {reply_bytes} bytes; at most {REPLY_BYTES_MAX} through the gateway"
            ));
            (e, Vec::new())
        } else {
            (reply, writes)
        };
        self.done = Some(Done { reply, watched });
        self.pending = writes.clone();
        writes
    }
}

/// The values a block sees: those read, then its own writes.
#[derive(Default)]
struct State {
    values: HashMap<Vec<u8>, Stored>,
    /// Keys written, in the order first written.
    dirty: Vec<Vec<u8>>,
}

const ABSENT: &Stored = &Stored::Absent;

impl State {
    /// A key not read is one the block only writes blindly before reading it, or never
    /// reads: absent until written.
    fn get(&self, k: &[u8]) -> &Stored {
        self.values.get(k).unwrap_or(ABSENT)
    }

    fn put(&mut self, k: &[u8], v: Option<Vec<u8>>) {
        let v = v.map_or(Stored::Absent, Stored::String);
        if v == Stored::Absent && *self.get(k) == Stored::Absent {
            return; // deleting what is absent writes nothing
        }
        if !self.dirty.iter().any(|d| d == k) {
            self.dirty.push(k.to_vec());
        }
        self.values.insert(k.to_vec(), v);
    }

    /// A string's value, `None` when absent; `Err` for another type.
    fn string(&self, k: &[u8]) -> Result<Option<&[u8]>, Reply> {
        match self.get(k) {
            Stored::Absent => Ok(None),
            Stored::String(s) => Ok(Some(s)),
            Stored::Other(_) => Err(wrong_type()),
        }
    }
}

/// About how many bytes a reply takes on the wire (its strings', and a few per item).
fn reply_bytes(r: &Reply) -> usize {
    match r {
        Reply::Bulk(b) => b.len() + 16,
        Reply::Array(items) => 16 + items.iter().map(reply_bytes).sum::<usize>(),
        _ => 16,
    }
}

fn bulk_or_nil(v: Option<&[u8]>) -> Reply {
    v.map_or(Reply::Nil, |s| Reply::Bulk(s.to_vec()))
}

/// Runs one command over `st`, as Redis 7 runs it on strings.
fn apply(cmd: &Command, st: &mut State) -> Reply {
    match try_apply(cmd, st) {
        Ok(r) | Err(r) => r,
    }
}

fn try_apply(cmd: &Command, st: &mut State) -> Result<Reply, Reply> {
    Ok(match cmd {
        Command::Get(k) => bulk_or_nil(st.string(k)?),
        Command::Set {
            key,
            value,
            cond,
            get,
        } => {
            // Only SET ... GET cares for the old value's type.
            let old = if *get {
                st.string(key)?.map(<[u8]>::to_vec)
            } else {
                None
            };
            let present = *st.get(key) != Stored::Absent;
            let go = match cond {
                None => true,
                Some(Cond::Absent) => !present,
                Some(Cond::Present) => present,
            };
            if go {
                st.put(key, Some(value.clone()));
            }
            match (get, go) {
                (true, _) => bulk_or_nil(old.as_deref()),
                (false, true) => Reply::ok(),
                (false, false) => Reply::Nil,
            }
        }
        Command::SetNx(k, v) => {
            if *st.get(k) != Stored::Absent {
                return Ok(Reply::Integer(0));
            }
            st.put(k, Some(v.clone()));
            Reply::Integer(1)
        }
        Command::GetSet(k, v) => {
            let old = bulk_or_nil(st.string(k)?);
            st.put(k, Some(v.clone()));
            old
        }
        Command::GetDel(k) => {
            let old = bulk_or_nil(st.string(k)?);
            st.put(k, None);
            old
        }
        Command::MGet(ks) => Reply::Array(
            ks.iter()
                .map(|k| bulk_or_nil(st.string(k).ok().flatten()))
                .collect(),
        ),
        Command::MSet(kvs) => {
            for (k, v) in kvs {
                st.put(k, Some(v.clone()));
            }
            Reply::ok()
        }
        Command::MSetNx(kvs) => {
            if kvs.iter().any(|(k, _)| *st.get(k) != Stored::Absent) {
                return Ok(Reply::Integer(0));
            }
            for (k, v) in kvs {
                st.put(k, Some(v.clone()));
            }
            Reply::Integer(1)
        }
        Command::Append(k, v) => {
            let mut s = st.string(k)?.unwrap_or_default().to_vec();
            if s.len() + v.len() > value_bytes_max(k.len()) {
                return Err(too_large());
            }
            s.extend_from_slice(v);
            let len = s.len() as i64;
            st.put(k, Some(s));
            Reply::Integer(len)
        }
        Command::Strlen(k) => Reply::Integer(st.string(k)?.map_or(0, <[u8]>::len) as i64),
        Command::IncrBy(k, by) => {
            let n = match st.string(k)? {
                None => 0,
                Some(s) => parse_i64(s).ok_or_else(not_an_integer)?,
            };
            let n = n
                .checked_add(*by)
                .ok_or_else(|| Reply::err("increment or decrement would overflow"))?;
            st.put(k, Some(n.to_string().into_bytes()));
            Reply::Integer(n)
        }
        Command::Del(ks) => {
            let mut n = 0;
            for k in ks {
                if *st.get(k) != Stored::Absent {
                    n += 1;
                    st.put(k, None);
                }
            }
            Reply::Integer(n)
        }
        Command::Exists(ks) => {
            Reply::Integer(ks.iter().filter(|k| *st.get(k) != Stored::Absent).count() as i64)
        }
        Command::Rename { from, to, nx } => {
            let value = match st.get(from) {
                Stored::Absent => return Err(Reply::err("no such key")),
                Stored::Other(_) => return Err(wrong_type()),
                Stored::String(v) => v.clone(),
            };
            let done = |moved: bool| match (nx, moved) {
                (false, _) => Reply::ok(),
                (true, m) => Reply::Integer(i64::from(m)),
            };
            if from == to {
                return Ok(done(false));
            }
            if *nx && *st.get(to) != Stored::Absent {
                return Ok(done(false));
            }
            st.put(to, Some(value));
            st.put(from, None);
            done(true)
        }
        Command::Copy { from, to, replace } => {
            let value = match st.get(from) {
                Stored::Absent => return Ok(Reply::Integer(0)),
                Stored::Other(_) => return Err(wrong_type()),
                Stored::String(v) => v.clone(),
            };
            if !replace && *st.get(to) != Stored::Absent {
                return Ok(Reply::Integer(0));
            }
            st.put(to, Some(value));
            Reply::Integer(1)
        }
        Command::GetRange(k, start, end) => {
            let v = st.string(k)?.unwrap_or_default();
            Reply::Bulk(verso_server::keyspace::byte_range(v, *start, *end).to_vec())
        }
        Command::SetRange(k, offset, value) => {
            let old = st.string(k)?.unwrap_or_default();
            if value.is_empty() {
                return Ok(Reply::Integer(old.len() as i64));
            }
            let end = (*offset as u64).saturating_add(value.len() as u64);
            if end > value_bytes_max(k.len()) as u64 {
                return Err(too_large());
            }
            let (offset, end) = (*offset as usize, end as usize);
            let mut new = old.to_vec();
            if new.len() < end {
                new.resize(end, 0);
            }
            new[offset..end].copy_from_slice(value);
            let len = new.len() as i64;
            st.put(k, Some(new));
            Reply::Integer(len)
        }
        Command::IncrByFloat(k, by) => {
            let old = match st.string(k)? {
                None => 0.0,
                Some(s) => verso_server::strings::parse_f64(s).ok_or_else(not_a_float)?,
            };
            let new = old + by;
            if !new.is_finite() {
                return Err(Reply::err("increment would produce NaN or Infinity"));
            }
            let text = verso_server::strings::format_f64(new).into_bytes();
            st.put(k, Some(text.clone()));
            Reply::Bulk(text)
        }
        Command::GetEx(k) => bulk_or_nil(st.string(k)?),
        Command::Type(k) => Reply::Simple(
            match st.get(k) {
                Stored::Absent => "none",
                Stored::String(_) => "string",
                Stored::Other(_) => "unknown",
            }
            .into(),
        ),
        Command::Touch(ks) => {
            Reply::Integer(ks.iter().filter(|k| *st.get(k) != Stored::Absent).count() as i64)
        }
        Command::Echo(r) => r.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmd(words: &[&str]) -> Command {
        let args: Vec<Vec<u8>> = words.iter().map(|w| w.as_bytes().to_vec()).collect();
        Command::parse(&args)
            .expect("a data command")
            .expect("good arguments")
    }

    fn read(k: &str, v: Option<&str>) -> (Key, Value) {
        (Key::from(k), Value::from(encode(v.map(str::as_bytes))))
    }

    #[test]
    fn a_retried_attempt_decides_again_from_its_own_reads() {
        let mut p = Plan::single(cmd(&["INCR", "n"])).unwrap();
        assert_eq!(p.shape(), Shape::ReadWrite);
        let (first, last) = p.first_shot();
        assert_eq!((first.len(), last), (1, false));
        let w1 = p.decide(&[read("n", Some("1"))]);
        assert_eq!(
            w1,
            vec![Op::Write("n".into(), Value::from(encode(Some(b"2"))))]
        );
        // The attempt aborted; the next read 41.
        let w2 = p.decide(&[read("n", Some("41"))]);
        assert_eq!(
            w2,
            vec![Op::Write("n".into(), Value::from(encode(Some(b"42"))))]
        );
        assert_eq!(p.finish(&[]).reply, Reply::Integer(42));
    }

    #[test]
    fn shapes_follow_what_the_commands_read_and_write() {
        assert_eq!(
            Plan::single(cmd(&["MGET", "a", "b"])).unwrap().shape(),
            Shape::ReadOnly
        );
        assert_eq!(
            Plan::single(cmd(&["MSET", "a", "1"])).unwrap().shape(),
            Shape::Blind
        );
        let block = vec![cmd(&["SET", "a", "1"]), cmd(&["GET", "a"])];
        // GET sees the SET before it: nothing needs reading, but the block answers "1".
        let p = Plan::exec(block, Vec::new()).unwrap();
        assert_eq!(p.shape(), Shape::ReadWrite);
        let watched = vec![(b"w".to_vec(), Seen::of(&Stored::Absent))];
        let p = Plan::exec(vec![cmd(&["SET", "a", "1"])], watched).unwrap();
        assert_eq!(
            p.shape(),
            Shape::ReadWrite,
            "a watch must be checked before writing"
        );
    }

    #[test]
    fn a_changed_watched_key_writes_nothing_and_answers_the_null_array() {
        let watched = vec![(b"w".to_vec(), Seen::of(&Stored::String(b"old".to_vec())))];
        let mut p = Plan::exec(vec![cmd(&["SET", "a", "1"])], watched).unwrap();
        let writes = p.decide(&[read("w", Some("new"))]);
        assert!(writes.is_empty());
        assert_eq!(p.finish(&[]).reply, Reply::NilArray);
    }

    #[test]
    fn a_transaction_past_the_byte_bound_writes_nothing() {
        let half = "v".repeat(TXN_BYTES_MAX / 2);
        let mset = cmd(&["MSET", "a", &half, "b", &half]);
        assert!(matches!(Plan::single(mset), Err(Reply::Error(_))));
        // Two appends that pass only together: refused at decide, reads still committed.
        let mut p = Plan::exec(
            vec![cmd(&["APPEND", "a", &half]), cmd(&["APPEND", "b", &half])],
            Vec::new(),
        )
        .unwrap();
        assert!(p.decide(&[read("a", None), read("b", None)]).is_empty());
        assert!(matches!(p.finish(&[]).reply, Reply::Error(_)));
    }

    #[test]
    fn a_reply_past_its_bound_is_refused_and_the_block_writes_nothing() {
        let big = "v".repeat(1 << 20);
        let many_gets: Vec<&str> = std::iter::once("MGET")
            .chain(std::iter::repeat_n("big", 100))
            .collect();
        let mut p = Plan::exec(vec![cmd(&["SET", "a", "1"]), cmd(&many_gets)], Vec::new()).unwrap();
        assert!(p.decide(&[read("big", Some(&big))]).is_empty());
        assert!(matches!(p.finish(&[]).reply, Reply::Error(e) if e.contains("a reply of")));
    }
}
