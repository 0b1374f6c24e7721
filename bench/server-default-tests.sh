#!/usr/bin/env bash
# `redis-benchmark`'s default tests (issue 15's target: every one runs without errors against
# `verso serve`, at >= 0.9x Redis's requests per second) against Redis and Verso side by side.
# Starts redis-server (Debian's, persistence off) and `verso serve --durability none` on free
# loopback ports; for each run and each test group (-t ping, set, get, incr, lpush, rpush,
# lpop, rpop, sadd, hset, spop, zadd, zpopmin, lrange, mset: the default run, one group at a
# time so each gets its own CPU figure), runs `redis-benchmark -c 50 -n N` on Redis then on
# Verso, reading each server's user+system CPU from /proc/PID/stat around it. Prints medians:
# requests per second, ratio, and server CPU microseconds per request (for the lrange group,
# its LPUSH fill and four LRANGE tests share one CPU figure). Then loads 1 M hash fields and
# 1 M sorted-set members (100-byte values) into fresh servers and compares RSS.
#
#   bench/server-default-tests.sh [RUNS] [N]      (defaults: 3 runs, 200000 requests)
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
rpid=""; vpid=""
trap 'kill $rpid $vpid 2>/dev/null || true; rm -rf "$out"' EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() { for _ in $(seq 100); do redis-cli -p "$1" PING >/dev/null 2>&1 && return 0; sleep 0.1; done; return 1; }
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
start_redis() {
  redis-server --port "$1" --save "" --appendonly no --daemonize no --logfile "$out/redis.log" >/dev/null 2>&1 &
  echo $!
}
start_verso() {
  target/release/verso serve --port "$1" --durability none >/dev/null 2>"$out/verso.log" &
  echo $!
}

rport=$(free_port); vport=$(free_port)
rpid=$(start_redis "$rport"); vpid=$(start_verso "$vport")
wait_port "$rport"; wait_port "$vport"
tck=$(getconf CLK_TCK)
echo "server,group,test,run,rps,cpu_us_per_req,errors" >"$out/runs.csv"
groups="ping set get incr lpush rpush lpop rpop sadd hset spop zadd zpopmin lrange mset"
for ((r = 1; r <= runs; r++)); do
  for group in $groups; do
    for server in redis verso; do
      if [ $server = redis ]; then port=$rport; pid=$rpid; else port=$vport; pid=$vpid; fi
      redis-cli -p "$port" FLUSHALL >/dev/null
      before=$(cpu_ticks "$pid")
      # Errors go to stderr; keep them to count.
      redis-benchmark -p "$port" -c 50 -n "$n" -t "$group" --csv >"$out/one.csv" 2>"$out/err.txt" || true
      after=$(cpu_ticks "$pid")
      python3 - "$server" "$group" "$r" "$out/one.csv" "$out/err.txt" "$before" "$after" "$tck" "$n" >>"$out/runs.csv" <<'PY'
import csv, sys
server, group, run, path, errs, before, after, tck, n = sys.argv[1:]
rows = [r for r in csv.reader(open(path)) if r and r[0] != "test"]
errors = sum(1 for line in open(errs) if "ERR" in line or "rror" in line)
total = len(rows) * int(n)
cpu_us = (int(after) - int(before)) / int(tck) * 1e6 / max(total, 1)
for r in rows:
    print(f"{server},{group},{r[0]},{run},{float(r[1]):.0f},{cpu_us:.2f},{errors}")
PY
    done
  done
done
kill "$rpid" "$vpid"; wait "$rpid" "$vpid" 2>/dev/null || true

# Memory: 1 M hash fields (1,000 hashes of 1,000 fields) and 1 M sorted-set members (1,000
# sorted sets of 1,000), 100-byte values, into fresh servers.
python3 -c '
import sys
v = "x" * 100
w = sys.stdout.write
def cmd(*a):
    w("*%d\r\n" % len(a))
    for x in a:
        w("$%d\r\n%s\r\n" % (len(x), x))
for h in range(1000):
    for f in range(1000):
        cmd("HSET", "hash:%04d" % h, "field:%04d" % f, v)
' >"$out/hash.resp"
python3 -c '
import sys
w = sys.stdout.write
def cmd(*a):
    w("*%d\r\n" % len(a))
    for x in a:
        w("$%d\r\n%s\r\n" % (len(x), x))
for z in range(1000):
    for m in range(1000):
        cmd("ZADD", "zset:%04d" % z, str(m * 1.5), "member:%04d:%s" % (m, "y" * 88))
' >"$out/zset.resp"
rss() { awk '/VmRSS/ {print $2}' "/proc/$1/status"; }
mem=""
for load in hash zset; do
  rport=$(free_port); vport=$(free_port)
  rpid=$(start_redis "$rport"); vpid=$(start_verso "$vport")
  wait_port "$rport"; wait_port "$vport"
  base_r=$(rss "$rpid"); base_v=$(rss "$vpid")
  for port in $rport $vport; do redis-cli -p "$port" --pipe <"$out/$load.resp" >/dev/null; done
  mem="$mem $load $(rss "$rpid") $(rss "$vpid") $base_r $base_v"
  kill "$rpid" "$vpid"; wait "$rpid" "$vpid" 2>/dev/null || true
done

python3 - "$out/runs.csv" $mem <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
med = statistics.median
tests = []
for r in rows:
    if r["test"] not in tests:
        tests.append(r["test"])
print("| test | Redis rps | Verso rps | ratio | Redis CPU µs/req | Verso CPU µs/req | ratio | Verso errors |")
print("|---|---:|---:|---:|---:|---:|---:|---:|")
for t in tests:
    pick = lambda s, k: med(float(r[k]) for r in rows if r["server"] == s and r["test"] == t)
    rr, vr = pick("redis", "rps"), pick("verso", "rps")
    rc, vc = pick("redis", "cpu_us_per_req"), pick("verso", "cpu_us_per_req")
    errs = max(int(r["errors"]) for r in rows if r["server"] == "verso" and r["test"] == t)
    print(f"| {t} | {rr:,.0f} | {vr:,.0f} | {vr/rr:.2f} | {rc:.2f} | {vc:.2f} | {vc/rc:.2f} | {errs} |")
m = sys.argv[2:]
print()
for i in range(0, len(m), 5):
    load, r_rss, v_rss, r0, v0 = m[i], *map(int, m[i + 1:i + 5])
    what = "1 M hash fields" if load == "hash" else "1 M sorted-set members"
    print(f"RSS after {what} (100-byte values): Redis {r_rss/1024:.0f} MiB, Verso {v_rss/1024:.0f} MiB, ratio {v_rss/r_rss:.2f} (empty servers: {r0/1024:.0f} / {v0/1024:.0f} MiB)")
PY
