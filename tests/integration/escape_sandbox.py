"""Helpers for the escape suite (test_escape_*.py, issue 13): a real `asb serve` with runc, real
`host`-image sandboxes, an attack probe (escape_probe.c, compiled here on the host and copied into
the sandbox's workspace) and the health check every attack ends with. Imported explicitly, no
conftest magic.

One server per test module: each test attacks from inside a sandbox, then asserts that the
attack failed and that the server and a witness sandbox are still fine."""
import os
import re
import shutil
import subprocess
import tempfile

import pytest

from asb_apiserver import CORE, AsbServer, stop_servers
from grpc_helpers import Client
from local_sandbox import (RUNC, cleanup_state, create, injected_sandboxd, runtime_available,
                           sockets, wait_ready)
from resthelpers import UnixHTTPConnection

HERE = os.path.dirname(os.path.abspath(__file__))
PROBE_INSIDE = "/workspace/escape-probe"
WITNESS = "witness"


def compile_probe(out_dir):
    """Builds escape_probe.c with the host's compiler (the `host` image shares the host's /usr,
    so the dynamic loader and libc inside are the same)."""
    out = os.path.join(out_dir, "escape-probe")
    subprocess.run(["cc", "-std=gnu11", "-O1", "-Wall", "-Wextra", "-Werror", "-pthread",
                    os.path.join(HERE, "escape_probe.c"), "-o", out], check=True)
    os.chmod(out, 0o755)
    return out


def parse_probe(out):
    """`ret=R errno=E` -> {"ret": R, "errno": E}; also `forked=N errno=E`."""
    m = re.search(r"(ret|forked)=(-?\d+) errno=(\d+)", out)
    assert m, f"probe printed no result: {out!r}"
    return {m.group(1): int(m.group(2)), "errno": int(m.group(3))}


class Box:
    """One sandbox: run commands in it over sandboxd's gRPC socket, the probe included."""

    def __init__(self, asb, state_dir, name, uid):
        self.asb, self.state_dir, self.name, self.uid = asb, state_dir, name, uid
        self.rest_sock, self.grpc_sock = sockets(state_dir, uid)
        self.client = Client(f"unix:{self.grpc_sock}")

    def run(self, *cmd, timeout=30):
        r = self.client.execute(list(cmd), timeout=timeout)
        return r.exit_code, r.stdout.decode(errors="replace"), r.stderr.decode(errors="replace")

    def put_file(self, path, data):
        conn = UnixHTTPConnection(self.rest_sock, timeout=20)
        try:
            conn.request("PUT", "/v1/files/" + path, body=data)
            resp = conn.getresponse()
            resp.read()
            assert resp.status in (200, 201, 204), resp.status
        finally:
            conn.close()

    def install_probe(self, probe_path):
        with open(probe_path, "rb") as f:
            self.put_file(os.path.basename(PROBE_INSIDE), f.read())
        assert self.run("chmod", "755", PROBE_INSIDE)[0] == 0

    def probe(self, *args, timeout=30):
        code, out, err = self.run(PROBE_INSIDE, *[str(a) for a in args], timeout=timeout)
        assert code == 0, f"probe {args} exited {code}: {out} {err}"
        return parse_probe(out)

    def python(self, code, timeout=30):
        return self.run("python3", "-c", code, timeout=timeout)

    def close(self):
        self.client.close()


class Escape:
    """The module's server, its sandboxes and the probe."""

    def __init__(self, asb, state_dir, probe_path):
        self.asb, self.state_dir, self.probe_path = asb, state_dir, probe_path
        self.boxes = {}

    def sandbox(self, name, container=None):
        """A Ready sandbox named `name` (created on first use) with the probe installed."""
        if name not in self.boxes:
            created = create(self.asb, name, container=container)
            wait_ready(self.asb, name, timeout=30)
            box = Box(self.asb, self.state_dir, name, created["metadata"]["uid"])
            box.install_probe(self.probe_path)
            self.boxes[name] = box
        return self.boxes[name]

    def assert_healthy(self):
        """asb serve answers, lists and still runs commands in the witness sandbox and in the
        attacker's own sandboxes."""
        assert self.asb.running, f"asb serve died:\n{self.asb.output()}"
        assert self.asb.get("/version").status_code == 200
        r = self.asb.get(self.asb.path(CORE, "sandboxes", "default"))
        assert r.status_code == 200, r.text
        w = self.sandbox(WITNESS)
        assert w.run("echo", "alive") == (0, "alive\n", "")
        for name, box in self.boxes.items():
            if name != WITNESS:
                assert box.run("true")[0] == 0, f"sandbox {name} no longer runs commands"

    def close(self):
        for box in self.boxes.values():
            box.close()


def start_escape_server(tmp_path_factory, env=None):
    """Starts asb serve (runc, network off unless env says otherwise) on a fresh state dir.
    Returns (Escape, cleanup)."""
    why = runtime_available()
    if why:
        pytest.skip(why)
    state = tempfile.mkdtemp(prefix="asb-esc-", dir="/tmp")
    logs = tmp_path_factory.mktemp("escape")
    # World-readable, so that the controls can run the probe as an unprivileged host user.
    probe_dir = tempfile.mkdtemp(prefix="asb-esc-probe-", dir="/tmp")
    os.chmod(probe_dir, 0o755)
    probe = compile_probe(probe_dir)
    e = {"ASB_RUNTIME": RUNC, "ASB_SANDBOXD": injected_sandboxd(), **(env or {})}
    server = AsbServer(state, logs / "asb-serve.log", e)
    servers = [server]

    def cleanup():
        try:
            stop_servers(servers)
        finally:
            cleanup_state(state)
            shutil.rmtree(probe_dir, ignore_errors=True)

    try:
        server.start()
    except BaseException:
        cleanup()
        raise
    return Escape(server, state, probe), cleanup


@pytest.fixture(scope="module")
def escape(tmp_path_factory):
    """Module-wide server with networking off (the default of the test servers)."""
    esc, cleanup = start_escape_server(tmp_path_factory)
    try:
        esc.sandbox(WITNESS)
        yield esc
    finally:
        esc.close()
        cleanup()
