#!/usr/bin/env bash
# The figures BENCHMARKS.md quotes for YCSB A-F, TPC-C and TATP, under each concurrency
# control. Every configuration runs RUNS times (default 3), configurations interleaved; each
# run's JSON goes to OUT (default results/suite) and the script prints one markdown row per
# configuration with medians. `verso bench plot OUT/*.json` draws them.
#
#   bench/suite.sh [RUNS] [DURATION_S] [OUT]
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-3}
duration=${2:-5}
out=${3:-results/suite}
cargo build --release -q -p verso
bin=target/release/verso
mkdir -p "$out"

configs=()
for w in a b c d e f; do
  for t in 1 2; do
    configs+=("ycsb|mvto|$w|t$t|--workload $w --threads $t")
  done
done
for cc in precision-locking snapshot 2pl; do
  for w in a b; do
    for t in 1 2; do
      configs+=("ycsb|$cc|$w|t$t|--workload $w --threads $t")
    done
  done
done
for cc in mvto precision-locking snapshot 2pl; do
  configs+=("tpcc|$cc|w1|t1|--warehouses 1 --threads 1")
  configs+=("tpcc|$cc|w2|t2|--warehouses 2 --threads 2")
done
for cc in mvto precision-locking; do
  configs+=("tatp|$cc|p1m|t1|--threads 1")
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
        rows.setdefault(key, []).append(json.loads(fh.read()))
print("| benchmark | cc | workload | threads | txn/s (median) | abort rate | p99 us | runs |")
print("|---|---|---|---|---:|---:|---:|---|")
for key, rs in sorted(rows.items()):
    bench, cc, a, b = key.split("_", 3)
    med = lambda f: statistics.median(f(r) for r in rs)
    tps = med(lambda r: r["txn_per_sec"])
    ab = med(lambda r: r["abort_rate"])
    p99 = med(lambda r: r.get("p99_us", 0))
    runs = ", ".join(f"{r['txn_per_sec']/1e3:.0f}K" for r in rs)
    print(f"| {bench} | {cc} | {a} | {b[1:]} | {tps/1e3:.1f}K | {ab*100:.2f}% | {p99:.1f} | {runs} |")
PY
