"""deploy/crds is what the kind tables of src/api generate (asb-gen-crds, expanded by
scripts/gen-crds.py with the pinned Kubernetes schemas of tools/k8s-openapi): a CRD edited by hand,
or a table changed without regenerating, fails here. The expanded core types are strict: what a
cluster would reject in a pod spec, a PVC spec or a NetworkPolicy rule is rejected by the schema,
and the volumeClaimTemplates immutability rule says what asb serve says."""
import json
import os
import shutil
import subprocess

import pytest

from conftest import BUILD, ROOT
from test_kube_manifests import ajv, crd_schemas, deploy_objects

GEN = os.path.join(BUILD, "bin", "asb-gen-crds")
SCRIPT = os.path.join(ROOT, "scripts", "gen-crds.py")


def gen_crds(*args):
    if not os.path.isdir(os.path.join(ROOT, "tools", "k8s-openapi", "node_modules", "kubernetes-models")):
        pytest.fail("tools/k8s-openapi/node_modules missing: run `make deps`")
    return subprocess.run(["/usr/bin/python3", SCRIPT, "--gen", GEN, *args], capture_output=True, text=True)


def test_deploy_crds_are_what_the_tables_generate():
    r = gen_crds("--check")
    assert r.returncode == 0, r.stderr


def test_check_fails_on_a_crd_that_differs(tmp_path):
    d = tmp_path / "crds"
    shutil.copytree(os.path.join(ROOT, "deploy", "crds"), d)
    assert gen_crds("--check", "--dir", str(d)).returncode == 0
    f = d / "extensions.agents.x-k8s.io_sandboxwarmpools.yaml"
    f.write_text(f.read_text().replace('"OnReplenish"', '"Recreate"', 1))
    r = gen_crds("--check", "--dir", str(d))
    assert r.returncode == 1
    assert "extensions.agents.x-k8s.io_sandboxwarmpools.yaml" in r.stderr
    (d / "stray.yaml").write_text("{}\n")
    f.unlink()
    r = gen_crds("--check", "--dir", str(d))
    assert r.returncode == 1 and "stray.yaml" in r.stderr and "sandboxwarmpools" in r.stderr


def test_generator_marks_only_kubernetes_types():
    plain = json.loads(subprocess.run([GEN], check=True, capture_output=True, text=True).stdout)
    marked = json.loads(subprocess.run([GEN, "--k8s-refs"], check=True, capture_output=True, text=True).stdout)
    assert sorted(plain) == sorted(marked) == [
        "agents.x-k8s.io_sandboxes", "extensions.agents.x-k8s.io_sandboxclaims",
        "extensions.agents.x-k8s.io_sandboxsnapshots", "extensions.agents.x-k8s.io_sandboxtemplates",
        "extensions.agents.x-k8s.io_sandboxwarmpools"]
    assert "x-asb-k8s-type" not in json.dumps(plain)
    spec = marked["extensions.agents.x-k8s.io_sandboxtemplates"]["spec"]["versions"][0]["schema"][
        "openAPIV3Schema"]["properties"]["spec"]["properties"]
    assert spec["podTemplate"]["properties"]["spec"]["x-asb-k8s-type"] == "io.k8s.api.core.v1.PodSpec"
    assert spec["volumeClaimTemplates"]["items"]["properties"]["spec"]["x-asb-k8s-type"] == \
        "io.k8s.api.core.v1.PersistentVolumeClaimSpec"
    assert spec["networkPolicy"]["properties"]["egress"]["items"]["x-asb-k8s-type"] == \
        "io.k8s.api.networking.v1.NetworkPolicyEgressRule"
    assert subprocess.run([GEN, "--bogus"], capture_output=True).returncode == 2


def _crd(kind):
    (c,) = [o for o in deploy_objects() if o["kind"] == "CustomResourceDefinition"
            and o["spec"]["names"]["kind"] == kind]
    return c["spec"]["versions"][0]["schema"]["openAPIV3Schema"]


def test_core_types_are_expanded_without_preserving_unknown_fields():
    for kind in ("Sandbox", "SandboxTemplate"):
        pod = _crd(kind)["properties"]["spec"]["properties"]["podTemplate"]["properties"]["spec"]
        assert "x-kubernetes-preserve-unknown-fields" not in pod
        assert pod["required"] == ["containers"]
        container = pod["properties"]["containers"]["items"]
        assert container["required"] == ["name"]
        assert container["properties"]["resources"]["properties"]["limits"]["additionalProperties"][
            "x-kubernetes-int-or-string"] is True
    tmpl = _crd("SandboxTemplate")["properties"]["spec"]["properties"]
    ingress = tmpl["networkPolicy"]["properties"]["ingress"]["items"]
    assert ingress["properties"]["ports"]["items"]["properties"]["protocol"]["enum"] == ["SCTP", "TCP", "UDP"]
    claim = _crd("SandboxClaim")["properties"]["spec"]["properties"]
    pvc = claim["volumeClaimTemplates"]["items"]["properties"]["spec"]
    assert pvc["properties"]["accessModes"]["type"] == "array"
    text = json.dumps([_crd(k) for k in ("Sandbox", "SandboxTemplate", "SandboxClaim")])
    for forbidden in ('"$ref"', '"nullable"', '"oneOf"', '"description": "core/v1'):
        assert forbidden not in text


def test_volume_claim_templates_immutability_rule_matches_asb_serve():
    spec = _crd("Sandbox")["properties"]["spec"]
    (rule,) = spec["x-kubernetes-validations"]
    assert rule["message"] == "volumeClaimTemplates is immutable"  # asb serve's message (api-validate.c)
    assert rule["fieldPath"] == ".volumeClaimTemplates"
    assert "oldSelf.volumeClaimTemplates" in rule["rule"] and "has(oldSelf.volumeClaimTemplates)" in rule["rule"]
    # Only the Sandbox's are immutable, as in asb serve.
    assert "x-kubernetes-validations" not in _crd("SandboxClaim")["properties"]["spec"]


POD = {"containers": [{"name": "c", "image": "img", "resources": {"limits": {"cpu": "500m", "memory": 1024}},
                       "ports": [{"containerPort": 8080, "name": "http"}]}]}


def _template(pod=None, **spec):
    return {"apiVersion": "extensions.agents.x-k8s.io/v1beta1", "kind": "SandboxTemplate",
            "metadata": {"name": "t"}, "spec": {"podTemplate": {"spec": pod or POD}, **spec}}


def test_strict_schemas_reject_what_a_cluster_would():
    schemas = crd_schemas(deploy_objects())
    good = [
        _template(),
        _template(networkPolicy={"egress": [{"to": [{"ipBlock": {"cidr": "10.0.0.0/8"}}],
                                             "ports": [{"port": "dns", "protocol": "UDP"}, {"port": 443}]}]}),
        _template(volumeClaimTemplates=[{"metadata": {"name": "w"}, "spec": {
            "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}]),
    ]
    res = ajv(schemas, good)
    assert [r["errors"] for r in res] == [[], [], []]
    bad = [
        _template({"containers": [{"name": "c", "image": "img", "ports": [{"containerPort": "eighty"}]}]}),
        _template({"initContainers": [{"name": "i", "image": "img"}]}),  # containers is required
        _template({"containers": [{"name": "c", "image": "img", "resources": {"limits": {"cpu": "lots"}}}]}),
        _template(networkPolicy={"ingress": [{"ports": [{"protocol": "ICMP"}]}]}),
        _template(networkPolicy={"egress": [{"to": [{"ipBlock": {"except": ["10.0.0.0/24"]}}]}]}),
        _template(volumeClaimTemplates=[{"metadata": {"name": "w"}, "spec": {"accessModes": "ReadWriteOnce"}}]),
    ]
    res = ajv(schemas, bad)
    assert [r["valid"] for r in res] == [False] * len(bad), res
