#!/usr/bin/python3
"""Local sandboxes: memory added per idle sandbox (issue 4: "memory added per idle sandbox over
100 sandboxes", target under 3 MiB). Creates N idle host-image Sandboxes through `asb serve`
(BENCH_SANDBOXES, default 100), waits until all are Ready, lets them settle, then measures:
  - container: the sum over the sandboxes' memory cgroups of memory.current (v2) or
    memory.usage_in_bytes (v1), i.e. what the kernel charges them (anon + page cache + kernel),
    and separately their anonymous memory (memory.stat anon / total_rss);
  - host side: the growth of `asb serve`'s RSS (there is no per-sandbox shim: runc --detach);
  - system: the drop of MemAvailable (/proc/meminfo) from before the first create.
Then issue 16's deletion row: the server gets BENCH_DELETE sandboxes in all (default 200, the
missing ones created untimed), every one is deleted at once (one DELETE each, back to back) and
the clock stops when no object is listed and no container is left in `runc list` ("deleting 200
sandboxes until all containers are gone", target under 10 s). Baselines in the same run: the
runtime alone (the same number of bare `runc run --detach` containers removed by `runc delete
--force`, 4 at a time like the server's teardown workers) and, with BENCH_BASELINE_BUILD=<a build
dir of another tree>, the same deletion through that build's `asb serve`.
Deletes every sandbox at the end, also on failure. Needs root and runc."""
import importlib.util
import os
import subprocess
import sys
import tempfile
import time

import bench_cleanup
import bench_server
from concurrent.futures import ThreadPoolExecutor
from bench_issue16 import row as issue16_row

HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location("bench_local_sandbox",
                                               os.path.join(HERE, "bench-local-sandbox.py"))
bls = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bls)

RUNC = bls.RUNC
N = int(os.environ.get("BENCH_SANDBOXES", "100"))
N_DELETE = int(os.environ.get("BENCH_DELETE", "200"))
DELETE_TARGET_S = 10.0
BASELINE_BUILD = os.environ.get("BENCH_BASELINE_BUILD")
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


def create(base, s, name):
    body = {"apiVersion": "agents.x-k8s.io/v1beta1", "kind": "Sandbox",
            "metadata": {"name": name},
            "spec": {"podTemplate": {"spec": {"containers": [{"name": "main", "image": "host"}]}}}}
    s.post(base, json=body, timeout=30).raise_for_status()


def wait_ready(url, s, names):
    t0 = time.monotonic()
    while True:
        n = all_ready(url, s, names)
        if n == len(names):
            return time.monotonic() - t0
        if time.monotonic() - t0 > READY_TIMEOUT:
            raise RuntimeError(f"only {n}/{len(names)} sandboxes Ready within {READY_TIMEOUT:.0f}s")
        time.sleep(0.2)


def timed_delete(url, s, state, names):
    """Seconds from the first DELETE until every object is gone (a DELETED event each, on a watch
    opened before: polling a list of 200 objects would take the CPU the teardowns need) and runc
    lists no container."""
    import json
    import requests
    base = f"{url}/apis/agents.x-k8s.io/v1beta1/namespaces/default/sandboxes"
    r = s.get(base, timeout=60)
    r.raise_for_status()
    w = requests.get(base, params={"watch": "true",
                                   "resourceVersion": r.json()["metadata"]["resourceVersion"]},
                     headers=s.headers, stream=True, timeout=READY_TIMEOUT)
    left = set(names) & {o["metadata"]["name"] for o in r.json()["items"]}
    try:
        t0 = time.monotonic()
        for name in sorted(names):
            r = s.delete(f"{base}/{name}", timeout=30)
            if r.status_code not in (200, 202, 404):
                r.raise_for_status()
        for line in w.iter_lines():
            if line:
                ev = json.loads(line)
                if ev["type"] == "DELETED":
                    left.discard(ev["object"]["metadata"]["name"])
            if not left:
                break
            if time.monotonic() - t0 > READY_TIMEOUT:
                raise RuntimeError(f"sandboxes left {READY_TIMEOUT:.0f}s after their deletion")
    finally:
        w.close()
    while container_pids(state):
        if time.monotonic() - t0 > READY_TIMEOUT:
            raise RuntimeError(f"containers left {READY_TIMEOUT:.0f}s after their deletion")
        time.sleep(0.05)
    return time.monotonic() - t0


def teardown_profile(state):
    """p50 of each timing field of the server's `sandbox torn down` log lines ("" when none)."""
    import re
    fields = {}
    for line in open(os.path.join(state, "serve.log"), errors="replace"):
        if "sandbox torn down" in line:
            for k, v in re.findall(r"(\w+_ms)=([0-9.]+)", line):
                fields.setdefault(k, []).append(float(v))
    return ", ".join(f"{k} {sorted(v)[len(v) // 2]:.1f}" for k, v in fields.items())


def delete_with(build, n):
    """Creates n sandboxes through build's `asb serve` (untimed) and times their deletion."""
    tmp = tempfile.mkdtemp(prefix="asb-del-", dir="/tmp")
    proc = None
    try:
        old = bls.BUILD
        bls.BUILD = build
        try:
            proc, url, s = bls.start_server(tmp)
        finally:
            bls.BUILD = old
        base = f"{url}/apis/agents.x-k8s.io/v1beta1/namespaces/default/sandboxes"
        names = {f"del-{i}" for i in range(n)}
        for name in sorted(names):
            create(base, s, name)
        wait_ready(url, s, names)
        t = timed_delete(url, s, tmp, names)
        print(f"  baseline build, per teardown p50 ms: {teardown_profile(tmp)}")
        return t
    finally:
        if proc:
            proc.terminate()
            proc.wait(timeout=60)
        bench_cleanup.cleanup_state(tmp)


def bare_runc_delete(n, workers=4):
    """n bare `runc run --detach` containers (a sleeping /usr/bin/sleep on a read-only /usr),
    then the seconds `runc delete --force` of all of them takes, `workers` at a time."""
    tmp = tempfile.mkdtemp(prefix="asb-bdel-", dir="/tmp")
    root = os.path.join(tmp, "runc")
    try:
        bundle = bench_server.bare_runc_bundle(tmp, ["/usr/bin/sleep", "infinity"])
        for i in range(n):
            subprocess.run([RUNC, "--root", root, "run", "--detach", "--bundle", bundle,
                            f"bare{i}"], check=True, stdin=subprocess.DEVNULL,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        t0 = time.monotonic()
        with ThreadPoolExecutor(workers) as ex:
            list(ex.map(lambda i: subprocess.run([RUNC, "--root", root, "delete", "--force",
                                                  f"bare{i}"], check=True), range(n)))
        return time.monotonic() - t0
    finally:
        bench_cleanup.cleanup_state(tmp, extra_runc_roots=[root])


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
            create(base, s, name)
        wait_ready(url, s, names)
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
        if N_DELETE > 0:
            more = {f"idle-{i}" for i in range(N, N_DELETE)}
            for name in sorted(more):
                create(base, s, name)
            names |= more
            wait_ready(url, s, names)
            t_del = timed_delete(url, s, tmp, names)
            print(f"  this build, per teardown p50 ms: {teardown_profile(tmp)}")
            bare = bare_runc_delete(len(names))
            other = delete_with(BASELINE_BUILD, len(names)) if BASELINE_BUILD else None
            verdict = "met" if t_del < DELETE_TARGET_S else "MISSED"
            print(f"delete {len(names)} sandboxes until all containers are gone: {t_del:.2f} s "
                  f"(target under {DELETE_TARGET_S:.0f} s: {verdict}); baselines in the same run: "
                  f"bare runc delete --force x{len(names)}, 4 at a time {bare:.2f} s"
                  + (f", {BASELINE_BUILD} {other:.2f} s" if other is not None else ""))
            issue16_row("delete-200", f"{t_del:.2f} s ({len(names)} sandboxes)",
                        f"bare runc delete --force, 4 at a time: {bare:.2f} s"
                        + (f"; baseline build {other:.2f} s" if other is not None else ""),
                        ok=t_del < DELETE_TARGET_S)
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
