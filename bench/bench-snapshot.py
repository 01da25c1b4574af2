#!/usr/bin/python3
"""SandboxSnapshots (issue 18, docs/snapshots.md) through `asb serve` with runc:
  * snapshot of a running sandbox whose workspace holds 100 MiB in 5,000 files: create -> Ready,
    the freeze the server measured, the longest gap a client polling sandboxd's health saw
    meanwhile, bytes stored; next to `tar | zstd -3` of the same tree (the same-run baseline of
    time and size);
  * a second snapshot after 1 MiB changed: stored bytes (deduplication) and time;
  * fork (Sandbox from image snapshot:NAME) -> Ready against a cold create -> Ready, alternated;
  * 10 forks at once -> all Ready, against 10 cold creates at once; 10 forks at once of a
    snapshot never forked before (one of them unpacks its tree, the others wait for it);
  * `cp -a` of the workspace, the same-run baseline of what a fork must at least do (copy);
  * the same fork with the state directory on overlayfs (a container's root: it refuses
    idmapped mounts, so a fork falls back to copying the snapshot's files in), one at a time and
    10 at once.
Needs root and runc; prints a table."""
import http.client
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

import requests

import bench_cleanup
from bench_libasb import pct

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("ASB_BUILD", os.path.join(ROOT, "build"))
RUNC = shutil.which("runc") or "/usr/sbin/runc"
FILES = int(os.environ.get("BENCH_SNAPSHOT_FILES", "5000"))
TOTAL = int(os.environ.get("BENCH_SNAPSHOT_BYTES", str(100 << 20)))
ROUNDS = int(os.environ.get("BENCH_SNAPSHOT_ROUNDS", "5"))
CORE = "/apis/agents.x-k8s.io/v1beta1/namespaces/default/sandboxes"
SNAPS = "/apis/extensions.agents.x-k8s.io/v1beta1/namespaces/default/sandboxsnapshots"


class Server:
    def __init__(self, state):
        env = {**os.environ, "ASB_STATE_DIR": state, "ASB_RUNTIME": RUNC, "ASB_NETWORK": "none",
               "ASB_SANDBOXD": os.path.join(BUILD, "bin", "sandboxd"), "ASB_DEFAULT_MEMORY": "0",
               "ASB_DEFAULT_CPU": "0", "ASB_DEFAULT_EPHEMERAL_STORAGE": "0"}
        self.state = state
        self.log = open(os.path.join(state, "serve.log"), "wb")
        self.proc = subprocess.Popen([os.path.join(BUILD, "bin", "asb"), "serve", "--listen",
                                      "127.0.0.1:0", "--router-listen", "off"],
                                     stdout=self.log, stderr=subprocess.STDOUT, env=env)
        for _ in range(1000):
            if os.path.exists(os.path.join(state, "server")):
                break
            time.sleep(0.01)
        self.url = open(os.path.join(state, "server")).read().strip()
        self.s = requests.Session()
        self.s.headers["Authorization"] = "Bearer " + open(os.path.join(state, "token")).read().strip()

    def post(self, path, body):
        r = self.s.post(self.url + path, json=body, timeout=30)
        r.raise_for_status()
        return r.json()

    def wait_ready(self, path, name, timeout=300):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            obj = self.s.get(f"{self.url}{path}/{name}", timeout=30).json()
            for c in (obj.get("status") or {}).get("conditions") or []:
                if c["type"] == "Ready" and c["status"] == "True":
                    return obj
                if c["type"] == "Ready" and c["reason"] in ("ReconcilerError", "CaptureFailed",
                                                            "SandboxNotFound", "SnapshotNotFound",
                                                            "SnapshotRestoreFailed"):
                    raise RuntimeError(f"{name}: {c}")
            time.sleep(0.005)
        raise RuntimeError(f"{name} not Ready within {timeout}s")

    def sandbox(self, name, image="host"):
        return self.post(CORE, {"apiVersion": "agents.x-k8s.io/v1beta1", "kind": "Sandbox",
                                "metadata": {"name": name},
                                "spec": {"podTemplate": {"spec": {"containers": [
                                    {"name": "main", "image": image}]}}}})

    def snapshot(self, name, sandbox):
        return self.post(SNAPS, {"apiVersion": "extensions.agents.x-k8s.io/v1beta1",
                                 "kind": "SandboxSnapshot", "metadata": {"name": name},
                                 "spec": {"sandboxRef": {"name": sandbox}}})

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=60)
        self.log.close()


def populate(ws, rng):
    """FILES files in 50 directories, TOTAL bytes: half random (incompressible), half text."""
    st = os.stat(ws)
    size = TOTAL // FILES
    words = b"the quick brown fox jumps over the lazy dog; import numpy as np\n" * (size // 64 + 1)
    for i in range(FILES):
        d = os.path.join(ws, f"pkg{i % 50:02d}")
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, f"mod{i}.py"), "wb") as f:
            f.write(rng.randbytes(size) if i % 2 else words[:size])
    for root, dirs, files in os.walk(ws):
        for n in dirs + files:
            os.chown(os.path.join(root, n), st.st_uid, st.st_gid)


def change_one_mib(ws, rng):
    size = TOTAL // FILES
    n = max(1, (1 << 20) // size)
    for i in range(n):
        with open(os.path.join(ws, f"pkg{i % 50:02d}", f"mod{i}.py"), "wb") as f:
            f.write(rng.randbytes(size))
    return n


class UnixConn(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("localhost", timeout=10)
        self.path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(self.path)


class Poller(threading.Thread):
    """Polls sandboxd's health every 2 ms; the longest round trip is the pause a client saw."""
    def __init__(self, sock):
        super().__init__(daemon=True)
        self.sock, self.stop, self.worst = sock, False, 0.0

    def run(self):
        c = UnixConn(self.sock)
        while not self.stop:
            t = time.perf_counter()
            c.request("GET", "/v1/health")
            c.getresponse().read()
            self.worst = max(self.worst, time.perf_counter() - t)
            time.sleep(0.002)
        c.close()


def timed_snapshot(srv, name, sandbox, sock):
    p = Poller(sock)
    p.start()
    time.sleep(0.05)
    t0 = time.perf_counter()
    srv.snapshot(name, sandbox)
    obj = srv.wait_ready(SNAPS, name)
    ms = (time.perf_counter() - t0) * 1000
    p.stop = True
    p.join()
    st = obj["status"]
    return ms, st["pauseMicroseconds"] / 1000, p.worst * 1000, st["storedBytes"], st["size"]


def mount_overlay_state():
    """(top, state): a state directory on an overlayfs whose layers are in /var/tmp (on a tmpfs
    when /var/tmp cannot hold an upper layer, as when it is an overlayfs itself)."""
    top = tempfile.mkdtemp(prefix="asb-bench-ovl-", dir="/var/tmp")
    layers, state = top, os.path.join(top, "state")
    for attempt in range(2):
        for d in ("lower", "upper", "work", "state"):
            os.makedirs(os.path.join(layers, d), exist_ok=True)
        r = subprocess.run(["mount", "-t", "overlay", "-o", f"lowerdir={layers}/lower,"
                            f"upperdir={layers}/upper,workdir={layers}/work", "overlay", state],
                           capture_output=True)
        if r.returncode == 0:
            return top, state, layers != top
        layers = os.path.join(top, "tmpfs")
        os.mkdir(layers)
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2g", "tmpfs", layers], check=True)
    raise RuntimeError(f"cannot mount an overlayfs: {r.stderr.decode()}")


def copy_forks():
    """Fork -> Ready (p50, p99 of ROUNDS) and 10 forks at once where the fork is a copy."""
    top, state, on_tmpfs = mount_overlay_state()
    srv = None
    try:
        srv = Server(state)
        src = srv.sandbox("src")
        srv.wait_ready(CORE, "src")
        populate(os.path.join(state, "sandboxes", src["metadata"]["uid"], "workspace"),
                 random.Random(18))
        subprocess.run(["sync"], check=True)
        srv.snapshot("s1", "src")
        srv.wait_ready(SNAPS, "s1")
        one = []
        for i in range(ROUNDS):
            t0 = time.perf_counter()
            srv.sandbox(f"fork-{i}", "snapshot:s1")
            srv.wait_ready(CORE, f"fork-{i}")
            one.append((time.perf_counter() - t0) * 1000)
        seeded = open(os.path.join(state, "sandboxes", srv.s.get(
            srv.url + CORE + "/fork-0").json()["metadata"]["uid"], "seeded")).read()
        if "overlay" in seeded:
            raise RuntimeError("a fork on overlayfs got an overlay: the fallback was not measured")
        t0 = time.perf_counter()
        for i in range(10):
            srv.sandbox(f"many-{i}", "snapshot:s1")
        for i in range(10):
            srv.wait_ready(CORE, f"many-{i}")
        return one, (time.perf_counter() - t0) * 1000, on_tmpfs
    finally:
        if srv:
            srv.stop()
        bench_cleanup.cleanup_state(state)
        subprocess.run(["umount", "-l", state], check=True)
        if on_tmpfs:
            subprocess.run(["umount", "-l", os.path.join(top, "tmpfs")], check=True)
        shutil.rmtree(top)


def main():
    if os.geteuid() != 0 or not os.path.exists(RUNC):
        print("bench-snapshot: skipped (needs root and runc)")
        return 0
    tmp = tempfile.mkdtemp(prefix="asb-bench-snap-", dir="/tmp")
    srv = None
    try:
        srv = Server(tmp)
        rng = random.Random(18)
        src = srv.sandbox("src")
        srv.wait_ready(CORE, "src")
        uid = src["metadata"]["uid"]
        ws = os.path.join(tmp, "sandboxes", uid, "workspace")
        sock = os.path.join(tmp, "run", uid, "rest.sock")
        populate(ws, rng)
        subprocess.run(["sync"], check=True)
        # Baseline: the same tree through tar | zstd -3 (one core, like the snapshotter).
        t0 = time.perf_counter()
        tz = subprocess.run(f"tar -C {ws} -cf - . | zstd -3 -q -c | wc -c", shell=True, check=True,
                            capture_output=True, text=True)
        tar_ms, tar_bytes = (time.perf_counter() - t0) * 1000, int(tz.stdout)
        # Baseline of a fork's copy: cp -a of the same tree (no compression, no hashing).
        t0 = time.perf_counter()
        subprocess.run(["cp", "-a", ws, os.path.join(tmp, "cp-baseline")], check=True)
        cp_ms = (time.perf_counter() - t0) * 1000
        shutil.rmtree(os.path.join(tmp, "cp-baseline"))
        first = timed_snapshot(srv, "s1", "src", sock)
        changed = change_one_mib(ws, rng)
        second = timed_snapshot(srv, "s2", "src", sock)

        fork, cold = [], []
        for i in range(ROUNDS):
            for kind in ((fork, "snapshot:s1", "fork"), (cold, "host", "cold"))[::1 if i % 2 else -1]:
                out, image, prefix = kind
                t0 = time.perf_counter()
                srv.sandbox(f"{prefix}-{i}", image)
                srv.wait_ready(CORE, f"{prefix}-{i}")
                out.append((time.perf_counter() - t0) * 1000)

        def burst(prefix, image):
            t0 = time.perf_counter()
            for i in range(10):
                srv.sandbox(f"{prefix}-{i}", image)
            for i in range(10):
                srv.wait_ready(CORE, f"{prefix}-{i}")
            return (time.perf_counter() - t0) * 1000
        forks10 = burst("many", "snapshot:s1")
        # s2 was never forked: its tree is unpacked by whichever of the 10 comes first.
        fresh10 = burst("fresh", "snapshot:s2")
        cold10 = burst("manycold", "host")
        srv.stop()
        srv = None
        copy_one, copy10, copy_tmpfs = copy_forks()

        mib = 1 << 20
        w = 62
        print(f"workspace: {FILES} files, {TOTAL / mib:.0f} MiB (half random, half text)")
        print(f"{'metric':<{w}} {'value':>12}")
        rows = [
            ("snapshot 1: create -> Ready (ms)", f"{first[0]:.0f}"),
            ("  source frozen, measured by the server (ms)", f"{first[1]:.1f}"),
            ("  longest sandboxd health round trip meanwhile (ms)", f"{first[2]:.1f}"),
            ("  stored (MiB, zstd)", f"{first[3] / mib:.1f}"),
            ("  baseline: tar | zstd -3 of the same tree (ms)", f"{tar_ms:.0f}"),
            ("  baseline: tar | zstd -3 size (MiB)", f"{tar_bytes / mib:.1f}"),
            (f"snapshot 2 after {changed} files (~1 MiB) changed: -> Ready (ms)", f"{second[0]:.0f}"),
            ("  source frozen (ms)", f"{second[1]:.1f}"),
            ("  longest health round trip meanwhile (ms)", f"{second[2]:.1f}"),
            ("  newly stored (MiB)", f"{second[3] / mib:.2f}"),
            (f"fork (snapshot:s1) create -> Ready p50 / p99 (ms, n={ROUNDS})",
             f"{pct(fork, 50):.0f} / {pct(fork, 99):.0f}"),
            ("  the first fork (unpacks the snapshot's tree once) (ms)", f"{fork[0]:.0f}"),
            (f"cold create (host) -> Ready p50 / p99 (ms, n={ROUNDS})",
             f"{pct(cold, 50):.0f} / {pct(cold, 99):.0f}"),
            ("  baseline: cp -a of the workspace (ms)", f"{cp_ms:.0f}"),
            ("10 forks at once -> all Ready (ms)", f"{forks10:.0f}"),
            ("10 forks at once of a snapshot never forked (s2) (ms)", f"{fresh10:.0f}"),
            ("10 cold creates at once -> all Ready (ms)", f"{cold10:.0f}"),
            ("state dir on overlayfs" + (" (layers on tmpfs)" if copy_tmpfs else "")
             + ": forks are copies", ""),
            (f"  fork by copy -> Ready p50 / p99 (ms, n={ROUNDS})",
             f"{pct(copy_one, 50):.0f} / {pct(copy_one, 99):.0f}"),
            ("  10 forks by copy at once -> all Ready (ms)", f"{copy10:.0f}"),
        ]
        for label, v in rows:
            print(f"{label:<{w}} {v:>12}")
    finally:
        if srv:
            srv.stop()
        bench_cleanup.cleanup_state(tmp)
    return 0


if __name__ == "__main__":
    sys.exit(main())
