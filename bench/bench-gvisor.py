#!/usr/bin/python3
"""runc beside gVisor (issue 30, section 7): the same `asb serve` runs host-image Sandboxes under
the default runtime (runc) and under `runtimeClassName: gvisor` (Debian's runsc: ptrace platform,
--network=none), taking turns in one rotation so that a load change on the machine moves both
alike. Measured per runtime:
  - Sandbox create -> Ready (Python client, watch), BENCH_SANDBOXES rounds (default 10);
  - Execute(`true`) over gRPC on one idle sandbox, BENCH_EXECUTES calls (default 100), each a new
    Start stream (what an agent's tool call does);
  - memory per idle sandbox, after the sandboxes settle: what the kernel charges the sandbox's
    memory cgroup (usage_in_bytes on v1, memory.current on v2) and the PSS of the host processes
    in it (runc: sandboxd and its children; runsc: the Sentry and its gofer).
Prints a table with p50/p99 in milliseconds (memory in MiB). Needs root, runc and runsc; deletes
every sandbox at the end, also on failure."""
import json
import os
import shutil
import sys
import tempfile
import time

import bench_cleanup
import bench_server
from bench_libasb import pct

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
from grpc_helpers import Client  # noqa: E402

BUILD = os.environ.get("ASB_BUILD", os.path.join(ROOT, "build"))
N = int(os.environ.get("BENCH_SANDBOXES", "10"))
N_EXEC = int(os.environ.get("BENCH_EXECUTES", "100"))
SETTLE_S = 3.0
BASE = "/apis/agents.x-k8s.io/v1beta1/namespaces/default/sandboxes"


def create_to_ready(url, s, name, runtime_class):
    """Create -> Ready in ms; returns (ms, uid)."""
    spec = {"containers": [{"name": "main", "image": "host"}]}
    if runtime_class:
        spec["runtimeClassName"] = runtime_class
    body = {"apiVersion": "agents.x-k8s.io/v1beta1", "kind": "Sandbox", "metadata": {"name": name},
            "spec": {"podTemplate": {"spec": spec}}}
    t0 = time.perf_counter()
    r = s.post(url + BASE, json=body, timeout=60)
    r.raise_for_status()
    meta = r.json()["metadata"]
    w = s.get(url + BASE, params={"watch": "true", "resourceVersion": meta["resourceVersion"],
                                  "fieldSelector": f"metadata.name={name}"}, stream=True,
              timeout=120)
    try:
        for line in w.iter_lines():
            if not line:
                continue
            obj = json.loads(line)["object"]
            for c in (obj.get("status") or {}).get("conditions") or []:
                if c["type"] == "Ready" and c["status"] == "True":
                    return (time.perf_counter() - t0) * 1000, meta["uid"]
                if c["type"] == "Ready" and c["reason"] == "ReconcilerError":
                    raise RuntimeError(c["message"])
    finally:
        w.close()
    raise RuntimeError("watch ended before Ready")


def executes(state, uid, n):
    """n Execute(`true`) calls in ms, each checked."""
    c = Client(f"unix:{os.path.join(state, 'run', uid, 'grpc.sock')}")
    out = []
    try:
        c.execute(["true"], timeout=30)  # the first call sets up the channel
        for _ in range(n):
            t0 = time.perf_counter()
            r = c.execute(["true"], timeout=30)
            out.append((time.perf_counter() - t0) * 1000)
            if r.exit_code != 0:
                raise RuntimeError(f"Execute true exited {r.exit_code}")
    finally:
        c.close()
    return out


def cgroup_dir(uid):
    v1 = f"/sys/fs/cgroup/memory/asb/{uid}"
    return (v1, 1) if os.path.isdir(v1) else (f"/sys/fs/cgroup/asb/{uid}", 2)


def pss_kib(pid):
    try:
        for line in open(f"/proc/{pid}/smaps_rollup"):
            if line.startswith("Pss:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def memory(uid):
    """(cgroup charge MiB, PSS MiB of its processes) of one sandbox."""
    d, v = cgroup_dir(uid)
    charged = int(open(os.path.join(d, "memory.usage_in_bytes" if v == 1 else "memory.current"))
                  .read())
    pids = open(os.path.join(d, "cgroup.procs")).read().split()
    return charged / 2**20, sum(pss_kib(p) for p in pids) / 1024


def main():
    runsc = shutil.which("runsc")
    if os.geteuid() != 0 or not os.path.exists(bench_server.RUNC) or not runsc:
        print("bench-gvisor: skipped (needs root, runc and runsc; scripts/deps.sh installs them)")
        return 0
    tmp = tempfile.mkdtemp(prefix="asb-bench-gv-", dir="/tmp")
    proc = None
    try:
        proc, url, s = bench_server.start_server(tmp, BUILD, {
            "ASB_NETWORK": "none", "ASB_DEFAULT_MEMORY": "0", "ASB_DEFAULT_CPU": "0",
            "ASB_DEFAULT_EPHEMERAL_STORAGE": "0"})
        kinds = {"runc": None, "gVisor (runsc)": "gvisor"}
        ready = {k: [] for k in kinds}
        uids = {k: [] for k in kinds}
        for k, cls in kinds.items():  # warm-up: the shared skeleton, runsc's first start
            uids[k].append(create_to_ready(url, s, f"warm-{cls or 'runc'}", cls)[1])
        for i in range(N):
            order = list(kinds.items())
            for k, cls in order[i % 2:] + order[:i % 2]:
                ms, uid = create_to_ready(url, s, f"{cls or 'runc'}-{i}", cls)
                ready[k].append(ms)
                uids[k].append(uid)
        time.sleep(SETTLE_S)
        mem = {k: [memory(u) for u in uids[k]] for k in kinds}
        ex = {k: [] for k in kinds}
        for j in range(4):  # alternate in four slices
            for k in kinds:
                ex[k] += executes(tmp, uids[k][0], N_EXEC // 4)
        w = 44
        print(f"{'metric':<{w}} {'runc':>16} {'gVisor (runsc)':>16} {'n':>5}")

        def row(label, f, n):
            cells = [f(k) for k in kinds]
            print(f"{label:<{w}} " + " ".join(f"{c:>16}" for c in cells) + f" {n:>5}")

        row("create -> Ready p50 / p99 (ms)",
            lambda k: f"{pct(ready[k], 50):.0f} / {pct(ready[k], 99):.0f}", N)
        row("Execute(true) p50 / p99 (ms)",
            lambda k: f"{pct(ex[k], 50):.1f} / {pct(ex[k], 99):.1f}", len(ex["runc"]))
        row("idle sandbox: cgroup charge p50 (MiB)",
            lambda k: f"{pct([m[0] for m in mem[k]], 50):.1f}", len(mem["runc"]))
        row("idle sandbox: PSS of its processes p50 (MiB)",
            lambda k: f"{pct([m[1] for m in mem[k]], 50):.1f}", len(mem["runc"]))
        r50, g50 = pct(ready["runc"], 50), pct(ready["gVisor (runsc)"], 50)
        e50, ge50 = pct(ex["runc"], 50), pct(ex["gVisor (runsc)"], 50)
        print(f"gVisor / runc: create -> Ready {g50 / r50:.1f}x, Execute {ge50 / e50:.1f}x "
              f"(runsc {os.path.realpath(runsc)}, ptrace platform, --network=none)")
        print(f"load average during the run: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    finally:
        if proc:
            proc.terminate()
            proc.wait(timeout=60)
        bench_cleanup.cleanup_state(tmp)
    return 0


if __name__ == "__main__":
    sys.exit(main())
