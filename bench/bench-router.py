#!/usr/bin/python3
"""Router throughput: a small REST GET (/v1/health) at concurrency 50 through the release
sandbox-router (HTTP/1.1 over TCP, X-Sandbox-ID routing, bearer auth, unix-socket upstream)
next to the same requests sent straight to sandboxd's REST unix socket in the same run.
Load from bench/http-bench-client.c (keep-alive, closed loop). Target: router within 1.5x of
direct (DESIGN: over 20k req/s at concurrency 50 on 2 cores).

Each round also runs the same requests through bench/relay-floor.c: the floor of any proxy of
this shape (TCP in, one unix-socket upstream connection per client connection, one recv and one
send per direction, one epoll loop per CPU), which parses, checks and routes nothing. Its ratio
to direct is what the hop itself costs on this machine; the router's distance to it is ours."""
import os
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import time

import bench_server
from bench_issue16 import row as issue16_row

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("ASB_BUILD", os.path.join(ROOT, "build"))
SANDBOXD = os.path.join(BUILD, "bin", "sandboxd")
ROUTER = os.path.join(BUILD, "bin", "sandbox-router")
CLIENT_SRC = os.path.join(ROOT, "bench", "http-bench-client.c")
CLIENT = os.path.join(ROOT, "build", "bench", "http-bench-client")
RELAY_SRC = os.path.join(ROOT, "bench", "relay-floor.c")
RELAY = os.path.join(ROOT, "build", "bench", "relay-floor")
CONNS = int(os.environ.get("BENCH_CONNS", "50"))
SECONDS = float(os.environ.get("BENCH_SECONDS", "5"))
ROUNDS = 3


def build_client():
    os.makedirs(os.path.dirname(CLIENT), exist_ok=True)
    for src, out in ((CLIENT_SRC, CLIENT), (RELAY_SRC, RELAY)):
        subprocess.run(["cc", "-O2", "-Wall", "-Wextra", "-Werror", "-o", out, src, "-lpthread"],
                       check=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(path, timeout=10):
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise RuntimeError(f"{path} did not appear")
        time.sleep(0.01)


def cpu_us_each(pids):
    """CPU time (us) so far of each of pids (user + system), by pid."""
    return {p: sum(bench_server.process_cpu_ms(p)[:2]) * 1000 for p in pids}


def children_cpu_us():
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (ru.ru_utime + ru.ru_stime) * 1e6


def run(target, pids, *headers):
    """req/s, errors, p50, p99, the CPU time (us) the serving processes spent per request, and
    the CPU per request of each serving process and of the load client (waited-for child)."""
    t0 = cpu_us_each(pids)
    c0 = children_cpu_us()
    out = subprocess.run([CLIENT, target, str(CONNS), str(SECONDS), "/v1/health", *headers],
                         capture_output=True, text=True, check=True).stdout.split()
    client_us = children_cpu_us() - c0
    t1 = cpu_us_each(pids)
    n, secs, errors, p50, p99 = int(out[0]), float(out[1]), int(out[2]), int(out[3]), int(out[4])
    each = {p: (t1[p] - t0[p]) / max(n, 1) for p in pids}
    cpu_us = sum(each.values())
    return n / secs, errors, p50, p99, cpu_us, each, client_us / max(n, 1)


def main():
    for b in (SANDBOXD, ROUTER):
        if not os.path.exists(b):
            print(f"missing {b}: run make first", file=sys.stderr)
            return 1
    build_client()
    tmp = tempfile.mkdtemp(prefix="asb-bench-router-", dir="/tmp")
    root = os.path.join(tmp, "root")
    os.makedirs(root)
    rest = os.path.join(tmp, "rest.sock")
    d = subprocess.Popen([SANDBOXD, "--listen-host", "127.0.0.1", "--rest-port", str(free_port()),
                          "--grpc-port", str(free_port()),
                          "--root-dir", root, "--rest-socket", rest, "--grpc-socket", os.path.join(tmp, "grpc.sock")],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    r = subprocess.Popen([ROUTER, "--listen", "127.0.0.1:0", "--token", "bench-token",
                          "--target-template", f"unix:{tmp}/{{socket}}.sock"],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    relay = subprocess.Popen([RELAY, rest], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                             text=True)
    try:
        wait_for(rest)
        port = int(r.stdout.readline())
        relay_port = int(relay.stdout.readline())
        rows, split = [], []
        for i in range(ROUNDS):
            *row, each, client = run(f"unix:{rest}", [d.pid])
            rows.append(("direct (unix socket)", *row))
            split.append((client, each[d.pid], 0.0))
            *row, each, client = run(f"tcp:127.0.0.1:{port}", [d.pid, r.pid], "X-Sandbox-ID: bench",
                                     "Authorization: Bearer bench-token")
            rows.append(("router (tcp, h1)", *row))
            split.append((client, each[d.pid], each[r.pid]))
            *row, each, client = run(f"tcp:127.0.0.1:{relay_port}", [d.pid, relay.pid],
                                     "X-Sandbox-ID: bench", "Authorization: Bearer bench-token")
            rows.append(("floor: bare relay (tcp)", *row))
            split.append((client, each[d.pid], each[relay.pid]))
        best = {}
        for name, rps, errors, p50, p99, cpu in rows:
            if name not in best or rps > best[name][0]:
                best[name] = (rps, errors, p50, p99, cpu)
        print(f"GET /v1/health, {CONNS} keep-alive connections, {SECONDS:g} s x {ROUNDS} rounds (best)")
        print(f"{'path':<24}{'req/s':>10}{'p50 ms':>9}{'p99 ms':>9}{'errors':>8}{'cpu us/req':>12}")
        for name, (rps, errors, p50, p99, cpu) in best.items():
            print(f"{name:<24}{rps:>10.0f}{p50 / 1000:>9.2f}{p99 / 1000:>9.2f}{errors:>8}{cpu:>12.1f}")
        print("(cpu: CPU time of the serving processes per request: sandboxd, plus the router or the relay)")
        ratios = [a[1] / b[1] for a, b in zip(rows[0::3], rows[1::3])]
        floor_ratios = [a[1] / b[1] for a, b in zip(rows[0::3], rows[2::3])]
        print("direct/router ratio per round: " + " ".join(f"{x:.2f}x" for x in ratios))
        print("direct/relay ratio per round:  " + " ".join(f"{x:.2f}x" for x in floor_ratios))
        # On a machine whose CPUs the load saturates, req/s follows the CPU per request of
        # everything involved (the load client included), so the split says where it goes.
        med = lambda v: sorted(v)[len(v) // 2]  # noqa: E731
        for label, rs in (("direct", split[0::3]), ("router", split[1::3]), ("relay", split[2::3])):
            c, s_, rt = (med([x[i] for x in rs]) for i in range(3))
            print(f"{label} CPU us/req (median): client {c:.1f}, sandboxd {s_:.1f}, proxy {rt:.1f}, "
                  f"total {c + s_ + rt:.1f}")
        print(f"median direct/router ratio: {med(ratios):.2f}x; direct/relay: {med(floor_ratios):.2f}x")
        rrps, drps = best["router (tcp, h1)"][0], best["direct (unix socket)"][0]
        frps = best["floor: bare relay (tcp)"][0]
        ratio, floor = drps / rrps, drps / frps
        print(f"direct/router throughput ratio: {ratio:.2f}x (target <= 1.5x); the bare relay's: "
              f"{floor:.2f}x; the router does {rrps / frps:.2f}x the relay's req/s")
        issue16_row("router", f"1/{ratio:.2f} of direct, {rrps:.0f} req/s (median of rounds "
                    f"1/{med(ratios):.2f})",
                    f"direct {drps:.0f} req/s; floor: a bare relay 1/{floor:.2f}, {frps:.0f} req/s",
                    ratio <= 1.5 and rrps >= 25000)
    finally:
        for p in (relay, r, d):
            p.terminate()
            p.wait(timeout=10)
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
