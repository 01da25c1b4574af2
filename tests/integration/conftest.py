"""Shared fixtures: real sandboxd processes on real sockets (loopback TCP and unix sockets)."""
import os
import signal
import socket
import subprocess
import time

import pytest
import requests

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("ASB_BUILD", os.path.join(ROOT, "build"))
SANITIZER_EXIT_CODES = {86: "AddressSanitizer/LeakSanitizer report", 87: "UBSan report"}


def _default_signal_dispositions():
    """A shell that starts `make test` in the background or under nohup hands us SIGINT/SIGQUIT/
    SIGHUP ignored (and maybe blocked), and an ignored signal stays ignored across exec: the
    processes the tests start and then signal would shrug the signal off. Ignored dispositions
    become defaults here (a Python handler resets to SIG_DFL in every exec'd child) and the mask is
    emptied, so every child starts with the dispositions the tests assume."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGQUIT, signal.SIGHUP):
        if signal.getsignal(sig) == signal.SIG_IGN:
            signal.signal(sig, signal.default_int_handler if sig == signal.SIGINT else signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_SETMASK, [])


_default_signal_dispositions()


def binary(name):
    path = os.path.join(BUILD, "bin", name)
    if not os.path.exists(path):
        pytest.fail(f"{path} missing: run make first")
    return path


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Sandboxd:
    """One sandboxd process. stop() asserts a clean exit (no sanitizer report, exit code 0)."""

    def __init__(self, root, tmp_path, extra_args=(), env=None, wait=True, prefix=(), exe=None):
        self.root = str(root)
        self.rest_port = free_port()
        self.grpc_port = free_port()
        while self.grpc_port == self.rest_port:
            self.grpc_port = free_port()
        self.rest_url = f"http://127.0.0.1:{self.rest_port}"
        self.grpc_addr = f"127.0.0.1:{self.grpc_port}"
        self.log_path = os.path.join(str(tmp_path), f"sandboxd-{self.rest_port}.log")
        self.args = [*prefix, exe or binary("sandboxd"), "--listen-host", "127.0.0.1",
                     "--rest-port", str(self.rest_port), "--grpc-port", str(self.grpc_port),
                     "--root-dir", self.root, *extra_args]
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(self.args, stdout=self.log, stderr=subprocess.STDOUT,
                                     env=env if env is not None else os.environ.copy(),
                                     start_new_session=True)
        if wait:
            self.wait_ready()

    def wait_ready(self, timeout=30):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"sandboxd exited early ({self.proc.returncode}):\n{self.output()}")
            try:
                if requests.get(self.rest_url + "/v1/health", timeout=1).status_code == 200:
                    return
            except requests.RequestException:
                pass
            time.sleep(0.02)
        raise AssertionError(f"sandboxd not ready within {timeout}s:\n{self.output()}")

    def output(self):
        if not self.log.closed:  # also readable after stop()
            self.log.flush()
        with open(self.log_path, "rb") as f:
            return f.read().decode(errors="replace")

    def url(self, path):
        return self.rest_url + path

    def stop(self, sig=signal.SIGTERM, timeout=30):
        """Signals the daemon and returns its exit code, failing on a sanitizer report."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"sandboxd did not exit within {timeout}s:\n{self.output()}")
        finally:
            self.log.close()
        out = open(self.log_path, "rb").read().decode(errors="replace")
        assert code not in SANITIZER_EXIT_CODES, f"{SANITIZER_EXIT_CODES[code]}:\n{out}"
        assert "ERROR: AddressSanitizer" not in out and "runtime error:" not in out, out
        return code


@pytest.fixture
def start_sandboxd(tmp_path):
    """Factory: start_sandboxd(root=None, extra_args=(), env=None) -> Sandboxd; all are stopped
    at teardown and must exit 0 without sanitizer reports."""
    started = []

    def start(root=None, extra_args=(), env=None, wait=True, prefix=(), exe=None):
        if root is None:
            root = tmp_path / f"root{len(started)}"
            root.mkdir()
        d = Sandboxd(root, tmp_path, extra_args, env, wait, prefix, exe)
        started.append(d)
        return d

    yield start
    errors = []
    for d in started:
        if d.log.closed:
            continue
        code = d.stop()
        if code != 0:
            errors.append(f"sandboxd exit code {code}:\n{d.output()}")
    assert not errors, "\n".join(errors)


@pytest.fixture
def sandboxd(start_sandboxd):
    """A running sandboxd on loopback with an empty root (sandboxd.root)."""
    return start_sandboxd()
