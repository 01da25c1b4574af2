"""build/bin/sandbox-router on its own: target templates (unix sockets of fake upstreams here),
timeouts and upstream failures (502/504), auth modes, and --state-dir against a real asb serve."""
import http.server
import os
import shutil
import socket
import socketserver
import subprocess
import tempfile
import threading
import time

import pytest
import requests

from asb_apiserver import BUILD
from router_fixture import router_env_fixture

ROUTER = os.path.join(BUILD, "bin", "sandbox-router")
router_env = router_env_fixture()


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        body = f"{self.command} {self.path} auth={self.headers.get('Authorization')} " \
               f"sid={self.headers.get('X-Sandbox-ID')}".encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def address_string(self):
        return "unix"

    def log_message(self, *a):
        pass


class UnixHTTP(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


class Fakes:
    """Fake sandboxes under one directory: <dir>/<id>/rest.sock."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="asbr-fake-", dir="/tmp")
        self.servers, self.socks = [], []

    def path(self, sid):
        os.makedirs(os.path.join(self.dir, sid), exist_ok=True)
        return os.path.join(self.dir, sid, "rest.sock")

    def echo(self, sid):
        srv = UnixHTTP(self.path(sid), Handler)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        self.servers.append(srv)

    def raw(self, sid, behaviour):
        s = socket.socket(socket.AF_UNIX)
        s.bind(self.path(sid))
        s.listen(16)
        self.socks.append(s)

        def loop():
            conns = []
            while True:
                try:
                    c, _ = s.accept()
                except OSError:
                    return
                if behaviour == "close":
                    c.recv(65536)
                    c.close()
                elif behaviour == "early":
                    # reads the head only; answers once the router's writes of the body have
                    # stalled with more of it queued, and never reads nor closes
                    head = b""
                    while b"\r\n\r\n" not in head:
                        head += c.recv(1)
                    time.sleep(1)  # the point: the router's writes stall meanwhile
                    c.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 5\r\n\r\nearly")
                    conns.append(c)
                else:
                    conns.append(c)  # never answers
        threading.Thread(target=loop, daemon=True).start()

    def close(self):
        for s in self.servers:
            s.shutdown()
            s.server_close()
        for s in self.socks:
            s.close()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture
def fakes():
    f = Fakes()
    yield f
    f.close()


class Router:
    def __init__(self, *args, env=None):
        self.proc = subprocess.Popen([ROUTER, "--listen", "127.0.0.1:0", *args], stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, env={**os.environ, **(env or {})})
        line = self.proc.stdout.readline()
        assert line, self.proc.stderr.read().decode()
        self.port = int(line)
        self.url = f"http://127.0.0.1:{self.port}"

    def stop(self):
        self.proc.terminate()
        assert self.proc.wait(timeout=10) == 0
        err = self.proc.stderr.read().decode()
        assert "AddressSanitizer" not in err and "runtime error" not in err, err


@pytest.fixture
def start_router():
    rs = []

    def start(*args, **kw):
        r = Router(*args, **kw)
        rs.append(r)
        return r
    yield start
    for r in rs:
        r.stop()


def test_template_unix_and_errors(fakes, start_router):
    fakes.echo("echo")
    fakes.raw("slow", "hang")
    fakes.raw("closer", "close")
    r = start_router("--target-template", f"unix:{fakes.dir}/{{id}}/{{socket}}.sock", "--token", "sekret",
                     "--proxy-timeout", "1")
    h = {"Authorization": "Bearer sekret"}
    resp = requests.get(r.url + "/v1/x?q=1", headers={**h, "X-Sandbox-ID": "echo"})
    assert resp.status_code == 200
    # routing headers and the router's token are not forwarded
    assert resp.text == "GET /v1/x?q=1 auth=None sid=None"
    t0 = time.monotonic()
    resp = requests.get(r.url + "/v1/x", headers={**h, "X-Sandbox-ID": "slow"})
    assert resp.status_code == 504
    assert resp.json() == {"detail": "Timed out waiting for the backend sandbox: slow"}
    assert time.monotonic() - t0 < 5
    resp = requests.get(r.url + "/v1/x", headers={**h, "X-Sandbox-ID": "closer"})
    assert resp.status_code == 502
    assert resp.json() == {"detail": "Could not connect to the backend sandbox: closer"}
    resp = requests.get(r.url + "/v1/x", headers={**h, "X-Sandbox-ID": "absent"})
    assert resp.status_code == 502
    assert resp.json() == {"detail": "Could not connect to the backend sandbox: absent"}


def test_early_answer_while_the_body_is_queued(fakes, start_router):
    """The upstream answers before reading a large body and stops reading: the client gets that
    answer at once (its body is read and dropped), not a reset at the proxy timeout, and the
    connection goes on."""
    fakes.raw("early", "early")
    fakes.echo("echo")
    r = start_router("--target-template", f"unix:{fakes.dir}/{{id}}/{{socket}}.sock", "--token",
                     "sekret", "--proxy-timeout", "60")
    h = {"Authorization": "Bearer sekret"}
    with requests.Session() as s:
        t0 = time.monotonic()
        resp = s.put(r.url + "/v1/files/big", data=b"z" * (8 << 20),
                     headers={**h, "X-Sandbox-ID": "early"}, timeout=120)
        assert (resp.status_code, resp.text) == (400, "early")
        assert time.monotonic() - t0 < 30
        resp = s.get(r.url + "/v1/after", headers={**h, "X-Sandbox-ID": "echo"}, timeout=30)
        assert resp.status_code == 200 and resp.text.startswith("GET /v1/after ")


def test_early_answers_over_h2_keep_the_connection_going(fakes, start_router, tmp_path):
    """The same over HTTP/2 (h2c): five large uploads answered early, one after the other on ONE
    connection, then a GET on it. Each upload gets its answer, and the body bytes the router had
    taken for an upstream that went away do not stay counted against the connection's
    flow-control window (4 MiB here; each upload is 8 MiB): the GET is still served."""
    fakes.raw("early", "early")
    fakes.echo("echo")
    r = start_router("--target-template", f"unix:{fakes.dir}/{{id}}/{{socket}}.sock", "--token",
                     "sekret", "--proxy-timeout", "60")
    client = str(tmp_path / "h2_early_client")
    subprocess.run(["cc", "-std=gnu11", "-O1", "-Wall", "-Wextra", "-Werror",
                    os.path.join(os.path.dirname(__file__), "h2_early_client.c"), "-o", client,
                    "-lnghttp2"], check=True)
    port = r.url.rsplit(":", 1)[1]
    p = subprocess.run([client, port, "sekret", "early", "echo", "5", str(8 << 20)],
                       capture_output=True, text=True, timeout=120)
    assert (p.returncode, p.stdout) == (0, "PUT 400\n" * 5 + "GET 200\n"), (p.stdout, p.stderr)


def test_default_dns_template_unresolvable_is_502(start_router):
    r = start_router("--token", "t0ken", "--cluster-domain", "invalid")
    resp = requests.get(r.url + "/v1/health", headers={"Authorization": "Bearer t0ken", "X-Sandbox-ID": "nobox"})
    assert resp.status_code == 502
    assert resp.json() == {"detail": "Could not connect to the backend sandbox: nobox"}


def test_no_token_no_start():
    p = subprocess.run([ROUTER, "--listen", "127.0.0.1:0"], capture_output=True, text=True, timeout=10,
                       env={k: v for k, v in os.environ.items() if k != "ROUTER_AUTH_TOKEN"})
    assert p.returncode == 2
    assert "allow-unauthenticated" in p.stderr


def non_loopback_ip():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.connect(("192.0.2.1", 9))
        ip = s.getsockname()[0]
    except OSError:
        return None
    finally:
        s.close()
    return None if ip.startswith("127.") else ip


def test_allow_unauthenticated_is_loopback_only(fakes, start_router):
    fakes.echo("echo")
    r = start_router("--target-template", f"unix:{fakes.dir}/{{id}}/{{socket}}.sock", "--token", "sekret",
                     "--router-allow-unauthenticated", "--listen", "0.0.0.0:0")
    resp = requests.get(f"http://127.0.0.1:{r.port}/v1/x", headers={"X-Sandbox-ID": "echo"})
    assert resp.status_code == 200
    resp = requests.get(f"http://127.0.0.1:{r.port}/v1/x", headers={"X-Sandbox-ID": "echo",
                                                                   "Authorization": "Bearer nope"})
    assert resp.status_code == 401 and resp.json() == {"detail": "Invalid token."}
    ip = non_loopback_ip()
    if ip is None:
        pytest.skip("no non-loopback address on this machine")
    resp = requests.get(f"http://{ip}:{r.port}/v1/x", headers={"X-Sandbox-ID": "echo"})
    assert resp.status_code == 401
    resp = requests.get(f"http://{ip}:{r.port}/v1/x", headers={"X-Sandbox-ID": "echo",
                                                              "Authorization": "Bearer sekret"})
    assert resp.status_code == 200


def test_state_dir_mode_against_asb_serve(router_env, start_router):
    router_env.sandbox("sdbox")
    r = start_router("--state-dir", router_env.state_dir)
    h = {"Authorization": f"Bearer {router_env.token}", "X-Sandbox-ID": "sdbox"}
    resp = requests.put(r.url + "/v1/files/sd.txt", data=b"standalone", headers=h)
    assert resp.status_code == 204
    resp = requests.get(r.url + "/v1/files/sd.txt", headers=h)
    assert resp.content == b"standalone"
    resp = requests.get(r.url + "/v1/health", headers={**h, "X-Sandbox-ID": "nosuch"})
    assert resp.status_code == 404


def test_asb_serve_router_flags(tmp_path):
    """asb serve --router-allow-unauthenticated, --router-listen (no runtime needed: the
    sandbox does not exist, so passing auth shows as 404 instead of 401)."""
    from asb_apiserver import AsbServer, stop_servers
    state = tempfile.mkdtemp(prefix="asbr-", dir="/tmp")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    srv = AsbServer(state, tmp_path / "serve.log")
    base = srv.command()
    srv.command = lambda: ["sh", "-c", f'exec "$0" "$@" --router-listen 127.0.0.1:{port} '
                           "--router-allow-unauthenticated", *base]
    srv.start()
    try:
        deadline = time.monotonic() + 10
        while not os.path.exists(os.path.join(state, "router")):
            assert time.monotonic() < deadline
            time.sleep(0.02)
        url = open(os.path.join(state, "router")).read().strip()
        assert url == f"http://127.0.0.1:{port}"
        resp = requests.get(url + "/v1/health", headers={"X-Sandbox-ID": "ghost"})
        assert resp.status_code == 404
        resp = requests.get(url + "/v1/health", headers={"X-Sandbox-ID": "ghost", "Authorization": "Bearer x"})
        assert resp.status_code == 401
    finally:
        stop_servers([srv])
        import shutil
        shutil.rmtree(state, ignore_errors=True)


def test_template_forwards_any_port(fakes, start_router):
    """The template's {port} is X-Sandbox-Port (upstream forwards any port to the pod); a unix
    template cannot reach ports."""
    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = f"app {self.path} host={self.headers['Host']}".encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        port = srv.server_address[1]
        r = start_router("--target-template", "127.0.0.1:{port}", "--token", "sekret")
        h = {"Authorization": "Bearer sekret", "X-Sandbox-ID": "box", "X-Sandbox-Port": str(port)}
        resp = requests.get(r.url + "/x", headers=h)
        assert resp.status_code == 200 and resp.text == f"app /x host=127.0.0.1:{port}"
        s = socket.create_connection(("127.0.0.1", r.port), timeout=10)
        s.sendall((f"CONNECT x:1 HTTP/1.1\r\nHost: x:1\r\nAuthorization: Bearer sekret\r\n"
                   f"X-Sandbox-ID: box\r\nX-Sandbox-Port: {port}\r\n\r\n"
                   "GET /tunnel HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n").encode())
        got = b""
        while chunk := s.recv(4096):
            got += chunk
        s.close()
        assert got.startswith(b"HTTP/1.1 200 Connection established\r\n\r\nHTTP/1.0 200 OK"), got
        assert got.endswith(b"app /tunnel host=t"), got
        u = start_router("--target-template", f"unix:{fakes.dir}/{{id}}/{{socket}}.sock", "--token", "sekret")
        resp = requests.get(u.url + "/x", headers=h)
        assert resp.status_code == 502 and "names unix sockets" in resp.json()["detail"]
    finally:
        srv.shutdown()
        srv.server_close()
