"""Bad input against the new API kinds and the router, from a user's side: each gets the documented
error shape and the server keeps serving (docs/cli.md, docs/api-server.md, docs/router.md)."""
import os

import grpc
import pytest
import requests

from asb_apiserver import CORE, EXT
from asb_cli import ok, run
from claims_helpers import claim, condition, create, get, pool, template, wait_claim, wait_pool_ready
from grpc_helpers import Client
from local_sandbox import sbx_state, start_sbx  # noqa: F401  (fixtures)


def still_serving(asb):
    r = asb.get(asb.path(EXT, "sandboxwarmpools"))
    assert r.status_code == 200, r.text
    assert asb.running


def write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def test_apply_malformed_files(start_sbx, tmp_path):
    asb = start_sbx()
    bad_yaml = write(tmp_path, "bad.yaml", "apiVersion: extensions.agents.x-k8s.io/v1beta1\n"
                     "kind: SandboxWarmPool\nmetadata:\n  name: p\n    oops: [\n")
    p = run(asb, "apply", "-f", bad_yaml)
    assert p.returncode == 1
    assert p.stderr.startswith(f"error: error parsing {bad_yaml}: yaml: line "), p.stderr
    bad_json = write(tmp_path, "bad.json", '{"apiVersion": "extensions.agents.x-k8s.io/v1beta1", '
                     '"kind": "SandboxClaim", "metadata": {"name": "c"},')
    p = run(asb, "apply", "-f", bad_json)
    assert p.returncode == 1 and p.stderr.startswith(f"error: error parsing {bad_json}"), p.stderr
    nokind = write(tmp_path, "nokind.yaml", "apiVersion: extensions.agents.x-k8s.io/v1beta1\n"
                   "metadata: {name: p}\nspec: {replicas: 1}\n")
    p = run(asb, "apply", "-f", nokind)
    assert p.returncode == 1 and "error validating data: kind not set" in p.stderr, p.stderr
    # A file that does not parse applies nothing, even its valid first document.
    mixed = write(tmp_path, "mixed.yaml", "apiVersion: extensions.agents.x-k8s.io/v1beta1\n"
                  "kind: SandboxTemplate\nmetadata: {name: t1}\nspec:\n  podTemplate:\n"
                  "    spec: {containers: [{name: m, image: host}]}\n---\n: : :\n  - [\n")
    p = run(asb, "apply", "-f", mixed)
    assert p.returncode == 1, p.stdout
    assert get(asb, EXT, "sandboxtemplates", "t1") is None
    # Raw API: malformed JSON is a 400 Status.
    r = asb.request("POST", asb.path(EXT, "sandboxclaims"), data=b'{"kind": "SandboxClaim",',
                    headers={"Content-Type": "application/json"})
    assert r.status_code == 400, r.text
    assert r.json()["kind"] == "Status" and r.json()["reason"] == "BadRequest"
    still_serving(asb)


def test_invalid_pool_replicas(start_sbx, tmp_path):
    asb = start_sbx()
    r = asb.post(asb.path(EXT, "sandboxwarmpools"), pool("neg", "tpl", replicas=-1))
    assert r.status_code == 422, r.text
    st = r.json()
    assert st["reason"] == "Invalid" and "spec.replicas" in st["message"], st
    r = asb.post(asb.path(EXT, "sandboxwarmpools"), pool("str", "tpl", replicas="two"))
    assert r.status_code == 422, r.text
    f = write(tmp_path, "neg.yaml", "apiVersion: extensions.agents.x-k8s.io/v1beta1\n"
              "kind: SandboxWarmPool\nmetadata: {name: neg}\n"
              "spec: {replicas: -1, sandboxTemplateRef: {name: tpl}}\n")
    p = run(asb, "apply", "-f", f)
    assert p.returncode == 1
    assert p.stderr.startswith('Error from server (Invalid): error when creating "' + f + '": '
                               'SandboxWarmPool.extensions.agents.x-k8s.io "neg" is invalid: spec.replicas'), p.stderr
    # Scale subresource refuses a negative count too.
    create(asb, EXT, "sandboxtemplates", template("tpl"))
    create(asb, EXT, "sandboxwarmpools", pool("ok", "tpl", replicas=0))
    r = asb.merge_patch(asb.path(EXT, "sandboxwarmpools", "default", "ok", "scale"), {"spec": {"replicas": -3}})
    assert r.status_code in (400, 422), r.text
    assert get(asb, EXT, "sandboxwarmpools", "ok")["spec"]["replicas"] == 0
    still_serving(asb)


def test_claim_with_invalid_additional_pod_metadata(start_sbx):
    asb = start_sbx()
    create(asb, EXT, "sandboxtemplates", template("tpl"))
    create(asb, EXT, "sandboxwarmpools", pool("wp", "tpl", replicas=1))
    wait_pool_ready(asb, "wp", 1)
    # Domain not in the allowlist: terminal InvalidMetadata, warm member not consumed.
    create(asb, EXT, "sandboxclaims",
           claim("badmeta", "wp", additionalPodMetadata={"labels": {"evil.example.com/x": "y"}}))
    c = wait_claim(asb, "badmeta", reason="InvalidMetadata", timeout=15)
    assert condition(c)["status"] == "False"
    assert not ((c.get("status") or {}).get("sandbox") or {}).get("name")
    # Reserved annotation domain.
    create(asb, EXT, "sandboxclaims",
           claim("badann", "wp", additionalPodMetadata={"annotations": {"agents.x-k8s.io/pod-name": "x"}}))
    wait_claim(asb, "badann", reason="InvalidMetadata", timeout=15)
    # app=sandbox-router is rejected even in an allowed domain? (only key `app` - not prefixed: invalid)
    create(asb, EXT, "sandboxclaims",
           claim("badapp", "wp", additionalPodMetadata={"labels": {"app": "sandbox-router"}}))
    wait_claim(asb, "badapp", reason="InvalidMetadata", timeout=15)
    ms = wait_pool_ready(asb, "wp", 1)
    assert ms[0]["metadata"]["ownerReferences"][0]["kind"] == "SandboxWarmPool"
    # A good one still binds.
    create(asb, EXT, "sandboxclaims",
           claim("goodmeta", "wp", additionalPodMetadata={"labels": {"sandbox.users.io/team": "qa"}}))
    c = wait_claim(asb, "goodmeta", timeout=30)
    sb = get(asb, CORE, "sandboxes", c["status"]["sandbox"]["name"])
    assert sb["spec"]["podTemplate"]["metadata"]["labels"]["sandbox.users.io/team"] == "qa"
    still_serving(asb)


def test_router_bad_requests(start_sbx):
    asb = start_sbx()
    router = open(os.path.join(asb.state_dir, "router")).read().strip()
    auth = {"Authorization": f"Bearer {asb.token}"}

    def get_(headers):
        return requests.get(router + "/v1/files/", headers=headers, timeout=10)

    r = get_({})
    assert r.status_code == 401 and r.json() == {"detail": "Missing or invalid Authorization header."}
    r = get_({"Authorization": "Bearer nope", "X-Sandbox-ID": "x"})
    assert r.status_code == 401 and r.json() == {"detail": "Invalid token."}
    r = get_(auth)
    assert r.status_code == 400 and r.json() == {"detail": "X-Sandbox-ID header is required."}
    for bad in ("UPPER", "-lead", "a" * 64, "a_b", "a.b"):
        r = get_({**auth, "X-Sandbox-ID": bad})
        assert r.status_code == 400 and r.json() == {"detail": "Invalid sandbox ID format."}, (bad, r.text)
    r = get_({**auth, "X-Sandbox-ID": "ghost"})
    assert r.status_code == 404, r.text
    assert r.json() == {"detail": 'Sandbox "ghost" not found in namespace "default".'}
    r = get_({**auth, "X-Sandbox-ID": "ghost", "X-Sandbox-Namespace": "Bad_NS"})
    assert r.status_code == 400 and r.json() == {"detail": "Invalid namespace format."}
    r = get_({**auth, "X-Sandbox-ID": "ghost", "X-Sandbox-Port": "70000"})
    assert r.status_code == 400 and r.json() == {"detail": "Invalid port format."}
    # gRPC: the same errors as status codes, not hangs.
    hostport = router[len("http://"):].rstrip("/")
    g = Client(hostport)
    try:
        with pytest.raises(grpc.RpcError) as e:
            g.execute(["true"], metadata=[("x-sandbox-id", "ghost"),
                                          ("authorization", f"Bearer {asb.token}")])
        assert e.value.code() == grpc.StatusCode.NOT_FOUND, e.value
        with pytest.raises(grpc.RpcError) as e:
            g.execute(["true"], metadata=[("x-sandbox-id", "BAD"),
                                          ("authorization", f"Bearer {asb.token}")])
        assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT, e.value
        with pytest.raises(grpc.RpcError) as e:
            g.execute(["true"], metadata=[("x-sandbox-id", "ghost")])
        assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED, e.value
    finally:
        g.close()
    r = requests.get(router + "/healthz", timeout=5)
    assert r.status_code == 200 and r.json() == {"status": "ok"}
    still_serving(asb)


def test_more_invalid_specs(start_sbx):
    asb = start_sbx()

    def post(plural, body):
        r = asb.post(asb.path(EXT, plural), body)
        return r.status_code, r.json()
    for replicas in (2 ** 31, 1.5, None):
        code, st = post("sandboxwarmpools", pool("big", "tpl", replicas=replicas))
        if replicas is None:
            # A null is pruned and the default applies, as kube-apiserver does for a CRD field
            # that is not nullable.
            assert code == 201 and st["spec"]["replicas"] == 1, st
        else:
            assert code == 422 and "spec.replicas" in st["message"], (replicas, st)
    code, st = post("sandboxwarmpools", pool("strat", "tpl", strategy="Sideways"))
    assert code == 422 and "spec.updateStrategy.type" in st["message"], st
    b = pool("noref", "tpl")
    del b["spec"]["sandboxTemplateRef"]
    code, st = post("sandboxwarmpools", b)
    assert code == 422 and "spec.sandboxTemplateRef" in st["message"], st
    b = claim("noref", "wp")
    del b["spec"]["warmPoolRef"]
    code, st = post("sandboxclaims", b)
    assert code == 422 and "spec.warmPoolRef" in st["message"], st
    code, st = post("sandboxclaims", claim("pol", "wp", lifecycle={"shutdownPolicy": "Explode"}))
    assert code == 422 and "spec.lifecycle.shutdownPolicy" in st["message"], st
    code, st = post("sandboxclaims", claim("when", "wp", lifecycle={"shutdownTime": "tomorrow"}))
    assert code == 422 and "spec.lifecycle.shutdownTime" in st["message"], st
    code, st = post("sandboxclaims", claim("ttl", "wp", lifecycle={"ttlSecondsAfterFinished": -1}))
    assert code == 422 and "ttlSecondsAfterFinished" in st["message"], st
    code, st = post("sandboxclaims", claim("Bad_Name", "wp"))
    assert code == 422 and st["reason"] == "Invalid", st
    code, st = post("sandboxtemplates", template("pol", envVarsInjectionPolicy="Sometimes"))
    assert code == 422 and "spec.envVarsInjectionPolicy" in st["message"], st
    # CLI flags.
    p = run(asb, "claim", "--pool", "wp", "--ttl", "soon")
    assert p.returncode != 0 and "soon" in p.stderr, p.stderr
    p = run(asb, "claim", "--pool", "wp", "--ttl", "1m", "--policy", "Explode")
    assert p.returncode != 0 and "Explode" in p.stderr, p.stderr
    p = run(asb, "claim")
    assert p.returncode != 0 and "--pool" in p.stderr, p.stderr
    p = run(asb, "claim", "--pool", "Bad_Pool", "--timeout", "1s")
    assert p.returncode == 1, p.stderr
    assert not items_of(asb, "sandboxclaims")
    still_serving(asb)


def items_of(asb, plural):
    r = asb.get(asb.path(EXT, plural))
    return r.json()["items"]


def test_router_allow_unauthenticated_for_tokenless_sdks(sbx_state, tmp_path):
    """Upstream SDKs send no token: with --router-allow-unauthenticated a loopback client without
    one is served, a wrong token is still refused (docs/router.md, Auth)."""
    from asb_apiserver import AsbServer, stop_servers, asb_binary
    from local_sandbox import RUNC, injected_sandboxd

    class Unauth(AsbServer):
        def command(self):
            return ["sh", "-c", 'exec "$0" "$@" --router-allow-unauthenticated', asb_binary()]
    s = Unauth(sbx_state, tmp_path / "unauth.log", {"ASB_RUNTIME": RUNC, "ASB_SANDBOXD": injected_sandboxd()})
    try:
        s.start()
        s.create_sandbox("open")
        from local_sandbox import wait_ready
        wait_ready(s, "open")
        router = open(os.path.join(s.state_dir, "router")).read().strip()
        r = requests.post(router + "/execute", json={"command": "echo no token"},
                          headers={"X-Sandbox-ID": "open"}, timeout=30)
        assert r.status_code == 200 and r.json()["stdout"] == "no token\n", r.text
        r = requests.get(router + "/v1/files/", headers={"X-Sandbox-ID": "open",
                                                         "Authorization": "Bearer wrong"}, timeout=10)
        assert r.status_code == 401 and r.json() == {"detail": "Invalid token."}
        g = Client(router[len("http://"):].rstrip("/"))
        try:
            assert g.execute(["true"], metadata=[("x-sandbox-id", "open")]).exit_code == 0
        finally:
            g.close()
    finally:
        stop_servers([s])


def test_router_sdk_headers_on_a_claimed_sandbox(start_sbx):
    """Headers upstream SDKs send: X-Sandbox-Pod-IP validated then ignored, X-Sandbox-Timeout
    accepted, an unserved X-Sandbox-Port refused with 502."""
    asb = start_sbx()
    create(asb, EXT, "sandboxtemplates", template("tpl"))
    create(asb, EXT, "sandboxwarmpools", pool("wp", "tpl", replicas=1))
    wait_pool_ready(asb, "wp", 1)
    create(asb, EXT, "sandboxclaims", claim("h", "wp"))
    sname = wait_claim(asb, "h")["status"]["sandbox"]["name"]
    router = open(os.path.join(asb.state_dir, "router")).read().strip()
    base = {"Authorization": f"Bearer {asb.token}", "X-Sandbox-ID": sname}
    r = requests.post(router + "/execute", json={"command": "echo a && echo b"},
                      headers={**base, "X-Sandbox-Pod-IP": "10.1.2.3", "X-Sandbox-Timeout": "30"}, timeout=30)
    assert r.status_code == 200 and r.json() == {"stdout": "a && echo b\n", "stderr": "", "exit_code": 0}, r.text
    for ip in ("127.0.0.1", "169.254.1.1", "224.0.0.1", "0.0.0.0", "fe80::1"):
        r = requests.get(router + "/v1/files/", headers={**base, "X-Sandbox-Pod-IP": ip}, timeout=10)
        assert r.status_code == 400 and r.json()["detail"].startswith("Invalid target IP address"), (ip, r.text)
    r = requests.get(router + "/", headers={**base, "X-Sandbox-Port": "1234"}, timeout=10)
    assert r.status_code == 502 and r.json() == {"detail": f"Could not connect to the backend sandbox: {sname}"}, r.text
    r = requests.get(router + "/", headers={**base, "X-Sandbox-Port": "8888"}, timeout=10)
    assert r.json() == {"status": "ok", "message": "Sandbox Runtime is active."}, r.text
    still_serving(asb)


def test_bad_quantities_are_refused_at_the_door(start_sbx, tmp_path):
    """Issue 31: `memory: lots` and `cpu: "-1"` are 422 with every failing field and its value,
    before anything is stored (they used to be created and fail every 10 s)."""
    asb = start_sbx()
    manifest = tmp_path / "bad.yaml"
    manifest.write_text("""apiVersion: agents.x-k8s.io/v1beta1
kind: Sandbox
metadata:
  name: greedy
spec:
  podTemplate:
    spec:
      containers:
      - name: main
        image: host
        resources:
          limits:
            memory: lots
            cpu: "-1"
""")
    p = run(asb, "apply", "-f", str(manifest))
    assert p.returncode == 1, p
    assert 'spec.podTemplate.spec.containers[0].resources.limits.memory: Invalid value: "lots"' \
        in p.stderr, p.stderr
    assert 'spec.podTemplate.spec.containers[0].resources.limits.cpu: Invalid value: "-1": must ' \
        'be greater than or equal to 0' in p.stderr, p.stderr
    assert "created" not in p.stdout
    assert asb.get(asb.path(CORE, "sandboxes", name="greedy")).status_code == 404
    good = template("sized")
    good["spec"]["podTemplate"]["spec"]["containers"][0]["resources"] = {
        "limits": {"memory": "512Mi", "cpu": "500m"}}
    assert asb.post(asb.path(EXT, "sandboxtemplates"), good).status_code == 201
