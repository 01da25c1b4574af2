"""Runs build/bin/geminicli-toolbox directly on the host (imported by test_toolbox_*.py)."""
import json
import os
import subprocess

import pytest

from asb_apiserver import BUILD, SANITIZER_EXIT_CODES


def toolbox_binary():
    path = os.path.join(BUILD, "bin", "geminicli-toolbox")
    if not os.path.exists(path):
        pytest.fail(f"{path} missing: run make first")
    return path


def run_raw(root, tool, args, via="argv", timeout=30, extra=(), cwd=None):
    """Runs the toolbox; args is a dict (JSON-encoded) or a raw string. Returns CompletedProcess."""
    text = args if isinstance(args, str) else json.dumps(args)
    cmd = [toolbox_binary(), "--root", str(root), *extra, tool]
    stdin = None
    if via == "argv":
        cmd.append(text)
    elif via == "stdin":
        stdin = text
    p = subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=timeout,
                       cwd=str(cwd or root))
    assert p.returncode not in SANITIZER_EXIT_CODES, f"{SANITIZER_EXIT_CODES[p.returncode]}:\n{p.stderr}"
    assert "ERROR: AddressSanitizer" not in p.stderr and "runtime error:" not in p.stderr, p.stderr
    return p


def call(root, tool, args, **kw):
    """Runs a tool that must run (exit 0); returns the parsed result object."""
    p = run_raw(root, tool, args, **kw)
    assert p.returncode == 0, f"exit {p.returncode}: {p.stderr}"
    assert p.stdout.endswith("\n") and p.stdout.count("\n") == 1, p.stdout
    res = json.loads(p.stdout)
    assert set(res) == {"llmContent", "returnDisplay", "error"}, res
    return res


def ok(root, tool, args, **kw):
    res = call(root, tool, args, **kw)
    assert res["error"] is None, res
    return res["llmContent"]


def err(root, tool, args, etype=None, **kw):
    res = call(root, tool, args, **kw)
    assert res["error"] is not None, res
    assert res["error"]["message"] == res["llmContent"], res
    if etype:
        assert res["error"]["type"] == etype, res
    return res["llmContent"]
