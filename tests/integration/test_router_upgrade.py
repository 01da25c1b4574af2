"""Protocol upgrades (WebSocket and the like), TCP upstreams and oversized heads on the router's
event loop: a 101 from the upstream turns the client connection into a byte tunnel, both ways,
with flow control; a TCP upstream is connected without blocking; a head over 64 KiB is 431."""
import socket
import threading
import time

import pytest
import requests

from test_router_loop import proc_status, rss_kib
from test_router_standalone import Fakes, start_router, fakes  # noqa: F401 (fixtures)

TOKEN = "sekret"
FLOOD = 128 << 20


def serve_upgrade(listener, seen):
    """An upstream that speaks a tiny upgradable protocol: after `Upgrade: shout` it answers 101,
    greets with the request line, then echoes every byte upper-cased until EOF."""
    def conn(c):
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = c.recv(4096)
            if not chunk:
                c.close()
                return
            data += chunk
        head, _, rest = data.partition(b"\r\n\r\n")
        seen.append(head.decode())
        lines = head.decode().split("\r\n")
        hdrs = {k.strip().lower(): v.strip() for k, _, v in (l.partition(":") for l in lines[1:])}
        if hdrs.get("upgrade") != "shout" or "upgrade" not in hdrs.get("connection", "").lower():
            c.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 10\r\n\r\nno upgrade")
            c.close()
            return
        path = lines[0].split(" ")[1]
        c.sendall(b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: shout\r\n"
                  b"\r\nhello " + path.encode() + b"\n" + rest.upper())
        if path == "/flood":  # as fast as the router takes it
            try:
                for _ in range(FLOOD // (1 << 20)):
                    c.sendall(b"x" * (1 << 20))
            except OSError:
                pass
            c.close()
            return
        while True:
            chunk = c.recv(65536)
            if not chunk:
                break
            c.sendall(chunk.upper())
        seen.append("eof")
        c.close()

    def loop():
        while True:
            try:
                c, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=conn, args=(c,), daemon=True).start()
    threading.Thread(target=loop, daemon=True).start()


def read_head(s):
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = s.recv(4096)
        assert chunk, data
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    return head.decode(), rest


def recv_exactly(s, n):
    data = b""
    while len(data) < n:
        chunk = s.recv(min(n - len(data), 1 << 20))
        assert chunk, len(data)
        data += chunk
    return data


def upgrade_through(port, sid, seen, extra=""):
    s = socket.create_connection(("127.0.0.1", port))
    s.settimeout(20)
    # bytes of the new protocol sent together with the head go through too
    s.sendall(f"GET /ws?x=1 HTTP/1.1\r\nHost: r\r\nAuthorization: Bearer {TOKEN}\r\nX-Sandbox-ID: {sid}\r\n"
              f"{extra}Connection: Upgrade\r\nUpgrade: shout\r\n\r\nearly ".encode())
    head, rest = read_head(s)
    lines = head.split("\r\n")
    assert lines[0] == "HTTP/1.1 101 Switching Protocols"
    assert "Connection: Upgrade" in lines and "Upgrade: shout" in lines
    want = b"hello /ws?x=1\nEARLY "
    rest += recv_exactly(s, len(want) - len(rest))
    assert rest == want
    # the routing headers and the router's token are not forwarded
    up = seen[0].lower()
    assert "x-sandbox-id" not in up and "authorization" not in up
    assert "connection: upgrade" in up and "upgrade: shout" in up
    # 4 MiB each way at once: more than any buffer on the way, so flow control is exercised
    payload = bytes(range(97, 123)) * (4 * 1024 * 1024 // 26)
    sender = threading.Thread(target=s.sendall, args=(payload,))
    sender.start()
    got = recv_exactly(s, len(payload))
    sender.join()
    assert got == payload.upper()
    # the client ends: the upstream sees EOF and the router closes the connection
    s.shutdown(socket.SHUT_WR)
    assert s.recv(10) == b""
    s.close()
    deadline = time.monotonic() + 5
    while "eof" not in seen:
        assert time.monotonic() < deadline
        time.sleep(0.02)


def test_upgrade_unix_upstream(fakes, start_router):  # noqa: F811
    seen = []
    ls = socket.socket(socket.AF_UNIX)
    ls.bind(fakes.path("ws"))
    ls.listen(16)
    fakes.socks.append(ls)
    serve_upgrade(ls, seen)
    r = start_router("--target-template", f"unix:{fakes.dir}/{{id}}/{{socket}}.sock", "--token", TOKEN)
    upgrade_through(r.port, "ws", seen, "X-Sandbox-Port: 8080\r\n")
    # the router is still serving (the tunnel's end did not take anything else down)
    fakes.echo("echo")
    resp = requests.get(r.url + "/v1/x", headers={"Authorization": f"Bearer {TOKEN}", "X-Sandbox-ID": "echo"})
    assert resp.status_code == 200


def test_upgrade_refused_by_upstream_is_relayed_then_closed(fakes, start_router):  # noqa: F811
    fakes.echo("plain")  # answers GET with 200 and ignores the Upgrade
    r = start_router("--target-template", f"unix:{fakes.dir}/{{id}}/{{socket}}.sock", "--token", TOKEN)
    s = socket.create_connection(("127.0.0.1", r.port))
    s.settimeout(10)
    s.sendall(f"GET /v HTTP/1.1\r\nHost: r\r\nAuthorization: Bearer {TOKEN}\r\nX-Sandbox-ID: plain\r\n"
              "X-Sandbox-Port: 8080\r\nConnection: Upgrade\r\nUpgrade: shout\r\n\r\n".encode())
    head, rest = read_head(s)
    assert head.startswith("HTTP/1.1 200 ")
    assert "Connection: close" in head.split("\r\n")
    data = rest
    while True:
        chunk = s.recv(4096)
        if not chunk:
            break
        data += chunk
    assert data == b"GET /v auth=None sid=None"
    s.close()


def test_upgrade_and_requests_over_tcp_upstream(start_router):  # noqa: F811
    seen = []
    ls = socket.socket(socket.AF_INET)
    ls.bind(("127.0.0.1", 0))
    ls.listen(16)
    try:
        serve_upgrade(ls, seen)
        port = ls.getsockname()[1]
        r = start_router("--target-template", f"127.0.0.1:{port}", "--token", TOKEN)
        upgrade_through(r.port, "tcpbox", seen)  # port 8888: a real legacy port, proxied
        # an ordinary request over the same TCP upstream: relayed (the fake refuses it: 400)
        resp = requests.get(r.url + "/v1/x", headers={"Authorization": f"Bearer {TOKEN}", "X-Sandbox-ID": "tcpbox"})
        assert resp.status_code == 400 and resp.text == "no upgrade"
        assert seen[-1].startswith("GET /v1/x HTTP/1.1\r\nHost: 127.0.0.1:")
        # a host name: looked up on a helper thread, then connected from the loop (where this
        # machine resolves localhost itself: a fresh root may have no /etc/hosts)
        try:
            socket.getaddrinfo("localhost", port, type=socket.SOCK_STREAM)
        except socket.gaierror:
            pytest.skip("this machine does not resolve localhost (no /etc/hosts entry)")
        r2 = start_router("--target-template", f"localhost:{port}", "--token", TOKEN)
        for _ in range(2):
            resp = requests.get(r2.url + "/v1/y", headers={"Authorization": f"Bearer {TOKEN}", "X-Sandbox-ID": "named"})
            assert resp.status_code == 400 and resp.text == "no upgrade"
            assert seen[-1].startswith(f"GET /v1/y HTTP/1.1\r\nHost: localhost:{port}\r\n")
    finally:
        ls.close()


def test_tcp_upstream_refused_is_502(start_router):  # noqa: F811
    """Refused after a non-blocking connect (a numeric address) and after a lookup (a name)."""
    s = socket.socket(socket.AF_INET)
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there
    r = start_router("--target-template", f"127.0.0.1:{port}", "--token", TOKEN)
    resp = requests.get(r.url + "/v1/x", headers={"Authorization": f"Bearer {TOKEN}", "X-Sandbox-ID": "gone"})
    assert resp.status_code == 502
    assert resp.json() == {"detail": "Could not connect to the backend sandbox: gone"}
    r = start_router("--target-template", f"localhost:{port}", "--token", TOKEN)
    resp = requests.get(r.url + "/v1/x", headers={"Authorization": f"Bearer {TOKEN}", "X-Sandbox-ID": "gone2"})
    assert resp.status_code == 502
    assert resp.json() == {"detail": "Could not connect to the backend sandbox: gone2"}


def test_upgrade_to_legacy_emulation_is_501(fakes, start_router):  # noqa: F811
    fakes.echo("echo")
    r = start_router("--target-template", f"unix:{fakes.dir}/{{id}}/{{socket}}.sock", "--token", TOKEN)
    resp = requests.get(r.url + "/ws", headers={"Authorization": f"Bearer {TOKEN}", "X-Sandbox-ID": "echo",
                                                "Connection": "Upgrade", "Upgrade": "shout"})
    assert resp.status_code == 501
    assert resp.json() == {"detail": "Protocol upgrades are not supported by this router."}
    assert resp.headers["Connection"] == "close"
    # CONNECT is not proxied either, whatever the target
    c = socket.create_connection(("127.0.0.1", r.port))
    c.settimeout(10)
    c.sendall(f"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\nAuthorization: Bearer {TOKEN}\r\n"
              "X-Sandbox-ID: echo\r\nX-Sandbox-Port: 8080\r\n\r\n".encode())
    data = b""
    while True:
        chunk = c.recv(4096)
        if not chunk:
            break
        data += chunk
    c.close()
    assert data.startswith(b"HTTP/1.1 501 Not Implemented\r\n")
    assert data.endswith(b'{"detail":"Protocol upgrades are not supported by this router."}')


def test_head_over_64k_is_431(fakes, start_router):  # noqa: F811
    fakes.echo("echo")
    r = start_router("--target-template", f"unix:{fakes.dir}/{{id}}/{{socket}}.sock", "--token", TOKEN)
    h = {"Authorization": f"Bearer {TOKEN}", "X-Sandbox-ID": "echo"}
    resp = requests.get(r.url + "/v1/x", headers={**h, "X-Big": "b" * 60000})
    assert resp.status_code == 200  # under the limit: proxied
    resp = requests.get(r.url + "/v1/x", headers={**h, "X-Big": "b" * 70000})
    assert resp.status_code == 431
    assert resp.text == "431 Request Header Fields Too Large"
    assert resp.headers["Connection"] == "close"


def test_tunnel_back_pressure(fakes, start_router):  # noqa: F811
    """An upstream that floods a stalled client through a tunnel: the router holds its memory
    flat (the upstream is not read while 64 KiB wait for the client), then everything arrives."""
    ls = socket.socket(socket.AF_UNIX)
    ls.bind(fakes.path("flood"))
    ls.listen(4)
    fakes.socks.append(ls)
    serve_upgrade(ls, [])
    r = start_router("--target-template", f"unix:{fakes.dir}/{{id}}/{{socket}}.sock", "--token", TOKEN)
    before = rss_kib(r.proc.pid)
    s = socket.create_connection(("127.0.0.1", r.port))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
    s.settimeout(30)
    try:
        s.sendall(f"GET /flood HTTP/1.1\r\nHost: r\r\nAuthorization: Bearer {TOKEN}\r\nX-Sandbox-ID: flood\r\n"
                  "X-Sandbox-Port: 8080\r\nConnection: Upgrade\r\nUpgrade: shout\r\n\r\n".encode())
        head, rest = read_head(s)
        assert head.startswith("HTTP/1.1 101 ")
        got = len(rest)
        time.sleep(1.5)  # the client stalls; the upstream keeps offering 128 MiB
        stalled = rss_kib(r.proc.pid)
        assert stalled - before < 32 * 1024, (before, stalled)
        while True:
            d = s.recv(1 << 20)
            if not d:
                break
            got += len(d)
        assert got == len(b"hello /flood\n") + FLOOD
        assert rss_kib(r.proc.pid) - before < 32 * 1024
    finally:
        s.close()


def test_legacy_request_gives_the_connection_back_to_the_loop(fakes, start_router):  # noqa: F811
    """A request to the legacy emulation runs on a thread of its own; after it, the connection
    (kept alive) goes back to the event loop: the thread ends while the client still uses it."""
    fakes.echo("echo")
    r = start_router("--target-template", f"unix:{fakes.dir}/{{id}}/{{socket}}.sock", "--token", TOKEN)
    h = {"Authorization": f"Bearer {TOKEN}", "X-Sandbox-ID": "echo"}
    with requests.Session() as s:
        assert s.get(r.url + "/v1/warm", headers={**h, "X-Sandbox-Port": "8080"}).status_code == 200
        base = proc_status(r.proc.pid, "Threads")
        for i in range(3):
            resp = s.get(r.url + "/", headers={**h, "X-Sandbox-Port": "8888"})  # the emulation's
            assert resp.status_code == 200 and resp.json()["status"] == "ok"
            deadline = time.monotonic() + 5
            while proc_status(r.proc.pid, "Threads") > base:
                assert time.monotonic() < deadline, (proc_status(r.proc.pid, "Threads"), base)
                time.sleep(0.02)
            resp = s.get(r.url + f"/v1/rest{i}", headers={**h, "X-Sandbox-Port": "8080"})
            assert resp.status_code == 200 and resp.text == f"GET /v1/rest{i} auth=None sid=None"
        # pipelined: a legacy request followed at once by two more on the same connection
        c = socket.create_connection(("127.0.0.1", r.port))
        c.settimeout(10)
        reqs = b"".join(f"GET {'/v1/p' + str(i) if i else '/'} HTTP/1.1\r\nHost: r\r\nAuthorization: Bearer {TOKEN}\r\n"
                        f"X-Sandbox-ID: echo\r\nX-Sandbox-Port: {8080 if i else 8888}\r\n\r\n"
                        .encode() for i in range(3))
        c.sendall(reqs)
        data = b""
        while data.count(b"auth=None sid=None") < 2:
            try:
                chunk = c.recv(65536)
            except TimeoutError:
                raise AssertionError(data)
            assert chunk, data
            data += chunk
        assert data.startswith(b"HTTP/1.1 200 OK\r\n")
        assert data.index(b"Sandbox Runtime is active.") < data.index(b"GET /v1/p1 ") < data.index(b"GET /v1/p2 ")
        c.close()
