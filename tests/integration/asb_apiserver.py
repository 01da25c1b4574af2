"""Helpers and fixtures for tests against a real `asb serve` (imported by test_apiserver_*.py; no
conftest magic). Each server runs on a free loopback port with its own ASB_STATE_DIR."""
import json
import os
import signal
import subprocess
import time

import pytest
import requests

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("ASB_BUILD", os.path.join(ROOT, "build"))
SANITIZER_EXIT_CODES = {86: "AddressSanitizer/LeakSanitizer report", 87: "UBSan report"}

CORE = "agents.x-k8s.io"
EXT = "extensions.agents.x-k8s.io"
V = "v1beta1"


def asb_binary():
    path = os.path.join(BUILD, "bin", "asb")
    if not os.path.exists(path):
        pytest.fail(f"{path} missing: run make first")
    return path


def sandbox(name=None, generate_name=None, labels=None, image="host", **spec):
    md = {}
    if name:
        md["name"] = name
    if generate_name:
        md["generateName"] = generate_name
    if labels:
        md["labels"] = labels
    body = {"apiVersion": f"{CORE}/{V}", "kind": "Sandbox", "metadata": md,
            "spec": {"podTemplate": {"spec": {"containers": [{"name": "main", "image": image}]}}}}
    body["spec"].update(spec)
    return body


class AsbServer:
    """One `asb serve` process. stop() asserts a clean exit (no sanitizer report)."""

    def __init__(self, state_dir, log_path, env=None, listen="127.0.0.1:0"):
        self.state_dir = str(state_dir)
        self.log_path = str(log_path)
        self.listen = listen
        # The API tests store Sandboxes without running them (ASB_RUNTIME=none); the
        # test_local_sandbox_* tests turn the runtime on.
        self.env = {**os.environ, "ASB_STATE_DIR": self.state_dir, "ASB_RUNTIME": "none",
                    "ASB_NETWORK": "none",
                    **(env or {})}
        self.proc = None
        self.log = None
        self.session = requests.Session()

    def start(self, timeout=20):
        server_file = os.path.join(self.state_dir, "server")
        if os.path.exists(server_file):
            os.unlink(server_file)
        self.log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(self.command() + ["serve", "--listen", self.listen],
                                     stdout=self.log, stderr=subprocess.STDOUT, env=self.env,
                                     start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"asb serve exited early ({self.proc.returncode}):\n{self.output()}")
            if os.path.exists(server_file):
                self.url = open(server_file).read().strip()
                self.token = open(os.path.join(self.state_dir, "token")).read().strip()
                self.session.headers["Authorization"] = f"Bearer {self.token}"
                try:
                    if self.session.get(self.url + "/version", timeout=2).status_code == 200:
                        return self
                except requests.RequestException:
                    pass
            time.sleep(0.02)
        raise AssertionError(f"asb serve not ready within {timeout}s:\n{self.output()}")

    def command(self):
        """argv prefix that runs asb (subclasses may wrap it, e.g. to drop privileges)."""
        return [asb_binary()]

    def output(self):
        if self.log and not self.log.closed:
            self.log.flush()
        with open(self.log_path, "rb") as f:
            return f.read().decode(errors="replace")

    @property
    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def stop(self, sig=signal.SIGTERM, timeout=30):
        """Signals the server and returns its exit code, failing on a sanitizer report."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"asb serve did not exit within {timeout}s:\n{self.output()}")
        finally:
            self.log.close()
        out = self.output()
        assert code not in SANITIZER_EXIT_CODES, f"{SANITIZER_EXIT_CODES[code]}:\n{out}"
        assert "ERROR: AddressSanitizer" not in out and "runtime error:" not in out, out
        return code

    def kill9(self):
        self.proc.kill()
        self.proc.wait()
        self.log.close()

    # -- HTTP helpers --
    def path(self, group, plural, ns="default", name=None, sub=None):
        p = f"/apis/{group}/{V}"
        if ns is not None:
            p += f"/namespaces/{ns}"
        p += f"/{plural}"
        if name:
            p += f"/{name}"
        if sub:
            p += f"/{sub}"
        return p

    def request(self, method, path, **kw):
        kw.setdefault("timeout", 10)
        return self.session.request(method, self.url + path, **kw)

    def get(self, path, **kw):
        return self.request("GET", path, **kw)

    def post(self, path, body, **kw):
        return self.request("POST", path, json=body, **kw)

    def put(self, path, body, **kw):
        return self.request("PUT", path, json=body, **kw)

    def merge_patch(self, path, body, **kw):
        return self.request("PATCH", path, data=json.dumps(body),
                            headers={"Content-Type": "application/merge-patch+json"}, **kw)

    def delete(self, path, **kw):
        return self.request("DELETE", path, **kw)

    def create_sandbox(self, name, ns="default", **kw):
        r = self.post(self.path(CORE, "sandboxes", ns), sandbox(name, **kw))
        assert r.status_code == 201, r.text
        return r.json()

    def metric(self, name, labels=""):
        """The value of one sample of /metrics (labels as rendered: '{code="200"}'); 0 when the
        series is not there yet."""
        r = self.get("/metrics")
        assert r.status_code == 200, r.text
        for line in r.text.splitlines():
            if line.startswith(name + labels + " "):
                return float(line.rsplit(" ", 1)[1])
        return 0


@pytest.fixture
def start_asb(tmp_path):
    """Factory: start_asb(state_dir=None, env=None) -> AsbServer (started). Every server still
    running at teardown gets SIGTERM and must exit 0 without sanitizer reports."""
    servers = []

    def start(state_dir=None, env=None, listen="127.0.0.1:0"):
        if state_dir is None:
            state_dir = tmp_path / f"state{len(servers)}"
        s = AsbServer(state_dir, tmp_path / f"asb-serve-{len(servers)}.log", env, listen)
        servers.append(s)
        return s.start()

    yield start
    stop_servers(servers)


@pytest.fixture
def asb(start_asb):
    """A running `asb serve` with an empty state directory."""
    return start_asb()


def stop_servers(servers):
    """Fixture teardown: stops every server still running; each must exit 0."""
    errors = []
    for s in servers:
        if s.log is None or s.log.closed:
            continue
        code = s.stop()
        if code != 0:
            errors.append(f"asb serve exit code {code}:\n{s.output()}")
    assert not errors, "\n".join(errors)
