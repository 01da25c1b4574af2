"""Escape suite, kernel budgets shared with the host (issue 30, sections 2, 3 and 5): from inside
a real sandbox, budget_probe.c takes a per-user kernel budget until the kernel refuses (inotify
instances, POSIX message queue bytes, queued signals, POSIX timers), holds it, and meanwhile the
host (this test process's uid, root) and a witness sandbox must still get one of each: every
sandbox's user namespace is owned by a host id of its own, so its budgets are its own
(src/local/container/local-userns.h). AIO, whose only budget is machine-wide, is refused. TCP buffers of
a sandbox are charged to its memory cgroup (memory.kmem.tcp on cgroup v1), and its concurrent
connections through the host are capped (nft ct count, asb serve --max-connections)."""
import errno
import os
import re
import subprocess
import threading
import time

import pytest

from asb_apiserver import asb_binary
from escape_sandbox import HERE, WITNESS, escape, start_escape_server  # noqa: F401
from netpol_lab import lab  # noqa: F401
from test_escape_limits import cgroup_file, runc_pid

PROBE_INSIDE = "/workspace/budget-probe"
MiB = 1 << 20
# Per sandbox, as src/local/container/local-userns.h sets them.
SIGPENDING = 16384
MSGQUEUE = 819200


@pytest.fixture(scope="module")
def probe(tmp_path_factory):
    d = tmp_path_factory.mktemp("budget-probe")
    out = str(d / "budget-probe")
    subprocess.run(["cc", "-std=gnu11", "-O1", "-Wall", "-Wextra", "-Werror",
                    os.path.join(HERE, "budget_probe.c"), "-o", out], check=True)
    return out


def install(box, probe):
    with open(probe, "rb") as f:
        box.put_file(os.path.basename(PROBE_INSIDE), f.read())
    assert box.run("chmod", "755", PROBE_INSIDE)[0] == 0


def parse(line):
    m = re.search(r"taken=(-?\d+) errno=(\d+)", line)
    assert m, f"probe printed no result: {line!r}"
    return int(m.group(1)), int(m.group(2))


def check(out):
    """`inotify=E mqueue=E ...` -> {"inotify": E, ...}."""
    return {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", out)}


def host_check(probe):
    """One of each budget, taken and given back by a process of this test's uid (root) on the
    host: the budgets of host root."""
    out = subprocess.run([probe, "check"], capture_output=True, text=True, timeout=30, check=True)
    return check(out.stdout)


def box_check(box):
    code, out, err = box.run(PROBE_INSIDE, "check")
    assert code == 0, err
    return check(out)


class Held:
    """An attack running in box, holding what it took until release()."""

    def __init__(self, box, *args):
        self.box = box
        self.marker = f"/workspace/budget-{args[0]}"
        self.result = None
        self.thread = threading.Thread(target=self._run, args=(args,), daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            code, out, _ = box.run("cat", self.marker)
            if code == 0 and "taken=" in out:
                self.taken, self.errno = parse(out)
                return
            assert self.thread.is_alive() or self.result, "the probe ended before its marker"
            time.sleep(0.1)
        raise AssertionError(f"attack {args} took no result within 60s")

    def _run(self, args):
        self.result = self.box.run(PROBE_INSIDE, *[str(a) for a in args], self.marker,
                                    timeout=90)

    def release(self):
        assert self.box.run("touch", self.marker + ".release")[0] == 0
        self.thread.join(30)
        assert not self.thread.is_alive(), "the probe did not end"
        code, _, err = self.result
        assert code == 0, err
        assert self.box.run("rm", "-f", self.marker, self.marker + ".release")[0] == 0


@pytest.fixture(scope="module")
def boxes(escape, probe):  # noqa: F811
    attacker, witness = escape.sandbox("budget-attacker"), escape.sandbox(WITNESS)
    install(attacker, probe)
    install(witness, probe)
    return attacker, witness


def read_int(path):
    with open(path) as f:
        return int(f.read().split()[0])


@pytest.mark.parametrize("attack,err,budget,field", [
    ("inotify", errno.EMFILE, lambda: read_int("/proc/sys/user/max_inotify_instances"), "inotify"),
    # A queue of 10 messages of 8 KiB costs more than 80 KiB of the budget.
    ("mqueue", errno.EMFILE, lambda: MSGQUEUE // (80 * 1024), "mqueue"),
    ("sigqueue", errno.EAGAIN, lambda: SIGPENDING, "sigqueue"),
    ("timers", errno.EAGAIN, lambda: SIGPENDING, "timer"),
])
def test_per_user_budget_is_the_sandboxs_own(escape, boxes, probe, attack, err,  # noqa: F811
                                             budget, field):
    attacker, witness = boxes
    held = Held(attacker, attack)
    try:
        # The attacker got its whole budget, and no more.
        assert held.errno == err, (attack, held.taken, os.strerror(held.errno))
        assert 0 < held.taken <= budget(), (attack, held.taken)
        # While it holds it, the host's root and another sandbox still get theirs.
        assert host_check(probe)[field] == 0, f"host lost its {field} budget"
        assert box_check(witness)[field] == 0, f"witness lost its {field} budget"
    finally:
        held.release()
    escape.assert_healthy()


def test_pipe_buffers_are_the_sandboxs_own(escape, boxes, probe):  # noqa: F811
    """pipe-user-pages-soft is a budget of each host uid: a sandbox whose pipes reach it gets
    one-page pipes from then on, while a witness sandbox (other host ids) still gets full ones."""
    attacker, witness = boxes
    held = Held(attacker, "pipes")
    try:
        if held.errno == errno.EMFILE:
            pytest.skip("the sandbox's RLIMIT_NOFILE ends before pipe-user-pages-soft")
        assert held.errno == 0, os.strerror(held.errno)
        soft = read_int("/proc/sys/fs/pipe-user-pages-soft")
        assert 0 < held.taken * 16 <= soft, held.taken
        assert box_check(witness)["pipe"] == 0, "witness lost its pipe budget"
    finally:
        held.release()
    escape.assert_healthy()


def test_aio_is_refused(escape, boxes):  # noqa: F811
    """fs.aio-max-nr is one machine-wide count with no per-user budget: io_setup is ENOSYS."""
    attacker, _ = boxes
    held = Held(attacker, "aio")
    held.release()
    assert (held.taken, held.errno) == (0, errno.ENOSYS)
    escape.assert_healthy()


def test_tcp_buffers_count_against_the_memory_limit(escape, probe):  # noqa: F811
    """40 loopback TCP pairs with 4 MiB buffers, filled and never read, in a 256Mi sandbox: on
    cgroup v1 they are charged to memory.kmem.tcp (limit: a quarter of the memory limit) and
    stop there; on v2 the memory limit itself counts them."""
    box = escape.sandbox("budget-tcp", container={
        "resources": {"limits": {"memory": "256Mi"}}})
    install(box, probe)
    pid = runc_pid(escape.state_dir, box.uid)
    limit_file = cgroup_file(pid, "memory", "memory.kmem.tcp.limit_in_bytes", "memory.max")
    v1 = limit_file.endswith("memory.kmem.tcp.limit_in_bytes")
    if v1:
        assert read_int(limit_file) == 64 * MiB
    held = Held(box, "tcpmem", 40, 4 * MiB)
    try:
        # The kernel forces some charges past the limit (ACKs, each socket's minimum): 4 MiB
        # covers them for 80 sockets.
        bound = (64 if v1 else 256) * MiB + 4 * MiB
        assert 0 < held.taken <= bound, f"{held.taken / MiB:.0f} MiB of TCP buffers queued"
        if v1:
            usage = read_int(limit_file.replace("limit_in_bytes", "max_usage_in_bytes"))
            assert usage <= bound, usage
        assert box.run("echo", "alive") == (0, "alive\n", "")
    finally:
        held.release()
    escape.assert_healthy()


POD_CIDR = "10.244.0.0/24"
GATEWAY = "10.244.0.1"
MAX_CONNECTIONS = 50
RATE, BURST = 20, 200  # --max-connection-rate 20: 20 a second, 10 times that at once


def test_connections_through_the_host_are_capped(lab, tmp_path_factory, probe):  # noqa: F811
    """With --max-connections 50 (ASB_MAX_CONNECTIONS), a sandbox that opens 80 TCP connections to
    its gateway's DNS forwarder and holds them gets 50; the rest are reset at once, while a
    witness sandbox still connects. Closed connections, which conntrack keeps for 120 s but ct
    count does not count, are bounded by the rate of new ones (ASB_MAX_CONNECTION_RATE)."""
    esc, cleanup = start_escape_server(tmp_path_factory, env={
        "ASB_NETWORK": "bridge", "ASB_POD_CIDR": POD_CIDR,
        "ASB_MAX_CONNECTIONS": str(MAX_CONNECTIONS), "ASB_MAX_CONNECTION_RATE": str(RATE)})
    try:
        attacker, witness = esc.sandbox("conns-attacker"), esc.sandbox(WITNESS)
        install(attacker, probe)
        install(witness, probe)
        held = Held(attacker, "conns", GATEWAY, 53, 80)
        try:
            assert held.taken == MAX_CONNECTIONS, held.taken
            assert held.errno == errno.ECONNREFUSED, os.strerror(held.errno)
            w = Held(witness, "conns", GATEWAY, 53, 5)
            w.release()
            assert (w.taken, w.errno) == (5, 0)
        finally:
            held.release()
        # Open and close 600 connections as fast as it can: at most the burst plus the rate.
        t0 = time.monotonic()
        churn = Held(attacker, "churn", GATEWAY, 53, 600)
        elapsed = time.monotonic() - t0
        churn.release()
        assert churn.errno == errno.ECONNREFUSED, os.strerror(churn.errno)
        assert 0 < churn.taken <= BURST + RATE * (elapsed + 1), (churn.taken, elapsed)
        w = Held(witness, "churn", GATEWAY, 53, 5)
        w.release()
        assert (w.taken, w.errno) == (5, 0)
        esc.assert_healthy()
    finally:
        esc.close()
        cleanup()


def test_connection_flags_validated(tmp_path):
    env = {**os.environ, "ASB_STATE_DIR": str(tmp_path / "s"), "ASB_RUNTIME": "none"}
    cases = [(["--max-connections", "0"], {}), (["--max-connection-rate", "x"], {}),
             ([], {"ASB_MAX_CONNECTIONS": "-3"}), ([], {"ASB_MAX_CONNECTION_RATE": "1000001"})]
    for args, extra in cases:
        r = subprocess.run([asb_binary(), "serve", "--listen", "127.0.0.1:0", *args],
                           capture_output=True, text=True, env={**env, **extra}, timeout=20)
        assert r.returncode != 0 and "from 1 to 1000000" in r.stderr, (args, extra, r.stderr)
