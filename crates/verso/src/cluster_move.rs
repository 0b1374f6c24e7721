//! `verso cluster move`: starts an online slot move at the configuration group and follows
//! it to the end, with a progress line (the source's chunks acknowledged by the target).

use std::io::{BufRead, BufReader, IsTerminal, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use clap::Args;

#[derive(Args, Debug)]
pub struct MoveArgs {
    /// The slots to move: `A-B,C,...` (all of one group).
    #[arg(long)]
    slots: String,
    /// The group that takes them.
    #[arg(long)]
    to: u16,
    #[command(flatten)]
    cluster: ClusterArgs,
}

/// Where `move` and `rebalance` reach the cluster.
#[derive(Args, Debug)]
pub struct ClusterArgs {
    /// Any node of the cluster (the configuration group's node is found from it).
    #[arg(long, default_value = "127.0.0.1:7000")]
    node: String,
    /// AUTH password, if the servers require one.
    #[arg(long)]
    password: Option<String>,
    /// Seconds each move may take (it goes on in the cluster after that).
    #[arg(long, default_value_t = 600)]
    timeout: u64,
}

/// One RESP reply, as much as these commands need.
#[derive(Debug)]
enum Resp {
    Simple,
    Error(String),
    Int(i64),
    Bulk(Option<Vec<u8>>),
    Array(Vec<Resp>),
}

struct Conn {
    reader: BufReader<TcpStream>,
}

impl Conn {
    fn open(addr: &str, password: Option<&str>) -> Result<Conn, String> {
        let target: SocketAddr = verso_replication::config::resolve(addr)?;
        let s = TcpStream::connect_timeout(&target, Duration::from_secs(3))
            .map_err(|e| format!("cannot connect to {addr}: {e}"))?;
        s.set_read_timeout(Some(Duration::from_secs(10))).ok();
        let mut c = Conn {
            reader: BufReader::new(s),
        };
        if let Some(p) = password {
            if let Resp::Error(e) = c.call(&["AUTH", p])? {
                return Err(format!("AUTH: {e}"));
            }
        }
        Ok(c)
    }

    fn call(&mut self, args: &[&str]) -> Result<Resp, String> {
        let mut req = format!("*{}\r\n", args.len());
        for a in args {
            req += &format!("${}\r\n{a}\r\n", a.len());
        }
        self.reader
            .get_mut()
            .write_all(req.as_bytes())
            .map_err(|e| format!("send: {e}"))?;
        self.read()
    }

    fn read(&mut self) -> Result<Resp, String> {
        let mut line = String::new();
        self.reader
            .read_line(&mut line)
            .map_err(|e| format!("read: {e}"))?;
        let line = line.trim_end();
        let (kind, rest) = line
            .split_at_checked(1)
            .ok_or("the server closed the connection")?;
        Ok(match kind {
            "+" => Resp::Simple,
            "-" => Resp::Error(rest.into()),
            ":" => Resp::Int(rest.parse().map_err(|_| "bad integer")?),
            "$" => {
                let n: i64 = rest.parse().map_err(|_| "bad length")?;
                if n < 0 {
                    Resp::Bulk(None)
                } else {
                    let mut b = vec![0u8; n as usize + 2];
                    self.reader
                        .read_exact(&mut b)
                        .map_err(|e| format!("read: {e}"))?;
                    b.truncate(n as usize);
                    Resp::Bulk(Some(b))
                }
            }
            "*" => {
                let n: i64 = rest.parse().map_err(|_| "bad length")?;
                (0..n.max(0))
                    .map(|_| self.read())
                    .collect::<Result<_, _>>()
                    .map(Resp::Array)?
            }
            _ => return Err(format!("unexpected reply {line:?}")),
        })
    }

    /// CLUSTER MOVES's lines.
    fn moves(&mut self) -> Result<Vec<String>, String> {
        match self.call(&["CLUSTER", "MOVES"])? {
            Resp::Error(e) => Err(e),
            Resp::Array(lines) => Ok(lines
                .into_iter()
                .filter_map(|l| match l {
                    Resp::Bulk(Some(b)) => Some(String::from_utf8_lossy(&b).into_owned()),
                    _ => None,
                })
                .collect()),
            other => Err(format!("CLUSTER MOVES answered {other:?}")),
        }
    }
}

/// The address a `CONFIG ...: ADDR` error sends a move's caller to (a node that is not the
/// configuration group's primary answers so), if it names one.
fn config_redirect(error: &str) -> Option<String> {
    let addr = error.strip_prefix("CONFIG ")?.rsplit(": ").next()?;
    addr.parse::<std::net::SocketAddr>()
        .is_ok()
        .then(|| addr.to_string())
}

/// The client address of the primary that serves `slot`, from CLUSTER SLOTS.
fn owner_of(c: &mut Conn, slot: u16) -> Result<String, String> {
    let Resp::Array(runs) = c.call(&["CLUSTER", "SLOTS"])? else {
        return Err("CLUSTER SLOTS did not answer an array".into());
    };
    for run in runs {
        if let Resp::Array(r) = run {
            if let (Some(Resp::Int(a)), Some(Resp::Int(b)), Some(Resp::Array(node))) =
                (r.first(), r.get(1), r.get(2))
            {
                if (*a..=*b).contains(&i64::from(slot)) {
                    if let (Some(Resp::Bulk(Some(ip))), Some(Resp::Int(port))) =
                        (node.first(), node.get(1))
                    {
                        return Ok(format!("{}:{port}", String::from_utf8_lossy(ip)));
                    }
                }
            }
        }
    }
    Err(format!("no group serves slot {slot}"))
}

/// `chunks=N acked=M` of move `id` in a source's status line.
fn chunk_progress(lines: &[String], id: i64) -> Option<(u64, u64)> {
    let line = lines
        .iter()
        .find(|l| l.contains(&format!("sending {id} ")))?;
    let part = line.split(&format!("sending {id} ")).nth(1)?;
    let field = |name: &str| -> Option<u64> {
        part.split_whitespace()
            .find_map(|w| w.strip_prefix(name))
            .and_then(|v| v.trim_end_matches(';').parse().ok())
    };
    Some((field("acked=")?, field("chunks=")?))
}

pub fn run(args: &MoveArgs) -> Result<(), String> {
    move_slots(
        &args.cluster.node,
        args.cluster.password.as_deref(),
        &args.slots,
        args.to,
        args.cluster.timeout,
    )
}

/// `verso cluster rebalance`: spreads the slots evenly over the groups, one move at a time.
#[derive(Args, Debug)]
pub struct RebalanceArgs {
    #[command(flatten)]
    cluster: ClusterArgs,
}

/// Each group's slots as the configuration group's node knows them (`CLUSTER VERSO-MAP`:
/// empty groups included, which CLUSTER SLOTS leaves out).
fn group_slots(c: &mut Conn) -> Result<Vec<(u16, Vec<u16>)>, String> {
    let Resp::Bulk(Some(text)) = c.call(&["CLUSTER", "VERSO-MAP"])? else {
        return Err("CLUSTER VERSO-MAP did not answer a map".into());
    };
    let text = String::from_utf8_lossy(&text);
    let mut groups = Vec::new();
    for line in text.lines().skip(1) {
        let (id, ranges) = line.split_once(' ').unwrap_or((line, ""));
        let id: u16 = id.parse().map_err(|_| format!("bad map line {line:?}"))?;
        let mut slots = Vec::new();
        for r in ranges.split(',').filter(|r| !r.is_empty()) {
            let (a, b) = r.split_once('-').unwrap_or((r, r));
            let (a, b): (u16, u16) = (
                a.parse().map_err(|_| format!("bad range {r:?}"))?,
                b.parse().map_err(|_| format!("bad range {r:?}"))?,
            );
            slots.extend(a..=b);
        }
        groups.push((id, slots));
    }
    Ok(groups)
}

/// The next move that brings the map closer to even: the group with the most slots above
/// its share gives its highest ones to the group with the fewest below its share.
pub fn next_rebalance_move(groups: &[(u16, Vec<u16>)]) -> Option<(Vec<u16>, u16)> {
    let n = groups.len();
    if n < 2 {
        return None;
    }
    let total: usize = groups.iter().map(|(_, s)| s.len()).sum();
    // The first `total % n` groups in id order take one slot more.
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by_key(|&i| groups[i].0);
    let share = |i: usize| {
        let rank = order
            .iter()
            .position(|&j| j == i)
            .expect("every group ranked");
        total / n + usize::from(rank < total % n)
    };
    let donor = (0..n)
        .filter(|&i| groups[i].1.len() > share(i))
        .max_by_key(|&i| groups[i].1.len() - share(i))?;
    let taker = (0..n)
        .filter(|&i| groups[i].1.len() < share(i))
        .max_by_key(|&i| share(i) - groups[i].1.len())?;
    let count = (groups[donor].1.len() - share(donor)).min(share(taker) - groups[taker].1.len());
    let mut slots = groups[donor].1.clone();
    slots.sort_unstable();
    Some((slots[slots.len() - count..].to_vec(), groups[taker].0))
}

/// `A-B,C` for a sorted list of slots.
fn ranges_text(slots: &[u16]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < slots.len() {
        let mut j = i;
        while j + 1 < slots.len() && slots[j + 1] == slots[j] + 1 {
            j += 1;
        }
        out.push(if i == j {
            slots[i].to_string()
        } else {
            format!("{}-{}", slots[i], slots[j])
        });
        i = j + 1;
    }
    out.join(",")
}

pub fn rebalance(args: &RebalanceArgs) -> Result<(), String> {
    let ClusterArgs {
        node,
        password,
        timeout,
    } = &args.cluster;
    let pw = password.as_deref();
    let mut conn = Conn::open(node, pw)?;
    // Each move brings its donor or its taker (or both) to its share for good: fewer moves
    // than groups, so this ends well within the bound.
    for done in 0..64 {
        let groups = group_slots(&mut conn)?;
        let Some((slots, to)) = next_rebalance_move(&groups) else {
            eprintln!(
                "rebalance: even after {done} moves ({} groups)",
                groups.len()
            );
            return Ok(());
        };
        eprintln!(
            "rebalance: move {}: {} slots to group {to}",
            done + 1,
            slots.len()
        );
        move_slots(node, pw, &ranges_text(&slots), to, *timeout)?;
        // The map reaches this node within the prober's interval.
        std::thread::sleep(Duration::from_millis(700));
    }
    Err("rebalance did not converge in 64 moves".into())
}

fn move_slots(
    node: &str,
    pw: Option<&str>,
    slots: &str,
    to_group: u16,
    timeout: u64,
) -> Result<(), String> {
    let mut conn = Conn::open(node, pw)?;
    let first: u16 = slots
        .split(['-', ','])
        .next()
        .and_then(|s| s.trim().parse().ok())
        .ok_or("--slots must look like A-B,C,...")?;
    let source = owner_of(&mut conn, first)?;
    let to = to_group.to_string();
    let mut reply = conn.call(&["CLUSTER", "MOVESLOTS", slots, &to])?;
    let mut config_addr = node.to_string();
    // Another node, or a backup of the configuration group: the error names the node to
    // ask (a backup names its primary, which may be another backup a moment later).
    for _ in 0..4 {
        let Resp::Error(e) = &reply else { break };
        let Some(addr) = config_redirect(e) else {
            break;
        };
        config_addr = addr;
        conn = Conn::open(&config_addr, pw)?;
        reply = conn.call(&["CLUSTER", "MOVESLOTS", slots, &to])?;
    }
    let id = match reply {
        Resp::Int(id) => id,
        Resp::Error(e) => return Err(e),
        other => return Err(format!("unexpected answer {other:?}")),
    };
    eprintln!("move {id}: slots {slots} from {source} to group {to_group} (configuration at {config_addr})");
    let mut src = Conn::open(&source, pw).ok();
    let tty = std::io::stderr().is_terminal();
    let started = Instant::now();
    let deadline = started + Duration::from_secs(timeout);
    let mut last = String::new();
    loop {
        // The configuration group's node may restart meanwhile: the move goes on in the
        // cluster, and this follows it again once the node answers.
        let config_lines = match conn.moves() {
            Ok(lines) => lines,
            Err(e) => {
                if Instant::now() > deadline {
                    return Err(format!("lost the configuration group's node: {e}"));
                }
                // Its group failed over: this node is a backup now and names the primary.
                if let Some(addr) = config_redirect(&e) {
                    config_addr = addr;
                }
                std::thread::sleep(Duration::from_millis(200));
                if let Ok(c) = Conn::open(&config_addr, pw) {
                    conn = c;
                }
                continue;
            }
        };
        let pending = config_lines
            .iter()
            .any(|l| l.contains(&format!("move {id} ")));
        if !pending {
            if tty {
                eprintln!();
            }
            eprintln!(
                "move {id}: done in {:.2} s",
                started.elapsed().as_secs_f64()
            );
            return Ok(());
        }
        let phase = if config_lines.iter().any(|l| l.contains("Ended")) {
            "ended at the target; the source is deleting its copy"
        } else {
            "streaming"
        };
        let progress = src
            .as_mut()
            .and_then(|s| s.moves().ok())
            .and_then(|l| chunk_progress(&l, id));
        if progress.is_none() && src.is_none() {
            src = Conn::open(&source, pw).ok();
        }
        let line = match progress {
            Some((acked, total)) => {
                let width = 30u64;
                let done = (acked * width)
                    .checked_div(total)
                    .unwrap_or(width)
                    .min(width);
                format!(
                    "move {id}: [{}{}] {acked}/{total} chunks, {phase}, {:.1} s",
                    "#".repeat(done as usize),
                    ".".repeat((width - done) as usize),
                    started.elapsed().as_secs_f64()
                )
            }
            None => format!(
                "move {id}: {phase}, {:.1} s",
                started.elapsed().as_secs_f64()
            ),
        };
        if tty {
            eprint!("\r{line:<100}");
        } else if line.split(',').next() != last.split(',').next() {
            eprintln!("{line}");
        }
        last = line;
        if Instant::now() > deadline {
            return Err(format!(
                "move {id} has not finished after {timeout} s; it goes on in the cluster (CLUSTER MOVES shows it)"
            ));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Applies the plan until it stops: every group ends within one slot of the others,
    /// nothing is lost or doubled, and it takes at most one move per group.
    #[test]
    fn rebalance_plans_even_out_any_map() {
        let mut seed = 7u64;
        for case in 0..200 {
            let n = 2 + case % 5;
            let mut groups: Vec<(u16, Vec<u16>)> =
                (0..n).map(|g| (g as u16 * 3, Vec::new())).collect();
            for slot in 0..16384u16 {
                seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                // Skewed: the first group takes most slots in some cases.
                let g = if case % 3 == 0 && !seed.is_multiple_of(4) {
                    0
                } else {
                    (seed >> 33) as usize % n
                };
                groups[g].1.push(slot);
            }
            let mut moves = 0;
            while let Some((slots, to)) = next_rebalance_move(&groups) {
                for (_, s) in groups.iter_mut() {
                    s.retain(|x| !slots.contains(x));
                }
                groups
                    .iter_mut()
                    .find(|(id, _)| *id == to)
                    .unwrap()
                    .1
                    .extend(&slots);
                moves += 1;
                assert!(moves < n, "case {case}: {moves} moves for {n} groups");
            }
            let sizes: Vec<usize> = groups.iter().map(|(_, s)| s.len()).collect();
            assert_eq!(sizes.iter().sum::<usize>(), 16384);
            assert!(
                sizes.iter().max().unwrap() - sizes.iter().min().unwrap() <= 1,
                "case {case}: {sizes:?}"
            );
        }
        assert_eq!(ranges_text(&[1, 2, 3, 7, 9, 10]), "1-3,7,9-10");
    }
}
