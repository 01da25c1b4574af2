"""Escape suite, the host reading a sandbox's tree (issue 30, section 4): a snapshot capture reads
files the sandbox can change while it reads them. A sandbox that swaps regular files with FIFOs
(renameat2 RENAME_EXCHANGE in a loop, as its main process) must not make the capture wait for a
FIFO writer, which held the server's one snapshot thread and so every other sandbox's snapshot;
nor may a write lease make it wait for the lease break. Each capture, the attacker's and a witness
sandbox's, ends within a bound; asb serve and the witness are healthy afterwards."""
import time

import pytest

from asb_apiserver import EXT
from escape_sandbox import WITNESS, escape  # noqa: F401

# Far above an honest capture of a few files on a loaded 2-core machine (~0.1 s), far below
# "forever" (a capture blocked in a FIFO's open never ends while the swapper runs).
BOUND_S = 20

# The attacker's main process: PAIRS regular files and FIFOs under /workspace/race, exchanged
# as fast as it can, for as long as the sandbox runs.
SWAPPER = r"""
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
d = "/workspace/race"
os.makedirs(d, exist_ok=True)
pairs = []
for i in range(8):
    f, p = "%s/f%d" % (d, i), "%s/p%d" % (d, i)
    for q in (f, p):
        if os.path.lexists(q):
            os.unlink(q)
    with open(f, "wb") as out:
        out.write(b"x" * 4096)
    os.mkfifo(p)
    pairs.append((f.encode(), p.encode()))
open("/workspace/swapping", "w").close()
while True:
    for f, p in pairs:
        libc.renameat2(-100, f, -100, p, 2)  # AT_FDCWD, RENAME_EXCHANGE
"""

# The attacker's main process: holds a write lease on a file of its own, so that any open of it
# waits for the lease break (lease-break-time, 45 s by default) unless it does not block.
LEASER = r"""
import fcntl, os, signal, time
signal.signal(signal.SIGIO, signal.SIG_IGN)  # the break notice: ignored, the lease is kept
with open("/workspace/leased", "wb") as f:
    f.write(b"y" * 4096)
fd = os.open("/workspace/leased", os.O_RDONLY)
try:
    fcntl.fcntl(fd, 1024, fcntl.F_WRLCK)  # F_SETLEASE
    got = "leased"
except OSError as e:
    got = "no lease: %s" % e
with open("/workspace/leasing", "w") as f:
    f.write(got)
while True:
    time.sleep(1)  # not a wait: holds the lease until the test ends it
"""


def snapshot(asb, name, sandbox_name):
    r = asb.post(asb.path(EXT, "sandboxsnapshots"), {
        "apiVersion": f"{EXT}/v1beta1", "kind": "SandboxSnapshot",
        "metadata": {"name": name}, "spec": {"sandboxRef": {"name": sandbox_name}}})
    assert r.status_code == 201, r.text


def ready(asb, name):
    r = asb.get(asb.path(EXT, "sandboxsnapshots", name=name))
    assert r.status_code == 200, r.text
    conds = (r.json().get("status") or {}).get("conditions") or []
    return next((c for c in conds if c["type"] == "Ready"), None)


def settled_within(asb, names, bound):
    """The Ready condition of each snapshot once it has one (True or False), asserted to come
    within bound seconds of now."""
    deadline, done = time.monotonic() + bound, {}
    while time.monotonic() < deadline and len(done) < len(names):
        for n in names:
            c = ready(asb, n)
            if n not in done and c and c.get("reason") != "SandboxNotStarted":
                done[n] = c
        time.sleep(0.05)
    assert len(done) == len(names), f"not captured within {bound}s: {set(names) - set(done)}"
    return done


def attacker(escape, name, script, marker):
    box = escape.sandbox(name, container={"command": ["python3", "-c", script]})
    deadline = time.monotonic() + 10
    while box.run("test", "-e", marker)[0] != 0:
        assert time.monotonic() < deadline, f"{name}'s main process did not start"
        time.sleep(0.05)
    return box


def test_fifo_swap_does_not_block_captures(escape):
    attacker(escape, "swapper", SWAPPER, "/workspace/swapping")
    escape.sandbox(WITNESS)
    # Several captures of the attacker (each of its 16 entries is a chance for the race), then
    # the witness's, queued behind them on the same thread.
    names = ["swap-1", "swap-2", "swap-3", "witness-1"]
    for n in names[:-1]:
        snapshot(escape.asb, n, "swapper")
    snapshot(escape.asb, names[-1], WITNESS)
    done = settled_within(escape.asb, names, BOUND_S)
    # The frozen pass reads what the live pass skipped: the attacker's snapshots succeed too.
    assert all(c["status"] == "True" for c in done.values()), done
    escape.assert_healthy()


def test_write_lease_does_not_block_captures(escape):
    box = attacker(escape, "leaser", LEASER, "/workspace/leasing")
    got = box.run("cat", "/workspace/leasing")[1]
    if got != "leased":
        pytest.skip(f"this kernel gives no write lease here: {got}")
    snapshot(escape.asb, "lease-1", "leaser")
    snapshot(escape.asb, "witness-2", WITNESS)
    done = settled_within(escape.asb, ["lease-1", "witness-2"], BOUND_S)
    assert done["witness-2"]["status"] == "True", done
    # The leased file cannot be read while its holder is frozen: the attacker's own snapshot
    # fails, at once, naming it (unless the host's lease-break-time is shorter than the capture).
    with open("/proc/sys/fs/lease-break-time") as f:
        break_s = int(f.read())
    if break_s >= BOUND_S:
        assert done["lease-1"]["status"] == "False", done
    if done["lease-1"]["status"] == "False":
        assert "cannot open leased" in done["lease-1"]["message"], done
    escape.assert_healthy()
