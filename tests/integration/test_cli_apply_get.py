"""`asb apply`, `asb get`, `asb delete` against a real `asb serve`: kubectl's messages, output
formats and exit codes."""
import json
import os

import yaml  # noqa: F401  (python3-yaml is pulled in by python3-kubernetes)

from asb_apiserver import CORE, EXT, asb, sandbox, start_asb  # noqa: F401 (fixtures)
from asb_cli import SANDBOX_YAML, TEMPLATE_YAML, cli_env, ok, run


def test_apply_yaml_created_unchanged_configured(asb, tmp_path):
    f = tmp_path / "sb.yaml"
    f.write_text(SANDBOX_YAML.format(name="one", app="web"))
    assert ok(asb, "apply", "-f", str(f)) == "sandbox.agents.x-k8s.io/one created\n"
    obj = asb.get(asb.path(CORE, "sandboxes", name="one")).json()
    assert obj["metadata"]["labels"] == {"app": "web"}
    rv = obj["metadata"]["resourceVersion"]
    assert ok(asb, "apply", "-f", str(f)) == "sandbox.agents.x-k8s.io/one unchanged\n"
    assert asb.get(asb.path(CORE, "sandboxes", name="one")).json()["metadata"]["resourceVersion"] == rv
    f.write_text(SANDBOX_YAML.format(name="one", app="api"))
    assert ok(asb, "apply", "-f", str(f)) == "sandbox.agents.x-k8s.io/one configured\n"
    obj2 = asb.get(asb.path(CORE, "sandboxes", name="one")).json()
    assert obj2["metadata"]["labels"] == {"app": "api"}
    assert obj2["metadata"]["uid"] == obj["metadata"]["uid"]


def test_apply_keeps_status_and_finalizers(asb, tmp_path):
    f = tmp_path / "sb.yaml"
    f.write_text(SANDBOX_YAML.format(name="keep", app="web"))
    ok(asb, "apply", "-f", str(f))
    asb.merge_patch(asb.path(CORE, "sandboxes", name="keep"), {"metadata": {"finalizers": ["x/y"]}})
    r = asb.merge_patch(asb.path(CORE, "sandboxes", name="keep", sub="status"),
                        {"status": {"conditions": [{"type": "Ready", "status": "True",
                                                    "reason": "DependenciesReady", "message": "",
                                                    "lastTransitionTime": "2026-01-01T00:00:00Z"}]}})
    assert r.status_code == 200, r.text
    f.write_text(SANDBOX_YAML.format(name="keep", app="other"))
    assert ok(asb, "apply", "-f", str(f)) == "sandbox.agents.x-k8s.io/keep configured\n"
    obj = asb.get(asb.path(CORE, "sandboxes", name="keep")).json()
    assert obj["metadata"]["finalizers"] == ["x/y"]
    assert obj["status"]["conditions"][0]["status"] == "True"
    asb.merge_patch(asb.path(CORE, "sandboxes", name="keep"), {"metadata": {"finalizers": None}})


def test_apply_json_and_stdin_and_multidoc(asb, tmp_path):
    j = tmp_path / "sb.json"
    j.write_text(json.dumps(sandbox("fromjson")))
    assert ok(asb, "apply", "-f", str(j)) == "sandbox.agents.x-k8s.io/fromjson created\n"
    assert ok(asb, "apply", "-f", str(j)) == "sandbox.agents.x-k8s.io/fromjson unchanged\n"
    out = ok(asb, "apply", "-f", "-", input=SANDBOX_YAML.format(name="fromstdin", app="x"))
    assert out == "sandbox.agents.x-k8s.io/fromstdin created\n"
    multi = ("---\n" + SANDBOX_YAML.format(name="m1", app="a") + "---\n# comment only\n---\n"
             + TEMPLATE_YAML.format(name="t1") + "---\n" + SANDBOX_YAML.format(name="fromstdin", app="x"))
    out = ok(asb, "apply", "-f", "-", input=multi)
    assert out.splitlines() == [
        "sandbox.agents.x-k8s.io/m1 created",
        "sandboxtemplate.extensions.agents.x-k8s.io/t1 created",
        "sandbox.agents.x-k8s.io/fromstdin unchanged",
    ]
    assert asb.get(asb.path(EXT, "sandboxtemplates", name="t1")).status_code == 200
    # A JSON List is applied item by item.
    lst = {"apiVersion": "v1", "kind": "List", "items": [sandbox("l1"), sandbox("l2")]}
    out = ok(asb, "apply", "-f", "-", input=json.dumps(lst))
    assert out.splitlines() == ["sandbox.agents.x-k8s.io/l1 created", "sandbox.agents.x-k8s.io/l2 created"]


def test_apply_namespace_flag(asb, tmp_path):
    out = ok(asb, "apply", "-n", "team", "-f", "-", input=SANDBOX_YAML.format(name="ns1", app="a"))
    assert out == "sandbox.agents.x-k8s.io/ns1 created\n"
    assert asb.get(asb.path(CORE, "sandboxes", ns="team", name="ns1")).status_code == 200
    assert asb.get(asb.path(CORE, "sandboxes", name="ns1")).status_code == 404
    doc = SANDBOX_YAML.format(name="ns2", app="a").replace("  name: ns2\n", "  name: ns2\n  namespace: other\n")
    p = run(asb, "apply", "-n", "team", "-f", "-", input=doc)
    assert p.returncode == 1 and "does not match the namespace" in p.stderr


def test_apply_bad_yaml_and_bad_objects(asb, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("apiVersion: v1\nkind: Sandbox\nmetadata:\n  name: x\n   bad: indent\n")
    p = run(asb, "apply", "-f", str(bad))
    assert p.returncode == 1
    assert p.stderr.startswith(f"error: error parsing {bad}: yaml: line ")
    assert p.stdout == ""
    # A bad document anywhere applies nothing.
    p = run(asb, "apply", "-f", "-", input=SANDBOX_YAML.format(name="never", app="a") + "---\n- a\n")
    assert p.returncode == 1 and "document 2: expected an object" in p.stderr
    assert asb.get(asb.path(CORE, "sandboxes", name="never")).status_code == 404
    p = run(asb, "apply", "-f", str(tmp_path / "missing.yaml"))
    assert p.returncode == 1 and "cannot be read" in p.stderr
    p = run(asb, "apply", "-f", "-", input="apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n")
    assert p.returncode == 1 and 'no matches for kind "Pod" in version "v1"' in p.stderr
    p = run(asb, "apply", "-f", "-", input="metadata: {name: p}\n")
    assert p.returncode == 1 and "kind not set" in p.stderr
    # Server-side validation: the Status message with the field path.
    inv = SANDBOX_YAML.format(name="inv", app="a").replace("        image: host\n", "")
    p = run(asb, "apply", "-f", "-", input=inv)
    assert p.returncode == 1
    assert p.stderr.startswith('Error from server (Invalid): error when creating "STDIN": ')
    assert "spec.podTemplate.spec.containers[0].image: Required value" in p.stderr
    p = run(asb, "apply")
    assert p.returncode == 2


def make_objects(asb):
    asb.create_sandbox("alpha", labels={"app": "web"})
    asb.create_sandbox("beta", labels={"app": "db"})
    r = asb.merge_patch(asb.path(CORE, "sandboxes", name="alpha", sub="status"),
                        {"status": {"conditions": [{"type": "Ready", "status": "True",
                                                    "reason": "DependenciesReady", "message": "ok",
                                                    "lastTransitionTime": "2026-01-01T00:00:00Z"}]}})
    assert r.status_code == 200, r.text


def test_get_table_and_wide(asb):
    make_objects(asb)
    lines = ok(asb, "get", "sandboxes").splitlines()
    assert lines[0].split() == ["NAME", "READY", "REASON", "AGE"]
    rows = {l.split()[0]: l.split() for l in lines[1:]}
    assert rows["alpha"][1:3] == ["True", "DependenciesReady"]
    assert rows["beta"][1:3] == ["<none>", "<none>"]
    assert rows["alpha"][3].endswith("s")
    # Columns line up: every row's READY starts where the header's does.
    col = lines[0].index("READY")
    assert all(l[col - 3:col] == "   " for l in lines[1:])
    for kind in ("sandbox", "sbx", "Sandbox", "sandboxes.agents.x-k8s.io"):
        assert ok(asb, "get", kind, "alpha").splitlines()[1].split()[0] == "alpha"
    wide = ok(asb, "get", "sbx", "-o", "wide").splitlines()
    assert wide[0].split() == ["NAME", "READY", "REASON", "AGE", "MODE", "SHUTDOWN-TIME", "IP",
                               "NETWORK"]
    assert "Running" in wide[1]
    # No network policy enforcement yet: a local sandbox has loopback only, and says so.
    assert wide[1].split()[-1] == "loopback-only"
    sel = ok(asb, "get", "sbx", "-l", "app=db").splitlines()
    assert [l.split()[0] for l in sel[1:]] == ["beta"]
    assert ok(asb, "get", "sbx", "-o", "name") == \
        "sandbox.agents.x-k8s.io/alpha\nsandbox.agents.x-k8s.io/beta\n"


def test_get_json_and_yaml(asb):
    import yaml as pyyaml
    make_objects(asb)
    lst = json.loads(ok(asb, "get", "sandboxes", "-o", "json"))
    assert lst["kind"] == "List" and lst["apiVersion"] == "v1"
    assert sorted(i["metadata"]["name"] for i in lst["items"]) == ["alpha", "beta"]
    one = json.loads(ok(asb, "get", "sbx", "alpha", "-o", "json"))
    assert one["kind"] == "Sandbox" and one["metadata"]["name"] == "alpha"
    assert one == asb.get(asb.path(CORE, "sandboxes", name="alpha")).json()
    y = ok(asb, "get", "sbx/alpha", "-o", "yaml")
    assert pyyaml.safe_load(y) == one
    assert 'resourceVersion: "' in y
    ylist = pyyaml.safe_load(ok(asb, "get", "sbx", "-o", "yaml"))
    assert ylist["kind"] == "List" and len(ylist["items"]) == 2
    # Empty collection: a List with no items in json; words on stderr for the table.
    assert json.loads(ok(asb, "get", "claims", "-o", "json"))["items"] == []
    p = run(asb, "get", "swp")
    assert p.returncode == 0 and p.stdout == "" and "No resources found in default namespace." in p.stderr


def test_get_other_kinds(asb, tmp_path):
    ok(asb, "apply", "-f", "-", input=TEMPLATE_YAML.format(name="tpl"))
    assert ok(asb, "get", "templates").splitlines()[0].split() == ["NAME", "AGE"]
    assert ok(asb, "get", "template", "-o", "wide").splitlines()[1].split()[2:] == ["host", "loopback-only"]
    pool = {"apiVersion": f"{EXT}/v1beta1", "kind": "SandboxWarmPool", "metadata": {"name": "pool"},
            "spec": {"replicas": 2, "sandboxTemplateRef": {"name": "tpl"}}}
    assert ok(asb, "apply", "-f", "-", input=json.dumps(pool)) == \
        "sandboxwarmpool.extensions.agents.x-k8s.io/pool created\n"
    lines = ok(asb, "get", "swp").splitlines()
    assert lines[0].split() == ["NAME", "READY", "DESIRED", "AGE"]
    # READY comes from the pool's status, which the warm pool controller writes (0: nothing runs
    # with ASB_RUNTIME=none); it may not have written it yet.
    assert lines[1].split()[0] == "pool" and lines[1].split()[1] in ("0", "<none>")
    assert lines[1].split()[2] == "2"
    claim = {"apiVersion": f"{EXT}/v1beta1", "kind": "SandboxClaim", "metadata": {"name": "c1"},
             "spec": {"warmPoolRef": {"name": "pool"}}}
    ok(asb, "apply", "-f", "-", input=json.dumps(claim))
    assert ok(asb, "get", "claims").splitlines()[0].split() == ["NAME", "READY", "SANDBOX", "REASON", "AGE"]
    assert ok(asb, "get", "sandboxclaim", "c1", "-o", "name") == "sandboxclaim.extensions.agents.x-k8s.io/c1\n"


def test_get_not_found_and_usage_errors(asb):
    p = run(asb, "get", "sbx", "nope")
    assert p.returncode == 1 and p.stdout == ""
    assert p.stderr == 'Error from server (NotFound): sandboxes.agents.x-k8s.io "nope" not found\n'
    p = run(asb, "get", "sbx", "nope", "-o", "json")
    assert p.returncode == 1 and "not found" in p.stderr
    p = run(asb, "get", "pods")
    assert p.returncode == 2 and 'doesn\'t have a resource type "pods"' in p.stderr
    p = run(asb, "get", "sbx", "-o", "toml")
    assert p.returncode == 2
    p = run(asb, "get")
    assert p.returncode == 2
    p = run(asb, "frobnicate")
    assert p.returncode == 2


def test_delete(asb):
    asb.create_sandbox("gone")
    assert ok(asb, "delete", "sbx", "gone") == 'sandbox.agents.x-k8s.io "gone" deleted\n'
    assert asb.get(asb.path(CORE, "sandboxes", name="gone")).status_code == 404
    p = run(asb, "delete", "sandbox", "gone")
    assert p.returncode == 1
    assert p.stderr == 'Error from server (NotFound): sandboxes.agents.x-k8s.io "gone" not found\n'
    assert run(asb, "delete", "sandbox", "gone", "--ignore-not-found").returncode == 0
    asb.create_sandbox("a1", ns="team")
    assert ok(asb, "delete", "sandboxes/a1", "-n", "team") == 'sandbox.agents.x-k8s.io "a1" deleted\n'
    ok(asb, "apply", "-f", "-", input=TEMPLATE_YAML.format(name="t9"))
    out = ok(asb, "delete", "-f", "-", input=TEMPLATE_YAML.format(name="t9"))
    assert out == 'sandboxtemplate.extensions.agents.x-k8s.io "t9" deleted\n'
    assert run(asb, "delete", "widgets", "x").returncode == 2
    assert run(asb, "delete", "sbx").returncode == 2


def test_server_discovery_env_flags_and_state_dir(asb, tmp_path):
    asb.create_sandbox("found")
    # State dir (cli_env sets ASB_STATE_DIR only).
    assert "found" in ok(asb, "get", "sbx")
    # ASB_SERVER + ASB_TOKEN, with a state dir that has nothing.
    empty = tmp_path / "empty"
    empty.mkdir()
    env = cli_env(asb, ASB_STATE_DIR=str(empty), ASB_SERVER=asb.url, ASB_TOKEN=asb.token)
    assert "found" in ok(asb, "get", "sbx", env=env)
    # A proxy in the environment is not used for loopback (as Go's ProxyFromEnvironment).
    dead = "http://127.0.0.1:9"
    assert "found" in ok(asb, "get", "sbx", env=cli_env(asb, http_proxy=dead, HTTP_PROXY=dead))
    # --server/--token flags, before or after the verb.
    env = cli_env(asb, ASB_STATE_DIR=str(empty))
    assert "found" in ok(asb, "--server", asb.url, "--token", asb.token, "get", "sbx", env=env)
    assert "found" in ok(asb, "get", "sbx", "--server", asb.url, "--token", asb.token, env=env)
    # HOME's default state dir (~/.local/state/asb) when ASB_STATE_DIR is unset (non-root only).
    if os.geteuid() != 0:
        home = tmp_path / "home"
        (home / ".local" / "state").mkdir(parents=True)
        os.symlink(asb.state_dir, home / ".local" / "state" / "asb")
        env = cli_env(asb, HOME=str(home))
        del env["ASB_STATE_DIR"]
        assert "found" in ok(asb, "get", "sbx", env=env)
    # Nothing configured: a clear error.
    p = run(asb, "get", "sbx", env=env if os.geteuid() != 0 else cli_env(asb, ASB_STATE_DIR=str(empty)))
    if os.geteuid() == 0:
        assert p.returncode == 1 and "no server configured" in p.stderr and str(empty) in p.stderr
    # Wrong token: Unauthorized from the server.
    p = run(asb, "get", "sbx", "--token", "wrong")
    assert p.returncode == 1 and p.stderr.startswith("Error from server (Unauthorized):")
    # Nobody listening.
    p = run(asb, "get", "sbx", "--server", "http://127.0.0.1:1")
    assert p.returncode == 1 and "error: the connection to the server http://127.0.0.1:1 failed" in p.stderr
