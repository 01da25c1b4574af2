"""A big Execute (issue 14): output past --max-execute-output is drained and dropped, memory stays
bounded, the reply fits a default client's 4 MiB message limit and says what was cut (trailing
metadata), and concurrent calls are served while the big one runs."""
import os
import threading
import time

import pytest

from grpc_helpers import Client, start_daemon

DEFAULT_CAP = 4 * 1024 * 1024 - 64
GIB = 1 << 30


def vm_hwm_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


def trailers(call):
    return {k: v for k, v in (call.trailing_metadata() or ())}


def small_asan_quarantine():
    # ASan's quarantine keeps freed chunks (256 MiB by default): shrink it so VmHWM shows buffering.
    env = dict(os.environ)
    env["ASAN_OPTIONS"] = (env.get("ASAN_OPTIONS", "") + ":quarantine_size_mb=16").lstrip(":")
    return env


def test_1gib_execute_capped_bounded_and_not_blocking(start_sandboxd):
    d = start_daemon(start_sandboxd, env=small_asan_quarantine())
    c = Client(d.grpc_addr)  # default options: 4 MiB receive limit
    try:
        c.execute(["true"])
        result = {}

        def big():
            t0 = time.monotonic()
            try:
                resp, call = c.execute_rpc.with_call(
                    c.pb.ExecuteRequest(config=c.config(["head", "-c", str(GIB), "/dev/zero"])),
                    timeout=120)
                result.update(resp=resp, md=trailers(call))
            except Exception as e:  # noqa: BLE001 - reported below
                result["error"] = e
            result["secs"] = time.monotonic() - t0

        t = threading.Thread(target=big)
        t.start()
        slowest, n = 0.0, 0
        while t.is_alive():
            t0 = time.monotonic()
            assert c.execute(["true"], timeout=10).exit_code == 0
            slowest = max(slowest, time.monotonic() - t0)
            n += 1
        t.join()
        hwm = vm_hwm_kib(d.proc.pid)
        print(f"1 GiB Execute: {result['secs']:.2f}s, {n} concurrent Execute(true), slowest "
              f"{slowest * 1000:.1f} ms, sandboxd VmHWM {hwm} KiB")
        assert "error" not in result, f"the 1 GiB Execute failed: {result['error']!r}"
        resp = result["resp"]
        assert resp.exit_code == 0
        assert len(resp.stdout) == DEFAULT_CAP and resp.stdout == b"\0" * DEFAULT_CAP
        assert resp.stderr == b""
        assert result["md"].get("sandboxd-output-truncated") == "true"
        assert result["md"].get("sandboxd-stdout-bytes") == str(GIB)
        assert result["md"].get("sandboxd-stderr-bytes") == "0"
        assert n >= 1 and slowest < 2.0, f"a concurrent Execute(true) took {slowest:.2f}s"
        assert hwm < 100 * 1024, f"sandboxd VmHWM {hwm} KiB"
    finally:
        c.close()


def test_execute_cap_is_shared_and_configurable(start_sandboxd):
    d = start_daemon(start_sandboxd, extra_args=["--max-execute-output", "1000"])
    c = Client(d.grpc_addr)
    try:
        resp, call = c.execute_rpc.with_call(c.pb.ExecuteRequest(config=c.config(
            ["sh", "-c", "head -c 600 /dev/zero; head -c 700 /dev/zero >&2; exit 3"])), timeout=30)
        assert resp.exit_code == 3
        assert len(resp.stdout) == 600 and len(resp.stderr) == 400
        md = trailers(call)
        assert md.get("sandboxd-output-truncated") == "true"
        assert md.get("sandboxd-stdout-bytes") == "600" and md.get("sandboxd-stderr-bytes") == "700"
        # within the cap: everything, and no truncation metadata
        resp, call = c.execute_rpc.with_call(c.pb.ExecuteRequest(config=c.config(
            ["sh", "-c", "head -c 500 /dev/zero; head -c 500 /dev/zero >&2"])), timeout=30)
        assert len(resp.stdout) == 500 and len(resp.stderr) == 500
        assert "sandboxd-output-truncated" not in trailers(call)
    finally:
        c.close()
