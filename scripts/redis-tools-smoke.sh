#!/usr/bin/env bash
# redis-cli and redis-benchmark against a real `verso serve` on a free port: a smoke run of
# the stock tools (installs Debian's redis-tools if redis-cli is missing). Fails on any wrong
# reply or a redis-benchmark error; prints the benchmark's numbers.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v redis-cli >/dev/null 2>&1 || ! command -v redis-benchmark >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq redis-tools >/dev/null
fi

cargo build --release -p verso --quiet
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
LOG=$(mktemp)
DATA=$(mktemp -d)
target/release/verso serve --port "$PORT" --data-dir "$DATA" 2>"$LOG" &
PID=$!
cleanup() { kill "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; rm -f "$LOG"; rm -rf "$DATA"; }
trap cleanup EXIT
for _ in $(seq 200); do
  redis-cli -p "$PORT" PING >/dev/null 2>&1 && break
  kill -0 "$PID" 2>/dev/null || { cat "$LOG" >&2; echo "verso serve died" >&2; exit 1; }
  sleep 0.05
done

fail=0
expect() { # expect WANT redis-cli-args...
  local want=$1; shift
  local got
  got=$(redis-cli -p "$PORT" "$@" 2>&1) || true
  if [ "$got" != "$want" ]; then
    printf 'FAIL: redis-cli %s\n  want: %q\n  got:  %q\n' "$*" "$want" "$got" >&2
    fail=1
  else
    printf 'ok: redis-cli %s -> %s\n' "$*" "$got"
  fi
}
expect PONG PING
expect OK SAVE
expect "Background saving started" BGSAVE
expect OK SET greeting "hello world"
expect "hello world" GET greeting
expect "hello world" --raw GET greeting
expect 1 INCR counter
expect 11 INCRBY counter 10
expect "(integer) 12" --no-raw INCR counter
expect '"hello world"' --no-raw GET greeting
expect "(nil)" --no-raw GET missing
expect "" --raw GET missing
expect "$(printf 'hello world\n12')" --raw MGET greeting counter
expect "ERR wrong number of arguments for 'get' command" --raw GET
expect "ERR unknown command 'NOSUCHCMD', with args beginning with: 'x' " --raw NOSUCHCMD x
# COMMAND COUNT counts the top-level commands COMMAND LIST names (it also lists subcommands).
expect "$(redis-cli -p "$PORT" --raw COMMAND LIST | grep -vc '|')" COMMAND COUNT
count=$(redis-cli -p "$PORT" COMMAND COUNT)
[ "$count" -ge 30 ] || { echo "FAIL: COMMAND COUNT = $count" >&2; fail=1; }
# A MULTI block through redis-cli's stdin.
got=$(printf 'MULTI\nSET m 1\nINCR m\nEXEC\n' | redis-cli -p "$PORT" --raw)
want=$(printf 'OK\nQUEUED\nQUEUED\nOK\n2')
[ "$got" = "$want" ] || { printf 'FAIL: MULTI block\n  want: %q\n  got:  %q\n' "$want" "$got" >&2; fail=1; }
[ "$fail" = 0 ] || exit 1

bench() {
  local out
  if ! out=$(redis-benchmark -p "$PORT" -t set,get,incr -n 20000 -q "$@" 2>&1); then
    printf '%s\n' "$out" >&2
    echo "FAIL: redis-benchmark $* exited non-zero" >&2
    exit 1
  fi
  out=$(printf '%s\n' "$out" | tr '\r' '\n' | grep -E 'requests per second|rror' || true)
  printf '%s\n' "$out"
  if printf '%s\n' "$out" | grep -qi 'error'; then
    echo "FAIL: redis-benchmark $* reported errors" >&2
    exit 1
  fi
  for t in SET GET INCR; do
    printf '%s\n' "$out" | grep -q "^$t: .*requests per second" \
      || { echo "FAIL: redis-benchmark $* has no $t result" >&2; exit 1; }
  done
}
echo "redis-benchmark -n 20000 (unpipelined):"
bench
echo "redis-benchmark -n 20000 -P 16:"
bench -P 16
# The benchmark's INCRs landed on the key it uses (counter:__rand_int__ with no -r).
n=$(redis-cli -p "$PORT" GET counter:__rand_int__)
[ "$n" = 40000 ] || { echo "FAIL: counter:__rand_int__ = $n, want 40000 (2 runs x 20000 INCR)" >&2; exit 1; }
echo "redis-cli / redis-benchmark smoke: ok"
