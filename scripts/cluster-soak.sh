#!/usr/bin/env bash
# Runs the three-process replication test (crates/verso/tests/cluster.rs) N times with
# ROUNDS kill/restart rounds each (default 10 x 20), stopping at the first failure, whose
# seed the test prints.
set -euo pipefail
n=${1:-10}
rounds=${2:-20}
cd "$(dirname "$0")/.."
cargo test --release -p verso --test cluster --no-run --quiet
for i in $(seq "$n"); do
    echo "== run $i of $n"
    VERSO_CLUSTER_ROUNDS=$rounds cargo test --release -p verso --test cluster --quiet -- --nocapture 2>&1 \
        | grep -E "SEED|total crash|transfers|panicked|test result"
done
