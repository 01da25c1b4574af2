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
    # The adopted sandbox's data plane is gone too.
    r = s.get(router + "/v1/files/sdk/hello.txt", timeout=10)
    assert r.status_code in (404, 502), (r.status_code, r.text)
    assert "detail" in r.json()
