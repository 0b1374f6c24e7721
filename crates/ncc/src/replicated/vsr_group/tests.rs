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

fn logged<S: TxnServer + Clone>(g: &VsrReplicated<S>) -> Vec<u64> {
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
    ) {
        let model = ReplicationModel {
            durability,
            round: 100,
            sync_gap: 400,
            answers_before_commit: false,
            real_replicas: true,
        };
        let mut g = VsrReplicated::new(Numbered::default(), model, seed);
        let mut now = 0;
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
