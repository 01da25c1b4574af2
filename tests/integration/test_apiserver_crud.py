"""`asb serve` API semantics: CRUD, generateName, optimistic concurrency, patches, /status,
selectors, discovery, auth, validation and bad input."""
import json
import os
import stat

import requests

from asb_apiserver import CORE, EXT, V, asb, sandbox, start_asb  # noqa: F401 (fixtures)


def status_of(r, code, reason):
    assert r.status_code == code, r.text
    body = r.json()
    assert body["kind"] == "Status" and body["apiVersion"] == "v1", body
    assert body["status"] == "Failure" and body["reason"] == reason and body["code"] == code, body
    return body


def test_state_dir_token_and_server_file(asb):
    st = os.stat(asb.state_dir)
    assert stat.S_IMODE(st.st_mode) == 0o700
    assert stat.S_IMODE(os.stat(os.path.join(asb.state_dir, "token")).st_mode) == 0o600
    assert len(asb.token) >= 32
    assert asb.url.startswith("http://127.0.0.1:")
    assert os.path.exists(os.path.join(asb.state_dir, "state.db"))


def test_unauthorized_without_or_with_wrong_token(asb):
    for headers in ({}, {"Authorization": "Bearer nope"}, {"Authorization": "Basic abc"},
                    {"Authorization": f"Bearer {asb.token}x"}):
        r = requests.get(asb.url + asb.path(CORE, "sandboxes"), headers=headers, timeout=5)
        status_of(r, 401, "Unauthorized")
    r = requests.post(asb.url + asb.path(CORE, "sandboxes"), json=sandbox("x"), timeout=5)
    status_of(r, 401, "Unauthorized")
    assert asb.get(asb.path(CORE, "sandboxes", name="x")).status_code == 404


def test_discovery(asb):
    groups = asb.get("/apis").json()
    assert groups["kind"] == "APIGroupList"
    names = {g["name"]: g for g in groups["groups"]}
    assert set(names) == {CORE, EXT, "events.k8s.io"}  # events: read by kubectl-style clients
    assert names[EXT]["preferredVersion"]["groupVersion"] == f"{EXT}/{V}"
    assert asb.get(f"/apis/{CORE}").json()["kind"] == "APIGroup"
    rl = asb.get(f"/apis/{EXT}/{V}").json()
    assert rl["kind"] == "APIResourceList" and rl["groupVersion"] == f"{EXT}/{V}"
    res = {r["name"]: r for r in rl["resources"]}
    assert set(res) == {"sandboxtemplates", "sandboxwarmpools", "sandboxwarmpools/status", "sandboxwarmpools/scale",
                        "sandboxclaims", "sandboxclaims/status", "sandboxsnapshots", "sandboxsnapshots/status"}
    assert res["sandboxwarmpools"]["kind"] == "SandboxWarmPool"
    assert res["sandboxsnapshots"]["kind"] == "SandboxSnapshot" and res["sandboxsnapshots"]["namespaced"]
    assert res["sandboxwarmpools"]["shortNames"] == ["swp"]
    assert res["sandboxclaims"]["namespaced"] is True
    assert "watch" in res["sandboxclaims"]["verbs"]
    core = {r["name"]: r for r in asb.get(f"/apis/{CORE}/{V}").json()["resources"]}
    assert core["sandboxes"]["singularName"] == "sandbox" and "sandboxes/status" in core
    assert asb.get("/version").json()["major"] == "1"
    assert asb.get("/api").json()["versions"] == ["v1"]
    status_of(asb.get("/apis/nope.example.com/v1"), 404, "NotFound")
    # events.k8s.io/v1, served like the other groups (read, watch and delete only)
    ev = names["events.k8s.io"]
    assert ev["preferredVersion"] == {"groupVersion": "events.k8s.io/v1", "version": "v1"}
    assert ev["versions"] == [ev["preferredVersion"]]
    assert asb.get("/apis/events.k8s.io").json() == ev
    rl = asb.get("/apis/events.k8s.io/v1").json()
    assert rl["kind"] == "APIResourceList" and rl["groupVersion"] == "events.k8s.io/v1"
    assert [r["name"] for r in rl["resources"]] == ["events"]
    er = rl["resources"][0]
    assert er["kind"] == "Event" and er["namespaced"] is True and er["shortNames"] == ["ev"]
    assert sorted(er["verbs"]) == ["delete", "deletecollection", "get", "list", "watch"]
    status_of(asb.get("/apis/events.k8s.io/v1beta1"), 404, "NotFound")
    status_of(asb.get(f"/apis/{CORE}/v1"), 404, "NotFound")
    status_of(asb.get(f"/apis/{CORE}/v1alpha9/namespaces/default/sandboxes"), 404, "NotFound")


def test_create_get_list_delete(asb):
    p = asb.path(CORE, "sandboxes")
    created = asb.create_sandbox("one", labels={"app": "web"})
    md = created["metadata"]
    assert md["name"] == "one" and md["namespace"] == "default"
    assert md["generation"] == 1 and int(md["resourceVersion"]) > 0
    assert len(md["uid"]) == 36 and md["uid"][14] == "4"
    assert md["creationTimestamp"].endswith("Z")
    assert created["spec"]["shutdownPolicy"] == "Retain"
    assert created["spec"]["operatingMode"] == "Running"
    got = asb.get(asb.path(CORE, "sandboxes", name="one")).json()
    assert got == created
    lst = asb.get(p).json()
    assert lst["kind"] == "SandboxList" and lst["apiVersion"] == f"{CORE}/{V}"
    assert lst["metadata"]["resourceVersion"] == md["resourceVersion"]
    assert [i["metadata"]["name"] for i in lst["items"]] == ["one"]
    body = status_of(asb.post(p, sandbox("one")), 409, "AlreadyExists")
    assert body["details"]["name"] == "one" and body["details"]["group"] == CORE
    assert '"one" already exists' in body["message"]
    r = asb.delete(asb.path(CORE, "sandboxes", name="one"))
    assert r.status_code == 200, r.text
    assert r.json()["metadata"]["name"] == "one"
    assert int(r.json()["metadata"]["resourceVersion"]) > int(md["resourceVersion"])
    body = status_of(asb.get(asb.path(CORE, "sandboxes", name="one")), 404, "NotFound")
    assert body["message"] == 'sandboxes.agents.x-k8s.io "one" not found'
    status_of(asb.delete(asb.path(CORE, "sandboxes", name="one")), 404, "NotFound")
    assert asb.get(p).json()["items"] == []


def test_generate_name(asb):
    p = asb.path(CORE, "sandboxes")
    names = set()
    for _ in range(5):
        r = asb.post(p, sandbox(generate_name="agent-"))
        assert r.status_code == 201, r.text
        n = r.json()["metadata"]["name"]
        assert n.startswith("agent-") and len(n) == len("agent-") + 5
        assert all(c.islower() or c.isdigit() for c in n[6:])
        names.add(n)
    assert len(names) == 5
    r = asb.post(p, sandbox(generate_name="x" * 80))
    assert r.status_code == 201 and len(r.json()["metadata"]["name"]) == 63


def test_server_fields_and_status_ignored_on_create(asb):
    body = sandbox("s1")
    body["metadata"].update({"uid": "mine", "resourceVersion": "999", "generation": 7})
    body["status"] = {"podIPs": ["1.1.1.1"]}
    r = asb.post(asb.path(CORE, "sandboxes"), body)
    assert r.status_code == 201, r.text
    obj = r.json()
    assert obj["metadata"]["uid"] != "mine" and obj["metadata"]["generation"] == 1
    assert "status" not in obj


def test_update_conflict_and_generation(asb):
    obj = asb.create_sandbox("u1")
    path = asb.path(CORE, "sandboxes", name="u1")
    obj["metadata"]["labels"] = {"x": "y"}
    r = asb.put(path, obj)
    assert r.status_code == 200, r.text
    v2 = r.json()
    assert v2["metadata"]["generation"] == 1  # metadata-only change
    assert int(v2["metadata"]["resourceVersion"]) > int(obj["metadata"]["resourceVersion"])
    # stale resourceVersion
    obj["spec"]["operatingMode"] = "Suspended"
    body = status_of(asb.put(path, obj), 409, "Conflict")
    assert "the object has been modified" in body["message"]
    # fresh one: spec change bumps generation; status in the body is ignored
    v2["spec"]["operatingMode"] = "Suspended"
    v2["status"] = {"podIPs": ["9.9.9.9"]}
    r = asb.put(path, v2)
    assert r.status_code == 200, r.text
    v3 = r.json()
    assert v3["metadata"]["generation"] == 2 and v3["spec"]["operatingMode"] == "Suspended"
    assert "status" not in v3
    assert v3["metadata"]["uid"] == obj["metadata"]["uid"]
    # missing resourceVersion on PUT is Invalid
    del v3["metadata"]["resourceVersion"]
    body = status_of(asb.put(path, v3), 422, "Invalid")
    assert "metadata.resourceVersion" in body["message"]
    # no-op update keeps the resourceVersion
    cur = asb.get(path).json()
    r = asb.put(path, cur)
    assert r.status_code == 200 and r.json()["metadata"]["resourceVersion"] == cur["metadata"]["resourceVersion"]
    # name mismatch and missing object
    cur["metadata"]["name"] = "other"
    status_of(asb.put(path, cur), 400, "BadRequest")
    status_of(asb.put(asb.path(CORE, "sandboxes", name="ghost"), sandbox("ghost") | {"metadata": {"name": "ghost", "resourceVersion": "1"}}), 404, "NotFound")


def test_merge_patch_and_status_subresource(asb):
    asb.create_sandbox("p1")
    path = asb.path(CORE, "sandboxes", name="p1")
    r = asb.merge_patch(path, {"metadata": {"labels": {"a": "1"}}, "spec": {"operatingMode": "Suspended"},
                               "status": {"podIPs": ["1.2.3.4"]}})
    assert r.status_code == 200, r.text
    o = r.json()
    assert o["metadata"]["labels"] == {"a": "1"} and o["spec"]["operatingMode"] == "Suspended"
    assert o["metadata"]["generation"] == 2 and "status" not in o
    # removing a defaulted field brings the default back
    o = asb.merge_patch(path, {"spec": {"operatingMode": None}}).json()
    assert o["spec"]["operatingMode"] == "Running"
    # /status: only status changes; generation stays
    r = asb.merge_patch(path + "/status", {"spec": {"operatingMode": "Suspended"},
                                           "status": {"podIPs": ["10.0.0.1"], "conditions": [
                                               {"type": "Ready", "status": "True", "reason": "R",
                                                "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z",
                                                "observedGeneration": 3}]}})
    assert r.status_code == 200, r.text
    s = r.json()
    assert s["status"]["podIPs"] == ["10.0.0.1"] and s["spec"]["operatingMode"] == "Running"
    assert s["metadata"]["generation"] == o["metadata"]["generation"]
    assert asb.get(path + "/status").json()["status"]["podIPs"] == ["10.0.0.1"]
    # PUT /status
    s["status"]["podIPs"] = ["10.0.0.2"]
    s["spec"]["operatingMode"] = "Suspended"
    r = asb.put(path + "/status", s)
    assert r.status_code == 200, r.text
    assert r.json()["status"]["podIPs"] == ["10.0.0.2"] and r.json()["spec"]["operatingMode"] == "Running"
    status_of(asb.put(path + "/status", s), 409, "Conflict")
    # patch with a stale resourceVersion conflicts; with the current one it applies
    status_of(asb.merge_patch(path, {"metadata": {"resourceVersion": "1"}, "spec": {"shutdownPolicy": "Delete"}}),
              409, "Conflict")
    cur = asb.get(path).json()["metadata"]["resourceVersion"]
    r = asb.merge_patch(path, {"metadata": {"resourceVersion": cur}, "spec": {"shutdownPolicy": "Delete"}})
    assert r.status_code == 200 and r.json()["spec"]["shutdownPolicy"] == "Delete"
    # JSON patch
    r = asb.request("PATCH", path, data=json.dumps([{"op": "replace", "path": "/spec/shutdownPolicy", "value": "Retain"}]),
                    headers={"Content-Type": "application/json-patch+json"})
    assert r.status_code == 200 and r.json()["spec"]["shutdownPolicy"] == "Retain", r.text
    # unsupported patch type, patch of a missing object, invalid patched result
    r = asb.request("PATCH", path, data="{}", headers={"Content-Type": "application/strategic-merge-patch+json"})
    status_of(r, 415, "UnsupportedMediaType")
    status_of(asb.merge_patch(asb.path(CORE, "sandboxes", name="ghost"), {"spec": {}}), 404, "NotFound")
    body = status_of(asb.merge_patch(path, {"spec": {"podTemplate": None}}), 422, "Invalid")
    assert "spec.podTemplate: Required value" in body["message"]
    # templates have no status subresource
    status_of(asb.get(asb.path(EXT, "sandboxtemplates", name="t", sub="status")), 404, "NotFound")


def test_validation_field_paths(asb):
    p = asb.path(CORE, "sandboxes")
    body = sandbox("bad")
    del body["spec"]["podTemplate"]["spec"]["containers"][0]["image"]
    r = asb.post(p, body)
    st = status_of(r, 422, "Invalid")
    assert st["message"] == ('Sandbox.agents.x-k8s.io "bad" is invalid: '
                             'spec.podTemplate.spec.containers[0].image: Required value')
    assert st["details"]["kind"] == "Sandbox" and st["details"]["name"] == "bad"
    assert st["details"]["causes"] == [{"reason": "FieldValueRequired", "message": "Required value",
                                        "field": "spec.podTemplate.spec.containers[0].image"}]
    st = status_of(asb.post(p, sandbox("Not_A_Name")), 422, "Invalid")
    assert "metadata.name: Invalid value: \"Not_A_Name\"" in st["message"]
    st = status_of(asb.post(p, sandbox("x", shutdownPolicy="Sometimes")), 422, "Invalid")
    assert 'spec.shutdownPolicy: Unsupported value: "Sometimes"' in st["message"]
    st = status_of(asb.post(p, {"metadata": {}, "spec": {}}), 422, "Invalid")
    assert "metadata.name: Required value" in st["message"]
    assert "spec.podTemplate: Required value" in st["message"]
    wp = {"metadata": {"name": "pool"}, "spec": {"replicas": -2}}
    st = status_of(asb.post(asb.path(EXT, "sandboxwarmpools"), wp), 422, "Invalid")
    assert "spec.replicas: Invalid value: -2" in st["message"]
    assert "spec.sandboxTemplateRef: Required value" in st["message"]
    st = status_of(asb.post(asb.path(EXT, "sandboxclaims"), {"metadata": {"name": "c"}, "spec": {}}), 422, "Invalid")
    assert "spec.warmPoolRef: Required value" in st["message"]
    assert asb.get(p).json()["items"] == []


def test_extension_kinds_and_defaults(asb):
    t = {"apiVersion": f"{EXT}/{V}", "kind": "SandboxTemplate", "metadata": {"name": "python"},
         "spec": {"podTemplate": {"spec": {"containers": [{"name": "c", "image": "host"}]}}}}
    r = asb.post(asb.path(EXT, "sandboxtemplates"), t)
    assert r.status_code == 201, r.text
    s = r.json()["spec"]
    assert (s["networkPolicyManagement"], s["envVarsInjectionPolicy"], s["volumeClaimTemplatesPolicy"]) == \
        ("Managed", "Disallowed", "Disallowed")
    r = asb.post(asb.path(EXT, "sandboxwarmpools"), {"metadata": {"name": "pool"},
                                                     "spec": {"sandboxTemplateRef": {"name": "python"}}})
    assert r.status_code == 201, r.text
    assert r.json()["spec"]["replicas"] == 1 and r.json()["spec"]["updateStrategy"] == {"type": "OnReplenish"}
    r = asb.post(asb.path(EXT, "sandboxclaims"), {"metadata": {"name": "c1"},
                                                  "spec": {"warmPoolRef": {"name": "pool"}, "lifecycle": {}}})
    assert r.status_code == 201, r.text
    assert r.json()["kind"] == "SandboxClaim" and r.json()["spec"]["lifecycle"]["shutdownPolicy"] == "Retain"
    # a template without status subresource bumps generation on any non-metadata change
    cur = asb.get(asb.path(EXT, "sandboxtemplates", name="python")).json()
    o = asb.merge_patch(asb.path(EXT, "sandboxtemplates", name="python"),
                        {"spec": {"networkPolicyManagement": "Unmanaged"}}).json()
    assert o["metadata"]["generation"] == cur["metadata"]["generation"] + 1
    # wrong kind for the URL
    status_of(asb.post(asb.path(EXT, "sandboxclaims"), t), 400, "BadRequest")


def test_selectors(asb):
    asb.create_sandbox("a", labels={"app": "web", "tier": "front"})
    asb.create_sandbox("b", labels={"app": "web", "tier": "back"})
    asb.create_sandbox("c", labels={"app": "db"})
    asb.create_sandbox("d", ns="other", labels={"app": "web"})
    p = asb.path(CORE, "sandboxes")

    def names(params, path=p):
        r = asb.get(path, params=params)
        assert r.status_code == 200, r.text
        return sorted(i["metadata"]["name"] for i in r.json()["items"])

    assert names({"labelSelector": "app=web"}) == ["a", "b"]
    assert names({"labelSelector": "app==web,tier!=front"}) == ["b"]
    assert names({"labelSelector": "tier"}) == ["a", "b"]
    assert names({"labelSelector": "!tier"}) == ["c"]
    assert names({"labelSelector": "tier in (front, back),app notin (db)"}) == ["a", "b"]
    assert names({"fieldSelector": "metadata.name=b"}) == ["b"]
    assert names({"fieldSelector": "metadata.name!=b"}) == ["a", "c"]
    cluster = asb.path(CORE, "sandboxes", ns=None)
    assert names({}, cluster) == ["a", "b", "c", "d"]
    assert names({"fieldSelector": "metadata.namespace=other"}, cluster) == ["d"]
    assert names({"labelSelector": "app=web"}, cluster) == ["a", "b", "d"]
    status_of(asb.get(p, params={"labelSelector": "app in (web"}), 400, "BadRequest")
    status_of(asb.get(p, params={"fieldSelector": "spec.x=1"}), 400, "BadRequest")
    # pagination
    r = asb.get(p, params={"limit": "2"}).json()
    assert [i["metadata"]["name"] for i in r["items"]] == ["a", "b"]
    assert r["metadata"]["continue"] and r["metadata"]["remainingItemCount"] == 1
    r2 = asb.get(p, params={"limit": "2", "continue": r["metadata"]["continue"]}).json()
    assert [i["metadata"]["name"] for i in r2["items"]] == ["c"] and "continue" not in r2["metadata"]
    # deletecollection with a selector
    r = asb.delete(p, params={"labelSelector": "app=web"})
    assert r.status_code == 200, r.text
    assert names({}, cluster) == ["c", "d"]


def test_bad_input_keeps_serving(asb):
    p = asb.path(CORE, "sandboxes")
    hdr = {"Content-Type": "application/json"}
    for data in (b"{", b"", b"[1,2]", b"\"str\"", b"{\"metadata\": 5}", b"\xff\xfe{}",
                 b"{\"spec\": {\"podTemplate\": " * 3000):
        r = asb.request("POST", p, data=data, headers=hdr)
        assert r.status_code in (400, 422), (data[:40], r.status_code, r.text)
        assert r.json()["kind"] == "Status"
    big = json.dumps(sandbox("big") | {"pad": "x" * (4 * 1024 * 1024)})
    st = status_of(asb.request("POST", p, data=big, headers=hdr), 413, "RequestEntityTooLarge")
    assert "limit" in st["message"]
    status_of(asb.get("/nope"), 404, "NotFound")
    status_of(asb.get(f"/apis/{CORE}/{V}/namespaces/default/pods"), 404, "NotFound")
    status_of(asb.get(f"/apis/{CORE}/{V}/namespaces/default/sandboxes/x/exec"), 404, "NotFound")
    status_of(asb.request("POST", asb.path(CORE, "sandboxes", ns=None), json=sandbox("x")), 405,
              "MethodNotAllowed")
    status_of(asb.request("POST", asb.path(CORE, "sandboxes", name="x"), json=sandbox("x")), 405,
              "MethodNotAllowed")
    body = sandbox("x")
    body["metadata"]["namespace"] = "elsewhere"
    status_of(asb.post(p, body), 400, "BadRequest")
    body = sandbox("x")
    body["apiVersion"] = "agents.x-k8s.io/v1alpha1"
    status_of(asb.post(p, body), 400, "BadRequest")
    # still serving, nothing stored, then a good object works
    assert asb.get(p).json()["items"] == []
    asb.create_sandbox("fine")


def test_finalizers_and_graceful_delete(asb):
    body = sandbox("fin")
    body["metadata"]["finalizers"] = ["agents.x-k8s.io/cleanup"]
    obj = asb.post(asb.path(CORE, "sandboxes"), body).json()
    path = asb.path(CORE, "sandboxes", name="fin")
    r = asb.delete(path)
    assert r.status_code == 200, r.text
    term = r.json()
    assert term["metadata"]["deletionTimestamp"] and term["metadata"]["generation"] == 2
    # still there, terminating; deleting again changes nothing
    assert asb.get(path).json() == term
    assert asb.delete(path).json() == term
    # no new finalizers while terminating
    st = status_of(asb.merge_patch(path, {"metadata": {"finalizers": ["a/b", "agents.x-k8s.io/cleanup"]}}),
                   422, "Invalid")
    assert "no new finalizers" in st["message"]
    # clients cannot clear deletionTimestamp
    r = asb.merge_patch(path, {"metadata": {"deletionTimestamp": None, "labels": {"k": "v"}}})
    assert r.status_code == 200 and r.json()["metadata"]["deletionTimestamp"] == term["metadata"]["deletionTimestamp"]
    # removing the last finalizer deletes the object
    r = asb.merge_patch(path, {"metadata": {"finalizers": None}})
    assert r.status_code == 200, r.text
    status_of(asb.get(path), 404, "NotFound")
    assert obj["metadata"]["uid"] == r.json()["metadata"]["uid"]


def test_delete_preconditions(asb):
    obj = asb.create_sandbox("pre")
    path = asb.path(CORE, "sandboxes", name="pre")
    st = status_of(asb.request("DELETE", path, json={"preconditions": {"uid": "not-it"}}), 409, "Conflict")
    assert "Precondition failed" in st["message"]
    status_of(asb.request("DELETE", path, json={"preconditions": {"resourceVersion": "1234"}}), 409, "Conflict")
    r = asb.request("DELETE", path, json={"kind": "DeleteOptions", "apiVersion": "v1",
                                          "preconditions": {"uid": obj["metadata"]["uid"],
                                                            "resourceVersion": obj["metadata"]["resourceVersion"]}})
    assert r.status_code == 200, r.text
    status_of(asb.request("DELETE", asb.path(CORE, "sandboxes", name="x"), data=b"{"), 400, "BadRequest")


def test_dry_run(asb):
    p = asb.path(CORE, "sandboxes")
    r = asb.post(p, sandbox("dry"), params={"dryRun": "All"})
    assert r.status_code == 201 and r.json()["metadata"]["name"] == "dry"
    assert asb.get(p).json()["items"] == []
    status_of(asb.post(p, sandbox("dry"), params={"dryRun": "Some"}), 400, "BadRequest")
    obj = asb.create_sandbox("real")
    path = asb.path(CORE, "sandboxes", name="real")
    r = asb.merge_patch(path, {"spec": {"operatingMode": "Suspended"}}, params={"dryRun": "All"})
    assert r.status_code == 200 and r.json()["spec"]["operatingMode"] == "Suspended"
    assert asb.get(path).json() == obj
    r = asb.delete(path, params={"dryRun": "All"})
    assert r.status_code == 200 and asb.get(path).json() == obj
    status_of(asb.post(p, sandbox("Bad!"), params={"dryRun": "All"}), 422, "Invalid")


def test_warmpool_scale_subresource(start_asb):
    # The API alone: no warm pool controller writing the status this test fakes.
    asb = start_asb(env={"ASB_CLAIM_CONTROLLER": "off"})
    r = asb.post(asb.path(EXT, "sandboxwarmpools"), {"metadata": {"name": "pool"},
                                                     "spec": {"sandboxTemplateRef": {"name": "t"}}})
    assert r.status_code == 201, r.text
    path = asb.path(EXT, "sandboxwarmpools", name="pool")
    asb.merge_patch(path + "/status", {"status": {"replicas": 1, "selector": "agents.x-k8s.io/warm-pool-sandbox=abc"}})
    sc = asb.get(path + "/scale").json()
    assert sc["kind"] == "Scale" and sc["apiVersion"] == "autoscaling/v1"
    assert sc["spec"] == {"replicas": 1}
    assert sc["status"] == {"replicas": 1, "selector": "agents.x-k8s.io/warm-pool-sandbox=abc"}
    r = asb.merge_patch(path + "/scale", {"spec": {"replicas": 4}})
    assert r.status_code == 200 and r.json()["spec"]["replicas"] == 4, r.text
    pool = asb.get(path).json()
    assert pool["spec"]["replicas"] == 4 and pool["metadata"]["generation"] == 2
    sc = r.json()
    sc["spec"]["replicas"] = 2
    assert asb.put(path + "/scale", sc).json()["spec"]["replicas"] == 2
    status_of(asb.put(path + "/scale", sc), 409, "Conflict")
    st = status_of(asb.merge_patch(path + "/scale", {"spec": {"replicas": -1}}), 422, "Invalid")
    assert "spec.replicas" in st["message"]
    status_of(asb.get(asb.path(CORE, "sandboxes", name="x", sub="scale")), 404, "NotFound")
    res = {r["name"]: r for r in asb.get(f"/apis/{EXT}/{V}").json()["resources"]}
    assert res["sandboxwarmpools/scale"]["kind"] == "Scale" and res["sandboxwarmpools/scale"]["group"] == "autoscaling"


def test_cluster_wide_pagination_walks_every_item(asb):
    want = []
    for ns in ("a", "a-b", "b"):
        for n in ("x", "y"):
            asb.create_sandbox(n, ns=ns)
            want.append((ns, n))
    cluster = asb.path(CORE, "sandboxes", ns=None)
    got, cont = [], None
    while True:
        params = {"limit": "4"}
        if cont:
            params["continue"] = cont
        page = asb.get(cluster, params=params).json()
        got += [(i["metadata"]["namespace"], i["metadata"]["name"]) for i in page["items"]]
        cont = page["metadata"].get("continue")
        if not cont:
            break
    assert sorted(got) == sorted(want) and len(got) == len(want)


def test_optimistic_concurrency_under_contention(asb):
    """8 clients increment one counter with read-modify-PUT and retry on 409: no update is lost."""
    import threading
    asb.create_sandbox("counter")
    path = asb.path(CORE, "sandboxes", name="counter")
    per_client, conflicts, errors = 15, [], []

    def client():
        s = requests.Session()
        s.headers["Authorization"] = f"Bearer {asb.token}"
        done = 0
        while done < per_client:
            obj = s.get(asb.url + path, timeout=10).json()
            n = int(obj["metadata"].get("annotations", {}).get("n", "0"))
            obj["metadata"].setdefault("annotations", {})["n"] = str(n + 1)
            r = s.put(asb.url + path, json=obj, timeout=10)
            if r.status_code == 200:
                done += 1
            elif r.status_code == 409:
                conflicts.append(1)
            else:
                errors.append(r.text)
                return

    threads = [threading.Thread(target=client) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors[:3]
    final = asb.get(path).json()
    assert final["metadata"]["annotations"]["n"] == str(8 * per_client)
    assert conflicts, "expected some 409s under contention"


def test_garbage_on_the_wire(asb):
    import socket
    host, port = asb.url[len("http://"):].rsplit(":", 1)
    for payload in (b"GARBAGE\r\n\r\n", b"\x00\xff" * 100, b"GET / HTTP/1.1\r\nHost: x\r\n" + b"X: " + b"a" * 100000 + b"\r\n\r\n",
                    b"POST /apis/agents.x-k8s.io/v1beta1/namespaces/default/sandboxes HTTP/1.1\r\nHost: x\r\n"
                    b"Authorization: Bearer " + asb.token.encode() + b"\r\nContent-Length: 100\r\n\r\n{\"trunc"):
        with socket.create_connection((host, int(port)), timeout=5) as s:
            try:
                s.sendall(payload)
                s.shutdown(socket.SHUT_WR)
                s.recv(65536)
            except OSError:
                pass
    assert asb.get(asb.path(CORE, "sandboxes")).json()["items"] == []
    asb.create_sandbox("after-garbage")
