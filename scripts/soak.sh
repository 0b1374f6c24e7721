#!/usr/bin/env bash
# Soak runs of the history-checked workloads: the engine's randomized workloads (key-value
# with deletes and ranges, checked against engine timestamps; and Elle's list-append,
# checked by the order the lists show) under every protocol, and the server's workloads
# over TCP, each for N seconds (default 60) in rounds of fresh seeds. A failure prints the
# seed and the offending cycle.
#
#   scripts/soak.sh [seconds-per-protocol]
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-60}"
export VERSO_SOAK_SECS="$secs"
echo "== soak: $secs s per protocol and workload"
cargo test --release -p verso-engine --test histories --test append_histories \
  -- --ignored soak --nocapture --test-threads 1
cargo test --release -p verso-server --test append_history -- --ignored soak --nocapture --test-threads 1
# Lazy VSR under the simulator (about 1,000 seeds a second), with total crashes, and with
# checkpoints slow enough that view changes meet them.
cargo run --release --quiet -p verso -- sim vsr --seeds $((secs * 500)) --seed "$RANDOM$RANDOM" --faults total
cargo run --release --quiet -p verso -- sim vsr --seeds $((secs * 500)) --seed "$RANDOM$RANDOM" --faults lagging \
  --slow-checkpoints
# Sharding's slot moves under the simulator: about 500 seeds a second on this machine.
cargo run --release --quiet -p verso -- sim cluster --seeds $((secs * 500)) --seed "$RANDOM$RANDOM"
# ... with every data group three real Lazy VSR replicas (about 100 seeds a second).
cargo run --release --quiet -p verso -- sim cluster --seeds $((secs * 100)) --seed "$RANDOM$RANDOM" --replicated
# NCC's transactions under the simulator (about 1,500 seeds a second), contended and lossy too.
cargo run --release --quiet -p verso -- sim ncc --seeds $((secs * 1000)) --seed "$RANDOM$RANDOM"
cargo run --release --quiet -p verso -- sim ncc --seeds $((secs * 500)) --seed "$RANDOM$RANDOM" \
  --keys 3 --skew 5000 --loss 10
# Clients crashing and pausing, with a recovery timeout short enough to race live clients.
cargo run --release --quiet -p verso -- sim ncc --seeds $((secs * 500)) --seed "$RANDOM$RANDOM" \
  --crash 25 --pause 25 --recovery-after 5000
# ... and a crashed client's id taken over by a new process before the recovery timeout.
cargo run --release --quiet -p verso -- sim ncc --seeds $((secs * 500)) --seed "$RANDOM$RANDOM" \
  --crash 25 --pause 25 --recovery-after 5000 --restart
# Each server behind a modelled replication log that fails over and crashes whole (VSR-Sync).
cargo run --release --quiet -p verso -- sim ncc --seeds $((secs * 300)) --seed "$RANDOM$RANDOM" \
  --replicated sync --group-failovers 3 --group-total-crashes 1 --crash 10 --pause 10
cargo run --release --quiet -p verso -- sim ncc --seeds $((secs * 300)) --seed "$RANDOM$RANDOM" \
  --replicated lazy-answers-on-disk --group-failovers 3 --group-total-crashes 1
# ... with each group three real Lazy VSR replicas (about 100 seeds a second).
cargo run --release --quiet -p verso -- sim ncc --seeds $((secs * 100)) --seed "$RANDOM$RANDOM" \
  --replicated lazy-answers-on-disk --vsr --group-failovers 3 --group-total-crashes 1 \
  --crash 10 --pause 10 --restart --loss 5
# The baselines on the same simulator (TAPIR-CC's strict violations are counted, not failed).
for p in docc d2pl-no-wait d2pl-wound-wait tapir-cc; do
  cargo run --release --quiet -p verso -- sim ncc --protocol "$p" --seeds $((secs * 200)) --seed "$RANDOM$RANDOM"
done
echo "== soak passed"
