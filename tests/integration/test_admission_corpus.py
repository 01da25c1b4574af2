"""Admission says no at the door (issue 31): a corpus of bad manifests of every kind (typos at every
depth, wrong types, bad quantities and date-times, out-of-range numbers, missing required fields)
fed to a real `asb serve`, each with the exact Warning or 422 text it must get and a check that
nothing bad was stored; the same corpus against the generated CRDs (deploy/crds, validated with
ajv), since admission and the CRDs have one schema. Rows marked `pod_rule` are a Pod's rules that
kube-apiserver applies to Pods but a CRD schema cannot say (asb serve checks them too)."""
import copy
import json

import pytest

from asb_apiserver import CORE, EXT, V, asb, start_asb  # noqa: F401 (fixtures)
from asb_cli import run
from test_kube_manifests import ajv, crd_schemas, deploy_objects

POD = {"containers": [{"name": "main", "image": "host"}]}
BASE = {
    "Sandbox": (CORE, "sandboxes", {"podTemplate": {"spec": POD}}),
    "SandboxTemplate": (EXT, "sandboxtemplates", {"podTemplate": {"spec": POD}}),
    "SandboxWarmPool": (EXT, "sandboxwarmpools", {"replicas": 1, "sandboxTemplateRef": {"name": "t"}}),
    "SandboxClaim": (EXT, "sandboxclaims", {"warmPoolRef": {"name": "p"}}),
    "SandboxSnapshot": (EXT, "sandboxsnapshots", {"sandboxRef": {"name": "s"}}),
}
C0 = "spec.podTemplate.spec.containers[0]"
QUANTITY = r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
DNS = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"


def manifest(kind, name):
    group, _, spec = BASE[kind]
    return {"apiVersion": f"{group}/{V}", "kind": kind, "metadata": {"name": name},
            "spec": copy.deepcopy(spec)}


def at(obj, path):
    """The container of the last component of a dotted path with [i] indices, and that key."""
    parts = path.replace("[", ".[").split(".")
    node = obj
    for p in parts[:-1]:
        if p.startswith("["):
            node = node[int(p[1:-1])]
        else:
            node = node.setdefault(p, {})
    last = parts[-1]
    return node, (int(last[1:-1]) if last.startswith("[") else last)


def put(path, value):
    def mutate(obj):
        node, key = at(obj, path)
        node[key] = value
    return mutate


def drop(path):
    def mutate(obj):
        node, key = at(obj, path)
        del node[key]
    return mutate


def type_error(path, want, got):
    return f'{path}: Invalid value: "{got}": {path} in body must be of type {want}: "{got}"'


# (id, kind, mutation, errors (422) or None, unknown fields (Warning) or None, pod_rule)
CORPUS = [
    ("deep-typo", "Sandbox", put(f"{C0}.resorces", {"limits": {"memory": "1Gi"}}), None,
     [f"{C0}.resorces"], False),
    ("top-typo", "Sandbox", lambda o: o["spec"].update(podTemplat=o["spec"].pop("podTemplate")),
     ["spec.podTemplate: Required value"], ["spec.podTemplat"], False),
    ("image-type", "Sandbox", put(f"{C0}.image", 5), [type_error(f"{C0}.image", "string", "integer")],
     None, False),
    ("memory-lots", "Sandbox", put(f"{C0}.resources", {"limits": {"memory": "lots"}}),
     [f'{C0}.resources.limits.memory: Invalid value: "lots": {C0}.resources.limits.memory in body '
      f"should match '{QUANTITY}'"], None, False),
    ("cpu-float", "Sandbox", put(f"{C0}.resources", {"requests": {"cpu": 0.5}}),
     [type_error(f"{C0}.resources.requests.cpu", "integer,string", "number")], None, False),
    ("cpu-negative", "Sandbox", put(f"{C0}.resources", {"limits": {"cpu": "-1"}}),
     [f'{C0}.resources.limits.cpu: Invalid value: "-1": must be greater than or equal to 0'], None,
     True),
    ("pull-policy", "Sandbox", put(f"{C0}.imagePullPolicy", "Sometimes"),
     [f'{C0}.imagePullPolicy: Unsupported value: "Sometimes": supported values: "Always", '
      '"IfNotPresent", "Never"'], None, False),
    ("no-containers", "Sandbox", drop("spec.podTemplate.spec.containers"),
     ["spec.podTemplate.spec.containers: Required value"], None, False),
    ("no-container-name", "Sandbox", drop(f"{C0}.name"), [f"{C0}.name: Required value"], None,
     False),
    ("port-type", "Sandbox", put(f"{C0}.ports", [{"containerPort": "eighty"}]),
     [type_error(f"{C0}.ports[0].containerPort", "integer", "string")], None, False),
    ("run-as-user", "Sandbox", put("spec.podTemplate.spec.securityContext", {"runAsUser": "root"}),
     [type_error("spec.podTemplate.spec.securityContext.runAsUser", "integer", "string")], None,
     False),
    ("toleration", "Sandbox", put("spec.podTemplate.spec.tolerations", [{"tolerationSeconds": "5"}]),
     [type_error("spec.podTemplate.spec.tolerations[0].tolerationSeconds", "integer", "string")],
     None, False),
    ("env-no-name", "Sandbox", put(f"{C0}.env", [{"value": "v"}]), [f"{C0}.env[0].name: Required value"],
     None, False),
    ("shutdown-time", "Sandbox", put("spec.shutdownTime", "tomorrow"),
     ['spec.shutdownTime: Invalid value: "tomorrow": spec.shutdownTime in body must be of type '
      'date-time: "tomorrow"'], None, False),
    ("shutdown-policy", "Sandbox", put("spec.shutdownPolicy", "Later"),
     ['spec.shutdownPolicy: Unsupported value: "Later": supported values: "Delete", "Retain"'],
     None, False),
    ("mode-type", "Sandbox", put("spec.operatingMode", 1),
     [type_error("spec.operatingMode", "string", "integer")], None, False),
    ("subpath-escape", "Sandbox",
     lambda o: (o["spec"].update(volumeClaimTemplates=[{"metadata": {"name": "data"}}]),
                put(f"{C0}.volumeMounts", [{"name": "data", "mountPath": "/d", "subPath": "../x"}])(o)),
     [f'{C0}.volumeMounts[0].subPath: Invalid value: "../x": must be a relative path without '
      "empty, '.' or '..' components"], None, True),
    ("working-dir", "Sandbox", put(f"{C0}.workingDir", "work"),
     [f'{C0}.workingDir: Invalid value: "work": must be an absolute path'], None, True),
    ("empty-program", "Sandbox", put(f"{C0}.command", ["", "x"]),
     [f'{C0}.command[0]: Invalid value: "": the program name may not be empty'], None, True),
    ("mount-unknown-volume", "Sandbox", put(f"{C0}.volumeMounts", [{"name": "nope", "mountPath": "/d"}]),
     [f'{C0}.volumeMounts[0].name: Not found: "nope"'], None, True),
    ("pvc-access-modes", "Sandbox",
     put("spec.volumeClaimTemplates", [{"metadata": {"name": "v"}, "spec": {"accessModes": "ReadWriteOnce"}}]),
     [type_error("spec.volumeClaimTemplates[0].spec.accessModes", "array", "string")], None, False),
    ("pvc-typo", "Sandbox",
     put("spec.volumeClaimTemplates", [{"metadata": {"name": "v"}, "spec": {"storageClass": "x"}}]),
     None, ["spec.volumeClaimTemplates[0].spec.storageClass"], False),
    ("np-protocol", "SandboxTemplate",
     put("spec.networkPolicy", {"ingress": [{"ports": [{"protocol": "ICMP"}]}]}),
     ['spec.networkPolicy.ingress[0].ports[0].protocol: Unsupported value: "ICMP": supported '
      'values: "SCTP", "TCP", "UDP"'], None, False),
    ("np-cidr", "SandboxTemplate",
     put("spec.networkPolicy", {"egress": [{"to": [{"ipBlock": {"except": ["10.0.0.0/24"]}}]}]}),
     ["spec.networkPolicy.egress[0].to[0].ipBlock.cidr: Required value"], None, False),
    ("np-typo", "SandboxTemplate", put("spec.networkPolicy", {"egress": [{"too": []}]}), None,
     ["spec.networkPolicy.egress[0].too"], False),
    ("np-management", "SandboxTemplate", put("spec.networkPolicyManagement", "Sometimes"),
     ['spec.networkPolicyManagement: Unsupported value: "Sometimes": supported values: "Managed", '
      '"Unmanaged"'], None, False),
    ("template-init-type", "SandboxTemplate",
     put("spec.podTemplate.spec.initContainers", [{"name": "i", "image": "host", "args": "x"}]),
     [type_error("spec.podTemplate.spec.initContainers[0].args", "array", "string")], None, False),
    ("replicas-negative", "SandboxWarmPool", put("spec.replicas", -1),
     ["spec.replicas: Invalid value: -1: spec.replicas in body should be greater than or equal to 0"],
     None, False),
    ("replicas-type", "SandboxWarmPool", put("spec.replicas", "3"),
     [type_error("spec.replicas", "integer", "string")], None, False),
    ("template-ref-name", "SandboxWarmPool", put("spec.sandboxTemplateRef.name", "Bad Name"),
     ['spec.sandboxTemplateRef.name: Invalid value: "Bad Name": spec.sandboxTemplateRef.name in '
      f"body should match '{DNS}'"], None, False),
    ("template-ref-missing", "SandboxWarmPool", drop("spec.sandboxTemplateRef"),
     ["spec.sandboxTemplateRef: Required value"], None, False),
    ("strategy", "SandboxWarmPool", put("spec.updateStrategy", {"type": "Never"}),
     ['spec.updateStrategy.type: Unsupported value: "Never": supported values: "Recreate", '
      '"OnReplenish"'], None, False),
    ("pool-typo", "SandboxWarmPool", put("spec.updateStrategy", {"typ": "Recreate"}), None,
     ["spec.updateStrategy.typ"], False),
    ("pool-ref-empty", "SandboxClaim", put("spec.warmPoolRef.name", ""),
     ["spec.warmPoolRef.name: Required value"], None, False),
    ("ttl-negative", "SandboxClaim", put("spec.lifecycle", {"ttlSecondsAfterFinished": -5}),
     ["spec.lifecycle.ttlSecondsAfterFinished: Invalid value: -5: spec.lifecycle."
      "ttlSecondsAfterFinished in body should be greater than or equal to 0"], None, False),
    ("claim-shutdown-time", "SandboxClaim", put("spec.lifecycle", {"shutdownTime": "soon"}),
     ['spec.lifecycle.shutdownTime: Invalid value: "soon": spec.lifecycle.shutdownTime in body '
      'must be of type date-time: "soon"'], None, False),
    ("claim-env-type", "SandboxClaim", put("spec.env", {"A": "b"}),
     [type_error("spec.env", "array", "object")], None, False),
    ("claim-typo", "SandboxClaim", put("spec.lifecyle", {"shutdownPolicy": "Delete"}), None,
     ["spec.lifecyle"], False),
    ("claim-pvc-quantity", "SandboxClaim",
     put("spec.volumeClaimTemplates", [{"metadata": {"name": "v"}, "spec": {
         "resources": {"requests": {"storage": "big"}}}}]),
     ['spec.volumeClaimTemplates[0].spec.resources.requests.storage: Invalid value: "big": '
      "spec.volumeClaimTemplates[0].spec.resources.requests.storage in body should match "
      f"'{QUANTITY}'"], None, False),
    ("snapshot-ref-missing", "SandboxSnapshot", drop("spec.sandboxRef"),
     ["spec.sandboxRef: Required value"], None, False),
    ("snapshot-ref-name", "SandboxSnapshot", put("spec.sandboxRef.name", "x/y"),
     ['spec.sandboxRef.name: Invalid value: "x/y": spec.sandboxRef.name in body should match '
      f"'{DNS}'"], None, False),
]


def case(row):
    ident, kind, mutate, errors, unknown, pod_rule = row
    obj = manifest(kind, ident)
    mutate(obj)
    return obj


def warnings_of(r):
    return r.raw.headers.getlist("Warning")


def unknown_warning(path):
    return '299 - "unknown field \\"%s\\""' % path


@pytest.mark.parametrize("row", CORPUS, ids=[r[0] for r in CORPUS])
def test_corpus_against_asb_serve(asb, row):
    ident, kind, _, errors, unknown, _ = row
    group, plural, _ = BASE[kind]
    obj = case(row)
    r = asb.post(asb.path(group, plural), obj)
    # Unknown fields are named whatever else happens, on a refusal too.
    assert warnings_of(r) == [unknown_warning(p) for p in unknown or []], warnings_of(r)
    stored = asb.get(asb.path(group, plural, name=ident))
    if errors:
        assert r.status_code == 422, r.text
        body = r.json()
        assert body["reason"] == "Invalid" and body["details"]["kind"] == kind, body
        for e in errors:
            assert e in body["message"], (e, body["message"])
        # Exactly these faults: each said once.
        assert len(body["details"]["causes"]) == len(errors), body["details"]["causes"]
        assert stored.status_code == 404, stored.text
        return
    assert r.status_code == 201, r.text
    for path in unknown:
        node, key = at(stored.json(), path)
        assert key not in node, (path, stored.json())
    # Strict refuses the same object, naming every unknown field, and stores nothing.
    obj["metadata"]["name"] = ident + "-strict"
    r = asb.post(asb.path(group, plural) + "?fieldValidation=Strict", obj)
    assert r.status_code == 400, r.text
    assert r.json()["message"].endswith(
        "strict decoding error: " + ", ".join(f'unknown field "{p}"' for p in unknown))
    assert asb.get(asb.path(group, plural, name=ident + "-strict")).status_code == 404


def declared(schema, path):
    """Whether a CRD schema declares path (or keeps unknown fields on the way to it)."""
    node = schema
    for part in path.replace("[", ".[").split("."):
        if node.get("x-kubernetes-preserve-unknown-fields"):
            return True
        if part.startswith("["):
            node = node["items"]
            continue
        props = node.get("properties") or {}
        if part in props:
            node = props[part]
        elif isinstance(node.get("additionalProperties"), dict):
            node = node["additionalProperties"]
        else:
            return False
    return True


def test_corpus_against_the_generated_crds():
    schemas = crd_schemas(deploy_objects())
    crd = {key.split("/")[-1]: s for key, s in schemas.items()}
    base = ajv(schemas, [manifest(k, "good") for k in BASE])
    assert [b["errors"] for b in base] == [[]] * len(BASE)
    refused = [row for row in CORPUS if row[3] and not row[5]]
    res = ajv(schemas, [case(row) for row in refused])
    assert [(row[0], r["valid"]) for row, r in zip(refused, res)] == \
        [(row[0], False) for row in refused], res
    for ident, kind, _, _, unknown, _ in CORPUS:
        for path in unknown or []:
            assert not declared(crd[kind], path), (ident, path)
    # What only a Pod's rules refuse passes a CRD schema: say so rather than pretend.
    pod_rules = [row for row in CORPUS if row[5]]
    assert all(r["valid"] for r in ajv(schemas, [case(row) for row in pod_rules]))


def test_asb_apply_dry_run_and_validate(asb, tmp_path):
    good = manifest("SandboxTemplate", "dry")
    f = tmp_path / "t.json"
    f.write_text(json.dumps(good))
    path = asb.path(EXT, "sandboxtemplates", name="dry")
    # client: nothing sent; server: every check, nothing stored.
    p = run(asb, "apply", "--dry-run=client", "-f", str(f))
    assert (p.returncode, p.stdout) == (0, "sandboxtemplate.extensions.agents.x-k8s.io/dry created (dry run)\n"), p
    p = run(asb, "apply", "--dry-run=server", "-f", str(f))
    assert (p.returncode, p.stdout) == (0, "sandboxtemplate.extensions.agents.x-k8s.io/dry created (server dry run)\n"), p
    assert asb.get(path).status_code == 404
    # The server's checks run in a server dry run, and not in a client one.
    bad = manifest("SandboxTemplate", "dry")
    put(f"{C0}.image", 5)(bad)
    fb = tmp_path / "bad.json"
    fb.write_text(json.dumps(bad))
    p = run(asb, "apply", "--dry-run=server", "-f", str(fb))
    assert p.returncode == 1 and "must be of type string" in p.stderr, p
    assert run(asb, "apply", "--dry-run=client", "-f", str(fb)).returncode == 0
    assert asb.get(path).status_code == 404
    # Existing object: unchanged / configured, and a server dry run changes nothing stored.
    assert run(asb, "apply", "-f", str(f)).returncode == 0
    rv = asb.get(path).json()["metadata"]["resourceVersion"]
    for mode in ("client", "server"):
        p = run(asb, "apply", f"--dry-run={mode}", "-f", str(f))
        suffix = "(server dry run)" if mode == "server" else "(dry run)"
        assert p.stdout == f"sandboxtemplate.extensions.agents.x-k8s.io/dry unchanged {suffix}\n", p
    changed = manifest("SandboxTemplate", "dry")
    changed["spec"]["podTemplate"]["spec"]["containers"][0]["image"] = "other"
    f.write_text(json.dumps(changed))
    for mode in ("client", "server"):
        p = run(asb, "apply", f"--dry-run={mode}", "-f", str(f))
        suffix = "(server dry run)" if mode == "server" else "(dry run)"
        assert p.stdout == f"sandboxtemplate.extensions.agents.x-k8s.io/dry configured {suffix}\n", p
    obj = asb.get(path).json()
    assert obj["metadata"]["resourceVersion"] == rv and \
        obj["spec"]["podTemplate"]["spec"]["containers"][0]["image"] == "host"
    # --validate with no value is strict, as kubectl's --validate=true.
    typo = manifest("SandboxTemplate", "typo")
    put(f"{C0}.resorces", {})(typo)
    f.write_text(json.dumps(typo))
    p = run(asb, "apply", "--validate", "-f", str(f))
    assert p.returncode == 1 and 'unknown field "spec.podTemplate.spec.containers[0].resorces"' in p.stderr, p
    p = run(asb, "apply", "--dry-run=sometimes", "-f", str(f))
    assert p.returncode == 1 and p.stderr == \
        'error: Invalid dry-run value (sometimes). Must be "none", "server", or "client".\n', p


def test_requests_and_limits_beyond_the_machine_warn(asb):
    sb = manifest("Sandbox", "huge")
    put(f"{C0}.resources", {"limits": {"memory": "100Ti"}, "requests": {"cpu": "4096"}})(sb)
    r = asb.post(asb.path(CORE, "sandboxes"), sb)
    assert r.status_code == 201, r.text
    w = warnings_of(r)
    assert len(w) == 2, w
    assert w[0].startswith(f'299 - "{C0}.resources.requests.cpu: 4096 is more than this machine '
                           'has (') and w[0].endswith('): the sandbox will not be started '
                                                      '(Unschedulable)"'), w
    assert w[1].startswith(f'299 - "{C0}.resources.limits.memory: 100Ti is more than this machine '
                           'has ('), w
    # What fits says nothing.
    ok = manifest("Sandbox", "fits")
    put(f"{C0}.resources", {"limits": {"memory": "64Mi", "cpu": "100m"}})(ok)
    r = asb.post(asb.path(CORE, "sandboxes"), ok)
    assert r.status_code == 201 and warnings_of(r) == [], r.text


def test_objects_stored_before_a_rule_still_take_writes(start_asb, tmp_path):
    """Validation ratcheting, as kube-apiserver does for custom resources: a Sandbox stored before
    admission refused `cpu: 0.5` (a number) still takes status writes and updates that leave that
    field alone; an update that changes it to another bad value is refused."""
    import os
    import sqlite3
    state = tmp_path / "state"
    first = start_asb(state_dir=state)
    sb = manifest("Sandbox", "old")
    put(f"{C0}.resources", {"limits": {"cpu": "1"}})(sb)
    assert first.post(first.path(CORE, "sandboxes"), sb).status_code == 201
    assert first.stop() == 0
    db = sqlite3.connect(os.path.join(state, "state.db"))
    with db:
        (data,) = db.execute("SELECT data FROM objects WHERE name = 'old'").fetchone()
        obj = json.loads(data)
        obj["spec"]["podTemplate"]["spec"]["containers"][0]["resources"]["limits"]["cpu"] = 0.5
        assert db.execute("UPDATE objects SET data = ? WHERE name = 'old'",
                          (json.dumps(obj),)).rowcount == 1
    db.close()
    asb = start_asb(state_dir=state)
    path = asb.path(CORE, "sandboxes", name="old")
    r = asb.merge_patch(path + "/status", {"status": {"selector": "x"}})
    assert r.status_code == 200, r.text
    r = asb.merge_patch(path, {"metadata": {"labels": {"a": "b"}}})
    assert r.status_code == 200, r.text
    assert r.json()["spec"]["podTemplate"]["spec"]["containers"][0]["resources"]["limits"]["cpu"] == 0.5
    r = asb.merge_patch(path, {"spec": {"podTemplate": {"spec": {"containers": [
        {"name": "main", "image": "host", "resources": {"limits": {"cpu": 1.5}}}]}}}})
    assert r.status_code == 422 and "must be of type integer,string" in r.json()["message"], r.text
