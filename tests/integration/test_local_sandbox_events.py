"""Events, describe and /metrics with real sandboxes (runc; issue 17): the reconciler records a
start, an expiry and a failed start; `asb describe` shows them with the Ready condition; the
sandbox reconcile histogram fills. Skipped without root or runc, as the other local tests."""
import re
import time

from asb_apiserver import CORE
from asb_cli import ok
from local_sandbox import create, sbx_state, start_sbx, wait_ready  # noqa: F401

EVENTS = "/apis/events.k8s.io/v1/namespaces/default/events"


def about(asb, name):
    return [e for e in asb.get(EVENTS).json()["items"]
            if e["regarding"]["kind"] == "Sandbox" and e["regarding"]["name"] == name]


def wait_for(cond, timeout=10):
    """cond()'s first truthy value within timeout, else its last value."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = cond()
        if v:
            return v
        time.sleep(0.05)
    return cond()


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
