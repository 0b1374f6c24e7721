"""Online slot moves between the groups of a running cluster (`verso cluster move`), under
redis-py RedisCluster clients that keep reading and writing keys of the moving slots.

Every operation is recorded with its real-time interval and the history is checked for
linearizability per key by Verso's own checker (`verso check registers`); the clients must
never see an error (redirects, ASK and TRYAGAIN are followed by redis-py itself), and every
move must finish. Then the data of every type must have moved whole, with its deadline.

Run by scripts/python-tests.sh.
"""

import json
import signal
import os
import random
import subprocess
import tempfile
import threading
import time

import redis
from redis.cluster import RedisCluster, key_slot

from test_sharding import VERSO, LocalCluster

KEYS = 120
CLIENTS = 4


def move(c, slots, to):
    t = time.time()
    out = subprocess.run(
        [VERSO, "cluster", "move", "--slots", slots, "--to", str(to),
         "--node", f"127.0.0.1:{c.base}", "--timeout", "60"],
        capture_output=True, text=True, timeout=90,
    )
    assert out.returncode == 0, out.stderr
    return time.time() - t


def owners(c):
    """Each group's slot ranges as each node reports them (CLUSTER SLOTS)."""
    seen = []
    for g in range(c.groups):
        n = redis.Redis(host="127.0.0.1", port=c.addr(g, 0)[1], socket_timeout=5)
        seen.append(sorted((a, b, node[1]) for a, b, node, *_ in n.execute_command("CLUSTER", "SLOTS")))
        n.close()
    return seen


def check_history(history):
    """Runs Verso's checker over the recorded operations; returns its summary line."""
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
        for op in history:
            f.write(json.dumps(op) + "\n")
        path = f.name
    out = subprocess.run([VERSO, "check", "registers", path], capture_output=True, text=True)
    if out.returncode != 0:
        # Keep the history for diagnosis: CI prints where it is.
        kept = os.path.join(tempfile.gettempdir(), f"verso-failed-history-{os.getpid()}.jsonl")
        os.replace(path, kept)
        assert out.returncode == 0, f"{out.stderr}\n(history kept in {kept})"
    os.unlink(path)
    return out.stdout.strip()


def assert_each_group_holds_its_own_keys(c):
    g0 = redis.Redis(host="127.0.0.1", port=c.addr(0, 0)[1], socket_timeout=5)
    g1 = redis.Redis(host="127.0.0.1", port=c.addr(1, 0)[1], socket_timeout=5)
    assert all(key_slot(k) < 8192 for k in g0.keys("*")), g0.keys("*")
    assert all(key_slot(k) >= 8192 for k in g1.keys("*")), g1.keys("*")
    return g0, g1


def test_slots_move_back_and_forth_under_clients():
    c = LocalCluster(2, 1)
    history = []
    lock = threading.Lock()
    stop = threading.Event()
    errors = []
    # Keys on both sides of slot 8192, so that moves of 0-8191 and of 8192-12287 carry some.
    keys = [f"k{i}" for i in range(KEYS)]
    assert {key_slot(k.encode()) < 8192 for k in keys} == {True, False}

    def client(seed):
        rng = random.Random(seed)
        rc = RedisCluster(host="127.0.0.1", port=c.base, socket_timeout=10)
        n = 0
        try:
            while not stop.is_set():
                k = rng.choice(keys)
                start = time.monotonic_ns()
                if rng.random() < 0.5:
                    n += 1
                    value = seed * 10_000_000 + n  # distinct per key and client
                    rc.set(k, value)
                    kind = {"Put": {"value": value}}
                else:
                    got = rc.get(k)
                    kind = {"Get": {"observed": None if got is None else int(got)}}
                end = time.monotonic_ns()
                with lock:
                    history.append({"key": list(k.encode()), "start": start, "end": end, "kind": kind})
        except Exception as e:  # noqa: BLE001 - any error fails the test, below
            import traceback
            errors.append(repr(e) + traceback.format_exc())
        finally:
            rc.close()

    try:
        # Data of every type in a slot that moves (slot of "{a}" is 15495; "{b}" is 3300).
        rc = RedisCluster(host="127.0.0.1", port=c.base, socket_timeout=10)
        assert key_slot(b"{b}") < 8192
        rc.hset("{b}h", mapping={"f1": "v1", "f2": "v2"})
        rc.rpush("{b}l", "x", "y", "z")
        rc.sadd("{b}s", "m1", "m2")
        rc.zadd("{b}z", {"a": 1.5, "b": 2.5})
        rc.set("{b}ttl", "v", ex=1000)
        threads = [threading.Thread(target=client, args=(i + 1,)) for i in range(CLIENTS)]
        for t in threads:
            t.start()
        time.sleep(0.5)
        # Each group keeps some slots: redis-py forgets a node that CLUSTER SLOTS does not
        # list (one without slots) and then fails on an ASK to it (README "Sharding").
        took = [
            move(c, "0-4095", 1),
            move(c, "0-4095", 0),
            move(c, "8192-12287", 0),
            move(c, "2000-8191", 1),
            move(c, "8192-12287", 1),
            move(c, "2000-8191", 0),
        ]
        time.sleep(0.5)
        stop.set()
        for t in threads:
            t.join(timeout=30)
        if errors:
            print("\n".join(errors[:2]))
        assert not errors, errors[:5]
        assert len(history) > 500, len(history)
        # Nothing in flight, as CLUSTER INFO and INFO cluster say.
        for g in range(2):
            n = redis.Redis(host="127.0.0.1", port=c.addr(g, 0)[1], socket_timeout=5)
            info = n.execute_command("CLUSTER", "INFO")
            info = info.decode() if isinstance(info, bytes) else info
            assert "verso_moves_in_flight:0" in info, info
            assert n.info("cluster")["verso_moves_in_flight"] == 0
            n.close()
        # Back where it started: each node reports the same map.
        maps = owners(c)
        assert maps[0] == maps[1], maps
        assert [(a, b) for a, b, _ in maps[0]] == [(0, 8191), (8192, 16383)]
        # The collections went to group 1 and back, whole.
        assert rc.hgetall("{b}h") == {b"f1": b"v1", b"f2": b"v2"}
        assert rc.lrange("{b}l", 0, -1) == [b"x", b"y", b"z"]
        assert rc.smembers("{b}s") == {b"m1", b"m2"}
        assert rc.zrange("{b}z", 0, -1, withscores=True) == [(b"a", 1.5), (b"b", 2.5)]
        assert 900 < rc.ttl("{b}ttl") <= 1000
        # Each group holds only its own keys: the source deleted what it sent.
        g0, g1 = assert_each_group_holds_its_own_keys(c)
        g0.close()
        g1.close()
        rc.close()
        checked = check_history(history)
        print(f"moves took {[round(t, 2) for t in took]} s; {len(history)} operations; {checked}")
    finally:
        stop.set()
        assert c.stop() == 0


def config_moves(c):
    """CLUSTER MOVES of the configuration group's node (group 0), or None if it is down."""
    try:
        n = redis.Redis(host="127.0.0.1", port=c.addr(0, 0)[1], socket_timeout=2)
        lines = [l.decode() for l in n.execute_command("CLUSTER", "MOVES")]
        n.close()
        return [l for l in lines if l.startswith("config:")]
    except redis.exceptions.RedisError:
        return None


def pid_of(c, g):
    n = redis.Redis(host="127.0.0.1", port=c.addr(g, 0)[1], socket_timeout=2)
    pid = int(n.info("server")["process_id"])
    n.close()
    return pid


def test_moves_finish_and_lose_nothing_when_nodes_are_killed():
    """kill -9 of the source, the target and the configuration group's node while slots move
    (`--on-exit restart` brings each back; `--durability sync`: a reply means on disk). A
    request whose reply was lost is indeterminate: its write may or may not have happened."""
    c = LocalCluster(2, 1, on_exit="restart", durability="sync")
    rng = random.Random(7)
    history, lock, stop, unexpected = [], threading.Lock(), threading.Event(), []
    keys = [f"k{i}" for i in range(KEYS)]
    FOREVER = 2**63

    def client(seed):
        rng = random.Random(seed)
        rc = RedisCluster(host="127.0.0.1", port=c.base, socket_timeout=5)
        n = 0
        while not stop.is_set():
            k = rng.choice(keys)
            put = rng.random() < 0.5
            if put:
                n += 1
                value = seed * 10_000_000 + n
                kind = {"Put": {"value": value}}
            start = time.monotonic_ns()
            try:
                if put:
                    rc.set(k, value)
                else:
                    got = rc.get(k)
                    kind = {"Get": {"observed": None if got is None else int(got)}}
                end = time.monotonic_ns()
            except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError,
                    redis.exceptions.ClusterError, redis.exceptions.TryAgainError):
                # A killed node (redis-py's ClusterError: it gave up retrying one, or gave up
                # on a slot frozen while its source restarts): a write's outcome is unknown
                # (it may land any time after it was sent); a read tells nothing.
                if not put:
                    continue
                end = FOREVER
            except Exception as e:  # noqa: BLE001
                unexpected.append(repr(e))
                time.sleep(0.1)
                continue
            with lock:
                history.append({"key": list(k.encode()), "start": start, "end": end, "kind": kind})
        rc.close()

    def settle(within=60):
        deadline = time.time() + within
        while time.time() < deadline:
            if config_moves(c) == []:
                return True
            time.sleep(0.2)
        return False

    try:
        threads = [threading.Thread(target=client, args=(i + 1,)) for i in range(CLIENTS)]
        for t in threads:
            t.start()
        plan = [("0-4095", 1), ("0-4095", 0), ("8192-12287", 0), ("8192-12287", 1)]
        kills = 0
        def moved(first, to):
            try:
                runs = owners(c)[0]
            except redis.exceptions.RedisError:
                return False
            return any(a <= first <= b and port == c.addr(to, 0)[1] for a, b, port in runs)

        for slots, to in plan * 2:
            first = int(slots.split("-")[0])
            for attempt in range(5):
                proc = subprocess.Popen(
                    [VERSO, "cluster", "move", "--slots", slots, "--to", str(to),
                     "--node", f"127.0.0.1:{c.base}", "--timeout", "60"],
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                if attempt == 0:
                    # Kill once the move is under way (or done, if it was that quick).
                    deadline = time.time() + 10
                    while proc.poll() is None and not config_moves(c) and time.time() < deadline:
                        time.sleep(0.005)
                    time.sleep(rng.uniform(0.0, 0.05))
                    os.kill(pid_of(c, rng.randrange(2)), signal.SIGKILL)
                    kills += 1
                _, err = proc.communicate(timeout=90)
                assert settle(), f"the move of {slots} to {to} never finished: {config_moves(c)}"
                # The map reaches every node within a few probes.
                deadline = time.time() + 5
                while not moved(first, to) and time.time() < deadline:
                    time.sleep(0.1)
                if moved(first, to):
                    break
                # The kill hit the configuration group's node before it logged the move:
                # the command failed and nothing began. Start it again.
                assert proc.returncode != 0, (slots, to, owners(c), err)
            else:
                raise AssertionError(f"{slots} never reached group {to}: {owners(c)}")
        time.sleep(0.5)
        stop.set()
        for t in threads:
            t.join(timeout=30)
        assert not unexpected, unexpected[:5]
        maps = owners(c)
        assert maps[0] == maps[1], maps
        assert [(a, b) for a, b, _ in maps[0]] == [(0, 8191), (8192, 16383)]
        g0, g1 = assert_each_group_holds_its_own_keys(c)
        # Every key's last word: read once more after the clients stopped.
        now = time.monotonic_ns()
        for k in keys:
            g = g0 if key_slot(k.encode()) < 8192 else g1
            got = g.get(k)
            history.append({"key": list(k.encode()), "start": now, "end": now + 1,
                            "kind": {"Get": {"observed": None if got is None else int(got)}}})
        g0.close()
        g1.close()
        print(f"{kills} kills; {len(history)} operations; {check_history(history)}")
    finally:
        stop.set()
        assert c.stop() == 0


def test_rebalance_spreads_the_slots_evenly():
    c = LocalCluster(3, 1)
    try:
        rc = RedisCluster(host="127.0.0.1", port=c.base, socket_timeout=10)
        for i in range(300):
            rc.set(f"r{i}", i)
        move(c, "0-4000", 1)
        move(c, "10923-12000", 1)
        out = subprocess.run(
            [VERSO, "cluster", "rebalance", "--node", f"127.0.0.1:{c.base}", "--timeout", "60"],
            capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        n = redis.Redis(host="127.0.0.1", port=c.base, socket_timeout=5)
        text = n.execute_command("CLUSTER", "VERSO-MAP").decode()
        n.close()
        sizes = []
        for line in text.splitlines()[1:]:
            ranges = line.split(" ", 1)[1]
            sizes.append(sum(int(b) - int(a) + 1 for a, b in
                             (r.split("-") if "-" in r else (r, r) for r in ranges.split(",") if r)))
        assert sum(sizes) == 16384 and max(sizes) - min(sizes) <= 1, (sizes, out.stderr)
        assert [int(rc.get(f"r{i}")) for i in range(300)] == list(range(300))
        rc.close()
    finally:
        assert c.stop() == 0
