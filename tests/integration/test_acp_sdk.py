"""acp-server driven by the official ACP TypeScript SDK (tests/acp, pinned in package-lock.json)
against the real agent loop (OPENAI_MODEL=fake-eliza) and real local sandboxes (asb serve with
runc). Each test talks over real loopback sockets."""
import os
import subprocess
import time

import pytest

from acp_helpers import AcpServer, RawClient, acp_binary, drive, tool_text, updates_of
from asb_apiserver import CORE
from local_sandbox import sbx_state, start_sbx  # noqa: F401  (fixtures)


@pytest.fixture
def stack(start_sbx, tmp_path):  # noqa: F811
    """asb serve with runc + acp-server using its control plane and token."""
    asb = start_sbx()
    acp = AcpServer(tmp_path, env={"ASB_STATE_DIR": asb.state_dir}).start()
    yield asb, acp
    assert acp.stop() == 0


def sandboxes(asb):
    r = asb.get(asb.path(CORE, "sandboxes", "default"))
    assert r.status_code == 200, r.text
    return r.json()["items"]


def test_prompt_with_run_uname(stack):
    asb, acp = stack
    rep = drive("basic", acp, token=asb.token)
    assert rep["init"]["protocolVersion"] == 1
    assert rep["init"]["agentCapabilities"]["loadSession"] is True
    assert [m["id"] for m in rep["init"]["authMethods"]] == ["asb-token"]
    sid = rep["sessionId"]
    assert rep["reflect"] == {"stopReason": "end_turn"}
    assert rep["run"] == {"stopReason": "end_turn"}
    texts = [u["content"]["text"] for u in updates_of(rep, sid, "agent_message_chunk")]
    assert any("What is the capital of France?" in t for t in texts), texts
    calls = updates_of(rep, sid, "tool_call")
    assert len(calls) == 1 and calls[0]["kind"] == "execute" and calls[0]["status"] == "pending"
    assert "uname -a" in str(calls[0]["rawInput"])
    # Permission was asked before the tool ran, for that very call, with all four options.
    assert len(rep["permissions"]) == 1
    perm = rep["permissions"][0]
    assert perm["toolCall"]["toolCallId"] == calls[0]["toolCallId"]
    assert sorted(o["kind"] for o in perm["options"]) == ["allow_always", "allow_once",
                                                          "reject_always", "reject_once"]
    ups = updates_of(rep, sid, "tool_call_update")
    assert [u["status"] for u in ups] == ["in_progress", "completed"]
    assert "Linux" in tool_text(ups[-1])
    # The command ran in a sandbox of the control plane.
    assert len(sandboxes(asb)) == 1


def test_permission_rejected(stack):
    asb, acp = stack
    rep = drive("reject", acp, token=asb.token)
    sid = rep["sessionId"]
    assert rep["run"] == {"stopReason": "end_turn"}
    assert len(rep["permissions"]) == 1
    ups = updates_of(rep, sid, "tool_call_update")
    assert [u["status"] for u in ups] == ["failed"]
    assert "Linux" not in tool_text(ups[0])
    assert "cancel" in tool_text(ups[0]).lower() or "reject" in tool_text(ups[0]).lower()
    assert sandboxes(asb) == []


def test_permission_allow_always_is_remembered(stack):
    asb, acp = stack
    rep = drive("always", acp, token=asb.token)
    sid = rep["sessionId"]
    assert rep["run1"] == rep["run2"] == {"stopReason": "end_turn"}
    assert len(rep["permissions"]) == 1
    done = [tool_text(u) for u in updates_of(rep, sid, "tool_call_update") if u["status"] == "completed"]
    assert len(done) == 2 and "first" in done[0] and "second" in done[1]
    # Each call, asked about or not, goes pending -> in_progress -> completed.
    calls = updates_of(rep, sid, "tool_call")
    assert len(calls) == 2
    for call in calls:
        statuses = [call["status"]] + [u["status"] for u in updates_of(rep, sid, "tool_call_update")
                                       if u["toolCallId"] == call["toolCallId"]]
        assert statuses == ["pending", "in_progress", "completed"], statuses
    # Both calls reused one sandbox.
    assert len(sandboxes(asb)) == 1


def test_cancel_while_permission_pending(stack):
    asb, acp = stack
    rep = drive("cancel-permission", acp, token=asb.token)
    assert rep["run"] == {"stopReason": "cancelled"}
    statuses = [u["status"] for u in updates_of(rep, rep["sessionId"], "tool_call_update")]
    assert "completed" not in statuses and "in_progress" not in statuses


def test_cancel_running_tool(stack):
    asb, acp = stack
    rep = drive("cancel-running", acp, token=asb.token)
    assert rep["run"] == {"stopReason": "cancelled"}
    assert rep["seconds"] < 30, rep["seconds"]
    assert rep["after"] == {"stopReason": "end_turn"}
    done = [tool_text(u) for u in updates_of(rep, rep["sessionId"], "tool_call_update")
            if u["status"] == "completed"]
    assert any("still-here" in t for t in done), done


def test_two_sessions_in_parallel(stack):
    asb, acp = stack
    rep = drive("parallel", acp, token=asb.token)
    a, b = rep["sessions"]
    assert a != b
    assert rep["results"] == [{"stopReason": "end_turn"}] * 2
    out_a = " ".join(tool_text(u) for u in updates_of(rep, a, "tool_call_update"))
    out_b = " ".join(tool_text(u) for u in updates_of(rep, b, "tool_call_update"))
    assert "from-a" in out_a and "from-b" not in out_a
    assert "from-b" in out_b and "from-a" not in out_b
    # Each session has its own sandbox.
    assert len(sandboxes(asb)) == 2


def test_unauthenticated_client_refused(stack):
    asb, acp = stack
    rep = drive("noauth", acp)
    assert rep["newError"]["code"] == -32000
    assert rep["authError"]["code"] == -32000
    assert rep["newError2"]["code"] == -32000
    assert sandboxes(asb) == []


def test_load_session_replays_history(stack):
    asb, acp = stack
    first = drive("basic", acp, token=asb.token)
    sid = first["sessionId"]
    rep = drive("load", acp, token=asb.token, env={"ACP_LOAD_SESSION": sid})
    assert rep["load"] is not None
    users = [u["content"]["text"] for u in updates_of(rep, sid, "user_message_chunk")]
    assert "What is the capital of France?" in users and "run: uname -a" in users
    agents = " ".join(u["content"]["text"] for u in updates_of(rep, sid, "agent_message_chunk"))
    assert "capital of France" in agents
    ups = updates_of(rep, sid, "tool_call_update")
    assert any("Linux" in tool_text(u) for u in ups)
    assert rep["permissions"] == []
    assert rep["missing"]["code"] == -32002


def test_terminal_client_asks_before_each_tool_call(stack):
    """acp-client: prompts and y/n answers on stdin, token found through ASB_STATE_DIR."""
    asb, acp = stack
    stdin = "hello agent\nrun: uname -a\ny\nrun: echo rejected-run\nn\n/exit\n"
    env = {"PATH": os.environ["PATH"], "ASB_STATE_DIR": asb.state_dir}
    r = subprocess.run([acp_binary("acp-client"), acp.address], input=stdin, capture_output=True,
                       text=True, env=env, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr + acp.output()
    out = r.stdout
    assert "Agent> What do you think it means when you say 'hello agent'?" in out
    assert out.count("Allow tool call") == 2, out + r.stderr + acp.output()
    assert "Linux" in out
    assert "[tool call-2] failed" in out and "rejected-run\n" not in out.split("[tool call-2] failed")[1]
    assert r.stderr.count("turn ended: end_turn") == 3
    # --session loads it again on a new connection and prints the replayed history.
    sid = r.stderr.split("acp-client: session ", 1)[1].split()[0]
    r = subprocess.run([acp_binary("acp-client"), "--session", sid, acp.address], input="/exit\n",
                       capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr + acp.output()
    assert "User> hello agent\n" in r.stdout and "User> run: uname -a\n" in r.stdout
    assert "Linux" in r.stdout and "Allow tool call" not in r.stdout
    # Without the token the client is refused.
    r = subprocess.run([acp_binary("acp-client"), acp.address], input="hi\n", capture_output=True,
                       text=True, env={"PATH": os.environ["PATH"], "ASB_STATE_DIR": "/nonexistent"},
                       timeout=30)
    assert r.returncode == 1 and "-32000" in r.stderr


def test_sigterm_during_a_running_tool_cancels_and_exits(stack):
    """SIGTERM closes connections, cancels the running turn (the tool is killed) and exits 0."""
    asb, acp = stack
    c = RawClient(acp.port, timeout=60)
    c.call(0, "initialize", {"protocolVersion": 1})
    assert "result" in c.call(1, "authenticate", {"methodId": "asb-token", "_meta": {"token": asb.token}})
    sid = c.call(2, "session/new", {"cwd": "/tmp", "mcpServers": []})["result"]["sessionId"]
    c.send({"jsonrpc": "2.0", "id": 3, "method": "session/prompt",
            "params": {"sessionId": sid, "prompt": [{"type": "text", "text": "run: sleep 60"}]}})
    while True:
        m = c.recv()
        if m.get("method") == "session/request_permission":
            c.send({"jsonrpc": "2.0", "id": m["id"],
                    "result": {"outcome": {"outcome": "selected", "optionId": "allow_once"}}})
        if m.get("method") == "session/update" and m["params"]["update"].get("status") == "in_progress":
            break
    time.sleep(0.5)
    t0 = time.monotonic()
    assert acp.stop() == 0
    assert time.monotonic() - t0 < 20
    assert "acp-server stopped" in acp.output()


def test_geminicli_toolset(start_sbx, tmp_path):  # noqa: F811
    """--toolset geminicli: the shell tool is run_shell_command, executed by the injected
    geminicli-toolbox; ACP sees its title and kind."""
    asb = start_sbx()
    acp = AcpServer(tmp_path, ["--toolset", "geminicli"], env={"ASB_STATE_DIR": asb.state_dir}).start()
    try:
        rep = drive("basic", acp, token=asb.token)
        sid = rep["sessionId"]
        calls = updates_of(rep, sid, "tool_call")
        assert len(calls) == 1 and calls[0]["kind"] == "execute"
        assert "run_shell_command" in calls[0]["title"]
        ups = updates_of(rep, sid, "tool_call_update")
        assert ups[-1]["status"] == "completed" and "Linux" in tool_text(ups[-1])
    finally:
        assert acp.stop() == 0


def test_two_connections_in_parallel(stack):
    """Two SDK clients on their own connections at once: separate sessions and sandboxes."""
    from concurrent.futures import ThreadPoolExecutor
    asb, acp = stack
    with ThreadPoolExecutor(2) as ex:
        reps = list(ex.map(lambda _: drive("basic", acp, token=asb.token), range(2)))
    sids = [r["sessionId"] for r in reps]
    assert sids[0] != sids[1]
    for r in reps:
        assert r["run"] == {"stopReason": "end_turn"}
        assert "Linux" in tool_text(updates_of(r, r["sessionId"], "tool_call_update")[-1])
        assert list(r["updates"]) == [r["sessionId"]]  # no update of the other connection leaked
    assert len(sandboxes(asb)) == 2


def test_terminal_client_ctrl_c_cancels_the_turn(stack):
    """Ctrl-C in acp-client sends session/cancel: the running tool is killed, the turn ends
    cancelled, and the next prompt works."""
    import signal
    import threading
    asb, acp = stack
    env = {"PATH": os.environ["PATH"], "ASB_STATE_DIR": asb.state_dir}
    p = subprocess.Popen([acp_binary("acp-client"), acp.address], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    out = bytearray()
    err = []

    def read_out():
        while True:
            b = p.stdout.read1(4096)
            if not b:
                return
            out.extend(b)

    t = threading.Thread(target=read_out, daemon=True)
    t2 = threading.Thread(target=lambda: err.append(p.stderr.read()), daemon=True)
    t.start()
    t2.start()
    try:
        p.stdin.write(b"run: sleep 60\ny\n")
        p.stdin.flush()
        deadline = time.monotonic() + 30
        while b"in_progress" not in out and time.monotonic() < deadline:
            time.sleep(0.05)
        assert b"in_progress" in out, out.decode()
        time.sleep(0.5)
        t0 = time.monotonic()
        p.send_signal(signal.SIGINT)
        p.stdin.write(b"run: echo after-cancel\ny\n/exit\n")
        p.stdin.flush()
        assert p.wait(timeout=30) == 0
        assert time.monotonic() - t0 < 20
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    t.join(5)
    t2.join(5)
    stderr = err[0].decode()
    assert "turn ended: cancelled" in stderr, stderr + acp.output()
    assert "turn ended: end_turn" in stderr
    assert "after-cancel" in out.decode()
