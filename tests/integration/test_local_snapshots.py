"""SandboxSnapshots on the local backend (issue 18, docs/snapshots.md): capture of a running
sandbox's workspace and volumes, forks (Sandbox, SandboxTemplate + warm pool, claim) with the
exact tree, bad input, and the store's garbage. Real `asb serve` + runc, skipped without root."""
import os
import re
import stat
import subprocess
import tempfile
import time

import pytest

from asb_apiserver import CORE, AsbServer, stop_servers
from asb_cli import ok
from claims_helpers import EXT, claim, pool, template, wait_claim, wait_pool_ready
from claims_helpers import create as create_obj
from local_sandbox import (RUNC, cleanup_state, create, get_sandbox, injected_sandboxd,  # noqa: F401
                           runtime_available, sbx_state, sockets, start_sbx, wait_ready)
from test_local_sandbox_runtime import rest, wait_for


def snapshot(asb, name, sandbox_name):
    return asb.post(asb.path(EXT, "sandboxsnapshots"), {
        "apiVersion": f"{EXT}/v1beta1", "kind": "SandboxSnapshot",
        "metadata": {"name": name}, "spec": {"sandboxRef": {"name": sandbox_name}}})


def get_snapshot(asb, name):
    r = asb.get(asb.path(EXT, "sandboxsnapshots", name=name))
    assert r.status_code == 200, r.text
    return r.json()


def ready_condition(obj):
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == "Ready"),
                None)


def wait_snapshot(asb, name, want="True", timeout=30):
    def done():
        c = ready_condition(get_snapshot(asb, name))
        return c is not None and c["status"] == want
    assert wait_for(done, timeout=timeout), f"{get_snapshot(asb, name)}\n{asb.output()}"
    return get_snapshot(asb, name)


def workspace(state, obj):
    return os.path.join(state, "sandboxes", obj["metadata"]["uid"], "workspace")


def populate(ws):
    """Every kind of entry, owned by the sandbox user (the owner of the workspace)."""
    st = os.stat(ws)
    os.makedirs(os.path.join(ws, "dir/sub"))
    with open(os.path.join(ws, "dir/sub/data.bin"), "wb") as f:
        f.write(os.urandom(300000))
    with open(os.path.join(ws, "sparse"), "wb") as f:
        f.write(b"head")
        f.seek(8 << 20)
        f.write(b"tail")
    os.link(os.path.join(ws, "dir/sub/data.bin"), os.path.join(ws, "hard"))
    os.symlink("dir/sub/data.bin", os.path.join(ws, "link"))
    os.mkfifo(os.path.join(ws, "fifo"))
    with open(os.path.join(ws, "setuid"), "w") as f:
        f.write("x")
    try:
        os.setxattr(os.path.join(ws, "setuid"), "user.note", b"\x00\x01kept")
    except OSError:
        pass
    for root, dirs, files in os.walk(ws):
        for n in dirs + files:
            os.chown(os.path.join(root, n), st.st_uid, st.st_gid, follow_symlinks=False)
    os.chmod(os.path.join(ws, "setuid"), 0o4750)
    os.utime(os.path.join(ws, "dir/sub/data.bin"), ns=(1_000_000_123, 1_500_000_000_456_789_000))


def describe(ws):
    """What a fork must reproduce, with ids relative to the workspace's owner."""
    base = os.stat(ws)
    out = {}
    inodes = {}
    for root, dirs, files in os.walk(ws):
        dirs.sort()
        for n in sorted(dirs + files):
            p = os.path.join(root, n)
            rel = os.path.relpath(p, ws)
            st = os.lstat(p)
            if st.st_ino in inodes and not stat.S_ISDIR(st.st_mode):
                out[rel] = ("hardlink", inodes[st.st_ino])
                continue
            inodes[st.st_ino] = rel
            d = [stat.S_IFMT(st.st_mode), stat.S_IMODE(st.st_mode), st.st_uid - base.st_uid,
                 st.st_gid - base.st_gid]
            if not stat.S_ISDIR(st.st_mode):  # a directory's size is its filesystem's business
                d += [st.st_size, st.st_mtime_ns]
            if stat.S_ISLNK(st.st_mode):
                d.append(os.readlink(p))
            elif stat.S_ISREG(st.st_mode):
                d.append(open(p, "rb").read())
                d.append(st.st_blocks <= 64 if n == "sparse" else None)
                try:
                    d.append(os.getxattr(p, "user.note"))
                except OSError:
                    d.append(None)
            out[rel] = d
    return out


def test_snapshot_then_fork_is_exact_and_independent(start_sbx, sbx_state):
    asb = start_sbx()
    src = create(asb, "src")
    wait_ready(asb, "src")
    ws = workspace(sbx_state, src)
    populate(ws)
    # Also a file the sandbox wrote itself, through sandboxd.
    assert rest(sockets(sbx_state, src["metadata"]["uid"])[0], "PUT", "/v1/files/from-api.txt",
                b"hello")[0] == 204
    want = describe(ws)
    assert snapshot(asb, "s1", "src").status_code == 201
    snap = wait_snapshot(asb, "s1")
    st = snap["status"]
    assert st["files"] == len(want) + 1  # + the root
    assert st["size"] >= 300000 + 8 + 5 + 1 and st["storedBytes"] > 0
    assert st["pauseMicroseconds"] > 0  # the running sandbox was frozen, then thawed
    assert st["source"]["image"] == "host" and st["source"]["sandbox"] == "src"
    assert st["source"]["podTemplate"]["spec"]["containers"][0]["image"] == "host"
    assert ready_condition(snap)["reason"] == "Captured"
    # The source kept running: it still answers.
    assert rest(sockets(sbx_state, src["metadata"]["uid"])[0], "GET", "/v1/files/from-api.txt")[1] == b"hello"

    fork = create(asb, "fork", image="snapshot:s1")
    wait_ready(asb, "fork")
    fws = workspace(sbx_state, fork)
    assert describe(fws) == want
    assert rest(sockets(sbx_state, fork["metadata"]["uid"])[0], "GET", "/v1/files/from-api.txt")[1] == b"hello"
    # Independent: the source's later changes do not reach the fork, and the other way round.
    with open(os.path.join(ws, "from-api.txt"), "w") as f:
        f.write("changed")
    assert rest(sockets(sbx_state, fork["metadata"]["uid"])[0], "PUT", "/v1/files/only-fork", b"1")[0] == 204
    assert open(os.path.join(fws, "from-api.txt")).read() == "hello"
    assert not os.path.exists(os.path.join(ws, "only-fork"))

    # A second snapshot of the source shares what did not change (dedup).
    assert snapshot(asb, "s2", "src").status_code == 201
    s2 = wait_snapshot(asb, "s2")["status"]
    assert s2["storedBytes"] < 2000, s2

    # A fork of the fork runs on the first source's image and keeps the fork's files.
    assert snapshot(asb, "s3", "fork").status_code == 201
    assert wait_snapshot(asb, "s3")["status"]["source"]["image"] == "host"


def test_bad_input_and_nothing_lost(start_sbx, sbx_state):
    asb = start_sbx()
    # Unknown sandbox: refused in the API's error shape.
    r = snapshot(asb, "nope", "missing")
    assert r.status_code == 422 and r.json()["reason"] == "Invalid", r.text
    assert 'spec.sandboxRef.name: Not found: "missing"' in r.json()["message"]
    src = create(asb, "src")
    wait_ready(asb, "src")
    with open(os.path.join(workspace(sbx_state, src), "keep.txt"), "w") as f:
        f.write("precious")
    assert snapshot(asb, "s", "src").status_code == 201
    # Name collision.
    r = snapshot(asb, "s", "src")
    assert r.status_code == 409 and r.json()["reason"] == "AlreadyExists", r.text
    wait_snapshot(asb, "s")
    # The source goes: the snapshot keeps its data, and a fork still starts from it.
    assert asb.delete(asb.path(CORE, "sandboxes", name="src")).status_code == 200
    assert wait_for(lambda: asb.get(asb.path(CORE, "sandboxes", name="src")).status_code == 404, timeout=20)
    r = snapshot(asb, "late", "src")
    assert r.status_code == 422, r.text
    fork = create(asb, "fork", image="snapshot:s")
    wait_ready(asb, "fork")
    assert open(os.path.join(workspace(sbx_state, fork), "keep.txt")).read() == "precious"
    # An unknown snapshot as image: the Sandbox says so.
    create(asb, "orphan", image="snapshot:absent")
    wait_ready(asb, "orphan", want="False", reason="SnapshotNotFound")
    # In use by a template: deletion refused until the template goes.
    create_obj(asb, EXT, "sandboxtemplates", template("from-snap", image="snapshot:s"))
    r = asb.delete(asb.path(EXT, "sandboxsnapshots", name="s"))
    assert r.status_code == 409 and r.json()["reason"] == "Conflict", r.text
    assert "SandboxTemplate \"from-snap\"" in r.json()["message"]
    # Nor does a collection delete take it (it deletes what it may: here nothing).
    r = asb.delete(asb.path(EXT, "sandboxsnapshots"))
    assert r.status_code == 200 and r.json()["items"] == [], r.text
    assert asb.get(asb.path(EXT, "sandboxsnapshots", name="s")).status_code == 200
    assert asb.delete(asb.path(EXT, "sandboxtemplates", name="from-snap")).status_code == 200
    store = os.path.join(sbx_state, "snapshots")
    uid = get_snapshot(asb, "s")["metadata"]["uid"]
    assert os.path.exists(os.path.join(store, "manifests", uid + ".json"))
    assert asb.delete(asb.path(EXT, "sandboxsnapshots", name="s")).status_code == 200
    # Its data goes with it (nothing else holds it); the fork keeps its own copy.
    assert wait_for(lambda: not os.path.exists(os.path.join(store, "manifests", uid + ".json")))

    def objects():
        return sum(len(f) for _, _, f in os.walk(os.path.join(store, "objects")))
    assert wait_for(lambda: objects() == 0), objects()
    assert open(os.path.join(workspace(sbx_state, fork), "keep.txt")).read() == "precious"


def test_warm_pool_and_claim_from_snapshot(start_sbx, sbx_state):
    asb = start_sbx()
    src = create(asb, "prepared")
    wait_ready(asb, "prepared")
    os.makedirs(os.path.join(workspace(sbx_state, src), "venv"))
    with open(os.path.join(workspace(sbx_state, src), "venv", "installed"), "w") as f:
        f.write("after a long pip install")
    assert snapshot(asb, "base", "prepared").status_code == 201
    wait_snapshot(asb, "base")
    create_obj(asb, EXT, "sandboxtemplates", template("tpl", image="snapshot:base"))
    create_obj(asb, EXT, "sandboxwarmpools", pool("wp", "tpl", replicas=2))
    wait_pool_ready(asb, "wp", 2)
    create_obj(asb, EXT, "sandboxclaims", claim("c1", "wp"))
    c = wait_claim(asb, "c1")
    sb = get_sandbox(asb, c["status"]["sandbox"]["name"])
    got = os.path.join(workspace(sbx_state, sb), "venv", "installed")
    assert open(got).read() == "after a long pip install"


def test_cli_snapshot_and_fork(start_sbx, sbx_state):
    from asb_cli import ok, run
    asb = start_sbx()
    src = create(asb, "work")
    wait_ready(asb, "work")
    with open(os.path.join(workspace(sbx_state, src), "state.txt"), "w") as f:
        f.write("prepared")
    snap = ok(asb, "snapshot", "create", "work", "--name", "cp1", "--wait").strip()
    assert snap == "cp1"
    assert ready_condition(get_snapshot(asb, "cp1"))["status"] == "True"
    table = ok(asb, "snapshot", "ls")
    assert "cp1" in table and "work" in table and "True" in table
    names = ok(asb, "fork", "work", "--count", "3", "--name", "try", timeout=120).split()
    assert names == ["try-1", "try-2", "try-3"]
    for n in names:
        sb = get_sandbox(asb, n)
        assert sb["spec"]["podTemplate"]["spec"]["containers"][0]["image"].startswith("snapshot:work-snap-")
        assert open(os.path.join(workspace(sbx_state, sb), "state.txt")).read() == "prepared"
    # From an existing snapshot, generated name; a bad one fails clearly.
    (one,) = ok(asb, "fork", "--from-snapshot", "cp1", timeout=60).split()
    assert one.startswith("cp1-fork-")
    p = run(asb, "fork", "ghost")
    assert p.returncode != 0 and "ghost" in p.stderr and not p.stdout
    p = run(asb, "snapshot", "create", "ghost")
    assert p.returncode != 0 and "Not found" in p.stderr
    assert ok(asb, "snapshot", "rm", "cp1") == 'sandboxsnapshot.extensions.agents.x-k8s.io "cp1" deleted\n'
    p = run(asb, "snapshot", "rm", "cp1")
    assert p.returncode != 0 and "not found" in p.stderr


VCT = [{"metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"],
                                               "resources": {"requests": {"storage": "1Gi"}}}}]
DATA_MOUNT = {"volumeMounts": [{"name": "data", "mountPath": "/data"}]}


def test_volumes_and_a_suspended_source(start_sbx, sbx_state):
    from grpc_helpers import Client
    asb = start_sbx()
    uid = create(asb, "vol", container=DATA_MOUNT, volumeClaimTemplates=VCT)["metadata"]["uid"]
    wait_ready(asb, "vol")
    client = Client(f"unix:{sockets(sbx_state, uid)[1]}")
    r = client.execute(["sh", "-c", "echo kept > /data/f && echo ws > /workspace/w"])
    assert r.exit_code == 0, r.stderr
    client.close()
    # Suspended (frozen by asb serve): captured as it is, and it stays frozen.
    p = asb.path(CORE, "sandboxes", "default", "vol")
    assert asb.merge_patch(p, {"spec": {"operatingMode": "Suspended"}}).status_code == 200
    wait_ready(asb, "vol", want="False", reason="SandboxSuspended")
    assert snapshot(asb, "vs", "vol").status_code == 201
    st = wait_snapshot(asb, "vs")
    assert st["status"]["pauseMicroseconds"] == 0
    assert "already suspended" in ready_condition(st)["message"]
    assert st["status"]["source"]["volumeClaimTemplates"][0]["metadata"]["name"] == "data"
    assert open(f"/sys/fs/cgroup/freezer/asb/{uid}/freezer.state").read().strip() == "FROZEN"
    wait_ready(asb, "vol", want="False", reason="SandboxSuspended")
    # The fork gets the volume's files too, owned by the sandbox user as it sees them.
    fuid = create(asb, "vfork", image="snapshot:vs", container=DATA_MOUNT,
                  volumeClaimTemplates=VCT)["metadata"]["uid"]
    wait_ready(asb, "vfork")
    client = Client(f"unix:{sockets(sbx_state, fuid)[1]}")
    r = client.execute(["sh", "-c", "cat /data/f /workspace/w && stat -c %u /data/f /workspace/w"])
    client.close()
    assert r.exit_code == 0, r.stderr
    assert r.stdout.decode().split() == ["kept", "ws", "1000", "1000"]


def overlays(state):
    """Mount points of the overlayfs mounts under the state directory."""
    out = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, right = line.split(" - ", 1)
            mp = left.split()[4].replace("\\040", " ")
            if right.split()[0] == "overlay" and mp.startswith(state.rstrip("/") + "/"):
                out.append(mp)
    return out


EVENTS = "/apis/events.k8s.io/v1/namespaces/default/events"


def seeded_note(asb, name):
    """The note of the SandboxSnapshotSeeded event of Sandbox `name`, once there is one."""
    def note():
        for e in asb.get(EVENTS).json()["items"]:
            if e["regarding"]["name"] == name and e["reason"] == "SnapshotSeeded":
                return e["note"]
        return None
    return wait_for(note, timeout=10)


def idmapped_tmpfs():
    """tmpfs takes idmapped mounts from Linux 6.3 on (overlayfs over them since 5.19)."""
    release = tuple(int(x) for x in re.match(r"(\d+)\.(\d+)", os.uname().release).groups())
    return release >= (6, 3)


@pytest.fixture(params=["tmpfs", "overlay"])
def fs_sbx(request, tmp_path):
    """(state, start): a state directory on a filesystem of its own that the test mounts: a
    tmpfs (forks get overlays where the kernel idmaps tmpfs) or an overlayfs over tmpfs layers
    (overlayfs refuses idmapped mounts, as a container's root does: forks fall back to copies)."""
    why = runtime_available()
    if why:
        pytest.skip(why)
    top = tempfile.mkdtemp(prefix="asb-fs-", dir="/tmp")
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2g,mode=0755", "tmpfs", top], check=True)
    state = top
    if request.param == "overlay":
        for d in ("lower", "upper", "work", "state"):
            os.mkdir(os.path.join(top, d))
        state = os.path.join(top, "state")
        subprocess.run(["mount", "-t", "overlay", "-o",
                        f"lowerdir={top}/lower,upperdir={top}/upper,workdir={top}/work",
                        "overlay", state], check=True)
    servers = []

    def start():
        e = {"ASB_RUNTIME": RUNC, "ASB_SANDBOXD": injected_sandboxd()}
        s = AsbServer(state, tmp_path / f"asb-serve-{len(servers)}.log", e)
        servers.append(s)
        return s.start()

    try:
        yield request.param, state, start
        stop_servers(servers)
        cleanup_state(state)
    finally:
        if state != top:
            subprocess.run(["umount", "-l", state], check=True)
        subprocess.run(["umount", "-l", top], check=True)
        os.rmdir(top)


def test_forks_survive_restart_and_leave_nothing(fs_sbx):
    """The fork contract on either filesystem: exact files, writes kept across a restart of
    asb serve, nothing mounted or unpacked afterwards; an overlay with nothing copied where the
    filesystem idmaps, an exact copy where it does not, and an Event says which."""
    kind, sbx_state, start_sbx = fs_sbx
    expect_overlay = kind == "tmpfs" and idmapped_tmpfs()
    asb = start_sbx()
    src = create(asb, "src")
    wait_ready(asb, "src")
    populate(workspace(sbx_state, src))
    want = describe(workspace(sbx_state, src))
    assert snapshot(asb, "s1", "src").status_code == 201
    s1_uid = wait_snapshot(asb, "s1")["metadata"]["uid"]
    fork = create(asb, "f1", image="snapshot:s1")
    wait_ready(asb, "f1")
    fws = workspace(sbx_state, fork)
    tree = os.path.join(sbx_state, "snapshots", "trees", s1_uid)
    note = seeded_note(asb, "f1")
    assert describe(fws) == want
    if expect_overlay:
        # An overlay over the snapshot's tree: exact, nothing copied.
        assert "as overlays over its tree, nothing copied" in note, f"{note}\n{asb.output()}"
        assert os.path.realpath(fws) in overlays(sbx_state)
        assert os.path.isdir(tree) and stat.S_IMODE(os.stat(os.path.dirname(tree)).st_mode) == 0o700
    else:
        assert "copied in" in note, note
        if kind == "overlay":
            assert "refuses idmapped mounts" in note, note
        assert overlays(sbx_state) == [] and not os.path.exists(tree)
    out = ok(asb, "describe", "sandbox", "f1")
    assert re.search(r"Normal\s+SnapshotSeeded\s", out), out
    sock = sockets(sbx_state, fork["metadata"]["uid"])[0]
    assert rest(sock, "PUT", "/v1/files/mine", b"fork's own")[0] == 204
    with open(os.path.join(fws, "hard"), "r+b") as f:  # in place: a copy-up of a hard link
        f.write(b"rewritten")
    if expect_overlay:
        assert not os.path.exists(os.path.join(tree, "workspace", "mine"))
        assert open(os.path.join(tree, "workspace", "hard"), "rb").read(9) != b"rewritten"
    assert describe(workspace(sbx_state, src)) == want
    fwant = describe(fws)
    assert fwant != want and fwant["dir/sub/data.bin"] == ("hardlink", "hard")
    assert open(os.path.join(fws, "dir/sub/data.bin"), "rb").read(9) == b"rewritten"

    # A fork of the fork reads the first fork's view.
    assert snapshot(asb, "s2", "f1").status_code == 201
    wait_snapshot(asb, "s2")
    f2 = create(asb, "f2", image="snapshot:s2")
    wait_ready(asb, "f2")
    assert describe(workspace(sbx_state, f2)) == fwant

    # The snapshot goes while f1 runs on it: f1 loses nothing.
    assert asb.delete(asb.path(EXT, "sandboxsnapshots", name="s1")).status_code == 200
    assert wait_for(lambda: asb.get(asb.path(EXT, "sandboxsnapshots", name="s1")).status_code == 404)
    assert describe(fws) == fwant

    # asb serve restarts: f1 keeps its own changes (mounted once where it is an overlay).
    asb.stop()
    asb = start_sbx()
    wait_ready(asb, "f1")
    assert rest(sock, "GET", "/v1/files/mine")[1] == b"fork's own"
    assert overlays(sbx_state).count(os.path.realpath(fws)) == (1 if expect_overlay else 0)
    assert describe(fws) == fwant

    # Deleting the forks leaves nothing mounted, and the deleted snapshot's tree goes with them.
    for n in ("f1", "f2"):
        assert asb.delete(asb.path(CORE, "sandboxes", name=n)).status_code == 200
    for n in ("f1", "f2"):
        assert wait_for(lambda: asb.get(asb.path(CORE, "sandboxes", name=n)).status_code == 404,
                        timeout=20)
    assert overlays(sbx_state) == []
    assert wait_for(lambda: not os.path.exists(tree))
    s2_tree = os.path.join(sbx_state, "snapshots", "trees", get_snapshot(asb, "s2")["metadata"]["uid"])
    assert os.path.isdir(s2_tree) == expect_overlay
    assert asb.delete(asb.path(EXT, "sandboxsnapshots", name="s2")).status_code == 200
    assert wait_for(lambda: not os.path.exists(s2_tree))


def test_forks_carry_lineage_inherit_a_claims_lifecycle_and_own_their_snapshot(start_sbx):
    """Issue 31: a fork names its source and snapshot; a fork of a claimed sandbox expires with
    the claim and is collected with it; the snapshot taken for the forks goes with the last."""
    from asb_cli import ok
    asb = start_sbx()
    create_obj(asb, EXT, "sandboxtemplates", template("tpl"))
    create_obj(asb, EXT, "sandboxwarmpools", pool("wp", "tpl", replicas=1))
    wait_pool_ready(asb, "wp", 1)
    when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 3600))
    create_obj(asb, EXT, "sandboxclaims", claim("c", "wp", lifecycle={
        "shutdownTime": when, "shutdownPolicy": "Delete"}))
    c = wait_claim(asb, "c")
    src = c["status"]["sandbox"]["name"]
    names = ok(asb, "fork", src, "--count", "2", timeout=120).split()
    assert len(names) == 2
    forks = [get_sandbox(asb, n) for n in names]
    snap = forks[0]["metadata"]["annotations"]["agents.x-k8s.io/fork-snapshot"]
    for f in forks:
        md = f["metadata"]
        assert md["annotations"]["agents.x-k8s.io/forked-from"] == src
        assert md["labels"]["agents.x-k8s.io/fork-of"] == src
        assert f["spec"]["shutdownTime"] == when and f["spec"]["shutdownPolicy"] == "Delete"
        assert [(r["kind"], r["uid"]) for r in md["ownerReferences"]] == \
            [("SandboxClaim", c["metadata"]["uid"])]
    owners = get_snapshot(asb, snap)["metadata"]["ownerReferences"]
    assert sorted((r["kind"], r["name"]) for r in owners) == sorted(("Sandbox", n) for n in names)
    listed = asb.get(asb.path(CORE, "sandboxes"), params={
        "labelSelector": f"agents.x-k8s.io/fork-of={src}"}).json()["items"]
    assert sorted(s["metadata"]["name"] for s in listed) == sorted(names)

    # One fork goes: the snapshot stays for the other.
    assert asb.delete(asb.path(CORE, "sandboxes", name=names[0])).status_code == 200
    assert wait_for(lambda: asb.get(asb.path(CORE, "sandboxes", name=names[0])).status_code == 404,
                    timeout=20)
    time.sleep(0.5)
    assert asb.get(asb.path(EXT, "sandboxsnapshots", name=snap)).status_code == 200
    # The claim goes: its sandbox and the other fork go with it, and then the snapshot.
    assert asb.delete(asb.path(EXT, "sandboxclaims", name="c")).status_code == 200
    for n in (src, names[1]):
        assert wait_for(lambda: asb.get(asb.path(CORE, "sandboxes", name=n)).status_code == 404,
                        timeout=30), n
    assert wait_for(lambda: asb.get(asb.path(EXT, "sandboxsnapshots", name=snap)).status_code
                    == 404, timeout=10)
