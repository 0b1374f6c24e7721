#!/usr/bin/env bash
# NCC over replicated shards against plain servers, and dOCC the same way, side by side:
# Google-F1 on 2 shards, closed loop, each configuration in turn at each client count,
# RUNS times over; then each configuration's peak (its best client count) per run, and
# the medians of the peaks (BENCHMARKS.md, "NCC over replicated shards between processes").
#
#   bench/txn-replicated.sh [RUNS] [SECONDS] [CLIENT COUNTS]
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-3}
secs=${2:-5}
clients=${3:-"256 512 1024"}
cargo build --release -q -p verso
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for run in $(seq "$runs"); do
  for cfg in "ncc|" "ncc|--replicated answers-on-disk" "ncc|--replicated sync" \
             "ncc|--replicated lazy" "docc|" "docc|--replicated answers-on-disk"; do
    for c in $clients; do
      p=${cfg%%|*}; extra=${cfg#*|}
      # shellcheck disable=SC2086
      line=$(target/release/verso bench txn --workload f1 --protocols "$p" --seconds "$secs" \
        --clients "$c" $extra | tail -1)
      echo "run=$run clients=$c [$p $extra] $line" | tee -a "$out"
    done
  done
done
echo "peak txn/s per configuration (its best client count in each run), median of $runs runs:"
# Fields: run=R clients=C [proto extra...] proto rate run commit/s ...
awk '{
  r=$1; sub(/run=/,"",r); c=$2; sub(/clients=/,"",c)
  i=index($0,"]"); cfg=substr($0,index($0,"["),i-index($0,"[")+1)
  n=split(substr($0,i+1),f," "); tps=f[4]
  k=cfg SUBSEP r
  if (!(k in best) || tps+0 > best[k]+0) { best[k]=tps; at[k]=c }
  cfgs[cfg]=1
} END {
  for (cfg in cfgs) {
    m=0; delete v
    for (k in best) { split(k,p,SUBSEP); if (p[1]==cfg) v[++m]=best[k] " (" at[k] " clients)" }
    # sort by throughput
    for (i=1;i<=m;i++) for (j=i+1;j<=m;j++) if (v[j]+0 < v[i]+0) { t=v[i]; v[i]=v[j]; v[j]=t }
    printf "%-40s %s\n", cfg, v[int((m+1)/2)]
  }
}' "$out" | sort
echo "$(date -u +%F), commit $(git rev-parse --short HEAD), load average $(cut -d' ' -f1-3 /proc/loadavg)"
