#!/usr/bin/env bash
# Replica log compaction: what checkpoints cost and what they save. For each value of
# `checkpoint_log_mb` in CHECKPOINTS (0 = off), RUNS rounds interleaved, a Lazy VSR group
# of three on loopback takes N SETs of 100-byte values over KEYS keys (redis-benchmark
# -c 50 -P 16 on the primary), then a backup is killed (SIGKILL) and restarted. Prints per
# configuration and run:
#   checkpoint_log_mb rps rss_mib(max over replicas) log_mib(max) ckpt_mib(max) \
#   checkpoints(primary) restart_ms
# restart_ms: from the restart to `vsr_recovering:0` with the primary's op_max reached.
#   bench/replica-log.sh [RUNS=3] [N=2000000] [KEYS=200000]
set -euo pipefail
runs=${1:-3}
n=${2:-2000000}
keys=${3:-200000}
configs=${CHECKPOINTS:-"0 64 16"}
cd "$(dirname "$0")/.."
if ! command -v redis-benchmark >/dev/null; then
    echo "# installing redis-tools" >&2
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-tools >/dev/null
fi
cargo build --release -p verso --quiet
bin=$PWD/target/release/verso
work=$(mktemp -d)
pids=()
cleanup() { kill -9 "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
wait_port() { for _ in $(seq 300); do redis-cli -p "$1" PING >/dev/null 2>&1 && return 0; sleep 0.1; done; return 1; }
field() { redis-cli -p "$1" INFO replication | tr -d '\r' | sed -n "s/^$2://p"; }
mib() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1048576 }'; }

run_one() { # checkpoint_log_mb
    local every=$1 d=$work/g-$RANDOM base=$((20000 + RANDOM % 20000))
    mkdir -p "$d"
    {
        echo 'secret = "benchmark secret, not for production"'
        echo 'mode = "lazy"'
        echo "checkpoint_log_mb = $every"
        for i in 0 1 2; do
            printf '[[replica]]\nid = %d\nclient = "127.0.0.1:%d"\npeer = "127.0.0.1:%d"\n' \
                "$i" $((base + i)) $((base + 100 + i))
        done
    } >"$d/cluster.toml"
    pids=()
    for i in 0 1 2; do
        "$bin" serve --cluster "$d/cluster.toml" --replica "$i" --data-dir "$d/r$i" >"$d/log$i" 2>&1 &
        pids+=($!)
    done
    for i in 0 1 2; do wait_port $((base + i)); done
    local primary=""
    for _ in $(seq 100); do
        for i in 0 1 2; do
            [ "$(field $((base + i)) vsr_role)" = primary ] && primary=$i
        done
        [ -n "$primary" ] && break
        sleep 0.1
    done
    local port=$((base + primary))
    local rps
    rps=$(redis-benchmark -p "$port" -t set -n "$n" -r "$keys" -d 100 -c 50 -P 16 -q 2>/dev/null |
        tr '\r' '\n' | awk '/requests per second/ { print $2 }' | tail -1)
    redis-cli -p "$port" WAIT 2 10000 >/dev/null
    local rss=0 log=0 ck=0
    for i in 0 1 2; do
        local r l c
        r=$(awk '/VmRSS/ { print $2 * 1024 }' "/proc/${pids[$i]}/status")
        l=$(stat -c %s "$d/r$i/vsr.log")
        c=$( (cat "$d"/r$i/checkpoint-*.data 2>/dev/null || true) | wc -c)
        [ "$r" -gt "$rss" ] && rss=$r
        [ "$l" -gt "$log" ] && log=$l
        [ "$c" -gt "$ck" ] && ck=$c
    done
    local checkpoints
    checkpoints=$(field "$port" vsr_checkpoints)
    # Restart a backup and time its recovery.
    local victim=$(((primary + 1) % 3))
    kill -9 "${pids[$victim]}"
    wait "${pids[$victim]}" 2>/dev/null || true
    local target started
    target=$(field "$port" vsr_op_max)
    started=$(date +%s%N)
    "$bin" serve --cluster "$d/cluster.toml" --replica "$victim" --data-dir "$d/r$victim" >>"$d/log$victim" 2>&1 &
    pids[$victim]=$!
    local vport=$((base + victim)) restart_ms=timeout
    for _ in $(seq 6000); do
        if [ "$(field "$vport" vsr_recovering 2>/dev/null)" = 0 ] &&
            [ "$(field "$vport" vsr_op_max 2>/dev/null)" -ge "$target" ] 2>/dev/null; then
            restart_ms=$((($(date +%s%N) - started) / 1000000))
            break
        fi
        sleep 0.01
    done
    echo "$every $rps $(mib $rss) $(mib $log) $(mib $ck) $checkpoints $restart_ms"
    kill -9 "${pids[@]}" 2>/dev/null || true
    wait 2>/dev/null || true
    rm -rf "$d"
}

echo "# commit $(git rev-parse --short HEAD), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%FT%TZ)"
echo "# N=$n KEYS=$keys; checkpoint_log_mb rps rss_mib log_mib ckpt_mib checkpoints restart_ms"
for r in $(seq "$runs"); do
    for every in $configs; do
        run_one "$every"
    done
done
