"""asb-controller --extensions against the strict test API server: SandboxTemplate ->
NetworkPolicy, SandboxWarmPool replenishment, SandboxClaim adoption / cold path / lifecycle."""
import datetime
import time

from kube_fixtures import (claim_obj, condition, controller, fake, pool_obj,  # noqa: F401
                           template_obj, wait_for)

WARM = "agents.x-k8s.io/warm-pool-sandbox"


def name_hash(s):
    h = 0x811C9DC5
    for b in s.encode():
        h ^= b
        h = (h * 0x01000193) & 0xFFFFFFFF
    return f"{h:08x}"


def members(fake, pool):  # noqa: F811
    return [s for s in fake.list("sandboxes", selector=f"{WARM}={name_hash(pool)}")
            if not s["metadata"].get("deletionTimestamp")]


def make_ready(fake, names):  # noqa: F811
    for i, n in enumerate(names):
        wait_for(lambda: fake.get("pods", n), what=f"pod {n}")
        fake.set_pod_ready(n, ip=f"10.9.0.{i + 1}")


def test_template_secure_default_network_policy(fake, controller):  # noqa: F811
    controller()
    t = fake.create("sandboxtemplates", template_obj("tp"))
    np = wait_for(lambda: fake.get("networkpolicies", "tp-network-policy"), what="network policy")
    assert np["metadata"]["ownerReferences"][0]["uid"] == t["metadata"]["uid"]
    spec = np["spec"]
    assert spec["podSelector"] == {"matchLabels": {"agents.x-k8s.io/sandbox-template-ref-hash": name_hash("tp")}}
    assert spec["policyTypes"] == ["Ingress", "Egress"]
    peer = spec["ingress"][0]["from"][0]
    assert peer["namespaceSelector"]["matchLabels"] == {"kubernetes.io/metadata.name": "agent-sandbox-system"}
    assert peer["podSelector"]["matchLabels"] == {"app": "sandbox-router"}
    cidrs = [p["ipBlock"]["cidr"] for p in spec["egress"][0]["to"]]
    assert cidrs == ["0.0.0.0/0", "::/0"]
    wait_for(lambda: fake.get("sandboxtemplates", "tp")["metadata"].get("labels", {}).get(
        "agents.x-k8s.io/sandbox-template-ref-hash") == name_hash("tp"), what="template label")
    # Custom policy replaces it; Unmanaged deletes it.
    fake.patch("sandboxtemplates", "tp", {"spec": {"networkPolicy": {"ingress": [], "egress": [
        {"to": [{"ipBlock": {"cidr": "10.1.0.0/16"}}]}]}}})
    wait_for(lambda: fake.get("networkpolicies", "tp-network-policy")["spec"].get("egress") ==
             [{"to": [{"ipBlock": {"cidr": "10.1.0.0/16"}}]}], what="custom policy")
    fake.patch("sandboxtemplates", "tp", {"spec": {"networkPolicyManagement": "Unmanaged"}})
    wait_for(lambda: fake.get("networkpolicies", "tp-network-policy") is None, what="policy deleted")


def test_template_refuses_foreign_policy(fake, controller):  # noqa: F811
    fake.create("networkpolicies", {"metadata": {"name": "fx-network-policy"}, "spec": {"podSelector": {}}})
    ctl = controller()
    fake.create("sandboxtemplates", template_obj("fx"))
    wait_for(lambda: "refusing to update NetworkPolicy" in ctl.log_text(), what="refusal logged")
    assert fake.get("networkpolicies", "fx-network-policy")["spec"] == {"podSelector": {}}


def test_warm_pool_replenish_and_scale_down(fake, controller):  # noqa: F811
    controller()
    fake.create("sandboxtemplates", template_obj("t1"))
    fake.create("sandboxwarmpools", pool_obj("p1", "t1", replicas=3))
    wait_for(lambda: len(members(fake, "p1")) == 3, what="3 warm sandboxes")
    time.sleep(0.5)
    ms = members(fake, "p1")
    assert len(ms) == 3, "no over-creation"
    for s in ms:
        assert s["metadata"]["name"].startswith("p1-")
        assert s["metadata"]["ownerReferences"][0]["kind"] == "SandboxWarmPool"
        assert s["metadata"]["labels"]["agents.x-k8s.io/launch-type"] == "warm"
        pod_spec = s["spec"]["podTemplate"]["spec"]
        assert pod_spec["automountServiceAccountToken"] is False
        assert pod_spec["dnsPolicy"] == "None"
    make_ready(fake, [s["metadata"]["name"] for s in ms])
    wait_for(lambda: fake.get("sandboxwarmpools", "p1").get("status", {}).get("readyReplicas") == 3,
             what="readyReplicas 3")
    st = fake.get("sandboxwarmpools", "p1")["status"]
    assert st["replicas"] == 3 and st["selector"] == f"{WARM}={name_hash('p1')}"
    # Warm pods carry the pool label and safe-to-evict.
    pod = fake.get("pods", ms[0]["metadata"]["name"])
    assert pod["metadata"]["labels"][WARM] == name_hash("p1")
    # A member deleted by someone is replaced.
    fake.delete("sandboxes", ms[0]["metadata"]["name"])
    wait_for(lambda: len(members(fake, "p1")) == 3 and ms[0]["metadata"]["name"] not in
             [m["metadata"]["name"] for m in members(fake, "p1")], what="replacement")
    # Scale down to 1 removes the not-Ready newcomer first.
    fake.patch("sandboxwarmpools", "p1", {"spec": {"replicas": 1}})
    wait_for(lambda: len(members(fake, "p1")) == 1, what="scaled down")
    time.sleep(0.5)
    left = members(fake, "p1")
    assert len(left) == 1 and condition(left[0], "Ready")["status"] == "True"
    stats = fake.stats()["stats"]
    assert stats.get("POST sandboxes", 0) == 4, stats


def test_claim_adopts_warm_sandbox_then_cold(fake, controller):  # noqa: F811
    controller()
    fake.create("sandboxtemplates", template_obj("t2"))
    fake.create("sandboxwarmpools", pool_obj("p2", "t2", replicas=1))
    wait_for(lambda: len(members(fake, "p2")) == 1, what="warm member")
    warm = members(fake, "p2")[0]["metadata"]["name"]
    make_ready(fake, [warm])
    wait_for(lambda: condition(fake.get("sandboxes", warm), "Ready")["status"] == "True", what="warm ready")
    c = fake.create("sandboxclaims", claim_obj("c1", "p2"))
    def bound(name):
        cl = fake.get("sandboxclaims", name)
        return cl if (cl.get("status", {}).get("sandbox") or {}).get("name") else None
    cl = wait_for(lambda: bound("c1"), what="claim bound")
    assert cl["status"]["sandbox"]["name"] == warm
    assert cl["metadata"]["annotations"]["agents.x-k8s.io/sandbox-name"] == warm
    sb = fake.get("sandboxes", warm)
    assert sb["metadata"]["ownerReferences"] == [{"apiVersion": "extensions.agents.x-k8s.io/v1beta1",
                                                  "kind": "SandboxClaim", "name": "c1",
                                                  "uid": c["metadata"]["uid"], "controller": True,
                                                  "blockOwnerDeletion": True}]
    assert WARM not in sb["metadata"]["labels"]
    assert sb["metadata"]["labels"]["agents.x-k8s.io/launch-type"] == "warm"
    evs = wait_for(lambda: [e for e in fake.list("events") if e["reason"] == "SandboxAdopted"], what="event")
    assert evs[0]["involvedObject"]["name"] == "c1" and evs[0]["involvedObject"]["kind"] == "SandboxClaim"
    assert evs[0]["type"] == "Normal" and warm in evs[0]["message"]
    # The pod is not restarted; its pool label goes away.
    wait_for(lambda: WARM not in fake.get("pods", warm)["metadata"]["labels"], what="pod relabelled")
    wait_for(lambda: (condition(fake.get("sandboxclaims", "c1"), "Ready") or {}).get("status") == "True",
             what="claim Ready")
    # The pool replenishes; a second claim while the new member is not networked goes cold
    # after the grace.
    wait_for(lambda: len(members(fake, "p2")) == 1, what="replenished")
    fake.create("sandboxclaims", claim_obj("c2", "p2"))
    cl2 = wait_for(lambda: bound("c2"), timeout=15, what="claim c2 bound")
    assert cl2["status"]["sandbox"]["name"] == "c2"
    sb2 = fake.get("sandboxes", "c2")
    assert sb2["metadata"]["labels"]["agents.x-k8s.io/launch-type"] == "cold"
    assert sb2["metadata"]["ownerReferences"][0]["kind"] == "SandboxClaim"
    assert sb2["spec"]["podTemplate"]["spec"]["automountServiceAccountToken"] is False
    wait_for(lambda: fake.get("pods", "c2"), what="cold pod")


def test_claim_pool_not_found_and_lifecycle(fake, controller):  # noqa: F811
    controller()
    fake.create("sandboxclaims", claim_obj("lost", "nope"))
    c = wait_for(lambda: condition(fake.get("sandboxclaims", "lost"), "Ready"), what="condition")
    assert c["reason"] == "WarmPoolNotFound"
    fake.create("sandboxtemplates", template_obj("t3"))
    fake.create("sandboxwarmpools", pool_obj("p3", "t3", replicas=0))
    soon = (datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=2)).strftime("%Y-%m-%dT%H:%M:%SZ")
    fake.create("sandboxclaims", claim_obj("life", "p3", lifecycle={"shutdownTime": soon, "shutdownPolicy": "Delete"}))
    # The sandbox may already be gone again when a loaded machine polls: count creates.
    wait_for(lambda: fake.stats()["stats"].get("POST sandboxes", 0) >= 1, what="cold sandbox")
    wait_for(lambda: fake.get("sandboxclaims", "life") is None, timeout=10, what="claim deleted at expiry")
    wait_for(lambda: fake.get("sandboxes", "life") is None, what="sandbox garbage-collected")
    assert fake.get("pods", "life") is None


def _soon(seconds=3):
    return (datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


def test_claim_lifecycle_retain_and_foreground(fake, controller):  # noqa: F811
    controller()
    fake.create("sandboxtemplates", template_obj("t4"))
    fake.create("sandboxwarmpools", pool_obj("p4", "t4", replicas=0))
    fake.create("sandboxclaims", claim_obj("keep", "p4", lifecycle={"shutdownTime": _soon(), "shutdownPolicy": "Retain"}))
    fake.create("sandboxclaims", claim_obj("fg", "p4", lifecycle={"shutdownTime": _soon(), "shutdownPolicy": "DeleteForeground"}))
    wait_for(lambda: fake.stats()["stats"].get("POST sandboxes", 0) >= 2, what="cold sandboxes")
    # Retain: the claim stays, expired; its sandbox is deleted.
    c = wait_for(lambda: (lambda c: c if c and c["reason"] == "ClaimExpired" else None)(
        condition(fake.get("sandboxclaims", "keep"), "Ready")), timeout=10, what="ClaimExpired")
    assert c["status"] == "False"
    wait_for(lambda: fake.get("sandboxes", "keep") is None, what="retained claim's sandbox deleted")
    assert fake.get("sandboxclaims", "keep") is not None
    # DeleteForeground: the claim goes after its sandbox and pod.
    wait_for(lambda: fake.get("sandboxclaims", "fg") is None, timeout=10, what="foreground deletion done")
    assert fake.get("sandboxes", "fg") is None and fake.get("pods", "fg") is None


def test_claim_metrics(fake, controller):  # noqa: F811
    import requests
    ctl = controller()
    fake.create("sandboxtemplates", template_obj("tm"))
    fake.create("sandboxwarmpools", pool_obj("pm", "tm", replicas=0))
    c = claim_obj("cm", "pm")
    c["metadata"]["labels"] = {"agents.x-k8s.io/created-by": "python-client"}
    fake.create("sandboxclaims", c)
    wait_for(lambda: fake.get("sandboxes", "cm"), what="cold sandbox")
    m = wait_for(lambda: (lambda t: t if "agent_sandbox_claim_creation_total{" in t else None)(
        requests.get(f"http://{ctl.addr('metrics')}/metrics").text), what="claim metric")
    assert ('agent_sandbox_claim_creation_total{namespace="default",sandbox_template="tm",launch_type="cold",'
            'warmpool_name="pm",pod_condition="not_ready",created_by="python-client"} 1') in m
