#!/usr/bin/python3
"""Local sandboxes: Sandbox create -> Ready through `asb serve` (runc container with sandboxd as
PID 1, Ready = sandboxd answers health on its unix socket), next to a bare `runc run` of a
trivial container (/usr/bin/true on a read-only bind of the host's /usr) in the same run.
A second server runs with `ASB_USERNS_RANGE=off` (host ids: the configuration before user
namespaces) so that today's secure default is compared with it in the same run. Sandboxes
alternate between no limits at all (the servers run with every default off) and the
built-in defaults set explicitly (memory 1Gi, cpu 2, ephemeral-storage 10Gi: the last one is a
loop-mounted ext4 image holding workspace, home and /tmp), so the cost of the limits is measured
side by side. Needs root and runc; prints a table with p50/p99 in milliseconds.

Then issue 16's rows, each with its target and a baseline of the same run:
  - "cold create -> Ready vs bare runc": the user-namespace server's create -> Ready p50, as
    libasb's create and watch see it (bench/claim-bench-client.c `cold`), over the bare `runc run`
    p50 (target <= 1.15x); the Python client's figure is printed beside it; with
    BENCH_BASELINE_BUILD=<build dir of another tree> a third server from that build is rotated in
    with the others and its ratio printed beside;
  - "cold create -> first Execute": the same libasb samples' create -> Ready -> Execute(`true`)
    result, against each sample's own create -> Ready plus the spawn floor (posix_spawn + waitpid
    of /bin/true, measured after it) + 5 ms (the p50 of the per-sample differences).
Extra baselines in the same rotation (bench_own_bundle.py): a bare `runc run` of *our own* bundle
(the user-namespace server's config.json with /usr/bin/true as its process), and the floor of
create -> Ready for it: `runc run --detach` of that bundle with its own process, sandboxd, until
sandboxd answers the health request asb serve would send. So the table shows how much of
create -> Ready is runc's and sandboxd's cost for this container and how much is asb serve's.
Every kind takes its turn in one rotation (BENCH_SANDBOXES rounds, default 10)."""
import json
import os
import subprocess
import sys
import tempfile
import time

import bench_cleanup
import bench_server
from bench_own_bundle import OwnBundleRunner, make_bundle
from bench_libasb import pct
from bench_issue16 import row as issue16_row

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("ASB_BUILD", os.path.join(ROOT, "build"))
RUNC = bench_server.RUNC
N = int(os.environ.get("BENCH_SANDBOXES", "10"))
BASELINE_BUILD = os.environ.get("BENCH_BASELINE_BUILD")
READY_RATIO_TARGET = 1.15
FIRST_EXEC_SLACK_MS = 5.0


def start_server(state, network="none", userns=True, build=None):
    env = {"ASB_NETWORK": network, "ASB_DEFAULT_MEMORY": "0", "ASB_DEFAULT_CPU": "0",
           "ASB_DEFAULT_EPHEMERAL_STORAGE": "0"}
    if not userns:
        env["ASB_USERNS_RANGE"] = "off"
    return bench_server.start_server(state, build or BUILD, env)


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


def bare_runc_bundle(tmp):
    """The bare baseline's bundle: /usr/bin/true on a read-only bind of the host's /usr."""
    return bench_server.bare_runc_bundle(tmp, ["/usr/bin/true"])


def bare_runc_once(tmp, bundle, i):
    """One bare `runc run` in ms."""
    t0 = time.perf_counter()
    subprocess.run([RUNC, "--root", os.path.join(tmp, "bare-runc"), "run", "--bundle", bundle,
                    f"bare{i}"], check=True, stdin=subprocess.DEVNULL)
    return (time.perf_counter() - t0) * 1000


def bare_runc(tmp, n):
    bundle = bare_runc_bundle(tmp)
    return [bare_runc_once(tmp, bundle, i) for i in range(n)]


def spawn_floor_ms():
    """posix_spawn + waitpid of /bin/true: the floor absolute latencies are stated against."""
    t0 = time.perf_counter()
    pid = os.posix_spawn("/bin/true", ["/bin/true"], os.environ)
    os.waitpid(pid, 0)
    return (time.perf_counter() - t0) * 1000


class ColdFirstExecute:
    """libasb create -> Ready -> first Execute result on the server of state (bench/
    claim-bench-client.c `cold`, the SDK's own create and watch), each followed by a spawn floor
    sample: once() adds to the lists first (ms), ready (create -> Ready ms) and floor (ms)."""

    def __init__(self, state):
        from bench_libasb import build_libasb_client
        self.client = os.path.join(BUILD, "bench", "claim-bench-client")
        build_libasb_client("claim-bench-client.c", self.client, ("-ljansson", "-lpthread"))
        self.env = {**os.environ, "ASB_STATE_DIR": state}
        self.env.pop("ASB_SERVER", None)
        self.env.pop("ASB_TOKEN", None)
        self.first, self.ready, self.floor = [], [], []

    def once(self):
        out = subprocess.run([self.client, "cold", "1"], capture_output=True, text=True,
                             env=self.env, timeout=600)
        if out.returncode != 0:
            raise RuntimeError(f"claim-bench-client cold: {out.stderr}")
        total_us, ready_us = out.stdout.split()[:2]
        self.first.append(int(total_us) / 1000)
        self.ready.append(int(ready_us) / 1000)
        self.floor.append(spawn_floor_ms())


def start_profile(state, prefix):
    """p50 of each timing field of the server's `sandbox container started` lines for the
    sandboxes named prefix-N (the start worker's own split: prepare, bundle, runc)."""
    import re
    fields = {}
    for line in open(os.path.join(state, "serve.log"), errors="replace"):
        if "sandbox container started" in line and re.search(rf"\b{prefix}-[0-9]+\b", line):
            for k, v in re.findall(r"(\w+_ms)=([0-9.]+)", line):
                fields.setdefault(k, []).append(float(v))
    return ", ".join(f"{k} {sorted(v)[len(v) // 2]:.1f}" for k, v in fields.items())


def main():
    if os.geteuid() != 0 or not os.path.exists(RUNC):
        print("bench-local-sandbox: skipped (needs root and runc)")
        return 0
    tmp = tempfile.mkdtemp(prefix="asb-bench-", dir="/tmp")
    old_state = os.path.join(tmp, "no-userns")
    os.makedirs(old_state)
    base_state = os.path.join(tmp, "baseline")
    os.makedirs(base_state)
    proc = old_proc = base_proc = own = None
    try:
        # Two servers: today's secure default (a user namespace per sandbox) and the configuration
        # before it (host ids), each measured with no limits; limits are per sandbox.
        proc, url, s = start_server(tmp)
        old_proc, old_url, old_s = start_server(old_state, userns=False)
        create_to_ready(url, s, "warmup")
        create_to_ready(old_url, old_s, "warmup")
        warm = s.get(f"{url}/apis/agents.x-k8s.io/v1beta1/namespaces/default/sandboxes/warmup",
                     timeout=10).json()
        uid = warm["metadata"]["uid"]
        own = OwnBundleRunner(RUNC, os.path.join(tmp, "own-runc"),
                              *make_bundle(tmp, uid, os.path.join(tmp, "own-bundle")),
                              make_bundle(tmp, uid, os.path.join(tmp, "own-bundle-sandboxd"),
                                          process="sandboxd")[0])
        # The first sandbox of a size makes its ext4 template (mke2fs): measured on its own.
        first = create_to_ready(url, s, "warmup-limited", LIMITS)
        before, ready, cgroup, limited, baseline, bare, own_bare, own_health = ([] for _ in
                                                                               range(8))
        bundle = bare_runc_bundle(tmp)
        kinds = [(before, old_url, old_s, "bench-old", None), (ready, url, s, "bench", None),
                 (cgroup, url, s, "bench-cg", CGROUP_LIMITS),
                 (limited, url, s, "bench-lim", LIMITS)]
        if BASELINE_BUILD:
            base_proc, base_url, base_s = start_server(base_state, build=BASELINE_BUILD)
            create_to_ready(base_url, base_s, "warmup")
            kinds.append((baseline, base_url, base_s, "bench-base", None))
        # The bare baseline takes its turn in the rotation, so a load change on the machine
        # moves both sides of the ratio alike.
        kinds.append((bare, None, None, "bare", None))
        kinds.append((own_bare, None, None, "own", None))
        kinds.append((own_health, None, None, "own-health", None))
        cold = ColdFirstExecute(tmp)
        kinds.append((None, None, None, "libasb", None))
        for i in range(N):
            for k in range(len(kinds)):  # the order rotates: no kind always comes first or last
                out, u, sess, prefix, limits = kinds[(i + k) % len(kinds)]
                if prefix == "own":
                    out.append(own.run(i))
                elif prefix == "own-health":
                    out.append(own.health(i))
                elif prefix == "libasb":
                    cold.once()
                elif u is None:
                    out.append(bare_runc_once(tmp, bundle, i))
                else:
                    out.append(create_to_ready(u, sess, f"{prefix}-{i}", limits))
        first_exec, first_ready, floor = cold.first, cold.ready, cold.floor
        w = 58
        rows = [
            ("Sandbox create -> Ready, host ids, no limits (before)", before, N),
            ("Sandbox create -> Ready, user namespace, no limits", ready, N),
            ("  ... with memory 1Gi + cpu 2 limits", cgroup, N),
            ("  ... with memory+cpu+ephemeral-storage 10Gi (default)", limited, N),
            ("bare runc run /usr/bin/true (baseline)", bare, N),
            ("bare runc run of our own bundle, /usr/bin/true (baseline)", own_bare, N),
            ("bare runc run --detach of our own bundle -> sandboxd health", own_health, N),
        ]
        if baseline:
            rows.insert(2, (f"  ... the same, {BASELINE_BUILD} (baseline build)", baseline, N))
        rows += [("cold create -> first Execute (libasb)", first_exec, N),
                 ("  ... its create -> Ready (libasb)", first_ready, N),
                 ("spawn floor (posix_spawn + waitpid /bin/true)", floor, N)]
        print(f"{'metric':<{w}} {'p50 ms':>8} {'p99 ms':>8} {'n':>4}")
        for label, v, n in rows:
            print(f"{label:<{w}} {pct(v, 50):8.1f} {pct(v, 99):8.1f} {n:>4}")
        print(f"{'  ... first 10Gi sandbox (mke2fs template, once)':<{w}} {first:8.1f} {'':>8} {1:>4}")
        print(f"target: create -> Ready p50 under 100 ms; ratio to bare runc: before "
              f"{pct(before, 50) / pct(bare, 50):.2f}x, user namespace {pct(ready, 50) / pct(bare, 50):.2f}x, "
              f"secure default (user namespace + limits) {pct(limited, 50) / pct(bare, 50):.2f}x "
              f"(+{pct(limited, 50) - pct(before, 50):.1f} ms over before)")
        # The row is the SDK's create -> Ready (libasb, as agents and `asb` use it); the Python
        # client's (requests, its JSON, a second connection for the watch) is printed beside it.
        sdk, bare50, ready_floor = pct(first_ready, 50), pct(bare, 50), pct(own_health, 50)
        ratio = sdk / bare50
        print(f"cold create -> Ready vs bare runc: {ratio:.2f}x ({sdk:.1f} vs {bare50:.1f} ms p50, "
              f"libasb; target <= {READY_RATIO_TARGET:.2f}x: "
              f"{'met' if ratio <= READY_RATIO_TARGET else 'MISSED'}); through Python's requests "
              f"{pct(ready, 50) / bare50:.2f}x ({pct(ready, 50):.1f} ms)"
              + (f"; baseline build {pct(baseline, 50) / bare50:.2f}x "
                 f"({pct(baseline, 50):.1f} ms, Python)" if baseline else ""))
        print(f"  ... bare runc run of our own bundle: {pct(own_bare, 50):.1f} ms p50: runc's own "
              f"cost for this container is {pct(own_bare, 50) / bare50:.2f}x the bare one")
        print(f"  ... the floor of create -> Ready for this container, runc alone starting it until "
              f"sandboxd answers health: {ready_floor:.1f} ms p50 = {ready_floor / bare50:.2f}x "
              f"the bare run; create -> Ready is {sdk / ready_floor:.2f}x that floor "
              f"(+{sdk - ready_floor:.1f} ms: asb serve's preparation, commits and API)")
        issue16_row("cold-vs-runc", f"{ratio:.2f}x ({sdk:.1f} ms p50, libasb)",
                    f"bare runc run {bare50:.1f} ms; of our own bundle {pct(own_bare, 50):.1f} ms; "
                    f"its floor (runc + sandboxd health) {ready_floor:.1f} ms = "
                    f"{ready_floor / bare50:.2f}x"
                    + (f"; baseline build {pct(baseline, 50) / bare50:.2f}x" if baseline else ""),
                    ok=ratio <= READY_RATIO_TARGET)
        # Paired: each sample's own create -> Ready is its baseline (the machine's load moves
        # both alike), so the comparison is on the per-sample difference.
        after_ready = [f - r for f, r in zip(first_exec, first_ready)]
        bound = pct(floor, 50) + FIRST_EXEC_SLACK_MS
        print(f"cold create -> first Execute: {pct(first_exec, 50):.1f} ms p50, its own create -> "
              f"Ready + {pct(after_ready, 50):.2f} ms p50 (p99 {pct(after_ready, 99):.2f}); target "
              f"<= create -> Ready + floor {pct(floor, 50):.2f} + {FIRST_EXEC_SLACK_MS:.0f} ms = "
              f"+{bound:.2f} ms: {'met' if pct(after_ready, 50) <= bound else 'MISSED'}")
        print(f"start worker p50, user namespace: {start_profile(tmp, 'bench')}")
        if baseline:
            print(f"start worker p50, baseline build: {start_profile(base_state, 'bench-base')}")
        print(f"load average during the run: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    finally:
        if own:
            own.close()
        for p in (proc, old_proc, base_proc):
            if p:
                p.terminate()
                p.wait(timeout=30)
        bench_cleanup.cleanup_state(old_state)
        bench_cleanup.cleanup_state(base_state)
        bench_cleanup.cleanup_state(tmp, extra_runc_roots=[os.path.join(tmp, "bare-runc"),
                                                         os.path.join(tmp, "own-runc")])
    return 0


if __name__ == "__main__":
    sys.exit(main())
