"""Slot moves between replicated groups (`--groups 2 --replicas 3`) under redis-py
RedisCluster clients doing SET/GET and INCR, first with no faults, then with kill -9 of a
random replica, primaries included, during every move (`--on-exit restart` brings it back).

Clients run with redis-py's retries of lost requests turned off (it follows MOVED, ASK and
TRYAGAIN itself): a Redis client sends no sequence numbers, so a retried INCR could count
twice. A request whose reply was lost is indeterminate. Checks (issue 17, item 5):
- while no process is killed, clients see no error at all;
- every counter lies between its acknowledged increments and those plus its indeterminate
  ones, and no two acknowledged INCRs of a counter returned the same value;
- the SET/GET history is linearizable per key (Verso's checker, `verso check registers`);
- every move finishes, and each group ends holding exactly its own slots' keys.

Run by scripts/python-tests.sh.
"""

import os
import random
import signal
import subprocess
import threading
import time

import redis
from redis.backoff import NoBackoff
from redis.cluster import RedisCluster, key_slot
from redis.retry import Retry

from test_sharding import VERSO, LocalCluster
from test_slot_moves import check_history

REGISTERS = [f"r{i}" for i in range(60)]
COUNTERS = [f"c{i}" for i in range(20)]
CLIENTS = 4
FOREVER = 2**63
# A reply lost to a kill: the request may or may not have taken effect.
LOST = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError)
# Refused before it ran (no primary right now, or redis-py gave up following redirects
# while a killed node restarted): it did not take effect.
REFUSED = (redis.exceptions.ClusterDownError, redis.exceptions.TryAgainError,
           redis.exceptions.ClusterError, redis.exceptions.ResponseError)


def node(c, g, r, timeout=2):
    return redis.Redis(host="127.0.0.1", port=c.addr(g, r)[1], socket_timeout=timeout)


def primary_of(c, g):
    """The replica index of group g's primary, or None while it has none."""
    for r in range(c.replicas):
        try:
            n = node(c, g, r)
            role = n.info("replication").get("vsr_role")
            n.close()
            if role == "primary":
                return r
        except redis.exceptions.RedisError:
            pass
    return None


def config_moves(c):
    """The configuration group's moves (group 0's primary's CLUSTER MOVES), or None."""
    r = primary_of(c, 0)
    if r is None:
        return None
    try:
        n = node(c, 0, r)
        lines = [l.decode() for l in n.execute_command("CLUSTER", "MOVES")]
        n.close()
        return [l for l in lines if l.startswith("config:")]
    except redis.exceptions.RedisError:
        return None


def owners(c, g):
    """The slot ranges and the group serving each, as group g's primary reports them."""
    r = primary_of(c, g)
    if r is None:
        return None
    ports = {c.addr(h, i)[1]: h for h in range(c.groups) for i in range(c.replicas)}
    try:
        n = node(c, g, r)
        runs = n.execute_command("CLUSTER", "SLOTS")
        n.close()
    except redis.exceptions.RedisError:
        return None
    return sorted((a, b, ports[nd[1]]) for a, b, nd, *_ in runs)


def pid_of(c, g, r):
    n = node(c, g, r)
    pid = int(n.info("server")["process_id"])
    n.close()
    return pid


def wait_until(what, within):
    deadline = time.time() + within
    while time.time() < deadline:
        if what():
            return True
        time.sleep(0.1)
    return False


def test_moves_between_replicated_groups_survive_kills():
    c = LocalCluster(2, 3, on_exit="restart")
    rng = random.Random(17)
    lock, stop = threading.Lock(), threading.Event()
    history = []
    acked = {k: 0 for k in COUNTERS}
    unknown = {k: 0 for k in COUNTERS}
    returned = {k: [] for k in COUNTERS}
    errors = []  # (time, repr): compared with the kill windows below
    kill_windows = []  # (start, end) in time.monotonic()

    def client(seed):
        rng = random.Random(seed)
        rc = RedisCluster(host="127.0.0.1", port=c.base, socket_timeout=5,
                          retry=Retry(NoBackoff(), 0))
        n = 0
        while not stop.is_set():
            counter = rng.random() < 0.3
            k = rng.choice(COUNTERS if counter else REGISTERS)
            put = not counter and rng.random() < 0.5
            if put:
                n += 1
                value = seed * 10_000_000 + n
                kind = {"Put": {"value": value}}
            start = time.monotonic_ns()
            try:
                if counter:
                    got = rc.incr(k)
                elif put:
                    rc.set(k, value)
                else:
                    got = rc.get(k)
                    kind = {"Get": {"observed": None if got is None else int(got)}}
                end = time.monotonic_ns()
            except LOST + REFUSED as e:
                with lock:
                    errors.append((time.monotonic(), repr(e)))
                    if isinstance(e, LOST) and counter:
                        unknown[k] += 1
                    if isinstance(e, LOST) and put:
                        history.append({"key": list(k.encode()), "start": start,
                                        "end": FOREVER, "kind": kind})
                time.sleep(0.05)
                continue
            except Exception as e:  # noqa: BLE001 - reported as an unexpected error below
                with lock:
                    errors.append((time.monotonic(), "unexpected " + repr(e)))
                time.sleep(0.05)
                continue
            with lock:
                if counter:
                    acked[k] += 1
                    returned[k].append(got)
                else:
                    history.append({"key": list(k.encode()), "start": start, "end": end,
                                    "kind": kind})
        rc.close()

    def run_move(slots, to, kill):
        first = int(slots.split("-")[0])

        def moved():
            runs = owners(c, 0)
            return runs is not None and any(a <= first <= b and g == to for a, b, g in runs)

        for attempt in range(5):
            proc = subprocess.Popen(
                [VERSO, "cluster", "move", "--slots", slots, "--to", str(to),
                 "--node", f"127.0.0.1:{c.base}", "--timeout", "90"],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            if kill and attempt == 0:
                wait_until(lambda: proc.poll() is not None or config_moves(c), 10)
                time.sleep(rng.uniform(0.0, 0.05))
                g, r = rng.randrange(2), rng.randrange(3)
                if rng.random() < 0.5:  # half the kills hit a primary
                    r = primary_of(c, g) if primary_of(c, g) is not None else r
                t0 = time.monotonic()
                os.kill(pid_of(c, g, r), signal.SIGKILL)
            _, err = proc.communicate(timeout=150)
            assert wait_until(lambda: config_moves(c) == [], 90), \
                f"the move of {slots} to {to} never finished: {config_moves(c)}"
            if kill and attempt == 0:
                # Back: the killed node answers and both groups take writes again.
                assert wait_until(lambda: _answers(c, g, r), 60), f"node {g}/{r} never came back"
                assert wait_until(lambda: _writable(c), 60), "a group takes no writes"
                kill_windows.append((t0, time.monotonic() + 1.0))
            if wait_until(moved, 10):
                return
            # The kill hit the configuration group's primary before it logged the move: the
            # command failed and nothing began. Start it again.
            assert proc.returncode != 0, (slots, to, owners(c, 0), err)
        raise AssertionError(f"{slots} never reached group {to}: {owners(c, 0)}")

    try:
        threads = [threading.Thread(target=client, args=(i + 1,)) for i in range(CLIENTS)]
        for t in threads:
            t.start()
        time.sleep(0.5)
        plan = [("0-4095", 1), ("0-4095", 0), ("8192-12287", 0), ("8192-12287", 1)]
        for slots, to in plan:
            run_move(slots, to, kill=False)
        quiet_until = time.monotonic()
        for slots, to in plan * 2:
            run_move(slots, to, kill=True)
        time.sleep(0.5)
        stop.set()
        for t in threads:
            t.join(timeout=60)

        # No error at all while nothing was killed; only lost or refused requests after.
        quiet = [e for t, e in errors if t < quiet_until]
        assert not quiet, quiet[:5]
        unexpected = [e for _, e in errors if e.startswith("unexpected")]
        assert not unexpected, unexpected[:5]
        outside = [e for t, e in errors
                   if t >= quiet_until and not any(a <= t <= b for a, b in kill_windows)]
        assert not outside, outside[:5]

        # Each group's primary reports the same map, back where it started, and holds only
        # its own slots' keys (the sources deleted what they sent).
        maps = [owners(c, g) for g in range(2)]
        assert maps[0] == maps[1], maps
        assert [(a, b) for a, b, _ in maps[0]] == [(0, 8191), (8192, 16383)], maps[0]
        primaries = [node(c, g, primary_of(c, g), timeout=5) for g in range(2)]
        for g, p in enumerate(primaries):
            assert all((key_slot(k) < 8192) == (g == 0) for k in p.keys("*"))

        # Counters: between the acknowledged increments and those plus the lost ones; no two
        # acknowledged INCRs of one counter saw the same value.
        now = time.monotonic_ns()
        for k in COUNTERS:
            p = primaries[0 if key_slot(k.encode()) < 8192 else 1]
            value = int(p.get(k) or 0)
            assert acked[k] <= value <= acked[k] + unknown[k], (k, value, acked[k], unknown[k])
            assert len(set(returned[k])) == len(returned[k]), (k, sorted(returned[k]))
            assert max(returned[k], default=0) <= value
        for k in REGISTERS:
            p = primaries[0 if key_slot(k.encode()) < 8192 else 1]
            got = p.get(k)
            history.append({"key": list(k.encode()), "start": now, "end": now + 1,
                            "kind": {"Get": {"observed": None if got is None else int(got)}}})
        for p in primaries:
            p.close()
        assert sum(acked.values()) > 100, acked
        print(f"{len(kill_windows)} kills; {sum(acked.values())} INCRs acknowledged, "
              f"{sum(unknown.values())} lost; {len(errors)} errors after kills; "
              f"{check_history(history)}")
    finally:
        stop.set()
        assert c.stop() == 0


# Keys of slots no move in the plan touches: one stays in each group.
STAYS = [next(f"stay{i}" for i in range(10**5) if lo <= key_slot(f"stay{i}".encode()) <= hi)
         for lo, hi in ((4096, 8191), (12288, 16383))]


def _writable(c):
    try:
        rc = RedisCluster(host="127.0.0.1", port=c.base, socket_timeout=2)
        for k in STAYS:
            rc.set(k, "1")
        rc.close()
        return True
    except redis.exceptions.RedisError:
        return False


def _answers(c, g, r):
    try:
        n = node(c, g, r)
        ok = n.ping()
        n.close()
        return ok
    except redis.exceptions.RedisError:
        return False
