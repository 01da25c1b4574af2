"""Helpers for the hostile-client tests: raw bytes over sockets, and a standalone sandbox-router
in front of one real sandboxd (unix sockets, no container runtime needed)."""
import os
import socket
import subprocess
import tempfile
import time

from conftest import BUILD

ROUTER = os.path.join(BUILD, "bin", "sandbox-router")


def exchange(port, data, timeout=5):
    """Sends `data`, half-closes nothing, reads until the server closes or `timeout` passes.
    Returns (bytes read, closed_by_server)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        s.sendall(data)
        out = b""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            s.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                b = s.recv(65536)
            except socket.timeout:
                return out, False
            except ConnectionResetError:
                return out, True
            if not b:
                return out, True
            out += b
        return out, False
    finally:
        s.close()


def status_line(resp):
    return resp.split(b"\r\n", 1)[0].decode(errors="replace")


class Router:
    """sandbox-router --allow-unauthenticated routing X-Sandbox-ID `box` to a sandboxd started
    with sockets_args(box)."""

    def __init__(self, sock_dir, *args):
        self.proc = subprocess.Popen(
            [ROUTER, "--listen", "127.0.0.1:0", "--allow-unauthenticated", "--target-template",
             f"unix:{sock_dir}/{{id}}/{{socket}}.sock", *args],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        line = self.proc.stdout.readline()
        assert line, self.proc.stderr.read().decode()
        self.port = int(line)

    def stop(self):
        self.proc.terminate()
        code = self.proc.wait(timeout=15)
        err = self.proc.stderr.read().decode()
        assert "AddressSanitizer" not in err and "runtime error" not in err, err
        assert code == 0, err


def sandbox_sockets(box="box"):
    """A directory with <dir>/<box>/ for sandboxd's sockets; returns (dir, extra sandboxd args)."""
    d = tempfile.mkdtemp(prefix="asbh-", dir="/tmp")
    os.makedirs(os.path.join(d, box))
    return d, ["--rest-socket", os.path.join(d, box, "rest.sock"),
               "--grpc-socket", os.path.join(d, box, "grpc.sock")]
