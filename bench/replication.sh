#!/usr/bin/env bash
# Puts against a three-replica group on loopback (Lazy VSR and VSR-Sync), a single
# unreplicated server and a three-member etcd 3.4 cluster on loopback, side by side: SET/put
# with VALUE-byte values, 1, 20 and 100 outstanding requests (clients), RUNS runs each,
# interleaved. Verso is driven by redis-benchmark; etcd by bench/kvload (etcd's own
# benchmark tool is not packaged), which also runs against the Lazy group as `lazy-kv` so the
# difference the client makes is visible. Prints one line per setup and client count:
#   setup clients rps p50_ms p99_ms
#   bench/replication.sh [RUNS=3] [REQUESTS=50000] [VALUE=8]
# SETUPS (environment) picks and orders the setups: default "lazy sync single etcd"; also
# "lazy-b64", the Lazy group with batches_in_flight = 64 (every ready commit proposed at once,
# as before that setting existed), and "lazy-kv" is measured with "lazy".
set -euo pipefail
runs=${1:-3}
n=${2:-50000}
value=${3:-8}
cd "$(dirname "$0")/.."
need=()
command -v etcd >/dev/null || need+=(etcd-server)
command -v redis-benchmark >/dev/null || need+=(redis-tools)
command -v curl >/dev/null || need+=(curl)
if [ ${#need[@]} -gt 0 ]; then
    echo "# installing ${need[*]}" >&2
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi
cargo build --release -p verso --quiet
cargo build --release --manifest-path bench/kvload/Cargo.toml --quiet
bin=$PWD/target/release/verso
kvload=$PWD/bench/kvload/target/release/kvload
work=$(mktemp -d)
pids=()
cleanup() { kill -9 "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
start_group() { # mode [batches_in_flight]
    local mode=$1 d=$work/$1-$RANDOM
    mkdir -p "$d"
    {
        echo 'secret = "benchmark secret, not for production"'
        echo "mode = \"$mode\""
        [ -n "${2:-}" ] && echo "batches_in_flight = $2"
        for id in 0 1 2; do
            printf '\n[[replica]]\nid = %d\nclient = "127.0.0.1:%d"\npeer = "127.0.0.1:%d"\n' "$id" $((7301 + id)) $((7401 + id))
        done
    } > "$d/cluster.toml"
    for id in 0 1 2; do
        "$bin" serve --cluster "$d/cluster.toml" --replica $id --data-dir "$d/r$id" 2>/dev/null &
        pids+=($!)
    done
    # The primary by its role: since backups relay, every replica answers a SET with OK.
    for _ in $(seq 100); do
        for p in 7301 7302 7303; do
            if redis-cli -p $p INFO replication 2>/dev/null | grep -q '^vsr_role:primary' \
                && [ "$(redis-cli -p $p SET probe 1 2>/dev/null)" = OK ]; then primary=$p; return; fi
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
# Three etcd members on 127.0.0.1 (clients 7501-7503, peers 7601-7603), data under $work
# like the Verso replicas', default durability: each member fsyncs its WAL before a put is
# acknowledged. The puts go to the leader (found from /v3/maintenance/status), not to a
# fixed member: a follower would forward each put to it, one hop more than Verso's primary.
start_etcd() {
    local d=$work/etcd-$RANDOM cluster="" id
    mkdir -p "$d"
    for id in 0 1 2; do cluster+="${cluster:+,}e$id=http://127.0.0.1:$((7601 + id))"; done
    for id in 0 1 2; do
        etcd --name e$id --data-dir "$d/e$id" \
            --listen-client-urls http://127.0.0.1:$((7501 + id)) --advertise-client-urls http://127.0.0.1:$((7501 + id)) \
            --listen-peer-urls http://127.0.0.1:$((7601 + id)) --initial-advertise-peer-urls http://127.0.0.1:$((7601 + id)) \
            --initial-cluster "$cluster" --initial-cluster-state new --initial-cluster-token "$(basename "$d")" \
            >"$d/e$id.log" 2>&1 &
        pids+=($!)
    done
    # Healthy: all three answer, agree on one leader, and the leader takes a put.
    for _ in $(seq 100); do
        local leaders="" p st
        primary=""
        for p in 7501 7502 7503; do
            st=$(curl -sf -m 1 -X POST -d '{}' http://127.0.0.1:$p/v3/maintenance/status 2>/dev/null) || continue
            st=$(sed -n 's/.*"member_id":"\([0-9]*\)".*"leader":"\([0-9]*\)".*/\1 \2/p' <<<"$st")
            leaders+="${st#* } "
            if [ -n "$st" ] && [ "${st% *}" = "${st#* }" ]; then primary=$p; fi
        done
        if [ -n "$primary" ] && [ "$(tr ' ' '\n' <<<"$leaders" | sort -u | grep -c .)" = 1 ] && [ "$(wc -w <<<"$leaders")" = 3 ] \
            && curl -sf -m 1 -X POST -d '{"key":"cHJvYmU=","value":"MQ=="}' http://127.0.0.1:$primary/v3/kv/put >/dev/null; then
            return
        fi
        sleep 0.1
    done
    echo "etcd not healthy; logs in $d:" >&2; tail -n 5 "$d"/e*.log >&2; exit 1
}
stop_all() { kill -9 "${pids[@]}" 2>/dev/null || true; wait "${pids[@]}" 2>/dev/null || true; pids=(); }
measure() { # label clients
    redis-benchmark -p "$primary" -t set -n "$n" -c "$2" -d "$value" -r 1000000 --csv 2>/dev/null \
        | awk -F'"' -v l="$1" -v c="$2" 'NR==2 { printf "%-7s %4d %10.0f %8s %8s\n", l, c, $4, $10, $14 }'
}
kvmeasure() { # label etcd|resp clients
    local out
    out=$("$kvload" "$2" "127.0.0.1:$primary" "$3" "$n" "$value" 1000000)
    awk -v l="$1" -v c="$3" '{ printf "%-7s %4d %10.0f %8s %8s\n", l, c, $1, $2, $3 }' <<<"$out"
}
echo "# $(date -u +%F) $(git rev-parse --short HEAD) $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); value $value B, $n SETs"
echo "# setup clients rps p50_ms p99_ms"
for r in $(seq "$runs"); do
    for setup in ${SETUPS:-lazy sync single etcd}; do
        case $setup in
            single) start_single ;;
            etcd) start_etcd ;;
            lazy-b64) start_group lazy 64 ;;
            *) start_group $setup ;;
        esac
        for c in 1 20 100; do
            case $setup in
                etcd) kvmeasure etcd etcd $c ;;
                lazy) measure lazy $c; kvmeasure lazy-kv resp $c ;;
                *) measure $setup $c ;;
            esac
        done
        stop_all
    done
done
