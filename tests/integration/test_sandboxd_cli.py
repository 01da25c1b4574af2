"""sandboxd command line: upstream flags, Go flag-package semantics and validation messages."""
import os
import signal
import subprocess

from conftest import binary, free_port


def run(*args, timeout=10):
    return subprocess.run([binary("sandboxd"), *args], capture_output=True, text=True, timeout=timeout)


def test_version_prints_and_exits_zero():
    p = run("--version")
    assert p.returncode == 0
    assert p.stdout.startswith("sandboxd ")


def test_help_lists_upstream_flags_and_exits_zero():
    p = run("-h")
    assert p.returncode == 0
    for flag in ("-listen-host", "-rest-port", "-grpc-port", "-root-dir", "-metadata-env-prefix",
                 "-shutdown-timeout", "-http-idle-timeout", "-stream-chunk-size", "-version",
                 "-rest-socket", "-grpc-socket"):
        assert flag in p.stderr


def test_unknown_flag_exits_two():
    p = run("--no-such-flag")
    assert p.returncode == 2
    assert "flag provided but not defined: -no-such-flag" in p.stderr


def test_bad_values_exit_two():
    p = run("--grpc-port", "abc")
    assert p.returncode == 2
    assert 'invalid value "abc" for flag -grpc-port' in p.stderr
    p = run("--shutdown-timeout=10")
    assert p.returncode == 2
    p = run("--rest-port")
    assert p.returncode == 2
    assert "flag needs an argument: -rest-port" in p.stderr


def test_port_range_and_conflict_messages():
    p = run("--grpc-port", "0")
    assert p.returncode == 1
    assert "--grpc-port must be in range 1-65535 (got 0)" in p.stderr
    p = run("--rest-port=70000")
    assert p.returncode == 1
    assert "--rest-port must be in range 1-65535 (got 70000)" in p.stderr
    p = run("-grpc-port=8080")
    assert p.returncode == 1
    assert "--grpc-port and --rest-port must differ (both 8080)" in p.stderr


def test_root_dir_that_is_a_file_fails(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    p = run("--root-dir", str(f), "--rest-port", str(free_port()), "--grpc-port", str(free_port()))
    assert p.returncode == 1
    assert f'root dir "{f}"' in p.stderr


def test_root_dir_is_created_and_sigterm_exits_zero(start_sandboxd, tmp_path):
    root = tmp_path / "a" / "b" / "ws"
    d = start_sandboxd(root=root, extra_args=["--zap-log-level", "info", "--zap-devel"])
    assert root.is_dir()
    assert oct(root.stat().st_mode & 0o777) == "0o755"
    assert d.stop(signal.SIGTERM) == 0
    assert "sandboxd listening" in d.output()


def test_sigint_exits_zero(start_sandboxd):
    d = start_sandboxd()
    assert d.stop(signal.SIGINT) == 0


def test_json_logs(start_sandboxd):
    d = start_sandboxd(extra_args=["--zap-encoder=json"])
    assert d.stop() == 0
    first = d.output().splitlines()[0]
    assert first.startswith("{") and '"msg":"sandboxd listening"' in first, first


def test_port_in_use_fails(start_sandboxd, tmp_path):
    d = start_sandboxd()
    p = run("--listen-host", "127.0.0.1", "--rest-port", str(d.rest_port), "--grpc-port",
            str(free_port()), "--root-dir", str(tmp_path / "other"))
    assert p.returncode == 1
    assert os.path.isdir(d.root)
