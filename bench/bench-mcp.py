#!/usr/bin/python3
"""`asb mcp` overhead: median and p99 round trip of the MCP tool call execute_command
(`sh -c true`) over stdio and over Streamable HTTP (one keep-alive connection, SSE reply),
against the same Execute straight through libasb (bench/mcp-bench-client.c) on an open handle
and with the per-call open (control-plane GET) execute_command does. One sandbox claimed from a
warm pool of `asb serve` with runc; BENCH_MCP_ROUNDS (200) calls each. Needs root and runc."""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import requests

import bench_cleanup
import bench_server
from bench_libasb import build_libasb_client, pct

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import importlib.util  # noqa: E402

_spec = importlib.util.spec_from_file_location(
    "claim_exec", os.path.join(os.path.dirname(os.path.abspath(__file__)), "bench-claim-exec.py"))
claim_exec = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(claim_exec)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("ASB_BUILD", os.path.join(ROOT, "build"))
RUNC = shutil.which("runc") or "/usr/sbin/runc"
ROUNDS = int(os.environ.get("BENCH_MCP_ROUNDS", "200"))
EXT = "extensions.agents.x-k8s.io"
CLIENT = os.path.join(BUILD, "bench", "mcp-bench-client")
ASB = os.path.join(BUILD, "bin", "asb")
INIT = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}


def build_client():
    build_libasb_client("mcp-bench-client.c", CLIENT)


class Stdio:
    def __init__(self, env):
        self.p = subprocess.Popen([ASB, "mcp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  env=env)
        self.n = 0

    def call(self, method, params=None):
        self.n += 1
        msg = {"jsonrpc": "2.0", "id": self.n, "method": method, "params": params or {}}
        self.p.stdin.write(json.dumps(msg).encode() + b"\n")
        self.p.stdin.flush()
        while True:
            m = json.loads(self.p.stdout.readline())
            if m.get("id") == self.n:
                return m

    def close(self):
        self.p.stdin.close()
        self.p.wait(timeout=30)


class Http:
    def __init__(self, env, log):
        self.p = subprocess.Popen([ASB, "mcp", "--listen", "127.0.0.1:0", "--auth-token", "bench"],
                                  stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env)
        for _ in range(1000):
            m = re.search(r"listening address=(\S+)", open(log.name).read())
            if m:
                break
            time.sleep(0.01)
        self.url = f"http://{m.group(1)}/mcp"
        self.s = requests.Session()
        self.s.headers.update({"Authorization": "Bearer bench", "Content-Type": "application/json",
                               "Accept": "application/json, text/event-stream"})
        self.n = 0

    def call(self, method, params=None):
        self.n += 1
        r = self.s.post(self.url, data=json.dumps({"jsonrpc": "2.0", "id": self.n, "method": method,
                                                   "params": params or {}}), timeout=60)
        if "Mcp-Session-Id" in r.headers:
            self.s.headers["Mcp-Session-Id"] = r.headers["Mcp-Session-Id"]
        if r.headers.get("Content-Type", "").startswith("text/event-stream"):
            datas = [line[6:] for line in r.text.splitlines() if line.startswith("data: ")]
            return json.loads(datas[-1])
        return r.json()

    def close(self):
        self.p.terminate()
        self.p.wait(timeout=30)


def timed_calls(conn, args):
    out = []
    for _ in range(ROUNDS):
        t = time.perf_counter()
        r = conn.call("tools/call", {"name": "execute_command", "arguments": args})
        out.append((time.perf_counter() - t) * 1000)
        assert r["result"]["structuredContent"]["exit_code"] == 0, r
    return out


def main():
    if os.geteuid() != 0 or not os.path.exists(RUNC):
        print("bench-mcp: skipped (needs root and runc)")
        return 0
    build_client()
    state = tempfile.mkdtemp(prefix="asb-bm-", dir="/tmp")
    proc = None
    rows = []
    try:
        proc, url, s = claim_exec.start_server(state)
        claim_exec.post(s, url, "sandboxtemplates", {
            "apiVersion": f"{EXT}/v1beta1", "kind": "SandboxTemplate", "metadata": {"name": "bench"},
            "spec": {"podTemplate": {"spec": {"containers": [{"name": "main", "image": "host"}]}}}})
        claim_exec.make_pool(s, url, "mcp", 1)
        bench_server.wait_pool_ready(url, s, "mcp", 1)
        env = {**os.environ, "ASB_STATE_DIR": state}
        env.pop("ASB_SERVER", None)
        env.pop("ASB_TOKEN", None)

        stdio = Stdio(env)
        stdio.call("initialize", INIT)
        made = stdio.call("tools/call", {"name": "create_sandbox", "arguments": {"warmpool": "mcp"}})
        claim = made["result"]["structuredContent"]["sandbox_claim_name"]
        sandbox = made["result"]["structuredContent"]["sandbox_name"]
        args = {"sandbox_claim_name": claim, "command": "true"}
        for _ in range(10):  # warm-up, untimed
            stdio.call("tools/call", {"name": "execute_command", "arguments": args})
        rows.append(("MCP execute_command over stdio", timed_calls(stdio, args)))
        stdio.close()

        with open(os.path.join(state, "mcp-http.log"), "wb") as log:
            http = Http(env, log)
            http.call("initialize", INIT)
            rows.append(("MCP execute_command over Streamable HTTP", timed_calls(http, args)))
            http.close()

        for mode, label in (("exec", "libasb Execute on an open handle (baseline)"),
                            ("open", "libasb open + Execute per call")):
            out = subprocess.run([CLIENT, mode, sandbox, str(ROUNDS)], capture_output=True,
                                 text=True, env=env, timeout=600)
            if out.returncode != 0:
                raise RuntimeError(f"mcp-bench-client {mode}: {out.stderr}")
            rows.append((label, [int(x) / 1000 for x in out.stdout.split()]))
    finally:
        if proc:
            proc.terminate()
            proc.wait(timeout=60)
        bench_cleanup.cleanup_state(state)
    base = pct(rows[2][1], 50)
    print(f"{'measurement (sh -c true)':<48} {'n':>5} {'p50 ms':>9} {'p99 ms':>9} {'x base':>7}")
    for name, v in rows:
        print(f"{name:<48} {len(v):>5} {pct(v, 50):>9.2f} {pct(v, 99):>9.2f} {pct(v, 50) / base:>7.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
