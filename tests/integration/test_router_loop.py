"""The router's event-driven HTTP/1.1 path (src/router/router-loop.c) with build/bin/sandbox-router
over unix-socket fakes: many concurrent keep-alive connections, pipelining mixed with requests the
loop hands off to the blocking code (bodies) and router-made answers, and back-pressure from a
slow client on a large response (the router's memory stays flat)."""
import http.server
import os
import socket
import socketserver
import threading
import time

import pytest

from test_router_standalone import Fakes, Router

TOKEN = "loop-token"
BIG = 128 * 1024 * 1024


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        if self.path == "/v1/big":
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(BIG))
            self.end_headers()
            chunk = b"z" * (1 << 20)
            for _ in range(BIG // len(chunk)):
                self.wfile.write(chunk)
            return
        body = f"GET {self.path}".encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_PUT(self):
        n = int(self.headers.get("Content-Length", "0"))
        data = self.rfile.read(n)
        body = f"PUT {self.path} {len(data)}".encode()
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
    request_queue_size = 512


@pytest.fixture
def setup():
    f = Fakes()
    srv = UnixHTTP(f.path("echo"), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    r = Router("--token", TOKEN, "--target-template", f"unix:{f.dir}/{{id}}/{{socket}}.sock")
    yield r
    r.stop()
    srv.shutdown()
    srv.server_close()
    f.close()


def request(path, sid="echo", method="GET", body=b""):
    head = f"{method} {path} HTTP/1.1\r\nHost: x\r\nX-Sandbox-ID: {sid}\r\n" \
           f"Authorization: Bearer {TOKEN}\r\n"
    if body:
        head += f"Content-Length: {len(body)}\r\n"
    return (head + "\r\n").encode() + body


class Reader:
    def __init__(self, sock):
        self.s, self.buf = sock, b""

    def response(self):
        while b"\r\n\r\n" not in self.buf:
            d = self.s.recv(65536)
            assert d, "connection closed before a response"
            self.buf += d
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        lines = head.decode().split("\r\n")
        status = int(lines[0].split()[1])
        hdrs = {k.lower(): v for k, v in (ln.split(": ", 1) for ln in lines[1:])}
        n = int(hdrs["content-length"])
        while len(self.buf) < n:
            d = self.s.recv(65536)
            assert d
            self.buf += d
        body, self.buf = self.buf[:n], self.buf[n:]
        return status, hdrs, body


def test_many_concurrent_keep_alive_connections(setup):
    socks = [socket.create_connection(("127.0.0.1", setup.port)) for _ in range(200)]
    try:
        readers = [Reader(s) for s in socks]
        for rnd in range(3):
            # every connection has a request in flight at once
            for i, s in enumerate(socks):
                s.sendall(request(f"/v1/c{i}/r{rnd}"))
            for i, rd in enumerate(readers):
                status, _, body = rd.response()
                assert status == 200
                assert body == f"GET /v1/c{i}/r{rnd}".encode()
    finally:
        for s in socks:
            s.close()


def test_pipelining_mixed_with_handoff_and_local_answers(setup):
    s = socket.create_connection(("127.0.0.1", setup.port))
    try:
        batch = (request("/v1/a") + b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n" + request("/v1/b", sid="Bad_Name")
                 + request("/v1/c") + request("/v1/d", sid="nobody") + request("/v1/e")
                 # a body: the loop hands the connection to the blocking code from here on
                 + request("/v1/put", method="PUT", body=b"0123456789") + request("/v1/f"))
        s.sendall(batch)
        rd = Reader(s)
        got = [rd.response() for _ in range(8)]
        assert [g[0] for g in got] == [200, 200, 400, 200, 502, 200, 200, 200]
        assert got[0][2] == b"GET /v1/a"
        assert got[1][2] == b'{"status":"ok"}'
        assert b"Invalid sandbox ID format." in got[2][2]
        assert got[3][2] == b"GET /v1/c"
        assert b"Could not connect to the backend sandbox: nobody" in got[4][2]
        assert got[5][2] == b"GET /v1/e"
        assert got[6][2] == b"PUT /v1/put 10"
        assert got[7][2] == b"GET /v1/f"
        # the connection is still usable afterwards
        s.sendall(request("/v1/after"))
        assert rd.response()[2] == b"GET /v1/after"
    finally:
        s.close()


def test_head_split_across_writes(setup):
    s = socket.create_connection(("127.0.0.1", setup.port))
    try:
        data = request("/v1/split")
        for i in range(0, len(data), 7):
            s.sendall(data[i:i + 7])
            time.sleep(0.01)
        assert Reader(s).response()[2] == b"GET /v1/split"
    finally:
        s.close()


def proc_status(pid, key):
    """A number from /proc/PID/status (VmRSS in KiB, Threads, ...)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    raise AssertionError(f"no {key}")


def rss_kib(pid):
    return proc_status(pid, "VmRSS")


def test_slow_client_back_pressure(setup):
    before = rss_kib(setup.proc.pid)
    s = socket.create_connection(("127.0.0.1", setup.port))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
    try:
        s.sendall(request("/v1/big"))
        got = 0
        while got < (1 << 20):
            got += len(s.recv(65536))
        time.sleep(1.5)  # the client stalls; the upstream keeps offering 128 MiB
        stalled = rss_kib(setup.proc.pid)
        assert stalled - before < 32 * 1024, (before, stalled)
        while True:
            d = s.recv(1 << 20)
            if not d:
                break
            got += len(d)
            if got >= BIG:
                break
        head_len = 0  # the head was in the first bytes; the body is BIG
        assert got > BIG - 1 and got < BIG + 4096, got - head_len
        assert rss_kib(setup.proc.pid) - before < 32 * 1024
    finally:
        s.close()
    # the router still serves
    s = socket.create_connection(("127.0.0.1", setup.port))
    s.sendall(request("/v1/after"))
    assert Reader(s).response()[2] == b"GET /v1/after"
    s.close()


def test_pipelined_timeout_and_stale_upstream():
    f = Fakes()
    srv = UnixHTTP(f.path("echo"), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    f.raw("hang", "hang")
    f.raw("shut", "close")
    r = Router("--token", TOKEN, "--target-template", f"unix:{f.dir}/{{id}}/{{socket}}.sock",
               "--proxy-timeout", "1")
    try:
        s = socket.create_connection(("127.0.0.1", r.port))
        rd = Reader(s)
        # an upstream that closes without answering: 502, the connection is closed after it
        s.sendall(request("/v1/a") + request("/v1/x", sid="shut"))
        assert rd.response()[2] == b"GET /v1/a"
        status, hdrs, body = rd.response()
        assert status == 502 and hdrs.get("connection") == "close"
        assert b"Could not connect to the backend sandbox: shut" in body
        assert s.recv(1) == b""
        s.close()
        # an upstream that never answers: 504 after --proxy-timeout, earlier answers intact
        s = socket.create_connection(("127.0.0.1", r.port))
        rd = Reader(s)
        t0 = time.monotonic()
        s.sendall(request("/v1/b") + request("/v1/y", sid="hang") + request("/v1/never"))
        assert rd.response()[2] == b"GET /v1/b"
        status, _, body = rd.response()
        assert status == 504, body
        assert body == b'{"detail": "Timed out waiting for the backend sandbox: hang"}' or \
            b"Timed out waiting for the backend sandbox: hang" in body
        assert time.monotonic() - t0 >= 0.9
        assert s.recv(1) == b""
        s.close()
    finally:
        r.stop()
        srv.shutdown()
        srv.server_close()
        f.close()
