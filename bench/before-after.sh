#!/usr/bin/env bash
# Two `verso` binaries side by side on the YCSB and TPC-C rows of BENCHMARKS.md: every
# configuration RUNS times, alternating binaries and configurations (A, B, A, B, ...) so
# machine noise falls on both alike, then one markdown row per configuration with both
# medians, every run, and the ratio of the medians (new / base). The load average is printed
# before and after, so a noisy run shows itself.
#
#   bench/before-after.sh BASE_BINARY NEW_BINARY [RUNS] [DURATION_S]
#
# To measure a change: build the commit before it in a worktree
#   git worktree add /tmp/base <commit> && (cd /tmp/base && cargo build --release -p verso)
#   bench/before-after.sh /tmp/base/target/release/verso target/release/verso 3 5
#
# CONFIGS (optional) replaces the configurations: one "name|verso bench arguments" per line.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -lt 2 ]; then
  echo "usage: $0 BASE_BINARY NEW_BINARY [RUNS] [DURATION_S]" >&2
  exit 2
fi
base=$1
new=$2
runs=${3:-3}
duration=${4:-5}
for bin in "$base" "$new"; do
  [ -x "$bin" ] || { echo "error: $bin is not an executable" >&2; exit 2; }
done

configs=(
  "YCSB 1 read/txn, 1 thread|ycsb --threads 1 --read-ratio 100"
  "YCSB 1 read/txn, 2 threads|ycsb --threads 2 --read-ratio 100"
  "YCSB 1 blind write/txn, 1 thread|ycsb --threads 1 --read-ratio 0"
  "YCSB 1 blind write/txn, 2 threads|ycsb --threads 2 --read-ratio 0"
  "YCSB-A (zipf 0.99, 50% updates), 2 threads|ycsb --workload a --threads 2"
  "TPC-C 1 warehouse, 1 thread|tpcc --warehouses 1 --threads 1"
  "TPC-C 2 warehouses, 2 threads|tpcc --warehouses 2 --threads 2"
)
if [ -n "${CONFIGS:-}" ]; then
  mapfile -t configs < <(printf '%s\n' "$CONFIGS" | grep -v '^[[:space:]]*$')
fi

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for ((r = 1; r <= runs; r++)); do
  for c in "${configs[@]}"; do
    name=${c%%|*}
    args=${c#*|}
    for side in base new; do
      if [ "$side" = base ]; then bin=$base; else bin=$new; fi
      # shellcheck disable=SC2086
      line=$("$bin" bench $args --duration "$duration" --json 2>/dev/null | tail -1)
      printf '%s\t%s\t%s\n' "$name" "$side" "$line" >>"$out"
    done
    echo "run $r: $name done" >&2
  done
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2

python3 - "$out" "${configs[@]}" <<'PY'
import json, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    name, side, js = line.rstrip("\n").split("\t", 2)
    d = json.loads(js)
    if d.get("consistency", "passed") != "passed":
        sys.exit(f"error: {name} ({side}) failed its consistency check: {d['consistency']}")
    rows.setdefault(name, {}).setdefault(side, []).append(d["txn_per_sec"] / 1e3)
print("| workload | base K txn/s (median) [runs] | new K txn/s (median) [runs] | new / base |")
print("|---|---|---|---|")
for c in sys.argv[2:]:
    name = c.split("|")[0]
    b, n = rows[name]["base"], rows[name]["new"]
    fmt = lambda v: "%.0f [%s]" % (statistics.median(v), ", ".join("%.0f" % x for x in v))
    print("| %s | %s | %s | %.2f |" % (name, fmt(b), fmt(n), statistics.median(n) / statistics.median(b)))
PY
