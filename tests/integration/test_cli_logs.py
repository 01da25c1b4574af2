"""`asb logs NAME [-f]` (issue 4): the output of a sandbox's main process (its container
`command`) against a real `asb serve` running real runc sandboxes (skipped without root or runc)."""
import subprocess
import time

from asb_apiserver import CORE, EXT, asb_binary
from asb_cli import cli_env, ok, run
from local_sandbox import create, sbx_state, start_sbx, wait_ready  # noqa: F401
from waiting import read_until

SCRIPT = "echo hello; echo err >&2; sleep 1; echo bye"


def main_sandbox(start_sbx, name="lg", script=SCRIPT, ready=True, env=None):
    asb = start_sbx(env)
    create(asb, name, container={"command": ["sh", "-c", script]})
    if ready:
        wait_ready(asb, name, timeout=20)
    return asb


def test_logs_and_follow(start_sbx):
    asb = main_sandbox(start_sbx, ready=False)
    # -f from the start (before the container runs): returns once the main process has finished, with all its output.
    t0 = time.monotonic()
    p = run(asb, "logs", "-f", "lg", timeout=30)
    assert p.returncode == 0, p.stderr
    assert p.stdout == "hello\nerr\nbye\n", p.stdout
    assert p.stderr == ""
    assert time.monotonic() - t0 < 15
    # Plain logs after the end: the whole log, also after the process ended.
    assert ok(asb, "logs", "lg") == "hello\nerr\nbye\n"
    assert ok(asb, "logs", "--follow", "lg") == "hello\nerr\nbye\n"


def test_logs_while_running_and_claim(start_sbx):
    # The claim below is bound by hand: no claim controller to overwrite its status.
    asb = main_sandbox(start_sbx, script="echo hello; echo err >&2; sleep 3; echo bye",
                       env={"ASB_CLAIM_CONTROLLER": "off"})
    out = ok(asb, "logs", "lg")
    assert "hello\n" in out and "err\n" in out and "bye" not in out
    # A claim resolves to its sandbox.
    claim = {"apiVersion": f"{EXT}/v1beta1", "kind": "SandboxClaim", "metadata": {"name": "myclaim"},
             "spec": {"warmPoolRef": {"name": "python"}}}
    assert asb.post(asb.path(EXT, "sandboxclaims", "default"), claim).status_code == 201
    r = asb.merge_patch(asb.path(EXT, "sandboxclaims", "default", "myclaim", "status"),
                        {"status": {"sandbox": {"name": "lg"}}})
    assert r.status_code == 200, r.text
    assert "hello\n" in ok(asb, "logs", "myclaim")
    p = run(asb, "logs", "-f", "myclaim", timeout=30)
    assert p.returncode == 0 and p.stdout.endswith("bye\n"), p.stderr


def test_follow_ends_when_sandbox_deleted(start_sbx):
    asb = main_sandbox(start_sbx, script="echo started; sleep 600")
    proc = subprocess.Popen([asb_binary(), "logs", "-f", "lg"], env=cli_env(asb),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        first = read_until(proc.stdout, "started\n", timeout=20)  # following now
        assert proc.poll() is None
        assert asb.delete(asb.path(CORE, "sandboxes", "default", "lg")).status_code == 200
        out, err = proc.communicate(timeout=20)
        out = first + out
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert out == "started\n"


def test_logs_errors(start_sbx):
    asb = start_sbx()
    p = run(asb, "logs", "nope")
    assert p.returncode == 1
    assert p.stderr == ('error: sandbox "nope" not found in namespace "default" '
                        '(no Sandbox or SandboxClaim of that name)\n')
    p = run(asb, "logs", "-f", "nope")
    assert p.returncode == 1 and 'sandbox "nope" not found' in p.stderr
    # A sandbox without a container command has no main process.
    create(asb, "plain")
    wait_ready(asb, "plain", timeout=20)
    p = run(asb, "logs", "plain")
    assert p.returncode == 1 and p.stdout == ""
    assert p.stderr.startswith('error: logs of sandbox "plain" are not available: its container '
                               'has no command'), p.stderr
    assert run(asb, "logs").returncode == 2
    assert run(asb, "logs", "a", "b").returncode == 2
    assert ok(asb, "logs", "--help").startswith("Usage: asb logs NAME [-f]")
