#!/usr/bin/python3
"""Issue 16's table in `make bench`. A bench that measures one of its rows calls row(), which
prints the row (value, the baseline measured in the same run, the target, met or not) on a line
of its own, marked so that bench/run.sh can collect it; at the end run.sh runs
`bench_issue16.py summary FILE...` over the benches' output, which prints the whole table in the
issue's order, a row that no bench printed included (as "not printed").

  from bench_issue16 import row
  row("exec-floor", "+0.14 ms", "floor 0.57 ms", ok=True)
"""
import sys

# (key, measure as the issue words it, target). Keys are what benches pass to row().
ROWS = [
    ("refill-none", "pool refill after a burst, --network none", ">= 30 sandboxes/s"),
    ("refill-bridge", "pool refill after a burst, bridge networking", ">= 15 sandboxes/s"),
    ("burst-50", "burst: 50 concurrent claims on a full pool of 50, claim -> Ready", "p99 < 50 ms"),
    ("claim-exec", "warm claim -> first Execute result (libasb)",
     "p50 <= floor + 3 ms, p99 <= floor + 10 ms"),
    ("cli-claim-exec", "the same through `asb claim` + `asb exec`", "p50 <= floor + 10 ms"),
    ("cli-start", "`asb` CLI process start (CPU)", "<= 3 ms"),
    ("cold-vs-runc", "cold Sandbox create -> Ready vs bare `runc run`", "<= 1.15x"),
    ("network-add", "networking's addition to create -> Ready", "<= 15 ms"),
    ("cold-exec", "cold create -> first Execute result", "<= create -> Ready + floor + 5 ms"),
    ("delete-200", "deleting 200 sandboxes until all containers are gone", "< 10 s"),
    ("router", "router vs direct, 50 connections", ">= 1/1.5 of direct, >= 25k req/s"),
    ("exec-floor", "Execute(`true`) minus spawn floor, paired median", "<= +0.3 ms"),
]
TARGETS = {k: (m, t) for k, m, t in ROWS}
MARK = "issue16-row"


def verdict(ok):
    return "-" if ok is None else "OK" if ok else "MISSED"


def row(key, value, baseline, ok=None):
    """Prints one row: `key` one of ROWS' keys, `value` what was measured (text with its unit),
    `baseline` the baseline of the same run (text), `ok` whether the target is met (None: not
    decidable from this run)."""
    measure, target = TARGETS[key]
    print(f"{MARK}\t{key}\t{measure}\t{value}\t{baseline}\t{target}\t{verdict(ok)}", flush=True)


def summary(paths):
    seen = {}
    for p in paths:
        with open(p, errors="replace") as f:
            for line in f:
                parts = line.rstrip("\n").split("\t")
                if len(parts) == 7 and parts[0] == MARK and parts[1] in TARGETS:
                    seen.setdefault(parts[1], []).append(parts[3:])
    lines = [("measure", "now", "baseline (same run)", "target", "met")]
    for key, measure, target in ROWS:
        for value, baseline, _, met in seen.get(key, [("not printed", "-", target, "-")]):
            lines.append((measure, value, baseline, target, met))
    w = [max(len(l[i]) for l in lines) for i in range(5)]
    print("issue 16 (A pool that keeps up): every row, as measured by this `make bench`")
    for l in lines:
        print("  ".join(l[i].ljust(w[i]) for i in range(5)).rstrip())
    missing = [k for k, _, _ in ROWS if k not in seen]
    if missing:
        print(f"rows no bench printed: {', '.join(missing)}")


if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] != "summary":
        sys.exit("usage: bench_issue16.py summary FILE...")
    summary(sys.argv[2:])
