"""SandboxClaim policies on `asb serve` (UPSTREAM.md §2.8): env injection, volumeClaimTemplates
merge, additionalPodMetadata rules, and the API validation of the template/pool/claim fields.
The runtime is off (ASB_RUNTIME=none): these are decisions about objects, not containers."""
import pytest

from asb_apiserver import CORE, EXT, asb, start_asb  # noqa: F401  (fixtures)
from claims_helpers import claim, condition, create, get, pool, template, wait_claim


def tpl_env(asb, name, policy=None, env=None, vct_policy=None, vcts=None):
    body = template(name, env=env)
    if policy:
        body["spec"]["envVarsInjectionPolicy"] = policy
    if vct_policy:
        body["spec"]["volumeClaimTemplatesPolicy"] = vct_policy
    if vcts:
        body["spec"]["volumeClaimTemplates"] = vcts
    create(asb, EXT, "sandboxtemplates", body)
    create(asb, EXT, "sandboxwarmpools", pool(name, name, replicas=0))


def container_env(asb, name):
    sb = get(asb, CORE, "sandboxes", name)
    assert sb, f"no sandbox {name}"
    return sb["spec"]["podTemplate"]["spec"]["containers"][0].get("env")


def vct(name, size="1Gi"):
    return {"metadata": {"name": name}, "spec": {"resources": {"requests": {"storage": size}}}}


@pytest.mark.parametrize("policy,expect", [
    (None, "EnvVarsInjectionRejected"),
    ("Disallowed", "EnvVarsInjectionRejected"),
])
def test_env_disallowed(asb, policy, expect):
    tpl_env(asb, "t", policy)
    create(asb, EXT, "sandboxclaims", claim("c", "t", env=[{"name": "A", "value": "1"}]))
    c = wait_claim(asb, "c", reason=expect)
    assert "not allowed by the template policy" in condition(c)["message"]
    assert get(asb, CORE, "sandboxes", "c") is None


def test_env_allowed_appends_and_refuses_override(asb):
    tpl_env(asb, "t", "Allowed", env=[{"name": "KEEP", "value": "k"}])
    create(asb, EXT, "sandboxclaims", claim("ok", "t", env=[{"name": "NEW", "value": "n"}]))
    wait_claim(asb, "ok", reason="SandboxNotReady")
    assert container_env(asb, "ok") == [{"name": "KEEP", "value": "k"}, {"name": "NEW", "value": "n"}]
    create(asb, EXT, "sandboxclaims", claim("bad", "t", env=[{"name": "KEEP", "value": "x"}]))
    c = wait_claim(asb, "bad", reason="ReconcilerError")
    assert 'override is not allowed by the template policy for variable "KEEP"' in condition(c)["message"]
    create(asb, EXT, "sandboxclaims", claim("nocont", "t", env=[{"name": "Z", "value": "z",
                                                                   "containerName": "ghost"}]))
    c = wait_claim(asb, "nocont", reason="ReconcilerError")
    assert 'target container "ghost" not found' in condition(c)["message"]


def test_env_overrides_replaces_in_place(asb):
    tpl_env(asb, "t", "Overrides", env=[{"name": "A", "value": "old"}, {"name": "B", "value": "b"}])
    create(asb, EXT, "sandboxclaims", claim("c", "t", env=[{"name": "A", "value": "new"},
                                                             {"name": "C", "value": "c"}]))
    wait_claim(asb, "c", reason="SandboxNotReady")
    assert container_env(asb, "c") == [{"name": "A", "value": "new"}, {"name": "B", "value": "b"},
                                       {"name": "C", "value": "c"}]


def test_vct_policies(asb):
    tpl_env(asb, "dis", vcts=[vct("data")])
    create(asb, EXT, "sandboxclaims", claim("c1", "dis", volumeClaimTemplates=[vct("extra")]))
    c = wait_claim(asb, "c1", reason="VolumeClaimTemplatesError")
    assert condition(c)["message"] == "volume claim templates are disallowed by the template"

    tpl_env(asb, "alw", vct_policy="Allowed", vcts=[vct("data")])
    create(asb, EXT, "sandboxclaims", claim("c2", "alw", volumeClaimTemplates=[vct("extra")]))
    wait_claim(asb, "c2", reason="SandboxNotReady")
    names = [v["metadata"]["name"] for v in get(asb, CORE, "sandboxes", "c2")["spec"]["volumeClaimTemplates"]]
    assert names == ["data", "extra"]
    create(asb, EXT, "sandboxclaims", claim("c3", "alw", volumeClaimTemplates=[vct("data", "9Gi")]))
    c = wait_claim(asb, "c3", reason="VolumeClaimTemplatesError")
    assert 'cannot override template volume "data"' in condition(c)["message"]

    tpl_env(asb, "ovr", vct_policy="Overrides", vcts=[vct("data"), vct("logs")])
    create(asb, EXT, "sandboxclaims", claim("c4", "ovr", volumeClaimTemplates=[vct("new"), vct("data", "9Gi")]))
    wait_claim(asb, "c4", reason="SandboxNotReady")
    got = get(asb, CORE, "sandboxes", "c4")["spec"]["volumeClaimTemplates"]
    assert [v["metadata"]["name"] for v in got] == ["data", "logs", "new"]
    assert got[0]["spec"]["resources"]["requests"]["storage"] == "9Gi"


@pytest.mark.parametrize("apm,fragment", [
    ({"labels": {"team": "a"}}, "a domain prefix is required"),
    ({"labels": {"evil.io/team": "a"}}, "not in the allowed label domains"),
    ({"labels": {"app": "sandbox-router"}}, "reserved for the sandbox router"),
    ({"annotations": {"kubernetes.io/x": "1"}}, "is restricted"),
    ({"annotations": {"sub.agents.x-k8s.io/x": "1"}}, "is restricted"),
])
def test_additional_pod_metadata_rejected(asb, apm, fragment):
    tpl_env(asb, "t")
    create(asb, EXT, "sandboxclaims", claim("c", "t", additionalPodMetadata=apm))
    c = wait_claim(asb, "c", reason="InvalidMetadata")
    assert fragment in condition(c)["message"]
    assert condition(c)["status"] == "False"
    assert get(asb, CORE, "sandboxes", "c") is None


def test_additional_pod_metadata_bad_label_value_is_refused_at_admission(asb):
    # Stricter than upstream (which stores the claim and then reports InvalidMetadata).
    r = asb.post(asb.path(EXT, "sandboxclaims"),
                 claim("c", "t", additionalPodMetadata={"labels": {"sandbox.users.io/team": "x" * 64}}))
    assert r.status_code == 422, r.text
    assert r.json()["details"]["causes"][0]["field"] == "spec.additionalPodMetadata.labels"


def test_additional_pod_metadata_accepted_and_merged(asb):
    tpl_env(asb, "t")
    create(asb, EXT, "sandboxclaims", claim("c", "t", additionalPodMetadata={
        "labels": {"team.sandbox.users.io/owner": "me"},
        "annotations": {"cluster-autoscaler.kubernetes.io/safe-to-evict": "false", "note": "hi"}}))
    wait_claim(asb, "c", reason="SandboxNotReady")
    md = get(asb, CORE, "sandboxes", "c")["spec"]["podTemplate"]["metadata"]
    assert md["labels"]["team.sandbox.users.io/owner"] == "me"
    assert md["annotations"] == {"cluster-autoscaler.kubernetes.io/safe-to-evict": "false", "note": "hi"}


def test_custom_label_domain(start_asb):
    a = start_asb(env={"ASB_ALLOWED_LABEL_DOMAINS": "Example.COM, other.org"})
    tpl_env(a, "t")
    create(a, EXT, "sandboxclaims", claim("c", "t", additionalPodMetadata={"labels": {"example.com/x": "1"}}))
    wait_claim(a, "c", reason="SandboxNotReady")
    create(a, EXT, "sandboxclaims", claim("d", "t", additionalPodMetadata={"labels": {"sandbox.users.io/x": "1"}}))
    wait_claim(a, "d", reason="InvalidMetadata")


def test_foreign_sandbox_with_the_claims_name(asb):
    tpl_env(asb, "t")
    asb.create_sandbox("taken")
    create(asb, EXT, "sandboxclaims", claim("taken", "t"))
    c = wait_claim(asb, "taken", reason="ReconcilerError")
    assert 'sandbox "taken" is not controlled by claim "taken"' in condition(c)["message"]


@pytest.mark.parametrize("plural,body,field", [
    ("sandboxtemplates", {"envVarsInjectionPolicy": "Sometimes"}, "spec.envVarsInjectionPolicy"),
    ("sandboxtemplates", {"volumeClaimTemplatesPolicy": "x"}, "spec.volumeClaimTemplatesPolicy"),
    ("sandboxtemplates", {"networkPolicyManagement": "Self"}, "spec.networkPolicyManagement"),
    ("sandboxtemplates", {"networkPolicy": {"ingress": {}}}, "spec.networkPolicy.ingress"),
    ("sandboxtemplates", {"networkPolicy": {"egress": [{"ports": [{"protocol": "ICMP"}]}]}},
     "spec.networkPolicy.egress[0].ports[0].protocol"),
    ("sandboxtemplates", {"networkPolicy": {"ingress": [{"ports": [{"port": 70000}]}]}},
     "spec.networkPolicy.ingress[0].ports[0].port"),
    ("sandboxtemplates", {"networkPolicy": {"egress": [{"to": [{"ipBlock": {"except": []}}]}]}},
     "spec.networkPolicy.egress[0].to[0].ipBlock.cidr"),
    ("sandboxtemplates", {"networkPolicy": {"ingress": [{"from": [{"podSelector": []}]}]}},
     "spec.networkPolicy.ingress[0].from[0].podSelector"),
])
def test_template_field_validation(asb, plural, body, field):
    t = template("v")
    t["spec"].update(body)
    r = asb.post(asb.path(EXT, plural), t)
    assert r.status_code == 422, r.text
    assert any(c["field"] == field for c in r.json()["details"]["causes"]), r.text


@pytest.mark.parametrize("spec,field", [
    ({"replicas": -1}, "spec.replicas"),
    ({"updateStrategy": {"type": "Sideways"}}, "spec.updateStrategy.type"),
])
def test_pool_field_validation(asb, spec, field):
    p = pool("p", "t")
    p["spec"].update(spec)
    r = asb.post(asb.path(EXT, "sandboxwarmpools"), p)
    assert r.status_code == 422, r.text
    assert any(c["field"] == field for c in r.json()["details"]["causes"]), r.text


@pytest.mark.parametrize("spec,field", [
    ({"lifecycle": {"shutdownPolicy": "Never"}}, "spec.lifecycle.shutdownPolicy"),
    ({"lifecycle": {"ttlSecondsAfterFinished": -1}}, "spec.lifecycle.ttlSecondsAfterFinished"),
    ({"lifecycle": {"shutdownTime": "tomorrow"}}, "spec.lifecycle.shutdownTime"),
    ({"env": [{"value": "x"}]}, "spec.env[0].name"),
    ({"additionalPodMetadata": {"labels": {"a": 1}}}, "spec.additionalPodMetadata.labels[a]"),
])
def test_claim_field_validation(asb, spec, field):
    c = claim("c", "p")
    c["spec"].update(spec)
    r = asb.post(asb.path(EXT, "sandboxclaims"), c)
    assert r.status_code == 422, r.text
    assert any(x["field"] == field for x in r.json()["details"]["causes"]), r.text


def test_valid_network_policy_is_stored(asb):
    t = template("np")
    t["spec"]["networkPolicy"] = {
        "ingress": [{"from": [{"podSelector": {"matchLabels": {"app": "x"}}}],
                     "ports": [{"protocol": "TCP", "port": 8080}, {"port": "http"}]}],
        "egress": [{"to": [{"ipBlock": {"cidr": "10.0.0.0/8", "except": ["10.1.0.0/16"]}}],
                    "ports": [{"port": 1000, "endPort": 2000}]}]}
    got = create(asb, EXT, "sandboxtemplates", t)
    assert got["spec"]["networkPolicy"] == t["spec"]["networkPolicy"]


def test_defaults(asb):
    t = create(asb, EXT, "sandboxtemplates", template("d"))
    assert t["spec"]["networkPolicyManagement"] == "Managed"
    assert t["spec"]["envVarsInjectionPolicy"] == "Disallowed"
    assert t["spec"]["volumeClaimTemplatesPolicy"] == "Disallowed"
    p = pool("d", "d")
    del p["spec"]["replicas"]
    p = create(asb, EXT, "sandboxwarmpools", p)
    assert p["spec"]["replicas"] == 1 and p["spec"]["updateStrategy"]["type"] == "OnReplenish"
    c = create(asb, EXT, "sandboxclaims", claim("d", "d", lifecycle={}))
    assert c["spec"]["lifecycle"]["shutdownPolicy"] == "Retain"
    # The template gets its ref-hash label from the controller.
    from claims_helpers import name_hash, wait_for
    wait_for("template label", lambda: (get(asb, EXT, "sandboxtemplates", "d")["metadata"].get("labels") or {})
             .get("agents.x-k8s.io/sandbox-template-ref-hash") == name_hash("d"), 5, asb=asb)
