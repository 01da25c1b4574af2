#!/usr/bin/env python3
"""Sandbox networking (docs/network.md), same run, same machine:
- Sandbox create -> Ready with networking prepared ahead (the default), with networking made at
  start (ASB_NET_PREPARED=off: the baseline) and without networking (`--network none`); the
  three servers run at once and their creates alternate, so load hits them alike. Networking's
  addition is the median of the paired differences to `--network none` (target <= 15 ms);
- a warm pool's refill after a burst of claims with bridge networking, prepared ahead and not
  (target >= 15 sandboxes/s);
- TCP throughput from a sandbox to a test host (through veth, bridge, nft filter and NAT) next to
  host -> test host (one veth, no filter).
Everything runs inside a private network namespace (the test lab of tests/integration/netpol_lab.py),
so the machine's own network is never touched."""
import glob
import statistics
import time
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import bench_cleanup  # noqa: E402
from bench_issue16 import row as issue16_row  # noqa: E402

BUILD = os.environ.get("ASB_BUILD", os.path.join(ROOT, "build"))
RUNC = shutil.which("runc") or "/usr/sbin/runc"
N = int(os.environ.get("BENCH_NET_SANDBOXES", "10"))
MIB = int(os.environ.get("BENCH_NET_MIB", "256"))
POOL = int(os.environ.get("BENCH_NET_POOL", "10"))
ROUNDS = int(os.environ.get("BENCH_NET_ROUNDS", "2"))
EXT = "extensions.agents.x-k8s.io"
ADD_TARGET_MS = 15.0
REFILL_TARGET = 15.0

SINK = r"""
import socket, threading
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", 9000)); s.listen(8)
print("ready", flush=True)
def drain(c):
    while c.recv(1 << 20):
        pass
    c.close()
while True:
    c, _ = s.accept()
    threading.Thread(target=drain, args=(c,), daemon=True).start()
"""

SEND = r"""
import socket, sys, time
total = int(sys.argv[2]) << 20
buf = b"x" * (1 << 20)
s = socket.create_connection((sys.argv[1], 9000), timeout=30)
t0 = time.perf_counter()
sent = 0
while sent < total:
    s.sendall(buf)
    sent += len(buf)
s.shutdown(socket.SHUT_WR)
s.recv(1)
print(f"{total / (1 << 20) / (time.perf_counter() - t0):.0f}")
"""


def main():
    if os.geteuid() != 0 or not os.path.exists(RUNC) or not shutil.which("nft"):
        print("bench-network: skipped (needs root, runc and nft)")
        return 0
    import netpol_lab
    import importlib.util
    spec = importlib.util.spec_from_file_location("bls", os.path.join(ROOT, "bench", "bench-local-sandbox.py"))
    bls = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bls)

    lab = netpol_lab.Lab()
    dirs, procs = [], []
    try:
        pub = lab.add_host("pub", "203.0.113.10", "203.0.113.1")
        lab._spawn(pub, SINK)
        servers = {}
        for mode, network, prepared in (("none", "none", "off"), ("prepared", "bridge", None),
                                        ("made", "bridge", "off")):
            d = tempfile.mkdtemp(prefix="asb-bench-net-", dir="/tmp")
            dirs.append(d)
            proc, url, s = start(bls, d, network, prepared)
            procs.append(proc)
            servers[mode] = (d, url, s)
            bls.create_to_ready(url, s, "warmup")
        results = {m: [] for m in servers}
        for i in range(N):
            for m, (d, url, s) in servers.items():
                if m == "prepared":
                    wait_spares(d, 1)
                results[m].append(bls.create_to_ready(url, s, f"b-{i}"))
        d, url, s = servers["prepared"]
        env = {**os.environ, "ASB_STATE_DIR": d}
        out = subprocess.run([os.path.join(BUILD, "bin", "asb"), "exec", "warmup", "--",
                              "python3", "-c", SEND, "203.0.113.10", str(MIB)],
                             capture_output=True, text=True, env=env, timeout=120)
        sbx_tput = float(out.stdout.strip() or 0)
        host = subprocess.run([sys.executable, "-c", SEND, "203.0.113.10", str(MIB)],
                              capture_output=True, text=True, timeout=120)
        host_tput = float(host.stdout.strip() or 0)
        refill = {"prepared": [], "made": []}
        for m in refill:
            setup_pool(servers[m][1], servers[m][2])
        for r in range(ROUNDS):
            for m in refill:
                d, url, s = servers[m]
                refill[m].append(refill_after_burst(url, s, d if m == "prepared" else None, r))
        none_, pre, made = results["none"], results["prepared"], results["made"]
        add = statistics.median(p - n for p, n in zip(pre, none_))
        add_made = statistics.median(p - n for p, n in zip(made, none_))
        print(f"{'metric':<58} {'p50':>8} {'p99':>8} {'n':>4}")
        row = lambda name, v: print(f"{name:<58} {bls.pct(v, 50):8.1f} {bls.pct(v, 99):8.1f} {len(v):>4}")
        row("create -> Ready, networking prepared ahead (ms)", pre)
        row("create -> Ready, networking made at start (baseline, ms)", made)
        row("create -> Ready, --network none (ms)", none_)
        print(f"{'networking adds, prepared ahead (ms, paired median)':<58} {add:8.1f} {'':>8} {N:>4}"
              f"   target <= {ADD_TARGET_MS:.0f}")
        print(f"{'networking adds, made at start (baseline, ms)':<58} {add_made:8.1f} {'':>8} {N:>4}")
        print(f"{'pool refill after a burst of %d, bridge, prepared (/s)' % POOL:<58} "
              f"{statistics.median(refill['prepared']):8.1f} {'':>8} {ROUNDS:>4}   target >= {REFILL_TARGET:.0f}")
        print(f"{'pool refill after a burst of %d, bridge, made (baseline, /s)' % POOL:<58} "
              f"{statistics.median(refill['made']):8.1f} {'':>8} {ROUNDS:>4}")
        print(f"{'TCP sandbox -> test host (MiB/s)':<58} {sbx_tput:8.0f} {'':>8} {1:>4}")
        print(f"{'TCP host -> test host (baseline, MiB/s)':<58} {host_tput:8.0f} {'':>8} {1:>4}")
        print(f"networking adds {add:.1f} ms to create -> Ready prepared ahead, {add_made:.1f} ms made "
              f"at start (paired medians); refill {statistics.median(refill['prepared']):.1f} vs "
              f"{statistics.median(refill['made']):.1f} sandboxes/s; throughput ratio "
              f"{sbx_tput / host_tput if host_tput else 0:.2f}x")
        issue16_row("network-add", f"{add:.1f} ms (paired median of {N}, prepared ahead)",
                    f"made at start {add_made:.1f} ms; --network none p50 {bls.pct(none_, 50):.1f} ms",
                    ok=add <= ADD_TARGET_MS)
    finally:
        for p in procs:
            p.terminate()
            p.wait(timeout=60)
        for d in dirs:
            bench_cleanup.cleanup_state(d)
        lab.close()
    return 0


def start(bls, d, network, prepared):
    """asb serve in the lab; prepared: ASB_NET_PREPARED (None: the default). A short resync
    interval, alike for every server, so that the warm pool's demand reaches the preparer soon."""
    saved = dict(os.environ)
    try:
        os.environ["ASB_RESYNC_INTERVAL"] = "2s"
        if prepared is not None:
            os.environ["ASB_NET_PREPARED"] = prepared
        return bls.start_server(d, network=network)
    finally:
        os.environ.clear()
        os.environ.update(saved)


def spares(d):
    """Networks prepared ahead and ready in state dir d (their namespace is mounted)."""
    return sum(1 for p in glob.glob(os.path.join(d, "net", "spare-*", "ip"))
               if os.path.ismount(os.path.join(os.path.dirname(p), "ns")))


def wait_spares(d, n, timeout=30):
    deadline = time.monotonic() + timeout
    while spares(d) < n and time.monotonic() < deadline:
        time.sleep(0.01)


def api(url, plural):
    return f"{url}/apis/{EXT}/v1beta1/namespaces/default/{plural}"


def setup_pool(url, s):
    tpl = {"apiVersion": f"{EXT}/v1beta1", "kind": "SandboxTemplate", "metadata": {"name": "t"},
           "spec": {"podTemplate": {"spec": {"containers": [{"name": "main", "image": "host"}]}}}}
    s.post(api(url, "sandboxtemplates"), json=tpl, timeout=30).raise_for_status()
    s.post(api(url, "sandboxwarmpools"), json={
        "apiVersion": f"{EXT}/v1beta1", "kind": "SandboxWarmPool", "metadata": {"name": "warm"},
        "spec": {"replicas": POOL, "sandboxTemplateRef": {"name": "t"}}}, timeout=30).raise_for_status()


def ready_replicas(url, s):
    """Ready sandboxes the pool owns (a claimed one is the claim's)."""
    items = s.get(f"{url}/apis/agents.x-k8s.io/v1beta1/namespaces/default/sandboxes",
                  timeout=10).json()["items"]
    return sum(1 for x in items
               if any(o.get("kind") == "SandboxWarmPool" for o in x["metadata"].get("ownerReferences") or [])
               and any(c["type"] == "Ready" and c["status"] == "True"
                       for c in (x.get("status") or {}).get("conditions") or []))


def refill_after_burst(url, s, d, r, timeout=180):
    """Claims every member of the full pool at once; sandboxes/s until it is full again. With d,
    first waits until the preparer kept up with the pool (its demand plus the constant)."""
    deadline = time.monotonic() + timeout
    while ready_replicas(url, s) < POOL and time.monotonic() < deadline:
        time.sleep(0.01)
    if d:
        wait_spares(d, POOL, timeout=60)
    for i in range(POOL):
        s.post(api(url, "sandboxclaims"), json={
            "apiVersion": f"{EXT}/v1beta1", "kind": "SandboxClaim", "metadata": {"name": f"r{r}-{i}"},
            "spec": {"warmPoolRef": {"name": "warm"}}}, timeout=30).raise_for_status()
    t0 = time.perf_counter()
    while time.monotonic() < deadline:
        if ready_replicas(url, s) == POOL:
            # Make sure the claims took the old members before counting the pool as refilled.
            claims = s.get(api(url, "sandboxclaims"), timeout=10).json()["items"]
            if all(any(c["type"] == "Ready" and c["status"] == "True"
                       for c in (x.get("status") or {}).get("conditions") or [])
                   for x in claims if x["metadata"]["name"].startswith(f"r{r}-")):
                return POOL / (time.perf_counter() - t0)
        time.sleep(0.01)
    raise RuntimeError("the pool did not refill")


if __name__ == "__main__":
    sys.exit(main())
