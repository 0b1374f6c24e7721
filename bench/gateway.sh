#!/usr/bin/env bash
# The transaction gateway (`verso gateway`) over 2 NCC groups of 3 replicas on loopback,
# measured with redis-benchmark: latency at one client (keys fixed, so that a command's keys
# lie in one group or in both: by hash slot `b` and `c` are in group 0, `a` in group 1), and throughput at
# 50 clients over random keys. RUNS rounds; medians (BENCHMARKS.md, "The transaction gateway").
#
#   bench/gateway.sh [RUNS]        (VERSO=path/to/verso: that binary instead of a fresh build)
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-3}
command -v redis-benchmark >/dev/null || { echo "needs redis-benchmark (apt-get install redis-tools)" >&2; exit 1; }
if [ -z "${VERSO:-}" ]; then
  cargo build --release -q -p verso
  VERSO=target/release/verso
fi
dir=$(mktemp -d)
out="$dir/results"
"$VERSO" gateway --local-groups 2 --listen 127.0.0.1:0 --dir "$dir/data" >"$dir/out" 2>"$dir/err" &
gw=$!
trap 'kill $gw 2>/dev/null; wait $gw 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 60); do grep -q listening "$dir/out" && break; sleep 0.5; done
port=$(sed -n 's/^listening .*://p' "$dir/out")
[ -n "$port" ] || { cat "$dir/err" >&2; exit 1; }
bench() { # name clients requests args...
  local name=$1 c=$2 n=$3; shift 3
  redis-benchmark -p "$port" -c "$c" -n "$n" -r 100000 -q "$@" 2>&1 | tr '\r' '\n' \
    | grep "requests per second" | tail -1 \
    | sed -E "s/.*: ([0-9.]+) requests per second, p50=([0-9.]+) msec.*/$name c=$c rps=\1 p50_ms=\2/"
}
redis-benchmark -p "$port" -q -n 1 SET n 0 >/dev/null
for run in $(seq "$runs"); do
  {
    bench "GET-1-group"         1 3000 GET b
    bench "MGET-1-group"        1 3000 MGET b c
    bench "MGET-2-groups"       1 3000 MGET a b
    bench "SET-1-group"         1 2000 SET b v
    bench "MSET-1-group"        1 2000 MSET b v c v
    bench "MSET-2-groups"       1 2000 MSET a v b v
    bench "INCR-1-group"        1 2000 INCR n
    bench "GET-random"         50 30000 GET "k:__rand_int__"
    bench "SET-random"         50 30000 SET "k:__rand_int__" v
    bench "MGET-random-2"      50 30000 MGET "k:__rand_int__" "j:__rand_int__"
    bench "MSET-random-2"      50 30000 MSET "k:__rand_int__" v "j:__rand_int__" v
    bench "INCR-random"        50 30000 INCR "n:__rand_int__"
  } | sed "s/^/run=$run /" | tee -a "$out"
done
echo "medians of $runs runs (load average: $(cut -d' ' -f1-3 /proc/loadavg), commit $(git rev-parse --short HEAD)):"
awk '{ k=$2" "$3; split($4,a,"="); split($5,b,"="); r[k]=r[k]" "a[2]; l[k]=l[k]" "b[2]; if(!(k in o)){o[k]=++n; ks[n]=k} }
  function med(s,  v,m,i,j,t){ m=split(s,v," "); for(i=1;i<=m;i++)for(j=i+1;j<=m;j++)if(v[j]+0<v[i]+0){t=v[i];v[i]=v[j];v[j]=t}; return v[int((m+1)/2)] }
  END { for(i=1;i<=n;i++){k=ks[i]; printf "%-24s rps %9s  p50 %6s ms\n", k, med(r[k]), med(l[k])} }' "$out"
