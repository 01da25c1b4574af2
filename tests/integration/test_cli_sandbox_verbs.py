"""The sandbox verbs of `asb` (exec, cp, ls, suspend, resume, logs) against a real `asb serve`
running real runc sandboxes (skipped without root or runc, as test_local_sandbox_runtime.py)."""
import fcntl
import hashlib
import os
import pty
import select
import signal
import socket
import struct
import subprocess
import termios
import time

from asb_apiserver import CORE, EXT, SANITIZER_EXIT_CODES, asb_binary
from asb_cli import cli_env, ok, run
from local_sandbox import create, get_sandbox, condition, sbx_state, start_sbx, wait_ready  # noqa: F401


def sandbox(start_sbx, name="vx", **kw):
    asb = start_sbx()
    create(asb, name, **kw)
    wait_ready(asb, name, timeout=20)
    return asb


def popen(asb, *args, **kw):
    return subprocess.Popen([asb_binary(), *args], env=cli_env(asb), **kw)


def no_sanitizer(p, err=""):
    assert p.returncode not in SANITIZER_EXIT_CODES, f"{SANITIZER_EXIT_CODES[p.returncode]}:\n{err}"
    assert "ERROR: AddressSanitizer" not in err and "runtime error:" not in err, err


def test_exec_exit_codes_streams_and_stdin(start_sbx):
    asb = sandbox(start_sbx)
    p = run(asb, "exec", "vx", "--", "sh", "-c", "exit 7")
    assert (p.returncode, p.stdout, p.stderr) == (7, "", "")
    p = run(asb, "exec", "vx", "--", "sh", "-c", "echo out; echo err >&2; echo out2")
    assert (p.returncode, p.stdout, p.stderr) == (0, "out\nout2\n", "err\n")
    assert ok(asb, "exec", "vx", "--", "python3", "-c", "print(6 * 7)") == "42\n"
    # Options after the name and no `--`, as kubectl.
    assert ok(asb, "exec", "vx", "echo", "a b") == "a b\n"
    # -i: stdin piped through WriteStdin, EOF at the end of input.
    data = "".join(f"line {i}\n" for i in range(20000))  # ~200 KB, several chunks
    p = run(asb, "exec", "-i", "vx", "--", "cat", input=data)
    assert p.returncode == 0, p.stderr
    assert p.stdout == data
    p = run(asb, "exec", "vx", "-i", "--", "sh", "-c", "wc -l; exit 3", input="a\nb\n")
    assert (p.returncode, p.stdout.strip()) == (3, "2")
    # Without -i the remote stdin is closed at once: cat ends with nothing.
    p = run(asb, "exec", "vx", "--", "cat", input="ignored\n")
    assert (p.returncode, p.stdout) == (0, "")
    # A signal death is 128+9.
    assert run(asb, "exec", "vx", "--", "sh", "-c", "kill -9 $$").returncode == 137
    # Unknown command: a clear error, exit 1.
    p = run(asb, "exec", "vx", "--", "no-such-command")
    assert p.returncode == 1 and "no-such-command" in p.stderr and p.stderr.startswith("error: ")


def test_exec_output_arrives_as_produced(start_sbx):
    asb = sandbox(start_sbx)
    p = popen(asb, "exec", "vx", "--", "sh", "-c", "echo first; sleep 3; echo second",
              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    t0 = time.monotonic()
    first = p.stdout.readline()
    took = time.monotonic() - t0
    rest, err = p.communicate(timeout=30)
    no_sanitizer(p, err.decode())
    assert first == b"first\n" and rest == b"second\n"
    assert took < 2.5, took
    assert p.returncode == 0


def test_exec_forwards_sigint(start_sbx):
    asb = sandbox(start_sbx)
    p = popen(asb, "exec", "vx", "--", "sh", "-c", "echo started; sleep 30",
              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert p.stdout.readline() == b"started\n"
    t0 = time.monotonic()
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=20)
    no_sanitizer(p, err.decode())
    assert p.returncode == 130, err
    assert time.monotonic() - t0 < 5
    # The remote process is gone too.
    assert ok(asb, "exec", "vx", "--", "sh", "-c", "ps -eo comm | grep -c '^sleep$' || true").strip() == "0"


def read_pty(master, proc, until=None, timeout=20):
    out = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        r, _, _ = select.select([master], [], [], 0.1)
        if r:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
            if until and until in out:
                return out
        elif proc.poll() is not None and not until:
            # drain what is left
            r, _, _ = select.select([master], [], [], 0.2)
            if not r:
                break
    return out


def set_winsize(fd, rows, cols):
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))


def test_exec_tty(start_sbx):
    asb = sandbox(start_sbx)
    master, slave = pty.openpty()
    set_winsize(slave, 33, 101)
    try:
        p = popen(asb, "exec", "-t", "vx", "--", "sh", "-c",
                  "stty size; test -t 0 && echo IS-A-TTY; exit 5",
                  stdin=slave, stdout=slave, stderr=slave)
        out = read_pty(master, p)
        p.wait(timeout=20)
        no_sanitizer(p, out.decode(errors="replace"))
        assert p.returncode == 5, out
        assert b"33 101\r\n" in out and b"IS-A-TTY" in out, out
        # The local terminal went raw while it ran and is restored afterwards.
        assert termios.tcgetattr(slave)[3] & termios.ECHO

        # SIGWINCH -> ResizeTTY; -i with -t: keystrokes reach the remote terminal.
        p = popen(asb, "exec", "-i", "-t", "vx", "--", "sh", "-c",
                  "echo ready; until [ \"$(stty size)\" = '40 120' ]; do sleep 0.05; done; "
                  "echo resized; read line; echo got:$line; stty size",
                  stdin=slave, stdout=slave, stderr=slave)
        out = read_pty(master, p, until=b"ready")
        assert b"ready" in out, out
        set_winsize(master, 40, 120)
        p.send_signal(signal.SIGWINCH)
        out += read_pty(master, p, until=b"resized")  # the remote terminal has the new size
        assert b"resized" in out, out
        os.write(master, b"hello\r")
        out += read_pty(master, p)
        p.wait(timeout=20)
        no_sanitizer(p, out.decode(errors="replace"))
        assert p.returncode == 0, out
        assert b"got:hello" in out and b"40 120" in out, out
    finally:
        os.close(master)
        os.close(slave)


def sha(data):
    return hashlib.sha256(data).hexdigest()


def test_cp_both_ways_and_ls(start_sbx, tmp_path):
    asb = sandbox(start_sbx)
    blob = os.urandom(3 * 1024 * 1024 + 123)
    src = tmp_path / "blob.bin"
    src.write_bytes(blob)
    os.chmod(src, 0o640)
    assert ok(asb, "cp", str(src), "vx:data/blob.bin") == ""
    remote = ok(asb, "exec", "vx", "--", "sha256sum", "data/blob.bin").split()[0]
    assert remote == sha(blob)
    back = tmp_path / "back.bin"
    assert ok(asb, "cp", "vx:data/blob.bin", str(back)) == ""
    assert sha(back.read_bytes()) == sha(blob)
    # Into a directory (existing, or a trailing /) keeps the name, both ways.
    ok(asb, "cp", str(src), "vx:data/")
    ok(asb, "cp", str(src), "vx:")
    outdir = tmp_path / "out"
    outdir.mkdir()
    ok(asb, "cp", "vx:data/blob.bin", str(outdir))
    assert (outdir / "blob.bin").read_bytes() == blob
    # - is stdin / stdout (binary safe).
    p = subprocess.run([asb_binary(), "cp", "-", "vx:from-stdin.bin"], input=blob[:100000],
                       capture_output=True, env=cli_env(asb), timeout=60)
    assert p.returncode == 0, p.stderr
    p = subprocess.run([asb_binary(), "cp", "vx:from-stdin.bin", "-"], capture_output=True,
                       env=cli_env(asb), timeout=60)
    assert p.returncode == 0 and p.stdout == blob[:100000], p.stderr

    # ls: like ls -l (mode, size, time, name, dirs with /); the local mode was kept.
    lines = ok(asb, "ls", "vx").splitlines()
    names = [line.split()[-1] for line in lines]
    assert names == sorted(names) and "data/" in names and "blob.bin" in names, lines
    entry = {line.split()[-1]: line.split() for line in lines}
    assert entry["blob.bin"][0] == "-rw-r-----" and entry["blob.bin"][1] == str(len(blob))
    assert entry["data/"][0].startswith("d")
    assert len(entry["data/"][2]) == 10 and len(entry["data/"][3]) == 5  # YYYY-MM-DD HH:MM
    assert [line.split()[-1] for line in ok(asb, "ls", "vx:data").splitlines()] == ["blob.bin"]
    one = ok(asb, "ls", "vx:data/blob.bin").split()
    assert one[0] == "-rw-r-----" and one[1] == str(len(blob)) and one[-1] == "blob.bin"

    # Errors.
    p = run(asb, "cp", "vx:missing.txt", str(tmp_path / "m"))
    assert p.returncode == 1 and "does not exist" in p.stderr and not (tmp_path / "m").exists()
    assert not [f for f in os.listdir(tmp_path) if f.startswith(".asb-cp")]
    p = run(asb, "cp", "vx:data", str(tmp_path / "d"))
    assert p.returncode == 1 and "is a directory" in p.stderr
    p = run(asb, "cp", str(tmp_path / "nope"), "vx:x")
    assert p.returncode == 1 and "No such file" in p.stderr
    p = run(asb, "cp", "vx:../../etc/passwd", "-")
    assert p.returncode == 1 and p.stderr.startswith("error: ")
    p = run(asb, "ls", "vx:missing")
    assert p.returncode == 1 and p.stderr == "error: vx:missing: path does not exist within the sandbox\n"
    assert run(asb, "cp", str(src), str(back)).returncode == 2
    assert run(asb, "cp", "vx:a", "vx:b").returncode == 2
    assert run(asb, "cp", "vx:a").returncode == 2


def test_claim_name_resolution(start_sbx):
    asb = sandbox(start_sbx)
    claim = {"apiVersion": f"{EXT}/v1beta1", "kind": "SandboxClaim", "metadata": {"name": "myclaim"},
             "spec": {"warmPoolRef": {"name": "python"}}}
    r = asb.post(asb.path(EXT, "sandboxclaims", "default"), claim)
    assert r.status_code == 201, r.text
    p = run(asb, "exec", "myclaim", "--", "hostname")
    assert p.returncode == 1 and 'claim "myclaim" has no sandbox yet' in p.stderr
    r = asb.merge_patch(asb.path(EXT, "sandboxclaims", "default", "myclaim", "status"),
                        {"status": {"sandbox": {"name": "vx"}}})
    assert r.status_code == 200, r.text
    assert ok(asb, "exec", "myclaim", "--", "hostname") == "vx\n"
    ok(asb, "cp", "-", "myclaim:via-claim.txt", input="claimed\n")
    assert ok(asb, "cp", "vx:via-claim.txt", "-") == "claimed\n"
    assert "via-claim.txt" in ok(asb, "ls", "myclaim")
    # A claim naming a sandbox that does not exist.
    r = asb.merge_patch(asb.path(EXT, "sandboxclaims", "default", "myclaim", "status"),
                        {"status": {"sandbox": {"name": "gone"}}})
    p = run(asb, "ls", "myclaim")
    assert p.returncode == 1 and 'sandbox "gone" of claim "myclaim" not found' in p.stderr


def test_unknown_not_ready_logs_and_usage(start_sbx):
    asb = start_sbx()
    for args in (["exec", "nope", "--", "true"], ["cp", "-", "nope:x"], ["ls", "nope"],
                 ["suspend", "nope"], ["resume", "nope"], ["logs", "nope"]):
        p = run(asb, *args, input="")
        assert p.returncode == 1, (args, p.stderr)
        assert p.stderr == ('error: sandbox "nope" not found in namespace "default" '
                            '(no Sandbox or SandboxClaim of that name)\n'), (args, p.stderr)
    create(asb, "noimg", image="python:3.13-slim")
    wait_ready(asb, "noimg", want="False", reason="ImageNotSupported")
    p = run(asb, "exec", "noimg", "--", "true")
    assert p.returncode == 1
    assert p.stderr.startswith('error: sandbox "noimg" is not ready (ImageNotSupported: image '), p.stderr
    p = run(asb, "logs", "noimg")
    assert p.returncode == 1 and "not available" in p.stderr and p.stdout == ""
    for args in (["exec"], ["exec", "noimg"], ["exec", "noimg", "--"], ["cp"], ["cp", "a", "b"],
                 ["ls"], ["ls", "a", "b"], ["suspend"], ["resume", "a", "b"], ["logs"]):
        assert run(asb, *args).returncode == 2, args
    p = run(asb, "exec", "--bogus", "x", "--", "true")  # kubectl's one line (issue 32)
    assert (p.returncode, p.stderr) == (1, "error: unknown flag: --bogus\nSee 'asb exec --help' for usage.\n")
    assert "exec" in ok(asb, "--help") and "suspend" in ok(asb, "--help")
    assert ok(asb, "exec", "--help").startswith("Usage: asb exec")


def test_suspend_resume(start_sbx):
    asb = sandbox(start_sbx)
    ok(asb, "cp", "-", "vx:kept.txt", input="kept across suspend\n")
    # The fields the server writes are in the schema: no warning about them (issue 31).
    assert get_sandbox(asb, "vx")["status"]["resources"]["limits"]
    p = run(asb, "suspend", "vx")
    assert p.returncode == 0 and p.stdout == "sandbox.agents.x-k8s.io/vx suspended\n", p
    assert "unknown field" not in p.stderr, p.stderr
    assert get_sandbox(asb, "vx")["spec"]["operatingMode"] == "Suspended"
    ok(asb, "wait", "--for=condition=Suspended", "sandbox/vx", "--timeout", "30s")
    p = run(asb, "exec", "vx", "--", "true")
    assert p.returncode == 1 and 'sandbox "vx" is not ready' in p.stderr, p.stderr
    p = run(asb, "resume", "vx")
    assert p.returncode == 0 and p.stdout == "sandbox.agents.x-k8s.io/vx resumed\n", p
    assert "unknown field" not in p.stderr, p.stderr
    assert get_sandbox(asb, "vx")["spec"]["operatingMode"] == "Running"
    ok(asb, "wait", "--for=condition=Ready", "sandbox/vx", "--timeout", "30s")
    assert condition(get_sandbox(asb, "vx"), "Suspended")["status"] == "False"
    assert ok(asb, "exec", "vx", "--", "cat", "kept.txt") == "kept across suspend\n"


def test_exec_finds_a_local_sandbox_by_name_without_the_api(start_sbx):
    asb = sandbox(start_sbx)
    uid = get_sandbox(asb, "vx")["metadata"]["uid"]
    link = os.path.join(asb.state_dir, "names", "default", "vx")
    assert os.readlink(link) == f"../../run/{uid}"
    # The local name needs no API request: a token the server refuses does not matter to it...
    bad = cli_env(asb, ASB_TOKEN="not-the-token")
    p = run(asb, "exec", "vx", "--", "hostname", env=bad)
    assert (p.returncode, p.stdout) == (0, "vx\n"), p.stderr
    # ...while a name it does not hold goes to the API, which refuses the token.
    p = run(asb, "exec", "nope", "--", "true", env=bad)
    assert p.returncode == 1 and "nauthorized" in p.stderr, p.stderr
    # Another server's sandboxes are never looked up in this state directory.
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))  # bound, never listening: connections are refused
        other = cli_env(asb, ASB_SERVER=f"http://127.0.0.1:{closed.getsockname()[1]}")
        p = run(asb, "exec", "vx", "--", "hostname", env=other)
        assert p.returncode == 1 and p.stdout == "", p.stdout
    ok(asb, "cp", "-", "vx:old.txt", input="the first vx\n")
    # Gone: the name leads nowhere, and the API says why.
    r = asb.delete(asb.path(CORE, "sandboxes", "default", "vx"))
    assert r.status_code == 200, r.text
    deadline = time.monotonic() + 30
    while asb.get(asb.path(CORE, "sandboxes", "default", "vx")).status_code != 404:
        assert time.monotonic() < deadline, "sandbox vx not deleted"
        time.sleep(0.05)
    p = run(asb, "exec", "vx", "--", "true")
    assert p.returncode == 1 and 'sandbox "vx" not found' in p.stderr, p.stderr
    # A new Sandbox of the same name takes the name over: exec reaches it, not the old one.
    create(asb, "vx")
    wait_ready(asb, "vx", timeout=20)
    uid2 = get_sandbox(asb, "vx")["metadata"]["uid"]
    assert uid2 != uid and os.readlink(link) == f"../../run/{uid2}"
    p = run(asb, "exec", "vx", "--", "cat", "old.txt", env=bad)
    assert p.returncode == 1 and "old.txt" in p.stderr, (p.stdout, p.stderr)
    assert run(asb, "exec", "vx", "--", "hostname", env=bad).stdout == "vx\n"
