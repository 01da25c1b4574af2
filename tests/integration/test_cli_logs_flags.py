"""`asb logs` flags kubectl users type (issue 32): --tail, --since, --timestamps, -c sandboxd (asb
serve's copy of sandboxd's own output), --previous after a restart (its sandboxd killed); and
`asb describe`'s effective limits from status.resources. Against a real `asb serve` running runc
sandboxes (skipped without root or runc)."""
import os
import re
import signal
import subprocess
import time

from asb_apiserver import asb_binary
from asb_cli import cli_env, ok, run
from local_sandbox import create, get_sandbox, sbx_state, start_sbx, wait_ready  # noqa: F401
from waiting import wait_for

SCRIPT = "for i in 1 2 3 4 5; do echo line$i; done; sleep 600"
STAMP = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z "


def five_lines(start_sbx, name="lf", env=None):
    asb = start_sbx(env)
    create(asb, name, container={"command": ["sh", "-c", SCRIPT]})
    wait_ready(asb, name, timeout=20)
    deadline = time.monotonic() + 10
    while ok(asb, "logs", name).count("\n") < 5:
        assert time.monotonic() < deadline
        time.sleep(0.1)
    return asb


def test_tail_since_timestamps(start_sbx):
    asb = five_lines(start_sbx)
    assert ok(asb, "logs", "lf", "--tail", "2") == "line4\nline5\n"
    assert ok(asb, "logs", "lf", "--tail=0") == ""
    assert ok(asb, "logs", "lf", "--tail", "-1") == "".join(f"line{i}\n" for i in range(1, 6))
    assert ok(asb, "logs", "lf", "--tail", "9").count("\n") == 5
    out = ok(asb, "logs", "lf", "--timestamps", "--tail", "1")
    assert re.fullmatch(STAMP + "line5\n", out), out
    stamps = ok(asb, "logs", "lf", "--timestamps").splitlines()
    assert len(stamps) == 5 and all(re.match(STAMP + f"line{i + 1}$", s) for i, s in enumerate(stamps))
    # the lines are in the log with the time they came; --since keeps the recent ones only
    assert ok(asb, "logs", "lf", "--since", "1h").count("\n") == 5
    time.sleep(2.2)
    assert ok(asb, "logs", "lf", "--since=2s") == ""
    # -f with a tail: the last line, then it follows (until Ctrl-C)
    proc = subprocess.Popen([asb_binary(), "logs", "lf", "-f", "--tail", "1"], env=cli_env(asb),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline() == "line5\n"
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130 and out == "", (out, err)
    for bad in (["--tail", "x"], ["--tail", "-2"], ["--since", "0"], ["--since", "soon"]):
        p = run(asb, "logs", "lf", *bad)
        assert p.returncode == 2 and "invalid argument" in p.stderr, (bad, p.stderr)


def test_container_sandboxd_and_unknown(start_sbx):
    asb = five_lines(start_sbx)
    # sandboxd's own output (asb serve keeps it in sandboxes/<uid>/sandboxd.log)
    uid = get_sandbox(asb, "lf")["metadata"]["uid"]
    with open(f"{asb.state_dir}/sandboxes/{uid}/sandboxd.log") as f:
        want = f.read()
    assert want
    got = ok(asb, "logs", "lf", "-c", "sandboxd")
    assert got.startswith(want[:200]) and "line1" not in got
    # the sandbox's container by its name is the main process
    name = get_sandbox(asb, "lf")["spec"]["podTemplate"]["spec"]["containers"][0]["name"]
    assert ok(asb, "logs", "lf", "--container", name).startswith("line1\n")
    p = run(asb, "logs", "lf", "-c", "nope")
    assert p.returncode == 1 and p.stdout == ""
    assert p.stderr == "error: container nope is not valid for sandbox lf\n", p.stderr


def test_previous_after_restart_and_describe_limits(start_sbx):
    asb = five_lines(start_sbx, env={"ASB_RESYNC_INTERVAL": "500ms"})
    p = run(asb, "logs", "lf", "--previous")
    assert p.returncode == 1
    assert p.stderr.startswith('error: previous terminated container "') and \
        p.stderr.endswith('" in sandbox "lf" not found\n'), p.stderr
    # describe: the limits it runs with, from status.resources, defaults marked
    res = get_sandbox(asb, "lf")["status"]["resources"]
    line = re.search(r"^Limits:\s+(.*)$", ok(asb, "describe", "sandbox", "lf"), re.M).group(1)
    for k, v in res["limits"].items():
        mark = " (default)" if k in res.get("defaulted", []) else ""
        assert f"{k}={v}{mark}" in line, (line, res)
    assert "asb serve's defaults" not in line
    # a restart: the container's first process (sandboxd) dies, asb serve starts it again
    uid = get_sandbox(asb, "lf")["metadata"]["uid"]
    pid_file = os.path.join(asb.state_dir, "sandboxes", uid, "bundle", "pid")
    pid = int(open(pid_file).read())
    os.kill(pid, signal.SIGKILL)

    def restarted():
        try:
            return int(open(pid_file).read()) != pid and ok(asb, "logs", "lf").count("\n") == 5
        except (OSError, ValueError):
            return False
    assert wait_for(restarted, timeout=30), asb.output()
    out = ok(asb, "logs", "lf", "-p")
    assert out == "".join(f"line{i}\n" for i in range(1, 6)), out
    assert ok(asb, "logs", "lf", "--previous", "--tail", "1", "--timestamps").endswith(" line5\n")
    assert run(asb, "logs", "lf", "-c", "sandboxd", "-p").returncode == 0
