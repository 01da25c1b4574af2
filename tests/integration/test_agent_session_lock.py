"""One process at a time per agent session, whatever the program: sandboxed-tools and acp-server
take an flock on <session dir>/lock before reading the history, and a second process gets an
error naming the holder (pid and program) instead of interleaving the history. Real processes,
no sandbox needed (the fake model answers without tools)."""
import json
import os
import subprocess
import time

from acp_helpers import AcpServer, RawClient
from agent_cli import Agent, binary


def history(agent):
    path = os.path.join(agent.session_dir, "sessions", "latest.jsonl")
    with open(path) as f:
        return [json.loads(line) for line in f]


def wait_until(pred, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.05)
    return False


def history_len(agent):
    try:
        return len(history(agent))
    except (OSError, ValueError):
        return 0


def acp_open(server):
    c = RawClient(server.port)
    assert c.call(0, "initialize", {"protocolVersion": 1})["result"]["protocolVersion"] == 1
    return c


def load(c, id_, sid):
    return c.call(id_, "session/load", {"sessionId": sid, "cwd": "/tmp", "mcpServers": []})


def test_session_lock_between_sandboxed_tools_and_acp_server(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    a = Agent(home, session="lk1")
    # The holder: a CLI in the middle of its REPL (its stdin stays open).
    holder = subprocess.Popen([binary(), "-session", "lk1"], stdin=subprocess.PIPE,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                              env=a.environ())
    try:
        holder.stdin.write("first question\n")
        holder.stdin.flush()
        assert wait_until(lambda: history_len(a) == 3), "the holder never answered"
        # A second CLI on the same session is refused and writes nothing.
        p = a.run("second question", check=False)
        assert p.returncode == 1, p.stderr
        assert (f'session "lk1" is in use by sandboxed-tools (pid {holder.pid})') in p.stderr
        # So is acp-server (another program, same lock).
        server = AcpServer(tmp_path, ["--allow-unauthenticated"]).start()
        try:
            c = acp_open(server)
            r = load(c, 1, "lk1")
            assert "error" in r, r
            assert f"in use by sandboxed-tools (pid {holder.pid})" in r["error"]["message"]
            c.close()
            # The holder goes on undisturbed, then ends and releases the lock.
            holder.stdin.write("third question\n")
            holder.stdin.close()
            assert holder.wait(timeout=60) == 0, holder.stderr.read()
            msgs = history(a)
            assert [m["role"] for m in msgs] == ["system", "user", "assistant", "user",
                                                 "assistant"]
            assert [m["content"] for m in msgs if m["role"] == "user"] == [
                "first question", "third question"]
            # Now acp-server holds it, and the CLI is the one refused, naming acp-server.
            c = acp_open(server)
            assert load(c, 2, "lk1").get("result") == {}
            p = a.run("fourth question", check=False)
            assert p.returncode == 1
            assert (f'session "lk1" is in use by acp-server (pid {server.proc.pid})'
                    in p.stderr), p.stderr
            assert len(history(a)) == 5
            # Closing the connection frees the session for the next process.
            c.close()
            assert wait_until(lambda: a.run("fifth", check=False).returncode == 0)
            assert [m["content"] for m in history(a) if m["role"] == "user"][-1] == "fifth"
        finally:
            assert server.stop() == 0
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()
