"""A Finished sandbox (its main process exited: PodSucceeded/PodFailed) keeps serving files and
exec until it is deleted (docs/local-sandboxes.md), through the CLI, libasb and the router; and
the router answers at once, never after its Ready wait, for a sandbox that will not become Ready
(issue 14). One `asb serve` with real runc sandboxes and its embedded router for the module;
skipped without root or runc."""
import os
import re
import time

import grpc
import pytest
import requests

from asb_cli import cli_env, ok, run
from local_sandbox import condition, create, get_sandbox, wait_ready
from grpc_helpers import Client
from router_fixture import router_env_fixture
from test_libasb_sandbox import probe, results, run_probe  # noqa: F401 (fixture)

router_env = router_env_fixture()

# Far below the router's 60 s Ready wait, far above any honest answer on a loaded 2-core machine.
AT_ONCE_S = 10


def wait_for_obj(asb, name, pred, what, timeout=20):
    deadline = time.monotonic() + timeout
    obj = None
    while time.monotonic() < deadline:
        obj = get_sandbox(asb, name)
        if pred(obj):
            return obj
        time.sleep(0.02)
    raise AssertionError(f"{name} not {what}: {obj}\n{asb.output()}")


def finished(obj):
    c = condition(obj, "Finished")
    return c is not None and c["status"] == "True"


def router_lines(asb, name):
    """The router's log lines about sandbox `name` (asb serve's output)."""
    return [l for l in asb.output().splitlines()
            if ": router: " in l and re.search(rf" sandbox={re.escape(name)}(\s|$)", l)]


def grpc_meta(env, name):
    return [("x-sandbox-id", name), ("authorization", f"Bearer {env.token}")]


@pytest.fixture(scope="module")
def gclient(router_env):
    c = Client(router_env.hostport())
    yield c
    c.close()


def router_get(env, name, path):
    t0 = time.monotonic()
    r = requests.get(env.url + path, headers=env.headers(name), timeout=120)
    return r, time.monotonic() - t0


@pytest.mark.parametrize("code", [0, 3])
def test_finished_sandbox_serves_files_and_exec(router_env, probe, gclient, tmp_path, code):  # noqa: F811
    asb, name = router_env.asb, f"fin{code}"
    create(asb, name, container={"command": ["sh", "-c", f"echo result-{code} > out.txt; exit {code}"]})
    obj = wait_for_obj(asb, name, finished, "Finished")
    want = "PodSucceeded" if code == 0 else "PodFailed"
    assert (condition(obj, "Finished")["reason"], condition(obj, "Ready")["status"]) == (want, "False")
    assert f"code {code}" in condition(obj, "Finished")["message"]
    assert obj["status"].get("selector"), obj  # its container is kept

    # CLI: exec, cp and ls work and see what the main process wrote.
    assert ok(asb, "exec", name, "--", "cat", "out.txt") == f"result-{code}\n"
    p = run(asb, "exec", name, "--", "sh", "-c", "exit 5")
    assert p.returncode == 5, p.stderr
    dest = tmp_path / "out.txt"
    ok(asb, "cp", f"{name}:out.txt", str(dest))
    assert dest.read_text() == f"result-{code}\n"
    assert "out.txt" in ok(asb, "ls", name)
    ok(asb, "cp", "-", f"{name}:later.txt", input="written after the end\n")
    assert ok(asb, "exec", name, "--", "cat", "later.txt") == "written after the end\n"

    # libasb: asb_sandbox_open by name, then Execute.
    out = run_probe(probe, "-", "-", "byname", name, env=cli_env(asb))
    r = results(out)
    assert r["open"][0] == 0 and r["execute"][0] == 0 and "out by-name" in out, out

    # Router: served at once, without the wait for Ready (no "waiting" line for it).
    r, took = router_get(router_env, name, "/v1/files/out.txt")
    assert (r.status_code, r.content) == (200, f"result-{code}\n".encode()), r.text
    assert took < AT_ONCE_S, took
    assert not [l for l in router_lines(asb, name) if "waiting for sandbox" in l], asb.output()
    # ... and exec over gRPC through the router too.
    r = gclient.execute(["cat", "out.txt"], metadata=grpc_meta(router_env, name))
    assert (r.exit_code, r.stdout) == (0, f"result-{code}\n".encode())
    # Still the same main process result: it was not started again.
    assert condition(get_sandbox(asb, name), "Finished")["message"] == condition(obj, "Finished")["message"]


def test_never_ready_sandbox_is_refused_at_once(router_env, gclient):
    asb = router_env.asb
    # Unsupported image: ImageNotSupported, final for this generation.
    create(asb, "badimg", image="python:3.13-slim")
    wait_ready(asb, "badimg", want="False", reason="ImageNotSupported")
    r, took = router_get(router_env, "badimg", "/v1/files/x")
    assert r.status_code == 503, r.text
    detail = r.json()["detail"]
    assert detail.startswith('Sandbox "badimg" in namespace "default" will not become ready '
                             '(ImageNotSupported: image "python:3.13-slim" is not supported'), detail
    assert took < AT_ONCE_S, took
    assert not [l for l in router_lines(asb, "badimg") if "waiting for sandbox" in l], asb.output()
    # Over gRPC: UNAVAILABLE with the same text, at once.
    t0 = time.monotonic()
    with pytest.raises(grpc.RpcError) as e:
        gclient.execute(["true"], metadata=grpc_meta(router_env, "badimg"))
    assert e.value.code() == grpc.StatusCode.UNAVAILABLE, e.value
    assert "will not become ready (ImageNotSupported: " in e.value.details()
    assert time.monotonic() - t0 < AT_ONCE_S
    # The CLI names the same reason.
    p = run(asb, "exec", "badimg", "--", "true")
    assert p.returncode == 1 and 'is not ready (ImageNotSupported: ' in p.stderr, p.stderr

    # A request that arrives while the sandbox is still being set up waits, and gets its answer
    # as soon as the reconciler says ReconcilerError, not at the end of the wait.
    # (A user id beyond the sandbox's user namespace: only the runtime knows its size.)
    create(asb, "noprog", container={"securityContext": {"runAsUser": 70000}})
    r, took = router_get(router_env, "noprog", "/v1/files/x")
    assert r.status_code == 503, r.text
    assert "(ReconcilerError: " in r.json()["detail"] and "maps ids 0-" in r.json()["detail"]
    assert took < AT_ONCE_S, took

    # Unknown (or deleted): 404 at once.
    r, took = router_get(router_env, "nosuchbox", "/v1/files/x")
    assert r.status_code == 404 and took < AT_ONCE_S
    assert r.json() == {"detail": 'Sandbox "nosuchbox" not found in namespace "default".'}


def test_finished_sandbox_without_container_is_refused(router_env):
    asb = router_env.asb
    at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 4))
    create(asb, "gone", container={"command": ["sh", "-c", "echo kept > out.txt"]},
           shutdownTime=at, shutdownPolicy="Retain")
    wait_for_obj(asb, "gone", finished, "Finished")
    # Expired with Retain: Finished is kept, the container is removed.
    wait_for_obj(asb, "gone", lambda o: finished(o) and not (o.get("status") or {}).get("selector")
                 and (condition(o, "Ready") or {}).get("reason") == "SandboxExpired",
                 "expired without its container", timeout=30)
    r, took = router_get(router_env, "gone", "/v1/files/out.txt")
    assert r.status_code == 503, r.text
    assert r.json()["detail"].startswith(
        'Sandbox "gone" in namespace "default" has finished and its container is gone (PodSucceeded: '), r.text
    assert took < AT_ONCE_S, took
    p = run(asb, "ls", "gone")
    assert p.returncode == 1 and p.stderr.startswith(
        'error: sandbox "gone" has finished and its container is gone (PodSucceeded: '), p.stderr
