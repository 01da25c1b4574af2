"""Local sandbox lifecycle (issue 4): shutdownTime expiry with Delete/Retain (UPSTREAM.md §2.4.6),
also across restarts of `asb serve`. Real `asb serve` + runc, skipped without root or runc."""
import os
import time

from asb_apiserver import CORE, sandbox
from local_sandbox import (condition, create, get_sandbox, runc_ids, runc_list, sbx_state, sockets,  # noqa: F401
                           start_sbx, wait_ready)
from test_local_sandbox_runtime import rest, wait_for


def at(seconds_from_now):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + seconds_from_now))


def exists(asb, name):
    return asb.get(asb.path(CORE, "sandboxes", "default", name)).status_code == 200


def test_expiry_delete_removes_object_and_container(start_sbx, sbx_state):
    asb = start_sbx()
    uid = create(asb, "ttl", shutdownTime=at(3), shutdownPolicy="Delete")["metadata"]["uid"]
    wait_ready(asb, "ttl")
    assert uid in runc_ids(sbx_state)
    base = os.path.join(sbx_state, "sandboxes", uid)
    # Not before its time (>= 1.x s left: the time has whole seconds).
    time.sleep(0.5)
    assert exists(asb, "ttl") and uid in runc_ids(sbx_state)
    t0 = time.monotonic()
    assert wait_for(lambda: not exists(asb, "ttl"), timeout=8), asb.output()
    assert time.monotonic() - t0 < 6
    assert wait_for(lambda: uid not in runc_ids(sbx_state))
    assert wait_for(lambda: not os.path.exists(base))
    out = asb.output()
    assert "sandbox expired" in out


def test_expiry_retain_keeps_object_and_workspace(start_sbx, sbx_state):
    asb = start_sbx()
    uid = create(asb, "keepme", shutdownTime=at(3), shutdownPolicy="Retain")["metadata"]["uid"]
    wait_ready(asb, "keepme")
    assert rest(sockets(sbx_state, uid)[0], "PUT", "/v1/files/result.txt", b"42")[0] == 204
    obj = wait_ready(asb, "keepme", timeout=10, want="False", reason="SandboxExpired")
    assert condition(obj, "Ready")["message"] == "Sandbox has expired"
    assert wait_for(lambda: uid not in runc_ids(sbx_state))

    def settled():
        o = get_sandbox(asb, "keepme")
        return set(o["status"]) == {"conditions"} and \
            "agents.x-k8s.io/pod-name" not in (o["metadata"].get("annotations") or {})
    assert wait_for(settled), get_sandbox(asb, "keepme")
    obj = get_sandbox(asb, "keepme")
    ready = condition(obj, "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "SandboxExpired")
    assert condition(obj, "Suspended") is not None  # always present, left as it was
    ws = os.path.join(sbx_state, "sandboxes", uid, "workspace", "result.txt")
    assert open(ws, "rb").read() == b"42"
    # Never recreated, also not by a resync or an unrelated write.
    p = asb.path(CORE, "sandboxes", "default", "keepme")
    assert asb.merge_patch(p, {"metadata": {"labels": {"touched": "yes"}}}).status_code == 200
    time.sleep(1.0)  # the point: nothing recreates it in the meantime
    assert uid not in runc_ids(sbx_state)
    assert condition(get_sandbox(asb, "keepme"), "Ready")["reason"] == "SandboxExpired"
    # Deleting the retained object removes its workspace.
    assert asb.delete(p).status_code == 200
    assert wait_for(lambda: not os.path.exists(os.path.join(sbx_state, "sandboxes", uid)))


def test_past_shutdown_time_expires_at_once(start_sbx, sbx_state):
    asb = start_sbx()
    create(asb, "late", shutdownTime=at(-60), shutdownPolicy="Retain")
    obj = wait_ready(asb, "late", timeout=5, want="False", reason="SandboxExpired")
    assert condition(obj, "Ready")["message"] == "Sandbox has expired"
    time.sleep(0.5)
    uid = obj["metadata"]["uid"]
    assert uid not in runc_ids(sbx_state)
    create(asb, "later", shutdownTime=at(-60), shutdownPolicy="Delete")
    assert wait_for(lambda: not exists(asb, "later"), timeout=5)


def test_extending_shutdown_time_moves_expiry(start_sbx, sbx_state):
    asb = start_sbx()
    uid = create(asb, "tools", shutdownTime=at(3), shutdownPolicy="Delete")["metadata"]["uid"]
    wait_ready(asb, "tools")
    p = asb.path(CORE, "sandboxes", "default", "tools")
    assert asb.merge_patch(p, {"spec": {"shutdownTime": at(60)}}).status_code == 200
    time.sleep(5)  # the point: the first shutdownTime (3 s) passes
    obj = get_sandbox(asb, "tools")
    assert condition(obj, "Ready")["status"] == "True"
    assert uid in runc_ids(sbx_state)
    # And pulling it in again expires it.
    assert asb.merge_patch(p, {"spec": {"shutdownTime": at(-1)}}).status_code == 200
    assert wait_for(lambda: not exists(asb, "tools"), timeout=5)
    assert wait_for(lambda: uid not in runc_ids(sbx_state))


def test_expiry_honoured_across_restart(start_sbx, sbx_state):
    asb = start_sbx()
    gone = create(asb, "gone", shutdownTime=at(3), shutdownPolicy="Delete")["metadata"]["uid"]
    kept = create(asb, "kept", shutdownTime=at(3), shutdownPolicy="Retain")["metadata"]["uid"]
    live = create(asb, "live", shutdownTime=at(600), shutdownPolicy="Delete")["metadata"]["uid"]
    for n in ("gone", "kept", "live"):
        wait_ready(asb, n)
    asb.kill9()
    time.sleep(4)  # the point: the shutdownTimes (3 s) pass while the server is down
    # The control plane was down when they expired: the containers still run.
    assert {gone, kept, live} <= runc_ids(sbx_state)
    asb2 = start_sbx()
    assert wait_for(lambda: not exists(asb2, "gone"), timeout=5), asb2.output()
    obj = wait_ready(asb2, "kept", timeout=5, want="False", reason="SandboxExpired")
    assert wait_for(lambda: gone not in runc_ids(sbx_state) and kept not in runc_ids(sbx_state))
    assert os.path.isdir(os.path.join(sbx_state, "sandboxes", kept, "workspace"))
    assert wait_for(lambda: not os.path.exists(os.path.join(sbx_state, "sandboxes", gone)))
    # The one still in its lifetime was re-adopted as is.
    assert condition(wait_ready(asb2, "live"), "Ready")["status"] == "True"
    assert live in runc_ids(sbx_state)
    assert obj["metadata"]["uid"] == kept


def test_kill9_between_the_two_passes(start_sbx, sbx_state):
    """A server that dies after the first pass (Ready=SandboxExpired persisted) finishes the
    second pass at start: simulated by storing the expired condition with the runtime off."""
    asb = start_sbx()
    uid = create(asb, "half", shutdownTime=at(600), shutdownPolicy="Delete")["metadata"]["uid"]
    wait_ready(asb, "half")
    asb.kill9()
    off = start_sbx(env={"ASB_RUNTIME": "none"})
    p = off.path(CORE, "sandboxes", "default", "half")
    obj = off.get(p).json()
    for c in obj["status"]["conditions"]:
        if c["type"] == "Ready":
            c.update(status="False", reason="SandboxExpired", message="Sandbox has expired")
    obj["spec"]["shutdownTime"] = at(-1)
    r = off.put(p, obj)
    assert r.status_code == 200, r.text
    obj = r.json()
    obj["status"] = {"conditions": [c for c in get_sandbox(off, "half")["status"]["conditions"]]}
    for c in obj["status"]["conditions"]:
        if c["type"] == "Ready":
            c.update(status="False", reason="SandboxExpired", message="Sandbox has expired")
    r = off.put(off.path(CORE, "sandboxes", "default", "half", sub="status"), obj)
    assert r.status_code == 200, r.text
    assert off.stop() == 0
    assert uid in runc_ids(sbx_state)
    asb2 = start_sbx()
    assert wait_for(lambda: not exists(asb2, "half"), timeout=5), asb2.output()
    assert wait_for(lambda: uid not in runc_ids(sbx_state))


COUNTER = r"""
import os, sys, time
token = os.urandom(8).hex()      # lives only in this process's memory
i = 0
while True:
    i += 1
    with open("/workspace/counter.tmp", "w") as f:
        f.write(f"{os.getpid()} {token} {i}")
    os.replace("/workspace/counter.tmp", "/workspace/counter")
    time.sleep(0.05)
"""


def read_counter(sbx_state, uid):
    try:
        with open(os.path.join(sbx_state, "sandboxes", uid, "workspace", "counter")) as f:
            pid, token, i = f.read().split()
            return int(pid), token, int(i)
    except (OSError, ValueError):
        return None


def test_suspend_freezes_process_and_resume_keeps_its_memory(start_sbx, sbx_state):
    from grpc_helpers import Client
    asb = start_sbx()
    uid = create(asb, "frozen")["metadata"]["uid"]
    wait_ready(asb, "frozen")
    client = Client(f"unix:{sockets(sbx_state, uid)[1]}")
    stream = client.start(["python3", "-c", COUNTER], cwd="/workspace")
    assert wait_for(lambda: (read_counter(sbx_state, uid) or (0, "", 0))[2] >= 5), asb.output()
    pid, token, _ = read_counter(sbx_state, uid)
    p = asb.path(CORE, "sandboxes", "default", "frozen")
    assert asb.merge_patch(p, {"spec": {"operatingMode": "Suspended"}}).status_code == 200
    obj = wait_ready(asb, "frozen", want="False", reason="SandboxSuspended")
    assert wait_for(lambda: condition(get_sandbox(asb, "frozen"), "Suspended")["status"] == "True")
    obj = get_sandbox(asb, "frozen")
    assert condition(obj, "Ready")["message"] == "Sandbox is suspended"
    assert condition(obj, "Suspended")["reason"] == "PodFrozen"
    assert {c["id"]: c["status"] for c in runc_list(sbx_state)}[uid] == "paused"
    # Frozen: the counter does not move.
    frozen_at = read_counter(sbx_state, uid)
    time.sleep(1.0)  # the point: the counter stays still for a while
    assert read_counter(sbx_state, uid) == frozen_at
    # Resume: thawed at once, the same process with the same in-memory token carries on.
    t0 = time.monotonic()
    assert asb.merge_patch(p, {"spec": {"operatingMode": "Running"}}).status_code == 200
    obj = wait_ready(asb, "frozen", timeout=5)
    assert time.monotonic() - t0 < 2
    assert condition(obj, "Suspended")["reason"] == "NotSuspended"
    assert wait_for(lambda: read_counter(sbx_state, uid)[2] > frozen_at[2] + 3)
    pid2, token2, i2 = read_counter(sbx_state, uid)
    assert (pid2, token2) == (pid, token)
    assert i2 < frozen_at[2] + 40  # it did not run while frozen
    assert "sandbox thawed" in asb.output()
    stream.cancel()
    client.close()


def test_frozen_sandbox_survives_restart_and_expires(start_sbx, sbx_state):
    asb = start_sbx()
    uid = create(asb, "cold")["metadata"]["uid"]
    wait_ready(asb, "cold")
    p = asb.path(CORE, "sandboxes", "default", "cold")
    assert asb.merge_patch(p, {"spec": {"operatingMode": "Suspended"}}).status_code == 200
    assert wait_for(lambda: {c["id"]: c["status"] for c in runc_list(sbx_state)}.get(uid) == "paused")
    asb.kill9()
    asb2 = start_sbx()
    assert wait_for(lambda: "re-adopted sandbox container" in asb2.output())
    assert {c["id"]: c["status"] for c in runc_list(sbx_state)}[uid] == "paused"
    assert condition(get_sandbox(asb2, "cold"), "Suspended")["reason"] == "PodFrozen"
    # A frozen sandbox that expires is removed (thawed, then killed).
    assert asb2.merge_patch(p, {"spec": {"shutdownTime": at(-1),
                                         "shutdownPolicy": "Delete"}}).status_code == 200
    assert wait_for(lambda: not exists(asb2, "cold"), timeout=5)
    assert wait_for(lambda: uid not in runc_ids(sbx_state), timeout=5)


VCT = [{"metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"],
                                               "resources": {"requests": {"storage": "1Gi"}}}}]
DATA_MOUNT = {"volumeMounts": [{"name": "data", "mountPath": "/data"}]}


def test_volume_claim_template_persists_and_is_removed_on_delete(start_sbx, sbx_state):
    from grpc_helpers import Client
    asb = start_sbx()
    uid = create(asb, "vol", container=DATA_MOUNT, volumeClaimTemplates=VCT)["metadata"]["uid"]
    wait_ready(asb, "vol")
    host_dir = os.path.join(sbx_state, "volumes", uid, "data")
    assert os.path.isdir(host_dir)
    client = Client(f"unix:{sockets(sbx_state, uid)[1]}")
    r = client.execute(["sh", "-c", "echo persisted > /data/f && id -u && stat -c %u /data"])
    assert r.exit_code == 0, r.stderr
    assert r.stdout.decode().split() == ["1000", "1000"]
    client.close()
    assert open(os.path.join(host_dir, "f")).read() == "persisted\n"
    p = asb.path(CORE, "sandboxes", "default", "vol")
    # Survives suspend/resume.
    assert asb.merge_patch(p, {"spec": {"operatingMode": "Suspended"}}).status_code == 200
    wait_ready(asb, "vol", want="False", reason="SandboxSuspended")
    assert os.path.exists(os.path.join(host_dir, "f"))
    assert asb.merge_patch(p, {"spec": {"operatingMode": "Running"}}).status_code == 200
    wait_ready(asb, "vol")
    # Survives a restart of the container (dead sandboxd -> new container on the same dirs).
    asb.kill9()
    assert runc_ids(sbx_state) == {uid}
    import subprocess
    from local_sandbox import RUNC
    subprocess.run([RUNC, "--root", os.path.join(sbx_state, "runc"), "delete", "--force", uid],
                   check=True)
    asb2 = start_sbx()
    wait_ready(asb2, "vol", timeout=15)
    client = Client(f"unix:{sockets(sbx_state, uid)[1]}")
    r = client.execute(["cat", "/data/f"])
    assert (r.exit_code, r.stdout) == (0, b"persisted\n")
    client.close()
    # Removed with the Sandbox.
    assert asb2.delete(p).status_code == 200
    assert wait_for(lambda: not os.path.exists(os.path.join(sbx_state, "volumes", uid)))


def test_volume_claim_template_survives_retain_expiry(start_sbx, sbx_state):
    asb = start_sbx()
    uid = create(asb, "volret", container=DATA_MOUNT, volumeClaimTemplates=VCT,
                 shutdownTime=at(2), shutdownPolicy="Retain")["metadata"]["uid"]
    host_dir = os.path.join(sbx_state, "volumes", uid, "data")
    wait_ready(asb, "volret", timeout=10, want="False", reason="SandboxExpired")
    assert wait_for(lambda: uid not in runc_ids(sbx_state))
    assert os.path.isdir(host_dir)


def test_bad_volume_mount_is_refused_at_admission(start_sbx, sbx_state):
    """A mount path the runtime could not use is a 422 before anything is stored (it used to be
    stored and fail at every start)."""
    asb = start_sbx()
    body = sandbox("badvol", volumeClaimTemplates=VCT)
    body["spec"]["podTemplate"]["spec"]["containers"][0]["volumeMounts"] = [
        {"name": "data", "mountPath": "/x/../etc"}]
    r = asb.post(asb.path(CORE, "sandboxes", "default"), body)
    assert r.status_code == 422, r.text
    assert 'spec.podTemplate.spec.containers[0].volumeMounts[0].mountPath: Invalid value: ' \
        '"/x/../etc": must be an absolute path' in r.json()["message"]
    assert asb.get(asb.path(CORE, "sandboxes", "default", "badvol")).status_code == 404
    assert asb.running


def wait_finished(asb, name, timeout=10):
    deadline = time.monotonic() + timeout
    obj = None
    while time.monotonic() < deadline:
        obj = get_sandbox(asb, name)
        if condition(obj, "Finished"):
            return obj
        time.sleep(0.02)
    raise AssertionError(f"{name} not Finished: {obj}\n{asb.output()}")


def test_main_command_success_is_finished(start_sbx, sbx_state):
    asb = start_sbx()
    uid = create(asb, "job", container={
        "command": ["sh", "-c"], "args": ["echo out; echo err >&2; echo done > /workspace/r; sleep 0.5"]})["metadata"]["uid"]
    wait_ready(asb, "job")  # sandboxd answers while the main process runs
    obj = wait_finished(asb, "job")
    fin, ready = condition(obj, "Finished"), condition(obj, "Ready")
    assert (fin["status"], fin["reason"]) == ("True", "PodSucceeded")
    assert "code 0" in fin["message"]
    assert (ready["status"], ready["reason"], ready["message"]) == \
        ("False", "PodSucceeded", "Pod completed successfully")
    main_log = os.path.join(sbx_state, "sandboxes", uid, "main.log")  # asb serve's copy of the pipe
    assert open(main_log).read().split() == ["out", "err"]
    assert open(os.path.join(sbx_state, "sandboxes", uid, "workspace", "r")).read() == "done\n"
    # sandboxd keeps serving the results; the main process is not started again.
    assert rest(sockets(sbx_state, uid)[0], "GET", "/v1/files/r") == (200, b"done\n")
    time.sleep(0.5)
    assert open(main_log).read().split() == ["out", "err"]


def test_main_command_failure_and_restart(start_sbx, sbx_state):
    asb = start_sbx()
    uid = create(asb, "bad", container={"command": ["sh", "-c", "sleep 2; exit 3"]})["metadata"]["uid"]
    wait_ready(asb, "bad")
    asb.kill9()  # exits while the control plane is down
    exit_file = os.path.join(sbx_state, "sandboxes", uid, "main", "exit")
    assert wait_for(lambda: os.path.exists(exit_file) and open(exit_file).read().strip(), timeout=10)
    asb2 = start_sbx()
    obj = wait_finished(asb2, "bad")
    fin, ready = condition(obj, "Finished"), condition(obj, "Ready")
    assert (fin["reason"], ready["reason"], ready["message"]) == ("PodFailed", "PodFailed", "Pod failed")
    assert "code 3" in fin["message"]
    assert uid in runc_ids(sbx_state)
    # Not found: 127, a clear Finished/PodFailed, no crash.
    create(asb2, "nope", container={"command": ["/no/such/program"]})
    obj = wait_finished(asb2, "nope")
    assert "code 127" in condition(obj, "Finished")["message"]
    # Bad input is refused by the API (command[1] not a string) or is a condition.
    body_bad = {"command": ["sh", 5]}
    from asb_apiserver import sandbox as sandbox_body
    b = sandbox_body("weird")
    b["spec"]["podTemplate"]["spec"]["containers"][0].update(body_bad)
    assert asb2.post(asb2.path(CORE, "sandboxes", "default"), b).status_code == 422
    b = sandbox_body("empty")
    b["spec"]["podTemplate"]["spec"]["containers"][0]["command"] = [""]
    r = asb2.post(asb2.path(CORE, "sandboxes", "default"), b)
    assert r.status_code == 422 and "the program name may not be empty" in r.json()["message"], r.text
    assert asb2.running


def test_main_command_suspend_freezes_it_too(start_sbx, sbx_state):
    asb = start_sbx()
    uid = create(asb, "mainfrz", container={"command": ["python3", "-c", COUNTER]})["metadata"]["uid"]
    wait_ready(asb, "mainfrz")
    assert wait_for(lambda: (read_counter(sbx_state, uid) or (0, "", 0))[2] >= 3)
    p = asb.path(CORE, "sandboxes", "default", "mainfrz")
    assert asb.merge_patch(p, {"spec": {"operatingMode": "Suspended"}}).status_code == 200
    assert wait_for(lambda: {c["id"]: c["status"] for c in runc_list(sbx_state)}.get(uid) == "paused")
    a = read_counter(sbx_state, uid)
    time.sleep(0.6)
    assert read_counter(sbx_state, uid) == a
    assert asb.merge_patch(p, {"spec": {"operatingMode": "Running"}}).status_code == 200
    wait_ready(asb, "mainfrz")
    assert wait_for(lambda: read_counter(sbx_state, uid)[2] > a[2])
    assert read_counter(sbx_state, uid)[:2] == a[:2]
    assert condition(get_sandbox(asb, "mainfrz"), "Finished") is None
