"""COMMAND, COMMAND INFO, COMMAND DOCS and COMMAND GETKEYS against a real Redis 7.

Clients build their routing from these answers (redis-py's cluster client reads COMMAND at
start), so Verso's must be Redis's: this suite starts a redis-server beside `verso serve`
and compares the two, reply types included, in RESP2 and RESP3, for every command Verso
serves. It also checks the other direction: every Redis command Verso does not list is an
unknown command to Verso, and every one it lists is known.

Run by scripts/python-tests.sh, which installs Debian's redis-server when it is missing.
REDIS_SERVER names another binary.
"""

import os
import shutil
import socket
import subprocess
import tempfile
import time

import pytest
import redis

from test_redis_py import Server, free_port

REDIS = os.environ.get("REDIS_SERVER", "redis-server")
# Verso's own commands and subcommands, which Redis 7.0 does not have.
EXTRAS = {"vrange", "client|setinfo"}


class Raw:
    """A RESP client that keeps each reply's types: ("+", "OK"), ("*", [...]), ("%", [...])."""

    def __init__(self, port, protocol):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.f = self.sock.makefile("rb")
        if protocol == 3:
            self.call("HELLO", "3")

    def call(self, *args):
        out = b"*%d\r\n" % len(args)
        for a in args:
            a = a.encode() if isinstance(a, str) else a
            out += b"$%d\r\n%s\r\n" % (len(a), a)
        self.sock.sendall(out)
        return self.read()

    def read(self):
        t = self.f.read(1).decode()
        line = self.f.readline()[:-2].decode()
        if t in "+-:(,#":
            return (t, line)
        if t in "$=":
            n = int(line)
            return (t, None) if n < 0 else (t, self.f.read(n + 2)[:-2].decode())
        if t in "*~>":
            n = int(line)
            return (t, None) if n < 0 else (t, [self.read() for _ in range(n)])
        if t == "%":
            return (t, [(self.read(), self.read()) for _ in range(int(line))])
        if t == "_":
            return (t, None)
        raise AssertionError(f"bad RESP type {t!r}")

    def close(self):
        self.sock.close()


@pytest.fixture(scope="module")
def servers():
    port = free_port()
    workdir = tempfile.mkdtemp(prefix="verso-redis-")
    proc = subprocess.Popen(
        [REDIS, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
         "--dir", workdir],
        stdout=subprocess.DEVNULL,
    )
    deadline = time.time() + 20
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            assert proc.poll() is None and time.time() < deadline, "redis-server did not start"
            time.sleep(0.05)
    verso = Server()
    yield verso.port, port
    verso.stop()
    proc.terminate()
    proc.wait(timeout=10)
    shutil.rmtree(workdir, ignore_errors=True)


def names(raw):
    t, items = raw.call("COMMAND", "LIST")
    assert t == "*"
    return sorted(v for _, v in items)


def by_name(entries):
    """A set of COMMAND INFO entries (or DOCS pairs) keyed by command name."""
    return {e[1][0][1]: e for e in entries}


def split_info(entry):
    """(fields before the subcommands, the subcommands by name)."""
    t, fields = entry
    assert t == "*" and len(fields) == 10
    return fields[:9], {s[1][0][1]: s for s in fields[9][1]}


@pytest.mark.parametrize("protocol", [2, 3])
def test_info_is_redis_s_for_every_command(servers, protocol):
    verso_port, redis_port = servers
    v, r = Raw(verso_port, protocol), Raw(redis_port, protocol)
    top = [n for n in names(v) if "|" not in n]
    assert len(top) > 150
    assert v.call("COMMAND", "COUNT") == (":", str(len(top)))
    compared = 0
    for name in top:
        mine, = v.call("COMMAND", "INFO", name)[1]
        if name in EXTRAS:
            assert mine[1][0] == ("$", name)
            continue
        theirs, = r.call("COMMAND", "INFO", name)[1]
        my_fields, my_subs = split_info(mine)
        their_fields, their_subs = split_info(theirs)
        assert my_fields == their_fields, name
        for sub, entry in my_subs.items():
            if sub not in EXTRAS:
                assert entry == their_subs[sub], sub
        compared += 1
    # An unknown name is a null, as in Redis; COMMAND alone lists every command's entry.
    assert v.call("COMMAND", "INFO", "get", "nosuch")[1][1] == r.call(
        "COMMAND", "INFO", "get", "nosuch")[1][1]
    assert len(v.call("COMMAND")[1]) == len(top)
    assert compared > 150
    v.close()
    r.close()


@pytest.mark.parametrize("protocol", [2, 3])
def test_docs_are_redis_s_for_every_command(servers, protocol):
    verso_port, redis_port = servers
    v, r = Raw(verso_port, protocol), Raw(redis_port, protocol)
    listed = names(v)
    containers = {n.split("|")[0] for n in listed if "|" in n}
    compared = 0
    for name in listed:
        if name in EXTRAS:
            continue
        mine = v.call("COMMAND", "DOCS", name)
        theirs = r.call("COMMAND", "DOCS", name)
        if name not in containers:
            assert mine == theirs, name
            compared += 1
        elif protocol == 3:
            # Containers: Verso documents only the subcommands it serves.
            (_, [(key, (t, fields))]) = mine
            (_, [(tkey, (tt, tfields))]) = theirs
            assert (key, t) == (tkey, tt)
            plain = [f for f in fields if f[0][1] != "subcommands"]
            assert plain == [f for f in tfields if f[0][1] != "subcommands"], name
            subs = dict((k[1], d) for f in fields if f[0][1] == "subcommands" for k, d in f[1][1])
            their_subs = dict(
                (k[1], d) for f in tfields if f[0][1] == "subcommands" for k, d in f[1][1])
            assert subs, name
            for sub, d in subs.items():
                if sub not in EXTRAS:
                    assert d == their_subs[sub], sub
    assert compared > 150
    v.close()
    r.close()


GETKEYS = [
    ["GET", "k"],
    ["SET", "k", "v", "GET"],
    ["MSET", "a", "1", "b", "2"],
    ["MSET", "a", "1", "b"],
    ["MGET", "a", "b", "c"],
    ["DEL", "a", "b"],
    ["RENAME", "a", "b"],
    ["COPY", "a", "b", "DB", "1"],
    ["LMOVE", "a", "b", "LEFT", "RIGHT"],
    ["BLPOP", "a", "b", "0"],
    ["BLMOVE", "a", "b", "LEFT", "LEFT", "1"],
    ["SMOVE", "a", "b", "m"],
    ["SINTERSTORE", "d", "a", "b"],
    ["ZUNIONSTORE", "d", "2", "a", "b", "WEIGHTS", "1", "2"],
    ["ZUNIONSTORE", "d", "3", "a", "b"],
    ["ZUNIONSTORE", "d", "x", "a", "b"],
    ["ZINTER", "2", "a", "b", "WITHSCORES"],
    ["ZDIFF", "0", "a"],
    ["ZRANGESTORE", "d", "s", "0", "-1"],
    ["SINTERCARD", "2", "a", "b", "LIMIT", "3"],
    ["LMPOP", "2", "a", "b", "LEFT"],
    ["BLMPOP", "0", "1", "a", "RIGHT", "COUNT", "2"],
    ["BZMPOP", "1.5", "2", "a", "b", "MIN"],
    ["ZMPOP", "-1", "a", "MIN"],
    ["LCS", "a", "b", "LEN"],
    ["HSET", "h", "f", "v"],
    ["EXPIRE", "k", "10", "NX"],
    ["OBJECT", "ENCODING", "k"],
    ["OBJECT", "HELP"],
    ["PING"],
    ["CONFIG", "GET", "x"],
    ["GET"],
    ["GET", "a", "b"],
    ["NOSUCH", "a"],
    ["WATCH", "a", "b"],
]


@pytest.mark.parametrize("protocol", [2, 3])
def test_getkeys_is_redis_s(servers, protocol):
    verso_port, redis_port = servers
    v, r = Raw(verso_port, protocol), Raw(redis_port, protocol)
    for request in GETKEYS:
        for sub in ("GETKEYS", "GETKEYSANDFLAGS"):
            assert v.call("COMMAND", sub, *request) == r.call("COMMAND", sub, *request), (
                sub, request)
    for request in (["COMMAND", "GETKEYS"], ["COMMAND", "NOSUCH"], ["COMMAND", "COUNT", "x"]):
        mine, theirs = v.call(*request), r.call(*request)
        assert mine[0] == theirs[0] == "-", request
    v.close()
    r.close()


def test_list_filters(servers):
    verso_port, redis_port = servers
    v, r = Raw(verso_port, 2), Raw(redis_port, 2)
    mine = set(names(v))
    for f in (["ACLCAT", "hash"], ["ACLCAT", "connection"], ["PATTERN", "z*"],
              ["PATTERN", "client|*"], ["MODULE", "x"]):
        got = {x for _, x in v.call("COMMAND", "LIST", "FILTERBY", *f)[1]} - EXTRAS
        want = {x for _, x in r.call("COMMAND", "LIST", "FILTERBY", *f)[1]} & mine
        assert got == want, f
    assert v.call("COMMAND", "LIST", "FILTERBY", "NOPE", "x")[0] == "-"
    v.close()
    r.close()


def test_the_command_list_is_what_the_server_serves(servers):
    """Every command Redis has and Verso does not list is unknown to Verso; every command
    Verso lists is known (answers anything but 'unknown command')."""
    verso_port, redis_port = servers
    v, r = Raw(verso_port, 2), Raw(redis_port, 2)
    mine = set(names(v))
    theirs = set(names(r))
    # Not served, but answered with a clear error rather than as unknown (README "Server").
    scripting = {"eval", "evalsha", "eval_ro", "evalsha_ro", "fcall", "fcall_ro"}
    # Would end or take over the connection.
    skip = {"shutdown", "quit", "monitor", "subscribe", "psubscribe", "ssubscribe", "sync",
            "psync", "debug", "reset"}
    for name in sorted((theirs | mine) - scripting - skip):
        if "|" in name:
            continue
        reply = v.call(name.upper())
        if name == "multi":
            assert v.call("DISCARD") == ("+", "OK")
        unknown = reply[0] == "-" and reply[1].startswith("ERR unknown command")
        assert unknown == (name not in mine), (name, reply)
    v.close()
    r.close()


def test_redis_py_parses_command(servers):
    verso_port, _ = servers
    c = redis.Redis(host="127.0.0.1", port=verso_port, socket_timeout=10)
    table = c.command()
    assert table["zunionstore"]["arity"] == -4
    assert "movablekeys" in table["zunionstore"]["flags"]
    keys = c.command_getkeys("ZUNIONSTORE", "d", 2, "a", "b")
    assert [k.decode() if isinstance(k, bytes) else k for k in keys] == ["d", "a", "b"]
    assert c.command_count() == len(table)
    c.close()
