#!/usr/bin/env bash
# A slot move under load (issue 17, item 7): Verso's online move (`verso cluster move`) beside
# Redis Cluster's `redis-cli --cluster reshard`, each moving slots 0-5460 (a third of KEYS
# keys of 100 bytes) from the first primary to the second while bench/kvload's `follow`
# client (CLIENTS connections, SETs over all the keys, following MOVED, ASK and TRYAGAIN)
# runs for SECONDS. Verso: three groups of one server (`--durability lazy`: every transfer
# record on disk), and three Lazy VSR groups of three replicas (`verso-3r`: every transfer
# record on a majority's disks; 9 servers on this machine's cores); Redis: three primaries
# (its minimum), no replicas, persistence off. RUNS rounds, interleaved.
#
# Per run: how long the move took, the SET throughput before it (median of the 100 ms
# windows of the first 3 s), the worst 500 ms window from the move's start to its end plus
# 0.5 s, as a share of that, and how long a request kept getting TRYAGAIN (p99, max).
# Timelines (SETs per 100 ms) are kept in results/slot-move/, and run 1 of each is drawn
# in results/slot-move/timeline.svg (bench/plot-timeline.py).
#
# SYSTEMS picks among verso, verso-3r and redis-cluster (default: all three); verso-base and
# verso-3r-base run the same with the binary $BASE_BIN (an older build, for a before/after
# comparison in the same run).
#
#   bench/slot-move.sh [RUNS] [KEYS] [CLIENTS] [SECONDS]   (defaults: 3 300000 16 10)
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-3}
keys=${2:-300000}
clients=${3:-16}
seconds=${4:-10}
if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
if ! command -v redis-server >/dev/null || ! command -v redis-cli >/dev/null; then
  $SUDO apt-get update -qq && $SUDO apt-get install -y -qq redis-server redis-tools >/dev/null
fi
cargo build --release -q -p verso
cargo build --release --manifest-path bench/kvload/Cargo.toml --quiet
kvload=$PWD/bench/kvload/target/release/kvload
out=$(mktemp -d)
mkdir -p results/slot-move
launcher=""; pids=""
cleanup() {
  [ -n "$launcher" ] && kill -INT "$launcher" 2>/dev/null && wait "$launcher" 2>/dev/null
  [ -n "$pids" ] && kill $pids 2>/dev/null
  rm -rf "$out"
}
trap cleanup EXIT
wait_port() { for _ in $(seq 300); do redis-cli -p "$1" PING >/dev/null 2>&1 && return 0; sleep 0.1; done; return 1; }
free_base() {
  python3 - <<'PY'
import random, socket
def free(p):
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", p)); return True
        except OSError:
            return False
for _ in range(500):
    b = random.randrange(20000, 30000, 100)
    if all(free(b + d + o) for d in range(20) for o in (0, 1000, 10000)):
        print(b); break
PY
}
# The keys kvload writes (`key:` and 12 digits below KEYS), 100-byte values, one RESP file
# per primary's slots (Verso's even split and Redis's differ by a slot), so each loads there.
python3 - "$keys" "$out" <<'PY'
import sys
keys, out = int(sys.argv[1]), sys.argv[2]
def crc16(b):
    crc = 0
    for x in b:
        crc ^= x << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) & 0xFFFF if crc & 0x8000 else (crc << 1) & 0xFFFF
    return crc
v = "x" * 100
splits = {"verso": (5461, 10922), "redis": (5461, 10923)}
files = {s: [open(f"{out}/{s}{i}.resp", "w") for i in range(3)] for s in splits}
for i in range(keys):
    k = "key:%012d" % i
    slot = crc16(k.encode()) % 16384
    line = "*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$100\r\n%s\r\n" % (len(k), k, v)
    for s, (a, b) in splits.items():
        files[s][(slot >= a) + (slot >= b)].write(line)
PY

# Runs kvload for $seconds beside the move command "$@" started after 3 s; prints
# "move_s rps redirects asks tryagain_n p99_ms max_ms" and leaves the timeline in $out/timeline.
under_load() {
  local port=$1; shift
  "$kvload" follow "127.0.0.1:$port" "$clients" "$seconds" 100 "$keys" "$out/timeline" </dev/null >"$out/load.txt" &
  local load=$!
  sleep 3
  local t0 t1
  t0=$(date +%s.%N)
  "$@" >"$out/move.log" 2>&1 || { cat "$out/move.log" >&2; kill $load; return 1; }
  t1=$(date +%s.%N)
  wait $load
  echo "$(python3 -c "print(f'{$t1 - $t0:.2f}')") $(cat "$out/load.txt")"
}

echo "system,run,move_s,rps,redirects,asks,tryagain_requests,tryagain_p99_ms,tryagain_max_ms,before_rps,worst_500ms_rps,worst_share" >"$out/runs.csv"
summarize() { # system run line
  python3 - "$1" "$2" "$3" "$out/timeline" <<'PY' | tee -a "$out/runs.csv"
import statistics, sys
system, run, line, path = sys.argv[1], sys.argv[2], sys.argv[3].split(), sys.argv[4]
move_s = float(line[0])
counts = [int(l.split()[1]) for l in open(path)]
before = statistics.median(counts[:30]) * 10            # per second, first 3 s
lo, hi = 30, min(len(counts), 30 + int(move_s * 10) + 5)  # the move, plus 0.5 s
windows = [sum(counts[i:i + 5]) * 2 for i in range(lo, max(lo + 1, hi - 4))]
worst = min(windows) if windows else 0
print(f"{system},{run},{move_s},{line[1]},{line[2]},{line[3]},{line[4]},{line[5]},{line[6]},{before:.0f},{worst},{worst / before:.2f}")
PY
  cp "$out/timeline" "results/slot-move/slot-move-$1-$2.txt"
}

systems=${SYSTEMS:-"verso verso-3r redis-cluster"}
for ((r = 1; r <= runs; r++)); do
  # Verso: three groups of one server, or of three replicas.
  for system in $systems; do
    [ "$system" = redis-cluster ] && continue
    bin=target/release/verso
    case $system in *-base) bin=${BASE_BIN:?set BASE_BIN for a -base system} ;; esac
    replicas=1; [ "${system%-base}" = verso-3r ] && replicas=3
    base=$(free_base)
    rm -rf "$out/cl"
    "$bin" cluster local --groups 3 --replicas "$replicas" --durability lazy \
      --base-port "$base" --dir "$out/cl" </dev/null >"$out/launcher.log" 2>&1 &
    launcher=$!
    for _ in $(seq 300); do grep -q '^clients:' "$out/launcher.log" && break; sleep 0.1; done
    # Each group serves once it has a primary whose mover has read the move logs (CLUSTER
    # MOVES stops saying LOADING there; a backup names its primary instead).
    primaries=()
    for i in 0 1 2; do
      p=""
      for _ in $(seq 300); do
        p=$(redis-cli -p $((base + 10 * i)) INFO replication | tr -d '\r' | sed -n 's/^vsr_primary:127.0.0.1://p')
        [ "$replicas" = 1 ] && p=$((base + 10 * i))
        [ -n "$p" ] && ! redis-cli -p "$p" CLUSTER MOVES 2>&1 | grep -q 'LOADING\|CONFIG' && break
        sleep 0.05
      done
      primaries+=("$p")
    done
    for i in 0 1 2; do redis-cli -p "${primaries[$i]}" --pipe <"$out/verso$i.resp" >/dev/null; done
    line=$(under_load "${primaries[0]}" "$bin" cluster move --slots 0-5460 --to 1 --node "127.0.0.1:${primaries[0]}")
    summarize "$system" "$r" "$line"
    kill -INT "$launcher"; wait "$launcher" 2>/dev/null || true; launcher=""
  done

  # Redis Cluster: three primaries.
  case " $systems " in *" redis-cluster "*) ;; *) continue ;; esac
  base=$(free_base)
  mkdir -p "$out/rc"; rm -rf "$out/rc"/*
  for i in 0 1 2; do
    p=$((base + i))
    (cd "$out/rc" && redis-server --port $p --cluster-enabled yes --cluster-config-file "nodes-$p.conf" \
      --save "" --appendonly no --logfile "redis-$p.log" &) </dev/null >/dev/null 2>&1
  done
  for i in 0 1 2; do wait_port $((base + i)); done
  redis-cli --cluster create "127.0.0.1:$base" "127.0.0.1:$((base + 1))" "127.0.0.1:$((base + 2))" \
    --cluster-replicas 0 --cluster-yes >/dev/null 2>&1
  for _ in $(seq 300); do redis-cli -p "$base" CLUSTER INFO | grep -q 'cluster_state:ok' && break; sleep 0.1; done
  sleep 1
  pids=$(for i in 0 1 2; do pgrep -f "redis-server .*:$((base + i)) \[cluster\]"; done | tr '\n' ' ')
  for i in 0 1 2; do redis-cli -p $((base + i)) --pipe <"$out/redis$i.resp" >/dev/null; done
  from=$(redis-cli -p "$base" CLUSTER MYID); to=$(redis-cli -p $((base + 1)) CLUSTER MYID)
  line=$(under_load "$base" redis-cli --cluster reshard "127.0.0.1:$base" --cluster-from "$from" \
    --cluster-to "$to" --cluster-slots 5461 --cluster-yes)
  summarize redis-cluster "$r" "$line"
  kill $pids 2>/dev/null || true; sleep 0.5; pids=""
done
echo
python3 - "$out/runs.csv" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
print("| system | move s | SET rps before | worst 500 ms during the move | share | TRYAGAIN requests | TRYAGAIN p99 / max ms |")
print("|---|---:|---:|---:|---:|---:|---|")
for s in dict.fromkeys(r["system"] for r in rows):
    rs = [r for r in rows if r["system"] == s]
    m = lambda k: statistics.median(float(r[k]) for r in rs)
    print(f"| {s} | {m('move_s'):.2f} | {m('before_rps'):,.0f} | {m('worst_500ms_rps'):,.0f} | {m('worst_share'):.2f} | {m('tryagain_requests'):.0f} | {m('tryagain_p99_ms'):.1f} / {m('tryagain_max_ms'):.1f} |")
PY
echo "(medians of $runs; $(nproc) cores; load average $(cut -d' ' -f1-3 /proc/loadavg); commit $(git rev-parse --short HEAD))"
[ -n "${SYSTEMS:-}" ] && exit 0   # the plot draws the three default systems
python3 bench/plot-timeline.py results/slot-move/timeline.svg \
  "Verso: verso cluster move=results/slot-move/slot-move-verso-1.txt" \
  "Verso, 3 replicas per group=results/slot-move/slot-move-verso-3r-1.txt" \
  "Redis Cluster: redis-cli --cluster reshard=results/slot-move/slot-move-redis-cluster-1.txt" --mark 3
echo "timeline: results/slot-move/timeline.svg"
