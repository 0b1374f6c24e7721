//! The simulator's clients: each owns a few keys and does one operation at a time, follows
//! MOVED, ASK and TRYAGAIN, refreshes its slot map from the configuration group, and counts
//! a write whose answer was lost as indeterminate (as a Redis client must).

use verso_check::{RegisterOp, RegisterOpKind};

use super::checks::tag_of;
use super::{Event, Sim};
use crate::lazen::{GroupId, Reply, Request};
use crate::slot::key_slot;

#[derive(Clone, Debug)]
pub(super) enum Waiting {
    /// Ready to send the next operation.
    Idle,
    /// `attempt` is on its way, or its answer is.
    Answer { attempt: u64 },
    /// `attempt`, a write, was appended; its commit's acknowledgement is awaited.
    Commit { attempt: u64 },
}

/// How long a client waits for an answer or an acknowledgement (virtual ms).
pub(super) const CLIENT_TIMEOUT_MS: u64 = 60;

pub(super) struct Client {
    pub(super) keys: Vec<Vec<u8>>,
    pub(super) map: Vec<Option<GroupId>>,
    pub(super) ops_left: usize,
    /// The current operation and how often it has been retried.
    pub(super) op: Option<(Request, u32)>,
    pub(super) asking: Option<GroupId>,
    pub(super) waiting: Waiting,
    /// Numbers the client's sends, so late answers to earlier ones are ignored.
    pub(super) attempt: u64,
    /// When the current operation began (for the history).
    pub(super) started: u64,
}

/// Retries of one operation before a client gives up (counted against progress once
/// faults have stopped).
pub(super) const RETRIES_MAX: u32 = 5_000;

impl Sim {
    /// Sends an answer to a client over the (lossy, slow) network.
    pub(super) fn send_to_client(
        &mut self,
        client: usize,
        attempt: u64,
        group: GroupId,
        reply: Reply,
        committed: bool,
    ) {
        if self.faulty() && self.rng.chance(30) {
            return; // lost: the client times out
        }
        let delay = 1 + self.rng.below(if self.faulty() { 10 } else { 2 });
        self.schedule(
            delay,
            Event::Answer {
                client,
                attempt,
                group,
                reply,
                committed,
            },
        );
    }

    /// A request reaches `group`: its answer is checked where it is given, then sent.
    pub(super) fn serve(
        &mut self,
        c: usize,
        attempt: u64,
        g: GroupId,
        asking: bool,
        req: &Request,
    ) {
        let reply = if self.opts.replicated {
            let reply = self.vsr_request(g, req, asking);
            self.trace(|| format!("client {c} at group {g}: {req:?} -> {reply:?}"));
            reply
        } else {
            let reply = self.groups[usize::from(g)].node.request(req, asking);
            self.flush_group(g);
            reply
        };
        match (&reply, req) {
            (Reply::Value(v), Request::Get(key)) => {
                let v = v.clone();
                self.check_read(key, v.as_deref(), g);
            }
            (Reply::Appended, Request::Put { tag, .. }) => {
                self.awaited.insert((g, *tag), (c, attempt));
            }
            _ => {}
        }
        self.send_to_client(c, attempt, g, reply, false);
    }

    /// Records client `c`'s operation as done at `end`, with what a read observed.
    fn record(&mut self, c: usize, observed: Option<Option<u64>>, end: u64) {
        let cl = &self.clients[c];
        let Some((req, _)) = &cl.op else {
            return;
        };
        let (key, kind, tag) = match (req, observed) {
            (Request::Get(key), Some(observed)) => (key, RegisterOpKind::Get { observed }, None),
            (Request::Put { key, value, tag }, None) => {
                let kind = match value {
                    Some(_) => RegisterOpKind::Put { value: *tag },
                    None => RegisterOpKind::Remove,
                };
                (key, kind, Some(*tag))
            }
            _ => return,
        };
        let op = RegisterOp {
            key: key.clone(),
            start: cl.started,
            end,
            kind,
        };
        self.history.push((op, tag));
    }

    pub(super) fn finish_op(&mut self, c: usize, completed: bool) {
        let cl = &mut self.clients[c];
        cl.waiting = Waiting::Idle;
        cl.op = None;
        cl.ops_left -= 1;
        if completed {
            self.stats.ops_done += 1;
        }
        self.schedule(1, Event::Client(c));
    }

    pub(super) fn answer(
        &mut self,
        c: usize,
        attempt: u64,
        _from: GroupId,
        reply: Reply,
        committed: bool,
    ) {
        let current = match self.clients[c].waiting {
            Waiting::Answer { attempt: a } | Waiting::Commit { attempt: a } => a == attempt,
            Waiting::Idle => false,
        };
        if !current {
            return; // a late answer to an attempt given up on
        }
        let slot = match &self.clients[c].op {
            Some((Request::Get(k) | Request::Put { key: k, .. }, _)) => key_slot(k),
            None => return,
        };
        match reply {
            Reply::Value(v) => {
                self.record(c, Some(v.as_deref().and_then(tag_of)), self.now);
                self.finish_op(c, true)
            }
            Reply::Appended if committed => {
                self.record(c, None, self.now);
                self.finish_op(c, true)
            }
            Reply::Appended => self.clients[c].waiting = Waiting::Commit { attempt },
            Reply::Moved(to) => {
                self.stats.redirects += 1;
                self.clients[c].map[usize::from(slot)] = Some(to);
                self.clients[c].waiting = Waiting::Idle;
                self.retry(c, 1);
            }
            Reply::Ask(to) => {
                self.stats.redirects += 1;
                self.clients[c].asking = Some(to);
                self.clients[c].waiting = Waiting::Idle;
                self.retry(c, 1);
            }
            Reply::TryAgain => {
                self.stats.try_agains += 1;
                self.refresh_map(c);
                self.clients[c].waiting = Waiting::Idle;
                self.retry(c, 5);
            }
        }
    }

    /// No answer in time: a read is sent again; a write may or may not have taken effect
    /// (indeterminate, as for a real client whose reply was lost), and the client moves on.
    pub(super) fn timeout(&mut self, c: usize, attempt: u64) {
        let current = match self.clients[c].waiting {
            Waiting::Answer { attempt: a } | Waiting::Commit { attempt: a } => a == attempt,
            Waiting::Idle => false,
        };
        if !current {
            return;
        }
        match &self.clients[c].op {
            Some((Request::Get(_), _)) => {
                self.clients[c].waiting = Waiting::Idle;
                self.retry(c, 1);
            }
            _ => {
                // Indeterminate: it may take effect at any time from its start on.
                self.record(c, None, u64::MAX);
                self.finish_op(c, false)
            }
        }
    }

    pub(super) fn client_step(&mut self, c: usize) {
        if !matches!(self.clients[c].waiting, Waiting::Idle) {
            return;
        }
        if self.clients[c].op.is_none() {
            if self.clients[c].ops_left == 0 {
                return;
            }
            let key = {
                let cl = &self.clients[c];
                cl.keys[self.rng.below(cl.keys.len() as u64) as usize].clone()
            };
            let req = if self.rng.chance(600) {
                let tag = self.next_tag;
                self.next_tag += 1;
                // One write in four deletes the key.
                let delete = self.rng.chance(250);
                let m = self.keys.get_mut(&key).expect("known");
                m.issued.insert(tag);
                if delete {
                    m.deletes.insert(tag);
                }
                Request::Put {
                    key,
                    value: (!delete).then(|| tag.to_string().into_bytes()),
                    tag,
                }
            } else if self.rng.chance(300) {
                // Another client's key, perhaps while its owner's write is in flight: a
                // read must never see a write that has not committed.
                let i = self.rng.below(self.keys.len() as u64) as usize;
                Request::Get(self.keys.keys().nth(i).expect("in range").clone())
            } else {
                Request::Get(key)
            };
            self.clients[c].op = Some((req, 0));
            self.clients[c].asking = None;
            self.clients[c].started = self.now;
        }
        let (req, tries) = self.clients[c].op.clone().expect("an operation");
        if tries > RETRIES_MAX {
            if !self.faulty() {
                self.fail(format!("client {c} gave up on {req:?} after {tries} tries"));
            }
            self.clients[c].op = None;
            self.clients[c].ops_left -= 1;
            self.schedule(1, Event::Client(c));
            return;
        }
        let key = match &req {
            Request::Get(k) | Request::Put { key: k, .. } => k.clone(),
        };
        let slot = key_slot(&key);
        let target = match self.clients[c].asking.take() {
            Some(g) => Some((g, true)),
            None => {
                if self.clients[c].map[usize::from(slot)].is_none() {
                    self.refresh_map(c);
                }
                self.clients[c].map[usize::from(slot)].map(|g| (g, false))
            }
        };
        let Some((g, asking)) = target else {
            self.retry(c, 5);
            return;
        };
        let cl = &mut self.clients[c];
        cl.attempt += 1;
        let attempt = cl.attempt;
        cl.waiting = Waiting::Answer { attempt };
        self.schedule(CLIENT_TIMEOUT_MS, Event::Timeout { client: c, attempt });
        if self.faulty() && self.rng.chance(30) {
            return; // the request is lost
        }
        let delay = 1 + self.rng.below(if self.faulty() { 10 } else { 2 });
        self.schedule(
            delay,
            Event::Request {
                client: c,
                attempt,
                group: g,
                asking,
                req,
            },
        );
    }

    pub(super) fn retry(&mut self, c: usize, delay: u64) {
        if let Some((_, tries)) = &mut self.clients[c].op {
            *tries += 1;
        }
        self.schedule(delay, Event::Client(c));
    }

    /// The client asks for the slot map (as CLUSTER SLOTS), served by the configuration
    /// group's committed state.
    pub(super) fn refresh_map(&mut self, c: usize) {
        if let Some(owners) = self.owners() {
            self.clients[c].map = owners;
        }
    }
}
