"""Go ServeMux behaviour, percent-decoding, health, metadata and the listeners of the REST half."""
import json
import os
import signal
import socket
import subprocess
import threading
import time

import pytest
import requests

from resthelpers import UnixHTTPConnection, error_of, raw


def test_unknown_path_404(sandboxd):
    for p in ["/", "/v1", "/v1/", "/v1/healthz", "/v1/health/", "/v2/files/x", "/v1/metadata/x"]:
        st, h, body = raw(sandboxd, "GET", p)
        assert st == 404, p
        assert h["content-type"] == "text/plain; charset=utf-8"
        assert body == b"404 page not found\n"


def test_method_not_allowed(sandboxd):
    for m in ["POST", "PATCH", "OPTIONS"]:
        st, h, body = raw(sandboxd, m, "/v1/files/x")
        assert st == 405 and h["allow"] == "DELETE, GET, HEAD, PUT", m
        assert body == b"Method Not Allowed\n"
        for p in ["/v1/health", "/v1/metadata"]:
            st, h, body = raw(sandboxd, m, p)
            assert st == 405 and h["allow"] == "GET, HEAD"
    st, h, _ = raw(sandboxd, "PUT", "/v1/health", body=b"x")
    assert st == 405 and h["allow"] == "GET, HEAD"


def test_clean_redirects(sandboxd):
    cases = {
        "/v1/files/../etc": "/v1/etc",
        "/v1/files/.": "/v1/files/",
        "/v1/files/a/./b": "/v1/files/a/b",
        "/v1/files//x": "/v1/files/x",
        "/v1/files/a/../b?mode=0644&x=%20": "/v1/files/b?mode=0644&x=%20",
        "/v1/files": "/v1/files/",
        "/v1/files?recursive=1": "/v1/files/?recursive=1",
        "/v1//health": "/v1/health",
    }
    for src, dst in cases.items():
        for m in ["GET", "PUT", "DELETE"]:
            st, h, _ = raw(sandboxd, m, src)
            assert st == 301, (m, src)
            assert h["location"] == dst, (m, src)
    assert os.listdir(sandboxd.root) == []


def test_encoded_dots_not_cleaned(sandboxd):
    st, _, body = raw(sandboxd, "GET", "/v1/files/%2E%2E")
    assert st == 403 and error_of(body)[0] == "PERMISSION_DENIED"
    st, _, body = raw(sandboxd, "GET", "/v1/files/a%2F..%2F..%2Fx")
    assert st == 403


def test_percent_decoding(sandboxd):
    st, _, _ = raw(sandboxd, "PUT", "/v1/files/with%20space%3F.txt", body=b"s")
    assert st == 204
    assert open(os.path.join(sandboxd.root, "with space?.txt"), "rb").read() == b"s"
    st, _, body = raw(sandboxd, "GET", "/v1/files/with%20space%3f.txt")
    assert st == 200 and body == b"s"
    # '+' is not a space in a path
    st, _, _ = raw(sandboxd, "PUT", "/v1/files/a+b", body=b"p")
    assert st == 204 and os.path.exists(os.path.join(sandboxd.root, "a+b"))
    # query values are decoded (Go url.Query)
    st, _, _ = raw(sandboxd, "PUT", "/v1/files/q.txt?mode=%30%37%35%35", body=b"q")
    assert st == 204 and os.stat(os.path.join(sandboxd.root, "q.txt")).st_mode & 0o777 == 0o755


def test_invalid_escapes_400(sandboxd):
    for p in ["/v1/files/%zz", "/v1/files/%", "/v1/files/a%2"]:
        st, _, _ = raw(sandboxd, "GET", p)
        assert st == 400, p


def test_nul_byte_rejected(sandboxd):
    st, _, body = raw(sandboxd, "PUT", "/v1/files/a%00b", body=b"x")
    assert st == 400
    assert os.listdir(sandboxd.root) == []


def test_non_utf8_names(sandboxd):
    name = b"bad\xff\xfename"
    with open(os.path.join(sandboxd.root.encode(), name), "wb") as f:
        f.write(b"z")
    open(os.path.join(sandboxd.root, "ok-é-<&>"), "w").write("z")
    r = requests.get(sandboxd.url("/v1/files/"))
    assert b"\\u003c" in r.content and b"\\u0026" in r.content and b"\\u003e" in r.content
    names = [e["name"] for e in r.json()["entries"]]
    assert "bad\ufffd\ufffdname" in names
    assert "ok-é-<&>" in names
    st, _, body = raw(sandboxd, "GET", "/v1/files/bad%FF%FEname")
    assert st == 200 and body == b"z"
    st, _, _ = raw(sandboxd, "PUT", "/v1/files/new%C0name", body=b"n")
    assert st == 204 and os.path.exists(os.path.join(sandboxd.root.encode(), b"new\xc0name"))


def test_health(sandboxd):
    r = requests.get(sandboxd.url("/v1/health"))
    assert r.status_code == 200 and r.headers["Content-Type"] == "application/json"
    obj = r.json()
    assert obj["status"] == "ok" and isinstance(obj["uptime_seconds"], int) and obj["uptime_seconds"] >= 0
    assert list(obj) == ["status", "uptime_seconds"]
    r = requests.head(sandboxd.url("/v1/health"))
    assert r.status_code == 200 and r.content == b""


def test_draining_finishes_inflight_and_refuses_new(start_sandboxd):
    """After SIGTERM: listeners close, the upload in flight completes (Connection: close), no temp
    file is left. (Health 503 itself is covered by tests/unit/test-sandboxd-rest-server.c.)"""
    d = start_sandboxd(extra_args=["--shutdown-timeout", "5s"])
    up = socket.create_connection(("127.0.0.1", d.rest_port))
    up.sendall(b"PUT /v1/files/slow.bin HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\nabc")
    time.sleep(0.3)
    d.proc.send_signal(signal.SIGTERM)
    time.sleep(0.5)
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", d.rest_port), timeout=2).close()
    up.sendall(b"x" * 997)
    up.settimeout(10)
    assert up.recv(4096).startswith(b"HTTP/1.1 204")
    up.close()
    assert d.stop() == 0
    assert os.listdir(d.root) == ["slow.bin"]
    assert os.path.getsize(os.path.join(d.root, "slow.bin")) == 1000


METADATA_ENV = {
    "SANDBOX_ID": "sbx-123", "SANDBOX_WORKSPACE": "/workspace", "SANDBOX_API_TOKEN": "t",
    "SANDBOX_SSH_KEY": "k", "SANDBOX_AUTH_HEADER": "a", "SANDBOX_BEARER": "b", "SANDBOX_CRED": "c",
    "SANDBOX_PASSWD": "p", "SANDBOX_TLS_CERT": "c", "SANDBOX_PRIVATE_URL": "u",
    "KUBERNETES_SERVICE_HOST": "1.2.3.4",
}


def test_metadata_filter_vector(start_sandboxd):
    env = {k: v for k, v in os.environ.items() if not k.startswith("SANDBOX")}
    env.update(METADATA_ENV)
    d = start_sandboxd(env=env)
    r = requests.get(d.url("/v1/metadata"))
    assert r.status_code == 200 and r.headers["Content-Type"] == "application/json"
    assert r.json() == {"env": {"SANDBOX_ID": "sbx-123", "SANDBOX_WORKSPACE": "/workspace"}}
    assert r.content == b'{"env":{"SANDBOX_ID":"sbx-123","SANDBOX_WORKSPACE":"/workspace"}}\n'


def test_metadata_markers_and_prefix(start_sandboxd):
    env = {k: v for k, v in os.environ.items() if not k.startswith("SANDBOX")}
    env.update({"SANDBOX_MONKEY": "1", "SANDBOX_AUTHOR": "1", "SANDBOX_CERTAIN": "1",
                "SANDBOX_secret_lower": "1", "SANDBOX_PASSWORD": "1", "SANDBOX_OK": "<&>",
                "MY_A": "1", "MY_TOKEN": "x", "sandbox_x": "1"})
    d = start_sandboxd(env=env)
    assert requests.get(d.url("/v1/metadata")).json() == {"env": {"SANDBOX_OK": "<&>"}}
    # computed once: cached for the life of the process
    assert requests.get(d.url("/v1/metadata")).content.count(b"\\u003c") == 1
    d2 = start_sandboxd(env=env, extra_args=["--metadata-env-prefix", "MY_"])
    assert requests.get(d2.url("/v1/metadata")).json() == {"env": {"MY_A": "1"}}
    env3 = {k: v for k, v in os.environ.items() if not k.startswith("SANDBOX")}
    d3 = start_sandboxd(env=env3, extra_args=["--metadata-env-prefix", ""])
    assert requests.get(d3.url("/v1/metadata")).json() == {"env": {}}


def test_unix_socket_listener(start_sandboxd, tmp_path):
    sock = str(tmp_path / "rest.sock")
    open(sock, "w").close()  # a stale non-socket file must not be silently replaced...
    os.unlink(sock)
    s = socket.socket(socket.AF_UNIX)  # ...but a stale socket is
    s.bind(sock)
    s.close()
    d = start_sandboxd(extra_args=["--rest-socket", sock])
    conn = UnixHTTPConnection(sock)
    conn.request("PUT", "/v1/files/u.txt", body=b"via unix")
    r = conn.getresponse()
    assert r.status == 204
    r.read()
    conn.request("GET", "/v1/files/u.txt")
    r = conn.getresponse()
    assert r.status == 200 and r.read() == b"via unix"
    conn.close()
    out = subprocess.run(["curl", "-s", "--unix-socket", sock, "http://x/v1/health"],
                         capture_output=True, timeout=10)
    assert json.loads(out.stdout)["status"] == "ok"


def test_inherited_fd_listener(tmp_path):
    from conftest import Sandboxd
    lsock = socket.socket(socket.AF_UNIX)
    path = str(tmp_path / "inh.sock")
    lsock.bind(path)
    lsock.listen(16)
    fd = lsock.fileno()
    os.set_inheritable(fd, True)
    root = tmp_path / "r"
    root.mkdir()
    orig = subprocess.Popen

    def popen(*a, **kw):
        kw["pass_fds"] = (fd,)
        return orig(*a, **kw)

    subprocess.Popen = popen
    try:
        d = Sandboxd(root, tmp_path, ["--rest-fd", str(fd)])
    finally:
        subprocess.Popen = orig
    lsock.close()
    try:
        conn = UnixHTTPConnection(path)
        conn.request("GET", "/v1/health")
        assert conn.getresponse().status == 200
        conn.close()
    finally:
        assert d.stop() == 0


def test_keepalive_reuse(sandboxd):
    s = requests.Session()
    for i in range(20):
        assert s.put(sandboxd.url(f"/v1/files/k{i}"), data=b"x" * i).status_code == 204
        assert s.get(sandboxd.url(f"/v1/files/k{i}")).content == b"x" * i
    assert s.get(sandboxd.url("/v1/files/nope")).status_code == 404
    assert s.get(sandboxd.url("/v1/health")).status_code == 200


def test_garbage_requests_do_not_crash(sandboxd):
    payloads = [b"\x00\x01\x02\r\n\r\n", b"GET\r\n\r\n", b"GET / HTTP/9.9\r\n\r\n",
                b"PUT /v1/files/x HTTP/1.1\r\nContent-Length: -5\r\n\r\n",
                b"PUT /v1/files/x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
                b"GET /v1/files/" + b"a" * 70000 + b" HTTP/1.1\r\n\r\n",
                b"GET /v1/files/x HTTP/1.1\r\n" + b"X: y\r\n" * 5000 + b"\r\n",
                b"GET * HTTP/1.1\r\nHost: x\r\n\r\n",
                b"GET http://x/v1/health HTTP/1.1\r\nHost: x\r\n\r\n"]
    for p in payloads:
        s = socket.create_connection(("127.0.0.1", sandboxd.rest_port), timeout=5)
        try:
            s.sendall(p)
            s.shutdown(socket.SHUT_WR)
            while s.recv(65536):
                pass
        except OSError:
            pass
        s.close()
    assert requests.get(sandboxd.url("/v1/health")).status_code == 200


def test_absolute_form_target(sandboxd):
    s = socket.create_connection(("127.0.0.1", sandboxd.rest_port), timeout=5)
    s.sendall(b"GET http://example/v1/health HTTP/1.1\r\nHost: example\r\nConnection: close\r\n\r\n")
    data = b""
    while True:
        chunk = s.recv(4096)
        if not chunk:
            break
        data += chunk
    s.close()
    assert data.startswith(b"HTTP/1.1 200"), data
    st, h, _ = raw(sandboxd, "GET", "/nothing")
    assert h["x-content-type-options"] == "nosniff"


def test_idle_keepalive_closed_on_shutdown(start_sandboxd):
    d = start_sandboxd(extra_args=["--shutdown-timeout", "5s"])
    idle = socket.create_connection(("127.0.0.1", d.rest_port), timeout=10)
    idle.sendall(b"GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n")
    assert idle.recv(4096).startswith(b"HTTP/1.1 200")
    # keep the daemon draining with an upload in flight
    up = socket.create_connection(("127.0.0.1", d.rest_port), timeout=10)
    up.sendall(b"PUT /v1/files/s.bin HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nab")
    time.sleep(0.3)
    d.proc.send_signal(signal.SIGTERM)
    t0 = time.monotonic()
    assert idle.recv(4096) == b""  # closed by the server while still draining
    assert time.monotonic() - t0 < 3
    assert d.proc.poll() is None
    up.sendall(b"x" * 8)
    resp = up.recv(4096)
    assert resp.startswith(b"HTTP/1.1 204") and b"Connection: close" in resp
    assert up.recv(4096) == b""
    up.close()
    idle.close()
    assert d.stop() == 0


def test_ipv6_listen_host(start_sandboxd):
    try:
        probe = socket.socket(socket.AF_INET6)
        probe.bind(("::1", 0))
        probe.close()
    except OSError:
        pytest.skip("no IPv6 loopback")
    d = start_sandboxd(extra_args=["--listen-host", "::1"], wait=False)
    deadline = time.monotonic() + 15
    while True:
        try:
            r = requests.get(f"http://[::1]:{d.rest_port}/v1/health", timeout=1)
            break
        except requests.RequestException:
            assert time.monotonic() < deadline and d.proc.poll() is None, d.output()
            time.sleep(0.05)
    assert r.status_code == 200
    assert "[::1]:" in d.output()


def test_redirect_body_is_html_escaped(sandboxd):
    st, h, body = raw(sandboxd, "GET", '/v1/files/a/../b?x="<script>&y=\'')
    assert st == 301
    assert h["location"] == '/v1/files/b?x="<script>&y=\''
    assert body == b'<a href="/v1/files/b?x=&#34;&lt;script&gt;&amp;y=&#39;">Moved Permanently</a>.\n\n'
