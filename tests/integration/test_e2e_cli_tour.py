"""README.md's local-control-plane tour and docs/cli.md's claim verbs, run command by command as
documented (only paths adapted: a temporary state dir, the repo's examples/)."""
import os
import re
import time

import requests

from asb_apiserver import ROOT
from asb_cli import ok, run
from local_sandbox import sbx_state, start_sbx  # noqa: F401  (fixtures)

EX = os.path.join(ROOT, "examples")


def table(out):
    lines = [ln for ln in out.splitlines() if ln.strip()]
    head = lines[0].split()
    return head, [ln.split() for ln in lines[1:]]


def test_readme_tour(start_sbx, tmp_path):
    asb = start_sbx()
    out = ok(asb, "apply", "-f", os.path.join(EX, "sandbox-python.yaml"))
    assert "sandbox.agents.x-k8s.io/python-demo created" in out, out
    out = ok(asb, "wait", "--for=condition=Ready", "sandbox/python-demo")
    assert "sandbox.agents.x-k8s.io/python-demo condition met" in out
    assert ok(asb, "exec", "python-demo", "--", "python3", "-c", "print(6 * 7)") == "42\n"
    readme = os.path.join(ROOT, "README.md")
    ok(asb, "cp", readme, "python-demo:notes/README.md")
    assert "README.md" in ok(asb, "ls", "python-demo:notes")
    ok(asb, "suspend", "python-demo")
    ok(asb, "resume", "python-demo")
    router = open(os.path.join(asb.state_dir, "router")).read().strip()
    r = requests.get(router + "/v1/files/notes/",
                     headers={"Authorization": f"Bearer {asb.token}", "X-Sandbox-ID": "python-demo"},
                     timeout=30)
    assert r.status_code == 200, r.text
    assert "README.md" in r.text
    head, rows = table(ok(asb, "get", "sandboxes", "-o", "wide"))
    assert head[:4] == ["NAME", "READY", "REASON", "AGE"], head
    assert rows[0][0] == "python-demo"
    out = ok(asb, "delete", "sandbox", "python-demo")
    assert 'sandbox.agents.x-k8s.io "python-demo" deleted' in out

    out = ok(asb, "apply", "-f", os.path.join(EX, "warm-pool-python.yaml"))
    assert "sandboxtemplate.extensions.agents.x-k8s.io/python created" in out, out
    assert "sandboxwarmpool.extensions.agents.x-k8s.io/python-pool created" in out, out
    out = ok(asb, "wait", "--for=jsonpath={.status.readyReplicas}=2", "sandboxwarmpool/python-pool",
             "--timeout", "120s")
    assert "sandboxwarmpool.extensions.agents.x-k8s.io/python-pool condition met" in out, out
    p = run(asb, "claim", "--pool", "python-pool")
    assert p.returncode == 0, p.stderr
    sbx = p.stdout.strip()
    m = re.match(r"claim (\S+) ready in [0-9.]+ ms \(sandbox (\S+)\), served warm ",
                 p.stderr.strip().splitlines()[-1])
    assert m, p.stderr
    claim, sbx2 = m.groups()
    assert sbx2 == sbx and claim.startswith("sandbox-claim-")
    assert ok(asb, "exec", sbx, "--", "python3", "-c", "print(6 * 7)") == "42\n"
    assert ok(asb, "exec", claim, "--", "sh", "-c", "echo $GREETING") == "hello from a warm sandbox\n"
    head, rows = table(ok(asb, "get", "claims"))
    assert head == ["NAME", "READY", "SANDBOX", "LATENCY", "REASON", "AGE"], head
    row = [r for r in rows if r[0] == claim][0]
    assert row[1] == "True" and row[2] == sbx and re.match(r"^[0-9.]+(ms|s)$", row[3]), row
    head, rows = table(ok(asb, "get", "warmpools"))
    assert head == ["NAME", "READY", "DESIRED", "TEMPLATE", "AGE"], head
    assert rows[0][0] == "python-pool" and rows[0][2] == "2" and rows[0][3] == "python"
    head, rows = table(ok(asb, "get", "claims", "-o", "wide"))
    assert head[-2:] == ["TEMPLATE", "WARMPOOL"], head
    out = ok(asb, "release", sbx)  # README: `asb release "$sbx"` releases the claim holding it
    assert f'sandboxclaim.extensions.agents.x-k8s.io "{claim}" released' in out, out
    # The pool refills to 2 and the claimed sandbox is gone.
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        _, rows = table(ok(asb, "get", "warmpools"))
        names = ok(asb, "get", "sandboxes", "-o", "name")
        if rows[0][1] == "2" and sbx not in names:
            break
        time.sleep(0.1)
    else:
        raise AssertionError(f"pool not refilled: {rows} {names}")
    p = run(asb, "exec", sbx, "--", "true")
    assert p.returncode == 1 and f'sandbox "{sbx}" not found' in p.stderr, p.stderr


def test_claim_errors_documented(start_sbx):
    asb = start_sbx()
    # A pool that does not exist: exit 1 at once (not at the timeout), the reason, no claim left.
    p = run(asb, "claim", "--pool", "nope", "--name", "c", "--timeout", "60s")
    assert p.returncode == 1
    assert "error: claim failed: claim c failed: WarmPoolNotFound" in p.stderr, p.stderr
    p = run(asb, "get", "claims")
    assert "No resources found in default namespace." in p.stderr, (p.stdout, p.stderr)
    p = run(asb, "exec", "ghost", "--", "true")
    assert p.returncode == 1
    assert 'error: sandbox "ghost" not found in namespace "default" (no Sandbox or SandboxClaim of that name)' in p.stderr, p.stderr


def test_claim_verbs(start_sbx):
    import signal
    import subprocess
    from concurrent.futures import ThreadPoolExecutor
    from asb_apiserver import asb_binary
    from asb_cli import cli_env
    asb = start_sbx()
    ok(asb, "apply", "-f", os.path.join(EX, "warm-pool-python.yaml"))
    # Concurrent CLI claims against a pool of 2: every one gets its own sandbox.
    with ThreadPoolExecutor(5) as ex:
        ps = list(ex.map(lambda i: run(asb, "claim", "--pool", "python-pool", "--name", f"cc{i}"), range(5)))
    names = [p.stdout.strip() for p in ps]
    assert all(p.returncode == 0 for p in ps), [p.stderr for p in ps]
    assert len(set(names)) == 5, names
    out = ok(asb, "wait", "--for=condition=Ready", "claim/cc0")
    assert "cc0 condition met" in out, out
    out = ok(asb, "extend", "cc0", "--ttl", "10m")
    assert out.strip() == "sandboxclaim.extensions.agents.x-k8s.io/cc0 extended by 600s", out
    head, rows = table(ok(asb, "get", "warmpools", "-o", "wide"))
    assert head[-2:] == ["REPLICAS", "STRATEGY"] and rows[0][-1] == "OnReplenish", (head, rows)
    out = ok(asb, "release", "-w", *[f"cc{i}" for i in range(5)])
    assert out.count("released") == 5, out
    # The claims are gone; their sandboxes follow once torn down (a deleted Sandbox stays
    # visible with a deletionTimestamp until its container is gone).
    deadline = time.monotonic() + 30
    while True:
        left = ok(asb, "get", "sandboxes", "-o", "name")
        if not any(n in left for n in names) or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert not any(n in left for n in names), left
    # Ctrl-C while waiting rolls the claim back (a pool whose one member never gets Ready: the
    # claim waits).
    ok(asb, "apply", "-f", "-", input=STUCK_POOL_YAML)
    p = subprocess.Popen([asb_binary(), "claim", "--pool", "stuck", "--name", "intr"], env=cli_env(asb),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and "intr" not in ok(asb, "get", "claims", "-o", "name"):
        time.sleep(0.05)
    p.send_signal(signal.SIGINT)
    p.communicate(timeout=10)
    assert p.returncode == -signal.SIGINT, p.returncode
    assert "intr" not in ok(asb, "get", "claims", "-o", "name")


# A pool whose sandboxes never become Ready (their image does not exist): claims on it wait.
STUCK_POOL_YAML = """\
apiVersion: extensions.agents.x-k8s.io/v1beta1
kind: SandboxTemplate
metadata:
  name: stuck
spec:
  podTemplate:
    spec:
      containers:
      - name: main
        image: dir:/nonexistent/stuck-image
---
apiVersion: extensions.agents.x-k8s.io/v1beta1
kind: SandboxWarmPool
metadata:
  name: stuck
spec:
  replicas: 1
  sandboxTemplateRef:
    name: stuck
"""

CLAIM_YAML = """\
apiVersion: extensions.agents.x-k8s.io/v1beta1
kind: SandboxClaim
metadata:
  name: applied
  labels:
    team: qa
spec:
  warmPoolRef:
    name: python-pool
"""


def test_reapply_claim_manifest_keeps_binding(start_sbx, tmp_path):
    """kubectl-style GitOps: the same claim manifest applied twice must not re-adopt or lose the
    bound sandbox (the controller's annotations are not in the manifest)."""
    asb = start_sbx()
    ok(asb, "apply", "-f", os.path.join(EX, "warm-pool-python.yaml"))
    f = tmp_path / "claim.yaml"
    f.write_text(CLAIM_YAML)
    ok(asb, "apply", "-f", str(f))
    ok(asb, "wait", "--for=condition=Ready", "claim/applied", "--timeout", "60s")
    import json
    c1 = json.loads(ok(asb, "get", "claim", "applied", "-o", "json"))
    sbx = c1["status"]["sandbox"]["name"]
    out = ok(asb, "apply", "-f", str(f))
    assert "applied" in out
    time.sleep(1.5)  # the point: the re-apply rebinds nothing in the meantime
    c2 = json.loads(ok(asb, "get", "claim", "applied", "-o", "json"))
    assert c2["status"]["sandbox"]["name"] == sbx
    assert c2["metadata"]["annotations"].get("agents.x-k8s.io/sandbox-name") == sbx, c2["metadata"]
    head, rows = table(ok(asb, "get", "claims"))
    assert rows[0][1] == "True" and rows[0][2] == sbx
    sbs = json.loads(ok(asb, "get", "sandboxes", "-o", "json"))["items"]
    owned = [s for s in sbs if any(r["kind"] == "SandboxClaim" for r in s["metadata"].get("ownerReferences") or [])]
    assert [s["metadata"]["name"] for s in owned] == [sbx]
