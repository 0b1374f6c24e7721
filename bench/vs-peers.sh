#!/usr/bin/env bash
# Verso beside the peers it must beat, interleaved in one run (issue "Performance: ahead of
# Silo, masstree-beta and Redis"): for every workload each system runs once per round
# (A, B, A, B, ...), RUNS rounds, and the table gives both medians, their ratio and every
# run. The peers are the prebuilt binaries in ../shared/anchors (its README gives the
# matching commands); Redis is Debian's.
#
#   bench/vs-peers.sh [RUNS] [DURATION_S] [GROUPS]
#
# GROUPS (default "ycsb tpcc masstree long"):
#   ycsb      YCSB 1 M keys, 100-byte values, 1 op/txn, uniform; read-only and blind-write,
#             1 and 2 threads: Verso vs Silo
#   tpcc      TPC-C 1 warehouse/1 thread and 2 warehouses/2 threads: Verso vs Silo
#   masstree  rw1, 1 thread, puts and gets per second: Verso's Masstree vs masstree-beta
#   long      YCSB 4 ops/txn, zipf 0.85, 0..100 % writes, 1 worker: with one long reader
#             on the other core vs without (Verso vs itself)
#   server    bench/server-vs-redis.sh RUNS (requests/s, CPU per request, RSS vs Redis)
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-3}
duration=${2:-5}
groups=${3:-"ycsb tpcc masstree long"}
anchors=$(cd .. && pwd)/shared/anchors
if [ ! -x "$anchors/silo" ] || [ ! -x "$anchors/masstree" ]; then
  echo "vs-peers: the reference binaries are not in $anchors" >&2
  exit 2
fi
cargo build --release -q -p verso
bin=$(pwd)/target/release/verso
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
results=$out/results.tsv
: >"$results"

# One measurement: workload, side (a = Verso, b = the peer), run, figure.
record() { printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" >>"$results"; }
verso_json() { "$bin" bench "$@" --json 2>/dev/null | tail -1; }
field() { python3 -c 'import json,sys; print(json.loads(sys.stdin.read())[sys.argv[1]])' "$1"; }
# Silo prints its figures on the last line; the first field is committed txn/s.
silo() { "$anchors/silo" "$@" 2>/dev/null | tail -1 | awk '{print $1}'; }
masstree_rw1() {
  # JSON on stderr; the figure asked for (puts_per_sec or gets_per_sec).
  (cd "$out" && "$anchors/masstree" -j1 -d "$duration" --no-notebook rw1 2>&1 >/dev/null) |
    grep -o "\"$1\":[0-9.]*" | head -1 | cut -d: -f2
}

declare -a peer_workloads=()
for g in $groups; do
  case $g in
    ycsb)
      for t in 1 2; do
        peer_workloads+=("YCSB read-only, $t thread(s)|Silo|ycsb-r-$t|--keys 1000000 --value-size 100 --ops-per-txn 1 --dist uniform --threads $t --read-ratio 100|100,0,0,0|$t")
        peer_workloads+=("YCSB blind write, $t thread(s)|Silo|ycsb-w-$t|--keys 1000000 --value-size 100 --ops-per-txn 1 --dist uniform --threads $t --read-ratio 0|0,100,0,0|$t")
      done ;;
    tpcc)
      peer_workloads+=("TPC-C, 1 warehouse, 1 thread|Silo|tpcc-1|--warehouses 1 --threads 1||1")
      peer_workloads+=("TPC-C, 2 warehouses, 2 threads|Silo|tpcc-2|--warehouses 2 --threads 2||2") ;;
    masstree)
      peer_workloads+=("Masstree rw1 puts/s, 1 thread|masstree-beta|rw1-puts|puts_per_sec|puts_per_sec|1")
      peer_workloads+=("Masstree rw1 gets/s, 1 thread|masstree-beta|rw1-gets|gets_per_sec|gets_per_sec|1") ;;
    long | server) ;;
    *) echo "vs-peers: unknown group $g" >&2; exit 2 ;;
  esac
done

for ((r = 1; r <= runs; r++)); do
  for w in "${peer_workloads[@]}"; do
    IFS='|' read -r name peer id vargs pargs threads <<<"$w"
    echo "round $r/$runs: $name" >&2
    case $id in
      ycsb-*)
        # shellcheck disable=SC2086
        record "$name" a "$r" "$(verso_json ycsb $vargs --duration "$duration" | field txn_per_sec)"
        record "$name" b "$r" "$(silo --bench ycsb --num-threads "$threads" --scale-factor 1000 --runtime "$duration" --bench-opts "--workload-mix $pargs")" ;;
      tpcc-*)
        # shellcheck disable=SC2086
        record "$name" a "$r" "$(verso_json tpcc $vargs --duration "$duration" | field txn_per_sec)"
        record "$name" b "$r" "$(silo --bench tpcc --num-threads "$threads" --scale-factor "$threads" --runtime "$duration")" ;;
      rw1-*)
        # Both halves come from one rw1 run each; running it per figure keeps the
        # interleaving simple at the price of twice the runs.
        record "$name" a "$r" "$(verso_json index --index masstree --workload rw1 --threads 1 --duration "$duration" | field "$vargs")"
        record "$name" b "$r" "$(masstree_rw1 "$pargs")" ;;
    esac
  done
  if [[ " $groups " == *" long "* ]]; then
    for wr in 0 20 40 60 80 100; do
      name="long reader, $wr % writes (vs no reader)"
      echo "round $r/$runs: $name" >&2
      args="ycsb --keys 1000000 --threads 1 --ops-per-txn 4 --dist zipf --theta 0.85 --read-ratio $((100 - wr)) --duration $duration --warmup 1"
      # shellcheck disable=SC2086
      record "$name" a "$r" "$(verso_json $args --long-readers 1 | field txn_per_sec)"
      # shellcheck disable=SC2086
      record "$name" b "$r" "$(verso_json $args --long-readers 0 | field txn_per_sec)"
    done
  fi
done

load=$(cut -d' ' -f1-3 /proc/loadavg)
commit=$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- crates || echo "+dirty")
echo
echo "vs-peers: commit $commit, $(nproc) CPUs, load average at the end $load, $runs rounds of ${duration} s, $(date -u +%Y-%m-%d)"
python3 - "$results" <<'PY'
import statistics, sys
rows = {}
order = []
for line in open(sys.argv[1]):
    name, side, run, value = line.rstrip("\n").split("\t")
    if name not in rows:
        rows[name] = {"a": [], "b": []}
        order.append(name)
    try:
        rows[name][side].append(float(value))
    except ValueError:
        rows[name][side].append(float("nan"))
def fmt(x):
    if x != x:
        return "failed"
    return f"{x/1e6:.2f} M" if x >= 1e6 else f"{x/1e3:.1f} K"
print("| workload | Verso (median) | peer (median) | Verso / peer | Verso runs | peer runs |")
print("|---|---:|---:|---:|---|---|")
for name in order:
    a, b = rows[name]["a"], rows[name]["b"]
    ma, mb = statistics.median(a), statistics.median(b)
    ratio = ma / mb if mb else float("nan")
    print(f"| {name} | {fmt(ma)} | {fmt(mb)} | {ratio:.2f} | {', '.join(map(fmt, a))} | {', '.join(map(fmt, b))} |")
PY

if [[ " $groups " == *" server "* ]]; then
  echo
  bench/server-vs-redis.sh "$runs"
fi
