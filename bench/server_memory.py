"""Memory of `verso serve` under the two workloads of the bounded-memory issue.

For one running server (port, pid):
  churn  300,000 SET + DEL of unique keys after a warm-up pass of the same size: RSS growth
         over the measured pass, DBSIZE after it, and SCAN 0 on the emptied database
         (median of 7 timings, client side, loopback);
  watch  one connection sends WATCH and stays idle while another writes 300,000 SETs on
         1,000 keys (after a warm-up pass of the same): RSS growth over the measured pass.
Prints one JSON object.
"""
import json
import socket
import statistics
import sys
import time

import redis

N = 300_000
BATCH = 1_000


def rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def settle(pid):
    """RSS once it stops moving (GC of the last batches runs on later commits)."""
    time.sleep(0.5)
    return rss_mib(pid)


def churn(r, start, n):
    value = b"x" * 100
    p = r.pipeline(transaction=False)
    for i in range(start, start + n):
        key = f"churn:{i}"
        p.set(key, value)
        p.delete(key)
        if i % BATCH == BATCH - 1:
            p.execute()
    p.execute()


def overwrite(r, n, keys=1_000):
    value = b"y" * 100
    p = r.pipeline(transaction=False)
    for i in range(n):
        p.set(f"hot:{i % keys}", value)
        if i % BATCH == BATCH - 1:
            p.execute()
    p.execute()


def scan_ms(r, trials=7):
    times = []
    for _ in range(trials):
        t0 = time.perf_counter()
        r.scan(0)
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def main():
    port, pid = int(sys.argv[1]), int(sys.argv[2])
    r = redis.Redis(port=port)
    out = {}
    churn(r, 0, N)
    before = settle(pid)
    churn(r, N, N)
    after = settle(pid)
    out["churn_rss_before_mib"] = round(before, 1)
    out["churn_rss_growth_mib"] = round(after - before, 1)
    out["churn_dbsize"] = r.dbsize()
    out["scan0_ms"] = round(scan_ms(r), 2)

    overwrite(r, N)
    # An idle WATCH on its own connection (a raw socket: nothing pools or closes it).
    idle = socket.create_connection(("127.0.0.1", port))
    idle.sendall(b"*2\r\n$5\r\nWATCH\r\n$3\r\nfoo\r\n")
    assert idle.recv(64).startswith(b"+OK")
    before = settle(pid)
    overwrite(r, N)
    after = settle(pid)
    info = r.info("stats")
    out["watch_rss_before_mib"] = round(before, 1)
    out["watch_rss_growth_mib"] = round(after - before, 1)
    out["oldest_transaction_age_s"] = info.get("oldest_transaction_age_seconds")
    idle.close()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
