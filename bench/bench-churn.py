#!/usr/bin/python3
"""Create -> Ready under churn: each Sandbox is deleted (until it is gone) before the next is
created, so every start can reuse what the last teardown left (spare bundles,
local-bundle-shared.h). With BENCH_BASELINE_BUILD=<build dir of another tree> a server of that
build takes every other turn (the order alternating), so both see the same load. Prints the p50
create -> Ready and the start worker's split (prepare, bundle, runc) per server. Needs root and
runc; BENCH_CHURN sandboxes each (default 20), the first two not counted."""
import importlib.util
import os
import shutil
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
spec = importlib.util.spec_from_file_location("bls", os.path.join(HERE, "bench-local-sandbox.py"))
bls = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bls)
import bench_cleanup  # noqa: E402

N = int(os.environ.get("BENCH_CHURN", "20"))
SANDBOXES = "/apis/agents.x-k8s.io/v1beta1/namespaces/default/sandboxes"


def main():
    if os.geteuid() != 0 or not os.path.exists(bls.RUNC):
        print("bench-churn: skipped (needs root and runc)")
        return 0
    builds = {"this build": bls.BUILD}
    if bls.BASELINE_BUILD:
        builds["baseline build"] = bls.BASELINE_BUILD
    servers, res = {}, {k: [] for k in builds}
    try:
        for k, b in builds.items():
            state = tempfile.mkdtemp(prefix="asb-churn-", dir="/tmp")
            servers[k] = (state, None)
            servers[k] = (state,) + bls.start_server(state, build=b)
        for i in range(N):
            for k in (list(builds) if i % 2 == 0 else list(builds)[::-1]):
                _, _, url, s = servers[k]
                res[k].append(bls.create_to_ready(url, s, f"churn-{i}"))
                s.delete(f"{url}{SANDBOXES}/churn-{i}", timeout=30).raise_for_status()
                for _ in range(3000):
                    if s.get(f"{url}{SANDBOXES}/churn-{i}", timeout=30).status_code == 404:
                        break
                    time.sleep(0.01)
                else:
                    raise RuntimeError(f"churn-{i} was not deleted in 30 s")
        for k in builds:
            v = res[k][2:]
            print(f"churn create -> Ready, {k}: p50 {bls.pct(v, 50):.1f} ms, p99 "
                  f"{bls.pct(v, 99):.1f} ms (n={len(v)}); start worker p50: "
                  f"{bls.start_profile(servers[k][0], 'churn')}")
        print(f"load average during the run: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    finally:
        for state, *rest in servers.values():
            proc = rest[0] if rest else None
            if proc:
                proc.terminate()
                proc.wait(timeout=30)
            bench_cleanup.cleanup_state(state)
            shutil.rmtree(state, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
