"""Helpers for the acp-server tests: start build/bin/acp-server on a free loopback port, a raw
JSON-RPC line client, and the Node.js ACP SDK driver (tests/acp). Imported explicitly."""
import json
import os
import socket
import subprocess
import time

import pytest

from listening_daemon import ListeningDaemon
from asb_apiserver import BUILD, ROOT

ACP_DIR = os.path.join(ROOT, "tests", "acp")


def acp_binary(name="acp-server"):
    path = os.path.join(BUILD, "bin", name)
    if not os.path.exists(path):
        pytest.fail(f"{path} missing: run make first")
    return path


class AcpServer(ListeningDaemon):
    """One acp-server process with its own HOME (agent history under ~/.local/sandboxed-tools)."""

    name = "acp-server"

    def __init__(self, tmp_path, args=(), env=None):
        self.home = tmp_path / "home"
        self.home.mkdir(exist_ok=True)
        self.log_path = tmp_path / f"acp-server-{time.monotonic_ns()}.log"
        self.args = list(args)
        self.env = {**os.environ, "HOME": str(self.home), "OPENAI_MODEL": "fake-eliza",
                    **(env or {})}
        for k in ("OPENAI_API_KEY", "GEMINI_API_KEY", "OPENAI_BASE_URL", "ASB_TOKEN", "ASB_SERVER"):
            if k not in (env or {}):
                self.env.pop(k, None)
        self.proc = None

    def argv(self):
        return [acp_binary(), "--listen", "127.0.0.1:0", *self.args]

    def on_listening(self):
        self.port = int(self.address.rsplit(":", 1)[1])


class RawClient:
    """Line-oriented JSON-RPC client over TCP for malformed-input and auth tests."""

    def __init__(self, port, timeout=10):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.f = self.sock.makefile("rwb")

    def send_raw(self, data: bytes):
        self.sock.sendall(data)

    def send(self, obj):
        self.send_raw(json.dumps(obj).encode() + b"\n")

    def recv(self):
        line = self.f.readline()
        if not line:
            raise EOFError("connection closed")
        return json.loads(line)

    def call(self, id_, method, params=None):
        msg = {"jsonrpc": "2.0", "id": id_, "method": method}
        if params is not None:
            msg["params"] = params
        self.send(msg)
        while True:
            m = self.recv()
            if "method" not in m and m.get("id") == id_:
                return m

    def close(self):
        self.f.close()
        self.sock.close()


def npm_ci():
    """The pinned SDK (tests/acp/package-lock.json) is installed by scripts/deps.sh, once, for
    the whole run; a missing or stale node_modules fails at once instead of reinstalling per test."""
    if not _installed_matches_lock():
        pytest.fail("tests/acp/node_modules does not match package-lock.json: run `make deps`")


def _installed_matches_lock():
    """True when node_modules already holds exactly the versions package-lock.json pins."""
    try:
        with open(os.path.join(ACP_DIR, "package-lock.json")) as f:
            lock = json.load(f)["packages"]
        for path, meta in lock.items():
            if not path:
                continue
            with open(os.path.join(ACP_DIR, path, "package.json")) as f:
                if json.load(f)["version"] != meta["version"]:
                    return False
        return True
    except (OSError, ValueError, KeyError):
        return False


def drive(scenario, server, token=None, env=None, timeout=120):
    """Runs tests/acp/drive.mjs SCENARIO against the server; returns its JSON report."""
    npm_ci()
    e = {**os.environ, **(env or {})}
    e.pop("ACP_TOKEN", None)
    if token:
        e["ACP_TOKEN"] = token
    r = subprocess.run(["node", os.path.join(ACP_DIR, "drive.mjs"), scenario, server.address],
                       cwd=ACP_DIR, capture_output=True, text=True, env=e, timeout=timeout)
    assert r.returncode == 0, (f"drive.mjs {scenario} failed ({r.returncode}):\n{r.stdout}\n"
                               f"{r.stderr}\n--- acp-server ---\n{server.output()}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def updates_of(report, session_id, kind=None):
    ups = report["updates"].get(session_id, [])
    return [u for u in ups if kind is None or u["sessionUpdate"] == kind]


def tool_text(update):
    return "".join(c["content"].get("text", "") for c in update.get("content") or []
                   if c.get("type") == "content")
