"""End to end with real runc sandboxes: a template and a warm pool of 2, `asb claim` served warm
(an adopted pool member, not a new container), the sandbox verbs on the claim name, libasb's
claim + Execute through the handle, release, and the pool refilled."""
import os
import subprocess
import time

import pytest

from asb_apiserver import CORE, EXT
from asb_cli import ok, run
from local_sandbox import runtime_available, sbx_state, start_sbx  # noqa: F401 (fixtures)
from test_libasb_claims import claims, kv, probe, run_probe, wait_gone  # noqa: F401

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def members(asb, ready_only=True):
    r = asb.get(asb.path(CORE, "sandboxes", "default"))
    out = []
    for s in r.json()["items"]:
        conds = (s.get("status") or {}).get("conditions") or []
        if not s["metadata"]["name"].startswith("python-pool-"):
            continue
        if (s["metadata"].get("labels") or {}).get("agents.x-k8s.io/warm-pool-sandbox") is None:
            continue  # adopted: no longer a pool member
        if ready_only and not any(c["type"] == "Ready" and c["status"] == "True" for c in conds):
            continue
        out.append(s["metadata"]["name"])
    return out


def wait_pool_full(asb, n=2, timeout=30):
    deadline = time.monotonic() + timeout
    while len(members(asb)) < n:
        assert time.monotonic() < deadline, f"pool not refilled: {members(asb, False)}\n{asb.output()}"
        time.sleep(0.05)
    return members(asb)


@pytest.fixture
def pool(start_sbx):
    asb = start_sbx()
    ok(asb, "apply", "-f", os.path.join(ROOT, "examples", "warm-pool-python.yaml"))
    wait_pool_full(asb)
    return asb


def test_claim_served_warm_exec_release_refill(pool, tmp_path):
    asb = pool
    before = set(wait_pool_full(asb))
    p = run(asb, "claim", "--pool", "python-pool")
    assert p.returncode == 0, p.stderr
    sbx = p.stdout.strip()
    assert sbx in before  # served warm: an existing Ready member was adopted
    (claim,) = claims(asb)
    assert f"claim {claim} ready in" in p.stderr
    # The sandbox verbs take the claim name as well as the sandbox name.
    assert ok(asb, "exec", claim, "--", "python3", "-c", "import os; print(os.environ['GREETING'])") == \
        "hello from a warm sandbox\n"
    assert ok(asb, "exec", sbx, "--", "echo", "by-name") == "by-name\n"
    src = tmp_path / "in.txt"
    src.write_text("copied\n")
    ok(asb, "cp", str(src), f"{claim}:in.txt")
    assert "in.txt" in ok(asb, "ls", claim)
    ok(asb, "cp", f"{claim}:in.txt", str(tmp_path / "out.txt"))
    assert (tmp_path / "out.txt").read_text() == "copied\n"
    row = next(l.split() for l in ok(asb, "get", "claims").splitlines() if l.startswith(claim))
    assert row[1] == "True" and row[2] == sbx
    # The pool refills to 2 while the claim holds its sandbox.
    wait_pool_full(asb)
    assert sbx not in members(asb)
    ok(asb, "release", "--wait", claim)
    deadline = time.monotonic() + 30
    while asb.get(asb.path(CORE, "sandboxes", "default", sbx)).status_code != 404:
        assert time.monotonic() < deadline, "claimed sandbox not deleted with its claim"
        time.sleep(0.05)
    assert len(wait_pool_full(asb)) == 2


def test_libasb_claim_execute_and_close(pool, probe):  # noqa: F811
    asb = pool
    wait_pool_full(asb)
    out = kv(run_probe(probe, asb, "create", "python-pool", "30000", "xfc").stdout)
    assert out["exec"] == "0 hello-42"
    assert out["read"] == "via-handle"
    assert out["close"] == "0"
    wait_gone(asb, out["claim"])
    # Disconnect keeps it; attach from another process reaches the same sandbox.
    out = kv(run_probe(probe, asb, "create", "python-pool", "30000", "x").stdout)
    again = kv(run_probe(probe, asb, "attach", out["claim"], "30000", "xc").stdout)
    assert again["sandbox"] == out["sandbox"] and again["exec"] == "0 hello-42"
    wait_gone(asb, out["claim"])


def test_libasb_claim_through_the_router(pool, probe):  # noqa: F811
    """The data plane through the router of `asb serve` (REST and gRPC on one TCP port), its URL
    found in $ASB_STATE_DIR/router. Skipped when this build's `asb serve` has no router."""
    asb = pool
    if not os.path.exists(os.path.join(asb.state_dir, "router")):
        pytest.skip("asb serve wrote no router URL (router not built in)")
    wait_pool_full(asb)
    out = kv(run_probe(probe, asb, "create", "python-pool", "30000", "rxfc").stdout)
    assert out["exec"] == "0 hello-42"
    assert out["read"] == "via-handle"
    wait_gone(asb, out["claim"])


def test_claim_from_a_pool_that_does_not_exist_fails_at_once(start_sbx):
    """Issue 31: WarmPoolNotFound ends `asb claim` at once with the reason and message (it used to
    wait out its 180 s timeout); the controller itself keeps looking for the pool."""
    asb = start_sbx()
    start = time.monotonic()
    p = run(asb, "claim", "--pool", "nosuchpool")
    assert p.returncode != 0 and time.monotonic() - start < 20, (p.returncode, p.stderr)
    assert "WarmPoolNotFound" in p.stderr and "nosuchpool" in p.stderr, p.stderr
