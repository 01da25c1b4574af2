#!/usr/bin/python3
"""Claims: SandboxClaim create -> Ready (seen on a watch) from a warm pool kept full, next to a
cold claim (pool of 0: a new runc sandbox) in the same run, and the warm pool's refill rate.

Then the burst rows of issue 16, with `--network none` and with bridge networking: BENCH_BURST
(50) concurrent claims (libasb, bench/claim-bench-client.c, one thread each) on a full pool of
that size, claim -> Ready p50/p99, and the pool's refill rate (sandboxes/s from the burst's
start until the pool is full again; the claims are closed right after Ready, so their teardowns
run during the refill, as in a claim/close cycle). Each server is a fresh one. The baseline in
the same run: with BENCH_BASELINE_BUILD=<dir holding another build's bin/> (e.g. main's), the
same rows for that build, rounds alternated; without it, the same pool with the claims made one
at a time (serialised), on this build. BENCH_ROUNDS (3) rounds of each, one burst each: the rows
give the median round's refill rate and the median of the rounds' p50 and p99 (this machine's
speed moves by a quarter between rounds minutes apart).
BENCH_BURST_NETWORKS (default "none,bridge") picks the networks of the burst rows. The CPU column
is what `asb serve` and the children it reaped (runc, ...) used from the burst until the pool was
full again, per refilled sandbox (/proc/PID/stat). A last line gives the CPU of the burst itself
per claim (server and client, up to the last claim's Ready) and that CPU spread over the
machine's CPUs, beside the burst's p99: how close a burst is to being bound by CPU.
Needs root and runc; prints a table with p50/p99 in milliseconds."""
import json
import os
import shutil
import sys
import tempfile
import time

import bench_cleanup
import bench_server
from bench_issue16 import row
from bench_libasb import build_libasb_client, pct
from bench_own_bundle import machine_cpu, machine_cpu_per, make_bundle, run_churn

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("ASB_BUILD", os.path.join(ROOT, "build"))
RUNC = bench_server.RUNC
N = int(os.environ.get("BENCH_CLAIMS", "30"))
BURST = int(os.environ.get("BENCH_BURST", "50"))
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "3"))
BASELINE = os.environ.get("BENCH_BASELINE_BUILD")
CLIENT = os.path.join(BUILD, "bench", "claim-bench-client")
TARGET_BURST_P99 = 50.0
TARGET_REFILL = {"none": 30.0, "bridge": 15.0}
POOL = int(os.environ.get("BENCH_POOL", "5"))
EXT = "extensions.agents.x-k8s.io"


def start_server(state, build=BUILD, network=None):
    return bench_server.start_server(state, build, {"ASB_NETWORK": network} if network else None)


def base(url, plural):
    return f"{url}/apis/{EXT}/v1beta1/namespaces/default/{plural}"


def post(s, url, plural, body):
    r = s.post(base(url, plural), json=body, timeout=30)
    r.raise_for_status()
    return r.json()


def claim_to_ready(url, s, name, pool):
    b = base(url, "sandboxclaims")
    rv = s.get(b, timeout=10).json()["metadata"]["resourceVersion"]
    w = s.get(b, params={"watch": "true", "resourceVersion": rv,
                         "fieldSelector": f"metadata.name={name}"}, stream=True, timeout=60)
    try:
        t0 = time.perf_counter()
        post(s, url, "sandboxclaims", {"apiVersion": f"{EXT}/v1beta1", "kind": "SandboxClaim",
                                       "metadata": {"name": name},
                                       "spec": {"warmPoolRef": {"name": pool}}})
        for line in w.iter_lines():
            if not line:
                continue
            obj = json.loads(line)["object"]
            for c in (obj.get("status") or {}).get("conditions") or []:
                if c["type"] == "Ready" and c["status"] == "True":
                    return (time.perf_counter() - t0) * 1000
    finally:
        w.close()
    raise RuntimeError("watch ended before Ready")


def server_cpu_ms(pid):
    """CPU time (ms) of the server process itself and of its children it waited for (runc)."""
    user, system, child_user, child_system = bench_server.process_cpu_ms(pid)
    return user + system, child_user + child_system


def median_round(rounds):
    """The round of median refill rate."""
    return sorted(rounds, key=lambda r: r["refill"])[len(rounds) // 2]


def burst_pcts(rounds):
    """(p50, p99, every round's p99) of a burst: each round is one burst of BURST claims, so its
    percentiles are per round and the row gives the median round's."""
    p50s = sorted(pct(r["lat"], 50) for r in rounds)
    p99s = [pct(r["lat"], 99) for r in rounds]
    return p50s[len(p50s) // 2], sorted(p99s)[len(p99s) // 2], p99s


def run_client(state, *args):
    return bench_server.run_claim_client(CLIENT, state, args, 600, BENCH_EXEC="0")


def burst_round(build, network, serialised=False, floor=False):
    """A fresh server (build, network), a pool of BURST, BURST claims at once (or one at a time),
    closed after Ready. Returns a dict: "lat" claim -> Ready ms list, "refill" sandboxes/s,
    "cpu" (server, children) CPU ms per refilled sandbox (start of the burst to full pool, so one
    start and one teardown each), "machine" the whole machine's CPU ms per refilled sandbox and
    "busy" its busy fraction over the same time, "burst_cpu" the burst's own CPU (None when
    serialised; bench_server.run_timed_claim_burst). With floor, also "floor": the refill's floor with
    runc and sandboxd alone on the same machine right after (bench_own_bundle.churn: BURST
    containers of this server's own bundle, each started until sandboxd answers health, torn down
    while BURST start, 8 threads as asb serve's 4 start and 4 teardown workers): (sandboxes/s,
    machine CPU ms per sandbox, busy fraction)."""
    state = tempfile.mkdtemp(prefix="asb-bb-", dir="/tmp")
    proc = None
    try:
        proc, url, s = start_server(state, build, network)
        post(s, url, "sandboxtemplates", {
            "apiVersion": f"{EXT}/v1beta1", "kind": "SandboxTemplate", "metadata": {"name": "t"},
            "spec": {"podTemplate": {"spec": {"containers": [{"name": "main", "image": "host"}]}}}})
        post(s, url, "sandboxwarmpools", {
            "apiVersion": f"{EXT}/v1beta1", "kind": "SandboxWarmPool", "metadata": {"name": "b"},
            "spec": {"replicas": BURST, "sandboxTemplateRef": {"name": "t"}}})
        bench_server.wait_pool_ready(url, s, "b", BURST, timeout=600)
        time.sleep(1)  # the fill's last status writes and health checks settle
        cpu0, m0 = server_cpu_ms(proc.pid), machine_cpu()
        t0 = time.perf_counter()
        burst_cpu = None
        if serialised:
            out = []
            for _ in range(BURST):
                out += run_client(state, "burst", "b", 1)
        else:
            out, burst_cpu = bench_server.run_timed_claim_burst(CLIENT, state, BURST, proc.pid,
                                                                600, BENCH_EXEC="0")
        lat = [int(l[2]) / 1000 for l in out]  # asb_claim_ready_usec: claim create -> Ready
        names = {l[1] for l in out}
        if len(names) != BURST:
            raise RuntimeError(f"{BURST} claims got {len(names)} distinct sandboxes")
        bench_server.wait_pool_ready(url, s, "b", BURST, timeout=600)
        res = {"lat": lat, "refill": BURST / (time.perf_counter() - t0), "burst_cpu": burst_cpu}
        m1 = machine_cpu()
        res["cpu"] = [(b - a) / BURST for a, b in zip(cpu0, server_cpu_ms(proc.pid))]
        res["machine"], res["busy"] = machine_cpu_per(m0, m1, BURST)
        if floor:
            uid = next(x["metadata"]["uid"] for x in s.get(
                f"{url}/apis/agents.x-k8s.io/v1beta1/namespaces/default/sandboxes",
                timeout=30).json()["items"])
            bundle, stage = make_bundle(state, uid, os.path.join(state, "own-bundle"),
                                        process="sandboxd")
            res["floor"] = run_churn(RUNC, os.path.join(state, "own-runc"), bundle, stage, BURST, 8)
        return res
    finally:
        if proc:
            proc.terminate()
            proc.wait(60)
        bench_cleanup.cleanup_state(state, extra_runc_roots=[os.path.join(state, "own-runc")])


def print_burst_cpu(nets, res):
    """What the bursts cost in CPU, per claim, for this build and the baseline: the server's (its
    request threads and everything else it ran meanwhile) and the client's (its start and its
    threads' setup included), from the client's start until it has timed every claim; and that
    CPU spread over this machine's CPUs, to hold against the burst's p99: when the two are
    close, the burst is bound by CPU, not by waiting."""
    ncpu = os.cpu_count() or 1
    print(f"burst CPU per claim, the client's start to its last claim's Ready (median round of "
          f"{ROUNDS}; mean of asb serve's over the rounds):")
    total = lambda r: sum(r["burst_cpu"]["server"]) + sum(r["burst_cpu"]["client"])  # noqa: E731
    for (net, who), all_rounds in res.items():
        rounds = [r for r in all_rounds if r.get("burst_cpu")]
        if net not in nets or not rounds:
            continue
        mid = sorted(rounds, key=total)[len(rounds) // 2]
        su, ss = (x / BURST for x in mid["burst_cpu"]["server"])
        cu, cs = (x / BURST for x in mid["burst_cpu"]["client"])
        mean = sum(sum(r["burst_cpu"]["server"]) for r in rounds) / len(rounds) / BURST
        print(f"  {net}, {who}: asb serve {su + ss:.2f} ms (user {su:.2f} + system {ss:.2f}; "
              f"mean {mean:.2f}), client {cu + cs:.2f} ms (user {cu:.2f} + system {cs:.2f}); all "
              f"{BURST} claims' {total(mid):.0f} ms spread over {ncpu} CPUs: "
              f"{total(mid) / ncpu:.0f} ms, that round's p99 {pct(mid['lat'], 99):.1f} ms")


def burst_rows():
    """Issue 16's burst and refill rows for --network none and bridge, with their baseline."""
    build_libasb_client("claim-bench-client.c", CLIENT, ("-ljansson", "-lpthread"))
    nets = [x for x in os.environ.get("BENCH_BURST_NETWORKS", "none,bridge").split(",")
            if x == "none" or shutil.which("nft")]
    base_name = "baseline build" if BASELINE else "baseline: claims serialised"
    res = {}
    for rnd in range(ROUNDS):
        for net in nets:
            for who in ("this build", base_name):
                build = BASELINE if (who != "this build" and BASELINE) else BUILD
                r = burst_round(build, net, serialised=(who != "this build" and not BASELINE),
                                floor=(who == "this build" and net == "none"))
                res.setdefault((net, who), []).append(r)
    print(f"\n{'burst of %d claims on a full pool of %d' % (BURST, BURST):44} {'network':>8} "
          f"{'p50 ms':>9} {'p99 ms':>9} {'refill/s':>9} {'cpu ms/sb':>14} {'machine':>12}  target")
    for net in nets:
        for who in ("this build", base_name):
            rounds = res[(net, who)]
            p50, p99, _ = burst_pcts(rounds)
            mid = median_round(rounds)
            # CPU per refilled sandbox (median round): asb serve + the runc processes it waited
            # for, and the whole machine's (with how busy it was)
            cpu = f"{mid['cpu'][0]:.1f}+{mid['cpu'][1]:.1f}"
            machine = f"{mid['machine']:.0f} ({mid['busy'] * 100:.0f}%)"
            print(f"{'  ' + who:44} {net:>8} {p50:9.2f} {p99:9.2f} "
                  f"{mid['refill']:9.1f} {cpu:>14} {machine:>12}  "
                  + (f"p99 < {TARGET_BURST_P99:.0f} ms, refill >= {TARGET_REFILL[net]:.0f}/s"
                     if who == "this build" else ""))
    floors = [r["floor"] for r in res.get(("none", "this build"), []) if "floor" in r]
    floor = sorted(floors)[len(floors) // 2] if floors else None
    if floor:
        print(f"{'  floor: runc + sandboxd alone, our bundle':44} {'none':>8} {'':>9} {'':>9} "
              f"{floor[0]:9.1f} {'':>14} {f'{floor[1]:.0f} ({floor[2] * 100:.0f}%)':>12}  "
              f"(bench_own_bundle.churn)")
    print("cpu ms/sb: CPU per refilled sandbox (one start + one teardown), asb serve + the runc "
          "processes it waited for (sandboxd and the container's processes not included); "
          "machine: all CPU of the machine per refilled sandbox (ms) and how busy it was")
    print(f"rounds: {ROUNDS}, the median round's figures (refill rate; the burst's p50 and p99 "
          f"each over its round's {BURST} claims)"
          + (f"; baseline build: {BASELINE}, rounds alternated" if BASELINE else ""))
    for net in nets:
        p50, p99, p99s = burst_pcts(res[(net, "this build")])
        print(f"  {net}: every round's burst p99: " + ", ".join(f"{x:.1f}" for x in p99s) + " ms")
    print_burst_cpu(nets, res)
    for net in nets:
        p50, p99, _ = burst_pcts(res[(net, "this build")])
        bp50, bp99, _ = burst_pcts(res[(net, base_name)])
        refill = median_round(res[(net, "this build")])["refill"]
        brefill = median_round(res[(net, base_name)])["refill"]
        if net == "none":
            row("burst-50", f"p50 {p50:.1f} / p99 {p99:.1f} ms",
                f"{base_name}: p50 {bp50:.1f} / p99 {bp99:.1f} ms",
                ok=p99 < TARGET_BURST_P99)
        row(f"refill-{net}", f"{refill:.1f} sandboxes/s", f"{base_name}: {brefill:.1f}/s"
            + (f"; runc + sandboxd alone (floor): {floor[0]:.1f}/s"
               if floor and net == "none" else ""),
            ok=refill >= TARGET_REFILL[net])


def main():
    if os.geteuid() != 0 or not os.path.exists(RUNC):
        print("skipped: needs root and runc")
        return 0
    if os.environ.get("BENCH_BURST_ONLY") != "1":
        single()
    burst_rows()
    print(f"load average during the run: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    return 0


def single():
    state = tempfile.mkdtemp(prefix="asb-bc-", dir="/tmp")
    proc, url, s = start_server(state)
    try:
        tpl = {"apiVersion": f"{EXT}/v1beta1", "kind": "SandboxTemplate", "metadata": {"name": "t"},
               "spec": {"podTemplate": {"spec": {"containers": [{"name": "main", "image": "host"}]}}}}
        post(s, url, "sandboxtemplates", tpl)
        for name, n in (("warm", POOL), ("cold", 0)):
            post(s, url, "sandboxwarmpools", {"apiVersion": f"{EXT}/v1beta1", "kind": "SandboxWarmPool",
                                              "metadata": {"name": name},
                                              "spec": {"replicas": n, "sandboxTemplateRef": {"name": "t"}}})
        t0 = time.perf_counter()
        bench_server.wait_pool_ready(url, s, "warm", POOL)
        refill = POOL / (time.perf_counter() - t0)
        warm = []
        for i in range(N):
            bench_server.wait_pool_ready(url, s, "warm", POOL)  # keep the pool warm: every claim is served warm
            warm.append(claim_to_ready(url, s, f"w{i}", "warm"))
        cold = [claim_to_ready(url, s, f"c{i}", "cold") for i in range(max(3, N // 5))]
        print(f"{'measurement':44} {'p50 ms':>9} {'p99 ms':>9}")
        print(f"{'warm claim -> Ready (watch), pool of %d' % POOL:44} {pct(warm, 50):9.2f} {pct(warm, 99):9.2f}")
        print(f"{'baseline: cold claim -> Ready (new runc)':44} {pct(cold, 50):9.2f} {pct(cold, 99):9.2f}")
        print(f"{'pool fill from empty (sandboxes/s)':44} {refill:9.1f}")
    finally:
        proc.terminate()
        proc.wait(30)
        bench_cleanup.cleanup_state(state)


if __name__ == "__main__":
    sys.exit(main())
