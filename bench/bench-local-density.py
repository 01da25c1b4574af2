#!/usr/bin/python3
"""Local sandboxes: memory added per idle sandbox (issue 4: "memory added per idle sandbox over
100 sandboxes", target under 3 MiB). Creates N idle host-image Sandboxes through `asb serve`
(BENCH_SANDBOXES, default 100), waits until all are Ready, lets them settle, then measures:
  - container: the sum over the sandboxes' memory cgroups of memory.current (v2) or
    memory.usage_in_bytes (v1), i.e. what the kernel charges them (anon + page cache + kernel),
    and separately their anonymous memory (memory.stat anon / total_rss);
  - host side: the growth of `asb serve`'s RSS (there is no per-sandbox shim: runc --detach);
  - system: the drop of MemAvailable (/proc/meminfo) from before the first create.
Deletes every sandbox at the end, also on failure. Needs root and runc."""
import importlib.util
import glob
import os
import shutil
import subprocess
import sys
import tempfile
import time

import bench_cleanup

HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location("bench_local_sandbox",
                                               os.path.join(HERE, "bench-local-sandbox.py"))
bls = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bls)

RUNC = bls.RUNC
N = int(os.environ.get("BENCH_SANDBOXES", "100"))
TARGET_MIB = 3.0
READY_TIMEOUT = float(os.environ.get("BENCH_READY_TIMEOUT", "300"))
MIB = 1024 * 1024


def meminfo(key):
    for line in open("/proc/meminfo"):
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    return 0


def rss(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def drop_caches():
    subprocess.run(["sync"])
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
    except OSError:
        pass


def cgroup_dir(pid):
    """The memory cgroup directory of pid (v1 memory controller or the v2 unified one)."""
    v2 = None
    for line in open(f"/proc/{pid}/cgroup"):
        hid, ctrls, path = line.rstrip("\n").split(":", 2)
        if "memory" in ctrls.split(","):
            return os.path.join("/sys/fs/cgroup/memory", path.lstrip("/")), 1
        if hid == "0" and ctrls == "":
            v2 = os.path.join("/sys/fs/cgroup", path.lstrip("/"))
    return v2, 2


def cgroup_mem(pid):
    """(charged bytes, anonymous bytes) of the memory cgroup of pid."""
    d, v = cgroup_dir(pid)
    stat = {}
    for line in open(os.path.join(d, "memory.stat")):
        k, val = line.split()
        stat[k] = int(val)
    if v == 1:
        return int(open(os.path.join(d, "memory.usage_in_bytes")).read()), \
            stat.get("total_rss", stat.get("rss", 0))
    return int(open(os.path.join(d, "memory.current")).read()), stat.get("anon", 0)


def container_pids(state):
    root = os.path.join(state, "runc")
    out = subprocess.run([RUNC, "--root", root, "list", "--format", "json"], capture_output=True,
                         text=True)
    import json
    return {c["id"]: c["pid"] for c in json.loads(out.stdout or "null") or []
            if c.get("status") == "running"}


def all_ready(url, s, names):
    r = s.get(f"{url}/apis/agents.x-k8s.io/v1beta1/namespaces/default/sandboxes", timeout=60)
    r.raise_for_status()
    ready = 0
    for obj in r.json()["items"]:
        if obj["metadata"]["name"] not in names:
            continue
        for c in (obj.get("status") or {}).get("conditions") or []:
            if c["type"] == "Ready" and c["status"] == "True":
                ready += 1
            elif c["type"] == "Ready" and c["reason"] in ("ReconcilerError", "ImageNotSupported"):
                raise RuntimeError(f"{obj['metadata']['name']}: {c['message']}")
    return ready


def main():
    if os.geteuid() != 0 or not os.path.exists(RUNC):
        print("bench-local-density: skipped (needs root and runc)")
        return 0
    tmp = tempfile.mkdtemp(prefix="asb-dens-", dir="/tmp")
    proc = None
    base = None
    names = {f"idle-{i}" for i in range(N)}
    try:
        proc, url, s = bls.start_server(tmp)
        base = f"{url}/apis/agents.x-k8s.io/v1beta1/namespaces/default/sandboxes"
        time.sleep(0.5)
        drop_caches()
        avail0, serve0 = meminfo("MemAvailable"), rss(proc.pid)
        t0 = time.monotonic()
        for name in sorted(names):
            body = {"apiVersion": "agents.x-k8s.io/v1beta1", "kind": "Sandbox",
                    "metadata": {"name": name},
                    "spec": {"podTemplate": {"spec": {"containers": [{"name": "main",
                                                                       "image": "host"}]}}}}
            s.post(base, json=body, timeout=30).raise_for_status()
        while True:
            n = all_ready(url, s, names)
            if n == N:
                break
            if time.monotonic() - t0 > READY_TIMEOUT:
                raise RuntimeError(f"only {n}/{N} sandboxes Ready within {READY_TIMEOUT:.0f}s")
            time.sleep(0.2)
        t_ready = time.monotonic() - t0
        time.sleep(2.0)  # idle: let start-up work settle
        drop_caches()    # page cache is reclaimable: count what stays
        pids = container_pids(tmp)
        charged = anon = 0
        for pid in pids.values():
            c, a = cgroup_mem(pid)
            charged += c
            anon += a
        serve1 = rss(proc.pid)
        avail1 = meminfo("MemAvailable")
        host = max(0, serve1 - serve0)
        per = lambda b: b / MIB / N  # noqa: E731
        print(f"{N} idle host-image sandboxes, all Ready in {t_ready:.1f}s "
              f"({len(pids)} running containers)")
        print(f"{'metric':<52} {'total MiB':>10} {'MiB/sandbox':>12}")
        rows = [("container cgroups, charged (usage/current)", charged),
                ("  of which anonymous (rss/anon)", anon),
                ("host side: asb serve RSS growth", host),
                ("cgroups charged + host side", charged + host),
                ("system MemAvailable drop", max(0, avail0 - avail1))]
        for label, b in rows:
            print(f"{label:<52} {b / MIB:10.1f} {per(b):12.2f}")
        total = per(charged + host)
        verdict = "met" if total < TARGET_MIB else "MISSED"
        print(f"target: under {TARGET_MIB:.0f} MiB per idle sandbox (cgroups + host side): "
              f"{total:.2f} MiB, {verdict}")
        if total >= TARGET_MIB:
            dom = max(rows[1:3] + [("container page cache/kernel", charged - anon)],
                      key=lambda r: r[1])
            print(f"dominated by: {dom[0].strip()} ({per(dom[1]):.2f} MiB/sandbox)")
    finally:
        if base and proc and proc.poll() is None:
            for name in sorted(names):
                try:
                    s.delete(f"{base}/{name}", timeout=10)
                except Exception:  # noqa: BLE001 - cleanup goes on regardless
                    pass
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and container_pids(tmp):
                time.sleep(0.2)
        if proc:
            proc.terminate()
            proc.wait(timeout=30)
        bench_cleanup.cleanup_state(tmp)
    return 0


if __name__ == "__main__":
    sys.exit(main())
