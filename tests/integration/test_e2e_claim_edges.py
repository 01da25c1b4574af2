"""SandboxClaim edge cases from a user's side (UPSTREAM.md §2.8): a missing pool, a shutdownTime
already past, two claims racing for a pool of 1, the pool deleted under a bound claim, and
`asb claim --ttl 1s` expiring."""
import datetime
import time
from concurrent.futures import ThreadPoolExecutor

from asb_apiserver import CORE, EXT
from asb_cli import ok, run
from claims_helpers import (claim, condition, create, get, is_ready, items, pool, template,
                            wait_claim, wait_for, wait_pool_ready)
from local_sandbox import sbx_state, start_sbx  # noqa: F401  (fixtures)
from waiting import read_until


def past(seconds=60):
    t = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(seconds=seconds)
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def test_claim_for_missing_pool_then_pool_appears(start_sbx):
    asb = start_sbx()
    create(asb, EXT, "sandboxclaims", claim("orphan", "ghost-pool"))
    c = wait_claim(asb, "orphan", reason="WarmPoolNotFound", timeout=10)
    cond = condition(c)
    assert cond["status"] == "False"
    assert cond["message"] == 'SandboxWarmPool "ghost-pool" not found'
    assert not (c.get("status") or {}).get("sandbox", {}).get("name")
    # The server keeps serving, and the claim binds once the pool and template exist.
    create(asb, EXT, "sandboxtemplates", template("tpl"))
    create(asb, EXT, "sandboxwarmpools", pool("ghost-pool", "tpl", replicas=1))
    c = wait_claim(asb, "orphan", timeout=60)
    assert c["status"]["sandbox"]["name"]


def test_claim_with_shutdown_time_in_the_past(start_sbx):
    asb = start_sbx()
    create(asb, EXT, "sandboxtemplates", template("tpl"))
    create(asb, EXT, "sandboxwarmpools", pool("wp", "tpl", replicas=1))
    wait_pool_ready(asb, "wp", 1)
    create(asb, EXT, "sandboxclaims",
           claim("late", "wp", lifecycle={"shutdownTime": past(), "shutdownPolicy": "Delete"}))
    # Expired before it was ever bound: Delete policy removes the claim; no sandbox is adopted.
    wait_for("the expired claim to go", lambda: get(asb, EXT, "sandboxclaims", "late") is None, 15, asb=asb)
    assert get(asb, CORE, "sandboxes", "late") is None
    ms = wait_pool_ready(asb, "wp", 1)
    assert ms[0]["metadata"]["ownerReferences"][0]["kind"] == "SandboxWarmPool"


def test_claim_with_shutdown_time_in_the_past_retain(start_sbx):
    asb = start_sbx()
    create(asb, EXT, "sandboxtemplates", template("tpl"))
    create(asb, EXT, "sandboxwarmpools", pool("wp", "tpl", replicas=0))
    create(asb, EXT, "sandboxclaims",
           claim("late", "wp", lifecycle={"shutdownTime": past(), "shutdownPolicy": "Retain"}))
    c = wait_claim(asb, "late", reason="ClaimExpired", timeout=15)
    assert condition(c)["status"] == "False"
    time.sleep(1)  # the point: the claim is still there a while later
    assert get(asb, EXT, "sandboxclaims", "late") is not None  # Retain keeps the claim
    assert get(asb, CORE, "sandboxes", "late") is None


def test_two_claims_race_for_a_pool_of_one(start_sbx):
    asb = start_sbx()
    create(asb, EXT, "sandboxtemplates", template("tpl"))
    create(asb, EXT, "sandboxwarmpools", pool("one", "tpl", replicas=1))
    warm = wait_pool_ready(asb, "one", 1)[0]["metadata"]["name"]
    with ThreadPoolExecutor(2) as ex:
        list(ex.map(lambda n: create(asb, EXT, "sandboxclaims", claim(n, "one")), ["ra", "rb"]))
    a = wait_claim(asb, "ra", timeout=60)
    b = wait_claim(asb, "rb", timeout=60)
    names = {a["status"]["sandbox"]["name"], b["status"]["sandbox"]["name"]}
    assert len(names) == 2, names  # never double-assigned
    assert warm in names  # one adopted warm
    types = sorted(get(asb, CORE, "sandboxes", n)["metadata"]["labels"]["agents.x-k8s.io/launch-type"]
                   for n in names)
    # The other is either a cold create (claim name) or a refilled warm member.
    cold = [n for n in names if n != warm][0]
    if types == ["cold", "warm"]:
        assert cold in ("ra", "rb")
    else:
        assert types == ["warm", "warm"], types
    wait_pool_ready(asb, "one", 1)


def test_pool_deleted_while_claim_bound(start_sbx):
    asb = start_sbx()
    create(asb, EXT, "sandboxtemplates", template("tpl"))
    create(asb, EXT, "sandboxwarmpools", pool("wp", "tpl", replicas=2))
    wait_pool_ready(asb, "wp", 2)
    c = create(asb, EXT, "sandboxclaims", claim("keep", "wp"))
    c = wait_claim(asb, "keep")
    sname = c["status"]["sandbox"]["name"]
    r = asb.delete(asb.path(EXT, "sandboxwarmpools", "default", "wp"))
    assert r.status_code == 200, r.text
    # Pool members are garbage-collected with the pool; the adopted one (owned by the claim) stays.
    def members_gone():
        sbs = items(asb, CORE, "sandboxes")
        return [s["metadata"]["name"] for s in sbs] == [sname] or None
    wait_for("pool members to be collected", members_gone, 30, 0.1, asb)
    time.sleep(1)  # the point: the adopted sandbox is not collected a while later either
    sb = get(asb, CORE, "sandboxes", sname)
    assert sb is not None and is_ready(sb)
    c = get(asb, EXT, "sandboxclaims", "keep")
    assert is_ready(c), c["status"]
    assert c["status"]["sandbox"]["name"] == sname
    assert ok(asb, "exec", "keep", "--", "echo", "still here") == "still here\n"


def test_cli_claim_ttl_expires(start_sbx):
    asb = start_sbx()
    create(asb, EXT, "sandboxtemplates", template("tpl"))
    create(asb, EXT, "sandboxwarmpools", pool("wp", "tpl", replicas=2))
    wait_pool_ready(asb, "wp", 2)
    p = run(asb, "claim", "--pool", "wp", "--ttl", "1s", "--policy", "Delete", "--name", "short")
    assert p.returncode == 0, p.stderr
    sbx = p.stdout.strip()
    wait_for("claim and sandbox to expire",
             lambda: get(asb, EXT, "sandboxclaims", "short") is None
             and get(asb, CORE, "sandboxes", sbx) is None, 20, 0.1, asb)
    # Default policy (Retain, per docs/cli.md): the claim stays, its sandbox goes.
    p = run(asb, "claim", "--pool", "wp", "--ttl", "1s", "--name", "kept")
    assert p.returncode == 0, p.stderr
    sbx = p.stdout.strip()
    wait_for("the retained claim's sandbox to go", lambda: get(asb, CORE, "sandboxes", sbx) is None,
             20, 0.1, asb)
    c = get(asb, EXT, "sandboxclaims", "kept")
    assert c is not None and condition(c)["reason"] == "ClaimExpired", c
    wait_pool_ready(asb, "wp", 2)


def test_ttl_after_finished(start_sbx):
    """A cold claim whose main process exits: Finished mirrored on the claim, then
    ttlSecondsAfterFinished with Delete removes the claim and its sandbox."""
    asb = start_sbx()
    t = template("job")
    t["spec"]["podTemplate"]["spec"]["containers"][0]["command"] = ["sh", "-c", "sleep 1; exit 0"]
    create(asb, EXT, "sandboxtemplates", t)
    create(asb, EXT, "sandboxwarmpools", pool("jobs", "job", replicas=0))
    create(asb, EXT, "sandboxclaims",
           claim("run1", "jobs", lifecycle={"ttlSecondsAfterFinished": 2, "shutdownPolicy": "Delete"}))

    def finished():
        c = get(asb, EXT, "sandboxclaims", "run1")
        f = condition(c, "Finished")
        return c if f and f["status"] == "True" else None
    c = wait_for("Finished on the claim", finished, 30, 0.05, asb)
    assert condition(c, "Finished")["reason"] == "PodSucceeded", c["status"]
    t0 = time.monotonic()
    wait_for("claim and sandbox gone after the TTL",
             lambda: get(asb, EXT, "sandboxclaims", "run1") is None and get(asb, CORE, "sandboxes", "run1") is None,
             30, 0.05, asb)
    assert time.monotonic() - t0 >= 0.5


def test_claim_named_like_a_foreign_sandbox(start_sbx):
    asb = start_sbx()
    asb.create_sandbox("dup")
    create(asb, EXT, "sandboxtemplates", template("tpl"))
    create(asb, EXT, "sandboxwarmpools", pool("wp", "tpl", replicas=0))
    create(asb, EXT, "sandboxclaims", claim("dup", "wp"))
    c = wait_claim(asb, "dup", reason="ReconcilerError", timeout=15)
    assert 'sandbox "dup" is not controlled by claim "dup"' in condition(c)["message"], c["status"]
    sb = get(asb, CORE, "sandboxes", "dup")
    assert not sb["metadata"].get("ownerReferences"), sb["metadata"]


def test_bound_sandbox_deleted_behind_the_claims_back(start_sbx):
    asb = start_sbx()
    create(asb, EXT, "sandboxtemplates", template("tpl"))
    create(asb, EXT, "sandboxwarmpools", pool("wp", "tpl", replicas=1))
    wait_pool_ready(asb, "wp", 1)
    create(asb, EXT, "sandboxclaims", claim("c", "wp"))
    first = wait_claim(asb, "c")["status"]["sandbox"]["name"]
    r = asb.delete(asb.path(CORE, "sandboxes", "default", first))
    assert r.status_code == 200, r.text

    def rebound_or_missing():
        c = get(asb, EXT, "sandboxclaims", "c")
        cond = condition(c)
        name = ((c.get("status") or {}).get("sandbox") or {}).get("name")
        if cond and cond["status"] == "True" and name and name != first:
            return ("rebound", name)
        if cond and cond["reason"] == "SandboxMissing":
            return ("missing", None)
        return None
    what, name = wait_for("the claim to notice", rebound_or_missing, 30, 0.05, asb)
    print("bound sandbox deleted ->", what, name)
    # Either is a defensible reading of §2.8; never a claim that still says Ready with the old name.
    c = get(asb, EXT, "sandboxclaims", "c")
    assert ((c.get("status") or {}).get("sandbox") or {}).get("name") != first or not is_ready(c)


def test_suspend_claimed_sandbox_forwards_ready(start_sbx):
    asb = start_sbx()
    create(asb, EXT, "sandboxtemplates", template("tpl"))
    create(asb, EXT, "sandboxwarmpools", pool("wp", "tpl", replicas=1))
    wait_pool_ready(asb, "wp", 1)
    create(asb, EXT, "sandboxclaims", claim("c", "wp"))
    wait_claim(asb, "c")
    ok(asb, "suspend", "c")
    c = wait_claim(asb, "c", reason="SandboxSuspended", timeout=15)
    assert condition(c)["status"] == "False"
    p = run(asb, "exec", "c", "--", "true")
    assert p.returncode == 1 and "is not ready (SandboxSuspended" in p.stderr, p.stderr
    ok(asb, "resume", "c")
    wait_claim(asb, "c", timeout=15)
    assert ok(asb, "exec", "c", "--", "echo", "back") == "back\n"


def test_release_while_exec_runs(start_sbx):
    """A claim released under a running `asb exec` (and a gRPC stream through the router): both
    end promptly with an error instead of hanging."""
    import os
    import subprocess
    import threading
    from asb_apiserver import asb_binary
    from asb_cli import cli_env
    from grpc_helpers import Client
    asb = start_sbx()
    create(asb, EXT, "sandboxtemplates", template("tpl"))
    create(asb, EXT, "sandboxwarmpools", pool("wp", "tpl", replicas=1))
    wait_pool_ready(asb, "wp", 1)
    create(asb, EXT, "sandboxclaims", claim("busy", "wp"))
    sname = wait_claim(asb, "busy")["status"]["sandbox"]["name"]
    p = subprocess.Popen([asb_binary(), "exec", "busy", "--", "sh", "-c", "echo up; exec sleep 60"],
                         env=cli_env(asb),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    router = open(os.path.join(asb.state_dir, "router")).read().strip()
    g = Client(router[len("http://"):].rstrip("/"))
    result = {"events": []}

    def stream():
        try:
            for ev in g.start(["sleep", "60"], timeout=60,
                              metadata=[("x-sandbox-id", sname),
                                        ("authorization", f"Bearer {asb.token}")]):
                result["events"].append(ev)
        except Exception as e:  # grpc.RpcError expected
            result["error"] = e
    t = threading.Thread(target=stream, daemon=True)
    t.start()
    # Both are running in the sandbox before its claim goes.
    assert read_until(p.stdout, "up\n", timeout=20) == "up\n"
    wait_for("the gRPC process to start", lambda: result["events"] or "error" in result, 20, 0.05, asb)
    assert result["events"], result
    t0 = time.monotonic()
    assert asb.delete(asb.path(EXT, "sandboxclaims", "default", "busy")).status_code == 200
    try:
        _, err = p.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        p.kill()
        raise AssertionError("asb exec still running 20 s after its claim was released")
    assert p.returncode != 0, err
    t.join(20)
    g.close()
    assert not t.is_alive(), "gRPC stream through the router still open after the sandbox went"
    assert time.monotonic() - t0 < 20
    assert "error" in result or result["events"]
