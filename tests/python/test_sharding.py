"""A sharded Verso cluster (`verso cluster local`) through Redis Cluster clients: redis-py's
RedisCluster and `redis-cli -c` route by hash slot and follow MOVED, unchanged.

Each test starts its own cluster on free loopback ports and stops it; every wait is bounded.
Run by scripts/python-tests.sh.
"""

import os
import random
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
import redis
from redis.cluster import RedisCluster, key_slot

ROOT = Path(__file__).resolve().parents[2]
VERSO = os.environ.get("VERSO_BIN", str(ROOT / "target" / "release" / "verso"))


def base_port(rng):
    """A random base for a cluster's ports (base + 10 * group + replica, and the peer ports
    1,000 above), below the kernel's ephemeral range: a port in that range may be taken by
    any outgoing connection between the check that it is free and the server's bind."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    return rng.randrange(10000, max(10100, low - 1100), 100)


def port_free(p):
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", p))
            return True
        except OSError:
            return False


class LocalCluster:
    def __init__(self, groups, replicas, on_exit="stop", durability="lazy"):
        rng = random.Random()
        for _ in range(200):
            base = base_port(rng)
            ports = [base + 10 * g + r for g in range(groups) for r in range(replicas)]
            peers = [p + 1000 for p in ports] if replicas > 1 else []
            if all(port_free(p) for p in ports + peers):
                break
        else:
            raise RuntimeError("no free ports")
        self.base, self.groups, self.replicas = base, groups, replicas
        self.dir = tempfile.mkdtemp(prefix="verso-shards-")
        self.proc = subprocess.Popen(
            [VERSO, "cluster", "local", "--groups", str(groups), "--replicas", str(replicas),
             "--base-port", str(base), "--dir", self.dir, "--on-exit", on_exit,
             "--durability", durability],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )
        # `cluster local` prints its summary once every node listens.
        deadline = time.time() + 60
        self.summary = []
        while time.time() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            self.summary.append(line)
            if line.startswith("clients:"):
                break
        if not self.summary or not self.summary[-1].startswith("clients:"):
            # The nodes' logs go with the directory: say what they said first.
            logs = "".join(
                f"\n--- {log.name} (last lines):\n" + "".join(log.read_text(errors="replace").splitlines(True)[-15:])
                for log in sorted(Path(self.dir).glob("g*r*.log"))
            )
            self.stop()
            raise RuntimeError("cluster did not start: " + "".join(self.summary) + logs)
        # Replicated groups: wait until each group has a primary (a write succeeds).
        for g in range(groups):
            self.wait_writable(g)

    def addr(self, g, r):
        return ("127.0.0.1", self.base + 10 * g + r)

    def wait_writable(self, g):
        host, port = self.addr(g, 0)
        c = redis.Redis(host=host, port=port, socket_timeout=5)
        # A key of group g's slots: slot ranges split 16384 evenly in group order.
        per = 16384 // self.groups
        key = next(f"probe{i}" for i in range(100000) if key_slot(f"probe{i}".encode()) // per == g
                   and key_slot(f"probe{i}".encode()) < 16384)
        deadline = time.time() + 30
        while True:
            try:
                c.set(key, "1")
                c.delete(key)
                break
            except redis.exceptions.RedisError:
                if time.time() >= deadline:
                    states = []
                    for r in range(self.replicas):
                        try:
                            n = redis.Redis(host="127.0.0.1", port=self.addr(g, r)[1], socket_timeout=2)
                            info = n.info("replication")
                            states.append({k: v for k, v in info.items() if k.startswith("vsr_")})
                            n.close()
                        except redis.exceptions.RedisError as e:
                            states.append(repr(e))
                    raise AssertionError(f"group {g} never elected a primary: {states}")
                time.sleep(0.1)
        c.close()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)
        self.proc.stdout.close()
        return self.proc.returncode


@pytest.fixture(scope="module")
def two_groups():
    c = LocalCluster(2, 1)
    yield c
    assert c.stop() == 0


def test_redis_py_cluster_routes_by_slot(two_groups):
    c = two_groups
    rc = RedisCluster(host="127.0.0.1", port=c.base, socket_timeout=10)
    assert len(rc.get_nodes()) == 2
    for i in range(400):
        assert rc.set(f"key:{i}", f"v{i}")
    for i in range(400):
        assert rc.get(f"key:{i}") == f"v{i}".encode()
    assert rc.incr("counter") == 1
    # Hash tags keep related keys in one slot: multi-key commands work on them.
    rc.mset({"{user1}:a": "1", "{user1}:b": "2"})
    assert rc.mget("{user1}:a", "{user1}:b") == [b"1", b"2"]
    p = rc.pipeline()
    for i in range(50):
        p.incr(f"{{tag}}{i}")
    assert p.execute() == [1] * 50
    # Every node holds only its own slots' keys, and both hold some.
    per = 16384 // 2
    for g in range(2):
        node = redis.Redis(host="127.0.0.1", port=c.base + 10 * g)
        keys = node.keys("key:*")
        assert 100 < len(keys) < 300, (g, len(keys))
        assert all(key_slot(k) // per == g for k in keys)
        assert node.execute_command("CLUSTER", "KEYSLOT", "key:7") == key_slot(b"key:7")
        node.close()
    rc.close()


def test_redirects_and_cross_group_refusals(two_groups):
    c = two_groups
    g0 = redis.Redis(host="127.0.0.1", port=c.base, socket_timeout=10)
    g1_port = c.base + 10
    assert key_slot(b"foo") == 12182  # group 1's
    # redis-py turns `-MOVED slot addr` into MovedError("slot addr").
    with pytest.raises(redis.exceptions.MovedError, match=f"^12182 127.0.0.1:{g1_port}$"):
        g0.execute_command("GET", "foo")
    with pytest.raises(redis.exceptions.ClusterCrossSlotError, match="slots of one group"):
        g0.execute_command("MSET", "bar", "1", "foo", "2")
    # Two slots of one group are one transaction there (Redis would refuse them).
    assert (key_slot(b"bar"), key_slot(b"abc")) == (5061, 7638)  # both group 0's
    assert g0.execute_command("MSET", "bar", "1", "abc", "2") in (True, b"OK")
    assert g0.mget("bar", "abc") == [b"1", b"2"]
    # A redirect inside MULTI fails the block, as in Redis Cluster.
    p = g0.pipeline(transaction=True)
    p.set("bar", "3").get("foo")
    with pytest.raises(redis.exceptions.ResponseError):
        p.execute()
    assert g0.get("bar") == b"1"
    with pytest.raises(redis.exceptions.ResponseError, match="not allowed in cluster mode"):
        g0.execute_command("SELECT", "1")
    with pytest.raises(redis.exceptions.ResponseError, match="not allowed in cluster mode"):
        g0.execute_command("MOVE", "bar", "1")
    with pytest.raises(redis.exceptions.ResponseError, match="not allowed in cluster mode"):
        g0.execute_command("COPY", "bar", "bar2{bar}", "DB", "1")
    assert g0.execute_command("COPY", "bar", "{bar}2", "DB", "0") == 1
    info = g0.execute_command("CLUSTER", "INFO")
    assert b"cluster_state:ok" in (info if isinstance(info, bytes) else info.encode())
    assert g0.info("cluster")["cluster_enabled"] == 1
    g0.close()


def test_redis_cli_follows_moved(two_groups):
    c = two_groups
    out = subprocess.run(
        ["redis-cli", "-c", "-p", str(c.base), "SET", "foo", "from-cli"],
        capture_output=True, text=True, timeout=20,
    )
    assert out.stdout.strip() == "OK", out
    out = subprocess.run(
        ["redis-cli", "-c", "-p", str(c.base + 10), "GET", "foo"],
        capture_output=True, text=True, timeout=20,
    )
    assert out.stdout.strip() == "from-cli", out


def test_redis_benchmark_runs_in_cluster_mode(two_groups):
    """`redis-benchmark --cluster` (issue 17's third target): it reads CLUSTER NODES, sends
    each primary keys of its own slots, and exits non-zero on any error reply."""
    c = two_groups
    n = 2000
    out = subprocess.run(
        ["redis-benchmark", "--cluster", "-p", str(c.base), "-n", str(n), "-c", "4",
         "-r", "100000", "-t", "set,get,incr", "-q"],
        capture_output=True, text=True, timeout=120,
    )
    assert out.returncode == 0, out
    text = out.stdout.replace("\r", "\n")
    for test in ("SET", "GET", "INCR"):
        assert any(l.startswith(f"{test}: ") and "requests per second" in l
                   for l in text.splitlines()), text
    assert "error" not in (text + out.stderr).lower(), text + out.stderr
    # The SETs landed in both groups (each primary got keys of its own slots).
    for g in range(2):
        node = redis.Redis(host="127.0.0.1", port=c.addr(g, 0)[1], socket_timeout=5)
        keys = [k for k in node.scan_iter("key:*", count=1000)]
        node.close()
        assert keys and all((key_slot(k) >= 8192) == (g == 1) for k in keys), (g, keys[:5])


def test_replicated_groups():
    c = LocalCluster(2, 3)
    try:
        rc = RedisCluster(host="127.0.0.1", port=c.base + 1, socket_timeout=10)
        for i in range(200):
            rc.set(f"r:{i}", i)
        assert [int(rc.get(f"r:{i}")) for i in range(200)] == list(range(200))
        # Any replica of a group answers for the group (a backup relays to its primary),
        # and redirects keys of the other group.
        ids = set()
        for r in range(3):
            node = redis.Redis(host="127.0.0.1", port=c.base + 10 + r, socket_timeout=10)
            # Asked first: a backup relays the connection from its first data command on.
            ids.add(node.execute_command("CLUSTER", "MYID"))
            assert key_slot(b"r:0") >= 8192
            assert node.get("r:0") == b"0"
            group0 = "|".join(str(c.base + i) for i in range(3))
            with pytest.raises(redis.exceptions.MovedError, match=f"^5061 127.0.0.1:({group0})$"):
                node.get("bar")
            node.close()
        assert len(ids) == 3
        # Moves start at the configuration group's primary: its backups name it, as do
        # the other group's nodes (a moves' caller follows them).
        for r in range(3):
            node = redis.Redis(host="127.0.0.1", port=c.base + r, socket_timeout=10)
            if node.info("replication")["vsr_role"] != "primary":
                with pytest.raises(redis.exceptions.ResponseError,
                                   match="^CONFIG moves start at the configuration group's primary: 127.0.0.1:"):
                    node.execute_command("CLUSTER", "MOVESLOTS", "0-10", "1")
            node.close()
        # Every node learns each group's primary: CLUSTER SLOTS lists it first and MOVED
        # names it, so clients skip the backups' relay. Each node learns it on its own
        # (its prober), and if this node is a backup of group 0, its GET is answered by
        # group 0's primary (the relay): wait until both answers name the primary.
        g1 = redis.Redis(host="127.0.0.1", port=c.base + 10, socket_timeout=10)
        g0 = redis.Redis(host="127.0.0.1", port=c.base, socket_timeout=10)
        deadline = time.time() + 15
        while True:
            # Read each time: a view change on this busy machine may move it.
            primary = g1.info("replication")["vsr_primary"]
            runs = g0.execute_command("CLUSTER", "SLOTS")
            listed = [f"{r[2][0].decode()}:{r[2][1]}" for r in runs if r[0] >= 8192]
            with pytest.raises(redis.exceptions.MovedError) as moved:
                g0.get("r:0")
            named = str(moved.value)
            if listed == [primary] and named == f"{key_slot(b'r:0')} {primary}":
                break
            assert time.time() < deadline, (listed, named, primary)
            time.sleep(0.1)
        g0.close()
        g1.close()
        rc.close()
    finally:
        assert c.stop() == 0


def key_of_group(g, groups, prefix="k"):
    per = 16384 // groups
    return next(f"{prefix}{i}" for i in range(100000) if key_slot(f"{prefix}{i}".encode()) // per == g)


def pid_of(c, g, r):
    node = redis.Redis(host="127.0.0.1", port=c.addr(g, r)[1], socket_timeout=5)
    pid = int(node.info("server")["process_id"])
    node.close()
    return pid


def test_a_group_without_a_primary_answers_clusterdown():
    c = LocalCluster(2, 3, on_exit="keep")
    try:
        key0, key1 = key_of_group(0, 2), key_of_group(1, 2)
        # Group 1's primary and one backup die: no majority, no primary. (A primary that
        # survives alone does not know it lost its majority; its writes wait, as in VSR.)
        n = redis.Redis(host="127.0.0.1", port=c.addr(1, 0)[1], socket_timeout=5)
        primary = int(n.info("replication")["vsr_primary"].rsplit(":", 1)[1]) - c.addr(1, 0)[1]
        n.close()
        backups = [r for r in range(3) if r != primary]
        for r in (primary, backups[0]):
            os.kill(pid_of(c, 1, r), signal.SIGKILL)
        survivor = redis.Redis(host="127.0.0.1", port=c.addr(1, backups[1])[1], socket_timeout=5)
        deadline = time.time() + 30
        while True:
            try:
                survivor.set(key1, "x")
                seen = "ok"
            except redis.exceptions.ClusterDownError as e:
                assert "group 1 has no primary" in str(e)
                break
            except redis.exceptions.ConnectionError as e:
                seen = repr(e)  # the old primary's relay closing while it dies
            assert time.time() < deadline, f"never CLUSTERDOWN; last: {seen}"
            time.sleep(0.1)
        with pytest.raises(redis.exceptions.ClusterDownError):
            survivor.get(key1)
        # The other group is unaffected, and the survivor still redirects its keys.
        with pytest.raises(redis.exceptions.MovedError):
            survivor.get(key0)
        g0 = redis.Redis(host="127.0.0.1", port=c.addr(0, 0)[1], socket_timeout=10)
        g0.set(key0, "still here")
        assert g0.get(key0) == b"still here"
        g0.close()
        survivor.close()
    finally:
        assert c.stop() == 0


def test_a_killed_primary_restarts_and_its_group_recovers():
    c = LocalCluster(2, 3, on_exit="restart")
    try:
        rc = RedisCluster(host="127.0.0.1", port=c.base, socket_timeout=10)
        for i in range(100):
            rc.set(f"p:{i}", i)
        g1 = redis.Redis(host="127.0.0.1", port=c.addr(1, 0)[1], socket_timeout=5)
        primary = g1.info("replication")["vsr_primary"]
        g1.close()
        port = int(primary.rsplit(":", 1)[1])
        r = port - c.base - 10
        old = pid_of(c, 1, r)
        os.kill(old, signal.SIGKILL)
        # `--on-exit restart` starts it again; a new primary is elected meanwhile.
        deadline = time.time() + 30
        while True:
            try:
                if pid_of(c, 1, r) != old:
                    break
            except redis.exceptions.RedisError:
                pass
            assert time.time() < deadline, "the killed node was not restarted"
            time.sleep(0.1)
        c.wait_writable(1)
        # Every acknowledged write survived (two of three replicas kept them in memory).
        deadline = time.time() + 30
        while True:
            try:
                got = [rc.get(f"p:{i}") for i in range(100)]
                break
            except redis.exceptions.RedisError:
                assert time.time() < deadline
                time.sleep(0.2)
        assert got == [str(i).encode() for i in range(100)]
        rc.close()
    finally:
        assert c.stop() == 0
