"""`asb serve` restarts: kill -9 loses no committed object, resourceVersions survive, the token is
kept, watches from before a restart get 410; and the `asb` command line."""
import os
import signal
import subprocess
import threading
import time

from asb_apiserver import CORE, EXT, V, asb, asb_binary, sandbox, start_asb  # noqa: F401


def snapshot(server):
    out = {}
    for group, plural in ((CORE, "sandboxes"), (EXT, "sandboxtemplates"), (EXT, "sandboxclaims")):
        r = server.get(server.path(group, plural, ns=None))
        assert r.status_code == 200, r.text
        for item in r.json()["items"]:
            out[(plural, item["metadata"]["namespace"], item["metadata"]["name"])] = item
    return out


def test_kill9_then_restart_keeps_everything(start_asb, tmp_path):
    state = tmp_path / "state"
    # Objects exactly as written: no claim controller adding status between snapshot and kill.
    off = {"ASB_CLAIM_CONTROLLER": "off"}
    first = start_asb(state_dir=state, env=off)
    for i in range(10):
        first.create_sandbox(f"sb{i}", ns="default" if i % 2 else "team", labels={"i": str(i)})
    first.merge_patch(first.path(CORE, "sandboxes", "team", "sb0", "status"), {"status": {"podIPs": ["1.1.1.1"]}})
    first.delete(first.path(CORE, "sandboxes", name="sb1"))
    first.post(first.path(EXT, "sandboxclaims"), {"metadata": {"name": "c"}, "spec": {"warmPoolRef": {"name": "p"}}})
    before = snapshot(first)
    list_rv = first.get(first.path(CORE, "sandboxes", ns=None)).json()["metadata"]["resourceVersion"]
    token = first.token
    first.kill9()

    second = start_asb(state_dir=state, env=off)
    assert second.token == token
    assert snapshot(second) == before
    assert second.get(second.path(CORE, "sandboxes", ns=None)).json()["metadata"]["resourceVersion"] == list_rv
    # resourceVersions keep increasing after the restart; updates with the old ones work
    obj = second.get(second.path(CORE, "sandboxes", name="sb3")).json()
    obj["metadata"]["labels"]["x"] = "y"
    r = second.put(second.path(CORE, "sandboxes", name="sb3"), obj)
    assert r.status_code == 200 and int(r.json()["metadata"]["resourceVersion"]) > int(list_rv)
    # a watch from before the restart is too old: 410 Expired (clients relist)
    r = second.get(second.path(CORE, "sandboxes"), params={"watch": "true", "resourceVersion": "2", "timeoutSeconds": "1"})
    assert '"code":410' in r.text and '"Expired"' in r.text
    assert second.stop() == 0


def test_kill9_during_writes_loses_nothing_acknowledged(start_asb, tmp_path):
    state = tmp_path / "state"
    first = start_asb(state_dir=state)
    acked = []
    stop = threading.Event()

    def writer(prefix):
        i = 0
        while not stop.is_set():
            try:
                r = first.post(first.path(CORE, "sandboxes"), sandbox(f"{prefix}-{i}"), timeout=5)
            except Exception:
                return
            if r.status_code == 201:
                acked.append(r.json())
            i += 1

    threads = [threading.Thread(target=writer, args=(p,), daemon=True) for p in ("a", "b", "c")]
    for t in threads:
        t.start()
    while len(acked) < 60:
        time.sleep(0.005)
    first.proc.send_signal(signal.SIGKILL)
    stop.set()
    for t in threads:
        t.join(10)
    first.proc.wait()
    first.log.close()
    second = start_asb(state_dir=state)
    stored = snapshot(second)
    for obj in acked:
        key = ("sandboxes", "default", obj["metadata"]["name"])
        assert key in stored and stored[key] == obj


def test_sigterm_exits_zero(asb):
    asb.create_sandbox("x")
    assert asb.stop() == 0


def test_cli_help_and_unknown_verb():
    r = subprocess.run([asb_binary(), "--help"], capture_output=True, text=True)
    assert r.returncode == 0 and "serve" in r.stdout
    r = subprocess.run([asb_binary(), "frobnicate"], capture_output=True, text=True)
    assert r.returncode == 2 and 'unknown command "frobnicate"' in r.stderr
    r = subprocess.run([asb_binary()], capture_output=True, text=True)
    assert r.returncode == 2
    r = subprocess.run([asb_binary(), "serve", "--help"], capture_output=True, text=True)
    assert r.returncode == 0 and "--listen" in r.stdout
    r = subprocess.run([asb_binary(), "serve", "--bogus"], capture_output=True, text=True)
    assert r.returncode == 2


def test_listen_errors(tmp_path, asb):
    env = {**os.environ, "ASB_STATE_DIR": str(tmp_path / "s2")}
    port = asb.url.rsplit(":", 1)[1]
    r = subprocess.run([asb_binary(), "serve", "--listen", f"127.0.0.1:{port}"], capture_output=True,
                       text=True, env=env, timeout=20)
    assert r.returncode == 1 and "cannot listen" in r.stderr
    r = subprocess.run([asb_binary(), "serve", "--listen", "nonsense"], capture_output=True, text=True,
                       env=env, timeout=20)
    assert r.returncode != 0 and "HOST:PORT" in r.stderr
