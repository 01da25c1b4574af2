#!/usr/bin/python3
"""acp-server latency: median round trip of a fake-eliza prompt turn (session/prompt -> one
agent_message_chunk -> stopReason, history appended on disk) against the baseline of an
`initialize` round trip on the same connection (JSON-RPC framing and TCP only), and the same
turn with 8 sessions prompting at once on 8 connections. No sandbox is involved."""
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(os.environ.get("ASB_BUILD", os.path.join(ROOT, "build")), "bin", "acp-server")
ROUNDS = 300
PARALLEL = 8


class Conn:
    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port))
        self.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.f = self.s.makefile("rb")
        self.n = 0

    def call(self, method, params):
        self.n += 1
        self.s.sendall(json.dumps({"jsonrpc": "2.0", "id": self.n, "method": method,
                                   "params": params}).encode() + b"\n")
        while True:
            m = json.loads(self.f.readline())
            if m.get("id") == self.n and "method" not in m:
                return m


def timed(fn, rounds):
    out = []
    for _ in range(rounds):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return statistics.median(out) * 1e6


def main():
    home = tempfile.mkdtemp(prefix="acp-bench-")
    log = open(os.path.join(home, "log"), "wb")
    env = {**os.environ, "HOME": home, "OPENAI_MODEL": "fake-eliza"}
    p = subprocess.Popen([BIN, "--listen", "127.0.0.1:0", "--allow-unauthenticated"], stdout=log,
                         stderr=subprocess.STDOUT, env=env)
    try:
        port = None
        for _ in range(500):
            m = re.search(r"address=\S+:(\d+)", open(log.name).read())
            if m:
                port = int(m.group(1))
                break
            time.sleep(0.01)
        c = Conn(port)
        c.call("initialize", {"protocolVersion": 1})
        sid = c.call("session/new", {"cwd": "/tmp", "mcpServers": []})["result"]["sessionId"]
        prompt = {"sessionId": sid, "prompt": [{"type": "text", "text": "hello"}]}
        base = timed(lambda: c.call("initialize", {"protocolVersion": 1}), ROUNDS)
        turn = timed(lambda: c.call("session/prompt", prompt), ROUNDS)

        results = []

        def worker():
            w = Conn(port)
            w.call("initialize", {"protocolVersion": 1})
            s = w.call("session/new", {"cwd": "/tmp", "mcpServers": []})["result"]["sessionId"]
            pr = {"sessionId": s, "prompt": [{"type": "text", "text": "hello"}]}
            results.append(timed(lambda: w.call("session/prompt", pr), ROUNDS // 3))

        ts = [threading.Thread(target=worker) for _ in range(PARALLEL)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        par = statistics.median(results)
        print(f"{'case':<40} {'median us':>10} {'x baseline':>11}")
        print(f"{'initialize round trip (baseline)':<40} {base:>10.0f} {1.0:>11.1f}")
        print(f"{'fake-eliza turn, 1 session':<40} {turn:>10.0f} {turn / base:>11.1f}")
        print(f"{f'fake-eliza turn, {PARALLEL} sessions at once':<40} {par:>10.0f} {par / base:>11.1f}")
    finally:
        p.terminate()
        p.wait()
        log.close()
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
