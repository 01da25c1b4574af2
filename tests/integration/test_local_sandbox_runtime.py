"""Local sandboxes: `asb serve` runs each Sandbox as a runc container with sandboxd as PID 1,
reachable over unix sockets the host created. Isolation is probed from inside the sandbox."""
import os
import signal
import time

import pytest

from asb_apiserver import CORE
from grpc_helpers import Client
from local_sandbox import (condition, create, get_sandbox, runc_ids, runc_list, sbx_state, sockets,  # noqa: F401
                           start_sbx, wait_ready)
from resthelpers import UnixHTTPConnection
from waiting import poll as wait_for


def rest(sock, method, path, body=None):
    conn = UnixHTTPConnection(sock, timeout=10)
    try:
        conn.request(method, path, body=body)
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def run(client, *cmd):
    r = client.execute(list(cmd), timeout=20)
    return r.exit_code, r.stdout.decode(), r.stderr.decode()


def test_host_sandbox_ready_and_isolated(start_sbx, sbx_state):
    asb = start_sbx()
    t0 = time.monotonic()
    created = create(asb, "iso", container={
        "env": [{"name": "GREETING", "value": "hello from the template"}],
        "resources": {"limits": {"memory": "256Mi", "cpu": "500m"}}})
    obj = wait_ready(asb, "iso", timeout=10)
    assert time.monotonic() - t0 < 5
    uid = created["metadata"]["uid"]
    ready = condition(obj, "Ready")
    assert ready["reason"] == "DependenciesReady" and ready["message"] == "Pod is Ready"
    assert ready["observedGeneration"] == obj["metadata"]["generation"]
    susp = condition(obj, "Suspended")
    assert (susp["status"], susp["reason"]) == ("False", "NotSuspended")
    assert obj["status"]["selector"].startswith("agents.x-k8s.io/sandbox-name-hash=")
    assert obj["metadata"]["annotations"]["agents.x-k8s.io/pod-name"] == "iso"
    assert uid in runc_ids(sbx_state)

    rest_sock, grpc_sock = sockets(sbx_state, uid)
    assert rest(rest_sock, "GET", "/v1/health")[0] == 200
    assert rest(rest_sock, "PUT", "/v1/files/hello.txt", b"payload")[0] == 204
    assert rest(rest_sock, "GET", "/v1/files/hello.txt") == (200, b"payload")
    # The workspace is a host directory owned by the sandbox user.
    ws = os.path.join(sbx_state, "sandboxes", uid, "workspace")
    assert open(os.path.join(ws, "hello.txt"), "rb").read() == b"payload"

    c = Client(f"unix:{grpc_sock}")
    try:
        assert run(c, "cat", "/workspace/hello.txt") == (0, "payload", "")
        assert run(c, "id", "-u")[1].strip() == "1000"
        assert run(c, "id", "-un")[1].strip() == "sandbox"
        status = dict(line.split(":\t", 1) for line in run(c, "cat", "/proc/self/status")[1].splitlines()
                      if ":\t" in line)
        assert status["CapEff"].strip() == "0000000000000000"
        assert status["CapPrm"].strip() == "0000000000000000"
        assert status["CapBnd"].strip() == "0000000000000000"
        assert status["NoNewPrivs"].strip() == "1"
        assert status["Seccomp"].strip() == "2"
        assert run(c, "hostname")[1].strip() == "iso"
        # sandboxd is PID 1 of its own pid namespace.
        assert "sandboxd" in run(c, "cat", "/proc/1/cmdline")[1]
        # Read-only root and host binds; writable /tmp, home and workspace.
        code, _, err = run(c, "sh", "-c", "echo x > /usr/evil")
        assert code != 0 and "Read-only file system" in err
        assert run(c, "sh", "-c", "echo x > /evil")[0] != 0
        assert run(c, "sh", "-c", "echo x > /etc/passwd")[0] != 0
        assert run(c, "sh", "-c", "echo x > /tmp/ok && echo x > $HOME/ok && echo x > /workspace/ok")[0] == 0
        # Loopback only.
        devs = [line.split(":")[0].strip() for line in run(c, "cat", "/proc/net/dev")[1].splitlines()[2:]]
        assert devs == ["lo"]
        # Seccomp denies the dangerous syscalls (unshare) and no host secrets are visible.
        code, _, err = run(c, "unshare", "-U", "true")
        assert code != 0
        assert run(c, "ls", "/root")[0] != 0 or run(c, "ls", "/root")[1] == ""
        assert run(c, "sh", "-c", "test -e /etc/shadow")[0] != 0
        # Env from the template and cgroup limits from resources.limits.
        assert run(c, "sh", "-c", "echo $GREETING")[1].strip() == "hello from the template"
        mem = run(c, "sh", "-c", "cat /sys/fs/cgroup/memory/memory.limit_in_bytes 2>/dev/null"
                  " || cat /sys/fs/cgroup/memory.max")[1].strip()
        assert mem == str(256 * 1024 * 1024)
        pids = run(c, "sh", "-c", "cat /sys/fs/cgroup/pids/pids.max 2>/dev/null || cat /sys/fs/cgroup/pids.max")[1]
        assert pids.strip() == "4096"
        # Host processes are invisible.
        assert int(run(c, "sh", "-c", "ls -d /proc/[0-9]* | wc -l")[1]) < 10
    finally:
        c.close()


def test_hostname_is_name_cut_to_63(start_sbx, sbx_state):
    asb = start_sbx()
    name = "h" * 40 + "-" + "x" * 40
    created = create(asb, name)
    wait_ready(asb, name)
    c = Client(f"unix:{sockets(sbx_state, created['metadata']['uid'])[1]}")
    try:
        assert run(c, "hostname")[1].strip() == name[:63]
    finally:
        c.close()


def test_run_as_user_from_security_context(start_sbx, sbx_state):
    asb = start_sbx()
    created = create(asb, "uid", container={"securityContext": {"runAsUser": 4242, "runAsGroup": 4343}})
    wait_ready(asb, "uid")
    c = Client(f"unix:{sockets(sbx_state, created['metadata']['uid'])[1]}")
    try:
        assert run(c, "id", "-u")[1].strip() == "4242"
        assert run(c, "id", "-g")[1].strip() == "4343"
    finally:
        c.close()


@pytest.mark.parametrize("image,needle", [
    ("python:3.13-slim", 'image "python:3.13-slim" is not supported locally: no registry is reachable'),
    ("dir:/nonexistent/rootfs", "/nonexistent/rootfs is not a directory"),
    ("dir:relative", "absolute path"),
])
def test_unsupported_image_is_a_condition(start_sbx, sbx_state, image, needle):
    asb = start_sbx()
    created = create(asb, "bad", image=image)
    obj = wait_ready(asb, "bad", want="False", reason="ImageNotSupported")
    ready = condition(obj, "Ready")
    assert ready["reason"] == "ImageNotSupported", ready
    assert needle in ready["message"], ready
    assert created["metadata"]["uid"] not in runc_ids(sbx_state)
    # The server keeps serving and still runs good sandboxes.
    create(asb, "good")
    wait_ready(asb, "good")


def test_dir_image(start_sbx, sbx_state, tmp_path):
    # A nearly empty rootfs: sandboxd needs nothing from the image (it brings its own loader
    # and libraries under /.asb), so the sandbox becomes Ready all the same.
    rootfs = tmp_path / "rootfs"
    for d in ["usr", "etc"]:
        (rootfs / d).mkdir(parents=True)
    (rootfs / "etc" / "passwd").write_text("root:x:0:0::/:/bin/sh\n")
    os.chmod(tmp_path, 0o755)
    asb = start_sbx()
    created = create(asb, "dirimg", image=f"dir:{rootfs}")
    wait_ready(asb, "dirimg")
    assert rest(sockets(sbx_state, created["metadata"]["uid"])[0], "GET", "/v1/health")[0] == 200


def test_delete_removes_container_and_dirs(start_sbx, sbx_state):
    asb = start_sbx()
    uid = create(asb, "gone")["metadata"]["uid"]
    wait_ready(asb, "gone")
    run_dir = os.path.join(sbx_state, "run", uid)
    base = os.path.join(sbx_state, "sandboxes", uid)
    assert os.path.exists(run_dir) and os.path.exists(base)
    assert asb.delete(asb.path(CORE, "sandboxes", "default", "gone")).status_code == 200
    assert wait_for(lambda: uid not in runc_ids(sbx_state))
    assert wait_for(lambda: not os.path.exists(run_dir) and not os.path.exists(base))


def test_suspend_freezes_and_resume_thaws(start_sbx, sbx_state):
    asb = start_sbx()
    uid = create(asb, "sus")["metadata"]["uid"]
    wait_ready(asb, "sus")
    rest_sock = sockets(sbx_state, uid)[0]
    assert rest(rest_sock, "PUT", "/v1/files/keep.txt", b"kept")[0] == 204
    p = asb.path(CORE, "sandboxes", "default", "sus")
    assert asb.merge_patch(p, {"spec": {"operatingMode": "Suspended"}}).status_code == 200
    obj = wait_ready(asb, "sus", want="False", reason="SandboxSuspended")
    assert wait_for(lambda: condition(get_sandbox(asb, "sus"), "Suspended")["status"] == "True")
    obj = get_sandbox(asb, "sus")
    assert condition(obj, "Ready")["reason"] == "SandboxSuspended"
    assert condition(obj, "Suspended")["reason"] == "PodFrozen"
    assert {c["id"]: c["status"] for c in runc_list(sbx_state)}[uid] == "paused"
    assert asb.merge_patch(p, {"spec": {"operatingMode": "Running"}}).status_code == 200
    wait_ready(asb, "sus")
    assert rest(rest_sock, "GET", "/v1/files/keep.txt") == (200, b"kept")


def test_restart_readopts_and_removes_orphans(start_sbx, sbx_state):
    asb = start_sbx()
    keep = create(asb, "keep")["metadata"]["uid"]
    orphan = create(asb, "orphan")["metadata"]["uid"]
    wait_ready(asb, "keep")
    wait_ready(asb, "orphan")
    rest_sock = sockets(sbx_state, keep)[0]
    assert rest(rest_sock, "PUT", "/v1/files/state.txt", b"survives")[0] == 204
    pid_before = {c for c in runc_ids(sbx_state)}
    assert pid_before == {keep, orphan}
    asb.kill9()
    # While the control plane is down the sandboxes keep serving.
    assert rest(rest_sock, "GET", "/v1/files/state.txt") == (200, b"survives")
    # Delete "orphan" behind the runtime's back: a server with the runtime off.
    off = start_sbx(env={"ASB_RUNTIME": "none"})
    assert off.delete(off.path(CORE, "sandboxes", "default", "orphan")).status_code == 200
    assert off.stop() == 0
    assert orphan in runc_ids(sbx_state)
    asb2 = start_sbx()
    assert wait_for(lambda: orphan not in runc_ids(sbx_state))
    assert wait_for(lambda: not os.path.exists(os.path.join(sbx_state, "run", orphan)))
    obj = wait_ready(asb2, "keep")
    assert keep in runc_ids(sbx_state)
    # The stored status was Ready already: the re-adoption is logged by the first pass, which may
    # come a moment after wait_ready returns.
    assert wait_for(lambda: "re-adopted sandbox container" in asb2.output()), asb2.output()
    # Same container, same workspace: nothing was restarted.
    assert rest(rest_sock, "GET", "/v1/files/state.txt") == (200, b"survives")
    assert condition(obj, "Ready")["status"] == "True"
    # Deleting after a restart still cleans up.
    assert asb2.delete(asb2.path(CORE, "sandboxes", "default", "keep")).status_code == 200
    assert wait_for(lambda: keep not in runc_ids(sbx_state))


def test_sigterm_leaves_sandboxes_running(start_sbx, sbx_state):
    asb = start_sbx()
    uid = create(asb, "stay")["metadata"]["uid"]
    wait_ready(asb, "stay")
    assert asb.stop(signal.SIGTERM) == 0
    assert uid in runc_ids(sbx_state)
    assert rest(sockets(sbx_state, uid)[0], "GET", "/v1/health")[0] == 200


def test_dead_sandboxd_is_restarted(start_sbx, sbx_state):
    asb = start_sbx(env={"ASB_RESYNC_INTERVAL": "500ms"})
    uid = create(asb, "phoenix")["metadata"]["uid"]
    wait_ready(asb, "phoenix")
    rest_sock = sockets(sbx_state, uid)[0]
    assert rest(rest_sock, "PUT", "/v1/files/kept.txt", b"workspace survives")[0] == 204
    pid = int(open(os.path.join(sbx_state, "sandboxes", uid, "bundle", "pid")).read())
    os.kill(pid, signal.SIGKILL)

    def answers():
        try:
            return rest(rest_sock, "GET", "/v1/files/kept.txt") == (200, b"workspace survives")
        except OSError:
            return False
    assert wait_for(answers, timeout=15), asb.output()
    # The death was reported (Ready=False, restarting) and the restart turns it Ready again.
    wait_ready(asb, "phoenix")
    assert "sandbox's first process exited" in asb.output()
    pid_file = os.path.join(sbx_state, "sandboxes", uid, "bundle", "pid")

    def new_pid():
        # runc writes the pid file of the new container as it starts it: it may lag the socket.
        try:
            return int(open(pid_file).read()) != pid
        except (OSError, ValueError):
            return False
    assert wait_for(new_pid, timeout=15), asb.output()


def test_ready_false_while_starting_then_true(start_sbx, sbx_state):
    """The status goes Ready=False/DependenciesNotReady before the runtime is asked, then True."""
    import json
    asb = start_sbx()
    created = create(asb, "watched")
    rv = created["metadata"]["resourceVersion"]
    r = asb.get(asb.path(CORE, "sandboxes", "default"), stream=True, timeout=20,
                params={"watch": "true", "resourceVersion": rv,
                        "fieldSelector": "metadata.name=watched"})
    seen = []
    try:
        for line in r.iter_lines():
            if not line:
                continue
            c = condition(json.loads(line)["object"], "Ready")
            if c:
                seen.append((c["status"], c["reason"], c["message"]))
            if c and c["status"] == "True":
                break
    finally:
        r.close()
    assert seen[0] == ("False", "DependenciesNotReady", "Pod does not exist"), seen
    assert seen[-1] == ("True", "DependenciesReady", "Pod is Ready"), seen


def test_sandboxd_that_exits_is_reported_not_looped(start_sbx, sbx_state):
    # An injected "sandboxd" that exits at once (/usr/bin/false): Ready=False with the reason,
    # and no restart loop (retried only at the resync, 10 s by default).
    asb = start_sbx(env={"ASB_SANDBOXD": "/usr/bin/false"})
    uid = create(asb, "crash")["metadata"]["uid"]
    obj = wait_ready(asb, "crash", want="False", reason="ReconcilerError")
    assert "sandboxd exited" in condition(obj, "Ready")["message"]
    time.sleep(1)  # the point: no restart in the meantime
    assert asb.output().count("sandbox container started") == 1, asb.output()
    assert uid not in runc_ids(sbx_state)


def test_without_root_sandboxes_say_why():
    """`asb serve` as a normal user serves the API and reports in each Sandbox why it cannot run."""
    import shutil
    import tempfile
    from asb_apiserver import AsbServer, asb_binary
    setpriv = shutil.which("setpriv")
    if os.geteuid() != 0 or not setpriv:
        pytest.skip("needs root to switch to an unprivileged user, and setpriv")
    d = tempfile.mkdtemp(prefix="asb-nr-", dir="/tmp")
    try:
        os.chmod(d, 0o755)
        binary = os.path.join(d, "asb")
        shutil.copy(asb_binary(), binary)
        # `asb serve` execs the asb-server next to asb.
        shutil.copy(os.path.join(os.path.dirname(asb_binary()), "asb-server"), d)
        state = os.path.join(d, "state")
        os.mkdir(state)
        os.chown(state, 65534, 65534)

        class Unprivileged(AsbServer):
            def command(self):
                return [setpriv, "--reuid", "65534", "--regid", "65534", "--clear-groups", binary]

        asb = Unprivileged(state, os.path.join(d, "serve.log"), {"ASB_RUNTIME": "runc"}).start()
        try:
            create(asb, "nr")
            obj = wait_ready(asb, "nr", want="False", reason="ReconcilerError")
            assert "runs without root" in condition(obj, "Ready")["message"]
            assert "sandboxes unavailable" in asb.output()
        finally:
            assert asb.stop() == 0
    finally:
        shutil.rmtree(d, ignore_errors=True)
