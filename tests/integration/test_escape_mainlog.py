"""Escape suite, the main process's output (issue 13, hole 4): a Sandbox whose container has a
command runs it under sandboxd with stdout/stderr on a pipe that `asb serve` reads into its own
capped $STATE/sandboxes/<uid>/main.log (never bound into the container), not on a host file the
sandbox could write. /.asb/main (the exit code) lives on the sandbox's ephemeral-storage
filesystem, so writing there counts against the limit. Real `asb serve` + runc, skipped without
root or runc."""
import os
import time

from asb_cli import ok
from grpc_helpers import Client
from local_sandbox import create, sbx_state, sockets, start_sbx, wait_ready  # noqa: F401
from test_escape_limits import MiB, write_inside
from test_local_sandbox_runtime import run, wait_for

# The main process's pid, found from inside: the `sleep 1000` child of sandboxd (PID 1), by its
# parent in /proc/<pid>/stat (sandboxd's own /proc/1/task/*/children is not readable inside).
FIND_MAIN = ('for p in /proc/[0-9]*; do read comm < $p/comm 2>/dev/null || continue; '
             '[ "$comm" = sleep ] && [ "$(cut -d" " -f4 $p/stat)" = 1 ] && echo ${p#/proc/}; '
             'done; true')


def main_log(state_dir, uid):
    base = os.path.join(state_dir, "sandboxes", uid, "main.log")
    out = b""
    for p in (base + ".1", base):
        if os.path.exists(p):
            out += open(p, "rb").read()
    return out


def limited(command):
    return {"command": ["sh", "-c", command],
            "resources": {"limits": {"ephemeral-storage": "64Mi"}}}


def test_main_output_is_a_pipe(start_sbx, sbx_state):
    asb = start_sbx()
    uid = create(asb, "mp", container=limited("echo hello-main; echo err-main >&2; exec sleep 1000"))
    uid = uid["metadata"]["uid"]
    wait_ready(asb, "mp", timeout=20)
    c = Client(f"unix:{sockets(sbx_state, uid)[1]}")
    try:
        assert wait_for(lambda: run(c, "/bin/sh", "-c", FIND_MAIN)[1].strip() != "")
        pid = run(c, "/bin/sh", "-c", FIND_MAIN)[1].split()[0]
        code, out, err = run(c, "/bin/sh", "-c", f"readlink /proc/{pid}/fd/1 /proc/{pid}/fd/2")
        assert code == 0 and [l.startswith("pipe:") for l in out.split()] == [True, True], (out, err)
        # No log file inside /.asb/main any more: only the exit code goes there.
        code, out, _ = run(c, "/bin/sh", "-c", "ls -A /.asb/main")
        assert code == 0 and "log" not in out.split(), out
        # asb serve's copy: root's, 0600, and what `asb logs` shows.
        assert wait_for(lambda: b"err-main" in main_log(sbx_state, uid)), asb.output()
        st = os.stat(os.path.join(sbx_state, "sandboxes", uid, "main.log"))
        assert st.st_uid == 0 and (st.st_mode & 0o077) == 0
        assert ok(asb, "logs", "mp") == "hello-main\nerr-main\n"
    finally:
        c.close()


def test_main_dir_is_on_the_sandbox_filesystem(start_sbx, sbx_state):
    """/.asb/main (where sandboxd records the exit code) is writable from inside: it lives on
    the sandbox's own filesystem, so a big write hits ENOSPC at the limit, not the host's disk."""
    asb = start_sbx()
    uid = create(asb, "md", container=limited("exec sleep 1000"))["metadata"]["uid"]
    wait_ready(asb, "md", timeout=20)
    c = Client(f"unix:{sockets(sbx_state, uid)[1]}")
    try:
        result = write_inside(c, "/.asb/main/big", 256)
        assert result[0] == "err" and result[1] in ("ENOSPC", "EDQUOT"), result
        assert int(result[2]) * MiB <= 64 * MiB, result
        assert run(c, "rm", "-f", "/.asb/main/big")[0] == 0
    finally:
        c.close()


def test_main_output_flood_is_capped(start_sbx, sbx_state):
    cap = 64 * 1024
    asb = start_sbx(env={"ASB_SANDBOX_LOG_MAX": str(cap)})
    flood = "head -c 4000000 /dev/zero | tr '\\0' x; echo; echo end-of-flood; exec sleep 1000"
    uid = create(asb, "flood", container=limited(flood))["metadata"]["uid"]
    wait_ready(asb, "flood", timeout=20)
    assert wait_for(lambda: b"end-of-flood" in main_log(sbx_state, uid), timeout=30), asb.output()
    base = os.path.join(sbx_state, "sandboxes", uid, "main.log")
    sizes = [os.path.getsize(p) for p in (base, base + ".1") if os.path.exists(p)]
    assert sum(sizes) <= 2 * cap, sizes
    # `asb logs`: the kept tail of what the main process wrote, in order.
    out = ok(asb, "logs", "flood")
    assert out.endswith("x\nend-of-flood\n"), (len(out), out[:40], out[-40:])
    assert set(out[:-len("\nend-of-flood\n")]) == {"x"}, (len(out), out[:40], out[-40:])
    assert len(out) <= 2 * cap, (len(out), sizes)


def test_main_output_survives_an_asb_serve_restart(start_sbx, sbx_state):
    asb = start_sbx()
    wait = "while [ ! -e /workspace/{0} ]; do sleep 0.1; done; "
    script = ("echo before; " + wait.format("go1") + "echo while-down; " + wait.format("go2") +
              "echo after-restart; exec sleep 1000")
    uid = create(asb, "relay", container=limited(script))["metadata"]["uid"]
    wait_ready(asb, "relay", timeout=20)
    assert wait_for(lambda: b"before" in main_log(sbx_state, uid)), asb.output()
    asb.kill9()
    c = Client(f"unix:{sockets(sbx_state, uid)[1]}")
    try:
        # Written while no asb serve reads: kept in the pipe (sandboxd holds a read end), not
        # lost, and the main process is not killed by SIGPIPE.
        assert run(c, "touch", "/workspace/go1")[0] == 0
        time.sleep(0.5)
        asb2 = start_sbx()
        wait_ready(asb2, "relay", timeout=20)
        # Ready may be the stored status from before: wait for the re-adoption itself.
        assert wait_for(lambda: "re-adopted sandbox container" in asb2.output()), asb2.output()
        assert wait_for(lambda: b"while-down" in main_log(sbx_state, uid)), asb2.output()
        # Later output reaches the new asb serve too.
        assert run(c, "touch", "/workspace/go2")[0] == 0
    finally:
        c.close()
    assert wait_for(lambda: b"after-restart" in main_log(sbx_state, uid)), asb2.output()
    assert ok(asb2, "logs", "relay") == "before\nwhile-down\nafter-restart\n"
