#!/usr/bin/python3
"""sandboxd's own start (issue 16: cold create -> Ready and the refill rows pay it once per
sandbox): from posix_spawn to the first answered `GET /v1/health`, the way a sandbox runs it.

Each sample spawns sandboxd as src/local/container/local-bundle.c does: through the ELF loader copied with
its libraries into one directory (what local-inject.c makes of ldd's output), `--library-path`
that directory, REST and gRPC on inherited listening sockets (fds 3 and 4, made here on loopback
ports found at run time), then sends one health request at once (the kernel queues it on the
listening socket, as asb serve's health check is). Measured per sample:
  - wall: spawn -> the health reply read;
  - CPU until then: the sum of the run time of sandboxd's threads (/proc/PID/task/*/schedstat),
    read right after the reply, so it is the start's CPU, not the shutdown's;
  - wakeups while idle (BENCH_SANDBOXD_IDLE_S seconds, 2 by default, one sample per binary):
    the voluntary context switches of all its threads over that time.
BENCH_SANDBOXD_RUNS (100) samples per binary; BENCH_BASELINE_BUILD=<dir holding another build's
bin/sandboxd> (e.g. main's) measures that binary too, alternated with this one, so both see the
same load. The spawn floor (posix_spawn + waitpid of /bin/true) is measured alongside."""
import fcntl
import glob
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

from bench_libasb import pct

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
from proc_threads import voluntary_switches  # noqa: E402
BUILD = os.environ.get("ASB_BUILD", os.path.join(ROOT, "build"))
RUNS = int(os.environ.get("BENCH_SANDBOXD_RUNS", "100"))
IDLE_S = float(os.environ.get("BENCH_SANDBOXD_IDLE_S", "2"))
BASELINE = os.environ.get("BENCH_BASELINE_BUILD")
LOADER = "ld-linux-x86-64.so.2"


def inject(sandboxd, work, name):
    """The binary and its ldd libraries copied into work/name/{bin,lib}, as local-inject.c does;
    returns (loader, libdir, binary, number of shared libraries)."""
    base = os.path.join(work, name)
    os.makedirs(os.path.join(base, "bin"))
    os.makedirs(os.path.join(base, "lib"))
    binary = os.path.join(base, "bin", "sandboxd")
    shutil.copy2(sandboxd, binary)
    out = subprocess.run(["ldd", sandboxd], capture_output=True, text=True, check=True).stdout
    n = 0
    for line in out.splitlines():
        parts = line.split()
        path = parts[2] if len(parts) >= 3 and parts[1] == "=>" else parts[0]
        if not path.startswith("/"):
            continue  # linux-vdso
        dest = LOADER if os.path.basename(path).startswith("ld-linux") else os.path.basename(path)
        shutil.copy2(path, os.path.join(base, "lib", dest))
        n += dest != LOADER
    return os.path.join(base, "lib", LOADER), os.path.join(base, "lib"), binary, n


def listener():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    s.listen(128)
    return s


def high_fd(fd):
    """A close-on-exec copy of fd numbered >= 10, so that dup2 onto 3 and 4 never hits itself."""
    return fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)


def threads_cpu_ms(pid):
    total = 0
    for path in glob.glob(f"/proc/{pid}/task/*/schedstat"):
        try:
            with open(path) as f:
                total += int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass  # a thread that exited meanwhile
    return total / 1e6


def start_once(inj, work, idle_s=0.0):
    """One sandboxd: (wall ms to the health reply, CPU ms until then, idle wakeups/s or None)."""
    loader, libdir, binary, _ = inj
    rest, grpc = listener(), listener()
    rfd, gfd = high_fd(rest.fileno()), high_fd(grpc.fileno())
    root = tempfile.mkdtemp(dir=work)
    devnull = os.open(os.devnull, os.O_WRONLY | os.O_CLOEXEC)
    argv = [loader, "--library-path", libdir, binary, "--root-dir", root, "--listen-host",
            "127.0.0.1", "--rest-fd", "3", "--grpc-fd", "4"]
    fa = [(os.POSIX_SPAWN_DUP2, rfd, 3), (os.POSIX_SPAWN_DUP2, gfd, 4),
          (os.POSIX_SPAWN_DUP2, devnull, 1), (os.POSIX_SPAWN_DUP2, devnull, 2)]
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": root}
    c = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    c.settimeout(10)
    t0 = time.perf_counter()
    pid = os.posix_spawn(loader, argv, env, file_actions=fa)
    try:
        c.connect(rest.getsockname())
        c.sendall(b"GET /v1/health HTTP/1.0\r\nHost: sandbox\r\n\r\n")
        reply = b""
        while True:
            chunk = c.recv(4096)
            if not chunk:
                break
            reply += chunk
        wall = (time.perf_counter() - t0) * 1000
        cpu = threads_cpu_ms(pid)
        if not reply.startswith(b"HTTP/1.") or b" 200 " not in reply.split(b"\r\n")[0]:
            raise RuntimeError(f"sandboxd health: {reply[:80]!r}")
        wakeups = None
        if idle_s > 0:
            time.sleep(0.2)  # the connection's thread gone
            before = voluntary_switches(pid)
            time.sleep(idle_s)
            wakeups = (voluntary_switches(pid) - before) / idle_s
        return wall, cpu, wakeups
    finally:
        c.close()
        os.kill(pid, signal.SIGTERM)
        _, status, _ = os.wait4(pid, 0)
        for fd in (rfd, gfd, devnull):
            os.close(fd)
        rest.close()
        grpc.close()
        shutil.rmtree(root, ignore_errors=True)


def spawn_floor_ms():
    t0 = time.perf_counter()
    pid = os.posix_spawn("/bin/true", ["/bin/true"], {})
    os.waitpid(pid, 0)
    return (time.perf_counter() - t0) * 1000


def main():
    cases = [("this tree", os.path.join(BUILD, "bin", "sandboxd"))]
    if BASELINE:
        cases.append(("baseline", os.path.join(BASELINE, "bin", "sandboxd")))
    for _, path in cases:
        if not os.access(path, os.X_OK):
            print(f"sandboxd start: skipped ({path} not built)")
            return 0
    work = tempfile.mkdtemp(prefix="asb-bench-sandboxd-")
    try:
        injected = {name: inject(path, work, f"inject-{i}") for i, (name, path) in enumerate(cases)}
        wall = {name: [] for name, _ in cases}
        cpu = {name: [] for name, _ in cases}
        floor = []
        for name, _ in cases:  # warm the page cache
            start_once(injected[name], work)
        for _ in range(RUNS):
            floor.append(spawn_floor_ms())
            for name, _ in cases:
                w, c, _ = start_once(injected[name], work)
                wall[name].append(w)
                cpu[name].append(c)
        idle = {name: start_once(injected[name], work, IDLE_S)[2] for name, _ in cases}
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"{'measurement':<62} {'n':>5} {'p50':>8} {'p99':>8}")
    print(f"{'spawn floor (posix_spawn + waitpid of /bin/true), wall':<62} {len(floor):>5} "
          f"{pct(floor, 50):>8.2f} {pct(floor, 99):>8.2f} ms")
    for name, _ in cases:
        libs = injected[name][3]
        for label, v in ((f"sandboxd ({name}, {libs} libs) spawn -> health reply, wall", wall[name]),
                         (f"sandboxd ({name}) CPU until the reply, all threads", cpu[name])):
            print(f"{label:<62} {len(v):>5} {pct(v, 50):>8.2f} {pct(v, 99):>8.2f} ms")
        print(f"sandboxd ({name}) idle wakeups: {idle[name]:.1f}/s over {IDLE_S:g} s")
    if BASELINE:
        a, b = pct(wall["this tree"], 50), pct(wall["baseline"], 50)
        print(f"start -> health p50: {a:.2f} ms vs baseline {b:.2f} ms ({b - a:+.2f} ms saved)")
    print(f"load average during the run: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
