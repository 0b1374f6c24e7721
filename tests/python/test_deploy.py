"""The Kubernetes example (deploy/kubernetes) started on loopback, so it cannot drift from the
code: its config files (the ConfigMap's contents) are the real shards and cluster files with
each pod's DNS name replaced by a loopback address, and every node runs with the flags the
StatefulSet's container gives it. Then redis-py's RedisCluster writes and reads both groups.

Run by scripts/python-tests.sh.
"""

import os
import re
import shlex
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import redis
import yaml
from redis.cluster import RedisCluster, key_slot

from test_sharding import base_port, port_free

ROOT = Path(__file__).resolve().parents[2]
VERSO = os.environ.get("VERSO_BIN", str(ROOT / "target" / "release" / "verso"))
KUBE = ROOT / "deploy" / "kubernetes"
POD = re.compile(r"verso-g(\d+)-(\d+)\.verso-g\1:(6379|16379)")


def manifests():
    return list(yaml.safe_load_all((KUBE / "verso.yaml").read_text()))


def test_the_manifests_agree_with_the_config_files():
    kust = yaml.safe_load((KUBE / "kustomization.yaml").read_text())
    files = kust["configMapGenerator"][0]["files"]
    assert sorted(files) == sorted(f"config/{p.name}" for p in (KUBE / "config").iterdir())
    shards = (KUBE / "config" / "shards.toml").read_text()
    sets = [m for m in manifests() if m["kind"] == "StatefulSet"]
    services = {m["metadata"]["name"] for m in manifests() if m["kind"] == "Service"}
    assert len(sets) == shards.count("[[group]]")
    for s in sets:
        name = s["metadata"]["name"]
        g = int(name.removeprefix("verso-g"))
        assert s["spec"]["serviceName"] == name and name in services
        group_file = (KUBE / "config" / f"group{g}.toml").read_text()
        assert s["spec"]["replicas"] == group_file.count("[[replica]]")
        args = " ".join(s["spec"]["template"]["spec"]["containers"][0]["args"])
        assert f"--group {g}" in args and f"group{g}.toml" in args


def test_the_example_cluster_runs_on_loopback():
    import random

    rng = random.Random()
    for _ in range(200):
        base = base_port(rng)
        ports = [base + d for d in range(0, 20)] + [base + 1000 + d for d in range(0, 20)]
        if all(port_free(p) for p in ports):
            break
    else:
        raise RuntimeError("no free ports")

    def loopback(m):
        g, r, port = int(m[1]), int(m[2]), int(m[3])
        return f"127.0.0.1:{base + (1000 if port == 16379 else 0) + 10 * g + r}"

    tmp = Path(tempfile.mkdtemp(prefix="verso-deploy-"))
    procs = []
    try:
        conf = tmp / "etc"
        conf.mkdir()
        for f in (KUBE / "config").iterdir():
            (conf / f.name).write_text(POD.sub(loopback, f.read_text()))
        for s in manifests():
            if s["kind"] != "StatefulSet":
                continue
            container = s["spec"]["template"]["spec"]["containers"][0]
            script = " ".join(container["args"])
            for r in range(s["spec"]["replicas"]):
                data = tmp / f"{s['metadata']['name']}-{r}"
                line = (script.replace("${HOSTNAME##*-}", str(r))
                        .replace("/etc/verso", str(conf)).replace("/data", str(data)))
                argv = shlex.split(line)
                assert argv[:2] == ["exec", "verso"], argv
                log = open(tmp / f"{s['metadata']['name']}-{r}.log", "w")
                procs.append(subprocess.Popen([VERSO] + argv[2:], stdout=log, stderr=log))
        rc = None
        deadline = time.time() + 60
        while True:
            try:
                rc = rc or RedisCluster(host="127.0.0.1", port=base, socket_timeout=5)
                for i in range(200):
                    rc.set(f"d:{i}", i)
                break
            # RedisClusterException (no node reachable yet: still starting) is not a
            # RedisError.
            except (redis.exceptions.RedisError, redis.exceptions.RedisClusterException) as e:
                assert all(p.poll() is None for p in procs), "a node exited: " + str(
                    [(tmp / f).read_text()[-2000:] for f in os.listdir(tmp) if f.endswith(".log")])
                assert time.time() < deadline, f"the cluster never took writes: {e!r}"
                rc = None
                time.sleep(0.5)
        assert [int(rc.get(f"d:{i}")) for i in range(200)] == list(range(200))
        assert {key_slot(f"d:{i}".encode()) >= 8192 for i in range(200)} == {False, True}
        rc.close()
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        shutil.rmtree(tmp, ignore_errors=True)
