"""`asb mcp` at the protocol level, with raw messages (no SDK, no sandbox needed): version
negotiation, sessions and auth on Streamable HTTP, and malformed JSON-RPC on both transports."""
import json
import os
import subprocess

import pytest
import requests

from asb_apiserver import asb_binary
from mcp_helpers import McpHttp

INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "raw", "version": "0"}}}
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


class _NoServer:
    """Stands in for an `asb serve`: the protocol needs none until a tool runs."""
    state_dir = "/nonexistent-asb-state"


@pytest.fixture
def http(tmp_path):
    mcp = McpHttp(tmp_path, _NoServer(), args=["--auth-token", "s3cret"]).start()
    yield mcp
    assert mcp.stop() == 0


def post(mcp, body, token="s3cret", session=None, raw=None, **headers):
    h = {**HEADERS, **headers}
    if token:
        h["Authorization"] = f"Bearer {token}"
    if session:
        h["Mcp-Session-Id"] = session
    data = raw if raw is not None else json.dumps(body)
    return requests.post(mcp.url, data=data, headers=h, timeout=10)


def initialize(mcp, version="2025-06-18"):
    body = json.loads(json.dumps(INIT))
    body["params"]["protocolVersion"] = version
    r = post(mcp, body)
    assert r.status_code == 200, r.text
    return r.headers["Mcp-Session-Id"], r.json()["result"]


def test_http_refuses_requests_without_the_token(http):
    r = post(http, INIT, token=None)
    assert r.status_code == 401 and r.headers["WWW-Authenticate"].startswith("Bearer")
    assert post(http, INIT, token="wrong").status_code == 401
    assert post(http, INIT, token="s3cret").status_code == 200


def test_http_refuses_foreign_browser_origins(http):
    assert post(http, INIT, Origin="http://evil.example").status_code == 403
    assert post(http, INIT, Origin="http://localhost:3000").status_code == 200
    assert post(http, INIT, Origin=f"http://{http.address}").status_code == 200


def test_http_sessions(http):
    sid, result = initialize(http)
    assert len(sid) == 32 and result["protocolVersion"] == "2025-06-18"
    tools = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
    assert post(http, tools).status_code == 400  # no Mcp-Session-Id
    assert post(http, tools, session="0" * 32).status_code == 404
    r = post(http, tools, session=sid, **{"MCP-Protocol-Version": "2025-06-18"})
    assert r.status_code == 200 and len(r.json()["result"]["tools"]) == 10
    assert post(http, tools, session=sid, **{"MCP-Protocol-Version": "1999-01-01"}).status_code == 400
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert post(http, note, session=sid).status_code == 202
    assert requests.get(http.url, headers={"Authorization": "Bearer s3cret"}, timeout=10).status_code == 405
    d = requests.delete(http.url, headers={"Authorization": "Bearer s3cret", "Mcp-Session-Id": sid}, timeout=10)
    assert d.status_code == 200
    assert post(http, tools, session=sid).status_code == 404
    assert requests.post(http.url.replace("/mcp", "/other"), data="{}", headers={**HEADERS, "Authorization": "Bearer s3cret"},
                         timeout=10).status_code == 404


def test_http_version_negotiation(http):
    for asked, got in (("2024-11-05", "2024-11-05"), ("2025-03-26", "2025-03-26"),
                       ("2025-11-25", "2025-11-25"), ("1999-01-01", "2025-11-25")):
        sid, result = initialize(http, asked)
        assert result["protocolVersion"] == got
    # Before 2025-06-18 there are no structured outputs: no outputSchema is advertised.
    sid, _ = initialize(http, "2025-03-26")
    r = post(http, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, session=sid)
    assert all("outputSchema" not in t for t in r.json()["result"]["tools"])


def test_http_malformed_json_rpc(http):
    sid, _ = initialize(http)
    r = post(http, None, raw="{not json", session=sid)
    assert r.status_code == 400 and r.json()["error"]["code"] == -32700
    r = post(http, {"jsonrpc": "1.0", "id": 5, "method": "ping"}, session=sid)
    assert r.status_code == 400 and r.json()["error"]["code"] == -32600
    r = post(http, {"jsonrpc": "2.0", "id": 6, "method": "no/such"}, session=sid)
    assert r.status_code == 200 and r.json()["error"]["code"] == -32601
    r = post(http, {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": 3}}, session=sid)
    assert r.status_code == 200 and r.json()["error"]["code"] == -32602
    # With a progress token the answer comes on an SSE stream.
    r = post(http, {"jsonrpc": "2.0", "id": 8, "method": "tools/call",
                    "params": {"name": "nope", "_meta": {"progressToken": 1}}}, session=sid)
    assert r.headers["Content-Type"] == "text/event-stream"
    assert json.loads(r.text.split("data: ", 1)[1])["error"]["code"] == -32602
    r = post(http, None, raw="x" * (9 * 1024 * 1024), session=sid)
    assert r.status_code == 413
    # Still serving.
    assert post(http, {"jsonrpc": "2.0", "id": 8, "method": "ping"}, session=sid).json()["result"] == {}


def test_http_needs_a_token_or_loopback_opt_out(tmp_path):
    env = {**os.environ, "ASB_STATE_DIR": "/nonexistent-asb-state"}
    env.pop("ASB_TOKEN", None)
    r = subprocess.run([asb_binary(), "mcp", "--listen", "127.0.0.1:0"], env=env,
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "no bearer token" in r.stderr
    r = subprocess.run([asb_binary(), "mcp", "--listen", "0.0.0.0:0", "--allow-unauthenticated"],
                       env=env, capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "loopback" in r.stderr
    mcp = McpHttp(tmp_path, _NoServer(), args=["--allow-unauthenticated"]).start()
    try:
        assert post(mcp, INIT, token=None).status_code == 200
    finally:
        assert mcp.stop() == 0


def test_stdio_malformed_and_uninitialized():
    lines = [
        "{broken",
        json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
        json.dumps([1, 2]),
        json.dumps(INIT),
        json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json.dumps({"jsonrpc": "2.0", "id": "t", "method": "tools/list"}),
        json.dumps({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
                    "params": {"name": "file_exists", "arguments": {"sandbox_claim_name": "x", "path": "a"}}}),
    ]
    env = {**os.environ, "ASB_STATE_DIR": "/nonexistent-asb-state"}
    for k in ("ASB_SERVER", "ASB_TOKEN"):
        env.pop(k, None)
    r = subprocess.run([asb_binary(), "mcp"], input="\n".join(lines) + "\n", env=env,
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    assert "Sanitizer" not in r.stderr and "runtime error:" not in r.stderr, r.stderr
    out = [json.loads(line) for line in r.stdout.splitlines()]
    by_id = {json.dumps(m.get("id")): m for m in out if "id" in m and m.get("id") is not None}
    nulls = [m for m in out if m.get("id") is None]
    assert sorted(m["error"]["code"] for m in nulls) == [-32700, -32600]
    assert by_id["2"]["error"]["code"] == -32600  # tools/list before initialize; after it:
    assert len(by_id['"t"']["result"]["tools"]) == 10
    err = by_id["9"]["result"]
    assert err["isError"] and "asb serve" in err["content"][0]["text"]
