"""Escape suite, what /proc gives away (issue 30, sections 4 and 6): sandboxd (PID 1, same uid as
the code it runs) through /proc/1/{mem,environ,maps,fd,...} and process_vm_*, as the default
user, another runAsUser and the sandbox's root; the sandbox's own processes keep their /proc; the
cgroup view (a cgroup namespace of its own) and the masked kernel files. Each attack runs inside
a real runc sandbox; sandboxd answers and asb serve and a witness sandbox are healthy afterwards."""
import json
import os

import pytest

from escape_sandbox import escape, start_escape_server  # noqa: F401
from netpol_lab import lab  # noqa: F401
from resthelpers import UnixHTTPConnection

# Every way the review reached sandboxd's memory, files and fds: one line `LABEL RESULT` each,
# RESULT an errno name or OK.
PID1_PROBE = r"""
import ctypes, errno, os
def t(label, f):
    try:
        f()
        print(label, "OK")
    except OSError as e:
        print(label, errno.errorcode.get(e.errno, e.errno))
def read(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.read(fd, 64)
    finally:
        os.close(fd)
def opened(path, flags):
    os.close(os.open(path, flags))
for mem in ("/proc/1/mem", "/proc/1/task/1/mem"):
    t(mem + ":r", lambda: opened(mem, os.O_RDONLY))
    t(mem + ":rw", lambda: opened(mem, os.O_RDWR))
for f in ("environ", "maps", "smaps", "auxv", "stack", "io", "pagemap", "syscall"):
    t("/proc/1/" + f, lambda: read("/proc/1/" + f))
for d in ("fdinfo", "map_files", "cwd", "root"):
    t("/proc/1/" + d + ":list", lambda: os.listdir("/proc/1/" + d))
for link in ("cwd", "root", "exe"):
    t("/proc/1/" + link + ":readlink", lambda: os.readlink("/proc/1/" + link))
for n in range(8):
    t("/proc/1/fd/%d:readlink" % n, lambda: os.readlink("/proc/1/fd/%d" % n))
    t("/proc/1/fd/%d:open" % n, lambda: opened("/proc/1/fd/%d" % n, os.O_RDONLY | os.O_NONBLOCK))
libc = ctypes.CDLL(None, use_errno=True)
class Iov(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
buf = ctypes.create_string_buffer(8)
local, remote = Iov(ctypes.cast(buf, ctypes.c_void_p), 8), Iov(0x400000, 8)
for name, nr in (("process_vm_readv", 310), ("process_vm_writev", 311)):
    r = libc.syscall(nr, 1, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)
    print(name, "OK" if r >= 0 else errno.errorcode.get(ctypes.get_errno()))
"""

# What ps and a process's look at itself need, and a sibling's /proc (exec made it dumpable
# again): one line `LABEL RESULT`.
OWN_PROC_PROBE = r"""
import errno, os, subprocess
def t(label, f):
    try:
        f()
        print(label, "OK")
    except OSError as e:
        print(label, errno.errorcode.get(e.errno, e.errno))
def opened(path, flags):
    os.close(os.open(path, flags))
t("self/mem:rw", lambda: opened("/proc/self/mem", os.O_RDWR))
t("self/environ", lambda: open("/proc/self/environ", "rb").read())
t("self/maps", lambda: open("/proc/self/maps").read())
t("self/fd", lambda: os.listdir("/proc/self/fd"))
t("self/cwd", lambda: os.readlink("/proc/self/cwd"))
sib = subprocess.Popen(["sleep", "30"])
try:
    t("sibling/environ", lambda: open("/proc/%d/environ" % sib.pid, "rb").read())
    t("sibling/mem:rw", lambda: opened("/proc/%d/mem" % sib.pid, os.O_RDWR))
    t("sibling/fd", lambda: os.listdir("/proc/%d/fd" % sib.pid))
finally:
    sib.kill()
    sib.wait()
t("1/cmdline", lambda: open("/proc/1/cmdline", "rb").read())
t("1/status", lambda: open("/proc/1/status").read())
"""

USERS = {"default": None, "uid2000": {"runAsUser": 2000, "runAsGroup": 2000},
         "root": {"runAsUser": 0, "runAsGroup": 0}}

# Masked: each shows nothing (an empty file or an empty directory) where the kernel has it.
MASKED = ["/proc/acpi", "/proc/asound", "/proc/kcore", "/proc/keys", "/proc/latency_stats",
          "/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/proc/scsi",
          "/proc/cmdline", "/proc/config.gz", "/sys/firmware", "/sys/devices/virtual/powercap"]
READONLY = ["/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"]

MASK_PROBE = r"""
import os, sys
for p in sys.argv[1:]:
    if not os.path.lexists(p):
        print(p, "absent")
    elif os.path.isdir(p):
        print(p, "entries=%d" % len(os.listdir(p)))
    else:
        with open(p, "rb") as f:
            print(p, "bytes=%d" % len(f.read(4096)))
"""


def lines(out):
    return dict(line.rsplit(" ", 1) for line in out.splitlines())


def health(box):
    conn = UnixHTTPConnection(box.rest_sock, timeout=10)
    try:
        conn.request("GET", "/v1/health")
        resp = conn.getresponse()
        return resp.status, json.loads(resp.read() or b"null")
    finally:
        conn.close()


@pytest.mark.parametrize("user", sorted(USERS))
def test_sandboxd_is_out_of_reach_through_proc(escape, user):
    ctx = USERS[user]
    box = escape.sandbox("pid1-" + user,
                         container={"securityContext": ctx} if ctx else None)
    before = health(box)
    assert before[0] == 200, before
    if ctx:
        assert box.run("id", "-u")[1].strip() == str(ctx["runAsUser"])
    code, out, err = box.python(PID1_PROBE)
    assert code == 0, err
    res = lines(out)
    assert len(res) == 2 * 2 + 8 + 4 + 3 + 2 * 8 + 2, out
    reached = {k: v for k, v in res.items() if v == "OK"}
    assert not reached, f"sandboxd reachable from inside as {user}: {reached}"
    for label, v in res.items():
        # EACCES from /proc's ptrace check (or the fd directory's owner), EPERM from seccomp
        # (process_vm_*) or /proc/1/syscall.
        assert v in ("EACCES", "EPERM"), (label, v)
    # Listing /proc/1/fd is allowed to the sandbox's root (it owns the directory of a
    # non-dumpable process) but following an entry is not (checked above).
    assert health(box) == before
    assert box.run("echo", "still")[1] == "still\n"
    escape.assert_healthy()


def test_own_processes_keep_their_proc(escape):
    box = escape.sandbox("pid1-default")
    code, out, err = box.python(OWN_PROC_PROBE)
    assert code == 0, err
    res = lines(out)
    assert res and all(v == "OK" for v in res.values()), out
    code, out, err = box.run("ps", "-o", "pid=,user=,args=", "-p", "1")
    assert code == 0, err
    assert "/.asb/bin/sandboxd" in out and "sandbox" in out.split()[1], out
    assert box.run("sh", "-c", "grep '^Uid:' /proc/self/status")[1].split()[1] == "1000"


def test_cgroup_view_is_the_sandboxs_own(escape):
    box = escape.sandbox("pid1-default")
    code, out, err = box.run("cat", "/proc/self/cgroup")
    assert code == 0, err
    paths = [line.split(":", 2)[2] for line in out.splitlines()]
    assert paths and all(p == "/" for p in paths), out
    assert box.uid not in out and "asb" not in out, out
    ns = box.run("readlink", "/proc/self/ns/cgroup")[1].strip()
    assert ns and ns != os.readlink("/proc/self/ns/cgroup")
    # The cgroup files inside are still the sandbox's own: its memory limit (the 1Gi default).
    code, out, _ = box.run("cat", "/sys/fs/cgroup/memory/memory.limit_in_bytes")
    assert code == 0 and int(out) == 1 << 30, out
    # Not in the mount table either: the cgroup mounts' roots are "/".
    mounts = box.run("cat", "/proc/self/mountinfo")[1]
    assert box.uid not in "".join(m for m in mounts.splitlines() if " - cgroup " in m)


def test_host_kernel_files_are_masked(escape):
    box = escape.sandbox("pid1-default")
    code, out, err = box.run("python3", "-c", MASK_PROBE, *MASKED)
    assert code == 0, err
    res = lines(out)
    assert set(res) == set(MASKED), out
    for path, v in res.items():
        assert v in ("absent", "entries=0", "bytes=0"), (path, v)
    # What the host has is masked, not merely absent inside.
    for path in ("/proc/cmdline", "/proc/kcore", "/proc/keys"):
        if os.path.exists(path):
            assert res[path] == "bytes=0", (path, res[path])
    mounts = {}
    for line in box.run("cat", "/proc/self/mountinfo")[1].splitlines():
        f = line.split()
        mounts[f[4]] = f[5].split(",")
    for path in READONLY:
        if os.path.exists(path):
            assert "ro" in mounts.get(path, []), (path, mounts.get(path))


def test_what_mountinfo_still_shows(escape):
    """A bind mount's root in mountinfo is its source's path within the source's filesystem.
    The workspace, home and /tmp are on the sandbox's own ext4 image (paths inside it only);
    the rootfs skeleton, the generated /etc and sandboxd's binaries are on the state
    directory's filesystem, so their state-directory paths show (docs/security.md says so).
    Nothing else under the state directory does, and no host path of the sandbox's own disk."""
    box = escape.sandbox("pid1-default")
    code, out, err = box.run("cat", "/proc/self/mountinfo")
    assert code == 0, err
    roots = {}
    for line in out.splitlines():
        f = line.split()
        roots[f[4]] = f[3]
    showing = {point for point, root in roots.items() if escape.state_dir in root}
    assert showing == {"/", "/etc", "/.asb/bin", "/.asb/lib"}, roots
    assert roots["/workspace"] == "/workspace" and roots["/tmp"] == "/tmp", roots


def test_cgroup_view_with_bridge_networking(lab, tmp_path_factory):
    """With bridge networking /sys is a skeleton (docs/security.md, User namespaces): the cgroup
    namespace and the masks hold there too."""
    esc, cleanup = start_escape_server(tmp_path_factory, env={
        "ASB_NETWORK": "bridge", "ASB_POD_CIDR": "10.244.0.0/24", "ASB_DNS_UPSTREAM": "203.0.113.10"})
    try:
        test_cgroup_view_is_the_sandboxs_own(esc)
        test_host_kernel_files_are_masked(esc)
        esc.assert_healthy()
    finally:
        esc.close()
        cleanup()
