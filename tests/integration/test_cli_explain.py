"""`asb explain` (issue 32): a kind's fields from the schema admission validates with, in
kubectl explain's plaintext shape; Kubernetes types (PodSpec) come from the embedded schemas."""
import json
import os

from asb_apiserver import asb, start_asb  # noqa: F401 (fixtures)
from asb_cli import ok, run

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def fields(text):
    """{name: (type, required)} of the FIELDS block (non-recursive form)."""
    out = {}
    for line in text.split("FIELDS:\n", 1)[1].splitlines():
        if line.startswith("  ") and not line.startswith("    ") and "\t" in line:
            name, rest = line.strip().split("\t", 1)
            out[name] = (rest.split(">", 1)[0] + ">", rest.endswith("-required-"))
    return out


def test_kind_root(asb):
    text = ok(asb, "explain", "sandbox")
    assert text.startswith("GROUP:      agents.x-k8s.io\nKIND:       Sandbox\nVERSION:    v1beta1\n\n")
    f = fields(text)
    assert f["spec"] == ("<Object>", True) and f["apiVersion"] == ("<string>", False)
    # Short names and plurals name the same kind.
    assert ok(asb, "explain", "sandboxes") == text
    claim = ok(asb, "explain", "sandboxclaim")
    assert "GROUP:      extensions.agents.x-k8s.io\nKIND:       SandboxClaim\n" in claim


def test_fields_of_embedded_kubernetes_types(asb):
    text = ok(asb, "explain", "sandbox.spec.podTemplate.spec.containers")
    assert "FIELD: containers <[]Object>\n" in text
    f = fields(text)
    # The same schema admission validates with: the pinned PodSpec of src/api/gen.
    pinned = json.load(open(os.path.join(ROOT, "src/api/gen/k8s-schemas.json")))
    container = pinned["io.k8s.api.core.v1.Container"]
    assert set(f) == set(container["properties"])
    assert f["name"] == ("<string>", True)
    assert f["args"] == ("<[]string>", False)
    assert f["env"] == ("<[]Object>", False)
    res = fields(ok(asb, "explain", "sandbox.spec.podTemplate.spec.containers.resources"))
    assert res["limits"] == ("<map[string]IntOrString>", False)
    port = ok(asb, "explain", "sandbox.spec.podTemplate.spec.containers.ports.containerPort")
    assert "FIELD: containerPort <integer>\n" in port and "FIELDS:" not in port


def test_our_descriptions_and_recursive(asb):
    text = ok(asb, "explain", "sandboxsnapshot.spec")
    assert "the Sandbox to capture" in text
    rec = ok(asb, "explain", "sandboxwarmpool", "--recursive")
    assert "DESCRIPTION" not in rec
    lines = rec.split("FIELDS:\n", 1)[1].splitlines()
    assert "  spec\t<Object> -required-" in lines or "  spec\t<Object>" in lines
    # Nested fields are indented below their parent.
    i = next(i for i, line in enumerate(lines) if line.startswith("  spec\t"))
    assert lines[i + 1].startswith("    ") and not lines[i + 1].startswith("      ")


def test_errors(asb):
    p = run(asb, "explain", "nosuchkind")
    assert (p.returncode, p.stderr) == (1, 'error: the server doesn\'t have a resource type "nosuchkind"\n')
    p = run(asb, "explain", "sandbox.spec.podTemplat")
    assert (p.returncode, p.stderr) == (1, 'error: field "podTemplat" does not exist\n')
    p = run(asb, "explain")
    assert p.returncode == 1 and "You must specify the type of resource" in p.stderr
    p = run(asb, "explain", "sandbox", "--api-version", "agents.x-k8s.io/v9")
    assert p.returncode == 1 and "couldn't find resource" in p.stderr
    p = run(asb, "explain", "sandbox", "--nope")
    assert (p.returncode, p.stderr) == (1, "error: unknown flag: --nope\nSee 'asb explain --help' for usage.\n")
