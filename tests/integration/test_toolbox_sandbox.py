"""geminicli-toolbox inside real local sandboxes: `asb serve` injects it at /.asb/bin next to
sandboxd, and it runs through the bundled loader in any rootfs (docs/agent-toolbox.md)."""
import json
import os
import time

from asb_cli import run
from local_sandbox import create, sbx_state, start_sbx, wait_ready  # noqa: F401

TOOLBOX = ["/.asb/lib/ld-linux-x86-64.so.2", "--library-path", "/.asb/lib",
           "/.asb/bin/geminicli-toolbox"]


def tool(asb, name, tool_name, args, root):
    p = run(asb, "exec", name, "--", *TOOLBOX, "--root", root, tool_name, json.dumps(args))
    assert p.returncode == 0, f"exit {p.returncode}: {p.stdout}\n{p.stderr}"
    return json.loads(p.stdout)


def test_toolbox_in_host_sandbox(start_sbx, sbx_state):
    asb = start_sbx()
    create(asb, "tb")
    wait_ready(asb, "tb")
    assert os.path.exists(os.path.join(sbx_state, "inject", "bin", "geminicli-toolbox"))
    w = tool(asb, "tb", "write_file", {"file_path": "notes/a.txt", "content": "hello sandbox\n"}, "/tmp")
    assert w["llmContent"] == "Successfully created and wrote to new file: /tmp/notes/a.txt."
    r = tool(asb, "tb", "read_file", {"file_path": "/tmp/notes/a.txt"}, "/tmp")
    assert r["llmContent"] == "hello sandbox\n"
    s = tool(asb, "tb", "run_shell_command", {"command": "cat notes/a.txt; hostname; sleep 60 &"}, "/tmp")
    lines = s["llmContent"].split("\n")
    assert lines[0] == "Output: hello sandbox" and lines[1] == "tb", s
    assert lines[2].startswith("Background PIDs: ") and lines[3].startswith("Process Group PGID: "), s
    t0 = time.monotonic()
    b = tool(asb, "tb", "run_shell_command", {"command": "echo bg; sleep 60", "is_background": True}, "/tmp")
    assert time.monotonic() - t0 < 10
    assert b["llmContent"].startswith("Command moved to background (PID: "), b
    e = tool(asb, "tb", "replace", {"file_path": "notes/a.txt", "instruction": "x", "old_string": "nope",
                                    "new_string": "y"}, "/tmp")
    assert e["error"]["type"] == "edit_no_occurrence_found"
    # the toolbox's own failures come back as a non-zero exit
    p = run(asb, "exec", "tb", "--", *TOOLBOX, "no_such_tool", "{}")
    assert p.returncode == 2 and "not found in registry" in p.stderr


def test_toolbox_in_empty_rootfs(start_sbx, sbx_state, tmp_path):
    # No shell, no libc in the image: the file tools still work through the injected loader.
    rootfs = tmp_path / "rootfs"
    for d in ["usr", "etc"]:
        (rootfs / d).mkdir(parents=True)
    (rootfs / "etc" / "passwd").write_text("root:x:0:0::/:/bin/sh\n")
    os.chmod(tmp_path, 0o755)
    asb = start_sbx()
    create(asb, "tbempty", image=f"dir:{rootfs}")
    wait_ready(asb, "tbempty")
    # the rootfs is read-only: a typed error, not a crash
    ro = tool(asb, "tbempty", "write_file", {"file_path": "/etc/x", "content": "x"}, "/")
    assert ro["error"]["type"] == "permission_denied" and "(EROFS)" in ro["llmContent"], ro
    w = tool(asb, "tbempty", "write_file", {"file_path": "x.py", "content": "print(1)\n"}, "/workspace")
    assert w["error"] is None, w
    out = tool(asb, "tbempty", "list_directory", {"dir_path": "."}, "/workspace")
    assert out["llmContent"] == "Directory listing for /workspace:\nx.py (9 bytes)"
    g = tool(asb, "tbempty", "grep_search", {"pattern": "print"}, "/workspace")
    assert g["llmContent"].startswith('Found 1 match for pattern "print" in the workspace directory:')
    s = tool(asb, "tbempty", "run_shell_command", {"command": "true"}, "/workspace")
    assert s["error"]["type"] == "shell_execute_error" and "spawn bash" in s["llmContent"]


def test_explicit_toolbox_that_cannot_be_installed_is_reported(start_sbx, sbx_state, tmp_path):
    asb = start_sbx({"ASB_TOOLBOX": str(tmp_path / "missing-toolbox")})
    create(asb, "tbmissing")
    obj = wait_ready(asb, "tbmissing", want="False", reason="ReconcilerError")
    msg = [c for c in obj["status"]["conditions"] if c["type"] == "Ready"][0]["message"]
    assert "cannot install " + str(tmp_path / "missing-toolbox") in msg
