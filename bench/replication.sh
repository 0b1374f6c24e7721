#!/usr/bin/env bash
# Puts against a three-replica group on loopback (Lazy VSR and VSR-Sync) and a single
# unreplicated server, side by side: redis-benchmark SET with VALUE-byte values, 1, 20 and
# 100 outstanding requests (clients), RUNS runs each, interleaved. Prints one line per run:
#   setup clients rps p50_ms p99_ms
#   bench/replication.sh [RUNS=3] [REQUESTS=50000] [VALUE=8]
set -euo pipefail
runs=${1:-3}
n=${2:-50000}
value=${3:-8}
cd "$(dirname "$0")/.."
cargo build --release -p verso --quiet
bin=$PWD/target/release/verso
work=$(mktemp -d)
pids=()
cleanup() { kill -9 "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
start_group() { # mode
    local mode=$1 d=$work/$1-$RANDOM
    mkdir -p "$d"
    {
        echo 'secret = "benchmark secret, not for production"'
        echo "mode = \"$mode\""
        for id in 0 1 2; do
            printf '\n[[replica]]\nid = %d\nclient = "127.0.0.1:%d"\npeer = "127.0.0.1:%d"\n' "$id" $((7301 + id)) $((7401 + id))
        done
    } > "$d/cluster.toml"
    for id in 0 1 2; do
        "$bin" serve --cluster "$d/cluster.toml" --replica $id --data-dir "$d/r$id" 2>/dev/null &
        pids+=($!)
    done
    for _ in $(seq 100); do
        for p in 7301 7302 7303; do
            if [ "$(redis-cli -p $p SET probe 1 2>/dev/null)" = OK ]; then primary=$p; return; fi
        done
        sleep 0.1
    done
    echo "no primary" >&2; exit 1
}
start_single() {
    "$bin" serve --port 7350 --durability lazy --data-dir "$work/single-$RANDOM" 2>/dev/null &
    pids+=($!)
    for _ in $(seq 100); do redis-cli -p 7350 PING >/dev/null 2>&1 && break; sleep 0.1; done
    primary=7350
}
stop_all() { kill -9 "${pids[@]}" 2>/dev/null || true; wait "${pids[@]}" 2>/dev/null || true; pids=(); }
measure() { # label clients
    redis-benchmark -p "$primary" -t set -n "$n" -c "$2" -d "$value" -r 1000000 --csv 2>/dev/null \
        | awk -F'"' -v l="$1" -v c="$2" 'NR==2 { printf "%-7s %4d %10.0f %8s %8s\n", l, c, $4, $10, $14 }'
}
echo "# $(date -u +%F) $(git rev-parse --short HEAD) $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); value $value B, $n SETs"
echo "# setup clients rps p50_ms p99_ms"
for r in $(seq "$runs"); do
    for setup in lazy sync single; do
        if [ $setup = single ]; then start_single; else start_group $setup; fi
        for c in 1 20 100; do measure $setup $c; done
        stop_all
    done
done
