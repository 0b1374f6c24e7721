#!/usr/bin/env bash
# Runs the engine-core YCSB figures quoted in BENCHMARKS.md (default index: Masstree): each configuration RUNS times
# (default 3), alternating configurations so machine noise spreads evenly, and prints one
# markdown row per configuration with the median and the individual runs.
#
#   bench/ycsb-suite.sh [RUNS] [DURATION_S]
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-3}
duration=${2:-5}
cargo build --release -q -p verso
bin=target/release/verso

configs=(
  "1 read/txn, 1 thread|--threads 1 --read-ratio 100"
  "1 read/txn, 1 thread, raw index|--threads 1 --read-ratio 100 --raw-index"
  "1 read/txn, 2 threads|--threads 2 --read-ratio 100"
  "1 read/txn, 2 threads, raw index|--threads 2 --read-ratio 100 --raw-index"
  "1 blind write/txn, 1 thread|--threads 1 --read-ratio 0"
  "1 blind write/txn, 1 thread, raw index|--threads 1 --read-ratio 0 --raw-index"
  "1 blind write/txn, 2 threads|--threads 2 --read-ratio 0"
  "1 blind write/txn, 2 threads, raw index|--threads 2 --read-ratio 0 --raw-index"
  "1 blind write/txn, 2 threads, rdtsc|--threads 2 --read-ratio 0 --timestamps rdtsc"
  "1 blind write/txn, 2 threads, atomic|--threads 2 --read-ratio 0 --timestamps atomic"
  "1 blind write/txn, 2 threads, mutex|--threads 2 --read-ratio 0 --timestamps mutex"
  "100-key range/txn, 1 thread|--threads 1 --scan-length 100"
  "100-key range/txn, 2 threads|--threads 2 --scan-length 100"
  "4 ops/txn, zipf 0.99, 50% writes, 2 threads|--threads 2 --ops-per-txn 4 --read-ratio 50 --dist zipf --theta 0.99"
  "4 ops, zipf 0.85, 50% w, 1 worker|--threads 1 --ops-per-txn 4 --read-ratio 50 --dist zipf --theta 0.85"
  "4 ops, zipf 0.85, 50% w, 1 worker + 1 long reader|--threads 1 --ops-per-txn 4 --read-ratio 50 --dist zipf --theta 0.85 --long-readers 1"
  "placeholder index: 1 read/txn, 1 thread|--threads 1 --read-ratio 100 --index btree"
  "placeholder index: 1 read/txn, 1 thread, raw index|--threads 1 --read-ratio 100 --index btree --raw-index"
)

declare -A results
for ((r = 1; r <= runs; r++)); do
  for c in "${configs[@]}"; do
    name=${c%%|*}
    args=${c#*|}
    # shellcheck disable=SC2086
    line=$($bin bench ycsb $args --duration "$duration" --json 2>/dev/null | tail -1)
    results[$name]+="$line"$'\n'
    echo "run $r: $name done" >&2
  done
done

echo "| workload | txn/s (median) | runs | abort rate | p50 / p99 / p99.9 µs | peak RSS |"
echo "|---|---|---|---|---|---|"
for c in "${configs[@]}"; do
  name=${c%%|*}
  printf '%s' "${results[$name]}" | python3 -c '
import json, statistics, sys
name = sys.argv[1]
rows = [json.loads(l) for l in sys.stdin if l.strip()]
rows.sort(key=lambda d: d["txn_per_sec"])
med = rows[len(rows) // 2]
runs = ", ".join("%.2f" % (d["txn_per_sec"] / 1e6) for d in rows)
print("| %s | %.2f M | %s | %.2f%% | %.1f / %.1f / %.1f | %d MiB |" % (
    name, med["txn_per_sec"] / 1e6, runs, 100 * med["abort_rate"],
    med["p50_us"], med["p99_us"], med["p999_us"], med["peak_rss_bytes"] >> 20))
' "$name"
done
