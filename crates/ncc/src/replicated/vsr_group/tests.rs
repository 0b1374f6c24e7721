//! `VsrReplicated` with a server that numbers its messages: what a client of the group
//! sees, checked against the group's final log.

use super::*;

/// A server that answers each message with the message and its position in what it
/// executed, so an answer says where its input sits in the log.
#[derive(Clone, Debug, Default)]
struct Numbered {
    seen: Vec<u64>,
    out: Vec<(ClientId, u64)>,
}

impl TxnServer for Numbered {
    type Msg = u64;
    fn on_message(&mut self, _now: u64, msg: u64) {
        self.seen.push(msg);
        self.out.push((0, msg << 32 | self.seen.len() as u64));
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

fn group(durability: Durability, seed: u64) -> VsrReplicated<Numbered> {
    let model = ReplicationModel {
        durability,
        round: 100,
        sync_gap: 400,
        answers_before_commit: false,
        real_replicas: true,
        unlogged_reads: false,
        unlogged_mistake: None,
    };
    VsrReplicated::new(Numbered::default(), model, seed)
}

/// The inputs of the group's log, in order.
fn logged<S: TxnServer + Clone>(g: &VsrReplicated<S>) -> Vec<u64> {
    g.committed_versions()[0]
        .1
        .iter()
        .map(|v| v.to_u64().expect("a number"))
        .collect()
}

/// What left the group, as (message, its position in the log the host executed).
fn answers(g: &mut VsrReplicated<Numbered>) -> Vec<(u64, u64)> {
    g.drain()
        .into_iter()
        .map(|(_, a)| (a >> 32, a & 0xffff_ffff))
        .collect()
}

/// Ticks the group from `from` to `until`, gathering what it answers.
fn run(g: &mut VsrReplicated<Numbered>, from: u64, until: u64) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    let mut t = from;
    while t <= until {
        g.tick(t);
        out.extend(answers(g));
        assert_eq!(g.check_invariants(), Ok(()));
        t += 50;
    }
    out
}

/// Sends `msg` until it is answered (it is lost while there is no host), as a client's
/// resends do. Returns its position in the host's log and the time.
fn send(g: &mut VsrReplicated<Numbered>, mut now: u64, msg: u64) -> (u64, u64) {
    for _ in 0..200 {
        g.on_message(now, msg);
        let out = run(g, now, now + 2_000);
        now += 2_050;
        if let Some(&(_, pos)) = out.iter().find(|(m, _)| *m == msg) {
            return (pos, now);
        }
    }
    panic!("message {msg} never answered: {}", g.describe());
}

/// Each answer names its message's place in `log`.
fn assert_answers_in_log(answered: &[(u64, u64)], log: &[u64], context: &str) {
    for &(msg, pos) in answered {
        assert_eq!(
            log.get(pos as usize - 1),
            Some(&msg),
            "{context}: answer ({msg}, {pos}) against the log {log:?}"
        );
    }
}

#[test]
fn a_host_is_elected_and_answers_leave_only_after_their_input_commits() {
    for seed in 0..20 {
        let mut g = group(Durability::Lazy, seed);
        let (pos, now) = send(&mut g, 0, 1);
        assert_eq!(pos, 1);
        // Submitted now, its answer cannot leave before a round trip between replicas.
        g.on_message(now, 2);
        assert!(
            answers(&mut g).is_empty(),
            "seed {seed}: answered before commit"
        );
        let out = run(&mut g, now, now + 5_000);
        assert_eq!(out, vec![(2, 2)], "seed {seed}");
        assert_eq!(logged(&g), vec![1, 2], "seed {seed}");
    }
}

#[test]
fn failovers_keep_every_answered_input() {
    for seed in 0..20 {
        let mut g = group(Durability::Lazy, seed);
        let mut now = 0;
        let mut answered = Vec::new();
        for msg in 1..=8 {
            let (pos, t) = send(&mut g, now, msg);
            answered.push((msg, pos));
            now = t;
            if msg % 2 == 0 {
                g.group_fault(now, GroupFault::Failover { keep: 0 });
            }
        }
        run(&mut g, now, now + 20_000);
        // Resent messages may be in the log twice; each answer names one of its copies.
        assert_answers_in_log(&answered, &logged(&g), &format!("seed {seed}"));
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
            let (pos, mut now) = send(&mut g, 0, 1);
            let mut answered = vec![(1, pos)];
            for msg in 2..=4 {
                g.on_message(now, msg);
                now += 10;
            }
            // The group crashes whole the moment the first of them is answered: its
            // disks may not have caught up yet.
            let mut before_crash = Vec::new();
            while before_crash.is_empty() && now < 100_000 {
                now += 10;
                g.tick(now);
                before_crash.extend(answers(&mut g));
            }
            assert!(!before_crash.is_empty(), "seed {seed}: nothing answered");
            g.group_fault(now, GroupFault::TotalCrash);
            before_crash.extend(answers(&mut g));
            let (pos, now) = send(&mut g, now, 5);
            run(&mut g, now, now + 5_000);
            let log = logged(&g);
            assert_eq!(log.get(pos as usize - 1), Some(&5), "seed {seed}: {log:?}");
            answered.extend(before_crash);
            match durability {
                Durability::Lazy => {
                    let lost = answered
                        .iter()
                        .filter(|(m, p)| log.get(*p as usize - 1) != Some(m))
                        .count() as u64;
                    assert_eq!(lost, g.stats.committed_lost, "seed {seed}: {log:?}");
                    lost_under_lazy += lost;
                    assert_eq!(g.check_invariants(), Ok(()));
                }
                Durability::Sync | Durability::LazyAnswersOnDisk => {
                    assert_answers_in_log(&answered, &log, &format!("{durability:?} seed {seed}"));
                }
            }
        }
    }
    assert!(
        lost_under_lazy > 0,
        "a total crash under Lazy VSR never lost an answered input in 30 seeds"
    );
}

#[derive(Clone, Debug)]
enum Step {
    Send,
    Wait(u64),
    Failover,
    TotalCrash,
}

fn step() -> impl proptest::strategy::Strategy<Value = Step> {
    use proptest::prelude::*;
    prop_oneof![
        6 => Just(Step::Send),
        4 => (10u64..3_000).prop_map(Step::Wait),
        1 => Just(Step::Failover),
        1 => Just(Step::TotalCrash),
    ]
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]

    /// The model: the group's final log is a sequence of distinct inputs, and every answer
    /// that left names its input's place in it, whatever failovers and total crashes
    /// happened, unless a total crash under plain Lazy VSR came after the answer (then
    /// only the answers before the crash's lost suffix must hold).
    #[test]
    fn every_answer_names_its_place_in_the_final_log(
        seed in 0u64..1_000,
        durability in proptest::sample::select(vec![
            Durability::Lazy,
            Durability::Sync,
            Durability::LazyAnswersOnDisk,
        ]),
        steps in proptest::collection::vec(step(), 1..40),
        elected_by in 0u64..6_000,
    ) {
        let mut g = group(durability, seed);
        // Messages before the first election (about 3-5 ms) are lost; most cases let it
        // happen first.
        let mut now = 0;
        while now < elected_by {
            now += 50;
            g.tick(now);
        }
        let mut next_msg = 1;
        let mut answers: Vec<(u64, u64, u64)> = Vec::new(); // (msg, position, when)
        let mut last_total_crash = None;
        let gather = |g: &mut VsrReplicated<Numbered>, now: u64, answers: &mut Vec<_>| {
            for (_, a) in g.drain() {
                answers.push((a >> 32, a & 0xffff_ffff, now));
            }
        };
        for s in steps {
            match s {
                Step::Send => {
                    g.on_message(now, next_msg);
                    next_msg += 1;
                }
                Step::Wait(dt) => {
                    let until = now + dt;
                    while now < until {
                        now = (now + 50).min(until);
                        g.tick(now);
                        gather(&mut g, now, &mut answers);
                    }
                }
                Step::Failover => g.group_fault(now, GroupFault::Failover { keep: 0 }),
                Step::TotalCrash => {
                    g.group_fault(now, GroupFault::TotalCrash);
                    last_total_crash = Some(now);
                }
            }
            gather(&mut g, now, &mut answers);
            proptest::prop_assert_eq!(g.check_invariants(), Ok(()));
        }
        // Quiet until a primary hosts again and the log settles.
        for _ in 0..4_000 {
            now += 50;
            g.tick(now);
            gather(&mut g, now, &mut answers);
            if g.leader().is_some() && g.tick_every().is_none() {
                break;
            }
        }
        proptest::prop_assert!(g.leader().is_some(), "no primary: {}", g.describe());
        proptest::prop_assert_eq!(g.check_invariants(), Ok(()));
        let log = logged(&g);
        let mut distinct = log.clone();
        distinct.sort_unstable();
        distinct.dedup();
        proptest::prop_assert_eq!(distinct.len(), log.len(), "an input twice: {:?}", log);
        for &(msg, pos, at) in &answers {
            let may_be_lost = durability == Durability::Lazy
                && last_total_crash.is_some_and(|t| t >= at);
            if !may_be_lost {
                proptest::prop_assert_eq!(
                    log.get(pos as usize - 1).copied(),
                    Some(msg),
                    "answer ({}, {}) at {} against log {:?}",
                    msg, pos, at, log
                );
            }
        }
    }
}
