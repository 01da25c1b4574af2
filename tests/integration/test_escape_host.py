"""Escape suite, the host from inside (issue 13): kernel and host settings through /proc and
/sys, the server's bearer token, and the control plane's loopback ports, each tried from inside a
real runc sandbox (networking off, the test servers' default) and asserted to fail, with asb serve
and a witness sandbox healthy afterwards. The same with networking on: test_escape_network.py."""
import errno
import os

import pytest

from escape_sandbox import escape  # noqa: F401

# Writes that would change the host (or the sandbox's view of the kernel) if they went through.
WRITES = ["/proc/sys/kernel/hostname", "/proc/sys/kernel/core_pattern", "/proc/sys/vm/drop_caches",
          "/proc/sys/net/ipv4/ip_forward", "/proc/sysrq-trigger", "/proc/sys/kernel/modprobe",
          "/sys/kernel/uevent_helper", "/sys/fs/cgroup/pids/pids.max",
          "/sys/fs/cgroup/memory/memory.limit_in_bytes"]

WRITE_PROBE = r"""
import errno, os, sys
for path in sys.argv[1:]:
    try:
        fd = os.open(path, os.O_WRONLY)
        try:
            os.write(fd, b"1")
            print(path, "WRITTEN")
        except OSError as e:
            print(path, errno.errorcode[e.errno])
        finally:
            os.close(fd)
    except OSError as e:
        print(path, errno.errorcode[e.errno])
"""

CONNECT_PROBE = r"""
import errno, socket, sys
for port in sys.argv[1:]:
    s = socket.socket()
    s.settimeout(2)
    try:
        s.connect(("127.0.0.1", int(port)))
        print(port, "CONNECTED")
    except OSError as e:
        print(port, errno.errorcode.get(e.errno, "TIMEOUT") if e.errno else "TIMEOUT")
    finally:
        s.close()
"""


@pytest.fixture
def box(escape):
    b = escape.sandbox("attacker")
    yield b
    escape.assert_healthy()


def test_proc_and_sys_writes_fail(box):
    hostname = box.run("hostname")[1]
    code, out, err = box.run("python3", "-c", WRITE_PROBE, *WRITES)
    assert code == 0, err
    results = dict(line.rsplit(" ", 1) for line in out.splitlines())
    assert set(results) == set(WRITES), out
    for path, res in results.items():
        # Read-only mounts (EROFS), root-owned files (EACCES), absent files (ENOENT): never a
        # write.
        assert res in ("EROFS", "EACCES", "EPERM", "ENOENT"), (path, res)
    # What the host kernel has, the sandbox sees and cannot write (this VM's kernel has no
    # sysrq, for one).
    for path in ("/proc/sys/kernel/hostname", "/proc/sysrq-trigger", "/proc/sys/vm/drop_caches"):
        if os.path.exists(path):
            assert results[path] in ("EROFS", "EACCES"), (path, results[path])
    assert box.run("hostname")[1] == hostname


def test_masked_proc_paths_show_nothing(box):
    for path in ("/proc/kcore", "/proc/keys", "/proc/timer_list", "/proc/sched_debug"):
        code, out, _ = box.run("sh", "-c", f"head -c 64 {path} 2>/dev/null | wc -c")
        assert out.strip() == "0", (path, out)


def test_server_token_is_not_reachable(box, escape):
    token = escape.asb.token
    state = escape.state_dir
    assert len(token) >= 16
    # Neither the state directory nor its token file exist inside.
    for path in (state, os.path.join(state, "token"), os.path.join(state, "server")):
        code, _, _ = box.run("test", "-e", path)
        assert code != 0, f"{path} is visible inside the sandbox"
    # Not in any environment or command line the sandbox can read, nor in its files.
    code, out, err = box.run("sh", "-c", "cat /proc/[0-9]*/environ /proc/[0-9]*/cmdline 2>/dev/null; env")
    assert code == 0, err
    assert token not in out
    code, _, _ = box.run("grep", "-rqsF", token, "/etc", "/home", "/workspace", "/tmp", "/run")
    assert code != 0, "the token is in a file inside the sandbox"


def test_control_plane_ports_are_not_reachable(box, escape):
    """With networking off the sandbox's 127.0.0.1 is its own: the API server and the router
    listening on the host's loopback are not there."""
    api_port = escape.asb.url.rsplit(":", 1)[1]
    with open(os.path.join(escape.state_dir, "router")) as f:
        router_port = f.read().strip().rsplit(":", 1)[1].rstrip("/")
    code, out, err = box.run("python3", "-c", CONNECT_PROBE, api_port, router_port)
    assert code == 0, err
    for line in out.splitlines():
        port, res = line.split()
        assert res == "ECONNREFUSED", line
    # Its own network namespace: loopback only, and not the host's.
    devs = [line.split(":")[0].strip() for line in box.run("cat", "/proc/net/dev")[1].splitlines()[2:]]
    assert devs == ["lo"]
    inside = box.run("readlink", "/proc/self/ns/net")[1].strip()
    assert inside and inside != os.readlink("/proc/self/ns/net")
