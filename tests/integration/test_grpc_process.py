"""process.v1.ProcessService conformance (shared/spec/UPSTREAM.md §1.5, §1.7 gRPC checklist)."""
import os

import grpc
import pytest

from grpc_helpers import Client, collect, start_daemon


@pytest.fixture
def client(start_sandboxd):
    d = start_daemon(start_sandboxd)
    c = Client(d.grpc_addr)
    c.daemon = d
    yield c
    c.close()


def test_execute_echo(client):
    r = client.execute(["echo", "hello"])
    assert r.exit_code == 0 and r.stdout == b"hello\n" and r.stderr == b""


def test_execute_exit_code(client):
    assert client.execute(["sh", "-c", "exit 3"]).exit_code == 3


def test_execute_env_and_cwd(client):
    os.mkdir(os.path.join(client.daemon.root, "sub"))
    r = client.execute(["sh", "-c", "echo $SANDBOX_TEST_VAR; pwd"], env={"SANDBOX_TEST_VAR": "sentinel"},
                       cwd="sub")
    lines = r.stdout.decode().splitlines()
    assert lines[0] == "sentinel" and lines[1].endswith("/sub")


def test_execute_env_overrides_daemon_env(client):
    r = client.execute(["sh", "-c", "echo $HOME"], env={"HOME": "/override"})
    assert r.stdout == b"/override\n"


def test_execute_default_cwd_is_root(client):
    r = client.execute(["pwd"])
    assert r.stdout.decode().strip() == os.path.realpath(client.daemon.root)


def test_execute_missing_command(client):
    with pytest.raises(grpc.RpcError) as e:
        client.execute_rpc(client.pb.ExecuteRequest(), timeout=10)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "command is required" in e.value.details()


def test_execute_cwd_escape(client):
    with pytest.raises(grpc.RpcError) as e:
        client.execute(["true"], cwd="../..")
    assert e.value.code() == grpc.StatusCode.PERMISSION_DENIED


def test_execute_cwd_missing_is_not_found(client):
    with pytest.raises(grpc.RpcError) as e:
        client.execute(["true"], cwd="nope")
    assert e.value.code() == grpc.StatusCode.NOT_FOUND


def test_execute_unknown_program(client):
    with pytest.raises(grpc.RpcError) as e:
        client.execute(["no-such-program-xyz"])
    assert e.value.code() == grpc.StatusCode.NOT_FOUND
    assert 'exec: "no-such-program-xyz": executable file not found in $PATH' in e.value.details()


def test_execute_not_executable(client):
    path = os.path.join(client.daemon.root, "plain.txt")
    open(path, "w").write("x")
    with pytest.raises(grpc.RpcError) as e:
        client.execute(["./plain.txt"])
    assert e.value.code() == grpc.StatusCode.PERMISSION_DENIED


def test_execute_signal_death(client):
    assert client.execute(["sh", "-c", "kill -9 $$"]).exit_code == -1


def test_start_streams_output_and_exit(client):
    events, pid, out, err, code = collect(client.start(["sh", "-c", "echo out; echo err >&2; exit 7"]))
    assert events[0] == "init" and events[-1] == "exit"
    assert events.count("init") == 1 and events.count("exit") == 1
    assert pid > 0 and out == b"out\n" and err == b"err\n" and code == 7


def test_start_ids_increase(client):
    ids = [collect(client.start(["true"]))[1] for _ in range(3)]
    assert ids == sorted(ids) and len(set(ids)) == 3


def test_start_unknown_program_no_events(client):
    with pytest.raises(grpc.RpcError) as e:
        collect(client.start(["no-such-program-xyz"]))
    assert e.value.code() == grpc.StatusCode.NOT_FOUND


def test_write_stdin_cat(client):
    stream = client.start(["cat"])
    first = next(stream)
    pid = first.init.process_id
    client.write_stdin(pid, b"piped-through")
    client.write_stdin(pid, eof=True)
    events, _, out, _, code = collect(stream)
    assert out == b"piped-through" and code == 0


def test_write_stdin_empty_ok_and_second_eof_fails(client):
    # The process outlives its stdin (sleep after cat), so the second EOF meets a closed stdin
    # rather than racing the process's removal from the registry (which would be NOT_FOUND).
    stream = client.start(["sh", "-c", "cat; sleep 30"])
    pid = next(stream).init.process_id
    client.write_stdin(pid, b"")
    client.write_stdin(pid)
    client.write_stdin(pid, eof=True)
    with pytest.raises(grpc.RpcError) as e:
        client.write_stdin(pid, eof=True)
    assert e.value.code() == grpc.StatusCode.INTERNAL
    client.send_signal(pid, client.pb.SIGNAL_SIGKILL)
    collect(stream)


def test_write_stdin_unknown(client):
    with pytest.raises(grpc.RpcError) as e:
        client.write_stdin(424242, b"x")
    assert e.value.code() == grpc.StatusCode.NOT_FOUND


def test_send_signal_unknown(client):
    with pytest.raises(grpc.RpcError) as e:
        client.send_signal(424242, client.pb.SIGNAL_SIGTERM)
    assert e.value.code() == grpc.StatusCode.NOT_FOUND


def test_send_signal_unspecified_then_kill(client):
    stream = client.start(["sleep", "30"])
    pid = next(stream).init.process_id
    with pytest.raises(grpc.RpcError) as e:
        client.send_signal(pid, client.pb.SIGNAL_UNSPECIFIED)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    client.send_signal(pid, client.pb.SIGNAL_SIGKILL)
    assert collect(stream)[4] != 0


def test_sigterm_terminates(client):
    stream = client.start(["sleep", "30"])
    pid = next(stream).init.process_id
    client.send_signal(pid, client.pb.SIGNAL_SIGTERM)
    events, _, _, _, code = collect(stream)
    assert events[-1] == "exit" and code != 0


def test_resize_without_pty(client):
    stream = client.start(["sleep", "30"])
    pid = next(stream).init.process_id
    with pytest.raises(grpc.RpcError) as e:
        client.resize(pid, 100, 30)
    assert e.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    client.send_signal(pid, client.pb.SIGNAL_SIGKILL)
    collect(stream)


def test_pty_initial_size(client):
    events, _, out, err, code = collect(client.start(["sh", "-c", "stty size"], pty=(80, 24)))
    assert code == 0 and b"24 80" in out and err == b""


def test_pty_resize_seen_by_child(client):
    stream = client.start(["sh", "-c", "read x; stty size"], pty=(80, 24))
    pid = next(stream).init.process_id
    client.resize(pid, 120, 40)
    client.write_stdin(pid, b"go\n")
    events, _, out, _, code = collect(stream)
    assert code == 0 and b"40 120" in out


def test_pty_resize_cat(client):
    stream = client.start(["cat"], pty=(80, 24))
    pid = next(stream).init.process_id
    client.resize(pid, 120, 40)
    client.send_signal(pid, client.pb.SIGNAL_SIGKILL)
    collect(stream)


def test_pty_merges_stderr(client):
    events, _, out, err, code = collect(client.start(["sh", "-c", "echo e >&2"], pty=(0, 0)))
    assert b"e" in out and err == b"" and code == 0


def test_registry_removed_after_exit(client):
    _, pid, _, _, _ = collect(client.start(["true"]))
    with pytest.raises(grpc.RpcError) as e:
        client.send_signal(pid, client.pb.SIGNAL_SIGTERM)
    assert e.value.code() == grpc.StatusCode.NOT_FOUND


def test_unknown_method_unimplemented(client):
    rpc = client.channel.unary_unary("/process.v1.ProcessService/Nope")
    with pytest.raises(grpc.RpcError) as e:
        rpc(b"", timeout=10)
    assert e.value.code() == grpc.StatusCode.UNIMPLEMENTED


def test_malformed_request(client):
    rpc = client.channel.unary_unary("/process.v1.ProcessService/Execute")
    with pytest.raises(grpc.RpcError) as e:
        rpc(b"\xff\xff\xff", timeout=10)
    assert e.value.code() == grpc.StatusCode.INTERNAL
    assert client.execute(["true"]).exit_code == 0


def test_file_visible_both_ways(client):
    root = client.daemon.root
    open(os.path.join(root, "from-host.txt"), "w").write("host-data")
    assert client.execute(["cat", "from-host.txt"]).stdout == b"host-data"
    client.execute(["sh", "-c", "printf proc-data > from-proc.txt"])
    assert open(os.path.join(root, "from-proc.txt")).read() == "proc-data"


def test_children_inherit_only_stdio(client):
    out = client.execute(["sh", "-c", "ls /proc/$$/fd"]).stdout.split()
    assert sorted(out) == [b"0", b"1", b"2"], out
    _, _, out, _, _ = collect(client.start(["sh", "-c", "ls /proc/$$/fd"]))
    assert sorted(out.split()) == [b"0", b"1", b"2"], out
    _, _, out, _, _ = collect(client.start(["sh", "-c", "ls /proc/$$/fd"], pty=(80, 24)))
    assert sorted(out.split()) == [b"0", b"1", b"2"], out


def test_write_stdin_does_not_block_the_loop(client):
    stream = client.start(["sh", "-c", "sleep 1; wc -c"])
    pid = next(stream).init.process_id
    fut = client.write_stdin_rpc.future(client.pb.WriteStdinRequest(process_id=pid, input=b"z" * (3 << 20)),
                                        timeout=30)
    import time
    t = time.monotonic()
    assert client.execute(["echo", "meanwhile"]).stdout == b"meanwhile\n"
    assert time.monotonic() - t < 0.9
    fut.result()
    client.write_stdin(pid, eof=True)
    assert collect(stream)[2].strip() == str(3 << 20).encode()


def test_compressed_request_unimplemented(client):
    req = client.pb.ExecuteRequest(config=client.config(["echo", "x" * 2000]))
    with pytest.raises(grpc.RpcError) as e:
        client.execute_rpc(req, timeout=10, compression=grpc.Compression.Gzip)
    assert e.value.code() == grpc.StatusCode.UNIMPLEMENTED
    assert client.execute(["true"]).exit_code == 0


def _stat_ids(raw):
    fields = raw.decode().rsplit(")", 1)[1].split()
    return int(fields[2]), int(fields[3])  # pgrp, session


def test_process_groups_and_sessions(client):
    script = "echo $$; cat /proc/$$/stat"
    out = client.execute(["sh", "-c", script]).stdout.split(b"\n", 1)
    pid = int(out[0])
    pgrp, sid = _stat_ids(out[1])
    assert pgrp == pid and sid != pid
    _, _, out, _, _ = collect(client.start(["sh", "-c", script], pty=(80, 24)))
    first, rest = out.replace(b"\r", b"").split(b"\n", 1)
    pgrp, sid = _stat_ids(rest)
    assert pgrp == int(first) and sid == int(first)


def test_execute_stdin_is_dev_null(client):
    r = client.execute(["sh", "-c", "cat; readlink /proc/$$/fd/0"])
    assert r.exit_code == 0 and r.stdout == b"/dev/null\n"


@pytest.mark.parametrize("pty", [None, (80, 24)])
def test_all_output_arrives_before_exit(client, pty):
    events, _, out, _, code = collect(client.start(["seq", "1", "30000"], pty=pty))
    assert code == 0
    lines = out.replace(b"\r", b"").split()
    assert lines[0] == b"1" and lines[-1] == b"30000" and len(lines) == 30000
