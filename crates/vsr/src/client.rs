//! A client of a Lazy VSR group as a state machine (thesis §4.2.3, §4.4.2): one request
//! outstanding, retried across replicas, with the expected-view check that makes lost
//! operations a suffix of the client's own.

use std::collections::VecDeque;

use crate::message::{Message, Request};
use crate::types::{Address, ClientId, ReplicaId, ViewNum, Viewstamp};

/// What happened to the client's requests.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClientEvent<R> {
    /// The request completed: its result, viewstamp, and the durable point at the time.
    Done {
        seq: u64,
        result: R,
        vs: Viewstamp,
        dp: Viewstamp,
    },
    /// The request was executed but its reply is gone (the primary answered `Stale`).
    DoneWithoutReply { seq: u64 },
    /// Acknowledged requests the group forgot in a crash of a majority (always the latest
    /// ones: a suffix).
    Forgotten { seqs: Vec<u64> },
}

/// Invariants: `outstanding`, if any, has sequence number `seq`; `unsure` holds the
/// acknowledged requests above the last durable point heard, in order.
#[derive(Clone, Debug)]
pub struct Client<O, R> {
    id: ClientId,
    replica_count: u8,
    /// The thesis's `ev`: changed only by `WrongView`, never by a hint.
    view: ViewNum,
    /// Where requests go: the primary as far as this client knows.
    target: ReplicaId,
    seq: u64,
    outstanding: Option<Request<O>>,
    resend_at: u64,
    request_timeout: u64,
    /// Acknowledged, not yet known durable: (seq, viewstamp).
    unsure: VecDeque<(u64, Viewstamp)>,
    sends: VecDeque<(Address, Message<O, R, ()>)>,
    events: VecDeque<ClientEvent<R>>,
}

impl<O: Clone, R: Clone> Client<O, R> {
    pub fn new(id: ClientId, replica_count: u8, request_timeout: u64) -> Self {
        assert!(replica_count > 0 && request_timeout > 0);
        Client {
            id,
            replica_count,
            view: ViewNum::ZERO,
            target: 0,
            seq: 0,
            outstanding: None,
            resend_at: u64::MAX,
            request_timeout,
            unsure: VecDeque::new(),
            sends: VecDeque::new(),
            events: VecDeque::new(),
        }
    }

    pub fn id(&self) -> ClientId {
        self.id
    }

    pub fn is_idle(&self) -> bool {
        self.outstanding.is_none()
    }

    pub fn view(&self) -> ViewNum {
        self.view
    }

    /// Starts a request; returns its sequence number. One at a time.
    pub fn submit(&mut self, now: u64, op: O, sync: bool) -> u64 {
        assert!(
            self.outstanding.is_none(),
            "one request outstanding at a time"
        );
        self.seq += 1;
        self.outstanding = Some(Request {
            client: self.id,
            seq: self.seq,
            op,
            sync,
        });
        self.send_outstanding(now);
        self.seq
    }

    fn send_outstanding(&mut self, now: u64) {
        if let Some(r) = &self.outstanding {
            let m = Message::Request {
                request: r.clone(),
                ev: self.view,
            };
            self.sends.push_back((Address::Replica(self.target), m));
            self.resend_at = now + self.request_timeout;
        }
    }

    pub fn poll_timeout(&self) -> u64 {
        self.resend_at
    }

    /// No reply in time: try the next replica.
    pub fn handle_timeout(&mut self, now: u64) {
        if self.outstanding.is_some() && now >= self.resend_at {
            self.target = (self.target + 1) % self.replica_count;
            self.send_outstanding(now);
        }
    }

    /// The message to send next, if any (replica-bound messages carry no snapshot).
    pub fn poll_send<S>(&mut self) -> Option<(Address, Message<O, R, S>)> {
        let (to, m) = self.sends.pop_front()?;
        let Message::Request { request, ev } = m else {
            unreachable!("a client sends only requests")
        };
        Some((to, Message::Request { request, ev }))
    }

    pub fn poll_event(&mut self) -> Option<ClientEvent<R>> {
        self.events.pop_front()
    }

    pub fn handle_message<S>(&mut self, now: u64, message: Message<O, R, S>) {
        let current = self.outstanding.as_ref().map(|r| r.seq);
        match message {
            Message::Reply {
                client,
                seq,
                vs,
                dp,
                result,
            } if client == self.id && Some(seq) == current => {
                self.outstanding = None;
                self.resend_at = u64::MAX;
                self.target = vs.view.leader();
                self.unsure.push_back((seq, vs));
                while self.unsure.front().is_some_and(|(_, v)| *v <= dp) {
                    self.unsure.pop_front();
                }
                self.events.push_back(ClientEvent::Done {
                    seq,
                    result,
                    vs,
                    dp,
                });
            }
            Message::Stale { client, seq } if client == self.id && Some(seq) == current => {
                self.outstanding = None;
                self.resend_at = u64::MAX;
                self.events.push_back(ClientEvent::DoneWithoutReply { seq });
            }
            Message::WrongView {
                client,
                view,
                last_seq,
            } if client == self.id && view > self.view => {
                self.view = view;
                self.target = view.leader();
                // Acknowledged requests the new view does not hold were forgotten.
                let lost: Vec<u64> = self
                    .unsure
                    .iter()
                    .map(|(s, _)| *s)
                    .filter(|s| *s > last_seq)
                    .collect();
                self.unsure.clear();
                if !lost.is_empty() {
                    self.events.push_back(ClientEvent::Forgotten { seqs: lost });
                }
                self.send_outstanding(now);
            }
            // A hint only: `ev` changes through `WrongView`, so lost requests are seen.
            Message::NotPrimary { client, view }
                if client == self.id && view.leader() != self.target && view != ViewNum::ZERO =>
            {
                self.target = view.leader();
                self.send_outstanding(now);
            }
            _ => {}
        }
    }
}
