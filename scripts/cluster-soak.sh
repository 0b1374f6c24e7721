#!/usr/bin/env bash
# Runs the three-process replication tests N times, stopping at the first failure, whose
# seed the test prints: crates/verso/tests/cluster.rs with ROUNDS kill/restart rounds each,
# and crates/verso/tests/partition.rs (links cut and blackholed by proxies, the history
# checked by verso-check). Default 10 runs x 20 rounds.
set -euo pipefail
n=${1:-10}
rounds=${2:-20}
cd "$(dirname "$0")/.."
cargo test --release -p verso --test cluster --test partition --no-run --quiet
for i in $(seq "$n"); do
    echo "== run $i of $n"
    VERSO_CLUSTER_ROUNDS=$rounds cargo test --release -p verso --test cluster --test partition --quiet -- --nocapture 2>&1 \
        | grep -E "SEED|total crash|transfers|strictly|panicked|test result"
done
