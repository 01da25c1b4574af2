"""The RBAC of deploy/controller/rbac.yaml is sufficient: the test API server enforces exactly
those rules for the controller's token while a composite scenario runs (sandbox with Service
and PVC, template NetworkPolicy, warm pool, claim adoption and cold path, expiry, leader
election in agent-sandbox-system), and no request is refused. And it is enforced: a rule removed
shows up as 403s."""
import datetime
import os

import yaml

from kube_fixtures import (ROOT, Controller, FakeApi, claim_obj, condition, pool_obj, sandbox_obj,
                           template_obj, wait_for)


def rules():
    out = []
    with open(os.path.join(ROOT, "deploy", "controller", "rbac.yaml")) as f:
        for doc in yaml.safe_load_all(f):
            if doc and doc["kind"] in ("ClusterRole", "Role"):
                ns = doc["metadata"].get("namespace") if doc["kind"] == "Role" else None
                out += [{**r, **({"namespace": ns} if ns else {})} for r in doc["rules"]]
    return out


def forbidden(fake):
    return {k: v for k, v in fake.stats()["stats"].items() if k.startswith("FORBIDDEN")}


def test_deploy_rbac_is_sufficient(tmp_path):
    fake = FakeApi(tmp_path, rbac=rules())
    ctl = Controller(fake, tmp_path, "rbac", ["--leader-elect=true",
                                              "--leader-election-namespace", "agent-sandbox-system"])
    try:
        wait_for(lambda: "successfully acquired lease" in ctl.log_text(), what="lease")
        soon = (datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=3)).strftime("%Y-%m-%dT%H:%M:%SZ")
        sb = sandbox_obj("r1", service=True, volumeClaimTemplates=[{"metadata": {"name": "d"}, "spec": {}}],
                         shutdownTime=soon, shutdownPolicy="Delete")
        fake.create("sandboxes", sb)
        wait_for(lambda: fake.get("services", "r1") and fake.get("persistentvolumeclaims", "d-r1")
                 and fake.get("pods", "r1"), what="children")
        fake.create("sandboxtemplates", template_obj("rt"))
        fake.create("sandboxwarmpools", pool_obj("rp", "rt", replicas=1))
        wait_for(lambda: fake.get("networkpolicies", "rt-network-policy"), what="policy")
        warm = wait_for(lambda: [s for s in fake.list("sandboxes") if s["metadata"]["name"].startswith("rp-")],
                        what="warm member")[0]["metadata"]["name"]
        wait_for(lambda: fake.get("pods", warm), what="warm pod")
        fake.set_pod_ready(warm)
        fake.create("sandboxclaims", claim_obj("rc", "rp"))
        wait_for(lambda: (fake.get("sandboxclaims", "rc").get("status", {}).get("sandbox") or {}).get("name") == warm,
                 what="adoption")
        fake.create("sandboxclaims", claim_obj("rc2", "rp", env=[{"name": "A", "value": "b"}]))
        wait_for(lambda: condition(fake.get("sandboxclaims", "rc2"), "Ready"), what="claim status")
        wait_for(lambda: fake.get("sandboxes", "r1") is None, timeout=15, what="expiry Delete")
        fake.patch("sandboxtemplates", "rt", {"spec": {"networkPolicyManagement": "Unmanaged"}})
        wait_for(lambda: fake.get("networkpolicies", "rt-network-policy") is None, what="policy deleted")
        assert forbidden(fake) == {}
    finally:
        ctl.stop()
        fake.stop()


def test_rbac_is_enforced(tmp_path):
    rs = [r for r in rules() if "sandboxes/status" not in r["resources"]]
    fake = FakeApi(tmp_path, rbac=rs)
    ctl = Controller(fake, tmp_path, "rbac2")
    try:
        fake.create("sandboxes", sandbox_obj("r2"))
        wait_for(lambda: fake.get("pods", "r2"), what="pod")
        wait_for(lambda: forbidden(fake).get("FORBIDDEN patch sandboxes/status", 0) > 0, what="403 on status")
    finally:
        ctl.stop()
        fake.stop()
