"""Shared by the benchmarks that drive a real `asb serve`: starting it on a fresh state dir, running
the libasb claim client against it, and the bare `runc` bundle the local benches compare with."""
import json
import os
import shutil
import subprocess
import time

import requests

from bench_libasb import BUILD

RUNC = shutil.which("runc") or "/usr/sbin/runc"


def start_server(state, build=None, env=None, args=()):
    """Starts `<build>/bin/asb serve` on 127.0.0.1:0 with state dir `state` (its log in
    state/serve.log) and waits until it answers /version. `env` adds to or overrides the
    environment, `args` adds to the command line. Returns (process, url, authorised session)."""
    build = build or BUILD
    full_env = {**os.environ, "ASB_STATE_DIR": state, "ASB_RUNTIME": RUNC,
                "ASB_SANDBOXD": os.path.join(build, "bin", "sandboxd"), **(env or {})}
    log = open(os.path.join(state, "serve.log"), "wb")
    proc = subprocess.Popen([os.path.join(build, "bin", "asb"), "serve", "--listen", "127.0.0.1:0",
                             *args], stdout=log, stderr=subprocess.STDOUT, env=full_env)
    for _ in range(1000):
        if os.path.exists(os.path.join(state, "server")):
            break
        time.sleep(0.01)
    url = open(os.path.join(state, "server")).read().strip()
    s = requests.Session()
    s.headers["Authorization"] = "Bearer " + open(os.path.join(state, "token")).read().strip()
    for _ in range(500):
        try:
            if s.get(url + "/version", timeout=2).status_code == 200:
                break
        except requests.RequestException:
            time.sleep(0.01)
    return proc, url, s


EXT = "extensions.agents.x-k8s.io"


def wait_pool_ready(url, s, name, n, timeout=600, namespace="default"):
    """Waits until SandboxWarmPool `name` reports readyReplicas >= n; returns the seconds it took.
    A watch on the pool, not a poll: a benchmark that measures how fast the server works must not
    take the CPU it measures (a 100 Hz poll was ~5 % of the machine during a refill)."""
    base = f"{url}/apis/{EXT}/v1beta1/namespaces/{namespace}/sandboxwarmpools"
    t0 = time.perf_counter()
    deadline = time.monotonic() + timeout
    while True:
        r = s.get(f"{base}/{name}", timeout=30)
        r.raise_for_status()
        pool = r.json()
        if ((pool.get("status") or {}).get("readyReplicas") or 0) >= n:
            return time.perf_counter() - t0
        left = deadline - time.monotonic()
        if left <= 0:
            raise RuntimeError(f"pool {name} not ready with {n} after {timeout}s")
        # From the version read: no change between the GET and the watch is missed. The watch
        # ends at timeoutSeconds (or when the server closes it): read again and go on.
        w = s.get(base, params={"watch": "true", "fieldSelector": f"metadata.name={name}",
                                "resourceVersion": pool["metadata"]["resourceVersion"],
                                "timeoutSeconds": str(max(1, int(min(left, 60))))},
                  stream=True, timeout=left + 30)
        try:
            for line in w.iter_lines():
                if not line:
                    continue
                ev = json.loads(line)
                if ev.get("type") == "ERROR":
                    break  # e.g. 410 Gone: read the pool again
                obj = ev.get("object") or {}
                if ((obj.get("status") or {}).get("readyReplicas") or 0) >= n:
                    return time.perf_counter() - t0
        finally:
            w.close()


def wal_syncs(url, s):
    """asb serve's asb_store_wal_sync_duration_seconds so far: {le (seconds, inf for +Inf):
    count of syncs that took at most that}."""
    r = s.get(f"{url}/metrics", timeout=30)
    r.raise_for_status()
    out = {}
    for line in r.text.splitlines():
        if line.startswith("asb_store_wal_sync_duration_seconds_bucket{le=\""):
            le, count = line.split("le=\"", 1)[1].split("\"} ")
            out[float(le)] = int(count)
    return out


def wal_syncs_over(before, after, seconds):
    """(syncs between two wal_syncs() samples, of which slower than `seconds`, a bucket bound)."""
    inf = float("inf")
    total = after[inf] - before.get(inf, 0)
    return total, total - (after[seconds] - before.get(seconds, 0))


def claim_client_env(state, **extra_env):
    """The environment of bench/claim-bench-client against the server of `state` (never an
    inherited ASB_SERVER/ASB_TOKEN)."""
    env = {**os.environ, "ASB_STATE_DIR": state, **extra_env}
    env.pop("ASB_SERVER", None)
    env.pop("ASB_TOKEN", None)
    return env


def run_claim_client(client, state, args, timeout, **extra_env):
    """Runs bench/claim-bench-client (built at `client`) against the server of `state`; returns
    its stdout as lists of words, one list a line."""
    out = subprocess.run([client, *map(str, args)], capture_output=True, text=True,
                         env=claim_client_env(state, **extra_env), timeout=timeout)
    if out.returncode != 0:
        raise RuntimeError(f"claim-bench-client {args}: {out.stderr}")
    return [line.split() for line in out.stdout.splitlines()]


def process_cpu_ms(pid):
    """CPU time in ms of process `pid` (/proc/PID/stat): (user, system) of the process itself, all
    its threads, then (user, system) of the children it has waited for."""
    with open(f"/proc/{pid}/stat") as st:
        f = st.read().rsplit(")", 1)[1].split()
    hz = os.sysconf("SC_CLK_TCK")
    return tuple(int(x) * 1000 / hz for x in f[11:15])


def run_timed_claim_burst(client, state, n, server_pid, timeout, **extra_env):
    """Runs `claim-bench-client burst b n` like run_claim_client and also measures the CPU the
    burst took: the server's and the client's own, from the start until the client has timed
    every claim (the client reads both from /proc into its BENCH_TIMED_FILE then, before it closes
    them, so nothing polls for that moment while the burst runs). Returns (lines, {"server":
    (user, system) ms, "client": (user, system) ms}); the client's part includes its start and its
    n threads' setup."""
    mark = os.path.join(state, "burst-timed")
    if os.path.exists(mark):
        os.unlink(mark)
    server0 = process_cpu_ms(server_pid)[:2]
    out = subprocess.run([client, "burst", "b", str(n)], capture_output=True, text=True,
                         timeout=timeout, env=claim_client_env(state, BENCH_TIMED_FILE=mark,
                                                               BENCH_SERVER_PID=str(server_pid),
                                                               **extra_env))
    ticks = open(mark).read().split() if os.path.exists(mark) else []
    if out.returncode != 0 or len(ticks) != 4:
        raise RuntimeError(f"claim-bench-client burst {n}: {out.stderr}")
    ms = [int(t) * 1000 / os.sysconf("SC_CLK_TCK") for t in ticks]
    cpu = {"server": (ms[0] - server0[0], ms[1] - server0[1]), "client": (ms[2], ms[3])}
    return [line.split() for line in out.stdout.splitlines()], cpu


def bare_runc_bundle(tmp, process_args):
    """A bundle in tmp/bare for a bare `runc run` baseline: `process_args` on a read-only bind of
    the host's /usr (with the host's /bin, /lib... symlinks). Returns the bundle directory."""
    bundle = os.path.join(tmp, "bare")
    rootfs = os.path.join(bundle, "rootfs")
    os.makedirs(os.path.join(rootfs, "usr"))
    for link in ("bin", "lib", "lib64", "sbin"):
        if os.path.islink("/" + link):
            os.symlink(os.readlink("/" + link), os.path.join(rootfs, link))
    subprocess.run([RUNC, "spec", "--bundle", bundle], check=True)
    with open(os.path.join(bundle, "config.json")) as f:
        cfg = json.load(f)
    cfg["process"]["terminal"] = False
    cfg["process"]["args"] = list(process_args)
    cfg["mounts"].append({"destination": "/usr", "type": "bind", "source": "/usr",
                          "options": ["rbind", "ro"]})
    with open(os.path.join(bundle, "config.json"), "w") as f:
        json.dump(cfg, f)
    return bundle
