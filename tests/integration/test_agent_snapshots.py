"""Agent snapshots against a real local sandbox: a 150 MB home directory is snapshotted (and
restored) by sandboxed-tools with bounded memory, because the tar stream goes block by block
from the sandbox through the filter into the .tar.gz file and back. Skipped without root/runc
(local_sandbox.py)."""
import os
import subprocess
import tarfile
import tempfile
import time

from agent_cli import Agent, agent_replies, binary
from asb_apiserver import CORE
from local_sandbox import sbx_state, start_sbx  # noqa: F401
from test_local_sandbox_runtime import wait_for

# Under AddressSanitizer freed blocks sit in a quarantine (256 MB by default) that would count
# as resident memory; a small one keeps the bound about our buffers, not the sanitizer's.
ASAN_SMALL_QUARANTINE = "quarantine_size_mb=8:thread_local_quarantine_size_kb=64"
RSS_LIMIT_KB = 60 * 1024


def vm_hwm_kb(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def run_measured(agent, *lines, timeout=240):
    """Runs the CLI like Agent.run and returns (returncode, stdout, stderr, peak RSS in kB).
    The peak is the process's own VmHWM, polled until it exits (ru_maxrss would include the
    pytest process it was forked from)."""
    env = agent.environ()
    asan = env.get("ASAN_OPTIONS", "")
    env["ASAN_OPTIONS"] = (asan + ":" if asan else "") + ASAN_SMALL_QUARANTINE
    peak = 0
    with tempfile.TemporaryFile() as fin, tempfile.TemporaryFile() as fout, \
            tempfile.TemporaryFile() as ferr:
        fin.write("".join(line + "\n" for line in lines).encode())
        fin.seek(0)
        p = subprocess.Popen([binary(), "-session", agent.session], stdin=fin, stdout=fout,
                             stderr=ferr, env=env)
        deadline = time.time() + timeout
        while p.poll() is None:
            # A zombie has no memory left: the last reading while it ran is its peak.
            hwm = vm_hwm_kb(p.pid)
            if hwm:
                peak = max(peak, hwm)
            assert time.time() < deadline, "sandboxed-tools timed out"
            time.sleep(0.02)
        fout.seek(0)
        ferr.seek(0)
        return (p.returncode, fout.read().decode(errors="replace"),
                ferr.read().decode(errors="replace"), peak)


def test_snapshot_and_restore_of_150mb_home_in_bounded_memory(start_sbx, sbx_state, tmp_path):
    asb = start_sbx()
    a = Agent(tmp_path, sbx_state, session="big1")
    # A sparse 150 MB file: no disk or memory in the sandbox, but tar reads (and streams) all of
    # it, as it would a real one. A small marker checks the contents made it.
    rc, out, err, rss = run_measured(
        a, "run: truncate -s 150M big && echo marker > small && ls -l big small")
    assert rc == 0, err
    assert "exit_code: 0" in agent_replies(out)[-1], out + err
    assert rss < RSS_LIMIT_KB, f"snapshot peak RSS {rss} kB"
    names = a.backups()
    assert len(names) == 1, names
    with tarfile.open(os.path.join(a.session_dir, "fs", names[0]), "r:gz") as t:
        members = {m.name.lstrip("./"): m for m in t.getmembers()}
        assert members["big"].size == 150 << 20
        assert t.extractfile(members["small"]).read() == b"marker\n"
    # Restore into a new sandbox streams the other way.
    path = asb.path(CORE, "sandboxes", "default", "big1")
    assert asb.delete(path).status_code == 200
    assert wait_for(lambda: asb.get(path).status_code == 404)
    rc, out, err, rss = run_measured(a, "run: cat small; stat -c %s big")
    assert rc == 0, err
    assert "stdout:\nmarker\n157286400\n" in agent_replies(out)[-1], out + err
    assert rss < RSS_LIMIT_KB, f"restore peak RSS {rss} kB"
