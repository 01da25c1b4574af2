#!/usr/bin/python3
"""The `asb` CLI's own cost (issue 16, "a lean CLI"): CPU (user + system, from wait4's rusage)
and wall time of one `asb` process, next to the spawn floor (posix_spawn + waitpid of /bin/true)
measured in the same run, alternating so both see the same load:
  - process start: `asb --help` (no request);
  - one request: `asb get sandboxes` against an `asb serve --network none`;
  - baseline: a do-nothing program linked against the libraries of the previous layout (asb
    with the control plane and libcurl linked in), built here, so its load cost is measured in
    the same run;
  - floor: the same do-nothing program linked against asb's own shared libraries (its NEEDED
    list, read off the binary): what the libraries a client needs cost to load on this machine,
    so asb's own start is what it adds to that;
  - `asb claim --pool P` + `asb exec SANDBOX -- true` from a warm pool kept full (needs root and
    runc; skipped otherwise), against the spawn floor (target: p50 <= floor + 10 ms), with
    the pair's three processes doing nothing beside it (two starts of the do-nothing program
    above and one /bin/true, right after a claim made through the API, so under the same
    refill): what the pair costs before it does any work.
BENCH_CLI_RUNS (200) start samples, BENCH_CLI_CLAIMS (30) claim+exec pairs. BENCH_CLI_BASELINE=PATH
adds the same rows for another asb binary (e.g. one built from an older tree), in the same run."""
import os
import shutil
import subprocess
import sys
import tempfile
import time

import bench_cleanup
import bench_server
from bench_issue16 import row as issue16_row
from bench_libasb import pct

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("ASB_BUILD", os.path.join(ROOT, "build"))
ASB = os.path.join(BUILD, "bin", "asb")
RUNC = bench_server.RUNC
RUNS = int(os.environ.get("BENCH_CLI_RUNS", "200"))
CLAIMS = int(os.environ.get("BENCH_CLI_CLAIMS", "30"))
POOL = 3
BASELINE = os.environ.get("BENCH_CLI_BASELINE")
EXT = "extensions.agents.x-k8s.io"
# What build/bin/asb linked before the server moved to asb-server and libcurl became lazy.
OLD_LIBS = ["-lmicrohttpd", "-lnghttp2", "-lprotobuf-c", "-ljansson", "-lsqlite3", "-lcurl",
            "-lyaml", "-lnftables", "-lhttp_parser", "-lpthread", "-lm"]


def run(argv, env=None):
    """One process: (cpu ms, wall ms, exit status), output discarded."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    t0 = time.perf_counter()
    fa = [(os.POSIX_SPAWN_DUP2, devnull, 1), (os.POSIX_SPAWN_DUP2, devnull, 2)]
    pid = os.posix_spawn(argv[0], argv, env or os.environ, file_actions=fa)
    _, status, ru = os.wait4(pid, 0)
    wall = (time.perf_counter() - t0) * 1000
    os.close(devnull)
    return (ru.ru_utime + ru.ru_stime) * 1000, wall, os.waitstatus_to_exitcode(status)


def build_do_nothing(work, name, libs):
    """A do-nothing program (PIE, full RELRO, as asb is built) linked against libs, each kept
    even though unused: what loading those libraries costs a process that does nothing else."""
    src = os.path.join(work, "do-nothing.c")
    with open(src, "w") as f:
        f.write("int main(void) { return 0; }\n")
    exe = os.path.join(work, name)
    subprocess.run(["cc", "-O2", "-fPIE", "-pie", "-Wl,-z,relro,-z,now", "-Wl,--no-as-needed", src,
                    "-o", exe, *libs], check=True)
    return exe


def needed_libs(exe):
    """asb's own NEEDED libraries as -l:SONAME flags (libc and the loader come anyway)."""
    out = subprocess.run(["readelf", "-d", exe], capture_output=True, text=True,
                         check=True).stdout
    sonames = [line.split("[", 1)[1].rstrip("]") for line in out.splitlines()
               if "(NEEDED)" in line]
    return [f"-l:{n}" for n in sonames if not n.startswith(("libc.so", "ld-linux"))]


def measure(cases, n):
    """cases: {label: argv}; each round runs every case and the floor once, in turn."""
    cpu = {k: [] for k in cases}
    wall = {k: [] for k in cases}
    cpu["floor"], wall["floor"] = [], []
    for _ in range(n):
        for k, argv in list(cases.items()) + [("floor", ["/bin/true"])]:
            c, w, rc = run(argv)
            if rc != 0:
                raise RuntimeError(f"{argv}: exit status {rc}")
            cpu[k].append(c)
            wall[k].append(w)
    return cpu, wall


def start_server(state):
    return bench_server.start_server(state, BUILD, {"ASB_NETWORK": "none"},
                                     ("--router-listen", "off"))


def api(url, plural, name=""):
    return f"{url}/apis/{EXT}/v1beta1/namespaces/default/{plural}" + (f"/{name}" if name else "")


def claim_exec_once(url, s, env, asb, name):
    bench_server.wait_pool_ready(url, s, "cli", POOL)
    t0 = time.perf_counter()
    out = subprocess.run([asb, "claim", "--pool", "cli", "--name", name], env=env,
                         capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"asb claim: {out.stderr}")
    t1 = time.perf_counter()
    ex = subprocess.run([asb, "exec", out.stdout.strip(), "--", "true"], env=env,
                        capture_output=True)
    t2 = time.perf_counter()
    if ex.returncode != 0:
        raise RuntimeError(f"asb exec: {ex.stderr}")
    s.delete(api(url, "sandboxclaims", name), timeout=30)
    return (t2 - t0) * 1000, (t1 - t0) * 1000, (t2 - t1) * 1000


def processes_after_claim(url, s, own, name):
    """The pair's processes with nothing to do, at the same moment: a claim made through the API
    (untimed; its refill starts as the pair's does), then two starts of the do-nothing program
    with asb's own libraries (`own`) and one /bin/true, timed together."""
    bench_server.wait_pool_ready(url, s, "cli", POOL)
    s.post(api(url, "sandboxclaims"), timeout=30, json={
        "apiVersion": f"{EXT}/v1beta1", "kind": "SandboxClaim", "metadata": {"name": name},
        "spec": {"warmPoolRef": {"name": "cli"}}}).raise_for_status()
    wall = run([own])[1] + run([own])[1] + run(["/bin/true"])[1]
    s.delete(api(url, "sandboxclaims", name), timeout=30)
    return wall


def claim_exec(url, s, env, n, own):
    """n rounds of `asb claim` + `asb exec -- true` (timed together), one floor spawn, the
    pair's processes doing nothing (processes_after_claim) and the baseline binary's pair; the
    claim is deleted and the pool full again before each pair (untimed)."""
    total, floor, starts, base = [], [], [], []
    for i in range(n):
        total.append(claim_exec_once(url, s, env, ASB, f"c{i}"))
        floor.append(run(["/bin/true"])[1])
        starts.append(processes_after_claim(url, s, own, f"p{i}"))
        if BASELINE:
            base.append(claim_exec_once(url, s, env, BASELINE, f"b{i}"))
    return total, floor, starts, base


def parts(rows, i):
    return [r[i] for r in rows]


def main():
    print(f"{'measurement':<58} {'n':>5} {'p50':>8} {'p99':>8}")

    def row(name, v, unit="ms"):
        print(f"{name:<58} {len(v):>5} {pct(v, 50):>8.2f} {pct(v, 99):>8.2f} {unit}")

    work = tempfile.mkdtemp(prefix="asb-bench-cli-", dir="/tmp")
    state = os.path.join(work, "state")
    os.mkdir(state, 0o700)
    proc = None
    try:
        old = build_do_nothing(work, "old-layout", OLD_LIBS)
        own = build_do_nothing(work, "own-libraries", needed_libs(ASB))
        proc, url, s = start_server(state)
        env = {**os.environ, "ASB_STATE_DIR": state}
        env.pop("ASB_SERVER", None)
        env.pop("ASB_TOKEN", None)
        os.environ.update(ASB_STATE_DIR=state)
        cases = {"help": [ASB, "--help"], "get": [ASB, "get", "sandboxes"], "old": [old],
                 "own": [own]}
        if BASELINE:
            cases.update({"bhelp": [BASELINE, "--help"], "bget": [BASELINE, "get", "sandboxes"]})
        cpu, wall = measure(cases, RUNS)
        for what, v in (("CPU", cpu), ("wall", wall)):
            row(f"spawn floor (/bin/true), {what}", v["floor"])
            row(f"baseline: previous layout's libraries, no work, {what}", v["old"])
            row(f"floor: asb's own libraries, no work, {what}", v["own"])
            if BASELINE:
                row(f"baseline binary: asb --help, {what}", v["bhelp"])
                row(f"baseline binary: asb get sandboxes, {what}", v["bget"])
            row(f"asb --help (process start), {what}", v["help"])
            row(f"asb get sandboxes (one request), {what}", v["get"])
        print(f"asb process start CPU p50 {pct(cpu['help'], 50):.2f} ms (target <= 3 ms); "
              f"shared libraries: {len(ldd(ASB))}")
        start = pct(cpu["help"], 50)
        issue16_row("cli-start", f"p50 {start:.2f} ms CPU ({len(ldd(ASB))} shared libraries)",
                    f"floor {pct(cpu['floor'], 50):.2f} ms; asb's own libraries loaded by a "
                    f"do-nothing program {pct(cpu['own'], 50):.2f} ms; old layout's libraries "
                    f"{pct(cpu['old'], 50):.2f} ms"
                    + (f"; baseline binary {pct(cpu['bhelp'], 50):.2f} ms" if BASELINE else ""),
                    start <= 3)
        if os.geteuid() != 0 or not os.path.exists(RUNC):
            print("asb claim + asb exec: skipped (needs root and runc)")
        else:
            s.post(api(url, "sandboxtemplates"), timeout=30, json={
                "apiVersion": f"{EXT}/v1beta1", "kind": "SandboxTemplate",
                "metadata": {"name": "cli"},
                "spec": {"podTemplate": {"spec": {"containers": [{"name": "main",
                                                                  "image": "host"}]}}}}
                   ).raise_for_status()
            s.post(api(url, "sandboxwarmpools"), timeout=30, json={
                "apiVersion": f"{EXT}/v1beta1", "kind": "SandboxWarmPool",
                "metadata": {"name": "cli"},
                "spec": {"replicas": POOL, "sandboxTemplateRef": {"name": "cli"}}}
                   ).raise_for_status()
            total, floor, starts, base = claim_exec(url, s, env, CLAIMS, own)
            row("spawn floor (/bin/true), wall", floor)
            row("the pair's processes doing nothing, right after a claim, wall", starts)
            if BASELINE:
                row("baseline binary: asb claim + asb exec -- true, wall", parts(base, 0))
                row("  of which asb claim", parts(base, 1))
                row("  of which asb exec", parts(base, 2))
            row("asb claim + asb exec -- true (warm pool), wall", parts(total, 0))
            row("  of which asb claim", parts(total, 1))
            row("  of which asb exec", parts(total, 2))
            p50 = pct(parts(total, 0), 50)
            print(f"asb claim + asb exec p50 {p50:.2f} ms = floor + {p50 - pct(floor, 50):.2f} ms "
                  f"(target: floor + 10 ms)")
            f50 = pct(floor, 50)
            s50 = pct(starts, 50)
            issue16_row("cli-claim-exec", f"p50 {p50:.2f} ms = floor + {p50 - f50:.2f} ms",
                        f"floor {f50:.2f} ms; the pair's three processes doing nothing (two "
                        f"with asb's libraries, one /bin/true) right after a claim {s50:.2f} ms "
                        f"= floor + {s50 - f50:.2f} ms"
                        + (f"; baseline binary p50 {pct(parts(base, 0), 50):.2f} ms" if BASELINE
                           else ""),
                        p50 <= f50 + 10)
            s.delete(api(url, "sandboxwarmpools", "cli"), timeout=30)
    finally:
        if proc:
            proc.terminate()
            proc.wait(timeout=60)
        bench_cleanup.cleanup_state(state)
        shutil.rmtree(work, ignore_errors=True)
    print(f"load average during the run: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    return 0


def ldd(exe):
    out = subprocess.run(["ldd", exe], capture_output=True, text=True).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


if __name__ == "__main__":
    sys.exit(main())
