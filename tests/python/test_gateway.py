"""redis-py against `verso gateway --local-groups 2`: a plain Redis client, unchanged, runs
transactions over keys of two NCC groups. Pipelines with and without MULTI, redis-py's
WATCH helper (`Redis.transaction`) racing from two threads, binary-safe values, the empty
string against a missing key, and the errors of what the gateway does not do.

Run by scripts/python-tests.sh. VERSO_BIN names the binary (default: target/release/verso).
"""

import os
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

import pytest
import redis

ROOT = Path(__file__).resolve().parents[2]
VERSO = os.environ.get("VERSO_BIN", str(ROOT / "target" / "release" / "verso"))


@pytest.fixture(scope="module")
def gateway():
    data = tempfile.mkdtemp(prefix="verso-gateway-py-")
    proc = subprocess.Popen(
        [VERSO, "gateway", "--local-groups", "2", "--listen", "127.0.0.1:0", "--dir", data],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stdout.readline()  # the groups elect their primaries first (seconds)
        if not line.startswith("listening "):
            proc.kill()
            raise RuntimeError(f"verso gateway said {line!r}: {proc.stderr.read()}")
        port = int(line.rsplit(":", 1)[1])
        yield port
    finally:
        proc.terminate()
        try:
            code = proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            code = proc.wait()
        shutil.rmtree(data, ignore_errors=True)
    assert code == 0, f"verso gateway exited with {code} on SIGTERM"
    # Its replicas went with it: no process may still name the data directory.
    leftover = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if data.encode() in f.read():
                    leftover.append(pid)
        except OSError:
            pass  # gone meanwhile
    assert not leftover, f"replicas still running: {leftover}"


@pytest.fixture
def r(gateway):
    c = redis.Redis(host="127.0.0.1", port=gateway, socket_timeout=30)
    yield c
    c.close()


def test_strings_across_groups(r):
    keys = [f"py:{i}" for i in range(8)]
    assert r.mset({k: i for i, k in enumerate(keys)})
    assert r.mget(keys) == [str(i).encode() for i in range(8)]
    assert r.incrby("py:3", 10) == 13
    assert r.delete("py:0", "py:1", "py:none") == 2
    assert r.exists("py:0", "py:2", "py:2") == 2
    assert r.set("py:empty", "")
    assert r.get("py:empty") == b"" and r.get("py:missing") is None
    blob = bytes(range(256)) * 4
    assert r.set(b"py:\x00bin", blob) and r.get(b"py:\x00bin") == blob
    assert r.rename("py:2", "py:renamed") and r.get("py:renamed") == b"2"
    assert r.getrange("py:renamed", 0, -1) == b"2"
    assert r.incrbyfloat("py:f", 1.5) == 1.5


def test_pipelines_with_and_without_multi(r):
    with r.pipeline(transaction=True) as p:
        p.set("pp:a", 1).incr("pp:a").get("pp:a").mget("pp:a", "pp:b")
        assert p.execute() == [True, 2, b"2", [b"2", None]]
    with r.pipeline(transaction=False) as p:
        for i in range(200):
            p.set(f"pp:{i}", i)
        p.mget([f"pp:{i}" for i in range(200)])
        out = p.execute()
    assert out[-1] == [str(i).encode() for i in range(200)]


def test_watch_helper_races_from_two_threads(gateway):
    """Each thread adds 1 to a counter 25 times with redis-py's optimistic helper (WATCH,
    read, MULTI, SET, EXEC, again on WatchError): no increment may be lost."""
    c0 = redis.Redis(host="127.0.0.1", port=gateway, socket_timeout=30)
    c0.set("race:n", 0)
    errors = []

    def add(n):
        c = redis.Redis(host="127.0.0.1", port=gateway, socket_timeout=30)
        try:
            for _ in range(n):
                def bump(pipe):
                    v = int(pipe.get("race:n"))
                    pipe.multi()
                    pipe.set("race:n", v + 1)
                c.transaction(bump, "race:n")
        except Exception as e:  # surfaced below
            errors.append(e)
        finally:
            c.close()

    threads = [threading.Thread(target=add, args=(25,)) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors
    assert int(c0.get("race:n")) == 50
    c0.close()


def test_what_the_gateway_refuses(r):
    with pytest.raises(redis.ResponseError, match="expiry"):
        r.set("x", 1, ex=10)
    with pytest.raises(redis.ResponseError, match="unknown command"):
        r.hset("h", "f", "v")
    r.set("notnum", "abc")
    with pytest.raises(redis.ResponseError, match="not an integer"):
        r.incr("notnum")
    with pytest.raises(redis.ResponseError, match="no such key"):
        r.rename("py:never", "py:other")
