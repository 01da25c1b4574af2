#!/usr/bin/env python3
"""Sandbox networking (docs/network.md), same run, same machine:
- Sandbox create -> Ready with networking (netns, veth, address, nft rules) next to the same
  without it (`--network none`);
- TCP throughput from a sandbox to a test host (through veth, bridge, nft filter and NAT) next to
  host -> test host (one veth, no filter).
Everything runs inside a private network namespace (the test lab of tests/integration/netpol_lab.py),
so the machine's own network is never touched."""
import glob
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import bench_cleanup  # noqa: E402

BUILD = os.environ.get("ASB_BUILD", os.path.join(ROOT, "build"))
RUNC = shutil.which("runc") or "/usr/sbin/runc"
N = int(os.environ.get("BENCH_NET_SANDBOXES", "10"))
MIB = int(os.environ.get("BENCH_NET_MIB", "256"))

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
        results = {}
        for mode in ("none", "bridge"):
            d = tempfile.mkdtemp(prefix="asb-bench-net-", dir="/tmp")
            dirs.append(d)
            proc, url, s = start(bls, d, mode)
            procs.append(proc)
            bls.create_to_ready(url, s, "warmup")
            results[mode] = [bls.create_to_ready(url, s, f"b-{i}") for i in range(N)]
            if mode == "bridge":
                env = {**os.environ, "ASB_STATE_DIR": d}
                out = subprocess.run([os.path.join(BUILD, "bin", "asb"), "exec", "warmup", "--",
                                      "python3", "-c", SEND, "203.0.113.10", str(MIB)],
                                     capture_output=True, text=True, env=env, timeout=120)
                sbx_tput = float(out.stdout.strip() or 0)
                host = subprocess.run([sys.executable, "-c", SEND, "203.0.113.10", str(MIB)],
                                      capture_output=True, text=True, timeout=120)
                host_tput = float(host.stdout.strip() or 0)
        none_, br = results["none"], results["bridge"]
        print(f"{'metric':<48} {'p50':>8} {'p99':>8} {'n':>4}")
        print(f"{'create -> Ready, networking (ms)':<48} {bls.pct(br, 50):8.1f} {bls.pct(br, 99):8.1f} {N:>4}")
        print(f"{'create -> Ready, --network none (baseline, ms)':<48} {bls.pct(none_, 50):8.1f} {bls.pct(none_, 99):8.1f} {N:>4}")
        print(f"{'TCP sandbox -> test host (MiB/s)':<48} {sbx_tput:8.0f} {'':>8} {1:>4}")
        print(f"{'TCP host -> test host (baseline, MiB/s)':<48} {host_tput:8.0f} {'':>8} {1:>4}")
        print(f"networking adds {bls.pct(br, 50) - bls.pct(none_, 50):.1f} ms to create -> Ready (p50); "
              f"throughput ratio {sbx_tput / host_tput if host_tput else 0:.2f}x")
    finally:
        for p in procs:
            p.terminate()
            p.wait(timeout=30)
        for d in dirs:
            bench_cleanup.cleanup_state(d)
        lab.close()
    return 0


def start(bls, d, mode):
    return bls.start_server(d, network=mode)


if __name__ == "__main__":
    sys.exit(main())
