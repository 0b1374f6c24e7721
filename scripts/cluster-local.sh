#!/usr/bin/env bash
# Starts a three-replica Lazy VSR group of `verso serve` on loopback, for trying it:
# clients on 127.0.0.1:7001-7003, peers on 7101-7103, data in DIR (default ./verso-cluster).
# Ctrl-C stops all three. Any replica can be killed (kill -9) and started again by hand
# with the command this script prints.
#
#   ./scripts/cluster-local.sh [DIR] [--release|--debug]
set -euo pipefail
dir=${1:-verso-cluster}
profile=${2:---release}
cd "$(dirname "$0")/.."
cargo build $([ "$profile" = --release ] && echo --release) -p verso --quiet
bin=target/$([ "$profile" = --release ] && echo release || echo debug)/verso
mkdir -p "$dir"
if [ ! -f "$dir/cluster.toml" ]; then
    secret=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
    {
        echo "# Made by scripts/cluster-local.sh; see cluster.toml.example for every setting."
        echo "secret = \"$secret\""
        echo 'mode = "lazy"'
        for id in 0 1 2; do
            printf '\n[[replica]]\nid = %d\nclient = "127.0.0.1:%d"\npeer = "127.0.0.1:%d"\n' \
                "$id" $((7001 + id)) $((7101 + id))
        done
    } > "$dir/cluster.toml"
fi
pids=()
trap 'kill "${pids[@]}" 2>/dev/null; wait' INT TERM EXIT
for id in 0 1 2; do
    cmd="$bin serve --cluster $dir/cluster.toml --replica $id --data-dir $dir/replica$id"
    echo "replica $id: $cmd   (log: $dir/replica$id.log)"
    $cmd 2> "$dir/replica$id.log" &
    pids+=($!)
done
echo "clients: redis-cli -p 7001 (or 7002, 7003); 'INFO replication' names the primary. Ctrl-C stops."
wait
