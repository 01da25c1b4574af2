"""asb-controller against the strict test API server: the Sandbox reconciler (§2.4 / §2.11)."""
import datetime

import requests

from kube_fixtures import (condition, controller, fake, sandbox_obj, wait_for)  # noqa: F401

HASH = "agents.x-k8s.io/sandbox-name-hash"


def name_hash(s):
    h = 0x811C9DC5
    for b in s.encode():
        h ^= b
        h = (h * 0x01000193) & 0xFFFFFFFF
    return f"{h:08x}"


def ready(fake, name):  # noqa: F811
    return condition(fake.get("sandboxes", name), "Ready")


def test_minimal_sandbox_creates_pod_without_service(fake, controller):  # noqa: F811
    ctl = controller()
    sb = fake.create("sandboxes", sandbox_obj("s1"))
    pod = wait_for(lambda: fake.get("pods", "s1"), what="pod")
    assert pod["metadata"]["labels"][HASH] == name_hash("s1") == "a7f3ffe2" or \
        pod["metadata"]["labels"][HASH] == name_hash("s1")
    ref = pod["metadata"]["ownerReferences"][0]
    assert ref["uid"] == sb["metadata"]["uid"] and ref["controller"] and ref["blockOwnerDeletion"]
    assert ref["kind"] == "Sandbox" and ref["apiVersion"] == "agents.x-k8s.io/v1beta1"
    assert pod["spec"]["containers"][0]["image"] == "busybox"
    c = wait_for(lambda: ready(fake, "s1"), what="Ready condition")
    assert c["status"] == "False" and c["reason"] == "DependenciesNotReady"
    assert fake.get("services", "s1") is None
    # The annotation and the status are separate writes: either may land first.
    s = wait_for(lambda: (lambda o: o if (o["metadata"].get("annotations") or {}).get(
        "agents.x-k8s.io/pod-name") == "s1" else None)(fake.get("sandboxes", "s1")),
        what="pod-name annotation")
    # Pod goes Running + Ready with an IP: Ready=True, podIPs, nodeName, selector.
    fake.set_pod_ready("s1", ip="10.0.0.7")
    wait_for(lambda: (ready(fake, "s1") or {}).get("status") == "True", what="Ready=True")
    s = fake.get("sandboxes", "s1")
    assert condition(s, "Ready")["reason"] == "DependenciesReady"
    assert condition(s, "Ready")["message"] == "Pod is Ready"
    assert condition(s, "Ready")["observedGeneration"] == s["metadata"]["generation"]
    assert s["status"]["podIPs"] == ["10.0.0.7"]
    assert s["status"]["nodeName"] == "node-1"
    assert s["status"]["selector"] == f"{HASH}={name_hash('s1')}"
    assert condition(s, "Suspended")["reason"] == "NotSuspended"
    assert condition(s, "PodScheduled")["status"] == "True"
    # Metrics and health endpoints.
    m = requests.get(f"http://{ctl.addr('metrics')}/metrics").text
    assert "agent_sandbox_build_info{" in m
    assert 'agent_sandboxes{namespace="default",ready_condition="True"' in m
    assert "agent_sandbox_creation_latency_ms_count 1" in m
    assert requests.get(f"http://{ctl.addr('health')}/healthz").status_code == 200
    assert requests.get(f"http://{ctl.addr('health')}/readyz").status_code == 200


def test_pod_phases_drive_conditions(fake, controller):  # noqa: F811
    controller()
    fake.create("sandboxes", sandbox_obj("ph"))
    wait_for(lambda: fake.get("pods", "ph"), what="pod")
    fake.patch("pods", "ph", {"status": {"phase": "Running", "conditions": [
        {"type": "Ready", "status": "False"},
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/3 nodes"}]}},
        sub="status")
    wait_for(lambda: (ready(fake, "ph") or {}).get("message") == "Pod is Running but not Ready", what="not ready")
    ps = condition(fake.get("sandboxes", "ph"), "PodScheduled")
    assert (ps["status"], ps["reason"], ps["message"]) == ("False", "Unschedulable", "0/3 nodes")
    fake.patch("pods", "ph", {"status": {"phase": "Succeeded"}}, sub="status")
    wait_for(lambda: (ready(fake, "ph") or {}).get("reason") == "PodSucceeded", what="PodSucceeded")
    s = fake.get("sandboxes", "ph")
    assert condition(s, "Finished")["status"] == "True"
    assert condition(s, "Finished")["reason"] == "PodSucceeded"
    # A finished pod is never recreated.
    assert [p["metadata"]["name"] for p in fake.list("pods")] == ["ph"]


def test_service_and_pvcs(fake, controller):  # noqa: F811
    controller()
    sb = sandbox_obj("sv", service=True, volumeClaimTemplates=[
        {"metadata": {"name": "data", "labels": {"tier": "x"}},
         "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}])
    sb["spec"]["podTemplate"]["spec"]["containers"][0]["ports"] = [
        {"containerPort": 9090}, {"containerPort": 8080, "name": "http"}, {"containerPort": 8080}]
    sb["spec"]["podTemplate"]["spec"]["volumes"] = [{"name": "data", "emptyDir": {}}]
    created = fake.create("sandboxes", sb)
    svc = wait_for(lambda: fake.get("services", "sv"), what="service")
    assert svc["spec"]["clusterIP"] == "None"
    assert svc["spec"]["selector"] == {HASH: name_hash("sv")}
    assert [(p["port"], p["name"]) for p in svc["spec"]["ports"]] == [(8080, "http"), (9090, "p-9090-tcp")]
    pvc = wait_for(lambda: fake.get("persistentvolumeclaims", "data-sv"), what="pvc")
    assert pvc["metadata"]["labels"] == {"tier": "x", HASH: name_hash("sv")}
    assert pvc["metadata"]["ownerReferences"][0]["uid"] == created["metadata"]["uid"]
    pod = wait_for(lambda: fake.get("pods", "sv"), what="pod")
    assert pod["spec"]["volumes"] == [{"name": "data", "persistentVolumeClaim": {"claimName": "data-sv"}}]
    fake.set_pod_ready("sv")
    wait_for(lambda: (ready(fake, "sv") or {}).get("status") == "True", what="ready")
    s = fake.get("sandboxes", "sv")
    assert s["status"]["service"] == "sv"
    assert s["status"]["serviceFQDN"] == "sv.default.svc.cluster.local"
    assert condition(s, "Ready")["message"] == "Pod is Ready; Service Exists"
    # Drift repair on the owned Service.
    fake.patch("services", "sv", {"spec": {"selector": {"app": "other"}}})
    wait_for(lambda: fake.get("services", "sv")["spec"]["selector"] == {HASH: name_hash("sv")}, what="repair")
    # service: false deletes the owned Service.
    fake.patch("sandboxes", "sv", {"spec": {"service": False}})
    wait_for(lambda: fake.get("services", "sv") is None, what="service deleted")
    wait_for(lambda: "service" not in fake.get("sandboxes", "sv")["status"], what="status.service cleared")
    # Deleting the Sandbox garbage-collects pod and PVC.
    fake.delete("sandboxes", "sv")
    assert fake.get("pods", "sv") is None and fake.get("persistentvolumeclaims", "data-sv") is None


def test_pod_metadata_rules(fake, controller):  # noqa: F811
    controller()
    sb = sandbox_obj("md")
    sb["metadata"]["labels"] = {"agents.x-k8s.io/created-by": "my-tool"}
    sb["spec"]["podTemplate"]["metadata"] = {
        "labels": {"team": "a", "agents.x-k8s.io/warm-pool-sandbox": "spoof"},
        "annotations": {"note": "n", "agents.x-k8s.io/pod-name": "hijack"}}
    fake.create("sandboxes", sb)
    pod = wait_for(lambda: fake.get("pods", "md"), what="pod")
    labels, ann = pod["metadata"]["labels"], pod["metadata"]["annotations"]
    assert labels == {"team": "a", HASH: name_hash("md"), "agents.x-k8s.io/created-by": "unknown"}
    assert ann == {"note": "n", "agents.x-k8s.io/propagated-labels": "team",
                   "agents.x-k8s.io/propagated-annotations": "note"}
    # Template label removed -> removed from the pod; new one added; pod not recreated.
    uid = pod["metadata"]["uid"]
    fake.patch("sandboxes", "md", {"spec": {"podTemplate": {"metadata": {"labels": {"team": None, "env": "p"}}}}})
    def relabelled():
        p = fake.get("pods", "md")
        return p if "team" not in p["metadata"]["labels"] and p["metadata"]["labels"].get("env") == "p" else None
    p = wait_for(relabelled, what="pod relabelled")
    assert p["metadata"]["uid"] == uid
    assert p["metadata"]["annotations"]["agents.x-k8s.io/propagated-labels"] == "env"


def test_suspend_resume_keeps_pvcs(fake, controller):  # noqa: F811
    controller()
    fake.create("sandboxes", sandbox_obj("su", volumeClaimTemplates=[{"metadata": {"name": "d"}, "spec": {}}]))
    pod = wait_for(lambda: fake.get("pods", "su"), what="pod")
    fake.patch("sandboxes", "su", {"spec": {"operatingMode": "Suspended"}})
    wait_for(lambda: fake.get("pods", "su") is None, what="pod deleted")
    def suspended():
        c = condition(fake.get("sandboxes", "su"), "Suspended")
        return c if c and c["status"] == "True" else None
    c = wait_for(suspended, what="Suspended=True")
    assert c["reason"] == "PodTerminated"
    s = fake.get("sandboxes", "su")
    assert condition(s, "Ready")["reason"] == "SandboxSuspended"
    assert condition(s, "Ready")["message"] == "Sandbox is suspended"
    assert "agents.x-k8s.io/pod-name" not in (s["metadata"].get("annotations") or {})
    assert fake.get("persistentvolumeclaims", "d-su") is not None
    fake.patch("sandboxes", "su", {"spec": {"operatingMode": "Running"}})
    new = wait_for(lambda: fake.get("pods", "su"), what="pod recreated")
    assert new["metadata"]["uid"] != pod["metadata"]["uid"]
    wait_for(lambda: condition(fake.get("sandboxes", "su"), "Suspended")["reason"] == "NotSuspended", what="resumed")


def _rfc3339(delta):
    return (datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=delta)).strftime("%Y-%m-%dT%H:%M:%SZ")


def test_expiry_retain_and_delete(fake, controller):  # noqa: F811
    controller()
    fake.create("sandboxes", sandbox_obj("ret", service=True, shutdownTime=_rfc3339(2)))
    fake.create("sandboxes", sandbox_obj("del", shutdownTime=_rfc3339(2), shutdownPolicy="Delete",
                                         volumeClaimTemplates=[{"metadata": {"name": "d"}, "spec": {}}]))
    wait_for(lambda: fake.get("pods", "ret") and fake.get("pods", "del"), what="pods")
    wait_for(lambda: fake.get("sandboxes", "del") is None, timeout=10, what="Delete policy removes the sandbox")
    assert fake.get("pods", "del") is None and fake.get("persistentvolumeclaims", "d-del") is None
    wait_for(lambda: (ready(fake, "ret") or {}).get("reason") == "SandboxExpired", timeout=10, what="expired")
    wait_for(lambda: fake.get("pods", "ret") is None and fake.get("services", "ret") is None, what="cleanup")
    s = wait_for(lambda: (lambda o: o if set(o["status"]) == {"conditions"} else None)(fake.get("sandboxes", "ret")),
                 what="status reduced to conditions")
    assert condition(s, "Ready")["message"] == "Sandbox has expired"
    assert condition(s, "PodScheduled") is None


def test_adoption_rules(fake, controller):  # noqa: F811
    # An unowned pod named like the sandbox is adopted only when labelled adoptable.
    fake.create("pods", {"metadata": {"name": "adopt", "labels": {"agents.x-k8s.io/adoptable": "true"}},
                         "spec": {"containers": [{"name": "c", "image": "i"}]}})
    fake.create("pods", {"metadata": {"name": "foreign"}, "spec": {"containers": [{"name": "c", "image": "i"}]}})
    controller()
    a = fake.create("sandboxes", sandbox_obj("adopt"))
    fake.create("sandboxes", sandbox_obj("foreign"))
    wait_for(lambda: (fake.get("pods", "adopt")["metadata"].get("ownerReferences") or [{}])[0].get("uid") == a["metadata"]["uid"],
             what="adopted")
    c = wait_for(lambda: (lambda c: c if c and c["reason"] == "ReconcilerError" else None)(ready(fake, "foreign")),
                 what="ReconcilerError")
    assert "cannot adopt unowned pod foreign" in c["message"]
    assert "ownerReferences" not in fake.get("pods", "foreign")["metadata"]


def test_multiple_owned_pods_refuse_to_choose(fake, controller):  # noqa: F811
    sb = fake.create("sandboxes", sandbox_obj("mp"))
    ref = {"apiVersion": "agents.x-k8s.io/v1beta1", "kind": "Sandbox", "name": "mp",
           "uid": sb["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}
    for n in ("mp-a", "mp-b"):
        fake.create("pods", {"metadata": {"name": n, "labels": {HASH: name_hash("mp")}, "ownerReferences": [ref]},
                             "spec": {"containers": [{"name": "c", "image": "i"}]}})
    controller()
    c = wait_for(lambda: ready(fake, "mp"), what="Ready condition")
    assert c["reason"] == "MultiplePods"
    assert c["message"] == "multiple Pods (2) are controlled by this Sandbox; refusing to choose or create a Pod"
    assert fake.get("pods", "mp") is None, "no pod created"
    evs = wait_for(lambda: [e for e in fake.list("events") if e["reason"] == "MultiplePods"], what="event")
    assert len(evs) == 1 and evs[0]["type"] == "Warning" and evs[0]["involvedObject"]["name"] == "mp"
    fake.delete("pods", "mp-b")
    wait_for(lambda: (ready(fake, "mp") or {}).get("reason") == "DependenciesNotReady", what="single pod used")
    assert fake.get("pods", "mp") is None
    assert fake.get("sandboxes", "mp")["metadata"]["annotations"]["agents.x-k8s.io/pod-name"] == "mp-a"


def test_service_ports_sidecars_and_names(fake, controller):  # noqa: F811
    controller()
    sb = sandbox_obj("ports", service=True)
    spec = sb["spec"]["podTemplate"]["spec"]
    spec["containers"][0]["ports"] = [{"containerPort": 9000, "name": "api"},
                                      {"containerPort": 53, "protocol": "UDP"},
                                      {"containerPort": 53}]
    spec["initContainers"] = [
        {"name": "side", "image": "i", "restartPolicy": "Always",
         "ports": [{"containerPort": 7000, "name": "api"}, {"containerPort": 9000, "name": "other"}]},
        {"name": "init", "image": "i", "ports": [{"containerPort": 6000}]}]
    fake.create("sandboxes", sb)
    svc = wait_for(lambda: fake.get("services", "ports"), what="service")
    got = [(p["port"], p["protocol"], p["name"]) for p in svc["spec"]["ports"]]
    assert got == [(53, "TCP", "p-53-tcp"), (53, "UDP", "p-53-udp"), (7000, "TCP", "p-7000-tcp"),
                   (9000, "TCP", "api")]
    # Conditions never accumulate over many reconciles.
    for i in range(5):
        fake.patch("sandboxes", "ports", {"metadata": {"labels": {"n": str(i)}}})
    fake.set_pod_ready("ports")
    wait_for(lambda: (condition(fake.get("sandboxes", "ports"), "Ready") or {}).get("status") == "True", what="ready")
    types = [c["type"] for c in fake.get("sandboxes", "ports")["status"]["conditions"]]
    assert sorted(types) == ["PodScheduled", "Ready", "Suspended"]


def test_cache_label_selectors(fake, controller):  # noqa: F811
    for i in range(3):
        fake.create("pods", {"metadata": {"name": f"unrelated-{i}"}, "spec": {"containers": [{"name": "c", "image": "i"}]}})
    ctl = controller(args=["--cache-label-selectors"])
    fake.create("sandboxes", sandbox_obj("cls"))
    wait_for(lambda: fake.get("pods", "cls"), what="pod")
    fake.set_pod_ready("cls")
    wait_for(lambda: (ready(fake, "cls") or {}).get("status") == "True", what="Ready via filtered watch")
    m = requests.get(f"http://{ctl.addr('metrics')}/metrics").text
    assert 'asb_controller_cache_objects{resource="pods"} 1' in m
