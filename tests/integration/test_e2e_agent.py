"""sandboxed-tools (OPENAI_MODEL=fake-eliza) end to end against a real `asb serve` with a real
warm pool: the claim adopted warm, the sandbox reused by a restarted CLI, the geminicli toolset's
run_shell_command, and the exact REPL shapes of a pipe-driven session (UPSTREAM.md §6, AGENT.md)."""
import os
import subprocess

import pytest

from agent_cli import Agent, agent_replies, binary
from asb_apiserver import CORE, EXT
from claims_helpers import create, get, members, pool, template, wait_pool_ready
from local_sandbox import sbx_state, start_sbx  # noqa: F401  (fixtures)


def test_pool_adopts_warm_and_restart_reuses(start_sbx, sbx_state, tmp_path):
    asb = start_sbx()
    create(asb, EXT, "sandboxtemplates", template("agtpl"))
    create(asb, EXT, "sandboxwarmpools", pool("agpool", "agtpl", replicas=2))
    warm = {m["metadata"]["name"] for m in wait_pool_ready(asb, "agpool", 2)}
    a = Agent(tmp_path, sbx_state, session="warmsess", args=["-pool", "agpool"])
    p = a.run("run: echo warm > w.txt; cat w.txt; hostname")
    reply = agent_replies(p.stdout)[-1]
    assert "stdout:\nwarm\n" in reply, (p.stdout, p.stderr)
    c = get(asb, EXT, "sandboxclaims", "warmsess")
    assert c is not None, "no claim named after the session"
    sname = c["status"]["sandbox"]["name"]
    assert sname in warm, (sname, warm)  # adopted from the warm pool, not created cold
    assert get(asb, CORE, "sandboxes", sname)["metadata"]["labels"]["agents.x-k8s.io/launch-type"] == "warm"
    assert f"\n{sname}\n" in reply, reply  # the hostname is the adopted sandbox's
    # A restarted CLI reuses the same claim and sandbox; the file is still there.
    p = a.run("run: cat w.txt; hostname")
    reply = agent_replies(p.stdout)[-1]
    assert f"stdout:\nwarm\n{sname}\n" in reply, (p.stdout, p.stderr)
    assert get(asb, EXT, "sandboxclaims", "warmsess")["status"]["sandbox"]["name"] == sname
    # The pool refilled behind the claim.
    ms = wait_pool_ready(asb, "agpool", 2)
    assert sname not in {m["metadata"]["name"] for m in ms}


def test_geminicli_run_shell_command_on_a_claim(start_sbx, sbx_state, tmp_path):
    asb = start_sbx()
    create(asb, EXT, "sandboxtemplates", template("gtpl"))
    create(asb, EXT, "sandboxwarmpools", pool("gpool", "gtpl", replicas=1))
    wait_pool_ready(asb, "gpool", 1)
    a = Agent(tmp_path, sbx_state, session="gem", args=["-pool", "gpool", "-toolset", "geminicli"])
    p = a.run("run: echo hi from gemini")
    assert "run_shell_command" in p.stderr, p.stderr
    reply = agent_replies(p.stdout)[-1]
    assert reply.startswith("I ran `echo hi from gemini` with run_shell_command."), reply
    assert "hi from gemini" in reply, reply
    assert members(asb, "gpool") is not None


def test_repl_shapes_from_a_pipe(start_sbx, sbx_state, tmp_path):
    start_sbx()
    env = {k: v for k, v in os.environ.items()
           if k not in ("OPENAI_API_KEY", "GEMINI_API_KEY", "OPENAI_BASE_URL", "TOOLSET",
                        "SANDBOX_IMAGE", "MODEL", "ASB_SERVER", "ASB_TOKEN")}
    env.update({"HOME": str(tmp_path), "OPENAI_MODEL": "fake-eliza", "ASB_STATE_DIR": sbx_state})
    p = subprocess.run(f"printf 'hello\\nrun: echo hi\\n/exit\\n' | {binary()} -session x",
                       shell=True, capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == 0, p.stderr
    want_prefix = ("User> Agent> What do you think it means when you say 'hello'?\n"
                   "User> Agent> I ran `echo hi` with run_command. The result was:\n"
                   "stdout:\nhi\n\nstderr:\n\nexit_code: 0\n")
    assert p.stdout.startswith(want_prefix), repr(p.stdout)
    assert p.stdout.endswith("User> "), repr(p.stdout)
    assert p.stdout.count("User> ") == 3, repr(p.stdout)
    assert "[tool " in p.stderr and "run_command: echo hi" in p.stderr, p.stderr
    # Resume replays the history in the same User>/Agent> form.
    p = subprocess.run(f"printf '/quit\\n' | {binary()} -session x", shell=True, capture_output=True,
                       text=True, env=env, timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("User> hello\nAgent> What do you think it means when you say 'hello'?\n"
                               "User> run: echo hi\nAgent> I ran `echo hi` with run_command."), repr(p.stdout)


def test_pool_claim_deleted_between_runs_restores_backup(start_sbx, sbx_state, tmp_path):
    asb = start_sbx()
    create(asb, EXT, "sandboxtemplates", template("agtpl"))
    create(asb, EXT, "sandboxwarmpools", pool("agpool", "agtpl", replicas=1))
    wait_pool_ready(asb, "agpool", 1)
    a = Agent(tmp_path, sbx_state, session="lost", args=["-pool", "agpool"])
    p = a.run("run: echo precious > keep.txt")
    # The pool's template has no volume at /home/clawtainer and the host image's root is
    # read-only: the agent says so and uses the sandbox's root directory for tools and snapshots.
    assert "home directory /home/clawtainer is not writable" in p.stderr, p.stderr
    assert a.backups(), p.stderr
    first = get(asb, EXT, "sandboxclaims", "lost")["status"]["sandbox"]["name"]
    r = asb.delete(asb.path(EXT, "sandboxclaims", "default", "lost"))
    assert r.status_code == 200, r.text
    from claims_helpers import wait_for
    wait_for("the claim and its sandbox to go",
             lambda: get(asb, EXT, "sandboxclaims", "lost") is None and get(asb, CORE, "sandboxes", first) is None,
             30, 0.05, asb)
    wait_pool_ready(asb, "agpool", 1)
    p = a.run("run: cat keep.txt")
    reply = agent_replies(p.stdout)[-1]
    assert "stdout:\nprecious\n" in reply, (p.stdout, p.stderr)
    second = get(asb, EXT, "sandboxclaims", "lost")["status"]["sandbox"]["name"]
    assert second != first


def test_pool_that_does_not_exist_fails_clearly(start_sbx, sbx_state, tmp_path):
    start_sbx()
    a = Agent(tmp_path, sbx_state, session="nopool", args=["-pool", "ghost"])
    import time
    t0 = time.monotonic()
    p = a.run("run: true", "hello", check=False, timeout=200)
    took = time.monotonic() - t0
    replies = agent_replies(p.stdout)
    # The tool result the model gets (and reports) names the reason, within seconds.
    assert "WarmPoolNotFound" in replies[0] and 'SandboxWarmPool "ghost" not found' in replies[0], p.stdout
    # The REPL goes on after the tool error and answers the next line.
    assert agent_replies(p.stdout)[-1] == "What do you think it means when you say 'hello'?", p.stdout
    assert took < 15, took


def test_two_clis_same_session_one_at_a_time_share_one_claim(start_sbx, sbx_state, tmp_path):
    """Two CLIs started together on one session: the session lock lets one in and refuses the
    other naming the holder (or, if the first ended before the second began, both run, one after
    the other); whatever ran used the claim's one sandbox, and the history is not interleaved."""
    from concurrent.futures import ThreadPoolExecutor
    asb = start_sbx()
    create(asb, EXT, "sandboxtemplates", template("agtpl"))
    create(asb, EXT, "sandboxwarmpools", pool("agpool", "agtpl", replicas=2))
    wait_pool_ready(asb, "agpool", 2)
    a = Agent(tmp_path, sbx_state, session="twin", args=["-pool", "agpool"])
    with ThreadPoolExecutor(2) as ex:
        ps = list(ex.map(lambda i: a.run(f"run: hostname; echo {i} >> both.txt", check=False),
                         range(2)))
    ran = [p for p in ps if p.returncode == 0]
    assert ran, [p.stderr for p in ps]
    for p in ps:
        if p.returncode != 0:
            assert p.returncode == 1 and 'session "twin" is in use by sandboxed-tools (pid ' in \
                p.stderr, p.stderr
    p = a.run("run: hostname; wc -l < both.txt")
    hosts = {agent_replies(q.stdout)[-1].split("stdout:\n", 1)[1].split("\n", 1)[0]
             for q in ran + [p]}
    assert len(hosts) == 1, [q.stdout for q in ran + [p]]
    c = get(asb, EXT, "sandboxclaims", "twin")
    assert c["status"]["sandbox"]["name"] in hosts
    assert agent_replies(p.stdout)[-1].split("stdout:\n", 1)[1].split("\n")[1] == str(len(ran))
    # One user turn per CLI that ran, plus the last one, each followed by its own tool round.
    import json
    with open(os.path.join(a.session_dir, "sessions", "latest.jsonl")) as f:
        roles = [json.loads(line)["role"] for line in f]
    assert roles == ["system"] + ["user", "assistant", "tool", "assistant"] * (len(ran) + 1)
