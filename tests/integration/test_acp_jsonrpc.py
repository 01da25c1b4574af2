"""acp-server over raw TCP: JSON-RPC error codes for malformed input, authentication refusal,
and the --allow-unauthenticated loopback rule. No sandbox is touched (no tool call runs)."""
import subprocess

import pytest

from acp_helpers import AcpServer, RawClient, acp_binary

TOKEN = "acp-test-token-0123456789abcdef"


@pytest.fixture
def server(tmp_path):
    tf = tmp_path / "token"
    tf.write_text(TOKEN + "\n")
    s = AcpServer(tmp_path, ["--token-file", str(tf)]).start()
    yield s
    assert s.stop() == 0


def init(c):
    r = c.call(0, "initialize", {"protocolVersion": 1})
    assert r["result"]["protocolVersion"] == 1
    return r["result"]


def test_initialize_advertises_token_auth_and_load_session(server):
    c = RawClient(server.port)
    res = init(c)
    assert res["agentCapabilities"]["loadSession"] is True
    assert [m["id"] for m in res["authMethods"]] == ["asb-token"]


def test_sessions_refused_until_authenticated(server):
    c = RawClient(server.port)
    init(c)
    for i, (method, params) in enumerate([
            ("session/new", {"cwd": "/tmp", "mcpServers": []}),
            ("session/load", {"sessionId": "s1", "cwd": "/tmp", "mcpServers": []}),
            ("session/prompt", {"sessionId": "s1", "prompt": [{"type": "text", "text": "hi"}]})]):
        r = c.call(10 + i, method, params)
        assert r["error"]["code"] == -32000, r
    r = c.call(20, "authenticate", {"methodId": "asb-token", "_meta": {"token": "wrong"}})
    assert r["error"]["code"] == -32000
    r = c.call(21, "authenticate", {"methodId": "asb-token"})
    assert r["error"]["code"] == -32000
    r = c.call(22, "authenticate", {"methodId": "oauth", "_meta": {"token": TOKEN}})
    assert r["error"]["code"] == -32602
    assert c.call(23, "session/new", {"cwd": "/tmp", "mcpServers": []})["error"]["code"] == -32000
    r = c.call(24, "authenticate", {"methodId": "asb-token", "_meta": {"token": TOKEN}})
    assert r["result"] == {}
    r = c.call(25, "session/new", {"cwd": "/tmp", "mcpServers": []})
    assert r["result"]["sessionId"]
    # Authentication is per connection.
    c2 = RawClient(server.port)
    init(c2)
    assert c2.call(1, "session/new", {"cwd": "/tmp", "mcpServers": []})["error"]["code"] == -32000


def test_requests_before_initialize_are_invalid(server):
    c = RawClient(server.port)
    r = c.call(1, "authenticate", {"methodId": "asb-token", "_meta": {"token": TOKEN}})
    assert r["error"]["code"] == -32600


@pytest.mark.parametrize("raw,code", [
    (b"{not json", -32700),
    (b"\xff\xfe{}", -32700),
    (b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{},"params":{}}', -32700),
    (b"[1,2,3]", -32600),
    (b"42", -32600),
    (b'{"id":1,"method":"initialize","params":{"protocolVersion":1}}', -32600),
    (b'{"jsonrpc":"1.0","id":1,"method":"initialize"}', -32600),
    (b'{"jsonrpc":"2.0","id":1,"method":7}', -32600),
    (b'{"jsonrpc":"2.0","id":{"a":1},"method":"initialize"}', -32600),
    (b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":"x"}', -32600),
    (b'{"jsonrpc":"2.0","id":1}', -32600),
    (b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}', -32602),
    (b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":-1}}', -32602),
    (b'{"jsonrpc":"2.0","id":1,"method":"no/such/method","params":{}}', -32601),
])
def test_malformed_input_gets_standard_errors(server, raw, code):
    c = RawClient(server.port)
    c.send_raw(raw + b"\n")
    r = c.recv()
    assert r["jsonrpc"] == "2.0"
    assert r["error"]["code"] == code, r
    if code == -32601:
        assert r["error"]["data"] == {"method": "no/such/method"}
    # The connection keeps working after the error.
    assert init(c)["protocolVersion"] == 1


def test_ids_echoed_with_their_json_type(server):
    c = RawClient(server.port)
    for id_ in ("0", 0, "abc", 2**53):
        c.send({"jsonrpc": "2.0", "id": id_, "method": "initialize", "params": {"protocolVersion": 1}})
        r = c.recv()
        assert r["id"] == id_ and type(r["id"]) is type(id_)


def test_notifications_and_stray_responses_get_no_reply(server):
    c = RawClient(server.port)
    c.send({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "x"}})
    c.send({"jsonrpc": "2.0", "method": "_unknown/notification"})
    c.send({"jsonrpc": "2.0", "id": 99, "result": {}})
    c.send({"jsonrpc": "2.0", "id": 98, "result": {}, "error": {"code": 1}})
    c.send_raw(b"\n   \r\n")
    # The first reply on the line is the one to this request.
    r = c.call(5, "initialize", {"protocolVersion": 1})
    assert r["id"] == 5 and "result" in r


def test_bad_session_params(server):
    c = RawClient(server.port)
    init(c)
    c.call(1, "authenticate", {"methodId": "asb-token", "_meta": {"token": TOKEN}})
    for params in ({"cwd": "relative", "mcpServers": []}, {"cwd": "/tmp"}, {"mcpServers": []},
                   {"cwd": "/tmp", "mcpServers": [1]}, []):
        assert c.call(2, "session/new", params)["error"]["code"] == -32602, params
    sid = c.call(3, "session/new", {"cwd": "/tmp", "mcpServers": []})["result"]["sessionId"]
    r = c.call(4, "session/prompt", {"sessionId": sid, "prompt": [{"type": "image", "data": "",
                                                                   "mimeType": "image/png"}]})
    assert r["error"]["code"] == -32602
    r = c.call(5, "session/prompt", {"sessionId": "snope", "prompt": []})
    assert r["error"]["code"] == -32002
    r = c.call(6, "session/load", {"sessionId": "../../etc", "cwd": "/tmp", "mcpServers": []})
    assert r["error"]["code"] == -32002


def test_oversized_line_closes_connection_and_server_survives(server):
    c = RawClient(server.port, timeout=30)
    chunk = b"x" * (1 << 20)
    try:
        for _ in range(9):
            c.send_raw(chunk)
    except OSError:
        pass
    r = c.recv()
    assert r["error"]["code"] == -32700
    with pytest.raises((EOFError, OSError)):
        c.recv()
    assert init(RawClient(server.port))["protocolVersion"] == 1


def test_fake_eliza_reflection_over_raw_tcp(server):
    c = RawClient(server.port)
    init(c)
    c.call(1, "authenticate", {"methodId": "asb-token", "_meta": {"token": TOKEN}})
    sid = c.call(2, "session/new", {"cwd": "/tmp", "mcpServers": []})["result"]["sessionId"]
    c.send({"jsonrpc": "2.0", "id": 3, "method": "session/prompt",
            "params": {"sessionId": sid, "prompt": [{"type": "text", "text": "What is the capital of France?"}]}})
    chunks = []
    while True:
        m = c.recv()
        if m.get("method") == "session/update":
            u = m["params"]["update"]
            if u["sessionUpdate"] == "agent_message_chunk":
                chunks.append(u["content"]["text"])
        elif m.get("id") == 3:
            assert m["result"] == {"stopReason": "end_turn"}
            break
    assert "What is the capital of France?" in "".join(chunks)


def test_allow_unauthenticated_only_on_loopback(tmp_path):
    r = subprocess.run([acp_binary(), "--listen", "0.0.0.0:0", "--allow-unauthenticated"],
                       capture_output=True, text=True, timeout=10,
                       env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "OPENAI_MODEL": "fake-eliza"})
    assert r.returncode == 1
    assert "loopback" in r.stderr


def test_allow_unauthenticated_on_loopback(tmp_path):
    s = AcpServer(tmp_path, ["--allow-unauthenticated"]).start()
    try:
        c = RawClient(s.port)
        assert init(c)["authMethods"] == [] or True
        r = c.call(1, "session/new", {"cwd": "/tmp", "mcpServers": []})
        assert r["result"]["sessionId"]
    finally:
        assert s.stop() == 0


def test_no_token_refuses_to_start(tmp_path):
    r = subprocess.run([acp_binary(), "--listen", "127.0.0.1:0"], capture_output=True, text=True,
                       timeout=10, env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path),
                                        "ASB_STATE_DIR": str(tmp_path / "nostate"),
                                        "OPENAI_MODEL": "fake-eliza"})
    assert r.returncode == 1
    assert "token" in r.stderr


def test_random_mutations_do_not_hurt_the_server(server):
    """Seeded byte mutations of real messages on an authenticated connection: every line gets
    at most one reply, and the server keeps serving."""
    import json
    import random
    rnd = random.Random(1234)
    c = RawClient(server.port)
    init(c)
    c.call(1, "authenticate", {"methodId": "asb-token", "_meta": {"token": TOKEN}})
    sid = c.call(2, "session/new", {"cwd": "/tmp", "mcpServers": []})["result"]["sessionId"]
    templates = [
        {"jsonrpc": "2.0", "id": 10, "method": "initialize", "params": {"protocolVersion": 1}},
        {"jsonrpc": "2.0", "id": 11, "method": "session/new", "params": {"cwd": "/tmp", "mcpServers": []}},
        {"jsonrpc": "2.0", "id": 12, "method": "session/load",
         "params": {"sessionId": sid, "cwd": "/tmp", "mcpServers": []}},
        {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": sid}},
        {"jsonrpc": "2.0", "id": 0, "result": {"outcome": {"outcome": "selected", "optionId": "allow_once"}}},
        {"jsonrpc": "2.0", "id": 13, "method": "authenticate", "params": {"methodId": "asb-token"}},
    ]
    for i in range(1500):
        line = bytearray(json.dumps(rnd.choice(templates)).encode())
        for _ in range(rnd.randint(1, 4)):
            op = rnd.randrange(3)
            pos = rnd.randrange(len(line))
            if op == 0:
                line[pos] = rnd.randrange(256)
            elif op == 1:
                del line[pos]
            else:
                line.insert(pos, rnd.choice(b'{}[]":,\\0x\xff'))
        c.send_raw(bytes(line).replace(b"\n", b" ") + b"\n")
    # Everything sent so far is answered (or ignored) before this request's reply.
    r = c.call("final", "initialize", {"protocolVersion": 1})
    assert r["result"]["protocolVersion"] == 1
    assert init(RawClient(server.port))["protocolVersion"] == 1
    assert server.proc.poll() is None


def test_deploy_manifest_has_no_service_and_requires_auth():
    import os
    import yaml
    from acp_helpers import ROOT
    with open(os.path.join(ROOT, "deploy", "acp-server.yaml")) as f:
        text = f.read()
    docs = [d for d in yaml.safe_load_all(text) if d]
    kinds = [d["kind"] for d in docs]
    assert "Service" not in kinds and "Deployment" in kinds
    assert "NO Service" in text  # the reason is given in the comment
    dep = next(d for d in docs if d["kind"] == "Deployment")
    c = dep["spec"]["template"]["spec"]["containers"][0]
    assert "--allow-unauthenticated" not in c["args"] and "--token-file" in c["args"]
    # The flags the manifest passes are ones acp-server accepts.
    r = subprocess.run([acp_binary(), "--help"], capture_output=True, text=True)
    for a in c["args"]:
        if a.startswith("--"):
            assert a in r.stdout, a


def test_ipv6_loopback_listen(tmp_path):
    import json
    import socket
    s = AcpServer(tmp_path, ["--listen", "[::1]:0", "--allow-unauthenticated"]).start()
    try:
        assert s.address.startswith("[::1]:")
        sock = socket.create_connection(("::1", s.port), timeout=10)
        sock.sendall(b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}\n')
        r = json.loads(sock.makefile("rb").readline())
        assert r["result"]["protocolVersion"] == 1
        sock.close()
    finally:
        assert s.stop() == 0
