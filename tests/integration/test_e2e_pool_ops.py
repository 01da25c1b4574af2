"""Warm pool operations a user does with the official Python client (UPSTREAM.md §2.7): a pool
before its template exists, scaling through the scale subresource, a Recreate template change
that leaves claimed sandboxes alone, env on a claim under the default Disallowed policy, and a
DeleteForeground claim."""
import time

import pytest

from asb_apiserver import CORE, EXT, V
from claims_helpers import (claim, condition, create, get, items, members, pool, template,
                            wait_claim, wait_for, wait_pool_ready)
from local_sandbox import sbx_state, start_sbx  # noqa: F401  (fixtures)

kubernetes = pytest.importorskip("kubernetes")
from kubernetes import client  # noqa: E402


def api_for(server):
    cfg = client.Configuration(host=server.url, api_key={"authorization": f"Bearer {server.token}"})
    return client.CustomObjectsApi(client.ApiClient(cfg))


def test_pool_before_template_then_scale(start_sbx):
    asb = start_sbx()
    api = api_for(asb)
    api.create_namespaced_custom_object(EXT, V, "default", "sandboxwarmpools", pool("early", "later", replicas=2))
    wait_for("TemplateNotFound", lambda: (condition(get(asb, EXT, "sandboxwarmpools", "early")) or {})
             .get("reason") == "TemplateNotFound", 10, asb=asb)
    assert members(asb, "early") == []
    assert asb.running
    api.create_namespaced_custom_object(EXT, V, "default", "sandboxtemplates", template("later"))
    wait_pool_ready(asb, "early", 2)
    sc = api.get_namespaced_custom_object_scale(EXT, V, "default", "sandboxwarmpools", "early")
    assert sc["kind"] == "Scale" and sc["spec"]["replicas"] == 2 and sc["status"]["replicas"] == 2
    api.patch_namespaced_custom_object_scale(EXT, V, "default", "sandboxwarmpools", "early",
                                             {"spec": {"replicas": 4}})
    wait_pool_ready(asb, "early", 4)
    ms = sorted(members(asb, "early"), key=lambda m: (m["metadata"]["creationTimestamp"], m["metadata"]["name"]))
    api.patch_namespaced_custom_object_scale(EXT, V, "default", "sandboxwarmpools", "early",
                                             {"spec": {"replicas": 1}})
    left = wait_pool_ready(asb, "early", 1)
    # Scale down removes the newest first: the oldest member stays.
    assert left[0]["metadata"]["creationTimestamp"] == ms[0]["metadata"]["creationTimestamp"]


def test_recreate_leaves_claimed_sandbox(start_sbx):
    asb = start_sbx()
    create(asb, EXT, "sandboxtemplates", template("tpl", env=[{"name": "V", "value": "1"}]))
    create(asb, EXT, "sandboxwarmpools", pool("wp", "tpl", replicas=2, strategy="Recreate"))
    old = {m["metadata"]["name"] for m in wait_pool_ready(asb, "wp", 2)}
    create(asb, EXT, "sandboxclaims", claim("held", "wp"))
    held = wait_claim(asb, "held")["status"]["sandbox"]["name"]
    wait_pool_ready(asb, "wp", 2)
    t = get(asb, EXT, "sandboxtemplates", "tpl")
    t["spec"]["podTemplate"]["spec"]["containers"][0]["env"] = [{"name": "V", "value": "2"}]
    r = asb.put(asb.path(EXT, "sandboxtemplates", "default", "tpl"), t)
    assert r.status_code == 200, r.text

    def replaced():
        ms = members(asb, "wp")
        return ms if len(ms) == 2 and not ({m["metadata"]["name"] for m in ms} & old) and \
            all(condition(m) and condition(m)["status"] == "True" for m in ms) else None
    ms = wait_for("Recreate to replace every member", replaced, 60, 0.1, asb)
    for m in ms:
        assert m["spec"]["podTemplate"]["spec"]["containers"][0]["env"] == [{"name": "V", "value": "2"}]
    sb = get(asb, CORE, "sandboxes", held)
    assert sb is not None and condition(sb)["status"] == "True"
    assert sb["spec"]["podTemplate"]["spec"]["containers"][0]["env"] == [{"name": "V", "value": "1"}]


def test_env_on_claim_rejected_by_default_policy(start_sbx):
    asb = start_sbx()
    create(asb, EXT, "sandboxtemplates", template("tpl"))
    create(asb, EXT, "sandboxwarmpools", pool("wp", "tpl", replicas=1))
    wait_pool_ready(asb, "wp", 1)
    create(asb, EXT, "sandboxclaims", claim("withenv", "wp", env=[{"name": "X", "value": "y"}]))
    c = wait_claim(asb, "withenv", reason="EnvVarsInjectionRejected", timeout=15)
    assert condition(c)["message"] == ("environment variable injection rejected: environment variable "
                                       "injection is not allowed by the template policy")
    assert get(asb, CORE, "sandboxes", "withenv") is None
    assert len(members(asb, "wp")) == 1  # the warm member was not consumed


def test_delete_foreground_claim(start_sbx):
    asb = start_sbx()
    create(asb, EXT, "sandboxtemplates", template("tpl"))
    create(asb, EXT, "sandboxwarmpools", pool("wp", "tpl", replicas=1))
    wait_pool_ready(asb, "wp", 1)
    create(asb, EXT, "sandboxclaims", claim("fg", "wp"))
    sname = wait_claim(asb, "fg")["status"]["sandbox"]["name"]
    r = asb.request("DELETE", asb.path(EXT, "sandboxclaims", "default", "fg"),
                    json={"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Foreground"})
    assert r.status_code in (200, 202), r.text
    wait_for("claim and sandbox gone",
             lambda: get(asb, EXT, "sandboxclaims", "fg") is None and get(asb, CORE, "sandboxes", sname) is None,
             30, 0.05, asb)
    wait_pool_ready(asb, "wp", 1)
    assert all(s["metadata"]["name"] != sname for s in items(asb, CORE, "sandboxes"))


def test_pool_with_unrunnable_image_does_not_churn(start_sbx):
    """A template whose image cannot run locally: members report ImageNotSupported, the pool
    does not recreate them in a hot loop, a claim reports the forwarded reason, and the server
    keeps serving."""
    from claims_helpers import Watcher
    asb = start_sbx()
    create(asb, EXT, "sandboxtemplates", template("badimg", image="registry.example.com/nope:1"))
    w = Watcher(asb, CORE, "sandboxes")
    try:
        create(asb, EXT, "sandboxwarmpools", pool("badpool", "badimg", replicas=2))
        time.sleep(4)  # the point: count the creations in a fixed window
        added = [o["metadata"]["name"] for _, typ, o in w.events if typ == "ADDED"]
        assert len(added) <= 4, f"pool churns: {len(added)} sandboxes created in 4 s"
    finally:
        w.close()
    ms = members(asb, "badpool")
    assert len(ms) == 2
    for m in ms:
        assert condition(m)["reason"] == "ImageNotSupported", m["status"]
    p = get(asb, EXT, "sandboxwarmpools", "badpool")
    assert p["status"].get("readyReplicas", 0) == 0
    create(asb, EXT, "sandboxclaims", claim("bc", "badpool"))
    c = wait_for("the claim to report the image problem",
                 lambda: (lambda c: c if condition(c) and condition(c)["reason"] == "ImageNotSupported" else None)(
                     get(asb, EXT, "sandboxclaims", "bc")), 20, 0.1, asb)
    assert condition(c)["status"] == "False"
    assert asb.get("/version").status_code == 200


def test_template_deleted_under_a_pool(start_sbx):
    asb = start_sbx()
    create(asb, EXT, "sandboxtemplates", template("tpl"))
    create(asb, EXT, "sandboxwarmpools", pool("wp", "tpl", replicas=1))
    warm = wait_pool_ready(asb, "wp", 1)[0]["metadata"]["name"]
    r = asb.delete(asb.path(EXT, "sandboxtemplates", "default", "tpl"))
    assert r.status_code == 200, r.text
    # A warm member is still adoptable; the next claim has nothing to build from.
    create(asb, EXT, "sandboxclaims", claim("a", "wp"))
    c = wait_claim(asb, "a", timeout=30)
    assert c["status"]["sandbox"]["name"] == warm
    create(asb, EXT, "sandboxclaims", claim("b", "wp"))
    c = wait_claim(asb, "b", reason="TemplateNotFound", timeout=15)
    assert condition(c)["message"] == 'SandboxTemplate "tpl" not found'
    time.sleep(1)  # the point: the pool makes no member in the meantime
    assert members(asb, "wp") == []
    # The template comes back: the pool refills and the waiting claim binds.
    create(asb, EXT, "sandboxtemplates", template("tpl"))
    wait_claim(asb, "b", timeout=60)
    wait_pool_ready(asb, "wp", 1)
