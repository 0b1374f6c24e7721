#!/usr/bin/env bash
# Verso's server against Redis with redis-benchmark (issue "Verso server", item 7).
# Starts redis-server (Debian's, persistence off) and `verso serve` on free loopback ports and,
# for each in turn, runs `redis-benchmark -c 50 -n N -r 1000000 -d 100` for SET then GET,
# with and without -P 16, RUNS times (interleaved). For each run it reads the server's
# user+system CPU time from /proc/PID/stat before and after, so the table shows requests per
# second, p50/p99 latency and server CPU microseconds per request, with Verso/Redis ratios.
# Then it loads 1 M keys with 100-byte values (redis-cli --pipe) into fresh servers and
# compares their RSS.
#
#   bench/server-vs-redis.sh [RUNS] [N]          (defaults: 3 runs, 200000 requests)
#   VERSO_ARGS="--threads 1" bench/server-vs-redis.sh    (more `verso serve` flags)
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-3}
n=${2:-200000}
if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
if ! command -v redis-server >/dev/null || ! command -v redis-benchmark >/dev/null; then
  $SUDO apt-get update -qq && $SUDO apt-get install -y -qq redis-server redis-tools >/dev/null
fi
cargo build --release -q -p verso
out=$(mktemp -d)
# The servers are started inside $(...), so they are not this shell's jobs: kill them by PID.
rpid=""; vpid=""
trap 'kill $rpid $vpid 2>/dev/null || true; rm -rf "$out"' EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() { for _ in $(seq 100); do redis-cli -p "$1" PING >/dev/null 2>&1 && return 0; sleep 0.1; done; return 1; }
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
start_redis() {
  # Output to files: `$(start_redis ...)` would otherwise wait for the server's stdout to close.
  redis-server --port "$1" --save "" --appendonly no --daemonize no --logfile "$out/redis.log" >/dev/null 2>&1 &
  echo $!
}
start_verso() {
  # Redis runs with persistence off; so does Verso.
  # shellcheck disable=SC2086
  target/release/verso serve --port "$1" --durability none ${VERSO_ARGS:-} >/dev/null 2>"$out/verso.log" &
  echo $!
}

rport=$(free_port); vport=$(free_port)
rpid=$(start_redis "$rport"); vpid=$(start_verso "$vport")
wait_port "$rport"; wait_port "$vport"
tck=$(getconf CLK_TCK)
echo "server,test,pipeline,run,rps,p50_ms,p99_ms,cpu_us_per_req" >"$out/runs.csv"
for ((r = 1; r <= runs; r++)); do
  for pipe in 1 16; do
    for test in set get; do
      for server in redis verso; do
        if [ $server = redis ]; then port=$rport; pid=$rpid; else port=$vport; pid=$vpid; fi
        before=$(cpu_ticks "$pid")
        line=$(redis-benchmark -p "$port" -c 50 -n "$n" -r 1000000 -d 100 -P "$pipe" -t "$test" --csv | tail -1)
        after=$(cpu_ticks "$pid")
        # "test","rps","avg","min","p50","p95","p99","max"
        python3 - "$server" "$test" "$pipe" "$r" "$line" "$before" "$after" "$tck" "$n" >>"$out/runs.csv" <<'PY'
import sys
server, test, pipe, run, line, before, after, tck, n = sys.argv[1:]
f = [x.strip('"') for x in line.split('","')]
rps, p50, p99 = float(f[1]), float(f[4]), float(f[6])
cpu_us = (int(after) - int(before)) / int(tck) * 1e6 / int(n)
print(f"{server},{test},{pipe},{run},{rps:.0f},{p50:.3f},{p99:.3f},{cpu_us:.2f}")
PY
      done
    done
  done
done
kill "$rpid" "$vpid"; wait "$rpid" "$vpid" 2>/dev/null || true

# Memory: 1 M keys of 100-byte values into fresh servers.
rport=$(free_port); vport=$(free_port)
rpid=$(start_redis "$rport"); vpid=$(start_verso "$vport")
wait_port "$rport"; wait_port "$vport"
python3 -c '
import sys
v = "x" * 100
w = sys.stdout.write
for i in range(1000000):
    k = "key:%07d" % i
    w("*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$100\r\n%s\r\n" % (len(k), k, v))
' >"$out/load.resp"
for port in $rport $vport; do redis-cli -p "$port" --pipe <"$out/load.resp" >/dev/null; done
rss() { awk '/VmRSS/ {print $2}' "/proc/$1/status"; }
r_rss=$(rss "$rpid"); v_rss=$(rss "$vpid")
r_keys=$(redis-cli -p "$rport" DBSIZE); v_keys=$(redis-cli -p "$vport" DBSIZE)

python3 - "$out/runs.csv" "$r_rss" "$v_rss" "$r_keys" "$v_keys" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
med = lambda xs: statistics.median(xs)
print("| test | pipeline | Redis rps | Verso rps | ratio | Redis p50/p99 ms | Verso p50/p99 ms | Redis CPU µs/req | Verso CPU µs/req | ratio |")
print("|---|---|---:|---:|---:|---|---|---:|---:|---:|")
for test in ("set", "get"):
    for pipe in ("1", "16"):
        pick = lambda s, k: med(float(r[k]) for r in rows if r["server"] == s and r["test"] == test and r["pipeline"] == pipe)
        rr, vr = pick("redis", "rps"), pick("verso", "rps")
        rc, vc = pick("redis", "cpu_us_per_req"), pick("verso", "cpu_us_per_req")
        print(f"| {test.upper()} | {pipe} | {rr:,.0f} | {vr:,.0f} | {vr/rr:.2f} | {pick('redis','p50_ms'):.2f}/{pick('redis','p99_ms'):.2f} | {pick('verso','p50_ms'):.2f}/{pick('verso','p99_ms'):.2f} | {rc:.2f} | {vc:.2f} | {vc/rc:.2f} |")
r_rss, v_rss, r_keys, v_keys = (int(x) for x in sys.argv[2:6])
print()
print(f"RSS after 1 M SETs of 100-byte values: Redis {r_rss/1024:.0f} MiB ({r_keys} keys), Verso {v_rss/1024:.0f} MiB ({v_keys} keys), ratio {v_rss/r_rss:.2f}")
PY
