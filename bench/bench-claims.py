#!/usr/bin/python3
"""Claims: SandboxClaim create -> Ready (seen on a watch) from a warm pool kept full, next to a
cold claim (pool of 0: a new runc sandbox) in the same run, and the warm pool's refill rate.
Needs root and runc; prints a table with p50/p99 in milliseconds."""
import json
import glob
import os
import shutil
import subprocess
import sys
import tempfile
import time

import requests

import bench_cleanup
from bench_libasb import pct

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("ASB_BUILD", os.path.join(ROOT, "build"))
RUNC = shutil.which("runc") or "/usr/sbin/runc"
N = int(os.environ.get("BENCH_CLAIMS", "30"))
POOL = int(os.environ.get("BENCH_POOL", "5"))
EXT = "extensions.agents.x-k8s.io"


def start_server(state):
    env = {**os.environ, "ASB_STATE_DIR": state, "ASB_RUNTIME": RUNC,
           "ASB_SANDBOXD": os.path.join(BUILD, "bin", "sandboxd")}
    log = open(os.path.join(state, "serve.log"), "wb")
    proc = subprocess.Popen([os.path.join(BUILD, "bin", "asb"), "serve", "--listen", "127.0.0.1:0"],
                            stdout=log, stderr=subprocess.STDOUT, env=env)
    for _ in range(500):
        if os.path.exists(os.path.join(state, "server")):
            break
        time.sleep(0.01)
    url = open(os.path.join(state, "server")).read().strip()
    s = requests.Session()
    s.headers["Authorization"] = "Bearer " + open(os.path.join(state, "token")).read().strip()
    for _ in range(500):
        try:
            if s.get(url + "/version", timeout=2).status_code == 200:
                break
        except requests.RequestException:
            time.sleep(0.01)
    return proc, url, s


def base(url, plural):
    return f"{url}/apis/{EXT}/v1beta1/namespaces/default/{plural}"


def post(s, url, plural, body):
    r = s.post(base(url, plural), json=body, timeout=30)
    r.raise_for_status()
    return r.json()


def claim_to_ready(url, s, name, pool):
    b = base(url, "sandboxclaims")
    rv = s.get(b, timeout=10).json()["metadata"]["resourceVersion"]
    w = s.get(b, params={"watch": "true", "resourceVersion": rv,
                         "fieldSelector": f"metadata.name={name}"}, stream=True, timeout=60)
    try:
        t0 = time.perf_counter()
        post(s, url, "sandboxclaims", {"apiVersion": f"{EXT}/v1beta1", "kind": "SandboxClaim",
                                       "metadata": {"name": name},
                                       "spec": {"warmPoolRef": {"name": pool}}})
        for line in w.iter_lines():
            if not line:
                continue
            obj = json.loads(line)["object"]
            for c in (obj.get("status") or {}).get("conditions") or []:
                if c["type"] == "Ready" and c["status"] == "True":
                    return (time.perf_counter() - t0) * 1000
    finally:
        w.close()
    raise RuntimeError("watch ended before Ready")


def pool_status(url, s, name):
    return (s.get(base(url, "sandboxwarmpools") + "/" + name, timeout=10).json().get("status") or {})


def wait_full(url, s, name, n, timeout=120):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pool_status(url, s, name).get("readyReplicas") == n:
            return
        time.sleep(0.01)
    raise RuntimeError(f"pool {name} not full")


def main():
    if os.geteuid() != 0 or not os.path.exists(RUNC):
        print("skipped: needs root and runc")
        return 0
    state = tempfile.mkdtemp(prefix="asb-bc-", dir="/tmp")
    proc, url, s = start_server(state)
    try:
        tpl = {"apiVersion": f"{EXT}/v1beta1", "kind": "SandboxTemplate", "metadata": {"name": "t"},
               "spec": {"podTemplate": {"spec": {"containers": [{"name": "main", "image": "host"}]}}}}
        post(s, url, "sandboxtemplates", tpl)
        for name, n in (("warm", POOL), ("cold", 0)):
            post(s, url, "sandboxwarmpools", {"apiVersion": f"{EXT}/v1beta1", "kind": "SandboxWarmPool",
                                              "metadata": {"name": name},
                                              "spec": {"replicas": n, "sandboxTemplateRef": {"name": "t"}}})
        t0 = time.perf_counter()
        wait_full(url, s, "warm", POOL)
        refill = POOL / (time.perf_counter() - t0)
        warm = []
        for i in range(N):
            wait_full(url, s, "warm", POOL)  # keep the pool warm: every claim is served warm
            warm.append(claim_to_ready(url, s, f"w{i}", "warm"))
        cold = [claim_to_ready(url, s, f"c{i}", "cold") for i in range(max(3, N // 5))]
        print(f"{'measurement':44} {'p50 ms':>9} {'p99 ms':>9}")
        print(f"{'warm claim -> Ready (watch), pool of %d' % POOL:44} {pct(warm, 50):9.2f} {pct(warm, 99):9.2f}")
        print(f"{'baseline: cold claim -> Ready (new runc)':44} {pct(cold, 50):9.2f} {pct(cold, 99):9.2f}")
        print(f"{'pool fill from empty (sandboxes/s)':44} {refill:9.1f}")
    finally:
        proc.terminate()
        proc.wait(30)
        bench_cleanup.cleanup_state(state)
    return 0


if __name__ == "__main__":
    sys.exit(main())
