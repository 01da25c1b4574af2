"""Warm adoption vs cold creation of SandboxClaims on `asb serve` with real runc sandboxes
(UPSTREAM.md §2.8)."""
import json
import time
from concurrent.futures import ThreadPoolExecutor

from asb_apiserver import CORE, EXT
from claims_helpers import (POOL_LABEL, Watcher, claim, condition, create, get, is_ready, items,
                            members, name_hash, pool, template, wait_claim, wait_for,
                            wait_pool_ready)
from local_sandbox import sbx_state, start_sbx  # noqa: F401  (fixtures)


def test_warm_adoption_moves_ownership_and_refills(start_sbx):
    asb = start_sbx()
    create(asb, EXT, "sandboxtemplates", template("tpl"))
    create(asb, EXT, "sandboxwarmpools", pool("wp", "tpl", replicas=2))
    ms = wait_pool_ready(asb, "wp", 2)
    oldest = sorted(ms, key=lambda m: (m["metadata"]["creationTimestamp"], m["metadata"]["name"]))[0]
    for m in ms:
        assert m["metadata"]["labels"]["agents.x-k8s.io/launch-type"] == "warm"
        assert m["metadata"]["ownerReferences"][0]["kind"] == "SandboxWarmPool"
        assert m["metadata"]["name"].startswith("wp-")
        assert m["spec"]["podTemplate"]["spec"]["automountServiceAccountToken"] is False
        assert m["spec"]["podTemplate"]["spec"]["dnsPolicy"] == "None"
    c = create(asb, EXT, "sandboxclaims", claim("c1", "wp"))
    c = wait_claim(asb, "c1")
    sname = c["status"]["sandbox"]["name"]
    assert sname == oldest["metadata"]["name"]
    assert c["metadata"]["annotations"]["agents.x-k8s.io/sandbox-name"] == sname
    assert "agents.x-k8s.io/claim-first-ready-at" in c["metadata"]["annotations"]
    sb = get(asb, CORE, "sandboxes", sname)
    labels = sb["metadata"]["labels"]
    assert POOL_LABEL not in labels
    assert "agents.x-k8s.io/sandbox-template-hash" not in labels
    assert labels["agents.x-k8s.io/claim-uid"] == c["metadata"]["uid"]
    assert labels["agents.x-k8s.io/launch-type"] == "warm"
    refs = sb["metadata"]["ownerReferences"]
    assert len(refs) == 1 and refs[0]["kind"] == "SandboxClaim" and refs[0]["uid"] == c["metadata"]["uid"]
    assert refs[0]["controller"] is True
    pod_ann = sb["spec"]["podTemplate"]["metadata"].get("annotations") or {}
    assert "cluster-autoscaler.kubernetes.io/safe-to-evict" not in pod_ann
    # The same container kept running: still Ready, no restart.
    assert is_ready(sb)
    # The pool refills to 2 without the adopted sandbox.
    ms = wait_pool_ready(asb, "wp", 2)
    assert sname not in {m["metadata"]["name"] for m in ms}


def test_claim_is_adopted_in_its_create(start_sbx):
    """With a Ready member in the pool, the claim adopts it in its own create (one transaction).
    The 201 is the claim as created, as kube-apiserver answers (a watch from its resourceVersion
    sees the adoption next, at once), and the Asb-Claim-Sandbox header names the sandbox it is
    already bound to; everything the controller would have written is there (ownership, labels,
    status.sandbox with the uid, the SandboxAdopted Event); the pool refills."""
    asb = start_sbx()
    create(asb, EXT, "sandboxtemplates", template("tpl"))
    create(asb, EXT, "sandboxwarmpools", pool("wp", "tpl", replicas=1))
    member = wait_pool_ready(asb, "wp", 1)[0]
    sname, suid = member["metadata"]["name"], member["metadata"]["uid"]
    r = asb.post(asb.path(EXT, "sandboxclaims"), claim("now", "wp"))
    assert r.status_code == 201, r.text
    assert r.headers["Asb-Claim-Sandbox"] == f"name={sname}; uid={suid}"
    created = r.json()
    assert not is_ready(created) and "sandbox" not in (created.get("status") or {})
    c = get(asb, EXT, "sandboxclaims", "now")
    assert int(c["metadata"]["resourceVersion"]) > int(created["metadata"]["resourceVersion"])
    assert is_ready(c), c
    assert c["status"]["sandbox"]["name"] == sname and c["status"]["sandbox"]["uid"] == suid
    assert c["metadata"]["annotations"]["agents.x-k8s.io/sandbox-name"] == sname
    # A client that watches from the create's resourceVersion (upstream's SDK) sees Ready next.
    w = asb.get(asb.path(EXT, "sandboxclaims") + "?watch=1&timeoutSeconds=5&fieldSelector=metadata.name%3Dnow"
                f"&resourceVersion={created['metadata']['resourceVersion']}", stream=True, timeout=10)
    first = json.loads(next(w.iter_lines()))
    w.close()
    assert first["type"] == "MODIFIED" and is_ready(first["object"]), first
    sb = get(asb, CORE, "sandboxes", sname)
    assert sb["metadata"]["labels"]["agents.x-k8s.io/claim-uid"] == c["metadata"]["uid"]
    assert POOL_LABEL not in sb["metadata"]["labels"]
    assert is_ready(sb)
    ev = asb.get("/apis/events.k8s.io/v1/namespaces/default/events").json()["items"]
    assert any(e["reason"] == "SandboxAdopted" and e["regarding"]["uid"] == c["metadata"]["uid"]
               for e in ev), ev
    ms = wait_pool_ready(asb, "wp", 1)
    assert sname not in {m["metadata"]["name"] for m in ms}
    # No Ready member: no header, and the controller serves the claim as before.
    create(asb, EXT, "sandboxwarmpools", pool("none", "tpl", replicas=0))
    r = asb.post(asb.path(EXT, "sandboxclaims"), claim("later", "none"))
    assert r.status_code == 201 and "Asb-Claim-Sandbox" not in r.headers, r.headers
    assert wait_claim(asb, "later")["status"]["sandbox"]["name"] == "later"


def test_watcher_sees_claim_ready_in_the_adoption_event(start_sbx):
    asb = start_sbx()
    create(asb, EXT, "sandboxtemplates", template("tpl"))
    create(asb, EXT, "sandboxwarmpools", pool("wp", "tpl", replicas=1))
    wait_pool_ready(asb, "wp", 1)
    w = Watcher(asb, EXT, "sandboxclaims")
    try:
        create(asb, EXT, "sandboxclaims", claim("fast", "wp"))
        wait_claim(asb, "fast")
        def adopted_event():
            for _, typ, obj in w.events:
                if (obj["metadata"].get("annotations") or {}).get("agents.x-k8s.io/sandbox-name"):
                    return (typ, obj)
            return None
        typ, obj = wait_for("the adoption event", adopted_event, 5)
        # The first event that names the sandbox already carries Ready=True and status.sandbox.
        assert typ == "MODIFIED"
        assert is_ready(obj), obj
        assert obj["status"]["sandbox"]["name"] == obj["metadata"]["annotations"]["agents.x-k8s.io/sandbox-name"]
    finally:
        w.close()


def test_cold_creation_when_pool_is_empty(start_sbx):
    asb = start_sbx()
    create(asb, EXT, "sandboxtemplates", template("tpl"))
    create(asb, EXT, "sandboxwarmpools", pool("empty", "tpl", replicas=0))
    c = create(asb, EXT, "sandboxclaims", claim("cold1", "empty"))
    c = wait_claim(asb, "cold1")
    assert c["status"]["sandbox"]["name"] == "cold1"
    sb = get(asb, CORE, "sandboxes", "cold1")
    assert sb["metadata"]["labels"]["agents.x-k8s.io/launch-type"] == "cold"
    assert sb["metadata"]["ownerReferences"][0]["uid"] == c["metadata"]["uid"]
    assert sb["metadata"]["annotations"]["agents.x-k8s.io/sandbox-template-ref"] == "tpl"
    assert sb["spec"]["podTemplate"]["spec"]["automountServiceAccountToken"] is False
    assert sb["metadata"]["labels"]["agents.x-k8s.io/sandbox-template-ref-hash"] == name_hash("tpl")
    # CRD defaults as for any created Sandbox; the claim's lifecycle is not copied.
    assert sb["spec"]["operatingMode"] == "Running" and sb["spec"]["shutdownPolicy"] == "Retain"
    assert "shutdownTime" not in sb["spec"]


def test_missing_pool_and_template_reasons(start_sbx):
    asb = start_sbx()
    create(asb, EXT, "sandboxclaims", claim("nopool", "ghost"))
    c = wait_claim(asb, "nopool", reason="WarmPoolNotFound")
    assert condition(c)["message"] == 'SandboxWarmPool "ghost" not found'
    create(asb, EXT, "sandboxwarmpools", pool("notpl", "ghost-tpl", replicas=0))
    create(asb, EXT, "sandboxclaims", claim("notpl-claim", "notpl"))
    c = wait_claim(asb, "notpl-claim", reason="TemplateNotFound")
    assert condition(c)["message"] == 'SandboxTemplate "ghost-tpl" not found'
    # Creating the template later lets the claim proceed (cold, the pool has 0 replicas).
    create(asb, EXT, "sandboxtemplates", template("ghost-tpl"))
    wait_claim(asb, "notpl-claim")


def test_50_concurrent_claims_get_distinct_sandboxes(start_sbx):
    asb = start_sbx()
    create(asb, EXT, "sandboxtemplates", template("tpl"))
    create(asb, EXT, "sandboxwarmpools", pool("big", "tpl", replicas=50))
    ms = wait_pool_ready(asb, "big", 50, timeout=240)
    warm = {m["metadata"]["name"] for m in ms}

    def make(i):
        r = asb.post(asb.path(EXT, "sandboxclaims"), claim(f"burst-{i}", "big"))
        assert r.status_code == 201, r.text

    with ThreadPoolExecutor(50) as ex:
        list(ex.map(make, range(50)))
    got = {}
    for i in range(50):
        c = wait_claim(asb, f"burst-{i}", timeout=60)
        got[f"burst-{i}"] = c["status"]["sandbox"]["name"]
    names = list(got.values())
    assert len(set(names)) == 50, "a sandbox was assigned twice"
    assert set(names) == warm, "every claim got a warm member, none lost"
    for cname, sname in got.items():
        sb = get(asb, CORE, "sandboxes", sname)
        c = get(asb, EXT, "sandboxclaims", cname)
        assert sb["metadata"]["ownerReferences"][0]["uid"] == c["metadata"]["uid"]
    # Exactly one owner per sandbox: 50 claim-owned sandboxes + the refill.
    owned = [s for s in items(asb, CORE, "sandboxes")
             if s["metadata"]["ownerReferences"][0]["kind"] == "SandboxClaim"]
    assert len(owned) == 50
