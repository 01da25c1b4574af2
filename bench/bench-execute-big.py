#!/usr/bin/python3
"""sandboxd under a big Execute (issue 14): latency of Execute(`true`) while another call's
command writes 1 GiB (`head -c 1G /dev/zero`, capped at --max-execute-output and the rest
drained), next to its unloaded latency in the same run. Target: p99 loaded within 50 ms of p99
unloaded. Also prints sandboxd's VmHWM. Release build, grpcio client, loopback only."""
import atexit
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
from grpc_helpers import Client  # noqa: E402

BIN = os.path.join(ROOT, "build", "bin", "sandboxd")
N = int(os.environ.get("BENCH_BIG_EXEC_N", "400"))
GIB = 1 << 30


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * p / 100))]


def vm_hwm_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


def samples(c, n, stop=None):
    req = c.pb.ExecuteRequest(config=c.config(["true"]))
    lat = []
    while len(lat) < n and not (stop and stop.is_set()):
        t = time.perf_counter()
        c.execute_rpc(req, timeout=30)
        lat.append(time.perf_counter() - t)
    return lat


def loaded(big_client, small_client, n):
    """Execute(true) samples while 1 GiB Executes run back to back on big_client."""
    stop = threading.Event()
    bigs = []

    def big_loop():
        req = big_client.pb.ExecuteRequest(config=big_client.config(["head", "-c", str(GIB), "/dev/zero"]))
        while not stop.is_set():
            t = time.perf_counter()
            r = big_client.execute_rpc(req, timeout=300)
            assert r.exit_code == 0
            bigs.append(time.perf_counter() - t)

    th = threading.Thread(target=big_loop)
    th.start()
    time.sleep(0.2)  # the first big call is under way
    try:
        lat = samples(small_client, n)
    finally:
        stop.set()
        th.join()
    return lat, bigs


def main():
    root = tempfile.mkdtemp(prefix="bench-bigexec-")
    atexit.register(shutil.rmtree, root, True)  # the daemon's root, however the bench ends
    port, rport = free_port(), free_port()
    d = subprocess.Popen([BIN, "--listen-host", "127.0.0.1", "--grpc-port", str(port), "--rest-port",
                          str(rport), "--root-dir", root], stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    try:
        small, big = Client(f"127.0.0.1:{port}"), Client(f"127.0.0.1:{port}")
        samples(small, 50)  # warm up
        base = samples(small, N)
        other, bigs1 = loaded(big, small, N)
        same, bigs2 = loaded(small, small, N)
        hwm = vm_hwm_kib(d.pid)
        rows = [("unloaded (baseline)", base), ("1 GiB Execute on another connection", other),
                ("1 GiB Execute on the same connection", same)]
        print(f"Execute(true) latency, {N} calls each, ms")
        print(f"{'condition':40} {'p50':>8} {'p99':>8} {'max':>8} {'p99-base':>9}")
        for name, xs in rows:
            print(f"{name:40} {pct(xs, 50) * 1e3:8.2f} {pct(xs, 99) * 1e3:8.2f} {max(xs) * 1e3:8.2f} "
                  f"{(pct(xs, 99) - pct(base, 99)) * 1e3:9.2f}")
        bigs = bigs1 + bigs2
        print(f"1 GiB Executes completed: {len(bigs)}, mean {sum(bigs) / max(1, len(bigs)):.2f} s each")
        print(f"sandboxd VmHWM: {hwm / 1024:.1f} MiB")
        worst = max(pct(other, 99), pct(same, 99)) - pct(base, 99)
        print(f"target p99 within 50 ms of baseline: {'met' if worst <= 0.050 else 'MISSED'} "
              f"({worst * 1e3:.1f} ms)")
        small.close()
        big.close()
    finally:
        d.terminate()
        d.wait(timeout=30)


if __name__ == "__main__":
    main()
