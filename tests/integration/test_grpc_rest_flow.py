"""Upstream's integration flow (shared/spec/UPSTREAM.md §1.7, integration_test.go) across both
halves of one daemon: REST writes a file, gRPC Execute reads it, REST lists and deletes it."""
import requests

from grpc_helpers import Client


def test_rest_and_grpc_share_the_root(sandboxd):
    c = Client(sandboxd.grpc_addr)
    try:
        assert requests.get(sandboxd.url("/v1/health")).status_code == 200
        r = requests.put(sandboxd.url("/v1/files/notes/hello.txt"), data=b"hello from rest",
                         headers={"Content-Type": "application/octet-stream"})
        assert r.status_code == 204
        assert c.execute(["cat", "notes/hello.txt"]).stdout == b"hello from rest"
        assert requests.get(sandboxd.url("/v1/files/notes/hello.txt")).content == b"hello from rest"
        listing = requests.get(sandboxd.url("/v1/files/notes")).json()
        assert [e["name"] for e in listing["entries"]] == ["hello.txt"]
        c.execute(["sh", "-c", "printf from-grpc > notes/made.txt"])
        assert requests.get(sandboxd.url("/v1/files/notes/made.txt")).content == b"from-grpc"
        assert requests.delete(sandboxd.url("/v1/files/notes/hello.txt")).status_code == 204
        assert requests.get(sandboxd.url("/v1/files/notes/hello.txt")).status_code == 404
    finally:
        c.close()


def test_sigterm_ends_streams_then_exits_zero(sandboxd):
    import signal
    c = Client(sandboxd.grpc_addr)
    stream = c.start(["sleep", "30"])
    assert next(stream).WhichOneof("event") == "init"
    sandboxd.proc.send_signal(signal.SIGTERM)
    codes = []
    for ev in stream:
        if ev.WhichOneof("event") == "exit":
            codes.append(ev.exit.exit_code)
    assert codes and codes[0] != 0
    c.close()
    sandboxd.proc.wait(timeout=30)  # exits by itself; stop() then only checks the exit
    assert sandboxd.stop() == 0
