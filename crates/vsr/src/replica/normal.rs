//! Operation within a view (thesis §4.2.3): client requests, PREPARE and PREPAREOK, the
//! commit point and the durable point, heartbeats.

use super::{count_within, Leader, Mistake, Mode, PendingReply, Replica, Status};
use crate::app::App;
use crate::client_table::Seen;
use crate::message::{Body, Entry, Message, Request};
use crate::types::{Address, ReplicaId, ViewNum, Viewstamp, REPLICAS_MAX};

impl<A: App> Replica<A> {
    pub(super) fn on_request(&mut self, request: Request<A::Op>, ev: ViewNum) {
        let client = request.client;
        let to = Address::Client(client);
        let view = self.view;
        let Status::Primary(leader) = &self.status else {
            if matches!(self.status, Status::Backup) {
                self.send(to, Message::NotPrimary { client, view });
            }
            return; // an election is under way: the client retries
        };
        if ev != view {
            // The client may have lost operations with the last view: it learns which
            // before any later one of its executes (lost operations are a suffix).
            let last_seq = self.clients.last_seq(client);
            self.send(
                to,
                Message::WrongView {
                    client,
                    view,
                    last_seq,
                },
            );
            return;
        }
        match self.clients.seen(client, request.seq) {
            Seen::Latest(e) => {
                // Executed: answer again once its entry is committed (or durable). One
                // executed in an earlier view is committed once this view's first entry is.
                let (vs, result) = (e.vs, e.result.clone());
                let committed = if vs.op <= leader.start.op {
                    leader.commit >= leader.start
                } else {
                    vs <= leader.commit
                };
                let durable = vs.op <= self.dp.op;
                if committed && (!request.sync || durable) {
                    let (dp, seq) = (self.dp, request.seq);
                    self.send(
                        to,
                        Message::Reply {
                            client,
                            seq,
                            vs,
                            dp,
                            result,
                        },
                    );
                }
            }
            Seen::Older => {
                let seq = request.seq;
                self.send(to, Message::Stale { client, seq });
            }
            Seen::New => {
                let Status::Primary(leader) = &mut self.status else {
                    unreachable!()
                };
                let queued = leader
                    .queue
                    .iter()
                    .any(|q| q.client == client && q.seq >= request.seq);
                if !queued && leader.queue.len() < self.config.request_queue_max {
                    leader.queue.push_back(request);
                }
                self.propose();
            }
        }
    }

    /// Proposes queued requests while the pipeline has room.
    pub(super) fn propose(&mut self) {
        loop {
            let stalled = self.stalled();
            let Status::Primary(leader) = &mut self.status else {
                return;
            };
            let in_flight = self.log.op_max().op - leader.commit.op;
            if leader.queue.is_empty() || in_flight >= self.config.pipeline_max {
                return;
            }
            if stalled {
                self.stats.stalls += 1;
                return;
            }
            let n = count_within(
                leader.queue.iter().take(self.config.batch_requests_max),
                self.config.message_bytes_max,
                |r| A::op_bytes(&r.op),
            );
            let batch: Vec<Request<A::Op>> = leader.queue.drain(..n).collect();
            let prev = self.log.op_max();
            let entry = Entry {
                vs: Viewstamp {
                    view: self.view,
                    op: prev.op + 1,
                },
                prev,
                body: Body::Requests(batch),
            };
            self.propose_entry(entry);
        }
    }

    /// Appends `entry` to the primary's own log (the spec's primary prepares to itself
    /// too) and sends it to the backups.
    pub(super) fn propose_entry(&mut self, entry: Entry<A::Op>) {
        let op = entry.vs.op;
        let lease = self.lease_sent();
        let message = Message::Prepare {
            view: self.view,
            entries: vec![entry.clone()],
            dp: self.dp,
            dp_min: self.dp_min,
            lease,
        };
        let replies = self.accept(entry);
        if let Status::Primary(leader) = &mut self.status {
            let pending = replies
                .into_iter()
                .map(|(client, seq, result, sync)| PendingReply {
                    client,
                    seq,
                    result,
                    sync,
                })
                .collect::<Vec<_>>();
            if !pending.is_empty() {
                leader.replies.insert(op, pending);
            }
            leader.heartbeat_at = self.now + self.config.heartbeat_interval;
        }
        self.send_to_others(message);
        self.self_ack();
    }

    pub(super) fn on_prepare(
        &mut self,
        from: ReplicaId,
        view: ViewNum,
        entries: Vec<Entry<A::Op>>,
        dp: Viewstamp,
        dp_min: Viewstamp,
        lease: u64,
    ) {
        if !self.heard_from_primary(from, view) {
            return;
        }
        self.heard_lease(view, lease);
        let before = self.log.op_max();
        for entry in entries {
            let have = self.log.op_max();
            if entry.vs.view != view {
                break;
            }
            if entry.vs.op <= have.op {
                if self.log.stamp(entry.vs.op) != Some(entry.vs) {
                    self.request_catch_up(); // our tail diverges from the primary's
                    break;
                }
                continue; // a duplicate
            }
            if entry.prev != have {
                self.request_catch_up(); // a gap, or a divergent tail
                break;
            }
            if self.stalled() {
                self.stats.stalls += 1;
                break;
            }
            self.accept(entry);
        }
        self.adopt_dp(dp, dp_min);
        // A PREPARE that brought nothing new is a retransmission: our answer was lost.
        self.ack_primary(self.log.op_max() == before);
    }

    /// A PREPARE or HEARTBEAT from `from` in `view`: whether this replica is its view's
    /// backup and should process it (its view-change timer restarts). A message of a later
    /// view makes it learn that view and ask the new leader to catch it up instead.
    fn heard_from_primary(&mut self, from: ReplicaId, view: ViewNum) -> bool {
        if view < self.view || from != view.leader() || from == self.id {
            return false;
        }
        if view > self.view {
            self.learn_view(view);
            self.request_catch_up();
            return false;
        }
        if !matches!(self.status, Status::Backup) {
            return false;
        }
        self.reset_view_change_timer();
        true
    }

    /// A backup's PREPAREOK: what it holds in memory and on disk, in this view. Said only
    /// once the view's first entry is on its disk (Lemma 4.3.6).
    /// Unless `again`, nothing is sent if it would repeat the last PREPAREOK (under
    /// VSR-Sync the one that counts comes after the sync).
    pub(super) fn ack_primary(&mut self, again: bool) {
        if !matches!(self.status, Status::Backup) || self.view.leader() == self.id {
            return;
        }
        let Some((op_max, disk_op_max)) = self.acknowledgeable() else {
            return;
        };
        // The durable point it carries is not news worth a message of its own.
        let said = (self.view, op_max, disk_op_max);
        if !again && self.last_ack == Some(said) {
            return;
        }
        self.last_ack = Some(said);
        let (view, dp, lease) = (self.view, self.dp, self.lease_to_echo());
        let lease_length = self.config.lease;
        let to = Address::Replica(view.leader());
        self.send(
            to,
            Message::PrepareOk {
                view,
                op_max,
                disk_op_max,
                dp,
                lease,
                lease_length,
            },
        );
    }

    /// What this replica may report as held in memory and on disk in its view, if
    /// anything: nothing until the view is durable and its first entry is on disk.
    fn acknowledgeable(&self) -> Option<(Viewstamp, Viewstamp)> {
        if self.view_durable != self.view || self.disk_op_max.view != self.view {
            return None;
        }
        let op_max = match self.config.mode {
            Mode::Lazy => self.log.op_max(),
            Mode::Sync => self.disk_op_max,
        };
        let disk = if self.config.mistake == Some(Mistake::PrepareOkCarriesOpMax) {
            self.log.op_max()
        } else {
            self.disk_op_max
        };
        Some((op_max, disk))
    }

    /// The primary counts itself like any replica.
    pub(super) fn self_ack(&mut self) {
        if !matches!(self.status, Status::Primary(_)) {
            return;
        }
        if let Some((op_max, disk)) = self.acknowledgeable() {
            let (id, dp) = (self.id, self.dp);
            self.record_ack(id, op_max, disk, dp);
        }
    }

    /// After a sync: tell the primary (or, as primary, count ourselves).
    pub(super) fn on_disk_advanced(&mut self) {
        match self.status {
            Status::Backup => self.ack_primary(false),
            Status::Primary(_) => self.self_ack(),
            _ => {}
        }
    }

    pub(super) fn on_prepare_ok(
        &mut self,
        from: ReplicaId,
        view: ViewNum,
        op_max: Viewstamp,
        disk_op_max: Viewstamp,
        dp: Viewstamp,
        (lease, lease_length): (u64, u64),
    ) {
        if view != self.view || !matches!(self.status, Status::Primary(_)) {
            return;
        }
        self.lease_acknowledged(from, lease, lease_length);
        self.record_ack(from, op_max, disk_op_max, dp);
    }

    fn record_ack(&mut self, from: ReplicaId, op_max: Viewstamp, disk: Viewstamp, dp: Viewstamp) {
        let view = self.view;
        let Status::Primary(leader) = &mut self.status else {
            return;
        };
        let i = usize::from(from);
        // Only this view's entries count, and only ones in the primary's log (a backup
        // reports what it holds of the primary's chain).
        if op_max.view == view && op_max > leader.acked[i] && self.log.contains(op_max) {
            leader.acked[i] = op_max;
        }
        if disk.view == view && disk > leader.disk[i] && self.log.contains(disk) {
            leader.disk[i] = disk;
        }
        if dp > leader.known_dp[i] {
            leader.known_dp[i] = dp;
        }
        self.advance_commit();
    }

    /// Moves the commit point to what a majority holds in memory, and the durable point to
    /// what a majority holds on disk (the quorum minimum of `diskOpMax`, never `opMax`),
    /// then answers the clients whose requests are now committed or durable.
    fn advance_commit(&mut self) {
        let n = usize::from(self.config.replica_count);
        let Status::Primary(leader) = &mut self.status else {
            return;
        };
        let kth = |values: &[Viewstamp; REPLICAS_MAX]| self.config.quorum_reached(values);
        let commit = kth(&leader.acked);
        if commit > leader.commit {
            leader.commit = commit;
        }
        let durable = kth(&leader.disk);
        let mut new_dp = self.dp;
        if durable > new_dp {
            new_dp = durable;
        }
        leader.known_dp[usize::from(self.id)] = new_dp;
        // The thesis's dpMin is the least durable point any replica adopted. A backup
        // adopts the primary's point without holding it on its own disk, so one that
        // crashes comes back below it and, were the log trimmed there, could only catch
        // up by a state transfer of the whole database. Bounded also by what each replica
        // reported on its disk, only a replica that lost its disk needs one. Trimming
        // less is always safe; a replica that stays down stops trimming, either way.
        let dp_min = leader.known_dp[..n]
            .iter()
            .zip(&leader.disk[..n])
            .map(|(dp, disk)| (*dp).min(*disk))
            .min()
            .unwrap_or_default();
        let dp_min = dp_min.max(self.dp_min).min(new_dp);
        self.adopt_dp(new_dp, dp_min);
        self.release_replies();
        self.propose();
    }

    fn release_replies(&mut self) {
        let (dp, view) = (self.dp, self.view);
        let Status::Primary(leader) = &mut self.status else {
            return;
        };
        let commit = leader.commit;
        let mut out = Vec::new();
        // Replies wait for their entry's commit; a synchronous request's also for dp (dp
        // is in this view once the view's first entry is durable, Lemma 4.3.6).
        let ready: Vec<u64> = leader
            .replies
            .range(..=commit.op)
            .map(|(op, _)| *op)
            .collect();
        for op in ready {
            let vs = Viewstamp { view, op };
            let list = leader.replies.get_mut(&op).expect("listed");
            list.retain(|p| {
                if p.sync && !(dp.view == view && op <= dp.op) {
                    return true;
                }
                out.push((p.client, p.seq, vs, p.result.clone()));
                false
            });
            if list.is_empty() {
                leader.replies.remove(&op);
            }
        }
        for (client, seq, vs, result) in out {
            self.send(
                Address::Client(client),
                Message::Reply {
                    client,
                    seq,
                    vs,
                    dp,
                    result,
                },
            );
        }
    }

    pub(super) fn send_heartbeat(&mut self) {
        let Status::Primary(leader) = &mut self.status else {
            return;
        };
        leader.heartbeat_at = self.now + self.config.heartbeat_interval;
        let lease = self.lease_sent();
        let message = Message::Heartbeat {
            view: self.view,
            op_max: self.log.op_max(),
            dp: self.dp,
            dp_min: self.dp_min,
            lease,
        };
        self.send_to_others(message);
    }

    pub(super) fn on_heartbeat(
        &mut self,
        from: ReplicaId,
        view: ViewNum,
        op_max: Viewstamp,
        dp: Viewstamp,
        dp_min: Viewstamp,
        lease: u64,
    ) {
        if !self.heard_from_primary(from, view) {
            return;
        }
        self.heard_lease(view, lease);
        if op_max != self.log.op_max() {
            self.request_catch_up();
        }
        self.adopt_dp(dp, dp_min);
        self.ack_primary(true);
    }

    /// The elected leader becomes primary: it proposes the view's first entry (the spec's
    /// `NonRequest`; the thesis's ELECTACCEPT at `<v', opMax.n+1>`).
    pub(super) fn become_primary(&mut self) {
        let op_max = self.log.op_max();
        let start = Viewstamp {
            view: self.view,
            op: op_max.op + 1,
        };
        self.status = Status::Primary(Box::new(Leader {
            start,
            acked: [Viewstamp::ZERO; REPLICAS_MAX],
            disk: [Viewstamp::ZERO; REPLICAS_MAX],
            known_dp: [Viewstamp::ZERO; REPLICAS_MAX],
            commit: op_max,
            queue: Default::default(),
            replies: Default::default(),
            heartbeat_at: self.now + self.config.heartbeat_interval,
            lease_acked: [(0, 0); REPLICAS_MAX],
        }));
        self.catch_up_retry_at = None;
        // Elected by a majority (with a waived amnesia's vote limits): it leads the log now.
        self.amnesia = None;
        self.stats.views_led += 1;
        self.propose_entry(Entry {
            vs: start,
            prev: op_max,
            body: Body::ViewStart,
        });
    }
}
