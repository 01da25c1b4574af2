"""Escape suite, other sandboxes (issue 13): a neighbour sandbox runs a main process that holds an
abstract unix socket, a loopback TCP listener, a System V shared memory segment and a file in its
/tmp; from the attacker's sandbox (same server, networking off) none of them is reachable, and
neither are the neighbour's processes or workspace. Sandboxes on a bridge network are kept apart
by NetworkPolicy: test_netpol_local.py."""
import os
import time

from escape_sandbox import escape  # noqa: F401

SHM_KEY = 0x41534221
NEIGHBOUR = r"""
import ctypes, os, socket, time
libc = ctypes.CDLL(None, use_errno=True)
assert libc.shmget(0x41534221, 4096, 0o1666) >= 0
u = socket.socket(socket.AF_UNIX); u.bind("\0asb-escape-neighbour"); u.listen(8)
t = socket.socket(); t.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
t.bind(("127.0.0.1", 8765)); t.listen(8)
open("/tmp/neighbour-secret", "w").write("secret")
open("/workspace/neighbour-ready", "w").write("ready")
while True:
    time.sleep(60)  # not a wait: the neighbour idles until the test ends it
"""

REACH = r"""
import ctypes, errno, socket
libc = ctypes.CDLL(None, use_errno=True)
out = []
for fam, addr in ((socket.AF_UNIX, "\0asb-escape-neighbour"), (socket.AF_INET, ("127.0.0.1", 8765))):
    s = socket.socket(fam)
    s.settimeout(2)
    try:
        s.connect(addr)
        out.append("CONNECTED")
    except OSError as e:
        out.append(errno.errorcode.get(e.errno, str(e)))
out.append("shm" if libc.shmget(0x41534221, 0, 0) >= 0 else errno.errorcode[ctypes.get_errno()])
print(" ".join(out))
"""


def test_neighbour_is_out_of_reach(escape):
    n = escape.sandbox("neighbour", container={"command": ["python3", "-c", NEIGHBOUR]})
    for _ in range(200):
        if n.run("test", "-e", "/workspace/neighbour-ready")[0] == 0:
            break
        time.sleep(0.05)
    else:
        raise AssertionError("the neighbour's main process did not start")
    # The neighbour itself reaches all of it: a refusal below is isolation, not a broken setup.
    code, out, err = n.run("python3", "-c", REACH)
    assert (code, out.strip()) == (0, "CONNECTED CONNECTED shm"), err

    box = escape.sandbox("attacker")
    code, out, err = box.run("python3", "-c", REACH)
    assert code == 0, err
    assert out.strip() == "ECONNREFUSED ECONNREFUSED ENOENT", out
    # Its processes, files and workspace do not exist from here.
    code, out, _ = box.run("sh", "-c", "cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' '")
    assert "asb-escape-neighbour" not in out
    assert box.run("test", "-e", "/tmp/neighbour-secret")[0] != 0
    ws = os.path.join(escape.state_dir, "sandboxes", n.uid, "workspace")
    assert os.path.exists(os.path.join(ws, "neighbour-ready"))  # the host path exists ...
    assert box.run("test", "-e", ws)[0] != 0                       # ... but not inside
    assert box.run("test", "-e", "/workspace/neighbour-ready")[0] != 0
    # A different uts namespace, and pid 1 is the attacker's own sandboxd.
    assert box.run("hostname")[1].strip() == "attacker"
    escape.assert_healthy()
