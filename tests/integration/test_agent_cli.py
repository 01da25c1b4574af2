"""sandboxed-tools end to end with the fake model (OPENAI_MODEL=fake-eliza) against real local
sandboxes (`asb serve` + runc): reflection, `run:` through the shell tool, sandbox reuse, TTL
extension, snapshot rotation, restore after the sandbox is deleted, resume of history, tool
timeout. Sandbox tests are skipped without root or runc (local_sandbox.py)."""
import calendar
import io
import os
import subprocess
import tarfile
import time

import pytest

from agent_cli import Agent, agent_replies, binary
from asb_apiserver import CORE
from local_sandbox import get_sandbox, sbx_state, start_sbx  # noqa: F401
from test_local_sandbox_runtime import wait_for


def sandbox_path(asb, name):
    return asb.path(CORE, "sandboxes", "default", name)


def shutdown_epoch(obj):
    return calendar.timegm(time.strptime(obj["spec"]["shutdownTime"], "%Y-%m-%dT%H:%M:%SZ"))


# ---- no sandbox needed ----

def test_reflection_and_repl_end(tmp_path):
    a = Agent(tmp_path)
    p = a.run("What is the capital of France?", "", "/exit", "never sent")
    assert agent_replies(p.stdout) == [
        "What do you think it means when you say 'What is the capital of France?'?"]
    assert p.stdout.startswith("User> ")
    # /quit in any case and end of input end the REPL too.
    p = a.run("hi", "/QUIT", "never sent")
    assert agent_replies(p.stdout)[-1] == "What do you think it means when you say 'hi'?"
    p = a.run("bye")
    assert agent_replies(p.stdout)[-1] == "What do you think it means when you say 'bye'?"
    assert "never sent" not in open(os.path.join(a.session_dir, "sessions", "latest.jsonl")).read()


def test_history_file_and_resume(tmp_path):
    a = Agent(tmp_path, session="resume1")
    a.run("first question")
    path = os.path.join(a.session_dir, "sessions", "latest.jsonl")
    import json
    msgs = [json.loads(x) for x in open(path)]
    assert [m["role"] for m in msgs] == ["system", "user", "assistant"]
    assert msgs[0]["content"].startswith("You are a helpful AI assistant with access to a sandboxed")
    assert oct(os.stat(path).st_mode & 0o777) == "0o600"
    assert oct(os.stat(os.path.dirname(path)).st_mode & 0o777) == "0o700"
    # A restarted CLI replays the history in the same form, then goes on.
    p = a.run("second")
    assert p.stdout.startswith("User> first question\nAgent> What do you think it means when "
                               "you say 'first question'?\nUser> ")
    assert agent_replies(p.stdout) == ["What do you think it means when you say 'first question'?",
                                       "What do you think it means when you say 'second'?"]
    assert len(open(path).readlines()) == 5


@pytest.mark.parametrize("name", ["Upper", "with-dash", "a" * 41, "x y"])
def test_invalid_session_name(tmp_path, name):
    a = Agent(tmp_path, session=name)
    p = a.run("hi", check=False)
    assert p.returncode == 2
    assert "invalid session name" in p.stderr
    assert not os.path.exists(os.path.join(tmp_path, ".local"))


def test_bad_flags(tmp_path):
    a = Agent(tmp_path)
    assert "invalid -tool-timeout" in a.run("x", args=["-tool-timeout", "soon"], check=False).stderr
    assert "unknown toolset" in a.run("x", args=["-toolset", "nope"], check=False).stderr
    p = a.run("x", check=False, args=["-bogus"])
    assert p.returncode == 2 and "flag provided but not defined" in p.stderr


def test_key_required_for_real_models(tmp_path):
    a = Agent(tmp_path, env={"OPENAI_MODEL": "gpt-4o-mini"})
    p = a.run("x", check=False)
    assert p.returncode == 1
    assert "GEMINI_API_KEY or OPENAI_API_KEY environment variable is required" in p.stderr


# ---- against real local sandboxes ----

def test_run_reuse_and_ttl(start_sbx, sbx_state, tmp_path):
    asb = start_sbx()
    a = Agent(tmp_path, sbx_state, session="box1")
    t0 = time.time()
    p = a.run("run: uname -a", "run: echo $HOME; pwd; echo hi > note.txt")
    r = agent_replies(p.stdout)
    assert r[0].startswith("I ran `uname -a` with run_command. The result was:\nstdout:\nLinux box1 ")
    assert r[0].endswith("\nstderr:\n\nexit_code: 0")
    assert "stdout:\n/home/clawtainer\n/home/clawtainer\n\nstderr:\n\nexit_code: 0" in r[1]
    obj = get_sandbox(asb, "box1")
    uid = obj["metadata"]["uid"]
    assert obj["spec"]["shutdownPolicy"] == "Delete"
    first = shutdown_epoch(obj)
    assert t0 + 290 <= first <= time.time() + 301
    # A restarted CLI reuses the sandbox (same uid, the file is still there) and pushes the TTL.
    time.sleep(1.1)  # the point: shutdownTime has 1 s resolution; the push must land later
    p = a.run("run: cat note.txt")
    assert "stdout:\nhi\n" in agent_replies(p.stdout)[-1]
    obj = get_sandbox(asb, "box1")
    assert obj["metadata"]["uid"] == uid
    assert shutdown_epoch(obj) > first


def test_snapshots_rotate_to_five(start_sbx, sbx_state, tmp_path):
    start_sbx()
    a = Agent(tmp_path, sbx_state, session="snap1")
    lines = [f"run: echo {i} > n{i}.txt" for i in range(7)] + ["no tool here"]
    a.run(*lines)
    names = a.backups()
    assert len(names) == 5, names
    assert all(n.startswith("backup-") for n in names)
    newest = os.path.join(a.session_dir, "fs", names[-1])
    assert oct(os.stat(newest).st_mode & 0o777) == "0o600"
    with tarfile.open(newest, "r:gz") as t:
        members = {m.name.lstrip("./"): m for m in t.getmembers()}
        assert t.extractfile(members["n6.txt"]).read() == b"6\n"
    with tarfile.open(os.path.join(a.session_dir, "fs", names[0]), "r:gz") as t:
        assert "n6.txt" not in {m.name.lstrip("./") for m in t.getmembers()}
    assert not [f for f in os.listdir(os.path.join(a.session_dir, "fs")) if f.endswith(".tmp")]


def test_restore_after_sandbox_deleted(start_sbx, sbx_state, tmp_path):
    asb = start_sbx()
    a = Agent(tmp_path, sbx_state, session="rest1")
    a.run("run: mkdir -p d/e && echo kept > d/e/f.txt && echo top > t.txt")
    uid = get_sandbox(asb, "rest1")["metadata"]["uid"]
    assert asb.delete(sandbox_path(asb, "rest1")).status_code == 200
    assert wait_for(lambda: asb.get(sandbox_path(asb, "rest1")).status_code == 404)
    p = a.run("run: cat d/e/f.txt t.txt")
    assert "stdout:\nkept\ntop\n\nstderr:\n\nexit_code: 0" in agent_replies(p.stdout)[-1], p.stderr
    assert get_sandbox(asb, "rest1")["metadata"]["uid"] != uid


def test_basic_tools_through_the_loop(start_sbx, sbx_state, tmp_path):
    """The other basic tools run inside the sandbox with upstream's result strings; driven
    through the scripted model server in test_agent_openai.py, here through run: for ls."""
    start_sbx()
    a = Agent(tmp_path, sbx_state, session="ls1")
    p = a.run("run: mkdir sub && touch sub/x && ls -p")
    assert "stdout:\nsub/\n\nstderr:" in agent_replies(p.stdout)[-1]


def test_tool_timeout_kills_process_group(start_sbx, sbx_state, tmp_path):
    start_sbx()
    a = Agent(tmp_path, sbx_state, session="tmo1")
    t0 = time.monotonic()
    p = a.run("run: touch mark; sleep 60 & sleep 61; echo never", "and then?",
              args=["-tool-timeout", "1s"])
    assert time.monotonic() - t0 < 30
    r = agent_replies(p.stdout)
    assert 'Error calling tool "run_command": failed to run tool: timed out after 1.000s' in r[0]
    assert "never" not in r[0].split("The result was:")[1]
    # The loop went on.
    assert r[1] == "What do you think it means when you say 'and then?'?"
    # No sleep of the killed group is left in the (reused) sandbox. This look has no timeout of
    # its own: one of 1 s failed in CI when the host stalled.
    r = agent_replies(a.run("run: ls mark && ps -eo comm").stdout)
    assert "stdout:\nmark\nCOMMAND\n" in r[-1] and "exit_code: 0" in r[-1]
    assert "sleep" not in r[-1]


# ---- geminicli toolset (tools run by the injected geminicli-toolbox) ----

def test_geminicli_run_shell_command(start_sbx, sbx_state, tmp_path):
    asb = start_sbx()
    a = Agent(tmp_path, sbx_state, session="gem1", args=["-toolset", "geminicli"])
    p = a.run("run: echo hello; pwd; exit 3")
    r = agent_replies(p.stdout)[-1]
    assert r.startswith("I ran `echo hello; pwd; exit 3` with run_shell_command. The result was:\n"), p.stderr
    assert "Output: hello\n/home/clawtainer" in r
    assert "Exit Code: 3" in r
    import json
    msgs = [json.loads(x) for x in open(os.path.join(a.session_dir, "sessions", "latest.jsonl"))]
    assert msgs[0]["content"].startswith("You are Gemini CLI")
    assert get_sandbox(asb, "gem1")["spec"]["shutdownPolicy"] == "Delete"


def test_geminicli_timeout_kills_own_groups(start_sbx, sbx_state, tmp_path):
    start_sbx()
    a = Agent(tmp_path, sbx_state, session="gem2", args=["-toolset", "geminicli", "-tool-timeout", "1500ms"])
    t0 = time.monotonic()
    p = a.run("run: setsid sleep 70 & sleep 71", "run: ps -eo comm")
    assert time.monotonic() - t0 < 30
    r = agent_replies(p.stdout)
    assert "Error: Tool call execution failed. Reason: timed out after 1.500s" in r[0], p.stderr
    assert "sleep" not in r[1].split("The result was:")[1], r[1]


# ---- -pool ----

def fake_claim_controller(asb, claim_name, stop):
    """Binds the claim to a fresh Sandbox the way the claim controller does (status.sandbox.name,
    Ready forwarded), for an `asb serve` without the claim/warm-pool controller."""
    from asb_apiserver import EXT, sandbox
    from local_sandbox import condition
    cpath = asb.path(EXT, "sandboxclaims", "default", claim_name)
    while not stop.is_set():
        if asb.get(cpath).status_code == 200:
            break
        time.sleep(0.02)
    else:
        return
    sb = sandbox("warm-" + claim_name)
    assert asb.post(asb.path(CORE, "sandboxes"), sb).status_code == 201
    while not stop.is_set():
        obj = get_sandbox(asb, "warm-" + claim_name)
        ready = condition(obj, "Ready")
        if ready and ready["status"] == "True":
            status = {"sandbox": {"name": "warm-" + claim_name}, "conditions": [ready]}
            r = asb.merge_patch(cpath + "/status", {"status": status})
            assert r.status_code == 200, r.text
            return
        time.sleep(0.02)


def test_pool_claims_a_sandbox(start_sbx, sbx_state, tmp_path):
    import threading
    from asb_apiserver import EXT
    # The fake controller binds the claim: the real one would say WarmPoolNotFound first.
    asb = start_sbx(env={"ASB_CLAIM_CONTROLLER": "off"})
    stop = threading.Event()
    t = threading.Thread(target=fake_claim_controller, args=(asb, "pool1", stop), daemon=True)
    t.start()
    try:
        a = Agent(tmp_path, sbx_state, session="pool1", args=["-pool", "agtpool"])
        p = a.run("run: echo warm > w.txt; cat w.txt; hostname")
        assert "stdout:\nwarm\nwarm-pool1\n" in agent_replies(p.stdout)[-1], p.stderr
        claim = asb.get(asb.path(EXT, "sandboxclaims", "default", "pool1")).json()
        assert claim["spec"]["warmPoolRef"]["name"] == "agtpool"
        assert claim["spec"]["lifecycle"]["shutdownPolicy"] == "Delete"
        first = claim["spec"]["lifecycle"]["shutdownTime"]
        assert claim.get("status", {}).get("conditions"), claim
        # No Sandbox named after the session: the claimed one is used, and reused.
        assert asb.get(sandbox_path(asb, "pool1")).status_code == 404
        time.sleep(1.1)  # the point: shutdownTime has 1 s resolution; the push must land later
        p = a.run("run: cat w.txt", timeout=30)
        assert "stdout:\nwarm\n" in agent_replies(p.stdout)[-1], p.stderr
        claim = asb.get(asb.path(EXT, "sandboxclaims", "default", "pool1")).json()
        assert claim["spec"]["lifecycle"]["shutdownTime"] > first
    finally:
        stop.set()
        t.join(5)


def test_delete_session_removes_its_sandbox_and_directory(start_sbx, sbx_state, tmp_path):
    """Issue 31: `-delete-session NAME` deletes a session's sandbox and its directory (history,
    backups), is refused while the session is in use, and says when there is no such session."""
    asb = start_sbx()
    a = Agent(tmp_path, sbx_state, session="gone1")
    a.run("run: echo hi > note.txt")
    assert get_sandbox(asb, "gone1")["metadata"]["name"] == "gone1"
    assert os.path.isdir(a.session_dir)
    # In use: refused, nothing deleted.
    holder = subprocess.Popen([binary(), "-session", "gone1"], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=a.environ())
    try:
        assert holder.stdout.read(6) == "User> "  # the lock is held once the prompt shows
        p = subprocess.run([binary(), "-delete-session", "gone1"], capture_output=True, text=True,
                           env=a.environ(), timeout=60)
        assert p.returncode == 1 and 'session "gone1" is in use by sandboxed-tools' in p.stderr, p
        assert os.path.isdir(a.session_dir) and asb.get(sandbox_path(asb, "gone1")).status_code == 200
    finally:
        holder.communicate("/exit\n", timeout=30)
    p = subprocess.run([binary(), "-delete-session", "gone1"], capture_output=True, text=True,
                       env=a.environ(), timeout=60)
    assert p.returncode == 0 and p.stdout == 'session "gone1" deleted: its Sandbox\n', p
    assert not os.path.exists(a.session_dir)
    assert wait_for(lambda: asb.get(sandbox_path(asb, "gone1")).status_code == 404, timeout=30)
    p = subprocess.run([binary(), "-delete-session", "gone1"], capture_output=True, text=True,
                       env=a.environ(), timeout=60)
    assert p.returncode == 1 and 'no session "gone1"' in p.stderr, p
    p = subprocess.run([binary(), "-delete-session", "Bad!"], capture_output=True, text=True,
                       env=a.environ(), timeout=60)
    assert p.returncode == 2 and "invalid session name" in p.stderr, p
