#!/usr/bin/env bash
# The long-reader experiments (issue "benchmarks" item 4, vMVCC §6.3 adapted to 2 cores), under
# each concurrency control: one worker thread, with and without one long reader on the other
# core.
#   YCSB: 4 ops/txn, zipfian 0.85, write ratio 0..100% in steps of 20; the long reader reads
#         1% of the keys in one read-only transaction, over and over.
#   TPC-C: 1 warehouse, 1 worker, with no StockScan and with one every 1000/500/100 ms.
# Every configuration runs RUNS times (default 3), configurations interleaved so machine
# noise spreads over all of them. Each run's JSON goes to OUT (default results/long-readers);
# the script then prints one markdown row per configuration with medians.
#
#   bench/long-readers.sh [RUNS] [DURATION_S] [OUT] [CCS]     (CCS: "mvto precision-locking 2pl")
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-3}
duration=${2:-5}
out=${3:-results/long-readers}
ccs=${4:-"mvto precision-locking 2pl"}
cargo build --release -q -p verso
bin=target/release/verso
mkdir -p "$out"

configs=()
for cc in $ccs; do
  for w in 0 20 40 60 80 100; do
    for lr in 0 1; do
      configs+=("ycsb|$cc|w$w|lr$lr|--keys 1000000 --threads 1 --ops-per-txn 4 --dist zipf --theta 0.85 --read-ratio $((100 - w)) --long-readers $lr")
    done
  done
  configs+=("tpcc|$cc|none|scan0|--warehouses 1 --threads 1")
  for ms in 1000 500 100; do
    configs+=("tpcc|$cc|scan|scan$ms|--warehouses 1 --threads 1 --stock-scan-ms $ms")
  done
done

for ((r = 1; r <= runs; r++)); do
  for c in "${configs[@]}"; do
    IFS='|' read -r bench cc a b args <<<"$c"
    file="$out/${bench}_${cc}_${a}_${b}_run$r.json"
    echo "run $r/$runs: $bench --cc $cc $args" >&2
    # shellcheck disable=SC2086
    "$bin" bench "$bench" --cc "$cc" --duration "$duration" --warmup 1 $args --json 2>/dev/null | tail -1 >"$file"
  done
done

python3 - "$out" <<'PY'
import glob, json, os, statistics, sys
out = sys.argv[1]
rows = {}
for f in sorted(glob.glob(os.path.join(out, "*_run*.json"))):
    key = os.path.basename(f).rsplit("_run", 1)[0]
    with open(f) as fh:
        r = json.loads(fh.read())
    rows.setdefault(key, []).append(r)
def med(rs, f):
    return statistics.median(f(r) for r in rs)
print("| benchmark | cc | setting | txn/s (median) | abort rate | p99.9 us | runs |")
print("|---|---|---|---:|---:|---:|---|")
for key, rs in sorted(rows.items()):
    bench, cc, a, b = key.split("_", 3)
    tps = med(rs, lambda r: r["txn_per_sec"])
    ab = med(rs, lambda r: r["abort_rate"])
    p999 = med(rs, lambda r: r.get("p999_us", r.get("per_type", {}).get("new_order", {}).get("p999_us", 0)))
    runs = ", ".join(f"{r['txn_per_sec']/1e3:.0f}K" for r in rs)
    print(f"| {bench} | {cc} | {a} {b} | {tps/1e3:.1f}K | {ab*100:.2f}% | {p999:.1f} | {runs} |")
PY
