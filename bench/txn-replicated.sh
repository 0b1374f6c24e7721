#!/usr/bin/env bash
# NCC over replicated shards against plain servers, and dOCC the same way, side by side:
# Google-F1 on 2 shards, closed loop, each configuration in turn, RUNS times over
# (BENCHMARKS.md, "NCC over replicated shards between processes").
#
#   bench/txn-replicated.sh [RUNS] [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-3}
secs=${2:-5}
cargo build --release -q -p verso
for run in $(seq "$runs"); do
  for cfg in "ncc|" "ncc|--replicated answers-on-disk" "ncc|--replicated sync" \
             "ncc|--replicated lazy" "docc|" "docc|--replicated answers-on-disk"; do
    p=${cfg%%|*}; extra=${cfg#*|}
    # shellcheck disable=SC2086
    line=$(target/release/verso bench txn --workload f1 --protocols "$p" --seconds "$secs" $extra | tail -1)
    echo "run=$run [$p $extra] $line"
  done
done
echo "$(date -u +%F), commit $(git rev-parse --short HEAD), load average $(cut -d' ' -f1-3 /proc/loadavg)"
