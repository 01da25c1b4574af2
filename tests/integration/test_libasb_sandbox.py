"""libasb's sandbox client (tests/integration/libasb_sandbox_probe.c, linked with libasb.so
through pkg-config) against a real standalone sandboxd serving REST and gRPC on unix sockets:
file round trips (with a 64 MiB streamed file in bounded memory), Execute, Start with streamed
output, stdin, signal and PTY resize from another thread, the error mapping, retries, and
asb_sandbox_open by Sandbox name through `asb serve`."""
import os
import shutil
import subprocess
import tempfile
import time

import pytest

from asb_apiserver import CORE, SANITIZER_EXIT_CODES, asb, start_asb  # noqa: F401 (fixtures)
from asb_cli import cli_env
from test_cli_wait import set_ready
from test_libasb_example import LIB, instrumented, pkg_config

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture(scope="module")
def probe(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("sbxprobe") / "libasb_sandbox_probe")
    san = ["-fsanitize=address,undefined"] if instrumented() else []
    subprocess.run(["cc", "-std=gnu11", "-Wall", "-Wextra", "-Werror", *san,
                    os.path.join(HERE, "libasb_sandbox_probe.c"),
                    *pkg_config("--cflags", "--libs"), "-lpthread", f"-Wl,-rpath,{LIB}",
                    "-o", out], check=True)
    return out


@pytest.fixture
def short_dir():
    """Unix socket paths are limited to 107 bytes: keep them short."""
    d = tempfile.mkdtemp(prefix="asbsbx-", dir="/tmp")
    yield d
    shutil.rmtree(d, ignore_errors=True)


def start_on_sockets(start_sandboxd, rest, grpc, root=None):
    d = start_sandboxd(root=root, extra_args=["--rest-socket", rest, "--grpc-socket", grpc])
    deadline = time.monotonic() + 10
    while not (os.path.exists(rest) and os.path.exists(grpc)):
        assert time.monotonic() < deadline, "sockets not created"
        time.sleep(0.02)
    return d


@pytest.fixture
def sockets(start_sandboxd, short_dir):
    rest, grpc = os.path.join(short_dir, "rest.sock"), os.path.join(short_dir, "grpc.sock")
    d = start_on_sockets(start_sandboxd, rest, grpc)
    return d, rest, grpc


def run_probe(probe, *args, env=None, timeout=120):
    p = subprocess.run([probe, *args], capture_output=True, text=True, env=env, timeout=timeout)
    assert p.returncode not in SANITIZER_EXIT_CODES, p.stderr
    assert "ERROR: AddressSanitizer" not in p.stderr and "runtime error:" not in p.stderr, p.stderr
    assert p.returncode == 0, p.stdout + p.stderr
    return p.stdout


def results(stdout):
    """{name: (code, text, [reason, http_status, message])} for the `report` lines."""
    out = {}
    for line in stdout.splitlines():
        parts = line.split(" | ")
        head = parts[0].split(" ", 2)
        if len(head) >= 2 and head[1].lstrip("-").isdigit():
            out.setdefault(head[0], (int(head[1]), head[2] if len(head) > 2 else "", parts[1:]))
    return out


def lines_starting(stdout, prefix):
    return [l[len(prefix):] for l in stdout.splitlines() if l.startswith(prefix)]


def test_files_round_trip_and_errors(probe, sockets):
    d, rest, grpc = sockets
    out = run_probe(probe, rest, grpc, "files")
    r = results(out)
    for ok in ("open", "write", "read", "write2", "list", "list2", "exists", "exists-missing",
               "delete-file", "delete-recursive", "exists-after"):
        assert r[ok][0] == 0, (ok, out)
    assert "content 15 hello, sandbox" in out
    # A directory's size is the filesystem's own (4096 on ext4, other values on tmpfs, btrfs, xfs):
    # the contract is that it is reported, not which number it is.
    entries = lines_starting(out, "entry ")
    assert len(entries) == 3, out
    name, size, rest = entries[0].split(" ", 2)
    assert name == "sub" and size.isdigit() and rest == "directory 0755 1", entries
    assert entries[1:] == ["x.bin 0 file 0644 1", "a b.txt 15 0600"]
    assert lines_starting(out, "exists= ") == ["1", "0", "0"]
    assert r["list-file"][:2] == (-8, "bad request")
    assert r["read-missing"][:2] == (-4, "not found")
    assert r["read-missing"][2] == ["NOT_FOUND", "404", "path does not exist within the sandbox"]
    for esc in ("read-escape", "read-dotdot"):
        assert r[esc][0] == -10 and r[esc][2][0] == "PERMISSION_DENIED", out
        assert "path traversal outside sandbox root is forbidden" in r[esc][2][2]
    assert r["delete-nonempty"][0] == -6 and r["delete-nonempty"][2][0] == "CONFLICT"
    assert r["delete-missing"][0] == -4
    assert r["write-dir"][0] == -8 and r["write-dir"][2][2] == "target path is a directory"
    assert r["write-mode"][0] == -3
    assert not os.path.exists(os.path.join(d.root, "dir"))


def test_large_streamed_file_bounded_memory(probe, sockets):
    d, rest, grpc = sockets
    out = run_probe(probe, rest, grpc, "big", "64", timeout=300)
    r = results(out)
    assert r["bigwrite"][0] == 0 and r["bigread"][0] == 0, out
    assert "bigsize 67108864 ok 1" in out
    assert os.path.getsize(os.path.join(d.root, "big.bin")) == 64 << 20
    growth = int(lines_starting(out, "rss-growth-kib ")[0])
    assert growth < 16 * 1024, out  # 64 MiB went through without being held in memory


def test_processes(probe, sockets):
    d, rest, grpc = sockets
    os.mkdir(os.path.join(d.root, "sub"))
    out = run_probe(probe, rest, grpc, "procs")
    r = results(out)
    assert r["execute"][0] == 0, out
    assert "execute-result 3 [out\n] [err\n]" in out
    assert r["execute-env"][0] == 0
    assert "execute-env-result 0 [sentinel" in out and "/sub\n]" in out
    assert r["execute-escape"][0] == -10 and r["execute-escape"][2][0] == "PERMISSION_DENIED"
    assert r["execute-notfound"][0] == -4 and "executable file not found" in r["execute-notfound"][2][2]
    assert r["execute-timeout"][0] == -14
    assert r["execute-empty"][0] == -3
    assert "start-result pid>0:1 exit 0 exits 1 out [one|three|] err [two\n]" in out
    assert r["stdin"][0] == 0 and r["stdin-eof"][0] == 0
    assert "stdin-result pid>0:1 exit 0 exits 1 out [piped-through] err []" in out
    assert r["signal-bad"][0] == -8 and r["signal-bad"][2][0] == "INVALID_ARGUMENT"
    assert r["resize-nopty"][0] == -6 and r["resize-nopty"][2][0] == "FAILED_PRECONDITION"
    assert r["signal"][0] == 0
    sig = lines_starting(out, "signal-result ")[0]
    assert sig.startswith("pid>0:1 exit ") and "exit 0 " not in sig and "out [started|]" in sig
    assert r["resize"][0] == 0 and r["stdin-pty"][0] == 0
    pty = lines_starting(out, "pty-result ")[0]
    assert pty.startswith("pid>0:1 exit 0 exits 1"), pty
    assert "24 80" in pty and "40 100" in pty and pty.index("24 80") < pty.index("40 100"), pty
    assert r["cancel"][0] == 77 and "exits 0" in lines_starting(out, "cancel-result ")[0]
    assert r["closed"][0] == 0, out
    assert "closed-result pid>0:1 exit 0 exits 1 out [eof|] err []" in out
    assert r["closed-v1"][0] == -14, out  # version 1: no close, `read` waits until the deadline
    for unknown in ("stdin-unknown", "signal-unknown", "resize-unknown"):
        assert r[unknown][0] == -4 and r[unknown][2][0] == "NOT_FOUND", out
        assert "process 999999 not found" in r[unknown][2][2]


def test_retries_files_not_execute(probe, short_dir):
    rest, grpc = os.path.join(short_dir, "none-rest.sock"), os.path.join(short_dir, "none-grpc.sock")
    out = run_probe(probe, rest, grpc, "down")
    r = results(out)
    assert r["exists-down"][0] == -13, out
    # 3 attempts, backoff 100 ms then 200 ms (+-25 %): at least ~225 ms of waiting.
    assert int(lines_starting(out, "elapsed-ms ")[0]) >= 200, out
    assert r["execute-down"][0] == -13


def test_open_by_name(probe, start_asb, start_sandboxd, short_dir):
    server = start_asb(state_dir=os.path.join(short_dir, "state"))
    env = cli_env(server)
    out = run_probe(probe, "-", "-", "byname", "nosuch", env=env)
    assert results(out)["open"][0] == -4, out
    assert results(out)["open-object-notjson"][0] == -3, out
    assert "no metadata.name" in results(out)["open-object-noname"][2][2], out
    # An image no runtime can pull: nothing but this test makes the Sandbox Ready.
    created = server.create_sandbox("byname", image="registry.invalid/none:latest")
    uid = created["metadata"]["uid"]
    out = run_probe(probe, "-", "-", "byname", "byname", env=env)
    r = results(out)
    assert r["open"][0] == -6 and "is not ready" in r["open"][2][2], out
    run_dir = os.path.join(server.state_dir, "run", uid)
    os.makedirs(run_dir, exist_ok=True)
    start_on_sockets(start_sandboxd, os.path.join(run_dir, "rest.sock"),
                     os.path.join(run_dir, "grpc.sock"))
    set_ready(server, "byname")
    out = run_probe(probe, "-", "-", "byname", "byname", env=env)
    r = results(out)
    if r["open"][0] == -6:
        pytest.skip("the control plane's reconciler overrode the Ready condition")
    assert r["open"][0] == 0, out
    assert f"rest {run_dir}/rest.sock" in out and f"grpc {run_dir}/grpc.sock" in out
    assert results(out)["open-object"][0] == 0 and f"object-grpc {run_dir}/grpc.sock" in out, out
    if r["execute"][0] == -13 and not os.path.exists(os.path.join(run_dir, "grpc.sock")):
        pytest.skip("the control plane's runtime removed the sandbox's run directory")
    assert r["execute"][0] == 0 and "out by-name" in out
