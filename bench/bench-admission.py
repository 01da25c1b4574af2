#!/usr/bin/python3
"""What admission costs (issue 31): `asb serve` (no runtime: objects are stored, not run) takes
BENCH_CREATES creates (default 300) of each of three Sandboxes, taking turns so that a load change
on the machine moves all rows alike:
  - baseline: GET /version (no admission, no store);
  - minimal: one container, name and image;
  - full: the pod spec an agent platform writes (two containers with resources, env, ports,
    probes, a securityContext, volume mounts; tolerations, affinity, volumes), which the embedded
    Kubernetes schema walks at every depth;
  - full, dryRun=All: the same checks, nothing stored.
Prints p50/p99 of the round trip (ms, Python client on loopback) and asb serve's CPU per request
(its utime+stime over the run, µs). BENCH_BUILD picks another build (default build/)."""
import os
import shutil
import sys
import tempfile
import time

import bench_server
from bench_libasb import pct

N = int(os.environ.get("BENCH_CREATES", "300"))
BASE = "/apis/agents.x-k8s.io/v1beta1/namespaces/default/sandboxes"
CLK = os.sysconf("SC_CLK_TCK")


def container(name):
    return {"name": name, "image": "host", "command": ["python3", "-m", "http.server"],
            "args": ["8000"], "workingDir": "/workspace",
            "env": [{"name": f"VAR_{i}", "value": str(i)} for i in range(10)],
            "ports": [{"containerPort": 8000, "name": "http", "protocol": "TCP"}],
            "resources": {"limits": {"memory": "512Mi", "cpu": "500m"},
                          "requests": {"memory": "256Mi", "cpu": "250m"}},
            "readinessProbe": {"httpGet": {"path": "/", "port": "http"}, "periodSeconds": 5},
            "securityContext": {"runAsUser": 1000, "runAsGroup": 1000,
                                "allowPrivilegeEscalation": False,
                                "capabilities": {"drop": ["ALL"]}},
            "volumeMounts": [{"name": "data", "mountPath": "/data"}]}


def body(name, kind):
    if kind == "minimal":
        pod = {"containers": [{"name": "main", "image": "host"}]}
    else:
        pod = {"containers": [container("main"), container("side")],
               "volumes": [{"name": "data", "emptyDir": {"sizeLimit": "1Gi"}}],
               "tolerations": [{"key": "k", "operator": "Exists", "effect": "NoSchedule"}],
               "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                   "nodeSelectorTerms": [{"matchExpressions": [
                       {"key": "zone", "operator": "In", "values": ["a", "b"]}]}]}}}}
    return {"apiVersion": "agents.x-k8s.io/v1beta1", "kind": "Sandbox",
            "metadata": {"name": name, "labels": {"app": "bench"}},
            "spec": {"podTemplate": {"metadata": {"labels": {"app": "bench"}}, "spec": pod}}}


def cpu_ticks(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def main():
    build = os.environ.get("BENCH_BUILD")
    state = tempfile.mkdtemp(prefix="asb-bench-admission-")
    proc = None
    try:
        proc, url, s = bench_server.start_server(
            state, build=build, env={"ASB_RUNTIME": "none", "ASB_NETWORK": "none"})
        rows = {"GET /version (baseline)": [], "create, minimal pod": [], "create, full pod": [],
                "create, full pod, dryRun=All": []}
        ticks = dict.fromkeys(rows, 0)
        for i in range(N):
            for row in rows:
                if row.startswith("GET"):
                    req = lambda: s.get(url + "/version", timeout=30)  # noqa: E731
                else:
                    kind = "minimal" if "minimal" in row else "full"
                    q = "?dryRun=All" if "dryRun" in row else ""
                    b = body(f"{kind[0]}{'d' if q else ''}-{i}", kind)
                    req = lambda: s.post(url + BASE + q, json=b, timeout=30)  # noqa: E731
                c0 = cpu_ticks(proc.pid)
                t0 = time.perf_counter()
                r = req()
                rows[row].append((time.perf_counter() - t0) * 1000)
                ticks[row] += cpu_ticks(proc.pid) - c0
                if r.status_code not in (200, 201):
                    sys.exit(f"{row}: {r.status_code} {r.text}")
        print(f"{'request':<32} {'p50 ms':>8} {'p99 ms':>8} {'server CPU µs':>14}   (n={N} each)")
        for row, lat in rows.items():
            cpu_us = ticks[row] / CLK * 1e6 / N
            print(f"{row:<32} {pct(lat, 50):>8.2f} {pct(lat, 99):>8.2f} {cpu_us:>14.0f}")
    finally:
        if proc:
            proc.terminate()
            proc.wait(timeout=30)
        shutil.rmtree(state, ignore_errors=True)


if __name__ == "__main__":
    main()
