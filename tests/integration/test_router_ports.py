"""Servers started inside a sandbox, reached through the router: X-Sandbox-Port N goes to port N
inside the sandbox (here a loopback-only sandbox: the connection is made in its network
namespace, no port of the host is opened), over HTTP/1.1 (bodies, streaming, WebSocket) and
h2c (grpcio); the preview host PORT-SANDBOX.NAMESPACE.localhost with a signed link and its
cookie, in requests and in headless Chromium."""
import base64
import json
import os
import shutil
import socket
import subprocess
import tempfile
import time

import grpc
import pytest
import requests

from local_sandbox import sbx_state, start_sbx  # noqa: F401 (fixtures)
from netpol_lab import lab  # noqa: F401 (fixture)
from router_fixture import router_env_fixture

router_env = router_env_fixture()
SERVERS = open(os.path.join(os.path.dirname(__file__), "sandbox_servers.py")).read()
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


@pytest.fixture(scope="module")
def web(router_env):
    router_env.sandbox("web", container={"command": ["python3", "-c", SERVERS]})
    deadline = time.monotonic() + 30
    while True:
        r = requests.get(router_env.url + "/healthz", headers=router_env.headers("web", port=8000))
        if r.status_code == 200:
            return "web"
        assert time.monotonic() < deadline, r.text
        time.sleep(0.1)


def test_http1_to_a_port_inside(router_env, web):
    h = router_env.headers(web, port=8000)
    r = requests.get(router_env.url + "/echo?x=1", headers=h)
    assert r.status_code == 200, r.text
    assert r.json() == {"method": "GET", "path": "/echo?x=1", "host": "127.0.0.1:8000",
                        "cookie": None, "got": None}
    # the sandbox's own /healthz, not the router's
    r = requests.get(router_env.url + "/healthz", headers=h)
    assert r.text == "the app's own healthz"
    r = requests.post(router_env.url + "/up", headers=h, data=b"x" * (1 << 20))
    assert r.json()["got"] == 1 << 20
    # same auth as every route
    r = requests.get(router_env.url + "/echo", headers=router_env.headers(web, port=8000, auth=False))
    assert r.status_code == 401
    # nothing listens on 8002
    r = requests.get(router_env.url + "/", headers=router_env.headers(web, port=8002))
    assert r.status_code == 502 and r.json() == {"detail": "Could not connect to the backend sandbox: web"}


def test_streaming_arrives_as_written(router_env, web):
    r = requests.get(router_env.url + "/stream", headers=router_env.headers(web, port=8000), stream=True)
    got = []
    for line in r.iter_lines():
        got.append(time.monotonic())
    assert len(got) == 3
    assert got[2] - got[0] >= 0.3  # not buffered until the end


def ws_connect(host, port, path, headers):
    s = socket.create_connection((host, port), timeout=10)
    key = base64.b64encode(os.urandom(16)).decode()
    head = (f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\n"
            f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n")
    head += "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
    s.sendall(head.encode())
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = s.recv(4096)
        assert chunk, data
        data += chunk
    status, _, rest = data.partition(b"\r\n\r\n")
    return s, status.decode(), rest


def ws_send_text(s, text):
    data, mask = text.encode(), os.urandom(4)
    masked = bytes(b ^ mask[i % 4] for i, b in enumerate(data))
    s.sendall(bytes([0x81, 0x80 | len(data)]) + mask + masked)


def ws_recv_text(s, buf):
    while len(buf) < 2 or len(buf) < 2 + (buf[1] & 0x7F):
        chunk = s.recv(4096)
        assert chunk, buf
        buf += chunk
    n = buf[1] & 0x7F
    assert buf[0] == 0x81 and n < 126
    return buf[2:2 + n].decode(), buf[2 + n:]


def test_websocket_echo(router_env, web):
    host, port = router_env.hostport().split(":")
    s, status, rest = ws_connect(host, int(port), "/ws", router_env.headers(web, port=8000))
    try:
        assert status.startswith("HTTP/1.1 101"), status
        for text in ("one", "two" * 20):
            ws_send_text(s, text)
            got, rest = ws_recv_text(s, rest)
            assert got == text
    finally:
        s.close()


def test_grpc_h2c_to_a_port_inside(router_env, web):
    with grpc.insecure_channel(router_env.hostport()) as ch:
        say = ch.unary_unary("/test.Echo/Say")
        md = [("authorization", f"Bearer {router_env.token}"), ("x-sandbox-id", web),
              ("x-sandbox-port", "8001")]
        assert say(b"hi", metadata=md, timeout=10) == b"echo: hi"
        with pytest.raises(grpc.RpcError) as e:
            say(b"hi", metadata=md[1:], timeout=10)
        assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED


def preview_link(router_env, sandbox, port, **params):
    r = requests.get(router_env.url + "/preview-url", headers=router_env.auth,
                     params={"namespace": "default", "sandbox": sandbox, "port": port, **params})
    assert r.status_code == 200, r.text
    return r.json()["url"]


def test_preview_link_sets_a_scoped_cookie(router_env, web):
    url = preview_link(router_env, web, 8000)
    rport = router_env.hostport().split(":")[1]
    assert url.startswith(f"http://8000-{web}.default.localhost:{rport}/?asb-preview=")
    host = f"8000-{web}.default.localhost:{rport}"
    # without it: refused; the link: a redirect that sets the cookie
    base = router_env.url
    r = requests.get(base + "/echo", headers={"Host": host})
    assert r.status_code == 401 and "asb preview web 8000" in r.json()["detail"]
    r = requests.get(base + "/" + url.split("/", 3)[3], headers={"Host": host}, allow_redirects=False)
    assert r.status_code == 303 and r.headers["Location"] == "/"
    cookie = r.headers["Set-Cookie"]
    assert cookie.startswith("asb-preview=") and "HttpOnly" in cookie
    value = cookie.split(";")[0]
    r = requests.get(base + "/echo", headers={"Host": host, "Cookie": f"app=1; {value}"})
    assert r.status_code == 200
    # the router's cookie stays with the router
    assert r.json()["cookie"] == ["app=1"] and r.json()["path"] == "/echo"
    # scoped: another port of the same sandbox is not admitted by it
    r = requests.get(base + "/echo", headers={"Host": f"8001-{web}.default.localhost:{rport}",
                                              "Cookie": value})
    assert r.status_code == 401
    # a tampered link is refused
    r = requests.get(base + "/?asb-preview=99999999999." + "0" * 64, headers={"Host": host})
    assert r.status_code == 401


@pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="chromium is not installed (scripts/deps.sh)")
def test_chromium_loads_a_page_with_a_websocket_echo(router_env, web, tmp_path):
    url = preview_link(router_env, web, 8000)
    profile = tempfile.mkdtemp(prefix="chromium-", dir=tmp_path)
    out = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
                          "--no-first-run", f"--user-data-dir={profile}", "--dump-dom", url],
                         capture_output=True, text=True, timeout=60)
    assert '<p id="out">echo: hello from the browser</p>' in out.stdout, (out.stdout, out.stderr[-2000:])


def test_asb_preview_prints_a_link_that_works(router_env, web):
    from asb_cli import ok, run
    url = ok(router_env.asb, "preview", web, "8000", "--ttl", "10m").strip()
    rport = router_env.hostport().split(":")[1]
    assert url.startswith(f"http://8000-{web}.default.localhost:{rport}/?asb-preview="), url
    s = requests.Session()
    r = s.get(router_env.url + "/" + url.split("/", 3)[3],
              headers={"Host": url.split("/")[2]}, allow_redirects=False)
    assert r.status_code == 303
    exp = int(r.headers["Set-Cookie"].split("=", 1)[1].split(".")[0])
    assert 500 < exp - time.time() <= 600
    p = run(router_env.asb, "preview", web, "8080")
    assert p.returncode == 1 and "not 8080, 9090 or 8888" in p.stderr, p.stderr
    p = run(router_env.asb, "preview", "ghost", "8000")
    assert p.returncode == 1 and 'sandbox "ghost" not found' in p.stderr, p.stderr
    assert run(router_env.asb, "preview", web, "0").returncode == 2


def test_mcp_get_preview_url(router_env, web):
    from asb_apiserver import asb_binary
    from mcp_helpers import client_env
    p = subprocess.Popen([asb_binary(), "mcp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         text=True, env=client_env(router_env.asb))
    msgs = [{"jsonrpc": "2.0", "id": 1, "method": "initialize",
             "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                        "clientInfo": {"name": "t", "version": "1"}}},
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
             "params": {"name": "get_preview_url",
                        "arguments": {"sandbox_claim_name": web, "port": 8000}}}]
    out, _ = p.communicate("".join(json.dumps(m) + "\n" for m in msgs), timeout=60)
    assert p.returncode == 0
    replies = {m["id"]: m for m in map(json.loads, out.splitlines()) if "id" in m}
    res = replies[2]["result"]
    assert not res.get("isError"), res
    url = res["structuredContent"]["url"]
    assert url.startswith(f"http://8000-{web}.default.localhost:"), url
    r = requests.get(router_env.url + "/" + url.split("/", 3)[3],
                     headers={"Host": url.split("/")[2]}, allow_redirects=False)
    assert r.status_code == 303


def test_bridge_networked_sandbox(lab, start_sbx):  # noqa: F811
    """With bridge networking too, through the sandbox's namespace: the servers listen on
    127.0.0.1 only, which nothing on the host could reach through the pod IP."""
    from local_sandbox import create, wait_ready
    asb = start_sbx({"ASB_NETWORK": "bridge", "ASB_POD_CIDR": "10.244.0.0/24"})
    create(asb, "bweb", container={"command": ["python3", "-c", SERVERS]})
    obj = wait_ready(asb, "bweb", timeout=30)
    assert obj["status"].get("podIPs"), obj["status"]  # a bridge-networked sandbox
    url = open(os.path.join(asb.state_dir, "router")).read().strip()
    h = {"Authorization": f"Bearer {asb.token}", "X-Sandbox-ID": "bweb", "X-Sandbox-Port": "8000"}
    deadline = time.monotonic() + 30
    while (r := requests.get(url + "/echo", headers=h)).status_code != 200:
        assert time.monotonic() < deadline, r.text
        time.sleep(0.1)
    assert r.json()["host"] == "127.0.0.1:8000"
    host, port = url.split("//")[1].split(":")
    s, status, rest = ws_connect(host, int(port), "/ws", h)
    try:
        assert status.startswith("HTTP/1.1 101"), status
        ws_send_text(s, "over the bridge")
        assert ws_recv_text(s, rest)[0] == "over the bridge"
    finally:
        s.close()


def test_port_forward(router_env, web):
    from asb_apiserver import SANITIZER_EXIT_CODES, asb_binary
    from asb_cli import cli_env, run
    p = subprocess.Popen([asb_binary(), "port-forward", "sandbox/web", ":8000", "--address",
                          "127.0.0.1", ":8002"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, env=cli_env(router_env.asb))
    try:
        lines = [p.stdout.readline().strip() for _ in range(2)]
        local = [int(l.split(":")[1].split(" ")[0]) for l in lines]
        assert lines == [f"Forwarding from 127.0.0.1:{local[0]} -> 8000",
                         f"Forwarding from 127.0.0.1:{local[1]} -> 8002"], lines
        r = requests.get(f"http://127.0.0.1:{local[0]}/echo")  # no token: the CLI has it
        assert r.status_code == 200 and r.json()["host"] == f"127.0.0.1:{local[0]}"
        assert p.stdout.readline().strip() == f"Handling connection for {local[0]}"
        s, status, rest = ws_connect("127.0.0.1", local[0], "/ws", {})
        try:
            assert status.startswith("HTTP/1.1 101"), status
            ws_send_text(s, "forwarded")
            assert ws_recv_text(s, rest)[0] == "forwarded"
        finally:
            s.close()
        # nothing listens on 8002 in the sandbox: the local connection is closed, with a message
        c = socket.create_connection(("127.0.0.1", local[1]), timeout=10)
        assert c.recv(10) == b""
        c.close()
        assert p.stderr.readline().strip() == (f"error: an error occurred forwarding {local[1]} -> 8002: "
                                               "Could not connect to the backend sandbox: web")
    finally:
        p.terminate()
        out, err = p.communicate(timeout=20)
    assert p.returncode == 0, (p.returncode, SANITIZER_EXIT_CODES.get(p.returncode), err)
    bad = run(router_env.asb, "port-forward", "sandbox/web", "x:8000")
    assert bad.returncode == 2 and "Error parsing local port 'x:8000'" in bad.stderr
    bad = run(router_env.asb, "port-forward", "sandbox/ghost", "8000")
    assert bad.returncode == 1 and 'sandbox "ghost" not found' in bad.stderr


def test_curl_h2c_and_preview_link(router_env, web, tmp_path):
    curl = shutil.which("curl")
    if not curl:
        pytest.skip("curl is not installed (scripts/deps.sh)")
    # HTTP/2 (prior knowledge) to a plain HTTP/1.1 server in the sandbox
    out = subprocess.run([curl, "-sS", "--http2-prior-knowledge", "-H", f"Authorization: Bearer {router_env.token}",
                          "-H", f"X-Sandbox-ID: {web}", "-H", "X-Sandbox-Port: 8000",
                          router_env.url + "/echo?h2=1"], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["path"] == "/echo?h2=1"
    # a browser's way: the link, its redirect, the cookie (curl resolves *.localhost itself)
    url = preview_link(router_env, web, 8000)
    jar = str(tmp_path / "jar")
    out = subprocess.run([curl, "-sS", "-L", "-c", jar, "-b", jar, url], capture_output=True,
                         text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    assert '<p id="out">waiting</p>' in out.stdout  # the page itself, served from the sandbox
    out = subprocess.run([curl, "-sS", "-b", jar, url.split("?")[0] + "echo"], capture_output=True,
                         text=True, timeout=30)
    assert json.loads(out.stdout)["cookie"] is None, out.stdout
