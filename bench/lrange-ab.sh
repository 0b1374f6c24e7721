#!/usr/bin/env bash
# redis-benchmark's lrange group (LRANGE_100 and LRANGE_600 reported) on two Verso binaries
# and Redis, interleaved, 3 rounds, with each server's CPU seconds over the round. Build the
# two binaries first and copy them to /tmp/verso-old and /tmp/verso-new, e.g.
#   git worktree add /tmp/wt BASE && (cd /tmp/wt && cargo build --release -p verso) &&
#   cp /tmp/wt/target/release/verso /tmp/verso-old && cp target/release/verso /tmp/verso-new
set -e
tck=$(getconf CLK_TCK)
for r in 1 2 3; do
  for who in old new redis; do
    if [ $who = redis ]; then redis-server --port 6490 --save "" --appendonly no >/dev/null 2>&1 & else /tmp/verso-$who serve --port 6490 --durability none >/dev/null 2>&1 & fi
    pid=$!; sleep 0.7
    b=$(awk '{print $14+$15}' /proc/$pid/stat)
    res=$(redis-benchmark -p 6490 -c 50 -n 200000 -t lrange --csv | grep LRANGE_100 | cut -d, -f2 | tr -d '"')
    res6=$(redis-benchmark -p 6490 -c 50 -n 100000 -t lrange --csv | grep LRANGE_600 | cut -d, -f2 | tr -d '"')
    a=$(awk '{print $14+$15}' /proc/$pid/stat)
    echo "$r $who lrange100=$res lrange600=$res6 cpu_s=$(( (a-b)/tck ))"
    kill $pid; wait $pid 2>/dev/null || true
  done
done
