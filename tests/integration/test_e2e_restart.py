"""A user restarts `asb serve`: the pool, its warm members and a bound claim survive, the warm
queue is rebuilt (the next claim is still adopted warm), and the router serves the old claim's
sandbox. Also a pool and claims in a namespace other than default."""
import os

import requests

from asb_apiserver import CORE, EXT
from asb_cli import ok
from claims_helpers import claim, create, get, items, pool, template, wait_claim, wait_pool_ready
from local_sandbox import sbx_state, start_sbx  # noqa: F401  (fixtures)


def test_restart_keeps_pool_and_claims(start_sbx):
    asb = start_sbx()
    create(asb, EXT, "sandboxtemplates", template("tpl"))
    create(asb, EXT, "sandboxwarmpools", pool("wp", "tpl", replicas=2))
    wait_pool_ready(asb, "wp", 2)
    c = create(asb, EXT, "sandboxclaims", claim("before", "wp"))
    sname = wait_claim(asb, "before")["status"]["sandbox"]["name"]
    ok(asb, "exec", "before", "--", "sh", "-c", "echo kept > k.txt")
    warm = {m["metadata"]["name"] for m in wait_pool_ready(asb, "wp", 2)}
    assert asb.stop() == 0
    asb2 = start_sbx()
    ms = wait_pool_ready(asb2, "wp", 2)
    assert {m["metadata"]["name"] for m in ms} == warm  # the same warm members, not recreated
    c = get(asb2, EXT, "sandboxclaims", "before")
    assert c["status"]["sandbox"]["name"] == sname
    router = open(os.path.join(asb2.state_dir, "router")).read().strip()
    r = requests.get(router + "/v1/files/k.txt", headers={"Authorization": f"Bearer {asb2.token}",
                                                          "X-Sandbox-ID": sname}, timeout=30)
    assert r.status_code == 200 and r.content == b"kept\n", (r.status_code, r.text)
    create(asb2, EXT, "sandboxclaims", claim("after", "wp"))
    after = wait_claim(asb2, "after", timeout=30)["status"]["sandbox"]["name"]
    assert after in warm, (after, warm)  # adopted warm after the restart, not created cold
    wait_pool_ready(asb2, "wp", 2)  # refilled behind the new claim
    assert len(items(asb2, CORE, "sandboxes")) == 4


def test_other_namespace(start_sbx):
    asb = start_sbx()
    create(asb, EXT, "sandboxtemplates", template("tpl"), ns="team-a")
    create(asb, EXT, "sandboxwarmpools", pool("wp", "tpl", replicas=1), ns="team-a")
    # A claim in default for a pool that only exists in team-a is not served from it.
    create(asb, EXT, "sandboxclaims", claim("wrongns", "wp"))
    wait_claim(asb, "wrongns", reason="WarmPoolNotFound", timeout=10)
    create(asb, EXT, "sandboxclaims", claim("c", "wp"), ns="team-a")

    def ready_claim():
        r = asb.get(asb.path(EXT, "sandboxclaims", "team-a", "c"))
        conds = (r.json().get("status") or {}).get("conditions") or []
        return r.json() if any(x["type"] == "Ready" and x["status"] == "True" for x in conds) else None
    from claims_helpers import wait_for
    c = wait_for("claim team-a/c Ready", ready_claim, 60, 0.05, asb)
    sname = c["status"]["sandbox"]["name"]
    assert ok(asb, "exec", "-n", "team-a", "c", "--", "echo", "hi") == "hi\n"
    router = open(os.path.join(asb.state_dir, "router")).read().strip()
    h = {"Authorization": f"Bearer {asb.token}", "X-Sandbox-ID": sname}
    r = requests.get(router + "/v1/files/", headers={**h, "X-Sandbox-Namespace": "team-a"}, timeout=30)
    assert r.status_code == 200, r.text
    r = requests.get(router + "/v1/files/", headers=h, timeout=30)
    assert r.status_code == 404, r.text
