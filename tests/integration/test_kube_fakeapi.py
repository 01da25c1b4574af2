"""The strict test API server (tests/kube/fake_apiserver.py) driven by Debian's python3-kubernetes
client: if a real client library sees Kubernetes semantics here, the controller tests that rely on
them are meaningful."""
import threading

import pytest
from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException

from kube_fixtures import CORE, EXT, fake, sandbox_obj, wait_for  # noqa: F401


@pytest.fixture
def api(fake):  # noqa: F811
    cfg = client.Configuration()
    config.load_kube_config(config_file=fake.kubeconfig, client_configuration=cfg)
    c = client.ApiClient(cfg)
    yield c
    c.close()


def test_pod_crud_resource_versions_and_conflict(api, fake):  # noqa: F811
    v1 = client.CoreV1Api(api)
    pod = client.V1Pod(metadata=client.V1ObjectMeta(generate_name="p-"),
                       spec=client.V1PodSpec(containers=[client.V1Container(name="c", image="i")]))
    created = v1.create_namespaced_pod("default", pod)
    assert created.metadata.name.startswith("p-") and len(created.metadata.name) == 7
    assert created.metadata.uid and created.metadata.resource_version
    rv1 = created.metadata.resource_version
    created.metadata.labels = {"a": "b"}
    updated = v1.replace_namespaced_pod(created.metadata.name, "default", created)
    assert int(updated.metadata.resource_version) > int(rv1)
    created.metadata.labels = {"a": "c"}  # still carries rv1: stale
    with pytest.raises(ApiException) as e:
        v1.replace_namespaced_pod(created.metadata.name, "default", created)
    assert e.value.status == 409
    lst = v1.list_namespaced_pod("default")
    assert [p.metadata.name for p in lst.items] == [created.metadata.name]
    assert int(lst.metadata.resource_version) >= int(updated.metadata.resource_version)
    with pytest.raises(ApiException) as e:
        v1.create_namespaced_pod("default", client.V1Pod(
            metadata=client.V1ObjectMeta(name=created.metadata.name),
            spec=client.V1PodSpec(containers=[client.V1Container(name="c", image="i")])))
    assert e.value.status == 409 and "AlreadyExists" in e.value.body


def test_status_subresource_and_generation(api, fake):  # noqa: F811
    co = client.CustomObjectsApi(api)
    sb = co.create_namespaced_custom_object(CORE, "v1beta1", "default", "sandboxes",
                                            {**sandbox_obj("s1"), "status": {"podIPs": ["1.1.1.1"]}})
    assert "status" not in sb, "status is ignored on create"
    assert sb["metadata"]["generation"] == 1
    st = co.patch_namespaced_custom_object_status(CORE, "v1beta1", "default", "sandboxes", "s1",
                                                  {"status": {"podIPs": ["1.2.3.4"]},
                                                   "spec": {"operatingMode": "Suspended"}})
    assert st["status"]["podIPs"] == ["1.2.3.4"]
    assert "operatingMode" not in st["spec"], "spec ignored on /status"
    assert st["metadata"]["generation"] == 1
    sp = co.patch_namespaced_custom_object(CORE, "v1beta1", "default", "sandboxes", "s1",
                                           {"spec": {"operatingMode": "Suspended"},
                                            "status": {"podIPs": []}})
    assert sp["spec"]["operatingMode"] == "Suspended"
    assert sp["status"]["podIPs"] == ["1.2.3.4"], "status ignored on the main resource"
    assert sp["metadata"]["generation"] == 2
    lp = co.patch_namespaced_custom_object(CORE, "v1beta1", "default", "sandboxes", "s1",
                                           {"metadata": {"labels": {"x": "y"}}})
    assert lp["metadata"]["generation"] == 2, "metadata changes do not bump generation"
    with pytest.raises(ApiException) as e:
        co.patch_namespaced_custom_object(CORE, "v1beta1", "default", "sandboxes", "s1",
                                          {"metadata": {"resourceVersion": sb["metadata"]["resourceVersion"]},
                                           "spec": {"operatingMode": "Running"}})
    assert e.value.status == 409


def test_watch_events_bookmarks_and_410(api, fake):  # noqa: F811
    v1 = client.CoreV1Api(api)
    lst = v1.list_namespaced_service("default")
    rv = lst.metadata.resource_version
    seen = []

    def watcher():
        w = watch.Watch()
        for ev in w.stream(v1.list_namespaced_service, "default", resource_version=rv,
                           allow_watch_bookmarks=True, timeout_seconds=3):
            seen.append((ev["type"], ev["object"].metadata.name if ev["type"] != "BOOKMARK" else None))
            if len(seen) >= 4:
                w.stop()
    t = threading.Thread(target=watcher)
    t.start()
    svc = client.V1Service(metadata=client.V1ObjectMeta(name="svc"), spec=client.V1ServiceSpec(cluster_ip="None"))
    v1.create_namespaced_service("default", svc)
    v1.patch_namespaced_service("svc", "default", {"metadata": {"labels": {"a": "b"}}})
    v1.delete_namespaced_service("svc", "default")
    t.join(10)
    kinds = [s for s in seen if s[0] != "BOOKMARK"]
    assert kinds[:3] == [("ADDED", "svc"), ("MODIFIED", "svc"), ("DELETED", "svc")]
    # A raw watch with bookmarks sees BOOKMARK events carrying the current RV.
    r = fake.s.get(fake.path("services"), params={"watch": "true", "allowWatchBookmarks": "true",
                                                 "resourceVersion": rv, "timeoutSeconds": "2"}, stream=True)
    types = [__import__("json").loads(line)["type"] for line in r.iter_lines() if line]
    assert "BOOKMARK" in types
    fake.hook("compact")
    with pytest.raises(ApiException) as e:
        for _ in watch.Watch().stream(v1.list_namespaced_service, "default", resource_version=rv,
                                      timeout_seconds=2):
            pass
    assert e.value.status == 410


def test_owner_gc_background_and_foreground(api, fake):  # noqa: F811
    co = client.CustomObjectsApi(api)
    v1 = client.CoreV1Api(api)
    sb = co.create_namespaced_custom_object(CORE, "v1beta1", "default", "sandboxes", sandbox_obj("own"))
    ref = client.V1OwnerReference(api_version=f"{CORE}/v1beta1", kind="Sandbox", name="own",
                                  uid=sb["metadata"]["uid"], controller=True, block_owner_deletion=True)
    for n in ("a", "b"):
        v1.create_namespaced_pod("default", client.V1Pod(
            metadata=client.V1ObjectMeta(name=n, owner_references=[ref]),
            spec=client.V1PodSpec(containers=[client.V1Container(name="c", image="i")])))
    co.delete_namespaced_custom_object(CORE, "v1beta1", "default", "sandboxes", "own")
    assert v1.list_namespaced_pod("default").items == []
    # Foreground: the owner lingers with a deletionTimestamp until dependents are gone; a
    # dependent with a finalizer holds it.
    sb = co.create_namespaced_custom_object(CORE, "v1beta1", "default", "sandboxes", sandbox_obj("fg"))
    ref.uid, ref.name = sb["metadata"]["uid"], "fg"
    v1.create_namespaced_pod("default", client.V1Pod(
        metadata=client.V1ObjectMeta(name="held", owner_references=[ref], finalizers=["test/hold"]),
        spec=client.V1PodSpec(containers=[client.V1Container(name="c", image="i")])))
    co.delete_namespaced_custom_object(CORE, "v1beta1", "default", "sandboxes", "fg",
                                       propagation_policy="Foreground")
    owner = co.get_namespaced_custom_object(CORE, "v1beta1", "default", "sandboxes", "fg")
    assert owner["metadata"]["deletionTimestamp"]
    assert "foregroundDeletion" in owner["metadata"]["finalizers"]
    pod = v1.read_namespaced_pod("held", "default")
    assert pod.metadata.deletion_timestamp is not None
    v1.patch_namespaced_pod("held", "default", {"metadata": {"finalizers": None}})
    with pytest.raises(ApiException) as e:
        co.get_namespaced_custom_object(CORE, "v1beta1", "default", "sandboxes", "fg")
    assert e.value.status == 404


def test_crd_rejects_strategic_merge_and_unknown_paths(api, fake):  # noqa: F811
    co = client.CustomObjectsApi(api)
    co.create_namespaced_custom_object(EXT, "v1beta1", "default", "sandboxwarmpools",
                                       {"apiVersion": f"{EXT}/v1beta1", "kind": "SandboxWarmPool",
                                        "metadata": {"name": "p"},
                                        "spec": {"replicas": 1, "sandboxTemplateRef": {"name": "t"}}})
    r = fake.s.patch(fake.path("sandboxwarmpools", "default", "p"), data="{}",
                     headers={"Content-Type": "application/strategic-merge-patch+json"})
    assert r.status_code == 415
    scale = co.patch_namespaced_custom_object_scale(EXT, "v1beta1", "default", "sandboxwarmpools", "p",
                                                    {"spec": {"replicas": 3}})
    assert scale["spec"]["replicas"] == 3
    assert co.get_namespaced_custom_object(EXT, "v1beta1", "default", "sandboxwarmpools", "p")["spec"]["replicas"] == 3
    assert fake.s.get(fake.url + "/apis/nope/v1/things").status_code == 404
    r = fake.s.get(fake.path("pods"), headers={"Authorization": "Bearer wrong"})
    assert r.status_code == 401
    lease = client.CoordinationV1Api(api).create_namespaced_lease("default", client.V1Lease(
        metadata=client.V1ObjectMeta(name="l"), spec=client.V1LeaseSpec(holder_identity="me")))
    assert lease.spec.holder_identity == "me"


def test_injected_conflicts(api, fake):  # noqa: F811
    v1 = client.CoreV1Api(api)
    fake.hook("conflicts", n=2)
    for _ in range(2):
        with pytest.raises(ApiException) as e:
            v1.create_namespaced_service(
                "default", client.V1Service(metadata=client.V1ObjectMeta(name="x")))
        assert e.value.status == 409
    v1.create_namespaced_service("default", client.V1Service(metadata=client.V1ObjectMeta(name="x")))
