"""`asb serve` as kube-apiserver with structural CRD schemas: fieldValidation=Strict|Warn|Ignore on
create, update and patch (unknown fields pruned; Warn, the default, says so in `Warning: 299`
headers; Strict answers 400), the warnings surfacing in `asb apply` and the Python client, and a
list's resourceVersion parsed and bounded as kube-apiserver does (400 for garbage, 504 Timeout
"Too large resource version" for a version no write has made)."""
import json

import pytest

from asb_apiserver import CORE, EXT, asb, sandbox, start_asb  # noqa: F401 (fixtures)
from asb_cli import run
from waiting import wait_for


def warnings_of(r):
    """The Warning headers of a requests response, one per header line."""
    return r.raw.headers.getlist("Warning")


def status_of(r, code, reason):
    assert r.status_code == code, r.text
    body = r.json()
    assert body["kind"] == "Status" and body["status"] == "Failure", body
    assert body["reason"] == reason and body["code"] == code, body
    return body


def observed(obj):
    """obj, once its Ready condition has observed its current generation; else None."""
    conds = (obj.get("status") or {}).get("conditions") or []
    gen = obj["metadata"].get("generation")
    if any(c.get("type") == "Ready" and c.get("observedGeneration") == gen for c in conds):
        return obj
    return None


def with_unknown(name):
    sb = sandbox(name)
    sb["metadata"]["bogus"] = "m"
    sb["spec"]["foo"] = 1
    sb["spec"]["podTemplate"]["spec"]["containers"][0]["resorces"] = {"limits": {"memory": "1Gi"}}
    sb["spec"]["podTemplate"]["metadata"] = {"labels": {"a": "b"}, "name": "dropped"}
    return sb


UNKNOWN = ['299 - "unknown field \\"metadata.bogus\\""', '299 - "unknown field \\"spec.foo\\""',
           '299 - "unknown field \\"spec.podTemplate.metadata.name\\""',
           '299 - "unknown field \\"spec.podTemplate.spec.containers[0].resorces\\""']


def test_create_warn_is_the_default_and_prunes(asb):
    for query in ("", "?fieldValidation=Warn"):
        name = "warn" + ("q" if query else "")
        r = asb.post(asb.path(CORE, "sandboxes") + query, with_unknown(name))
        assert r.status_code == 201, r.text
        assert warnings_of(r) == UNKNOWN
        for obj in (r.json(), asb.get(asb.path(CORE, "sandboxes", name=name)).json()):
            assert "foo" not in obj["spec"] and "bogus" not in obj["metadata"]
            assert obj["spec"]["podTemplate"]["metadata"] == {"labels": {"a": "b"}}
            # The pod spec is pruned by the pinned Kubernetes schema, at every depth (issue 31).
            assert "resorces" not in obj["spec"]["podTemplate"]["spec"]["containers"][0]
    # A clean object gets no warning.
    r = asb.post(asb.path(CORE, "sandboxes"), sandbox("clean"))
    assert r.status_code == 201 and warnings_of(r) == []


def test_many_warnings_are_bounded_and_counted(asb):
    """Warnings fill at most 4 KiB of headers (each connection's memory is 16 KiB): the ones that
    do not fit are counted in one last Warning, and the create answers 201 as usual, even beside
    8 KB of the client's own headers."""
    sb = sandbox("many")
    for i in range(64):
        sb["spec"][f"f{i:02d}" + "x" * 200] = 1
    r = asb.post(asb.path(CORE, "sandboxes"), sb, headers={"X-Pad": "p" * 8000})
    assert r.status_code == 201, r.text
    w = warnings_of(r)
    assert 2 <= len(w) < 64 and sum(len(x) for x in w[:-1]) <= 4096, w
    assert w[0].startswith('299 - "unknown field \\"spec.f00x')
    assert w[-1] == f'299 - "{64 - (len(w) - 1)} more warnings not shown"', w[-1]
    assert not any(k.startswith("f") for k in asb.get(asb.path(CORE, "sandboxes", name="many"))
                   .json()["spec"])
    # Headers the connection cannot hold are refused before anything is done.
    r = asb.post(asb.path(CORE, "sandboxes"), sandbox("huge"), headers={"X-Pad": "p" * 20000})
    assert r.status_code == 431
    assert asb.get(asb.path(CORE, "sandboxes", name="huge")).status_code == 404


def test_create_ignore_prunes_silently(asb):
    r = asb.post(asb.path(CORE, "sandboxes") + "?fieldValidation=Ignore", with_unknown("ign"))
    assert r.status_code == 201, r.text
    assert warnings_of(r) == []
    assert "foo" not in asb.get(asb.path(CORE, "sandboxes", name="ign")).json()["spec"]


def test_create_strict_refuses(asb):
    r = asb.post(asb.path(CORE, "sandboxes") + "?fieldValidation=Strict", with_unknown("strict"))
    body = status_of(r, 400, "BadRequest")
    assert body["message"] == (
        'Sandbox in version "v1beta1" cannot be handled as a Sandbox: strict decoding error: '
        'unknown field "metadata.bogus", unknown field "spec.foo", '
        'unknown field "spec.podTemplate.metadata.name", '
        'unknown field "spec.podTemplate.spec.containers[0].resorces"')
    assert asb.get(asb.path(CORE, "sandboxes", name="strict")).status_code == 404
    # Strict with nothing unknown is an ordinary create.
    r = asb.post(asb.path(CORE, "sandboxes") + "?fieldValidation=Strict", sandbox("strictok"))
    assert r.status_code == 201 and warnings_of(r) == []


def test_bad_field_validation_value(asb):
    r = asb.post(asb.path(CORE, "sandboxes") + "?fieldValidation=warn", sandbox("bad"))
    body = status_of(r, 422, "Invalid")
    assert body["message"] == ('CreateOptions.meta.k8s.io "" is invalid: fieldValidation: '
                               'Unsupported value: "warn": supported values: "", "Ignore", '
                               '"Strict", "Warn"')
    assert body["details"]["kind"] == "CreateOptions"
    assert body["details"]["causes"][0]["field"] == "fieldValidation"
    asb.create_sandbox("p")
    r = asb.merge_patch(asb.path(CORE, "sandboxes", name="p") + "?fieldValidation=x", {})
    assert status_of(r, 422, "Invalid")["message"].startswith('PatchOptions.meta.k8s.io "" is')


def test_patch_and_update_prune_and_warn_with_paths_into_arrays(asb):
    claim = {"apiVersion": f"{EXT}/v1beta1", "kind": "SandboxClaim",
             "metadata": {"name": "c1"},
             "spec": {"warmPoolRef": {"name": "pool"}, "env": [{"name": "A", "value": "1"}]}}
    path = asb.path(EXT, "sandboxclaims", name="c1")
    assert asb.post(asb.path(EXT, "sandboxclaims"), claim).status_code == 201
    patch = {"spec": {"env": [{"name": "A", "value": "2", "extra": True}], "zzz": 1}}
    r = asb.merge_patch(path, patch)
    assert r.status_code == 200, r.text
    assert warnings_of(r) == ['299 - "unknown field \\"spec.env[0].extra\\""',
                              '299 - "unknown field \\"spec.zzz\\""']
    # The claim controller writes the claim's status once for each generation (its pool does not
    # exist); compare versions only after that write, which is not ours.
    stored = wait_for(lambda: observed(asb.get(path).json()), what="the controller's status")
    assert stored["spec"]["env"] == [{"name": "A", "value": "2"}] and "zzz" not in stored["spec"]
    # Strict: refused, nothing changes.
    r = asb.merge_patch(path + "?fieldValidation=Strict", {"spec": {"zzz": 2}})
    assert status_of(r, 400, "BadRequest")["message"].endswith(
        'strict decoding error: unknown field "spec.zzz"')
    assert asb.get(path).json()["metadata"]["resourceVersion"] == \
        stored["metadata"]["resourceVersion"]
    # PUT, and the status subresource, the same way.
    stored["spec"]["lifecycle"] = {"shutdownPolicy": "Delete", "later": 1}
    r = asb.put(path, stored)
    assert r.status_code == 200, r.text
    assert warnings_of(r) == ['299 - "unknown field \\"spec.lifecycle.later\\""']
    assert r.json()["spec"]["lifecycle"] == {"shutdownPolicy": "Delete"}
    r = asb.merge_patch(path + "/status", {"status": {"sandbox": {"name": "x", "y": 1}}})
    assert r.status_code == 200, r.text
    assert warnings_of(r) == ['299 - "unknown field \\"status.sandbox.y\\""']
    assert r.json()["status"]["sandbox"] == {"name": "x"}


def test_warning_text_is_escaped_and_cannot_split_headers(asb):
    sb = sandbox("esc")
    sb["spec"]['we"ird\\key\r\nX-Injected: 1'] = 1
    r = asb.post(asb.path(CORE, "sandboxes"), sb)
    assert r.status_code == 201, r.text
    assert "X-Injected" not in r.headers
    assert warnings_of(r) == ['299 - "unknown field \\"spec.we\\"ird\\\\key??X-Injected: 1\\""']


def test_asb_apply_prints_warnings_as_kubectl(asb, tmp_path):
    f = tmp_path / "sb.json"
    f.write_text(json.dumps(with_unknown("applied")))
    p = run(asb, "apply", "-f", str(f))
    assert p.returncode == 0, p.stderr
    assert p.stdout == "sandbox.agents.x-k8s.io/applied created\n"
    assert p.stderr.splitlines() == ['Warning: unknown field "metadata.bogus"',
                                     'Warning: unknown field "spec.foo"',
                                     'Warning: unknown field "spec.podTemplate.metadata.name"',
                                     'Warning: unknown field '
                                     '"spec.podTemplate.spec.containers[0].resorces"']
    # The update path warns too (and the pruned object is otherwise unchanged).
    p = run(asb, "apply", "-f", str(f))
    assert p.returncode == 0, p.stderr
    assert p.stdout == "sandbox.agents.x-k8s.io/applied unchanged\n"
    assert 'Warning: unknown field "spec.foo"' in p.stderr.splitlines()


def test_asb_apply_validate_modes(asb, tmp_path):
    f = tmp_path / "sb.json"
    f.write_text(json.dumps(with_unknown("val")))
    p = run(asb, "apply", "--validate=strict", "-f", str(f))
    assert p.returncode == 1
    assert p.stdout == ""
    assert "Error from server (BadRequest)" in p.stderr
    assert ('strict decoding error: unknown field "metadata.bogus", unknown field "spec.foo"'
            in p.stderr), p.stderr
    assert asb.get(asb.path(CORE, "sandboxes", name="val")).status_code == 404
    for mode in ("ignore", "false"):
        p = run(asb, "apply", f"--validate={mode}", "-f", str(f))
        assert p.returncode == 0 and p.stderr == "", p.stderr
    p = run(asb, "apply", "--validate=warn", "-f", str(f))
    assert p.returncode == 0 and 'Warning: unknown field "spec.foo"' in p.stderr
    p = run(asb, "apply", "--validate=sometimes", "-f", str(f))
    assert p.returncode == 2 and 'invalid - validate option "sometimes"' in p.stderr


def test_python_client_gets_the_warning_headers(asb):
    kubernetes = pytest.importorskip("kubernetes")
    cfg = kubernetes.client.Configuration(host=asb.url,
                                          api_key={"authorization": f"Bearer {asb.token}"})
    api = kubernetes.client.CustomObjectsApi(kubernetes.client.ApiClient(cfg))
    data, code, headers = api.create_namespaced_custom_object_with_http_info(
        CORE, "v1beta1", "default", "sandboxes", with_unknown("py"))
    assert code == 201 and "foo" not in data["spec"]
    assert 'unknown field \\"spec.foo\\"' in headers["Warning"]


# ---- list resourceVersion ----

def test_list_resource_version_garbage_is_400(asb):
    for rv, why in (("abc", "invalid syntax"), ("-1", "invalid syntax"), ("1.5", "invalid syntax"),
                    ("99999999999999999999", "value out of range")):
        r = asb.get(asb.path(CORE, "sandboxes"), params={"resourceVersion": rv})
        body = status_of(r, 400, "BadRequest")
        assert body["message"] == (f'invalid resource version: resourceVersion: Invalid value: '
                                   f'"{rv}": strconv.ParseUint: parsing "{rv}": {why}')


def test_list_future_resource_version_is_504_too_large(asb):
    asb.create_sandbox("rv")
    cur = int(asb.get(asb.path(CORE, "sandboxes")).json()["metadata"]["resourceVersion"])
    for rv in ("0", str(cur)):
        r = asb.get(asb.path(CORE, "sandboxes"), params={"resourceVersion": rv})
        assert r.status_code == 200 and [i["metadata"]["name"] for i in r.json()["items"]] == ["rv"]
    r = asb.get(asb.path(CORE, "sandboxes"), params={"resourceVersion": str(cur + 1000)})
    body = status_of(r, 504, "Timeout")
    assert body["message"] == f"Timeout: Too large resource version: {cur + 1000}, current: {cur}"
    assert body["details"] == {"causes": [{"reason": "ResourceVersionTooLarge",
                                           "message": "Too large resource version"}],
                               "retryAfterSeconds": 1}
