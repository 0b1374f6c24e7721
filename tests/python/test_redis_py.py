"""redis-py against a real `verso serve` process: pipelines, MULTI/EXEC/WATCH races between
two clients, SCAN completeness, binary-safe keys and values, and error replies.

Run by scripts/python-tests.sh. VERSO_BIN names the server binary (default:
target/release/verso from the repository root).
"""

import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
import redis

ROOT = Path(__file__).resolve().parents[2]
VERSO = os.environ.get("VERSO_BIN", str(ROOT / "target" / "release" / "verso"))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, *extra):
        self.port = free_port()
        # The default durability (lazy) with a data directory of its own.
        self.dir = tempfile.mkdtemp(prefix="verso-py-")
        self.proc = subprocess.Popen(
            [VERSO, "serve", "--port", str(self.port), "--data-dir", self.dir, *extra],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        deadline = time.time() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                if self.proc.poll() is not None or time.time() > deadline:
                    err = self.proc.stderr.read().decode() if self.proc.stderr else ""
                    self.stop()
                    raise RuntimeError(f"verso serve did not start: {err}")
                time.sleep(0.05)

    def client(self, **kw):
        return redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=10, **kw)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)
        return self.proc.returncode


@pytest.fixture(scope="module")
def server():
    s = Server()
    yield s
    code = s.stop()
    assert code == 0, f"verso serve exited with {code} on SIGTERM"


@pytest.fixture
def r(server):
    c = server.client()
    c.flushall()
    yield c
    c.close()


def test_strings_round_trip(r):
    assert r.ping()
    assert r.set("k", "v") is True
    assert r.get("k") == b"v"
    assert r.get("missing") is None
    assert r.incr("n") == 1
    assert r.incrby("n", 41) == 42
    assert r.decr("n") == 41
    assert r.mset({"a": 1, "b": 2}) is True
    assert r.mget("a", "nope", "b") == [b"1", None, b"2"]
    assert r.exists("a", "b", "nope") == 2
    assert r.delete("a", "nope") == 1
    assert r.set("k", "w", nx=True) is None
    assert r.set("k", "w", xx=True, get=True) == b"v"
    assert r.append("k", "xyz") == 4
    assert r.getrange("k", 1, -1) == b"xyz"
    assert r.dbsize() == 3


def test_binary_safe_keys_and_values(r):
    everything = bytes(range(256))
    for b in range(256):
        key = bytes([b])
        r.set(key, everything[b:] + everything[:b])
    for b in range(256):
        assert r.get(bytes([b])) == everything[b:] + everything[:b], b
    r.set(everything, b"\r\n\x00$-1\r\n")
    r.set(b"", b"")
    assert r.get(everything) == b"\r\n\x00$-1\r\n"
    assert r.get(b"") == b""
    assert r.exists(b"") == 1
    assert r.strlen(everything) == 8
    assert r.dbsize() == 258


def test_pipelines(r):
    p = r.pipeline(transaction=False)
    for i in range(1000):
        p.set(f"p{i}", i)
    for i in range(1000):
        p.incrby(f"p{i}", i)
    p.get("p999")
    out = p.execute()
    assert out[:1000] == [True] * 1000
    assert out[1000:2000] == [2 * i for i in range(1000)]
    assert out[2000] == b"1998"

    # An error in a non-transactional pipeline is that command's result only.
    p = r.pipeline(transaction=False)
    p.set("s", "text").incr("s").get("s")
    out = p.execute(raise_on_error=False)
    assert out[0] is True
    assert isinstance(out[1], redis.ResponseError)
    assert "not an integer" in str(out[1])
    assert out[2] == b"text"


def test_multi_exec(r):
    p = r.pipeline(transaction=True)
    p.set("a", 100).set("b", 0).decrby("a", 30).incrby("b", 30).mget("a", "b")
    assert p.execute() == [True, True, 70, 30, [b"70", b"30"]]

    # A wrong-arity command is refused while queueing: EXEC aborts and nothing runs.
    p = r.pipeline(transaction=True)
    p.incrby("a", 1000)
    p.execute_command("GET")
    with pytest.raises(redis.ResponseError) as e:
        p.execute()
    assert "EXECABORT" in str(e.value) or "wrong number of arguments" in str(e.value)
    assert r.get("a") == b"70"


def test_watch_race_between_two_clients(server, r):
    other = server.client()
    r.set("w", 10)

    with r.pipeline() as p:
        p.watch("w")
        seen = int(p.get("w"))
        other.set("w", 500)  # the other client changes the watched key
        p.multi()
        p.set("w", seen + 1)
        with pytest.raises(redis.WatchError):
            p.execute()
    assert r.get("w") == b"500"

    # An unrelated change does not fail the transaction.
    with r.pipeline() as p:
        p.watch("w")
        seen = int(p.get("w"))
        other.set("unrelated", 1)
        p.multi()
        p.set("w", seen + 1)
        assert p.execute() == [True]
    assert r.get("w") == b"501"

    # redis-py's transaction helper retries after a lost race.
    attempts = []

    def double(pipe):
        cur = int(pipe.get("w"))
        if not attempts:
            other.incrby("w", 1000)
        attempts.append(cur)
        pipe.multi()
        pipe.set("w", cur * 2)

    r.transaction(double, "w")
    assert attempts == [501, 1501]
    assert r.get("w") == b"3002"
    other.close()


def test_concurrent_watch_increments_lose_nothing(server, r):
    import threading

    r.set("counter", 0)
    per_thread, threads = 100, 4

    def work():
        c = server.client()
        for _ in range(per_thread):
            def incr(pipe):
                v = int(pipe.get("counter"))
                pipe.multi()
                pipe.set("counter", v + 1)

            c.transaction(incr, "counter")
        c.close()

    ts = [threading.Thread(target=work) for _ in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert int(r.get("counter")) == per_thread * threads


def test_scan_completeness(server, r):
    keys = {f"key:{i:04}".encode() for i in range(1000)}
    p = r.pipeline(transaction=False)
    for k in keys:
        p.set(k, 1)
    p.execute()
    got = list(r.scan_iter())
    assert len(got) == 1000, "a key was returned twice or missed"
    assert set(got) == keys

    # With MATCH/COUNT while another client inserts and deletes other keys.
    other = server.client()
    seen = {}
    for i, k in enumerate(r.scan_iter(match="key:*", count=33)):
        seen[k] = seen.get(k, 0) + 1
        if i % 50 == 0:
            other.set(f"key:new:{i}", 1)
            other.set(f"zzz{i}", 1)
    assert all(seen.get(k) == 1 for k in keys)
    assert all(n == 1 for n in seen.values())
    assert all(k.startswith(b"key:") for k in seen)
    other.close()


def test_error_replies(r):
    with pytest.raises(redis.ResponseError, match="wrong number of arguments for 'get' command"):
        r.execute_command("GET")
    with pytest.raises(redis.ResponseError, match="unknown command 'NOSUCHCMD'"):
        r.execute_command("NOSUCHCMD", "x")
    r.set("s", "abc")
    with pytest.raises(redis.ResponseError, match="not an integer"):
        r.incr("s")
    with pytest.raises(redis.ResponseError, match="EXEC without MULTI"):
        r.execute_command("EXEC")
    assert r.ping()


def test_requirepass():
    s = Server("--requirepass", "s3cret")
    try:
        anon = s.client()
        with pytest.raises(redis.AuthenticationError):
            anon.get("k")
        with pytest.raises(redis.AuthenticationError):
            s.client(password="wrong").ping()
        good = s.client(password="s3cret")
        assert good.set("k", "v")
        assert good.get("k") == b"v"
        assert s.client(username="default", password="s3cret").get("k") == b"v"
        with pytest.raises(redis.AuthenticationError):
            s.client(username="default", password="nope").ping()
    finally:
        assert s.stop() == 0


def test_resp3(server):
    try:
        c = server.client(protocol=3)
    except TypeError:
        pytest.skip("this redis-py has no RESP3 support")
    c.set("r3", "v")
    assert c.get("r3") == b"v"
    assert c.get("r3-missing") is None
    hello = c.execute_command("HELLO", 3)
    assert hello[b"proto"] == 3
    c.close()


def test_more_string_and_key_commands(r):
    r.set("f", "10.50")
    assert r.incrbyfloat("f", 0.1) == 10.6
    assert r.setrange("sr", 3, "abc") == 6
    assert r.get("sr") == b"\x00\x00\x00abc"
    assert r.substr("sr", 3, -1) == b"abc"
    r.mset({"l1": "ohmytext", "l2": "mynewtext"})
    assert r.lcs("l1", "l2") == b"mytext"
    assert r.lcs("l1", "l2", len=True) == 6
    assert r.rename("l1", "l3") is True
    assert r.renamenx("l3", "l2") is False
    assert r.copy("l3", "l4") is True
    assert r.copy("l3", "l4") is False
    assert r.copy("l3", "l4", replace=True) is True
    assert r.move("l4", 1) is True
    assert r.exists("l4") == 0
    assert r.touch("l2", "l3", "nope") == 2
    assert r.object("encoding", "l2") == b"embstr"
    assert r.randomkey() is not None
    assert r.function_flush() is True
    assert r.script_flush() is True
    with pytest.raises(redis.ResponseError, match="scripting"):
        r.eval("return 1", 0)


def keyspace_line(r, db=0):
    """INFO keyspace's entry for `db` as a dict (empty if the database has no keys)."""
    return r.info("keyspace").get(f"db{db}", {})


def test_expiry(r):
    assert r.set("e", "v", ex=100) is True
    assert 99 <= r.ttl("e") <= 100
    assert 0 < r.pttl("e") <= 100_000
    assert r.expiretime("e") >= int(time.time())
    assert r.set("e", "w", keepttl=True) is True
    assert r.ttl("e") > 0
    assert r.persist("e") is True
    assert r.ttl("e") == -1
    assert r.expire("e", 50, gt=True) is False
    assert r.expire("e", 50, lt=True) is True
    assert r.getex("e", persist=True) == b"w"
    assert r.ttl("e") == -1
    assert r.setex("s", 100, "v") is True
    assert r.psetex("p", 100_000, "v") is True
    assert r.ttl("missing") == -2
    assert keyspace_line(r)["expires"] == 2
    with pytest.raises(redis.ResponseError, match="invalid expire time"):
        r.set("e", "v", ex=0)
    # Gone at once for every reader; then deleted in the background (the index empties
    # without anyone reading the keys). Bounded waits on conditions, never a fixed sleep.
    r.mset({f"t{i}": "v" for i in range(500)})
    pipe = r.pipeline(transaction=False)
    for i in range(500):
        pipe.pexpire(f"t{i}", 50)
    assert all(pipe.execute())
    deadline = time.time() + 10
    while r.exists("t0") and time.time() < deadline:
        time.sleep(0.01)
    assert r.exists(*[f"t{i}" for i in range(500)]) == 0
    assert r.dbsize() == 3
    while keyspace_line(r).get("keys", 0) > 3 and time.time() < deadline + 10:
        time.sleep(0.05)
    # The expirer deleted them (and the GC took the records out of the index).
    assert keyspace_line(r)["keys"] == 3
    assert keyspace_line(r)["expires"] == 2


def test_hashes(r):
    assert r.hset("h", mapping={"a": "1", "b": "2"}) == 2
    assert r.hset("h", "a", "3") == 0
    assert r.hget("h", "a") == b"3"
    assert r.hgetall("h") == {b"a": b"3", b"b": b"2"}
    assert r.hmget("h", ["a", "zz"]) == [b"3", None]
    assert r.hlen("h") == 2
    assert r.hexists("h", "b") is True
    assert r.hincrby("h", "n", 5) == 5
    assert r.hincrbyfloat("h", "f", 1.5) == 1.5
    assert sorted(r.hkeys("h")) == [b"a", b"b", b"f", b"n"]
    assert r.hsetnx("h", "a", "9") == 0
    assert r.hstrlen("h", "a") == 1
    assert len(r.hrandfield("h", 2)) == 2
    assert len(r.hrandfield("h", -6)) == 6
    assert r.hrandfield("h", 2, withvalues=True)[1] is not None
    cursor, fields = r.hscan("h", 0, count=100)
    assert cursor == 0 and fields == {b"a": b"3", b"b": b"2", b"f": b"1.5", b"n": b"5"}
    assert r.hdel("h", "a", "b", "f", "n") == 4
    assert r.exists("h") == 0
    r.set("s", "v")
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        r.hset("s", "a", "1")
    assert r.type("s") == b"string"


def test_sets(r):
    assert r.sadd("s1", "a", "b", "c") == 3
    assert r.sadd("s2", "b", "c", "d") == 3
    assert r.smembers("s1") == {b"a", b"b", b"c"}
    assert r.sinter("s1", "s2") == {b"b", b"c"}
    assert r.sunion("s1", "s2") == {b"a", b"b", b"c", b"d"}
    assert r.sdiff("s1", "s2") == {b"a"}
    assert r.sinterstore("s3", ["s1", "s2"]) == 2
    assert r.smembers("s3") == {b"b", b"c"}
    assert r.sintercard(2, ["s1", "s2"], limit=1) == 1
    assert r.smismember("s1", ["a", "z"]) == [1, 0]
    assert r.smove("s1", "s2", "a") is True
    assert r.scard("s2") == 4
    assert r.srandmember("s2") in {b"a", b"b", b"c", b"d"}
    popped = r.spop("s3", 5)
    assert set(popped) == {b"b", b"c"}
    assert r.exists("s3") == 0
    assert r.type("s2") == b"set"
    cursor, members = r.sscan("s2", 0, count=100)
    assert cursor == 0 and set(members) == {b"a", b"b", b"c", b"d"}
    assert sorted(r.scan_iter(_type="set")) == [b"s1", b"s2"]
    # RESP3: sets and maps arrive as their own types.
    c3 = redis.Redis(host=r.connection_pool.connection_kwargs["host"],
                     port=r.connection_pool.connection_kwargs["port"], protocol=3)
    assert c3.smembers("s2") == {b"a", b"b", b"c", b"d"}
    c3.hset("h3", "k", "v")
    assert c3.hgetall("h3") == {b"k": b"v"}
    c3.close()


def test_sorted_sets(r):
    assert r.zadd("z", {"a": 1, "b": 2, "c": 3}) == 3
    assert r.zadd("z", {"a": 5}, gt=True, ch=True) == 1
    assert r.zrange("z", 0, -1, withscores=True) == [(b"b", 2.0), (b"c", 3.0), (b"a", 5.0)]
    assert r.zrangebyscore("z", "(2", "+inf") == [b"c", b"a"]
    assert r.zrevrange("z", 0, 0) == [b"a"]
    assert r.zrank("z", "c") == 1
    assert r.zscore("z", "a") == 5.0
    assert r.zincrby("z", 0.5, "b") == 2.5
    assert r.zcount("z", 2, 3) == 2
    assert r.zpopmin("z") == [(b"b", 2.5)]
    assert r.zunionstore("u", {"z": 2, "nokey": 1}) == 2
    assert r.zrange("u", 0, -1, withscores=True) == [(b"c", 6.0), (b"a", 10.0)]
    assert r.type("u") == b"zset"
    c3 = redis.Redis(host=r.connection_pool.connection_kwargs["host"],
                     port=r.connection_pool.connection_kwargs["port"], protocol=3)
    assert c3.zrange("u", 0, -1, withscores=True) == [[b"c", 6.0], [b"a", 10.0]]
    c3.close()


def test_lists_and_blocking_pops(r, server):
    assert r.rpush("l", "a", "b", "c") == 3
    assert r.lpush("l", "z") == 4
    assert r.lrange("l", 0, -1) == [b"z", b"a", b"b", b"c"]
    assert r.lindex("l", -1) == b"c"
    assert r.linsert("l", "before", "b", "x") == 5
    assert r.lpos("l", "x") == 2
    assert r.lrem("l", 0, "x") == 1
    assert r.lmove("l", "m", "LEFT", "RIGHT") == b"z"
    assert r.lpop("l", 2) == [b"a", b"b"]
    assert r.rpop("l") == b"c"
    assert r.exists("l") == 0
    # A blocked BLPOP is answered by another client's push.
    import threading

    got = {}
    other = server.client()

    def waiter():
        got["v"] = other.blpop(["q1", "q2"], timeout=10)

    t = threading.Thread(target=waiter)
    t.start()
    deadline = time.time() + 10
    r.rpush("q2", "hello")
    t.join(timeout=15)
    assert not t.is_alive() and got["v"] == (b"q2", b"hello")
    assert time.time() < deadline
    assert other.blpop(["q1"], timeout=0.05) is None
    other.close()
