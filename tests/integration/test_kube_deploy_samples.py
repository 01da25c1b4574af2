"""The sample manifests of deploy/samples go through asb-controller against the test API server:
both templates get their NetworkPolicy, the sample pool fills with warm sandboxes whose pods run
sandboxd with the /v1/health readiness probe, and a claim binds one of them."""
import os

import yaml

from kube_fixtures import ROOT, claim_obj, controller, fake, wait_for  # noqa: F401

PLURAL = {"SandboxTemplate": "sandboxtemplates", "SandboxWarmPool": "sandboxwarmpools"}


def test_samples_reconcile(fake, controller):  # noqa: F811
    controller()
    d = os.path.join(ROOT, "deploy", "samples")
    templates = []
    for f in sorted(os.listdir(d)):
        for doc in yaml.safe_load_all(open(os.path.join(d, f))):
            if not doc:
                continue
            if doc["kind"] == "SandboxTemplate":
                templates.append(doc["metadata"]["name"])
    # Templates first, then the pool (the order `kubectl apply -k` uses for these kinds).
    for kind in ("SandboxTemplate", "SandboxWarmPool"):
        for f in sorted(os.listdir(d)):
            for doc in yaml.safe_load_all(open(os.path.join(d, f))):
                if doc and doc["kind"] == kind:
                    fake.create(PLURAL[kind], doc, ns=doc["metadata"].get("namespace", "default"))
    assert len(templates) == 2
    for t in templates:
        wait_for(lambda: fake.get("networkpolicies", f"{t}-network-policy"), what=f"policy of {t}")
    members = wait_for(lambda: (lambda m: m if len(m) == 2 else None)(
        [s for s in fake.list("sandboxes") if s["metadata"]["name"].startswith("sandboxd-pool-")]),
        what="2 warm sandboxes")
    for m in members:
        pod = wait_for(lambda: fake.get("pods", m["metadata"]["name"]), what="warm pod")
        (ctr,) = pod["spec"]["containers"]
        assert ctr["readinessProbe"]["httpGet"] == {"path": "/v1/health", "port": 8080}
        assert ctr["image"].endswith("/sandboxd:0.1.0")
        assert pod["spec"]["automountServiceAccountToken"] is False
    for i, m in enumerate(members):
        fake.set_pod_ready(m["metadata"]["name"], ip=f"10.7.0.{i + 1}")
    fake.create("sandboxclaims", claim_obj("sample-claim", "sandboxd-pool"))
    bound = wait_for(lambda: (fake.get("sandboxclaims", "sample-claim").get("status", {}).get("sandbox") or {}).get("name"),
                     what="claim bound")
    assert bound in [m["metadata"]["name"] for m in members]
