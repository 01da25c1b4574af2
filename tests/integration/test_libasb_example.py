"""libasb as a library: examples/asb-example.c compiled against build/lib/libasb.so through
pkg-config and run against a real `asb serve`; the exported symbol set; the static archive."""
import os
import subprocess
import threading
import time

import pytest

from asb_apiserver import BUILD, CORE, ROOT, SANITIZER_EXIT_CODES, asb, start_asb  # noqa: F401
from asb_cli import cli_env
from test_cli_wait import set_ready

LIB = os.path.abspath(os.path.join(BUILD, "lib"))


def pkg_config(*args):
    env = {**os.environ, "PKG_CONFIG_PATH": os.path.join(LIB, "pkgconfig")}
    return subprocess.run(["pkg-config", *args, "libasb"], capture_output=True, text=True,
                          env=env, check=True).stdout.split()


def instrumented():
    """The sanitizer build's library needs an instrumented program."""
    out = subprocess.run(["readelf", "-d", os.path.join(LIB, "libasb.so.0")], capture_output=True,
                         text=True).stdout
    return "libasan" in out


@pytest.fixture(scope="module")
def example(tmp_path_factory):
    if not os.path.exists(os.path.join(LIB, "libasb.so.0")):
        pytest.fail(f"{LIB}/libasb.so.0 missing: run make first")
    out = str(tmp_path_factory.mktemp("example") / "asb-example")
    san = ["-fsanitize=address,undefined"] if instrumented() else []
    cmd = ["cc", "-std=c11", "-Wall", "-Wextra", "-Werror", "-pedantic", *san,
           os.path.join(ROOT, "examples", "asb-example.c"), *pkg_config("--cflags", "--libs"),
           f"-Wl,-rpath,{LIB}", "-o", out]
    subprocess.run(cmd, check=True)
    return out


def test_pkg_config_and_exports():
    assert pkg_config("--modversion") == ["0.1.0"]
    assert "-lasb" in pkg_config("--libs")
    syms = subprocess.run(["nm", "-D", "--defined-only", os.path.join(LIB, "libasb.so.0")],
                          capture_output=True, text=True, check=True).stdout.split("\n")
    exported = sorted(l.split()[-1] for l in syms if " T " in l)
    assert exported and all(s.startswith("asb_") for s in exported), exported
    assert "asb_object_wait_condition" in exported and "asb_strerror" in exported
    soname = subprocess.run(["readelf", "-d", os.path.join(LIB, "libasb.so.0")],
                            capture_output=True, text=True).stdout
    assert "Library soname: [libasb.so.0]" in soname
    assert os.path.exists(os.path.join(LIB, "libasb.a"))


def test_example_program_against_asb_serve(asb, example):
    def later():
        # Wait for the example to create the sandbox, then make it Ready.
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if asb.get(asb.path(CORE, "sandboxes", name="ex1")).status_code == 200:
                set_ready(asb, "ex1")
                return
            time.sleep(0.02)

    t = threading.Thread(target=later)
    t.start()
    p = subprocess.run([example, "ex1", "20000"], capture_output=True, text=True,
                       env=cli_env(asb), timeout=60)
    t.join()
    assert p.returncode not in SANITIZER_EXIT_CODES, p.stderr
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0] == f"server {asb.url}, libasb 0.1.0"
    assert lines[1:] == ["created", "ready", "list has ex1", "after delete: not found"]


def test_example_timeout_and_connection_error(asb, example):
    p = subprocess.run([example, "ex2", "300"], capture_output=True, text=True, env=cli_env(asb),
                       timeout=60)
    assert p.returncode == 0, p.stderr
    assert "timeout" in p.stdout.splitlines()
    env = cli_env(asb, ASB_SERVER="http://127.0.0.1:1")
    p = subprocess.run([example, "ex3"], capture_output=True, text=True, env=env, timeout=60)
    assert p.returncode == 1 and "connection failed" in p.stderr
