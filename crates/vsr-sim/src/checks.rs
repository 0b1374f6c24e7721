//! What a finished run must satisfy, checked against the final log (the chain of entries
//! the converged primary holds, rebuilt from what the wire carried) rather than against any
//! replica's word for it.

use std::collections::{BTreeMap, HashMap};

use verso_check::{check_linearizable_registers, RegisterOp, RegisterOpKind};
use verso_vsr::kv::{KvApp, KvOp, KvReply};
use verso_vsr::{Body, Entry, ViewNum, Viewstamp};

use crate::Faults;

/// One client operation as the simulator saw it.
#[derive(Clone, Debug)]
pub(crate) struct OpRecord {
    pub client: u64,
    pub seq: u64,
    pub op: KvOp,
    pub sync: bool,
    pub start: u64,
    pub end: Option<u64>,
    pub result: Option<KvReply>,
    pub vs: Option<Viewstamp>,
    pub dp: Option<Viewstamp>,
    /// The client's expected view when the reply came.
    pub ev: ViewNum,
    /// The primary said it was executed but had no reply left.
    pub executed_unknown: bool,
}

impl OpRecord {
    pub(crate) fn new(client: u64, seq: u64, op: KvOp, sync: bool, start: u64) -> Self {
        OpRecord {
            client,
            seq,
            op,
            sync,
            start,
            end: None,
            result: None,
            vs: None,
            dp: None,
            ev: ViewNum::ZERO,
            executed_unknown: false,
        }
    }
}

/// A read a primary answered from its state under its lease (`verso_vsr::Replica::lease_read`).
#[derive(Clone, Debug)]
pub(crate) struct LeaseRead {
    pub key: u64,
    pub observed: Option<u64>,
    /// The newest entry the state it read reflected.
    pub last: Viewstamp,
    pub start: u64,
    pub end: u64,
}

#[derive(Clone, Debug, Default)]
pub(crate) struct History {
    pub ops: Vec<OpRecord>,
    pub lease_reads: Vec<LeaseRead>,
    /// What clients were told they lost: (client, sequence numbers).
    pub forgotten: Vec<(u64, Vec<u64>)>,
}

/// Checks the run; returns how many acknowledged operations were lost.
pub(crate) fn check_run(
    history: &History,
    entries: &HashMap<Viewstamp, Entry<KvOp>>,
    top: Viewstamp,
    final_map: &BTreeMap<u64, u64>,
    announced_dps: &[Viewstamp],
    faults: Faults,
) -> Result<u64, String> {
    // The final log, rebuilt backwards from its last viewstamp.
    let mut chain = Vec::new();
    let mut at = top;
    while at != Viewstamp::ZERO {
        let e = entries
            .get(&at)
            .ok_or_else(|| format!("the final log's entry {at} never went over the wire"))?;
        chain.push(e);
        at = e.prev;
    }
    chain.reverse();
    let stamp_at: HashMap<u64, Viewstamp> = chain.iter().map(|e| (e.vs.op, e.vs)).collect();

    // Execute it as the sequential specification, with the client table's at-most-once.
    let mut map = BTreeMap::new();
    let mut last_seq: HashMap<u64, u64> = HashMap::new();
    let mut executed: HashMap<(u64, u64), (KvReply, Viewstamp)> = HashMap::new();
    for e in &chain {
        if let Body::Requests(rs) = &e.body {
            for r in rs {
                let last = last_seq.entry(r.client).or_default();
                if r.seq <= *last {
                    continue;
                }
                *last = r.seq;
                let reply = KvApp::apply_to(&mut map, &r.op);
                executed.insert((r.client, r.seq), (reply, e.vs));
            }
        }
    }
    if &map != final_map {
        return Err(format!(
            "the primary's state differs from its log's: {final_map:?} vs {map:?}"
        ));
    }

    // Theorem 4.3.3: every durable point announced is in the final log.
    for dp in announced_dps {
        if *dp != Viewstamp::ZERO && stamp_at.get(&dp.op) != Some(dp) {
            return Err(format!(
                "durable point {dp} was announced but the final log has {:?} at op {}",
                stamp_at.get(&dp.op),
                dp.op
            ));
        }
    }

    // Each acknowledged operation: in the final log with the result it was given, or lost.
    let mut lost = 0u64;
    let mut is_lost: HashMap<(u64, u64), bool> = HashMap::new();
    for o in &history.ops {
        let end = o
            .end
            .ok_or_else(|| format!("client {} seq {} never finished", o.client, o.seq))?;
        let _ = end;
        let (Some(result), Some(vs), Some(dp)) = (o.result, o.vs, o.dp) else {
            continue;
        };
        match executed.get(&(o.client, o.seq)) {
            Some((r, v)) => {
                if *r != result || *v != vs {
                    return Err(format!(
                        "client {} seq {} ({:?}) was answered {result:?} at {vs}, but the final \
                         log executes it at {v} giving {r:?}",
                        o.client, o.seq, o.op
                    ));
                }
                is_lost.insert((o.client, o.seq), false);
            }
            None => {
                lost += 1;
                is_lost.insert((o.client, o.seq), true);
                if o.sync {
                    return Err(format!(
                        "client {} seq {} was acknowledged as durable (synchronous) at {vs} and lost",
                        o.client, o.seq
                    ));
                }
                if dp.view == vs.view && dp.op >= vs.op {
                    return Err(format!(
                        "client {} seq {} at {vs} was covered by the durable point {dp} it was \
                         answered with, and lost",
                        o.client, o.seq
                    ));
                }
                if faults != Faults::Total {
                    return Err(format!(
                        "client {} seq {} at {vs} was acknowledged and lost, though at most f \
                         replicas ever lost their memory",
                        o.client, o.seq
                    ));
                }
            }
        }
    }

    // Lost operations are a suffix: of each client's operations within one expected view,
    // and of each view's acknowledged order.
    let mut by_client_view: BTreeMap<(u64, ViewNum), Vec<&OpRecord>> = BTreeMap::new();
    let mut by_view: BTreeMap<ViewNum, Vec<&OpRecord>> = BTreeMap::new();
    for o in history.ops.iter().filter(|o| o.vs.is_some()) {
        by_client_view.entry((o.client, o.ev)).or_default().push(o);
        by_view
            .entry(o.vs.expect("filtered").view)
            .or_default()
            .push(o);
    }
    for ((client, ev), mut ops) in by_client_view {
        ops.sort_by_key(|o| o.seq);
        suffix(&ops, &is_lost).map_err(|(a, b)| {
            format!("client {client} in view {ev}: seq {a} was lost but the later seq {b} survived")
        })?;
    }
    for (view, mut ops) in by_view {
        ops.sort_by_key(|o| o.vs);
        suffix(&ops, &is_lost).map_err(|(a, b)| {
            format!("view {view}: an acknowledged op (client seq {a}) was lost but a later one ({b}) survived")
        })?;
    }

    // Linearizability of what survived.
    let mut reg = Vec::new();
    for o in &history.ops {
        let survived = executed.contains_key(&(o.client, o.seq));
        if !survived {
            continue;
        }
        let end = o.end.expect("checked");
        let kind = match (o.op, o.result) {
            (KvOp::Put(_, v), _) => RegisterOpKind::Put { value: v },
            (KvOp::Delete(_), _) => RegisterOpKind::Remove,
            (KvOp::Get(_), Some(KvReply::Value(v))) => RegisterOpKind::Get { observed: v },
            (KvOp::Get(_), _) => continue,
        };
        let key = match o.op {
            KvOp::Get(k) | KvOp::Put(k, _) | KvOp::Delete(k) => k,
        };
        reg.push(RegisterOp {
            key: key.to_be_bytes().to_vec(),
            start: o.start,
            end,
            kind,
        });
    }
    // A lease read saw the log through `last`: if the final log holds `last`, it holds
    // all of that (a chain), and the read must fit; if not, it saw a lost suffix, which
    // only a total crash may lose (as an acknowledged operation's).
    for r in &history.lease_reads {
        if r.last != Viewstamp::ZERO && stamp_at.get(&r.last.op) != Some(&r.last) {
            if faults != Faults::Total {
                return Err(format!(
                    "a lease read answered at {} saw entry {}, which the final log lost",
                    r.end, r.last
                ));
            }
            continue;
        }
        reg.push(RegisterOp {
            key: r.key.to_be_bytes().to_vec(),
            start: r.start,
            end: r.end,
            kind: RegisterOpKind::Get {
                observed: r.observed,
            },
        });
    }
    check_linearizable_registers(&reg).map_err(|v| format!("not linearizable: {v}"))?;
    Ok(lost)
}

fn suffix(ops: &[&OpRecord], is_lost: &HashMap<(u64, u64), bool>) -> Result<(), (u64, u64)> {
    let mut first_lost = None;
    for o in ops {
        match (is_lost.get(&(o.client, o.seq)), first_lost) {
            (Some(true), None) => first_lost = Some(o.seq),
            (Some(false), Some(a)) => return Err((a, o.seq)),
            _ => {}
        }
    }
    Ok(())
}
