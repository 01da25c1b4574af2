"""Events, describe and /metrics with real sandboxes (runc; issue 17): the reconciler records a
start, an expiry and a failed start; `asb describe` shows them with the Ready condition; the
sandbox reconcile histogram fills. Skipped without root or runc, as the other local tests."""
import re
import time

from asb_apiserver import CORE
from asb_cli import ok
from local_sandbox import create, sbx_state, start_sbx, wait_ready  # noqa: F401
from waiting import poll as wait_for

EVENTS = "/apis/events.k8s.io/v1/namespaces/default/events"


def about(asb, name):
    return [e for e in asb.get(EVENTS).json()["items"]
            if e["regarding"]["kind"] == "Sandbox" and e["regarding"]["name"] == name]


def at(seconds_from_now):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + seconds_from_now))


def test_started_expired_and_failed_are_events(start_sbx):
    asb = start_sbx()
    create(asb, "evt", shutdownTime=at(3), shutdownPolicy="Retain")
    wait_ready(asb, "evt")
    started = wait_for(lambda: [e for e in about(asb, "evt") if e["reason"] == "Started"])
    assert started and started[0]["reportingController"] == "asb-serve-reconciler"
    out = ok(asb, "describe", "sandbox", "evt")
    assert re.search(r"^  Ready\s+True\s+", out, re.M), out
    assert re.search(r"^  Normal\s+Started\s+\S+\s+asb-serve-reconciler\s+started its container$",
                     out, re.M), out
    assert wait_for(lambda: [e for e in about(asb, "evt") if e["reason"] == "Expired"], timeout=10)
    # A start that fails (an image that does not exist) is a Warning with the failure's reason.
    create(asb, "bad", image="does-not-exist:1")
    warn = wait_for(lambda: [e for e in about(asb, "bad") if e["type"] == "Warning"], timeout=15)
    assert warn, asb.output()
    assert warn[0]["action"] == "Start" and warn[0]["note"]
    cond = [c for c in asb.get(asb.path(CORE, "sandboxes", name="bad")).json()["status"]["conditions"]
            if c["type"] == "Ready"][0]
    assert warn[0]["reason"] == cond["reason"]
    text = asb.get("/metrics").text
    count = re.search(r'^asb_reconcile_duration_seconds_count\{controller="sandboxes"\} (\d+)$', text,
                      re.M)
    assert count and int(count.group(1)) >= 2, text
    errors = re.search(r'^asb_reconcile_errors_total\{controller="sandboxes"\} (\d+)$', text, re.M)
    assert errors and int(errors.group(1)) >= 1, text
    # The expired one (Retain) and the one that cannot start are both Stopped for libasb.
    assert re.search(r'^asb_sandboxes\{phase="Stopped"\} 2$', text, re.M), text


def test_image_unpack_is_pulling_then_pulled(start_sbx, tmp_path):
    import pytest
    from test_local_sandbox_oci import UMOCI, build_layout
    if not UMOCI:
        pytest.skip("umoci is not installed (scripts/deps.sh)")
    layout = build_layout(tmp_path)
    asb = start_sbx()
    create(asb, "img", image=f"oci:{layout}:t")
    wait_ready(asb, "img", timeout=60)
    evs = wait_for(lambda: [e for e in about(asb, "img") if e["reason"] in ("Pulling", "Pulled")])
    assert [e["reason"] for e in sorted(evs, key=lambda e: e["eventTime"])] == ["Pulling", "Pulled"]
    assert evs[0]["action"] == "Pull" and str(layout) in evs[0]["note"]
    pulled = [e for e in evs if e["reason"] == "Pulled"][0]
    assert re.search(r"ready in \d+\.\d{3}s$", pulled["note"]), pulled["note"]


def claim_on_a_terminal(asb, *args):
    """`asb claim ARGS` with stdout on a pseudo-terminal: (exit code, stderr)."""
    import os
    import pty
    import subprocess
    from asb_apiserver import SANITIZER_EXIT_CODES, asb_binary
    from asb_cli import cli_env
    master, slave = pty.openpty()
    try:
        p = subprocess.run([asb_binary(), "claim", *args], stdout=slave, stderr=subprocess.PIPE,
                           text=True, env=cli_env(asb), timeout=180)
    finally:
        os.close(slave)
        os.close(master)
    assert p.returncode not in SANITIZER_EXIT_CODES, p.stderr
    return p.returncode, p.stderr


def test_claim_on_a_terminal_tells_the_image_pull(start_sbx, tmp_path):
    """A cold claim whose image must be unpacked: on a terminal `asb claim` tells the Pulling and
    Pulled steps of its sandbox as the reconciler records them (a named claim, and a generated
    name learnt while waiting); with stdout a pipe it says nothing of them."""
    import pytest
    from asb_cli import run
    from claims_helpers import EXT, create as create_obj, pool, template
    from test_local_sandbox_oci import UMOCI, build_layout
    if not UMOCI:
        pytest.skip("umoci is not installed (scripts/deps.sh)")
    asb = start_sbx()
    images = {}
    for p in ("named", "generated", "piped"):  # an image each: each claim unpacks its own
        (tmp_path / p).mkdir()
        images[p] = f"oci:{build_layout(tmp_path / p, tag=p)}:{p}"
        create_obj(asb, EXT, "sandboxtemplates", template(f"{p}-tpl", image=images[p]))
        create_obj(asb, EXT, "sandboxwarmpools", pool(p, f"{p}-tpl", replicas=0))
    code, err = claim_on_a_terminal(asb, "--pool", "named", "--name", "cold1", "--timeout", "120s")
    assert code == 0, err
    pulling = re.search(rf'^claim cold1: Pulling: unpacking image "{re.escape(images["named"])}"$',
                        err, re.M)
    pulled = re.search(rf'^claim cold1: Pulled: image "{re.escape(images["named"])}" ready in '
                       r'\d+\.\d{3}s$', err, re.M)
    ready = re.search(r"^claim cold1 ready in [\d.]+ ms \(sandbox cold1\), served cold", err, re.M)
    assert pulling and pulled and ready, err
    assert pulling.start() < pulled.start() < ready.start(), err
    code, err = claim_on_a_terminal(asb, "--pool", "generated", "--timeout", "120s")
    assert code == 0, err
    assert re.search(r"^claim (sandbox-claim-\w+): Pulling: unpacking image "
                     rf'"{re.escape(images["generated"])}"$', err, re.M), err
    p = run(asb, "claim", "--pool", "piped", "--timeout", "120s", timeout=180)
    assert p.returncode == 0, p.stderr
    assert "Pulling" not in p.stderr and "Pulled" not in p.stderr and "waiting" not in p.stderr
    assert p.stdout.strip().startswith("sandbox-claim-"), p.stdout
    evs = wait_for(lambda: [e for e in about(asb, p.stdout.strip()) if e["reason"] == "Pulled"])
    assert evs, "the piped claim's sandbox unpacked its image too (recorded, not printed)"
    # /metrics: three claims served cold, none warm
    assert asb.metric("asb_claim_ready_seconds_count", '{launch_type="cold"}') == 3
    assert asb.metric("asb_claim_ready_seconds_bucket", '{launch_type="cold",le="+Inf"}') == 3
    assert asb.metric("asb_claim_ready_seconds_count", '{launch_type="warm"}') == 0


def test_metrics_of_a_warm_pool_and_a_warm_claim(start_sbx):
    """Pool ready/desired gauges follow the pool; a claim served from it is observed in the
    claim latency histogram as warm; sandboxes by phase count the Ready ones."""
    from asb_cli import ok as cli_ok
    from claims_helpers import EXT, create as create_obj, pool, template, wait_pool_ready
    asb = start_sbx()
    labels = '{namespace="default",warmpool="wp"}'
    create_obj(asb, EXT, "sandboxtemplates", template("wp-tpl"))
    create_obj(asb, EXT, "sandboxwarmpools", pool("wp", "wp-tpl", replicas=2))
    assert asb.metric("asb_warmpool_desired_replicas", labels) == 2
    wait_pool_ready(asb, "wp", 2, timeout=90)
    assert wait_for(lambda: asb.metric("asb_warmpool_ready_replicas", labels) == 2), asb.output()
    assert asb.metric("asb_sandboxes", '{phase="Ready"}') == 2
    name = cli_ok(asb, "claim", "--pool", "wp", "--timeout", "60s").strip()
    assert asb.metric("asb_claim_ready_seconds_count", '{launch_type="warm"}') == 1
    assert asb.metric("asb_claim_ready_seconds_sum", '{launch_type="warm"}') > 0
    assert asb.metric("asb_claim_ready_seconds_count", '{launch_type="cold"}') == 0
    # The router counts what a sandbox answered (the relayed response head) with its latency.
    import os
    import requests
    router = open(os.path.join(asb.state_dir, "router")).read().strip()
    ok0 = asb.metric("asb_router_requests_total", '{code="200"}')
    missing0 = asb.metric("asb_router_requests_total", '{code="404"}')
    timed0 = asb.metric("asb_router_request_duration_seconds_count")
    h = {"Authorization": f"Bearer {asb.token}", "X-Sandbox-ID": name}
    with requests.Session() as s:
        assert s.get(router + "/v1/health", headers=h, timeout=10).status_code == 200
        r = s.get(router + "/v1/files/no-such-file", headers=h, timeout=10)
        assert r.status_code == 404, r.text  # sandboxd's own 404, relayed
    assert asb.metric("asb_router_requests_total", '{code="200"}') - ok0 == 1
    assert asb.metric("asb_router_requests_total", '{code="404"}') - missing0 == 1
    assert asb.metric("asb_router_request_duration_seconds_count") - timed0 == 2
    # the pool replenishes: 2 Ready members again, and the claimed one Ready besides
    assert wait_for(lambda: asb.metric("asb_warmpool_ready_replicas", labels) == 2, timeout=60)
    assert wait_for(lambda: asb.metric("asb_sandboxes", '{phase="Ready"}') == 3, timeout=60), name


def test_beyond_the_machine_is_unschedulable_or_warned(start_sbx, sbx_state):  # noqa: F811
    """Requests beyond the machine are not started (Ready=False, Unschedulable, the scheduler's
    message); limits beyond it run, with a Warning event (issue 31)."""
    from local_sandbox import runc_ids
    asb = start_sbx()
    uid = create(asb, "toobig", container={"resources": {"requests": {"cpu": "4096"}}})["metadata"]["uid"]
    obj = wait_ready(asb, "toobig", want="False", reason="Unschedulable")
    cond = [c for c in obj["status"]["conditions"] if c["type"] == "Ready"][0]
    assert cond["message"].startswith("0/1 nodes are available: 1 Insufficient cpu (requests.cpu "
                                      "4096, this machine has "), cond
    assert uid not in runc_ids(sbx_state)
    create(asb, "roomy", container={"resources": {"limits": {"memory": "100Ti"}}})
    wait_ready(asb, "roomy")
    warn = wait_for(lambda: [e for e in about(asb, "roomy") if e["reason"] == "LimitAboveCapacity"])
    assert warn and warn[0]["type"] == "Warning", about(asb, "roomy")
    assert warn[0]["note"].startswith("limits.memory 100Ti is more than this machine has ("), warn
    # ... and the status says which limits the machine is the real one of.
    res = wait_for(lambda: (asb.get(asb.path(CORE, "sandboxes", name="roomy")).json()["status"]
                            .get("resources") or {}).get("beyondCapacity"))
    assert res == ["memory"], res
