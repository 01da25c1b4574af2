"""Debian's python3-kubernetes CustomObjectsApi against `asb serve`: the official client must work
unchanged (create/get/list/patch/delete/watch, status subresource, errors as ApiException)."""
import threading
import time

import pytest

from asb_apiserver import CORE, EXT, V, asb, sandbox, start_asb  # noqa: F401 (fixtures)

kubernetes = pytest.importorskip("kubernetes")
from kubernetes import client, watch  # noqa: E402
from kubernetes.client.rest import ApiException  # noqa: E402


def custom_api(server, token=None):
    cfg = client.Configuration(host=server.url,
                               api_key={"authorization": f"Bearer {token or server.token}"})
    return client.CustomObjectsApi(client.ApiClient(cfg))


def test_crud_with_custom_objects_api(asb):
    api = custom_api(asb)
    created = api.create_namespaced_custom_object(CORE, V, "default", "sandboxes",
                                                  sandbox("kube", labels={"via": "python"}))
    assert created["metadata"]["name"] == "kube" and created["spec"]["operatingMode"] == "Running"
    got = api.get_namespaced_custom_object(CORE, V, "default", "sandboxes", "kube")
    assert got == created
    lst = api.list_namespaced_custom_object(CORE, V, "default", "sandboxes", label_selector="via=python")
    assert [i["metadata"]["name"] for i in lst["items"]] == ["kube"]
    assert api.list_cluster_custom_object(CORE, V, "sandboxes")["kind"] == "SandboxList"
    patched = api.patch_namespaced_custom_object(CORE, V, "default", "sandboxes", "kube",
                                                 {"spec": {"operatingMode": "Suspended"}})
    assert patched["spec"]["operatingMode"] == "Suspended" and patched["metadata"]["generation"] == 2
    st = api.patch_namespaced_custom_object_status(CORE, V, "default", "sandboxes", "kube",
                                                   {"status": {"podIPs": ["10.1.1.1"]}})
    assert st["status"]["podIPs"] == ["10.1.1.1"]
    assert api.get_namespaced_custom_object_status(CORE, V, "default", "sandboxes", "kube")["status"] == st["status"]
    st["spec"]["operatingMode"] = "Running"
    replaced = api.replace_namespaced_custom_object(CORE, V, "default", "sandboxes", "kube", st)
    assert replaced["spec"]["operatingMode"] == "Running"
    with pytest.raises(ApiException) as e:
        api.replace_namespaced_custom_object(CORE, V, "default", "sandboxes", "kube", st)
    assert e.value.status == 409
    deleted = api.delete_namespaced_custom_object(CORE, V, "default", "sandboxes", "kube")
    assert deleted["metadata"]["name"] == "kube"
    with pytest.raises(ApiException) as e:
        api.get_namespaced_custom_object(CORE, V, "default", "sandboxes", "kube")
    assert e.value.status == 404 and "not found" in e.value.body


def test_errors_and_auth(asb):
    api = custom_api(asb)
    bad = sandbox("bad")
    del bad["spec"]["podTemplate"]["spec"]["containers"][0]["image"]
    with pytest.raises(ApiException) as e:
        api.create_namespaced_custom_object(CORE, V, "default", "sandboxes", bad)
    assert e.value.status == 422 and "spec.podTemplate.spec.containers[0].image: Required value" in e.value.body
    with pytest.raises(ApiException) as e:
        custom_api(asb, token="wrong").list_namespaced_custom_object(CORE, V, "default", "sandboxes")
    assert e.value.status == 401


def test_extension_kinds(asb):
    api = custom_api(asb)
    api.create_namespaced_custom_object(EXT, V, "default", "sandboxtemplates", {
        "apiVersion": f"{EXT}/{V}", "kind": "SandboxTemplate", "metadata": {"name": "py"},
        "spec": {"podTemplate": {"spec": {"containers": [{"name": "c", "image": "host"}]}}}})
    api.create_namespaced_custom_object(EXT, V, "default", "sandboxwarmpools", {
        "apiVersion": f"{EXT}/{V}", "kind": "SandboxWarmPool", "metadata": {"name": "pool"},
        "spec": {"replicas": 2, "sandboxTemplateRef": {"name": "py"}}})
    claim = api.create_namespaced_custom_object(EXT, V, "default", "sandboxclaims", {
        "apiVersion": f"{EXT}/{V}", "kind": "SandboxClaim", "metadata": {"generateName": "claim-"},
        "spec": {"warmPoolRef": {"name": "pool"}}})
    assert claim["metadata"]["name"].startswith("claim-")
    pool = api.patch_namespaced_custom_object_status(EXT, V, "default", "sandboxwarmpools", "pool",
                                                     {"status": {"replicas": 2, "readyReplicas": 1}})
    assert pool["status"]["readyReplicas"] == 1
    assert len(api.list_namespaced_custom_object(EXT, V, "default", "sandboxclaims")["items"]) == 1


def test_watch_stream(asb):
    api = custom_api(asb)
    api.create_namespaced_custom_object(CORE, V, "default", "sandboxes", sandbox("before"))
    events = []
    w = watch.Watch()

    def run():
        for ev in w.stream(api.list_namespaced_custom_object, CORE, V, "default", "sandboxes",
                           timeout_seconds=10):
            events.append((time.monotonic(), ev["type"], ev["object"]["metadata"]["name"]))
            if ev["type"] == "DELETED":
                w.stop()

    t = threading.Thread(target=run, daemon=True)
    t.start()
    deadline = time.monotonic() + 5
    while not events and time.monotonic() < deadline:
        time.sleep(0.02)
    assert events and events[0][1:] == ("ADDED", "before")
    api.create_namespaced_custom_object(CORE, V, "default", "sandboxes", sandbox("during"))
    api.patch_namespaced_custom_object(CORE, V, "default", "sandboxes", "during", {"metadata": {"labels": {"a": "b"}}})
    t_write = time.monotonic()
    api.delete_namespaced_custom_object(CORE, V, "default", "sandboxes", "during")
    t.join(10)
    assert not t.is_alive()
    assert [e[1:] for e in events] == [("ADDED", "before"), ("ADDED", "during"),
                                       ("MODIFIED", "during"), ("DELETED", "during")]
    assert events[-1][0] - t_write < 0.5


def test_watch_expired_raises_410(start_asb):
    asb = start_asb(env={"ASB_WATCH_WINDOW": "2"})
    api = custom_api(asb)
    first = api.create_namespaced_custom_object(CORE, V, "default", "sandboxes", sandbox("a"))
    for n in "bcd":
        api.create_namespaced_custom_object(CORE, V, "default", "sandboxes", sandbox(n))
    w = watch.Watch()
    with pytest.raises(ApiException) as e:
        for _ in w.stream(api.list_namespaced_custom_object, CORE, V, "default", "sandboxes",
                          resource_version=first["metadata"]["resourceVersion"], timeout_seconds=5):
            pass
    assert e.value.status == 410


def dynamic_client(api_client, tmp_path):
    """A kubernetes.dynamic client whose discovery cache is a file in the test's own tmp_path
    (by default it is /tmp/osrcp-<hash of the URL>.json, left behind by every run)."""
    from kubernetes import dynamic
    cache = tmp_path / "discovery.json"
    dc = dynamic.DynamicClient(api_client, cache_file=str(cache))
    assert cache.exists()
    return dc


def test_dynamic_client_discovery(asb, tmp_path):
    """kubernetes.dynamic discovers kinds through /api, /apis and /apis/<group>/<version>."""
    cfg = client.Configuration(host=asb.url, api_key={"authorization": f"Bearer {asb.token}"})
    dc = dynamic_client(client.ApiClient(cfg), tmp_path)
    sbx = dc.resources.get(api_version=f"{CORE}/{V}", kind="Sandbox")
    obj = sbx.create(namespace="default", body=sandbox("dyn"))
    assert obj.metadata.name == "dyn"
    p = sbx.patch(namespace="default", name="dyn", body={"spec": {"operatingMode": "Suspended"}},
                  content_type="application/merge-patch+json")
    assert p.spec.operatingMode == "Suspended"
    assert [i.metadata.name for i in sbx.get(namespace="default").items] == ["dyn"]
    swp = dc.resources.get(api_version=f"{EXT}/{V}", kind="SandboxWarmPool")
    assert swp.short_names == ["swp"] and "status" in swp.subresources
    assert sbx.delete(namespace="default", name="dyn").metadata.name == "dyn"


def test_events_found_by_discovery_and_read_with_events_v1_api(asb, tmp_path):
    """events.k8s.io/v1 is in discovery like the other groups: the dynamic client finds the
    Event kind, and the typed EventsV1Api lists and watches the events the controllers record."""
    cfg = client.Configuration(host=asb.url, api_key={"authorization": f"Bearer {asb.token}"})
    api_client = client.ApiClient(cfg)
    dc = dynamic_client(api_client, tmp_path)
    ev = dc.resources.get(api_version="events.k8s.io/v1", kind="Event")
    assert ev.namespaced and ev.short_names == ["ev"] and "watch" in ev.verbs
    assert "create" not in ev.verbs  # recorded by the controllers only
    tmpl = {"apiVersion": f"{EXT}/{V}", "kind": "SandboxTemplate", "metadata": {"name": "et"},
            "spec": {"podTemplate": {"spec": {"containers": [{"name": "main", "image": "host"}]}}}}
    custom_api(asb).create_namespaced_custom_object(EXT, V, "default", "sandboxtemplates", tmpl)
    events_api = client.EventsV1Api(api_client)
    w = watch.Watch()
    seen = []
    swp = {"apiVersion": f"{EXT}/{V}", "kind": "SandboxWarmPool", "metadata": {"name": "ep"},
           "spec": {"replicas": 1, "sandboxTemplateRef": {"name": "et"}}}
    custom_api(asb).create_namespaced_custom_object(EXT, V, "default", "sandboxwarmpools", swp)
    for e in w.stream(events_api.list_namespaced_event, "default", timeout_seconds=20):
        seen.append(e["object"])
        if e["object"].regarding.name == "ep":
            w.stop()
    assert seen and seen[-1].reason == "SuccessfulCreate" and seen[-1].regarding.kind == "SandboxWarmPool"
    listed = events_api.list_namespaced_event("default")
    assert any(e.regarding.name == "ep" and e.reason == "SuccessfulCreate" for e in listed.items)
    assert dc.resources.get(api_version="events.k8s.io/v1", kind="Event").get(namespace="default").items
