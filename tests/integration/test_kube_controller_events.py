"""asb-controller records what it does as core/v1 Events on a cluster (issue 17): warm pool
creations, pod creation for a Sandbox, expiry; against the strict test API server."""
import datetime

from kube_fixtures import controller, fake, pool_obj, template_obj, wait_for  # noqa: F401


def reasons(fake, kind, name):  # noqa: F811
    return [e for e in fake.list("events")
            if e["involvedObject"]["kind"] == kind and e["involvedObject"]["name"] == name]


def test_pool_creations_and_pods_are_events(fake, controller):  # noqa: F811
    controller()
    fake.create("sandboxtemplates", template_obj("te"))
    pool = fake.create("sandboxwarmpools", pool_obj("pe", "te", replicas=2))
    evs = wait_for(lambda: [e for e in reasons(fake, "SandboxWarmPool", "pe")
                            if e["reason"] == "SuccessfulCreate"][:2]
                   if len(reasons(fake, "SandboxWarmPool", "pe")) >= 2 else None,
                   what="two SuccessfulCreate events")
    for e in evs:
        assert e["type"] == "Normal"
        assert e["involvedObject"]["apiVersion"] == "extensions.agents.x-k8s.io/v1beta1"
        assert e["involvedObject"]["uid"] == pool["metadata"]["uid"]
        assert e["message"].startswith("created warm sandbox pe-")
        assert e["source"]["component"] == "agent-sandbox-controller"
    member = evs[0]["message"].rsplit(" ", 1)[1]
    created = wait_for(lambda: [e for e in reasons(fake, "Sandbox", member) if e["reason"] == "Created"],
                       what="pod Created event")
    assert created[0]["message"] == f"created pod {member}"


def test_expiry_is_an_event(fake, controller):  # noqa: F811
    controller()
    past = (datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(seconds=5)).strftime(
        "%Y-%m-%dT%H:%M:%SZ")
    fake.create("sandboxes", {
        "apiVersion": "agents.x-k8s.io/v1beta1", "kind": "Sandbox", "metadata": {"name": "old"},
        "spec": {"podTemplate": {"spec": {"containers": [{"name": "main", "image": "busybox"}]}},
                 "shutdownTime": past, "shutdownPolicy": "Retain"}})
    evs = wait_for(lambda: [e for e in reasons(fake, "Sandbox", "old") if e["reason"] == "Expired"],
                   what="Expired event")
    assert evs[0]["type"] == "Normal" and "shutdownTime" in evs[0]["message"]


def test_failed_pod_create_is_a_warning_with_its_reason(tmp_path):
    """A Pod the controller may not create (RBAC without `create pods`): a Warning event on the
    Sandbox, reason FailedCreate, its message saying which pod and why; the Sandbox's status
    says it too."""
    from kube_fixtures import Controller, FakeApi, sandbox_obj
    from test_kube_controller_rbac import rules
    rs = []
    for r in rules():
        if "pods" in r["resources"] and "create" in r["verbs"]:
            rs.append({**r, "resources": ["pods"], "verbs": [v for v in r["verbs"] if v != "create"]})
            rest = [x for x in r["resources"] if x != "pods"]
            if rest:
                rs.append({**r, "resources": rest})
        else:
            rs.append(r)
    fake = FakeApi(tmp_path, rbac=rs)
    ctl = Controller(fake, tmp_path, "noperm")
    try:
        fake.create("sandboxes", sandbox_obj("nope"))
        evs = wait_for(lambda: [e for e in reasons(fake, "Sandbox", "nope")
                                if e["reason"] == "FailedCreate"], what="FailedCreate event")
        assert evs[0]["type"] == "Warning", evs
        assert evs[0]["message"].startswith("cannot create pod nope: "), evs
        assert evs[0]["source"]["component"] == "agent-sandbox-controller"
        assert fake.get("pods", "nope") is None
    finally:
        ctl.stop()
        fake.stop()
