//! An explicit-state model checker for NCC: every order in which the messages of a few
//! fixed transactions can arrive, and every order in which their clients begin, explored
//! depth-first with visited states remembered (by hash), for small configurations such as
//! the paper's smallest with an inversion (2 servers, 3 clients, 2 keys). Where the
//! simulator samples schedules, this enumerates them all.
//!
//! Checked in every state: each server's invariants. In every final state (every client
//! begun, nothing in flight): every transaction committed (no deadlock), nothing left
//! undecided, and the history strictly serializable, with real-time order taken from the
//! schedule (a transaction that committed before another began precedes it). Messages are
//! never lost or duplicated here (the simulator covers that); each client's clock is
//! fixed, so a retry's timestamp is its last plus one, and a schedule in which some
//! transaction needs more than `attempts_max` attempts is cut (counted, not checked).
//!
//! With client failure (`crash`, `timer_fires`): one client may crash at any moment, and
//! the servers' recovery timers (App. D) fire at any moment too, up to `timer_fires` times
//! in all, so the backup coordinator also races live clients (a paused client, Figure
//! 8c). Once nothing else can happen, timers keep firing until every transaction is
//! decided (a recovery that never decides is reported). Then, besides the above: every
//! cohort decided each transaction the same way, and the crashed client's transaction, if
//! its backup committed it, is in the checked history.

use std::collections::hash_map::DefaultHasher;
use std::collections::HashSet;
use std::hash::{Hash, Hasher};

use crate::check::{serializable_with, TxnRecord};
use crate::client::{Client, ClientEvent};
use crate::server::{Mistakes, Server};
use crate::types::{ClientId, Key, Msg, Op, ServerId, Value};

/// What to explore.
#[derive(Clone, Debug)]
pub struct ExploreOptions {
    pub servers: u32,
    /// Per client: its clock when it begins, and its one-shot transaction.
    pub programs: Vec<(u64, Vec<Op>)>,
    pub mistakes: Mistakes,
    pub read_only_protocol: bool,
    pub attempts_max: u32,
    /// Give up (an error) past this many distinct states.
    pub states_max: usize,
    /// This client may crash at any moment (once).
    pub crash: Option<ClientId>,
    /// Servers run the backup coordinator, and their timers may fire this many times at
    /// moments of the explorer's choosing (`None`: no recovery).
    pub timer_fires: Option<u32>,
}

/// Timer firings once nothing else can happen, before a recovery counts as stuck.
const QUIESCENT_FIRES_MAX: u32 = 8;

/// What an exploration covered.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ExploreReport {
    pub states: usize,
    pub final_states: usize,
    /// Schedules cut because a transaction needed more attempts than allowed.
    pub cut: usize,
}

/// A committed transaction's reads and writes.
type ReadsWrites = (Vec<(Key, Value)>, Vec<(Key, Value)>);

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum To {
    Server(ServerId),
    Client(ClientId, ServerId),
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct State {
    servers: Vec<Server>,
    clients: Vec<Option<Client>>,
    /// Per client: the clients that had committed when it began.
    after: Vec<Vec<ClientId>>,
    /// Per client, once committed: its reads and writes.
    done: Vec<Option<ReadsWrites>>,
    attempts: Vec<u32>,
    /// Messages in flight, kept sorted (a multiset).
    flight: Vec<(To, Msg)>,
    crashed: Vec<bool>,
    /// Timer firings so far, chosen and forced (quiescent).
    fires: u32,
    quiescent_fires: u32,
}

fn hash_of(s: &State) -> u64 {
    let mut h = DefaultHasher::new();
    s.hash(&mut h);
    h.finish()
}

/// Explores every schedule of `o`; the error describes the first violation and the
/// schedule that led to it.
pub fn explore(o: &ExploreOptions) -> Result<ExploreReport, String> {
    let n = o.programs.len();
    let start = State {
        servers: (0..o.servers)
            .map(|s| {
                let server = Server::new(o.mistakes);
                // Timers fire when the explorer says (`Server::fire_all_timers`).
                match o.timer_fires {
                    Some(_) => server.with_recovery(s, u64::MAX),
                    None => server,
                }
            })
            .collect(),
        clients: vec![None; n],
        after: vec![Vec::new(); n],
        done: vec![None; n],
        attempts: vec![0; n],
        flight: Vec::new(),
        crashed: vec![false; n],
        fires: 0,
        quiescent_fires: 0,
    };
    let mut report = ExploreReport::default();
    let mut seen: HashSet<u64> = HashSet::new();
    seen.insert(hash_of(&start));
    // Depth-first. Each state explored keeps only its parent and the move that led to it:
    // a violation's schedule is rebuilt by replaying them from the start.
    let mut moves_made: Vec<(usize, Move)> = Vec::new();
    let mut stack: Vec<(State, usize)> = vec![(start.clone(), usize::MAX)];
    let schedule = |node: usize, moves_made: &[(usize, Move)]| -> String {
        let mut chain = Vec::new();
        let mut at = node;
        while at != usize::MAX {
            chain.push(moves_made[at].1);
            at = moves_made[at].0;
        }
        let mut s = start.clone();
        let steps: Vec<String> = chain.iter().rev().map(|mv| step(&mut s, mv, o)).collect();
        steps.join("\n  ")
    };
    while let Some((state, node)) = stack.pop() {
        report.states += 1;
        if report.states > o.states_max {
            return Err(format!(
                "more than {} states: configuration too large",
                o.states_max
            ));
        }
        let mut moves = Vec::new();
        for c in 0..n {
            if state.clients[c].is_none() {
                moves.push(Move::Begin(c as ClientId));
            }
        }
        for (i, m) in state.flight.iter().enumerate() {
            if i == 0 || state.flight[i - 1] != *m {
                moves.push(Move::Deliver(i));
            }
        }
        if let Some(c) = o.crash {
            let ci = c as usize;
            if state.clients[ci].is_some() && !state.crashed[ci] && state.done[ci].is_none() {
                moves.push(Move::Crash(c));
            }
        }
        let timers: Vec<ServerId> = (0..o.servers)
            .filter(|&sv| state.servers[sv as usize].has_timers())
            .collect();
        if let Some(max) = o.timer_fires {
            if moves.is_empty() && !timers.is_empty() {
                // Nothing else can happen: time passes until the timers decide.
                if state.quiescent_fires >= QUIESCENT_FIRES_MAX {
                    return Err(format!(
                        "recovery never decides: {timers:?} still have undecided transactions\nschedule:\n  {}",
                        schedule(node, &moves_made)
                    ));
                }
                moves.push(Move::FireAll);
            } else if state.fires < max {
                moves.extend(timers.iter().map(|&sv| Move::Fire(sv)));
            }
        }
        if moves.is_empty() {
            report.final_states += 1;
            check_final(&state, o)
                .map_err(|e| format!("{e}\nschedule:\n  {}", schedule(node, &moves_made)))?;
            continue;
        }
        for mv in moves {
            let mut next = state.clone();
            let what = step(&mut next, &mv, o);
            if next.attempts.iter().any(|&a| a > o.attempts_max) {
                report.cut += 1;
                continue;
            }
            if let Some((s, e)) = next
                .servers
                .iter()
                .enumerate()
                .find_map(|(s, sv)| sv.check_invariants().err().map(|e| (s, e)))
            {
                let before = schedule(node, &moves_made);
                return Err(format!("server {s}: {e}\nschedule:\n  {before}\n  {what}"));
            }
            if seen.insert(hash_of(&next)) {
                moves_made.push((node, mv));
                stack.push((next, moves_made.len() - 1));
            }
        }
    }
    Ok(report)
}

#[derive(Clone, Copy)]
enum Move {
    Begin(ClientId),
    Deliver(usize),
    Crash(ClientId),
    /// A server's recovery timers fire, at a moment of the explorer's choosing.
    Fire(ServerId),
    /// Nothing else can happen: time passes and every server's timers fire.
    FireAll,
}

/// Applies `mv` to `s`; returns what happened, for a schedule's report.
fn step(s: &mut State, mv: &Move, o: &ExploreOptions) -> String {
    let what;
    match *mv {
        Move::Begin(c) => {
            let ci = c as usize;
            s.after[ci] = (0..o.programs.len() as ClientId)
                .filter(|&d| s.done[d as usize].is_some())
                .collect();
            let (clk, ops) = &o.programs[ci];
            let mut client = Client::new(c, o.servers);
            client.read_only_protocol = o.read_only_protocol;
            client.begin(*clk, ops.clone(), true);
            s.attempts[ci] = 1;
            s.clients[ci] = Some(client);
            what = format!("client {c} begins {ops:?} at {clk}");
            collect(s, c);
        }
        Move::Deliver(i) => {
            let (to, msg) = s.flight.remove(i);
            what = format!("{to:?} <- {msg:?}");
            match to {
                To::Server(sv) => {
                    s.servers[sv as usize].on_message(0, msg);
                    collect_server(s, sv);
                }
                To::Client(c, _) if s.crashed[c as usize] => {}
                To::Client(c, from) => {
                    let clk = o.programs[c as usize].0;
                    if let Some(client) = s.clients[c as usize].as_mut() {
                        client.on_message(clk, from, msg);
                    }
                    collect(s, c);
                }
            }
        }
        Move::Crash(c) => {
            s.crashed[c as usize] = true;
            what = format!("client {c} crashes");
        }
        Move::Fire(sv) => {
            s.fires += 1;
            s.servers[sv as usize].fire_all_timers();
            collect_server(s, sv);
            what = format!("server {sv}'s recovery timers fire");
        }
        Move::FireAll => {
            s.quiescent_fires += 1;
            for sv in 0..s.servers.len() as ServerId {
                s.servers[sv as usize].fire_all_timers();
                collect_server(s, sv);
            }
            what = "time passes: every server's recovery timers fire".to_string();
        }
    }
    s.flight.sort();
    // Counters only: two states that differ in them behave alike.
    for client in s.clients.iter_mut().flatten() {
        client.stats = Default::default();
    }
    what
}

/// Puts what server `sv` sends in flight.
fn collect_server(s: &mut State, sv: ServerId) {
    let server = &mut s.servers[sv as usize];
    for (c, m) in server.drain() {
        // Acknowledgements only stop resending, which never happens here (no client
        // timers): they would only multiply the schedules.
        if !matches!(m, Msg::DecideAck { .. }) {
            s.flight.push((To::Client(c, sv), m));
        }
    }
    for (to, m) in server.drain_peers() {
        s.flight.push((To::Server(to), m));
    }
}

fn collect(s: &mut State, c: ClientId) {
    let ci = c as usize;
    let Some(client) = s.clients[ci].as_mut() else {
        return;
    };
    for (sv, m) in client.drain() {
        s.flight.push((To::Server(sv), m));
    }
    for e in client.events() {
        match e {
            ClientEvent::Restarted => s.attempts[ci] += 1,
            ClientEvent::Committed(out) => {
                let writes = out.writes();
                s.done[ci] = Some((out.reads, writes));
            }
            ClientEvent::ShotDone { .. } => {}
        }
    }
}

fn check_final(s: &State, o: &ExploreOptions) -> Result<(), String> {
    if let Some(c) = (0..o.programs.len()).find(|&c| s.done[c].is_none() && !s.crashed[c]) {
        return Err(format!("client {c} never committed (a deadlock)"));
    }
    let mut decided: std::collections::BTreeMap<crate::TxnId, bool> = Default::default();
    for server in &s.servers {
        for (txn, commit) in server.decisions() {
            if decided.insert(txn, commit).is_some_and(|d| d != commit) {
                return Err(format!(
                    "{txn:?} committed at one server, aborted at another"
                ));
            }
        }
    }
    for (i, server) in s.servers.iter().enumerate() {
        if !server.undecided().is_empty() {
            return Err(format!(
                "server {i} left {:?} undecided",
                server.undecided()
            ));
        }
    }
    let mut history: Vec<TxnRecord> = Vec::new();
    for (c, d) in s.done.iter().enumerate() {
        let (reads, writes) = match d {
            Some(rw) => rw.clone(),
            // The crashed client's transaction, if its backup committed it: what it read
            // and wrote, from the servers.
            None => {
                let mut reads = Vec::new();
                let mut writes = Vec::new();
                for server in &s.servers {
                    for (txn, e) in server.committed_effects() {
                        if txn.client == c as ClientId {
                            reads.extend(e.reads);
                            writes.extend(e.writes);
                        }
                    }
                }
                (reads, writes)
            }
        };
        history.push(TxnRecord {
            client: c as ClientId,
            invoked: 0,
            completed: 0,
            reads,
            writes,
            commit_ts: Default::default(),
        });
    }
    let real_time: Vec<(usize, usize)> = s
        .after
        .iter()
        .enumerate()
        .flat_map(|(later, before)| before.iter().map(move |&b| (b as usize, later)))
        .collect();
    let versions: Vec<(Key, Vec<Value>)> = s
        .servers
        .iter()
        .flat_map(Server::committed_versions)
        .collect();
    serializable_with(&history, &versions, &real_time)
}
