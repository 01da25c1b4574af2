"""Runs the `asb` CLI against a server from asb_apiserver.py and checks every run for sanitizer
reports (imported by test_cli_*.py and test_libasb_*.py)."""
import os
import subprocess

from asb_apiserver import SANITIZER_EXIT_CODES, asb_binary


def cli_env(server, **extra):
    """Environment that finds `server` through ASB_STATE_DIR only (no ASB_SERVER/ASB_TOKEN)."""
    env = {k: v for k, v in os.environ.items() if k not in ("ASB_SERVER", "ASB_TOKEN")}
    env["ASB_STATE_DIR"] = server.state_dir
    env.update(extra)
    return env


def run(server, *args, input=None, env=None, timeout=60):
    """Runs `asb ARGS...`; returns CompletedProcess (text). Fails on a sanitizer report."""
    p = subprocess.run([asb_binary(), *args], input=input, capture_output=True, text=True,
                       env=env if env is not None else cli_env(server), timeout=timeout)
    assert p.returncode not in SANITIZER_EXIT_CODES, f"{SANITIZER_EXIT_CODES[p.returncode]}:\n{p.stderr}"
    assert "ERROR: AddressSanitizer" not in p.stderr and "runtime error:" not in p.stderr, p.stderr
    return p


def ok(server, *args, **kw):
    p = run(server, *args, **kw)
    assert p.returncode == 0, f"asb {' '.join(args)} exited {p.returncode}:\n{p.stdout}\n{p.stderr}"
    return p.stdout


SANDBOX_YAML = """\
apiVersion: agents.x-k8s.io/v1beta1
kind: Sandbox
metadata:
  name: {name}
  labels:
    app: {app}
spec:
  podTemplate:
    spec:
      containers:
      - name: main
        image: host
"""

TEMPLATE_YAML = """\
apiVersion: extensions.agents.x-k8s.io/v1beta1
kind: SandboxTemplate
metadata:
  name: {name}
spec:
  podTemplate:
    spec:
      containers:
      - name: main
        image: host
"""
