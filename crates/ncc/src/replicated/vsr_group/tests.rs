//! `VsrReplicated` with a server that counts its messages: what a client of the group sees.

use super::*;

/// A server that keeps every message it got and answers each with the count so far.
#[derive(Clone, Debug, Default)]
struct Counter {
    seen: Vec<u64>,
    out: Vec<(ClientId, u64)>,
}

impl TxnServer for Counter {
    type Msg = u64;
    fn on_message(&mut self, _now: u64, msg: u64) {
        self.seen.push(msg);
        self.out.push((0, self.seen.len() as u64));
    }
    fn drain(&mut self) -> Vec<(ClientId, u64)> {
        std::mem::take(&mut self.out)
    }
    fn check_invariants(&self) -> Result<(), String> {
        Ok(())
    }
    fn committed_versions(&self) -> Vec<(Key, Vec<Value>)> {
        let seen = self.seen.iter().map(|&v| Value::from(v)).collect();
        vec![(Key::from(0), seen)]
    }
    fn undecided(&self) -> Vec<TxnId> {
        Vec::new()
    }
    fn describe_waits(&self) -> String {
        String::new()
    }
}

fn group(durability: Durability, seed: u64) -> VsrReplicated<Counter> {
    let model = ReplicationModel {
        durability,
        round: 100,
        sync_gap: 400,
        answers_before_commit: false,
        real_replicas: true,
    };
    VsrReplicated::new(Counter::default(), model, seed)
}

fn logged(g: &VsrReplicated<Counter>) -> Vec<u64> {
    g.committed_versions()[0]
        .1
        .iter()
        .map(|v| v.to_u64().expect("a number"))
        .collect()
}

/// Ticks the group until `until`, gathering what it answers.
fn run(g: &mut VsrReplicated<Counter>, from: u64, until: u64) -> Vec<u64> {
    let mut answers = Vec::new();
    let mut t = from;
    while t <= until {
        g.tick(t);
        answers.extend(g.drain().into_iter().map(|(_, a)| a));
        assert_eq!(g.check_invariants(), Ok(()));
        t += 50;
    }
    answers
}

/// Sends `msg` until it is answered (it is lost while there is no host), as a
/// client's resends do. Returns the answer and the time.
fn send(g: &mut VsrReplicated<Counter>, mut now: u64, msg: u64) -> (u64, u64) {
    for _ in 0..200 {
        g.on_message(now, msg);
        let answers = run(g, now, now + 2_000);
        now += 2_050;
        if let Some(&a) = answers.last() {
            return (a, now);
        }
    }
    panic!("message {msg} never answered: {}", g.describe());
}

#[test]
fn a_host_is_elected_and_answers_leave_only_after_their_input_commits() {
    for seed in 0..20 {
        let mut g = group(Durability::Lazy, seed);
        let (_, now) = send(&mut g, 0, 1);
        // Submitted now, its answer cannot leave before a round trip between replicas.
        g.on_message(now, 2);
        assert!(g.drain().is_empty(), "seed {seed}: answered before commit");
        let answers = run(&mut g, now, now + 5_000);
        assert!(answers.contains(&2), "seed {seed}: {answers:?}");
        assert_eq!(logged(&g), vec![1, 2], "seed {seed}");
        assert_eq!(g.stats.committed_lost, 0);
    }
}

#[test]
fn failovers_keep_every_answered_input() {
    for seed in 0..20 {
        let mut g = group(Durability::Lazy, seed);
        let mut now = 0;
        let mut answered = Vec::new();
        for msg in 1..=8 {
            let (a, t) = send(&mut g, now, msg);
            answered.push(a);
            now = t;
            if msg % 2 == 0 {
                g.group_fault(now, GroupFault::Failover { keep: 0 });
            }
        }
        run(&mut g, now, now + 20_000);
        let log = logged(&g);
        for msg in 1..=8 {
            assert!(
                log.contains(&msg),
                "seed {seed}: {msg} missing from {log:?}"
            );
        }
        assert!(g.stats.failovers > 0, "seed {seed}: no failover happened");
        assert_eq!(g.check_invariants(), Ok(()));
    }
}

#[test]
fn a_total_crash_loses_answered_inputs_only_under_lazy_durability() {
    let mut lost_under_lazy = 0;
    for durability in [
        Durability::Lazy,
        Durability::Sync,
        Durability::LazyAnswersOnDisk,
    ] {
        for seed in 0..30 {
            let mut g = group(durability, seed);
            let (_, mut now) = send(&mut g, 0, 1);
            for msg in 2..=4 {
                g.on_message(now, msg);
                now += 10;
            }
            // The group crashes whole the moment the first of them is answered: its
            // disks may not have caught up yet.
            let mut answers = Vec::new();
            while answers.is_empty() && now < 100_000 {
                now += 10;
                g.tick(now);
                answers.extend(g.drain().into_iter().map(|(_, a)| a));
            }
            g.group_fault(now, GroupFault::TotalCrash);
            answers.extend(g.drain().into_iter().map(|(_, a)| a));
            let (_, now) = send(&mut g, now, 5);
            run(&mut g, now, now + 5_000);
            let log = logged(&g);
            assert!(log.contains(&5), "{durability:?} seed {seed}: {log:?}");
            match durability {
                Durability::Lazy => {
                    lost_under_lazy += g.stats.committed_lost;
                    assert_eq!(g.check_invariants(), Ok(()));
                }
                Durability::Sync | Durability::LazyAnswersOnDisk => {
                    // Every answered input survived (the group checks it too).
                    assert_eq!(g.stats.committed_lost, 0);
                    assert!(log.contains(&1));
                    assert!(
                        log.len() >= answers.len() + 2,
                        "{durability:?} seed {seed}: answered {answers:?}, log {log:?}"
                    );
                }
            }
        }
    }
    assert!(
        lost_under_lazy > 0,
        "a total crash under Lazy VSR never lost an answered input in 30 seeds"
    );
}
