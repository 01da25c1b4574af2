#!/usr/bin/python3
"""Local sandboxes: Sandbox create -> Ready through `asb serve` (runc container with sandboxd as
PID 1, Ready = sandboxd answers health on its unix socket), next to a bare `runc run` of a
trivial container (/usr/bin/true on a read-only bind of the host's /usr) in the same run.
Sandboxes alternate between no limits at all (the server runs with every default off) and the
built-in defaults set explicitly (memory 1Gi, cpu 2, ephemeral-storage 10Gi: the last one is a
loop-mounted ext4 image holding workspace, home and /tmp), so the cost of the limits is measured
side by side. Needs root and runc; prints a table with p50/p99 in milliseconds."""
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import requests

import bench_cleanup

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("ASB_BUILD", os.path.join(ROOT, "build"))
RUNC = shutil.which("runc") or "/usr/sbin/runc"
N = int(os.environ.get("BENCH_SANDBOXES", "10"))


def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))]


def start_server(state, network="none"):
    env = {**os.environ, "ASB_STATE_DIR": state, "ASB_RUNTIME": RUNC, "ASB_NETWORK": network,
           "ASB_SANDBOXD": os.path.join(BUILD, "bin", "sandboxd"), "ASB_DEFAULT_MEMORY": "0",
           "ASB_DEFAULT_CPU": "0", "ASB_DEFAULT_EPHEMERAL_STORAGE": "0"}
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


CGROUP_LIMITS = {"memory": "1Gi", "cpu": "2"}
LIMITS = {**CGROUP_LIMITS, "ephemeral-storage": "10Gi"}


def create_to_ready(url, s, name, limits=None):
    base = f"{url}/apis/agents.x-k8s.io/v1beta1/namespaces/default/sandboxes"
    ctr = {"name": "main", "image": "host"}
    if limits:
        ctr["resources"] = {"limits": limits}
    body = {"apiVersion": "agents.x-k8s.io/v1beta1", "kind": "Sandbox", "metadata": {"name": name},
            "spec": {"podTemplate": {"spec": {"containers": [ctr]}}}}
    t0 = time.perf_counter()
    r = s.post(base, json=body, timeout=30)
    r.raise_for_status()
    rv = r.json()["metadata"]["resourceVersion"]
    w = s.get(base, params={"watch": "true", "resourceVersion": rv,
                            "fieldSelector": f"metadata.name={name}"}, stream=True, timeout=30)
    try:
        for line in w.iter_lines():
            if not line:
                continue
            obj = json.loads(line)["object"]
            for c in (obj.get("status") or {}).get("conditions") or []:
                if c["type"] == "Ready" and c["status"] == "True":
                    return (time.perf_counter() - t0) * 1000
                if c["type"] == "Ready" and c["reason"] in ("ReconcilerError", "ImageNotSupported"):
                    raise RuntimeError(c["message"])
    finally:
        w.close()
    raise RuntimeError("watch ended before Ready")


def bare_runc(tmp, n):
    bundle = os.path.join(tmp, "bare")
    rootfs = os.path.join(bundle, "rootfs")
    os.makedirs(os.path.join(rootfs, "usr"))
    for link in ("bin", "lib", "lib64", "sbin"):
        if os.path.islink("/" + link):
            os.symlink(os.readlink("/" + link), os.path.join(rootfs, link))
    subprocess.run([RUNC, "spec", "--bundle", bundle], check=True)
    cfg = json.load(open(os.path.join(bundle, "config.json")))
    cfg["process"]["terminal"] = False
    cfg["process"]["args"] = ["/usr/bin/true"]
    cfg["mounts"].append({"destination": "/usr", "type": "bind", "source": "/usr",
                          "options": ["rbind", "ro"]})
    json.dump(cfg, open(os.path.join(bundle, "config.json"), "w"))
    root = os.path.join(tmp, "bare-runc")
    times = []
    for i in range(n):
        t0 = time.perf_counter()
        subprocess.run([RUNC, "--root", root, "run", "--bundle", bundle, f"bare{i}"], check=True,
                       stdin=subprocess.DEVNULL)
        times.append((time.perf_counter() - t0) * 1000)
    return times


def main():
    if os.geteuid() != 0 or not os.path.exists(RUNC):
        print("bench-local-sandbox: skipped (needs root and runc)")
        return 0
    tmp = tempfile.mkdtemp(prefix="asb-bench-", dir="/tmp")
    proc = None
    try:
        proc, url, s = start_server(tmp)
        create_to_ready(url, s, "warmup")
        # The first sandbox of a size makes its ext4 template (mke2fs): measured on its own.
        first = create_to_ready(url, s, "warmup-limited", LIMITS)
        ready, cgroup, limited = [], [], []
        kinds = [(ready, "bench", None), (cgroup, "bench-cg", CGROUP_LIMITS),
                 (limited, "bench-lim", LIMITS)]
        for i in range(N):
            for k in range(3):  # the order rotates: no kind always comes first or last
                out, prefix, limits = kinds[(i + k) % 3]
                out.append(create_to_ready(url, s, f"{prefix}-{i}", limits))
        bare = bare_runc(tmp, N)
        w = 54
        print(f"{'metric':<{w}} {'p50 ms':>8} {'p99 ms':>8} {'n':>4}")
        print(f"{'Sandbox create -> Ready (asb serve, runc, no limits)':<{w}} {pct(ready, 50):8.1f} {pct(ready, 99):8.1f} {N:>4}")
        print(f"{'  ... with memory 1Gi + cpu 2 limits':<{w}} {pct(cgroup, 50):8.1f} {pct(cgroup, 99):8.1f} {N:>4}")
        print(f"{'  ... with memory+cpu+ephemeral-storage 10Gi limits':<{w}} {pct(limited, 50):8.1f} {pct(limited, 99):8.1f} {N:>4}")
        print(f"{'  ... first 10Gi sandbox (mke2fs template, once)':<{w}} {first:8.1f} {'':>8} {1:>4}")
        print(f"{'bare runc run /usr/bin/true (baseline)':<{w}} {pct(bare, 50):8.1f} {pct(bare, 99):8.1f} {N:>4}")
        print(f"target: create -> Ready p50 under 100 ms; ratio to bare runc: "
              f"{pct(ready, 50) / pct(bare, 50):.2f}x (limits: {pct(limited, 50) / pct(bare, 50):.2f}x, "
              f"+{pct(limited, 50) - pct(ready, 50):.1f} ms)")
    finally:
        if proc:
            proc.terminate()
            proc.wait(timeout=30)
        bench_cleanup.cleanup_state(tmp, extra_runc_roots=[os.path.join(tmp, "bare-runc")])
    return 0


if __name__ == "__main__":
    sys.exit(main())
