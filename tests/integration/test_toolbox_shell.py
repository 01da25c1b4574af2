"""geminicli-toolbox run_shell_command (AGENT.md §2.1, current output form)."""
import os
import re
import signal
import time

from toolbox_helpers import call, err, ok


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0] != "Z"


def test_output_merged_and_optional_lines(tmp_path):
    out = ok(tmp_path, "run_shell_command", {"command": "echo out; echo err >&2; echo $PWD",
                                             "description": "say things"})
    lines = out.split("\n")
    assert lines[:4] == ["Output: out", "err", str(tmp_path), lines[3]]
    assert re.fullmatch(r"Process Group PGID: \d+", lines[3]) and len(lines) == 4


def test_empty_output_exit_code_and_signal(tmp_path):
    res = call(tmp_path, "run_shell_command", {"command": "exit 3"})
    assert res["error"] is None  # a non-zero exit is ordinary output
    assert res["llmContent"].split("\n")[:2] == ["Output: (empty)", "Exit Code: 3"]
    assert res["returnDisplay"] == "Command exited with code: 3"
    out = ok(tmp_path, "run_shell_command", {"command": "kill -TERM $$"})
    assert out.split("\n")[:2] == ["Output: (empty)", "Signal: 15"]


def test_dir_path(tmp_path):
    (tmp_path / "sub").mkdir()
    assert ok(tmp_path, "run_shell_command", {"command": "pwd", "dir_path": "sub"}).startswith(
        f"Output: {tmp_path / 'sub'}\n")
    err(tmp_path, "run_shell_command", {"command": "pwd", "dir_path": "/"}, "path_not_in_workspace")
    assert "does not exist" in err(tmp_path, "run_shell_command", {"command": "pwd", "dir_path": "nope"})


def test_background_children_do_not_block_and_are_reported(tmp_path):
    t0 = time.monotonic()
    out = ok(tmp_path, "run_shell_command", {"command": "sleep 30 & echo started"}, timeout=10)
    assert time.monotonic() - t0 < 5
    m = re.search(r"^Background PIDs: (\d+)$", out, re.M)
    pgid = int(re.search(r"^Process Group PGID: (\d+)$", out, re.M).group(1))
    assert out.startswith("Output: started\n") and m, out
    pid = int(m.group(1))
    try:
        assert alive(pid) and os.getpgid(pid) == pgid
    finally:
        os.killpg(pgid, signal.SIGKILL)  # `kill -- -PGID`, as the tool description suggests
    time.sleep(0.1)
    assert not alive(pid)


def test_is_background_moves_on_and_logs(tmp_path):
    out = ok(tmp_path, "run_shell_command", {"command": "echo begun; sleep 30", "is_background": True,
                                             "delay_ms": 100}, timeout=10)
    m = re.fullmatch(r"Command moved to background \(PID: (\d+)\)\. Output is written to (\S+)\.", out)
    assert m, out
    pid, log = int(m.group(1)), m.group(2)
    try:
        assert alive(pid)
        time.sleep(0.1)
        with open(log) as f:
            assert f.read() == "begun\n"
    finally:
        os.killpg(os.getpgid(pid), signal.SIGKILL)
        os.unlink(log)


def test_is_background_that_fails_at_once_reports_output(tmp_path):
    out = ok(tmp_path, "run_shell_command", {"command": "echo nope >&2; exit 4", "is_background": True,
                                             "delay_ms": 2000})
    assert out.split("\n")[:3] == ["Output: nope", "Exit Code: 4", out.split("\n")[2]]


def test_large_output(tmp_path):
    out = ok(tmp_path, "run_shell_command", {"command": "head -c 3000000 /dev/zero | tr '\\0' a"})
    assert out.startswith("Output: " + "a" * 100) and len(out) > 3000000
