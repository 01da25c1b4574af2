"""libasb's public API against a real `asb serve` (tests/integration/libasb_probe.c, linked with
libasb.so through pkg-config): the Status -> error enum mapping with messages, watch events,
callback stop, cancellation and 410 Expired."""
import os
import subprocess
import threading
import time

import pytest

from asb_apiserver import CORE, SANITIZER_EXIT_CODES, asb, start_asb  # noqa: F401 (fixtures)
from asb_cli import cli_env
from test_libasb_example import LIB, instrumented, pkg_config

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture(scope="module")
def probe(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("probe") / "libasb_probe")
    san = ["-fsanitize=address,undefined"] if instrumented() else []
    subprocess.run(["cc", "-std=gnu11", "-Wall", "-Wextra", "-Werror", *san,
                    os.path.join(HERE, "libasb_probe.c"), *pkg_config("--cflags", "--libs"),
                    "-lpthread", f"-Wl,-rpath,{LIB}", "-o", out], check=True)
    return out


def run_probe(probe, server, *args, env=None):
    p = subprocess.run([probe, *args], capture_output=True, text=True,
                       env=env or cli_env(server), timeout=60)
    assert p.returncode not in SANITIZER_EXIT_CODES, p.stderr
    return p


def results(stdout):
    out = {}
    for line in stdout.splitlines():
        parts = line.split(" | ")
        head = parts[0].split(" ", 2)
        out[head[0]] = (int(head[1]), head[2] if len(head) > 2 else "", parts[1:])
    return out


def test_error_mapping_from_status(asb, probe):
    p = run_probe(probe, asb, "errors")
    assert p.returncode == 0, p.stderr
    r = results(p.stdout)
    assert r["get-missing"][:2] == (-4, "not found")
    assert r["get-missing"][2] == ["NotFound", "404", 'sandboxes.agents.x-k8s.io "p1" not found']
    assert r["create"][0] == 0
    assert r["create-again"][:2] == (-5, "already exists")
    assert r["create-again"][2][0:2] == ["AlreadyExists", "409"]
    assert r["patch"][0] == 0
    assert r["update-stale"][:2] == (-6, "conflict")
    assert r["update-stale"][2][0:2] == ["Conflict", "409"]
    assert r["create-invalid"][:2] == (-7, "invalid object")
    assert r["create-invalid"][2][0:2] == ["Invalid", "422"]
    assert "spec.podTemplate.spec.containers[0].image: Required value" in r["create-invalid"][2][2]
    assert r["status-patch"][0] == 0
    assert r["wait-ready"][0] == 0
    assert r["list"][0] == 0 and "list-has-p1 1" in p.stdout
    assert r["list-bad-selector"][:2] == (-8, "bad request")
    assert r["delete"][0] == 0
    assert r["delete-again"][0] == -4
    assert r["unknown-kind"][:2] == (-19, "unknown kind")
    assert r["wait-deleted"][0] == 0


def test_unauthorized_and_connection_errors(asb, probe):
    r = results(run_probe(probe, asb, "token", "wrong").stdout)
    assert r["get"][:2] == (-9, "unauthorized") and r["get"][2][0:2] == ["Unauthorized", "401"]
    env = cli_env(asb, ASB_SERVER="http://127.0.0.1:1")
    r = results(run_probe(probe, asb, "errors", env=env).stdout)
    assert r["get-missing"][:2] == (-13, "connection failed")
    assert r["get-missing"][2][1] == "0"
    env = cli_env(asb, ASB_STATE_DIR="/nonexistent")
    r = results(run_probe(probe, asb, "errors", env=env).stdout)
    assert r["client"][:2] == (-17, "no server configured")
    assert "/nonexistent/server" in r["client"][2][2]


def test_watch_events_stop_and_cancel(asb, probe):
    asb.create_sandbox("w-before")

    def writes():
        time.sleep(0.5)
        asb.merge_patch(asb.path(CORE, "sandboxes", name="w-before"), {"metadata": {"labels": {"x": "y"}}})
        asb.delete(asb.path(CORE, "sandboxes", name="w-before"))
        asb.create_sandbox("stop")

    t = threading.Thread(target=writes)
    t.start()
    p = run_probe(probe, asb, "watch", "-", "20000")
    t.join()
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines() == [
        "event ADDED w-before", "event MODIFIED w-before", "event DELETED w-before",
        "event ADDED stop", "watch 42 unknown error"]
    # Cancellation from another thread ends an idle watch within about a second.
    asb.create_sandbox("idle")
    asb.delete(asb.path(CORE, "sandboxes", name="stop"))
    start = time.monotonic()
    p = run_probe(probe, asb, "watch", "-", "300")
    took = time.monotonic() - start
    assert p.stdout.splitlines() == ["event ADDED idle", "watch -15 cancelled |  | 0 | cancelled"]
    assert took < 3, took


def test_watch_expired(start_asb, probe):
    s = start_asb(env={"ASB_WATCH_WINDOW": "2"})
    for i in range(5):
        s.create_sandbox(f"e{i}")
    r = results(run_probe(probe, s, "watch", "1", "5000").stdout)
    assert r["watch"][:2] == (-11, "resource version expired")
    assert r["watch"][2][0] == "Expired" and "too old resource version" in r["watch"][2][2]
