"""Request-smuggling shapes (issue 14), in sandboxd and in the router, answered as Go's net/http
answers them: two different Content-Lengths 400, `Content-Length : 5` 400, HTTP/1.1 without Host
400, a Transfer-Encoding other than exactly `chunked` 501; identical duplicate Content-Lengths
are accepted, as Go accepts them. Each refusal closes the connection, so no byte after the head is
ever read as another request."""
import os
import shutil

import pytest

from hostile_http import Router, exchange, sandbox_sockets, status_line

ID = "X-Sandbox-ID: box\r\n"

CASES = [
    # (name, request bytes, status line, body)
    ("cl_differ",
     b"PUT /v1/files/a HTTP/1.1\r\nHost: x\r\n" + ID.encode() +
     b"Content-Length: 5\r\nContent-Length: 6\r\n\r\nhello!GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n",
     "HTTP/1.1 400 Bad Request", b"400 Bad Request"),
    ("cl_space_before_colon",
     b"PUT /v1/files/b HTTP/1.1\r\nHost: x\r\n" + ID.encode() +
     b"Content-Length : 5\r\n\r\nhello",
     "HTTP/1.1 400 Bad Request", b"400 Bad Request"),
    ("no_host",
     b"GET /v1/health HTTP/1.1\r\n" + ID.encode() + b"\r\n",
     "HTTP/1.1 400 Bad Request", b"400 Bad Request: missing required Host header"),
    ("two_hosts",
     b"GET /v1/health HTTP/1.1\r\nHost: a\r\nHost: b\r\n" + ID.encode() + b"\r\n",
     "HTTP/1.1 400 Bad Request", b"400 Bad Request: too many Host headers"),
    ("te_gzip_chunked",
     b"PUT /v1/files/c HTTP/1.1\r\nHost: x\r\n" + ID.encode() +
     b"Transfer-Encoding: gzip, chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
     "HTTP/1.1 501 Not Implemented", b"Unsupported transfer encoding"),
    ("te_twice",
     b"PUT /v1/files/d HTTP/1.1\r\nHost: x\r\n" + ID.encode() +
     b"Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
     "HTTP/1.1 501 Not Implemented", b"Unsupported transfer encoding"),
    ("te_identity",
     b"PUT /v1/files/e HTTP/1.1\r\nHost: x\r\n" + ID.encode() +
     b"Transfer-Encoding: identity\r\n\r\nhello",
     "HTTP/1.1 501 Not Implemented", b"Unsupported transfer encoding"),
    ("cl_not_a_number",
     b"PUT /v1/files/f HTTP/1.1\r\nHost: x\r\n" + ID.encode() + b"Content-Length: 5x\r\n\r\nhello",
     "HTTP/1.1 400 Bad Request", None),
]


@pytest.fixture
def stack(start_sandboxd):
    """A sandboxd and a router in front of it: yields (sandboxd, router)."""
    sock_dir, args = sandbox_sockets()
    d = start_sandboxd(extra_args=args)
    r = Router(sock_dir)
    yield d, r
    r.stop()
    shutil.rmtree(sock_dir, ignore_errors=True)


def ports(stack):
    d, r = stack
    return [("sandboxd", d.rest_port), ("router", r.port)]


@pytest.mark.parametrize("name,req,want,body", CASES, ids=[c[0] for c in CASES])
def test_smuggling_shape_refused(stack, name, req, want, body):
    d, _ = stack
    for who, port in ports(stack):
        resp, closed = exchange(port, req)
        assert status_line(resp) == want, (who, resp)
        assert closed, (who, "connection left open after a refused request")
        if body is not None:  # None: libmicrohttpd's own refusal (it repeats its head)
            assert resp.count(b"HTTP/1.1 ") == 1, (who, resp)  # no second request parsed
            assert resp.split(b"\r\n\r\n", 1)[1] == body, (who, resp)
    for f in "abcdef":
        assert not os.path.exists(os.path.join(d.root, f)), f


def test_identical_content_lengths_accepted(stack):
    d, _ = stack
    for who, port in ports(stack):
        name = f"same-{who}"
        req = (f"PUT /v1/files/{name} HTTP/1.1\r\nHost: x\r\n{ID}Content-Length: 5\r\n"
               "Content-Length: 5\r\nConnection: close\r\n\r\nhello").encode()
        resp, _ = exchange(port, req)
        assert status_line(resp) == "HTTP/1.1 204 No Content", (who, resp)
        assert open(os.path.join(d.root, name), "rb").read() == b"hello"
        # without a body too (the router's event loop answers these itself)
        req = (f"GET /v1/health HTTP/1.1\r\nHost: x\r\n{ID}Content-Length: 0\r\n"
               "Content-Length: 0\r\nConnection: close\r\n\r\n").encode()
        resp, _ = exchange(port, req)
        assert status_line(resp) == "HTTP/1.1 200 OK", (who, resp)


def test_http10_without_host_and_plain_chunked_still_work(stack):
    d, _ = stack
    for who, port in ports(stack):
        resp, _ = exchange(port, f"GET /v1/health HTTP/1.0\r\n{ID}\r\n".encode())
        assert status_line(resp).endswith("200 OK"), (who, resp)
        name = f"chunked-{who}"
        req = (f"PUT /v1/files/{name} HTTP/1.1\r\nHost: x\r\n{ID}Transfer-Encoding: Chunked\r\n"
               "Connection: close\r\n\r\n5\r\nhello\r\n0\r\n\r\n").encode()
        resp, _ = exchange(port, req)
        assert status_line(resp) == "HTTP/1.1 204 No Content", (who, resp)
        assert open(os.path.join(d.root, name), "rb").read() == b"hello"
