"""Helpers for the `asb mcp` tests: a warm pool on an `asb serve` with runc, `asb mcp --listen`
on a free loopback port, and the Node.js MCP SDK driver (tests/mcp). Imported explicitly."""
import json
import os
import subprocess
import time

import pytest

from listening_daemon import ListeningDaemon
from asb_apiserver import EXT, ROOT, asb_binary
from claims_helpers import create, pool, template, wait_pool_ready

MCP_DIR = os.path.join(ROOT, "tests", "mcp")
POOL = "mcp-pool"


def make_pool(asb, name=POOL, replicas=1):
    """A SandboxTemplate (host image) and a warm pool of `replicas` Ready sandboxes."""
    create(asb, EXT, "sandboxtemplates", template(f"{name}-tpl"))
    create(asb, EXT, "sandboxwarmpools", pool(name, f"{name}-tpl", replicas=replicas))
    wait_pool_ready(asb, name, replicas, timeout=90)
    return name


def client_env(asb, **extra):
    env = {**os.environ, "ASB_STATE_DIR": asb.state_dir, "MCP_POOL": POOL, **extra}
    for k in ("ASB_SERVER", "ASB_TOKEN"):
        env.pop(k, None)
    return env


class McpHttp(ListeningDaemon):
    """One `asb mcp --listen 127.0.0.1:0` process."""

    name = "asb mcp"

    def __init__(self, tmp_path, asb, args=()):
        self.log_path = tmp_path / f"asb-mcp-{time.monotonic_ns()}.log"
        self.env = client_env(asb)
        self.args = list(args)

    def argv(self):
        return [asb_binary(), "mcp", "--listen", "127.0.0.1:0", *self.args]

    def on_listening(self):
        self.url = f"http://{self.address}/mcp"


def _installed_matches_lock():
    try:
        with open(os.path.join(MCP_DIR, "package-lock.json")) as f:
            lock = json.load(f)["packages"]
        for path, meta in lock.items():
            if path:
                with open(os.path.join(MCP_DIR, path, "package.json")) as f:
                    if json.load(f)["version"] != meta["version"]:
                        return False
        return True
    except (OSError, ValueError, KeyError):
        return False


def drive(scenario, transport, target, env, timeout=180):
    """Runs tests/mcp/drive.mjs SCENARIO over `transport` (stdio: target is the asb binary;
    http: the endpoint URL); returns its JSON report."""
    if not _installed_matches_lock():
        pytest.fail("tests/mcp/node_modules does not match package-lock.json: run `make deps`")
    r = subprocess.run(["node", os.path.join(MCP_DIR, "drive.mjs"), scenario, transport, target],
                       cwd=MCP_DIR, capture_output=True, text=True, env=env, timeout=timeout)
    assert r.returncode == 0, f"drive.mjs {scenario} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}"
    report = json.loads(r.stdout.strip().splitlines()[-1])
    assert "fatal" not in report, f"{report['fatal']}\n{r.stderr}"
    # The stdio server's stderr is inherited: no sanitizer report may appear there.
    assert "ERROR: AddressSanitizer" not in r.stderr and "ERROR: LeakSanitizer" not in r.stderr \
        and "runtime error:" not in r.stderr, r.stderr
    return report
