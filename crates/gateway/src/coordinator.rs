//! The gateway's coordination: a pool of NCC protocol clients (each the coordinator of its
//! own transactions, as the paper has it) over one connection per replica of every group,
//! running the plans the connections submit, as many at once as it has protocol clients.
//! It does no waiting of its own: the event loop (`server.rs`) calls [`Coordination::turn`]
//! when the pool has input (the pool's reader threads notify it) or a deadline is due.
//!
//! A plan that takes longer than the timeout is answered `TIMEOUT` (its outcome unknown:
//! it may still commit); its protocol client runs the transaction to its end (the plan
//! still decides a later shot) and is not reused before. A plan that finds every protocol
//! client busy until its deadline is answered `TRYAGAIN` (it did not run). So every plan
//! submitted is answered, within the timeout.

use std::collections::VecDeque;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use verso_ncc::client::Placement;
use verso_ncc::wire::{Encoding, Wire};
use verso_ncc::{ClientEvent, ClientId, Key, TxnClient, Value};
use verso_server::resp::Reply;
use verso_txn_net::client::Pool;
use verso_txn_net::{now_us, Protocol};

use crate::plan::{Done, Plan};

/// The coordinator's settings.
#[derive(Clone, Debug)]
pub struct Settings {
    /// Every group's replica addresses, the group's index its NCC server id.
    pub groups: Vec<Vec<SocketAddr>>,
    pub protocol: Protocol,
    /// Which group holds a key: every client of the groups must agree.
    pub placement: Placement,
    /// The protocol client ids this gateway owns: no other client of the cluster may use
    /// them while it runs (the servers route answers by id).
    pub first_client: ClientId,
    pub clients: u32,
    /// How long a transaction may take before it is answered TIMEOUT.
    pub timeout: Duration,
}

/// Who waits for a plan's answer: a connection, by its event-loop token and the
/// generation of that token (a token is reused once its connection closes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Asker {
    pub token: usize,
    pub generation: u64,
}

/// A plan's answer, for its asker.
pub type Answer = (Asker, Result<Done, Reply>);

/// What the event loop needs of a coordinator, whichever protocol its clients run.
pub trait Coordination: Send {
    /// Queues `plan`; its answer comes out of a later [`Coordination::turn`].
    fn submit(&mut self, asker: Asker, plan: Plan);
    /// Begins waiting plans on free protocol clients, takes the pool's input without
    /// waiting, answers plans past their deadline, and appends every answer. An error: the
    /// connections to the groups failed (call [`Coordination::reconnect`]).
    fn turn(&mut self, answers: &mut Vec<Answer>) -> io::Result<()>;
    /// How long the event loop may wait before the next turn is due (timers, deadlines).
    fn next_turn_in(&self, now: Instant) -> Duration;
    /// After a failed turn: answers every plan under way or waiting with CLUSTERDOWN, and
    /// connects again.
    fn reconnect(&mut self, answers: &mut Vec<Answer>) -> io::Result<()>;
}

/// How long an unanswered message waits before the protocol client sends it again (a
/// failover costs one resend; the sessions' value).
const RESEND_AFTER_US: u64 = 200_000;

/// The longest the event loop waits without a turn: the protocol clients' timers.
const TURN_EVERY: Duration = Duration::from_millis(20);

/// Connects to the groups. `notify` is called from the pool's reader threads whenever it
/// has input.
pub fn connect(
    settings: &Settings,
    notify: Arc<dyn Fn() + Send + Sync>,
) -> io::Result<Box<dyn Coordination>> {
    if settings.clients == 0 || settings.groups.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "a gateway needs at least one protocol client and one group",
        ));
    }
    let placement = settings.placement;
    Ok(match settings.protocol {
        Protocol::Ncc { read_only } => {
            Box::new(Coordinator::connect(settings, notify, move |id, n| {
                Protocol::ncc_client(id, n, read_only, RESEND_AFTER_US)
                    .with_first_seq(now_us())
                    .with_placement(placement)
            })?)
        }
        Protocol::Baseline(flavor) => {
            Box::new(Coordinator::connect(settings, notify, move |id, n| {
                let mut c = Protocol::baseline_client(id, n, flavor)
                    .with_first_seq(now_us())
                    .with_placement(placement);
                c.resend_after = RESEND_AFTER_US;
                c
            })?)
        }
    })
}

/// A plan waiting for a protocol client.
struct Job {
    plan: Plan,
    asker: Asker,
    /// When it must be answered, begun or not.
    deadline: Instant,
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
        asker: Option<Asker>,
    },
}

/// A factory of protocol clients: id, and the number of groups.
type MakeClient<C> = Box<dyn Fn(ClientId, u32) -> C + Send>;

struct Coordinator<C: TxnClient> {
    settings: Settings,
    notify: Arc<dyn Fn() + Send + Sync>,
    make: MakeClient<C>,
    pool: Pool<C>,
    /// One per protocol client. Invariant: a client is busy only while its slot runs.
    slots: Vec<Slot>,
    /// Plans in submission order. Bounded by the connections: each has at most one plan
    /// submitted and unanswered.
    waiting: VecDeque<Job>,
    events: Vec<(usize, ClientEvent)>,
}

impl<C> Coordinator<C>
where
    C: TxnClient + Send + 'static,
    C::Msg: Wire + Send + 'static,
{
    fn connect(
        settings: &Settings,
        notify: Arc<dyn Fn() + Send + Sync>,
        make: impl Fn(ClientId, u32) -> C + Send + 'static,
    ) -> io::Result<Self> {
        let make: MakeClient<C> = Box::new(make);
        let pool = new_pool(settings, &notify, &make)?;
        Ok(Coordinator {
            slots: (0..pool.len()).map(|_| Slot::Free).collect(),
            settings: settings.clone(),
            notify,
            make,
            pool,
            waiting: VecDeque::new(),
            events: Vec::new(),
        })
    }

    fn begin_waiting(&mut self) -> io::Result<()> {
        let pool = &self.pool;
        let free: Vec<usize> = (0..self.slots.len())
            .filter(|&i| matches!(self.slots[i], Slot::Free) && !pool.client(i).busy())
            .take(self.waiting.len())
            .collect();
        for i in free {
            let job = self.waiting.pop_front().expect("one job per free client");
            let (ops, last) = job.plan.first_shot();
            assert!(
                !ops.is_empty(),
                "a plan that needs no transaction is answered locally"
            );
            self.slots[i] = Slot::Running {
                plan: Box::new(job.plan),
                reads: Vec::new(),
                deadline: job.deadline,
                asker: Some(job.asker),
            };
            self.pool.begin(i, ops, last)?;
        }
        Ok(())
    }

    fn time_out(&mut self, now: Instant, answers: &mut Vec<Answer>) {
        let timeout = self.settings.timeout.as_millis();
        // Plans that found every protocol client busy until their deadline never ran.
        while self.waiting.front().is_some_and(|j| j.deadline <= now) {
            let job = self.waiting.pop_front().expect("not empty");
            let why = format!(
                "TRYAGAIN all {} of the gateway's protocol clients stayed busy for {timeout} ms; the command did not run",
                self.slots.len(),
            );
            answers.push((job.asker, Err(Reply::Error(why))));
        }
        for slot in &mut self.slots {
            if let Slot::Running {
                deadline,
                asker: asker @ Some(_),
                ..
            } = slot
            {
                if *deadline <= now {
                    let why = format!(
                        "TIMEOUT no answer within {timeout} ms; the transaction's outcome is unknown"
                    );
                    answers.push((asker.take().expect("some"), Err(Reply::Error(why))));
                }
            }
        }
    }

    fn on_events(&mut self, answers: &mut Vec<Answer>) -> io::Result<()> {
        for (i, event) in std::mem::take(&mut self.events) {
            let Slot::Running { plan, reads, .. } = &mut self.slots[i] else {
                debug_assert!(false, "an event from client {i}, which runs no transaction");
                continue;
            };
            match event {
                ClientEvent::ShotDone { reads: shot } => {
                    reads.extend(shot);
                    let ops = plan.decide(reads);
                    self.pool.next_shot(i, ops, true)?;
                }
                ClientEvent::Restarted => reads.clear(),
                ClientEvent::Committed(outcome) => {
                    if let Slot::Running { plan, asker, .. } =
                        std::mem::replace(&mut self.slots[i], Slot::Free)
                    {
                        let done = plan.finish(&outcome.reads);
                        if let Some(asker) = asker {
                            answers.push((asker, Ok(done)));
                        }
                    }
                }
            }
        }
        Ok(())
    }
}

fn new_pool<C>(
    settings: &Settings,
    notify: &Arc<dyn Fn() + Send + Sync>,
    make: &MakeClient<C>,
) -> io::Result<Pool<C>>
where
    C: TxnClient,
    C::Msg: Wire + Send + 'static,
{
    let n = settings.groups.len() as u32;
    let clients = (0..settings.clients)
        .map(|j| make(settings.first_client + j, n))
        .collect();
    let pool = Pool::connect_groups(
        &settings.groups,
        Encoding::Binary,
        settings.first_client,
        clients,
    )?;
    let notify = Arc::clone(notify);
    pool.set_notify(Box::new(move || notify()));
    Ok(pool)
}

impl<C> Coordination for Coordinator<C>
where
    C: TxnClient + Send + 'static,
    C::Msg: Wire + Send + 'static,
{
    fn submit(&mut self, asker: Asker, plan: Plan) {
        let deadline = Instant::now() + self.settings.timeout;
        self.waiting.push_back(Job {
            plan,
            asker,
            deadline,
        });
    }

    fn turn(&mut self, answers: &mut Vec<Answer>) -> io::Result<()> {
        self.begin_waiting()?;
        self.time_out(Instant::now(), answers);
        self.pool.poll(Duration::ZERO, &mut self.events)?;
        self.on_events(answers)?;
        // A commit freed clients that plans wait for.
        self.begin_waiting()
    }

    fn next_turn_in(&self, now: Instant) -> Duration {
        let mut wait = TURN_EVERY;
        let deadlines = self.waiting.iter().map(|j| j.deadline);
        let running = self.slots.iter().filter_map(|s| match s {
            Slot::Running {
                deadline,
                asker: Some(_),
                ..
            } => Some(*deadline),
            _ => None,
        });
        for d in deadlines.chain(running) {
            wait = wait.min(d.saturating_duration_since(now));
        }
        wait
    }

    fn reconnect(&mut self, answers: &mut Vec<Answer>) -> io::Result<()> {
        let why = "CLUSTERDOWN the connections to the groups failed; the outcome is unknown";
        for slot in &mut self.slots {
            if let Slot::Running {
                asker: Some(asker), ..
            } = std::mem::replace(slot, Slot::Free)
            {
                answers.push((asker, Err(Reply::Error(why.into()))));
            }
        }
        for job in self.waiting.drain(..) {
            let why = "CLUSTERDOWN the groups cannot be reached; the command did not run";
            answers.push((job.asker, Err(Reply::Error(why.into()))));
        }
        self.pool = new_pool(&self.settings, &self.notify, &self.make)?;
        Ok(())
    }
}
