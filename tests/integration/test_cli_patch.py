"""`asb patch` and `asb scale` against a real `asb serve`: the patch types (strategic refused for a
custom resource as kube-apiserver refuses it), `patched (no change)`, --patch-file, the scale
subresource, and what the server stores."""
import json

from asb_apiserver import CORE, EXT, asb, start_asb  # noqa: F401 (fixtures)
from asb_cli import ok, run

REF = "sandbox.agents.x-k8s.io/p1"
POOL = "sandboxwarmpool.extensions.agents.x-k8s.io/pool"


def labels(asb):
    return asb.get(asb.path(CORE, "sandboxes", name="p1")).json()["metadata"].get("labels", {})


def test_patch_types(asb, tmp_path):
    asb.create_sandbox("p1")
    # kubectl's default type is strategic: a custom resource answers 415, and kubectl's words.
    p = run(asb, "patch", "sandbox", "p1", "-p", '{"metadata":{"labels":{"a":"1"}}}')
    assert (p.returncode, p.stdout) == (1, "")
    assert p.stderr == ("error: application/strategic-merge-patch+json is not supported by "
                        "agents.x-k8s.io/v1beta1, Kind=Sandbox: the body of the request was in an "
                        "unknown format - accepted media types include: "
                        "application/json-patch+json, application/merge-patch+json\n")
    assert labels(asb) == {}
    merge = ["--type", "merge", "-p", '{"metadata":{"labels":{"a":"1"}}}']
    assert ok(asb, "patch", "sandbox", "p1", *merge) == REF + " patched\n"
    assert ok(asb, "patch", "sbx/p1", *merge) == REF + " patched (no change)\n"
    assert ok(asb, "patch", "sbx/p1", "--type=json", "-p",
              '[{"op":"add","path":"/metadata/labels/b","value":"2"}]') == REF + " patched\n"
    f = tmp_path / "patch.json"
    f.write_text(json.dumps({"metadata": {"labels": {"a": None, "c": "3"}}}))
    assert ok(asb, "patch", "sandbox", "p1", "--type", "merge", "--patch-file", str(f),
              "-o", "name") == REF + "\n"
    assert labels(asb) == {"b": "2", "c": "3"}
    # YAML, as kubectl takes it.
    assert ok(asb, "patch", "sandbox", "p1", "--type", "merge", "-p",
              "metadata:\n  labels: {d: '4'}") == REF + " patched\n"
    assert labels(asb) == {"b": "2", "c": "3", "d": "4"}
    # The status subresource.
    cond = {"type": "Ready", "status": "False", "reason": "DependenciesNotReady", "message": "m",
            "lastTransitionTime": "2026-01-01T00:00:00Z"}
    assert ok(asb, "patch", "sandbox", "p1", "--type", "merge", "--subresource", "status", "-p",
              json.dumps({"status": {"conditions": [cond]}})) == REF + " patched\n"
    assert asb.get(asb.path(CORE, "sandboxes", name="p1")).json()["status"]["conditions"] == [cond]
    # Failures, each with kubectl's words and exit 1.
    for args, err in (
            (["--type", "bogus", "-p", "{}"], 'error: --type must be one of [json merge strategic], not "bogus"\n'),
            (["--type", "merge"], "error: must specify --patch or --patch-file containing the contents of the patch\n"),
            (["--type", "merge", "-p", "{}", "--patch-file", str(f)],
             "error: cannot specify --patch and --patch-file together\n"),
            (["--type", "merge", "--patch-file", str(tmp_path / "nope")],
             f"error: unable to read patch file: open {tmp_path / 'nope'}: No such file or directory\n")):
        p = run(asb, "patch", "sandbox", "p1", *args)
        assert (p.returncode, p.stderr) == (1, err), args
    p = run(asb, "patch", "sandbox", "nope", "--type", "merge", "-p", "{}")
    assert (p.returncode, p.stderr) == (1, 'Error from server (NotFound): sandboxes.agents.x-k8s.io "nope" not found\n')
    p = run(asb, "patch", "sandbox", "p1", "--type", "json", "-p", '[{"op":"remove","path":"/metadata/labels/zz"}]')
    assert p.returncode == 1 and p.stderr.startswith("Error from server (Invalid): "), p.stderr


POOL_YAML = """\
apiVersion: extensions.agents.x-k8s.io/v1beta1
kind: SandboxTemplate
metadata: {name: tpl}
spec:
  podTemplate:
    spec:
      containers: [{name: main, image: host}]
---
apiVersion: extensions.agents.x-k8s.io/v1beta1
kind: SandboxWarmPool
metadata: {name: pool}
spec:
  replicas: 0
  sandboxTemplateRef: {name: tpl}
"""


def replicas(asb):
    return asb.get(asb.path(EXT, "sandboxwarmpools", name="pool")).json()["spec"]["replicas"]


def test_scale(asb):
    asb.create_sandbox("s1")
    ok(asb, "apply", "-f", "-", input=POOL_YAML)
    assert ok(asb, "scale", "sandboxwarmpool/pool", "--replicas", "2") == POOL + " scaled\n"
    assert replicas(asb) == 2
    assert ok(asb, "scale", "swp", "pool", "--replicas=1", "--current-replicas=2") == POOL + " scaled\n"
    assert replicas(asb) == 1
    p = run(asb, "scale", "swp", "pool", "--replicas=3", "--current-replicas=2")
    assert (p.returncode, p.stderr) == (1, "error: Expected replicas to be 2, was 1\n")
    assert ok(asb, "scale", "swp", "--all", "--replicas", "0", "-o", "name") == POOL + "\n"
    assert replicas(asb) == 0
    # A Sandbox has no scale subresource: the server's 404, as kube-apiserver answers.
    p = run(asb, "scale", "sandbox/s1", "--replicas=1")
    assert (p.returncode, p.stderr) == (1, "Error from server (NotFound): the server could not find "
                                           "the requested resource\n")
    for args, err in (
            (["swp", "nope", "--replicas=1"], 'error: no objects passed to scale '
             'sandboxwarmpools.extensions.agents.x-k8s.io "nope" not found\n'),
            (["swp", "pool"], 'error: required flag(s) "replicas" not set\n'),
            (["swp", "pool", "--replicas=-1"], "error: The --replicas=COUNT flag is required, and "
             "COUNT must be greater than or equal to 0\n")):
        p = run(asb, "scale", *args)
        assert (p.returncode, p.stderr) == (1, err), args
    assert replicas(asb) == 0
