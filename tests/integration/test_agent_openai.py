"""The OpenAI-compatible client of sandboxed-tools against a scripted chat-completions server
(http.server on loopback): multi-step and parallel tool calls with the basic tools' exact result
strings, Gemini thought signatures passed back untouched, error bodies (OpenAI and Google
shapes), retries on 429/5xx."""
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from agent_cli import Agent, agent_replies
from local_sandbox import sbx_state, start_sbx  # noqa: F401


class Script:
    """Replies, in order, with (status, body) pairs; records every request (path, headers, JSON)."""

    def __init__(self, replies):
        self.replies = list(replies)
        self.requests = []
        script = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                n = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(n))
                script.requests.append((self.path, dict(self.headers), body))
                status, reply = script.replies.pop(0) if script.replies else (500, {"error": {"message": "script exhausted"}})
                data = reply if isinstance(reply, bytes) else json.dumps(reply).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *a):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1/"

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def script():
    made = []

    def make(replies):
        s = Script(replies)
        made.append(s)
        return s
    yield make
    for s in made:
        s.close()


def completion(content=None, tool_calls=None, finish="stop"):
    msg = {"role": "assistant", "content": content}
    if tool_calls:
        msg["tool_calls"] = tool_calls
    return 200, {"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "m",
                 "choices": [{"index": 0, "message": msg, "finish_reason": finish}]}


def call(id, name, arguments, **extra):
    args = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"id": id, "type": "function", "function": {"name": name, "arguments": args}, **extra}


def agent_for(tmp_path, s, state_dir=None, session="oai1", **env):
    return Agent(tmp_path, state_dir, session=session,
                 env={"OPENAI_MODEL": "test-model", "OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": s.url,
                      "AGENT_RETRY_BASE_MS": "20", **env})


SIG = {"google": {"thought_signature": "c2lnbmF0dXJlLW9wYXF1ZQ=="}}


def test_multi_step_tool_calls(script, start_sbx, sbx_state, tmp_path):
    start_sbx()
    write_args = '{"path": "dir/a.txt",  "content": "hello\\n"}'  # odd spacing: sent back byte for byte
    s = script([
        completion(None, [call("call_w", "write", write_args, extra_content=SIG)], finish="tool_calls"),
        completion("reading", [call("call_r", "read", {"path": "dir/a.txt"}),
                               call("call_l", "ls", {"path": "dir"}),
                               call("call_m", "read", {"path": "missing.txt"}),
                               call("call_c", "run_command", {"command": "echo out; echo err >&2; exit 3"}),
                               call("call_x", "nope", {}),
                               call("call_b", "read", "{not json"),
                               call("call_e", "read", {"path": ""})]),
        completion("all done"),
    ])
    a = agent_for(tmp_path, s, sbx_state)
    p = a.run("do things")
    assert agent_replies(p.stdout) == ["reading", "all done"], p.stderr
    assert len(s.requests) == 3
    path, headers, first = s.requests[0]
    assert path == "/v1/chat/completions"
    assert headers["Authorization"] == "Bearer sk-test"
    assert headers["Content-Type"] == "application/json"
    assert first["model"] == "test-model"
    assert [t["function"]["name"] for t in first["tools"]] == ["ls", "read", "run_command", "write"]
    assert first["tools"][2]["function"]["parameters"] == {
        "type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}
    assert [m["role"] for m in first["messages"]] == ["system", "user"]

    second = s.requests[1][2]["messages"]
    asked = second[2]
    assert asked["tool_calls"][0]["extra_content"] == SIG
    assert asked["tool_calls"][0]["function"]["arguments"] == write_args
    assert second[3] == {"role": "tool", "tool_call_id": "call_w", "content": 'Wrote file "dir/a.txt"'}

    tools = {m["tool_call_id"]: m["content"] for m in s.requests[2][2]["messages"] if m["role"] == "tool"}
    assert tools["call_r"] == "hello\n"
    assert tools["call_l"] == "a.txt\n"
    assert tools["call_m"] == ('Failed to read "missing.txt":\nstdout:\n\nstderr:\n'
                               'cat: missing.txt: No such file or directory\n\nexit_code: 1')
    assert tools["call_c"] == "stdout:\nout\n\nstderr:\nerr\n\nexit_code: 3"
    assert tools["call_x"] == 'Error calling tool "nope": tool "nope" not found'
    assert tools["call_b"].startswith('Error calling tool "read": failed to parse arguments: ')
    assert tools["call_e"] == 'Error calling tool "read": failed to run tool: path is required'
    # Every tool call id got exactly one tool message, in order.
    assert [m.get("tool_call_id") for m in s.requests[2][2]["messages"][5:12]] == \
        ["call_r", "call_l", "call_m", "call_c", "call_x", "call_b", "call_e"]


def test_empty_tool_call_id_gets_one(script, start_sbx, sbx_state, tmp_path):
    start_sbx()
    s = script([completion(None, [call("", "run_command", {"command": "true"})]), completion("ok")])
    p = agent_for(tmp_path, s, sbx_state).run("go")
    assert agent_replies(p.stdout) == ["ok"]
    msgs = s.requests[1][2]["messages"]
    gen = msgs[2]["tool_calls"][0]["id"]
    assert gen and msgs[3]["tool_call_id"] == gen


def test_error_bodies_reported(script, tmp_path):
    s = script([
        (400, {"error": {"message": "model xyz does not exist", "type": "invalid_request_error",
                         "param": None, "code": "model_not_found"}}),
        (400, [{"error": {"code": 400, "message": "Invalid JSON payload received. Unknown name \"x\"",
                          "status": "INVALID_ARGUMENT"}}]),
        (401, b"plain text denial"),
        completion("recovered"),
    ])
    p = agent_for(tmp_path, s).run("one", "two", "three", "four")
    err = p.stderr
    assert ("error: llm: api error (status 400): model xyz does not exist "
            "(invalid_request_error, model_not_found)") in err
    assert ('error: llm: api error (status 400): Invalid JSON payload received. Unknown name "x" '
            "(INVALID_ARGUMENT)") in err
    assert "error: llm: api error (status 401): plain text denial" in err
    # Not retried (4xx other than 429), and the REPL went on.
    assert len(s.requests) == 4
    assert agent_replies(p.stdout) == ["recovered"]
    # The failed turns' user messages stay in the history, so the model sees them.
    assert [m["content"] for m in s.requests[3][2]["messages"] if m["role"] == "user"] == \
        ["one", "two", "three", "four"]


def test_429_and_5xx_retried(script, tmp_path):
    s = script([
        (429, {"error": {"message": "slow down", "type": "rate_limit_exceeded"}}),
        (503, {"error": {"message": "overloaded", "type": "server_error"}}),
        completion("finally"),
    ])
    p = agent_for(tmp_path, s).run("hi")
    assert agent_replies(p.stdout) == ["finally"]
    assert len(s.requests) == 3
    assert "slow down" in p.stderr and "retrying" in p.stderr
    assert s.requests[0][2] == s.requests[2][2]


def test_retries_give_up(script, tmp_path):
    s = script([(500, {"error": {"message": f"boom {i}"}}) for i in range(5)] + [completion("late")])
    p = agent_for(tmp_path, s).run("hi")
    assert len(s.requests) == 5
    assert "error: llm: api error (status 500): boom 4" in p.stderr
    assert agent_replies(p.stdout) == []


def test_malformed_response(script, tmp_path):
    s = script([(200, {"id": "x", "choices": []}), (200, b"{not json"), completion("fine")])
    p = agent_for(tmp_path, s).run("a", "b", "c")
    assert "error: llm: no choices in response" in p.stderr
    assert "error: llm: invalid JSON in response" in p.stderr
    assert agent_replies(p.stdout) == ["fine"]
