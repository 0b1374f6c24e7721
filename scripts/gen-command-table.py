#!/usr/bin/env python3
"""Regenerates crates/server/src/commands/table.json, the command table behind COMMAND,
COMMAND INFO, COMMAND DOCS and COMMAND GETKEYS (and, later, cluster key routing).

The metadata of each command (arity, flags, ACL categories, tips, key specifications,
documentation) is Redis 7.0's own: this script starts a redis-server on a free loopback port,
asks it COMMAND INFO and COMMAND DOCS for every command in supported.txt (keeping only the
subcommands listed there), merges extras.json (what Redis 7.0 lacks, such as Verso's VRANGE)
and writes the table. Run it after adding a command to the server:

    python3 scripts/gen-command-table.py [--redis-server PATH]

Needs only Python 3 and redis-server (Debian: apt-get install redis-server).
"""

import argparse
import json
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DIR = ROOT / "crates" / "server" / "src" / "commands"


class Resp3:
    """A RESP3 reply reader: maps become dicts (in order), sets and arrays lists."""

    def __init__(self, sock):
        self.f = sock.makefile("rb")

    def line(self):
        return self.f.readline()[:-2].decode()

    def read(self):
        t = self.f.read(1)
        rest = self.line()
        if t in (b"+", b"("):
            return rest
        if t == b"-":
            raise RuntimeError(rest)
        if t == b":":
            return int(rest)
        if t in (b"$", b"="):
            data = self.f.read(int(rest) + 2)[:-2].decode()
            return data[4:] if t == b"=" else data
        if t in (b"*", b"~", b">"):
            return [self.read() for _ in range(int(rest))]
        if t == b"%":
            out = {}
            for _ in range(int(rest)):
                k = self.read()
                out[k] = self.read()
            return out
        if t == b"_":
            return None
        raise RuntimeError(f"unexpected RESP3 type {t!r}")


def request(sock, reader, *args):
    out = b"*%d\r\n" % len(args)
    for a in args:
        a = a.encode()
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    sock.sendall(out)
    return reader.read()


def info_entry(raw):
    """COMMAND INFO's ten-element array as a named object."""
    name, arity, flags, first, last, step, acl, tips, specs, subs = raw
    return {
        "name": name,
        "arity": arity,
        "flags": flags,
        "first_key": first,
        "last_key": last,
        "step": step,
        "acl_categories": acl,
        "tips": tips,
        "key_specs": specs,
        "subcommands": [info_entry(s) for s in subs],
    }


def supported():
    wanted = []
    for line in (DIR / "supported.txt").read_text().splitlines():
        line = line.split("#", 1)[0].split()
        if line:
            wanted.append((line[0].lower(), [s.lower() for s in line[1:]]))
    return wanted


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--redis-server", default="redis-server")
    opts = ap.parse_args()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    workdir = tempfile.mkdtemp(prefix="verso-gen-")
    proc = subprocess.Popen(
        [opts.redis_server, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
         "--appendonly", "no", "--dir", workdir],
        stdout=subprocess.DEVNULL,
    )
    try:
        deadline = time.time() + 10
        while True:
            try:
                sock = socket.create_connection(("127.0.0.1", port), timeout=5)
                break
            except OSError:
                if time.time() > deadline:
                    sys.exit("redis-server did not start")
                time.sleep(0.05)
        reader = Resp3(sock)
        hello = request(sock, reader, "HELLO", "3")
        table = []
        for name, subs in supported():
            [raw] = request(sock, reader, "COMMAND", "INFO", name)
            if raw is None:
                continue  # not a Redis 7.0 command: extras.json has it
            entry = info_entry(raw)
            docs = request(sock, reader, "COMMAND", "DOCS", name)[name]
            sub_docs = docs.pop("subcommands", {})
            entry["docs"] = docs
            kept = []
            for sub in entry["subcommands"]:
                if sub["name"].split("|", 1)[1] in subs:
                    sub["docs"] = sub_docs[sub["name"]]
                    kept.append(sub)
            missing = set(subs) - {s["name"].split("|", 1)[1] for s in kept}
            entry["subcommands"] = sorted(kept, key=lambda s: s["name"])
            table.append((entry, missing))
        extras = json.loads((DIR / "extras.json").read_text())
        by_name = {e["name"]: e for e, _ in table}
        for extra in extras["commands"]:
            if "|" in extra["name"]:
                parent = by_name[extra["name"].split("|", 1)[0]]
                parent["subcommands"].append(extra)
                parent["subcommands"].sort(key=lambda s: s["name"])
            else:
                table.append((extra, set()))
        known = {e["name"] for e, _ in table}
        for entry, missing in table:
            have = {s["name"].split("|", 1)[1] for s in entry["subcommands"]}
            if missing - have:
                sys.exit(f"{entry['name']}: no metadata for subcommands {sorted(missing - have)}")
        for name, _ in supported():
            if name not in known:
                sys.exit(f"{name}: neither Redis {hello['version']} nor extras.json knows it")
        out = {
            "comment": "Generated by scripts/gen-command-table.py from redis-server "
            f"{hello['version']} and extras.json; do not edit by hand.",
            "redis_version": hello["version"],
            "commands": [e for e, _ in table],
        }
        (DIR / "table.json").write_text(json.dumps(out, indent=1) + "\n")
        print(f"wrote {len(table)} commands to {DIR / 'table.json'}")
    finally:
        proc.terminate()
        proc.wait()


if __name__ == "__main__":
    main()
