"""runtimeClassName: gvisor with Debian's runsc (issue 30, section 7): a loopback-only sandbox
under gVisor's Sentry becomes Ready and serves files, Execute, a PTY, suspend/resume, snapshots,
forks and warm-pool claims; a bridge-networked one is refused with a message saying why; nothing
of runsc is left behind (its containers, processes, cgroups, mounts: local_sandbox.leftovers).
Real `asb serve` + runsc (scripts/deps.sh installs it), skipped only when runsc is missing."""
import json
import os
import shutil
import subprocess

import grpc
import pytest

from asb_apiserver import CORE, sandbox
from claims_helpers import EXT, claim, pool, template, wait_claim, wait_pool_ready
from claims_helpers import create as create_obj
from grpc_helpers import Client, collect
from local_sandbox import (condition, get_sandbox, runc_ids, sbx_state, sockets,  # noqa: F401
                           start_sbx, wait_ready)
from netpol_lab import lab  # noqa: F401
from test_local_sandbox_runtime import rest, run
from test_local_snapshots import snapshot, wait_snapshot, workspace
from waiting import poll as wait_for

RUNSC = shutil.which("runsc")
pytestmark = pytest.mark.skipif(RUNSC is None, reason="runsc is not installed (scripts/deps.sh "
                                "installs Debian's runsc)")
# gVisor's Sentry boots before sandboxd: ~1 s idle, more on a loaded machine.
READY_TIMEOUT = 60


def gvisor_body(name, image="host"):
    body = sandbox(name, image=image)
    body["spec"]["podTemplate"]["spec"]["runtimeClassName"] = "gvisor"
    return body


def create_gvisor(asb, name, image="host", container=None):
    body = gvisor_body(name, image)
    body["spec"]["podTemplate"]["spec"]["containers"][0].update(container or {})
    r = asb.post(asb.path(CORE, "sandboxes", "default"), body)
    assert r.status_code == 201, r.text
    return r.json()["metadata"]["uid"]


def runsc_list(state_dir):
    root = os.path.join(state_dir, "oci-runsc")
    out = subprocess.run([RUNSC, "--root", root, "list", "--format", "json"], capture_output=True,
                         text=True)
    return {c["id"]: c["status"] for c in json.loads(out.stdout or "null") or []} \
        if out.returncode == 0 else {}


def runsc_pids(state_dir):
    root = os.path.join(state_dir, "oci-runsc")
    out = subprocess.run([RUNSC, "--root", root, "list", "--format", "json"], capture_output=True,
                         text=True)
    return {c["id"]: c["pid"] for c in json.loads(out.stdout or "null") or []
            if c["status"] in ("running", "paused")} if out.returncode == 0 else {}


def answers(sock):
    """Whether sandboxd answers health on sock (its link may be missing while it restarts)."""
    try:
        return rest(sock, "GET", "/v1/health")[0] == 200
    except OSError:
        return False


def processes_of(uid):
    """Host processes whose command line names the sandbox (runsc's sandbox and gofer name its
    bundle)."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if uid in cmd:
            found.append(f"{pid}: {cmd}")
    return found


def test_gvisor_sandbox_files_execute_pty_suspend_and_delete(start_sbx, sbx_state):
    asb = start_sbx()
    uid = create_gvisor(asb, "gv")
    wait_ready(asb, "gv", timeout=READY_TIMEOUT)
    # Run by runsc under its own state root, not by runc.
    assert runsc_list(sbx_state).get(uid) == "running"
    assert uid not in runc_ids(sbx_state)
    rest_sock, grpc_sock = sockets(sbx_state, uid)
    assert rest(rest_sock, "GET", "/v1/health")[0] == 200
    assert rest(rest_sock, "PUT", "/v1/files/hello.txt", b"payload")[0] == 204
    assert rest(rest_sock, "GET", "/v1/files/hello.txt") == (200, b"payload")
    # The file is on the host, owned by the sandbox user's id of its user namespace.
    ws = os.path.join(sbx_state, "sandboxes", uid, "workspace")
    st = os.stat(os.path.join(ws, "hello.txt"))
    assert open(os.path.join(ws, "hello.txt"), "rb").read() == b"payload"
    assert st.st_uid == os.stat(ws).st_uid and st.st_uid > 65535
    # Clients reach sandboxd through links the host made in its own directory: sockets, not
    # symlinks into the sandbox's directory.
    assert os.path.islink(rest_sock) is False and os.path.islink(grpc_sock) is False

    c = Client(f"unix:{grpc_sock}")
    try:
        assert run(c, "cat", "/workspace/hello.txt") == (0, "payload", "")
        assert run(c, "id", "-u")[1].strip() == "1000"
        # gVisor's Sentry answers: its own kernel version, not the host's.
        release = run(c, "uname", "-r")[1].strip()
        assert release and release != os.uname().release
        status = dict(line.split(":\t", 1) for line in run(c, "cat", "/proc/self/status")[1].splitlines()
                      if ":\t" in line)
        assert status["CapEff"].strip() == "0000000000000000"
        assert status["Seccomp"].strip() == "2"  # the OCI profile, inside the Sentry
        # Loopback only (runsc --network=none) and a read-only root.
        devs = [line.split(":")[0].strip() for line in run(c, "cat", "/proc/net/dev")[1].splitlines()[2:]]
        assert devs == ["lo"]
        assert run(c, "sh", "-c", "echo x > /usr/evil")[0] != 0
        # The profile still refuses what it refuses (EPERM under runsc).
        assert run(c, "unshare", "-U", "true")[0] != 0
        # Threads start (clone3 is answered by the Sentry, glibc falls back to clone).
        assert run(c, "python3", "-c", "import threading; t = threading.Thread(target=print, "
                   "args=('thread',)); t.start(); t.join()")[1] == "thread\n"
        # A PTY: the child sees its size.
        _, _, out, _, code = collect(c.start(["sh", "-c", "stty size"], pty=(80, 24)))
        assert code == 0 and out.strip() == b"24 80", out
    finally:
        c.close()

    # Suspend freezes the gVisor sandbox (runsc pause), resume thaws it, files kept.
    p = asb.path(CORE, "sandboxes", "default", "gv")
    assert asb.merge_patch(p, {"spec": {"operatingMode": "Suspended"}}).status_code == 200
    wait_ready(asb, "gv", want="False", reason="SandboxSuspended", timeout=READY_TIMEOUT)
    assert wait_for(lambda: condition(get_sandbox(asb, "gv"), "Suspended")["reason"] == "PodFrozen")
    assert runsc_list(sbx_state)[uid] == "paused"
    assert asb.merge_patch(p, {"spec": {"operatingMode": "Running"}}).status_code == 200
    wait_ready(asb, "gv", timeout=READY_TIMEOUT)
    assert runsc_list(sbx_state)[uid] == "running"
    assert rest(rest_sock, "GET", "/v1/files/hello.txt") == (200, b"payload")

    # runsc sets up the sandbox's cgroup itself (no --ignore-cgroups): the Sentry is in
    # /asb/<uid>, under the default memory limit.
    sentry = runsc_pids(sbx_state)[uid]
    v1 = f"/sys/fs/cgroup/memory/asb/{uid}"
    cg, limit = (v1, "memory.limit_in_bytes") if os.path.isdir(v1) else \
        (f"/sys/fs/cgroup/asb/{uid}", "memory.max")
    assert open(os.path.join(cg, limit)).read().strip() == str(1 << 30)
    assert str(sentry) in open(os.path.join(cg, "cgroup.procs")).read().split()

    # A restarted asb serve re-adopts the running gVisor container (same Sentry).
    asb.stop()
    asb = start_sbx()
    wait_ready(asb, "gv", timeout=READY_TIMEOUT)
    assert runsc_pids(sbx_state)[uid] == sentry
    assert "removing container" not in asb.output(), asb.output()
    # sandboxd's exit ends the Sentry; the sandbox starts again, and its new sockets are the
    # ones clients reach.
    c = Client(f"unix:{grpc_sock}")
    try:
        collect(c.start(["kill", "-TERM", "1"]))
    except grpc.RpcError:
        pass  # the stream may end with the sandbox: what counts is checked below
    finally:
        c.close()
    assert wait_for(lambda: runsc_pids(sbx_state).get(uid) not in (None, sentry), timeout=READY_TIMEOUT)
    assert wait_for(lambda: answers(rest_sock), timeout=READY_TIMEOUT), asb.output()
    wait_ready(asb, "gv", timeout=READY_TIMEOUT)
    assert rest(rest_sock, "GET", "/v1/files/hello.txt") == (200, b"payload")

    # Delete: the container, its processes and the sockets' directory go.
    assert processes_of(uid)
    assert asb.delete(p).status_code == 200
    assert wait_for(lambda: uid not in runsc_list(sbx_state), timeout=30)
    assert wait_for(lambda: not processes_of(uid), timeout=30), processes_of(uid)
    assert wait_for(lambda: not os.path.exists(os.path.join(sbx_state, "run", uid)))


def test_gvisor_main_process_finishes_with_its_code(start_sbx, sbx_state):
    """A container command runs under gVisor; without fd passing its output goes to
    /.asb/main/log (on the host: sandboxes/<uid>/main/log), its exit code to the status."""
    asb = start_sbx()
    uid = create_gvisor(asb, "job", container={"command": ["sh", "-c", "echo from-main; exit 3"]})

    def finished():
        c = condition(get_sandbox(asb, "job"), "Finished")
        return c is not None and c["status"] == "True"
    assert wait_for(finished, timeout=READY_TIMEOUT), asb.output()
    c = condition(get_sandbox(asb, "job"), "Finished")
    assert c["reason"] == "PodFailed" and c["message"] == "main process exited with code 3", c
    log = os.path.join(sbx_state, "sandboxes", uid, "main", "log")
    assert open(log).read() == "from-main\n"


def test_gvisor_snapshot_fork_and_warm_pool_claim(start_sbx, sbx_state):
    asb = start_sbx()
    src = create_gvisor(asb, "src")
    wait_ready(asb, "src", timeout=READY_TIMEOUT)
    assert rest(sockets(sbx_state, src)[0], "PUT", "/v1/files/venv/installed", b"pip done")[0] == 204
    # Written from inside too, by a process of the sandbox.
    c = Client(f"unix:{sockets(sbx_state, src)[1]}")
    try:
        assert run(c, "sh", "-c", "echo inside > /workspace/inside.txt")[0] == 0
    finally:
        c.close()
    assert snapshot(asb, "s1", "src").status_code == 201
    snap = wait_snapshot(asb, "s1")
    assert snap["status"]["pauseMicroseconds"] > 0  # frozen through runsc, then thawed
    assert rest(sockets(sbx_state, src)[0], "GET", "/v1/health")[0] == 200

    # A fork under gVisor has the tree.
    fork = create_gvisor(asb, "fork", image="snapshot:s1")
    wait_ready(asb, "fork", timeout=READY_TIMEOUT)
    assert runsc_list(sbx_state).get(fork) == "running"
    assert rest(sockets(sbx_state, fork)[0], "GET", "/v1/files/venv/installed") == (200, b"pip done")
    assert rest(sockets(sbx_state, fork)[0], "GET", "/v1/files/inside.txt") == (200, b"inside\n")

    # A warm pool of a gVisor template, and a claim from it.
    tpl = template("gtpl", image="snapshot:s1")
    tpl["spec"]["podTemplate"]["spec"]["runtimeClassName"] = "gvisor"
    create_obj(asb, EXT, "sandboxtemplates", tpl)
    create_obj(asb, EXT, "sandboxwarmpools", pool("gwp", "gtpl", replicas=1))
    wait_pool_ready(asb, "gwp", 1, timeout=READY_TIMEOUT)
    create_obj(asb, EXT, "sandboxclaims", claim("gc", "gwp"))
    got = wait_claim(asb, "gc", timeout=READY_TIMEOUT)
    sb = get_sandbox(asb, got["status"]["sandbox"]["name"])
    uid = sb["metadata"]["uid"]
    assert runsc_list(sbx_state).get(uid) == "running"
    assert open(os.path.join(workspace(sbx_state, sb), "venv", "installed")).read() == "pip done"
    c = Client(f"unix:{sockets(sbx_state, uid)[1]}")
    try:
        assert run(c, "cat", "/workspace/inside.txt") == (0, "inside\n", "")
    finally:
        c.close()


def test_gvisor_with_bridge_networking_is_refused_with_the_reason(lab, start_sbx, sbx_state):  # noqa: F811
    asb = start_sbx({"ASB_NETWORK": "bridge"})
    uid = create_gvisor(asb, "gvnet")
    obj = wait_ready(asb, "gvnet", want="False", reason="ReconcilerError", timeout=READY_TIMEOUT)
    msg = condition(obj, "Ready")["message"]
    assert 'RuntimeClass "gvisor" (handler runsc)' in msg, msg
    assert "--network none" in msg and "networkPolicyManagement: Unmanaged" in msg, msg
    assert "release-20240807.0" in msg, msg
    # Nothing was started for it; runc sandboxes of the same server are networked as before.
    assert uid not in runsc_list(sbx_state) and not processes_of(uid)
    r = asb.post(asb.path(CORE, "sandboxes", "default"), sandbox("plain"))
    assert r.status_code == 201, r.text
    plain = wait_ready(asb, "plain", timeout=READY_TIMEOUT)
    assert plain["status"].get("podIPs"), plain["status"]
    # Loopback only by its template's choice: a gVisor pool member is Ready under bridge
    # networking, and claimed.
    tpl = template("lo-only", networkPolicyManagement="Unmanaged")
    tpl["spec"]["podTemplate"]["spec"]["runtimeClassName"] = "gvisor"
    create_obj(asb, EXT, "sandboxtemplates", tpl)
    create_obj(asb, EXT, "sandboxwarmpools", pool("lo-pool", "lo-only", replicas=1))
    wait_pool_ready(asb, "lo-pool", 1, timeout=READY_TIMEOUT)
    create_obj(asb, EXT, "sandboxclaims", claim("lo-claim", "lo-pool"))
    got = wait_claim(asb, "lo-claim", timeout=READY_TIMEOUT)
    member = get_sandbox(asb, got["status"]["sandbox"]["name"])["metadata"]["uid"]
    assert runsc_list(sbx_state).get(member) == "running"
    assert rest(sockets(sbx_state, member)[0], "GET", "/v1/health")[0] == 200
