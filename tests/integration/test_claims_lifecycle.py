"""SandboxClaim lifecycle on `asb serve` with real runc sandboxes (UPSTREAM.md §2.8 step 3):
shutdownTime and ttlSecondsAfterFinished with Retain, Delete and DeleteForeground."""
import datetime
import threading
import time

from asb_apiserver import CORE, EXT
from asb_cli import run
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
    # Extending it cannot bring the sandbox back: an error that says so, and nothing adopted.
    out = run(asb, "extend", "r", "--ttl", "10m")
    assert out.returncode == 1 and "Forbidden: the claim has expired" in out.stderr, out
    assert "extended" not in out.stdout
    time.sleep(1)  # the point: nothing comes back in the meantime
    c = get(asb, EXT, "sandboxclaims", "r")
    assert condition(c)["reason"] == "ClaimExpired" and "sandbox" not in c.get("status", {})


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
    time.sleep(3.5)  # the point: the first shutdownTime (2 s) passes
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


def whole_second_ahead(s):
    """A shutdownTime s..s+1 seconds ahead (RFC 3339 has whole seconds): (text, wall time)."""
    t = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0) + \
        datetime.timedelta(seconds=s + 1)
    return t.strftime("%Y-%m-%dT%H:%M:%SZ"), t.timestamp()


def unrelated_writes(asb, stop, codes):
    """Writes of a kind the claim controller does not watch (SandboxSnapshots of sandbox
    noise-src, and the snapshotter's status writes for them) every 0.2 s until stop is set."""
    i = 0
    while not stop.is_set():
        r = asb.post(asb.path(EXT, "sandboxsnapshots"), {
            "apiVersion": f"{EXT}/v1beta1", "kind": "SandboxSnapshot",
            "metadata": {"name": f"noise-{i}"}, "spec": {"sandboxRef": {"name": "noise-src"}}})
        codes.append(r.status_code)
        i += 1
        stop.wait(0.2)


def test_expiry_fires_on_time_with_nothing_else_happening(start_sbx):
    """Issue 31: every expiry fires within 1 s of its time, whatever else happens: with nothing
    else to wake the controllers, and with a stream of writes they do not watch (which used to
    push the claim controller's requeue back at every wake-up)."""
    asb = start_sbx()
    make_pool(asb, replicas=2)
    text, at = whole_second_ahead(3)
    create(asb, EXT, "sandboxclaims", claim("on-time", "wp", lifecycle={
        "shutdownTime": text, "shutdownPolicy": "Delete"}))
    wait_claim(asb, "on-time")
    sb_text, sb_at = whole_second_ahead(5)
    wait_pool_ready(asb, "wp", 2)
    time.sleep(0.5)  # the pool's refill done: nothing else happens from here on
    create(asb, CORE, "sandboxes", {
        "apiVersion": f"{CORE}/v1beta1", "kind": "Sandbox", "metadata": {"name": "sb-on-time"},
        "spec": {"shutdownTime": sb_text, "shutdownPolicy": "Delete",
                 "podTemplate": {"spec": {"containers": [{"name": "main", "image": "host"}]}}}})
    gone = wait_for("claim deleted", lambda: get(asb, EXT, "sandboxclaims", "on-time") is None
                    and time.time(), 15, asb=asb)
    assert gone - at < 1.0, f"claim deleted {gone - at:.2f}s after its shutdownTime"

    def expired():
        sb = get(asb, CORE, "sandboxes", "sb-on-time")
        return (sb is None or sb["metadata"].get("deletionTimestamp") or
                (condition(sb) or {}).get("reason") == "SandboxExpired") and time.time()
    fired = wait_for("sandbox expired", expired, 15, asb=asb)
    assert fired - sb_at < 1.0, f"sandbox expired {fired - sb_at:.2f}s after its shutdownTime"
    wait_for("sandbox deleted", lambda: get(asb, CORE, "sandboxes", "sb-on-time") is None, 15,
             asb=asb)
    create(asb, CORE, "sandboxes", {
        "apiVersion": f"{CORE}/v1beta1", "kind": "Sandbox", "metadata": {"name": "noise-src"},
        "spec": {"podTemplate": {"spec": {"containers": [{"name": "main", "image": "host"}]}}}})
    wait_for("noise-src Ready", lambda: (condition(get(asb, CORE, "sandboxes", "noise-src") or {})
                                         or {}).get("status") == "True", 30, asb=asb)
    stop, codes = threading.Event(), []
    noise = threading.Thread(target=unrelated_writes, args=(asb, stop, codes))
    noise.start()
    try:
        text, at = whole_second_ahead(4)
        create(asb, EXT, "sandboxclaims", claim("in-noise", "wp", lifecycle={
            "shutdownTime": text, "shutdownPolicy": "Delete"}))
        gone = wait_for("claim deleted", lambda: get(asb, EXT, "sandboxclaims", "in-noise") is None
                        and time.time(), 15, asb=asb)
    finally:
        stop.set()
        noise.join()
    assert len(codes) >= 10 and set(codes) == {201}, codes
    assert gone - at < 1.0, f"claim deleted {gone - at:.2f}s after its shutdownTime (with writes)"


def test_delete_all_converges(start_sbx):
    """Issue 31: `asb delete all --all` removes every claim, pool, template, sandbox and snapshot
    in an order that converges: nothing refills or starts cold behind it."""
    asb = start_sbx()
    make_pool(asb, replicas=2)
    create(asb, EXT, "sandboxclaims", claim("c1", "wp"))
    create(asb, EXT, "sandboxclaims", claim("c2", "wp"))
    wait_claim(asb, "c1")
    wait_claim(asb, "c2")
    create(asb, CORE, "sandboxes", {
        "apiVersion": f"{CORE}/v1beta1", "kind": "Sandbox", "metadata": {"name": "lone"},
        "spec": {"podTemplate": {"spec": {"containers": [{"name": "main", "image": "host"}]}}}})
    wait_for("lone Ready", lambda: (condition(get(asb, CORE, "sandboxes", "lone") or {}) or {})
             .get("status") == "True", 30, asb=asb)
    r = asb.post(asb.path(EXT, "sandboxsnapshots"), {
        "apiVersion": f"{EXT}/v1beta1", "kind": "SandboxSnapshot", "metadata": {"name": "snap"},
        "spec": {"sandboxRef": {"name": "lone"}}})
    assert r.status_code == 201, r.text
    out = run(asb, "delete", "all", "--all", timeout=180)
    assert out.returncode == 0, out.stderr
    for line in ('sandboxclaim.extensions.agents.x-k8s.io "c1" deleted',
                 'sandboxwarmpool.extensions.agents.x-k8s.io "wp" deleted',
                 'sandboxtemplate.extensions.agents.x-k8s.io "tpl" deleted',
                 'sandbox.agents.x-k8s.io "lone" deleted',
                 'sandboxsnapshot.extensions.agents.x-k8s.io "snap" deleted'):
        assert line in out.stdout, out.stdout
    time.sleep(2)  # a pool or claim left behind would have made something by now
    for group, plural in ((EXT, "sandboxclaims"), (EXT, "sandboxwarmpools"),
                          (EXT, "sandboxtemplates"), (CORE, "sandboxes"),
                          (EXT, "sandboxsnapshots")):
        left = asb.get(asb.path(group, plural)).json()["items"]
        assert left == [], (plural, [o["metadata"]["name"] for o in left])
    out = run(asb, "delete", "all", "--all")
    assert out.returncode == 0 and out.stderr == "No resources found\n", out
