"""sandboxed-tools -fork-from SESSION (issue 18): a new session whose sandbox is a copy of another
session's (SandboxSnapshot + fork on `asb serve`), or, when the seed's sandbox is gone, a new one
that starts with the seed's newest backup. The seed is only read: its sandbox and its backups
under ~/.local/sandboxed-tools/<seed>/fs/ stay as they are. Skipped without root/runc."""
import hashlib
import os
import subprocess

from agent_cli import Agent, agent_replies, binary
from asb_apiserver import CORE, EXT
from local_sandbox import get_sandbox, sbx_state, start_sbx  # noqa: F401
from test_local_sandbox_runtime import wait_for


def backups_digest(agent):
    d = os.path.join(agent.session_dir, "fs")
    return {n: hashlib.sha256(open(os.path.join(d, n), "rb").read()).hexdigest()
            for n in agent.backups()}


def sandbox_path(asb, name):
    return asb.path(CORE, "sandboxes", "default", name)


def test_fork_from_a_live_session_and_from_backups(start_sbx, sbx_state, tmp_path):
    asb = start_sbx()
    seed = Agent(tmp_path, sbx_state, session="seed1")
    seed.run("run: echo seeded > a.txt && mkdir -p d && ln -s ../a.txt d/l && chmod 640 a.txt")
    seed_uid = get_sandbox(asb, "seed1")["metadata"]["uid"]
    before = backups_digest(seed)
    assert len(before) == 1, before

    fork = Agent(tmp_path, sbx_state, session="fork1", args=["-fork-from", "seed1"])
    p = fork.run("run: cat d/l; stat -c %a a.txt; echo mine > b.txt")
    assert "Session fork1 (a fork of seed1)" in p.stderr
    assert "stdout:\nseeded\n640\n\nstderr:\n\nexit_code: 0" in agent_replies(p.stdout)[-1], p.stderr
    obj = get_sandbox(asb, "fork1")
    assert obj["spec"]["podTemplate"]["spec"]["containers"][0]["image"].startswith("snapshot:seed1-snap-")
    assert obj["spec"]["shutdownPolicy"] == "Delete" and obj["spec"]["shutdownTime"]
    assert obj["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "sandboxed-tools"
    # The snapshot served its purpose: the fork has its own copy.
    snaps = asb.get(asb.path(EXT, "sandboxsnapshots", "default")).json()["items"]
    assert snaps == [], snaps
    # The seed: same sandbox, without the fork's file, backups untouched.
    assert get_sandbox(asb, "seed1")["metadata"]["uid"] == seed_uid
    assert backups_digest(seed) == before
    p = seed.run("run: ls")
    assert "stdout:\na.txt\nd\n\nstderr" in agent_replies(p.stdout)[-1], p.stdout
    # The fork resumes as its own session, without -fork-from.
    p = Agent(tmp_path, sbx_state, session="fork1").run("run: cat b.txt")
    assert "stdout:\nmine\n" in agent_replies(p.stdout)[-1]
    # An existing session is not forked into.
    p = fork.run("x", check=False)
    assert p.returncode == 2 and 'session "fork1" already exists' in p.stderr, p.stderr
    p = Agent(tmp_path, sbx_state, session="seed1", args=["-fork-from", "seed1"]).run("x", check=False)
    assert p.returncode == 2 and "into itself" in p.stderr

    # The seed's sandbox is gone: the fork starts with the seed's newest backup.
    seed_backups = backups_digest(seed)
    assert asb.delete(sandbox_path(asb, "seed1")).status_code == 200
    assert wait_for(lambda: asb.get(sandbox_path(asb, "seed1")).status_code == 404)
    env = {**fork.environ(), "SESSION_NAME": ""}
    p = subprocess.run([binary(), "-fork-from", "seed1"], input="run: cat a.txt\n",
                       capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "(a fork of seed1)" in p.stderr and "has no sandbox; starting from its backup" in p.stderr
    assert "stdout:\nseeded\n" in agent_replies(p.stdout)[-1], p.stdout + p.stderr
    assert backups_digest(seed) == seed_backups
    assert asb.get(sandbox_path(asb, "seed1")).status_code == 404  # not re-created

    # Nothing to fork from: the tool says why.
    p = Agent(tmp_path, sbx_state, session="fork3", args=["-fork-from", "nosuch"]).run("run: true")
    assert "cannot fork session nosuch: it has neither a sandbox nor a backup" in p.stdout, p.stdout


def test_fork_from_refuses_a_pool(tmp_path):
    p = Agent(tmp_path, session="f1", args=["-fork-from", "seed1", "-pool", "p"]).run("x", check=False)
    assert p.returncode == 2 and "cannot claim from -pool" in p.stderr
    p = Agent(tmp_path, session="f1", args=["-fork-from", "Bad!"]).run("x", check=False)
    assert p.returncode == 2 and "invalid -fork-from" in p.stderr
