#!/usr/bin/env bash
# Server CPU per GET and SET of long keys (45 bytes: `session:NNNNNNNNNNNN:sss...`, whose
# tail past Masstree's second slice is 29 bytes), `verso serve` beside BASE_BIN (another
# build) and Redis, interleaved. Each server is loaded with the 1 M keys first; then
# `redis-benchmark -c 50 -P 16 -r 1000000` GETs and SETs over them, RUNS times.
#
#   BASE_BIN=/path/to/old/verso bench/long-key-gets.sh [RUNS] [N]   (defaults: 3, 2000000)
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-3}
n=${2:-2000000}
if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
if ! command -v redis-server >/dev/null || ! command -v redis-benchmark >/dev/null; then
  $SUDO apt-get update -qq && $SUDO apt-get install -y -qq redis-server redis-tools >/dev/null
fi
cargo build --release -q -p verso
out=$(mktemp -d)
pids=""
trap 'kill $pids 2>/dev/null || true; rm -rf "$out"' EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() { for _ in $(seq 100); do redis-cli -p "$1" PING >/dev/null 2>&1 && return 0; sleep 0.1; done; return 1; }
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
tail24=$(printf 's%.0s' $(seq 24))
python3 - "$out/load.resp" "$tail24" <<'PY'
import sys
v = "x" * 100
with open(sys.argv[1], "w") as f:
    for i in range(1000000):
        k = "session:%012d:%s" % (i, sys.argv[2])
        f.write("*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$100\r\n%s\r\n" % (len(k), k, v))
PY
systems="redis verso"
if [ -n "${BASE_BIN:-}" ]; then systems="$systems verso-base"; fi
declare -A port pid
for s in $systems; do
  port[$s]=$(free_port)
  case $s in
    redis) redis-server --port "${port[$s]}" --save "" --appendonly no --daemonize no --logfile "$out/redis.log" >/dev/null 2>&1 & ;;
    verso) target/release/verso serve --port "${port[$s]}" --durability none >/dev/null 2>"$out/verso.log" & ;;
    verso-base) "$BASE_BIN" serve --port "${port[$s]}" --durability none >/dev/null 2>"$out/base.log" & ;;
  esac
  pid[$s]=$!; pids="$pids ${pid[$s]}"
  wait_port "${port[$s]}"
  redis-cli -p "${port[$s]}" --pipe <"$out/load.resp" >/dev/null
done
tck=$(getconf CLK_TCK)
echo "system,test,run,rps,cpu_us_per_req" >"$out/runs.csv"
for ((r = 1; r <= runs; r++)); do
  for test in get set; do
    for s in $systems; do
      if [ $test = get ]; then cmd=(GET "session:__rand_int__:$tail24"); else cmd=(SET "session:__rand_int__:$tail24" "$(printf 'x%.0s' $(seq 100))"); fi
      before=$(cpu_ticks "${pid[$s]}")
      line=$(redis-benchmark -p "${port[$s]}" -c 50 -P 16 -n "$n" -r 1000000 --csv "${cmd[@]}" | tail -1)
      after=$(cpu_ticks "${pid[$s]}")
      rps=$(echo "$line" | cut -d, -f2 | tr -d '"')
      echo "$s,$test,$r,$rps,$(python3 -c "print(f'{($after - $before) / $tck * 1e6 / $n:.3f}')")" >>"$out/runs.csv"
    done
  done
done
python3 - "$out/runs.csv" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
systems = list(dict.fromkeys(r["system"] for r in rows))
print("| test | " + " | ".join(f"{s} rps | {s} CPU µs/req" for s in systems) + " |")
print("|---|" + "---:|---:|" * len(systems))
for t in ("get", "set"):
    cells = []
    for s in systems:
        sel = [r for r in rows if r["system"] == s and r["test"] == t]
        rps = statistics.median(float(r["rps"]) for r in sel)
        cpu = [float(r["cpu_us_per_req"]) for r in sel]
        cells.append(f"{rps:,.0f} | {statistics.median(cpu):.2f} ({', '.join(f'{c:.2f}' for c in cpu)})")
    print(f"| {t.upper()} -P 16 | " + " | ".join(cells) + " |")
PY
echo
echo "$(date -u +%F), commit $(git rev-parse --short HEAD), load average $(cut -d' ' -f1-3 /proc/loadavg)"
