#!/usr/bin/env bash
# The server-memory targets of the bounded-memory issue, for one or more `verso` binaries
# side by side (default: this tree's release build): key churn (300,000 SET + DEL of unique
# keys after a warm-up pass), SCAN 0 on the emptied database, and an idle WATCH while
# 300,000 SETs hit 1,000 keys. Each binary serves with `--durability none` on a free
# loopback port; RUNS rounds (interleaved), one JSON line per binary and round, then the
# medians.
#
#   bench/server-memory.sh [RUNS] [BINARY...]
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-3}
shift || true
if [ $# -eq 0 ]; then
  cargo build --release -q -p verso
  set -- target/release/verso
fi
python=$(scripts/pyenv.sh)
if ! command -v redis-cli >/dev/null; then
  if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
  $SUDO apt-get update -qq && $SUDO apt-get install -y -qq redis-tools >/dev/null
fi
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() { for _ in $(seq 100); do redis-cli -p "$1" PING >/dev/null 2>&1 && return 0; sleep 0.1; done; return 1; }
pid=""
trap 'kill $pid 2>/dev/null || true' EXIT
results=$(mktemp)
for ((r = 1; r <= runs; r++)); do
  for bin in "$@"; do
    port=$(free_port)
    "$bin" serve --port "$port" --durability none >/dev/null 2>&1 &
    pid=$!
    wait_port "$port"
    line=$("$python" bench/server_memory.py "$port" "$pid")
    kill "$pid"; wait "$pid" 2>/dev/null || true; pid=""
    echo "{\"binary\": \"$bin\", \"run\": $r, \"result\": $line}" | tee -a "$results"
  done
done
"$python" - "$results" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
keys = ["churn_rss_growth_mib", "churn_dbsize", "scan0_ms", "watch_rss_growth_mib"]
print("\nmedians: binary | " + " | ".join(keys))
for b in dict.fromkeys(r["binary"] for r in rows):
    vals = [statistics.median(r["result"][k] for r in rows if r["binary"] == b) for k in keys]
    print(f"{b} | " + " | ".join(str(v) for v in vals))
PY
rm -f "$results"
