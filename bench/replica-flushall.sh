#!/usr/bin/env bash
# FLUSHALL of a large database on a Lazy VSR group of three `verso serve` replicas on
# loopback: loads KEYS short keys (`key:NNNNNNN` -> `v`) into the primary, times FLUSHALL,
# then sends one SET and `WAIT 2` at once (answered only if the group still has its
# primary), and reads DBSIZE on every replica (READONLY). Counts the view changes after
# the first election from the replicas' logs.
#
#   bench/replica-flushall.sh [RUNS] [KEYS] [VERSO_BINARY]
#
# Needs redis-cli (Debian's redis-tools). Ports 7100-7102 and 7200-7202 (PORT_BASE moves them).
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-3}
keys=${2:-1200000}
bin=${3:-target/release/verso}
base=${PORT_BASE:-7100}
command -v redis-cli >/dev/null || { echo "error: redis-cli is missing (apt-get install redis-tools)" >&2; exit 2; }
[ -x "$bin" ] || { echo "error: $bin is not an executable (cargo build --release)" >&2; exit 2; }
work=$(mktemp -d)
# The server's own view-change timeout (500 ms), which a long FLUSHALL must not trip.
VIEW_CHANGE_MS=${VIEW_CHANGE_MS:-500}
# shellcheck source=bench/replica-group.sh
source bench/replica-group.sh
trap 'stop; rm -rf "$work"' EXIT

python3 -c '
import sys
w = sys.stdout.write
for i in range(int(sys.argv[1])):
    k = "key:%07d" % i
    w("*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$1\r\nv\r\n" % (len(k), k))
' "$keys" >"$work/load.resp"

cli() { redis-cli -p "$1" "${@:2}"; }
now() { date +%s.%N; }
echo "| run | keys | FLUSHALL s | SET after it | WAIT 2 after it | DBSIZE per replica | view changes after the first |"
echo "|---|---:|---:|---|---|---|---:|"
for ((r = 1; r <= runs; r++)); do
  start_group "$bin" --threads 2
  cli "$primary" --pipe <"$work/load.resp" >/dev/null
  cli "$primary" wait 2 60000 >/dev/null
  start=$(now)
  flush=$(cli "$primary" flushall)
  took=$(python3 -c "print(f'{$(now) - $start:.2f}')")
  set_reply=$(cli "$primary" set after 1 | tr -d '\n' | cut -c1-40)
  wait_reply=$(cli "$primary" wait 2 30000 | tr -d '\n' | cut -c1-40)
  sizes=""
  for i in 0 1 2; do
    sizes="$sizes $(printf 'READONLY\r\nDBSIZE\r\n' | cli $((base + i)) 2>/dev/null | tail -1)"
  done
  # The first election is one view change started by one or more replicas; count views.
  views=$(cat "$work"/g/r?.log | grep -o "primary: accepting commits view=[0-9.]*" | sort -u | wc -l)
  [ "$flush" = "OK" ] || took="$took ($flush)"
  echo "| $r | $keys | $took | $set_reply | $wait_reply |$sizes | $((views - 1)) |"
  stop
done
