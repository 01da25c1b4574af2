"""The lean `asb` (issue 16): the client does not link the server side (asb-server, exec'd by
`asb serve`, found next to asb or in ../libexec/asb), nor libcurl, which libasb loads only for a
server that is not plain loopback HTTP (here: a fake API server on a non-loopback address)."""
import http.server
import json
import os
import shutil
import socket
import subprocess
import threading

import pytest

from asb_apiserver import asb_binary
from asb_cli import run

CLIENT_LIBS_NOT_LINKED = ("libcurl", "libsqlite3", "libnftables", "libnftnl", "libgnutls")


def ldd(path):
    out = subprocess.run(["ldd", path], capture_output=True, text=True, check=True).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def test_asb_links_no_server_or_curl_libraries():
    libs = ldd(asb_binary())
    for lib in CLIENT_LIBS_NOT_LINKED:
        assert not any(l.startswith(lib) for l in libs), (lib, libs)
    server = ldd(os.path.join(os.path.dirname(asb_binary()), "asb-server"))
    assert any(l.startswith("libsqlite3") for l in server), server


def test_asb_serve_execs_the_server_from_an_installed_layout(tmp_path):
    """bin/asb + libexec/asb/asb-server (the FHS layout) and bin/asb alone (no server)."""
    bindir = tmp_path / "usr" / "bin"
    libexec = tmp_path / "usr" / "libexec" / "asb"
    bindir.mkdir(parents=True)
    libexec.mkdir(parents=True)
    shutil.copy(asb_binary(), bindir / "asb")
    env = {k: v for k, v in os.environ.items() if k != "ASB_SERVER_BINARY"}
    alone = subprocess.run([str(bindir / "asb"), "serve", "--help"], capture_output=True,
                           text=True, env=env, timeout=30)
    assert alone.returncode == 1 and "cannot find asb-server" in alone.stderr, alone.stderr
    shutil.copy(os.path.join(os.path.dirname(asb_binary()), "asb-server"), libexec / "asb-server")
    p = subprocess.run([str(bindir / "asb"), "serve", "--help"], capture_output=True, text=True,
                       env=env, timeout=30)
    assert p.returncode == 0 and p.stdout.startswith("Usage: asb serve"), p.stderr
    # Unknown flags are refused by the server with the exit code `asb serve` always had.
    p = subprocess.run([str(bindir / "asb"), "serve", "--no-such-flag"], capture_output=True,
                       text=True, env=env, timeout=30)
    assert p.returncode == 2 and "no-such-flag" in p.stderr, p.stderr


def non_loopback_ipv4():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.connect(("192.0.2.1", 9))  # no packet is sent: this only picks the source address
        addr = s.getsockname()[0]
    except OSError:
        return None
    finally:
        s.close()
    return None if addr.startswith("127.") else addr


class FakeApi(http.server.BaseHTTPRequestHandler):
    seen = []

    def do_GET(self):
        FakeApi.seen.append((self.path, self.headers.get("Authorization"),
                             self.headers.get("User-Agent"), self.headers.get("Connection")))
        body = json.dumps({"kind": "SandboxList", "apiVersion": "agents.x-k8s.io/v1beta1",
                           "metadata": {"resourceVersion": "1"}, "items": []}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Warning", '299 - "served by the fake"')
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_remote_server_goes_through_libcurl(tmp_path):
    addr = non_loopback_ipv4()
    if not addr:
        pytest.skip("no non-loopback IPv4 address on this machine")
    httpd = http.server.ThreadingHTTPServer((addr, 0), FakeApi)
    t = threading.Thread(target=httpd.serve_forever, daemon=True)
    t.start()
    try:
        url = f"http://{addr}:{httpd.server_address[1]}"
        env = {k: v for k, v in os.environ.items()
               if k not in ("ASB_SERVER", "ASB_TOKEN", "http_proxy", "HTTP_PROXY")}
        env["ASB_STATE_DIR"] = str(tmp_path)
        FakeApi.seen.clear()
        p = run(None, "get", "sandboxes", "--server", url, "--token", "tok", env=env)
        assert p.returncode == 0, p.stderr
        assert p.stdout == "" and "No resources found in default namespace." in p.stderr
        assert 'Warning: served by the fake' in p.stderr, p.stderr
        path, auth, agent, connection = FakeApi.seen[0]
        assert path == "/apis/agents.x-k8s.io/v1beta1/namespaces/default/sandboxes"
        assert auth == "Bearer tok" and agent.startswith("libasb/")
        # libcurl keeps the connection for the next request; the plain transport (loopback
        # only) asks for `Connection: close`.
        assert connection is None, connection
    finally:
        httpd.shutdown()
        httpd.server_close()
