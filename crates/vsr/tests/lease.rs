//! Read leases (`replica::lease`), scripted: three replicas on a network the test controls.
//! A primary holds its lease only while a majority's promises last; a promised replica
//! neither votes nor campaigns; a restarted one starts promised. The simulator checks the
//! lease's invariant under every fault (`verso-vsr-sim`); these pin the rules one by one.

use verso_vsr::kv::KvApp;
use verso_vsr::{Action, Address, Config, MessageOf, Replica, Role, LEASE_DRIFT_DIVISOR};

const LEASE: u64 = 400;

struct Group {
    replicas: Vec<Replica<KvApp>>,
    /// `cut[i]`: replica i sends and receives nothing.
    cut: Vec<bool>,
    inbox: Vec<(Address, Address, MessageOf<KvApp>)>,
    now: u64,
}

impl Group {
    fn new() -> Group {
        let replicas = (0..3)
            .map(|i| {
                let mut c = Config::new(3);
                c.view_change_jitter = 0;
                c.checkpoint_interval = 0;
                c.lease = LEASE;
                // Replica 0 times out first and leads.
                c.view_change_timeout = if i == 0 { 1000 } else { 3000 };
                Replica::new(i, c, KvApp::new(), 0)
            })
            .collect();
        Group {
            replicas,
            cut: vec![false; 3],
            inbox: Vec::new(),
            now: 0,
        }
    }

    /// Carries out replica i's actions; its disk syncs complete at once.
    fn collect(&mut self, i: usize) {
        while let Some(a) = self.replicas[i].poll_action() {
            match a {
                Action::Send { to, message } => {
                    self.inbox.push((Address::Replica(i as u8), to, message))
                }
                Action::Write(_) => {}
                Action::Sync { id } => {
                    let now = self.now;
                    self.replicas[i].handle_synced(now, id);
                }
            }
        }
    }

    fn settle(&mut self) {
        for _ in 0..1000 {
            for i in 0..3 {
                self.collect(i);
            }
            if self.inbox.is_empty() {
                return;
            }
            for (from, to, m) in std::mem::take(&mut self.inbox) {
                let cut = |a: Address| matches!(a, Address::Replica(r) if self.cut[usize::from(r)]);
                if let (false, false, Address::Replica(r)) = (cut(from), cut(to), to) {
                    let now = self.now;
                    self.replicas[usize::from(r)].handle_message(now, from, m);
                }
            }
        }
        panic!("the group did not settle");
    }

    /// Lets `ms` pass in 10 ms steps, firing timeouts and delivering everything.
    fn wait(&mut self, ms: u64) {
        let end = self.now + ms;
        while self.now < end {
            self.now += 10;
            for i in 0..3 {
                let now = self.now;
                if self.replicas[i].poll_timeout() <= now {
                    self.replicas[i].handle_timeout(now);
                }
            }
            self.settle();
        }
    }

    fn primary(&self) -> Option<usize> {
        (0..3).find(|&i| !self.cut[i] && self.replicas[i].role() == Role::Primary)
    }
}

/// Elected and settled: replica 0 leads and holds its lease.
fn led_group() -> Group {
    let mut g = Group::new();
    g.wait(1500);
    assert_eq!(g.primary(), Some(0));
    g
}

#[test]
fn a_primary_holds_its_lease_while_a_majority_answers() {
    let mut g = led_group();
    let now = g.now;
    assert!(g.replicas[0].lease_read(now).is_some());
    assert!(
        g.replicas[1].lease_read(now).is_none(),
        "a backup holds no lease"
    );
    // Heartbeats renew it for as long as the others answer.
    g.wait(3000);
    let now = g.now;
    assert!(g.replicas[0].lease_read(now).is_some());
    let until = g.replicas[0].lease_until().expect("held");
    assert!(until > now && until <= now + LEASE - LEASE / LEASE_DRIFT_DIVISOR);
}

#[test]
fn a_cut_off_primary_loses_its_lease_before_anyone_else_leads() {
    let mut g = led_group();
    g.cut[0] = true;
    let until = g.replicas[0].lease_until().expect("held");
    // Until the lease ends, nobody else may have been elected; after it, reads stop.
    while g.now < until + 10 {
        g.wait(10);
        assert!(
            (1..3).all(|i| g.replicas[i].role() != Role::Primary),
            "elected while the old primary's lease lasted"
        );
    }
    let now = g.now;
    assert!(g.replicas[0].lease_read(now).is_none());
    g.wait(5000);
    assert!(matches!(g.primary(), Some(1 | 2)), "the others elect");
}

#[test]
fn a_promised_backup_does_not_vote_for_a_candidate() {
    let mut g = led_group();
    // Replica 2 cannot hear the primary (one way: it still reaches replica 1), times out
    // and campaigns. Replica 1 still hears the primary, so it stays promised and refuses.
    let cut_from_0_to_2 = |g: &mut Group| {
        g.inbox
            .retain(|(from, to, _)| !(*from == Address::Replica(0) && *to == Address::Replica(2)))
    };
    // When replica 1 last accepted something of the primary's, and its votes.
    let mut heard_at = 0;
    let mut votes = Vec::new();
    for _ in 0..600 {
        g.now += 10;
        for i in 0..3 {
            let now = g.now;
            if g.replicas[i].poll_timeout() <= now {
                g.replicas[i].handle_timeout(now);
            }
        }
        for _ in 0..50 {
            for i in 0..3 {
                g.collect(i);
            }
            cut_from_0_to_2(&mut g);
            if g.inbox.is_empty() {
                break;
            }
            for (from, to, m) in std::mem::take(&mut g.inbox) {
                use verso_vsr::Message::{ElectPrepareOk, Heartbeat, Prepare};
                if matches!(m, ElectPrepareOk { .. }) && from == Address::Replica(1) {
                    votes.push((g.now, heard_at));
                }
                let of_primary = matches!(m, Heartbeat { .. } | Prepare { .. });
                if of_primary && from == Address::Replica(0) && to == Address::Replica(1) {
                    heard_at = g.now;
                }
                if let Address::Replica(r) = to {
                    let now = g.now;
                    g.replicas[usize::from(r)].handle_message(now, from, m);
                }
            }
        }
        let now = g.now;
        if g.replicas[0].lease_read(now).is_some() {
            assert_ne!(g.replicas[2].role(), Role::Primary, "two leaders at once");
        }
    }
    assert!(
        g.replicas[2].stats().view_changes_started > 0,
        "replica 2 campaigned"
    );
    // It votes only once its last promise ran out (then it may: the primary's lease is
    // over too).
    assert!(!votes.is_empty(), "replica 1 never voted");
    for (at, heard) in votes {
        assert!(
            at >= heard + LEASE,
            "replica 1 voted at {at}, within its promise from {heard}"
        );
    }
}

#[test]
fn a_restarted_replica_starts_promised() {
    let mut c = Config::new(3);
    c.lease = LEASE;
    let r = Replica::new(1, c, KvApp::new(), 5000);
    // Its view-change deadline is past the promise, whatever the timeout says.
    assert!(r.poll_timeout() >= 5000 + LEASE.min(3000));
}
