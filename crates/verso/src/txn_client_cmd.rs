//! `verso txn-client`: transactions against `verso txn-server` processes from the command
//! line, through `verso_txn_net::session` (the coordinator in this process): read keys,
//! write keys, move value between keys as two-shot transfers, or write unique values and
//! report every transaction for a history check (what the multi-process fault tests run
//! and kill).

use std::io::Write;
use std::process::ExitCode;

use clap::Args;
use verso_ncc::client::Placement;
use verso_ncc::wire::Encoding;
use verso_ncc::{Key, Op, Value};
use verso_txn_net::local;
use verso_txn_net::session::Session;
use verso_txn_net::Protocol;

#[derive(Args, Debug)]
pub struct TxnClientArgs {
    /// Every server's address by id, comma-separated (with `--placement hash`, key k below
    /// 2^56 lives on server k % count).
    #[arg(long, required_unless_present = "groups", conflicts_with = "groups")]
    servers: Option<String>,
    /// Instead of --servers, shards served by replication groups (`txn-server
    /// --replica`): each group's addresses comma-separated, the groups separated by `;`
    /// (`A,B,C;D,E,F`; one group: `A,B,C`).
    #[arg(long)]
    groups: Option<String>,
    /// The protocol the servers run.
    #[arg(long, default_value = "ncc", value_parser = crate::txn_cmd::parse_protocol)]
    protocol: Protocol,
    /// This client's id: unique among the clients of the cluster at any one time.
    #[arg(long)]
    client: u32,
    /// binary or resp.
    #[arg(long, default_value = "binary")]
    wire: Encoding,
    /// How keys are placed on the groups: `hash` (key k on server k % count, as
    /// `txn-server` clusters and `bench txn` place them) or `slots` (Redis hash slots split
    /// evenly over the groups, as `verso gateway` places them). Every client of the
    /// groups must agree.
    #[arg(long, default_value = "hash", value_parser = crate::gateway_cmd::parse_placement)]
    placement: Placement,
    /// Read these keys in one read-only transaction and print `key value` lines.
    #[arg(long, value_delimiter = ',', value_name = "K,K,...")]
    get: Vec<u64>,
    /// Write these pairs in one transaction.
    #[arg(long, value_delimiter = ',', value_name = "K=V,...", value_parser = parse_pair)]
    put: Vec<(u64, u64)>,
    /// Run this many transfers (0: until killed) of 1-5 units between random keys
    /// 0..--keys, one of each pair on an even and one on an odd key (so, under `--placement
    /// hash` over two servers, on different servers); print `committed N` after each.
    #[arg(long)]
    transfers: Option<u64>,
    /// Keys the transfers move value between (0..KEYS).
    #[arg(long, default_value_t = 6)]
    keys: u64,
    /// Seeds the transfers' choice of keys and amounts.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Run this many transactions (0: until killed) over keys 0..--keys for a history
    /// check: a quarter read two keys, the rest read two keys and then write both with
    /// values no other transaction writes. Prints `begin T` before each (T: wall-clock
    /// microseconds) and, once it commits, `txn SEQ INVOKED COMPLETED r:K=V,.. w:K=V,..`.
    /// Unique among clients while --client is below 4096.
    #[arg(long, conflicts_with = "transfers")]
    reported: Option<u64>,
}

/// A key or a value of this command line as its number: 8 bytes big-endian, or none for
/// the empty value (0). Bytes some other client wrote show as hex.
fn number(bytes: &[u8]) -> String {
    match bytes.try_into() {
        Ok(b) => u64::from_be_bytes(b).to_string(),
        Err(_) if bytes.is_empty() => "0".into(),
        Err(_) => bytes.iter().map(|b| format!("{b:02x}")).collect::<String>() + " (hex)",
    }
}

fn parse_pair(s: &str) -> Result<(u64, u64), String> {
    let (k, v) = s.split_once('=').ok_or("K=V")?;
    Ok((
        k.trim().parse().map_err(|_| format!("key {k:?}"))?,
        v.trim().parse().map_err(|_| format!("value {v:?}"))?,
    ))
}

pub fn run(args: &TxnClientArgs) -> ExitCode {
    match run_inner(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: txn-client {}: {e}", args.client);
            ExitCode::FAILURE
        }
    }
}

fn run_inner(args: &TxnClientArgs) -> std::io::Result<()> {
    let mut s = match (&args.groups, &args.servers) {
        (Some(groups), _) => {
            let groups = local::parse_groups(groups)?;
            Session::connect_placed(
                &groups,
                args.placement,
                args.protocol,
                args.client,
                args.wire,
            )?
        }
        (None, Some(servers)) => {
            let servers: Vec<Vec<_>> = local::parse_peers(servers)?
                .into_iter()
                .map(|a| vec![a])
                .collect();
            Session::connect_placed(
                &servers,
                args.placement,
                args.protocol,
                args.client,
                args.wire,
            )?
        }
        (None, None) => {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "--servers or --groups is required",
            ))
        }
    };
    let mut out = std::io::stdout().lock();
    // Keys and values on this command line are numbers (their 8 bytes, big-endian).
    if !args.put.is_empty() {
        let put: Vec<(Key, Value)> = args
            .put
            .iter()
            .map(|&(k, v)| (k.into(), v.into()))
            .collect();
        let o = s.put(&put)?;
        writeln!(out, "committed at {}.{}", o.commit_ts.clk, o.commit_ts.cid)?;
    }
    if !args.get.is_empty() {
        let get: Vec<Key> = args.get.iter().map(|&k| k.into()).collect();
        for (k, v) in s.get(&get)? {
            writeln!(out, "{} {}", number(k.as_bytes()), number(v.as_bytes()))?;
        }
    }
    if let Some(count) = args.reported {
        reported(&mut s, args, count, &mut out)?;
    }
    if let Some(count) = args.transfers {
        if args.keys < 2 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "--keys: at least 2",
            ));
        }
        let mut rng = args.seed.max(1);
        let mut below = |n: u64| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng % n
        };
        let mut done = 0u64;
        while count == 0 || done < count {
            let even = below(args.keys.div_ceil(2)) * 2;
            let odd = (below(args.keys / 2) * 2 + 1).min(args.keys - 1);
            let (from, to) = if done.is_multiple_of(2) {
                (even, odd)
            } else {
                (odd, even)
            };
            let amount = 1 + below(5);
            s.transact(vec![Op::read(from), Op::read(to)], |reads| {
                let number = |v: &Value| v.to_u64().unwrap_or(0);
                let (a, b) = (number(&reads[0].1), number(&reads[1].1));
                let ops = vec![
                    Op::write(from, a.wrapping_sub(amount)),
                    Op::write(to, b.wrapping_add(amount)),
                ];
                (ops, true)
            })?;
            done += 1;
            writeln!(out, "committed {done}")?;
            out.flush()?;
        }
    }
    Ok(())
}

/// `--reported`: transactions over unique values, each reported for a history check.
fn reported(
    s: &mut Session,
    args: &TxnClientArgs,
    count: u64,
    out: &mut impl Write,
) -> std::io::Result<()> {
    if args.keys < 2 {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "--keys: at least 2",
        ));
    }
    let mut rng = args.seed.max(1);
    let mut below = move |n: u64| {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng % n
    };
    // Values unique across clients (the id in the top 12 bits) and across processes that
    // take one id in turn (each starts from its clock, which runs ahead of its writes).
    let mut next_value =
        (u64::from(args.client) << 52) | (verso_txn_net::now_us() & ((1 << 52) - 1));
    let pairs = |v: &[(Key, Value)]| {
        v.iter()
            .map(|(k, v)| format!("{}={}", number(k.as_bytes()), number(v.as_bytes())))
            .collect::<Vec<_>>()
            .join(",")
    };
    let mut done = 0u64;
    while count == 0 || done < count {
        let a = below(args.keys);
        let b = (a + 1 + below(args.keys - 1)) % args.keys;
        let invoked = verso_txn_net::now_us();
        writeln!(out, "begin {invoked}")?;
        out.flush()?;
        let outcome = if below(4) == 0 {
            s.read(&[a.into(), b.into()])?
        } else {
            let (va, vb) = (next_value, next_value + 1);
            next_value += 2;
            s.transact(vec![Op::read(a), Op::read(b)], |_| {
                (vec![Op::write(a, va), Op::write(b, vb)], true)
            })?
        };
        let completed = verso_txn_net::now_us();
        writeln!(
            out,
            "txn {} {invoked} {completed} r:{} w:{}",
            outcome.txn.seq,
            pairs(&outcome.reads),
            pairs(&outcome.writes())
        )?;
        out.flush()?;
        done += 1;
    }
    Ok(())
}
