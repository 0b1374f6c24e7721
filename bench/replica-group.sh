# Sourced by the bench scripts that run a Lazy VSR group of three `verso serve` replicas on
# loopback, from the checkout's root. `start_group` expects `work` (a scratch directory) and
# `base` (the first of the ports base..base+2 for clients, base+100.. for peers) to be set,
# and the caller to call `stop` on exit. VIEW_CHANGE_MS (default 2000) sets view_change_timeout_ms.
# bins_or_build BIN...: sets `bins` to the given binaries, or builds this checkout's.
bins_or_build() {
    bins=("$@")
    if [ ${#bins[@]} -eq 0 ]; then
        cargo build --release -p verso --quiet
        bins=("$PWD/target/release/verso")
    fi
    command -v redis-benchmark >/dev/null || {
        apt-get update -qq >/dev/null
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-tools >/dev/null
    }
}

pids=()
stop() { kill -9 "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; pids=(); }

# start_group BIN [SERVE_ARGS...]: a fresh group in "$work/g" (logs "$work/g/r$id.log"),
# each replica started with SERVE_ARGS too; sets `primary` to the primary's client port once
# one is elected, or exits.
start_group() {
    local bin=$1 id
    shift
    rm -rf "$work/g"
    mkdir -p "$work/g"
    {
        echo 'secret = "0123456789abcdef0123456789abcdef"'
        echo "view_change_timeout_ms = ${VIEW_CHANGE_MS:-2000}"
        for id in 0 1 2; do
            printf '\n[[replica]]\nid = %d\nclient = "127.0.0.1:%d"\npeer = "127.0.0.1:%d"\n' \
                "$id" $((base + id)) $((base + 100 + id))
        done
    } > "$work/g/cluster.toml"
    for id in 0 1 2; do
        "$bin" serve --cluster "$work/g/cluster.toml" --replica "$id" \
            --data-dir "$work/g/r$id" "$@" 2> "$work/g/r$id.log" > /dev/null &
        pids+=($!)
    done
    primary=
    for _ in $(seq 200); do
        for id in 0 1 2; do
            if redis-cli -p $((base + id)) INFO replication 2>/dev/null | grep -q "vsr_role:primary"; then
                primary=$((base + id))
            fi
        done
        [ -n "$primary" ] && break
        sleep 0.1
    done
    [ -n "$primary" ] || { echo "no primary" >&2; exit 1; }
}
