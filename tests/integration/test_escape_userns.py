"""Escape suite, issue 13 hole 3: the sandbox's uid 1000 must not be the host's uid 1000.

Every local sandbox runs in its own user namespace: ids 0-65535 inside map to a host range of
65536 ids that `asb serve` allocated from the range it owns (docs/security.md, "User
namespaces"). These tests run the attacks of a host user with uid 1000 against a real sandbox
and check the mapping from both sides."""
import os
import pwd
import signal
import subprocess
import tempfile

import pytest

from asb_apiserver import AsbServer, asb_binary
from grpc_helpers import Client
from netpol_lab import lab  # noqa: F401
from local_sandbox import (cleanup_state, create, injected_sandboxd, runc_list, sbx_state,  # noqa: F401
                           sockets, start_sbx, wait_ready, RUNC)

SLOT = 65536


def run(client, *cmd):
    r = client.execute(list(cmd), timeout=20)
    return r.exit_code, r.stdout.decode(), r.stderr.decode()


def id_map(client, which):
    """[(inside, host, count), ...] of /proc/self/{uid,gid}_map as seen from inside."""
    code, out, err = run(client, "cat", f"/proc/self/{which}")
    assert code == 0, err
    return [tuple(int(x) for x in line.split()) for line in out.splitlines() if line.strip()]


def server_range(state_dir):
    path = os.path.join(state_dir, "userns", "range")
    assert os.path.exists(path), "asb serve recorded no user namespace range"
    start, count = open(path).read().split()
    return int(start), int(count)


def init_pid(state_dir, uid):
    pids = [c["pid"] for c in runc_list(state_dir) if c["id"] == uid]
    assert pids and pids[0] > 0, runc_list(state_dir)
    return pids[0]


def start_sandbox(asb, state_dir, name):
    uid = create(asb, name)["metadata"]["uid"]
    wait_ready(asb, name, timeout=15)
    return uid, Client(f"unix:{sockets(state_dir, uid)[1]}")


def test_uid_map_is_not_identity_and_host_owner_is_in_range(start_sbx, sbx_state):
    asb = start_sbx()
    uid, c = start_sandbox(asb, sbx_state, "ns-map")
    try:
        for which in ("uid_map", "gid_map"):
            m = id_map(c, which)
            assert len(m) == 1, m
            inside, host, count = m[0]
            assert host != 0, f"{which} is the identity: {m}"
            assert (inside, count) == (0, SLOT), m
            rs, rc = server_range(sbx_state)
            assert rs <= host and host + count <= rs + rc, (m, rs, rc)
        host = id_map(c, "uid_map")[0][1]
        # Inside, the user is still 1000 ...
        assert run(c, "id", "-u")[1].strip() == "1000"
        # ... which on the host is host + 1000, an id no host account has.
        st = os.stat(f"/proc/{init_pid(sbx_state, uid)}")
        assert (st.st_uid, st.st_gid) == (host + 1000, host + 1000), (st.st_uid, st.st_gid, host)
        assert st.st_uid != 1000
        with pytest.raises(KeyError):
            pwd.getpwuid(st.st_uid)
        # What the host made for the sandbox belongs to the mapped ids, and a file the sandbox
        # writes is owned by them on the host.
        ws = os.path.join(sbx_state, "sandboxes", uid, "workspace")
        assert os.stat(ws).st_uid == host + 1000
        assert run(c, "sh", "-c", "echo hi > /workspace/mine")[0] == 0
        assert os.stat(os.path.join(ws, "mine")).st_uid == host + 1000
        # runc saw the rootfs in a private mount namespace: nothing stays mounted on the host
        # and every thread of asb serve is back in the host's mount namespace.
        assert "/run/asb/rootfs" not in open("/proc/self/mountinfo").read()
        host_mnt = os.readlink("/proc/self/ns/mnt")
        for t in os.listdir(f"/proc/{asb.proc.pid}/task"):
            assert os.readlink(f"/proc/{asb.proc.pid}/task/{t}/ns/mnt") == host_mnt
        # The read-only host binds still work: host root's files appear as nobody, readable.
        assert run(c, "stat", "-c", "%u", "/usr/bin")[1].strip() == "65534"
        assert run(c, "sh", "-c", "cat /etc/passwd >/dev/null && ls /usr/bin >/dev/null")[0] == 0
    finally:
        c.close()


def test_two_sandboxes_get_disjoint_ranges(start_sbx, sbx_state):
    asb = start_sbx()
    a_uid, a = start_sandbox(asb, sbx_state, "ns-a")
    b_uid, b = start_sandbox(asb, sbx_state, "ns-b")
    try:
        ma, mb = id_map(a, "uid_map")[0], id_map(b, "uid_map")[0]
        assert ma[1] + ma[2] <= mb[1] or mb[1] + mb[2] <= ma[1], (ma, mb)
        ga, gb = id_map(a, "gid_map")[0], id_map(b, "gid_map")[0]
        assert ga[1] + ga[2] <= gb[1] or gb[1] + gb[2] <= ga[1], (ga, gb)
        ua = os.stat(f"/proc/{init_pid(sbx_state, a_uid)}").st_uid
        ub = os.stat(f"/proc/{init_pid(sbx_state, b_uid)}").st_uid
        assert ua != ub
    finally:
        a.close()
        b.close()


def as_host_uid_1000(fn):
    """Runs fn() in a forked child with uid/gid 1000 and no groups; its return value (an int
    bitmask of what succeeded) is the child's exit status."""
    pid = os.fork()
    if pid == 0:
        code = 255
        try:
            os.setgroups([])
            os.setgid(1000)
            os.setuid(1000)
            code = fn()
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status), status
    return os.WEXITSTATUS(status)


def test_host_uid_1000_cannot_write_into_or_signal_the_sandbox(start_sbx, sbx_state):
    asb = start_sbx()
    uid, c = start_sandbox(asb, sbx_state, "ns-victim")
    c.close()
    pid = init_pid(sbx_state, uid)
    target = f"/proc/{pid}/root/workspace/pwned"

    def attack():
        done = 0
        try:
            with open(target, "w") as f:
                f.write("owned")
            done |= 1
        except OSError:
            pass
        try:
            os.kill(pid, 0)
            done |= 2
        except OSError:
            pass
        try:
            os.kill(pid, signal.SIGKILL)
            done |= 4
        except OSError:
            pass
        return done

    assert as_host_uid_1000(attack) == 0, "host uid 1000 wrote into or signalled the sandbox"
    assert not os.path.exists(os.path.join(sbx_state, "sandboxes", uid, "workspace", "pwned"))
    assert os.path.exists(f"/proc/{pid}")
    wait_ready(asb, "ns-victim", timeout=5)


def test_restart_keeps_a_running_sandbox_range(start_sbx, sbx_state):
    asb = start_sbx()
    uid, c = start_sandbox(asb, sbx_state, "ns-keep")
    before = id_map(c, "uid_map")
    c.close()
    assert before[0][1] != 0, f"uid_map is the identity: {before}"
    pid = init_pid(sbx_state, uid)
    rng = server_range(sbx_state)
    assert asb.stop() == 0
    asb = start_sbx()
    assert server_range(sbx_state) == rng
    wait_ready(asb, "ns-keep", timeout=15)
    assert init_pid(sbx_state, uid) == pid  # re-adopted, not restarted
    c = Client(f"unix:{sockets(sbx_state, uid)[1]}")
    try:
        assert id_map(c, "uid_map") == before
    finally:
        c.close()
    # A sandbox created after the restart does not get the running one's ids.
    _, d = start_sandbox(asb, sbx_state, "ns-new")
    try:
        new = id_map(d, "uid_map")[0]
        old = before[0]
        assert new[1] + new[2] <= old[1] or old[1] + old[2] <= new[1], (old, new)
    finally:
        d.close()


def serve_once(state_dir, env, timeout=15):
    """Runs `asb serve` expecting it to refuse to start: (exit code, output)."""
    e = {**os.environ, "ASB_STATE_DIR": state_dir, "ASB_RUNTIME": RUNC, "ASB_NETWORK": "none",
         "ASB_SANDBOXD": injected_sandboxd(), **env}
    p = subprocess.run([asb_binary(), "serve", "--listen", "127.0.0.1:0",
                        "--router-listen", "off"], env=e, capture_output=True, text=True,
                       timeout=timeout)
    return p.returncode, p.stdout + p.stderr


def test_overlapping_range_of_another_server_is_refused(start_sbx, sbx_state):
    asb = start_sbx()
    assert asb.running
    a_start, a_count = server_range(sbx_state)
    other = tempfile.mkdtemp(prefix="asb-", dir="/tmp")
    try:
        code, out = serve_once(other, {"ASB_USERNS_RANGE": f"{a_start + SLOT}:{SLOT * 4}"})
        assert code != 0, out
        assert "overlaps the range" in out and os.path.realpath(sbx_state) in out, out
        # Host accounts' ids are refused too (1..65536 holds root's group and nobody at least).
        code, out = serve_once(other, {"ASB_USERNS_RANGE": "1:65536"})
        assert code != 0 and "overlaps a host account" in out, out
        code, out = serve_once(other, {"ASB_USERNS_RANGE": "12345"})
        assert code != 0 and "START:COUNT" in out, out
        # Without a flag the second server picks a block of its own.
        b = AsbServer(other, os.path.join(other, "serve.log"),
                      {"ASB_RUNTIME": RUNC, "ASB_SANDBOXD": injected_sandboxd()}).start()
        try:
            b_start, b_count = server_range(other)
            assert b_start + b_count <= a_start or a_start + a_count <= b_start
        finally:
            assert b.stop() == 0
    finally:
        cleanup_state(other)


def test_bridge_network_sandbox_is_mapped_too(lab, start_sbx, sbx_state):
    """With bridge networking runc joins a network namespace the host made: the sandbox still
    gets its own user namespace, and /sys (no fresh sysfs there) shows no host device. In the
    network lab's namespace, as the netpol tests, so no bridge is left on the host."""
    asb = start_sbx(env={"ASB_NETWORK": "bridge", "ASB_POD_CIDR": "10.244.0.0/24"})
    _, c = start_sandbox(asb, sbx_state, "ns-bridge")
    try:
        m = id_map(c, "uid_map")
        assert m[0][1] != 0 and m[0][2] == SLOT, m
        devs = [line.split(":")[0].strip() for line in run(c, "cat", "/proc/net/dev")[1].splitlines()[2:]]
        assert "lo" in devs and len(devs) == 2, devs  # lo and its veth end
        assert run(c, "sh", "-c", "ls /sys/class/net 2>/dev/null | wc -l")[1].strip() == "0"
        assert int(run(c, "nproc")[1]) >= 1
        assert run(c, "cat", "/sys/fs/cgroup/pids/pids.max")[1].strip() == "4096"
    finally:
        c.close()
