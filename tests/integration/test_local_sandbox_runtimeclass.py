"""runtimeClassName -> OCI runtime handler (issue 4): a configured class runs the sandbox under
its own runtime CLI and state root, unknown classes and missing handlers are clear errors, and a
restarted `asb serve` re-adopts containers of every handler. Real `asb serve` + runc."""
import os
import shutil
import stat

from asb_apiserver import CORE, sandbox
from local_sandbox import (RUNC, condition, runc_ids, sbx_state, sockets,  # noqa: F401
                           start_sbx, wait_ready)
from test_local_sandbox_runtime import rest, wait_for


def wrapper(tmp_path):
    """A runtime CLI that logs each call and hands it to runc: proof of which handler ran."""
    log = tmp_path / "wrapped.log"
    path = tmp_path / "wrapped-runc"
    path.write_text(f"#!/bin/sh\necho \"$*\" >> {log}\nexec {RUNC} \"$@\"\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path), log


def create_with_class(asb, name, runtime_class):
    body = sandbox(name)
    body["spec"]["podTemplate"]["spec"]["runtimeClassName"] = runtime_class
    r = asb.post(asb.path(CORE, "sandboxes", "default"), body)
    assert r.status_code == 201, r.text
    return r.json()["metadata"]["uid"]


def wrapped_ids(state_dir):
    root = os.path.join(state_dir, "oci-wrapped-runc")
    return set(os.listdir(root)) if os.path.isdir(root) else set()


def test_runtime_class_selects_its_handler(start_sbx, sbx_state, tmp_path):
    binary, log = wrapper(tmp_path)
    env = {"ASB_RUNTIME_CLASSES": f"wrapped={binary}"}
    asb = start_sbx(env)
    uid = create_with_class(asb, "classy", "wrapped")
    plain = asb.post(asb.path(CORE, "sandboxes", "default"), sandbox("plain")).json()["metadata"]["uid"]
    wait_ready(asb, "classy")
    wait_ready(asb, "plain")
    calls = log.read_text()
    root = os.path.join(sbx_state, "oci-wrapped-runc")
    assert f"--root {root} run" in calls and uid in calls, calls
    assert plain not in calls  # the default runtime ran the other one
    assert uid in wrapped_ids(sbx_state) and uid not in runc_ids(sbx_state)
    assert rest(sockets(sbx_state, uid)[0], "GET", "/v1/health")[0] == 200

    # Restart: the wrapped container is re-adopted (same process), not torn down as an orphan.
    asb.stop()
    asb = start_sbx(env)
    wait_ready(asb, "classy")
    assert uid in wrapped_ids(sbx_state)
    assert wait_for(lambda: "re-adopted sandbox container" in asb.output()), asb.output()
    assert "removing container" not in asb.output(), asb.output()

    # Suspend/resume and delete go through the same handler.
    p = asb.path(CORE, "sandboxes", "default", "classy")
    assert asb.merge_patch(p, {"spec": {"operatingMode": "Suspended"}}).status_code == 200
    assert wait_for(lambda: f"pause {uid}" in log.read_text()), log.read_text()
    assert asb.merge_patch(p, {"spec": {"operatingMode": "Running"}}).status_code == 200
    assert wait_for(lambda: f"resume {uid}" in log.read_text()), log.read_text()
    wait_ready(asb, "classy")
    assert asb.delete(p).status_code == 200
    assert wait_for(lambda: uid not in wrapped_ids(sbx_state)), log.read_text()
    assert f"delete --force {uid}" in log.read_text()


def test_unknown_runtime_class_is_a_clear_error(start_sbx, sbx_state):
    asb = start_sbx()
    create_with_class(asb, "nosuch", "no-such-class")
    obj = wait_ready(asb, "nosuch", want="False", reason="ReconcilerError")
    msg = condition(obj, "Ready")["message"]
    assert 'RuntimeClass "no-such-class" not found' in msg, msg


def test_missing_handler_binary_is_a_clear_error(start_sbx, sbx_state, tmp_path):
    asb = start_sbx({"ASB_RUNTIME_CLASSES": f"ghost={tmp_path}/not-installed"})
    create_with_class(asb, "ghosted", "ghost")
    obj = wait_ready(asb, "ghosted", want="False", reason="ReconcilerError")
    msg = condition(obj, "Ready")["message"]
    assert "not installed" in msg and "ghost" in msg, msg
    if not shutil.which("runsc"):
        create_with_class(asb, "gvisor", "runsc")
        obj = wait_ready(asb, "gvisor", want="False", reason="ReconcilerError")
        assert 'handler "runsc"' in condition(obj, "Ready")["message"]


def test_malformed_runtime_classes_setting_is_reported(start_sbx, sbx_state):
    asb = start_sbx({"ASB_RUNTIME_CLASSES": "Bad Name=runc"})
    create_with_class(asb, "badcfg", "runc")
    obj = wait_ready(asb, "badcfg", want="False", reason="ReconcilerError")
    assert "ASB_RUNTIME_CLASSES" in condition(obj, "Ready")["message"]
    # Sandboxes without a class are unaffected.
    asb.post(asb.path(CORE, "sandboxes", "default"), sandbox("noclass"))
    wait_ready(asb, "noclass")
