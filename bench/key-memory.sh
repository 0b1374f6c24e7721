#!/usr/bin/env bash
# Memory of long keys and collection elements: Redis beside `verso serve` (and, with
# BASE_BIN, a second Verso binary), each load into a fresh server, RSS at the end.
#
#   bench/key-memory.sh                     Redis and target/release/verso
#   BASE_BIN=/path/to/verso bench/key-memory.sh   adds another build as "verso-base"
#   LOADS="zset hash100" bench/key-memory.sh      a subset of the loads
#
# Loads (1 M elements each, 100-byte values; collections are 1,000 keys of 1,000, so both
# servers use their general encodings):
#   zset      sorted-set members of 100 bytes (`member:NNNN:yyyy...`)
#   hash100   hash fields named by 100-byte strings
#   hash10    hash fields named `field:NNNN`
#   longkeys  SETs of 40-byte keys (`session:...`)
#   shortkeys SETs of 11-byte keys (`key:NNNNNNN`)
set -euo pipefail
cd "$(dirname "$0")/.."
loads=${LOADS:-"zset hash100 hash10 longkeys shortkeys"}
if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
if ! command -v redis-server >/dev/null || ! command -v redis-cli >/dev/null; then
  $SUDO apt-get update -qq && $SUDO apt-get install -y -qq redis-server redis-tools >/dev/null
fi
cargo build --release -q -p verso
out=$(mktemp -d)
pids=""
trap 'kill $pids 2>/dev/null || true; rm -rf "$out"' EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() { for _ in $(seq 100); do redis-cli -p "$1" PING >/dev/null 2>&1 && return 0; sleep 0.1; done; return 1; }
rss() { awk '/VmRSS/ {print $2}' "/proc/$1/status"; }
start() { # system port
  case $1 in
    redis) redis-server --port "$2" --save "" --appendonly no --daemonize no --logfile "$out/redis.log" >/dev/null 2>&1 & ;;
    verso) target/release/verso serve --port "$2" --durability none >/dev/null 2>"$out/verso.log" & ;;
    verso-base) "$BASE_BIN" serve --port "$2" --durability none >/dev/null 2>"$out/base.log" & ;;
  esac
  echo $!
}

python3 - "$out" <<'PY'
import sys
out = sys.argv[1]
def write(name, commands):
    with open(f"{out}/{name}.resp", "w") as f:
        for a in commands:
            f.write("*%d\r\n" % len(a))
            for x in a:
                f.write("$%d\r\n%s\r\n" % (len(x), x))
v = "x" * 100
write("zset", (("ZADD", "zset:%04d" % z, str(m * 1.5), "member:%04d:%s" % (m, "y" * 88))
               for z in range(1000) for m in range(1000)))
write("hash100", (("HSET", "hash:%04d" % h, "field:%04d:%s" % (f, "f" * 89), v)
                  for h in range(1000) for f in range(1000)))
write("hash10", (("HSET", "hash:%04d" % h, "field:%04d" % f, v)
                 for h in range(1000) for f in range(1000)))
write("longkeys", (("SET", "session:%07d:%s" % (i, "s" * 24), v) for i in range(1000000)))
write("shortkeys", (("SET", "key:%07d" % i, v) for i in range(1000000)))
PY

systems="redis verso"
if [ -n "${BASE_BIN:-}" ]; then systems="$systems verso-base"; fi
echo "| load | $(echo $systems | sed 's/ / MiB | /g') MiB | $(for s in $systems; do [ $s = redis ] || printf '%s / redis | ' $s; done)"
for load in $loads; do
  row="| $load |"
  declare -A got=()
  for s in $systems; do
    port=$(free_port)
    pid=$(start "$s" "$port"); pids="$pids $pid"
    wait_port "$port"
    redis-cli -p "$port" --pipe <"$out/$load.resp" >/dev/null
    got[$s]=$(rss "$pid")
    kill "$pid"; wait "$pid" 2>/dev/null || true
    row="$row $(( got[$s] / 1024 )) |"
  done
  for s in $systems; do
    [ "$s" = redis ] || row="$row $(python3 -c "print(f'{${got[$s]}/${got[redis]}:.2f}')") |"
  done
  echo "$row"
done
echo
echo "$(date -u +%F), commit $(git rev-parse --short HEAD), load average $(cut -d' ' -f1-3 /proc/loadavg)"
