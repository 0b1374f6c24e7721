//! The gateway's coordinator: one thread that owns a pool of NCC protocol clients (each the
//! coordinator of its own transactions, as the paper has it) over one connection per
//! replica of every group, and runs the plans the connection threads hand it, as many at
//! once as it has protocol clients. A connection thread waits for its plan's answer; the
//! pool's `Waker` ends the coordinator's wait for the servers when a plan arrives.
//!
//! A plan that takes longer than the timeout is answered `TIMEOUT` (its outcome unknown:
//! it may still commit); its protocol client runs the transaction to its end (the plan
//! still decides a later shot) and is not reused before. A plan that finds every protocol
//! client busy until its deadline is answered `TRYAGAIN` (it did not run). So every plan
//! handed over is answered, within the timeout.

use std::collections::VecDeque;
use std::io;
use std::net::SocketAddr;
use std::sync::mpsc::{self, Receiver, Sender, SyncSender, TryRecvError};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use verso_ncc::wire::{Encoding, Wire};
use verso_ncc::{ClientEvent, ClientId, Key, TxnClient, Value};
use verso_server::resp::Reply;
use verso_txn_net::client::Pool;
use verso_txn_net::{now_us, Protocol};

use crate::plan::{Done, Plan};

/// A plan and where its answer goes.
struct Job {
    plan: Plan,
    answer: SyncSender<Result<Done, Reply>>,
    /// When it must be answered, begun or not.
    deadline: Instant,
}

/// What the connection threads hold: hands plans to the coordinator.
#[derive(Clone)]
pub struct Handle {
    jobs: Sender<Job>,
    wake: Arc<dyn Fn() + Send + Sync>,
    timeout: Duration,
}

impl Handle {
    /// Runs `plan` and waits for its answer (an error reply when it timed out or the
    /// groups cannot be reached).
    pub fn run(&self, plan: Plan) -> Result<Done, Reply> {
        let (answer, done) = mpsc::sync_channel(1);
        let stopped = || Reply::Error("CLUSTERDOWN the gateway's coordinator stopped".into());
        let deadline = Instant::now() + self.timeout;
        self.jobs
            .send(Job {
                plan,
                answer,
                deadline,
            })
            .map_err(|_| stopped())?;
        (self.wake)();
        done.recv().map_err(|_| stopped())?
    }
}

/// The coordinator's settings.
#[derive(Clone, Debug)]
pub struct Settings {
    /// Every group's replica addresses, the group's index its NCC server id.
    pub groups: Vec<Vec<SocketAddr>>,
    pub protocol: Protocol,
    /// The protocol client ids this gateway owns: no other client of the cluster may use
    /// them while it runs (the servers route answers by id).
    pub first_client: ClientId,
    pub clients: u32,
    /// How long a transaction may take before it is answered TIMEOUT.
    pub timeout: Duration,
}

/// How long an unanswered message waits before the protocol client sends it again (a
/// failover costs one resend; the sessions' value).
const RESEND_AFTER_US: u64 = 200_000;

/// The longest the coordinator waits for the servers before it looks at its timeouts.
const POLL_MAX: Duration = Duration::from_millis(20);

/// How long the coordinator rests after its connections failed before it connects again.
const RECONNECT_AFTER: Duration = Duration::from_millis(500);

/// Starts the coordinator thread. It connects to the groups first and fails if it cannot.
pub fn start(settings: Settings) -> io::Result<Handle> {
    if settings.clients == 0 || settings.groups.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "a gateway needs at least one protocol client and one group",
        ));
    }
    let (jobs, rx) = mpsc::channel();
    let (ready_tx, ready_rx) = mpsc::channel();
    let timeout = settings.timeout;
    thread::Builder::new()
        .name("gateway-coordinator".into())
        .spawn(move || match settings.protocol {
            Protocol::Ncc { read_only } => run(&settings, rx, ready_tx, |id, n| {
                Protocol::ncc_client(id, n, read_only, RESEND_AFTER_US).with_first_seq(now_us())
            }),
            Protocol::Baseline(flavor) => run(&settings, rx, ready_tx, |id, n| {
                let mut c = Protocol::baseline_client(id, n, flavor).with_first_seq(now_us());
                c.resend_after = RESEND_AFTER_US;
                c
            }),
        })?;
    ready_rx
        .recv()
        .map_err(|_| io::Error::other("the coordinator thread died"))?
        .map(|wake| Handle {
            jobs,
            wake,
            timeout,
        })
}

type Ready = Sender<io::Result<Arc<dyn Fn() + Send + Sync>>>;

/// Connects (again after a failure) and coordinates until every connection thread is gone.
fn run<C>(
    settings: &Settings,
    jobs: Receiver<Job>,
    ready: Ready,
    client: impl Fn(ClientId, u32) -> C,
) where
    C: TxnClient + Send + 'static,
    C::Msg: Wire + Send + 'static,
{
    let n = settings.groups.len() as u32;
    let connect = || {
        let clients = (0..settings.clients)
            .map(|j| client(settings.first_client + j, n))
            .collect();
        Pool::connect_groups(
            &settings.groups,
            Encoding::Binary,
            settings.first_client,
            clients,
        )
    };
    let mut pool = match connect() {
        Ok(pool) => pool,
        Err(e) => {
            let _ = ready.send(Err(e));
            return;
        }
    };
    // The waker outlives any one pool, so it forwards to whichever pool is current.
    let current = Arc::new(std::sync::Mutex::new(pool.waker()));
    let waker = Arc::clone(&current);
    let wake: Arc<dyn Fn() + Send + Sync> = Arc::new(move || {
        waker.lock().unwrap_or_else(|e| e.into_inner()).wake();
    });
    if ready.send(Ok(wake)).is_err() {
        return;
    }
    let mut waiting = VecDeque::new();
    loop {
        match coordinate(&mut pool, &jobs, &mut waiting, settings.timeout) {
            Ok(()) => return, // every connection thread is gone
            Err(e) => {
                eprintln!("gateway: the connections to the groups failed ({e}); connecting again")
            }
        }
        loop {
            thread::sleep(RECONNECT_AFTER);
            refuse_waiting(&jobs, &mut waiting, "the groups cannot be reached");
            match connect() {
                Ok(p) => {
                    pool = p;
                    *current.lock().unwrap_or_else(|e| e.into_inner()) = pool.waker();
                    break;
                }
                Err(e) => eprintln!("gateway: cannot reach the groups ({e})"),
            }
        }
    }
}

/// Answers every plan waiting, and every one that arrives meanwhile, with CLUSTERDOWN.
fn refuse_waiting(jobs: &Receiver<Job>, waiting: &mut VecDeque<Job>, why: &str) {
    waiting.extend(jobs.try_iter());
    for job in waiting.drain(..) {
        let _ = job
            .answer
            .send(Err(Reply::Error(format!("CLUSTERDOWN {why}"))));
    }
}

/// A protocol client's work.
enum Slot {
    Free,
    Running {
        plan: Box<Plan>,
        /// What the current attempt has read so far.
        reads: Vec<(Key, Value)>,
        deadline: Instant,
        /// Taken when the plan is answered TIMEOUT: the protocol client still runs the
        /// transaction to its end (a multi-shot one needs its next shot from the plan),
        /// and is not reused before.
        answer: Option<SyncSender<Result<Done, Reply>>>,
    },
}

/// Runs plans on `pool` until every job sender is gone (`Ok`) or the pool fails (`Err`,
/// after answering every plan under way).
fn coordinate<C>(
    pool: &mut Pool<C>,
    jobs: &Receiver<Job>,
    waiting: &mut VecDeque<Job>,
    timeout: Duration,
) -> io::Result<()>
where
    C: TxnClient,
    C::Msg: Wire + Send + 'static,
{
    let mut slots: Vec<Slot> = (0..pool.len()).map(|_| Slot::Free).collect();
    let mut events = Vec::new();
    let result = loop {
        let senders_gone = loop {
            match jobs.try_recv() {
                Ok(job) => waiting.push_back(job),
                Err(TryRecvError::Empty) => break false,
                Err(TryRecvError::Disconnected) => break true,
            }
        };
        if senders_gone && waiting.is_empty() && slots.iter().all(|s| matches!(s, Slot::Free)) {
            break Ok(());
        }
        if let Err(e) = turn(pool, &mut slots, waiting, &mut events, timeout) {
            break Err(e);
        }
    };
    for slot in &mut slots {
        if let Slot::Running {
            answer: Some(answer),
            ..
        } = std::mem::replace(slot, Slot::Free)
        {
            let why = "CLUSTERDOWN the connections to the groups failed; the outcome is unknown";
            let _ = answer.send(Err(Reply::Error(why.into())));
        }
    }
    result
}

/// One turn: start waiting plans on free clients, time out late ones, wait for the
/// servers, and act on what the clients report.
fn turn<C>(
    pool: &mut Pool<C>,
    slots: &mut [Slot],
    waiting: &mut VecDeque<Job>,
    events: &mut Vec<(usize, ClientEvent)>,
    timeout: Duration,
) -> io::Result<()>
where
    C: TxnClient,
    C::Msg: Wire + Send + 'static,
{
    let free: Vec<usize> = (0..slots.len())
        .filter(|&i| matches!(slots[i], Slot::Free) && !pool.client(i).busy())
        .take(waiting.len())
        .collect();
    for i in free {
        let job = waiting.pop_front().expect("one job per free client");
        let (ops, last) = job.plan.first_shot();
        assert!(
            !ops.is_empty(),
            "a plan that needs no transaction is answered locally"
        );
        slots[i] = Slot::Running {
            plan: Box::new(job.plan),
            reads: Vec::new(),
            deadline: job.deadline,
            answer: Some(job.answer),
        };
        pool.begin(i, ops, last)?;
    }
    let now = Instant::now();
    let mut wait = POLL_MAX;
    // Plans that found every protocol client busy until their deadline never ran.
    while waiting.front().is_some_and(|j| j.deadline <= now) {
        let job = waiting.pop_front().expect("not empty");
        let why = format!(
            "TRYAGAIN all {} of the gateway's protocol clients stayed busy for {} ms; the command did not run",
            slots.len(),
            timeout.as_millis()
        );
        let _ = job.answer.send(Err(Reply::Error(why)));
    }
    for slot in slots.iter_mut() {
        let Slot::Running {
            deadline, answer, ..
        } = slot
        else {
            continue;
        };
        if answer.is_none() {
            continue;
        }
        if *deadline <= now {
            let why = format!(
                "TIMEOUT no answer within {} ms; the transaction's outcome is unknown",
                timeout.as_millis()
            );
            let _ = answer
                .take()
                .expect("unanswered")
                .send(Err(Reply::Error(why)));
        } else {
            wait = wait.min(*deadline - now);
        }
    }
    pool.poll(wait, events)?;
    for (i, event) in events.drain(..) {
        let Slot::Running { plan, reads, .. } = &mut slots[i] else {
            debug_assert!(false, "an event from client {i}, which runs no transaction");
            continue;
        };
        match event {
            ClientEvent::ShotDone { reads: shot } => {
                reads.extend(shot);
                let ops = plan.decide(reads);
                pool.next_shot(i, ops, true)?;
            }
            ClientEvent::Restarted => reads.clear(),
            ClientEvent::Committed(outcome) => {
                if let Slot::Running { plan, answer, .. } =
                    std::mem::replace(&mut slots[i], Slot::Free)
                {
                    let done = plan.finish(&outcome.reads);
                    if let Some(answer) = answer {
                        let _ = answer.send(Ok(done));
                    }
                }
            }
        }
    }
    Ok(())
}
