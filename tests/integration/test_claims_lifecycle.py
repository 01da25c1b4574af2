"""SandboxClaim lifecycle on `asb serve` with real runc sandboxes (UPSTREAM.md §2.8 step 3):
shutdownTime and ttlSecondsAfterFinished with Retain, Delete and DeleteForeground."""
import datetime
import time

from asb_apiserver import CORE, EXT
from claims_helpers import (Watcher, claim, condition, create, get, pool, template, wait_claim,
                            wait_for, wait_pool_ready)
from local_sandbox import runc_ids, sbx_state, start_sbx  # noqa: F401  (fixtures)


def in_seconds(s):
    t = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=s)
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def make_pool(asb, replicas=1, **tpl):
    create(asb, EXT, "sandboxtemplates", template("tpl", **tpl))
    create(asb, EXT, "sandboxwarmpools", pool("wp", "tpl", replicas=replicas))
    if replicas:
        wait_pool_ready(asb, "wp", replicas)


def test_retain_deletes_the_sandbox_and_keeps_the_claim(start_sbx):
    asb = start_sbx()
    make_pool(asb)
    create(asb, EXT, "sandboxclaims", claim("r", "wp", lifecycle={
        "shutdownTime": in_seconds(2), "shutdownPolicy": "Retain"}))
    sname = wait_claim(asb, "r")["status"]["sandbox"]["name"]
    c = wait_claim(asb, "r", reason="ClaimExpired", timeout=15)
    assert condition(c)["status"] == "False"
    assert condition(c)["message"].startswith("Claim expired.")
    wait_for("sandbox deleted", lambda: get(asb, CORE, "sandboxes", sname) is None, 15, asb=asb)
    c = wait_for("status.sandbox cleared",
                 lambda: (lambda c: c if "sandbox" not in c.get("status", {}) else None)(
                     get(asb, EXT, "sandboxclaims", "r")), 10, asb=asb)
    assert condition(c)["reason"] == "ClaimExpired"  # terminal: no new sandbox is made


def test_delete_policy_deletes_claim_and_sandbox(start_sbx, sbx_state):
    asb = start_sbx()
    make_pool(asb)
    create(asb, EXT, "sandboxclaims", claim("d", "wp", lifecycle={
        "shutdownTime": in_seconds(2), "shutdownPolicy": "Delete"}))
    sname = wait_claim(asb, "d")["status"]["sandbox"]["name"]
    wait_for("claim deleted", lambda: get(asb, EXT, "sandboxclaims", "d") is None, 15, asb=asb)
    wait_for("sandbox collected", lambda: get(asb, CORE, "sandboxes", sname) is None, 15, asb=asb)


def test_delete_foreground_removes_claim_after_its_sandbox(start_sbx):
    asb = start_sbx()
    make_pool(asb)
    create(asb, EXT, "sandboxclaims", claim("f", "wp", lifecycle={
        "shutdownTime": in_seconds(2), "shutdownPolicy": "DeleteForeground"}))
    sname = wait_claim(asb, "f")["status"]["sandbox"]["name"]
    w = Watcher(asb, EXT, "sandboxclaims")
    ws = Watcher(asb, CORE, "sandboxes")
    try:
        wait_for("claim DELETED event", lambda: any(typ == "DELETED" for _, typ, _ in w.events), 15,
                 asb=asb)
        wait_for("sandbox DELETED event", lambda: any(typ == "DELETED" for _, typ, _ in ws.events), 5,
                 asb=asb)
        assert get(asb, CORE, "sandboxes", sname) is None
        marked = [t for t, typ, o in w.events if typ == "MODIFIED" and o["metadata"]["name"] == "f"
                  and o["metadata"].get("deletionTimestamp")]
        rv = lambda o: int(o["metadata"]["resourceVersion"])
        claim_gone = [rv(o) for _, typ, o in w.events if typ == "DELETED" and o["metadata"]["name"] == "f"]
        sb_gone = [rv(o) for _, typ, o in ws.events if typ == "DELETED" and o["metadata"]["name"] == sname]
        assert marked and claim_gone and sb_gone
        assert "foregroundDeletion" in [o for _, typ, o in w.events if typ == "MODIFIED"
                                        and o["metadata"].get("deletionTimestamp")][0]["metadata"]["finalizers"]
        assert sb_gone[0] < claim_gone[0]  # commit order: the sandbox went first
    finally:
        w.close()
        ws.close()


def test_ttl_after_finished(start_sbx):
    asb = start_sbx()
    make_pool(asb, replicas=0)
    body = template("job", image="host")
    body["spec"]["podTemplate"]["spec"]["containers"][0]["command"] = ["sh", "-c", "sleep 1"]
    create(asb, EXT, "sandboxtemplates", body)
    create(asb, EXT, "sandboxwarmpools", pool("jobs", "job", replicas=0))
    create(asb, EXT, "sandboxclaims", claim("t", "jobs", lifecycle={
        "ttlSecondsAfterFinished": 1, "shutdownPolicy": "Retain"}))
    c = wait_for("Finished mirrored", lambda: (lambda c: c if condition(c, "Finished") else None)(
        get(asb, EXT, "sandboxclaims", "t")), 20, asb=asb)
    assert condition(c, "Finished")["reason"] == "PodSucceeded"
    wait_claim(asb, "t", reason="ClaimExpired", timeout=15)
    wait_for("sandbox deleted", lambda: get(asb, CORE, "sandboxes", "t") is None, 15, asb=asb)


def test_extending_shutdown_time_postpones_expiry(start_sbx):
    asb = start_sbx()
    make_pool(asb)
    create(asb, EXT, "sandboxclaims", claim("x", "wp", lifecycle={"shutdownTime": in_seconds(2)}))
    wait_claim(asb, "x")
    r = asb.merge_patch(asb.path(EXT, "sandboxclaims", "default", "x"),
                        {"spec": {"lifecycle": {"shutdownTime": in_seconds(600)}}})
    assert r.status_code == 200, r.text
    time.sleep(3.5)
    c = get(asb, EXT, "sandboxclaims", "x")
    assert condition(c)["status"] == "True", c


def test_deleting_a_claim_collects_its_sandbox(start_sbx, sbx_state):
    asb = start_sbx()
    make_pool(asb)
    create(asb, EXT, "sandboxclaims", claim("gone", "wp"))
    sname = wait_claim(asb, "gone")["status"]["sandbox"]["name"]
    wait_pool_ready(asb, "wp", 1)
    r = asb.delete(asb.path(EXT, "sandboxclaims", "default", "gone"))
    assert r.status_code == 200, r.text
    wait_for("sandbox collected", lambda: get(asb, CORE, "sandboxes", sname) is None, 15, asb=asb)
    # Only the pool's member is left running.
    wait_for("one container", lambda: len(runc_ids(sbx_state)) == 1, 15, asb=asb)
