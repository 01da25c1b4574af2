#!/usr/bin/python3
"""Regenerates fuzz/corpus/fuzz-grpc-frame: records what grpcio (client side) sends to a real
sandboxd through a recording proxy, one connection per scenario.
Usage: fuzz/capture-grpc-corpus.py [build dir, default build]"""
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
import grpc  # noqa: E402
from grpc_helpers import Client, reflection_pb  # noqa: E402

OUT = os.path.join(HERE, "corpus", "fuzz-grpc-frame")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def proxy(listen, upstream_port, record):
    """Accepts one connection, forwards both ways, appends client bytes to record."""
    conn, _ = listen.accept()
    up = socket.create_connection(("127.0.0.1", upstream_port))

    def pump(a, b, rec):
        try:
            while True:
                d = a.recv(65536)
                if not d:
                    break
                if rec is not None:
                    rec.append(d)
                b.sendall(d)
        except OSError:
            pass
        for s in (a, b):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    t1 = threading.Thread(target=pump, args=(conn, up, record), daemon=True)
    t2 = threading.Thread(target=pump, args=(up, conn, None), daemon=True)
    t1.start()
    t2.start()
    return t1


def scenario(name, upstream_port, fn):
    listen = socket.socket()
    listen.bind(("127.0.0.1", 0))
    listen.listen(1)
    record = []
    th = threading.Thread(target=lambda: proxy(listen, upstream_port, record), daemon=True)
    th.start()
    c = Client(f"127.0.0.1:{listen.getsockname()[1]}")
    try:
        fn(c)
    except grpc.RpcError:
        pass
    time.sleep(0.2)
    c.close()
    time.sleep(0.1)
    listen.close()
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(b"".join(record))


def start_and_write(c):
    stream = c.start(["cat"])
    pid = next(stream).init.process_id
    c.write_stdin(pid, b"hello")
    c.write_stdin(pid, eof=True)
    list(stream)


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build")
    os.makedirs(OUT, exist_ok=True)
    port = free_port()
    root = tempfile.mkdtemp()
    d = subprocess.Popen([os.path.join(build, "bin", "sandboxd"), "--listen-host", "127.0.0.1",
                          "--grpc-port", str(port), "--rest-port", str(free_port()), "--root-dir", root],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", port)).close()
                break
            except OSError:
                time.sleep(0.02)
        r = reflection_pb()

        def reflect(c):
            rpc = c.channel.stream_stream("/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
                                          r.ServerReflectionRequest.SerializeToString,
                                          r.ServerReflectionResponse.FromString)
            list(rpc(iter([r.ServerReflectionRequest(list_services=""),
                           r.ServerReflectionRequest(file_containing_symbol="process.v1.ProcessService"),
                           r.ServerReflectionRequest(file_by_filename="nope.proto")]), timeout=5))

        scenario("execute-echo", port, lambda c: c.execute(["echo", "hi"], env={"A": "b"}, cwd="."))
        scenario("execute-timeout", port, lambda c: c.execute(["true"], timeout=3))
        scenario("execute-empty", port, lambda c: c.execute_rpc(c.pb.ExecuteRequest(), timeout=5))
        scenario("start-pty", port, lambda c: list(c.start(["sh", "-c", "stty size"], pty=(80, 24))))
        scenario("write-stdin", port, lambda c: (c.write_stdin(424242, b"data"),))
        scenario("write-stdin-eof", port, lambda c: c.write_stdin(424242, eof=True))
        scenario("send-signal", port, lambda c: c.send_signal(424242, 15))
        scenario("resize", port, lambda c: c.resize(424242, 100, 40))
        scenario("reflection", port, reflect)
        scenario("unknown-method", port,
                 lambda c: c.channel.unary_unary("/process.v1.ProcessService/Nope")(b"", timeout=5))
        scenario("compressed", port,
                 lambda c: c.execute_rpc(c.pb.ExecuteRequest(config=c.config(["echo", "x" * 300])),
                                         timeout=5, compression=grpc.Compression.Gzip))
        scenario("start-write-stdin", port, lambda c: start_and_write(c))
        scenario("malformed", port,
                 lambda c: c.channel.unary_unary("/process.v1.ProcessService/Execute")(b"\xff\xff", timeout=5))
    finally:
        d.terminate()
        d.wait()


if __name__ == "__main__":
    main()
