"""Escape suite, volumes (issue 30 §1 and §5): a sandbox owns everything inside its
volumeClaimTemplates, so it can swap a subPath (or a directory on the way to one) for a symlink to
a host directory and have sandboxd restarted. asb serve must then neither chown nor mount the
host directory: the Sandbox turns Ready=False naming the field and the path, and the host
directory keeps its owner, mode and contents. A fork of a snapshot holding such a link is refused
the same way at its first start. A volume's storage request is its size: a write past it fails
inside with ENOSPC, and the volume takes at most the request of the host's disk (measured on its
image), a fork's volume included.

Every attack runs from inside a real sandbox; the restart is what the reconciler does when the
sandbox's first process dies (the test kills it from the host, as sandboxd exiting would)."""
import json
import os
import shutil
import signal
import subprocess
import tempfile

import pytest

from asb_apiserver import CORE, EXT
from escape_sandbox import Box, escape, start_escape_server  # noqa: F401
from local_sandbox import RUNC, condition, create, wait_ready
from test_local_sandbox_runtime import wait_for
from test_local_snapshots import snapshot, wait_snapshot


def vct(name, size):
    return {"metadata": {"name": name},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": size}}}}


def start_box(esc, name, mounts, templates, **spec):
    obj = create(esc.asb, name, container={"volumeMounts": mounts},
                 volumeClaimTemplates=templates, **spec)
    wait_ready(esc.asb, name, timeout=30)
    return Box(esc.asb, esc.state_dir, name, obj["metadata"]["uid"])


def delete(esc, box):
    box.close()
    delete_sandbox(esc, box.name, box.uid)


def delete_sandbox(esc, name, uid):
    """Deletes the Sandbox; its volumes (filesystems included) go with it."""
    assert esc.asb.delete(esc.asb.path(CORE, "sandboxes", "default", name)).status_code == 200
    vols = os.path.join(esc.state_dir, "volumes", uid)
    assert wait_for(lambda: not os.path.exists(vols), timeout=15), f"{vols} left behind"


def first_pid(esc, uid):
    """The host pid of the container's first process (sandboxd), None when there is none."""
    p = subprocess.run([RUNC, "--root", os.path.join(esc.state_dir, "runc"), "state", uid],
                       capture_output=True, text=True)
    st = json.loads(p.stdout) if p.returncode == 0 else {}
    return st.get("pid") if st.get("status") == "running" else None


def kill_first_process(esc, uid):
    """What `kill -TERM 1` from inside ends in: the container's first process is gone.
    Returns its pid."""
    pid = first_pid(esc, uid)
    os.kill(pid, signal.SIGKILL)
    return pid


def host_target():
    """A host directory the test owns, with a file in it: what an attacker points links at."""
    d = tempfile.mkdtemp(prefix="asb-esc-target-", dir="/tmp")
    os.chmod(d, 0o700)
    with open(os.path.join(d, "canary"), "w") as f:
        f.write("host\n")
    return d


def state_of(path):
    """Owner, mode, change time and entries of path: whatever a chown, chmod or mkdir changes."""
    st = os.lstat(path)
    return (st.st_uid, st.st_gid, st.st_mode, st.st_ctime_ns, sorted(os.listdir(path)))


def mounted_anywhere(path):
    """Whether path is the root of a mount in the host's mount table (a bind of it)."""
    real = os.path.realpath(path)
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            if fields[3] == real or fields[4] == real:
                return True
    return False


def volume_cost(esc, box, name="data"):
    """(size, bytes allocated) of the volume's image on the host after a sync of the volume from
    inside: what the volume takes from the host's disk, measured on the file itself (the host's
    free space moves with everything else the machine does)."""
    code, out, err = box.run("sync", "-f", "/data")
    assert code == 0, (out, err)
    st = os.stat(os.path.join(esc.state_dir, "volumes", box.uid, f".disk-{name}.img"))
    return st.st_size, st.st_blocks * 512


def wait_refused(esc, name, field):
    obj = wait_ready(esc.asb, name, timeout=30, want="False", reason="ReconcilerError")
    msg = condition(obj, "Ready")["message"]
    assert field in msg, msg
    return msg


def attack_restart(esc, name, sub, link_at):
    """A sandbox with /data (whole volume) and /cfg (subPath `sub`) replaces `link_at` in its
    volume by a link to a host directory and gets restarted."""
    target = host_target()
    try:
        box = start_box(esc, name, [{"name": "data", "mountPath": "/data"},
                                    {"name": "data", "mountPath": "/cfg", "subPath": sub}],
                        [vct("data", "16Mi")])
        # The subPath mount is the volume's directory, created by asb serve and the user's.
        code, out, err = box.run("sh", "-c", f"echo in > /cfg/x && cat /data/{sub}/x && "
                                 f"stat -c %u /data/{link_at} /data/{sub}")
        assert (code, out.split()) == (0, ["in", "1000", "1000"]), (out, err)
        before = state_of(target)
        code, out, err = box.run("sh", "-c", f"mv /data/{link_at} /data/{link_at}.old && "
                                 f"ln -s {target} /data/{link_at} && ls -l /data/{link_at}")
        assert code == 0, (out, err)
        kill_first_process(esc, box.uid)
        msg = wait_refused(esc, name,
                           "spec.podTemplate.spec.containers[0].volumeMounts[1].subPath")
        assert f'"{sub}"' in msg and "symlink" in msg, msg
        assert state_of(target) == before
        assert not mounted_anywhere(target)
        stage = os.path.join(esc.state_dir, "run", box.uid, "volumes")
        assert not os.path.exists(stage)  # nothing staged is left
        esc.assert_healthy()
        delete(esc, box)
        assert state_of(target) == before
    finally:
        shutil.rmtree(target)


def test_symlinked_subpath_after_restart_is_refused(escape):  # noqa: F811
    attack_restart(escape, "vol-link", "cfg", "cfg")


def test_subpath_through_a_symlinked_directory_is_refused(escape):  # noqa: F811
    attack_restart(escape, "vol-mid", "a/b/cfg", "a")


def test_fork_of_a_volume_holding_the_link_is_refused(escape):  # noqa: F811
    esc = escape
    target = host_target()
    try:
        mounts = [{"name": "data", "mountPath": "/data"}]
        src = start_box(esc, "vol-src", mounts, [vct("data", "16Mi")])
        before = state_of(target)
        code, out, err = src.run("ln", "-s", target, "/data/cfg")
        assert code == 0, (out, err)
        assert snapshot(esc.asb, "vol-snap", "vol-src").status_code == 201
        wait_snapshot(esc.asb, "vol-snap")
        fork_mounts = mounts + [{"name": "data", "mountPath": "/cfg", "subPath": "cfg"}]
        fork = create(esc.asb, "vol-fork", image="snapshot:vol-snap",
                      container={"volumeMounts": fork_mounts},
                      volumeClaimTemplates=[vct("data", "16Mi")])
        wait_refused(esc, "vol-fork", "volumeMounts[1].subPath")
        # The seed kept the link a link, inside the fork's volume.
        assert os.readlink(os.path.join(esc.state_dir, "volumes", fork["metadata"]["uid"],
                                        "data", "cfg")) == target
        assert state_of(target) == before
        assert not mounted_anywhere(target)
        esc.assert_healthy()
        delete_sandbox(esc, "vol-fork", fork["metadata"]["uid"])
        assert esc.asb.delete(esc.asb.path(
            EXT, "sandboxsnapshots", name="vol-snap")).status_code == 200
        delete(esc, src)
        assert state_of(target) == before
    finally:
        shutil.rmtree(target)


def test_volume_write_past_its_request_is_refused(escape):  # noqa: F811
    esc = escape
    box = start_box(esc, "vol-full", [{"name": "data", "mountPath": "/data"},
                                      {"name": "data", "mountPath": "/logs", "subPath": "logs"}],
                    [vct("data", "16Mi")])
    code, out, err = box.run("sh", "-c", "dd if=/dev/zero of=/logs/big bs=1M count=64 2>&1; "
                             "echo rc=$?; stat -c %s /logs/big", timeout=60)
    assert code == 0, (out, err)
    assert "No space left on device" in out and "rc=1" in out, out
    written = int(out.split()[-1])
    assert 8 << 20 < written <= 16 << 20, out
    # The host gave the volume at most the request (and not the 64 MiB asked for).
    size, allocated = volume_cost(esc, box)
    assert size == 16 << 20 and written <= allocated <= size, (size, allocated)
    # Deleting gives the space back inside; the volume still works and persists a restart.
    code, out, err = box.run("sh", "-c", "rm /logs/big && echo kept > /data/f")
    assert code == 0, (out, err)
    old = kill_first_process(esc, box.uid)
    assert wait_for(lambda: first_pid(esc, box.uid) not in (None, old), timeout=30)
    wait_ready(esc.asb, "vol-full", timeout=30)
    box.close()
    box = Box(esc.asb, esc.state_dir, "vol-full", box.uid)
    assert box.run("cat", "/data/f") == (0, "kept\n", "")
    esc.assert_healthy()
    delete(esc, box)


@pytest.fixture(autouse=True)
def _no_stray_targets():
    yield
    # The attacks' targets are the test's own and removed; nothing else of it stays in /tmp.
    assert not [p for p in os.listdir("/tmp") if p.startswith("asb-esc-target-")]


def test_fork_volume_write_past_its_request_is_refused(escape):  # noqa: F811
    """A fork's volume is an overlay over the snapshot: its writes (the upper layer) are on the
    fork's own volume filesystem, so the request bounds them too."""
    esc = escape
    mounts = [{"name": "data", "mountPath": "/data"}]
    src = start_box(esc, "vol-fsrc", mounts, [vct("data", "16Mi")])
    assert src.run("sh", "-c", "echo seed > /data/f")[0] == 0
    assert snapshot(esc.asb, "vol-fsnap", "vol-fsrc").status_code == 201
    wait_snapshot(esc.asb, "vol-fsnap")
    fork = create(esc.asb, "vol-ffork", image="snapshot:vol-fsnap",
                  container={"volumeMounts": mounts}, volumeClaimTemplates=[vct("data", "16Mi")])
    wait_ready(esc.asb, "vol-ffork", timeout=30)
    box = Box(esc.asb, esc.state_dir, "vol-ffork", fork["metadata"]["uid"])
    code, out, err = box.run("sh", "-c", "cat /data/f; dd if=/dev/zero of=/data/big bs=1M "
                             "count=64 2>&1; echo rc=$?; stat -c %s /data/big", timeout=60)
    assert code == 0, (out, err)
    assert out.startswith("seed\n") and "No space left on device" in out and "rc=1" in out, out
    written = int(out.split()[-1])
    assert 8 << 20 < written <= 16 << 20, out
    # The overlay's upper layer is inside the volume's filesystem, not beside it on the host.
    size, allocated = volume_cost(esc, box)
    assert size == 16 << 20 and written <= allocated <= size, (size, allocated)
    assert not os.path.exists(os.path.join(esc.state_dir, "volumes", box.uid, ".fork-data"))
    esc.assert_healthy()
    delete(esc, box)
    assert esc.asb.delete(esc.asb.path(
        EXT, "sandboxsnapshots", name="vol-fsnap")).status_code == 200
    delete(esc, src)
