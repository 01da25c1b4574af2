"""Escape suite, resource exhaustion (issue 13): a fork bomb and a memory bomb inside real runc
sandboxes. The cgroup limits hold (fork fails with EAGAIN at the pids limit, the memory bomb is
OOM-killed inside its sandbox) and asb serve, a witness sandbox and the attacker's own sandbox are
healthy afterwards."""
import errno

from escape_sandbox import escape  # noqa: F401

PIDS_LIMIT = 4096  # DEFAULT_PIDS_LIMIT of local-reconcile-sandbox.c


def test_fork_bomb_stops_at_the_pids_limit(escape):
    box = escape.sandbox("forkbomb", container={"resources": {"limits": {"memory": "512Mi"}}})
    res = box.probe("forkbomb", 100000, timeout=120)
    assert res["errno"] == errno.EAGAIN, res
    assert 100 < res["forked"] < PIDS_LIMIT, res
    escape.assert_healthy()
    # Every child is gone again: the sandbox's pid count is back to a handful.
    code, out, _ = box.run("sh", "-c", "ls -d /proc/[0-9]* | wc -l")
    assert code == 0 and int(out) < 10, out


def test_memory_bomb_is_oom_killed_inside(escape):
    box = escape.sandbox("membomb", container={"resources": {"limits": {"memory": "64Mi"}}})
    limit = box.run("sh", "-c", "cat /sys/fs/cgroup/memory/memory.limit_in_bytes 2>/dev/null"
                    " || cat /sys/fs/cgroup/memory.max")[1].strip()
    assert limit == str(64 << 20)
    # 512 MiB, every page written: far past the limit, well within the host's memory.
    code, out, err = box.python("b = bytearray(b'x') * (512 << 20)\nprint(len(b))", timeout=120)
    assert code != 0 and "536870912" not in out, (code, out, err)
    # Killed by a signal (Execute reports -1, the CLI 137), or Python's own MemoryError.
    assert code in (-1, 137, -9) or "MemoryError" in err, (code, err)
    # The kernel's OOM killer did it, inside the sandbox's memory cgroup.
    code, out, _ = box.run("sh", "-c", "grep -h oom_kill /sys/fs/cgroup/memory/memory.oom_control"
                           " /sys/fs/cgroup/memory.events 2>/dev/null")
    kills = [int(line.split()[1]) for line in out.splitlines() if line.startswith("oom_kill ")]
    assert kills and max(kills) >= 1, out
    escape.assert_healthy()
    code, out, _ = box.python("print(sum(bytearray(16 << 20)))")
    assert (code, out.strip()) == (0, "0")


def test_thread_bomb_stops_at_the_pids_limit(escape):
    """Threads count against the pids limit too."""
    box = escape.sandbox("forkbomb", container={"resources": {"limits": {"memory": "512Mi"}}})
    code, out, err = box.python(
        "import threading\n"
        "ev = threading.Event(); n = 0\n"
        "try:\n"
        "    while n < 100000:\n"
        "        t = threading.Thread(target=ev.wait, daemon=True); t.start(); n += 1\n"
        "except RuntimeError as e:\n"
        "    print('stopped', n, e)\n"
        "ev.set()\n", timeout=120)
    assert code == 0, err
    assert out.startswith("stopped"), out
    assert int(out.split()[1]) < PIDS_LIMIT
    escape.assert_healthy()
