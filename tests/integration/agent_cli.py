"""Helpers for the test_agent_* tests: run build/bin/sandboxed-tools with scripted input lines,
its own HOME (session store) and the control plane of a test `asb serve`. Imported explicitly."""
import os
import subprocess

import pytest

from asb_apiserver import BUILD


def binary(name="sandboxed-tools"):
    path = os.path.join(BUILD, "bin", name)
    if not os.path.exists(path):
        pytest.fail(f"{path} missing: run make first")
    return path


class Agent:
    """One session's CLI invocations. run() feeds lines on stdin and returns the CompletedProcess."""

    def __init__(self, home, state_dir=None, session="s1", env=None, args=None):
        self.home = str(home)
        self.state_dir = state_dir
        self.session = session
        self.env = env or {}
        self.args = args or []

    def environ(self):
        e = {k: v for k, v in os.environ.items()
             if k not in ("OPENAI_API_KEY", "GEMINI_API_KEY", "OPENAI_BASE_URL", "TOOLSET",
                          "SANDBOX_IMAGE", "MODEL", "ASB_SERVER", "ASB_TOKEN")}
        e.update({"HOME": self.home, "OPENAI_MODEL": "fake-eliza"})
        if self.state_dir:
            e["ASB_STATE_DIR"] = str(self.state_dir)
        e.update(self.env)
        return e

    def run(self, *lines, args=None, timeout=120, check=True):
        text = "".join(line + "\n" for line in lines)
        p = subprocess.run([binary(), "-session", self.session, *self.args, *(args or [])],
                           input=text, capture_output=True, text=True, env=self.environ(),
                           timeout=timeout)
        if check:
            assert p.returncode == 0, f"exit {p.returncode}\nstdout:\n{p.stdout}\nstderr:\n{p.stderr}"
        return p

    @property
    def session_dir(self):
        return os.path.join(self.home, ".local", "sandboxed-tools", self.session)

    def backups(self):
        d = os.path.join(self.session_dir, "fs")
        return sorted(f for f in os.listdir(d) if f.endswith(".tar.gz")) if os.path.isdir(d) else []


def agent_replies(stdout):
    """The texts after 'Agent> ' (multi-line replies joined), in order."""
    replies, cur = [], None
    for line in stdout.split("\n"):
        while line.startswith("User> "):
            line = line[len("User> "):]
            if cur is not None:
                replies.append("\n".join(cur))
                cur = None
        if line.startswith("Agent> "):
            if cur is not None:
                replies.append("\n".join(cur))
            cur = [line[len("Agent> "):]]
        elif cur is not None:
            cur.append(line)
    if cur is not None:
        replies.append("\n".join(cur).rstrip("\n"))
    return [r.rstrip("\n") for r in replies]
