#!/usr/bin/python3
"""Waits until the machine is quiet before the next bench starts (bench/run.sh): until the whole
machine's CPU was under BUSY_BELOW busy over one WINDOW_S, at most MAX_WAIT_S. The previous
bench's deferred work (the kernel freeing its loop devices, cgroups and mounts after its servers
stopped) would otherwise be measured as part of the next one. Prints how long it waited."""
import sys
import time

from bench_own_bundle import machine_cpu

BUSY_BELOW = 0.15
WINDOW_S = 1.0
MAX_WAIT_S = 30.0


def wait_quiet():
    """Seconds waited, and whether the machine got quiet within MAX_WAIT_S."""
    t0 = time.monotonic()
    while True:
        c0 = machine_cpu()
        time.sleep(WINDOW_S)
        c1 = machine_cpu()
        total = c1[0] - c0[0]
        busy = 1 - (c1[1] - c0[1]) / max(1, total)
        waited = time.monotonic() - t0
        if busy < BUSY_BELOW:
            return waited, True
        if waited >= MAX_WAIT_S:
            return waited, False


if __name__ == "__main__":
    waited, quiet = wait_quiet()
    print(f"(waited {waited:.1f} s for a quiet machine"
          + ("" if quiet else f"; still busy after {MAX_WAIT_S:.0f} s, went on") + ")")
    sys.exit(0)
