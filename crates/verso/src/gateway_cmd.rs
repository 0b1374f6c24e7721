//! `verso gateway`: the Redis protocol over NCC's replicated shard groups
//! (`verso-gateway`). With `--local-groups N` it first starts N groups of three `verso
//! txn-server --replica` processes on loopback, their logs under `--dir`.

use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use verso_gateway::coordinator::Settings;
use verso_gateway::server::Gateway;
use verso_ncc::client::Placement;
use verso_txn_net::group::GroupDurability;
use verso_txn_net::local_groups::{GroupsSpec, LocalGroups};
use verso_txn_net::{local, Protocol, StoreKind};

#[derive(Args, Debug)]
pub struct GatewayArgs {
    /// Where clients connect (port 0: any; the address is printed as `listening ADDR`).
    #[arg(long, default_value = "127.0.0.1:6390")]
    listen: SocketAddr,
    /// The groups' replicas: each group's addresses comma-separated, the groups separated
    /// by `;` (`A,B,C;D,E,F`), in the order --placement assigns keys to them.
    #[arg(
        long,
        required_unless_present = "local_groups",
        conflicts_with = "local_groups"
    )]
    groups: Option<String>,
    /// Instead of --groups: start this many groups of three replicas on loopback first
    /// (stopped with the gateway), their logs under --dir.
    #[arg(long)]
    local_groups: Option<u32>,
    /// With --local-groups: the replicas' directories (kept: a restart with the same
    /// number of groups recovers the data).
    #[arg(long, default_value = "verso-gateway-data")]
    dir: PathBuf,
    /// With --local-groups: answers-on-disk, sync or lazy.
    #[arg(long, default_value = "answers-on-disk", value_parser = crate::txn_cmd::parse_durability)]
    durability: GroupDurability,
    /// Which group holds a key: `slots` (Redis Cluster's hash slots, split evenly over
    /// the groups in order, so keys sharing a `{tag}` share a group) or `hash` (NCC's own
    /// placement, as `txn-client` and `bench txn` use). Every client of the groups must
    /// use the same.
    #[arg(long, default_value = "slots", value_parser = parse_placement)]
    placement: Placement,
    /// The protocol the groups run.
    #[arg(long, default_value = "ncc", value_parser = crate::txn_cmd::parse_protocol)]
    protocol: Protocol,
    /// The protocol client ids this gateway owns, FIRST-LAST (below 65,536): as many
    /// transactions run at once. No other client of the groups may use them meanwhile.
    #[arg(long, default_value = "1000-1255", value_parser = parse_ids)]
    client_ids: (u32, u32),
    /// A transaction still unanswered after this long is answered `TIMEOUT` (its outcome
    /// unknown).
    #[arg(long, default_value_t = 10_000)]
    timeout_ms: u64,
    /// Most client connections served at once (one event loop serves them all).
    #[arg(long, default_value_t = 1024)]
    max_clients: usize,
}

pub(crate) fn parse_placement(s: &str) -> Result<Placement, String> {
    match s {
        "slots" => Ok(Placement::Slots),
        "hash" => Ok(Placement::Hash),
        _ => Err(format!("{s:?}: slots or hash")),
    }
}

fn parse_ids(s: &str) -> Result<(u32, u32), String> {
    let (a, b) = s.split_once('-').ok_or("FIRST-LAST")?;
    let (a, b): (u32, u32) = (
        a.trim().parse().map_err(|_| format!("{a:?}"))?,
        b.trim().parse().map_err(|_| format!("{b:?}"))?,
    );
    if a > b || b >= 1 << 16 {
        return Err(format!("{s}: FIRST <= LAST < 65536"));
    }
    Ok((a, b))
}

pub fn run(args: &GatewayArgs) -> ExitCode {
    match run_inner(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: gateway: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run_inner(args: &GatewayArgs) -> std::io::Result<()> {
    // Kept alive while the gateway serves; dropping it stops the replicas.
    let mut local_groups: Option<LocalGroups> = None;
    let groups = match (&args.groups, args.local_groups) {
        (Some(g), _) => local::parse_groups(g)?,
        (None, Some(n)) if n > 0 => {
            let exe = std::env::current_exe()?;
            let spec = GroupsSpec {
                servers: n,
                protocol: args.protocol,
                keep_history: false,
                store: StoreKind::Memory,
                durability: args.durability,
                log_max_bytes: None,
            };
            eprintln!(
                "gateway: starting {n} groups of three replicas under {}",
                args.dir.display()
            );
            let g = LocalGroups::start_spec(&exe, spec, &args.dir)?;
            let addrs = g.groups.clone();
            local_groups = Some(g);
            addrs
        }
        _ => {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "--groups or --local-groups (at least 1) is required",
            ))
        }
    };
    let settings = Settings {
        groups,
        protocol: args.protocol,
        placement: args.placement,
        first_client: args.client_ids.0,
        clients: args.client_ids.1 - args.client_ids.0 + 1,
        timeout: Duration::from_millis(args.timeout_ms),
    };
    let listener = TcpListener::bind(args.listen)?;
    let addr = listener.local_addr()?;
    let gateway = Gateway::new(&settings, listener, args.max_clients)?;
    println!("listening {addr}");
    let Some(local_groups) = local_groups else {
        return gateway.run();
    };
    // The replicas it started stop with it: on SIGINT or SIGTERM the groups are dropped
    // (each replica killed) before the process exits.
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, Arc::clone(&stop))?;
    }
    let serving = std::thread::Builder::new()
        .name("gateway".into())
        .spawn(move || gateway.run())?;
    while !stop.load(Ordering::SeqCst) && !serving.is_finished() {
        std::thread::sleep(Duration::from_millis(50));
    }
    eprintln!("gateway: stopping the local groups");
    drop(local_groups);
    if serving.is_finished() {
        return serving
            .join()
            .map_err(|_| std::io::Error::other("the accepting thread panicked"))?;
    }
    Ok(())
}
