#!/usr/bin/env bash
# Durability costs, as BENCHMARKS.md reports them: YCSB write-only and TPC-C under
# --durability none, lazy and sync at 1 and 2 threads (each configuration N times,
# interleaved so drift hits every mode alike), then `verso bench durability` N times
# (checkpoint time and cost under load, recovery time of 1 M keys from checkpoint + log).
#   bench/durability.sh [N=3] [SECONDS=5]
# Results: results/durability/*.json (one report per run) and a median table on stdout.
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-3}
secs=${2:-5}
out=results/durability
mkdir -p "$out"
cargo build --release -q -p verso
verso=target/release/verso

for run in $(seq 1 "$n"); do
  for threads in 1 2; do
    for mode in none lazy sync; do
      echo "run $run: ycsb write-only, $threads thread(s), $mode" >&2
      "$verso" bench ycsb --keys 1000000 --read-ratio 0 --threads "$threads" \
        --duration "$secs" --warmup 1 --durability "$mode" --json 2>/dev/null |
        tail -1 >"$out/ycsb-w-t$threads-$mode-$run.json"
      echo "run $run: tpcc, $threads warehouse(s)/thread(s), $mode" >&2
      "$verso" bench tpcc --threads "$threads" --duration "$secs" --warmup 1 \
        --durability "$mode" --json 2>/dev/null |
        tail -1 >"$out/tpcc-t$threads-$mode-$run.json"
    done
  done
  echo "run $run: bench durability (1 M keys)" >&2
  "$verso" bench durability --keys 1000000 --duration "$secs" --checkpoint-rate 16 --json \
    2>/dev/null | tail -1 >"$out/ckpt-$run.json"
done

python3 - "$out" "$n" <<'PY'
import json, statistics, sys
out, n = sys.argv[1], int(sys.argv[2])
def med(name, field):
    vals = [json.load(open(f"{out}/{name}-{i}.json"))[field] for i in range(1, n + 1)]
    return statistics.median(vals)
print("| workload | threads | none | lazy | sync | lazy/none | sync/none |")
print("|---|---|---|---|---|---|---|")
for w, label in (("ycsb-w", "YCSB write-only"), ("tpcc", "TPC-C")):
    for t in (1, 2):
        r = {m: med(f"{w}-t{t}-{m}", "txn_per_sec") for m in ("none", "lazy", "sync")}
        print(f"| {label} | {t} | {r['none']/1e3:.0f} K | {r['lazy']/1e3:.0f} K | {r['sync']/1e3:.0f} K"
              f" | {r['lazy']/r['none']:.2f} | {r['sync']/r['none']:.2f} |")
print()
for f in ("txn_per_sec", "txn_per_sec_during_checkpoint", "checkpoint_throughput_ratio",
          "checkpoint_seconds", "checkpoint_bytes", "recovery_seconds", "recovered_log_txns"):
    print(f"{f}: {med('ckpt', f):.3f}")
PY
