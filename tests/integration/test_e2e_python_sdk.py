"""Black-box end to end, the way an upstream Python user works: only python3-kubernetes, requests
and grpcio (no libasb, no asb CLI). A SandboxTemplate and a SandboxWarmPool created with
CustomObjectsApi from upstream-style manifests, the pool watched until readyReplicas==2, a
SandboxClaim watched (field selector) until Ready, then the sandbox reached through the router:
REST files, gRPC Execute, legacy POST /execute; finally the claim deleted and the pool refilled."""
import os
import time

import grpc
import pytest
import requests
import yaml

from asb_apiserver import CORE, EXT, V
from grpc_helpers import Client
from local_sandbox import sbx_state, start_sbx  # noqa: F401  (fixtures)

kubernetes = pytest.importorskip("kubernetes")
from kubernetes import client, watch  # noqa: E402
from kubernetes.client.rest import ApiException  # noqa: E402

TEMPLATE = """
apiVersion: extensions.agents.x-k8s.io/v1beta1
kind: SandboxTemplate
metadata:
  name: python-runtime-template
spec:
  podTemplate:
    metadata:
      labels:
        app: python-runtime
    spec:
      containers:
      - name: python-runtime
        image: host
        ports:
        - containerPort: 8888
"""

POOL = """
apiVersion: extensions.agents.x-k8s.io/v1beta1
kind: SandboxWarmPool
metadata:
  name: python-sdk-warmpool
spec:
  replicas: 2
  sandboxTemplateRef:
    name: python-runtime-template
"""

CLAIM = """
apiVersion: extensions.agents.x-k8s.io/v1beta1
kind: SandboxClaim
metadata:
  name: sdk-claim
spec:
  warmPoolRef:
    name: python-sdk-warmpool
"""


def api_for(server):
    cfg = client.Configuration(host=server.url,
                               api_key={"authorization": f"Bearer {server.token}"})
    return client.CustomObjectsApi(client.ApiClient(cfg))


def ready(obj):
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c["type"] == "Ready":
            return c["status"] == "True"
    return False


def watch_until(api, plural, name, pred, timeout=60):
    """Watch one object by field selector (as upstream's SDK does) until pred(obj)."""
    w = watch.Watch()
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            # A quick GET first: the watch only reports changes.
            try:
                obj = api.get_namespaced_custom_object(EXT, V, "default", plural, name)
                if pred(obj):
                    return obj
            except ApiException as e:
                if e.status != 404:
                    raise
            for ev in w.stream(api.list_namespaced_custom_object, EXT, V, "default", plural,
                               field_selector=f"metadata.name={name}",
                               timeout_seconds=max(1, int(deadline - time.monotonic()))):
                obj = ev["object"]
                assert obj["metadata"]["name"] == name, ev
                if ev["type"] != "DELETED" and pred(obj):
                    return obj
    finally:
        w.stop()
    raise AssertionError(f"{plural}/{name} not as wanted within {timeout}s")


def pool_members(api, pool_name):
    lst = api.list_namespaced_custom_object(CORE, V, "default", "sandboxes")
    out = []
    for s in lst["items"]:
        refs = s["metadata"].get("ownerReferences") or []
        if any(r["kind"] == "SandboxWarmPool" and r["name"] == pool_name for r in refs):
            out.append(s)
    return out


def test_upstream_python_flow(start_sbx):
    asb = start_sbx()
    api = api_for(asb)
    api.create_namespaced_custom_object(EXT, V, "default", "sandboxtemplates", yaml.safe_load(TEMPLATE))
    api.create_namespaced_custom_object(EXT, V, "default", "sandboxwarmpools", yaml.safe_load(POOL))
    p = watch_until(api, "sandboxwarmpools", "python-sdk-warmpool",
                    lambda o: (o.get("status") or {}).get("readyReplicas") == 2)
    assert p["status"]["replicas"] == 2
    warm = {s["metadata"]["name"] for s in pool_members(api, "python-sdk-warmpool")}
    assert len(warm) == 2

    api.create_namespaced_custom_object(EXT, V, "default", "sandboxclaims", yaml.safe_load(CLAIM))
    c = watch_until(api, "sandboxclaims", "sdk-claim", ready, timeout=30)
    sname = c["status"]["sandbox"]["name"]
    assert sname in warm, (sname, warm)  # adopted warm

    router = open(os.path.join(asb.state_dir, "router")).read().strip()
    assert router.startswith("http://")
    s = requests.Session()
    s.headers.update({"Authorization": f"Bearer {asb.token}", "X-Sandbox-ID": sname})
    r = s.put(router + "/v1/files/sdk/hello.txt", data=b"hello from the sdk\n", timeout=10)
    assert r.status_code in (200, 201, 204), (r.status_code, r.text)
    r = s.get(router + "/v1/files/sdk/hello.txt", timeout=10)
    assert r.status_code == 200 and r.content == b"hello from the sdk\n", (r.status_code, r.text)

    hostport = router[len("http://"):].rstrip("/")
    g = Client(hostport)
    try:
        res = g.execute(["cat", "sdk/hello.txt"],
                        metadata=[("x-sandbox-id", sname),
                                  ("authorization", f"Bearer {asb.token}")])
        assert res.exit_code == 0 and res.stdout == b"hello from the sdk\n", res
        # No token: refused with UNAUTHENTICATED, not a hang or a crash.
        with pytest.raises(grpc.RpcError) as e:
            g.execute(["true"], metadata=[("x-sandbox-id", sname)])
        assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED, e.value
    finally:
        g.close()

    r = s.post(router + "/execute", json={"command": "cat sdk/hello.txt"},
               headers={"X-Sandbox-Port": "8888"}, timeout=30)
    assert r.status_code == 200, r.text
    assert r.json() == {"stdout": "hello from the sdk\n", "stderr": "", "exit_code": 0}

    api.delete_namespaced_custom_object(EXT, V, "default", "sandboxclaims", "sdk-claim")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        names = {x["metadata"]["name"] for x in
                 api.list_namespaced_custom_object(CORE, V, "default", "sandboxes")["items"]}
        p = api.get_namespaced_custom_object(EXT, V, "default", "sandboxwarmpools", "python-sdk-warmpool")
        if sname not in names and (p.get("status") or {}).get("readyReplicas") == 2 \
                and len(pool_members(api, "python-sdk-warmpool")) == 2:
            break
        time.sleep(0.1)
    else:
        raise AssertionError(f"pool not refilled / {sname} not gone: {names} {p.get('status')}")
    # The adopted sandbox's data plane goes too: within the router's 1 s lookup cache and the
    # container teardown (as a terminating Pod, it may answer briefly after the object is gone).
    deadline = time.monotonic() + 10
    t_gone = time.monotonic()
    while True:
        r = s.get(router + "/v1/files/sdk/hello.txt", timeout=10)
        if r.status_code in (404, 502) or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    print("router stopped serving the released sandbox after", round(time.monotonic() - t_gone, 2), "s")
    assert r.status_code in (404, 502), (r.status_code, r.text)
    assert "detail" in r.json()


def test_sdk_wire_details(start_sbx):
    """What upstream's Python SDK actually sends (UPSTREAM.md §5.2): a claim named
    sandbox-claim-<8 hex> with created-by=python-client, an isoformat client-first-requested-at
    annotation, a Delete lifecycle; files with %2F-encoded paths and X-Sandbox-Timeout; HEAD for
    exists; legacy upload with a nested multipart filename."""
    import datetime
    import uuid
    from asb_cli import ok
    asb = start_sbx()
    api = api_for(asb)
    api.create_namespaced_custom_object(EXT, V, "default", "sandboxtemplates", yaml.safe_load(TEMPLATE))
    api.create_namespaced_custom_object(EXT, V, "default", "sandboxwarmpools", yaml.safe_load(POOL))
    watch_until(api, "sandboxwarmpools", "python-sdk-warmpool",
                lambda o: (o.get("status") or {}).get("readyReplicas") == 2)
    name = f"sandbox-claim-{uuid.uuid4().hex[:8]}"
    now = datetime.datetime.now(datetime.timezone.utc)
    body = {"apiVersion": f"{EXT}/{V}", "kind": "SandboxClaim",
            "metadata": {"name": name, "labels": {"agents.x-k8s.io/created-by": "python-client"},
                         "annotations": {"agents.x-k8s.io/client-first-requested-at": now.isoformat()}},
            "spec": {"warmPoolRef": {"name": "python-sdk-warmpool"},
                     "lifecycle": {"shutdownTime": (now + datetime.timedelta(seconds=600)).strftime("%Y-%m-%dT%H:%M:%SZ"),
                                   "shutdownPolicy": "Delete"}}}
    created = api.create_namespaced_custom_object(EXT, V, "default", "sandboxclaims", body)
    # One watch from the create's resourceVersion, as the SDK does.
    w = watch.Watch()
    c = None
    for ev in w.stream(api.list_namespaced_custom_object, EXT, V, "default", "sandboxclaims",
                       field_selector=f"metadata.name={name}",
                       resource_version=created["metadata"]["resourceVersion"], timeout_seconds=30):
        o = ev["object"]
        if (o.get("status") or {}).get("sandbox", {}).get("name") and ready(o):
            c = o
            w.stop()
    assert c, "claim never Ready on the watch"
    sname = c["status"]["sandbox"]["name"]
    sb = api.get_namespaced_custom_object(CORE, V, "default", "sandboxes", sname)
    assert sb["metadata"]["labels"]["agents.x-k8s.io/created-by"] == "python-client"
    assert sb["spec"]["podTemplate"]["metadata"]["labels"]["agents.x-k8s.io/created-by"] == "python-client"
    assert sb["metadata"]["annotations"]["agents.x-k8s.io/pod-name"] == sname
    # asb get claims understands the SDK's isoformat timestamp (+00:00, microseconds).
    out = ok(asb, "get", "claims")
    row = [ln.split() for ln in out.splitlines() if ln.startswith(name)][0]
    assert row[3] != "<none>" and (row[3].endswith("ms") or row[3].endswith("s")), out

    router = open(os.path.join(asb.state_dir, "router")).read().strip()
    s = requests.Session()
    s.headers.update({"Authorization": f"Bearer {asb.token}", "X-Sandbox-ID": sname,
                      "X-Sandbox-Namespace": "default", "X-Sandbox-Timeout": "60"})
    r = s.put(router + "/v1/files/" + requests.utils.quote("dir/sub/f.txt", safe=""), data=b"abc",
              headers={"X-Sandbox-Port": "8080", "Content-Type": "application/octet-stream"}, timeout=10)
    assert r.status_code in (200, 201, 204), (r.status_code, r.text)
    r = s.get(router + "/v1/files/dir%2Fsub%2Ff.txt", headers={"X-Sandbox-Port": "8080"}, timeout=10)
    assert r.status_code == 200 and r.content == b"abc", (r.status_code, r.text)
    r = s.head(router + "/v1/files/dir%2Fsub%2Ff.txt", headers={"X-Sandbox-Port": "8080"}, timeout=10)
    assert r.status_code == 200, r.status_code
    r = s.head(router + "/v1/files/dir%2Fnope", headers={"X-Sandbox-Port": "8080"}, timeout=10)
    assert r.status_code == 404, r.status_code
    # Legacy runtime (port 8888, the SDKs' default): nested upload, encoded download/list/exists.
    legacy = {"X-Sandbox-Port": "8888"}
    r = s.post(router + "/upload", files={"file": ("up/nested/u.txt", b"legacy bytes")}, headers=legacy, timeout=10)
    assert r.status_code == 200 and r.json() == {"message": "File 'up/nested/u.txt' uploaded successfully."}, r.text
    r = s.get(router + "/download/up%2Fnested%2Fu%2Etxt", headers=legacy, timeout=10)
    assert r.status_code == 200 and r.content == b"legacy bytes", (r.status_code, r.text)
    r = s.get(router + "/list/up%2Fnested", headers=legacy, timeout=10)
    assert r.status_code == 200 and [e["name"] for e in r.json()] == ["u.txt"], r.text
    assert set(r.json()[0]) >= {"name", "size", "type", "mod_time"} and r.json()[0]["type"] == "file"
    r = s.get(router + "/exists/up%2Fnested%2Fu.txt", headers=legacy, timeout=10)
    assert r.json() == {"path": "up/nested/u.txt", "exists": True}, r.text
    r = s.get(router + "/exists/%2E%2E%2Fetc", headers=legacy, timeout=10)
    assert r.status_code == 403 and r.json() == {"message": "Access denied"}, r.text
    # gRPC Run as the SDK does it: /bin/sh -c with a deadline.
    g = Client(router[len("http://"):].rstrip("/"))
    try:
        res = g.execute(["/bin/sh", "-c", "cat dir/sub/f.txt up/nested/u.txt"], timeout=60,
                        metadata=[("x-sandbox-id", sname), ("x-sandbox-namespace", "default"),
                                  ("authorization", f"Bearer {asb.token}")])
        assert res.stdout == b"abclegacy bytes" and res.exit_code == 0, res
    finally:
        g.close()
    api.delete_namespaced_custom_object(EXT, V, "default", "sandboxclaims", name)


def test_watch_sees_claim_deletion_by_field_selector(start_sbx):
    """The SDK's wait ends with SandboxMetadataError when the claim is deleted under it: the
    field-selected watch must deliver DELETED (and nothing for other claims)."""
    import threading
    asb = start_sbx()
    api = api_for(asb)
    body = yaml.safe_load(CLAIM)
    api.create_namespaced_custom_object(EXT, V, "default", "sandboxclaims", body)  # pool missing
    other = dict(body, metadata={"name": "other-claim"})
    created = api.create_namespaced_custom_object(EXT, V, "default", "sandboxclaims", other)
    events = []
    w = watch.Watch()

    def consume():
        for ev in w.stream(api.list_namespaced_custom_object, EXT, V, "default", "sandboxclaims",
                           field_selector="metadata.name=sdk-claim",
                           resource_version=created["metadata"]["resourceVersion"], timeout_seconds=20):
            events.append((ev["type"], ev["object"]["metadata"]["name"]))
            if ev["type"] == "DELETED":
                w.stop()
    t = threading.Thread(target=consume, daemon=True)
    t.start()
    time.sleep(0.5)
    api.delete_namespaced_custom_object(EXT, V, "default", "sandboxclaims", "other-claim")
    api.delete_namespaced_custom_object(EXT, V, "default", "sandboxclaims", "sdk-claim")
    t.join(25)
    assert ("DELETED", "sdk-claim") in events, events
    assert all(n == "sdk-claim" for _, n in events), events
