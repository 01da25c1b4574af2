"""SandboxWarmPool on `asb serve` with real runc sandboxes (UPSTREAM.md §2.7): replenishment,
scale up/down, update strategies, grace-period replacement, garbage collection with the pool."""
import time

from asb_apiserver import CORE, EXT
from asb_cli import ok
from claims_helpers import (claim, condition, create, get, is_ready, members, name_hash, pool,
                            template, wait_claim, wait_for, wait_pool_ready)
from local_sandbox import runc_ids, sbx_state, start_sbx  # noqa: F401  (fixtures)


def names(ms):
    return {m["metadata"]["name"] for m in ms}


def test_scale_up_down_and_status(start_sbx, sbx_state):
    asb = start_sbx()
    create(asb, EXT, "sandboxtemplates", template("tpl"))
    p = create(asb, EXT, "sandboxwarmpools", pool("wp", "tpl", replicas=1))
    wait_pool_ready(asb, "wp", 1)
    asb.merge_patch(asb.path(EXT, "sandboxwarmpools", "default", "wp"), {"spec": {"replicas": 3}})
    ms = wait_pool_ready(asb, "wp", 3)
    p = get(asb, EXT, "sandboxwarmpools", "wp")
    assert p["status"]["selector"] == f"agents.x-k8s.io/warm-pool-sandbox={name_hash('wp')}"
    assert p["status"]["observedGeneration"] == p["metadata"]["generation"]
    oldest = sorted(ms, key=lambda m: (m["metadata"]["creationTimestamp"], m["metadata"]["name"]))[0]
    # Scale down keeps the oldest (newest first is removed, all being Ready).
    first_ts = oldest["metadata"]["creationTimestamp"]
    asb.merge_patch(asb.path(EXT, "sandboxwarmpools", "default", "wp"), {"spec": {"replicas": 1}})
    ms = wait_pool_ready(asb, "wp", 1)
    assert ms[0]["metadata"]["creationTimestamp"] == first_ts
    # Scale to zero removes the containers too.
    asb.merge_patch(asb.path(EXT, "sandboxwarmpools", "default", "wp"), {"spec": {"replicas": 0}})
    wait_for("no members", lambda: len(members(asb, "wp")) == 0, 30, asb=asb)
    wait_for("containers gone", lambda: len(runc_ids(sbx_state)) == 0, 30, asb=asb)
    p = get(asb, EXT, "sandboxwarmpools", "wp")
    assert p["status"]["replicas"] == 0 and p["status"]["readyReplicas"] == 0


def test_pool_never_over_creates(start_sbx):
    asb = start_sbx()
    create(asb, EXT, "sandboxtemplates", template("tpl"))
    create(asb, EXT, "sandboxwarmpools", pool("wp", "tpl", replicas=3))
    seen = set()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        ms = members(asb, "wp")
        seen |= names(ms)
        assert len(ms) <= 3, names(ms)
        if len(ms) == 3 and all(is_ready(m) for m in ms):
            break
        time.sleep(0.01)
    assert len(seen) == 3, f"members were created and replaced: {seen}"


def test_pool_refills_after_claims(start_sbx):
    asb = start_sbx()
    create(asb, EXT, "sandboxtemplates", template("tpl"))
    create(asb, EXT, "sandboxwarmpools", pool("wp", "tpl", replicas=2))
    before = names(wait_pool_ready(asb, "wp", 2))
    for i in range(3):
        create(asb, EXT, "sandboxclaims", claim(f"c{i}", "wp"))
    adopted = {wait_claim(asb, f"c{i}")["status"]["sandbox"]["name"] for i in range(3)}
    assert len(adopted) == 3
    after = names(wait_pool_ready(asb, "wp", 2))
    assert not (after & adopted)
    assert before & adopted  # the first two claims were served warm


def test_recreate_replaces_stale_members(start_sbx):
    asb = start_sbx()
    create(asb, EXT, "sandboxtemplates", template("tpl"))
    create(asb, EXT, "sandboxwarmpools", pool("wp", "tpl", replicas=2, strategy="Recreate"))
    before = names(wait_pool_ready(asb, "wp", 2))
    asb.merge_patch(asb.path(EXT, "sandboxtemplates", "default", "tpl"),
                    {"spec": {"podTemplate": {"spec": {"containers": [
                        {"name": "main", "image": "host", "env": [{"name": "V", "value": "2"}]}]}}}})
    ms = wait_for("fresh members", lambda: (lambda ms: ms if len(ms) == 2 and all(is_ready(m) for m in ms)
                                            and not (names(ms) & before) else None)(members(asb, "wp")),
                  60, 0.05, asb)
    for m in ms:
        assert m["spec"]["podTemplate"]["spec"]["containers"][0]["env"] == [{"name": "V", "value": "2"}]


def test_on_replenish_keeps_stale_members_until_claimed(start_sbx):
    asb = start_sbx()
    create(asb, EXT, "sandboxtemplates", template("tpl"))
    create(asb, EXT, "sandboxwarmpools", pool("wp", "tpl", replicas=2))
    before = names(wait_pool_ready(asb, "wp", 2))
    asb.merge_patch(asb.path(EXT, "sandboxtemplates", "default", "tpl"),
                    {"spec": {"podTemplate": {"spec": {"containers": [
                        {"name": "main", "image": "host", "env": [{"name": "V", "value": "2"}]}]}}}})
    time.sleep(1.5)  # the point: OnReplenish replaces no member in the meantime
    assert names(members(asb, "wp")) == before
    create(asb, EXT, "sandboxclaims", claim("c", "wp"))
    got = wait_claim(asb, "c")["status"]["sandbox"]["name"]
    assert got in before
    ms = wait_pool_ready(asb, "wp", 2)
    new = [m for m in ms if m["metadata"]["name"] not in before]
    assert len(new) == 1
    assert new[0]["spec"]["podTemplate"]["spec"]["containers"][0]["env"] == [{"name": "V", "value": "2"}]


def test_pool_deletion_collects_members(start_sbx, sbx_state):
    asb = start_sbx()
    create(asb, EXT, "sandboxtemplates", template("tpl"))
    create(asb, EXT, "sandboxwarmpools", pool("wp", "tpl", replicas=2))
    wait_pool_ready(asb, "wp", 2)
    create(asb, EXT, "sandboxclaims", claim("keep", "wp"))
    kept = wait_claim(asb, "keep")["status"]["sandbox"]["name"]
    wait_pool_ready(asb, "wp", 2)
    r = asb.delete(asb.path(EXT, "sandboxwarmpools", "default", "wp"))
    assert r.status_code == 200, r.text
    wait_for("members gone", lambda: len(members(asb, "wp")) == 0, 30, asb=asb)
    # The claimed sandbox belongs to its claim now: it stays.
    assert get(asb, CORE, "sandboxes", kept) is not None
    wait_for("only the claimed container left", lambda: len(runc_ids(sbx_state)) == 1, 30, asb=asb)


def test_members_not_ready_after_grace_are_replaced(start_sbx):
    asb = start_sbx(env={"ASB_WARM_POOL_READINESS_GRACE": "1s"})
    create(asb, EXT, "sandboxtemplates", template("bad", image="dir:/nonexistent-asb-image"))
    create(asb, EXT, "sandboxwarmpools", pool("wp", "bad", replicas=1))
    first = wait_for("a member", lambda: members(asb, "wp"), 10, asb=asb)[0]["metadata"]["name"]
    wait_for("a replacement", lambda: (lambda ms: len(ms) == 1 and ms[0]["metadata"]["name"] != first)(
        members(asb, "wp")), 15, 0.05, asb)
    assert get(asb, CORE, "sandboxes", first) is None


def test_restart_keeps_pool_and_claims(start_sbx, sbx_state):
    asb = start_sbx()
    create(asb, EXT, "sandboxtemplates", template("tpl"))
    create(asb, EXT, "sandboxwarmpools", pool("wp", "tpl", replicas=2))
    wait_pool_ready(asb, "wp", 2)
    create(asb, EXT, "sandboxclaims", claim("c", "wp"))
    bound = wait_claim(asb, "c")["status"]["sandbox"]["name"]
    members_before = names(wait_pool_ready(asb, "wp", 2))
    asb.stop()
    asb = start_sbx()
    # Same members (re-adopted containers), nothing created on top, the claim still bound.
    time.sleep(1)  # the point: a restarted server that would create extras has done so by now
    assert names(wait_pool_ready(asb, "wp", 2)) == members_before
    c = wait_claim(asb, "c")
    assert c["status"]["sandbox"]["name"] == bound
    assert len(runc_ids(sbx_state)) == 3


def test_a_pool_without_its_template_says_why(start_sbx):
    """Issue 31: a pool whose template is missing has Ready=False/TemplateNotFound naming it, a
    Warning Event (once), and `asb describe` shows both; the template's arrival fills it."""
    asb = start_sbx()
    create(asb, EXT, "sandboxwarmpools", pool("lonely", "later", replicas=1))
    c = wait_for("TemplateNotFound", lambda: (lambda p: condition(p) if p and condition(p) and
                                              condition(p)["reason"] == "TemplateNotFound"
                                              else None)(get(asb, EXT, "sandboxwarmpools",
                                                             "lonely")), 10, asb=asb)
    assert c["status"] == "False" and 'SandboxTemplate "later" not found' in c["message"], c
    out = ok(asb, "describe", "sandboxwarmpool", "lonely")
    assert "TemplateNotFound" in out and "Warning" in out, out
    time.sleep(1)  # the point: the event is not repeated in the meantime
    events = [e for e in asb.get("/apis/events.k8s.io/v1/namespaces/default/events").json()["items"]
              if e["regarding"]["name"] == "lonely" and e["reason"] == "TemplateNotFound"]
    assert len(events) == 1 and events[0]["type"] == "Warning", events
    create(asb, EXT, "sandboxtemplates", template("later"))
    wait_pool_ready(asb, "lonely", 1)
    c = condition(get(asb, EXT, "sandboxwarmpools", "lonely"))
    assert (c["status"], c["reason"], c["message"]) == ("True", "PoolReady", "1 of 1 sandboxes Ready")
