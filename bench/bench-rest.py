#!/usr/bin/python3
"""REST throughput: PUT and GET of a 64 MiB file against the release sandboxd, compared with a
loopback baseline moving the same bytes over a plain TCP socket with the same file I/O on the
server side (write+fsync for uploads, read for downloads). Prints a table with MB/s and ratios."""
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(os.environ.get("ASB_BUILD", os.path.join(ROOT, "build")), "bin", "sandboxd")
SIZE = 64 << 20
CHUNK = 1 << 20
ROUNDS = 5
PAYLOAD = memoryview(os.urandom(CHUNK))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def send_all_payload(sock):
    for _ in range(SIZE // CHUNK):
        sock.sendall(PAYLOAD)


def recv_exact(sock, n, buf):
    got = 0
    while got < n:
        k = sock.recv_into(buf, min(len(buf), n - got))
        if k == 0:
            raise EOFError("short read")
        got += k


def read_headers(sock):
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(4096)
        if not chunk:
            raise EOFError("no response")
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    return head, rest


def rest_put(port):
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
    s.sendall(f"PUT /v1/files/bench.bin HTTP/1.1\r\nHost: x\r\nContent-Length: {SIZE}\r\n"
              "Content-Type: application/octet-stream\r\n\r\n".encode())
    send_all_payload(s)
    head, _ = read_headers(s)
    s.close()
    assert head.startswith(b"HTTP/1.1 204"), head


def rest_get(port, buf):
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    s.sendall(b"GET /v1/files/bench.bin HTTP/1.1\r\nHost: x\r\n\r\n")
    head, rest = read_headers(s)
    assert head.startswith(b"HTTP/1.1 200"), head
    recv_exact(s, SIZE - len(rest), buf)
    s.close()


class Baseline:
    """A plain TCP server doing the same file I/O as sandboxd, one connection per transfer."""

    def __init__(self, dirpath):
        self.dir = dirpath
        self.lsock = socket.socket()
        self.lsock.bind(("127.0.0.1", 0))
        self.lsock.listen(8)
        self.port = self.lsock.getsockname()[1]
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self):
        buf = bytearray(CHUNK)
        while True:
            c, _ = self.lsock.accept()
            op = c.recv(1)
            if op in (b"u", b"d"):  # pure socket copy, no file I/O
                if op == b"u":
                    got = 0
                    while got < SIZE:
                        k = c.recv_into(buf)
                        if not k:
                            break
                        got += k
                    c.sendall(b"k")
                else:
                    send_all_payload(c)
                c.close()
                continue
            path = os.path.join(self.dir, "baseline.bin")
            if op == b"U":
                with open(path + ".tmp", "wb", buffering=0) as f:
                    got = 0
                    while got < SIZE:
                        k = c.recv_into(buf)
                        if not k:
                            break
                        f.write(memoryview(buf)[:k])
                        got += k
                    os.fsync(f.fileno())
                os.replace(path + ".tmp", path)
                c.sendall(b"k")
            else:
                with open(path, "rb") as f:
                    c.sendfile(f)
            c.close()

    def put(self):
        s = socket.create_connection(("127.0.0.1", self.port))
        s.sendall(b"U")
        send_all_payload(s)
        assert s.recv(1) == b"k"
        s.close()

    def put_raw(self):
        s = socket.create_connection(("127.0.0.1", self.port))
        s.sendall(b"u")
        send_all_payload(s)
        assert s.recv(1) == b"k"
        s.close()

    def get_raw(self, buf):
        s = socket.create_connection(("127.0.0.1", self.port))
        s.sendall(b"d")
        recv_exact(s, SIZE, buf)
        s.close()

    def get(self, buf):
        s = socket.create_connection(("127.0.0.1", self.port))
        s.sendall(b"D")
        recv_exact(s, SIZE, buf)
        s.close()


def best_mbps(fn):
    best = None
    for _ in range(ROUNDS):
        t0 = time.perf_counter()
        fn()
        dt = time.perf_counter() - t0
        best = dt if best is None else min(best, dt)
    return SIZE / best / 1e6


def main():
    if not os.path.exists(BIN):
        print(f"{BIN} missing: run make", file=sys.stderr)
        return 1
    work = tempfile.mkdtemp(prefix="bench-rest-", dir=os.environ.get("BENCH_DIR"))
    root = os.path.join(work, "root")
    rest_port, grpc_port = free_port(), free_port()
    proc = subprocess.Popen([BIN, "--listen-host", "127.0.0.1", "--rest-port", str(rest_port),
                             "--grpc-port", str(grpc_port), "--root-dir", root],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(200):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{rest_port}/v1/health", timeout=1)
                break
            except OSError:
                time.sleep(0.05)
        buf = bytearray(CHUNK)
        base = Baseline(work)
        rows = [
            ("PUT 64 MiB", best_mbps(lambda: rest_put(rest_port)), best_mbps(base.put),
             best_mbps(base.put_raw)),
            ("GET 64 MiB", best_mbps(lambda: rest_get(rest_port, buf)), best_mbps(lambda: base.get(buf)),
             best_mbps(lambda: base.get_raw(buf))),
        ]
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        shutil.rmtree(work, ignore_errors=True)
    print("baseline = same bytes over a plain loopback TCP socket with the same server-side file I/O")
    print("(write+fsync / read); raw socket = memory to memory, no file I/O at all.")
    print(f"{'operation':<12} {'sandboxd MB/s':>14} {'baseline MB/s':>14} {'ratio':>6}"
          f" {'raw socket MB/s':>16} {'ratio':>6}")
    ok = True
    for name, ours, baseline, raw in rows:
        ratio = ours / baseline
        ok &= ratio >= 0.5
        print(f"{name:<12} {ours:>14.0f} {baseline:>14.0f} {ratio:>6.2f} {raw:>16.0f} {ours / raw:>6.2f}")
    print("target (ratio vs baseline >= 0.50):", "met" if ok else "NOT met")
    return 0


if __name__ == "__main__":
    sys.exit(main())
