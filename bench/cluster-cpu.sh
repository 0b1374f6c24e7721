#!/usr/bin/env bash
# Sharded Verso against one server and against Redis Cluster (issue 17, item 7): for SET and
# GET with `redis-benchmark -c 50 -n N -r 1000000 -d 100` (`--cluster` on clusters), the
# requests per second and the server CPU microseconds per request summed over every server
# process (/proc/PID/stat), RUNS rounds interleaved, medians. Configurations:
#   verso          one `verso serve` (not sharded)
#   verso-1g       `verso cluster local --groups 1 --replicas 1` (sharded: routing cost)
#   verso-2g       2 groups of 1 server
#   verso-3g       3 groups of 1 server
#   verso-2g3r     2 groups of 3 replicas (Lazy VSR)
#   redis-cluster  Redis Cluster 7: 3 primaries with one replica each
#   gateway        `verso gateway --local-groups 2`: 2 NCC groups of 3 replicas (answers on
#                  a majority's disks) behind the gateway, every command one NCC transaction
#   NAME-base      any Verso configuration above, run with the binary $BASE_BIN (an older
#                  build, for a before/after comparison in the same run)
# Persistence is off where it can be (Redis; Verso groups of 1); replicated Verso groups are
# lazy (a majority in memory). Beside redis-benchmark, bench/kvload sends SETs routed by slot
# from 50 connections: to Redis Cluster each followed by `WAIT 1 0` (a write held by a
# primary and a replica, the nearest match to a Lazy VSR majority), to Verso's replicated
# groups plain (every write is held by a majority before its reply). On Redis Cluster and
# the gateway, `mget-1slot` is a single-slot MGET of two keys (`{t}:R {t}:R'`, random R:
# keys nobody wrote, on both systems alike), sent to the node that owns the slot (issue
# 19's target: no more server CPU per request than Redis Cluster's). The gateway's groups
# answer once a majority's disks hold each input (its default), reads included.
#
#   bench/cluster-cpu.sh [RUNS] [N]      (defaults: 3 runs, 200000 requests)
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-3}
n=${2:-200000}
if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
if ! command -v redis-server >/dev/null || ! command -v redis-benchmark >/dev/null; then
  $SUDO apt-get update -qq && $SUDO apt-get install -y -qq redis-server redis-tools >/dev/null
fi
cargo build --release -q -p verso
cargo build --release --manifest-path bench/kvload/Cargo.toml --quiet
kvload=$PWD/bench/kvload/target/release/kvload
out=$(mktemp -d)
pids=""
launcher=""
cleanup() {
  [ -n "$launcher" ] && kill -INT "$launcher" 2>/dev/null && wait "$launcher" 2>/dev/null
  [ -n "$pids" ] && kill $pids 2>/dev/null
  rm -rf "$out"
}
trap cleanup EXIT
tck=$(getconf CLK_TCK)
cpu_of() { local t=0; for p in $1; do t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat"))); done; echo $t; }
wait_port() { for _ in $(seq 300); do redis-cli -p "$1" PING >/dev/null 2>&1 && return 0; sleep 0.1; done; return 1; }

# Starts a configuration; sets $pids (server processes), $port and $cluster_flag.
start() {
  launcher=""; pids=""; cluster_flag=""
  local bin=target/release/verso config=$1
  case $config in *-base) bin=${BASE_BIN:?set BASE_BIN for a -base configuration}; config=${config%-base} ;; esac
  # A base port whose neighbourhood is free: base..base+59, their +1000 (Verso's peers)
  # and +10000 (Redis Cluster's bus).
  local base
  base=$(python3 - <<'PY'
import random, socket
def free(p):
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", p)); return True
        except OSError:
            return False
for _ in range(500):
    b = random.randrange(20000, 30000, 100)
    if all(free(b + d + o) for d in range(60) for o in (0, 1000, 10000)):
        print(b); break
PY
)
  case $config in
    verso)
      port=$base
      "$bin" serve --port "$port" --durability none --data-dir "$out/single" >/dev/null 2>&1 &
      pids=$!; wait_port "$port" ;;
    verso-1g|verso-2g|verso-3g|verso-2g3r)
      local g=1 r=1 d=none
      [ "$config" = verso-2g ] && g=2
      [ "$config" = verso-3g ] && g=3
      [ "$config" = verso-2g3r ] && { g=2; r=3; d=lazy; }
      rm -rf "$out/cl"
      "$bin" cluster local --groups $g --replicas $r --durability $d \
        --base-port "$base" --dir "$out/cl" >"$out/launcher.log" 2>&1 &
      launcher=$!
      for _ in $(seq 300); do grep -q '^clients:' "$out/launcher.log" && break; sleep 0.1; done
      pids=$(pgrep -P "$launcher" | tr '\n' ' ')
      # redis-benchmark --cluster refuses a cluster of one node; one group owns every slot.
      port=$base; cluster_flag=--cluster; [ "$config" = verso-1g ] && cluster_flag=""
      # Replicated groups: wait for a primary in each (a write through the cluster).
      for _ in $(seq 300); do redis-cli -c -p "$port" SET probe:x 1 2>/dev/null | grep -q OK && redis-cli -c -p "$port" SET probe:y 1 2>/dev/null | grep -q OK && break; sleep 0.1; done ;;
    redis-cluster)
      mkdir -p "$out/rc"; rm -rf "$out/rc"/*
      local ports=""
      for i in 0 1 2 3 4 5; do
        local p=$((base + i))
        (cd "$out/rc" && redis-server --port $p --cluster-enabled yes --cluster-config-file "nodes-$p.conf" \
          --save "" --appendonly no --logfile "redis-$p.log" >/dev/null 2>&1 &)
        ports="$ports 127.0.0.1:$p"
      done
      for i in 0 1 2 3 4 5; do wait_port $((base + i)) || { tail -5 "$out/rc/redis-$((base + i)).log" >&2; return 1; }; done
      redis-cli --cluster create $ports --cluster-replicas 1 --cluster-yes >/dev/null 2>&1
      for _ in $(seq 300); do redis-cli -p "$base" CLUSTER INFO | grep -q 'cluster_state:ok' && break; sleep 0.1; done
      sleep 1
      pids=$(for i in 0 1 2 3 4 5; do pgrep -f "redis-server .*:$((base + i)) \[cluster\]"; done | tr '\n' ' ')
      port=$base; cluster_flag=--cluster ;;
    gateway)
      rm -rf "$out/gw"
      "$bin" gateway --local-groups 2 --listen "127.0.0.1:$base" --dir "$out/gw" \
        >"$out/launcher.log" 2>&1 &
      launcher=$!
      for _ in $(seq 300); do grep -q '^listening' "$out/launcher.log" && break; sleep 0.1; done
      pids="$launcher $(pgrep -P "$launcher" | tr '\n' ' ')"
      port=$base
      # Every group answers (a transaction over both).
      for _ in $(seq 300); do redis-cli -p "$port" MSET probe:a 1 probe:b 1 2>/dev/null | grep -q OK && break; sleep 0.1; done ;;
  esac
}
# The port of the Redis Cluster primary that owns KEY's slot (others answer MOVED).
owner_port() {
  for i in 0 1 2 3 4 5; do
    if ! redis-cli -p $((port + i)) GET "$1" 2>&1 | grep -q MOVED; then echo $((port + i)); return; fi
  done
  return 1
}
stop() {
  if [ -n "$launcher" ]; then
    if ! kill -INT "$launcher" 2>/dev/null; then
      echo "the cluster launcher had already exited; its log:" >&2
      tail -20 "$out/launcher.log" >&2
      exit 1
    fi
    wait "$launcher" 2>/dev/null || true; launcher=""
  fi
  [ -n "$pids" ] && { kill $pids 2>/dev/null || true; sleep 0.5; }
  pids=""
}

configs=${CONFIGS:-"verso verso-1g verso-2g verso-3g verso-2g3r redis-cluster"}
echo "config,test,run,rps,cpu_us_per_req,processes" >"$out/runs.csv"
for ((r = 1; r <= runs; r++)); do
  for c in $configs; do
    start "$c"
    tests="set get"
    [ "${c%-base}" = verso-2g3r ] && tests="$tests set-kvload"
    [ "$c" = redis-cluster ] && tests="$tests set-wait1 mget-1slot"
    [ "${c%-base}" = gateway ] && { tests="$tests mget-1slot"; cluster_flag=""; }
    for test in $tests; do
      before=$(cpu_of "$pids")
      case $test in
        set|get)
          line=$(redis-benchmark -p "$port" $cluster_flag -c 50 -n "$n" -r 1000000 -d 100 -t "$test" --csv 2>/dev/null | tail -1)
          rps=$(echo "$line" | cut -d, -f2 | tr -d '"') ;;
        set-kvload) rps=$("$kvload" resp-cluster "127.0.0.1:$port" 50 "$n" 100 | cut -d' ' -f1) ;;
        set-wait1) rps=$("$kvload" resp-cluster-wait1 "127.0.0.1:$port" 50 "$n" 100 | cut -d' ' -f1) ;;
        mget-1slot)
          to=$port; [ "$c" = redis-cluster ] && to=$(owner_port "{t}:1")
          line=$(redis-benchmark -p "$to" -c 50 -n "$n" -r 1000000 --csv MGET "{t}:__rand_int__" "{t}:__rand_int__" 2>/dev/null | tail -1)
          rps=$(echo "$line" | cut -d, -f2 | tr -d '"') ;;
      esac
      after=$(cpu_of "$pids")
      cpu=$(python3 -c "print(round(($after - $before) / $tck * 1e6 / $n, 2))")
      echo "$c,$test,$r,$rps,$cpu,$(echo $pids | wc -w)" | tee -a "$out/runs.csv"
    done
    stop
  done
done
echo
python3 - "$out/runs.csv" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
print("| configuration | processes | SET rps | SET CPU µs/req | GET rps | GET CPU µs/req |")
print("|---|---:|---:|---:|---:|---:|")
seen = []
for r in rows:
    if r["config"] not in seen:
        seen.append(r["config"])
for c in seen:
    cells = []
    procs = next(r["processes"] for r in rows if r["config"] == c)
    for t in ("set", "get"):
        rs = [r for r in rows if r["config"] == c and r["test"] == t]
        cells.append(f"{statistics.median(float(r['rps']) for r in rs):,.0f}")
        cells.append(f"{statistics.median(float(r['cpu_us_per_req']) for r in rs):.2f}")
    print(f"| {c} | {procs} | " + " | ".join(cells) + " |")
extra = [(c, t) for c in seen for t in ("set-kvload", "set-wait1", "mget-1slot") if any(r["config"] == c and r["test"] == t for r in rows)]
if extra:
    print()
    print("| configuration | test | rps | CPU µs/req |")
    print("|---|---|---:|---:|")
    for c, t in extra:
        rs = [r for r in rows if r["config"] == c and r["test"] == t]
        what = {"set-wait1": "SET + WAIT 1 0 (kvload)", "set-kvload": "SET, a majority holds it (kvload)",
                "mget-1slot": "MGET of 2 keys in one slot"}[t]
        print(f"| {c} | {what} | {statistics.median(float(r['rps']) for r in rs):,.0f} | {statistics.median(float(r['cpu_us_per_req']) for r in rs):.2f} |")
PY
echo "(medians of $runs; $(nproc) cores; load average $(cut -d' ' -f1-3 /proc/loadavg); commit $(git rev-parse --short HEAD))"
