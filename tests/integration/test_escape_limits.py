"""Escape suite, default limits (issue 13, hole 2): a Sandbox that sets no resources.limits still
gets a memory limit and a CPU quota (LimitRange-like defaults of `asb serve`, flags and env),
and its ephemeral storage (workspace, home, /tmp) is a filesystem of its own: writing past
the limit fails with ENOSPC inside, the host's disk is not consumed beyond it, and nothing is
left on the host once the Sandbox is deleted. Cgroup paths come from the container's
/proc/<pid>/cgroup and /proc/self/mountinfo: no machine facts are hard-coded."""
import json
import os
import shlex
import subprocess
import time

import pytest

from asb_apiserver import CORE, AsbServer, asb_binary, stop_servers
from grpc_helpers import Client
from local_sandbox import (RUNC, condition, create, get_sandbox, injected_sandboxd,  # noqa: F401
                           sbx_state, sockets, wait_ready)
from test_local_sandbox_runtime import rest

MiB = 1 << 20
GiB = 1 << 30

# Writes N MiB of zeros to PATH and fsyncs; prints "ok N" or "err ERRNO_NAME WRITTEN".
WRITER = r"""
import errno, os, sys
path, want, n = sys.argv[1], int(sys.argv[2]), 0
try:
    with open(path, "wb") as f:
        buf = b"\0" * (1 << 20)
        for _ in range(want):
            f.write(buf)
            n += 1
        f.flush()
        os.fsync(f.fileno())
    print("ok", n)
except OSError as e:
    print("err", errno.errorcode.get(e.errno, e.errno), n)
"""


@pytest.fixture
def serve(sbx_state, tmp_path):
    """serve(*flags, env=None) -> a started AsbServer with the runc runtime on sbx_state and
    the given command-line flags after `asb serve --listen ...`."""
    servers = []

    def start(*flags, env=None):
        class Flagged(AsbServer):
            def command(self):
                script = 'exec "$0" "$@" ' + " ".join(shlex.quote(f) for f in flags)
                return ["sh", "-c", script, *super().command()]

        e = {"ASB_RUNTIME": RUNC, "ASB_SANDBOXD": injected_sandboxd(), **(env or {})}
        s = Flagged(sbx_state, tmp_path / f"asb-serve-{len(servers)}.log", e)
        servers.append(s)
        return s.start()

    yield start
    stop_servers(servers)


def runc_pid(state_dir, uid):
    out = subprocess.run([RUNC, "--root", os.path.join(state_dir, "runc"), "state", uid],
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out)["pid"]


def cgroup_file(pid, controller, v1_name, v2_name):
    """The host path of a cgroup control file of process pid, v1 or v2."""
    paths = {}
    for line in open(f"/proc/{pid}/cgroup"):
        _, ctrls, path = line.rstrip("\n").split(":", 2)
        for c in ctrls.split(","):
            paths[c] = path
    mounts = [line.split() for line in open("/proc/self/mountinfo")]
    for m in mounts:
        sep = m.index("-")
        fstype, opts = m[sep + 1], m[sep + 3].split(",")
        if fstype == "cgroup" and controller in opts and controller in paths:
            return os.path.join(m[4], paths[controller].lstrip("/"), v1_name)
    for m in mounts:
        if m[m.index("-") + 1] == "cgroup2" and "" in paths:
            return os.path.join(m[4], paths[""].lstrip("/"), v2_name)
    raise AssertionError(f"no {controller} cgroup for pid {pid}")


def memory_limit(pid):
    v = open(cgroup_file(pid, "memory", "memory.limit_in_bytes", "memory.max")).read().strip()
    return None if v == "max" or int(v) >= 1 << 62 else int(v)


def cpu_limit_millis(pid):
    """CFS quota / period in millicores, None when unlimited."""
    f = cgroup_file(pid, "cpu", "cpu.cfs_quota_us", "cpu.max")
    if f.endswith("cpu.max"):
        quota, period = open(f).read().split()
        return None if quota == "max" else int(quota) * 1000 // int(period)
    quota = int(open(f).read())
    period = int(open(os.path.join(os.path.dirname(f), "cpu.cfs_period_us")).read())
    return None if quota < 0 else quota * 1000 // period


def run(client, *cmd, timeout=60):
    r = client.execute(list(cmd), timeout=timeout)
    return r.exit_code, r.stdout.decode(), r.stderr.decode()


def write_inside(client, path, mib):
    code, out, err = run(client, "python3", "-c", WRITER, path, str(mib))
    assert code == 0, (out, err)
    return out.split()


def host_usage(path):
    """Bytes allocated on the host by files under path, not crossing into other filesystems."""
    dev, total = os.lstat(path).st_dev, 0
    for root, dirs, files in os.walk(path):
        dirs[:] = [d for d in dirs if os.lstat(os.path.join(root, d)).st_dev == dev]
        for f in files:
            st = os.lstat(os.path.join(root, f))
            if st.st_dev == dev:
                total += st.st_blocks * 512
    return total


def free_bytes(path):
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def mounts_under(path):
    out = []
    for line in open("/proc/self/mountinfo"):
        mp = line.split()[4]
        if mp == path or mp.startswith(path.rstrip("/") + "/"):
            out.append(mp)
    return out


def super_options(mount_point):
    """The filesystem's own options (after the " - " of mountinfo) of the mount at mount_point."""
    for line in open("/proc/self/mountinfo"):
        f = line.split()
        if f[4] == mount_point:
            return f[f.index("-") + 3].split(",")
    raise AssertionError(f"nothing mounted at {mount_point}")


def loops_under(path):
    out = subprocess.run(["losetup", "-a"], capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if path in line]


def wait_gone(asb, name, timeout=20):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if asb.get(asb.path(CORE, "sandboxes", "default", name)).status_code == 404:
            return
        time.sleep(0.05)
    raise AssertionError(f"sandbox {name} not deleted within {timeout}s")


def test_defaults_apply_when_the_manifest_sets_none(serve, sbx_state):
    asb = serve()
    uid = create(asb, "nolimits")["metadata"]["uid"]
    obj = wait_ready(asb, "nolimits")
    pid = runc_pid(sbx_state, uid)
    # Built-in defaults (docs/local-sandboxes.md): 1Gi memory, 2 CPUs, 10Gi ephemeral storage.
    assert memory_limit(pid) == GiB
    assert cpu_limit_millis(pid) == 2000
    res = obj["status"]["resources"]
    assert res["limits"] == {"memory": "1Gi", "cpu": "2", "ephemeral-storage": "10Gi"}
    assert sorted(res["defaulted"]) == ["cpu", "ephemeral-storage", "memory"]
    disk = os.path.join(sbx_state, "sandboxes", uid, "disk")
    st = os.statvfs(disk)
    assert 9 * GiB < st.f_blocks * st.f_frsize <= 10 * GiB


def test_flags_and_env_override_defaults_and_manifest_wins(serve, sbx_state):
    # The flag wins over the environment; the environment over the built-in default.
    asb = serve("--default-memory", "200Mi", "--default-ephemeral-storage", "48Mi",
                env={"ASB_DEFAULT_MEMORY": "300Mi", "ASB_DEFAULT_CPU": "500m"})
    a = create(asb, "defaulted")["metadata"]["uid"]
    b = create(asb, "own", container={"resources": {"limits": {
        "memory": "256Mi", "cpu": "250m", "ephemeral-storage": "24Mi"}}})["metadata"]["uid"]
    oa, ob = wait_ready(asb, "defaulted"), wait_ready(asb, "own")
    pa, pb = runc_pid(sbx_state, a), runc_pid(sbx_state, b)
    assert memory_limit(pa) == 200 * MiB and cpu_limit_millis(pa) == 500
    assert memory_limit(pb) == 256 * MiB and cpu_limit_millis(pb) == 250
    assert oa["status"]["resources"]["limits"] == {"memory": "200Mi", "cpu": "500m",
                                                   "ephemeral-storage": "48Mi"}
    assert ob["status"]["resources"] == {"limits": {"memory": "256Mi", "cpu": "250m",
                                                    "ephemeral-storage": "24Mi"}, "defaulted": []}
    for uid, size in ((a, 48 * MiB), (b, 24 * MiB)):
        st = os.statvfs(os.path.join(sbx_state, "sandboxes", uid, "disk"))
        assert size // 2 < st.f_blocks * st.f_frsize <= size


@pytest.mark.parametrize("flag,env", [("--default-memory=lots", None),
                                      (None, {"ASB_DEFAULT_EPHEMERAL_STORAGE": "10Gb"})])
def test_bad_default_is_a_startup_error(sbx_state, flag, env):
    e = {**os.environ, "ASB_STATE_DIR": sbx_state, "ASB_RUNTIME": RUNC, **(env or {})}
    p = subprocess.run([asb_binary(), "serve", "--listen", "127.0.0.1:0", *([flag] if flag else [])],
                       capture_output=True, text=True, env=e, timeout=20)
    assert p.returncode == 2
    assert "is not a Kubernetes quantity" in p.stderr
    assert ("--default-memory" if flag else "ASB_DEFAULT_EPHEMERAL_STORAGE") in p.stderr


def test_ephemeral_storage_is_enforced_and_nothing_is_left(serve, sbx_state):
    limit = 64 * MiB
    asb = serve(env={"ASB_DEFAULT_EPHEMERAL_STORAGE": "64Mi"})
    base_usage = host_usage(sbx_state)
    free0 = free_bytes(sbx_state)
    uid = create(asb, "filler")["metadata"]["uid"]
    wait_ready(asb, "filler")
    rest_sock, grpc_sock = sockets(sbx_state, uid)
    c = Client(f"unix:{grpc_sock}")
    try:
        # Everything the sandbox can write shares the limit: each target fails with ENOSPC.
        for target in ("/workspace/big", "/tmp/big", "/home/sandbox/big"):
            result = write_inside(c, target, 4 * limit // MiB)
            assert result[0] == "err" and result[1] in ("ENOSPC", "EDQUOT"), (target, result)
            assert int(result[2]) * MiB <= limit, (target, result)
            # The host's disk holds at most the limit for this sandbox.
            assert host_usage(sbx_state) - base_usage <= limit + 8 * MiB
            # Other activity on this machine moves free space too: a generous margin, still
            # far below what the write asked for (4x the limit).
            assert free0 - free_bytes(sbx_state) < limit + 128 * MiB
            assert run(c, "rm", "-f", target)[0] == 0
        # The sandbox still serves files and exec afterwards.
        assert rest(rest_sock, "PUT", "/v1/files/after.txt", b"still here")[0] == 204
        assert rest(rest_sock, "GET", "/v1/files/after.txt") == (200, b"still here")
        assert run(c, "cat", "/workspace/after.txt") == (0, "still here", "")
        ws = os.path.join(sbx_state, "sandboxes", uid, "workspace", "after.txt")
        assert open(ws, "rb").read() == b"still here"
    finally:
        c.close()
    assert mounts_under(sbx_state) and loops_under(sbx_state)  # the mechanism is in place
    # No flush reaches the host's disk from the sandbox's filesystem (no journal, not kept after
    # the sandbox): its fsync calls do not flush the host, nor do its mount and unmount.
    assert "nobarrier" in super_options(os.path.join(sbx_state, "sandboxes", uid, "disk"))
    assert asb.delete(asb.path(CORE, "sandboxes", "default", "filler")).status_code == 200
    wait_gone(asb, "filler")
    base = os.path.join(sbx_state, "sandboxes", uid)
    deadline = time.monotonic() + 10
    while (mounts_under(sbx_state) or loops_under(sbx_state) or os.path.exists(base)) and \
            time.monotonic() < deadline:
        time.sleep(0.05)
    assert mounts_under(sbx_state) == []
    assert loops_under(sbx_state) == []
    assert not os.path.exists(base), list(os.walk(base))


def test_storage_survives_restart_and_suspend(serve, sbx_state):
    asb = serve(env={"ASB_DEFAULT_EPHEMERAL_STORAGE": "32Mi"})
    uid = create(asb, "keeper")["metadata"]["uid"]
    wait_ready(asb, "keeper")
    rest_sock, grpc_sock = sockets(sbx_state, uid)
    assert rest(rest_sock, "PUT", "/v1/files/kept.txt", b"kept")[0] == 204
    assert asb.stop() == 0
    asb = serve(env={"ASB_DEFAULT_EPHEMERAL_STORAGE": "32Mi"})  # re-adopts the running container
    wait_ready(asb, "keeper")
    disk = os.path.join(sbx_state, "sandboxes", uid, "disk")
    assert mounts_under(sbx_state).count(disk) == 1
    p = asb.path(CORE, "sandboxes", "default", "keeper")
    assert asb.merge_patch(p, {"spec": {"operatingMode": "Suspended"}}).status_code == 200
    wait_ready(asb, "keeper", want="False", reason="SandboxSuspended")
    assert asb.merge_patch(p, {"spec": {"operatingMode": "Running"}}).status_code == 200
    wait_ready(asb, "keeper")
    c = Client(f"unix:{grpc_sock}")
    try:
        assert run(c, "cat", "/workspace/kept.txt") == (0, "kept", "")
        result = write_inside(c, "/tmp/big", 128)
        assert result[0] == "err" and result[1] in ("ENOSPC", "EDQUOT"), result
    finally:
        c.close()
    assert condition(get_sandbox(asb, "keeper"), "Ready")["status"] == "True"
    assert asb.delete(p).status_code == 200
    wait_gone(asb, "keeper")
    deadline = time.monotonic() + 10
    while (mounts_under(sbx_state) or loops_under(sbx_state)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert mounts_under(sbx_state) == [] and loops_under(sbx_state) == []
