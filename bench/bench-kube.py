#!/usr/bin/python3
"""asb-controller against the test API server (tests/kube/fake_apiserver.py):
  - reconcile throughput: Sandboxes created -> their Pods created by the controller, per second
    (BENCH_KUBE_SANDBOXES, default 300); baseline: the same number of Pods created directly by
    this script against the same server (the server's own write rate, an upper bound);
  - memory: the controller's RSS with an empty cache and with 10,000 objects in its caches
    (BENCH_KUBE_OBJECTS, default 10000 Pods).
The test server is Python: the numbers say how the controller keeps up with a server, not what a
real kube-apiserver sustains."""
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
from kube_fixtures import Controller, FakeApi, sandbox_obj, wait_for  # noqa: E402

N = int(os.environ.get("BENCH_KUBE_SANDBOXES", "300"))
OBJECTS = int(os.environ.get("BENCH_KUBE_OBJECTS", "10000"))


def rss_kib(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def pod(name):
    return {"metadata": {"name": name}, "spec": {"containers": [{"name": "c", "image": "i"}]}}


def count(fake, plural):
    return len(fake.s.get(fake.path(plural)).json()["items"])


def main():
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        fake = FakeApi(tmp)
        try:
            # Baseline: the server's own create rate.
            t0 = time.monotonic()
            for i in range(N):
                fake.s.post(fake.path("pods", "bench-base"), json=pod(f"b{i}")).raise_for_status()
            base = N / (time.monotonic() - t0)
            ctl = Controller(fake, tmp, "bench", ["--zap-log-level", "info"])
            ctl.addr("metrics")
            time.sleep(0.5)
            rss_empty = rss_kib(ctl.proc.pid)
            t0 = time.monotonic()
            for i in range(N):
                fake.s.post(fake.path("sandboxes"), json=sandbox_obj(f"s{i}")).raise_for_status()
            wait_for(lambda: count(fake, "pods") >= N, timeout=600, interval=0.2, what="pods")
            dt = time.monotonic() - t0
            rows.append(("sandboxes -> pods (controller)", f"{N / dt:.0f}/s", f"{base:.0f}/s (direct pod creates)"))
            # Memory with OBJECTS more objects in the caches.
            for i in range(OBJECTS):
                fake.s.post(fake.path("pods", "bench-mem"), json=pod(f"m{i}")).raise_for_status()
            total = OBJECTS + 2 * N + N

            def cached():
                m = fake.s.get(f"http://{ctl.addr('metrics')}/metrics").text
                return sum(int(line.split()[-1]) for line in m.splitlines()
                           if line.startswith("asb_controller_cache_objects{")) >= total
            wait_for(cached, timeout=300, interval=0.5, what="cache filled")
            time.sleep(1)
            rss_full = rss_kib(ctl.proc.pid)
            rows.append((f"controller RSS, {total} objects cached", f"{rss_full / 1024:.1f} MiB",
                         f"{rss_empty / 1024:.1f} MiB (empty cache)"))
            rows.append(("RSS per cached object", f"{(rss_full - rss_empty) * 1024 / max(total, 1):.0f} B", "-"))
            ctl.stop()
        finally:
            fake.stop()
    w = max(len(r[0]) for r in rows)
    print(f"{'measure':<{w}}  {'asb-controller':>16}  baseline")
    for r in rows:
        print(f"{r[0]:<{w}}  {r[1]:>16}  {r[2]}")


if __name__ == "__main__":
    main()
