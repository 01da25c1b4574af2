"""The router embedded in `asb serve`, over HTTP/1.1: REST to real runc sandboxes, routing
header validation, auth, error bodies, the legacy python-runtime layer."""
import json
import os
import socket
import subprocess
import threading
import time

import pytest
import requests

from router_fixture import router_env_fixture

router_env = router_env_fixture()


@pytest.fixture(scope="module")
def box(router_env):
    router_env.sandbox("box")
    return "box"


def test_healthz_needs_no_auth(router_env):
    r = requests.get(router_env.url + "/healthz")
    assert r.status_code == 200
    assert r.json() == {"status": "ok"}


def test_rest_put_get_through_router(router_env, box):
    u = router_env.url
    r = requests.put(u + "/v1/files/hello.txt", data=b"hi there", headers=router_env.headers(box))
    assert r.status_code == 204, r.text
    r = requests.get(u + "/v1/files/hello.txt", headers=router_env.headers(box))
    assert r.status_code == 200
    assert r.content == b"hi there"
    assert r.headers["Content-Type"] == "application/octet-stream"
    r = requests.get(u + "/v1/health", headers=router_env.headers(box, port=8080))
    assert r.status_code == 200 and r.json()["status"] == "ok"
    # sandboxd's own error bodies pass through untouched
    r = requests.get(u + "/v1/files/nope", headers=router_env.headers(box))
    assert r.status_code == 404 and r.json()["code"] == "NOT_FOUND"
    r = requests.head(u + "/v1/files/hello.txt", headers=router_env.headers(box))
    assert r.status_code == 200 and r.headers["Content-Length"] == "8" and r.content == b""


def test_keep_alive_many_requests_one_connection(router_env, box):
    s = requests.Session()
    peers = set()
    for i in range(20):
        r = s.put(router_env.url + f"/v1/files/k{i}", data=str(i).encode(), headers=router_env.headers(box))
        assert r.status_code == 204
        r = s.get(router_env.url + f"/v1/files/k{i}", headers=router_env.headers(box), stream=True)
        peers.add(r.raw._connection.sock.getsockname())
        assert r.content == str(i).encode()
    assert len(peers) == 1


def test_chunked_upload(router_env, box):
    def gen():
        for i in range(100):
            yield b"x" * 1000
    r = requests.put(router_env.url + "/v1/files/chunked.bin", data=gen(), headers=router_env.headers(box))
    assert r.status_code == 204, r.text
    r = requests.get(router_env.url + "/v1/files/chunked.bin", headers=router_env.headers(box))
    assert r.content == b"x" * 100000


@pytest.mark.parametrize("headers,detail", [
    ({}, "X-Sandbox-ID header is required."),
    ({"X-Sandbox-ID": "Bad_Name"}, "Invalid sandbox ID format."),
    ({"X-Sandbox-ID": "a" * 64}, "Invalid sandbox ID format."),
    ({"X-Sandbox-ID": "box", "X-Sandbox-Namespace": "NS!"}, "Invalid namespace format."),
    ({"X-Sandbox-ID": "box", "X-Sandbox-Port": "http"}, "Invalid port format."),
    ({"X-Sandbox-ID": "box", "X-Sandbox-Port": "70000"}, "Invalid port format."),
    ({"X-Sandbox-ID": "box", "X-Sandbox-Pod-IP": "127.0.0.1"}, "Invalid target IP address."),
])
def test_header_validation(router_env, headers, detail):
    r = requests.get(router_env.url + "/v1/health", headers={**router_env.auth, **headers})
    assert r.status_code == 400
    assert r.json() == {"detail": detail}


def test_port_nothing_listens_on_is_502(router_env, box):
    """Any port is forwarded into the sandbox (test_router_ports.py); with nothing listening
    there the connect is refused: upstream's 502."""
    r = requests.get(router_env.url + "/v1/health", headers=router_env.headers(box, port=3000))
    assert r.status_code == 502
    assert r.json() == {"detail": "Could not connect to the backend sandbox: box"}


def test_unknown_sandbox_is_404(router_env):
    r = requests.get(router_env.url + "/v1/health", headers=router_env.headers("ghost"))
    assert r.status_code == 404
    assert "ghost" in r.json()["detail"]
    r = requests.get(router_env.url + "/v1/health", headers=router_env.headers("box", ns="other"))
    assert r.status_code == 404


def test_auth(router_env, box):
    u = router_env.url + "/v1/health"
    r = requests.get(u, headers=router_env.headers(box, auth=False))
    assert r.status_code == 401
    assert r.json() == {"detail": "Missing or invalid Authorization header."}
    r = requests.get(u, headers={**router_env.headers(box), "Authorization": "Bearer wrong"})
    assert r.status_code == 401 and r.json() == {"detail": "Invalid token."}
    r = requests.get(u, headers={**router_env.headers(box), "Authorization": "Basic abc"})
    assert r.status_code == 401 and r.json() == {"detail": "Missing or invalid Authorization header."}
    r = requests.get(u, headers={**router_env.headers(box), "Authorization": "bearer " + router_env.token})
    assert r.status_code == 200


def test_router_file_and_token(router_env):
    assert router_env.url.startswith("http://127.0.0.1:")
    r = requests.get(router_env.url + "/healthz")
    assert r.status_code == 200


def test_malformed_request_gets_400(router_env):
    host, port = router_env.hostport().rsplit(":", 1)
    s = socket.create_connection((host, int(port)))
    s.sendall(b"GET /v1/health HTTP/1.1\r\nHost x\r\n\r\n")
    data = s.recv(4096)
    s.close()
    assert data.startswith(b"HTTP/1.1 400")


def test_sandbox_deleted_socket_gone_is_502(router_env):
    router_env.sandbox("gone")
    rest, _ = router_env.sockets("gone")
    r = requests.get(router_env.url + "/v1/health", headers=router_env.headers("gone"))
    assert r.status_code == 200
    os.rename(rest, rest + ".moved")
    try:
        time.sleep(1.2)  # the resolver cache (1 s) expires
        r = requests.get(router_env.url + "/v1/health", headers=router_env.headers("gone"))
        assert r.status_code == 502
        assert r.json() == {"detail": "Could not connect to the backend sandbox: gone"}
    finally:
        os.rename(rest + ".moved", rest)


# ---- legacy python-runtime layer ----

def legacy(router_env, box):
    return router_env.headers(box, port=8888)


def test_legacy_health(router_env, box):
    r = requests.get(router_env.url + "/", headers=legacy(router_env, box))
    assert r.status_code == 200
    assert r.json() == {"status": "ok", "message": "Sandbox Runtime is active."}
    # no port header, non-/v1 path: legacy as well (upstream's default port 8888)
    r = requests.get(router_env.url + "/", headers=router_env.headers(box))
    assert r.json()["message"] == "Sandbox Runtime is active."


def test_legacy_execute(router_env, box):
    u = router_env.url + "/execute"
    r = requests.post(u, json={"command": "echo 'hello world' && x"}, headers=legacy(router_env, box))
    assert r.status_code == 200
    assert r.json() == {"stdout": "hello world && x\n", "stderr": "", "exit_code": 0}
    r = requests.post(u, json={"command": "sh -c 'echo oops >&2; exit 3'"}, headers=legacy(router_env, box))
    assert r.json() == {"stdout": "", "stderr": "oops\n", "exit_code": 3}
    r = requests.post(u, json={"command": "echo 'unterminated"}, headers=legacy(router_env, box))
    assert r.json() == {"stdout": "", "stderr": "Failed to execute command: No closing quotation",
                        "exit_code": 1}
    r = requests.post(u, data=b"not json", headers={**legacy(router_env, box), "Content-Type": "application/json"})
    assert r.status_code == 422
    r = requests.get(u, headers=legacy(router_env, box))
    assert r.status_code == 405


def test_legacy_execute_survives_deeply_nested_bodies(router_env, box):
    """jansson parses up to 2048 levels; the router's helper threads (256 KiB stacks) must hold
    its parser that deep, whoever sends the JSON (a client here; sandboxd's replies too)."""
    u = router_env.url + "/execute"
    h = {**legacy(router_env, box), "Content-Type": "application/json"}
    for deep in ('{"command": "true", "x": ' + "[" * 2040 + "]" * 2040 + "}",
                 '{"x": ' + '{"x": ' * 2040 + "1" + "}" * 2041):
        r = requests.post(u, data=deep.encode(), headers=h)
        assert r.status_code in (200, 422), r.text
    r = requests.post(u, json={"command": "echo still"}, headers=legacy(router_env, box))
    assert r.status_code == 200 and r.json()["stdout"] == "still\n"
    assert router_env.asb.running


def test_legacy_files(router_env, box):
    u = router_env.url
    h = legacy(router_env, box)
    r = requests.post(u + "/upload", files={"file": ("legacy/dir/a.txt", b"legacy content")}, headers=h)
    assert r.status_code == 200, r.text
    assert r.json() == {"message": "File 'legacy/dir/a.txt' uploaded successfully."}
    r = requests.get(u + "/download/legacy/dir/a.txt", headers=h)
    assert r.status_code == 200 and r.content == b"legacy content"
    assert r.headers["Content-Disposition"] == 'attachment; filename="a.txt"'
    r = requests.get(u + "/download/legacy/dir/missing", headers=h)
    assert r.status_code == 404 and r.json() == {"message": "File not found"}
    r = requests.get(u + "/download/legacy/dir", headers=h)
    assert r.status_code == 404
    r = requests.get(u + "/list/legacy/dir", headers=h)
    assert r.status_code == 200
    [e] = r.json()
    assert e["name"] == "a.txt" and e["size"] == 14 and e["type"] == "file"
    assert isinstance(e["mod_time"], float)
    r = requests.get(u + "/list/legacy/dir/a.txt", headers=h)
    assert r.status_code == 404 and r.json() == {"message": "Path is not a directory"}
    r = requests.get(u + "/exists/legacy/dir/a.txt", headers=h)
    assert r.json() == {"path": "legacy/dir/a.txt", "exists": True}
    r = requests.get(u + "/exists/legacy%2Fnope", headers=h)
    assert r.json() == {"path": "legacy/nope", "exists": False}
    r = requests.get(u + "/exists/..%2F..%2Fetc", headers=h)
    assert r.status_code == 403 and r.json() == {"message": "Access denied"}
    r = requests.post(u + "/upload", files={"file": ("../../escape.txt", b"x")}, headers=h)
    assert r.status_code == 403 and r.json() == {"message": "Access denied"}
    r = requests.get(u + "/nothing-here", headers=h)
    assert r.status_code == 404 and r.json() == {"detail": "Not Found"}


def test_early_upstream_error_with_large_body(router_env, box):
    """sandboxd answers 400 on a bad mode before reading the body: the client still gets the
    400 (not a router 502)."""
    r = requests.put(router_env.url + "/v1/files/m.bin?mode=0999", data=b"z" * (8 << 20),
                     headers=router_env.headers(box))
    assert r.status_code == 400, r.text
    assert r.json()["code"] == "INVALID_ARGUMENT"
