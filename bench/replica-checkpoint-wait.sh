#!/usr/bin/env bash
# WAIT while replicas checkpoint: a probe client sends `SET probe x` then `WAIT 2 10000`
# every 20 ms for PROBE_S seconds, while redis-benchmark loads COUNT SETs of 100 bytes over
# 1,000,000 keys into the primary of three `verso serve` replicas on loopback (the load
# makes each replica write checkpoints of 50-80 MB). RUNS rounds, each binary in turn
# (interleaved A, B, A, B, ...). Prints per binary and run the probes' median, p99 and
# largest latency, how many took over 500 ms, and each checkpoint's bytes and ms.
#   bench/replica-checkpoint-wait.sh [RUNS=3] [COUNT=1500000] [PROBE_S=40] [BIN...]
# Without BIN it builds and measures this checkout. A probe waits for the one before it, so
# a long stall counts once (coordinated omission): read the largest latency and the count
# over 500 ms beside the p99.
set -euo pipefail
runs=${1:-3}
count=${2:-1500000}
probe_s=${3:-40}
shift $(($# < 3 ? $# : 3))
cd "$(dirname "$0")/.."
# shellcheck source=replica-group.sh
source bench/replica-group.sh
bins_or_build "$@"
base=$((20000 + RANDOM % 20000))
work=$(mktemp -d)
trap 'stop; rm -rf "$work"' EXIT
for run in $(seq "$runs"); do
    for bin in "${bins[@]}"; do
        start_group "$bin"
        python3 - "$primary" "$probe_s" > "$work/probe.out" <<'EOF' &
import socket, sys, time
port, duration = int(sys.argv[1]), float(sys.argv[2])
s = socket.create_connection(("127.0.0.1", port))
s.settimeout(30)
def call(*args):
    s.sendall(b"".join([b"*%d\r\n" % len(args)] + [b"$%d\r\n%s\r\n" % (len(a), a) for a in args]))
    reply = b""
    while not reply.endswith(b"\r\n"):
        chunk = s.recv(4096)
        if not chunk:
            raise SystemExit("connection closed")
        reply += chunk
    return reply
lat, start = [], time.time()
while time.time() - start < duration:
    t = time.time()
    call(b"SET", b"probe", b"x")
    call(b"WAIT", b"2", b"10000")
    lat.append((time.time() - t) * 1000)
    time.sleep(0.02)
lat.sort()
n = len(lat)
print(f"probes={n} median_ms={lat[n // 2]:.1f} p99_ms={lat[int(n * 0.99)]:.1f} "
      f"max_ms={lat[-1]:.1f} over_500ms={sum(1 for x in lat if x > 500)}")
EOF
        probe=$!
        redis-benchmark -p "$primary" -t set -n "$count" -r 1000000 -d 100 -P 16 -c 20 -q \
            > /dev/null 2>&1 || true
        wait "$probe"
        cps=$(grep -h "wrote a replica checkpoint" "$work"/g/r*.log \
            | grep -oE "bytes=[0-9]+ ms=[0-9]+" | tr '\n' ' ' || true)
        echo "$bin run $run $(cat "$work/probe.out") checkpoints: $cps"
        stop
    done
done
