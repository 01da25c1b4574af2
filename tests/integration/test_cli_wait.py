"""`asb wait` against a real `asb serve`: a condition set from another thread through the /status
subresource ends the wait at once (watch, not polling), timeouts and deletion."""
import threading
import time

from asb_apiserver import CORE, asb, start_asb  # noqa: F401 (fixtures)
from asb_cli import ok, run


def set_ready(asb, name, status="True", ns="default", reason="DependenciesReady", message="",
              group=CORE, plural="sandboxes"):
    r = asb.merge_patch(asb.path(group, plural, ns=ns, name=name, sub="status"),
                        {"status": {"conditions": [{"type": "Ready", "status": status,
                                                    "reason": reason, "message": message,
                                                    "lastTransitionTime": "2026-01-01T00:00:00Z"}]}})
    assert r.status_code == 200, r.text


def test_wait_ready_returns_promptly_after_status_change(asb):
    asb.create_sandbox("w1")
    changed_at = {}

    def later():
        time.sleep(1.0)  # the point: the change comes while `asb wait` is blocked
        set_ready(asb, "w1", "False")  # not yet
        time.sleep(0.3)
        changed_at["t"] = time.monotonic()
        set_ready(asb, "w1", "True")

    t = threading.Thread(target=later)
    t.start()
    start = time.monotonic()
    p = run(asb, "wait", "--for=condition=Ready", "sandbox/w1", "--timeout", "30s")
    end = time.monotonic()
    t.join()
    assert p.returncode == 0, p.stderr
    assert p.stdout == "sandbox.agents.x-k8s.io/w1 condition met\n"
    assert end - start >= 1.2
    # Returned right after the write (process exit included), not after a poll interval.
    assert end - changed_at["t"] < 0.5, end - changed_at["t"]


def test_wait_already_true_and_other_forms(asb):
    asb.create_sandbox("w2")
    set_ready(asb, "w2")
    assert ok(asb, "wait", "--for=condition=Ready", "sbx/w2") == "sandbox.agents.x-k8s.io/w2 condition met\n"
    assert ok(asb, "wait", "--for", "condition=ready=true", "sandboxes", "w2", "--timeout=5s")
    p = run(asb, "wait", "--for=condition=Ready=False", "sbx/w2", "--timeout", "0")
    assert p.returncode == 1 and "timed out" in p.stderr


def test_wait_timeout(asb):
    asb.create_sandbox("w3")
    start = time.monotonic()
    p = run(asb, "wait", "--for=condition=Ready", "sbx/w3", "--timeout", "700ms")
    took = time.monotonic() - start
    assert p.returncode == 1
    assert p.stderr == "error: timed out waiting for the condition on sandboxes/w3\n"
    assert 0.6 < took < 5, took


def test_wait_stops_on_a_terminal_condition(asb):
    """Issue 31: a Sandbox that will not become Ready without a spec change (ImageNotSupported)
    ends the wait at once with that reason and message, not at the timeout."""
    asb.create_sandbox("w7")
    threading.Timer(0.5, set_ready, (asb, "w7", "False"),
                    {"reason": "ImageNotSupported", "message": "image \"nope\" is not one this "
                     "asb serve runs"}).start()
    start = time.monotonic()
    p = run(asb, "wait", "--for=condition=Ready", "sandbox/w7", "--timeout", "30s")
    assert p.returncode == 1 and time.monotonic() - start < 10
    assert p.stderr == ('error: Sandbox "w7" will not become Ready: ImageNotSupported: image '
                        '"nope" is not one this asb serve runs\n'), p.stderr
    # Already terminal: at once, too; waiting for Ready=False is met as ever.
    p = run(asb, "wait", "--for=condition=Ready", "sandbox/w7", "--timeout", "30s")
    assert p.returncode == 1 and "will not become Ready: ImageNotSupported" in p.stderr
    ok(asb, "wait", "--for=condition=Ready=False", "sandbox/w7", "--timeout", "5s")


def test_wait_timeout_says_what_it_saw_last(asb):
    asb.create_sandbox("w8")
    set_ready(asb, "w8", "False", reason="DependenciesNotReady", message="sandboxd not up yet")
    p = run(asb, "wait", "--for=condition=Ready", "sbx/w8", "--timeout", "700ms")
    assert p.returncode == 1
    assert p.stderr == ("error: timed out waiting for the condition on sandboxes/w8; last seen: "
                        "Ready=False DependenciesNotReady: sandboxd not up yet\n"), p.stderr


def test_wait_not_found_and_usage(asb):
    p = run(asb, "wait", "--for=condition=Ready", "sbx/missing", "--timeout", "5s")
    assert p.returncode == 1
    assert p.stderr == 'Error from server (NotFound): sandboxes.agents.x-k8s.io "missing" not found\n'
    assert run(asb, "wait", "sbx/x").returncode == 2
    assert run(asb, "wait", "--for=jsonpath-ish=x", "sbx/x").returncode == 2
    # --for=jsonpath is a real wait (kubectl's relaxed "x" is ".x"): a missing object is NotFound.
    p = run(asb, "wait", "--for=jsonpath=x", "sbx/x")
    assert p.returncode == 1 and 'sandboxes.agents.x-k8s.io "x" not found' in p.stderr, p.stderr
    assert run(asb, "wait", "--for=condition=Ready", "pods/x").returncode == 2
    assert run(asb, "wait", "--for=condition=Ready", "sbx/x", "--timeout", "soon").returncode == 2


def test_wait_for_delete(asb):
    asb.create_sandbox("w4")
    assert ok(asb, "wait", "--for=delete", "sbx/nothere") == "sandbox.agents.x-k8s.io/nothere condition met\n"
    deleted_at = {}

    def later():
        time.sleep(0.8)
        deleted_at["t"] = time.monotonic()
        assert asb.delete(asb.path(CORE, "sandboxes", name="w4")).status_code == 200

    t = threading.Thread(target=later)
    t.start()
    p = run(asb, "wait", "--for=delete", "sbx/w4", "--timeout", "20s")
    end = time.monotonic()
    t.join()
    assert p.returncode == 0, p.stderr
    assert end - deleted_at["t"] < 0.5


def test_wait_condition_object_deleted_while_waiting(asb):
    asb.create_sandbox("w5")
    t = threading.Timer(0.5, lambda: asb.delete(asb.path(CORE, "sandboxes", name="w5")))
    t.start()
    p = run(asb, "wait", "--for=condition=Ready", "sbx/w5", "--timeout", "20s")
    t.join()
    assert p.returncode == 1 and "deleted while waiting" in p.stderr


def test_wait_namespace(asb):
    asb.create_sandbox("w6", ns="team")
    threading.Timer(0.3, lambda: set_ready(asb, "w6", ns="team")).start()
    assert ok(asb, "wait", "-n", "team", "--for=condition=Ready", "sbx/w6", "--timeout", "20s")


def test_wait_several_objects(asb):
    """Issue 32: `sandbox/a sandbox/b`, `sandbox a b`, --all and -l; a bad form names the form."""
    for n, app in (("m1", "web"), ("m2", "web"), ("m3", "db")):
        asb.create_sandbox(n, labels={"app": app})
    set_ready(asb, "m1")
    set_ready(asb, "m2")
    met = "sandbox.agents.x-k8s.io/{} condition met\n"
    assert ok(asb, "wait", "--for=condition=Ready", "sandbox/m1", "sbx/m2") == met.format("m1") + met.format("m2")
    assert ok(asb, "wait", "--for=condition=Ready", "sandbox", "m2", "m1") == met.format("m2") + met.format("m1")
    assert ok(asb, "wait", "--for=condition=Ready", "sandbox", "-l", "app=web") == met.format("m1") + met.format("m2")
    # --all: m3 never gets Ready; the others are met, then the timeout for m3, exit 1.
    p = run(asb, "wait", "--for=condition=Ready", "sandboxes", "--all", "--timeout", "700ms")
    assert p.returncode == 1 and p.stdout == met.format("m1") + met.format("m2")
    assert p.stderr == "error: timed out waiting for the condition on sandboxes/m3\n", p.stderr
    p = run(asb, "wait", "--for=condition=Ready", "sandbox", "-l", "app=none", "--timeout", "1s")
    assert (p.returncode, p.stderr) == (1, "error: no matching resources found\n")
    assert ok(asb, "wait", "--for=delete", "sandbox", "-l", "app=none", "--timeout", "1s") == ""
    for args, err in ((["sandbox", "sandbox/m1"], "error: there is no need to specify a resource type "
                       "as a separate argument when passing arguments in resource/name form (e.g. "
                       "'asb get resource/<resource_name>' instead of 'asb get resource "
                       "resource/<resource_name>'\n"),
                      (["sandbox/"], "error: arguments in resource/name form must have a single "
                       "resource and name\n"),
                      (["sandbox"], "error: resource(s) were provided, but no name was specified\n"),
                      (["sandbox", "m1", "--all"], "error: name cannot be provided when a selector "
                       "is specified\n")):
        p = run(asb, "wait", "--for=condition=Ready", *args)
        assert (p.returncode, p.stderr) == (2, err), args
