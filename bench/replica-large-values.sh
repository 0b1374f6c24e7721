#!/usr/bin/env bash
# Large values through a Lazy VSR group: COUNT pipelined SETs of SIZE bytes on one
# connection to the primary of three `verso serve` replicas on loopback, RUNS rounds, each
# binary in turn (interleaved A, B, A, B, ...). Prints per binary and run:
#   binary run acknowledged/COUNT wall_s server_cpu_s view_changes
# view_changes counts the log's "started a view change" and "no longer primary" lines
# (the first election is one or two); binaries older than 4338b5e do not log the first.
#   bench/replica-large-values.sh [RUNS=3] [SIZE=1048576] [COUNT=300] [BIN...]
# Without BIN it builds and measures this checkout. VIEW_CHANGE_MS (default 2000) sets
# view_change_timeout_ms: the default 500 may see view changes on a busy 2-core machine.
set -euo pipefail
runs=${1:-3}
size=${2:-1048576}
count=${3:-300}
shift $(($# < 3 ? $# : 3))
cd "$(dirname "$0")/.."
# shellcheck source=replica-group.sh
source bench/replica-group.sh
bins_or_build "$@"
base=$((20000 + RANDOM % 20000))
work=$(mktemp -d)
trap 'stop; rm -rf "$work"' EXIT
cpu_of() { local t=0 c; for p in "${pids[@]}"; do c=$(awk "{print \$14 + \$15}" "/proc/$p/stat" 2>/dev/null) || c=0; t=$((t + c)); done; echo "$t"; }
for run in $(seq "$runs"); do
    for bin in "${bins[@]}"; do
        start_group "$bin"
        cpu0=$(cpu_of)
        result=$(python3 - "$primary" "$size" "$count" <<'EOF'
import socket, sys, time
port, size, count = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
value = b"v" * size
def cmd(i):
    k = b"k%d" % i
    return b"*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n" % (len(k), k, size, value)
s = socket.create_connection(("127.0.0.1", port))
s.settimeout(120)
start = time.time()
got, ok = b"", 0
try:
    for i in range(count):
        s.sendall(cmd(i))
    while got.count(b"\r\n") < count:
        chunk = s.recv(1 << 16)
        if not chunk:
            break
        got += chunk
except OSError:
    pass
print(got.count(b"+OK"), round(time.time() - start, 2))
EOF
)
        sleep 1
        cpu1=$(cpu_of)
        changes=$(cat "$work"/g/r*.log | grep -c "started a view change\|no longer primary" || true)
        read -r ok wall <<< "$result"
        echo "$bin $run $ok/$count ${wall} $(awk -v t=$((cpu1 - cpu0)) 'BEGIN { printf "%.2f", t / 100 }') $changes"
        stop
    done
done
