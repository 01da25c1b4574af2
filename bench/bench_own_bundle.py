#!/usr/bin/python3
"""A bare `runc run` of *our own* bundle: the config.json of a running sandbox (its mounts, user
namespace, seccomp profile, masked paths, namespaces), with /usr/bin/true as the process and a
cgroup of its own, run by runc directly, without asb serve. It tells how much of a cold create is
runc's cost for this container rather than asb serve's own overhead (bench-local-sandbox.py
prints it beside the bare `runc run` of a trivial bundle).

A user-namespaced sandbox names its rootfs at /run/asb/rootfs, which asb serve binds in a private
mount namespace around each `runc run` (local-idmap.c). The same is done here once: this file,
run as a script, is a helper that enters a mount namespace of its own (slave of the host's),
binds the rootfs there, and then times one `runc run` per line it reads on stdin, answering the
milliseconds on stdout. Nothing of it outlives the helper (its namespace goes with it).

The same helper also gives the floor of create -> Ready for this container: `runc run --detach`
of the bundle with its own process, sandboxd, on two listening sockets of the helper's (fds 3 and
4, as asb serve passes them), until sandboxd answers the health request asb serve sends (queued
on the socket as soon as runc returns); then the container is killed and deleted."""
import ctypes
import fcntl
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

IDMAP_ROOTFS = "/run/asb/rootfs"  # LOCAL_IDMAP_ROOTFS
CLONE_NEWNS = 0x00020000
MS_BIND, MS_REC, MS_SLAVE = 4096, 16384, 1 << 19


HEALTH_REQUEST = b"GET /v1/health HTTP/1.0\r\nHost: sandbox\r\n\r\n"  # rec_health's


def make_bundle(state, uid, dest, process="true"):
    """dest/config.json from the running sandbox uid of the server at state, with /usr/bin/true as
    its process (process="true") or its own (sandboxd: "sandboxd"): returns (bundle dir, the
    rootfs to stage at /run/asb/rootfs or None)."""
    with open(os.path.join(state, "sandboxes", uid, "bundle", "config.json")) as f:
        cfg = json.load(f)
    if process == "true":
        cfg["process"]["args"] = ["/usr/bin/true"]
    cfg["process"]["terminal"] = False
    linux = cfg.setdefault("linux", {})
    # A cgroup beside the sandbox's own (the same parent, which asb serve removes at its stop).
    parent = os.path.dirname(linux.get("cgroupsPath") or "/asb/x")
    linux["cgroupsPath"] = os.path.join(parent, "bench-own-bundle")
    os.makedirs(dest, exist_ok=True)
    with open(os.path.join(dest, "config.json"), "w") as f:
        json.dump(cfg, f)
    stage = None
    if cfg["root"]["path"] == IDMAP_ROOTFS:
        shared = os.path.join(state, "shared")
        roots = sorted(d for d in os.listdir(shared) if d.startswith("host-rootfs-"))
        if not roots:
            raise RuntimeError(f"no shared host rootfs in {shared}")
        stage = os.path.join(shared, roots[0])
    return dest, stage


class OwnBundleRunner:
    """The helper process; run(i) times one `runc run` of the bundle in ms, health(i) one
    `runc run --detach` of sandboxd_bundle until sandboxd's health answer."""

    def __init__(self, runc, runc_root, bundle, stage, sandboxd_bundle=""):
        self.p = subprocess.Popen([sys.executable, os.path.abspath(__file__), runc, runc_root,
                                   bundle, stage or "", sandboxd_bundle],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def ask(self, line):
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()
        answer = self.p.stdout.readline()
        if not answer:
            raise RuntimeError("bare runc run of our own bundle: the helper died")
        return float(answer)

    def run(self, i):
        return self.ask(f"run {i}")

    def health(self, i):
        return self.ask(f"health {i}")

    def close(self):
        self.p.stdin.close()
        self.p.wait(timeout=30)


def enter_stage(stage):
    """This process into a mount namespace of its own with the rootfs bound at IDMAP_ROOTFS."""
    if not stage:
        return
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mount.argtypes = [ctypes.c_char_p] * 3 + [ctypes.c_ulong, ctypes.c_void_p]
    if (libc.unshare(CLONE_NEWNS) != 0
            or libc.mount(None, b"/", None, MS_REC | MS_SLAVE, None) != 0
            or libc.mount(stage.encode(), IDMAP_ROOTFS.encode(), None, MS_BIND | MS_REC,
                          None) != 0):
        raise OSError(ctypes.get_errno(), "cannot stage the rootfs at " + IDMAP_ROOTFS)


def machine_cpu():
    """(all, idle + iowait + steal) jiffies of /proc/stat."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return sum(v), v[3] + v[4] + v[7]


def machine_cpu_per(c0, c1, n):
    """Between two machine_cpu() samples: (busy CPU ms per item of n, busy fraction)."""
    busy = (c1[0] - c0[0]) - (c1[1] - c0[1])
    return busy * 1000 / os.sysconf("SC_CLK_TCK") / n, busy / max(1, c1[0] - c0[0])


def churn(runc, runc_root, bundle, stage, n, workers):
    """The floor of a pool refill with runc and sandboxd alone: n containers of our own bundle
    (make_bundle(process="sandboxd")) are started until sandboxd answers health
    (start_sandboxd), then torn down (SIGKILL through a pidfd, then `runc delete`, as asb serve
    does) while n new ones start, on `workers` threads. Prints sandboxes/s, the machine's CPU per
    sandbox (ms) and how busy the machine was; removes every container."""
    enter_stage(stage)
    with open(os.path.join(bundle, "config.json")) as f:
        cfg = json.load(f)
    parent = os.path.dirname(cfg["linux"].get("cgroupsPath") or "/asb/x")
    top = os.path.join(os.path.dirname(bundle), "churn")
    made = {}

    def start(name):
        d = os.path.join(top, name)
        os.makedirs(d)
        cfg_i = {**cfg, "linux": {**cfg["linux"], "cgroupsPath": os.path.join(parent, name)}}
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(cfg_i, f)
        made[name] = start_sandboxd(runc, runc_root, d, name, d)

    def stop(name):
        kill_and_delete(runc, runc_root, name, made.pop(name))

    try:
        for i in range(n):
            start(f"old{i}")
        jobs = [job for i in range(n) for job in ((stop, f"old{i}"), (start, f"new{i}"))]
        lock = threading.Lock()
        errors = []

        def worker():
            while True:
                with lock:
                    if not jobs or errors:
                        return
                    fn, name = jobs.pop(0)
                try:
                    fn(name)
                except Exception as e:  # reported below; the other workers stop
                    errors.append(e)

        c0, t0 = machine_cpu(), time.perf_counter()
        threads = [threading.Thread(target=worker) for _ in range(workers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed, c1 = time.perf_counter() - t0, machine_cpu()
        if errors:
            raise errors[0]
        cpu, busy = machine_cpu_per(c0, c1, n)
        print(f"{n / elapsed:.2f} {cpu:.2f} {busy:.3f}", flush=True)
    finally:
        for name in list(made):
            subprocess.run([runc, "--root", runc_root, "delete", "--force", name],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def run_churn(runc, runc_root, bundle, stage, n, workers):
    """churn() in a helper process (its own mount namespace): (sandboxes/s, machine CPU ms per
    sandbox, machine busy fraction)."""
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "churn", runc, runc_root,
                          bundle, stage or "", str(n), str(workers)],
                         capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        raise RuntimeError(f"the refill's floor (bench_own_bundle.churn) failed:\n{out.stderr}")
    rate, cpu, busy = out.stdout.split()
    return float(rate), float(cpu), float(busy)


def kill_and_delete(runc, runc_root, name, pid):
    """SIGKILL through a pidfd, a wait for the exit, then `runc delete` (as the teardown does)."""
    fd = os.pidfd_open(pid)
    try:
        os.kill(pid, signal.SIGKILL)
        select.select([fd], [], [], 2)
    finally:
        os.close(fd)
    subprocess.run([runc, "--root", runc_root, "delete", "--force", name], check=True)


def run_with_fds(binary, argv, fds):
    """Runs argv (stdio on /dev/null) with fds as its 3, 4, ... and waits for it; raises when it
    fails. posix_spawn, not fork: churn() calls it from several threads."""
    devnull = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
    # Above 10 first, so that no dup2 onto 3, 4, ... clobbers another of fds.
    high = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10) for fd in fds]
    try:
        actions = [(os.POSIX_SPAWN_DUP2, devnull, i) for i in range(3)]
        actions += [(os.POSIX_SPAWN_DUP2, fd, 3 + i) for i, fd in enumerate(high)]
        pid = os.posix_spawn(binary, argv, os.environ, file_actions=actions)
        code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
        if code != 0:
            raise RuntimeError(f"{' '.join(argv)}: exit status {code}")
    finally:
        for fd in [devnull, *high]:
            os.close(fd)


def start_sandboxd(runc, runc_root, bundle, name, sockdir):
    """`runc run --detach` of bundle (sandboxd as its process) on two listening sockets made in
    sockdir (fds 3 and 4 in the container, as asb serve passes them), then the health request asb
    serve sends, queued as soon as runc returned; returns the container's pid once sandboxd has
    answered it with 200."""
    listeners = []
    try:
        for n in ("rest.sock", "grpc.sock"):
            ls = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            listeners.append(ls)
            ls.bind(os.path.join(sockdir, n))
            ls.listen(64)
        pidfile = os.path.join(sockdir, "pid")
        run_with_fds(runc, [runc, "--root", runc_root, "run", "--detach", "--preserve-fds", "2",
                            "--pid-file", pidfile, "--bundle", bundle, name],
                     [ls.fileno() for ls in listeners])
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as c:
            c.settimeout(10)
            c.connect(os.path.join(sockdir, "rest.sock"))
            c.sendall(HEALTH_REQUEST)
            answer = c.recv(64)
        with open(pidfile) as f:
            pid = int(f.read())
        if not (answer.startswith(b"HTTP/1.") and answer[8:12] == b" 200"):
            kill_and_delete(runc, runc_root, name, pid)
            raise RuntimeError(f"sandboxd's health answer: {answer!r}")
        return pid
    finally:
        for ls in listeners:
            ls.close()


def health_once(runc, runc_root, bundle, name):
    """ms from spawning `runc run --detach` of bundle to sandboxd's health answer
    (start_sandboxd); the container is removed after."""
    sockdir = os.path.join(os.path.dirname(bundle), "health-" + name)
    os.makedirs(sockdir)
    try:
        t0 = time.perf_counter()
        pid = start_sandboxd(runc, runc_root, bundle, name, sockdir)
        ms = (time.perf_counter() - t0) * 1000
        kill_and_delete(runc, runc_root, name, pid)
        return ms
    finally:
        shutil.rmtree(sockdir, ignore_errors=True)


def helper(runc, runc_root, bundle, stage, sandboxd_bundle):
    enter_stage(stage)
    for line in sys.stdin:
        what, i = line.split()
        if what == "health":
            ms = health_once(runc, runc_root, sandboxd_bundle, f"ownd{i}")
        else:
            t0 = time.perf_counter()
            subprocess.run([runc, "--root", runc_root, "run", "--bundle", bundle, f"own{i}"],
                           check=True, stdin=subprocess.DEVNULL)
            ms = (time.perf_counter() - t0) * 1000
        print(f"{ms:.3f}", flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "churn":
        churn(*sys.argv[2:5], sys.argv[5] or None, int(sys.argv[6]), int(sys.argv[7]))
    else:
        helper(*sys.argv[1:4], sys.argv[4] or None, sys.argv[5])
