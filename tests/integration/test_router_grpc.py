"""The router over HTTP/2 (h2c prior knowledge): gRPC to a real sandbox's gRPC socket through
grpcio (unary, live server streaming with stdin, error trailers), and REST over h2 with curl."""
import subprocess
import threading
import time

import grpc
import pytest

from grpc_helpers import Client, collect
from router_fixture import router_env_fixture

router_env = router_env_fixture()


@pytest.fixture(scope="module")
def box(router_env):
    router_env.sandbox("gbox")
    return "gbox"


def meta(router_env, sandbox, token=True, **extra):
    m = [("x-sandbox-id", sandbox)]
    if token:
        m.append(("authorization", f"Bearer {router_env.token}"))
    m += list(extra.items())
    return m


@pytest.fixture(scope="module")
def client(router_env):
    c = Client(router_env.hostport())
    yield c
    c.close()


def test_execute_through_router(router_env, box, client):
    r = client.execute(["sh", "-c", "echo out; echo err >&2; exit 4"], metadata=meta(router_env, box))
    assert r.stdout == b"out\n" and r.stderr == b"err\n" and r.exit_code == 4


def test_grpc_port_header(router_env, box, client):
    r = client.execute(["true"], metadata=meta(router_env, box, **{"x-sandbox-port": "9090"}))
    assert r.exit_code == 0


def test_error_trailers_pass_through(router_env, box, client):
    with pytest.raises(grpc.RpcError) as e:
        client.execute(["/no/such/binary"], metadata=meta(router_env, box))
    assert e.value.code() != grpc.StatusCode.OK
    assert e.value.code() != grpc.StatusCode.UNAVAILABLE
    assert e.value.details()
    # same call straight to the socket gives the same status and message
    _, gsock = router_env.sockets(box)
    direct = Client("unix:" + gsock)
    with pytest.raises(grpc.RpcError) as d:
        direct.execute(["/no/such/binary"])
    direct.close()
    assert d.value.code() == e.value.code()
    assert d.value.details() == e.value.details()


def test_router_errors_as_grpc_status(router_env, box, client):
    with pytest.raises(grpc.RpcError) as e:
        client.execute(["true"], metadata=meta(router_env, box, token=False))
    assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert e.value.details() == "Missing or invalid Authorization header."
    with pytest.raises(grpc.RpcError) as e:
        client.execute(["true"], metadata=meta(router_env, "ghost-box"))
    assert e.value.code() == grpc.StatusCode.NOT_FOUND
    with pytest.raises(grpc.RpcError) as e:
        client.execute(["true"], metadata=meta(router_env, "Bad_ID"))
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert e.value.details() == "Invalid sandbox ID format."


def test_start_streams_live_with_stdin(router_env, box, client):
    stream = client.start(["sh", "-c", "echo ready; read line; echo got:$line; sleep 0.2; echo done"],
                          metadata=meta(router_env, box), timeout=30)
    it = iter(stream)
    ev = next(it)
    assert ev.WhichOneof("event") == "init"
    pid = ev.init.process_id
    ev = next(it)
    # the first output arrives while the process still waits for stdin: streamed live
    assert ev.WhichOneof("event") == "stdout" and ev.stdout == b"ready\n"
    client.write_stdin_rpc(client.pb.WriteStdinRequest(process_id=pid, input=b"hello\n"),
                           timeout=10, metadata=meta(router_env, box))
    events, _, out, _, code = collect(it)
    assert out == b"got:hello\ndone\n"
    assert code == 0


def test_cancel_start_through_router(router_env, box, client):
    stream = client.start(["sleep", "30"], metadata=meta(router_env, box))
    it = iter(stream)
    assert next(it).WhichOneof("event") == "init"
    t0 = time.monotonic()
    stream.cancel()
    with pytest.raises(grpc.RpcError) as e:
        list(it)
    assert e.value.code() == grpc.StatusCode.CANCELLED
    assert time.monotonic() - t0 < 5
    # the connection keeps working
    assert client.execute(["true"], metadata=meta(router_env, box)).exit_code == 0


def test_concurrent_grpc_streams(router_env, box, client):
    results = []

    def run(i):
        r = client.execute(["sh", "-c", f"echo {i}"], metadata=meta(router_env, box))
        results.append(r.stdout)
    ts = [threading.Thread(target=run, args=(i,)) for i in range(30)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert sorted(results) == sorted(f"{i}\n".encode() for i in range(30))


def curl_h2(router_env, *args):
    return subprocess.run(["curl", "-sS", "--http2-prior-knowledge", "-H", f"Authorization: Bearer {router_env.token}",
                           *args], capture_output=True, timeout=60)


def test_rest_over_h2(router_env, box, tmp_path):
    f = tmp_path / "up.bin"
    f.write_bytes(b"h2 body " * 10000)
    p = curl_h2(router_env, "-H", f"X-Sandbox-ID: {box}", "-T", str(f), "-w", "%{http_code} %{http_version}",
                router_env.url + "/v1/files/h2.bin")
    assert p.stdout.decode() == "204 2", p.stderr
    p = curl_h2(router_env, "-H", f"X-Sandbox-ID: {box}", router_env.url + "/v1/files/h2.bin")
    assert p.stdout == b"h2 body " * 10000
    p = curl_h2(router_env, "-H", f"X-Sandbox-ID: {box}", "-w", "%{http_code}", "-o", "/dev/null",
                router_env.url + "/v1/files/missing")
    assert p.stdout == b"404"
    p = curl_h2(router_env, "-H", "X-Sandbox-ID: NOPE", router_env.url + "/v1/health")
    assert p.stdout == b'{"detail":"Invalid sandbox ID format."}'
    p = curl_h2(router_env, router_env.url + "/healthz")
    assert p.stdout == b'{"status":"ok"}'


def test_legacy_over_h2(router_env, box):
    p = curl_h2(router_env, "-H", f"X-Sandbox-ID: {box}", "-H", "X-Sandbox-Port: 8888",
                "-H", "Content-Type: application/json", "--data", '{"command": "echo via h2"}',
                router_env.url + "/execute")
    assert p.stdout == b'{"stdout":"via h2\\n","stderr":"","exit_code":0}', p.stderr


def test_h2_head_and_legacy_download(router_env, box):
    p = subprocess.run(["curl", "-sS", "--http2-prior-knowledge", "-H", f"Authorization: Bearer {router_env.token}",
                        "-H", f"X-Sandbox-ID: {box}", "-T", "-", router_env.url + "/v1/files/h2dl/f.txt"],
                       input=b"download me", capture_output=True, timeout=30)
    assert p.returncode == 0, p.stderr
    p = curl_h2(router_env, "-H", f"X-Sandbox-ID: {box}", "-I", router_env.url + "/v1/files/h2dl/f.txt")
    head = p.stdout.decode().lower()
    assert head.startswith("http/2 200") and "content-length: 11" in head
    p = curl_h2(router_env, "-H", f"X-Sandbox-ID: {box}", "-H", "X-Sandbox-Port: 8888", "-D", "-",
                router_env.url + "/download/h2dl/f.txt")
    out = p.stdout.decode()
    assert out.lower().startswith("http/2 200")
    assert 'content-disposition: attachment; filename="f.txt"' in out.lower()
    assert out.endswith("download me")


def test_http10_client(router_env, box):
    import socket
    host, port = router_env.hostport().rsplit(":", 1)
    s = socket.create_connection((host, int(port)))
    s.sendall(f"GET /v1/health HTTP/1.0\r\nX-Sandbox-ID: {box}\r\nAuthorization: Bearer {router_env.token}\r\n\r\n".encode())
    data = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    s.close()
    head, _, body = data.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200")
    assert b'"status":"ok"' in body


def test_legacy_upload_over_h2_larger_than_window(router_env, box, tmp_path):
    f = tmp_path / "three.bin"
    f.write_bytes(b"3" * (3 << 20))
    p = curl_h2(router_env, "-H", f"X-Sandbox-ID: {box}", "-H", "X-Sandbox-Port: 8888",
                "-F", f"file=@{f};filename=h2up/three.bin", router_env.url + "/upload")
    assert p.stdout == b'{"message":"File \'h2up/three.bin\' uploaded successfully."}', p.stderr
    p = curl_h2(router_env, "-H", f"X-Sandbox-ID: {box}", "-o", "/dev/null", "-w", "%{size_download}",
                router_env.url + "/v1/files/h2up/three.bin")
    assert p.stdout == str(3 << 20).encode()


def test_h2_early_upstream_error_with_large_body(router_env, box, tmp_path):
    f = tmp_path / "eight.bin"
    f.write_bytes(b"8" * (8 << 20))
    p = curl_h2(router_env, "-H", f"X-Sandbox-ID: {box}", "-T", str(f), router_env.url + "/v1/files/m8.bin?mode=0999")
    assert b"INVALID_ARGUMENT" in p.stdout, (p.stdout, p.stderr)
